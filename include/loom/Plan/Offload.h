//===- Offload.h - The offload= plan key and its search space ---*- C++ -*-===//
//
// `--plan offload=opt:host,param:ssd,act:host` places the kinds of training
// state in HBM, host DRAM or SSD (cost_models/memory/Offload.cpp costs
// it). Kinds: opt (fp32 master weights + Adam moments), grad, param, act;
// tiers: hbm, host, ssd (grad and act: hbm or host). "none" keeps all in
// HBM.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_OFFLOAD_H
#define LOOM_PLAN_OFFLOAD_H

#include "loom/Cost/Offload.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <vector>

namespace loom {

struct HardwareModel;

/// Parses the value of offload= ("none" or KIND:TIER joined by ','). Errors
/// name the item and say what is allowed.
llvm::Expected<OffloadTiers> parseOffloadTiers(llvm::StringRef Text);

/// The placements the search tries, "none" first, then in a fixed order:
/// opt in hbm/host/ssd x grad in hbm/host x param in hbm/host/ssd x act in
/// hbm/host, skipping tiers \p HW has no memory level for and opt off HBM
/// when the host has no update_bandwidth. Training only.
std::vector<OffloadTiers> getSearchedOffloads(const HardwareModel &HW);

/// Why \p HW cannot hold what \p T offloads, or success: the tier's memory
/// level is missing, or opt off HBM without a host update_bandwidth.
/// \p Train false: only param may leave HBM.
llvm::Error checkOffloadHardware(const OffloadTiers &T,
                                 const HardwareModel &HW, bool Train);

struct StageCost;

/// Places stage \p SC's state as \p T says: SC.Memory becomes what stays
/// in HBM, SC.Offload the tiers and transfers, SC.OptimizerS the optimizer
/// phase. \p In carries the stage's figures (InHBM, bandwidths and
/// HBMOptimizerS are filled here from \p SC and \p HW).
void applyOffload(StageCost &SC, OffloadInputs In, const OffloadTiers &T,
                  const HardwareModel &HW);

struct PlanCost;
/// \p PC, costed without offload and without simulation (evaluateStages),
/// re-placed as \p T says: stages, maxima per tier and FitsMemory as
/// evaluateStages would give for the plan with offload \p T. What the
/// search uses to cost every placement of one plan from one evaluation.
void applyOffloadToPlan(PlanCost &PC, const OffloadTiers &T,
                        const HardwareModel &HW);

} // namespace loom

#endif // LOOM_PLAN_OFFLOAD_H
