//===- Memory.cpp - Per-device training and inference memory --------------===//
//
// Model states follow ZeRO (Rajbhandari et al. 2020, "ZeRO: Memory
// Optimizations Toward Training Trillion Parameter Models", §5.1-5.3):
// stage 1 partitions the optimizer states over the DP group, stage 2 also
// the gradients, stage 3 also the weights. With bf16 weights and gradients
// and fp32 master weights plus Adam moments that is 2 + 2 + 12 = 16 bytes
// per parameter before partitioning (ZeRO §3.1).
//
// Activations: the caller gives the bytes one micro-batch leaves behind on
// this device for its backward pass, already reduced by TP/SP sharding and
// by the recompute policy (Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models", §4: full recompute keeps only
// each layer's input, 2sbh bytes; selective drops the attention score
// tensors). Recompute changes *what* one micro-batch keeps, which depends
// on the graph, so it is the caller's to compute; this file only counts how
// many micro-batches keep it at once. The working set of the layer being
// recomputed exists once, not per micro-batch in flight; the caller passes
// it as ActivationWorkspaceBytes.
//
//===----------------------------------------------------------------------===//

#include "loom/Cost/Memory.h"

#include <algorithm>
#include <cassert>

namespace loom {

MemoryBreakdown estimateStageMemory(const StageMemoryInputs &In) {
  MemoryBreakdown B;
  double DP = std::max(1u, In.DP);
  auto partitioned = [&](double Bytes, unsigned FromStage) {
    return In.ZeroStage >= FromStage ? Bytes / DP : Bytes;
  };
  B.Weights = partitioned(In.ParamCount * In.WeightBytesPerParam, 3);
  if (In.Train) {
    B.Gradients = partitioned(In.ParamCount * In.GradBytesPerParam, 2);
    B.OptimizerStates =
        partitioned(In.ParamCount * In.OptimizerBytesPerParam, 1);
    B.Activations = In.ActivationBytesPerMicroBatch * In.InFlightMicroBatches +
                    In.ActivationWorkspaceBytes;
  } else {
    // Inference keeps nothing for a backward pass; what grows with the
    // batch and the sequence is the KV cache.
    B.Activations = In.ActivationWorkspaceBytes;
    B.KVCache = In.KVCacheBytes;
  }
  B.CommBuffers = In.CommBufferBytes;
  B.Reserved = In.ReservedBytes;
  return B;
}

/// Number of forward passes (of one model chunk each) a device runs before
/// its first backward pass, as Megatron-LM schedules them. Plain 1F1B
/// (PipeDream-Flush; Narayanan et al. 2021, "Efficient Large-Scale Language
/// Model Training on GPU Clusters Using Megatron-LM", §2.2.1): stage s of P
/// runs P - s - 1 forwards before its first 1F1B pair. Interleaved 1F1B
/// (§2.2.2) with V chunks per device: 2(P - s - 1) + (V - 1) P, the warm-up
/// of Megatron-LM's forward_backward_pipelining_with_interleaving, which
/// keeps the devices busy while the first micro-batch's backward travels
/// back through all P * V virtual stages. Keep in step with
/// cost_models/pipeline/Pipeline.cpp.
static unsigned warmupChunks(unsigned Stage, unsigned PP, unsigned V) {
  unsigned Later = PP - Stage - 1;
  if (V <= 1)
    return Later;
  return 2 * Later + (V - 1) * PP;
}

double inFlightMicroBatches(unsigned Stage, unsigned PP, unsigned M,
                            unsigned V) {
  // Inference keeps no activations between micro-batches: callers pass 1
  // (this function has no notion of training; estimateStageMemory ignores
  // the count when Train is false anyway).
  PP = std::max(1u, PP);
  V = std::max(1u, V);
  assert(Stage < PP && "stage outside the pipeline");
  Stage = std::min(Stage, PP - 1);
  if (M == 0)
    return 0;
  if (V == 1)
    return std::min(PP - Stage, M); // warm-up forwards + the first 1F1B one.
  // Interleaved: each chunk holds 1/V of the device's layers, so one
  // chunk's activations are 1/V of a micro-batch's on this device. In
  // 1F1B's steady state every forward is followed by a backward, so the
  // peak is the warm-up plus the first steady forward, bounded by all M * V
  // chunk forwards of the step:
  //
  //   inFlight(s) = min(2(P - s - 1) + (V - 1) P + 1, M V) / V.
  //
  // On the first stage that is (P (V + 1) - 1) / V = P (1 + (P - 1)/(P V)),
  // Megatron-LM's figure for the interleaved schedule (Narayanan et al.
  // 2021 §2.2.2; Korthikanti et al. 2022 §4.2.3). At V = 1 Megatron-LM runs
  // the plain 1F1B schedule, whose warm-up has no factor 2, which is why
  // V = 1 is the case above and not this formula.
  unsigned Chunks = std::min(warmupChunks(Stage, PP, V) + 1, M * V);
  return double(Chunks) / double(V);
}

} // namespace loom
