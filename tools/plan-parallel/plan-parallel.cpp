//===- plan-parallel.cpp - Loom's command-line driver ---------------------===//
//
//   plan-parallel MODEL --hw HW.yaml [--batch B] [--seq S] [--dim NAME=V]...
//
// Imports the model, loads the hardware description, runs the pass
// pipeline and prints what exists of the plan. Exit status: 0 success,
// 1 bad input or internal error (one message on stderr), 2 no feasible plan.
//
//===----------------------------------------------------------------------===//
#include "Framework.h"
#include "PlanParallel.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Pass/Pass.h"
#include "loom/Report/CostReport.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

using namespace llvm;
using namespace loom;
using namespace planparallel;

static cl::OptionCategory LoomCategory("plan-parallel options");

// Debian ships one shared libLLVM whose own options (print-after,
// stop-after, time-passes, ...) are registered in every process. Loom's
// options register under a "loom-" prefix and take their public names in
// main(), after any LLVM option of that name has been unregistered.
#define LOOM_OPT(Name) "loom-" Name

cl::opt<std::string>
    planparallel::ModelPath(cl::Positional, cl::Required,
                            cl::desc("<model.onnx|model.onnxtxt>"),
                            cl::cat(LoomCategory));
cl::list<std::string> planparallel::HWPaths(
    LOOM_OPT("hw"), cl::OneOrMore, cl::value_desc("HW.yaml"),
    cl::desc("Hardware description of the cluster (YAML); repeat to "
             "layer files (later keys win)"),
    cl::cat(LoomCategory));
// What-if studies (lib/Hardware/HardwareOverlay.cpp).
cl::list<std::string> planparallel::Sets(
    LOOM_OPT("set"), cl::value_desc("PATH=VALUE"),
    cl::desc("Override a hardware YAML field (topology.roce.bandwidth=400Gbps"
             ", device.memory.hbm.capacity=96GiB) or a model knob "
             "(moe.capacity_factor=1.25, ddp.bucket_size=40000000); applied "
             "in order"),
    cl::cat(LoomCategory));
cl::list<std::string> planparallel::ComparePlans(
    LOOM_OPT("compare"), cl::value_desc("PLAN"),
    cl::desc("Also cost this plan (fixed choices as --plan, the rest "
             "searched) beside the unconstrained best, term by term"),
    cl::cat(LoomCategory));
cl::list<std::string> planparallel::CompareHW(
    LOOM_OPT("compare-hw"), cl::value_desc("OTHER.yaml"),
    cl::desc("Also plan on this cluster and show the best plans side by "
             "side"),
    cl::cat(LoomCategory));
cl::opt<std::string> planparallel::FailOpt(
    LOOM_OPT("fail"), cl::value_desc("N|devices=K"),
    cl::desc("Re-plan on the cluster minus N servers (units of the "
             "innermost topology level) or K devices, and report the "
             "throughput kept"),
    cl::cat(LoomCategory));
cl::opt<unsigned> planparallel::DevicesOpt(
    LOOM_OPT("devices"), cl::value_desc("N"),
    cl::desc("Plan on the first N devices of the topology (innermost levels "
             "filled first)"),
    cl::cat(LoomCategory));
cl::opt<int64_t>
    planparallel::Batch(LOOM_OPT("batch"), cl::value_desc("B"),
                        cl::desc("Bind the batch dim (symbol 'batch', "
                                 "else dim 0 of the first dynamic "
                                 "input)"),
                        cl::cat(LoomCategory));
cl::opt<int64_t>
    planparallel::Seq(LOOM_OPT("seq"), cl::value_desc("S"),
                      cl::desc("Bind the sequence dim (symbol 'seq', "
                               "else dim 1 of the first dynamic input)"),
                      cl::cat(LoomCategory));
cl::list<std::string>
    planparallel::DimBindings(LOOM_OPT("dim"), cl::value_desc("NAME=V"),
                              cl::desc("Bind symbolic dim NAME"),
                              cl::cat(LoomCategory));
cl::opt<std::string> planparallel::MaxMemory(
    LOOM_OPT("max-memory"), cl::value_desc("SIZE"),
    cl::desc("Fail with a message, not an OOM kill, past this much memory "
             "(default: 3/4 of physical memory; 0B: no bound)"),
    cl::cat(LoomCategory));
cl::opt<bool>
    planparallel::PrintGraph(LOOM_OPT("print-graph"),
                             cl::desc("Print the IR after the pipeline"),
                             cl::cat(LoomCategory));
cl::opt<bool>
    planparallel::PrintHW(LOOM_OPT("print-hw"),
                          cl::desc("Print the hardware model as loaded"),
                          cl::cat(LoomCategory));
cl::opt<std::string> planparallel::PassPipeline(
    LOOM_OPT("pass-pipeline"), cl::value_desc("a,b,c"),
    cl::desc("Run these passes instead of the default pipeline"),
    cl::cat(LoomCategory));
cl::list<std::string> planparallel::PrintAfter(
    LOOM_OPT("print-after"), cl::value_desc("PASS"), cl::CommaSeparated,
    cl::desc("Print the IR after PASS ('all' for every pass)"),
    cl::cat(LoomCategory));
cl::opt<std::string>
    planparallel::StopAfter(LOOM_OPT("stop-after"), cl::value_desc("PASS"),
                            cl::desc("Stop the pipeline after PASS"),
                            cl::cat(LoomCategory));
cl::opt<bool>
    planparallel::VerifyEach(LOOM_OPT("verify-each"),
                             cl::desc("Verify the IR after every pass"),
                             cl::cat(LoomCategory));
cl::opt<bool>
    planparallel::TimePasses(LOOM_OPT("time-passes"),
                             cl::desc("Report the time of every pass"),
                             cl::cat(LoomCategory));
cl::opt<CostLevel> planparallel::PrintCosts(
    LOOM_OPT("print-costs"), cl::ValueOptional, cl::init(CostLevel::None),
    cl::desc("Print the cost breakdown (default: node)"),
    cl::values(clEnumValN(CostLevel::Node, "node", "per node"),
               clEnumValN(CostLevel::Node, "", ""),
               clEnumValN(CostLevel::Layer, "layer", "per layer"),
               clEnumValN(CostLevel::Stage, "stage",
                          "per pipeline stage of the plan the run chose")),
    cl::cat(LoomCategory));
cl::opt<ReportFormat> planparallel::Format(
    LOOM_OPT("format"), cl::init(ReportFormat::Text),
    cl::desc("Output format of reports"),
    cl::values(clEnumValN(ReportFormat::Text, "text", "plain text"),
               clEnumValN(ReportFormat::JSON, "json", "JSON")),
    cl::cat(LoomCategory));
cl::opt<std::string> planparallel::PlanText(
    LOOM_OPT("plan"), cl::value_desc("tp=..,pp=..,dp=..,..."),
    cl::desc("Fix plan choices: tp, pp, dp, ep, sp, mb (micro-batch "
             "size), nmb, vpp, recompute=none|selective|full, "
             "zero=0..3, grad=fp32|bf16 (DP gradient precision), "
             "cp=N, cp_algo=ring|a2a (context parallelism), "
             "order=tp-ep-dp-pp (mesh axes, innermost first), "
             "offload=opt:host,grad:host,param:ssd,act:host "
             "(training state in host DRAM or SSD), "
             "stages=L0:L1:...; the search fills the rest, or "
             "rest=plain gives it plain values"),
    cl::cat(LoomCategory));
cl::opt<ToolMode> planparallel::Mode(
    LOOM_OPT("mode"), cl::init(ToolMode::Train),
    cl::desc("Plan a training step, inference (forward only), or serving "
             "(prefill and decode under latency targets)"),
    cl::values(clEnumValN(ToolMode::Train, "train", "training step"),
               clEnumValN(ToolMode::Infer, "infer", "inference"),
               clEnumValN(ToolMode::Serve, "serve",
                          "serving: TTFT, TPOT, output tokens/s, KV cache")),
    cl::cat(LoomCategory));
// --mode serve (lib/Planner/Serving.cpp).
cl::opt<int64_t>
    planparallel::PromptLen(LOOM_OPT("prompt-len"), cl::value_desc("P"),
                            cl::desc("--mode serve: prompt tokens per request"),
                            cl::cat(LoomCategory));
cl::opt<int64_t>
    planparallel::GenLen(LOOM_OPT("gen-len"), cl::value_desc("G"),
                         cl::desc("--mode serve: generated tokens per request"),
                         cl::cat(LoomCategory));
cl::opt<std::string> planparallel::LengthsFile(
    LOOM_OPT("lengths"), cl::value_desc("FILE.csv"),
    cl::desc("--mode serve: request lengths, lines prompt_len,gen_len,weight "
             "(instead of --prompt-len and --gen-len)"),
    cl::cat(LoomCategory));
cl::opt<std::string> planparallel::SLOText(
    LOOM_OPT("slo"), cl::value_desc("ttft=T,tpot=T"),
    cl::desc("--mode serve: latency targets, e.g. ttft=500ms,tpot=50ms"),
    cl::cat(LoomCategory));
cl::opt<std::string> planparallel::EngineName(
    LOOM_OPT("engine"), cl::value_desc("vllm|mindie|trtllm|none"),
    cl::init("vllm"),
    cl::desc("--mode serve: the serving engine whose default batch caps "
             "bound the plan (default vllm; none: only the KV cache does)"),
    cl::cat(LoomCategory));
// The search (search-parallelism).
cl::opt<unsigned> planparallel::TopPlans(
    LOOM_OPT("top"), cl::value_desc("K"), cl::init(0),
    cl::desc("Rank the K best plans of the search: step time, "
             "tokens/s, MFU, memory, dominant cost term"),
    cl::cat(LoomCategory));
cl::opt<Objective> planparallel::ObjectiveOpt(
    LOOM_OPT("objective"), cl::init(Objective::Step),
    cl::desc("What ranks the searched plans"),
    cl::values(clEnumValN(Objective::Step, "step",
                          "step time (throughput), the default"),
               clEnumValN(Objective::Goodput, "goodput",
                          "expected goodput under failures and Young/Daly "
                          "checkpointing (needs reliability: in --hw)")),
    cl::cat(LoomCategory));
cl::opt<bool> planparallel::ExplainPlan(
    LOOM_OPT("explain"),
    cl::desc("Say why the chosen plan beats the best one with other degrees"),
    cl::cat(LoomCategory));
cl::opt<bool> planparallel::AllowUncosted(
    LOOM_OPT("allow-uncosted"),
    cl::desc("Plan even when more than 1% of the forward FLOPs or "
             "parameters have no cost rule (the plan leaves them out)"),
    cl::cat(LoomCategory));
cl::opt<unsigned> planparallel::VocabDivisibleBy(
    LOOM_OPT("make-vocab-size-divisible-by"), cl::init(128),
    cl::desc("Pad a vocabulary tp does not divide to a multiple of N x tp, "
             "as Megatron-LM's flag of the same name (default 128, "
             "Megatron's)"),
    cl::value_desc("N"), cl::cat(LoomCategory));
cl::opt<bool> planparallel::NoPrune(
    LOOM_OPT("no-prune"), cl::Hidden,
    cl::desc("Search without bounds: every candidate evaluated in full (for "
             "tests comparing the pruned search with the exhaustive one)"),
    cl::cat(LoomCategory));
cl::opt<std::string> planparallel::FusedKernelsOpt(
    LOOM_OPT("fused-kernels"),
    cl::value_desc("none|all|attention,rmsnorm,layernorm,swiglu,gelu,rotary"),
    cl::desc("Fused kernels to cost regions as (default: all those the "
             "hardware's fused_kernels lists)"),
    cl::cat(LoomCategory));
cl::opt<std::string> planparallel::FusionOpt(
    LOOM_OPT("fusion"), cl::value_desc("hw|none"), cl::init("hw"),
    cl::desc("Generic fusion: 'hw' groups ops into the kernels the "
             "hardware's fusion rules describe (device.classes.aicore."
             "fusion); 'none' costs one kernel per op (the named fused "
             "kernels of --fused-kernels aside), for comparison"),
    cl::cat(LoomCategory));
cl::opt<bool> planparallel::Quiet(LOOM_OPT("quiet"),
                                  cl::desc("Print no warnings or summary"),
                                  cl::cat(LoomCategory));

// --print-placement (assign-device-classes; printer in passes/).
cl::opt<bool> planparallel::PrintPlacement(
    LOOM_OPT("print-placement"),
    cl::desc("Print every node's device class, its time on each class and "
             "why, then totals per class (honours --format)"),
    cl::cat(LoomCategory));

// The output directory (shard, insert-collectives, schedule, emit).
cl::opt<std::string> planparallel::OutputDir(
    "o", cl::value_desc("DIR"),
    cl::desc("Write the sharded graphs, manifest.json, "
             "schedule.json, trace.json, report.txt and "
             "report.html to DIR"),
    cl::cat(LoomCategory));
cl::opt<bool>
    planparallel::Force(LOOM_OPT("force"),
                        cl::desc("Replace the output directory if it exists"),
                        cl::cat(LoomCategory));
cl::opt<EmitKind> planparallel::EmitMode(
    LOOM_OPT("emit"), cl::init(EmitKind::Roles),
    cl::desc("Graph files to write"),
    cl::values(clEnumValN(EmitKind::Roles, "roles",
                          "one graph per distinct role (default)"),
               clEnumValN(EmitKind::PerRank, "per-rank",
                          "also one graph file per global rank")),
    cl::cat(LoomCategory));
// Verification is on by default; --verify-output stays accepted so that
// scripts written for the opt-in flag keep working.
static cl::opt<bool> VerifyOutput(
    LOOM_OPT("verify-output"),
    cl::desc("Check the emitted program's invariants before writing (the "
             "default; kept for scripts)"),
    cl::cat(LoomCategory));
cl::opt<bool> planparallel::NoVerifyOutput(
    LOOM_OPT("no-verify-output"),
    cl::desc("Skip the check of the emitted program's invariants (matched "
             "send/receive, collective order, groups, memory, schedule, ONNX "
             "checker and shape inference)"),
    cl::cat(LoomCategory));
// Tests only: damage the program before verification, so that the path of
// a failed check (exit 1, the problems listed, no OUTDIR) is exercised.
cl::opt<bool> planparallel::TestCorruptOutput(
    LOOM_OPT("test-corrupt-output"), cl::Hidden,
    cl::desc("(testing) rename one collective of the last role graph"),
    cl::cat(LoomCategory));

// Tests only (issue 31's property): the run fails unless the tp, ep and
// dp collectives the cost model priced are the emitted graphs'.
cl::opt<bool> planparallel::CheckPricedCollectives(
    LOOM_OPT("check-priced-collectives"), cl::Hidden,
    cl::desc("(testing) fail unless the collectives the cost model "
             "priced are those of the emitted role graphs"),
    cl::cat(LoomCategory));

cl::opt<TraceKind> planparallel::TraceMode(
    LOOM_OPT("trace"), cl::init(TraceKind::Window),
    cl::desc("What trace.json shows"),
    cl::values(clEnumValN(TraceKind::Window, "window",
                          "DP replica 0, the first and last 4 micro-batches "
                          "(default)"),
               clEnumValN(TraceKind::Full, "full",
                          "every rank and micro-batch")),
    cl::cat(LoomCategory));

// The hand-off to a training framework (lib/Report/Export.cpp).
cl::list<std::string> planparallel::ExportTo(
    LOOM_OPT("export"), cl::value_desc("megatron|mindspeed|deepspeed"),
    cl::CommaSeparated,
    cl::desc("Write the chosen plan as a training framework's launch "
             "arguments (repeatable or a comma list): megatron-args.txt, "
             "mindspeed-args.txt, deepspeed.json in the -o directory; "
             "without -o, on stdout"),
    cl::cat(LoomCategory));

// The framework that will run the plan (examples/frameworks, lib/Plan).
static cl::opt<std::string> FrameworkOpt(
    LOOM_OPT("framework"),
    cl::value_desc("none|megatron-core|mindspeed-llm|deepspeed|PROFILE.yaml"),
    cl::desc("Rank only plans this framework can run, costed as it runs "
             "them (default: none, an idealised runtime; --export F "
             "implies it)"),
    cl::cat(LoomCategory));

// The training recipe (loom/Plan/Precision.h): one precision decides every
// kernel's type, the state's bytes and the collectives'.
cl::opt<std::string> planparallel::PrecisionOpt(
    LOOM_OPT("precision"), cl::value_desc("bf16|fp16|fp32|tf32|fp8"),
    cl::desc("The precision recipe costed, whatever types the model was "
             "exported in: bf16/fp16 mixed precision (16-bit matmuls, "
             "activations and collectives, fp32 master weights and Adam "
             "states), fp32, tf32 (fp32 with TF32 matmuls) or fp8 "
             "(Transformer Engine's recipe in training; fp8 weights, "
             "activations and KV cache with --mode serve) where the "
             "hardware has it (default: the framework's; for none, bf16 "
             "where the hardware has it, else fp16)"),
    cl::cat(LoomCategory));

StringRef planparallel::ToolName = "plan-parallel";

static void stopProgress();

/// Prints one error, once. Messages that already carry "file...: error:"
/// print as they are; others get the tool name in front.
int planparallel::reportError(Error E, int Code) {
  stopProgress();
  std::string Msg = toString(std::move(E));
  if (StringRef(Msg).contains(": error: "))
    errs() << Msg << '\n';
  else
    WithColor::error(errs(), ToolName) << Msg << '\n';
  return Code;
}

planparallel::ProgressLine::ProgressLine() : Enabled(errs().is_displayed()) {
  if (Enabled)
    Ticker = std::thread([this] { tick(); });
  Active = this;
}

planparallel::ProgressLine::~ProgressLine() {
  stop();
  Active = nullptr;
}

void planparallel::ProgressLine::set(const std::string &What) {
  std::lock_guard<std::mutex> L(Mu);
  Now = What;
}

void planparallel::ProgressLine::stop() {
  if (!Enabled)
    return;
  {
    std::lock_guard<std::mutex> L(Mu);
    Stopping = true;
  }
  CV.notify_all();
  if (Ticker.joinable())
    Ticker.join();
  if (Shown)
    errs() << "\r\x1b[K";
  Enabled = false;
}

void planparallel::ProgressLine::tick() {
  auto Start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> L(Mu);
  while (!CV.wait_for(L, std::chrono::milliseconds(250),
                      [this] { return Stopping; })) {
    double Secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
            .count();
    if (Secs < 1 || Now.empty())
      continue;
    errs() << "\r\x1b[K" << format("[%.1f s] ", Secs) << Now;
    errs().flush();
    Shown = true;
  }
}

ProgressLine *planparallel::ProgressLine::Active = nullptr;

static void stopProgress() {
  if (ProgressLine::Active)
    ProgressLine::Active->stop();
}

/// --version: Loom's version (CMake's project()) and the libraries it was
/// built with.
static void printVersion(raw_ostream &OS) {
  OS << "Loom " LOOM_VERSION " (plan-parallel)\n"
     << "  built with LLVM " LOOM_LLVM_VERSION ", ONNX " LOOM_ONNX_VERSION
        ", Z3 " LOOM_Z3_VERSION ", protobuf " LOOM_PROTOBUF_VERSION "\n";
}

/// Gives every option of LoomCategory its public name (see LOOM_OPT).
static void claimOptionNames() {
  StringMap<cl::Option *> &Opts = cl::getRegisteredOptions();
  std::vector<cl::Option *> Ours;
  for (auto &KV : Opts)
    if (is_contained(KV.second->Categories, &LoomCategory) &&
        KV.first().startswith("loom-"))
      Ours.push_back(KV.second);
  llvm::sort(
      Ours, [](cl::Option *A, cl::Option *B) { return A->ArgStr < B->ArgStr; });
  for (cl::Option *O : Ours) {
    StringRef Public = O->ArgStr.drop_front(strlen("loom-"));
    if (cl::Option *Theirs = Opts.lookup(Public))
      Theirs->removeArgument();
    O->setArgStr(Public);
  }
}

/// Spells every long option with two dashes ("-hw" becomes "--hw"), so that
/// LLVM's parser, told that long options take two dashes, never reads an
/// unknown flag as a group of one-letter options: LLVM makes every
/// one-letter option (its own "-h" alias of --help, Loom's "-o") a grouping
/// one, so "--hardware=x" and "--history" ran "-h" and printed the help with
/// exit status 0. Values of options (the argument after "--plan") and
/// everything after "--" are left alone.
static std::vector<const char *>
spellLongOptions(int Argc, char **Argv, std::vector<std::string> &Store) {
  StringMap<cl::Option *> &Opts = cl::getRegisteredOptions();
  std::vector<const char *> Out(Argv, Argv + Argc);
  Store.reserve(Argc);
  bool ValueNext = false;
  for (int I = 1; I < Argc; ++I) {
    StringRef A = Argv[I];
    if (A == "--")
      break;
    if (ValueNext || !A.startswith("-") || A.startswith("--") || A.size() < 3 ||
        !isAlpha(A[1])) {
      ValueNext = false;
      if (A.startswith("--")) {
        StringRef Name = A.drop_front(2).split('=').first;
        cl::Option *O = Opts.lookup(Name);
        ValueNext = O && !A.contains('=') &&
                    O->getValueExpectedFlag() == cl::ValueRequired;
      }
      continue;
    }
    StringRef Name = A.drop_front(1).split('=').first;
    cl::Option *O = Opts.lookup(Name);
    ValueNext =
        O && !A.contains('=') && O->getValueExpectedFlag() == cl::ValueRequired;
    Store.push_back(("-" + A).str());
    Out[I] = Store.back().c_str();
  }
  return Out;
}

/// Parses the command line into the cl::opt globals.
static void parseCommandLine(int argc, char **argv) {
  claimOptionNames();
  cl::HideUnrelatedOptions(LoomCategory);
  cl::SetVersionPrinter(printVersion);
  std::vector<std::string> Spelled;
  std::vector<const char *> Args = spellLongOptions(argc, argv, Spelled);
  cl::ParseCommandLineOptions(
      (int)Args.size(), Args.data(),
      "Loom: plan tensor/pipeline/data/expert parallelism for an ONNX model "
      "on an accelerator cluster\n",
      /*Errs=*/nullptr, /*EnvVar=*/nullptr, /*LongOptionsUseDoubleDash=*/true);
}

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  parseCommandLine(argc, argv);
  if (Error E = checkLimits())
    return reportError(std::move(E));
  std::vector<HardwareOverride> Overrides;
  Expected<HardwareModel> HW = loadHardware(Overrides);
  if (!HW)
    return reportError(HW.takeError());
  // Left to the OS at exit, as clang's -disable-free does: freeing a
  // large model's graph and the search's results one by one takes tens of
  // milliseconds of a sub-second run (BuryPointer keeps them reachable for
  // leak checkers). Nothing in them writes on destruction.
  auto CUOwner = std::make_unique<CompilationUnit>();
  auto BuryCU = make_scope_exit([&] { BuryPointer(std::move(CUOwner)); });
  CompilationUnit &CU = *CUOwner;
  ProgressLine Progress;
  Expected<std::vector<ExportTarget>> Exports =
      parseInputs(*HW, Overrides, Progress, CU);
  if (!Exports)
    return reportError(Exports.takeError());
  Expected<std::vector<std::shared_ptr<const FrameworkProfile>>> Frameworks =
      resolveFrameworks(FrameworkOpt.getNumOccurrences()
                            ? Optional<StringRef>(FrameworkOpt)
                            : None,
                        *Exports);
  if (!Frameworks)
    return reportError(Frameworks.takeError());
  CU.Opts.Frameworks = std::move(*Frameworks);
  if (!CU.Opts.Frameworks.empty()) {
    const FrameworkProfile &F = *CU.Opts.Frameworks.front();
    applyFrameworkHow(F, *HW, CU.Opts);
    // The framework's runtime decides generic fusion (eager launches one
    // kernel per op) unless --fusion says otherwise.
    if (F.GenericFusion && !FusionOpt.getNumOccurrences())
      CU.Opts.GenericFusion = *F.GenericFusion;
  }
  if (Error E = resolveRecipe(CU,
                              PrecisionOpt.getNumOccurrences()
                                  ? Optional<StringRef>(PrecisionOpt)
                                  : None,
                              *HW, join(HWPaths.begin(), HWPaths.end(), ",")))
    return reportError(std::move(E));
  Expected<unsigned> NodesBefore = importInput(CU, Progress);
  if (!NodesBefore)
    return reportError(NodesBefore.takeError());

  PassManager PM(getRegisteredPasses());
  if (Error E = buildPipeline(PM))
    return reportError(std::move(E));
  PassInstrumentation PI = getInstrumentation();
  FrontEndResult FE;
  // Deferred until the reports that need no plan are printed.
  Optional<std::string> NoPlanMsg;
  if (Error E = runFrontEnd(CU, PM, PI, Progress, FE))
    if (Optional<int> Code = handlePipelineError(std::move(E), CU, PI,
                                                 !Exports->empty(), NoPlanMsg))
      return *Code;
  Expected<const PlanCost *> Costed =
      getCostedPlan(CU, FE.HaveCosts, NoPlanMsg.hasValue());
  if (!Costed)
    return reportError(Costed.takeError());
  printPlanlessReports(CU, FE.Dumps, *Costed);
  if (NoPlanMsg) {
    stopProgress();
    errs() << ModelPath << ": error: " << *NoPlanMsg << '\n';
    return 2;
  }
  return writeOutputs(CU, PM, PI, *Exports, *Costed, *NodesBefore, FE.Wrote);
}
