//===- MemoryTest.cpp - Tests for the training memory model ---------------===//
//
// ZeRO stages, inference, micro-batches in flight under 1F1B and interleaved
// 1F1B, and a GPT-3 175B self-check against the closed forms of Narayanan
// et al. 2021 and Korthikanti et al. 2022. Expected values are worked out
// in the comments.
//
//===----------------------------------------------------------------------===//

#include "loom/Cost/Memory.h"

#include "gtest/gtest.h"

using namespace loom;

namespace {

/// 1e9 parameters, bf16 weights and gradients, fp32 Adam (12 B), DP = 8.
StageMemoryInputs billionParams(unsigned Zero) {
  StageMemoryInputs In;
  In.ParamCount = 1e9;
  In.DP = 8;
  In.ZeroStage = Zero;
  return In;
}

TEST(MemoryTest, ZeroStages) {
  // ZeRO-0: 2 + 2 + 12 = 16 bytes per parameter, 16e9 bytes.
  MemoryBreakdown Z0 = estimateStageMemory(billionParams(0));
  EXPECT_DOUBLE_EQ(2e9, Z0.Weights);
  EXPECT_DOUBLE_EQ(2e9, Z0.Gradients);
  EXPECT_DOUBLE_EQ(12e9, Z0.OptimizerStates);
  EXPECT_DOUBLE_EQ(16e9, Z0.total());
  // ZeRO-1: optimizer states / 8 = 1.5e9; total 2 + 2 + 1.5 = 5.5e9.
  MemoryBreakdown Z1 = estimateStageMemory(billionParams(1));
  EXPECT_DOUBLE_EQ(2e9, Z1.Weights);
  EXPECT_DOUBLE_EQ(2e9, Z1.Gradients);
  EXPECT_DOUBLE_EQ(1.5e9, Z1.OptimizerStates);
  EXPECT_DOUBLE_EQ(5.5e9, Z1.total());
  // ZeRO-2: gradients / 8 = 0.25e9 too; total 2 + 0.25 + 1.5 = 3.75e9.
  MemoryBreakdown Z2 = estimateStageMemory(billionParams(2));
  EXPECT_DOUBLE_EQ(2e9, Z2.Weights);
  EXPECT_DOUBLE_EQ(0.25e9, Z2.Gradients);
  EXPECT_DOUBLE_EQ(1.5e9, Z2.OptimizerStates);
  EXPECT_DOUBLE_EQ(3.75e9, Z2.total());
  // ZeRO-3: weights / 8 = 0.25e9 too; total 16e9 / 8 = 2e9.
  MemoryBreakdown Z3 = estimateStageMemory(billionParams(3));
  EXPECT_DOUBLE_EQ(0.25e9, Z3.Weights);
  EXPECT_DOUBLE_EQ(0.25e9, Z3.Gradients);
  EXPECT_DOUBLE_EQ(1.5e9, Z3.OptimizerStates);
  EXPECT_DOUBLE_EQ(2e9, Z3.total());
}

TEST(MemoryTest, ZeroWithoutDataParallelismPartitionsNothing) {
  StageMemoryInputs In = billionParams(3);
  In.DP = 1;
  EXPECT_DOUBLE_EQ(16e9, estimateStageMemory(In).total());
}

TEST(MemoryTest, ActivationsBuffersAndReserved) {
  StageMemoryInputs In = billionParams(0);
  In.ActivationBytesPerMicroBatch = 3e9;
  In.InFlightMicroBatches = 4;
  In.CommBufferBytes = 0.25e9;
  In.ReservedBytes = 2e9;
  In.KVCacheBytes = 7e9; // Ignored when training.
  MemoryBreakdown B = estimateStageMemory(In);
  // 3e9 * 4 = 12e9 of activations; total 16 + 12 + 0.25 + 2 = 30.25e9.
  EXPECT_DOUBLE_EQ(12e9, B.Activations);
  EXPECT_DOUBLE_EQ(0, B.KVCache);
  EXPECT_DOUBLE_EQ(0.25e9, B.CommBuffers);
  EXPECT_DOUBLE_EQ(2e9, B.Reserved);
  EXPECT_DOUBLE_EQ(30.25e9, B.total());
}

TEST(MemoryTest, InterleavedInFlightIsFractional) {
  StageMemoryInputs In;
  In.ActivationBytesPerMicroBatch = 2e9;
  // Stage 0 of P = 4, V = 2: 5.5 micro-batches (see InFlightInterleaved).
  In.InFlightMicroBatches = inFlightMicroBatches(0, 4, 8, 2);
  EXPECT_DOUBLE_EQ(11e9, estimateStageMemory(In).Activations);
}

TEST(MemoryTest, RecomputeIsTheCallersActivationFigure) {
  // Recompute changes what one micro-batch keeps, which the caller derives
  // from the graph (Korthikanti et al. 2022 §4): for a layer with s = 2048,
  // b = 1, h = 4096, a = 32, t = 1 and no recompute that is
  // sbh (34 + 5as/h) = 2048 * 4096 * (34 + 80) = 956301312 bytes; under
  // full recompute only the layer input, 2sbh = 16777216 bytes, stays per
  // micro-batch, and the one layer being recomputed needs its full
  // activations once (the workspace). 32 layers, 8 micro-batches in flight:
  StageMemoryInputs None;
  None.ActivationBytesPerMicroBatch = 32 * 956301312.0;
  None.InFlightMicroBatches = 8;
  StageMemoryInputs Full;
  Full.ActivationBytesPerMicroBatch = 32 * 16777216.0;
  Full.InFlightMicroBatches = 8;
  Full.ActivationWorkspaceBytes = 956301312.0;
  // None: 32 * 956301312 * 8 = 244813135872.
  EXPECT_DOUBLE_EQ(244813135872.0, estimateStageMemory(None).Activations);
  // Full: 32 * 16777216 * 8 + 956301312 = 4294967296 + 956301312
  //       = 5251268608.
  EXPECT_DOUBLE_EQ(5251268608.0, estimateStageMemory(Full).Activations);
}

TEST(MemoryTest, Inference) {
  StageMemoryInputs In = billionParams(0);
  In.Train = false;
  In.ActivationBytesPerMicroBatch = 3e9; // Nothing is kept for backward.
  In.InFlightMicroBatches = 1;
  In.KVCacheBytes = 7e9;
  In.ReservedBytes = 2e9;
  MemoryBreakdown B = estimateStageMemory(In);
  // Weights 2e9 + KV cache 7e9 + reserved 2e9 = 11e9.
  EXPECT_DOUBLE_EQ(2e9, B.Weights);
  EXPECT_DOUBLE_EQ(0, B.Gradients);
  EXPECT_DOUBLE_EQ(0, B.OptimizerStates);
  EXPECT_DOUBLE_EQ(0, B.Activations);
  EXPECT_DOUBLE_EQ(7e9, B.KVCache);
  EXPECT_DOUBLE_EQ(11e9, B.total());
  // The forward's working set, when the caller gives it, counts once.
  In.ActivationWorkspaceBytes = 0.5e9;
  EXPECT_DOUBLE_EQ(0.5e9, estimateStageMemory(In).Activations);
}

TEST(MemoryTest, InFlight1F1B) {
  // min(P - s, M) for P = 4.
  EXPECT_EQ(4.0, inFlightMicroBatches(0, 4, 8, 1));
  EXPECT_EQ(3.0, inFlightMicroBatches(1, 4, 8, 1));
  EXPECT_EQ(2.0, inFlightMicroBatches(2, 4, 8, 1));
  EXPECT_EQ(1.0, inFlightMicroBatches(3, 4, 8, 1));
  // Fewer micro-batches than stages: M bounds it.
  EXPECT_EQ(2.0, inFlightMicroBatches(0, 4, 2, 1));
  EXPECT_EQ(2.0, inFlightMicroBatches(2, 4, 2, 1));
  EXPECT_EQ(1.0, inFlightMicroBatches(3, 4, 2, 1));
  // No pipeline: one micro-batch at a time.
  EXPECT_EQ(1.0, inFlightMicroBatches(0, 1, 8, 1));
  // V = 0 is read as 1.
  EXPECT_EQ(4.0, inFlightMicroBatches(0, 4, 8, 0));
}

TEST(MemoryTest, InFlightInterleaved) {
  // P = 4, V = 2, M = 8: (2(P-s-1) + (V-1)P + 1) / V chunk activations.
  //   s = 0: (6 + 4 + 1) / 2 = 5.5 = P (1 + (P-1)/(PV)) = 4 * 11/8
  //   s = 1: (4 + 4 + 1) / 2 = 4.5
  //   s = 2: (2 + 4 + 1) / 2 = 3.5
  //   s = 3: (0 + 4 + 1) / 2 = 2.5
  EXPECT_DOUBLE_EQ(5.5, inFlightMicroBatches(0, 4, 8, 2));
  EXPECT_DOUBLE_EQ(4.0 * (1.0 + 3.0 / 8.0), inFlightMicroBatches(0, 4, 8, 2));
  EXPECT_DOUBLE_EQ(4.5, inFlightMicroBatches(1, 4, 8, 2));
  EXPECT_DOUBLE_EQ(3.5, inFlightMicroBatches(2, 4, 8, 2));
  EXPECT_DOUBLE_EQ(2.5, inFlightMicroBatches(3, 4, 8, 2));
  // P = 16, V = 4, M = 64, stage 0: P + (P-1)/V = 16 + 15/4 = 19.75
  //   = (30 + 48 + 1) / 4.
  EXPECT_DOUBLE_EQ(19.75, inFlightMicroBatches(0, 16, 64, 4));
  // Few micro-batches: all M * V chunk forwards fit in the warm-up, so all
  // M micro-batches are in flight: P = 4, V = 2, M = 2: min(11, 4) / 2 = 2.
  EXPECT_DOUBLE_EQ(2.0, inFlightMicroBatches(0, 4, 2, 2));
}

TEST(MemoryTest, Gpt3OnTp8Pp16SelfCheck) {
  // GPT-3 175B (h = 12288, a = 96, L = 96, s = 2048, vocab 51200) on
  // tp = 8, pp = 16 (6 layers per stage), dp = 8, micro-batch 1, no
  // recompute, ZeRO-1, bf16 weights and gradients, fp32 Adam.
  const double H = 12288, A = 96, L = 96, S = 2048, Vocab = 51200, T = 8,
               P = 16, B = 1;
  // Parameters on a stage-0 device (Narayanan et al. 2021 §5.1: 12 h^2 per
  // layer, ignoring biases and norms, plus the embedding on the first stage):
  //   12 * 12288^2 * 96 / (8 * 16) = 1358954496
  //   + 51200 * 12288 / 8           =   78643200
  //   = 1437597696
  double Params = 12 * H * H * L / (T * P) + Vocab * H / T;
  EXPECT_EQ(1437597696.0, Params);
  // Activations per layer per micro-batch, tensor parallel without
  // sequence parallelism (Korthikanti et al. 2022 §4.2.1, eq. 2):
  //   s b h (10 + 24/t + 5 a s / (h t))
  //   = 2048 * 12288 * (10 + 3 + 5 * 96 * 2048 / (12288 * 8))
  //   = 25165824 * (13 + 10) = 578813952 bytes
  double PerLayer = S * B * H * (10 + 24 / T + 5 * A * S / (H * T));
  EXPECT_EQ(578813952.0, PerLayer);

  StageMemoryInputs In;
  In.ParamCount = Params;
  In.DP = 8;
  In.ZeroStage = 1;
  In.ActivationBytesPerMicroBatch = 6 * PerLayer;
  // Global batch 1536 at dp = 8: M = 192 micro-batches; stage 0 of 16
  // holds min(16, 192) = 16 (= P, Narayanan et al. §2.2.1).
  In.InFlightMicroBatches = inFlightMicroBatches(0, 16, 192, 1);
  EXPECT_EQ(16.0, In.InFlightMicroBatches);
  MemoryBreakdown M = estimateStageMemory(In);
  // Weights    2 * 1437597696        =  2875195392
  // Gradients  2 * 1437597696        =  2875195392
  // Optimizer 12 * 1437597696 / 8    =  2156396544
  // Activations 6 * 578813952 * 16   = 55566139392
  // Total                            = 63472926720 bytes (59.11 GiB)
  EXPECT_EQ(2875195392.0, M.Weights);
  EXPECT_EQ(2875195392.0, M.Gradients);
  EXPECT_EQ(2156396544.0, M.OptimizerStates);
  EXPECT_EQ(55566139392.0, M.Activations);
  EXPECT_EQ(63472926720.0, M.total());
}

} // namespace
