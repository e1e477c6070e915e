//===- Options.cpp - plan-parallel's flags into its inputs ----------------===//
//
// The command line of plan-parallel turned into what the pipeline runs on:
// the CompileOptions (--set knobs, --mode serve's workload and plans,
// --fail and --devices, --fused-kernels, ...), the memory limit and the
// output directory checked, the hardware loaded and the model imported.
//
//===----------------------------------------------------------------------===//
#include "PlanParallel.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Hardware/HardwareOverlay.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Shard/OutputDir.h"
#include "loom/Support/MemoryLimit.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Path.h"
#include <cmath>

using namespace llvm;
using namespace loom;
using namespace planparallel;

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

/// --max-memory (default: three quarters of the machine) becomes the
/// process's memory limit; -o's directory is checked. Before any work, so
/// that a refusal costs nothing.
Error planparallel::checkLimits() {
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
Expected<HardwareModel>
planparallel::loadHardware(std::vector<HardwareOverride> &Overrides) {
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
Expected<std::vector<ExportTarget>>
planparallel::parseInputs(const HardwareModel &HW,
                          ArrayRef<HardwareOverride> Overrides,
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
Expected<unsigned> planparallel::importInput(CompilationUnit &CU,
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
