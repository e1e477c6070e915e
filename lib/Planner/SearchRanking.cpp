//===- SearchRanking.cpp - Visiting candidates in bound order, ranking ----===//
//
// Searcher::run: the bound bases (SearchBounds.cpp) visited in increasing
// step bound (CandidateQueue), each costed without the pipeline simulation
// from its plan's shared stage costs (BaseStageCache), bounded again,
// simulated and ranked (Ranking) until the bound passes the K-th best; then
// what --explain compares the winner with (explainWinner,
// bestOnAllDevices), or, when nothing fits, the memory floors. Ranking and
// BaseStageCache serve only this visit, so they are defined here.
//
//===----------------------------------------------------------------------===//
#include "SearchInternal.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Planner/OffloadCost.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

using namespace llvm;

namespace loom {
namespace search_detail {

/// The plans ranked so far: the K best, and the best at each (tp, pp, ep)
/// (the explanations compare the winner with the best of other degrees).
/// Whether \p A and \p B differ at most in where the training state
/// lives.
static bool isSamePlanButOffload(const ParallelPlan &A, const ParallelPlan &B) {
  if (A.StageLayers != B.StageLayers || A.Emb != B.Emb)
    return false;
  if (A.Offload == B.Offload)
    return A.str() == B.str();
  ParallelPlan X = A, Y = B;
  X.Offload = Y.Offload = OffloadTiers();
  return X.str() == Y.str();
}

struct Ranking {
  using Degrees = std::tuple<unsigned, unsigned, unsigned, unsigned>;
  static Degrees getDegrees(const ParallelPlan &P) {
    return Degrees(P.TP, P.PP, P.EP, P.CP);
  }

  Ranking(unsigned K, std::vector<PlanCost> &Top,
          const std::vector<Candidate> &Cands)
      : K(K), Top(Top) {
    SeveralDegrees = !Cands.empty() && any_of(Cands, [&](const Candidate &C) {
      return getDegrees(C.Plan) != getDegrees(Cands.front().Plan);
    });
  }

  /// The step time a candidate must beat to matter: the K-th best, or the
  /// second best among distinct degrees where that is larger (INFINITY
  /// until there are K, resp. two).
  double getThreshold() const {
    double T = Top.size() < K ? INFINITY : Top.back().StepTimeS;
    if (!SeveralDegrees) // no best plan with other degrees to find
      return T;
    double Second = INFINITY, First = INFINITY;
    for (const auto &KV : PairBest) {
      double S = KV.second.StepTimeS;
      if (S < First) {
        Second = First;
        First = S;
      } else if (S < Second) {
        Second = S;
      }
    }
    return std::max(T, Second);
  }

  /// Ranks the simulated cost PC of Plan, which fits; returns where it entered
  /// Top (K: it did not).
  unsigned add(const ParallelPlan &Plan, PlanCost PC) {
    Degrees Pair = getDegrees(Plan);
    auto It = PairBest.find(Pair);
    if (It == PairBest.end())
      PairBest.emplace(Pair, PC);
    else if (isBetterPlan(PC, It->second))
      It->second = PC;
    // Each plan ranks once, at its best offload placement: a placement
    // that is no faster than one already ranked pays its transfers for
    // nothing (a tie keeps the less offloaded, isBetterPlan). Ranked
    // ones are only ever replaced by a better one, so Top stays the K
    // best plans whatever the order of visits (--no-prune agrees).
    auto Same = std::find_if(Top.begin(), Top.end(), [&](const PlanCost &T) {
      return isSamePlanButOffload(T.Plan, PC.Plan);
    });
    if (Same != Top.end()) {
      if (!isBetterPlan(PC, *Same))
        return K;
      Top.erase(Same);
    }
    auto Pos = std::upper_bound(Top.begin(), Top.end(), PC, isBetterPlan);
    if (Pos - Top.begin() >= (long)K)
      return K;
    unsigned Rank = Pos - Top.begin();
    Top.insert(Pos, std::move(PC));
    if (Top.size() > K)
      Top.pop_back();
    return Rank;
  }

  unsigned K;
  std::vector<PlanCost> &Top;
  std::map<Degrees, PlanCost> PairBest;
  /// Whether the candidates take more than one degrees tuple.
  bool SeveralDegrees = false;
};

/// The offload placements of one plan share its stage costs: costed once
/// without offload (evaluateStages), each placement re-placed from them
/// (applyOffloadToPlan). The step bound sorts a plan's placements apart
/// (their optimizer phases differ), so the costs are kept for a while:
/// first in, first out, up to a number of stages in all.
class BaseStageCache {
public:
  BaseStageCache(const PlanEvaluator &Eval, size_t NumPlacements)
      : Eval(Eval), NumPlacements(NumPlacements) {}

  /// The stage costs of C's plan without offload (C.Base names it).
  Expected<const PlanCost *> get(const Candidate &C) {
    auto It = BaseStages.find(C.Base);
    if (It != BaseStages.end())
      return It->second.get();
    ParallelPlan Q = C.Plan;
    Q.Offload = OffloadTiers();
    if (NumPlacements == 1) // nothing to share: hold only this one
      while (!BaseFIFO.empty()) {
        drop(BaseFIFO.front());
        BaseFIFO.pop_front();
      }
    // Room for this plan's stages (evaluateStagesInto costs one per pp rank).
    while (!BaseFIFO.empty() && BaseStagesHeld + Q.PP > MaxBaseStagesHeld) {
      drop(BaseFIFO.front());
      BaseFIFO.pop_front();
    }
    std::unique_ptr<PlanCost> Box;
    if (Free.empty()) {
      Box = std::make_unique<PlanCost>();
    } else {
      Box = std::move(Free.back());
      Free.pop_back();
    }
    if (Error E = Eval.evaluateStagesInto(Q, *Box))
      return std::move(E);
    BaseStagesHeld += Box->Stages.size();
    BaseFIFO.push_back(C.Base);
    const PlanCost *Held = Box.get();
    BaseStages.try_emplace(C.Base, std::move(Box));
    return Held;
  }

  /// Forgets \p Base's costs (its last placement was visited; the FIFO
  /// skips it when its turn comes); their storage serves the next plan.
  void drop(unsigned Base) {
    auto It = BaseStages.find(Base);
    if (It == BaseStages.end())
      return;
    BaseStagesHeld -= It->second->Stages.size();
    Free.push_back(std::move(It->second));
    BaseStages.erase(It);
  }

private:
  const PlanEvaluator &Eval;
  size_t NumPlacements;
  /// Boxed: get() hands out pointers that later insertions keep valid.
  DenseMap<unsigned, std::unique_ptr<PlanCost>> BaseStages;
  /// Dropped entries, reused (evaluateStagesInto keeps their stages'
  /// storage): at a training batch the cache turns over hundreds of
  /// thousands of plans, each a vector of 1 KiB stage costs.
  std::vector<std::unique_ptr<PlanCost>> Free;
  std::deque<unsigned> BaseFIFO;
  size_t BaseStagesHeld = 0;
  /// About 140 MB of stage costs (1 KiB each): at a training batch the
  /// 10T MoE's placements of one plan come up far apart, and a smaller
  /// cache costs a third of its plans twice.
  static constexpr size_t MaxBaseStagesHeld = 1 << 17;
};

std::string Searcher::describeGroups(const ParallelPlan &P) const {
  std::vector<std::string> Parts;
  for (StringRef G : {"tp", "ep", "dp", "dp_ep", "pp"}) {
    // dp_ep: the expert gradients' sync, apart from dp's only with ep > 1.
    unsigned Size = G == "tp"      ? P.TP
                    : G == "ep"    ? P.EP
                    : G == "dp"    ? P.DP
                    : G == "dp_ep" ? (P.EP > 1 ? P.DP / P.EP : 1)
                                   : P.PP;
    if (Size <= 1)
      continue;
    int L = Eval.getGroupShape(P, G).outermostLevel();
    if (L < 0 || (unsigned)L >= HW.Topology.size())
      continue;
    Parts.push_back(
        (G + (L == 0 ? " inside " : " across ") + HW.Topology[L].Name).str());
  }
  return join(Parts, ", ");
}

/// The best candidate using every device, by the same bounds: what a
/// winner that leaves devices idle is compared with.
Expected<Optional<PlanCost>>
Searcher::bestOnAllDevices(const std::vector<Candidate> &Bases) const {
  Optional<PlanCost> Best;
  BaseStageCache Cache(Eval, NumPlacements);
  PlanCost Scratch;
  auto AllDevices = [&](const Candidate &B) {
    return B.Plan.getNumDevices() == Space.Devices;
  };
  Expected<Optional<CandidateQueue::Item>> Stop = visitInOrder(
      Bases, AllDevices, [&](const CandidateQueue::Item &I) -> Expected<bool> {
        if (Opts.Prune && Best && I.Bound > Best->StepTimeS)
          return false;
        Candidate C =
            getCandidate(Bases, I.Base, Bases[I.Base].Places->Entries[I.Pos]);
        if (!Opts.Prune) {
          Expected<PlanCost> PC = Eval.evaluate(C.Plan);
          if (!PC)
            return PC.takeError();
          if (PC->FitsMemory && (!Best || isBetterPlan(*PC, *Best)))
            Best = std::move(*PC);
          return true;
        }
        // As rankCandidates does: the stages costed once per base, and
        // simulated only where they fit and their bound can beat Best.
        Expected<const PlanCost *> SC = costStagesIfFits(C, Cache, Scratch);
        if (!SC)
          return SC.takeError();
        if (!*SC || (Best && stageBound(**SC) > Best->StepTimeS))
          return true;
        Expected<PlanCost> PC = Eval.simulate(**SC);
        if (!PC)
          return PC.takeError();
        if (PC->FitsMemory && (!Best || isBetterPlan(*PC, *Best)))
          Best = std::move(*PC);
        return true;
      });
  if (!Stop)
    return Stop.takeError();
  return Best;
}

Candidate Searcher::getCandidate(const std::vector<Candidate> &Bases,
                                 unsigned B,
                                 const PlacementTable::Entry &E) const {
  Candidate C = Bases[B];
  C.Plan.Offload = Offs[E.Off];
  return C;
}

template <typename TakeFn, typename VisitFn>
Expected<Optional<CandidateQueue::Item>>
Searcher::visitInOrder(const std::vector<Candidate> &Bases, TakeFn Take,
                       VisitFn Visit) const {
  auto ItemAt = [&](unsigned B, unsigned Pos) {
    const PlacementTable::Entry &E = Bases[B].Places->Entries[Pos];
    return CandidateQueue::Item{combineStepBound(Bases[B].PipeBound, E.Tail), B,
                                Pos};
  };
  // Without pruning: enumeration order (the table keeps its placements in
  // order and counts them all as fitting).
  if (!Opts.Prune) {
    for (unsigned B = 0; B < Bases.size(); ++B) {
      if (!Take(Bases[B]))
        continue;
      for (unsigned Pos = 0; Pos < Bases[B].Places->Fit; ++Pos) {
        CandidateQueue::Item I = ItemAt(B, Pos);
        Expected<bool> Go = Visit(I);
        if (!Go)
          return Go.takeError();
        if (!*Go)
          return Optional<CandidateQueue::Item>(I);
      }
    }
    return None;
  }
  CandidateQueue Q;
  {
    std::vector<CandidateQueue::Item> First;
    First.reserve(Bases.size());
    for (unsigned B = 0; B < Bases.size(); ++B)
      if (Bases[B].Places->Fit && Take(Bases[B]))
        First.push_back(ItemAt(B, 0));
    Q.assign(std::move(First));
  }
  while (!Q.empty()) {
    CandidateQueue::Item I = Q.top();
    Expected<bool> Go = Visit(I);
    if (!Go)
      return Go.takeError();
    if (!*Go)
      return Optional<CandidateQueue::Item>(I);
    if (I.Pos + 1 < Bases[I.Base].Places->Fit)
      Q.replaceTop(ItemAt(I.Base, I.Pos + 1));
    else
      Q.pop();
  }
  return None;
}

uint64_t
Searcher::countOverMemoryBefore(const std::vector<Candidate> &Bases,
                                const Optional<CandidateQueue::Item> &Stop,
                                const Optional<CandidateQueue::Item> &Last,
                                double Thr) const {
  // The visit stopped at Stop, whose bound exceeds Thr: it passed the
  // candidates whose bound is at most Thr, and those before Last (visited
  // while the threshold was higher). A base's over-memory placements are
  // in increasing tail, so in increasing bound (combineStepBound is
  // monotone): both sets are counted by binary search, but for the
  // placements whose bound equals Last's, ordered by index.
  uint64_t N = 0;
  unsigned LastOff =
      Last ? Bases[Last->Base].Places->Entries[Last->Pos].Off : 0;
  for (unsigned B = 0; B < Bases.size(); ++B) {
    const PlacementTable &T = *Bases[B].Places;
    if (!Stop) {
      N += T.Entries.size() - T.Fit;
      continue;
    }
    ArrayRef<PlacementTable::Entry> Over =
        makeArrayRef(T.Entries).drop_front(T.Fit);
    double Pipe = Bases[B].PipeBound;
    auto CountWhile = [&](auto BoundOK) -> size_t {
      return partition_point(Over,
                             [&](const PlacementTable::Entry &E) {
                               return BoundOK(combineStepBound(Pipe, E.Tail));
                             }) -
             Over.begin();
    };
    if (!Last || Last->Bound <= Thr) {
      N += CountWhile([&](double X) { return X <= Thr; });
      continue;
    }
    size_t Below = CountWhile([&](double X) { return X < Last->Bound; });
    size_t Tied = CountWhile([&](double X) { return X <= Last->Bound; });
    N += Below;
    // Tied with Last: those before it in enumeration order.
    for (size_t K = Below; K < Tied; ++K)
      N += B < Last->Base || (B == Last->Base && Over[K].Off < LastOff);
  }
  return N;
}

/// Whether the act:host candidate C cannot rank because its act:hbm twin,
/// the candidate visited just before it (Prev), was simulated and ranked
/// K-th or worse (LastRank) and every stage keeps at most one micro-batch
/// in flight.
Expected<bool> Searcher::isDominatedTwin(const Candidate &C,
                                         const VisitedPlacement *Prev,
                                         bool PrevSimulated, unsigned LastRank,
                                         unsigned K,
                                         BaseStageCache &Cache) const {
  if (!Opts.Prune || C.Plan.Offload.Act != MemoryTier::Host || !Prev ||
      !PrevSimulated || LastRank + 1 < K)
    return false;
  // act:host with at most one micro-batch in flight on every stage
  // swaps nothing (Offload.cpp keeps the one micro-batch in HBM): it
  // costs exactly what its act:hbm twin costs and loses the tie to it
  // (isBetterPlan: it offloads more). The twin is enumerated just
  // before it with the same bounds (neither reads act), so it is the
  // candidate visited just before; it ranks K-th or worse, so this one
  // cannot rank.
  OffloadTiers Twin = C.Plan.Offload;
  Twin.Act = MemoryTier::HBM;
  if (Prev->Base != C.Base || !(Prev->Off == Twin))
    return false;
  Expected<const PlanCost *> B = Cache.get(C);
  if (!B)
    return B.takeError();
  return all_of((*B)->Stages, [](const StageCost &SC) {
    return SC.OffloadIn.InFlightMicroBatches <= 1;
  });
}

/// C's stage costs without the pipeline simulation, or null where they are
/// over memory. A plan's placements are costed once and re-placed; only an
/// offloaded placement is copied, into \p Scratch (whose storage each
/// visit reuses), since most candidates are dropped by their stage bound.
Expected<const PlanCost *> Searcher::costStagesIfFits(const Candidate &C,
                                                      BaseStageCache &Cache,
                                                      PlanCost &Scratch) const {
  Expected<const PlanCost *> B = Cache.get(C);
  if (!B)
    return B.takeError();
  if (!fitsWithOffload(**B, C.Plan.Offload))
    return nullptr;
  if (!C.Plan.Offload.any())
    return *B;
  Scratch = **B;
  applyOffloadToPlan(Scratch, C.Plan.Offload, HW);
  return &Scratch;
}

/// Without pruning: every candidate evaluated in full, in enumeration
/// order (the tests' brute force).
Error Searcher::rankAll(const std::vector<Candidate> &Bases, Ranking &Rank,
                        SearchResult &R) const {
  for (unsigned B = 0; B < Bases.size(); ++B)
    for (const PlacementTable::Entry &E : Bases[B].Places->Entries) {
      Candidate C = getCandidate(Bases, B, E);
      Expected<PlanCost> PC = Eval.evaluate(C.Plan);
      if (!PC)
        return PC.takeError();
      ++R.Stats.Simulated;
      if (!PC->FitsMemory) {
        ++R.Stats.OverMemory;
        continue;
      }
      Rank.add(C.Plan, std::move(*PC));
    }
  return Error::success();
}

/// Visits the candidates in increasing step bound, pruning by the bounds
/// against the ranking's threshold, and ranks every one simulated that
/// fits. Counts into R.Stats.
Error Searcher::rankCandidates(const std::vector<Candidate> &Bases,
                               Ranking &Rank, SearchResult &R) const {
  if (!Opts.Prune)
    return rankAll(Bases, Rank, R);
  const unsigned K = Rank.K;
  double Thr = INFINITY;
  BaseStageCache Cache(Eval, NumPlacements);
  // The candidate visited last, whether it was simulated, and where it
  // entered Top (K: it did not).
  Optional<VisitedPlacement> Prev;
  bool PrevSimulated = false;
  unsigned LastRank = K;
  uint64_t Visited = 0;
  Optional<CandidateQueue::Item> Last;
  // The (family, placement)s found over memory: a plan's other mesh
  // orders at that placement hold the same memory (the order moves
  // communication only, and embedding shards, placed by their exchange's
  // cost, are not in the plans this is used for), so they are over too
  // and are not costed.
  uint64_t NumOffs = Offs.size();
  // One bit per candidate (a family is the index of a base): a hash set
  // of the hundreds of thousands found over cost more than the costing
  // they save.
  BitVector OverFamilies(OrderKeepsMemory ? Bases.size() * NumOffs : 0);
  PlanCost Scratch;
  auto Visit = [&](const CandidateQueue::Item &I) -> Expected<bool> {
    if (I.Bound > Thr)
      return false;
    ++Visited;
    Last = I;
    // The base's last placement: its costs are not needed after this one.
    struct DropAfter {
      BaseStageCache &Cache;
      unsigned Base;
      bool Last;
      ~DropAfter() {
        if (Last)
          Cache.drop(Base);
      }
    } Drop{Cache, I.Base, I.Pos + 1 == Bases[I.Base].Places->Fit};
    Candidate C =
        getCandidate(Bases, I.Base, Bases[I.Base].Places->Entries[I.Pos]);
    Expected<bool> Dominated =
        isDominatedTwin(C, Prev ? Prev.getPointer() : nullptr, PrevSimulated,
                        LastRank, K, Cache);
    if (!Dominated)
      return Dominated.takeError();
    Prev = VisitedPlacement{C.Base, C.Plan.Offload};
    PrevSimulated = false;
    if (*Dominated) {
      ++R.Stats.Dominated;
      return true;
    }
    uint64_t FamilyKey =
        (uint64_t)C.Family * NumOffs + Bases[I.Base].Places->Entries[I.Pos].Off;
    if (OrderKeepsMemory && OverFamilies.test(FamilyKey)) {
      ++R.Stats.SameMemoryOver;
      return true;
    }
    Expected<const PlanCost *> SC = costStagesIfFits(C, Cache, Scratch);
    if (!SC)
      return SC.takeError();
    ++R.Stats.StagesEvaluated;
    if (!*SC) {
      ++R.Stats.OverMemory;
      if (OrderKeepsMemory)
        OverFamilies.set(FamilyKey);
      return true;
    }
    if (stageBound(**SC) > Thr) {
      ++R.Stats.TimeBoundPruned;
      return true;
    }
    // Simulate what was costed (evaluate() would cost the stages again).
    Expected<PlanCost> PC = Eval.simulate(**SC);
    if (!PC)
      return PC.takeError();
    ++R.Stats.Simulated;
    PrevSimulated = true;
    LastRank = K;
    if (!PC->FitsMemory) {
      ++R.Stats.OverMemory;
      return true;
    }
    LastRank = Rank.add(C.Plan, std::move(*PC));
    Thr = Rank.getThreshold();
    return true;
  };
  Expected<Optional<CandidateQueue::Item>> Stop = visitInOrder(
      Bases, [](const Candidate &) { return true; }, Visit);
  if (!Stop)
    return Stop.takeError();
  // The candidates over the memory bound were skipped where the order
  // reached them (the threshold falls as plans rank: one after the last
  // visited over it stopped the visit); the rest, by the step bound.
  uint64_t Over = countOverMemoryBefore(Bases, *Stop, Last, Thr);
  R.Stats.MemoryBoundPruned += Over;
  if (*Stop)
    R.Stats.TimeBoundPruned += NumCandidates - Visited - Over;
  return Error::success();
}

/// What the winner Top[0] is compared with, for --explain: the best plan
/// of other degrees, the winner on the default mesh order, the best plan
/// on all devices (when the winner leaves some idle), the winner with each
/// overlap flipped and with fp32 gradients.
Error Searcher::explainWinner(const std::vector<Candidate> &Bases,
                              const Ranking &Rank, SearchResult &R) const {
  const std::vector<PlanCost> &Top = Rank.Top;
  Ranking::Degrees Win = Ranking::getDegrees(Top[0].Plan);
  for (const auto &KV : Rank.PairBest)
    if (KV.first != Win &&
        (!R.OtherDegrees || isBetterPlan(KV.second, *R.OtherDegrees)))
      R.OtherDegrees = KV.second;
  // What the winner's mesh and gradient precision buy: the same plan with
  // the defaults, costed.
  const ParallelPlan &W = Top[0].Plan;
  if (W.Order != DefaultAxisOrder) {
    ParallelPlan Q = W;
    Q.Order = DefaultAxisOrder;
    Expected<PlanCost> PC = Eval.evaluate(Q);
    if (!PC)
      return PC.takeError();
    R.DefaultOrder = std::move(*PC);
    R.WinnerGroups = describeGroups(W);
    R.DefaultOrderGroups = describeGroups(Q);
  }
  if (W.getNumDevices() < Space.Devices) {
    Expected<Optional<PlanCost>> All = bestOnAllDevices(Bases);
    if (!All)
      return All.takeError();
    R.BestAllDevices = std::move(*All);
  }
  // The winner with each overlap it has communication for flipped
  // (--explain says what each choice is worth).
  // Only the kinds the hardware gives a share for (the searched ones).
  const DeviceClass *Core = HW.getClass("aicore");
  Optional<CommOverlap> Ov = Core ? Core->Overlap : None;
  for (unsigned K = 0; K < 3; ++K) {
    if ((K == 0 && (W.TP == 1 || !Ov || !Ov->TP)) ||
        (K == 1 && (W.DP == 1 || !EO.Train || !Ov || !Ov->DP)) ||
        (K == 2 && (W.PP == 1 || !Ov || !Ov->PP)))
      continue;
    ParallelPlan Q = W;
    bool &Flag = K == 0 ? Q.TPOverlap : K == 1 ? Q.DPOverlap : Q.PPOverlap;
    Flag = !Flag;
    Expected<PlanCost> PC = Eval.evaluate(Q);
    if (!PC)
      return PC.takeError();
    R.OverlapFlips.push_back(std::move(*PC));
  }
  if (W.Grad != GradPrecision::FP32) {
    ParallelPlan Q = W;
    Q.Grad = GradPrecision::FP32;
    Expected<PlanCost> PC = Eval.evaluate(Q);
    if (!PC)
      return PC.takeError();
    R.FP32Grad = std::move(*PC);
  }
  return Error::success();
}

/// Nothing fits: the least memory at every (tp, pp), exactly (R.Floors),
/// and the nearest miss costed in full (R.Closest). Within a pair,
/// candidates in increasing memory bound until the bound passes the least
/// memory found.
Error Searcher::findMemoryFloors(const std::vector<Candidate> &Bases,
                                 SearchResult &R) const {
  // Per pair, every candidate as (memory bound, enumeration index), in
  // increasing bound, ties in enumeration order.
  uint64_t NumOffs = Offs.size();
  std::map<std::pair<unsigned, unsigned>,
           std::vector<std::pair<double, uint64_t>>>
      ByPair;
  for (unsigned B = 0; B < Bases.size(); ++B)
    for (const PlacementTable::Entry &E : Bases[B].Places->Entries)
      ByPair[{Bases[B].Plan.TP, Bases[B].Plan.PP}].push_back(
          {E.Memory, B * NumOffs + E.Off});
  for (auto &KV : ByPair) {
    std::vector<std::pair<double, uint64_t>> &Is = KV.second;
    std::sort(Is.begin(), Is.end());
    Optional<MemoryFloor> Floor;
    for (const auto &[Bound, Index] : Is) {
      if (Floor && Bound > Floor->Bytes)
        break;
      ParallelPlan Plan = Bases[Index / NumOffs].Plan;
      Plan.Offload = Offs[Index % NumOffs];
      Expected<PlanCost> SC = Eval.evaluateStages(Plan);
      if (!SC)
        return SC.takeError();
      ++R.Stats.StagesEvaluated;
      if (Floor && SC->MaxMemoryBytes >= Floor->Bytes)
        continue;
      MemoryFloor MF;
      MF.TP = KV.first.first;
      MF.PP = KV.first.second;
      MF.Bytes = SC->MaxMemoryBytes;
      for (unsigned S = 0; S < SC->Stages.size(); ++S)
        if (SC->Stages[S].MemoryBytes == SC->MaxMemoryBytes) {
          MF.Stage = S;
          break;
        }
      MF.Plan = Plan;
      Floor = MF;
    }
    if (Floor)
      R.Floors.push_back(*Floor);
  }
  // The nearest miss, costed in full for the stage report (first of the
  // least memory: deterministic).
  const MemoryFloor *Least = nullptr;
  for (const MemoryFloor &F : R.Floors)
    if (!Least || F.Bytes < Least->Bytes)
      Least = &F;
  if (Least) {
    Expected<PlanCost> PC = Eval.evaluate(Least->Plan);
    if (!PC)
      return PC.takeError();
    R.Closest = std::move(*PC);
  }
  return Error::success();
}

/// CPU seconds the calling thread has run.
static double threadCPUSeconds() {
  timespec T;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &T) != 0)
    return 0;
  return (double)T.tv_sec + 1e-9 * (double)T.tv_nsec;
}

Expected<SearchResult> Searcher::run(bool Floors) {
  auto Start = std::chrono::steady_clock::now();
  double CPUStart = threadCPUSeconds();
  SearchResult R;
  R.Space = Space;
  R.StagesGiven = !Opts.Fixed.StageLayers.empty();
  // One base per plan; its offload placements are visited lazily
  // (CandidateOrder.h).
  if (HaveBases)
    setPlacements();
  else
    enumerateBases(Bases);
  HaveBases = true;
  R.Stats.Candidates = (uint64_t)Bases.size() * Offs.size();
  R.TriedAllDevices = !Offs.empty() && any_of(Bases, [&](const Candidate &C) {
    return C.Plan.getNumDevices() == Space.Devices;
  });
  boundCandidates(Bases);
  Ranking Rank(std::max(1u, Opts.TopK), R.Top, Bases);
  if (Error E = rankCandidates(Bases, Rank, R))
    return std::move(E);
  if (!R.Top.empty())
    if (Error E = explainWinner(Bases, Rank, R))
      return std::move(E);
  R.Stats.Partitions = Partitions;
  R.Stats.Seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
          .count();
  R.Stats.CPUSeconds = threadCPUSeconds() - CPUStart;
  if (Floors && R.Top.empty())
    if (Error E = addFloors(R))
      return std::move(E);
  return R;
}

Error Searcher::addFloors(SearchResult &R) const {
  auto Start = std::chrono::steady_clock::now();
  double CPUStart = threadCPUSeconds();
  if (Error E = findMemoryFloors(Bases, R))
    return E;
  R.Stats.Seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
          .count();
  R.Stats.CPUSeconds += threadCPUSeconds() - CPUStart;
  return Error::success();
}

} // namespace search_detail
} // namespace loom
