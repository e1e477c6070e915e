//===- CPEmission.cpp - Context-parallel plans the graphs carry -----------===//
#include "loom/Plan/CPEmission.h"

namespace loom {

CPEmitGap getCPEmitGap(const ParallelPlan &P, bool ShardedTables) {
  CPEmitGap G;
  if (P.CP <= 1)
    return G;
  using K = CPEmitGap::Key;
  // Hybrid's graphs would need Ulysses' all-to-alls before the ring's K/V
  // packing on each ring rank's graph.
  if (P.CPA == CPAlgo::Hybrid) {
    G.Why = "Loom emits the ring and the all-to-all over heads each alone; "
            "pin --plan cp_algo=ring or cp_algo=a2a to write graphs";
    G.Keys = K::Algo;
    return G;
  }
  if (P.TP <= 1)
    return G;
  // Beside tp the two axes are propagated one after the other: tp first
  // with sp off; cp first with sp on (Ulysses' heads moving in tp's head
  // groups).
  if (P.EP > 1) {
    G.Why = "cp beside tp is emitted at ep=1 only";
    G.Keys = K::TP | K::CP | K::EP;
  } else if (ShardedTables) {
    G.Why = "cp beside tp is emitted without sharded embedding tables";
    G.Keys = K::TP | K::CP;
  }
  return G;
}

bool pinsAllKeys(const PlanSpec &F, const CPEmitGap &G) {
  using K = CPEmitGap::Key;
  auto Pinned = [&](unsigned Bit, bool Has) { return !(G.Keys & Bit) || Has; };
  return Pinned(K::TP, F.TP.hasValue()) && Pinned(K::EP, F.EP.hasValue()) &&
         Pinned(K::CP, F.CP.hasValue()) && Pinned(K::Algo, F.CPA.hasValue());
}

} // namespace loom
