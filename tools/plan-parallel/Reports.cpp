//===- Reports.cpp - plan-parallel's pipeline run and reports -------------===//
//
// The pass pipeline of plan-parallel (built, instrumented, run, its errors
// handled) and what the run prints: the summary, the cost reports, --top,
// --explain, --compare, --compare-hw, --export without -o and the closing
// line about the output directory.
//
//===----------------------------------------------------------------------===//
#include "Passes.h" // printPlacement
#include "PlanParallel.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Planner/Search.h"
#include "loom/Report/CostReport.h"
#include "loom/Report/PlanComparison.h"
#include "loom/Report/SearchReport.h"
#include "loom/Report/ServingReport.h"
#include "loom/Shard/OutputDir.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace loom;
using namespace planparallel;

/// The best plans of CU's search, or null when it found none (or did not
/// run).
static const SearchResult *getSearched(const CompilationUnit &CU) {
  return CU.Search && !CU.Search->Top.empty() ? CU.Search.get() : nullptr;
}

static void printSummary(const CompilationUnit &CU, unsigned NodesBefore,
                         const PassManager &PM, raw_ostream &OS) {
  const SearchResult *Searched = getSearched(CU);
  const Model &M = *CU.M;
  const Graph &G = M.getGraph();
  OS << "model: " << sys::path::filename(M.SourcePath) << " (opset "
     << M.getOpsetVersion("") << "): " << NodesBefore << " nodes imported, "
     << G.getNumNodes() << " after the pipeline, " << G.getParameters().size()
     << " parameters (" << getTotalParameterCount(G) << " elements, "
     << formatBytes(Bytes(getTotalParameterBytes(G))) << ")";
  if (CU.ShapeOnlyParameters)
    OS << ", " << CU.ShapeOnlyParameters
       << " shape-only (no weight data: planning without weights)";
  OS << "\n";
  if (!CU.Layers.empty()) {
    unsigned Blocks = 0, Runs = 0;
    for (const LayerInfo &L : CU.Layers) {
      Blocks += L.K == LayerInfo::Kind::Block;
      Runs = std::max(Runs, (unsigned)(L.Run + 1));
    }
    OS << "layers: " << CU.Layers.size() << " (" << Blocks
       << " repeated blocks in " << Runs << " run(s), "
       << CU.Layers.size() - Blocks << " other)\n";
  }
  const HardwareModel &HW = *CU.HW;
  OS << "hardware: " << HW.Name << ": " << HW.getNumDevices() << " x "
     << HW.Device.Name << " (";
  bool First = true;
  for (const TopologyLevel &L : HW.Topology) {
    OS << (First ? "" : " x ") << L.Name << ' ' << L.Size;
    First = false;
  }
  OS << ")";
  if (CU.Opts.Devices && *CU.Opts.Devices != HW.getNumDevices())
    OS << ", planning on the first " << *CU.Opts.Devices;
  OS << "\n";
  for (const std::string &O : CU.Opts.HardwareOverrides)
    OS << "what-if: " << O << "\n";
  OS << "pipeline: " << join(PM.getPipelineNames(), ", ") << "\n";
  if (!CU.NodeCosts.empty()) {
    UncostedWork U = summarizeUncosted(CU.M->getGraph(), CU.NodeCosts);
    OS << "costs: forward " << format("%.4g", U.CostedFlops)
       << " FLOPs at the bound batch; " << U.Nodes
       << " node(s) without a cost rule";
    if (U.Nodes)
      OS << " (" << describeUncosted(U) << "; see --print-costs)";
    OS << "\n";
  }
  if (Searched) {
    if (PlanText.getNumOccurrences())
      OS << "plan request: " << PlanText
         << (Searched->RestPlain ? " (the rest at plain values)"
                                 : " (the search chose the rest)")
         << "\n";
    if (CU.Serving)
      printServingSummary(*CU.Serving, OS);
    else
      printChosenPlan(*Searched, OS);
  } else {
    OS << "plan: not searched (search-parallelism is not in the pipeline); "
          "--plan costs a given one\n";
  }
}

/// The closing line of a run that wrote the output directory: what it
/// holds. On stdout after the rest, or on stderr when stdout carries JSON.
static int finish(const CompilationUnit &CU, bool Wrote) {
  if (Wrote && !Quiet && CU.Sharded) {
    bool JSON = Format == ReportFormat::JSON && !PrintGraph;
    (JSON ? errs() : outs())
        << "wrote " << OutputDir << ": "
        << describeOutputDir(*CU.Sharded, OutputDir) << "\n";
  }
  return 0;
}

/// --compare-hw: the planning pipeline again on \p HW, from a fresh import
/// of the model, with \p CU's options and --plan.
static Expected<std::shared_ptr<const SearchResult>>
planOnOtherHardware(const HardwareModel &HW, const CompilationUnit &CU) {
  CompilationUnit Other;
  Other.Opts = CU.Opts;
  Other.Opts.Devices = None;
  Other.Opts.Compare.clear();
  Other.Opts.SearchUnconstrained = false;
  Other.Opts.FailedDevices = 0;
  Other.Opts.OutputDir.clear();
  Other.PlanRequest = CU.PlanRequest;
  Other.HW = &HW;
  Expected<std::unique_ptr<Model>> M = importModelFile(ModelPath, nullptr);
  if (!M)
    return M.takeError();
  Other.M = std::move(*M);
  PassManager PM(getRegisteredPasses());
  PM.addDefaultPipeline({/*Transforms=*/false, /*Emit=*/false});
  std::string Sink;
  raw_string_ostream SinkOS(Sink);
  if (Error E = PM.run(Other, PassInstrumentation(), SinkOS, SinkOS))
    return std::move(E);
  if (!Other.Search)
    return createStringError(inconvertibleErrorCode(),
                             "--compare-hw: no search result");
  return Other.Search;
}

/// Fills \p PM: --pass-pipeline, or the default pipeline with the
/// transform passes when there is an output directory or a dump or stop
/// after one of them asks for them (and emit with -o).
Error planparallel::buildPipeline(PassManager &PM) {
  if (PassPipeline.getNumOccurrences())
    return PM.parsePipeline(PassPipeline);
  bool Transforms = !OutputDir.empty() || PM.isTransformPass(StopAfter) ||
                    any_of(PrintAfter, [&](const std::string &P) {
                      return PM.isTransformPass(P);
                    });
  PM.addDefaultPipeline({Transforms, /*Emit=*/!OutputDir.empty()});
  return Error::success();
}

/// --print-after, --stop-after, --verify-each and --time-passes.
PassInstrumentation planparallel::getInstrumentation() {
  PassInstrumentation PI;
  PI.PrintAfter.assign(PrintAfter.begin(), PrintAfter.end());
  PI.StopAfter = StopAfter;
  PI.VerifyEach = VerifyEach;
  PI.TimePasses = TimePasses;
  return PI;
}

/// Runs \p PM over \p CU (and the search --plan and --print-costs=stage
/// ask for where the pipeline left it out), then stops the progress line
/// and prints the pass timings and the warnings on stderr. Returns the
/// pipeline's error; \p Out what else it left.
Error planparallel::runFrontEnd(CompilationUnit &CU, PassManager &PM,
                                const PassInstrumentation &PI,
                                ProgressLine &Progress, FrontEndResult &Out) {
  raw_string_ostream DumpOS(Out.Dumps);
  // The timing report waits for the progress line to go.
  std::string Timing;
  raw_string_ostream TimingOS(Timing);
  Error E = PM.run(CU, PI, DumpOS, TimingOS);
  DumpOS.flush();
  // --plan and --print-costs=stage ask for a plan: when the pipeline
  // stopped before search-parallelism (or left it out), the same search
  // runs here, so that a plan is costed one way only.
  Out.HaveCosts = !CU.NodeCosts.empty();
  if (!E && !CU.Search && Out.HaveCosts && CU.HW &&
      (PlanText.getNumOccurrences() || PrintCosts == CostLevel::Stage))
    E = searchParallelism(CU);
  Progress.stop();
  errs() << TimingOS.str();
  if (!Quiet)
    for (const std::string &W : CU.getWarnings())
      WithColor::warning(errs(), ToolName) << W << '\n';
  std::vector<std::string> Ran = PM.getPipelineNames();
  Out.Wrote = !E && !OutputDir.empty() && is_contained(Ran, "emit") &&
              (StopAfter.empty() ||
               find(Ran, StopAfter.getValue()) >= find(Ran, "emit"));
  return E;
}

/// The pipeline failed with \p E. No plan (nothing fits, or too much work
/// without a cost rule): when the plan is what was asked for, the
/// explanation and exit status 2 (1 for uncosted work), after the stage
/// report of the nearest miss where one was asked for; reports that do not
/// need a plan (--print-hw, --print-costs=node|layer, --print-placement, IR
/// dumps) go on, with a warning. Returns the exit status when the run ends
/// here (the error reported), or None to go on; a message whose report
/// waits for the other reports (then exit status 2) goes to \p NoPlanMsg.
Optional<int> planparallel::handlePipelineError(
    Error E, const CompilationUnit &CU, const PassInstrumentation &PI,
    bool HaveExports, Optional<std::string> &NoPlanMsg) {
  bool PlanIsTheProduct = TopPlans.getNumOccurrences() || ExplainPlan ||
                          PlanText.getNumOccurrences() ||
                          PrintCosts == CostLevel::Stage || HaveExports ||
                          (!PrintHW && !PrintGraph && PI.PrintAfter.empty() &&
                           !PrintPlacement && PrintCosts == CostLevel::None);
  bool NoPlan = E.isA<NoFeasiblePlanError>();
  bool Uncosted = E.isA<UncostedWorkError>();
  if (!NoPlan && !Uncosted)
    return reportError(std::move(E), 1);
  const SearchResult *S = CU.Search.get();
  std::string Msg = toString(std::move(E));
  // Named by the model file, as every pass error (issue 15 item 7).
  if (PlanIsTheProduct &&
      !(NoPlan && PrintCosts == CostLevel::Stage && S && S->Closest))
    return reportError(createStringError(inconvertibleErrorCode(),
                                         ModelPath + ": error: " + Msg),
                       NoPlan ? 2 : 1);
  if (PlanIsTheProduct)
    NoPlanMsg = Msg;
  else if (!Quiet)
    WithColor::warning(errs(), ToolName)
        << "search-parallelism: " << StringRef(Msg).split('\n').first << '\n';
  return None;
}

/// Checks that what the reports ask for was computed (a search for --top
/// and --explain, costs for --plan and --print-costs), and prints the
/// searches' timings of --time-passes. Returns the plan the run chose (or,
/// when nothing fits, the nearest miss; null when neither): what
/// --print-costs=stage reports.
Expected<const PlanCost *>
planparallel::getCostedPlan(const CompilationUnit &CU, bool HaveCosts,
                            bool NoPlanPending) {
  const SearchResult *Searched = getSearched(CU);
  if ((TopPlans.getNumOccurrences() || ExplainPlan) && !Searched &&
      !NoPlanPending)
    return createStringError(
        inconvertibleErrorCode(),
        "--top and --explain need the search-parallelism pass in the "
        "pipeline");
  if (CU.Serving && TimePasses)
    errs() << format("serving search: %llu batches costed in %.4f s\n",
                     (unsigned long long)CU.Serving->Candidates,
                     CU.Serving->Seconds);
  if (Searched && TimePasses)
    errs() << format(
        "search-parallelism: %llu candidates in %.4f s "
        "(%.2f us per candidate; %llu simulated; CPU %.4f s, %.2f us per "
        "candidate)\n",
        (unsigned long long)Searched->Stats.Candidates, Searched->Stats.Seconds,
        Searched->Stats.Candidates
            ? 1e6 * Searched->Stats.Seconds / Searched->Stats.Candidates
            : 0.0,
        (unsigned long long)Searched->Stats.Simulated,
        Searched->Stats.CPUSeconds,
        Searched->Stats.Candidates
            ? 1e6 * Searched->Stats.CPUSeconds / Searched->Stats.Candidates
            : 0.0);
  const PlanCost *Costed = Searched ? &Searched->Top.front()
                           : CU.Search && CU.Search->Closest
                               ? &*CU.Search->Closest
                               : nullptr;
  if ((PlanText.getNumOccurrences() || PrintCosts == CostLevel::Stage) &&
      !HaveCosts)
    return createStringError(
        inconvertibleErrorCode(),
        "costing a plan needs the annotate-costs pass in the pipeline");
  if (PrintCosts != CostLevel::None && !HaveCosts)
    return createStringError(
        inconvertibleErrorCode(),
        "--print-costs needs the annotate-costs pass in the pipeline");
  return Costed;
}

/// The reports that need no plan, on stdout: the IR dumps, --print-hw,
/// --print-graph and --print-costs (the stage level of \p Costed).
void planparallel::printPlanlessReports(const CompilationUnit &CU,
                                        const std::string &Dumps,
                                        const PlanCost *Costed) {
  const HardwareModel &HW = *CU.HW;
  outs() << Dumps;
  if (PrintHW)
    HW.print(outs());
  if (PrintGraph)
    printModel(*CU.M, outs());
  const Graph &G = CU.M->getGraph();
  switch (PrintCosts) {
  case CostLevel::None:
    break;
  case CostLevel::Node:
    if (Costed && Costed->Plan.TP > 1 && PlanText.getNumOccurrences()) {
      // How the costed plan splits each node (the rule table, as emitted).
      const ParallelPlan &P = Costed->Plan;
      PlanEvaluator Eval(G, CU.Layers, CU.NodeCosts, HW,
                         getEvaluatorOptions(CU));
      DenseMap<const Node *, AxisSpec> Specs;
      for (unsigned L = 0; L < Eval.getNumLayers(); ++L) {
        PlanEvaluator::TPSplit S = Eval.getTPSplit(L, P.TP, P.SP, P.EP);
        for (unsigned I = 0; I < S.Nodes.size(); ++I)
          if (!S.Specs[I].OutputSpecs.empty())
            Specs[S.Nodes[I]] = S.Specs[I].OutputSpecs[0];
      }
      printNodeCosts(G, CU.NodeCosts, HW, Format, outs(), &Specs);
    } else {
      printNodeCosts(G, CU.NodeCosts, HW, Format, outs());
    }
    break;
  case CostLevel::Layer:
    printLayerCosts(G, CU.Layers, CU.NodeCosts, Format, outs());
    break;
  case CostLevel::Stage:
    if (Costed)
      printStageCosts(G, CU.NodeCosts, *Costed, Format, outs());
    break;
  }
}

/// --export without -o: \p Costed's launch arguments for each of
/// \p Exports on stdout, in place of the summary.
static int printLaunchArgs(const CompilationUnit &CU,
                           ArrayRef<ExportTarget> Exports,
                           const PlanCost *Costed) {
  if (!Costed)
    return reportError(createStringError(
        inconvertibleErrorCode(),
        "--export needs a plan: the search-parallelism pass or --plan"));
  for (ExportTarget T : Exports) {
    ExportResult R = exportLaunchArgs(T, makeExportInput(CU, *Costed));
    if (Exports.size() > 1)
      outs() << "==> " << R.FileName << " <==\n";
    outs() << R.Text;
    if (!Quiet)
      for (const std::string &W : R.Warnings)
        WithColor::warning(errs(), ToolName) << W << '\n';
  }
  return 0;
}

/// --compare: the searched plan beside the best without constraints and
/// each compared plan.
static void printPlanComparison(const SearchResult &Searched) {
  std::vector<ComparisonColumn> Cols;
  Cols.push_back({"best", "the search without constraints",
                  Searched.Unconstrained ? &*Searched.Unconstrained : nullptr});
  for (unsigned I = 0; I < Searched.Compared.size(); ++I) {
    const auto &C = Searched.Compared[I];
    Cols.push_back({"[" + std::to_string(I + 1) + "]", "--compare " + C.first,
                    C.second ? &*C.second : nullptr});
  }
  printComparison(Cols, outs());
}

/// --compare-hw: the best plan on each other cluster beside \p Searched's.
/// Returns the exit status of a failure (reported), or 0.
static int printHardwareComparison(const CompilationUnit &CU,
                                   const SearchResult &Searched) {
  std::vector<std::shared_ptr<const SearchResult>> Others;
  std::vector<HardwareModel> OtherHW;
  OtherHW.reserve(CompareHW.size());
  for (const std::string &Path : CompareHW) {
    Expected<HardwareModel> H = loadHardwareModel(Path);
    if (!H)
      return reportError(H.takeError());
    OtherHW.push_back(std::move(*H));
    Expected<std::shared_ptr<const SearchResult>> R =
        planOnOtherHardware(OtherHW.back(), CU);
    if (!R) {
      bool NoPlan = R.errorIsA<NoFeasiblePlanError>();
      return reportError(createStringError(inconvertibleErrorCode(),
                                           "--compare-hw " + Path + ": " +
                                               toString(R.takeError())),
                         NoPlan ? 2 : 1);
    }
    Others.push_back(std::move(*R));
  }
  std::vector<ComparisonColumn> Cols;
  Cols.push_back({CU.HW->Name, "--hw, best plan", &Searched.Top.front()});
  for (unsigned I = 0; I < Others.size(); ++I)
    Cols.push_back(
        {OtherHW[I].Name, "--compare-hw " + CompareHW[I] + ", best plan",
         Others[I]->Top.empty() ? nullptr : &Others[I]->Top.front()});
  printComparison(Cols, outs());
  return 0;
}

/// The plan's reports on stdout: --export's launch arguments without -o,
/// --print-placement or the JSON search result in place of the summary;
/// otherwise the summary, --top, --explain, --compare and --compare-hw.
/// Ends with the line saying what -o holds. Returns the exit status.
int planparallel::writeOutputs(const CompilationUnit &CU, const PassManager &PM,
                               const PassInstrumentation &PI,
                               ArrayRef<ExportTarget> Exports,
                               const PlanCost *Costed, unsigned NodesBefore,
                               bool Wrote) {
  // --export without -o: the launch arguments replace the summary (with
  // -o, emit wrote them into the directory).
  if (!Exports.empty() && OutputDir.empty())
    return printLaunchArgs(CU, Exports, Costed);
  // --print-placement: the placement report replaces the summary.
  if (PrintPlacement) {
    if (Error E = printPlacement(CU, Format, outs()))
      return reportError(std::move(E));
    return finish(CU, Wrote);
  }
  const SearchResult *Searched = getSearched(CU);
  // --format json with a search: the search result as one JSON object
  // (plan, predicted numbers, --top table, explanation) replaces the
  // summary.
  if (Searched && Format == ReportFormat::JSON && !PrintGraph &&
      PI.PrintAfter.empty() && !PrintHW && PrintCosts == CostLevel::None) {
    unsigned K = TopPlans.getNumOccurrences() ? (unsigned)TopPlans : 1;
    if (CU.Serving)
      printServingJSON(*CU.Serving, K, ExplainPlan, outs());
    else
      printSearchJSON(*Searched, K, ExplainPlan, outs());
    return finish(CU, Wrote);
  }
  if (!Quiet && !PrintGraph && PI.PrintAfter.empty() && !PrintHW &&
      PrintCosts == CostLevel::None)
    printSummary(CU, NodesBefore, PM, outs());
  if (Searched && TopPlans.getNumOccurrences())
    CU.Serving ? printServingTop(*CU.Serving, TopPlans, outs())
               : printTopPlans(*Searched, TopPlans, outs());
  if (Searched && ExplainPlan)
    CU.Serving ? printServingExplanation(*CU.Serving, outs())
               : printExplanation(*Searched, outs());
  if (CU.Serving)
    printServingComparison(*CU.Serving, outs());
  if (Searched && !Searched->Compared.empty())
    printPlanComparison(*Searched);
  if (Searched && !CompareHW.empty())
    if (int Code = printHardwareComparison(CU, *Searched))
      return Code;
  return finish(CU, Wrote);
}
