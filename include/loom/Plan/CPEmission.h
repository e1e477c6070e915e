//===- CPEmission.h - Context-parallel plans the graphs carry ---*- C++ -*-===//
//
// Loom's role graphs carry cp_algo=ring and cp_algo=a2a alone and beside tp
// with sp on or off (lib/Shard/ComposeContextParallel.cpp), not every
// composition: hybrid cp, and cp beside tp with ep > 1 or with sharded
// embedding tables, are costed (and exported where a framework runs them)
// but have no graphs. One rule, read by the shard pass (which refuses with
// its reason) and by the search under Loom's own runtime (the profile
// "none": every plan Loom can emit runs, examples/frameworks/none.yaml),
// which ranks no such plan unless --plan pins what makes it one -- as
// BatchSplit.h does for static batch dims.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_CPEMISSION_H
#define LOOM_PLAN_CPEMISSION_H

#include "loom/Plan/ParallelPlan.h"

namespace loom {

/// Why a plan's context parallelism has no graphs, and the --plan keys that
/// make it so.
struct CPEmitGap {
  enum Key : unsigned { TP = 1, EP = 2, CP = 4, Algo = 8 };
  /// Why ("" when the graphs carry the plan).
  const char *Why = "";
  /// The keys (Key bits): a --plan that pins all of them asked for it.
  unsigned Keys = 0;
  explicit operator bool() const { return *Why; }
};

/// The gap of \p P's context parallelism; \p ShardedTables: the plan shards
/// an embedding table over dp (lib/Planner/Embedding.cpp).
CPEmitGap getCPEmitGap(const ParallelPlan &P, bool ShardedTables);

/// \p F pins every key that makes \p G.
bool pinsAllKeys(const PlanSpec &F, const CPEmitGap &G);

} // namespace loom

#endif // LOOM_PLAN_CPEMISSION_H
