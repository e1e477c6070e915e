//===- Collectives.h - Time of collective communication ---------*- C++ -*-===//
//
// Alpha-beta models of HCCL-style collectives over a group that spans one or
// more topology levels, hierarchically (reduce-scatter inside the inner
// level, all-reduce across, all-gather inside), with per-level latency,
// bandwidth, efficiency and oversubscription from the hardware YAML, a
// bus-bandwidth efficiency that grows with message size, and contention
// when several collectives share a level at the same time.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COST_COLLECTIVES_H
#define LOOM_COST_COLLECTIVES_H

#include "loom/Hardware/HardwareModel.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace loom {

enum class CollectiveKind {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Broadcast,
  SendRecv,
};
llvm::StringRef getCollectiveName(CollectiveKind K);

/// How a communication group spreads over the topology: PerLevel[i] is the
/// number of group members that differ at level i (innermost first); their
/// product is the group size. A TP group of 8 inside a server of 8 is {8, 1};
/// a DP group of 16, one rank per server, is {1, 16}.
struct GroupShape {
  llvm::SmallVector<unsigned, 4> PerLevel;
  unsigned size() const;
  /// The outermost level the group crosses, or -1 for a group of one.
  int outermostLevel() const;
};

struct CollectiveTime {
  double Seconds = 0;
  /// Time spent on each topology level (same indexing as PerLevel).
  llvm::SmallVector<double, 4> PerLevelSeconds;
};

/// Time of one collective moving \p Bytes per rank (the full buffer for
/// AllReduce/Broadcast, the per-rank output for AllGather, the per-rank
/// input for ReduceScatter and AllToAll, the message for SendRecv).
/// \p Share[i] in (0, 1] is the fraction of level i's bandwidth this
/// collective gets (1 when alone; see shareBandwidth).
CollectiveTime collectiveTime(CollectiveKind K, double Bytes,
                              const GroupShape &G, const HardwareModel &HW,
                              llvm::ArrayRef<double> Share = {});

/// Bandwidth shares for collectives that run at the same time: each level's
/// bandwidth is split among the collectives that use it, in proportion to
/// the bytes they move there. Returns one Share vector per collective.
/// This form assumes every collective is an AllReduce (the usual overlap:
/// gradient sync beside TP traffic); the form below takes the kinds.
/// (Inline storage: the evaluator asks for two collectives' shares once per
/// stage of every plan it costs.)
using BandwidthShares = llvm::SmallVector<llvm::SmallVector<double, 4>, 2>;
BandwidthShares shareBandwidth(llvm::ArrayRef<GroupShape> Groups,
                               llvm::ArrayRef<double> Bytes,
                               const HardwareModel &HW);

/// shareBandwidth for collectives of any kinds (Kinds[i] with Groups[i] and
/// Bytes[i]). Each Share vector has one entry per topology level.
BandwidthShares shareBandwidth(llvm::ArrayRef<CollectiveKind> Kinds,
                               llvm::ArrayRef<GroupShape> Groups,
                               llvm::ArrayRef<double> Bytes,
                               const HardwareModel &HW);

/// Bytes one rank sends on each topology level (same indexing as PerLevel)
/// for collective \p K on \p Bytes over \p G: the traffic shareBandwidth
/// splits levels by, and what a schedule reports per link.
llvm::SmallVector<double, 4>
collectiveLevelBytes(CollectiveKind K, double Bytes, const GroupShape &G);

/// Message size at which level \p L reaches half its bus bandwidth
/// (Hockney's n_1/2): the level's half_bandwidth_size (default 1 MiB).
double getHalfBandwidthBytes(const TopologyLevel &L);

/// Fraction of \p L's bus bandwidth a collective on a \p MessageBytes
/// buffer reaches: m / (m + n_1/2).
double busEfficiency(double MessageBytes, const TopologyLevel &L);

} // namespace loom

#endif // LOOM_COST_COLLECTIVES_H
