//===- IdleDevices.h - Plans that leave devices idle ------------*- C++ -*-===//
//
// DESIGN §6: dp*tp*pp = the devices used, and a plan may leave devices idle
// when the batch cannot fill them (a global batch of 2 on 128 NPUs), when
// tp*pp does not divide the device count (tp=8, pp=3 on 128: 5 replicas on
// 120), or when that is simply faster. The search (SearchEnumeration.cpp) takes
// its (tp, pp, dp) from here; the reports say how many devices are idle and
// why, and which nearby global batch would fill them.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_IDLEDEVICES_H
#define LOOM_PLAN_IDLEDEVICES_H

#include "loom/Plan/ParallelPlan.h"
#include "llvm/ADT/Optional.h"
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace loom {

struct PlanCost;

struct MeshDegrees {
  uint64_t TP = 1, PP = 1, DP = 1;
  bool operator<(const MeshDegrees &O) const {
    return std::tie(TP, PP, DP) < std::tie(O.TP, O.PP, O.DP);
  }
};

/// What enumerateMeshDegrees needs of the space.
struct DegreeSpace {
  uint64_t Devices = 1;
  int64_t Batch = 1;
  /// pp <= NumLayers; idle candidates take pp among the divisors of
  /// NumBlocks (the even split Megatron-LM requires) and the pp the space
  /// already has.
  unsigned NumLayers = 1, NumBlocks = 0;
  uint64_t TPLimit = 1;
  /// tp must divide one of them (none: no bound): the dims the sharding
  /// rules split (loom/Planner/Search.h, TPDivisibility).
  std::vector<uint64_t> TPSplitSizes;
  /// The model's batch dim is static: only dp = 1 (and one micro-batch)
  /// can be emitted (BatchSplit.h).
  bool StaticBatch = false;
};

/// The (tp, pp, dp) the search tries, in a fixed order: every dp*tp*pp =
/// Devices with tp | Devices, pp | Devices / tp (the full cluster); then,
/// with \p AllowIdle, for tp dividing the TP limit and pp as above (or the
/// fixed one), the largest dp <= Devices / (tp * pp) that divides the batch
/// (or the fixed one) when that leaves devices idle. What --plan fixed
/// filters both.
std::vector<MeshDegrees> enumerateMeshDegrees(const DegreeSpace &S,
                                              const PlanSpec &Fixed,
                                              bool AllowIdle);

/// A nearby global batch that would let \p P's (tp, pp) use more devices:
/// the multiple of (the most replicas that fit) * mb nearest to \p Batch
/// (the larger on a tie). None when P's dp is already the most that fits.
llvm::Optional<int64_t> suggestGlobalBatch(const ParallelPlan &P,
                                           uint64_t Devices, int64_t Batch);

} // namespace loom

#endif // LOOM_PLAN_IDLEDEVICES_H
