//===- Memory.h - Per-device training and inference memory ------*- C++ -*-===//
//
// Weights, gradients and mixed-precision Adam states (16 bytes per
// parameter before ZeRO; Rajbhandari et al. 2020), activations of the
// micro-batches in flight on a pipeline stage under 1F1B and interleaved
// schedules (Narayanan et al. 2021), recompute policies (Korthikanti et al.
// 2022), communication buffers and reserved HBM; KV cache for inference.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COST_MEMORY_H
#define LOOM_COST_MEMORY_H

#include <cstdint>

namespace loom {

struct MemoryBreakdown {
  double Weights = 0, Gradients = 0, OptimizerStates = 0, Activations = 0,
         KVCache = 0, CommBuffers = 0, Reserved = 0;
  /// Shards of sharded embedding tables kept in HBM, with their training
  /// state (loom/Planner/Embedding.h).
  double Embeddings = 0;
  double total() const {
    return Weights + Gradients + OptimizerStates + Activations + KVCache +
           CommBuffers + Reserved + Embeddings;
  }
};

struct StageMemoryInputs {
  bool Train = true;
  /// Parameters held by one device of this stage after TP/EP sharding,
  /// before ZeRO partitioning.
  double ParamCount = 0;
  /// Bytes per parameter of the weights as computed (2 for bf16/fp16).
  double WeightBytesPerParam = 2;
  /// Gradient bytes per parameter (2 for bf16 gradients, 4 for fp32).
  double GradBytesPerParam = 2;
  /// Optimizer bytes per parameter: fp32 master + Adam m and v = 12.
  double OptimizerBytesPerParam = 12;
  /// Activation bytes one micro-batch leaves on one device of this stage
  /// for backward, already reflecting TP/SP sharding and recompute.
  double ActivationBytesPerMicroBatch = 0;
  /// Micro-batches whose activations are alive at once on this stage.
  /// A count of whole micro-batches for 1F1B; interleaved schedules give
  /// fractions (see inFlightMicroBatches).
  double InFlightMicroBatches = 1;
  /// Activation bytes alive only while one micro-batch is being computed,
  /// counted once rather than per micro-batch in flight: the layer being
  /// recomputed under full recompute, or an inference forward's working
  /// set. 0 when the caller folds it elsewhere.
  double ActivationWorkspaceBytes = 0;
  unsigned DP = 1;
  unsigned ZeroStage = 0;
  double CommBufferBytes = 0;
  double ReservedBytes = 0;
  /// Inference: KV cache bytes for the batch and sequence on this device.
  double KVCacheBytes = 0;
};

MemoryBreakdown estimateStageMemory(const StageMemoryInputs &In);

/// Micro-batches in flight on stage \p Stage (0-based) of \p PP stages with
/// \p M micro-batches and \p V virtual stages per device: min(PP - Stage, M)
/// for 1F1B; interleaving keeps more alive on early stages.
double inFlightMicroBatches(unsigned Stage, unsigned PP, unsigned M,
                            unsigned V);

} // namespace loom

#endif // LOOM_COST_MEMORY_H
