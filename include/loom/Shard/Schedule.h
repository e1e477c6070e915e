//===- Schedule.h - The per-rank program of one step ------------*- C++ -*-===//
#ifndef LOOM_SHARD_SCHEDULE_H
#define LOOM_SHARD_SCHEDULE_H

#include "loom/Hardware/HardwareModel.h"
#include "loom/Planner/PlanCost.h"
#include "loom/Shard/Sharding.h"

namespace loom {

struct ScheduleContext {
  const HardwareModel *HW = nullptr;
  /// For the mapping of groups onto topology levels.
  const PlanEvaluator *Eval = nullptr;
  bool Train = true;
  /// The DP gradient bucket size (the gradient width is the plan's).
  double BucketBytes = 256.0 * (1 << 20);
};

/// Fills SP.Programs (one per distinct role program), SP.RoleProgram and
/// ScheduleStepS from the role graphs and the plan's predicted per-stage
/// costs.
llvm::Error buildSchedule(ShardedProgram &SP, const PlanCost &Cost,
                          const ScheduleContext &Ctx);

} // namespace loom

#endif
