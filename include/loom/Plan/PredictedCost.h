//===- PredictedCost.h - A plan's predicted cost, stage by stage -*- C++
//-*-===//
//
// The evaluator's result as plain data (DESIGN §6): per pipeline stage the
// compute, communication, memory and offload of one device, and for the
// plan the step time, throughput, MFU and memory maxima. The planner
// computes it (loom/Planner/PlanCost.h, PlanEvaluator); the schedule, the
// output checker and the manifest of the sharder (loom/Shard) and the
// reports read it, so it lives in Plan, below all of them.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_PREDICTEDCOST_H
#define LOOM_PLAN_PREDICTEDCOST_H

#include "loom/Cost/Memory.h"
#include "loom/Cost/Offload.h"
#include "loom/Plan/EmbeddingPlan.h"
#include "loom/Plan/ParallelPlan.h"
#include "llvm/ADT/StringRef.h"
#include <vector>

namespace loom {

struct StageCost {
  unsigned FirstLayer = 0, NumLayers = 0;
  /// Per micro-batch, one device: compute of forward and backward
  /// (backward includes recomputation).
  double ForwardS = 0, BackwardS = 0;
  /// Per micro-batch: TP collectives (forward + backward), not overlapped.
  double TPCommS = 0;
  /// Per micro-batch: EP dispatch and combine (forward + backward), not
  /// overlapped.
  double EPCommS = 0;
  /// Per micro-batch: context parallelism's attention traffic (K/V ring
  /// sends or all-to-alls over heads; ContextParallel.h), forward +
  /// backward: the part not hidden behind attention, and all of it.
  double CPCommS = 0, CPCommTotalS = 0;
  /// Per micro-batch: the TP, EP and exposed CP communication of the
  /// forward and of the backward (TPCommS + EPCommS + CPCommS split as the
  /// pipeline sees it).
  double ForwardCommS = 0, BackwardCommS = 0;
  /// One pipeline send each way (forward activations, backward gradient):
  /// per micro-batch at vpp = 1; interleaved, each chunk's (the last
  /// stage's is its wrap send to stage 0), made vpp times per micro-batch.
  double P2PS = 0;
  /// What the pipeline simulation takes of this stage, per micro-batch:
  /// forward and backward with their TP/EP communication (backward before
  /// any exposed offload transfer), and the send to the next stage.
  double PipeForwardS = 0, PipeBackwardS = 0, PipeSendS = 0;
  /// Per micro-batch: the TP-sharded weight GEMMs' part of ForwardS and
  /// BackwardS (what tp overlap hides the TP collectives behind).
  double GemmFwdS = 0, GemmBwdS = 0;
  /// Per micro-batch: what the plan's overlaps add to the forward and the
  /// backward as the pipeline runs them (loom/Cost/Overlap.h): tp overlap's
  /// hidden collectives (negative) and held compute, pp overlap's held
  /// compute, or, with pp_overlap=off, the sends waited for (all of a
  /// micro-batch's chunk sends when interleaved).
  double OverlapFwdS = 0, OverlapBwdS = 0;
  /// The tp overlap's part of OverlapFwdS + OverlapBwdS (what it changes
  /// of the TP collectives' TPCommS).
  double TPOverlapS = 0;
  /// The delay between this stage's forward end and the next stage's
  /// receipt (the send when it is overlapped; 0 when the forward waited
  /// for it); on the last stage of an interleaved pipeline, the wrap to
  /// stage 0.
  double SendLagS = 0;
  /// Whole step: compute, exposed communication, idle in the pipeline.
  double ComputeS = 0, CommExposedS = 0, BubbleS = 0;
  /// When the stage's last forward or backward ends in the pipeline
  /// simulation; its DP sync's exposed part and its optimizer follow.
  double PipelineEndS = 0;
  /// DP gradient synchronization (non-expert gradients over dp, expert
  /// gradients over dp/ep) and its part not hidden by backward.
  double DPSyncS = 0, DPExposedS = 0;
  /// Parameters one device of the stage holds after TP/EP sharding (before
  /// ZeRO), expert parameters among them.
  double ParamCount = 0, ExpertParamCount = 0;
  /// The optimizer step; with offload, the whole optimizer phase
  /// (OffloadCost::TailS).
  double OptimizerS = 0;
  /// HBM use per device (what stays in HBM under the plan's offload).
  MemoryBreakdown Memory;
  double MemoryBytes = 0;
  /// The plan's offload on this stage (all zero without): bytes in host
  /// DRAM and SSD per device, transfers, the exposed part.
  OffloadCost Offload;
  /// What the offload model needs of this stage (filled for every plan, so
  /// a plan without offload can be re-placed: applyOffloadToPlan).
  OffloadInputs OffloadIn;
  /// Sharded embedding tables on this stage: bytes per device in host DRAM
  /// and on the SSD (those in HBM are in Memory.Embeddings).
  double EmbHostBytes = 0, EmbSSDBytes = 0;
};

struct PlanCost {
  ParallelPlan Plan;
  double StepTimeS = 0, MFU = 0, BubbleFraction = 0;
  /// Throughput in the model's unit: tokens/s when a sequence length is
  /// bound (EvaluatorOptions::Seq > 0, loom/Planner/PlanCost.h), samples/s
  /// otherwise.
  double Throughput = 0;
  bool PerToken = false;
  /// "tokens/s" or "samples/s"; the JSON key "tokens_per_s" or
  /// "samples_per_s".
  llvm::StringRef getThroughputUnit() const {
    return PerToken ? "tokens/s" : "samples/s";
  }
  llvm::StringRef getThroughputKey() const {
    return PerToken ? "tokens_per_s" : "samples_per_s";
  }
  std::vector<StageCost> Stages;
  /// Layers per pipeline chunk (loom/Plan/StageSplit.h getChunkLayers):
  /// chunk c on stage c % pp. Empty where the plan was not costed by
  /// stages (each stage then holds its layers in one run).
  std::vector<unsigned> ChunkLayers;
  double MaxMemoryBytes = 0;
  /// Usable HBM per device (capacity - reserved).
  double HBMBytes = 0;
  /// Offload: the most host DRAM and SSD a device of any stage uses, and
  /// the usable capacity of each (0 when the YAML has no such level).
  double MaxHostBytes = 0, MaxSSDBytes = 0, HostCapacity = 0, SSDCapacity = 0;
  /// Every tier within its capacity.
  bool FitsMemory = true;
  /// The MoE load imbalance applied to the most loaded ep rank (routed,
  /// stacked experts at ep > 1); 1 when none applies.
  double MoEImbalance = 1;
  /// FLOPs of one step of the model (forward + backward, no recompute).
  double ModelFlops = 0;
  /// The sharded embedding tables (EmbeddingPlan.h); empty when none.
  EmbeddingCost Embeddings;
};

} // namespace loom

#endif // LOOM_PLAN_PREDICTEDCOST_H
