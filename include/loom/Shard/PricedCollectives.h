//===- PricedCollectives.h - Priced against emitted collectives -*- C++ -*-===//
//
// The property behind "one lowering truth" (DESIGN section 3): the
// collectives the cost model prices for one micro-batch's forward over the
// tp and ep axes (and over dp, the exchanges of embedding tables sharded
// there) are the ones the role graphs hold, group, kind, bytes on the
// wire and count, pipeline device by pipeline device. The evaluator's list
// comes in as plain data (PlanEvaluator::getPricedForwardCollectives, read by
// the schedule pass), so Shard stays below Planner.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SHARD_PRICEDCOLLECTIVES_H
#define LOOM_SHARD_PRICEDCOLLECTIVES_H

#include "loom/Cost/Collectives.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include <string>
#include <vector>

namespace loom {

struct ShardedProgram;

/// One collective of one micro-batch's forward: its kind and the bytes
/// collectiveTime is given (Collectives.h's convention per kind).
struct PricedCollective {
  CollectiveKind Kind = CollectiveKind::AllReduce;
  double Bytes = 0;
  /// The value it acts on, for the message.
  std::string On;
  /// Its group: "tp" (the propagated axis), "ep", or "dp" (the
  /// exchanges of embedding tables sharded over dp).
  std::string Group = "tp";
  /// Non-empty: a conversion a pipeline device makes once whatever number
  /// of its layers price it (a value several layers read), by this key.
  std::string Once;
};

/// Compares, per pipeline device, the collectives of groups "tp", "ep" and
/// "dp" (groups of one rank left out: they move nothing) in the role graph of
/// that device's tp rank 0 and ep rank 0 (forward programs: the schedule runs
/// the backward's as their duals) with those \p PricedOfLayer gives for the
/// layers of the device's chunks. One line per device that differs, naming the
/// role graph and what only one side has ("2 x tp allreduce of 512 B (on 'x',
/// 'y')"); empty when every device agrees. Bytes agree when they round to the
/// same integer.
std::vector<std::string> comparePricedCollectives(
    const ShardedProgram &SP,
    llvm::function_ref<std::vector<PricedCollective>(unsigned Layer)>
        PricedOfLayer);

} // namespace loom

#endif // LOOM_SHARD_PRICEDCOLLECTIVES_H
