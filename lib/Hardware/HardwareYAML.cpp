//===- HardwareYAML.cpp - Reading hardware descriptions with YamlIO -------===//
//
// YamlIO does the reading and reports syntax errors, unknown keys and bad
// unit strings with their position. The loader adds missing keys (after the
// unknown ones, see mapRequiredLate) and duplicate keys (which LLVM 14's
// YamlIO accepts silently). Diagnostics are captured instead of printed, so
// the caller gets one llvm::Error reading "<file>:<line>:<col>: error: ...".
//
// The cross-field checks live in HardwareModel::validate(), not in YamlIO's
// validate() hooks: a hook can only point at the start of the mapping it
// validates, while a violation's key path ("topology[1].bandwidth") can be
// looked up in the parsed YAML tree to point at the offending value itself.
//
//===----------------------------------------------------------------------===//

#include "loom/Hardware/HardwareModel.h"

#include "Validation.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"
#include "llvm/Support/YAMLTraits.h"
#include "llvm/Support/raw_ostream.h"

#include <charconv>

using namespace llvm;
using namespace loom;
using namespace loom::hardware_detail;

//===----------------------------------------------------------------------===//
// YamlIO traits
//===----------------------------------------------------------------------===//

namespace {

/// Holds the message a ScalarTraits::input returns: YamlIO takes a StringRef
/// and copies it at once, so it only has to outlive the call.
std::string &scalarErrorStorage() {
  static thread_local std::string Storage;
  return Storage;
}

template <typename T> StringRef parseScalar(Expected<T> Parsed, T &Value) {
  if (!Parsed) {
    scalarErrorStorage() = toString(Parsed.takeError());
    return scalarErrorStorage();
  }
  Value = *Parsed;
  return StringRef();
}

/// What the loader hands YamlIO as its context (these traits are private to
/// this file, so no other context type reaches them).
struct LoadContext {
  /// The first required key found missing, and the mapping that lacks it.
  std::string MissingKey;
  const yaml::Node *MissingIn = nullptr;
};

/// Like IO::mapRequired, but a missing key is only noted in the LoadContext
/// and reported once YamlIO has finished. YamlIO reports a missing key at
/// once and then skips its unknown-key check, so a misspelt required key
/// ("bandwdith") would come out as "missing required key 'bandwidth'"
/// instead of as the typo it is.
template <typename T>
void mapRequiredLate(yaml::IO &IO, const char *Key, T &Value) {
  auto *Context = static_cast<LoadContext *>(IO.getContext());
  if (IO.outputting() || !Context) {
    IO.mapRequired(Key, Value);
    return;
  }
  Optional<T> Read;
  IO.mapOptional(Key, Read);
  if (Read) {
    Value = std::move(*Read);
  } else if (Context->MissingKey.empty()) {
    Context->MissingKey = Key;
    Context->MissingIn = static_cast<yaml::Input &>(IO).getCurrentNode();
  }
}

/// Writes \p Value in base units, shortest form that reads back exactly.
void printExact(double Value, StringRef Unit, raw_ostream &OS) {
  char Buffer[64];
  auto Result = std::to_chars(Buffer, Buffer + sizeof(Buffer), Value);
  OS << StringRef(Buffer, Result.ptr - Buffer) << Unit;
}

} // namespace

namespace llvm {
namespace yaml {

template <> struct ScalarTraits<Bytes> {
  static void output(const Bytes &V, void *, raw_ostream &OS) {
    printExact(V.value(), "B", OS);
  }
  static StringRef input(StringRef S, void *, Bytes &V) {
    return parseScalar(parseBytes(S), V);
  }
  static QuotingType mustQuote(StringRef) { return QuotingType::None; }
};

template <> struct ScalarTraits<BytesPerSecond> {
  static void output(const BytesPerSecond &V, void *, raw_ostream &OS) {
    printExact(V.value(), "B/s", OS);
  }
  static StringRef input(StringRef S, void *, BytesPerSecond &V) {
    return parseScalar(parseBandwidth(S), V);
  }
  static QuotingType mustQuote(StringRef) { return QuotingType::None; }
};

template <> struct ScalarTraits<Seconds> {
  static void output(const Seconds &V, void *, raw_ostream &OS) {
    printExact(V.value(), "s", OS);
  }
  static StringRef input(StringRef S, void *, Seconds &V) {
    return parseScalar(parseDuration(S), V);
  }
  static QuotingType mustQuote(StringRef) { return QuotingType::None; }
};

template <> struct ScalarTraits<FlopsPerSecond> {
  static void output(const FlopsPerSecond &V, void *, raw_ostream &OS) {
    printExact(V.value(), "FLOPS", OS);
  }
  static StringRef input(StringRef S, void *, FlopsPerSecond &V) {
    return parseScalar(parseFlopRate(S), V);
  }
  static QuotingType mustQuote(StringRef) { return QuotingType::None; }
};

/// Peak rates keyed by data type; keys are normalized (fp16 -> f16) on
/// input. Unknown names are kept as written for validate() to report with
/// their position.
template <> struct CustomMappingTraits<std::map<std::string, FlopsPerSecond>> {
  static void inputOne(IO &IO, StringRef Key,
                       std::map<std::string, FlopsPerSecond> &Rates) {
    StringRef Canonical = canonicalDataTypeName(Key);
    std::string Name = Canonical.empty() ? Key.str() : Canonical.str();
    if (Rates.count(Name)) {
      IO.setError("duplicate data type '" + Key + "': another key names '" +
                  Name + "' too");
      return;
    }
    IO.mapRequired(Key.str().c_str(), Rates[Name]);
  }
  static void output(IO &IO, std::map<std::string, FlopsPerSecond> &Rates) {
    for (auto &Entry : Rates)
      IO.mapRequired(Entry.first.c_str(), Entry.second);
  }
};

template <> struct MappingTraits<EfficiencyCurve> {
  static void mapping(IO &IO, EfficiencyCurve &C) {
    mapRequiredLate(IO, "max", C.Max);
    mapRequiredLate(IO, "half_time", C.HalfTime);
    IO.mapOptional("source", C.Source);
  }
};

/// efficiency_curves: the map key is the op family (validate() checks it).
template <> struct CustomMappingTraits<std::map<std::string, EfficiencyCurve>> {
  static void inputOne(IO &IO, StringRef Key,
                       std::map<std::string, EfficiencyCurve> &Curves) {
    IO.mapRequired(Key.str().c_str(), Curves[Key.str()]);
  }
  static void output(IO &IO, std::map<std::string, EfficiencyCurve> &Curves) {
    for (auto &Entry : Curves)
      IO.mapRequired(Entry.first.c_str(), Entry.second);
  }
};

template <> struct MappingTraits<FusedKernel> {
  static void mapping(IO &IO, FusedKernel &K) {
    mapRequiredLate(IO, "efficiency", K.Efficiency);
    IO.mapOptional("backward_efficiency", K.BackwardEfficiency);
    IO.mapOptional("masked", K.Masked, true);
    IO.mapOptional("gqa", K.GQA, true);
    IO.mapOptional("dtypes", K.DataTypes);
    if (!IO.outputting())
      for (std::string &DType : K.DataTypes) {
        StringRef Canonical = canonicalDataTypeName(DType);
        if (!Canonical.empty())
          DType = Canonical.str();
      }
  }
};

template <> struct MappingTraits<FusionRule> {
  static void mapping(IO &IO, FusionRule &R) {
    IO.mapOptional("source", R.Source);
    IO.mapOptional("into", R.Into);
  }
};

/// fusion: the rule names are map keys, beside the movement list.
template <> struct CustomMappingTraits<FusionRules> {
  static void inputOne(IO &IO, StringRef Key, FusionRules &F) {
    if (Key == "movement") {
      IO.mapRequired("movement", F.Movement);
      return;
    }
    FusionRule &R = F.Rules[Key.str()];
    R.Name = Key.str();
    IO.mapRequired(Key.str().c_str(), R);
  }
  static void output(IO &IO, FusionRules &F) {
    for (auto &Entry : F.Rules)
      IO.mapRequired(Entry.first.c_str(), Entry.second);
    if (!F.Movement.empty())
      IO.mapRequired("movement", F.Movement);
  }
};

template <> struct MappingTraits<CommOverlap> {
  static void mapping(IO &IO, CommOverlap &O) {
    IO.mapOptional("tp", O.TP);
    IO.mapOptional("dp", O.DP);
    IO.mapOptional("pp", O.PP);
    IO.mapOptional("source", O.Source);
  }
};

template <> struct MappingTraits<MatmulTiles> {
  static void mapping(IO &IO, MatmulTiles &T) {
    mapRequiredLate(IO, "m", T.M);
    mapRequiredLate(IO, "n", T.N);
    IO.mapOptional("serial_store", T.SerialStore, false);
    IO.mapOptional("k", T.K, int64_t(0));
    IO.mapOptional("stream_k", T.StreamK, false);
    IO.mapOptional("min_m", T.MinM, int64_t(0));
    mapRequiredLate(IO, "source", T.Source);
  }
};

template <> struct MappingTraits<MatmulRoofline> {
  static void mapping(IO &IO, MatmulRoofline &R) {
    mapRequiredLate(IO, "norm", R.Norm);
    mapRequiredLate(IO, "source", R.Source);
  }
};

/// fused_kernels: the map key is the kernel name.
template <> struct CustomMappingTraits<std::map<std::string, FusedKernel>> {
  static void inputOne(IO &IO, StringRef Key,
                       std::map<std::string, FusedKernel> &Kernels) {
    FusedKernel &K = Kernels[Key.str()];
    K.Name = Key.str();
    IO.mapRequired(Key.str().c_str(), K);
  }
  static void output(IO &IO, std::map<std::string, FusedKernel> &Kernels) {
    for (auto &Entry : Kernels)
      IO.mapRequired(Entry.first.c_str(), Entry.second);
  }
};

template <> struct MappingTraits<DeviceClass> {
  static void mapping(IO &IO, DeviceClass &C) {
    IO.mapOptional("throughput", C.Throughput);
    IO.mapOptional("vector_throughput", C.VectorThroughput);
    mapRequiredLate(IO, "launch_overhead", C.LaunchOverhead);
    IO.mapOptional("efficiency", C.Efficiency, 1.0);
    IO.mapOptional("alignment", C.Alignment, 1u);
    IO.mapOptional("cores", C.Cores, 0u);
    mapRequiredLate(IO, "ops", C.Ops);
    IO.mapOptional("exclude_ops", C.ExcludeOps);
    IO.mapOptional("dtypes", C.DataTypes);
    IO.mapOptional("bandwidth", C.Bandwidth);
    IO.mapOptional("latency", C.Latency);
    IO.mapOptional("efficiency_curves", C.EfficiencyCurves);
    IO.mapOptional("fused_kernels", C.FusedKernels);
    IO.mapOptional("fusion", C.Fusion);
    IO.mapOptional("comm_overlap", C.Overlap);
    IO.mapOptional("matmul_tiles", C.Tiles);
    IO.mapOptional("matmul_roofline", C.Roofline);
    if (!IO.outputting())
      for (std::string &DType : C.DataTypes) {
        StringRef Canonical = canonicalDataTypeName(DType);
        if (!Canonical.empty())
          DType = Canonical.str();
      }
  }
};

/// device.classes: the map key is the class name.
template <> struct CustomMappingTraits<std::map<std::string, DeviceClass>> {
  static void inputOne(IO &IO, StringRef Key,
                       std::map<std::string, DeviceClass> &Classes) {
    DeviceClass &C = Classes[Key.str()];
    C.Name = Key.str();
    IO.mapRequired(Key.str().c_str(), C);
  }
  static void output(IO &IO, std::map<std::string, DeviceClass> &Classes) {
    for (auto &Entry : Classes)
      IO.mapRequired(Entry.first.c_str(), Entry.second);
  }
};

template <> struct MappingTraits<MemoryLevel> {
  static void mapping(IO &IO, MemoryLevel &L) {
    mapRequiredLate(IO, "capacity", L.Capacity);
    mapRequiredLate(IO, "bandwidth", L.Bandwidth);
    IO.mapOptional("latency", L.Latency);
    IO.mapOptional("reserved", L.Reserved, Bytes(0));
    IO.mapOptional("update_bandwidth", L.UpdateBandwidth);
  }
};

/// device.memory: the map key is the level name.
template <> struct CustomMappingTraits<std::map<std::string, MemoryLevel>> {
  static void inputOne(IO &IO, StringRef Key,
                       std::map<std::string, MemoryLevel> &Levels) {
    MemoryLevel &L = Levels[Key.str()];
    L.Name = Key.str();
    IO.mapRequired(Key.str().c_str(), L);
  }
  static void output(IO &IO, std::map<std::string, MemoryLevel> &Levels) {
    for (auto &Entry : Levels)
      IO.mapRequired(Entry.first.c_str(), Entry.second);
  }
};

template <> struct MappingTraits<TransferLink> {
  static void mapping(IO &IO, TransferLink &T) {
    mapRequiredLate(IO, "from", T.From);
    mapRequiredLate(IO, "to", T.To);
    mapRequiredLate(IO, "bandwidth", T.Bandwidth);
    mapRequiredLate(IO, "latency", T.Latency);
  }
};

template <> struct MappingTraits<DeviceDescription> {
  static void mapping(IO &IO, DeviceDescription &D) {
    mapRequiredLate(IO, "name", D.Name);
    mapRequiredLate(IO, "classes", D.Classes);
    mapRequiredLate(IO, "memory", D.Memory);
    IO.mapOptional("transfers", D.Transfers);
  }
};

template <> struct MappingTraits<TopologyLevel> {
  static void mapping(IO &IO, TopologyLevel &L) {
    mapRequiredLate(IO, "name", L.Name);
    mapRequiredLate(IO, "size", L.Size);
    mapRequiredLate(IO, "bandwidth", L.Bandwidth);
    mapRequiredLate(IO, "latency", L.Latency);
    IO.mapOptional("efficiency", L.Efficiency, 1.0);
    IO.mapOptional("oversubscription", L.Oversubscription, 1.0);
    IO.mapOptional("half_bandwidth_size", L.HalfBandwidthSize,
                   Bytes(TopologyLevel::DefaultHalfBandwidthBytes));
    IO.mapOptional("full_mesh", L.FullMesh, false);
    if (IO.outputting()) {
      IO.mapRequired("allow_tp", L.AllowTP);
    } else {
      // The default depends on the level's position; the sequence traits
      // below preset it before the level is read.
      bool Default = L.AllowTP;
      IO.mapOptional("allow_tp", L.AllowTP, Default);
    }
  }
};

/// topology: a sequence whose new elements get the positional default of
/// allow_tp (true only for the innermost level).
template <> struct SequenceTraits<std::vector<TopologyLevel>> {
  static size_t size(IO &, std::vector<TopologyLevel> &Levels) {
    return Levels.size();
  }
  static TopologyLevel &element(IO &, std::vector<TopologyLevel> &Levels,
                                size_t Index) {
    if (Index >= Levels.size()) {
      Levels.resize(Index + 1);
      Levels[Index].AllowTP = Index == 0;
    }
    return Levels[Index];
  }
};

template <> struct MappingTraits<Reliability> {
  static void mapping(IO &IO, Reliability &R) {
    mapRequiredLate(IO, "device_fit", R.DeviceFIT);
    IO.mapOptional("optical_module_fit", R.OpticalModuleFIT, 0.0);
    IO.mapOptional("optical_modules_per_device", R.OpticalModulesPerDevice,
                   0.0);
    IO.mapOptional("switch_port_fit", R.SwitchPortFIT, 0.0);
    IO.mapOptional("ports_per_device", R.PortsPerDevice, 0.0);
    mapRequiredLate(IO, "checkpoint_bandwidth", R.CheckpointBandwidth);
    IO.mapOptional("restart_time", R.RestartTime, Seconds(0));
    IO.mapOptional("source", R.Source);
  }
};

template <> struct MappingTraits<HardwareModel> {
  static void mapping(IO &IO, HardwareModel &M) {
    mapRequiredLate(IO, "name", M.Name);
    IO.mapOptional("description", M.Description);
    mapRequiredLate(IO, "device", M.Device);
    mapRequiredLate(IO, "topology", M.Topology);
    IO.mapOptional("devices", M.Devices);
    IO.mapOptional("reliability", M.Reliab);
  }
};

} // namespace yaml
} // namespace llvm

LLVM_YAML_IS_SEQUENCE_VECTOR(loom::TransferLink)

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

namespace {

/// "<file>:<line>:<col>: error: <message>", the one-line form of
/// SMDiagnostic::print without the source excerpt.
Error makeDiagnosticError(const SMDiagnostic &D) {
  std::string Text;
  raw_string_ostream OS(Text);
  OS << D.getFilename();
  if (D.getLineNo() > 0) {
    OS << ':' << D.getLineNo();
    if (D.getColumnNo() >= 0)
      OS << ':' << D.getColumnNo() + 1;
  }
  OS << ": error: " << D.getMessage();
  return createStringError(inconvertibleErrorCode(), OS.str());
}

Error makeFileError(StringRef BufferName, const Twine &Message) {
  return createStringError(inconvertibleErrorCode(),
                           BufferName + ": error: " + Message);
}

/// Keeps YamlIO's first error; YamlIO may go on and report consequences.
void captureDiagnostic(const SMDiagnostic &D, void *Context) {
  auto *First = static_cast<Optional<SMDiagnostic> *>(Context);
  if (D.getKind() == SourceMgr::DK_Error && !*First)
    *First = D;
}

/// The root of the first non-empty document, the one YamlIO reads; the
/// Document stays owned by \p Stream.
yaml::Node *getFirstRoot(yaml::Stream &Stream) {
  for (yaml::document_iterator Doc = Stream.begin(); Doc != Stream.end();
       ++Doc) {
    yaml::Node *Root = Doc->getRoot();
    if (!Root || !isa<yaml::NullNode>(Root))
      return Root;
  }
  return nullptr;
}

/// One step of a violation's key path: a map key or a sequence index.
struct PathStep {
  std::string Key;
  Optional<size_t> Index;
};

std::vector<PathStep> splitPath(StringRef Path) {
  std::vector<PathStep> Steps;
  SmallVector<StringRef, 8> Parts;
  Path.split(Parts, '.');
  for (StringRef Part : Parts) {
    size_t Bracket = Part.find('[');
    Steps.push_back({Part.substr(0, Bracket).str(), None});
    while (Bracket != StringRef::npos) {
      size_t Close = Part.find(']', Bracket);
      size_t Index = 0;
      if (Close == StringRef::npos ||
          Part.slice(Bracket + 1, Close).getAsInteger(10, Index))
        break;
      Steps.push_back({"", Index});
      Bracket = Part.find('[', Close);
    }
  }
  return Steps;
}

bool keyMatches(yaml::Node *KeyNode, StringRef Wanted) {
  auto *Scalar = dyn_cast_or_null<yaml::ScalarNode>(KeyNode);
  if (!Scalar)
    return false;
  SmallString<32> Storage;
  StringRef Key = Scalar->getValue(Storage);
  // Data type keys are stored normalized: "f16" was written "fp16".
  return Key == Wanted || canonicalDataTypeName(Key) == Wanted;
}

/// Where \p Path points in the first document of \p Stream: the scalar
/// value it names, or the key of a collection (with \p AtKey, always the
/// key). If the path ends at a missing key, the key of the deepest mapping
/// on the way, the one that lacks it.
SMLoc locatePath(yaml::Stream &Stream, StringRef Path, bool AtKey) {
  yaml::Node *Current = getFirstRoot(Stream);
  if (!Current)
    return SMLoc();
  yaml::Node *CurrentKey = nullptr;
  for (const PathStep &Step : splitPath(Path)) {
    yaml::Node *Next = nullptr, *NextKey = nullptr;
    if (Step.Index) {
      if (auto *Seq = dyn_cast<yaml::SequenceNode>(Current)) {
        size_t I = 0;
        for (yaml::Node &Element : *Seq)
          if (I++ == *Step.Index) {
            Next = &Element;
            break;
          }
      }
    } else if (auto *Map = dyn_cast<yaml::MappingNode>(Current)) {
      for (yaml::KeyValueNode &KV : *Map)
        if (keyMatches(KV.getKey(), Step.Key)) {
          NextKey = KV.getKey();
          Next = KV.getValue();
          break;
        }
    }
    if (!Next)
      break;
    Current = Next;
    CurrentKey = NextKey;
  }
  // Point at the key rather than at a collection, whose position is that
  // of its first entry (or just past "[" if empty), or at an empty value.
  if ((AtKey || !isa<yaml::ScalarNode>(Current)) && CurrentKey)
    return CurrentKey->getSourceRange().Start;
  return Current->getSourceRange().Start;
}

/// The position of the \p N-th (0-based) non-empty document of \p Stream,
/// if any; empty documents are skipped as YamlIO skips them.
SMLoc locateDocument(yaml::Stream &Stream, unsigned N) {
  unsigned I = 0;
  for (yaml::document_iterator Doc = Stream.begin(); Doc != Stream.end();
       ++Doc) {
    yaml::Node *Root = Doc->getRoot();
    if (!Root)
      return SMLoc();
    if (isa<yaml::NullNode>(Root))
      continue;
    if (I++ == N)
      return Root->getSourceRange().Start;
  }
  return SMLoc();
}

/// The first key that repeats a key of the same mapping, with \p First set
/// to the earlier one. YamlIO in LLVM 14 silently keeps the last of
/// duplicate keys; in a hardware file a duplicate is always a mistake.
yaml::Node *findDuplicateKey(yaml::Node *N, yaml::Node *&First) {
  if (auto *Map = dyn_cast_or_null<yaml::MappingNode>(N)) {
    StringMap<yaml::Node *> Seen;
    for (yaml::KeyValueNode &KV : *Map) {
      if (auto *Key = dyn_cast_or_null<yaml::ScalarNode>(KV.getKey())) {
        SmallString<32> Storage;
        auto Inserted = Seen.try_emplace(Key->getValue(Storage), Key);
        if (!Inserted.second) {
          First = Inserted.first->second;
          return Key;
        }
      }
      if (yaml::Node *Dup = findDuplicateKey(KV.getValue(), First))
        return Dup;
    }
  } else if (auto *Seq = dyn_cast_or_null<yaml::SequenceNode>(N)) {
    for (yaml::Node &Element : *Seq)
      if (yaml::Node *Dup = findDuplicateKey(&Element, First))
        return Dup;
  }
  return nullptr;
}

/// Hardware descriptions are a few levels deep; YamlIO builds its node tree
/// recursively (yaml::Input::createHNodes), so text nested thousands deep
/// ("[[[[...", "- - - - ...") would overflow the stack before any check.
constexpr unsigned MaxYAMLNesting = 64;

/// The first node of \p N's subtree, \p N at \p Depth, that lies deeper
/// than MaxYAMLNesting; null if none. The walk stops at the limit, so its
/// own recursion is bounded, and it consumes each collection in order as
/// the lazy parser requires.
yaml::Node *findTooDeep(yaml::Node *N, unsigned Depth) {
  if (!N)
    return nullptr;
  if (Depth > MaxYAMLNesting)
    return N;
  if (auto *Map = dyn_cast<yaml::MappingNode>(N)) {
    for (yaml::KeyValueNode &KV : *Map) {
      if (yaml::Node *Deep = findTooDeep(KV.getKey(), Depth + 1))
        return Deep;
      if (yaml::Node *Deep = findTooDeep(KV.getValue(), Depth + 1))
        return Deep;
    }
  } else if (auto *Seq = dyn_cast<yaml::SequenceNode>(N)) {
    for (yaml::Node &Element : *Seq)
      if (yaml::Node *Deep = findTooDeep(&Element, Depth + 1))
        return Deep;
  }
  return nullptr;
}

/// LLVM 14's parser also recurses once per token of a run: per "..."
/// document end marker in a row (yaml::Document::skip) and per "," in a row
/// inside a flow collection (MappingNode/SequenceNode::increment). About
/// 100,000 of either exhaust an 8 MiB stack, 20,000 under ASan. A hardware
/// description has one document and no empty flow entries.
constexpr unsigned MaxTokensInARow = 1024;

/// The first "..." marker or "," that may be the (MaxTokensInARow + 1)-th
/// of a run, or npos; \p What names it. Markers are counted over the whole
/// text. A run of commas is broken by any character other than a blank, a
/// line break or a comment; everything from a "#" to the end of its line is
/// taken for a comment, commas in it counted. Both overcount what the parser
/// sees as a run, never undercount.
size_t findLongRun(StringRef Text, StringRef &What) {
  unsigned Markers = 0, Commas = 0;
  bool InComment = false;
  for (size_t I = 0; I < Text.size(); ++I) {
    if ((I == 0 || Text[I - 1] == '\n') && Text.substr(I).startswith("...") &&
        (I + 3 == Text.size() || StringRef(" \t\r\n").contains(Text[I + 3])) &&
        ++Markers > MaxTokensInARow) {
      What = "document end markers ('...')";
      return I;
    }
    char C = Text[I];
    if (C == '\n') {
      InComment = false;
    } else if (C == ',') {
      if (++Commas > MaxTokensInARow) {
        What = "',' in a row";
        return I;
      }
    } else if (C == '#') {
      InComment = true;
    } else if (!InComment && C != ' ' && C != '\t' && C != '\r') {
      Commas = 0;
    }
  }
  return StringRef::npos;
}

/// Refuses \p Buffer if any of its documents nests deeper than
/// MaxYAMLNesting or it holds a run longer than MaxTokensInARow, before
/// anything recursive reads it. Syntax errors are left to YamlIO, which
/// reports them.
Error checkRecursionBounds(MemoryBufferRef Buffer) {
  SourceMgr SM;
  SM.setDiagHandler([](const SMDiagnostic &, void *) {}, nullptr);
  StringRef Text = Buffer.getBuffer(), What;
  size_t At = findLongRun(Text, What);
  if (At != StringRef::npos) {
    SM.AddNewSourceBuffer(MemoryBuffer::getMemBuffer(Buffer), SMLoc());
    return makeDiagnosticError(SM.GetMessage(
        SMLoc::getFromPointer(Text.data() + At), SourceMgr::DK_Error,
        "more than " + Twine(MaxTokensInARow) + " " + What));
  }
  yaml::Stream Stream(Buffer, SM);
  for (yaml::document_iterator Doc = Stream.begin(); Doc != Stream.end(); ++Doc)
    if (yaml::Node *Deep = findTooDeep(Doc->getRoot(), 1))
      return makeDiagnosticError(SM.GetMessage(
          Deep->getSourceRange().Start, SourceMgr::DK_Error,
          "nested deeper than " + Twine(MaxYAMLNesting) + " levels"));
  return Error::success();
}

/// An error at the position \p Locate finds in a fresh parse of \p Buffer,
/// or at the file if it finds none.
Error makeErrorAt(MemoryBufferRef Buffer,
                  function_ref<SMLoc(yaml::Stream &)> Locate,
                  const Twine &Message) {
  SourceMgr SM;
  // The text parsed once already, so this parse cannot fail; a silent
  // handler keeps stray output off stderr regardless.
  SM.setDiagHandler([](const SMDiagnostic &, void *) {}, nullptr);
  yaml::Stream Stream(Buffer, SM); // Registers Buffer with SM.
  SMLoc Loc = Locate(Stream);
  if (!Loc.isValid())
    return makeFileError(Buffer.getBufferIdentifier(), Message);
  return makeDiagnosticError(SM.GetMessage(Loc, SourceMgr::DK_Error, Message));
}

/// Reports the first duplicate key in \p Buffer's first document.
Error checkDuplicateKeys(MemoryBufferRef Buffer) {
  SourceMgr SM;
  SM.setDiagHandler([](const SMDiagnostic &, void *) {}, nullptr);
  yaml::Stream Stream(Buffer, SM);
  yaml::Node *First = nullptr;
  yaml::Node *Dup = findDuplicateKey(getFirstRoot(Stream), First);
  if (!Dup)
    return Error::success();
  SmallString<32> Storage;
  StringRef Key = cast<yaml::ScalarNode>(Dup)->getValue(Storage);
  unsigned FirstLine = SM.getLineAndColumn(First->getSourceRange().Start).first;
  return makeDiagnosticError(
      SM.GetMessage(Dup->getSourceRange().Start, SourceMgr::DK_Error,
                    "duplicate key '" + Key + "' (first given on line " +
                        Twine(FirstLine) + ")"));
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

Expected<HardwareModel> loom::parseHardwareModel(StringRef Text,
                                                 StringRef BufferName) {
  MemoryBufferRef Buffer(Text, BufferName);
  if (Text.trim().empty())
    return makeFileError(BufferName, "empty hardware description");

  if (Error E = checkRecursionBounds(Buffer))
    return E;

  HardwareModel Model;
  LoadContext Context;
  Optional<SMDiagnostic> FirstError;
  yaml::Input In(Buffer, &Context, captureDiagnostic, &FirstError);
  In >> Model;
  if (In.error()) {
    if (FirstError)
      return makeDiagnosticError(*FirstError);
    // YamlIO fails without a message on a stream with no document at all,
    // e.g. one of comments only.
    return makeFileError(BufferName, "empty hardware description");
  }
  // A document of comments only reads as an empty (all-default) model.
  if (!In.getCurrentNode() || isa<yaml::NullNode>(In.getCurrentNode()))
    return makeFileError(BufferName, "empty hardware description");
  if (Context.MissingIn) {
    const yaml::Node *Mapping = Context.MissingIn;
    return makeErrorAt(
        Buffer, [&](yaml::Stream &) { return Mapping->getSourceRange().Start; },
        "missing required key '" + Context.MissingKey + "'");
  }
  // Trailing empty documents ("---" at the end) are harmless; more content
  // is not, as only the first document would be used.
  if (In.nextDocument() && In.setCurrentDocument())
    return makeErrorAt(
        Buffer, [](yaml::Stream &S) { return locateDocument(S, 1); },
        "expected one YAML document, found more");

  if (Error E = checkDuplicateKeys(Buffer))
    return E;

  if (Optional<Violation> V = findViolation(Model))
    return makeErrorAt(
        Buffer,
        [&](yaml::Stream &S) { return locatePath(S, V->Path, V->AtKey); },
        V->Path + ": " + V->Message);
  return Model;
}

Expected<HardwareModel> loom::loadHardwareModel(StringRef Path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> File =
      MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!File)
    return makeFileError(Path, "cannot read hardware description: " +
                                   File.getError().message());
  return parseHardwareModel((*File)->getBuffer(), Path);
}

Error loom::checkHardwareYAMLBounds(MemoryBufferRef Buffer) {
  return checkRecursionBounds(Buffer);
}
