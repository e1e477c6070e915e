//===- SearchBounds.cpp - Lower bounds on a candidate's step and memory ---===//
//
// The cheap bounds the search orders and prunes candidates by ("The order"
// in Search.cpp's header): per base the pipeline's part of the step bound,
// per offload placement the optimizer tail and the memory (one
// PlacementTable per degrees, ZeRO stage, gradient precision and
// recompute), and the stage bound on costed stages. The Searcher's
// constructor is here too: it gathers the capacities, bandwidths and
// parameter counts these bounds read.
//
//===----------------------------------------------------------------------===//
#include "SearchInternal.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

using namespace llvm;

namespace loom {
namespace search_detail {

Searcher::Searcher(const PlanEvaluator &Eval, const Graph &G,
                   const SearchSpace &Space, const HardwareModel &HW,
                   const EvaluatorOptions &EO, const SearchOptions &Opts)
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

double Searcher::pipelineBound(const Candidate &C) const {
  const LayerPrefix &LP = *C.Prefix;
  const ParallelPlan &P = C.Plan;
  double V = P.VirtualStages, M = P.NumMicroBatches;
  double PreF = 0, PreB = 0, Bound = 0;
  unsigned First = 0;
  for (unsigned Count : *C.Counts) {
    unsigned End = First + Count;
    // A stage's micro-batch waits for its ep communication (PipeForwardS,
    // PipeBackwardS); full recompute repeats the forward's compute only.
    double E = LP.E[End] - LP.E[First];
    double FC = LP.F[End] - LP.F[First], F = FC + E;
    double B = 0;
    if (EO.Train) {
      B = LP.B[End] - LP.B[First] + E;
      if (P.RC == Recompute::Full)
        B += FC;
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
  // evaluator (StageCost.cpp) and applyOffload (OffloadCost.cpp) charge:
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

} // namespace search_detail
} // namespace loom
