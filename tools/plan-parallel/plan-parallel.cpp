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
#include "Passes.h" // printPlacement
#include "loom/Hardware/HardwareModel.h"
#include "loom/Hardware/HardwareOverlay.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Plan/IdleDevices.h"
#include "loom/Planner/Search.h"
#include "loom/Report/CostReport.h"
#include "loom/Report/PlanComparison.h"
#include "loom/Report/SearchReport.h"
#include "loom/Report/ServingReport.h"
#include "loom/Shard/OutputDir.h"
#include "loom/Support/MemoryLimit.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

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
static cl::list<std::string>
    HWPaths(LOOM_OPT("hw"), cl::OneOrMore, cl::value_desc("HW.yaml"),
            cl::desc("Hardware description of the cluster (YAML); repeat to "
                     "layer files (later keys win)"),
            cl::cat(LoomCategory));
// What-if studies (lib/Hardware/HardwareOverlay.cpp).
static cl::list<std::string> Sets(
    LOOM_OPT("set"), cl::value_desc("PATH=VALUE"),
    cl::desc("Override a hardware YAML field (topology.roce.bandwidth=400Gbps"
             ", device.memory.hbm.capacity=96GiB) or a model knob "
             "(moe.capacity_factor=1.25, ddp.bucket_size=40000000); applied "
             "in order"),
    cl::cat(LoomCategory));
static cl::list<std::string> ComparePlans(
    LOOM_OPT("compare"), cl::value_desc("PLAN"),
    cl::desc("Also cost this plan (fixed choices as --plan, the rest "
             "searched) beside the unconstrained best, term by term"),
    cl::cat(LoomCategory));
static cl::list<std::string> CompareHW(
    LOOM_OPT("compare-hw"), cl::value_desc("OTHER.yaml"),
    cl::desc("Also plan on this cluster and show the best plans side by "
             "side"),
    cl::cat(LoomCategory));
static cl::opt<std::string>
    FailOpt(LOOM_OPT("fail"), cl::value_desc("N|devices=K"),
            cl::desc("Re-plan on the cluster minus N servers (units of the "
                     "innermost topology level) or K devices, and report the "
                     "throughput kept"),
            cl::cat(LoomCategory));
static cl::opt<unsigned> DevicesOpt(
    LOOM_OPT("devices"), cl::value_desc("N"),
    cl::desc("Plan on the first N devices of the topology (innermost levels "
             "filled first)"),
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
static cl::list<std::string> DimBindings(LOOM_OPT("dim"),
                                         cl::value_desc("NAME=V"),
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
    PrintAfter(LOOM_OPT("print-after"), cl::value_desc("PASS"),
               cl::CommaSeparated,
               cl::desc("Print the IR after PASS ('all' for every pass)"),
               cl::cat(LoomCategory));
static cl::opt<std::string> StopAfter(LOOM_OPT("stop-after"),
                                      cl::value_desc("PASS"),
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
                      "cp=N, cp_algo=ring|a2a (context parallelism), "
                      "order=tp-ep-dp-pp (mesh axes, innermost first), "
                      "offload=opt:host,grad:host,param:ssd,act:host "
                      "(training state in host DRAM or SSD), "
                      "stages=L0:L1:...; the search fills the rest, or "
                      "rest=plain gives it plain values"),
             cl::cat(LoomCategory));
// serve plans inference (RunMode::Infer) for a serving workload.
enum class ToolMode { Train, Infer, Serve };
static cl::opt<ToolMode> Mode(
    LOOM_OPT("mode"), cl::init(ToolMode::Train),
    cl::desc("Plan a training step, inference (forward only), or serving "
             "(prefill and decode under latency targets)"),
    cl::values(clEnumValN(ToolMode::Train, "train", "training step"),
               clEnumValN(ToolMode::Infer, "infer", "inference"),
               clEnumValN(ToolMode::Serve, "serve",
                          "serving: TTFT, TPOT, output tokens/s, KV cache")),
    cl::cat(LoomCategory));
// --mode serve (lib/Plan/Serving.cpp).
static cl::opt<int64_t>
    PromptLen(LOOM_OPT("prompt-len"), cl::value_desc("P"),
              cl::desc("--mode serve: prompt tokens per request"),
              cl::cat(LoomCategory));
static cl::opt<int64_t>
    GenLen(LOOM_OPT("gen-len"), cl::value_desc("G"),
           cl::desc("--mode serve: generated tokens per request"),
           cl::cat(LoomCategory));
static cl::opt<std::string> LengthsFile(
    LOOM_OPT("lengths"), cl::value_desc("FILE.csv"),
    cl::desc("--mode serve: request lengths, lines prompt_len,gen_len,weight "
             "(instead of --prompt-len and --gen-len)"),
    cl::cat(LoomCategory));
static cl::opt<std::string> SLOText(
    LOOM_OPT("slo"), cl::value_desc("ttft=T,tpot=T"),
    cl::desc("--mode serve: latency targets, e.g. ttft=500ms,tpot=50ms"),
    cl::cat(LoomCategory));
static cl::opt<std::string> EngineName(
    LOOM_OPT("engine"), cl::value_desc("vllm|mindie|trtllm|none"),
    cl::init("vllm"),
    cl::desc("--mode serve: the serving engine whose default batch caps "
             "bound the plan (default vllm; none: only the KV cache does)"),
    cl::cat(LoomCategory));
// The search (search-parallelism).
static cl::opt<unsigned>
    TopPlans(LOOM_OPT("top"), cl::value_desc("K"), cl::init(0),
             cl::desc("Rank the K best plans of the search: step time, "
                      "tokens/s, MFU, memory, dominant cost term"),
             cl::cat(LoomCategory));
enum class Objective { Step, Goodput };
static cl::opt<Objective> ObjectiveOpt(
    LOOM_OPT("objective"), cl::init(Objective::Step),
    cl::desc("What ranks the searched plans"),
    cl::values(clEnumValN(Objective::Step, "step",
                          "step time (throughput), the default"),
               clEnumValN(Objective::Goodput, "goodput",
                          "expected goodput under failures and Young/Daly "
                          "checkpointing (needs reliability: in --hw)")),
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
static cl::opt<unsigned> VocabDivisibleBy(
    LOOM_OPT("make-vocab-size-divisible-by"), cl::init(128),
    cl::desc("Pad a vocabulary tp does not divide to a multiple of N x tp, "
             "as Megatron-LM's flag of the same name (default 128, "
             "Megatron's)"),
    cl::value_desc("N"), cl::cat(LoomCategory));
static cl::opt<bool> NoPrune(
    LOOM_OPT("no-prune"), cl::Hidden,
    cl::desc("Search without bounds: every candidate evaluated in full (for "
             "tests comparing the pruned search with the exhaustive one)"),
    cl::cat(LoomCategory));
static cl::opt<std::string> FusedKernelsOpt(
    LOOM_OPT("fused-kernels"),
    cl::value_desc("none|all|attention,rmsnorm,layernorm,swiglu,gelu,rotary"),
    cl::desc("Fused kernels to cost regions as (default: all those the "
             "hardware's fused_kernels lists)"),
    cl::cat(LoomCategory));
static cl::opt<std::string> FusionOpt(
    LOOM_OPT("fusion"), cl::value_desc("hw|none"), cl::init("hw"),
    cl::desc("Generic fusion: 'hw' groups ops into the kernels the "
             "hardware's fusion rules describe (device.classes.aicore."
             "fusion); 'none' costs one kernel per op (the named fused "
             "kernels of --fused-kernels aside), for comparison"),
    cl::cat(LoomCategory));
static cl::opt<bool> Quiet(LOOM_OPT("quiet"),
                           cl::desc("Print no warnings or summary"),
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
                       "schedule.json, trace.json, report.txt and "
                       "report.html to DIR"),
              cl::cat(LoomCategory));
static cl::opt<bool>
    Force(LOOM_OPT("force"),
          cl::desc("Replace the output directory if it exists"),
          cl::cat(LoomCategory));
enum class EmitKind { Roles, PerRank };
static cl::opt<EmitKind>
    EmitMode(LOOM_OPT("emit"), cl::init(EmitKind::Roles),
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
static cl::opt<bool> NoVerifyOutput(
    LOOM_OPT("no-verify-output"),
    cl::desc("Skip the check of the emitted program's invariants (matched "
             "send/receive, collective order, groups, memory, schedule, ONNX "
             "checker and shape inference)"),
    cl::cat(LoomCategory));
// Tests only: damage the program before verification, so that the path of
// a failed check (exit 1, the problems listed, no OUTDIR) is exercised.
static cl::opt<bool> TestCorruptOutput(
    LOOM_OPT("test-corrupt-output"), cl::Hidden,
    cl::desc("(testing) rename one collective of the last role graph"),
    cl::cat(LoomCategory));

// Tests only (issue 31's property): the run fails unless the tp
// collectives the cost model priced are the emitted graphs'.
static cl::opt<bool> CheckPricedCollectives(
    LOOM_OPT("check-priced-collectives"), cl::Hidden,
    cl::desc("(testing) fail unless the tp collectives the cost model "
             "priced are those of the emitted role graphs"),
    cl::cat(LoomCategory));

enum class TraceKind { Window, Full };
static cl::opt<TraceKind> TraceMode(
    LOOM_OPT("trace"), cl::init(TraceKind::Window),
    cl::desc("What trace.json shows"),
    cl::values(clEnumValN(TraceKind::Window, "window",
                          "DP replica 0, the first and last 4 micro-batches "
                          "(default)"),
               clEnumValN(TraceKind::Full, "full",
                          "every rank and micro-batch")),
    cl::cat(LoomCategory));

// The hand-off to a training framework (lib/Report/Export.cpp).
static cl::list<std::string> ExportTo(
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
static cl::opt<std::string> PrecisionOpt(
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

static StringRef ToolName = "plan-parallel";

static void stopProgress();

/// Prints one error, once. Messages that already carry "file...: error:"
/// print as they are; others get the tool name in front.
static int reportError(Error E, int Code = 1) {
  stopProgress();
  std::string Msg = toString(std::move(E));
  if (StringRef(Msg).contains(": error: "))
    errs() << Msg << '\n';
  else
    WithColor::error(errs(), ToolName) << Msg << '\n';
  return Code;
}

namespace {
/// One line on stderr saying what a long run is doing ("[12.3 s]
/// search-parallelism (7/11)"), redrawn in place, shown only when stderr is
/// a terminal and the run has taken more than a second; erased before
/// anything else is printed. Tests and pipes never see it.
class ProgressLine {
public:
  ProgressLine() : Enabled(errs().is_displayed()) {
    if (Enabled)
      Ticker = std::thread([this] { tick(); });
    Active = this;
  }
  ~ProgressLine() {
    stop();
    Active = nullptr;
  }
  /// The one of this run, for reportError.
  static ProgressLine *Active;
  /// The callback for CompileOptions::Progress.
  void set(const std::string &What) {
    std::lock_guard<std::mutex> L(Mu);
    Now = What;
  }
  /// Erases the line and stops redrawing it.
  void stop() {
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

private:
  void tick() {
    auto Start = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> L(Mu);
    while (!CV.wait_for(L, std::chrono::milliseconds(250),
                        [this] { return Stopping; })) {
      double Secs = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - Start)
                        .count();
      if (Secs < 1 || Now.empty())
        continue;
      errs() << "\r\x1b[K" << format("[%.1f s] ", Secs) << Now;
      errs().flush();
      Shown = true;
    }
  }
  bool Enabled;
  bool Stopping = false;
  bool Shown = false;
  std::string Now;
  std::mutex Mu;
  std::condition_variable CV;
  std::thread Ticker;
};
ProgressLine *ProgressLine::Active = nullptr;
} // namespace

static void stopProgress() {
  if (ProgressLine::Active)
    ProgressLine::Active->stop();
}

/// --set ddp.bucket_size=N: the DP gradient bucket in parameters
/// (Megatron-Core's --ddp-bucket-size).
static Error applyDDPKnob(StringRef Set, CompileOptions &O) {
  auto KV = Set.split('=');
  StringRef Key = KV.first.trim().drop_front(strlen("ddp."));
  if (Key != "bucket_size")
    return createStringError(inconvertibleErrorCode(),
                             "--set %s: '%s' matches nothing at 'ddp'; valid "
                             "keys: bucket_size",
                             Set.str().c_str(), Key.str().c_str());
  uint64_t N;
  if (KV.second.trim().getAsInteger(10, N) || N == 0)
    return createStringError(inconvertibleErrorCode(),
                             "--set %s: expected a positive whole number of "
                             "parameters",
                             Set.str().c_str());
  O.DDPBucketParams = (double)N;
  O.HardwareOverrides.push_back(
      ("ddp.bucket_size: max(40000000, 1000000 x dp) -> " + KV.second.trim() +
       " (--set)")
          .str());
  return Error::success();
}

/// --set moe.KEY=V: the model-level knobs; the rest are hardware paths.
static Error applyModelKnob(StringRef Set, CompileOptions &O) {
  auto KV = Set.split('=');
  StringRef Key = KV.first.trim().drop_front(strlen("moe."));
  if (Key != "capacity_factor" && Key != "imbalance")
    return createStringError(inconvertibleErrorCode(),
                             "--set %s: '%s' matches nothing at 'moe'; valid "
                             "keys: capacity_factor, imbalance",
                             Set.str().c_str(), Key.str().c_str());
  double F;
  bool Imb = Key == "imbalance";
  if (KV.second.trim().getAsDouble(F) || !(F > 0) || !std::isfinite(F) ||
      (Imb && F < 1))
    return createStringError(inconvertibleErrorCode(),
                             Imb ? "--set %s: expected a number >= 1 (the "
                                   "most loaded rank over the mean)"
                                 : "--set %s: expected a positive number",
                             Set.str().c_str());
  (Imb ? O.MoEImbalance : O.MoECapacityFactor) = F;
  O.HardwareOverrides.push_back(
      ("moe." + Key + ": (unset) -> " + KV.second.trim() + " (--set)").str());
  return Error::success();
}

static bool isModelKnob(StringRef Set) {
  return Set.startswith("moe.") || Set.startswith("serve.") ||
         Set.startswith("ddp.");
}

/// --mode serve: --engine, --plan and --compare as serving plans (tp, pp,
/// dp, batch).
static Error parseServingPlans(ServingOptions &SO) {
  // The caps need the hardware (vLLM's depend on the device): resolved by
  // search-parallelism; the name is checked here, before any work.
  Expected<ServingEngine> E = getServingEngine(EngineName, HardwareModel());
  if (!E)
    return E.takeError();
  SO.Engine = *E;
  if (PlanText.getNumOccurrences()) {
    Expected<ServingPin> P = parseServingPlan(PlanText);
    if (!P)
      return P.takeError();
    SO.Pin = *P;
  }
  for (const std::string &C : ComparePlans) {
    Expected<ServingPin> P = parseServingPlan(C);
    if (!P)
      return createStringError(inconvertibleErrorCode(),
                               "--compare " + C + ": " +
                                   toString(P.takeError()));
    SO.Compare.emplace_back(C, *P);
  }
  return Error::success();
}

/// --set serve.max_seqs=N / serve.max_batched_tokens=N: the engine's caps.
static Error applyEngineCap(StringRef S, ServingOptions &SO,
                            CompileOptions &O) {
  auto KV = S.split('=');
  StringRef Key = KV.first.trim().drop_front(strlen("serve."));
  unsigned N = 0;
  if (KV.second.trim().getAsInteger(10, N) || N == 0)
    return createStringError(inconvertibleErrorCode(),
                             "--set " + S + ": expected a positive integer");
  (Key == "max_seqs" ? SO.MaxSeqsSet : SO.MaxTokensSet) = N;
  O.HardwareOverrides.push_back(
      ("serve." + Key + ": (the engine's) -> " + Twine(N) + " (--set)").str());
  return Error::success();
}

/// --mode serve's flags (and that they come only with it); --set
/// serve.kv_dtype=NAME.
static Error buildServingOptions(CompileOptions &O) {
  auto Err = [](const Twine &Msg) {
    return createStringError(inconvertibleErrorCode(), Msg);
  };
  bool Serve = Mode == ToolMode::Serve;
  for (cl::Option *Opt : std::initializer_list<cl::Option *>{
           &PromptLen, &GenLen, &LengthsFile, &SLOText, &EngineName})
    if (Opt->getNumOccurrences() && !Serve)
      return Err("--" + Opt->ArgStr + " needs --mode serve");
  std::vector<StringRef> ServeSets;
  for (StringRef S : Sets)
    if (S.startswith("serve."))
      ServeSets.push_back(S);
  if (!ServeSets.empty() && !Serve)
    return Err("--set " + ServeSets.front() + " needs --mode serve");
  if (!Serve)
    return Error::success();
  if (!CompareHW.empty() || ObjectiveOpt != Objective::Step)
    return Err("--mode serve: --compare-hw and --objective are not supported "
               "with it");
  auto SO = std::make_shared<ServingOptions>();
  if (Error E = parseServingPlans(*SO))
    return E;
  bool Lengths = PromptLen.getNumOccurrences() || GenLen.getNumOccurrences();
  if (Lengths && LengthsFile.getNumOccurrences())
    return Err("--mode serve: give --prompt-len and --gen-len, or --lengths "
               "FILE, not both");
  if (LengthsFile.getNumOccurrences()) {
    Expected<ServingWorkload> W = parseLengthFile(LengthsFile);
    if (!W)
      return W.takeError();
    SO->Load = std::move(*W);
  } else {
    if (!PromptLen.getNumOccurrences() || !GenLen.getNumOccurrences())
      return Err("--mode serve needs --prompt-len P and --gen-len G (or "
                 "--lengths FILE)");
    if (PromptLen <= 0)
      return Err("--prompt-len " + Twine(PromptLen) +
                 ": expected a positive number of tokens");
    if (GenLen <= 0)
      return Err("--gen-len " + Twine(GenLen) +
                 ": expected a positive number of tokens");
    SO->Load.Rows.push_back({PromptLen, GenLen, 1.0});
  }
  if (SLOText.getNumOccurrences()) {
    Expected<ServingSLO> S = parseSLO(SLOText);
    if (!S)
      return S.takeError();
    SO->SLO = *S;
  }
  for (StringRef S : ServeSets) {
    auto KV = S.split('=');
    StringRef Key = KV.first.trim().drop_front(strlen("serve."));
    if (Key == "max_seqs" || Key == "max_batched_tokens") {
      if (Error E = applyEngineCap(S, *SO, O))
        return E;
      continue;
    }
    if (Key == "batching") {
      StringRef V = KV.second.trim();
      if (V != "static" && V != "inflight")
        return Err("--set " + S + ": unknown batching '" + V +
                   "'; valid: inflight (continuous, the default), static");
      SO->StaticBatching = V == "static";
      O.HardwareOverrides.push_back(
          ("serve.batching: inflight -> " + V + " (--set)").str());
      continue;
    }
    if (Key == "decode_attention") {
      StringRef V = KV.second.trim();
      if (V != "grouped" && V != "per_query_head")
        return Err("--set " + S + ": unknown decode attention '" + V +
                   "'; valid: grouped (each KV head read once a step, the "
                   "default), per_query_head");
      SO->DecodeKVPerQueryHead = V == "per_query_head";
      O.HardwareOverrides.push_back(
          ("serve.decode_attention: grouped -> " + V + " (--set)").str());
      continue;
    }
    if (Key != "kv_dtype")
      return Err("--set " + S + ": '" + Key +
                 "' matches nothing at 'serve'; valid keys: batching, "
                 "decode_attention, kv_dtype, max_seqs, max_batched_tokens");
    Optional<double> B = getKVDTypeBytes(KV.second.trim());
    if (!B)
      return Err("--set " + S + ": unknown KV cache type '" + KV.second.trim() +
                 "'; valid: fp32, fp16, bf16, fp8, int8");
    SO->KVElementBytes = *B;
    SO->KVDType = KV.second.trim().str();
    O.HardwareOverrides.push_back(
        ("serve.kv_dtype: (the graph's) -> " + KV.second.trim() + " (--set)")
            .str());
  }
  // fp8 serving stores the KV cache in fp8 too (loom/Plan/Precision.h)
  // unless --set serve.kv_dtype says otherwise.
  if (PrecisionOpt.getNumOccurrences() && PrecisionOpt == "fp8" &&
      SO->KVElementBytes == 0) {
    SO->KVElementBytes = 1;
    SO->KVDType = "fp8, --precision fp8";
  }
  // A graph with symbolic dims is bound at one prompt of the longest
  // length: the serving model scales from it.
  if (!Batch.getNumOccurrences())
    O.Batch = 1;
  if (!Seq.getNumOccurrences())
    O.Seq = SO->Load.getMaxPrompt();
  O.Serve = std::move(SO);
  return Error::success();
}

static Expected<CompileOptions> buildOptions() {
  CompileOptions O;
  O.Mode = Mode == ToolMode::Train ? RunMode::Train : RunMode::Infer;
  if (Error E = buildServingOptions(O))
    return std::move(E);
  for (const std::string &C : ComparePlans) {
    if (O.Serve)
      break; // Serving plans (buildServingOptions).
    Expected<PlanSpec> S = parsePlanSpec(C);
    if (!S)
      return createStringError(inconvertibleErrorCode(),
                               "--compare " + C + ": " +
                                   toString(S.takeError()));
    O.Compare.emplace_back(C, *S);
  }
  for (StringRef S : Sets)
    if (Error E = S.startswith("moe.")   ? applyModelKnob(S, O)
                  : S.startswith("ddp.") ? applyDDPKnob(S, O)
                                         : Error::success())
      return std::move(E);
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

/// --version: Loom's version (CMake's project()) and the libraries it was
/// built with.
static void printVersion(raw_ostream &OS) {
  OS << "Loom " LOOM_VERSION " (plan-parallel)\n"
     << "  built with LLVM " LOOM_LLVM_VERSION ", ONNX " LOOM_ONNX_VERSION
        ", Z3 " LOOM_Z3_VERSION ", protobuf " LOOM_PROTOBUF_VERSION "\n";
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

/// --max-memory (default: three quarters of the machine) becomes the
/// process's memory limit; -o's directory is checked. Before any work, so
/// that a refusal costs nothing.
static Error checkLimits() {
  uint64_t MemoryBound = getPhysicalMemoryBytes() / 4 * 3;
  if (MaxMemory.getNumOccurrences()) {
    Expected<Bytes> B = parseBytes(MaxMemory);
    if (!B)
      return B.takeError();
    MemoryBound = (uint64_t)B->value();
  }
  installMemoryLimit(MemoryBound, "plan-parallel");
  if (!OutputDir.empty())
    if (Error E = checkOutputDir(OutputDir, Force))
      return E;
  return Error::success();
}

/// The cluster of --hw (the files layered in order) with the hardware
/// paths of --set applied; what they changed goes to \p Overrides.
static Expected<HardwareModel>
loadHardware(std::vector<HardwareOverride> &Overrides) {
  std::vector<std::string> HWSets;
  for (const std::string &S : Sets)
    if (!isModelKnob(S))
      HWSets.push_back(S);
  return loadLayeredHardware(
      std::vector<std::string>(HWPaths.begin(), HWPaths.end()), HWSets,
      Overrides);
}

/// --fail and --devices: the devices of \p HW that \p O plans on (and what
/// failed).
static Error applyDeviceLimits(const HardwareModel &HW, CompileOptions &O) {
  if (FailOpt.getNumOccurrences()) {
    if (DevicesOpt.getNumOccurrences())
      return createStringError(
          inconvertibleErrorCode(),
          "--fail and --devices: give one (--fail re-plans on the cluster "
          "minus the failed part)");
    StringRef F = StringRef(FailOpt).trim();
    bool ByDevice = F.consume_front("devices=");
    uint64_t N = 0, Total = HW.getNumDevices();
    uint64_t Unit = ByDevice ? 1 : HW.Topology.front().Size;
    if (F.getAsInteger(10, N) || N == 0)
      return createStringError(
          inconvertibleErrorCode(),
          "--fail %s: expected a number of servers (N) or devices=K",
          FailOpt.c_str());
    if (N >= Total || N * Unit >= Total)
      return createStringError(
          inconvertibleErrorCode(),
          "--fail %s: the cluster '%s' has %llu devices (%llu %s); at least "
          "one must remain",
          FailOpt.c_str(), HW.Name.c_str(), (unsigned long long)Total,
          (unsigned long long)(Total / HW.Topology.front().Size),
          ("units of " + HW.Topology.front().Name).c_str());
    O.FailedDevices = N * Unit;
    O.Devices = Total - N * Unit;
    O.FailureWhat = ByDevice
                        ? (Twine(N) + (N == 1 ? " device" : " devices")).str()
                        : (Twine(N) + (N == 1 ? " server" : " servers") + " (" +
                           HW.Topology.front().Name + " unit of " +
                           Twine(Unit) + " devices each)")
                              .str();
  }
  if (DevicesOpt.getNumOccurrences()) {
    if (DevicesOpt == 0 || DevicesOpt > HW.getNumDevices())
      return createStringError(
          inconvertibleErrorCode(),
          "--devices %u: the cluster '%s' has %llu devices; give 1 to %llu",
          (unsigned)DevicesOpt, HW.Name.c_str(),
          (unsigned long long)HW.getNumDevices(),
          (unsigned long long)HW.getNumDevices());
    O.Devices = DevicesOpt;
  }
  return Error::success();
}

/// --fused-kernels=none|all|LIST into \p O (unset: the hardware's kernels).
static Error parseFusedKernels(CompileOptions &O) {
  if (FusionOpt != "hw" && FusionOpt != "none")
    return createStringError(inconvertibleErrorCode(),
                             "--fusion: expected 'hw' or 'none', got '%s'",
                             FusionOpt.c_str());
  O.GenericFusion = FusionOpt == "hw";
  if (!FusedKernelsOpt.getNumOccurrences())
    return Error::success();
  SmallVector<StringRef, 4> Names;
  StringRef(FusedKernelsOpt).split(Names, ',', -1, /*KeepEmpty=*/false);
  O.FusedKernels.emplace();
  for (StringRef N : Names)
    if (N.trim() != "none")
      O.FusedKernels->push_back(N.trim().str());
    else if (Names.size() > 1)
      return createStringError(
          inconvertibleErrorCode(),
          "--fused-kernels: 'none' cannot be combined with kernel names");
  if (is_contained(*O.FusedKernels, "all") && O.FusedKernels->size() > 1)
    return createStringError(
        inconvertibleErrorCode(),
        "--fused-kernels: 'all' cannot be combined with kernel names");
  return Error::success();
}

/// Fills \p CU from the command line: its options (with \p HW's overrides
/// described, the devices planned on, the progress line's callback), the
/// hardware and what --plan fixes. Returns the --export targets.
static Expected<std::vector<ExportTarget>>
parseInputs(const HardwareModel &HW, ArrayRef<HardwareOverride> Overrides,
            ProgressLine &Progress, CompilationUnit &CU) {
  Expected<CompileOptions> Opts = buildOptions();
  if (!Opts)
    return Opts.takeError();
  CU.Opts = std::move(*Opts);
  std::vector<std::string> Described;
  for (const HardwareOverride &O : Overrides)
    Described.push_back(describeOverride(O));
  CU.Opts.HardwareOverrides.insert(CU.Opts.HardwareOverrides.begin(),
                                   Described.begin(), Described.end());
  if (Error E = applyDeviceLimits(HW, CU.Opts))
    return std::move(E);
  CU.Opts.TopPlans = std::max(1u, (unsigned)TopPlans);
  if (ObjectiveOpt == Objective::Goodput && !HW.Reliab)
    return createStringError(
        inconvertibleErrorCode(),
        "--objective goodput: the hardware '%s' has no reliability section "
        "(failure rates and checkpoint bandwidth; see README)",
        HW.Name.c_str());
  CU.Opts.RankByGoodput = ObjectiveOpt == Objective::Goodput;
  CU.Opts.OutputDir = OutputDir;
  CU.Opts.Force = Force;
  CU.Opts.EmitPerRank = EmitMode == EmitKind::PerRank;
  // Under --mode serve the serving search makes its own comparisons.
  // Only the explanation reads the best plan without offload (--explain,
  // and the output directory's report).
  CU.Opts.FindNoOffload = ExplainPlan || !OutputDir.empty();
  CU.Opts.SearchUnconstrained =
      !CU.Opts.Serve &&
      ((ExplainPlan && PlanText.getNumOccurrences()) || !ComparePlans.empty());
  CU.Opts.VerifyOutput = !NoVerifyOutput;
  CU.Opts.AllowUncosted = AllowUncosted;
  CU.Opts.NoPrune = NoPrune;
  if (VocabDivisibleBy == 0)
    return createStringError(inconvertibleErrorCode(),
                             "--make-vocab-size-divisible-by must be at least "
                             "1 (1 pads to a multiple of tp only)");
  CU.Opts.VocabDivisibleBy = VocabDivisibleBy;
  if (Error E = parseFusedKernels(CU.Opts))
    return std::move(E);
  CU.Opts.TestCorruptOutput = TestCorruptOutput;
  CU.Opts.CheckPricedCollectives = CheckPricedCollectives;
  CU.Opts.TraceFull = TraceMode == TraceKind::Full;
  CU.Opts.Progress = [&Progress](const std::string &S) { Progress.set(S); };
  Expected<std::vector<ExportTarget>> Exports = parseExportTargets(ExportTo);
  if (!Exports)
    return Exports.takeError();
  if (!Exports->empty() && CU.Opts.Mode != RunMode::Train)
    return createStringError(
        inconvertibleErrorCode(),
        "--export writes training launch arguments; it needs --mode train");
  CU.Opts.Export.assign(ExportTo.begin(), ExportTo.end());
  CU.HW = &HW;
  // What --plan fixes; search-parallelism searches the rest (a serving
  // plan under --mode serve: buildServingOptions).
  if (PlanText.getNumOccurrences() && !CU.Opts.Serve) {
    Expected<PlanSpec> S = parsePlanSpec(PlanText);
    if (!S)
      return S.takeError();
    CU.PlanRequest = *S;
  }
  return Exports;
}

/// Imports and verifies the model of the command line into \p CU. Returns
/// its number of nodes before the pipeline.
static Expected<unsigned> importInput(CompilationUnit &CU,
                                      ProgressLine &Progress) {
  Progress.set("import " + sys::path::filename(ModelPath).str());
  ImportStats Stats;
  Expected<std::unique_ptr<Model>> M = importModelFile(ModelPath, &Stats);
  if (!M)
    return M.takeError();
  CU.M = std::move(*M);
  CU.ShapeOnlyParameters = Stats.ShapeOnlyParameters;
  // --mode serve binds batch 1 and the longest prompt only where the model
  // leaves them open (a model with static shapes keeps its own).
  if (CU.Opts.Serve &&
      none_of(CU.M->getGraph().getInputs(),
              [](const Value *V) { return !V->Type.isStatic(); })) {
    if (!Batch.getNumOccurrences())
      CU.Opts.Batch = None;
    if (!Seq.getNumOccurrences())
      CU.Opts.Seq = None;
  }
  if (Error E = verifyModel(*CU.M))
    return createStringError(inconvertibleErrorCode(),
                             ModelPath + ": error: " + toString(std::move(E)));
  return CU.M->getGraph().getNumNodes();
}

/// Fills \p PM: --pass-pipeline, or the default pipeline with the
/// transform passes when there is an output directory or a dump or stop
/// after one of them asks for them (and emit with -o).
static Error buildPipeline(PassManager &PM) {
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
static PassInstrumentation getInstrumentation() {
  PassInstrumentation PI;
  PI.PrintAfter.assign(PrintAfter.begin(), PrintAfter.end());
  PI.StopAfter = StopAfter;
  PI.VerifyEach = VerifyEach;
  PI.TimePasses = TimePasses;
  return PI;
}

/// What a run of the pipeline leaves besides the compilation unit.
struct FrontEndResult {
  /// The IR dumps, buffered so that a failing pipeline prints only its
  /// error.
  std::string Dumps;
  /// Whether annotate-costs ran (node costs exist).
  bool HaveCosts = false;
  /// Whether emit wrote the output directory.
  bool Wrote = false;
};

/// Runs \p PM over \p CU (and the search --plan and --print-costs=stage
/// ask for where the pipeline left it out), then stops the progress line
/// and prints the pass timings and the warnings on stderr. Returns the
/// pipeline's error; \p Out what else it left.
static Error runFrontEnd(CompilationUnit &CU, PassManager &PM,
                         const PassInstrumentation &PI, ProgressLine &Progress,
                         FrontEndResult &Out) {
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
static Optional<int> handlePipelineError(Error E, const CompilationUnit &CU,
                                         const PassInstrumentation &PI,
                                         bool HaveExports,
                                         Optional<std::string> &NoPlanMsg) {
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
static Expected<const PlanCost *>
getCostedPlan(const CompilationUnit &CU, bool HaveCosts, bool NoPlanPending) {
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
static void printPlanlessReports(const CompilationUnit &CU,
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
static int writeOutputs(const CompilationUnit &CU, const PassManager &PM,
                        const PassInstrumentation &PI,
                        ArrayRef<ExportTarget> Exports, const PlanCost *Costed,
                        unsigned NodesBefore, bool Wrote) {
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
