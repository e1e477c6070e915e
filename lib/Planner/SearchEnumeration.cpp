//===- SearchEnumeration.cpp - The candidates the search visits -----------===//
//
// The Searcher's enumeration (the space in Search.cpp's header): every
// (cp, tp, pp, dp) mesh, ep, micro-batch split, sp, recompute, stage layout
// (even, balanced, virtual stages), ZeRO stage, gradient precision, cp
// algorithm, mesh order and overlap setting the frameworks can run, as one
// base per plan (its offload placements are bound and visited lazily:
// SearchBounds.cpp, SearchRanking.cpp), and the per-layer compute prefixes
// and stage counts the bases point into.
//
//===----------------------------------------------------------------------===//
#include "SearchInternal.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/BatchSplit.h"
#include "loom/Plan/CPEmission.h"
#include "loom/Plan/IdleDevices.h"
#include "loom/Shard/ExpertRules.h"
#include "loom/Support/Divisors.h"
#include "llvm/ADT/SmallVector.h"
#include <limits>
#include <memory>
#include <vector>

using namespace llvm;

namespace loom {
namespace search_detail {

const LayerPrefix &Searcher::getPrefix(unsigned TP, unsigned MB, bool SP,
                                       unsigned EP, unsigned CP) {
  auto Key = std::make_tuple(TP, MB, SP, EP, CP);
  auto It = Prefixes.find(Key);
  if (It != Prefixes.end())
    return It->second;
  LayerPrefix &LP = Prefixes[Key];
  unsigned NL = Eval.getNumLayers();
  LP.F.assign(NL + 1, 0.0);
  LP.B = LP.A = LP.E = LP.F;
  for (unsigned L = 0; L < NL; ++L) {
    PlanEvaluator::LayerTime T = Eval.getLayerTime(L, TP, MB, SP, EP, CP);
    LP.Layers.push_back(T);
    LP.F[L + 1] = LP.F[L] + T.ForwardS;
    LP.B[L + 1] = LP.B[L] + T.BackwardS;
    LP.A[L + 1] = LP.A[L] + T.AttentionForwardS;
    LP.E[L + 1] = LP.E[L] + T.EPCommS;
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
    // The cp algorithms this model can take at this tp, with hybrid's
    // all-to-all degree (each divisor of cp strictly inside it). Hybrid is
    // searched where the frameworks run it (Loom emits no graphs for it:
    // the idealised runtime does not list it) or where --plan asks.
    SmallVector<std::pair<CPAlgo, unsigned>, 4> Algos;
    auto AddAlgo = [&](CPAlgo A, unsigned U) {
      ParallelPlan Probe;
      Probe.TP = TP;
      Probe.CP = CP;
      Probe.CPA = A;
      Probe.CPUlysses = U;
      if ((CP == 1 && A != CPAlgo::Ring) || (CP > 1 && F.CPA && *F.CPA != A) ||
          (F.CPUlysses && A == CPAlgo::Hybrid && *F.CPUlysses != U) ||
          !Eval.getCPIllegalReason(Probe).empty())
        return;
      Algos.emplace_back(A, U);
    };
    AddAlgo(CPAlgo::Ring, 1);
    AddAlgo(CPAlgo::A2A, 1);
    if (CP > 2 && Space.HybridCP)
      for (unsigned U = 2; U < CP; ++U)
        if (CP % U == 0)
          AddAlgo(CPAlgo::Hybrid, U);
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
                  for (const auto &A : Algos) {
                    P.CPA = A.first;
                    P.CPUlysses = A.second;
                    if (Space.CPEmitOnly && CP > 1) {
                      CPEmitGap Gap = getCPEmitGap(P, Space.ShardedTables);
                      if (Gap && !pinsAllKeys(F, Gap))
                        continue;
                    }
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

} // namespace search_detail
} // namespace loom
