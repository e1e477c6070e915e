//===- HardwareOverlay.cpp - Layered hardware files and --set overrides ---===//
//
// Layers are read into a small ordered tree (maps keep their key order),
// merged, overridden, printed back as block YAML and handed to the one
// loader, parseHardwareModel, so the merged result is checked exactly as a
// single file is.
//
//===----------------------------------------------------------------------===//
#include "loom/Hardware/HardwareOverlay.h"
#include "loom/Support/Units.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

using namespace llvm;
using namespace loom;

namespace {

struct YNode {
  enum Kind { Scalar, Map, Seq } K = Scalar;
  std::string Value;
  bool Quoted = false;
  std::vector<std::pair<std::string, std::unique_ptr<YNode>>> Items; // Map
  std::vector<std::unique_ptr<YNode>> Elems;                         // Seq

  YNode *get(StringRef Key) const {
    for (const auto &KV : Items)
      if (KV.first == Key)
        return KV.second.get();
    return nullptr;
  }
  /// A sequence item's `name`, or "".
  std::string getName() const {
    if (K != Map)
      return "";
    YNode *N = get("name");
    return N && N->K == Scalar ? N->Value : "";
  }
  std::unique_ptr<YNode> clone() const {
    auto C = std::make_unique<YNode>();
    C->K = K;
    C->Value = Value;
    C->Quoted = Quoted;
    for (const auto &KV : Items)
      C->Items.emplace_back(KV.first, KV.second->clone());
    for (const auto &E : Elems)
      C->Elems.push_back(E->clone());
    return C;
  }
};

Error fileError(StringRef Name, const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), Name + ": error: " + Msg);
}

Expected<std::unique_ptr<YNode>> convert(yaml::Node *N, StringRef File) {
  auto Out = std::make_unique<YNode>();
  if (!N || isa<yaml::NullNode>(N))
    return std::move(Out);
  if (auto *S = dyn_cast<yaml::ScalarNode>(N)) {
    SmallString<64> Storage;
    Out->Value = S->getValue(Storage).str();
    Out->Quoted =
        S->getRawValue().startswith("\"") || S->getRawValue().startswith("'");
    return std::move(Out);
  }
  if (auto *M = dyn_cast<yaml::MappingNode>(N)) {
    Out->K = YNode::Map;
    for (yaml::KeyValueNode &KV : *M) {
      auto *Key = dyn_cast_or_null<yaml::ScalarNode>(KV.getKey());
      if (!Key)
        return fileError(File, "expected scalar keys");
      SmallString<32> Storage;
      std::string K = Key->getValue(Storage).str();
      Expected<std::unique_ptr<YNode>> V = convert(KV.getValue(), File);
      if (!V)
        return V.takeError();
      if (Out->get(K))
        return fileError(File, "duplicate key '" + K + "'");
      Out->Items.emplace_back(K, std::move(*V));
    }
    return std::move(Out);
  }
  if (auto *Sq = dyn_cast<yaml::SequenceNode>(N)) {
    Out->K = YNode::Seq;
    for (yaml::Node &E : *Sq) {
      Expected<std::unique_ptr<YNode>> V = convert(&E, File);
      if (!V)
        return V.takeError();
      Out->Elems.push_back(std::move(*V));
    }
    return std::move(Out);
  }
  return fileError(File, "unsupported YAML node (anchors, aliases and tags "
                         "are not read)");
}

Expected<std::unique_ptr<YNode>> parseTree(StringRef Text, StringRef Name) {
  MemoryBufferRef Buffer(Text, Name);
  if (Error E = checkHardwareYAMLBounds(Buffer))
    return std::move(E);
  SourceMgr SM;
  std::string Diag;
  SM.setDiagHandler(
      [](const SMDiagnostic &D, void *Ctx) {
        auto *Out = static_cast<std::string *>(Ctx);
        if (!Out->empty())
          return;
        raw_string_ostream OS(*Out);
        OS << D.getFilename() << ':' << D.getLineNo() << ':'
           << D.getColumnNo() + 1 << ": error: " << D.getMessage();
      },
      &Diag);
  yaml::Stream Stream(Buffer, SM);
  yaml::Node *Root = nullptr;
  for (yaml::document_iterator Doc = Stream.begin(); Doc != Stream.end();
       ++Doc) {
    Root = Doc->getRoot();
    break;
  }
  if (Stream.failed() || !Diag.empty())
    return createStringError(inconvertibleErrorCode(),
                             Diag.empty() ? (Name + ": error: bad YAML").str()
                                          : Diag);
  Expected<std::unique_ptr<YNode>> T = convert(Root, Name);
  if (!T)
    return T.takeError();
  if (Stream.failed() || !Diag.empty())
    return createStringError(inconvertibleErrorCode(),
                             Diag.empty() ? (Name + ": error: bad YAML").str()
                                          : Diag);
  if ((*T)->K != YNode::Map)
    return fileError(Name, "expected a mapping at the top level");
  return T;
}

std::string joinPath(StringRef Path, StringRef Key) {
  return Path.empty() ? Key.str() : (Path + "." + Key).str();
}

/// Merges \p Over into \p Base, recording changed scalars.
void merge(YNode &Base, const YNode &Over, StringRef Path, StringRef Source,
           std::vector<HardwareOverride> &Out) {
  auto Replace = [&](YNode &B, const YNode &O, StringRef P) {
    if (B.K == YNode::Scalar && O.K == YNode::Scalar) {
      if (B.Value != O.Value)
        Out.push_back({P.str(), B.Value, O.Value, Source.str()});
    } else {
      Out.push_back({P.str(), B.K == YNode::Scalar ? B.Value : "(...)",
                     O.K == YNode::Scalar ? O.Value : "(...)", Source.str()});
    }
    B = std::move(*O.clone());
  };
  if (Base.K == YNode::Map && Over.K == YNode::Map) {
    for (const auto &KV : Over.Items) {
      std::string P = joinPath(Path, KV.first);
      if (YNode *B = Base.get(KV.first)) {
        merge(*B, *KV.second, P, Source, Out);
      } else {
        Out.push_back(
            {P, "", KV.second->K == YNode::Scalar ? KV.second->Value : "(...)",
             Source.str()});
        Base.Items.emplace_back(KV.first, KV.second->clone());
      }
    }
    return;
  }
  // Lists of named maps merge on the name.
  auto AllNamed = [](const YNode &N) {
    return N.K == YNode::Seq && !N.Elems.empty() &&
           all_of(N.Elems, [](const std::unique_ptr<YNode> &E) {
             return !E->getName().empty();
           });
  };
  if (AllNamed(Base) && AllNamed(Over)) {
    for (const auto &E : Over.Elems) {
      std::string Name = E->getName();
      auto It = find_if(Base.Elems, [&](const std::unique_ptr<YNode> &B) {
        return B->getName() == Name;
      });
      if (It != Base.Elems.end()) {
        merge(**It, *E, joinPath(Path, Name), Source, Out);
      } else {
        Out.push_back({joinPath(Path, Name), "", "(added)", Source.str()});
        Base.Elems.push_back(E->clone());
      }
    }
    return;
  }
  Replace(Base, Over, Path);
}

std::string validKeys(const YNode &N) {
  std::vector<std::string> Keys;
  if (N.K == YNode::Map)
    for (const auto &KV : N.Items)
      Keys.push_back(KV.first);
  else if (N.K == YNode::Seq)
    for (unsigned I = 0; I < N.Elems.size(); ++I) {
      std::string Name = N.Elems[I]->getName();
      Keys.push_back(Name.empty() ? std::to_string(I) : Name);
    }
  return Keys.empty() ? "none" : llvm::join(Keys, ", ");
}

/// The unit parser the old value satisfies, if any, as a kind name.
StringRef unitKind(StringRef V) {
  if (V.empty() || !isDigit(V.front()))
    return "";
  if (V.trim().find_first_not_of("0123456789.eE+-") == StringRef::npos)
    return "";
  if (errorToBool(parseBandwidth(V).takeError()) == false)
    return "bandwidth";
  if (errorToBool(parseBytes(V).takeError()) == false)
    return "size";
  if (errorToBool(parseDuration(V).takeError()) == false)
    return "duration";
  if (errorToBool(parseFlopRate(V).takeError()) == false)
    return "compute rate";
  return "";
}

Error checkUnit(StringRef Kind, StringRef V) {
  Error E = Error::success();
  if (Kind == "bandwidth")
    E = parseBandwidth(V).takeError();
  else if (Kind == "size")
    E = parseBytes(V).takeError();
  else if (Kind == "duration")
    E = parseDuration(V).takeError();
  else if (Kind == "compute rate")
    E = parseFlopRate(V).takeError();
  return E;
}

/// Optional keys of the schema (HardwareModel.h) a --set may add where the
/// YAML leaves them out; peaks per data type under a throughput map.
bool isAddableKey(StringRef Parent, StringRef Key) {
  if (Parent.endswith("throughput"))
    return true;
  return is_contained(std::vector<StringRef>{"efficiency", "oversubscription",
                                             "half_bandwidth_size", "allow_tp",
                                             "full_mesh", "reserved", "latency",
                                             "alignment", "cores",
                                             "description", "devices"},
                      Key);
}

Error applySet(YNode &Root, StringRef Set, std::vector<HardwareOverride> &Out) {
  auto Bad = [&](const Twine &Msg) {
    return createStringError(inconvertibleErrorCode(),
                             "--set " + Set + ": " + Msg);
  };
  size_t Eq = Set.find('=');
  if (Eq == StringRef::npos || Eq == 0)
    return Bad("expected PATH=VALUE (e.g. topology.roce.bandwidth=400Gbps)");
  StringRef Path = Set.take_front(Eq).trim(),
            Value = Set.drop_front(Eq + 1).trim();
  if (Value.empty())
    return Bad("empty value");
  // "topology[1].bandwidth" is "topology.1.bandwidth".
  std::string Norm;
  for (char C : Path)
    Norm += C == '[' ? '.' : C;
  Norm.erase(std::remove(Norm.begin(), Norm.end(), ']'), Norm.end());
  SmallVector<StringRef, 8> Steps;
  StringRef(Norm).split(Steps, '.');
  YNode *Cur = &Root;
  std::string Done;
  for (unsigned I = 0; I < Steps.size(); ++I) {
    StringRef S = Steps[I];
    bool Last = I + 1 == Steps.size();
    if (S.empty())
      return Bad("empty step in the path");
    std::string Here = Done.empty() ? "the top level" : "'" + Done + "'";
    YNode *Next = nullptr;
    if (Cur->K == YNode::Map) {
      Next = Cur->get(S);
      if (!Next && Last && isAddableKey(Done, S)) {
        // A key the schema may allow; the loader checks it.
        auto N = std::make_unique<YNode>();
        N->Value = Value.str();
        Out.push_back({joinPath(Done, S), "", Value.str(), "--set"});
        Cur->Items.emplace_back(S.str(), std::move(N));
        return Error::success();
      }
    } else if (Cur->K == YNode::Seq) {
      unsigned Index;
      if (!S.getAsInteger(10, Index)) {
        if (Index < Cur->Elems.size())
          Next = Cur->Elems[Index].get();
      } else {
        for (auto &E : Cur->Elems)
          if (E->getName() == S)
            Next = E.get();
      }
    } else {
      return Bad("'" + Done + "' is a value (" + Cur->Value +
                 "), not a map or list; '" + S + "' matches nothing");
    }
    if (!Next)
      return Bad("'" + S + "' matches nothing at " + Here +
                 "; valid keys: " + validKeys(*Cur));
    // List items are named by their name where they have one.
    std::string Shown = Cur->K == YNode::Seq && !Next->getName().empty()
                            ? Next->getName()
                            : S.str();
    Done = joinPath(Done, Shown);
    Cur = Next;
  }
  if (Cur->K != YNode::Scalar)
    return Bad("'" + Done + "' is a " +
               (Cur->K == YNode::Map ? "map" : "list") +
               ", not a value; its keys: " + validKeys(*Cur));
  StringRef Kind = unitKind(Cur->Value);
  if (!Kind.empty())
    if (Error E = checkUnit(Kind, Value))
      return Bad("expected a " + Kind + " with a unit like '" + Cur->Value +
                 "': " + toString(std::move(E)));
  Out.push_back({Done, Cur->Value, Value.str(), "--set"});
  Cur->Value = Value.str();
  Cur->Quoted = false;
  return Error::success();
}

bool isPlain(StringRef S) {
  if (S.empty())
    return false;
  for (char C : S)
    if (!(isAlnum(C) || C == '.' || C == '/' || C == '-' || C == '+' ||
          C == '_'))
      return false;
  return true;
}

void printScalar(const YNode &N, raw_ostream &OS) {
  if (!N.Quoted && isPlain(N.Value)) {
    OS << N.Value;
    return;
  }
  OS << '"';
  for (char C : N.Value) {
    if (C == '"' || C == '\\')
      OS << '\\';
    OS << C;
  }
  OS << '"';
}

void printTree(const YNode &N, unsigned Indent, raw_ostream &OS) {
  std::string Pad(Indent, ' ');
  if (N.K == YNode::Map) {
    for (const auto &KV : N.Items) {
      OS << Pad << '"' << KV.first << "\":";
      const YNode &V = *KV.second;
      if (V.K == YNode::Scalar) {
        OS << ' ';
        printScalar(V, OS);
        OS << '\n';
      } else if ((V.K == YNode::Map && V.Items.empty()) ||
                 (V.K == YNode::Seq && V.Elems.empty())) {
        OS << (V.K == YNode::Map ? " {}\n" : " []\n");
      } else {
        OS << '\n';
        printTree(V, Indent + 2, OS);
      }
    }
    return;
  }
  if (N.K == YNode::Seq) {
    for (const auto &E : N.Elems) {
      if (E->K == YNode::Scalar) {
        OS << Pad << "- ";
        printScalar(*E, OS);
        OS << '\n';
      } else if ((E->K == YNode::Map && E->Items.empty()) ||
                 (E->K == YNode::Seq && E->Elems.empty())) {
        OS << Pad << (E->K == YNode::Map ? "- {}\n" : "- []\n");
      } else {
        // The item's lines, the first marked with "- ".
        std::string Body;
        raw_string_ostream BOS(Body);
        printTree(*E, Indent + 2, BOS);
        BOS.flush();
        Body.replace(Indent, 2, "- ");
        OS << Body;
      }
    }
  }
}

} // namespace

std::string loom::describeOverride(const HardwareOverride &O) {
  return O.Path + ": " + (O.Old.empty() ? "(unset)" : O.Old) + " -> " + O.New +
         " (" + O.Source + ")";
}

Expected<HardwareModel> loom::parseLayeredHardware(
    ArrayRef<std::string> Texts, ArrayRef<std::string> Names,
    ArrayRef<std::string> Sets, std::vector<HardwareOverride> &Overrides) {
  assert(!Texts.empty() && Texts.size() == Names.size());
  if (Texts.size() == 1 && Sets.empty())
    return parseHardwareModel(Texts[0], Names[0]);
  // The base must stand alone: its errors keep their own lines.
  Expected<HardwareModel> Base = parseHardwareModel(Texts[0], Names[0]);
  if (!Base)
    return Base.takeError();
  Expected<std::unique_ptr<YNode>> Root = parseTree(Texts[0], Names[0]);
  if (!Root)
    return Root.takeError();
  for (unsigned I = 1; I < Texts.size(); ++I) {
    Expected<std::unique_ptr<YNode>> Layer = parseTree(Texts[I], Names[I]);
    if (!Layer)
      return Layer.takeError();
    merge(**Root, **Layer, "", Names[I], Overrides);
  }
  for (const std::string &S : Sets)
    if (Error E = applySet(**Root, S, Overrides))
      return std::move(E);
  // A layer that changes a level's size leaves the base's device count
  // stale: keep it only if it was overridden too.
  bool SizeChanged = false, DevicesSet = false;
  for (const HardwareOverride &O : Overrides) {
    SizeChanged |= StringRef(O.Path).startswith("topology");
    DevicesSet |= O.Path == "devices";
  }
  if (SizeChanged && !DevicesSet) {
    auto &Items = (*Root)->Items;
    Items.erase(
        std::remove_if(Items.begin(), Items.end(),
                       [](const auto &KV) { return KV.first == "devices"; }),
        Items.end());
  }
  std::string Text;
  raw_string_ostream OS(Text);
  printTree(**Root, 0, OS);
  OS.flush();
  std::string Name = Names[0];
  for (unsigned I = 1; I < Names.size(); ++I)
    Name += " + " + Names[I];
  if (!Sets.empty())
    Name += " + --set";
  // Errors of the merged text name the key path; say where it came from.
  Expected<HardwareModel> HW = parseHardwareModel(Text, "(" + Name + ")");
  if (!HW)
    return HW.takeError();
  return HW;
}

Expected<HardwareModel>
loom::loadLayeredHardware(ArrayRef<std::string> Files,
                          ArrayRef<std::string> Sets,
                          std::vector<HardwareOverride> &Overrides) {
  if (Files.empty())
    return createStringError(inconvertibleErrorCode(),
                             "--hw: no hardware description given");
  std::vector<std::string> Texts;
  for (const std::string &F : Files) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> File =
        MemoryBuffer::getFile(F, /*IsText=*/true);
    if (!File)
      return fileError(F, "cannot read hardware description: " +
                              File.getError().message());
    Texts.push_back((*File)->getBuffer().str());
  }
  return parseLayeredHardware(Texts, Files, Sets, Overrides);
}
