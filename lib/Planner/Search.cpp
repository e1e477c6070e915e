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
// The search is spread over several files, which SearchInternal.h ties
// together (the Searcher class): this one holds the entry points
// (searchPlans with its comparisons without cp and without offload,
// enumerateCandidates) and the checks of what --plan fixes;
// SearchSpace.cpp the space's bounds from the model (tp divisibility,
// experts); StagePartition.cpp the balanced stage boundaries;
// StepBreakdown.cpp the cost terms and the order of plans;
// SearchEnumeration.cpp the candidates; SearchBounds.cpp their step and
// memory bounds; SearchRanking.cpp the visit in bound order, the ranking,
// the explanations and the memory floors.
//
//===----------------------------------------------------------------------===//
#include "loom/Planner/Search.h"
#include "SearchInternal.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/Offload.h"
#include "loom/Shard/ExpertRules.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <vector>

using namespace llvm;

namespace loom {

using search_detail::Candidate;
using search_detail::Searcher;

char NoFeasiblePlanError::ID;

void NoFeasiblePlanError::log(raw_ostream &OS) const { OS << Msg; }

std::error_code NoFeasiblePlanError::convertToErrorCode() const {
  return inconvertibleErrorCode();
}

namespace {

Error checkFixed(const PlanSpec &F, const SearchSpace &S,
                 ArrayRef<const FrameworkProfile *> Frameworks) {
  // What --plan fixes must be something the framework runs.
  for (const FrameworkProfile *FP : Frameworks)
    if (Error E = checkSpec(*FP, F, {S.NumBlocks, S.KVHeads}))
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
    if (!canRun(*F, P, {Space.NumBlocks, Space.KVHeads}))
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
  Space.KVHeads = Eval.getAttentionHeads().second;
  Space.NumLayers = Eval.getNumLayers();
  Space.StaticBatch = Opts.StaticBatch;
  Space.HybridCP =
      Opts.Fixed.CPA == CPAlgo::Hybrid || runsHybridCP(Opts.Frameworks);
  Space.CPEmitOnly = llvm::all_of(
      Opts.Frameworks, [](const FrameworkProfile *F) { return F->AnyPlan; });
  EmbeddingMode M = Opts.Fixed.Emb.getValueOr(EmbeddingMode::Auto);
  Space.ShardedTables =
      llvm::any_of(Eval.getEmbeddingTables(), [&](const EmbeddingTable &T) {
        return Eval.isShardedTable(T.Weight, M);
      });
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
  O.Fixed.CPUlysses.reset();
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
  // A pinned cp the sequence or the devices cannot take, likewise (a
  // hybrid's free all-to-all degree is the enumeration's).
  if (Opts.Fixed.CP && *Opts.Fixed.CP > 1) {
    ParallelPlan Probe;
    Probe.TP = Opts.Fixed.TP.getValueOr(1);
    Probe.CP = *Opts.Fixed.CP;
    Probe.CPA = Opts.Fixed.CPA.getValueOr(CPAlgo::Ring);
    Probe.CPUlysses = Opts.Fixed.CPUlysses.getValueOr(1);
    std::string Why = Probe.CPA == CPAlgo::Hybrid && !Opts.Fixed.CPUlysses
                          ? std::string()
                          : Eval.getCPIllegalReason(Probe);
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
