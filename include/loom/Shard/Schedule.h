//===- Schedule.h - The per-rank program of one step ------------*- C++ -*-===//
#ifndef LOOM_SHARD_SCHEDULE_H
#define LOOM_SHARD_SCHEDULE_H

#include "loom/Cost/Collectives.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/PredictedCost.h"
#include "loom/Shard/Sharding.h"
#include <map>

namespace loom {

struct ScheduleContext {
  const HardwareModel *HW = nullptr;
  /// How the plan's tp, ep and dp groups and a transfer between two
  /// neighbouring stages spread over the topology levels, as the evaluator
  /// priced them (the caller asks PlanEvaluator::getGroupShape for "tp",
  /// "ep", "dp", "pp" and "cp"): the schedule prices its collectives and
  /// transfers with them and names their levels.
  GroupShape TPGroup, EPGroup, DPGroup, PPGroup, CPGroup;
  bool Train = true;
  /// The DP gradient bucket size (the gradient width is the plan's).
  double BucketBytes = 256.0 * (1 << 20);
};

/// The bytes hccl node \p N moves as the schedule prices it (collectiveTime's
/// convention, loom/Cost/Collectives.h): an all-gather's output, any other
/// op's first input (a receive's output); a float tensor counted in
/// \p FloatType where one is set (the precision recipe's,
/// ShardingResult::CommFloatType); a dim that depends on the data at its
/// size in \p Expected (ShardingResult::ExpectedShapes), by value name.
double getHcomWireBytes(
    const Node &N, DataType FloatType,
    const std::map<std::string, std::vector<int64_t>> &Expected = {});

/// Fills SP.Programs (one per distinct role program), SP.RoleProgram and
/// ScheduleStepS from the role graphs and the plan's predicted per-stage
/// costs.
llvm::Error buildSchedule(ShardedProgram &SP, const PlanCost &Cost,
                          const ScheduleContext &Ctx);

} // namespace loom

#endif
