//===- OffloadCost.h - A plan's stages re-placed by offload= ---*- C++ -*-===//
#ifndef LOOM_PLANNER_OFFLOADCOST_H
#define LOOM_PLANNER_OFFLOADCOST_H

#include "loom/Plan/Offload.h"
#include "loom/Planner/PlanCost.h"

namespace loom {

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

/// Sets \p PC's largest use of HBM, host and SSD over its stages and
/// whether the plan fits (FitsMemory) from its stages as they stand.
void setMemoryMaxima(PlanCost &PC);

/// Whether \p PC (its FitsMemory current) re-placed as \p T fits:
/// applyOffloadToPlan's FitsMemory, without copying or changing \p PC (most
/// placements the search costs are over memory; a plan's stages are ~1 KB
/// each), and without costing the transfers.
bool fitsWithOffload(const PlanCost &PC, const OffloadTiers &T);

} // namespace loom

#endif // LOOM_PLANNER_OFFLOADCOST_H
