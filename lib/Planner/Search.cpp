//===- Search.cpp - The parallelism search of DESIGN §6 -------------------===//
//
// The space. tp runs over the divisors of the device count up to the TP
// domain (the innermost topology levels that allow TP) that divide every
// split dim of the graph; pp over the divisors of devices / tp up to the
// number of layers; dp = devices / (tp * pp) must divide the global batch;
// the micro-batch size over the divisors of batch / dp (nmb = batch /
// (dp * mb)); sp on or off when tp > 1; recompute none, selective or full
// and ZeRO 0-3 (0 when dp = 1) when training; virtual stages vpp > 1 where
// Megatron-LM allows them (pp > 1, nmb % pp == 0, the blocks split evenly over
// the stages and vpp divides each stage's blocks); stage boundaries even (the
// evaluator's split) or balanced by partitionStages() on the per-layer
// compute times (vpp = 1). ep over the divisors of dp that divide every
// MoE layer's experts. The mesh's axis order (ParallelPlan.h): every
// distinct placement of ep, dp and pp above tp (getDistinctAxisOrders:
// orders that differ only where axes of size 1 sit are one mesh). The DP
// gradient precision: fp32 or bf16 when training with dp > 1, fp32
// otherwise.
//
// The order. Each candidate gets two cheap bounds before anything is
// evaluated:
//   memory >= parameters / (tp * pp) * bytes per parameter after ZeRO
//             + buffers + reserve  (the busiest stage holds at least the
//             average, and at least 1/tp of every parameter),
//   step   >= max over stages s of  sum_{j<s} F_j / v  +  M (F_s + B_s)
//             +  sum_{j<s} B_j / v
// with F, B the compute of one micro-batch (backward with recomputation):
// a device cannot start before the first micro-batch has crossed the
// stages before it, is busy M (F_s + B_s), and its last backward still has
// to cross them back. To that the step bound adds the optimizer phase the
// step ends with (tailBound): at least the average stage's AdamW over HBM,
// or with offload its placement's transfers and host update (opt:ssd: the
// states read and written over NVMe), so the placements of one plan are
// visited cheapest first and the slow ones are cut before they are costed;
// the memory bound likewise checks each placement's host and SSD tiers.
// Candidates are visited in increasing step bound;
// once the bound exceeds the K-th best step time found (and the second best
// among distinct (tp, pp), kept for explanations) the rest cannot enter the
// answer. A candidate that survives is evaluated without the pipeline
// simulation (exact memory, per-micro-batch stage times with TP
// communication, DP sync and optimizer), bounded again the same way with
// those times and the exact tail, and only then simulated, from the stage
// costs just computed (PlanEvaluator::simulate, which keeps each distinct
// pipeline's simulation: plans differing only in what follows the last
// backward share it). The offload placements of
// a plan share its stage costs (costed once, re-placed by
// applyOffloadToPlan, kept in a first-in first-out cache while the
// placements come up). An act:host placement with one micro-batch in
// flight per stage costs exactly what its act:hbm twin costs and loses the
// tie to it: it is skipped when the twin ranks K-th or worse. The axis order
// and the gradient precision change only communication (and the gradient
// buffer), not compute: their candidates share the step bound and are told
// apart by the exact evaluation. The axis order moves no memory either
// (test/unit/SearchOrderTest.cpp): once a plan is over memory at a
// placement, its other orders at that placement are not costed (unless a
// plan shards an embedding table, whose shards are placed by cost).
//
// The placements are not materialised (CandidateOrder.h): one base per
// plan with its pipeline bound, the placements' tail and memory bounds
// per (degrees, ZeRO stage, gradient precision), and a heap merging the
// bases' placements into the order above; only what is visited before the
// bound passes the threshold is built. Offload is a speed choice (issue
// 35): wherever the hardware has a tier, every plan's placements are in
// the one search, and the top list holds each plan once, at its best
// placement; the best plan all in HBM (what --explain compares offload
// with) is a second search over the same bases at the "none" placement.
//
//===----------------------------------------------------------------------===//
#include "loom/Planner/Search.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/BatchSplit.h"
#include "loom/Plan/IdleDevices.h"
#include "loom/Plan/StageSplit.h"
#include "loom/Planner/CandidateOrder.h"
#include "loom/Planner/Goodput.h"
#include "loom/Planner/OffloadCost.h"
#include "loom/Shard/ExpertRules.h"
#include "loom/Shard/Rules.h"
#include "loom/Support/Divisors.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <deque>
#include <map>
#include <numeric>
#include <tuple>

#include <limits>

using namespace llvm;

namespace loom {

char NoFeasiblePlanError::ID;

void NoFeasiblePlanError::log(raw_ostream &OS) const { OS << Msg; }

std::error_code NoFeasiblePlanError::convertToErrorCode() const {
  return inconvertibleErrorCode();
}

//===----------------------------------------------------------------------===//
// TP divisibility
//===----------------------------------------------------------------------===//

bool TPDivisibility::allows(uint64_t TP) const {
  return dividesOneOf(Sizes, TP);
}

std::string describeUnsplitWeights(ArrayRef<UnsplitWeight> W, unsigned Max) {
  std::string S;
  for (unsigned I = 0; I < W.size() && I < Max; ++I)
    S += (I ? ", '" : "'") + W[I].Weight + "' (dim " +
         std::to_string(W[I].Dim) + " of " + std::to_string(W[I].Size) +
         ", read by '" + W[I].Reader + "')";
  if (W.size() > Max)
    S += " and " + std::to_string(W.size() - Max) + " more";
  return S;
}

TPDivisibility computeTPDivisibility(const Graph &G, int64_t Opset,
                                     ArrayRef<uint64_t> Degrees) {
  // The dims the sharding rules split (Rules.h), not a second analysis.
  SplitDimSizes Dims = collectSplitDims(G, Opset);
  TPDivisibility R;
  R.NumSplitDims = Dims.size();
  uint64_t GCD = 0;
  for (const auto &KV : Dims) {
    GCD = std::gcd(GCD, KV.first);
    R.Sizes.push_back(KV.first);
  }
  R.Divisor = GCD;
  if (!GCD)
    return R;
  for (uint64_t T : Degrees)
    if (T > 1 && GCD % T && R.allows(T) && !R.Replicated.count(T))
      R.Replicated[T] = collectUnsplitWeights(G, Opset, T);
  // The fewest sizes, smallest first, whose gcd is the divisor.
  std::vector<std::string> Why;
  uint64_t Run = 0;
  for (const auto &KV : Dims) {
    if (Run && std::gcd(Run, KV.first) == Run)
      continue;
    Run = std::gcd(Run, KV.first);
    Why.push_back(std::to_string(KV.first) + " = " + KV.second);
    if (Run == GCD)
      break;
  }
  R.Why = Why.size() == 1 ? Why.front() : "gcd of " + join(Why, ", ");
  return R;
}

ExpertInfo summarizeExperts(ArrayRef<ExpertGroup> Groups) {
  ExpertInfo E;
  std::vector<std::pair<std::string, unsigned>> Patterns;
  for (const ExpertGroup &EG : Groups) {
    std::string P = getExpertPattern(EG);
    auto It = find_if(Patterns, [&](const auto &KV) { return KV.first == P; });
    if (It == Patterns.end())
      Patterns.push_back({P, 1});
    else
      ++It->second;
    E.NumExperts = std::gcd(E.NumExperts, EG.NumExperts);
    ++E.NumGroups;
    E.NumStacked += EG.isStacked();
    if (E.Parameter.empty()) {
      if (EG.isStacked())
        E.Parameter = EG.StackedParams.front()->getName().str();
      else if (!EG.BranchParams.empty() && !EG.BranchParams[0].empty())
        E.Parameter = EG.BranchParams[0].front()->getName().str();
    }
  }
  for (const auto &KV : Patterns)
    E.Patterns +=
        (E.Patterns.empty() ? "" : ", ") + KV.first +
        (Patterns.size() > 1 ? " (" + std::to_string(KV.second) + ")" : "");
  return E;
}

//===----------------------------------------------------------------------===//
// Stage boundaries
//===----------------------------------------------------------------------===//

namespace {
struct StageCosts {
  std::vector<double> Prefix;
  double First, Last;
  unsigned L;
  StageCosts(ArrayRef<double> C, double First, double Last)
      : Prefix(C.size() + 1, 0.0), First(First), Last(Last), L(C.size()) {
    for (unsigned I = 0; I < C.size(); ++I)
      Prefix[I + 1] = Prefix[I] + C[I];
  }
  /// Layers [I, J) as one stage.
  double operator()(unsigned I, unsigned J) const {
    return Prefix[J] - Prefix[I] + (I == 0 ? First : 0.0) +
           (J == L ? Last : 0.0);
  }
};
} // namespace

double getBottleneck(ArrayRef<double> LayerCost, ArrayRef<unsigned> Counts,
                     double FirstExtra, double LastExtra) {
  StageCosts Cost(LayerCost, FirstExtra, LastExtra);
  double Max = 0;
  unsigned I = 0;
  for (unsigned C : Counts) {
    Max = std::max(Max, Cost(I, I + C));
    I += C;
  }
  return Max;
}

double getLayerWork(const PlanEvaluator::LayerTime &T, Recompute RC,
                    bool Train) {
  if (!Train)
    return T.ForwardS;
  double Extra = RC == Recompute::Full        ? T.ForwardS
                 : RC == Recompute::Selective ? T.AttentionForwardS
                                              : 0.0;
  return T.ForwardS + T.BackwardS + Extra;
}

std::vector<unsigned> partitionStages(ArrayRef<double> LayerCost,
                                      unsigned NumStages, double FirstExtra,
                                      double LastExtra) {
  unsigned L = LayerCost.size(), P = NumStages;
  assert(P >= 1 && P <= L && "need 1 <= stages <= layers");
  StageCosts Cost(LayerCost, FirstExtra, LastExtra);
  // Best(S, I): the least bottleneck of layers [I, L) in stages S..P-1;
  // defined for S <= I <= L - (P - S). One block, rows of L + 1.
  std::vector<double> Table(P * (L + 1), 0.0);
  auto Best = [&](unsigned S) {
    return MutableArrayRef<double>(Table).slice(S * (L + 1), L + 1);
  };
  for (unsigned I = P - 1; I < L; ++I)
    Best(P - 1)[I] = Cost(I, L);
  for (unsigned S = P - 1; S-- > 0;) {
    ArrayRef<double> Next = Best(S + 1);
    for (unsigned I = S; I + (P - S) <= L; ++I) {
      // Stage S takes [I, K): Cost(I, K) grows with K, Next[K] does not;
      // the optimum is at the first K where Cost >= Next, or just before.
      unsigned Lo = I + 1, Hi = L - (P - S - 1);
      unsigned A = Lo, B = Hi + 1;
      while (A < B) {
        unsigned Mid = A + (B - A) / 2;
        if (Cost(I, Mid) >= Next[Mid])
          B = Mid;
        else
          A = Mid + 1;
      }
      double V = INFINITY;
      if (A <= Hi)
        V = std::max(Cost(I, A), Next[A]);
      if (A > Lo)
        V = std::min(V, std::max(Cost(I, A - 1), Next[A - 1]));
      Best(S)[I] = V;
    }
  }
  // The lexicographically smallest counts reaching the optimum: each stage
  // ends at the first K from which the rest can still meet it.
  double Target = Best(0)[0];
  std::vector<unsigned> Counts;
  unsigned I = 0;
  for (unsigned S = 0; S < P; ++S) {
    unsigned K = L;
    if (S + 1 < P)
      for (K = I + 1; K < L - (P - S - 2); ++K)
        if (Cost(I, K) <= Target && Best(S + 1)[K] <= Target)
          break;
    Counts.push_back(K - I);
    I = K;
  }
  return Counts;
}

//===----------------------------------------------------------------------===//
// Cost terms and order
//===----------------------------------------------------------------------===//

namespace {
/// Each cost term's name and its StepBreakdown field, in CostTerm order.
struct CostTermInfo {
  CostTerm Term;
  const char *Name;
  double StepBreakdown::*Field;
};
constexpr CostTermInfo CostTerms[] = {
    {CostTerm::Compute, "compute", &StepBreakdown::ComputeS},
    {CostTerm::TPComm, "tp comm", &StepBreakdown::TPCommS},
    {CostTerm::EPComm, "ep comm", &StepBreakdown::EPCommS},
    {CostTerm::CPComm, "cp comm", &StepBreakdown::CPCommS},
    {CostTerm::Bubble, "bubble", &StepBreakdown::BubbleS},
    {CostTerm::DPComm, "dp comm", &StepBreakdown::DPCommS},
    {CostTerm::Optimizer, "optimizer", &StepBreakdown::OptimizerS},
    {CostTerm::Offload, "offload", &StepBreakdown::OffloadS},
};
const CostTermInfo &getCostTermInfo(CostTerm T) {
  const CostTermInfo &I = CostTerms[static_cast<unsigned>(T)];
  assert(I.Term == T && "CostTerms is in CostTerm order");
  return I;
}
} // namespace

StringRef getCostTermName(CostTerm T) { return getCostTermInfo(T).Name; }

double StepBreakdown::get(CostTerm T) const {
  return this->*getCostTermInfo(T).Field;
}

CostTerm StepBreakdown::getDominant() const {
  CostTerm Best = CostTerm::Compute;
  for (const CostTermInfo &I : CostTerms)
    if (get(I.Term) > get(Best))
      Best = I.Term;
  return Best;
}

StepBreakdown getStepBreakdown(const PlanCost &PC) {
  StepBreakdown B;
  if (PC.Stages.empty())
    return B;
  // Tail: the stage whose end plus DP sync and optimizer ends the step.
  unsigned Busiest = 0, Tail = 0, Last = 0;
  auto EndOf = [&](unsigned S) {
    const StageCost &A = PC.Stages[S];
    return A.PipelineEndS + A.DPExposedS + A.OptimizerS;
  };
  for (unsigned S = 1; S < PC.Stages.size(); ++S) {
    if (PC.Stages[S].BubbleS < PC.Stages[Busiest].BubbleS)
      Busiest = S;
    if (EndOf(S) > EndOf(Tail))
      Tail = S;
    if (PC.Stages[S].PipelineEndS > PC.Stages[Last].PipelineEndS)
      Last = S;
  }
  // A stage that ends the pipeline before the last one and still ends the
  // step (its tail is longer) is the one device the step is spent on.
  double Early = PC.Stages[Last].PipelineEndS - PC.Stages[Tail].PipelineEndS;
  if (Early > 0)
    Busiest = Tail;
  const StageCost &S = PC.Stages[Busiest];
  B.ComputeS = S.ComputeS;
  // tp overlap's hidden collectives and held compute (TPOverlapS).
  B.TPCommS = PC.Plan.NumMicroBatches * (S.TPCommS + S.TPOverlapS);
  B.EPCommS = PC.Plan.NumMicroBatches * S.EPCommS;
  B.CPCommS = PC.Plan.NumMicroBatches * S.CPCommS;
  B.BubbleS = S.BubbleS - (Early > 0 ? Early : 0.0);
  B.DPCommS = PC.Stages[Tail].DPExposedS;
  B.OptimizerS = PC.Stages[Tail].OptimizerS;
  B.OffloadS = PC.Plan.NumMicroBatches * S.Offload.ExposedPerMicroBatchS;
  return B;
}

bool isBetterPlan(const PlanCost &A, const PlanCost &B) {
  if (A.StepTimeS != B.StepTimeS)
    return A.StepTimeS < B.StepTimeS;
  if (A.Plan.Grad != B.Plan.Grad)
    return A.Plan.Grad == GradPrecision::FP32;
  if (A.Plan.Order != B.Plan.Order)
    return getAxisOrderIndex(A.Plan.Order) < getAxisOrderIndex(B.Plan.Order);
  if (A.Plan.ZeroStage != B.Plan.ZeroStage)
    return A.Plan.ZeroStage < B.Plan.ZeroStage;
  // On a tie, less offloaded: fewer kinds off HBM, nearer tiers.
  if (getOffloadDistance(A.Plan.Offload) != getOffloadDistance(B.Plan.Offload))
    return getOffloadDistance(A.Plan.Offload) <
           getOffloadDistance(B.Plan.Offload);
  // On a tie, the fewer overlaps changed from the defaults.
  auto Changed = [](const ParallelPlan &P) {
    return (int)P.TPOverlap + (int)!P.DPOverlap + (int)!P.PPOverlap;
  };
  if (Changed(A.Plan) != Changed(B.Plan))
    return Changed(A.Plan) < Changed(B.Plan);
  if (A.MaxMemoryBytes != B.MaxMemoryBytes)
    return A.MaxMemoryBytes < B.MaxMemoryBytes;
  return A.Plan.str() < B.Plan.str();
}

//===----------------------------------------------------------------------===//
// The space
//===----------------------------------------------------------------------===//

/// Layers between the leading prologue and trailing epilogue layers: what
/// the stage split (loom/Plan/StageSplit.h) splits evenly.
static unsigned getNumMiddleLayers(ArrayRef<LayerInfo> Layers) {
  LayerEnds E = getLayerEnds(Layers);
  return E.NumLayers - E.Prologue - E.Epilogue;
}

SearchSpace describeSearchSpace(const Graph &G, ArrayRef<LayerInfo> Layers,
                                const HardwareModel &HW,
                                const EvaluatorOptions &EO, uint64_t Devices) {
  SearchSpace S;
  S.Devices = Devices ? Devices : HW.getNumDevices();
  S.Batch = std::max<int64_t>(1, EO.Batch);
  S.NumLayers = std::max<size_t>(1, Layers.size());
  S.NumBlocks = Layers.empty() ? 1 : getNumMiddleLayers(Layers);
  S.Train = EO.Train;
  S.TPLimit = 1;
  for (const TopologyLevel &L : HW.Topology) {
    if (!L.AllowTP)
      break;
    S.TPLimit *= L.Size;
    S.TPLimitWhy = L.Name + " domain";
  }
  if (S.TPLimitWhy.empty())
    S.TPLimitWhy = "no topology level allows TP";
  // cp: divisors of the devices that leave every cp rank at least
  // MinCPTokens of the sequence (none without a bound sequence).
  if (EO.Seq > 0) {
    for (uint64_t C : getDivisors(S.Devices))
      if (C > 1 && C <= (uint64_t)EO.Seq / MinCPTokens && EO.Seq % C == 0)
        S.CPs.push_back(C);
    S.CPWhy = "seq " + std::to_string(EO.Seq) +
              " / cp >= " + std::to_string(MinCPTokens) + " tokens per rank";
  } else {
    S.CPWhy = "no sequence dim bound";
  }
  // The degrees the space holds: divisors of the devices (full plans) and
  // of the tp limit (plans leaving devices idle).
  std::vector<uint64_t> Degrees = getDivisors(S.Devices);
  for (uint64_t T : getDivisors(std::max<uint64_t>(1, S.TPLimit)))
    Degrees.push_back(T);
  llvm::erase_if(Degrees, [&](uint64_t T) { return T > S.TPLimit; });
  S.TPDiv = computeTPDivisibility(G, EO.Opset, Degrees);
  std::vector<ExpertGroup> Groups = findExperts(G, Layers);
  S.Experts = summarizeExperts(Groups);
  // The ep rules the sharder runs are the judge of what ep can split: a
  // writing they refuse at every degree (MoE layers with different expert
  // counts) is not searched at ep > 1, so that no plan is ranked that -o
  // then rejects.
  if (S.Experts.NumExperts > 1) {
    unsigned Smallest = 2;
    while (S.Experts.NumExperts % Smallest)
      ++Smallest;
    Expected<ExpertAxisRules> R = applyExpertRules(G, Groups, Smallest);
    if (!R)
      S.EPNotSearched = "ep > 1 is not searched: the ep rules refuse it (" +
                        toString(R.takeError()) + ")";
  }
  std::vector<const Node *> Indexed = findIndexRoutedExperts(G);
  if (!Indexed.empty())
    S.Experts.NotSplit =
        (describeIndexRoutedExperts(Indexed) +
         " (NonZero over the routing mask, e.g. '" +
         Indexed.front()->getName() +
         "'), planned at the expected tokens per expert; ep does not split "
         "them (each expert's token count is data: the rows NonZero picks), "
         "so they stay whole on every ep rank, and without other experts "
         "ep > 1 is not searched")
            .str();
  return S;
}

namespace {

/// Per-layer compute prefix sums at one (tp, mb, sp).
struct LayerPrefix {
  std::vector<PlanEvaluator::LayerTime> Layers;
  std::vector<double> F, B, A; // forward, backward, attention forward
};

struct Candidate {
  ParallelPlan Plan;
  /// Layers per stage (the even split or the balanced one).
  const std::vector<unsigned> *Counts = nullptr;
  const LayerPrefix *Prefix = nullptr;
  /// Of a base: the step bound before the tail (the pipeline's part), and
  /// its placements' tail and memory bounds (a candidate's bounds are
  /// read from there, CandidateOrder.h).
  double PipeBound = 0;
  const PlacementTable *Places = nullptr;
  /// The candidates that differ only in offload share a base (its index
  /// among the enumerated plans): consecutive in enumeration.
  unsigned Base = 0;
  /// The bases that differ only in the mesh order share a family (the
  /// index of the first, so below the number of bases): the order changes
  /// communication, not memory.
  unsigned Family = 0;
};
// Two cache lines: the search holds one per plan (557k for the 10T MoE at
// a training batch) and walks them in order several times.
static_assert(sizeof(Candidate) <= 128, "a base is two cache lines");

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

class Searcher {
public:
  Searcher(const PlanEvaluator &Eval, const Graph &G, const SearchSpace &Space,
           const HardwareModel &HW, const EvaluatorOptions &EO,
           const SearchOptions &Opts)
      : Eval(Eval), Space(Space), HW(HW), EO(EO), Opts(Opts) {
    if (const MemoryLevel *HBM = HW.getMemory("hbm")) {
      HBMUsable = HBM->getUsableCapacity().value();
      Reserved = HBM->Reserved.value();
    }
    if (const MemoryLevel *HBM = HW.getMemory("hbm"))
      HBMBandwidth = HBM->Bandwidth.value();
    if (const MemoryLevel *Host = HW.getMemory("host")) {
      HostCap = Host->getUsableCapacity().value();
      HostBandwidth = Host->Bandwidth.value();
      if (Host->UpdateBandwidth)
        HostUpdateBandwidth = Host->UpdateBandwidth->value();
    }
    if (const MemoryLevel *SSD = HW.getMemory("ssd")) {
      SSDCap = SSD->getUsableCapacity().value();
      SSDBandwidth = SSD->Bandwidth.value();
    }
    // Parameters as the evaluator counts them: distinct, read by a node,
    // holding HBM (not a table served only from SSD); expert parameters
    // apart (divided by ep); embedding tables the plans shard over dp
    // apart too (their shards are costed per plan).
    DenseSet<const Value *> Seen, Expert;
    for (const ExpertGroup &EG : Eval.getExpertGroups()) {
      Expert.insert(EG.StackedParams.begin(), EG.StackedParams.end());
      for (const auto &Ps : EG.BranchParams)
        Expert.insert(Ps.begin(), Ps.end());
    }
    for (const auto &NP : G.getNodes())
      for (const Value *V : NP->getInputs())
        if (V && V->isParameter() && Eval.holdsHBM(V) &&
            !Eval.isShardedTable(
                V, Opts.Fixed.Emb.getValueOr(EmbeddingMode::Auto)) &&
            Seen.insert(V).second)
          (Expert.count(V) ? ExpertParams : TotalParams) +=
              V->Type.getNumElements().getValueOr(0);
    EmbeddingMode Mode = Opts.Fixed.Emb.getValueOr(EmbeddingMode::Auto);
    OrderKeepsMemory =
        none_of(Eval.getEmbeddingTables(), [&](const EmbeddingTable &T) {
          return Eval.isShardedTable(T.Weight, Mode);
        });
  }

  /// Every candidate, in enumeration order (each base's placements in a
  /// row).
  void enumerate(std::vector<Candidate> &Out);
  /// One candidate per base (the plan without offload); its placements are
  /// Offs.
  void enumerateBases(std::vector<Candidate> &Bases);
  /// The candidates at one (tp, pp, dp) and cp.
  void enumerateAtDegrees(const MeshDegrees &MD, unsigned CP,
                          const Optional<CommOverlap> &Ov,
                          std::vector<Candidate> &Out);
  /// Searches; when nothing fits, finds the memory floors unless
  /// \p Floors is false (addFloors then can, later).
  Expected<SearchResult> run(bool Floors = true);
  Error addFloors(SearchResult &R) const;
  /// Takes the plans \p Other enumerated (the same space and options but
  /// for the offload placements, which this searcher's Offloads give):
  /// moved, not copied (at a training batch the 10T MoE has hundreds of
  /// thousands); returnBases hands them back, bound to \p Other's
  /// placements again.
  void reuseBases(Searcher &Other);
  void returnBases(Searcher &Other);
  /// The offload placements enumerated (when --plan fixes none).
  std::vector<OffloadTiers> Offloads = {OffloadTiers()};

private:
  const LayerPrefix &getPrefix(unsigned TP, unsigned MB, bool SP, unsigned EP,
                               unsigned CP);
  const std::vector<unsigned> &getEvenCounts(unsigned PP);
  const std::vector<unsigned> *getBalancedCounts(const LayerPrefix &LP,
                                                 unsigned PP, Recompute RC);
  double pipelineBound(const Candidate &C) const;
  double tailBound(const ParallelPlan &P) const;
  double memoryBound(const ParallelPlan &P) const;
  double stageBound(const PlanCost &PC) const;
  std::string describeGroups(const ParallelPlan &P) const;
  Expected<Optional<PlanCost>>
  bestOnAllDevices(const std::vector<Candidate> &Bases) const;
  /// How a candidate's layers are split into stages: vpp, the layers per
  /// stage, and whether they are balanced on compute (not the even split).
  struct StageLayout {
    unsigned VPP;
    const std::vector<unsigned> *Counts;
    bool Balanced;
  };
  // The steps of enumerate().
  /// The stage layouts to try at \p PP stages and \p NMB micro-batches:
  /// --plan's stages, or the even split, the split balanced on \p LP's
  /// compute (at recompute \p RC), and each vpp Megatron-LM allows.
  SmallVector<StageLayout, 8>
  getStageLayouts(const LayerPrefix &LP,
                  const std::vector<unsigned> &EvenCounts, unsigned PP,
                  uint64_t NMB, Recompute RC);
  /// The bases of \p Proto (degrees, batch split, recompute, ZeRO and
  /// gradient precision set) on layout \p Lay: one per mesh order in
  /// \p Orders and overlap setting (each stands for its plan at every
  /// offload placement).
  void addCandidates(const ParallelPlan &Proto, const StageLayout &Lay,
                     const LayerPrefix &LP, ArrayRef<AxisOrder> Orders,
                     const Optional<CommOverlap> &Ov,
                     std::vector<Candidate> &Out) const;
  // The steps of run().
  void boundCandidates(std::vector<Candidate> &Bases);
  const PlacementTable &getPlacements(const ParallelPlan &P);
  /// Base \p B at its placement \p E.
  Candidate getCandidate(const std::vector<Candidate> &Bases, unsigned B,
                         const PlacementTable::Entry &E) const;
  /// Visits the candidates of \p Bases (those \p Take accepts) whose
  /// memory bound fits, in increasing (step bound, enumeration index)
  /// while \p Visit returns true; returns the item it stopped at, if any.
  template <typename TakeFn, typename VisitFn>
  Expected<Optional<CandidateQueue::Item>>
  visitInOrder(const std::vector<Candidate> &Bases, TakeFn Take,
               VisitFn Visit) const;
  /// Candidates over the memory bound that the visit reached before it
  /// stopped (all, without \p Stop): those before \p Last, the last
  /// candidate visited, and those after it up to Stop whose step bound
  /// does not exceed \p Thr, the threshold the visit stopped at.
  uint64_t countOverMemoryBefore(const std::vector<Candidate> &Bases,
                                 const Optional<CandidateQueue::Item> &Stop,
                                 const Optional<CandidateQueue::Item> &Last,
                                 double Thr) const;
  /// A candidate visited: its base and placement.
  struct VisitedPlacement {
    unsigned Base;
    OffloadTiers Off;
  };
  Expected<bool> isDominatedTwin(const Candidate &C,
                                 const VisitedPlacement *Prev,
                                 bool PrevSimulated, unsigned LastRank,
                                 unsigned K, BaseStageCache &Cache) const;
  Expected<const PlanCost *> costStagesIfFits(const Candidate &C,
                                              BaseStageCache &Cache,
                                              PlanCost &Scratch) const;
  Error rankCandidates(const std::vector<Candidate> &Bases, Ranking &Rank,
                       SearchResult &R) const;
  Error rankAll(const std::vector<Candidate> &Bases, Ranking &Rank,
                SearchResult &R) const;
  Error explainWinner(const std::vector<Candidate> &Bases, const Ranking &Rank,
                      SearchResult &R) const;
  Error findMemoryFloors(const std::vector<Candidate> &Bases,
                         SearchResult &R) const;

  const PlanEvaluator &Eval;
  const SearchSpace &Space;
  const HardwareModel &HW;
  const EvaluatorOptions &EO;
  const SearchOptions &Opts;
  /// Non-expert and expert parameters.
  double HBMUsable = 0, Reserved = 0, TotalParams = 0, ExpertParams = 0;
  /// Usable host DRAM and SSD per device (offload).
  double HostCap = 0, SSDCap = 0;
  /// Per device: HBM, PCIe to the host and NVMe bandwidth, and the host
  /// CPU's optimizer throughput (0 where the YAML gives none).
  double HBMBandwidth = 0, HostBandwidth = 0, SSDBandwidth = 0,
         HostUpdateBandwidth = 0;
  std::map<std::tuple<unsigned, unsigned, bool, unsigned, unsigned>,
           LayerPrefix>
      Prefixes;
  std::map<unsigned, std::vector<unsigned>> Even;
  std::map<std::tuple<const LayerPrefix *, unsigned, int>,
           std::unique_ptr<std::vector<unsigned>>>
      Balanced;
  /// The placements enumerated, and their bounds per (tp, pp, dp, ep,
  /// ZeRO stage, gradient precision).
  void setPlacements();
  std::vector<OffloadTiers> Offs;
  /// The bases of the last run (or those reuseBases took).
  std::vector<Candidate> Bases;
  bool HaveBases = false, Reused = false;
  /// Set while enumerate's first pass counts the bases instead of adding
  /// them.
  uint64_t *CountOnly = nullptr;
  std::map<
      std::tuple<unsigned, unsigned, unsigned, unsigned, unsigned, int, int>,
      PlacementTable>
      Tables;

public:
  uint64_t Partitions = 0;
  /// Offload placements per plan in the last enumeration.
  size_t NumPlacements = 1;
  /// The candidates of the bases bound last: their placements the
  /// framework can run.
  uint64_t NumCandidates = 0;
  /// Whether a plan's memory is the same at every mesh order: no plan
  /// shards an embedding table (their shards are placed by cost, which
  /// the order changes).
  bool OrderKeepsMemory = true;
};

const LayerPrefix &Searcher::getPrefix(unsigned TP, unsigned MB, bool SP,
                                       unsigned EP, unsigned CP) {
  auto Key = std::make_tuple(TP, MB, SP, EP, CP);
  auto It = Prefixes.find(Key);
  if (It != Prefixes.end())
    return It->second;
  LayerPrefix &LP = Prefixes[Key];
  unsigned NL = Eval.getNumLayers();
  LP.F.assign(NL + 1, 0.0);
  LP.B = LP.A = LP.F;
  for (unsigned L = 0; L < NL; ++L) {
    PlanEvaluator::LayerTime T = Eval.getLayerTime(L, TP, MB, SP, EP, CP);
    LP.Layers.push_back(T);
    LP.F[L + 1] = LP.F[L] + T.ForwardS;
    LP.B[L + 1] = LP.B[L] + T.BackwardS;
    LP.A[L + 1] = LP.A[L] + T.AttentionForwardS;
  }
  return LP;
}

const std::vector<unsigned> &Searcher::getEvenCounts(unsigned PP) {
  auto It = Even.find(PP);
  if (It != Even.end())
    return It->second;
  ParallelPlan P;
  P.PP = PP;
  Expected<std::vector<unsigned>> C = Eval.getStageLayers(P);
  std::vector<unsigned> Counts;
  if (C)
    Counts = std::move(*C);
  else
    consumeError(C.takeError());
  return Even[PP] = std::move(Counts);
}

const std::vector<unsigned> *
Searcher::getBalancedCounts(const LayerPrefix &LP, unsigned PP, Recompute RC) {
  auto Key = std::make_tuple(&LP, PP, (int)RC);
  auto It = Balanced.find(Key);
  if (It != Balanced.end())
    return It->second.get();
  unsigned NL = LP.Layers.size();
  std::vector<double> Work(NL);
  for (unsigned L = 0; L < NL; ++L)
    Work[L] = getLayerWork(LP.Layers[L], RC, EO.Train);
  ++Partitions;
  auto Counts =
      std::make_unique<std::vector<unsigned>>(partitionStages(Work, PP));
  const std::vector<unsigned> &E = getEvenCounts(PP);
  // The even split is a candidate already; keep the balanced one only if
  // it differs and is strictly better balanced.
  if (*Counts == E || getBottleneck(Work, *Counts) >= getBottleneck(Work, E))
    Counts.reset();
  return (Balanced[Key] = std::move(Counts)).get();
}

double Searcher::pipelineBound(const Candidate &C) const {
  const LayerPrefix &LP = *C.Prefix;
  const ParallelPlan &P = C.Plan;
  double V = P.VirtualStages, M = P.NumMicroBatches;
  double PreF = 0, PreB = 0, Bound = 0;
  unsigned First = 0;
  for (unsigned Count : *C.Counts) {
    unsigned End = First + Count;
    double F = LP.F[End] - LP.F[First];
    double B = 0;
    if (EO.Train) {
      B = LP.B[End] - LP.B[First];
      if (P.RC == Recompute::Full)
        B += F;
      else if (P.RC == Recompute::Selective)
        B += LP.A[End] - LP.A[First];
    }
    Bound = std::max(Bound, PreF / V + M * (F + B) + PreB / V);
    PreF += F;
    PreB += B;
    First = End;
  }
  return Bound;
}

double Searcher::tailBound(const ParallelPlan &P) const {
  // The step ends with max over stages of (exposed DP sync + optimizer
  // phase) after the pipeline; that is at least the optimizer phase of the
  // average stage (every term below is linear in the stage's parameters
  // with non-negative coefficients, so the busiest stage has at least the
  // average; parameters as memoryBound counts them). Per stage the
  // evaluator (PlanCost.cpp) and applyOffload (Offload.cpp) charge:
  //  - everything in HBM: AdamW, 28 B per updated parameter over HBM;
  //  - opt in HBM, the rest offloaded: the gradients back from their tier,
  //    the HBM update, the weights out to theirs;
  //  - opt off HBM: the updated partition's gradients still in HBM down
  //    to the host, then the longer of the host CPU's update (28 B per
  //    updated parameter) and, for opt:ssd, the states read and written
  //    over NVMe (2 x 12 B per parameter after ZeRO-1), then the
  //    partition's weights back unless on the host (min(whole, partition)
  //    is the partition: ZeRO-1 splits them as it splits the update).
  if (!EO.Train)
    return 0;
  double TPPP = (double)P.TP * P.PP;
  double Dense = TotalParams / TPPP, Experts = ExpertParams / (TPPP * P.EP);
  // ZeRO partitions over dp x cp (cp ranks hold the same weights).
  double DPCP = (double)P.DP * P.CP, DPE = DPCP / P.EP;
  // Per-parameter bytes after ZeRO, summed over dense and expert parameters.
  auto Sum = [&](double BytesPerParam, unsigned MinZero) {
    bool Part = P.ZeroStage >= MinZero;
    return Dense * BytesPerParam / (Part ? DPCP : 1.0) +
           Experts * BytesPerParam / (Part ? DPE : 1.0);
  };
  double Updated = Sum(1.0, 1), W = Sum(EO.WeightBytesPerParam, 3),
         G = Sum(P.getGradBytes(), 2), O = Sum(EO.OptimizerBytesPerParam, 1);
  auto Secs = [](double Bytes, double BW) {
    return Bytes > 0 && BW > 0 ? Bytes / BW : 0.0;
  };
  auto BW = [&](MemoryTier T) {
    return T == MemoryTier::SSD ? SSDBandwidth : HostBandwidth;
  };
  const OffloadTiers &T = P.Offload;
  double HBMUpdate = Secs(Updated * 28, HBMBandwidth);
  if (!T.any())
    return HBMUpdate;
  if (T.Opt == MemoryTier::HBM)
    return (T.Grad != MemoryTier::HBM ? Secs(G, BW(T.Grad)) : 0.0) + HBMUpdate +
           (T.Param != MemoryTier::HBM ? Secs(W, BW(T.Param)) : 0.0);
  double GPart = Sum(P.getGradBytes(), 1),
         WPart = Sum(EO.WeightBytesPerParam, 1);
  double Pre = T.Grad == MemoryTier::HBM ? Secs(GPart, HostBandwidth) : 0.0;
  double Update = Secs(Updated * 28, HostUpdateBandwidth);
  if (T.Opt == MemoryTier::SSD)
    Update = std::max(Update, Secs(2 * O, SSDBandwidth));
  double Post = T.Param == MemoryTier::HBM   ? Secs(WPart, HostBandwidth)
                : T.Param == MemoryTier::SSD ? Secs(W, SSDBandwidth)
                                             : 0.0;
  return Pre + Update + Post;
}

double Searcher::memoryBound(const ParallelPlan &P) const {
  // Expert parameters: 1/ep of them, ZeRO over the dp/ep ranks.
  // Offloaded kinds leave only buffers in HBM: bound them by 0.
  const OffloadTiers &Off = P.Offload;
  auto InHBM = [](MemoryTier T) { return T == MemoryTier::HBM ? 1.0 : 0.0; };
  auto PerParam = [&](double DP) {
    double B = EO.WeightBytesPerParam / (P.ZeroStage >= 3 ? DP : 1.0) *
               InHBM(Off.Param);
    if (EO.Train)
      B += P.getGradBytes() / (P.ZeroStage >= 2 ? DP : 1.0) * InHBM(Off.Grad) +
           EO.OptimizerBytesPerParam / (P.ZeroStage >= 1 ? DP : 1.0) *
               InHBM(Off.Opt);
    return B;
  };
  double TPPP = (double)P.TP * P.PP;
  double DPCP = (double)P.DP * P.CP; // ZeRO's group: dp x cp
  double Bytes = TotalParams / TPPP * PerParam(DPCP) +
                 ExpertParams / (TPPP * P.EP) * PerParam(DPCP / P.EP);
  if (Off.any() && EO.Train) {
    // The state offloaded must fit its tier: a lower bound as above (the
    // parameters spread evenly), else the candidate is out.
    auto InTier = [&](MemoryTier Tier, double DP) {
      auto Is = [&](MemoryTier T) { return T == Tier ? 1.0 : 0.0; };
      return EO.WeightBytesPerParam / (P.ZeroStage >= 3 ? DP : 1.0) *
                 Is(Off.Param) +
             P.getGradBytes() / (P.ZeroStage >= 2 ? DP : 1.0) * Is(Off.Grad) +
             EO.OptimizerBytesPerParam / (P.ZeroStage >= 1 ? DP : 1.0) *
                 Is(Off.Opt);
    };
    for (auto [Tier, Cap] : {std::make_pair(MemoryTier::Host, HostCap),
                             std::make_pair(MemoryTier::SSD, SSDCap)})
      if (TotalParams / TPPP * InTier(Tier, DPCP) +
              ExpertParams / (TPPP * P.EP) * InTier(Tier, DPCP / P.EP) >
          Cap)
        return INFINITY;
  }
  bool AnyComm = P.TP > 1 || DPCP > 1 || P.PP > 1;
  return (Bytes + (AnyComm ? EO.CommBufferBytes : 0.0) + Reserved) * (1 - 1e-9);
}

double Searcher::stageBound(const PlanCost &PC) const {
  const ParallelPlan &P = PC.Plan;
  double V = P.VirtualStages, M = P.NumMicroBatches;
  // A stage ends no earlier than its first input's arrival plus its busy
  // time, and its tail (exposed DP sync, optimizer) follows its own end;
  // in training the first stage ends last, after every later stage's
  // backward of the last micro-batch.
  double PreF = 0, PreB = 0, Bound = 0, Last = 0;
  for (unsigned S = 0; S < PC.Stages.size(); ++S) {
    const StageCost &SC = PC.Stages[S];
    // The overlaps' part (negative where tp overlap hides collectives).
    double Busy = M * (SC.ForwardS + SC.BackwardS + SC.TPCommS + SC.EPCommS +
                       SC.CPCommS + SC.OverlapFwdS + SC.OverlapBwdS);
    Bound = std::max(Bound, PreF + Busy + SC.DPExposedS + SC.OptimizerS);
    Last = std::max(Last, PreF + Busy + (EO.Train ? PreB : 0.0));
    double Transfer = SC.SendLagS;
    PreF += SC.ForwardS / V + Transfer;
    PreB += SC.BackwardS / V + Transfer;
  }
  if (EO.Train && !PC.Stages.empty())
    Last += PC.Stages[0].DPExposedS + PC.Stages[0].OptimizerS;
  return std::max(Bound, Last) * (1 - 1e-9);
}

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

/// The settings of one overlap kind to try: the fixed one; both (the
/// default first) where the hardware offers a share and the plan has the
/// communication; else the default.
static SmallVector<bool, 2> getOverlapChoices(const Optional<bool> &Fixed,
                                              bool Default, bool Offered,
                                              bool Relevant) {
  if (Fixed)
    return {*Fixed};
  if (Offered && Relevant)
    return {Default, !Default};
  return {Default};
}

SmallVector<Searcher::StageLayout, 8>
Searcher::getStageLayouts(const LayerPrefix &LP,
                          const std::vector<unsigned> &EvenCounts, unsigned PP,
                          uint64_t NMB, Recompute RC) {
  const PlanSpec &F = Opts.Fixed;
  SmallVector<StageLayout, 8> Layouts;
  if (!F.StageLayers.empty()) {
    Layouts.push_back({1, &F.StageLayers, false});
    return Layouts;
  }
  Layouts.push_back({1, &EvenCounts, false});
  if (Opts.BalanceStages && PP > 1)
    if (const std::vector<unsigned> *B = getBalancedCounts(LP, PP, RC))
      Layouts.push_back({1, B, true});
  unsigned Mid = Space.NumBlocks;
  if (PP > 1 && NMB % PP == 0 && Mid && Mid % PP == 0)
    for (uint64_t V : getDivisors(Mid / PP))
      if (V > 1)
        Layouts.push_back({(unsigned)V, &EvenCounts, false});
  return Layouts;
}

void Searcher::addCandidates(const ParallelPlan &Proto, const StageLayout &Lay,
                             const LayerPrefix &LP, ArrayRef<AxisOrder> Orders,
                             const Optional<CommOverlap> &Ov,
                             std::vector<Candidate> &Out) const {
  const PlanSpec &F = Opts.Fixed;
  SmallVector<bool, 2> TPOvs =
      getOverlapChoices(F.TPOverlap, false, Ov && Ov->TP, Proto.TP > 1);
  // dp and pp overlap at share 0 never lose to waiting (Cost/Overlap.h:
  // max(C, W) <= W + C; a send waited for arrives no earlier): only on is
  // tried.
  SmallVector<bool, 2> DPOvs = getOverlapChoices(
      F.DPOverlap, true, Ov && Ov->DP && *Ov->DP > 0, EO.Train && Proto.DP > 1);
  SmallVector<bool, 2> PPOvs = getOverlapChoices(
      F.PPOverlap, true, Ov && Ov->PP && *Ov->PP > 0, Proto.PP > 1);
  // Per overlap setting, its family: the index of its first base (so
  // below Out.size(), and distinct whichever settings the framework runs).
  SmallVector<unsigned, 8> Families(TPOvs.size() * DPOvs.size() * PPOvs.size(),
                                    ~0u);
  for (const AxisOrder &Order : Orders) {
    unsigned Setting = 0;
    for (bool TPOv : TPOvs)
      for (bool DPOv : DPOvs)
        for (bool PPOv : PPOvs) {
          // tp overlap needs TP communication.
          if (TPOv && Proto.TP == 1)
            continue;
          unsigned &Family = Families[Setting++];
          Candidate C;
          C.Plan = Proto;
          ParallelPlan &P = C.Plan;
          P.Order = Order;
          P.TPOverlap = TPOv;
          P.DPOverlap = DPOv;
          P.PPOverlap = PPOv;
          // Only what the framework can run (offload is checked per
          // placement, getPlacements; no rule reads the stages' layers).
          if (!isRunnable(Opts, Space, P))
            continue;
          if (CountOnly) {
            ++*CountOnly;
            continue;
          }
          C.Base = Out.size();
          if (Family == ~0u)
            Family = C.Base;
          C.Family = Family;
          if (Lay.Balanced || !F.StageLayers.empty())
            P.StageLayers = *Lay.Counts;
          C.Counts = Lay.Counts;
          C.Prefix = &LP;
          Out.push_back(std::move(C));
        }
  }
}

void Searcher::enumerate(std::vector<Candidate> &Out) {
  std::vector<Candidate> Bases;
  enumerateBases(Bases);
  Out.reserve(Bases.size() * Offs.size());
  for (const Candidate &B : Bases)
    for (const OffloadTiers &Off : Offs) {
      Out.push_back(B);
      Out.back().Plan.Offload = Off;
    }
}

void Searcher::setPlacements() {
  Offs = Offloads;
  if (Opts.Fixed.Offload)
    Offs.assign(1, *Opts.Fixed.Offload);
  NumPlacements = Offs.size();
}

void Searcher::reuseBases(Searcher &Other) {
  Bases = std::move(Other.Bases);
  Partitions = Other.Partitions;
  HaveBases = Reused = Other.HaveBases;
}

void Searcher::returnBases(Searcher &Other) {
  Other.Bases = std::move(Bases);
  // Other's placement tables hold every plan's already (its run built
  // them): the lookups find them.
  for (Candidate &C : Other.Bases)
    C.Places = &Other.getPlacements(C.Plan);
}

void Searcher::enumerateBases(std::vector<Candidate> &Out) {
  const PlanSpec &F = Opts.Fixed;
  uint64_t N = Space.Devices;
  setPlacements();
  // Overlaps (loom/Cost/Overlap.h): each searched where the hardware gives
  // its share of compute and the plan has that communication; else fixed
  // or its default.
  const DeviceClass *Core = HW.getClass("aicore");
  Optional<CommOverlap> Ov = Core ? Core->Overlap : None;
  DegreeSpace DS;
  DS.Devices = N;
  DS.Batch = Space.Batch;
  DS.NumLayers = Space.NumLayers;
  DS.NumBlocks = Space.NumBlocks;
  DS.TPLimit = Space.TPLimit;
  DS.TPSplitSizes = Space.TPDiv.Sizes;
  DS.StaticBatch = Space.StaticBatch;
  // cp takes its ranks first (it sits right outside tp); the other degrees
  // share what is left. Two passes: the first only counts the bases, so
  // the second writes them once into storage of their number (a vector
  // grown by doubling moved every base at each step and touched twice
  // the memory: half the enumeration of the 10T MoE's 556,368 bases).
  std::vector<std::pair<unsigned, MeshDegrees>> Meshes;
  for (unsigned CP : F.CP ? std::vector<unsigned>{*F.CP} : Space.CPs) {
    if (N % CP)
      continue;
    DS.Devices = N / CP;
    for (const MeshDegrees &MD : enumerateMeshDegrees(DS, F, Opts.AllowIdle))
      Meshes.emplace_back(CP, MD);
  }
  uint64_t Count = 0;
  CountOnly = &Count;
  for (const auto &M : Meshes)
    enumerateAtDegrees(M.second, M.first, Ov, Out);
  CountOnly = nullptr;
  Out.reserve(Out.size() + Count);
  for (const auto &M : Meshes)
    enumerateAtDegrees(M.second, M.first, Ov, Out);
}

void Searcher::enumerateAtDegrees(const MeshDegrees &MD, unsigned CP,
                                  const Optional<CommOverlap> &Ov,
                                  std::vector<Candidate> &Out) {
  const PlanSpec &F = Opts.Fixed;
  uint64_t Batch = Space.Batch;
  std::vector<Recompute> RCs = {Recompute::None};
  std::vector<unsigned> Zeros = {0};
  std::vector<GradPrecision> Grads = {GradPrecision::FP32};
  if (EO.Train) {
    RCs = {Recompute::None, Recompute::Selective, Recompute::Full};
    Zeros = {0, 1, 2, 3};
    // 16-bit gradient reduction belongs to the 16-bit recipes
    // (loom/Plan/Precision.h).
    if (EO.Allows16BitGrads)
      Grads = {GradPrecision::FP32, GradPrecision::BF16};
  }
  {
    uint64_t TP = MD.TP, PP = MD.PP, DP = MD.DP;
    const std::vector<unsigned> &EvenCounts = getEvenCounts(PP);
    if (EvenCounts.empty())
      return;
    // The cp algorithms this model can take at this tp.
    SmallVector<CPAlgo, 2> Algos;
    for (CPAlgo A : {CPAlgo::Ring, CPAlgo::A2A}) {
      ParallelPlan Probe;
      Probe.TP = TP;
      Probe.CP = CP;
      Probe.CPA = A;
      if ((CP == 1 && A != CPAlgo::Ring) || (CP > 1 && F.CPA && *F.CPA != A) ||
          !Eval.getCPIllegalReason(Probe).empty())
        continue;
      Algos.push_back(A);
    }
    if (Algos.empty())
      return;
    // ep: the inner part of dp, dividing every MoE layer's experts.
    for (uint64_t EP : getDivisors(DP)) {
      if (!isExpertSplitLegal(Space.Experts.NumExperts, EP) ||
          (F.EP && *F.EP != EP) || (EP > 1 && !Space.EPNotSearched.empty()))
        continue;
      // The distinct meshes (a fixed order matches the one it is the
      // same mesh as).
      SmallVector<AxisOrder, 6> Orders = getDistinctAxisOrders(EP, DP / EP, PP);
      if (F.Order) {
        AxisOrder Want = canonicalAxisOrder(*F.Order, EP, DP / EP, PP);
        Orders.assign(1, Want);
      }
      for (uint64_t MB : getDivisors(Batch / DP)) {
        if (F.MicroBatchSize && *F.MicroBatchSize != MB)
          continue;
        uint64_t NMB = Batch / (DP * MB);
        if ((F.NumMicroBatches && *F.NumMicroBatches != NMB) ||
            !isBatchSplitEmittable(!Space.StaticBatch, DP, NMB))
          continue;
        // Plans count micro-batches and their size in 32 bits (what
        // completePlan accepts); a bigger count is a larger micro-batch.
        if (NMB > std::numeric_limits<unsigned>::max() ||
            MB > std::numeric_limits<unsigned>::max())
          continue;
        for (bool SP : {false, true}) {
          if ((SP && TP == 1) || (F.SP && *F.SP != SP))
            continue;
          const LayerPrefix &LP = getPrefix(TP, MB, SP, EP, CP);
          for (Recompute RC : RCs) {
            if (F.RC && *F.RC != RC)
              continue;
            for (const StageLayout &Lay :
                 getStageLayouts(LP, EvenCounts, PP, NMB, RC)) {
              if (F.VirtualStages && *F.VirtualStages != Lay.VPP)
                continue;
              for (unsigned Z : Zeros) {
                // ZeRO partitions over dp x cp: with one rank it is
                // plain data.
                if ((F.ZeroStage && *F.ZeroStage != Z) || (Z && DP * CP == 1))
                  continue;
                for (GradPrecision GP : Grads) {
                  // Without a DP sync there is no reduction to narrow.
                  if ((F.Grad && *F.Grad != GP) ||
                      (GP == GradPrecision::BF16 && DP * CP == 1))
                    continue;
                  ParallelPlan P;
                  P.TP = TP;
                  P.PP = PP;
                  P.DP = DP;
                  P.EP = EP;
                  P.SP = SP;
                  P.MicroBatchSize = MB;
                  P.NumMicroBatches = NMB;
                  P.VirtualStages = Lay.VPP;
                  P.RC = RC;
                  P.ZeroStage = Z;
                  P.Grad = GP;
                  P.Emb = F.Emb.getValueOr(EmbeddingMode::Auto);
                  P.CP = CP;
                  for (CPAlgo A : Algos) {
                    P.CPA = A;
                    addCandidates(P, Lay, LP, Orders, Ov, Out);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
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

/// The key of a plan's placement table: the framework's offload rules read
/// the degrees, the ZeRO stage and recompute, the bounds the degrees, the
/// ZeRO stage and the gradient precision.
static auto getPlacementKey(const ParallelPlan &P) {
  return std::make_tuple(P.TP, P.PP, P.DP, P.EP, P.ZeroStage, (int)P.Grad,
                         (int)P.RC);
}

static bool haveSamePlacements(const ParallelPlan &A, const ParallelPlan &B) {
  return getPlacementKey(A) == getPlacementKey(B);
}

const PlacementTable &Searcher::getPlacements(const ParallelPlan &P) {
  auto Key = getPlacementKey(P);
  auto It = Tables.find(Key);
  if (It != Tables.end())
    return It->second;
  std::vector<double> Tails, Memories;
  std::vector<unsigned> Runnable;
  ParallelPlan Q = P;
  for (unsigned I = 0; I < Offs.size(); ++I) {
    Q.Offload = Offs[I];
    if (!isRunnable(Opts, Space, Q))
      continue;
    Runnable.push_back(I);
    Tails.push_back(tailBound(Q));
    Memories.push_back(memoryBound(Q));
  }
  PlacementTable T =
      PlacementTable::build(Tails, Memories, HBMUsable, Opts.Prune);
  for (PlacementTable::Entry &E : T.Entries)
    E.Off = Runnable[E.Off];
  return Tables[Key] = std::move(T);
}

/// Computes every base's pipeline bound and its placements' tail and
/// memory bounds (a candidate's step bound is the sum, combineStepBound).
void Searcher::boundCandidates(std::vector<Candidate> &Bases) {
  NumCandidates = 0;
  const PlacementTable *Last = nullptr;
  for (unsigned B = 0; B < Bases.size(); ++B) {
    Candidate &C = Bases[B];
    if (!Reused) // reused bases keep theirs: it does not read offload
      C.PipeBound = pipelineBound(C);
    // Consecutive bases mostly differ in what the table's key does not
    // hold (mesh order, overlaps, stage layout): the previous one's table
    // saves most lookups.
    C.Places = Last && haveSamePlacements(Bases[B - 1].Plan, C.Plan)
                   ? Last
                   : &getPlacements(C.Plan);
    Last = C.Places;
    NumCandidates += C.Places->Entries.size();
  }
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

Error checkFixed(const PlanSpec &F, const SearchSpace &S,
                 ArrayRef<const FrameworkProfile *> Frameworks) {
  // What --plan fixes must be something the framework runs.
  for (const FrameworkProfile *FP : Frameworks)
    if (Error E = checkSpec(*FP, F, {S.NumBlocks}))
      return createStringError(inconvertibleErrorCode(), "--plan: %s",
                               toString(std::move(E)).c_str());
  // tp overlap needs TP communication: tp > 1, given or possible.
  if (F.TPOverlap && *F.TPOverlap && ((F.TP && *F.TP == 1) || S.TPLimit <= 1))
    return createStringError(inconvertibleErrorCode(),
                             "--plan tp_overlap=on needs tp > 1 (there is no "
                             "TP communication to overlap)");
  if (F.Grad && *F.Grad != GradPrecision::FP32 && !S.Train)
    return createStringError(inconvertibleErrorCode(),
                             "--plan grad=%s: inference has no gradients",
                             getGradPrecisionName(*F.Grad).str().c_str());
  if (F.EP && *F.EP != 1 && !S.Experts.NumExperts &&
      !S.Experts.NotSplit.empty())
    return createStringError(inconvertibleErrorCode(),
                             "--plan ep=%u: the model's experts are not split "
                             "by ep: %s; use ep=1",
                             *F.EP, S.Experts.NotSplit.c_str());
  if (F.EP && *F.EP != 1 && !S.Experts.NumExperts)
    return createStringError(inconvertibleErrorCode(),
                             "--plan ep=%u: the model has no experts (no "
                             "stacked [E, d, f] expert weights and no "
                             "unrolled expert branches); use ep=1",
                             *F.EP);
  if (F.EP && S.Experts.NumExperts &&
      !isExpertSplitLegal(S.Experts.NumExperts, *F.EP))
    return createStringError(inconvertibleErrorCode(),
                             "--plan ep=%u does not divide the %u experts "
                             "per MoE layer",
                             *F.EP, S.Experts.NumExperts);
  if (F.EP && *F.EP != 1 && !S.EPNotSearched.empty())
    return createStringError(inconvertibleErrorCode(), "--plan ep=%u: %s",
                             *F.EP, S.EPNotSearched.c_str());
  if (!F.StageLayers.empty()) {
    unsigned Sum = 0;
    for (unsigned C : F.StageLayers)
      Sum += C;
    if (Sum != S.NumLayers)
      return createStringError(inconvertibleErrorCode(),
                               "--plan stages=...: %u layers in all, but the "
                               "model has %u layers",
                               Sum, S.NumLayers);
  }
  return Error::success();
}

} // namespace

/// Embedding tables sharded over dp are emitted with one role per dp rank
/// (lib/Shard/RoleGraphs.cpp), which ep's roles (an ep rank per dp rank)
/// do not combine with yet: ep > 1 is not searched when a plan shards one.
static void noteEPNotSearched(SearchSpace &S, const PlanEvaluator &Eval,
                              const PlanSpec &F) {
  if (!S.Experts.NumExperts)
    return;
  EmbeddingMode M = F.Emb.getValueOr(EmbeddingMode::Auto);
  for (const EmbeddingTable &T : Eval.getEmbeddingTables())
    if (Eval.isShardedTable(T.Weight, M)) {
      S.EPNotSearched =
          "ep > 1 is not searched: embedding table '" + T.Name +
          "' is sharded over dp (emb=" + getEmbeddingModeName(M).str() +
          ") and sharded tables are emitted at ep=1 only";
      return;
    }
}

bool isRunnable(const SearchOptions &Opts, const SearchSpace &Space,
                const ParallelPlan &P) {
  for (const FrameworkProfile *F : Opts.Frameworks)
    if (!canRun(*F, P, {Space.NumBlocks}))
      return false;
  return true;
}

/// The space the search walks: the model's and hardware's bounds, and what
/// --plan and the options fix.
static SearchSpace describeSpace(const PlanEvaluator &Eval, const Graph &G,
                                 ArrayRef<LayerInfo> Layers,
                                 const HardwareModel &HW,
                                 const EvaluatorOptions &EO,
                                 const SearchOptions &Opts) {
  SearchSpace Space = describeSearchSpace(G, Layers, HW, EO, Opts.Devices);
  Space.NumLayers = Eval.getNumLayers();
  Space.StaticBatch = Opts.StaticBatch;
  noteEPNotSearched(Space, Eval, Opts.Fixed);
  return Space;
}

std::vector<ParallelPlan>
enumerateCandidates(const PlanEvaluator &Eval, const Graph &G,
                    ArrayRef<LayerInfo> Layers, const HardwareModel &HW,
                    const EvaluatorOptions &EO, const SearchOptions &Opts) {
  SearchSpace Space = describeSpace(Eval, G, Layers, HW, EO, Opts);
  Searcher S(Eval, G, Space, HW, EO, Opts);
  std::vector<Candidate> Cands;
  S.enumerate(Cands);
  std::vector<ParallelPlan> Plans;
  for (Candidate &C : Cands)
    Plans.push_back(std::move(C.Plan));
  return Plans;
}

static Expected<SearchResult>
searchPlansAtCP(const PlanEvaluator &Eval, const Graph &G,
                ArrayRef<LayerInfo> Layers, const HardwareModel &HW,
                const EvaluatorOptions &EO, const SearchOptions &Opts);

Expected<SearchResult> searchPlans(const PlanEvaluator &Eval, const Graph &G,
                                   ArrayRef<LayerInfo> Layers,
                                   const HardwareModel &HW,
                                   const EvaluatorOptions &EO,
                                   const SearchOptions &Opts) {
  Expected<SearchResult> R = searchPlansAtCP(Eval, G, Layers, HW, EO, Opts);
  if (!R || R->Top.empty() || R->Top.front().Plan.CP == 1 || Opts.Fixed.CP ||
      !Opts.FindNoOffload)
    return R;
  // What cp buys (--explain, and -o's report): the best plan without it,
  // same constraints. Only the explanation reads it, and where nothing
  // fits without cp it visits the whole space unbounded (405B at 128K on
  // 16,384 NPUs, batch 2048: 76 s against the search's 3 s).
  SearchOptions O = Opts;
  O.Fixed.CP = 1;
  O.Fixed.CPA.reset();
  O.TopK = 1;
  Expected<SearchResult> R1 = searchPlansAtCP(Eval, G, Layers, HW, EO, O);
  if (!R1)
    return R1.takeError();
  R->NoCPSearched = true;
  if (!R1->Top.empty())
    R->NoCP = R1->Top.front();
  return R;
}

static Expected<SearchResult>
searchPlansAtCP(const PlanEvaluator &Eval, const Graph &G,
                ArrayRef<LayerInfo> Layers, const HardwareModel &HW,
                const EvaluatorOptions &EO, const SearchOptions &Opts) {
  SearchSpace Space = describeSpace(Eval, G, Layers, HW, EO, Opts);
  if (Error E = checkFixed(Opts.Fixed, Space, Opts.Frameworks))
    return std::move(E);
  // A pinned tp_overlap=on the hardware gives no share for, likewise.
  if (Error E =
          checkOverlapHardware(Opts.Fixed.TPOverlap.getValueOr(false), HW))
    return createStringError(inconvertibleErrorCode(), "--plan %s",
                             toString(std::move(E)).c_str());
  // A pinned offload= the hardware cannot hold is no plan at all (the
  // pruned search re-places costed stages without the evaluator's check).
  if (Opts.Fixed.Offload)
    if (Error E = checkOffloadHardware(*Opts.Fixed.Offload, HW, EO.Train))
      return std::move(E);
  // A pinned cp the sequence or the devices cannot take, likewise.
  if (Opts.Fixed.CP && *Opts.Fixed.CP > 1) {
    ParallelPlan Probe;
    Probe.TP = Opts.Fixed.TP.getValueOr(1);
    Probe.CP = *Opts.Fixed.CP;
    Probe.CPA = Opts.Fixed.CPA.getValueOr(CPAlgo::Ring);
    std::string Why = Eval.getCPIllegalReason(Probe);
    if (Space.Devices % Probe.CP)
      Why = "cp=" + std::to_string(Probe.CP) + " does not divide the " +
            std::to_string(Space.Devices) + " devices";
    if (!Why.empty())
      return createStringError(inconvertibleErrorCode(), "--plan: " + Why);
  }
  Searcher S(Eval, G, Space, HW, EO, Opts);
  // Offload is a speed choice, not only a last resort (issue 35): wherever
  // the hardware has a tier for it, every placement of every plan is in
  // the one search, so a plan that offloads to afford a larger
  // micro-batch, a shallower pipeline or less recompute wins when it is
  // faster (the step bound visits each plan's placements cheapest first).
  std::vector<OffloadTiers> Offloads =
      EO.Train ? getSearchedOffloads(HW) : std::vector<OffloadTiers>();
  bool MayOffload = !Opts.Fixed.Offload && Offloads.size() > 1;
  if (MayOffload)
    S.Offloads = Offloads;
  Expected<SearchResult> R = S.run();
  if (!R || !EO.Train)
    return R;
  if (!Opts.FindNoOffload)
    return R;
  if (!R->Top.empty() && R->Top.front().Plan.Offload.any())
    R->NoOffloadSearched = true;
  if (!R->Top.empty() && R->Top.front().Plan.Offload.any() &&
      !Opts.Fixed.Offload) {
    // What offload buys: the best plan with everything in HBM under the
    // same constraints, over the same plans; none fits: offload is needed.
    SearchOptions O = Opts;
    O.TopK = 1;
    Searcher S3(Eval, G, Space, HW, EO, O);
    S3.reuseBases(S);
    Expected<SearchResult> R3 = S3.run();
    S3.returnBases(S);
    if (!R3)
      return R3.takeError();
    if (!R3->Top.empty())
      R->NoOffload = R3->Top.front();
    else
      R->OffloadNeeded = true;
    R->Stats.Seconds += R3->Stats.Seconds;
  } else if (!R->Top.empty() && R->Top.front().Plan.Offload.any()) {
    // offload= pinned: the best plan with everything in HBM, if one fits.
    SearchOptions O = Opts;
    O.Fixed.Offload = OffloadTiers();
    O.TopK = 1;
    Searcher S3(Eval, G, Space, HW, EO, O);
    Expected<SearchResult> R3 = S3.run();
    if (!R3)
      return R3.takeError();
    if (!R3->Top.empty())
      R->NoOffload = R3->Top.front();
  }
  return R;
}

} // namespace loom
