//===- HardwareModel.cpp - Accelerator cluster description ----------------===//
//
// Lookups, the cross-field checks and the printed summary. Reading YAML is in
// HardwareYAML.cpp.
//
//===----------------------------------------------------------------------===//

#include "loom/Hardware/HardwareModel.h"

#include "Validation.h"

#include "loom/Support/DataType.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace llvm;

namespace loom {
namespace hardware_detail {

StringRef canonicalDataTypeName(StringRef Name) {
  // TF32 is a format of NVIDIA's tensor cores with no storage type (fp32
  // in memory): a throughput key only, for the tf32 precision recipe
  // (loom/Plan/Precision.h).
  if (Name == "tf32")
    return "tf32";
  // FP8 likewise: one throughput key for the tensor cores' e4m3 and e5m2
  // formats, which run at the same rate on Hopper (H100 datasheet) and
  // Blackwell; a class whose formats differ lists f8e4m3fn / f8e5m2 keys,
  // which getThroughput reads first.
  if (Name == "fp8")
    return "fp8";
  if (Optional<DataType> T = parseDataTypeName(Name))
    return getDataTypeName(*T);
  return "";
}

} // namespace hardware_detail

using namespace hardware_detail;

//===----------------------------------------------------------------------===//
// Lookups
//===----------------------------------------------------------------------===//

bool DeviceClass::supportsOp(StringRef OpType) const {
  bool Listed = any_of(
      Ops, [&](const std::string &Op) { return Op == "*" || Op == OpType; });
  return Listed && !is_contained(ExcludeOps, OpType);
}

bool DeviceClass::supportsDataType(StringRef DType) const {
  if (DataTypes.empty())
    return true;
  StringRef Canonical = canonicalDataTypeName(DType);
  return !Canonical.empty() && is_contained(DataTypes, Canonical);
}

bool FusedKernel::supportsDataType(StringRef DType) const {
  if (DataTypes.empty())
    return true;
  StringRef Canonical = canonicalDataTypeName(DType);
  return !Canonical.empty() && is_contained(DataTypes, Canonical);
}

static Optional<FlopsPerSecond>
lookupRate(const std::map<std::string, FlopsPerSecond> &Rates,
           StringRef DType) {
  auto It = Rates.find(canonicalDataTypeName(DType).str());
  if (It == Rates.end())
    return None;
  return It->second;
}

/// True for the storage types the `fp8` throughput key stands for.
static bool isFP8Storage(StringRef DType) {
  Optional<DataType> T = parseDataTypeName(DType);
  return T && (*T == DataType::Float8E4M3FN || *T == DataType::Float8E4M3FNUZ ||
               *T == DataType::Float8E5M2 || *T == DataType::Float8E5M2FNUZ);
}

Optional<FlopsPerSecond> DeviceClass::getThroughput(StringRef DType) const {
  if (Optional<FlopsPerSecond> R = lookupRate(Throughput, DType))
    return R;
  if (isFP8Storage(DType))
    return lookupRate(Throughput, "fp8");
  return None;
}

Optional<FlopsPerSecond>
DeviceClass::getVectorThroughput(StringRef DType) const {
  return lookupRate(VectorThroughput, DType);
}

uint64_t HardwareModel::getNumDevices() const {
  uint64_t N = 1;
  for (const TopologyLevel &L : Topology)
    N *= L.Size;
  return N;
}

const TopologyLevel *HardwareModel::getLevel(StringRef Name) const {
  for (const TopologyLevel &L : Topology)
    if (L.Name == Name)
      return &L;
  return nullptr;
}

const DeviceClass *HardwareModel::getClass(StringRef Name) const {
  auto It = Device.Classes.find(Name.str());
  return It == Device.Classes.end() ? nullptr : &It->second;
}

const MemoryLevel *HardwareModel::getMemory(StringRef Name) const {
  auto It = Device.Memory.find(Name.str());
  return It == Device.Memory.end() ? nullptr : &It->second;
}

const TransferLink *HardwareModel::getTransfer(StringRef From,
                                               StringRef To) const {
  for (const TransferLink &T : Device.Transfers)
    if (T.From == From && T.To == To)
      return &T;
  for (const TransferLink &T : Device.Transfers)
    if (T.From == To && T.To == From)
      return &T;
  return nullptr;
}

ArrayRef<StringRef> getOpFamilyNames() {
  // The rule files of cost_models/ops, in the order OpCost.cpp adds them.
  static const StringRef Names[] = {"matmul",    "elementwise", "norm",
                                    "reduction", "indexing",    "movement",
                                    "conv",      "control"};
  return Names;
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

namespace {

/// More devices than this is a typo (an extra zero) or a hostile file, not a
/// cluster: 2^18 is above the largest clusters built (~200k accelerators),
/// and a plan for a million ranks would be a million-entry rank map.
constexpr uint64_t MaxDevices = 262144;

const char *const KnownClasses[] = {"aicore", "aicpu", "hbm_pim", "ssd"};
const char *const KnownMemories[] = {"hbm", "host", "ssd"};
const char *const KnownFusionRules[] = {"epilogue", "loop", "reduction"};
const char *const KnownFusedKernels[] = {"attention", "gelu",   "layernorm",
                                         "rmsnorm",   "rotary", "swiglu"};

std::string formatNumber(double V) {
  std::string S;
  raw_string_ostream OS(S);
  OS << format("%g", V);
  return OS.str();
}

template <typename T> std::string joinNames(const T &Names) {
  std::string S;
  for (const auto &N : Names) {
    if (!S.empty())
      S += ", ";
    S += N;
  }
  return S;
}

/// Collects the first violation; later checks are skipped once one is found.
class Checker {
public:
  Optional<Violation> First;

  bool failed() const { return First.hasValue(); }

  void fail(const Twine &Path, const Twine &Message, bool AtKey = false) {
    if (!First)
      First = Violation{Path.str(), Message.str(), AtKey};
  }

  void positive(const Twine &Path, double V, const std::string &Shown) {
    if (!(V > 0) || !std::isfinite(V))
      fail(Path, "must be positive, got " + Shown);
  }
  void positive(const Twine &Path, BytesPerSecond R) {
    positive(Path, R.value(), formatBandwidth(R));
  }
  void positive(const Twine &Path, Bytes B) {
    positive(Path, B.value(), formatBytes(B));
  }
  void positive(const Twine &Path, FlopsPerSecond R) {
    positive(Path, R.value(), formatFlopRate(R));
  }
  void nonNegative(const Twine &Path, Seconds T) {
    if (!(T.value() >= 0) || !std::isfinite(T.value()))
      fail(Path, "must be non-negative and finite, got " + formatDuration(T));
  }
  void nonNegative(const Twine &Path, Bytes B) {
    if (!(B.value() >= 0) || !std::isfinite(B.value()))
      fail(Path, "must be non-negative and finite, got " + formatBytes(B));
  }
  void efficiency(const Twine &Path, double E) {
    if (!(E > 0 && E <= 1))
      fail(Path, "must be in (0, 1], got " + formatNumber(E));
  }
  void dataTypeName(const Twine &Path, StringRef Name, bool AtKey) {
    if (canonicalDataTypeName(Name) != Name)
      fail(Path,
           "unknown data type '" + Name +
               "'; expected f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, "
               "u32, u64, bool, f8e4m3fn or f8e5m2 (fp16, float32, int8, ... "
               "also "
               "accepted; tf32 and fp8 as throughput keys)",
           AtKey);
  }

  void checkRates(const std::string &Path,
                  const std::map<std::string, FlopsPerSecond> &Rates) {
    for (const auto &[DType, Rate] : Rates) {
      dataTypeName(Path + "." + DType, DType, /*AtKey=*/true);
      positive(Path + "." + DType, Rate);
    }
  }

  void checkClass(const std::string &Path, const std::string &Name,
                  const DeviceClass &C) {
    if (!is_contained(KnownClasses, Name)) {
      fail(Path,
           "unknown device class '" + Name + "'; expected one of " +
               joinNames(KnownClasses),
           /*AtKey=*/true);
      return;
    }
    checkRates(Path + ".throughput", C.Throughput);
    checkRates(Path + ".vector_throughput", C.VectorThroughput);
    nonNegative(Path + ".launch_overhead", C.LaunchOverhead);
    efficiency(Path + ".efficiency", C.Efficiency);
    if (C.Alignment < 1)
      fail(Path + ".alignment", "must be at least 1");
    if (C.Ops.empty())
      fail(Path + ".ops",
           "must list at least one op type (\"*\" for all op types)");
    for (size_t I = 0; I < C.Ops.size(); ++I)
      if (C.Ops[I].empty())
        fail(Path + ".ops[" + Twine(I) + "]", "empty op type");
    for (size_t I = 0; I < C.ExcludeOps.size(); ++I)
      if (C.ExcludeOps[I].empty())
        fail(Path + ".exclude_ops[" + Twine(I) + "]", "empty op type");
    for (size_t I = 0; I < C.DataTypes.size(); ++I)
      dataTypeName(Path + ".dtypes[" + Twine(I) + "]", C.DataTypes[I],
                   /*AtKey=*/false);
    if (C.Bandwidth)
      positive(Path + ".bandwidth", *C.Bandwidth);
    if (C.Latency)
      nonNegative(Path + ".latency", *C.Latency);
    for (const auto &[Family, Curve] : C.EfficiencyCurves) {
      std::string P = Path + ".efficiency_curves." + Family;
      if (!is_contained(getOpFamilyNames(), StringRef(Family))) {
        fail(P,
             "unknown op family '" + Family + "'; expected one of " +
                 joinNames(getOpFamilyNames()),
             /*AtKey=*/true);
        continue;
      }
      efficiency(P + ".max", Curve.Max);
      nonNegative(P + ".half_time", Curve.HalfTime);
    }
    if (!C.EfficiencyCurves.empty() && Name != "aicore" && Name != "aicpu")
      fail(Path + ".efficiency_curves",
           "only classes aicore and aicpu take efficiency curves", true);

    // What each class needs to be costed at all (DESIGN.md §5).
    if ((Name == "aicore" || Name == "aicpu") && C.Throughput.empty())
      fail(Path + ".throughput", "class '" + Name +
                                     "' needs the peak of at least one "
                                     "data type");
    if ((Name == "hbm_pim" || Name == "ssd") && !C.Bandwidth)
      fail(Path + ".bandwidth", "required for class '" + Name + "'");
    if (Name == "ssd" && !C.Latency)
      fail(Path + ".latency", "required for class 'ssd' (cost per read)");
    // Keys that describe the matrix unit belong to class aicore alone.
    auto matrixUnitOnly = [&](const std::string &KeyPath, StringRef Why) {
      if (Name == "aicore")
        return true;
      fail(KeyPath,
           Why.str() + ": only class 'aicore' may give it, not '" + Name + "'",
           /*AtKey=*/true);
      return false;
    };
    if (C.Overlap) {
      // A share of 1 would leave the overlapped compute no units at all.
      std::string OPath = Path + ".comm_overlap";
      matrixUnitOnly(OPath, "communication overlap takes a share of the "
                            "matrix unit's compute");
      for (auto [Kind, V] : {std::make_pair("tp", C.Overlap->TP),
                             std::make_pair("dp", C.Overlap->DP),
                             std::make_pair("pp", C.Overlap->PP)})
        if (V && !(*V >= 0 && *V < 1))
          fail(OPath + "." + Kind,
               "must be in [0, 1) (the share of compute the collective's "
               "kernels hold), got " +
                   formatNumber(*V));
    }
    if (C.Tiles) {
      std::string TPath = Path + ".matmul_tiles";
      if (matrixUnitOnly(TPath, "GEMM tiling describes the matrix unit") &&
          C.Cores == 0)
        fail(TPath,
             "needs the class's `cores` (the tiles run in waves of "
             "one tile per core)",
             /*AtKey=*/true);
      if (C.Tiles->M < 1)
        fail(TPath + ".m", "must be at least 1");
      if (C.Tiles->N < 1)
        fail(TPath + ".n", "must be at least 1");
      if (C.Tiles->K < 0)
        fail(TPath + ".k", "must be at least 1");
      if (C.Tiles->MinM < 0 || C.Tiles->MinM > C.Tiles->M)
        fail(TPath + ".min_m",
             "must be between 0 (no smaller tile) and the tile's m (" +
                 std::to_string(C.Tiles->M) + "), got " +
                 std::to_string(C.Tiles->MinM));
      if (C.Tiles->StreamK && C.Tiles->K < 1)
        fail(TPath + ".stream_k",
             "needs the tile's step along K (`k`): stream-K splits a tile's "
             "ceil(K / k) iterations between cores");
      if (C.Tiles->Source.empty())
        fail(TPath + ".source", "must say where the tile shape comes from");
    }
    if (C.Roofline) {
      std::string RPath = Path + ".matmul_roofline";
      matrixUnitOnly(RPath, "the GEMM roofline describes the matrix unit");
      if (!(C.Roofline->Norm >= 1))
        fail(RPath + ".norm",
             "must be at least 1 (1: compute and memory time add; larger: "
             "they overlap more), got " +
                 formatNumber(C.Roofline->Norm));
      if (C.Roofline->Source.empty())
        fail(RPath + ".source", "must say where the exponent comes from");
    }
    for (const auto &[KName, K] : C.FusedKernels) {
      std::string KPath = Path + ".fused_kernels." + KName;
      if (!is_contained(KnownFusedKernels, KName)) {
        fail(KPath,
             "unknown fused kernel '" + KName + "'; expected one of " +
                 joinNames(KnownFusedKernels),
             /*AtKey=*/true);
        return;
      }
      if (Name != "aicore") {
        fail(KPath,
             "fused kernels run on the AI core: only class 'aicore' "
             "may list them, not '" +
                 Name + "'",
             /*AtKey=*/true);
        return;
      }
      efficiency(KPath + ".efficiency", K.Efficiency);
      for (size_t I = 0; I < K.DataTypes.size(); ++I)
        dataTypeName(KPath + ".dtypes[" + Twine(I) + "]", K.DataTypes[I],
                     /*AtKey=*/false);
      if (K.BackwardEfficiency)
        efficiency(KPath + ".backward_efficiency", *K.BackwardEfficiency);
    }
    if (C.Fusion)
      checkFusion(Path + ".fusion", Name, *C.Fusion);
  }

  void checkFusion(const std::string &Path, const std::string &Class,
                   const FusionRules &F) {
    if (Class != "aicore") {
      fail(Path,
           "generic fusion is the AI core's compiler's: only class "
           "'aicore' may give it, not '" +
               Class + "'",
           /*AtKey=*/true);
      return;
    }
    for (const auto &[RName, R] : F.Rules) {
      std::string RPath = Path + "." + RName;
      if (!is_contained(KnownFusionRules, RName)) {
        fail(RPath,
             "unknown fusion rule '" + RName + "'; expected one of " +
                 joinNames(KnownFusionRules) + " (or the movement list)",
             /*AtKey=*/true);
        return;
      }
      if (StringRef(R.Source).trim().empty())
        fail(RPath,
             "a fusion rule needs its source: the backend documentation "
             "that says it fuses so",
             /*AtKey=*/true);
      if (RName == "epilogue" && R.Into.empty())
        fail(RPath,
             "the epilogue rule needs 'into': the op types it fuses into "
             "(e.g. [MatMul, Gemm])",
             /*AtKey=*/true);
      if (RName != "epilogue" && !R.Into.empty())
        fail(RPath, "only the epilogue rule takes 'into'", /*AtKey=*/true);
    }
  }

  void checkMemory(const std::string &Path, const std::string &Name,
                   const MemoryLevel &L) {
    if (!is_contained(KnownMemories, Name)) {
      fail(Path,
           "unknown memory level '" + Name + "'; expected one of " +
               joinNames(KnownMemories),
           /*AtKey=*/true);
      return;
    }
    positive(Path + ".capacity", L.Capacity);
    positive(Path + ".bandwidth", L.Bandwidth);
    if (L.Latency)
      nonNegative(Path + ".latency", *L.Latency);
    nonNegative(Path + ".reserved", L.Reserved);
    if (L.UpdateBandwidth) {
      if (Name != "host")
        fail(Path + ".update_bandwidth",
             "only the 'host' level has a CPU that runs the optimizer");
      else
        positive(Path + ".update_bandwidth", *L.UpdateBandwidth);
    }
    if (!failed() && !(L.Reserved < L.Capacity))
      fail(Path + ".reserved", formatBytes(L.Reserved) +
                                   " leaves nothing of the capacity " +
                                   formatBytes(L.Capacity));
  }

  void checkDevice(const DeviceDescription &D) {
    if (D.Name.empty())
      fail("device.name", "must not be empty");
    for (const auto &[Name, C] : D.Classes)
      checkClass("device.classes." + Name, Name, C);
    if (!D.Classes.count("aicore") && !D.Classes.count("aicpu"))
      fail("device.classes", "must define 'aicore' or 'aicpu' (somewhere to "
                             "run ops that no other class supports)");

    for (const auto &[Name, L] : D.Memory)
      checkMemory("device.memory." + Name, Name, L);
    if (!D.Memory.count("hbm"))
      fail("device.memory", "missing level 'hbm'");
    if (D.Classes.count("ssd") && !D.Memory.count("ssd"))
      fail("device.memory", "missing level 'ssd', which gives the capacity "
                            "of device class 'ssd'");

    std::vector<std::string> ClassNames;
    for (const auto &Entry : D.Classes)
      ClassNames.push_back(Entry.first);
    for (size_t I = 0; I < D.Transfers.size(); ++I) {
      const TransferLink &T = D.Transfers[I];
      std::string Path = ("device.transfers[" + Twine(I) + "]").str();
      for (const auto &[Key, End] :
           {std::make_pair("from", &T.From), std::make_pair("to", &T.To)})
        if (!D.Classes.count(*End))
          fail(Path + "." + Key, "unknown device class '" + *End +
                                     "'; expected one defined in "
                                     "device.classes: " +
                                     joinNames(ClassNames));
      if (T.From == T.To)
        fail(Path, "links class '" + T.From + "' to itself");
      for (size_t J = 0; J < I; ++J)
        if (D.Transfers[J].From == T.From && D.Transfers[J].To == T.To)
          fail(Path, "duplicate link " + T.From + " -> " + T.To +
                         " (also device.transfers[" + Twine(J) + "])");
      positive(Path + ".bandwidth", T.Bandwidth);
      nonNegative(Path + ".latency", T.Latency);
    }
  }

  void checkReliability(const Reliability &R) {
    auto NonNegative = [&](const char *Key, double V) {
      if (!(V >= 0) || !std::isfinite(V))
        fail(Twine("reliability.") + Key,
             "must be non-negative and finite, got " + formatv("{0}", V).str());
    };
    NonNegative("device_fit", R.DeviceFIT);
    NonNegative("optical_module_fit", R.OpticalModuleFIT);
    NonNegative("optical_modules_per_device", R.OpticalModulesPerDevice);
    NonNegative("switch_port_fit", R.SwitchPortFIT);
    NonNegative("ports_per_device", R.PortsPerDevice);
    positive("reliability.checkpoint_bandwidth", R.CheckpointBandwidth);
    nonNegative("reliability.restart_time", R.RestartTime);
  }

  void checkTopology(const HardwareModel &M) {
    if (M.Topology.empty()) {
      fail("topology", "must list at least one level");
      return;
    }
    uint64_t Product = 1;
    bool TooMany = false;
    for (size_t I = 0; I < M.Topology.size(); ++I) {
      const TopologyLevel &L = M.Topology[I];
      std::string Path = ("topology[" + Twine(I) + "]").str();
      if (L.Name.empty())
        fail(Path + ".name", "must not be empty");
      for (size_t J = 0; J < I; ++J)
        if (M.Topology[J].Name == L.Name)
          fail(Path + ".name", "duplicate level name '" + L.Name +
                                   "' (also topology[" + Twine(J) + "])");
      if (L.Size < 1)
        fail(Path + ".size", "must be at least 1");
      else if (!TooMany && Product > MaxDevices / L.Size) {
        TooMany = true;
        fail(Path + ".size", "the level sizes multiply to more than " +
                                 Twine(MaxDevices) +
                                 " devices; more is rejected as a likely typo");
      } else {
        Product *= L.Size;
      }
      positive(Path + ".bandwidth", L.Bandwidth);
      nonNegative(Path + ".latency", L.Latency);
      efficiency(Path + ".efficiency", L.Efficiency);
      nonNegative(Path + ".half_bandwidth_size", L.HalfBandwidthSize);
      if (!(L.Oversubscription >= 1) || !std::isfinite(L.Oversubscription))
        fail(Path + ".oversubscription",
             "must be at least 1 (1 = non-blocking), got " +
                 formatNumber(L.Oversubscription));
    }
    if (!M.Devices || failed())
      return;
    if (*M.Devices < 1 || *M.Devices > MaxDevices) {
      fail("devices", "must be between 1 and " + Twine(MaxDevices) + ", got " +
                          Twine(*M.Devices));
      return;
    }
    if (*M.Devices != Product) {
      std::string Factors;
      for (const TopologyLevel &L : M.Topology) {
        if (!Factors.empty())
          Factors += " x ";
        Factors += L.Name + " " + std::to_string(L.Size);
      }
      fail("devices", Twine(*M.Devices) +
                          " does not match the topology, whose level sizes "
                          "multiply to " +
                          Twine(Product) + " (" + Factors + ")");
    }
  }
};

} // namespace

namespace hardware_detail {

Optional<Violation> findViolation(const HardwareModel &M) {
  Checker C;
  if (M.Name.empty())
    C.fail("name", "must not be empty");
  C.checkDevice(M.Device);
  C.checkTopology(M);
  if (M.Reliab)
    C.checkReliability(*M.Reliab);
  return C.First;
}

} // namespace hardware_detail

Error HardwareModel::validate() const {
  if (Optional<Violation> V = findViolation(*this))
    return createStringError(inconvertibleErrorCode(),
                             V->Path + ": " + V->Message);
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

static void printRates(raw_ostream &OS, StringRef Label,
                       const std::map<std::string, FlopsPerSecond> &Rates) {
  if (Rates.empty())
    return;
  OS << "    " << Label << ":";
  ListSeparator LS(",");
  for (const auto &[DType, Rate] : Rates)
    OS << LS << ' ' << DType << ' ' << formatFlopRate(Rate);
  OS << '\n';
}

static void printList(raw_ostream &OS, StringRef Label,
                      const std::vector<std::string> &Items) {
  if (Items.empty())
    return;
  OS << "    " << Label << ": " << join(Items, ", ") << '\n';
}

void HardwareModel::print(raw_ostream &OS) const {
  OS << "hardware " << Name;
  if (!Description.empty())
    OS << ": " << Description;
  OS << '\n';
  OS << "device " << Device.Name << '\n';
  for (const auto &[ClassName, C] : Device.Classes) {
    OS << "  class " << ClassName << ": launch "
       << formatDuration(C.LaunchOverhead) << ", efficiency "
       << format("%.2f", C.Efficiency);
    if (C.Alignment > 1)
      OS << ", alignment " << C.Alignment;
    if (C.Cores)
      OS << ", " << C.Cores << " cores";
    if (C.Bandwidth)
      OS << ", bandwidth " << formatBandwidth(*C.Bandwidth);
    if (C.Latency)
      OS << ", latency " << formatDuration(*C.Latency);
    OS << '\n';
    printRates(OS, "throughput", C.Throughput);
    printRates(OS, "vector throughput", C.VectorThroughput);
    for (const auto &[Family, Curve] : C.EfficiencyCurves) {
      OS << "    efficiency curve " << Family << ": max "
         << format("%.3f", Curve.Max) << ", half time "
         << formatDuration(Curve.HalfTime);
      if (!Curve.Source.empty())
        OS << " (" << Curve.Source << ")";
      OS << '\n';
    }
    printList(OS, "ops", C.Ops);
    printList(OS, "exclude ops", C.ExcludeOps);
    printList(OS, "dtypes", C.DataTypes);
    if (C.Overlap) {
      OS << "    comm overlap share:";
      for (auto [Kind, V] : {std::make_pair("tp", C.Overlap->TP),
                             std::make_pair("dp", C.Overlap->DP),
                             std::make_pair("pp", C.Overlap->PP)})
        OS << " " << Kind << " " << (V ? formatNumber(*V) : std::string("-"));
      if (!C.Overlap->Source.empty())
        OS << " (" << C.Overlap->Source << ")";
      OS << '\n';
    }
    if (C.Tiles)
      OS << "    matmul tiles " << C.Tiles->M << " x " << C.Tiles->N
         << (C.Tiles->SerialStore ? ", serial store" : "")
         << (C.Tiles->StreamK
                 ? ", stream-K (k " + std::to_string(C.Tiles->K) + ")"
                 : "")
         << (C.Tiles->MinM > 0 ? ", min m " + std::to_string(C.Tiles->MinM)
                               : "")
         << " (" << C.Tiles->Source << ")\n";
    if (C.Roofline)
      OS << "    matmul roofline norm " << formatNumber(C.Roofline->Norm)
         << " (" << C.Roofline->Source << ")\n";
    if (C.Fusion) {
      for (const auto &[RName, R] : C.Fusion->Rules) {
        OS << "    fusion " << RName;
        if (!R.Into.empty())
          OS << " into " << join(R.Into, ", ");
        OS << " (" << R.Source << ")\n";
      }
      if (!C.Fusion->Movement.empty())
        OS << "    fusion movement ops: " << join(C.Fusion->Movement, ", ")
           << '\n';
    }
    for (const auto &[KName, K] : C.FusedKernels) {
      OS << "    fused kernel " << KName << ": efficiency "
         << format("%.2f", K.Efficiency) << ", backward "
         << format("%.2f", K.getBackwardEfficiency());
      if (!K.Masked)
        OS << ", no mask";
      if (!K.GQA)
        OS << ", no gqa";
      if (!K.DataTypes.empty())
        OS << ", dtypes " << join(K.DataTypes, ", ");
      OS << '\n';
    }
  }
  for (const auto &[LevelName, L] : Device.Memory) {
    OS << "  memory " << LevelName << ": capacity " << formatBytes(L.Capacity);
    if (L.Reserved.value() != 0)
      OS << " (" << formatBytes(L.Reserved) << " reserved)";
    OS << ", bandwidth " << formatBandwidth(L.Bandwidth);
    if (L.Latency)
      OS << ", latency " << formatDuration(*L.Latency);
    if (L.UpdateBandwidth)
      OS << ", optimizer " << formatBandwidth(*L.UpdateBandwidth);
    OS << '\n';
  }
  for (const TransferLink &T : Device.Transfers)
    OS << "  transfer " << T.From << " -> " << T.To << ": bandwidth "
       << formatBandwidth(T.Bandwidth) << ", latency "
       << formatDuration(T.Latency) << '\n';
  OS << "topology (innermost first): " << getNumDevices() << " devices\n";
  for (size_t I = 0; I < Topology.size(); ++I) {
    const TopologyLevel &L = Topology[I];
    OS << "  level " << I << ' ' << L.Name << ": size " << L.Size
       << ", bandwidth " << formatBandwidth(L.Bandwidth) << ", latency "
       << formatDuration(L.Latency) << ", efficiency "
       << format("%.2f", L.Efficiency) << ", oversubscription "
       << format("%.2f", L.Oversubscription) << ", effective "
       << formatBandwidth(L.getEffectiveBandwidth()) << ", half bandwidth at "
       << formatBytes(L.HalfBandwidthSize) << (L.FullMesh ? ", full mesh" : "")
       << (L.AllowTP ? ", tp allowed" : "") << '\n';
  }
  if (Reliab) {
    const Reliability &R = *Reliab;
    OS << "reliability: " << format("%g", R.getFITPerDevice())
       << " FIT per device (device " << format("%g", R.DeviceFIT);
    if (R.OpticalModulesPerDevice > 0)
      OS << ", " << format("%g", R.OpticalModulesPerDevice)
         << " optical modules x " << format("%g", R.OpticalModuleFIT);
    if (R.PortsPerDevice > 0)
      OS << ", " << format("%g", R.PortsPerDevice) << " switch ports x "
         << format("%g", R.SwitchPortFIT);
    OS << "), checkpoint " << formatBandwidth(R.CheckpointBandwidth)
       << " per device, restart " << formatDuration(R.RestartTime) << '\n';
    if (!R.Source.empty())
      OS << "  source: " << R.Source << '\n';
  }
}

} // namespace loom
