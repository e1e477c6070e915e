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
// to cross them back. Candidates are visited in increasing step bound;
// once the bound exceeds the K-th best step time found (and the second best
// among distinct (tp, pp), kept for explanations) the rest cannot enter the
// answer. A candidate that survives is evaluated without the pipeline
// simulation (exact memory, per-micro-batch stage times with TP
// communication, DP sync and optimizer), bounded again the same way with
// those times and the exact tail, and only then simulated. The axis order
// and the gradient precision change only communication (and the gradient
// buffer), not compute: their candidates share the step bound and are told
// apart by the exact evaluation.
//
//===----------------------------------------------------------------------===//
#include "loom/Plan/Search.h"
#include "loom/Plan/Offload.h"
#include "loom/Plan/IdleDevices.h"
#include "loom/Plan/Goodput.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Shard/Rules.h"
#include "loom/Support/Divisors.h"
#include "loom/Support/Units.h"
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
#include <map>
#include <numeric>
#include <set>
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

TPDivisibility computeTPDivisibility(const Graph &G, int64_t Opset) {
  // The dims the sharding rules split (Rules.h), not a second analysis.
  SplitDimSizes Dims = collectSplitDims(G, Opset);
  TPDivisibility R;
  R.NumSplitDims = Dims.size();
  uint64_t GCD = 0;
  for (const auto &KV : Dims)
    GCD = std::gcd(GCD, KV.first);
  R.Divisor = GCD;
  if (!GCD)
    return R;
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
  for (const ExpertGroup &EG : Groups) {
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
  // Best[S][I]: the least bottleneck of layers [I, L) in stages S..P-1;
  // defined for S <= I <= L - (P - S).
  std::vector<std::vector<double>> Best(P, std::vector<double>(L + 1, 0.0));
  for (unsigned I = P - 1; I < L; ++I)
    Best[P - 1][I] = Cost(I, L);
  for (unsigned S = P - 1; S-- > 0;) {
    const std::vector<double> &Next = Best[S + 1];
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
      Best[S][I] = V;
    }
  }
  // The lexicographically smallest counts reaching the optimum: each stage
  // ends at the first K from which the rest can still meet it.
  double Target = Best[0][0];
  std::vector<unsigned> Counts;
  unsigned I = 0;
  for (unsigned S = 0; S < P; ++S) {
    unsigned K = L;
    if (S + 1 < P)
      for (K = I + 1; K < L - (P - S - 2); ++K)
        if (Cost(I, K) <= Target && Best[S + 1][K] <= Target)
          break;
    Counts.push_back(K - I);
    I = K;
  }
  return Counts;
}

//===----------------------------------------------------------------------===//
// Cost terms and order
//===----------------------------------------------------------------------===//

StringRef getCostTermName(CostTerm T) {
  switch (T) {
  case CostTerm::Compute:
    return "compute";
  case CostTerm::TPComm:
    return "tp comm";
  case CostTerm::EPComm:
    return "ep comm";
  case CostTerm::Bubble:
    return "bubble";
  case CostTerm::DPComm:
    return "dp comm";
  case CostTerm::Optimizer:
    return "optimizer";
  case CostTerm::Offload:
    return "offload";
  }
  return "compute";
}

double StepBreakdown::get(CostTerm T) const {
  switch (T) {
  case CostTerm::Compute:
    return ComputeS;
  case CostTerm::TPComm:
    return TPCommS;
  case CostTerm::EPComm:
    return EPCommS;
  case CostTerm::Bubble:
    return BubbleS;
  case CostTerm::DPComm:
    return DPCommS;
  case CostTerm::Optimizer:
    return OptimizerS;
  case CostTerm::Offload:
    return OffloadS;
  }
  return 0;
}

CostTerm StepBreakdown::getDominant() const {
  CostTerm Best = CostTerm::Compute;
  for (CostTerm T : {CostTerm::TPComm, CostTerm::EPComm, CostTerm::Bubble,
                     CostTerm::DPComm, CostTerm::Optimizer, CostTerm::Offload})
    if (get(T) > get(Best))
      Best = T;
  return Best;
}

StepBreakdown getStepBreakdown(const PlanCost &PC) {
  StepBreakdown B;
  if (PC.Stages.empty())
    return B;
  unsigned Busiest = 0, Tail = 0;
  for (unsigned S = 1; S < PC.Stages.size(); ++S) {
    if (PC.Stages[S].BubbleS < PC.Stages[Busiest].BubbleS)
      Busiest = S;
    const StageCost &A = PC.Stages[S], &T = PC.Stages[Tail];
    if (A.DPExposedS + A.OptimizerS > T.DPExposedS + T.OptimizerS)
      Tail = S;
  }
  const StageCost &S = PC.Stages[Busiest];
  B.ComputeS = S.ComputeS;
  // tp overlap's hidden collectives and held compute (TPOverlapS).
  B.TPCommS = PC.Plan.NumMicroBatches * (S.TPCommS + S.TPOverlapS);
  B.EPCommS = PC.Plan.NumMicroBatches * S.EPCommS;
  B.BubbleS = S.BubbleS;
  B.DPCommS = PC.Stages[Tail].DPExposedS;
  B.OptimizerS = PC.Stages[Tail].OptimizerS;
  B.OffloadS = PC.Plan.NumMicroBatches * S.Offload.ExposedPerMicroBatchS;
  return B;
}

/// How far from HBM \p T puts the state: the sum over the kinds of 0 (hbm),
/// 1 (host), 2 (ssd).
static unsigned getOffloadDistance(const OffloadTiers &T) {
  unsigned N = 0;
  for (MemoryTier M : {T.Opt, T.Grad, T.Param, T.Act})
    N += (unsigned)M;
  return N;
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
/// PlanEvaluator::getStageLayers splits evenly.
static unsigned getNumMiddleLayers(ArrayRef<LayerInfo> Layers) {
  unsigned NL = Layers.size(), Pro = 0, Epi = 0;
  while (Pro < NL && Layers[Pro].K == LayerInfo::Kind::Prologue)
    ++Pro;
  while (Epi < NL - Pro && Layers[NL - 1 - Epi].K == LayerInfo::Kind::Epilogue)
    ++Epi;
  return NL - Pro - Epi;
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
  S.TPDiv = computeTPDivisibility(G, EO.Opset);
  S.Experts = summarizeExperts(findExperts(G, Layers));
  std::vector<const Node *> Indexed = findIndexRoutedExperts(G);
  if (!Indexed.empty())
    S.Experts.NotSplit =
        (Twine(Indexed.size()) +
         " index-routed expert(s) (NonZero over the routing mask, e.g. '" +
         Indexed.front()->getName() +
         "'), planned at the expected tokens per expert; ep does not split "
         "this pattern yet, so they stay whole on every ep rank")
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
  double TimeBound = 0, MemoryBound = 0;
  /// The candidates that differ only in offload share a base: consecutive
  /// in enumeration, and (same time bound) in the sorted order too.
  unsigned Base = 0;
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
    if (const MemoryLevel *Host = HW.getMemory("host"))
      HostCap = Host->getUsableCapacity().value();
    if (const MemoryLevel *SSD = HW.getMemory("ssd"))
      SSDCap = SSD->getUsableCapacity().value();
    // Parameters as the evaluator counts them: distinct, read by a node;
    // expert parameters apart (divided by ep).
    DenseSet<const Value *> Seen, Expert;
    for (const ExpertGroup &EG : Eval.getExpertGroups()) {
      Expert.insert(EG.StackedParams.begin(), EG.StackedParams.end());
      for (const auto &Ps : EG.BranchParams)
        Expert.insert(Ps.begin(), Ps.end());
    }
    for (const auto &NP : G.getNodes())
      for (const Value *V : NP->getInputs())
        if (V && V->isParameter() && Seen.insert(V).second)
          (Expert.count(V) ? ExpertParams : TotalParams) +=
              V->Type.getNumElements().getValueOr(0);
  }

  void enumerate(std::vector<Candidate> &Out);
  Expected<SearchResult> run();
  /// The offload placements enumerated (when --plan fixes none).
  std::vector<OffloadTiers> Offloads = {OffloadTiers()};

private:
  const LayerPrefix &getPrefix(unsigned TP, unsigned MB, bool SP, unsigned EP);
  const std::vector<unsigned> &getEvenCounts(unsigned PP);
  const std::vector<unsigned> *getBalancedCounts(const LayerPrefix &LP,
                                                 unsigned PP, Recompute RC);
  double timeBound(const Candidate &C) const;
  double memoryBound(const ParallelPlan &P) const;
  double stageBound(const PlanCost &PC) const;
  std::string describeGroups(const ParallelPlan &P) const;
  Expected<Optional<PlanCost>>
  bestOnAllDevices(const std::vector<Candidate> &Cands,
                   ArrayRef<unsigned> Order) const;

  const PlanEvaluator &Eval;
  const SearchSpace &Space;
  const HardwareModel &HW;
  const EvaluatorOptions &EO;
  const SearchOptions &Opts;
  /// Non-expert and expert parameters.
  double HBMUsable = 0, Reserved = 0, TotalParams = 0, ExpertParams = 0;
  /// Usable host DRAM and SSD per device (offload).
  double HostCap = 0, SSDCap = 0;
  std::map<std::tuple<unsigned, unsigned, bool, unsigned>, LayerPrefix>
      Prefixes;
  std::map<unsigned, std::vector<unsigned>> Even;
  std::map<std::tuple<const LayerPrefix *, unsigned, int>,
           std::unique_ptr<std::vector<unsigned>>>
      Balanced;

public:
  uint64_t Partitions = 0;
};

const LayerPrefix &Searcher::getPrefix(unsigned TP, unsigned MB, bool SP,
                                       unsigned EP) {
  auto Key = std::make_tuple(TP, MB, SP, EP);
  auto It = Prefixes.find(Key);
  if (It != Prefixes.end())
    return It->second;
  LayerPrefix &LP = Prefixes[Key];
  unsigned NL = Eval.getNumLayers();
  LP.F.assign(NL + 1, 0.0);
  LP.B = LP.A = LP.F;
  for (unsigned L = 0; L < NL; ++L) {
    PlanEvaluator::LayerTime T = Eval.getLayerTime(L, TP, MB, SP, EP);
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

double Searcher::timeBound(const Candidate &C) const {
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
  return Bound * (1 - 1e-9);
}

double Searcher::memoryBound(const ParallelPlan &P) const {
  // Expert parameters: 1/ep of them, ZeRO over the dp/ep ranks.
  // Offloaded kinds leave only buffers in HBM: bound them by 0.
  const OffloadTiers &Off = P.Offload;
  auto InHBM = [](MemoryTier T) { return T == MemoryTier::HBM ? 1.0 : 0.0; };
  auto PerParam = [&](double DP) {
    double B = 2.0 / (P.ZeroStage >= 3 ? DP : 1.0) * InHBM(Off.Param);
    if (EO.Train)
      B += P.getGradBytes() / (P.ZeroStage >= 2 ? DP : 1.0) *
               InHBM(Off.Grad) +
           12.0 / (P.ZeroStage >= 1 ? DP : 1.0) * InHBM(Off.Opt);
    return B;
  };
  double TPPP = (double)P.TP * P.PP;
  double Bytes = TotalParams / TPPP * PerParam(P.DP) +
                 ExpertParams / (TPPP * P.EP) * PerParam(P.DP / P.EP);
  if (Off.any() && EO.Train) {
    // The state offloaded must fit its tier: a lower bound as above (the
    // parameters spread evenly), else the candidate is out.
    auto InTier = [&](MemoryTier Tier, double DP) {
      auto Is = [&](MemoryTier T) { return T == Tier ? 1.0 : 0.0; };
      return 2.0 / (P.ZeroStage >= 3 ? DP : 1.0) * Is(Off.Param) +
             P.getGradBytes() / (P.ZeroStage >= 2 ? DP : 1.0) * Is(Off.Grad) +
             12.0 / (P.ZeroStage >= 1 ? DP : 1.0) * Is(Off.Opt);
    };
    for (auto [Tier, Cap] : {std::make_pair(MemoryTier::Host, HostCap),
                             std::make_pair(MemoryTier::SSD, SSDCap)})
      if (TotalParams / TPPP * InTier(Tier, P.DP) +
              ExpertParams / (TPPP * P.EP) * InTier(Tier, P.DP / P.EP) >
          Cap)
        return INFINITY;
  }
  bool AnyComm = P.TP > 1 || P.DP > 1 || P.PP > 1;
  return (Bytes + (AnyComm ? EO.CommBufferBytes : 0.0) + Reserved) * (1 - 1e-9);
}

double Searcher::stageBound(const PlanCost &PC) const {
  const ParallelPlan &P = PC.Plan;
  double V = P.VirtualStages, M = P.NumMicroBatches;
  double PreF = 0, PreB = 0, Bound = 0, Tail = 0;
  for (unsigned S = 0; S < PC.Stages.size(); ++S) {
    const StageCost &SC = PC.Stages[S];
    // The overlaps' part (negative where tp overlap hides collectives).
    double Busy = M * (SC.ForwardS + SC.BackwardS + SC.TPCommS + SC.EPCommS +
                       SC.OverlapFwdS + SC.OverlapBwdS);
    Bound = std::max(Bound, PreF + Busy + (EO.Train ? PreB : 0.0));
    double Transfer = SC.SendLagS;
    PreF += SC.ForwardS / V + Transfer;
    PreB += SC.BackwardS / V + Transfer;
    Tail = std::max(Tail, SC.DPExposedS + SC.OptimizerS);
  }
  return (Bound + Tail) * (1 - 1e-9);
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
    Parts.push_back((G + (L == 0 ? " inside " : " across ") +
                     HW.Topology[L].Name)
                        .str());
  }
  return join(Parts, ", ");
}

void Searcher::enumerate(std::vector<Candidate> &Out) {
  const PlanSpec &F = Opts.Fixed;
  uint64_t N = Space.Devices;
  uint64_t Batch = Space.Batch;
  std::vector<Recompute> RCs = {Recompute::None};
  std::vector<unsigned> Zeros = {0};
  std::vector<GradPrecision> Grads = {GradPrecision::FP32};
  if (EO.Train) {
    RCs = {Recompute::None, Recompute::Selective, Recompute::Full};
    Zeros = {0, 1, 2, 3};
    Grads = {GradPrecision::FP32, GradPrecision::BF16};
  }
  std::vector<OffloadTiers> Offs = Offloads;
  if (F.Offload)
    Offs.assign(1, *F.Offload);
  // Overlaps (loom/Cost/Overlap.h): each searched where the hardware gives
  // its share of compute and the plan has that communication; else fixed
  // or its default.
  const DeviceClass *Core = HW.getClass("aicore");
  Optional<CommOverlap> Ov = Core ? Core->Overlap : None;
  auto Choices = [&](const Optional<bool> &Fixed, bool Default, bool Offered,
                     bool Relevant) -> SmallVector<bool, 2> {
    if (Fixed)
      return {*Fixed};
    if (Offered && Relevant)
      return {Default, !Default};
    return {Default};
  };
  unsigned NumBases = 0;
  DegreeSpace DS;
  DS.Devices = N;
  DS.Batch = Space.Batch;
  DS.NumLayers = Space.NumLayers;
  DS.NumBlocks = Space.NumBlocks;
  DS.TPLimit = Space.TPLimit;
  DS.TPDivisor = Space.TPDiv.Divisor;
  for (const MeshDegrees &MD : enumerateMeshDegrees(DS, F, Opts.AllowIdle)) {
    uint64_t TP = MD.TP, PP = MD.PP, DP = MD.DP;
    {
      const std::vector<unsigned> &EvenCounts = getEvenCounts(PP);
      if (EvenCounts.empty())
        continue;
      // ep: the inner part of dp, dividing every MoE layer's experts.
      for (uint64_t EP : getDivisors(DP)) {
        if ((EP > 1 &&
             (!Space.Experts.NumExperts || Space.Experts.NumExperts % EP)) ||
            (F.EP && *F.EP != EP))
          continue;
        // The distinct meshes (a fixed order matches the one it is the
        // same mesh as).
        SmallVector<AxisOrder, 6> Orders =
            getDistinctAxisOrders(EP, DP / EP, PP);
        if (F.Order) {
          AxisOrder Want = canonicalAxisOrder(*F.Order, EP, DP / EP, PP);
          Orders.assign(1, Want);
        }
        for (uint64_t MB : getDivisors(Batch / DP)) {
          if (F.MicroBatchSize && *F.MicroBatchSize != MB)
            continue;
          uint64_t NMB = Batch / (DP * MB);
          if (F.NumMicroBatches && *F.NumMicroBatches != NMB)
            continue;
          // Plans count micro-batches and their size in 32 bits (what
          // completePlan accepts); a bigger count is a larger micro-batch.
          if (NMB > std::numeric_limits<unsigned>::max() ||
              MB > std::numeric_limits<unsigned>::max())
            continue;
          for (bool SP : {false, true}) {
            if ((SP && TP == 1) || (F.SP && *F.SP != SP))
              continue;
            const LayerPrefix &LP = getPrefix(TP, MB, SP, EP);
            for (Recompute RC : RCs) {
              if (F.RC && *F.RC != RC)
                continue;
              // Stage layouts: vpp values and their counts.
              struct Layout {
                unsigned VPP;
                const std::vector<unsigned> *Counts;
                bool Balanced;
              };
              SmallVector<Layout, 8> Layouts;
              if (!F.StageLayers.empty()) {
                Layouts.push_back({1, &F.StageLayers, false});
              } else {
                Layouts.push_back({1, &EvenCounts, false});
                if (Opts.BalanceStages && PP > 1)
                  if (const std::vector<unsigned> *B =
                          getBalancedCounts(LP, PP, RC))
                    Layouts.push_back({1, B, true});
                unsigned Mid = Space.NumBlocks;
                if (PP > 1 && NMB % PP == 0 && Mid && Mid % PP == 0)
                  for (uint64_t V : getDivisors(Mid / PP))
                    if (V > 1)
                      Layouts.push_back({(unsigned)V, &EvenCounts, false});
              }
              for (const Layout &Lay : Layouts) {
                if (F.VirtualStages && *F.VirtualStages != Lay.VPP)
                  continue;
                for (unsigned Z : Zeros) {
                  // ZeRO partitions over dp: with dp = 1 it is plain data.
                  if ((F.ZeroStage && *F.ZeroStage != Z) || (Z && DP == 1))
                    continue;
                  for (GradPrecision GP : Grads) {
                    // Without a DP sync there is no reduction to narrow.
                    if ((F.Grad && *F.Grad != GP) ||
                        (GP == GradPrecision::BF16 && DP == 1))
                      continue;
                    SmallVector<bool, 2> TPOvs = Choices(
                        F.TPOverlap, false, Ov && Ov->TP, TP > 1);
                    // dp and pp overlap at share 0 never lose to waiting
                    // (Cost/Overlap.h: max(C, W) <= W + C; a send waited
                    // for arrives no earlier): only on is tried.
                    SmallVector<bool, 2> DPOvs =
                        Choices(F.DPOverlap, true, Ov && Ov->DP && *Ov->DP > 0,
                                EO.Train && DP > 1);
                    SmallVector<bool, 2> PPOvs =
                        Choices(F.PPOverlap, true, Ov && Ov->PP && *Ov->PP > 0,
                                PP > 1);
                    for (const AxisOrder &Order : Orders)
                    for (bool TPOv : TPOvs)
                    for (bool DPOv : DPOvs)
                    for (bool PPOv : PPOvs)
                    for (const OffloadTiers &Off : Offs) {
                      // tp overlap needs TP communication.
                      if (TPOv && TP == 1)
                        continue;
                      Candidate C;
                      C.Base = NumBases + (&Off == &Offs.front());
                      ParallelPlan &P = C.Plan;
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
                      P.Order = Order;
                      P.Offload = Off;
                      P.TPOverlap = TPOv;
                      P.DPOverlap = DPOv;
                      P.PPOverlap = PPOv;
                      if (Lay.Balanced || !F.StageLayers.empty())
                        P.StageLayers = *Lay.Counts;
                      C.Counts = Lay.Counts;
                      C.Prefix = &LP;
                      NumBases = C.Base;
                      Out.push_back(std::move(C));
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
}

/// The best candidate using every device, by the same bounds: what a
/// winner that leaves devices idle is compared with.
Expected<Optional<PlanCost>>
Searcher::bestOnAllDevices(const std::vector<Candidate> &Cands,
                           ArrayRef<unsigned> Order) const {
  Optional<PlanCost> Best;
  for (unsigned Idx : Order) {
    const Candidate &C = Cands[Idx];
    if (C.Plan.getNumDevices() != Space.Devices)
      continue;
    if (Opts.Prune && Best && C.TimeBound > Best->StepTimeS)
      break;
    if (Opts.Prune && C.MemoryBound > HBMUsable)
      continue;
    Expected<PlanCost> PC = Eval.evaluate(C.Plan);
    if (!PC)
      return PC.takeError();
    if (PC->FitsMemory && (!Best || isBetterPlan(*PC, *Best)))
      Best = std::move(*PC);
  }
  return Best;
}

Expected<SearchResult> Searcher::run() {
  auto Start = std::chrono::steady_clock::now();
  SearchResult R;
  R.Space = Space;
  R.StagesGiven = !Opts.Fixed.StageLayers.empty();
  std::vector<Candidate> Cands;
  enumerate(Cands);
  R.Stats.Candidates = Cands.size();
  R.TriedAllDevices = any_of(Cands, [&](const Candidate &C) {
    return C.Plan.getNumDevices() == Space.Devices;
  });
  for (Candidate &C : Cands) {
    C.TimeBound = timeBound(C);
    C.MemoryBound = memoryBound(C.Plan);
  }
  std::vector<unsigned> Order(Cands.size());
  std::iota(Order.begin(), Order.end(), 0);
  if (Opts.Prune)
    std::stable_sort(Order.begin(), Order.end(), [&](unsigned A, unsigned B) {
      return Cands[A].TimeBound < Cands[B].TimeBound;
    });

  unsigned K = std::max(1u, Opts.TopK);
  std::vector<PlanCost> &Top = R.Top;
  // The degrees explanations compare: (tp, pp, ep).
  using Degrees = std::tuple<unsigned, unsigned, unsigned>;
  auto DegreesOf = [](const ParallelPlan &P) {
    return Degrees(P.TP, P.PP, P.EP);
  };
  std::map<Degrees, PlanCost> PairBest;
  std::set<Degrees> Pairs;
  for (const Candidate &C : Cands)
    Pairs.insert(DegreesOf(C.Plan));
  auto Threshold = [&]() {
    double T = Top.size() < K ? INFINITY : Top.back().StepTimeS;
    if (Pairs.size() < 2) // no best plan with other degrees to find
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
  };
  double Thr = INFINITY;
  Optional<PlanCost> BaseStages;
  unsigned BaseOf = 0;
  for (unsigned Idx = 0; Idx < Order.size(); ++Idx) {
    Candidate &C = Cands[Order[Idx]];
    if (Opts.Prune && C.TimeBound > Thr) {
      R.Stats.TimeBoundPruned += Order.size() - Idx;
      break;
    }
    if (Opts.Prune && C.MemoryBound > HBMUsable) {
      ++R.Stats.MemoryBoundPruned;
      continue;
    }
    if (Opts.Prune) {
      // Offload variants of one plan: cost the plan once, re-place it.
      Expected<PlanCost> SC = [&]() -> Expected<PlanCost> {
        if (!C.Plan.Offload.any())
          return Eval.evaluateStages(C.Plan);
        if (!BaseStages || BaseOf != C.Base) {
          ParallelPlan Q = C.Plan;
          Q.Offload = OffloadTiers();
          Expected<PlanCost> B = Eval.evaluateStages(Q);
          if (!B)
            return B.takeError();
          BaseStages = std::move(*B);
          BaseOf = C.Base;
        }
        PlanCost PC = *BaseStages;
        applyOffloadToPlan(PC, C.Plan.Offload, HW);
        return PC;
      }();
      if (!SC)
        return SC.takeError();
      ++R.Stats.StagesEvaluated;
      if (!SC->FitsMemory) {
        ++R.Stats.OverMemory;
        continue;
      }
      if (stageBound(*SC) > Thr) {
        ++R.Stats.TimeBoundPruned;
        continue;
      }
    }
    Expected<PlanCost> PC = Eval.evaluate(C.Plan);
    if (!PC)
      return PC.takeError();
    ++R.Stats.Simulated;
    if (!PC->FitsMemory) {
      ++R.Stats.OverMemory;
      continue;
    }
    Degrees Pair = DegreesOf(C.Plan);
    auto It = PairBest.find(Pair);
    if (It == PairBest.end())
      PairBest.emplace(Pair, *PC);
    else if (isBetterPlan(*PC, It->second))
      It->second = *PC;
    auto Pos = std::upper_bound(Top.begin(), Top.end(), *PC, isBetterPlan);
    if (Pos - Top.begin() < (long)K) {
      Top.insert(Pos, std::move(*PC));
      if (Top.size() > K)
        Top.pop_back();
    }
    Thr = Threshold();
  }

  if (!Top.empty()) {
    Degrees Win = DegreesOf(Top[0].Plan);
    for (const auto &KV : PairBest)
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
      Expected<Optional<PlanCost>> All = bestOnAllDevices(Cands, Order);
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
  } else {
    // Nothing fits: the least memory at every (tp, pp), exactly. Within a
    // pair, candidates in increasing memory bound until the bound passes
    // the least memory found.
    std::map<std::pair<unsigned, unsigned>, std::vector<unsigned>> ByPair;
    for (unsigned I = 0; I < Cands.size(); ++I)
      ByPair[{Cands[I].Plan.TP, Cands[I].Plan.PP}].push_back(I);
    for (auto &KV : ByPair) {
      std::vector<unsigned> &Is = KV.second;
      std::stable_sort(Is.begin(), Is.end(), [&](unsigned A, unsigned B) {
        return Cands[A].MemoryBound < Cands[B].MemoryBound;
      });
      Optional<MemoryFloor> Floor;
      for (unsigned I : Is) {
        if (Floor && Cands[I].MemoryBound > Floor->Bytes)
          break;
        Expected<PlanCost> SC = Eval.evaluateStages(Cands[I].Plan);
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
        MF.Plan = Cands[I].Plan;
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
  }
  R.Stats.Partitions = Partitions;
  R.Stats.Seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
          .count();
  return R;
}

Error checkFixed(const PlanSpec &F, const SearchSpace &S) {
  // tp overlap needs TP communication: tp > 1, given or possible.
  if (F.TPOverlap && *F.TPOverlap &&
      ((F.TP && *F.TP == 1) || S.TPLimit <= 1 || S.TPDiv.Divisor == 1))
    return createStringError(inconvertibleErrorCode(),
                             "--plan tp_overlap=on needs tp > 1 (there is no "
                             "TP communication to overlap)");
  if (F.Grad && *F.Grad != GradPrecision::FP32 && !S.Train)
    return createStringError(inconvertibleErrorCode(),
                             "--plan grad=%s: inference has no gradients",
                             getGradPrecisionName(*F.Grad).str().c_str());
  if (F.EP && *F.EP != 1 && !S.Experts.NumExperts)
    return createStringError(inconvertibleErrorCode(),
                             "--plan ep=%u: the model has no experts (no "
                             "stacked [E, d, f] expert weights and no "
                             "unrolled expert branches); use ep=1",
                             *F.EP);
  if (F.EP && S.Experts.NumExperts && S.Experts.NumExperts % *F.EP)
    return createStringError(inconvertibleErrorCode(),
                             "--plan ep=%u does not divide the %u experts "
                             "per MoE layer",
                             *F.EP, S.Experts.NumExperts);
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

std::vector<ParallelPlan>
enumerateCandidates(const PlanEvaluator &Eval, const Graph &G,
                    ArrayRef<LayerInfo> Layers, const HardwareModel &HW,
                    const EvaluatorOptions &EO, const SearchOptions &Opts) {
  SearchSpace Space = describeSearchSpace(G, Layers, HW, EO, Opts.Devices);
  Space.NumLayers = Eval.getNumLayers();
  Searcher S(Eval, G, Space, HW, EO, Opts);
  std::vector<Candidate> Cands;
  S.enumerate(Cands);
  std::vector<ParallelPlan> Plans;
  for (Candidate &C : Cands)
    Plans.push_back(std::move(C.Plan));
  return Plans;
}

Expected<SearchResult> searchPlans(const PlanEvaluator &Eval, const Graph &G,
                                   ArrayRef<LayerInfo> Layers,
                                   const HardwareModel &HW,
                                   const EvaluatorOptions &EO,
                                   const SearchOptions &Opts) {
  SearchSpace Space = describeSearchSpace(G, Layers, HW, EO, Opts.Devices);
  Space.NumLayers = Eval.getNumLayers();
  if (Error E = checkFixed(Opts.Fixed, Space))
    return std::move(E);
  Searcher S(Eval, G, Space, HW, EO, Opts);
  Expected<SearchResult> R = S.run();
  if (!R || !EO.Train)
    return R;
  std::vector<OffloadTiers> Offloads = getSearchedOffloads(HW);
  if (R->Top.empty() && !Opts.Fixed.Offload && Offloads.size() > 1) {
    // Nothing fits in HBM: place training state in host DRAM and SSD too
    // (the first entry is "none", already tried).
    Searcher S2(Eval, G, Space, HW, EO, Opts);
    S2.Offloads.assign(Offloads.begin() + 1, Offloads.end());
    Expected<SearchResult> R2 = S2.run();
    if (!R2)
      return R2.takeError();
    if (!R2->Top.empty()) {
      R2->OffloadNeeded = true;
      R2->Stats.Seconds += R->Stats.Seconds;
      return R2;
    }
    return R;
  }
  if (!R->Top.empty() && R->Top.front().Plan.Offload.any()) {
    // What offload costs: the best plan with everything in HBM under the
    // same constraints, if one fits.
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

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

static std::string fmtSeconds(double S) { return formatDuration(Seconds(S)); }

static std::string fmtPercent(double Fraction) {
  char Buf[32];
  snprintf(Buf, sizeof(Buf), "%.1f%%", Fraction * 100);
  return Buf;
}

static std::string getDegrees(const ParallelPlan &P) {
  std::string S =
      (Twine("tp=") + Twine(P.TP) + ",pp=" + Twine(P.PP) + ",dp=" + Twine(P.DP))
          .str();
  if (P.EP > 1)
    S += ",ep=" + std::to_string(P.EP);
  return S;
}

static std::string getStageList(const PlanCost &PC) {
  std::string S;
  for (unsigned I = 0; I < PC.Stages.size(); ++I)
    S += (I ? ":" : "") + std::to_string(PC.Stages[I].NumLayers);
  return S;
}

static void printSpaceLine(const SearchSpace &Sp, raw_ostream &OS) {
  OS << "tp <= " << Sp.TPLimit << " (" << Sp.TPLimitWhy << ")";
  if (Sp.TPDiv.Divisor)
    OS << ", tp divides " << Sp.TPDiv.Divisor << " (" << Sp.TPDiv.Why << ")";
  OS << ", pp <= " << Sp.NumLayers << " (layers), dp*tp*pp <= " << Sp.Devices
     << ", global batch " << Sp.Batch << " divisible by dp*mb";
  if (Sp.Experts.NumExperts)
    OS << ", ep divides dp and " << Sp.Experts.NumExperts
       << " (experts per MoE layer)";
}

void printChosenPlan(const SearchResult &R, raw_ostream &OS) {
  if (R.Top.empty()) {
    OS << "plan: none fits\n";
    return;
  }
  const PlanCost &PC = R.Top.front();
  OS << (R.RestPlain ? "plan (given, rest plain): " : "plan (searched): ")
     << PC.Plan.str() << "\n";
  std::string Idle =
      describeIdleDevices(PC.Plan, R.Space.Devices, R.Space.Batch,
                          R.BestAllDevices ? &*R.BestAllDevices : nullptr,
                          R.TriedAllDevices);
  if (!Idle.empty())
    OS << "idle: " << Idle << "\n";
  if (R.FailedDevices) {
    uint64_t Total = R.Space.Devices + R.FailedDevices;
    OS << "failure: " << R.FailureWhat << " lost; re-planned on "
       << R.Space.Devices << " of " << Total << " devices: ";
    if (R.BeforeFailure)
      OS << format("%.0f", PC.Throughput) << " " << PC.getThroughputUnit()
         << " vs " << format("%.0f", R.BeforeFailure->Throughput) << " on all "
         << Total
         << " (" << R.BeforeFailure->Plan.str() << "): "
         << fmtPercent(PC.Throughput / R.BeforeFailure->Throughput)
         << " of the throughput kept\n";
    else
      OS << "no plan fits the intact cluster to compare with\n";
  }
  OS << "stages: " << getStageList(PC) << " layers ("
     << (R.StagesGiven                 ? "as --plan gave them"
         : PC.Plan.StageLayers.empty() ? "even split"
                                       : "balanced by the min-max partition")
     << (PC.Plan.VirtualStages > 1
             ? ", " + std::to_string(PC.Plan.VirtualStages) +
                   " virtual stages per device"
             : std::string())
     << ")\n";
  OS << "predicted: step " << fmtSeconds(PC.StepTimeS) << ", "
     << format("%.0f", PC.Throughput) << " " << PC.getThroughputUnit()
     << ", MFU "
     << format("%.3f", PC.MFU) << ", memory "
     << formatBytes(Bytes(PC.MaxMemoryBytes)) << " of "
     << formatBytes(Bytes(PC.HBMBytes)) << " per device\n";
  if (R.Reliab)
    OS << "goodput: " << describeGoodput(estimateGoodput(*R.Reliab, PC))
       << (R.RankedByGoodput ? "; plans ranked by goodput" : "") << "\n";
  if (R.Uncosted.Nodes)
    OS << "uncosted: " << describeUncosted(R.Uncosted)
       << " have no cost rule and are not in these numbers\n";
  StepBreakdown B = getStepBreakdown(PC);
  OS << "breakdown: compute " << fmtSeconds(B.ComputeS) << ", tp comm "
     << fmtSeconds(B.TPCommS)
     << (B.EPCommS > 0 ? ", ep comm " + fmtSeconds(B.EPCommS) : std::string())
     << ", bubble " << fmtSeconds(B.BubbleS) << ", dp comm "
     << fmtSeconds(B.DPCommS) << ", optimizer " << fmtSeconds(B.OptimizerS)
     << (PC.Plan.Offload.any() ? ", offload " + fmtSeconds(B.OffloadS)
                               : std::string())
     << " (dominant: " << getCostTermName(B.getDominant()) << ")\n";
  const SearchStats &St = R.Stats;
  OS << "search: " << St.Candidates << " candidates; " << St.Simulated
     << " simulated, " << St.StagesEvaluated << " costed without simulation ("
     << St.OverMemory << " over HBM), " << St.MemoryBoundPruned
     << " cut by the memory bound, " << St.TimeBoundPruned
     << " by the step-time bound\n";
  OS << "space: ";
  printSpaceLine(R.Space, OS);
  OS << "\n";
  const ExpertInfo &X = R.Space.Experts;
  if (X.NumExperts)
    OS << "experts: " << X.NumGroups << " MoE layer(s), "
       << (X.NumStacked == X.NumGroups ? "stacked"
           : X.NumStacked == 0         ? "unrolled"
                                       : "stacked and unrolled")
       << ", " << X.NumExperts << " experts each (gcd) (e.g. '" << X.Parameter
       << "'); ep=" << PC.Plan.EP << ": " << X.NumExperts / PC.Plan.EP
       << " per device; load imbalance " << format("%.3g", PC.MoEImbalance)
       << (PC.Plan.EP > 1 && X.NumStacked
               ? " (the most loaded ep rank's routed tokens over the mean: "
                 "its expert compute and all-to-all)"
               : " (not applied: ep=1 or no routed experts)")
       << "\n";
  if (!X.NotSplit.empty())
    OS << "experts: " << X.NotSplit << "\n";
}

void printTopPlans(const SearchResult &R, unsigned K, raw_ostream &OS) {
  unsigned N = std::min<size_t>(K, R.Top.size());
  OS << "top " << N << " plan" << (N == 1 ? "" : "s") << ":\n";
  OS << format("  rank step        %-12s MFU    memory     dominant   %s"
               "plan\n",
               N ? R.Top[0].getThroughputUnit().str().c_str() : "tokens/s",
               R.Reliab ? "goodput " : "");
  for (unsigned I = 0; I < N; ++I) {
    const PlanCost &PC = R.Top[I];
    std::string Goodput;
    if (R.Reliab)
      Goodput =
          formatv("{0,-7:f3} ", estimateGoodput(*R.Reliab, PC).Fraction)
              .str();
    OS << format(
        "  %-4u %-11s %-12.0f %-6.3f %-10s %-10s %s%s\n", I + 1,
        fmtSeconds(PC.StepTimeS).c_str(), PC.Throughput, PC.MFU,
        formatBytes(Bytes(PC.MaxMemoryBytes)).c_str(),
        getCostTermName(getStepBreakdown(PC).getDominant()).str().c_str(),
        Goodput.c_str(), PC.Plan.str().c_str());
  }
}

/// "bubble 900.00 ms vs 2.10 s, tp comm ...": terms by how much they
/// differ, largest first.
static std::string compareTerms(const PlanCost &A, const PlanCost &B) {
  StepBreakdown BA = getStepBreakdown(A), BB = getStepBreakdown(B);
  std::vector<CostTerm> Terms = {CostTerm::Compute, CostTerm::TPComm,
                                 CostTerm::EPComm,  CostTerm::Bubble,
                                 CostTerm::DPComm,  CostTerm::Optimizer,
                                 CostTerm::Offload};
  std::stable_sort(Terms.begin(), Terms.end(), [&](CostTerm X, CostTerm Y) {
    return std::fabs(BA.get(X) - BB.get(X)) > std::fabs(BA.get(Y) - BB.get(Y));
  });
  std::vector<std::string> Parts;
  for (CostTerm T : Terms)
    if (BA.get(T) != 0 || BB.get(T) != 0)
      Parts.push_back((getCostTermName(T) + " " + fmtSeconds(BA.get(T)) +
                       " vs " + fmtSeconds(BB.get(T)))
                          .str());
  Parts.push_back("memory " + formatBytes(Bytes(A.MaxMemoryBytes)) + " vs " +
                  formatBytes(Bytes(B.MaxMemoryBytes)));
  return join(Parts, ", ");
}

/// Why \p A ranks before \p B, in words.
static std::string compareTo(const PlanCost &A, const PlanCost &B) {
  if (A.StepTimeS != B.StepTimeS)
    return (Twine("by ") + fmtPercent(B.StepTimeS / A.StepTimeS - 1) +
            ": step " + fmtSeconds(A.StepTimeS) + " vs " +
            fmtSeconds(B.StepTimeS) + "; " + compareTerms(A, B))
        .str();
  if (A.Plan.Grad != B.Plan.Grad)
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): fp32 gradients, the numerically safer")
        .str();
  if (A.Plan.Order != B.Plan.Order)
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): the axis order " + getAxisOrderName(A.Plan.Order) +
            ", nearer the default, vs " + getAxisOrderName(B.Plan.Order))
        .str();
  if (A.Plan.ZeroStage != B.Plan.ZeroStage)
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): the lower ZeRO stage, " + Twine(A.Plan.ZeroStage) + " vs " +
            Twine(B.Plan.ZeroStage))
        .str();
  if (getOffloadDistance(A.Plan.Offload) != getOffloadDistance(B.Plan.Offload))
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): less offloaded, offload=" + A.Plan.Offload.str() + " vs " +
            B.Plan.Offload.str())
        .str();
  if (A.Plan.TPOverlap != B.Plan.TPOverlap ||
      A.Plan.DPOverlap != B.Plan.DPOverlap ||
      A.Plan.PPOverlap != B.Plan.PPOverlap)
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): the overlaps nearer the defaults (tp off, dp and pp on)")
        .str();
  if (A.MaxMemoryBytes != B.MaxMemoryBytes)
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): less memory, " + formatBytes(Bytes(A.MaxMemoryBytes)) + " vs " +
            formatBytes(Bytes(B.MaxMemoryBytes)))
        .str();
  return "on a tie in step time and memory: by the plan string";
}

/// What the winner's offload costs, the transfer that binds, and the
/// memory per tier.
static void printOffloadExplanation(const SearchResult &R, raw_ostream &OS) {
  const PlanCost &W = R.Top.front();
  std::string Off = W.Plan.Offload.str();
  if (R.OffloadNeeded)
    OS << "explain: offload=" << Off << " is needed: no plan "
       << (R.Constrained ? "under the --plan constraints " : "")
       << "fits with all training state in HBM\n";
  else if (R.NoOffload)
    OS << "explain: offload=" << Off << " costs "
       << fmtSeconds(W.StepTimeS - R.NoOffload->StepTimeS)
       << " per step against the best plan without offload, "
       << R.NoOffload->Plan.str() << " ("
       << fmtSeconds(R.NoOffload->StepTimeS) << " vs "
       << fmtSeconds(W.StepTimeS) << ")\n";
  else
    OS << "explain: offload=" << Off << ": no plan without offload fits "
       << "under the --plan constraints\n";
  // The stage whose offload adds the most: its largest term binds.
  unsigned Worst = 0;
  double WorstS = -1;
  double M = W.Plan.NumMicroBatches;
  for (unsigned S = 0; S < W.Stages.size(); ++S) {
    const StageCost &SC = W.Stages[S];
    double Added = M * SC.Offload.ExposedPerMicroBatchS + SC.OptimizerS;
    if (Added > WorstS) {
      WorstS = Added;
      Worst = S;
    }
  }
  const StageCost &SC = W.Stages[Worst];
  if (!SC.Offload.Terms.empty()) {
    const OffloadTerm &T = SC.Offload.Terms.front();
    OS << "explain: binding transfer: " << T.Name << " on stage " << Worst
       << ", " << formatBytes(Bytes(T.Bytes)) << " per step in "
       << fmtSeconds(T.Seconds) << "; offload exposes "
       << fmtSeconds(M * SC.Offload.ExposedPerMicroBatchS)
       << " of streaming (" << fmtSeconds(SC.Offload.StreamS)
       << " per micro-batch against " << fmtSeconds(SC.ForwardS + SC.BackwardS)
       << " of compute) and an optimizer phase of "
       << fmtSeconds(SC.OptimizerS) << "\n";
  }
  OS << "explain: memory per device at the fullest stage: hbm "
     << formatBytes(Bytes(W.MaxMemoryBytes)) << " of "
     << formatBytes(Bytes(W.HBMBytes)) << ", host "
     << formatBytes(Bytes(W.MaxHostBytes)) << " of "
     << formatBytes(Bytes(W.HostCapacity)) << ", ssd "
     << formatBytes(Bytes(W.MaxSSDBytes)) << " of "
     << formatBytes(Bytes(W.SSDCapacity)) << "\n";
}

void printExplanation(const SearchResult &R, raw_ostream &OS) {
  if (R.Top.empty())
    return;
  const PlanCost &W = R.Top.front();
  if (R.OtherDegrees)
    OS << "explain: " << getDegrees(W.Plan) << " beats "
       << getDegrees(R.OtherDegrees->Plan)
       << " (the best with other degrees: " << R.OtherDegrees->Plan.str()
       << ") " << compareTo(W, *R.OtherDegrees) << "\n";
  else if (!(R.Constrained && R.Unconstrained))
    OS << "explain: " << getDegrees(W.Plan)
       << " is the only (tp, pp) with a plan that fits\n";
  // A --plan is measured against the best plan without its constraints.
  if (R.Constrained && R.Unconstrained) {
    const PlanCost &U = *R.Unconstrained;
    if (U.Plan.str() == W.Plan.str())
      OS << "explain: the --plan request's best, " << W.Plan.str()
         << ", is also the best plan without the --plan constraints\n";
    else
      OS << "explain: the best plan without the --plan constraints, "
         << U.Plan.str() << ", beats the --plan request's best, "
         << W.Plan.str() << ", " << compareTo(U, W) << "\n";
  }
  // The next plan overall, unless a line below already compares with it.
  auto IsNext = [&](const Optional<PlanCost> &PC) {
    return PC && R.Top.size() > 1 && R.Top[1].Plan.str() == PC->Plan.str();
  };
  bool SameAsOther =
      IsNext(R.OtherDegrees) || IsNext(R.DefaultOrder) || IsNext(R.FP32Grad) ||
      any_of(R.OverlapFlips,
             [&](const PlanCost &F) { return IsNext(Optional<PlanCost>(F)); });
  if (R.Top.size() > 1 && !SameAsOther)
    OS << "explain: next overall, " << R.Top[1].Plan.str() << ", loses "
       << compareTo(W, R.Top[1]) << "\n";
  if (R.DefaultOrder)
    OS << "explain: axis order " << getAxisOrderName(W.Plan.Order) << " ("
       << R.WinnerGroups << ") beats the default "
       << getAxisOrderName(R.DefaultOrder->Plan.Order) << " ("
       << R.DefaultOrderGroups << ") on the same plan "
       << compareTo(W, *R.DefaultOrder) << "\n";
  for (const PlanCost &F : R.OverlapFlips) {
    // Which overlap this flip changed, and the winner's setting of it.
    const ParallelPlan &A = W.Plan, &B = F.Plan;
    StringRef Key = A.TPOverlap != B.TPOverlap   ? "tp_overlap"
                    : A.DPOverlap != B.DPOverlap ? "dp_overlap"
                                                 : "pp_overlap";
    bool On = Key == "tp_overlap"   ? A.TPOverlap
              : Key == "dp_overlap" ? A.DPOverlap
                                    : A.PPOverlap;
    OS << "explain: " << Key << "=" << (On ? "on" : "off")
       << (On ? " (communication beside compute, which it holds a share of)"
              : " (communication waited for)")
       << ": the same plan with " << Key << "=" << (On ? "off" : "on") << " ";
    if (isBetterPlan(W, F))
      OS << "loses " << compareTo(W, F) << "\n";
    else
      OS << "wins " << compareTo(F, W) << " (--plan fixed it)\n";
  }
  if (R.FP32Grad) {
    OS << "explain: grad=bf16 halves the DP gradient traffic and buffer; "
       << "the same plan with fp32 gradients ";
    if (!R.FP32Grad->FitsMemory)
      OS << "needs " << formatBytes(Bytes(R.FP32Grad->MaxMemoryBytes))
         << " > " << formatBytes(Bytes(R.FP32Grad->HBMBytes)) << " HBM\n";
    else
      OS << "loses " << compareTo(W, *R.FP32Grad) << "\n";
  }
  if (Optional<int64_t> B =
          suggestGlobalBatch(W.Plan, R.Space.Devices, R.Space.Batch)) {
    uint64_t TPPP = (uint64_t)W.Plan.TP * W.Plan.PP,
             Max = R.Space.Devices / TPPP;
    OS << "explain: a global batch of " << *B << " (a multiple of dp*mb = "
       << Max * W.Plan.MicroBatchSize << ") would let " << Max
       << " replicas of tp=" << W.Plan.TP << ",pp=" << W.Plan.PP << " use "
       << Max * TPPP << " of the " << R.Space.Devices << " devices instead of "
       << W.Plan.getNumDevices() << " (batch " << R.Space.Batch << ")\n";
  }
  if (W.Plan.Offload.any())
    printOffloadExplanation(R, OS);
  OS << "explain: memory " << formatBytes(Bytes(W.MaxMemoryBytes)) << " of "
     << formatBytes(Bytes(W.HBMBytes)) << " HBM at the fullest stage; the "
     << "space: ";
  printSpaceLine(R.Space, OS);
  OS << "\n";
}

/// The goodput of \p PC under \p Rel (keys fraction, goodput, cluster_mtbf_s
/// (null when no failure rate is given), checkpoint_s, interval_s).
static json::Object goodputJSON(const Reliability &Rel, const PlanCost &PC) {
  GoodputEstimate G = estimateGoodput(Rel, PC);
  json::Value MTBF = nullptr;
  if (std::isfinite(G.ClusterMTBFS))
    MTBF = G.ClusterMTBFS;
  return json::Object{{"fraction", G.Fraction},
                      {"goodput", G.Goodput},
                      {"cluster_mtbf_s", std::move(MTBF)},
                      {"checkpoint_s", G.CheckpointS},
                      {"interval_s", G.IntervalS},
                      {"method", "Young/Daly"}};
}

static json::Object planJSON(const PlanCost &PC,
                             const Reliability *Rel = nullptr) {
  const ParallelPlan &P = PC.Plan;
  json::Array Stages;
  for (const StageCost &SC : PC.Stages)
    Stages.push_back((int64_t)SC.NumLayers);
  json::Array Order{"tp"};
  for (MeshAxis A : P.Order)
    Order.push_back(getMeshAxisName(A));
  StepBreakdown B = getStepBreakdown(PC);
  json::Object O{
      {"plan", json::Object{{"tp", (int64_t)P.TP},
                            {"pp", (int64_t)P.PP},
                            {"dp", (int64_t)P.DP},
                            {"ep", (int64_t)P.EP},
                            {"sp", P.SP},
                            {"micro_batch_size", (int64_t)P.MicroBatchSize},
                            {"num_micro_batches", (int64_t)P.NumMicroBatches},
                            {"virtual_stages", (int64_t)P.VirtualStages},
                            {"recompute", getRecomputeName(P.RC)},
                            {"zero_stage", (int64_t)P.ZeroStage},
                            {"grad_dtype", getGradPrecisionName(P.Grad)},
                            {"tp_overlap", P.TPOverlap},
                            {"dp_overlap", P.DPOverlap},
                            {"pp_overlap", P.PPOverlap},
                            {"axis_order", std::move(Order)},
                            {"stage_layers", std::move(Stages)}}},
      {"plan_string", P.str()},
      {"step_time_s", PC.StepTimeS},
      {PC.getThroughputKey(), PC.Throughput},
      {"mfu", PC.MFU},
      {"max_memory_bytes", PC.MaxMemoryBytes},
      {"hbm_bytes", PC.HBMBytes},
      {"breakdown",
       json::Object{{"compute_s", B.ComputeS},
                    {"tp_comm_s", B.TPCommS},
                    {"ep_comm_s", B.EPCommS},
                    {"bubble_s", B.BubbleS},
                    {"dp_comm_s", B.DPCommS},
                    {"optimizer_s", B.OptimizerS},
                    {"dominant", getCostTermName(B.getDominant())}}}};
  if (Rel)
    O["goodput"] = goodputJSON(*Rel, PC);
  return O;
}

void printSearchJSON(const SearchResult &R, unsigned K, bool Explain,
                     raw_ostream &OS) {
  json::Object Root;
  if (!R.Top.empty())
    Root = planJSON(R.Top.front(), R.Reliab ? &*R.Reliab : nullptr);
  Root["fits"] = !R.Top.empty();
  Root["devices"] = (int64_t)R.Space.Devices;
  if (!R.Top.empty()) {
    Root["devices_used"] = (int64_t)R.Top.front().Plan.getNumDevices();
    Root["idle"] = describeIdleDevices(
        R.Top.front().Plan, R.Space.Devices, R.Space.Batch,
        R.BestAllDevices ? &*R.BestAllDevices : nullptr,
                          R.TriedAllDevices);
  }
  if (R.Reliab)
    Root["objective"] = R.RankedByGoodput ? "goodput" : "step";
  Root["stages_from"] = R.StagesGiven                            ? "--plan"
                        : R.Top.empty()                          ? ""
                        : R.Top.front().Plan.StageLayers.empty() ? "even split"
                                                                 : "balanced";
  const SearchStats &St = R.Stats;
  Root["search"] =
      json::Object{{"candidates", (int64_t)St.Candidates},
                   {"simulated", (int64_t)St.Simulated},
                   {"costed_without_simulation", (int64_t)St.StagesEvaluated},
                   {"over_hbm", (int64_t)St.OverMemory},
                   {"memory_bound_pruned", (int64_t)St.MemoryBoundPruned},
                   {"time_bound_pruned", (int64_t)St.TimeBoundPruned},
                   {"partitions", (int64_t)St.Partitions}};
  std::string Space;
  raw_string_ostream SOS(Space);
  printSpaceLine(R.Space, SOS);
  Root["space"] = SOS.str();
  Root["uncosted"] = uncostedJSON(R.Uncosted);
  const ExpertInfo &X = R.Space.Experts;
  Root["experts"] = json::Object{{"moe_layers", (int64_t)X.NumGroups},
                                 {"stacked_layers", (int64_t)X.NumStacked},
                                 {"experts_per_layer", (int64_t)X.NumExperts},
                                 {"example_parameter", X.Parameter},
                                 {"not_split_by_ep", X.NotSplit}};
  json::Array Top;
  for (unsigned I = 0; I < std::min<size_t>(K, R.Top.size()); ++I) {
    json::Object O = planJSON(R.Top[I], R.Reliab ? &*R.Reliab : nullptr);
    O["rank"] = (int64_t)I + 1;
    O["memory_bytes"] = R.Top[I].MaxMemoryBytes;
    Top.push_back(std::move(O));
  }
  Root["top"] = std::move(Top);
  if (Explain) {
    std::string Text;
    raw_string_ostream EOS(Text);
    printExplanation(R, EOS);
    SmallVector<StringRef, 4> Lines;
    StringRef(EOS.str()).split(Lines, '\n', -1, false);
    json::Array Sentences;
    for (StringRef L : Lines) {
      L.consume_front("explain: ");
      Sentences.push_back(L.str());
    }
    Root["explain"] = std::move(Sentences);
  }
  OS << formatv("{0:2}", json::Value(std::move(Root))) << "\n";
}

} // namespace loom
