//===- ParallelPlan.h - A parallelization plan and --plan parsing -*- C++ -*-===//
//
// The decisions of DESIGN §6 as plain data: degrees, micro-batching,
// recompute, ZeRO, and the stage boundaries. A PlanSpec is a partial plan
// (what `--plan` fixed); the search fills the rest, or, for cost queries, a
// spec with fixed degrees is completed by completePlan().
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_PARALLELPLAN_H
#define LOOM_PLAN_PARALLELPLAN_H

#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace loom {

enum class Recompute { None, Selective, Full };
llvm::StringRef getRecomputeName(Recompute R);

/// A complete plan.
///
/// Mesh and rank order (the emitter and the manifest must match it). The
/// global rank of the device at pipeline stage pp_idx, data-parallel index
/// dp_idx and tensor-parallel index tp_idx is
///
///   rank = (pp_idx * dp + dp_idx) * tp + tp_idx,
///   dp_idx = dp_outer * ep + ep_idx   (ep_idx < ep, dp_outer < dp / ep),
///
/// so TP is innermost (consecutive ranks, the fast domain), then EP as the
/// inner part of the DP axis, then the rest of DP, then PP outermost. The
/// groups of rank r: tp = the tp ranks with the same (pp_idx, dp_idx); ep =
/// stride tp, size ep; dp = stride tp, size dp (non-expert gradients);
/// dp_ep = stride tp * ep, size dp / ep (expert gradients: the ranks that
/// hold the same experts); pp = stride dp * tp, size pp.
///
/// Expert parallelism is Megatron's expert-data-parallel: ep ranks are
/// carved out of dp (ep divides dp), each holds NumExperts / ep experts of
/// every MoE layer, non-expert parameters are replicated over dp as usual.
struct ParallelPlan {
  unsigned DP = 1, TP = 1, PP = 1, EP = 1;
  /// Sequence parallelism alongside TP (Korthikanti et al. 2022).
  bool SP = false;
  unsigned MicroBatchSize = 1;
  unsigned NumMicroBatches = 1;
  /// Virtual pipeline stages per device (interleaved 1F1B when > 1).
  unsigned VirtualStages = 1;
  Recompute RC = Recompute::None;
  unsigned ZeroStage = 0;
  /// Number of layers (as detect-layers numbers them, embedding and head
  /// included) in each pipeline stage; empty means "split evenly".
  std::vector<unsigned> StageLayers;

  unsigned getNumDevices() const { return DP * TP * PP; }
  /// "tp=8,pp=4,dp=4,ep=1,sp=0,mb=1,nmb=64,vpp=1,recompute=none,zero=1".
  std::string str() const;
};

/// What `--plan` fixed; unset fields are free.
struct PlanSpec {
  llvm::Optional<unsigned> DP, TP, PP, EP, MicroBatchSize, NumMicroBatches,
      VirtualStages, ZeroStage;
  llvm::Optional<bool> SP;
  llvm::Optional<Recompute> RC;
  std::vector<unsigned> StageLayers;
};

/// Parses "tp=8,pp=4,dp=2,ep=1,sp=1,mb=2,nmb=16,vpp=2,recompute=selective,
/// zero=1,stages=13:13:14". Unknown keys, duplicate keys, non-positive
/// degrees and bad values are errors naming the key.
llvm::Expected<PlanSpec> parsePlanSpec(llvm::StringRef Text);

/// Completes \p Spec for \p Devices devices and global batch \p Batch:
/// dp defaults to Devices / (tp * pp), mb to 1, nmb to Batch / (dp * mb),
/// and the rest to their plain values. Checks dp*tp*pp == Devices, ep
/// divides dp (EP ranks are carved out of DP), and Batch divisible by
/// dp*mb; errors say which. Whether ep divides the model's experts is the
/// evaluator's check (it knows the model).
llvm::Expected<ParallelPlan> completePlan(const PlanSpec &Spec,
                                          uint64_t Devices, int64_t Batch);

} // namespace loom

#endif // LOOM_PLAN_PARALLELPLAN_H
