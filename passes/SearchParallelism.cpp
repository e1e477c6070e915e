//===- SearchParallelism.cpp - Choose the parallel plan (DESIGN §6) -------===//
//
// Runs the search of lib/Planner/Search.cpp over the costed graph: the plan
// with the least predicted step time that fits HBM, honouring what --plan
// fixed. Annotates every node with its pipeline stage and leaves the ranked
// plans in CompilationUnit::Search for the reports. When nothing fits it
// asks Z3 (lib/Solver/PlanConstraints.cpp) why, and fails with
// NoFeasiblePlanError, whose message is the unsat core in plain words.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Pass/Pass.h"
#include "loom/Plan/BatchSplit.h"
#include "loom/Plan/StageSplit.h"
#include "loom/Planner/Goodput.h"
#include "loom/Planner/Search.h"
#include "loom/Report/ServingReport.h"
#include "loom/Solver/PlanConstraints.h"
#include "llvm/ADT/StringExtras.h"

using namespace llvm;

namespace loom {
namespace {

/// Activations per micro-batch (issue 31 item 3): the evaluator sizes them
/// on the model bound at each plan's micro-batch size
/// (PlanEvaluator::setMicroBatchShapes) while they do not scale with the
/// batch. Models with experts only: a capacity dispatch's dims follow the
/// tokens of the batch it sees, and a T x E x C one-hot grows as the square
/// of it; a dense model's activations are proportional to the batch, and
/// probing that would cost a second front end (4-6 s on LLaMA-2-70B,
/// whose search takes about 1 s). A micro-batch graph that cannot be built
/// leaves the bound graph's bytes, scaled, with a warning.
void setMicroBatchShapes(PlanEvaluator &Eval, CompilationUnit &CU) {
  if (!CU.Imported || Eval.getExpertGroups().empty() ||
      findBatchSymbol(CU.Imported->getGraph()).empty())
    return;
  auto Warned = std::make_shared<bool>(false);
  Eval.setMicroBatchShapes(
      [&CU, Warned](unsigned MB) -> std::shared_ptr<const StringMap<double>> {
        Expected<MicroBatchModel> Sub =
            buildMicroBatchModel(CU, MB, /*PlanExpectedCounts=*/true);
        if (!Sub) {
          std::string Msg = toString(Sub.takeError());
          if (!*Warned)
            CU.warn("activations at micro-batch size " + Twine(MB) +
                    " scaled from the planned batch: " + Msg);
          *Warned = true;
          return nullptr;
        }
        auto Bytes = std::make_shared<StringMap<double>>();
        const Graph &G = Sub->M->getGraph();
        auto Add = [&](const Value *V) {
          if (V)
            (*Bytes)[V->getName()] =
                (double)V->Type.getSizeInBytes().getValueOr(0);
        };
        for (const Value *V : G.getInputs())
          Add(V);
        for (const auto &N : G.getNodes())
          for (const Value *V : N->getOutputs())
            Add(V);
        return Bytes;
      });
}

PlanSpaceDesc describeForSolver(const SearchSpace &S, const PlanSpec &F) {
  PlanSpaceDesc D;
  D.Devices = S.Devices;
  D.Batch = S.Batch;
  D.NumLayers = S.NumLayers;
  D.NumBlocks = S.NumBlocks;
  D.TPLimit = S.TPLimit;
  D.TPLimitWhy = S.TPLimitWhy;
  D.TPSplitSizes = S.TPDiv.Sizes;
  D.Train = S.Train;
  D.NumExperts = S.Experts.NumExperts;
  D.FixedEP = F.EP.getValueOr(0);
  D.FixedTP = F.TP.getValueOr(0);
  D.FixedPP = F.PP.getValueOr(F.StageLayers.size());
  D.FixedDP = F.DP.getValueOr(0);
  D.FixedMB = F.MicroBatchSize.getValueOr(0);
  D.FixedNMB = F.NumMicroBatches.getValueOr(0);
  D.FixedVPP = F.VirtualStages.getValueOr(0);
  D.FixedZero = F.ZeroStage ? (int)*F.ZeroStage : -1;
  D.FixedRecompute = F.RC ? (int)*F.RC : -1;
  D.FixedSP = F.SP ? (int)*F.SP : -1;
  D.FixedStages = !F.StageLayers.empty();
  D.FixedGrad = F.Grad ? (int)*F.Grad : -1;
  D.FixedOrder = F.Order ? (int)getAxisOrderIndex(*F.Order) : -1;
  if (S.StaticBatch)
    D.SingleBatchSplit = getStaticBatchRule();
  return D;
}

/// "mb=1,sp=1,vpp=1,recompute=full,zero=3": the choices besides tp and pp
/// ("ep=8," first when ep > 1, ",grad=bf16" last when so).
std::string describeChoices(const ParallelPlan &P) {
  std::string EP = P.EP > 1 ? "ep=" + std::to_string(P.EP) + "," : "";
  std::string Grad = P.Grad == GradPrecision::FP32
                         ? ""
                         : ",grad=" + getGradPrecisionName(P.Grad).str();
  return (EP + "mb=" + Twine(P.MicroBatchSize) + ",sp=" + Twine(P.SP ? 1 : 0) +
          ",vpp=" + Twine(P.VirtualStages) + ",recompute=" +
          getRecomputeName(P.RC) + ",zero=" + Twine(P.ZeroStage) + Grad)
      .str();
}

int64_t getStaticInputDim(const Graph &G, unsigned Dim) {
  for (const Value *V : G.getInputs())
    if (V->Type.HasShape && V->Type.getRank() >= 2)
      return V->Type.Dims[Dim].isStatic() && V->Type.Dims[Dim].Size > 0
                 ? V->Type.Dims[Dim].Size
                 : 1;
  return 1;
}

/// Why \p F alone admits no plan, when the reason is arithmetic on what it
/// fixes: the solver's model (PlanConstraints) spans plans on all the
/// devices, so with idle devices allowed its unsat core could name a
/// divisibility that does not bind. None when the fixed choices leave room.
Optional<std::string> explainFixedChoices(const PlanSpec &F,
                                          const SearchSpace &S) {
  uint64_t TP = F.TP.getValueOr(1), DP = F.DP.getValueOr(1);
  uint64_t PP =
      F.PP.getValueOr(F.StageLayers.empty() ? 1 : F.StageLayers.size());
  uint64_t MB = F.MicroBatchSize.getValueOr(1);
  // What --plan gave, as given; the rest is at least 1.
  std::vector<std::string> Given;
  if (F.TP)
    Given.push_back("tp=" + std::to_string(TP));
  if (F.PP || !F.StageLayers.empty())
    Given.push_back("pp=" + std::to_string(PP));
  if (F.DP)
    Given.push_back("dp=" + std::to_string(DP));
  uint64_t CP = F.CP.getValueOr(1);
  if (F.CP)
    Given.push_back("cp=" + std::to_string(CP));
  if (TP * PP * DP * CP > S.Devices)
    return "--plan: " + join(Given, ", ") + " needs at least " +
           std::to_string(TP * PP * DP * CP) + " devices, and there are " +
           std::to_string(S.Devices);
  uint64_t NMB = F.NumMicroBatches.getValueOr(
      F.MicroBatchSize && S.Batch > 0 ? S.Batch / (DP * MB) : 1);
  if (!isBatchSplitEmittable(!S.StaticBatch, DP, NMB))
    return "--plan: dp=" + std::to_string(DP) + ", nmb=" + std::to_string(NMB) +
           ": " + getStaticBatchRule();
  if (S.Batch > 0 && (F.DP || F.MicroBatchSize) && S.Batch % (DP * MB))
    return "--plan: the global batch " + std::to_string(S.Batch) +
           " is not divisible by dp*mb = " + std::to_string(DP * MB) +
           " (dp=" + std::to_string(DP) + ", mb=" + std::to_string(MB) + ")";
  return None;
}

/// The best plan without --plan's constraints and the best completion of
/// each --compare request, as the main search finds them (same devices,
/// same evaluator).
Error searchComparisons(const PlanEvaluator &Eval, const Graph &G,
                        const CompilationUnit &CU, const EvaluatorOptions &EO,
                        const SearchOptions &SO, SearchResult &R) {
  if (CU.Opts.SearchUnconstrained || !CU.Opts.Compare.empty()) {
    if (!CU.PlanRequest) {
      R.Unconstrained = R.Top.front();
    } else {
      SearchOptions U = SO;
      U.Fixed = PlanSpec();
      U.TopK = 1;
      Expected<SearchResult> UR =
          searchPlans(Eval, G, CU.Layers, *CU.HW, EO, U);
      if (!UR)
        return UR.takeError();
      if (!UR->Top.empty())
        R.Unconstrained = UR->Top.front();
    }
  }
  if (CU.Opts.FailedDevices) {
    SearchOptions B = SO;
    B.Devices = CU.HW->getNumDevices();
    B.TopK = 1;
    Expected<SearchResult> BR = searchPlans(Eval, G, CU.Layers, *CU.HW, EO, B);
    if (!BR)
      return BR.takeError();
    R.FailedDevices = CU.Opts.FailedDevices;
    R.FailureWhat = CU.Opts.FailureWhat;
    if (!BR->Top.empty())
      R.BeforeFailure = BR->Top.front();
  }
  for (const auto &Req : CU.Opts.Compare) {
    SearchOptions C = SO;
    C.Fixed = Req.second;
    C.TopK = 1;
    Expected<SearchResult> CR = searchPlans(Eval, G, CU.Layers, *CU.HW, EO, C);
    if (!CR)
      return createStringError(inconvertibleErrorCode(),
                               "--compare " + Req.first + ": " +
                                   toString(CR.takeError()));
    R.Compared.emplace_back(
        Req.first,
        CR->Top.empty() ? None : Optional<PlanCost>(CR->Top.front()));
  }
  return Error::success();
}

class SearchParallelismPass : public Pass {
public:
  Error run(CompilationUnit &CU) override { return searchParallelism(CU); }
  /// Whether the model as imported has a batch symbol decides which batch
  /// splits shard can emit (loom/Plan/BatchSplit.h): the search ranks the
  /// same plans with and without -o.
  bool needsImportedModel() const override { return true; }
};

} // namespace

/// Offload: when the nearest miss fits HBM, it is host DRAM or SSD that
/// overflows (the solver's memory model knows HBM only): say which.
static Optional<std::string> describeTierOverflow(const SearchResult &R) {
  if (!R.Closest || R.Closest->MaxMemoryBytes > R.Closest->HBMBytes)
    return None;
  const PlanCost &C = *R.Closest;
  std::string Head = "no plan fits: the nearest, " + C.Plan.str() +
                     ", fits HBM (" + formatBytes(Bytes(C.MaxMemoryBytes)) +
                     " of " + formatBytes(Bytes(C.HBMBytes)) + ")";
  std::vector<std::string> Needs;
  if (C.MaxHostBytes > C.HostCapacity)
    Needs.push_back(formatBytes(Bytes(C.MaxHostBytes)) + " > " +
                    formatBytes(Bytes(C.HostCapacity)) + " of host DRAM");
  if (C.MaxSSDBytes > C.SSDCapacity)
    Needs.push_back(formatBytes(Bytes(C.MaxSSDBytes)) + " > " +
                    formatBytes(Bytes(C.SSDCapacity)) + " of SSD");
  if (!Needs.empty())
    return Head + " but needs " + join(Needs, " and ") + " per device";
  if (!C.Embeddings.Fits) // lib/Planner/Embedding.cpp
    return Head + " but its embedding tables do not fit: " + C.Embeddings.Why;
  // Every tier fits costed in full, yet the search refused it: its memory
  // bound (SearchBounds.cpp) exceeded the cost. Never an empty reason.
  return Head + " and every other memory tier, yet the search's memory "
                "bound refused it (a bug in Loom: the bound must not exceed "
                "the cost; please report it)";
}

EvaluatorOptions getEvaluatorOptions(const CompilationUnit &CU) {
  const Graph &G = CU.M->getGraph();
  EvaluatorOptions EO;
  EO.Train = CU.Opts.Mode == RunMode::Train;
  // Routed tokens: the most loaded ep rank over the mean. By default the
  // capacity factor: an expert takes at most that multiple of its even
  // share, and the planner assumes the busiest rank reaches it.
  EO.MoEImbalance = CU.Opts.MoEImbalance.getValueOr(
      std::max(1.0, CU.Opts.MoECapacityFactor.getValueOr(1.0)));
  EO.DDPBucketParams = CU.Opts.DDPBucketParams.getValueOr(0);
  EO.EPDispatchPerRank = CU.Opts.EPDispatchPerRank;
  EO.EPDispatchEfficiency = CU.Opts.EPDispatchEfficiency;
  if (CU.Opts.OptimizerBytesPerParam)
    EO.OptimizerBytesPerParam = *CU.Opts.OptimizerBytesPerParam;
  if (const Optional<PrecisionRecipe> &R = CU.Opts.Precision) {
    // The profile's optimizer bytes include a 4-byte fp32 master copy
    // (optimizer_bytes_per_param: 12 = master + Adam m, v); a recipe
    // whose weights are fp32 has none beyond the weights themselves.
    EO.OptimizerBytesPerParam += R->MasterBytes - 4;
    EO.WeightBytesPerParam = R->WeightBytes;
    EO.Allows16BitGrads = R->Allows16BitGrads;
  }
  EO.Opset = CU.M->getOpsetVersion("");
  // The global batch the graph was bound with: --batch, else (a model with
  // static shapes) dim 0 of its first input with a static rank >= 2.
  EO.Batch = CU.Opts.Batch.getValueOr(getStaticInputDim(G, 0));
  if (CU.Imported) {
    const Graph &IG = CU.Imported->getGraph();
    std::string Sym = findBatchSymbol(IG);
    for (const Value *V : IG.getInputs())
      for (unsigned D = 0; D < V->Type.Dims.size() && !Sym.empty(); ++D)
        if (V->Type.Dims[D].isSymbolic() && V->Type.Dims[D].Symbol == Sym) {
          EO.InputBatchDims[V->getName().str()] = (int)D;
          break;
        }
  }
  // Tokens only when a sequence dim exists: one bind-symbols bound (--seq,
  // or --dim of a sequence symbol), else the static [batch, seq] token ids
  // of a model exported with fixed shapes. An image's channels or DLRM's
  // dense features are not a sequence: samples/s.
  if (CU.BoundSeq) {
    EO.Seq = *CU.BoundSeq;
  } else if (!G.getInputs().empty()) {
    const Value *In = G.getInputs().front();
    if (In->Type.isStatic() && In->Type.getRank() == 2 &&
        (In->Type.Elem == DataType::Int64 || In->Type.Elem == DataType::Int32))
      EO.Seq = In->Type.Dims[1].Size;
  }
  return EO;
}

/// --mode serve's options completed with what needs the hardware and the
/// graph: the engine's caps (and --set's), the devices (and --fail's), and
/// the check that every prompt fits a static sequence length.
static Expected<ServingOptions> getServingOptions(const CompilationUnit &CU,
                                                  const EvaluatorOptions &EO) {
  ServingOptions SvO = *CU.Opts.Serve;
  SvO.Devices = CU.Opts.Devices.getValueOr(0);
  SvO.FailedDevices = CU.Opts.FailedDevices;
  SvO.FailureWhat = CU.Opts.FailureWhat;
  Expected<ServingEngine> En = getServingEngine(SvO.Engine.Name, *CU.HW);
  if (!En)
    return En.takeError();
  SvO.Engine = *En;
  if (SvO.MaxSeqsSet)
    SvO.Engine.MaxSeqs = *SvO.MaxSeqsSet;
  if (SvO.MaxTokensSet)
    SvO.Engine.MaxTokens = *SvO.MaxTokensSet;
  if (SvO.Engine.MaxSeqsKey.empty())
    SvO.Engine.MaxSeqsKey = "serve.max_seqs";
  if (SvO.Engine.MaxTokensKey.empty())
    SvO.Engine.MaxTokensKey = "serve.max_batched_tokens";
  // A graph exported with a fixed sequence length computes that many
  // tokens: a longer prompt is not a what-if the graph can answer.
  int64_t Longest = SvO.Load.getMaxPrompt();
  if (!CU.BoundSeq && EO.Seq > 0 && Longest > EO.Seq)
    return createStringError(
        inconvertibleErrorCode(),
        "--mode serve: a %lld-token prompt is longer than the model's static "
        "sequence length %lld (dim 1 of its first input): export it with a "
        "symbolic sequence dim, or ask for prompts of at most %lld tokens",
        (long long)Longest, (long long)EO.Seq, (long long)EO.Seq);
  return SvO;
}

Error searchParallelism(CompilationUnit &CU) {
  if (!CU.HW)
    return createStringError(inconvertibleErrorCode(),
                             "search-parallelism needs a hardware model");
  if (CU.NodeCosts.empty())
    return createStringError(
        inconvertibleErrorCode(),
        "search-parallelism needs the annotate-costs pass before it");
  const Graph &G = CU.M->getGraph();
  // Work the cost model cannot see would make every plan look faster than
  // it is: refuse, unless told to plan without it.
  UncostedWork U = summarizeUncosted(G, CU.NodeCosts);
  if (!CU.Opts.AllowUncosted)
    if (Error E = checkUncosted(U))
      return E;
  EvaluatorOptions EO = getEvaluatorOptions(CU);
  PlanEvaluator Eval(G, CU.Layers, CU.NodeCosts, *CU.HW, EO);
  setMicroBatchShapes(Eval, CU);
  // --mode serve: the serving search (loom/Planner/Serving.h) picks tp, pp and
  // the replicas; the search below costs one replica of it, which shard and
  // emit write.
  if (CU.Opts.Serve) {
    Expected<ServingOptions> SvOr = getServingOptions(CU, EO);
    if (!SvOr)
      return SvOr.takeError();
    ServingOptions &SvO = *SvOr;
    Expected<ServingResult> SR = searchServing(
        Eval, CU.Layers, *CU.HW, EO,
        describeSearchSpace(G, CU.Layers, *CU.HW, EO, SvO.Devices), SvO);
    if (!SR)
      return SR.takeError();
    CU.Serving = std::make_shared<ServingResult>(std::move(*SR));
    if (!CU.Serving->Feasible)
      return make_error<NoFeasiblePlanError>(
          describeNoServingPlan(*CU.Serving));
    // The graphs are one replica; of a disaggregated plan, one decode
    // instance (a prefill instance is the same graph at prefill_tp).
    const ServingPlanCost &Best = CU.Serving->DisaggChosen
                                      ? CU.Serving->Disagg->Decode
                                      : CU.Serving->Plans.front();
    PlanSpec One;
    One.TP = Best.TP;
    One.PP = Best.PP;
    One.DP = 1;
    One.RestPlain = true;
    CU.PlanRequest = One;
  }
  SearchOptions SO;
  if (CU.PlanRequest)
    SO.Fixed = *CU.PlanRequest;
  // Two at least: explanations compare the winner with the next plan.
  SO.TopK = std::max(2u, CU.Opts.TopPlans);
  // --objective goodput re-ranks what the search returns: give it a few
  // more plans than asked for to choose from.
  if (CU.Opts.RankByGoodput) {
    if (!CU.HW->Reliab)
      return createStringError(
          inconvertibleErrorCode(),
          "--objective goodput: the hardware '%s' has no reliability section "
          "(failure rates and checkpoint bandwidth)",
          CU.HW->Name.c_str());
    SO.TopK = std::max(SO.TopK, 16u);
  }
  SO.Devices = CU.Opts.Devices.getValueOr(0);
  SO.Prune = !CU.Opts.NoPrune;
  SO.FindNoOffload = CU.Opts.FindNoOffload;
  // What shard can emit (loom/Plan/BatchSplit.h): it binds the model as
  // imported at the micro-batch size.
  // (Without the imported model -- the search run after a pipeline that
  // stopped before it -- nothing is emitted either.)
  SO.StaticBatch =
      CU.Imported && findBatchSymbol(CU.Imported->getGraph()).empty();
  for (const auto &F : CU.Opts.Frameworks)
    SO.Frameworks.push_back(F.get());
  if (CU.Serving)
    SO.Devices =
        CU.PlanRequest->TP.getValueOr(1) * CU.PlanRequest->PP.getValueOr(1);
  if (SO.Fixed.RestPlain) {
    // rest=plain: the keys not given take their plain values; the search
    // then costs that one plan, like any other.
    Expected<ParallelPlan> P = completePlan(
        SO.Fixed, SO.Devices ? SO.Devices : CU.HW->getNumDevices(), EO.Batch);
    if (!P)
      return P.takeError();
    SO.Fixed = getFixedSpec(*P);
    SO.BalanceStages = false;
  }
  Expected<SearchResult> R = searchPlans(Eval, G, CU.Layers, *CU.HW, EO, SO);
  if (!R)
    return R.takeError();
  R->Uncosted = U;
  R->Reliab = CU.HW->Reliab;
  if (CU.Opts.RankByGoodput && !R->Top.empty()) {
    // Stable: plans of equal goodput keep the search's order.
    std::vector<std::pair<double, PlanCost>> Ranked;
    for (PlanCost &PC : R->Top)
      Ranked.emplace_back(estimateGoodput(*R->Reliab, PC).Goodput,
                          std::move(PC));
    std::stable_sort(
        Ranked.begin(), Ranked.end(),
        [](const auto &A, const auto &B) { return A.first > B.first; });
    R->Top.clear();
    for (auto &P : Ranked)
      R->Top.push_back(std::move(P.second));
    R->RankedByGoodput = true;
  }
  R->RestPlain = CU.PlanRequest && CU.PlanRequest->RestPlain;

  if (R->Top.empty() && !SO.Frameworks.empty()) {
    // Nothing the framework runs fits: say whether that is the framework's
    // rules (a plan outside them fits) or the hardware (the explanations
    // below, from the search without the rules, whose floors they read).
    SearchOptions Free = SO;
    Free.Frameworks.clear();
    Free.TopK = 1;
    Expected<SearchResult> RF =
        searchPlans(Eval, G, CU.Layers, *CU.HW, EO, Free);
    if (!RF)
      return RF.takeError();
    if (!RF->Top.empty()) {
      const ParallelPlan &P = RF->Top.front().Plan;
      std::string Rule;
      for (const FrameworkProfile *F : SO.Frameworks)
        if (Error E = checkSpec(*F, getFixedSpec(P),
                                {R->Space.NumBlocks, R->Space.KVHeads}))
          Rule = toString(std::move(E));
      R->Precision = CU.Opts.Precision;
      CU.Search = std::make_shared<SearchResult>(std::move(*R));
      return make_error<NoFeasiblePlanError>(
          "no plan the framework can run fits; the best plan outside its "
          "rules is " +
          P.str() + " (" + Rule + ")");
    }
    RF->Uncosted = U;
    RF->Reliab = CU.HW->Reliab;
    R = std::move(RF);
  }
  if (R->Top.empty()) {
    if (Optional<std::string> Why = explainFixedChoices(SO.Fixed, R->Space)) {
      R->Precision = CU.Opts.Precision;
      CU.Search = std::make_shared<SearchResult>(std::move(*R));
      return make_error<NoFeasiblePlanError>("no plan satisfies " + *Why);
    }
    if (Optional<std::string> Why = describeTierOverflow(*R)) {
      R->Precision = CU.Opts.Precision;
      CU.Search = std::make_shared<SearchResult>(std::move(*R));
      return make_error<NoFeasiblePlanError>(*Why);
    }
    std::vector<MemoryFloorFact> Facts;
    for (const MemoryFloor &F : R->Floors)
      Facts.push_back({F.TP, F.PP, F.Bytes, F.Stage, describeChoices(F.Plan)});
    const MemoryLevel *HBM = CU.HW->getMemory("hbm");
    double Usable = HBM ? HBM->getUsableCapacity().value() : 0;
    Expected<InfeasibilityExplanation> X = explainInfeasibility(
        describeForSolver(R->Space, SO.Fixed), Facts, Usable);
    if (!X)
      return X.takeError();
    R->Precision = CU.Opts.Precision;
    CU.Search = std::make_shared<SearchResult>(std::move(*R));
    return make_error<NoFeasiblePlanError>(X->str());
  }

  R->Constrained = CU.PlanRequest.hasValue();
  if (CU.VocabPad && CU.VocabPad->padded()) {
    const VocabPadding &VP = *CU.VocabPad;
    R->VocabPadded = "vocab padded " + std::to_string(VP.From) + " -> " +
                     std::to_string(VP.To) + " ('" + VP.Table +
                     "', a multiple of " + std::to_string(VP.DivisibleBy) +
                     " x tp " + std::to_string(VP.TP) +
                     " as --make-vocab-size-divisible-by; zero rows and "
                     "columns, padded scores masked or sliced off)";
  }
  if (Error E = searchComparisons(Eval, G, CU, EO, SO, *R))
    return E;

  // Stage annotations: nodes follow their layer (nodes outside any layer
  // ride with the first, as in the evaluator).
  const PlanCost &Best = R->Top.front();
  std::vector<int> StageOf(Eval.getNumLayers(), 0);
  for (unsigned S = 0; S < Best.Stages.size(); ++S)
    for (auto [First, End] : getStageLayerRuns(Best, S))
      for (unsigned L = First; L < End && L < StageOf.size(); ++L)
        StageOf[L] = S;
  for (const auto &NP : CU.M->getGraph().getNodes()) {
    unsigned L = std::max(0, NP->Layer);
    NP->Stage = StageOf[std::min<size_t>(L, StageOf.size() - 1)];
  }
  R->Precision = CU.Opts.Precision;
  CU.Search = std::make_shared<SearchResult>(std::move(*R));
  return Error::success();
}

std::unique_ptr<Pass> createSearchParallelismPass() {
  return std::make_unique<SearchParallelismPass>();
}

} // namespace loom
