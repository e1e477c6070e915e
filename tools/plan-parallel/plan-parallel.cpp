//===- plan-parallel.cpp - Loom's command-line driver ---------------------===//
//
//   plan-parallel MODEL --hw HW.yaml [--batch B] [--seq S] [--dim NAME=V]...
//
// Imports the model, loads the hardware description, runs the pass
// pipeline and prints what exists of the plan. Exit status: 0 success,
// 1 bad input or internal error (one message on stderr), 2 no feasible plan.
//
//===----------------------------------------------------------------------===//
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Plan/CostReport.h"
#include "loom/Plan/Search.h"
#include "loom/Support/MemoryLimit.h"
#include "loom/Support/Units.h"
#include "Passes.h" // printPlacement
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace loom;

static cl::OptionCategory LoomCategory("plan-parallel options");

// Debian ships one shared libLLVM whose own options (print-after,
// stop-after, time-passes, ...) are registered in every process. Loom's
// options register under a "loom-" prefix and take their public names in
// main(), after any LLVM option of that name has been unregistered.
#define LOOM_OPT(Name) "loom-" Name

static cl::opt<std::string> ModelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx|model.onnxtxt>"),
                                      cl::cat(LoomCategory));
static cl::opt<std::string>
    HWPath(LOOM_OPT("hw"), cl::Required, cl::value_desc("HW.yaml"),
           cl::desc("Hardware description of the cluster (YAML)"),
           cl::cat(LoomCategory));
static cl::opt<int64_t> Batch(LOOM_OPT("batch"), cl::value_desc("B"),
                              cl::desc("Bind the batch dim (symbol 'batch', "
                                       "else dim 0 of the first dynamic "
                                       "input)"),
                              cl::cat(LoomCategory));
static cl::opt<int64_t> Seq(LOOM_OPT("seq"), cl::value_desc("S"),
                            cl::desc("Bind the sequence dim (symbol 'seq', "
                                     "else dim 1 of the first dynamic input)"),
                            cl::cat(LoomCategory));
static cl::list<std::string> DimBindings(LOOM_OPT("dim"), cl::value_desc("NAME=V"),
                                         cl::desc("Bind symbolic dim NAME"),
                                         cl::cat(LoomCategory));
static cl::opt<std::string> MaxMemory(
    LOOM_OPT("max-memory"), cl::value_desc("SIZE"),
    cl::desc("Fail with a message, not an OOM kill, past this much memory "
             "(default: 3/4 of physical memory; 0B: no bound)"),
    cl::cat(LoomCategory));
static cl::opt<bool> PrintGraph(LOOM_OPT("print-graph"),
                                cl::desc("Print the IR after the pipeline"),
                                cl::cat(LoomCategory));
static cl::opt<bool> PrintHW(LOOM_OPT("print-hw"),
                             cl::desc("Print the hardware model as loaded"),
                             cl::cat(LoomCategory));
static cl::opt<std::string>
    PassPipeline(LOOM_OPT("pass-pipeline"), cl::value_desc("a,b,c"),
                 cl::desc("Run these passes instead of the default pipeline"),
                 cl::cat(LoomCategory));
static cl::list<std::string>
    PrintAfter(LOOM_OPT("print-after"), cl::value_desc("PASS"), cl::CommaSeparated,
               cl::desc("Print the IR after PASS ('all' for every pass)"),
               cl::cat(LoomCategory));
static cl::opt<std::string> StopAfter(LOOM_OPT("stop-after"), cl::value_desc("PASS"),
                                      cl::desc("Stop the pipeline after PASS"),
                                      cl::cat(LoomCategory));
static cl::opt<bool> VerifyEach(LOOM_OPT("verify-each"),
                                cl::desc("Verify the IR after every pass"),
                                cl::cat(LoomCategory));
static cl::opt<bool> TimePasses(LOOM_OPT("time-passes"),
                                cl::desc("Report the time of every pass"),
                                cl::cat(LoomCategory));
enum class CostLevel { None, Node, Layer, Stage };
static cl::opt<CostLevel> PrintCosts(
    LOOM_OPT("print-costs"), cl::ValueOptional, cl::init(CostLevel::None),
    cl::desc("Print the cost breakdown (default: node)"),
    cl::values(clEnumValN(CostLevel::Node, "node", "per node"),
               clEnumValN(CostLevel::Node, "", ""),
               clEnumValN(CostLevel::Layer, "layer", "per layer"),
               clEnumValN(CostLevel::Stage, "stage",
                          "per pipeline stage of the plan the run chose")),
    cl::cat(LoomCategory));
static cl::opt<ReportFormat>
    Format(LOOM_OPT("format"), cl::init(ReportFormat::Text),
           cl::desc("Output format of reports"),
           cl::values(clEnumValN(ReportFormat::Text, "text", "plain text"),
                      clEnumValN(ReportFormat::JSON, "json", "JSON")),
           cl::cat(LoomCategory));
static cl::opt<std::string>
    PlanText(LOOM_OPT("plan"), cl::value_desc("tp=..,pp=..,dp=..,..."),
             cl::desc("Fix plan choices: tp, pp, dp, ep, sp, mb (micro-batch "
                      "size), nmb, vpp, recompute=none|selective|full, "
                      "zero=0..3, grad=fp32|bf16 (DP gradient precision), "
                      "order=tp-ep-dp-pp (mesh axes, innermost first), "
                      "stages=L0:L1:...; the search fills the rest, or "
                      "rest=plain gives it plain values"),
             cl::cat(LoomCategory));
static cl::opt<RunMode> Mode(
    LOOM_OPT("mode"), cl::init(RunMode::Train),
    cl::desc("Plan a training step or inference (forward only)"),
    cl::values(clEnumValN(RunMode::Train, "train", "training step"),
               clEnumValN(RunMode::Infer, "infer", "inference")),
    cl::cat(LoomCategory));
// The search (search-parallelism).
static cl::opt<unsigned>
    TopPlans(LOOM_OPT("top"), cl::value_desc("K"), cl::init(0),
             cl::desc("Rank the K best plans of the search: step time, "
                      "tokens/s, MFU, memory, dominant cost term"),
             cl::cat(LoomCategory));
static cl::opt<bool> ExplainPlan(
    LOOM_OPT("explain"),
    cl::desc("Say why the chosen plan beats the best one with other degrees"),
    cl::cat(LoomCategory));
static cl::opt<bool> AllowUncosted(
    LOOM_OPT("allow-uncosted"),
    cl::desc("Plan even when more than 1% of the forward FLOPs or "
             "parameters have no cost rule (the plan leaves them out)"),
    cl::cat(LoomCategory));
static cl::opt<bool> Quiet(LOOM_OPT("quiet"), cl::desc("Print no warnings or summary"),
                           cl::cat(LoomCategory));

// --print-placement (assign-device-classes; printer in passes/).
static cl::opt<bool> PrintPlacement(
    LOOM_OPT("print-placement"),
    cl::desc("Print every node's device class, its time on each class and "
             "why, then totals per class (honours --format)"),
    cl::cat(LoomCategory));

// The output directory (shard, insert-collectives, schedule, emit).
static cl::opt<std::string>
    OutputDir("o", cl::value_desc("DIR"),
              cl::desc("Write the sharded graphs, manifest.json, "
                       "schedule.json, trace.json and report.txt to DIR"),
              cl::cat(LoomCategory));
static cl::opt<bool> Force(LOOM_OPT("force"),
                           cl::desc("Replace the output directory if it exists"),
                           cl::cat(LoomCategory));
enum class EmitKind { Roles, PerRank };
static cl::opt<EmitKind> EmitMode(
    LOOM_OPT("emit"), cl::init(EmitKind::Roles),
    cl::desc("Graph files to write"),
    cl::values(clEnumValN(EmitKind::Roles, "roles",
                          "one graph per distinct role (default)"),
               clEnumValN(EmitKind::PerRank, "per-rank",
                          "also one graph file per global rank")),
    cl::cat(LoomCategory));
static cl::opt<bool> VerifyOutput(
    LOOM_OPT("verify-output"),
    cl::desc("Check the emitted program's invariants (matched send/receive, "
             "collective order, groups, memory, schedule, ONNX checker and "
             "shape inference) before writing"),
    cl::cat(LoomCategory));

static StringRef ToolName = "plan-parallel";

/// Prints one error, once. Messages that already carry "file...: error:"
/// print as they are; others get the tool name in front.
static int reportError(Error E, int Code = 1) {
  std::string Msg = toString(std::move(E));
  if (StringRef(Msg).contains(": error: "))
    errs() << Msg << '\n';
  else
    WithColor::error(errs(), ToolName) << Msg << '\n';
  return Code;
}

static Expected<CompileOptions> buildOptions() {
  CompileOptions O;
  O.Mode = Mode;
  if (Batch.getNumOccurrences())
    O.Batch = Batch;
  if (Seq.getNumOccurrences())
    O.Seq = Seq;
  for (StringRef B : DimBindings) {
    auto KV = B.split('=');
    int64_t V;
    if (KV.first.empty() || KV.second.trim().getAsInteger(10, V))
      return createStringError(inconvertibleErrorCode(),
                               "--dim '%s': expected NAME=SIZE",
                               B.str().c_str());
    O.Dims.emplace_back(KV.first.str(), V);
  }
  return O;
}

static void printSummary(const CompilationUnit &CU, unsigned NodesBefore,
                         const PassManager &PM, raw_ostream &OS) {
  const SearchResult *Searched =
      CU.Search && !CU.Search->Top.empty() ? CU.Search.get() : nullptr;
  const Model &M = *CU.M;
  const Graph &G = M.getGraph();
  OS << "model: " << sys::path::filename(M.SourcePath) << " (opset "
     << M.getOpsetVersion("") << "): " << NodesBefore << " nodes imported, "
     << G.getNumNodes() << " after the pipeline, "
     << G.getParameters().size() << " parameters ("
     << getTotalParameterCount(G) << " elements, "
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
  OS << ")\n";
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
    printChosenPlan(*Searched, OS);
  } else {
    OS << "plan: not searched (search-parallelism is not in the pipeline); "
          "--plan costs a given one\n";
  }
}

/// Gives every option of LoomCategory its public name (see LOOM_OPT).
static void claimOptionNames() {
  StringMap<cl::Option *> &Opts = cl::getRegisteredOptions();
  std::vector<cl::Option *> Ours;
  for (auto &KV : Opts)
    if (is_contained(KV.second->Categories, &LoomCategory) &&
        KV.first().startswith("loom-"))
      Ours.push_back(KV.second);
  llvm::sort(Ours, [](cl::Option *A, cl::Option *B) {
    return A->ArgStr < B->ArgStr;
  });
  for (cl::Option *O : Ours) {
    StringRef Public = O->ArgStr.drop_front(strlen("loom-"));
    if (cl::Option *Theirs = Opts.lookup(Public))
      Theirs->removeArgument();
    O->setArgStr(Public);
  }
}

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  claimOptionNames();
  cl::HideUnrelatedOptions(LoomCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Loom: plan tensor/pipeline/data/expert parallelism for an ONNX model "
      "on an accelerator cluster\n");
  uint64_t MemoryBound = getPhysicalMemoryBytes() / 4 * 3;
  if (MaxMemory.getNumOccurrences()) {
    Expected<Bytes> B = parseBytes(MaxMemory);
    if (!B)
      return reportError(B.takeError());
    MemoryBound = (uint64_t)B->value();
  }
  installMemoryLimit(MemoryBound, "plan-parallel");

  Expected<HardwareModel> HW = loadHardwareModel(HWPath);
  if (!HW)
    return reportError(HW.takeError());

  CompilationUnit CU;
  Expected<CompileOptions> Opts = buildOptions();
  if (!Opts)
    return reportError(Opts.takeError());
  CU.Opts = std::move(*Opts);
  CU.Opts.TopPlans = std::max(1u, (unsigned)TopPlans);
  CU.Opts.OutputDir = OutputDir;
  CU.Opts.Force = Force;
  CU.Opts.EmitPerRank = EmitMode == EmitKind::PerRank;
  CU.Opts.VerifyOutput = VerifyOutput;
  CU.Opts.AllowUncosted = AllowUncosted;
  if (!OutputDir.empty() && sys::fs::exists(OutputDir) && !Force)
    return reportError(createStringError(
        inconvertibleErrorCode(),
        "output directory '%s' exists; pass --force to replace it",
        OutputDir.c_str()));
  CU.HW = &*HW;
  // What --plan fixes; search-parallelism searches the rest.
  if (PlanText.getNumOccurrences()) {
    Expected<PlanSpec> S = parsePlanSpec(PlanText);
    if (!S)
      return reportError(S.takeError());
    CU.PlanRequest = *S;
  }

  ImportStats Stats;
  Expected<std::unique_ptr<Model>> M = importModelFile(ModelPath, &Stats);
  if (!M)
    return reportError(M.takeError());
  CU.M = std::move(*M);
  CU.ShapeOnlyParameters = Stats.ShapeOnlyParameters;
  if (Error E = verifyModel(*CU.M))
    return reportError(createStringError(inconvertibleErrorCode(),
                                         ModelPath + ": error: " +
                                             toString(std::move(E))));
  unsigned NodesBefore = CU.M->getGraph().getNumNodes();

  PassManager PM(getRegisteredPasses());
  if (PassPipeline.getNumOccurrences()) {
    if (Error E = PM.parsePipeline(PassPipeline))
      return reportError(std::move(E));
  } else {
    // Planning passes; the transform passes when there is an output
    // directory, or when asked to print or stop after one of them.
    auto Named = [&](StringRef P) {
      return StopAfter == P || is_contained(PrintAfter, P.str());
    };
    bool Transforms = !OutputDir.empty() || Named("shard") ||
                      Named("insert-collectives") || Named("schedule");
    for (const PassInfo &Info : getRegisteredPasses()) {
      StringRef Arg = Info.Argument;
      bool IsTransform = Arg == "shard" || Arg == "insert-collectives" ||
                         Arg == "schedule" || Arg == "emit";
      if (IsTransform && (!Transforms || (Arg == "emit" && OutputDir.empty())))
        continue;
      PM.addPass(Info.Create());
    }
  }
  PassInstrumentation PI;
  PI.PrintAfter.assign(PrintAfter.begin(), PrintAfter.end());
  PI.StopAfter = StopAfter;
  PI.VerifyEach = VerifyEach;
  PI.TimePasses = TimePasses;

  // Dumps are buffered so that a failing pipeline prints only its error.
  std::string Dumps;
  raw_string_ostream DumpOS(Dumps);
  Error E = PM.run(CU, PI, DumpOS, errs());
  if (!Quiet)
    for (const std::string &W : CU.getWarnings())
      WithColor::warning(errs(), ToolName) << W << '\n';
  // --plan and --print-costs=stage ask for a plan: when the pipeline
  // stopped before search-parallelism (or left it out), the same search
  // runs here, so that a plan is costed one way only.
  bool HaveCosts = !CU.NodeCosts.empty();
  if (!E && !CU.Search && HaveCosts && CU.HW &&
      (PlanText.getNumOccurrences() || PrintCosts == CostLevel::Stage))
    E = searchParallelism(CU);
  // Deferred until the reports that need no plan are printed.
  Optional<std::string> NoPlanMsg;
  int NoPlanCode = 0;
  if (E) {
    // No plan (nothing fits, or too much work without a cost rule): when
    // the plan is what was asked for, the explanation and exit status 2
    // (1 for uncosted work), after the stage report of the nearest miss
    // where one was asked for; reports that do not need a plan
    // (--print-hw, --print-costs=node|layer, --print-placement, IR dumps)
    // go on, with a warning.
    bool PlanIsTheProduct =
        TopPlans.getNumOccurrences() || ExplainPlan ||
        PlanText.getNumOccurrences() || PrintCosts == CostLevel::Stage ||
        (!PrintHW && !PrintGraph && PI.PrintAfter.empty() && !PrintPlacement &&
         PrintCosts == CostLevel::None);
    bool NoPlan = E.isA<NoFeasiblePlanError>();
    bool Uncosted = E.isA<UncostedWorkError>();
    if (!NoPlan && !Uncosted)
      return reportError(std::move(E), 1);
    const SearchResult *S = CU.Search.get();
    if (PlanIsTheProduct &&
        !(NoPlan && PrintCosts == CostLevel::Stage && S && S->Closest))
      return reportError(std::move(E), NoPlan ? 2 : 1);
    std::string Msg = toString(std::move(E));
    if (PlanIsTheProduct) {
      NoPlanMsg = Msg;
      NoPlanCode = 2;
    } else if (!Quiet) {
      WithColor::warning(errs(), ToolName)
          << "search-parallelism: " << StringRef(Msg).split('\n').first << '\n';
    }
  }
  const SearchResult *Searched =
      CU.Search && !CU.Search->Top.empty() ? CU.Search.get() : nullptr;
  if ((TopPlans.getNumOccurrences() || ExplainPlan) && !Searched && !NoPlanMsg)
    return reportError(createStringError(
        inconvertibleErrorCode(),
        "--top and --explain need the search-parallelism pass in the "
        "pipeline"));
  if (Searched && TimePasses)
    errs() << format(
        "search-parallelism: %llu candidates in %.4f s "
        "(%.2f us per candidate; %llu simulated)\n",
        (unsigned long long)Searched->Stats.Candidates, Searched->Stats.Seconds,
        Searched->Stats.Candidates
            ? 1e6 * Searched->Stats.Seconds / Searched->Stats.Candidates
            : 0.0,
        (unsigned long long)Searched->Stats.Simulated);

  // The plan the run chose (or, when nothing fits, the nearest miss): what
  // --print-costs=stage reports.
  const PlanCost *Costed = Searched ? &Searched->Top.front()
                           : CU.Search && CU.Search->Closest
                               ? &*CU.Search->Closest
                               : nullptr;
  if ((PlanText.getNumOccurrences() || PrintCosts == CostLevel::Stage) &&
      !HaveCosts)
    return reportError(createStringError(
        inconvertibleErrorCode(),
        "costing a plan needs the annotate-costs pass in the pipeline"));
  if (PrintCosts != CostLevel::None && !HaveCosts)
    return reportError(createStringError(
        inconvertibleErrorCode(),
        "--print-costs needs the annotate-costs pass in the pipeline"));

  outs() << DumpOS.str();
  if (PrintHW)
    HW->print(outs());
  if (PrintGraph)
    printModel(*CU.M, outs());
  const Graph &G = CU.M->getGraph();
  switch (PrintCosts) {
  case CostLevel::None:
    break;
  case CostLevel::Node:
    printNodeCosts(G, CU.NodeCosts, *HW, Format, outs());
    break;
  case CostLevel::Layer:
    printLayerCosts(G, CU.Layers, CU.NodeCosts, Format, outs());
    break;
  case CostLevel::Stage:
    if (Costed)
      printStageCosts(G, CU.NodeCosts, *Costed, Format, outs());
    break;
  }
  if (NoPlanMsg) {
    WithColor::error(errs(), ToolName) << *NoPlanMsg << '\n';
    return NoPlanCode;
  }
  // --print-placement: the placement report replaces the summary.
  if (PrintPlacement) {
    if (Error E = printPlacement(CU, Format, outs()))
      return reportError(std::move(E));
    return 0;
  }
  // --format json with a search: the search result as one JSON object
  // (plan, predicted numbers, --top table, explanation) replaces the
  // summary.
  if (Searched && Format == ReportFormat::JSON && !PrintGraph &&
      PI.PrintAfter.empty() && !PrintHW && PrintCosts == CostLevel::None) {
    printSearchJSON(*Searched,
                    TopPlans.getNumOccurrences() ? (unsigned)TopPlans : 1,
                    ExplainPlan, outs());
    return 0;
  }
  if (!Quiet && !PrintGraph && PI.PrintAfter.empty() && !PrintHW &&
      PrintCosts == CostLevel::None)
    printSummary(CU, NodesBefore, PM, outs());
  if (Searched && TopPlans.getNumOccurrences())
    printTopPlans(*Searched, TopPlans, outs());
  if (Searched && ExplainPlan)
    printExplanation(*Searched, outs());
  return 0;
}
