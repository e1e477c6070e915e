//===- Pipeline.h - Critical path of pipeline schedules ---------*- C++ -*-===//
//
// Simulates one training step of 1F1B (PipeDream-Flush) or interleaved 1F1B
// (Narayanan et al. 2021) with per-stage forward and backward times that may
// differ (uneven stages), and point-to-point transfer times between stages.
// The step time is the makespan of the dependency graph; the bubble is what
// the busiest stage spends idle.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COST_PIPELINE_H
#define LOOM_COST_PIPELINE_H

#include "llvm/ADT/ArrayRef.h"
#include <vector>

namespace loom {

struct PipelineTimes {
  /// Per pipeline stage (device), per micro-batch: forward and backward
  /// time of all its virtual chunks together.
  std::vector<double> Forward, Backward;
  /// Send/Recv time across the boundary after stage i (size PP - 1, or PP
  /// when interleaving wraps from the last device to the first).
  std::vector<double> Transfer;
  unsigned NumMicroBatches = 1;
  /// Virtual stages per device (1 = plain 1F1B).
  unsigned VirtualStages = 1;
  /// Forward only (inference): no backward passes.
  bool ForwardOnly = false;
  /// Micro-batches simulated one by one at most (0: no bound). A longer
  /// step is extrapolated at the steady state's measured time per
  /// micro-batch (an estimate, see simulatePipeline), so the cost of
  /// simulating stays bounded for any global batch.
  unsigned MaxSimulatedMicroBatches = 0;
};

struct PipelineResult {
  double StepTime = 0;
  /// Idle time of each stage within StepTime.
  std::vector<double> Idle;
  /// When each stage (device) ends its last operation; StepTime is the
  /// latest. In training the first stage ends last (its backward of the
  /// last micro-batch closes the step); later stages end earlier, and
  /// their gradient sync and optimizer may run in that time.
  std::vector<double> Finish;
  /// Idle / StepTime of the busiest stage; (P-1)/(M+P-1) for even stages.
  double BubbleFraction = 0;
};

PipelineResult simulatePipeline(const PipelineTimes &T);

/// One operation of a pipeline schedule on one device: the forward or
/// backward pass of micro-batch MicroBatch through the device's virtual
/// chunk Chunk (virtual stage Chunk * P + device).
struct PipelineOp {
  bool Backward;
  unsigned Chunk;
  unsigned MicroBatch;
};

/// The one pipeline order: per device (of \p P), its operations for \p M
/// micro-batches and \p V chunks per device, in the order it runs them --
/// Megatron-LM's 1F1B or interleaved 1F1B, or, should that order be unable
/// to make progress, all forwards then all backwards (see Pipeline.cpp).
/// simulatePipeline runs this order; so does the schedule pass.
std::vector<std::vector<PipelineOp>>
getPipelineOrder(unsigned P, unsigned M, unsigned V, bool ForwardOnly);

} // namespace loom

#endif // LOOM_COST_PIPELINE_H
