//===- IdleDevices.cpp - Plans that leave devices idle --------------------===//
#include "loom/Plan/IdleDevices.h"
#include "loom/Plan/BatchSplit.h"
#include "loom/Support/Divisors.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/Twine.h"
#include <set>

using namespace llvm;

namespace loom {

std::vector<MeshDegrees>
enumerateMeshDegrees(const DegreeSpace &S, const PlanSpec &F, bool AllowIdle) {
  std::vector<MeshDegrees> Out;
  std::set<MeshDegrees> Seen;
  uint64_t N = std::max<uint64_t>(1, S.Devices);
  uint64_t Batch = std::max<int64_t>(1, S.Batch);
  auto TPOk = [&](uint64_t TP) {
    return TP <= S.TPLimit && dividesOneOf(S.TPSplitSizes, TP) &&
           !(F.TP && *F.TP != TP);
  };
  auto PPOk = [&](uint64_t PP) {
    return PP <= S.NumLayers && !(F.PP && *F.PP != PP) &&
           (F.StageLayers.empty() || F.StageLayers.size() == PP);
  };
  std::set<uint64_t> FullPPs;
  for (uint64_t TP : getDivisors(N)) {
    if (!TPOk(TP))
      continue;
    for (uint64_t PP : getDivisors(N / TP)) {
      if (!PPOk(PP))
        continue;
      uint64_t DP = N / (TP * PP);
      if ((F.DP && *F.DP != DP) || Batch % DP ||
          !isBatchSplitEmittable(!S.StaticBatch, DP, 1))
        continue;
      FullPPs.insert(PP);
      Out.push_back({TP, PP, DP});
      Seen.insert(Out.back());
    }
  }
  if (!AllowIdle)
    return Out;
  // Pipeline depths for plans with idle devices: those that split the
  // blocks evenly (Megatron-LM asserts num_layers % pp == 0 for its
  // schedule), the full cluster's, and a fixed one.
  std::set<uint64_t> PPs(FullPPs);
  if (S.NumBlocks)
    for (uint64_t PP : getDivisors(S.NumBlocks))
      PPs.insert(PP);
  PPs.insert(1);
  if (F.PP)
    PPs.insert(*F.PP);
  if (!F.StageLayers.empty())
    PPs.insert(F.StageLayers.size());
  for (uint64_t TP : getDivisors(std::max<uint64_t>(1, S.TPLimit))) {
    if (TP > N || !TPOk(TP))
      continue;
    for (uint64_t PP : PPs) {
      if (!PPOk(PP) || TP * PP > N)
        continue;
      uint64_t Max = N / (TP * PP), DP = 0;
      auto DPOk = [&](uint64_t D) {
        return D <= Max && Batch % D == 0 &&
               isBatchSplitEmittable(!S.StaticBatch, D, 1);
      };
      if (F.DP) {
        DP = DPOk(*F.DP) ? *F.DP : 0;
      } else {
        for (uint64_t D = Max; D >= 1 && !DP; --D)
          if (DPOk(D))
            DP = D;
      }
      if (!DP || DP * TP * PP == N)
        continue;
      MeshDegrees M{TP, PP, DP};
      if (Seen.insert(M).second)
        Out.push_back(M);
    }
  }
  return Out;
}

Optional<int64_t> suggestGlobalBatch(const ParallelPlan &P, uint64_t Devices,
                                     int64_t Batch) {
  uint64_t TPPP = (uint64_t)P.TP * P.CP * P.PP, Max = Devices / TPPP;
  if (P.DP >= Max || Batch <= 0)
    return None;
  int64_t Unit = (int64_t)(Max * P.MicroBatchSize);
  int64_t Down = Batch / Unit * Unit, Up = Down + Unit;
  if (Down == 0 || Up - Batch <= Batch - Down)
    return Up;
  return Down;
}

} // namespace loom
