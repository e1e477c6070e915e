//===- FrameworkYAML.cpp - Framework profiles read with YamlIO ------------===//
//
// The conventions of the hardware files (lib/Hardware/HardwareYAML.cpp):
// YamlIO reads, unknown keys and bad values are errors with their file,
// line and column; each vocabulary (recompute, tiers, kinds, orders,
// gradient precisions) is a scalar type that rejects what it does not
// know where it is written. The shipped profiles (examples/frameworks) are
// compiled in, so --framework NAME works from any directory.
//
//===----------------------------------------------------------------------===//
#include "loom/Plan/Framework.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLTraits.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace loom;

namespace {

/// A word of one vocabulary, checked as it is read.
template <typename Tag> struct Word { std::string S; };
struct AnyTag {};
struct RecomputeTag {};
struct TierTag {};
struct KindTag {};
struct OrderTag {};
struct GradTag {};
struct FusionTag {};
struct PrecisionTag {};
using NameWord = Word<AnyTag>;

bool inVocab(RecomputeTag, StringRef S, std::string &Known) {
  Known = "none, selective, full";
  return S == "none" || S == "selective" || S == "full";
}
bool inVocab(TierTag, StringRef S, std::string &Known) {
  Known = "host, ssd";
  return S == "host" || S == "ssd";
}
bool inVocab(KindTag, StringRef S, std::string &Known) {
  Known = "opt, grad, param, act";
  return S == "opt" || S == "grad" || S == "param" || S == "act";
}
bool inVocab(GradTag, StringRef S, std::string &Known) {
  Known = "fp32, bf16";
  return S == "fp32" || S == "bf16";
}
bool inVocab(FusionTag, StringRef S, std::string &Known) {
  Known = "hw, none";
  return S == "hw" || S == "none";
}
bool inVocab(PrecisionTag, StringRef S, std::string &Known) {
  Known = getPrecisionNames().str();
  return parsePrecisionName(S).hasValue();
}
bool inVocab(OrderTag, StringRef S, std::string &Known) {
  Known = "an order of tp, ep, dp, pp with tp first (tp-ep-dp-pp)";
  Expected<PlanSpec> P = parsePlanSpec(("order=" + S).str());
  if (!P) {
    consumeError(P.takeError());
    return false;
  }
  return true;
}
bool inVocab(AnyTag, StringRef, std::string &) { return true; }

struct RawZero {
  unsigned Stage = 0;
  std::string Name, Source;
  unsigned MaxTP = 0, MaxPP = 0;
};
struct RawOffload {
  Word<KindTag> Kind;
  std::vector<Word<TierTag>> Tiers;
  unsigned MinZero = 0, MaxZero = 3;
  std::vector<Word<KindTag>> With;
  bool NeedsRecompute = false;
  std::string Name, Source;
};
template <typename Tag> struct RawValues {
  std::vector<Word<Tag>> Values;
  std::string Source;
};
struct RawSupport {
  bool Supported = true;
  /// virtual_pipeline: even_chunks; expert_parallel: tp_needs_sp;
  /// tp_overlap: needs_sp.
  bool Extra = false;
  std::string Source;
};
/// runs.precision: the recipes it runs and the one it runs by default.
struct RawPrecision {
  std::vector<Word<PrecisionTag>> Values;
  Word<PrecisionTag> Default;
  std::string Source;
};
struct RawRuns {
  std::vector<RawZero> Zero;
  std::vector<RawOffload> Offload;
  RawValues<RecomputeTag> Recompute;
  RawSupport SP, VPP, EP, TPOverlap;
  RawValues<OrderTag> Orders;
  RawValues<GradTag> Grads;
  RawValues<AnyTag> CP, Schedules;
  Optional<RawSupport> UlyssesKVRepeat;
  Optional<RawPrecision> Precision;
};
struct RawOverlap {
  Optional<double> TP, DP, PP;
  /// share (a fraction of the class) or cores (SMs / AI cores the
  /// framework's collectives hold, divided by the class's cores).
  std::string Unit = "share";
  /// Applies only to devices whose name starts with this (empty: any).
  std::string Devices;
};
struct RawEPDispatch {
  std::string Per;
  double Efficiency = 0;
  std::string Source;
};
struct RawHow {
  std::string Attention;
  Optional<RawEPDispatch> EPDispatch;
  Optional<std::vector<NameWord>> FusedKernels;
  Optional<RawOverlap> Overlap;
  uint64_t BucketParams = 0;
  double OptimizerBytes = 12;
  Word<GradTag> GradReduce{"fp32"};
  Optional<Word<FusionTag>> Fusion;
  std::string Source;
};
struct RawProfile {
  std::string Name, Export, Version, Source;
  std::vector<NameWord> Aliases;
  bool AnyPlan = false;
  Optional<RawRuns> Runs;
  Optional<RawHow> How;
};

} // namespace

namespace llvm {
namespace yaml {

template <typename Tag> struct ScalarTraits<Word<Tag>> {
  static void output(const Word<Tag> &W, void *, raw_ostream &OS) { OS << W.S; }
  static StringRef input(StringRef S, void *, Word<Tag> &W) {
    static thread_local std::string Msg;
    std::string Known;
    if (!inVocab(Tag(), S, Known)) {
      Msg = ("unknown value '" + S + "' (known: " + Known + ")").str();
      return Msg;
    }
    W.S = S.str();
    return StringRef();
  }
  static QuotingType mustQuote(StringRef) { return QuotingType::None; }
};

template <> struct MappingTraits<RawZero> {
  static void mapping(IO &IO, RawZero &Z) {
    IO.mapRequired("stage", Z.Stage);
    IO.mapRequired("name", Z.Name);
    IO.mapOptional("max_tp", Z.MaxTP);
    IO.mapOptional("max_pp", Z.MaxPP);
    IO.mapRequired("source", Z.Source);
  }
  static std::string validate(IO &, RawZero &Z) {
    return Z.Stage > 3 ? "zero stage must be 0, 1, 2 or 3" : "";
  }
};

template <> struct MappingTraits<RawOffload> {
  static void mapping(IO &IO, RawOffload &O) {
    IO.mapRequired("kind", O.Kind);
    IO.mapRequired("tiers", O.Tiers);
    IO.mapOptional("min_zero", O.MinZero);
    IO.mapOptional("max_zero", O.MaxZero);
    IO.mapOptional("with", O.With);
    IO.mapOptional("needs_recompute", O.NeedsRecompute);
    IO.mapRequired("name", O.Name);
    IO.mapRequired("source", O.Source);
  }
  static std::string validate(IO &, RawOffload &O) {
    if (O.Tiers.empty())
      return "tiers: at least one of host, ssd";
    if (O.MinZero > O.MaxZero || O.MaxZero > 3)
      return "min_zero <= max_zero <= 3";
    return "";
  }
};

template <typename Tag> struct MappingTraits<RawValues<Tag>> {
  static void mapping(IO &IO, RawValues<Tag> &V) {
    IO.mapRequired("values", V.Values);
    IO.mapRequired("source", V.Source);
  }
};

/// The three support sections differ only in the name of their extra key.
struct SupportKey {
  static const char *&get() {
    static thread_local const char *Key = nullptr;
    return Key;
  }
};
template <> struct MappingTraits<RawSupport> {
  static void mapping(IO &IO, RawSupport &S) {
    IO.mapRequired("supported", S.Supported);
    if (const char *K = SupportKey::get())
      IO.mapOptional(K, S.Extra);
    IO.mapRequired("source", S.Source);
  }
};

template <> struct MappingTraits<RawRuns> {
  static void mapping(IO &IO, RawRuns &R) {
    IO.mapRequired("zero", R.Zero);
    IO.mapRequired("offload", R.Offload);
    IO.mapRequired("recompute", R.Recompute);
    SupportKey::get() = nullptr;
    IO.mapRequired("sequence_parallel", R.SP);
    SupportKey::get() = "even_chunks";
    IO.mapRequired("virtual_pipeline", R.VPP);
    SupportKey::get() = "tp_needs_sp";
    IO.mapRequired("expert_parallel", R.EP);
    SupportKey::get() = "needs_sp";
    IO.mapRequired("tp_overlap", R.TPOverlap);
    SupportKey::get() = nullptr;
    IO.mapRequired("mesh_orders", R.Orders);
    IO.mapRequired("grad_reduce", R.Grads);
    IO.mapRequired("context_parallel", R.CP);
    IO.mapOptional("ulysses_kv_repeat", R.UlyssesKVRepeat);
    IO.mapRequired("pipeline_schedules", R.Schedules);
    IO.mapOptional("precision", R.Precision);
  }
  static std::string validate(IO &, RawRuns &R) {
    if (none_of(R.Zero, [](const RawZero &Z) { return Z.Stage == 0; }))
      return "zero: stage 0 (plain data parallel) must be listed";
    if (none_of(R.Recompute.Values,
                [](const Word<RecomputeTag> &W) { return W.S == "none"; }))
      return "recompute: none must be listed";
    if (R.Grads.Values.empty())
      return "grad_reduce: at least one of fp32, bf16";
    return "";
  }
};

template <> struct MappingTraits<RawPrecision> {
  static void mapping(IO &IO, RawPrecision &P) {
    IO.mapRequired("values", P.Values);
    IO.mapRequired("default", P.Default);
    IO.mapRequired("source", P.Source);
  }
  static std::string validate(IO &, RawPrecision &P) {
    if (none_of(P.Values, [&](const Word<PrecisionTag> &W) {
          return W.S == P.Default.S;
        }))
      return "precision: the default must be one of its values";
    return "";
  }
};

template <> struct MappingTraits<RawOverlap> {
  static void mapping(IO &IO, RawOverlap &O) {
    IO.mapOptional("tp", O.TP);
    IO.mapOptional("dp", O.DP);
    IO.mapOptional("pp", O.PP);
    IO.mapOptional("unit", O.Unit);
    IO.mapOptional("devices", O.Devices);
  }
  static std::string validate(IO &, RawOverlap &O) {
    if (O.Unit != "share" && O.Unit != "cores")
      return "comm_overlap unit: share or cores";
    for (const Optional<double> &S : {O.TP, O.DP, O.PP})
      if (S && O.Unit == "share" && !(*S >= 0 && *S < 1))
        return "comm_overlap shares must be in [0, 1)";
      else if (S && !(*S >= 0))
        return "comm_overlap cores must be >= 0";
    return "";
  }
};

template <> struct MappingTraits<RawEPDispatch> {
  static void mapping(IO &IO, RawEPDispatch &D) {
    IO.mapRequired("per", D.Per);
    IO.mapOptional("efficiency", D.Efficiency);
    IO.mapRequired("source", D.Source);
  }
  static std::string validate(IO &, RawEPDispatch &D) {
    if (D.Per != "rank" && D.Per != "expert")
      return "ep_dispatch per: rank or expert";
    return D.Efficiency >= 0 && D.Efficiency <= 1
               ? ""
               : "ep_dispatch efficiency must be in [0, 1]";
  }
};

template <> struct MappingTraits<RawHow> {
  static void mapping(IO &IO, RawHow &H) {
    IO.mapRequired("attention", H.Attention);
    IO.mapOptional("fused_kernels", H.FusedKernels);
    IO.mapOptional("comm_overlap", H.Overlap);
    IO.mapOptional("fusion", H.Fusion);
    IO.mapOptional("ep_dispatch", H.EPDispatch);
    IO.mapRequired("ddp_bucket_params", H.BucketParams);
    IO.mapRequired("optimizer_bytes_per_param", H.OptimizerBytes);
    IO.mapRequired("grad_reduce_dtype", H.GradReduce);
    IO.mapRequired("source", H.Source);
  }
  static std::string validate(IO &, RawHow &H) {
    return H.OptimizerBytes > 0 ? "" : "optimizer_bytes_per_param must be > 0";
  }
};

template <> struct MappingTraits<RawProfile> {
  static void mapping(IO &IO, RawProfile &P) {
    IO.mapRequired("name", P.Name);
    IO.mapOptional("aliases", P.Aliases);
    IO.mapOptional("export", P.Export);
    IO.mapRequired("version", P.Version);
    IO.mapRequired("source", P.Source);
    IO.mapOptional("any_plan", P.AnyPlan);
    IO.mapOptional("runs", P.Runs);
    IO.mapOptional("how", P.How);
  }
  static std::string validate(IO &, RawProfile &P) {
    if (P.AnyPlan != !P.Runs)
      return "a profile has either 'any_plan: true' or a 'runs' section";
    if (!P.AnyPlan && !P.How)
      return "a profile that lists what it runs says how ('how')";
    if (!P.Export.empty() && P.Export != "megatron" &&
        P.Export != "mindspeed" && P.Export != "deepspeed")
      return "export: one of megatron, mindspeed, deepspeed";
    return "";
  }
};

} // namespace yaml
} // namespace llvm

LLVM_YAML_IS_FLOW_SEQUENCE_VECTOR(NameWord)
LLVM_YAML_IS_FLOW_SEQUENCE_VECTOR(Word<RecomputeTag>)
LLVM_YAML_IS_FLOW_SEQUENCE_VECTOR(Word<TierTag>)
LLVM_YAML_IS_FLOW_SEQUENCE_VECTOR(Word<KindTag>)
LLVM_YAML_IS_FLOW_SEQUENCE_VECTOR(Word<OrderTag>)
LLVM_YAML_IS_FLOW_SEQUENCE_VECTOR(Word<GradTag>)
LLVM_YAML_IS_FLOW_SEQUENCE_VECTOR(Word<PrecisionTag>)
LLVM_YAML_IS_SEQUENCE_VECTOR(RawZero)
LLVM_YAML_IS_SEQUENCE_VECTOR(RawOffload)

namespace {

void captureFirst(const SMDiagnostic &D, void *Ctx) {
  auto *First = static_cast<Optional<SMDiagnostic> *>(Ctx);
  if (D.getKind() == SourceMgr::DK_Error && !*First)
    *First = D;
}

OffloadKind toKind(StringRef S) {
  return StringSwitch<OffloadKind>(S)
      .Case("grad", OffloadKind::Grad)
      .Case("param", OffloadKind::Param)
      .Case("act", OffloadKind::Act)
      .Default(OffloadKind::Opt);
}

GradPrecision toGrad(StringRef S) {
  return S == "bf16" ? GradPrecision::BF16 : GradPrecision::FP32;
}

void convertRuns(const RawRuns &R, FrameworkProfile &F) {
  for (const RawZero &Z : R.Zero)
    F.Zero.push_back({Z.Stage, Z.Name, Z.MaxTP, Z.MaxPP, Z.Source});
  for (const RawOffload &O : R.Offload) {
    FrameworkOffload FO;
    FO.Kind = toKind(O.Kind.S);
    for (const auto &T : O.Tiers)
      FO.Tiers.push_back(T.S == "ssd" ? MemoryTier::SSD : MemoryTier::Host);
    FO.MinZero = O.MinZero;
    FO.MaxZero = O.MaxZero;
    for (const auto &W : O.With)
      FO.With.push_back(toKind(W.S));
    FO.NeedsRecompute = O.NeedsRecompute;
    FO.Name = O.Name;
    FO.Source = O.Source;
    F.Offload.push_back(std::move(FO));
  }
  for (const auto &W : R.Recompute.Values)
    F.Recomputes.push_back(W.S == "full"        ? Recompute::Full
                           : W.S == "selective" ? Recompute::Selective
                                                : Recompute::None);
  F.RecomputeSource = R.Recompute.Source;
  F.SequenceParallel = R.SP.Supported;
  F.SequenceParallelSource = R.SP.Source;
  F.VirtualPipeline = R.VPP.Supported;
  F.EvenChunks = R.VPP.Extra;
  F.VirtualPipelineSource = R.VPP.Source;
  F.ExpertParallel = R.EP.Supported;
  F.EPWithTPNeedsSP = R.EP.Extra;
  F.ExpertParallelSource = R.EP.Source;
  F.TPOverlap = R.TPOverlap.Supported;
  F.TPOverlapNeedsSP = R.TPOverlap.Extra;
  F.TPOverlapSource = R.TPOverlap.Source;
  for (const auto &W : R.Orders.Values)
    F.Orders.push_back(*cantFail(parsePlanSpec("order=" + W.S)).Order);
  F.OrdersSource = R.Orders.Source;
  for (const auto &W : R.Grads.Values)
    F.Grads.push_back(toGrad(W.S));
  F.GradsSource = R.Grads.Source;
  for (const auto &W : R.CP.Values)
    F.ContextParallel.push_back(W.S);
  F.ContextParallelSource = R.CP.Source;
  if (R.UlyssesKVRepeat) {
    F.UlyssesKVRepeat = R.UlyssesKVRepeat->Supported;
    F.UlyssesKVRepeatSource = R.UlyssesKVRepeat->Source;
  }
  for (const auto &W : R.Schedules.Values)
    F.PipelineSchedules.push_back(W.S);
  if (R.Precision) {
    FrameworkPrecision FP;
    for (const auto &W : R.Precision->Values)
      FP.Values.push_back(*parsePrecisionName(W.S));
    FP.Default = *parsePrecisionName(R.Precision->Default.S);
    FP.Source = R.Precision->Source;
    F.Precision = std::move(FP);
  }
}

void convertHow(const RawHow &H, FrameworkProfile &F) {
  F.Attention = H.Attention;
  if (H.FusedKernels) {
    F.FusedKernels.emplace();
    for (const NameWord &W : *H.FusedKernels)
      F.FusedKernels->push_back(W.S);
  }
  if (H.Overlap) {
    F.TPOverlapShare = H.Overlap->TP;
    F.DPOverlapShare = H.Overlap->DP;
    F.PPOverlapShare = H.Overlap->PP;
    F.OverlapInCores = H.Overlap->Unit == "cores";
    F.OverlapDevices = H.Overlap->Devices;
  }
  F.DDPBucketParams = (double)H.BucketParams;
  if (H.EPDispatch) {
    F.EPDispatchPerRank = H.EPDispatch->Per == "rank";
    F.EPDispatchEfficiency = H.EPDispatch->Efficiency;
    F.EPDispatchSource = H.EPDispatch->Source;
  }
  F.OptimizerBytesPerParam = H.OptimizerBytes;
  F.GradReduce = toGrad(H.GradReduce.S);
  if (H.Fusion)
    F.GenericFusion = H.Fusion->S == "hw";
  F.HowSource = H.Source;
}

// The shipped profiles, compiled in from examples/frameworks (CMake writes
// ShippedFrameworks.inc: {"name", R"(...)"} entries).
struct Shipped {
  const char *File;
  const char *Text;
};
const Shipped ShippedProfiles[] = {
#include "ShippedFrameworks.inc"
};

} // namespace

Expected<FrameworkProfile> loom::parseFrameworkProfile(StringRef Text,
                                                       StringRef Name) {
  std::unique_ptr<MemoryBuffer> Buf =
      MemoryBuffer::getMemBuffer(Text, Name, /*RequiresNullTerminator=*/false);
  Optional<SMDiagnostic> First;
  RawProfile Raw;
  {
    yaml::Input In(Buf->getMemBufferRef(), nullptr, captureFirst, &First);
    In >> Raw;
    if (In.error() && !First)
      return createStringError(inconvertibleErrorCode(),
                               "%s: error: not a framework profile",
                               Name.str().c_str());
  }
  if (First) {
    std::string S;
    raw_string_ostream OS(S);
    OS << First->getFilename();
    if (First->getLineNo() > 0)
      OS << ':' << First->getLineNo() << ':' << First->getColumnNo() + 1;
    OS << ": error: " << First->getMessage();
    return createStringError(inconvertibleErrorCode(), OS.str());
  }
  FrameworkProfile F;
  F.Name = Raw.Name;
  for (const NameWord &W : Raw.Aliases)
    F.Aliases.push_back(W.S);
  F.Export = Raw.Export;
  F.Version = Raw.Version;
  F.Source = Raw.Source;
  F.AnyPlan = Raw.AnyPlan;
  if (Raw.Runs)
    convertRuns(*Raw.Runs, F);
  if (Raw.How)
    convertHow(*Raw.How, F);
  return F;
}

std::vector<std::string> loom::getShippedFrameworkNames() {
  std::vector<std::string> Names;
  for (const Shipped &S : ShippedProfiles)
    Names.push_back(StringRef(S.File).drop_back(strlen(".yaml")).str());
  return Names;
}

Expected<FrameworkProfile> loom::loadFrameworkProfile(StringRef NameOrPath) {
  if (!NameOrPath.endswith(".yaml") && !NameOrPath.contains('/')) {
    for (const Shipped &S : ShippedProfiles) {
      Expected<FrameworkProfile> F = parseFrameworkProfile(
          S.Text, ("examples/frameworks/" + Twine(S.File)).str());
      if (!F)
        return F.takeError();
      if (F->Name == NameOrPath || is_contained(F->Aliases, NameOrPath))
        return F;
    }
    return createStringError(
        inconvertibleErrorCode(),
        "--framework: unknown framework '%s' (known: %s; or a profile .yaml)",
        NameOrPath.str().c_str(),
        join(getShippedFrameworkNames(), ", ").c_str());
  }
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buf =
      MemoryBuffer::getFile(NameOrPath);
  if (!Buf)
    return createStringError(inconvertibleErrorCode(), "%s: error: %s",
                             NameOrPath.str().c_str(),
                             Buf.getError().message().c_str());
  return parseFrameworkProfile((*Buf)->getBuffer(), NameOrPath);
}
