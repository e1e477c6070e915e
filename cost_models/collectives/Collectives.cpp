//===- Collectives.cpp - Time of collective communication -----------------===//
//
// Hierarchical alpha-beta model. A group is split by topology level
// (GroupShape::PerLevel, innermost first; levels where the group has one
// member are skipped). On every level the group uses, the collective runs as
// a ring (NCCL/HCCL's bandwidth-optimal algorithm for large messages), so a
// ring of n ranks moving a buffer of S bytes costs
//
//   ReduceScatter, AllGather, AllToAll: (n-1)/n * S / BW + (n-1) * alpha
//   AllReduce:                         2(n-1)/n * S / BW + 2(n-1) * alpha
//   Broadcast (pipelined chain):               S / BW + (n-1) * alpha
//   SendRecv:                                  S / BW + alpha
//
// where (n-1)/n, 2(n-1)/n and 1 are the nccl-tests "bus bandwidth" factors
// (NVIDIA nccl-tests, doc/PERFORMANCE.md, "Summary"): the bytes each rank
// must send per byte of buffer.
//
// BW on level i is Bandwidth * Efficiency / Oversubscription (the YAML's
// figures; TopologyLevel::getEffectiveBandwidth) times Share[i] (contention,
// see shareBandwidth) times, on a full-mesh level, (n-1)/(Size-1) (the
// links to the group's peers; meshFraction) times busEfficiency(S_i), where
// S_i is the buffer the
// level's ring works on. busEfficiency(m) = m / (m + m_half) is Hockney's
// model of a link that reaches half its asymptotic rate at message size
// n_1/2 (R. W. Hockney, "The communication challenge for MPP: Intel Paragon
// and Meiko CS-2", Parallel Computing 20(3), 1994): it gives the S-shaped
// bus-bandwidth-versus-size curves nccl-tests and HCCL Test print, where
// small collectives are bound by per-step overheads the latency term alone
// does not capture (protocol switches, kernel launch, chunking).
//
//===----------------------------------------------------------------------===//

#include "loom/Cost/Collectives.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cassert>

using namespace llvm;

namespace loom {

StringRef getCollectiveName(CollectiveKind K) {
  switch (K) {
  case CollectiveKind::AllReduce:
    return "AllReduce";
  case CollectiveKind::AllGather:
    return "AllGather";
  case CollectiveKind::ReduceScatter:
    return "ReduceScatter";
  case CollectiveKind::AllToAll:
    return "AllToAll";
  case CollectiveKind::Broadcast:
    return "Broadcast";
  case CollectiveKind::SendRecv:
    return "SendRecv";
  }
  return "unknown";
}

unsigned GroupShape::size() const {
  unsigned N = 1;
  for (unsigned P : PerLevel)
    N *= P;
  return N;
}

int GroupShape::outermostLevel() const {
  for (int I = static_cast<int>(PerLevel.size()) - 1; I >= 0; --I)
    if (PerLevel[I] > 1)
      return I;
  return -1;
}

double getHalfBandwidthBytes(const TopologyLevel &L) {
  // The level's `half_bandwidth_size`, 1 MiB where the file gives none
  // [assume]: nccl-tests curves on NVLink and InfiniBand systems reach half
  // of their peak bus bandwidth at buffers of roughly 1 MB (and ~90 % only
  // at hundreds of MB). A file with a measured curve of its level (HCCL
  // Test on HCCS or RoCE, nccl-tests on NVLink) states its own.
  return L.HalfBandwidthSize.value();
}

double busEfficiency(double MessageBytes, const TopologyLevel &L) {
  // A zero-byte message moves nothing; call it fully efficient rather than
  // divide 0 by 0.
  if (MessageBytes <= 0)
    return 1.0;
  return MessageBytes / (MessageBytes + getHalfBandwidthBytes(L));
}

namespace {

/// What one collective does on one topology level: a ring of N ranks over
/// a buffer of Buffer bytes, sending BusFactor * Buffer bytes per rank and
/// paying LatencySteps latencies.
struct LevelStep {
  unsigned Level = 0;
  unsigned N = 1;
  double Buffer = 0;
  double BusFactor = 0;
  unsigned LatencySteps = 0;
};

/// The per-level steps of collective \p K on \p Bytes over \p G, each
/// passed to \p Fn, innermost level first (a callback, not a list: the
/// search costs millions of collectives).
///
/// AllReduce is the hierarchical (2D) algorithm: ReduceScatter inside level
/// l_1 on S, then the same recursively on S / n_1 across the next used level,
/// ..., AllReduce across the outermost used level, then AllGathers back
/// inwards. ReduceScatter + AllGather on a level is exactly a ring AllReduce
/// of that level's buffer, so level l_j costs a ring AllReduce of
/// S_j = S / (n_1 ... n_{j-1}): the outermost (slowest) level carries the
/// smallest buffer (the hierarchical all-reduce of Jia et al. 2018,
/// "Highly Scalable Deep Learning Training System with Mixed-Precision:
/// Training ImageNet in Four Minutes").
///
/// ReduceScatter and AllGather are the two halves of that: ReduceScatter
/// goes inside out on S_j, AllGather outside in on the same buffers (its
/// output on level l_j is S_j), each a one-way ring.
///
/// AllToAll is the two-dimensional hierarchical all-to-all (Hwang et al.
/// 2023, "Tutel: Adaptive Mixture-of-Experts at Scale", 2DH All-to-All):
/// first an all-to-all inside the inner level that gathers, on each rank,
/// the data bound for its peers at the same inner position in the other
/// units, then an all-to-all across the next level among those peers, and
/// so on. The buffer stays S at every level, and level l_j carries
/// (n_j - 1)/n_j * S per rank. For two levels the bytes leaving the inner
/// level are S * (1 - 1/n_2): exactly the fraction of every rank's data
/// destined to another unit, which is the least any algorithm sends across;
/// the inner level carries more than a flat all-to-all would (S (n_1-1)/n_1
/// instead of S (n_1-1)/N) in exchange for n_1 + n_2 - 2 message latencies
/// instead of N - 1.
///
/// Broadcast is a pipelined chain through the group (NCCL's ring
/// broadcast): each level carries the whole S once per rank; see
/// collectiveTime for how the levels overlap.
///
/// SendRecv moves S once across the outermost level the pair spans.
template <typename FnT>
void forEachLevelStep(CollectiveKind K, double Bytes, const GroupShape &G,
                      FnT Fn) {
  if (G.size() <= 1)
    return;

  if (K == CollectiveKind::SendRecv) {
    LevelStep S;
    S.Level = static_cast<unsigned>(G.outermostLevel());
    S.N = 2;
    S.Buffer = Bytes;
    S.BusFactor = 1.0;
    S.LatencySteps = 1;
    Fn(S);
    return;
  }

  double Buffer = Bytes;
  for (unsigned I = 0, E = G.PerLevel.size(); I != E; ++I) {
    unsigned N = G.PerLevel[I];
    if (N <= 1)
      continue;
    LevelStep S;
    S.Level = I;
    S.N = N;
    S.Buffer = Buffer;
    double RingFraction = double(N - 1) / double(N);
    switch (K) {
    case CollectiveKind::AllReduce:
      S.BusFactor = 2.0 * RingFraction;
      S.LatencySteps = 2 * (N - 1);
      Buffer /= N;
      break;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
      S.BusFactor = RingFraction;
      S.LatencySteps = N - 1;
      Buffer /= N;
      break;
    case CollectiveKind::AllToAll:
      S.BusFactor = RingFraction;
      S.LatencySteps = N - 1;
      break;
    case CollectiveKind::Broadcast:
      S.BusFactor = 1.0;
      S.LatencySteps = N - 1;
      break;
    case CollectiveKind::SendRecv:
      llvm_unreachable("handled above");
    }
    Fn(S);
  }
}

/// A full-mesh level (TopologyLevel::FullMesh): its bandwidth is the sum
/// of Size - 1 point-to-point links, and a group of N units sends over the
/// N - 1 links to its peers only -- all at once, as HCCL's mesh algorithms
/// inside a 910B server do, each rank sending 1/(N-1) of its share down
/// each link -- so it reaches (N - 1)/(Size - 1) of it; a send (N = 2),
/// one link. A switched level gives any group the whole bandwidth.
double meshFraction(unsigned N, const TopologyLevel &L) {
  if (!L.FullMesh || L.Size <= 1)
    return 1.0;
  return double(std::min(std::max(N, 2u), L.Size) - 1) / double(L.Size - 1);
}

double getShare(ArrayRef<double> Share, unsigned Level) {
  if (Level >= Share.size())
    return 1.0;
  assert(Share[Level] > 0 && Share[Level] <= 1 && "share outside (0, 1]");
  return Share[Level];
}

} // namespace

SmallVector<double, 4> collectiveLevelBytes(CollectiveKind K, double Bytes,
                                            const GroupShape &G) {
  SmallVector<double, 4> PerLevel(G.PerLevel.size(), 0.0);
  forEachLevelStep(K, Bytes, G, [&](const LevelStep &S) {
    PerLevel[S.Level] += S.BusFactor * S.Buffer;
  });
  return PerLevel;
}

CollectiveTime collectiveTime(CollectiveKind K, double Bytes,
                              const GroupShape &G, const HardwareModel &HW,
                              ArrayRef<double> Share) {
  assert(G.PerLevel.size() <= HW.Topology.size() &&
         "group spans more levels than the topology has");
  CollectiveTime T;
  T.PerLevelSeconds.assign(G.PerLevel.size(), 0.0);

  // Broadcast's levels form one pipeline: the slowest level sets the rate
  // and every level adds its chain's fill latency. The other collectives
  // run their levels one after the other (each level's phase needs the
  // previous one's result), so their level times add up.
  double MaxBandwidthTerm = 0, LatencySum = 0;
  forEachLevelStep(K, Bytes, G, [&](const LevelStep &S) {
    const TopologyLevel &L = HW.Topology[S.Level];
    assert((S.N <= L.Size || K == CollectiveKind::SendRecv) &&
           "group larger than its topology level");
    double BW = L.getEffectiveBandwidth().value() * getShare(Share, S.Level) *
                busEfficiency(S.Buffer, L) * meshFraction(S.N, L);
    double BandwidthTerm = S.BusFactor * S.Buffer / BW;
    double LatencyTerm = S.LatencySteps * L.Latency.value();
    T.PerLevelSeconds[S.Level] = BandwidthTerm + LatencyTerm;
    if (K == CollectiveKind::Broadcast) {
      MaxBandwidthTerm = std::max(MaxBandwidthTerm, BandwidthTerm);
      LatencySum += LatencyTerm;
    } else {
      T.Seconds += BandwidthTerm + LatencyTerm;
    }
  });
  if (K == CollectiveKind::Broadcast)
    T.Seconds = MaxBandwidthTerm + LatencySum;
  return T;
}

BandwidthShares shareBandwidth(ArrayRef<CollectiveKind> Kinds,
                               ArrayRef<GroupShape> Groups,
                               ArrayRef<double> Bytes,
                               const HardwareModel &HW) {
  assert(Kinds.size() == Groups.size() && Bytes.size() == Groups.size());
  unsigned NumLevels = HW.Topology.size();
  BandwidthShares Moved;
  SmallVector<double, 4> Total(NumLevels, 0.0);
  for (unsigned C = 0, E = Groups.size(); C != E; ++C) {
    SmallVector<double, 4> PerLevel =
        collectiveLevelBytes(Kinds[C], Bytes[C], Groups[C]);
    PerLevel.resize(NumLevels, 0.0);
    for (unsigned I = 0; I != NumLevels; ++I)
      Total[I] += PerLevel[I];
    Moved.push_back(std::move(PerLevel));
  }
  // Proportional sharing: a collective moving b of the level's B bytes gets
  // b / B of its bandwidth, so every collective on the level finishes its
  // bytes there when the level has moved all B -- the level is never idle
  // while any of them still has bytes to send. A level a collective does
  // not use leaves its share at 1, so its time there stays 0 regardless.
  BandwidthShares Shares;
  for (const SmallVector<double, 4> &PerLevel : Moved) {
    SmallVector<double, 4> Share(NumLevels, 1.0);
    for (unsigned I = 0; I != NumLevels; ++I)
      if (PerLevel[I] > 0)
        Share[I] = PerLevel[I] / Total[I];
    Shares.push_back(std::move(Share));
  }
  return Shares;
}

BandwidthShares shareBandwidth(ArrayRef<GroupShape> Groups,
                               ArrayRef<double> Bytes,
                               const HardwareModel &HW) {
  SmallVector<CollectiveKind, 8> Kinds(Groups.size(),
                                       CollectiveKind::AllReduce);
  return shareBandwidth(Kinds, Groups, Bytes, HW);
}

} // namespace loom
