//===- Importer.cpp - ONNX ModelProto to loom::Model ----------------------===//
//
// Converts a ModelProto into the IR: names resolved to Values (outer-scope
// names for subgraphs), nodes sorted topologically (stable, so an already
// sorted graph keeps its order), initializer data referenced, not copied.
// Every rejection names the file and the node, value or field at fault.
//
//===----------------------------------------------------------------------===//
#include "ProtoTensorData.h"
#include "loom/ONNX/ONNX.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"
#include <queue>

using namespace llvm;

namespace loom {

//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

namespace {

class Importer {
public:
  Importer(std::shared_ptr<const onnx::ModelProto> MP, StringRef Buffer,
           StringRef BaseDir, bool IsText, ImportStats *Stats)
      : MP(std::move(MP)), Buffer(Buffer), BaseDir(BaseDir), IsText(IsText),
        Stats(Stats ? Stats : &LocalStats) {}

  /// Checks the model header, upgrades an old opset, then builds the IR.
  Expected<std::unique_ptr<Model>> run();

private:
  /// Builds the IR from MP as it is.
  Expected<std::unique_ptr<Model>> build();
  Error upgradeOpset(const Model &Old, int64_t From);
  Error fail(const Twine &Msg) {
    return createStringError(inconvertibleErrorCode(),
                             Buffer + ": error: " + Msg);
  }
  Error importGraph(const onnx::GraphProto &GP, Graph &G);
  // The steps of importGraph.
  Error importInputsAndInitializers(const onnx::GraphProto &GP, Graph &G);
  Error mapProducers(const onnx::GraphProto &GP, const Graph &G,
                     StringMap<unsigned> &Producer);
  Error importShapeOnlyParameters(const onnx::GraphProto &GP, Graph &G,
                                  const StringMap<unsigned> &Producer);
  Expected<std::vector<unsigned>>
  sortNodes(const onnx::GraphProto &GP, const Graph &G,
            const StringMap<unsigned> &Producer);
  Error importNodes(const onnx::GraphProto &GP, Graph &G,
                    ArrayRef<unsigned> Order);
  Error importValueTypes(const onnx::GraphProto &GP, Graph &G);
  Error checkLimits(const onnx::GraphProto &GP, unsigned Depth, uint64_t &Nodes,
                    uint64_t &Values);
  Expected<TensorType> convertType(const onnx::TypeProto &T,
                                   StringRef ValueName);
  Expected<TensorType> convertValueInfo(const onnx::ValueInfoProto &VI);
  Expected<std::shared_ptr<const TensorData>>
  convertTensorData(const onnx::TensorProto &TP, const TensorType &Type);
  Expected<Tensor> convertTensor(const onnx::TensorProto &TP);
  Error convertAttribute(const onnx::AttributeProto &AP, const Node &Owner,
                         Graph &G, Attribute &A);
  static void collectFreeNames(const onnx::GraphProto &GP,
                               std::vector<std::string> &Out);

  std::shared_ptr<const onnx::ModelProto> MP;
  std::string Buffer;
  std::string BaseDir;
  bool IsText;
  ImportStats LocalStats;
  ImportStats *Stats;
};

} // namespace

static std::string nodeDesc(const onnx::NodeProto &N) {
  return "node '" + N.name() + "' (" +
         (N.domain().empty() || N.domain() == "ai.onnx"
              ? N.op_type()
              : N.domain() + "." + N.op_type()) +
         ")";
}

Expected<TensorType> Importer::convertType(const onnx::TypeProto &T,
                                           StringRef ValueName) {
  TensorType TT;
  if (T.value_case() == onnx::TypeProto::VALUE_NOT_SET)
    return TT;
  if (!T.has_tensor_type()) {
    const char *What = T.has_sequence_type()        ? "a sequence"
                       : T.has_map_type()           ? "a map"
                       : T.has_optional_type()      ? "an optional"
                       : T.has_sparse_tensor_type() ? "a sparse tensor"
                                                    : "a non-tensor";
    return fail("value '" + ValueName + "' has " + What +
                " type; Loom handles dense tensor values only");
  }
  const onnx::TypeProto::Tensor &TP = T.tensor_type();
  int32_t Code = TP.elem_type();
  if (Code != 0 && !isKnownDataTypeCode(Code))
    return fail("value '" + ValueName + "' has unknown element type " +
                Twine(Code));
  TT.Elem = static_cast<DataType>(Code);
  if (!TP.has_shape())
    return TT;
  TT.HasShape = true;
  for (const onnx::TensorShapeProto::Dimension &D : TP.shape().dim()) {
    if (D.has_dim_value()) {
      if (D.dim_value() < 0)
        return fail("value '" + ValueName + "' has negative dimension " +
                    Twine(D.dim_value()));
      TT.Dims.push_back(Dim(D.dim_value()));
    } else if (D.has_dim_param() && !D.dim_param().empty()) {
      TT.Dims.push_back(Dim::symbol(D.dim_param()));
    } else {
      TT.Dims.push_back(Dim());
    }
  }
  // A size that overflows int64 cannot be planned (and would wrap around in
  // every size computation downstream): refuse it here, naming the value.
  // Symbolic dims are at least 1, so the static ones alone must fit.
  int64_t Elements = 1;
  for (const Dim &D : TT.Dims)
    if (D.isStatic() && MulOverflow(Elements, D.Size, Elements))
      return fail("value '" + ValueName + "' of type " + TT.str() +
                  " has a size that overflows int64");
  if (getDataTypeBits(TT.Elem) && !getStorageBytes(TT.Elem, Elements))
    return fail("value '" + ValueName + "' of type " + TT.str() +
                " has a size in bytes that overflows int64");
  return TT;
}

Expected<TensorType>
Importer::convertValueInfo(const onnx::ValueInfoProto &VI) {
  if (!VI.has_type())
    return TensorType();
  return convertType(VI.type(), VI.name());
}

/// Is \p Loc a relative path that stays inside the model directory?
static bool isContainedLocation(StringRef Loc) {
  if (Loc.empty() || sys::path::is_absolute(Loc) ||
      sys::path::is_absolute(Loc, sys::path::Style::windows) ||
      Loc.contains(':') || Loc.contains('\\'))
    return false;
  for (auto It = sys::path::begin(Loc), E = sys::path::end(Loc); It != E; ++It)
    if (*It == "..")
      return false;
  return true;
}

Expected<std::shared_ptr<const TensorData>>
Importer::convertTensorData(const onnx::TensorProto &TP,
                            const TensorType &Type) {
  StringRef Name = TP.name();
  Optional<int64_t> NumElts = Type.getNumElements();
  if (!NumElts)
    return fail("tensor '" + Name + "' of type " + Type.str() +
                " has a size that overflows int64");
  if (Type.Elem == DataType::String) {
    if (TP.data_location() == onnx::TensorProto::EXTERNAL || TP.has_raw_data())
      return fail("string tensor '" + Name +
                  "' must hold its elements in string_data");
    if ((uint64_t)TP.string_data_size() != (uint64_t)*NumElts)
      return fail("tensor '" + Name + "' declares type " + Type.str() + " (" +
                  Twine(*NumElts) + " elements) but holds " +
                  Twine(TP.string_data_size()));
    ++Stats->InlineParameters;
    return std::shared_ptr<const TensorData>(
        std::make_shared<ProtoTensorData>(MP, &TP, getEncodedStringsSize(TP)));
  }
  // Packed: 4-bit types hold two elements per byte, the last byte half
  // used when the count is odd (onnx.proto, TensorProto).
  uint64_t Want = (uint64_t)getStorageBytes(Type.Elem, *NumElts).getValueOr(0);
  bool FourBit = getDataTypeBits(Type.Elem) == 4;

  if (TP.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string Location;
    uint64_t Offset = 0;
    Optional<uint64_t> Length;
    for (const onnx::StringStringEntryProto &KV : TP.external_data()) {
      if (KV.key() == "location") {
        Location = KV.value();
      } else if (KV.key() == "offset" || KV.key() == "length") {
        uint64_t V;
        if (StringRef(KV.value()).getAsInteger(10, V))
          return fail("tensor '" + Name + "': external data " + KV.key() +
                      " '" + KV.value() + "' is not a non-negative integer");
        if (KV.key() == "offset")
          Offset = V;
        else
          Length = V;
      }
    }
    if (!isContainedLocation(Location))
      return fail("tensor '" + Name + "': external data location '" + Location +
                  "' must be a relative path inside the model's directory");
    if (Length && *Length != Want)
      return fail("tensor '" + Name + "' declares type " + Type.str() + " (" +
                  Twine(Want) +
                  " bytes) but its external data length "
                  "is " +
                  Twine(*Length));
    SmallString<256> Path(BaseDir);
    sys::path::append(Path, Location);
    uint64_t FileSize;
    if (sys::fs::file_size(Path, FileSize)) {
      // Absent file: a shape-only weight (planning without weights).
      ++Stats->ShapeOnlyParameters;
      Stats->MissingExternalBytes += Want;
      return std::shared_ptr<const TensorData>();
    }
    if (Offset > FileSize || Want > FileSize - Offset)
      return fail("tensor '" + Name + "' needs " + Twine(Want) +
                  " bytes at offset " + Twine(Offset) + " of '" + Location +
                  "', which has " + Twine(FileSize) + " bytes");
    ++Stats->ExternalParameters;
    return std::shared_ptr<const TensorData>(
        std::make_shared<ExternalTensorData>(std::string(Path), Location,
                                             Offset, Want));
  }

  uint64_t Have;
  if (TP.has_raw_data()) {
    Have = TP.raw_data().size();
  } else {
    uint64_t Count = 0;
    unsigned PerElt = 1;
    switch (TP.data_type()) {
    case onnx::TensorProto::COMPLEX64:
      PerElt = 2;
      LLVM_FALLTHROUGH;
    case onnx::TensorProto::FLOAT:
      Count = TP.float_data_size();
      break;
    case onnx::TensorProto::COMPLEX128:
      PerElt = 2;
      LLVM_FALLTHROUGH;
    case onnx::TensorProto::DOUBLE:
      Count = TP.double_data_size();
      break;
    case onnx::TensorProto::INT64:
      Count = TP.int64_data_size();
      break;
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
      Count = TP.uint64_data_size();
      break;
    default:
      Count = TP.int32_data_size();
      break;
    }
    // int32_data holds one element per entry, or one packed pair of 4-bit
    // elements (onnx.proto: "for 4-bit data types, each int32_data stores
    // two elements").
    uint64_t Entries = FourBit ? ((uint64_t)*NumElts + 1) / 2 : *NumElts;
    if (Count % PerElt != 0 || Count / PerElt != Entries) {
      std::string Packed = FourBit ? ", " + std::to_string(Entries) +
                                         " packed int32_data entries"
                                   : "";
      return fail("tensor '" + Name + "' declares type " + Type.str() + " (" +
                  Twine(*NumElts) + " elements" + Packed + ") but holds " +
                  Twine(Count / PerElt) + (FourBit ? " entries" : ""));
    }
    Have = Want;
  }
  if (Have != Want)
    return fail("tensor '" + Name + "' declares type " + Type.str() + " (" +
                Twine(Want) + " bytes) but holds " + Twine(Have) + " bytes");
  ++Stats->InlineParameters;
  return std::shared_ptr<const TensorData>(
      std::make_shared<ProtoTensorData>(MP, &TP, Want));
}

Expected<Tensor> Importer::convertTensor(const onnx::TensorProto &TP) {
  Tensor T;
  T.Name = TP.name();
  if (!isKnownDataTypeCode(TP.data_type()))
    return fail("tensor '" + TP.name() + "' has unknown element type " +
                Twine(TP.data_type()));
  T.Type.Elem = static_cast<DataType>(TP.data_type());
  T.Type.HasShape = true;
  for (int64_t D : TP.dims()) {
    if (D < 0)
      return fail("tensor '" + TP.name() + "' has negative dimension " +
                  Twine(D));
    T.Type.Dims.push_back(Dim(D));
  }
  if (TP.segment().begin() != 0 || TP.segment().end() != 0)
    return fail("tensor '" + TP.name() + "' is segmented; not supported");
  Expected<std::shared_ptr<const TensorData>> D = convertTensorData(TP, T.Type);
  if (!D)
    return D.takeError();
  T.Data = std::move(*D);
  return T;
}

void Importer::collectFreeNames(const onnx::GraphProto &GP,
                                std::vector<std::string> &Out) {
  StringSet<> Local;
  for (const auto &I : GP.input())
    Local.insert(I.name());
  for (const auto &I : GP.initializer())
    Local.insert(I.name());
  for (const auto &N : GP.node())
    for (const std::string &O : N.output())
      Local.insert(O);
  auto Use = [&](const std::string &Name) {
    if (!Name.empty() && !Local.count(Name))
      Out.push_back(Name);
  };
  for (const auto &N : GP.node()) {
    for (const std::string &I : N.input())
      Use(I);
    for (const auto &A : N.attribute()) {
      std::vector<std::string> Inner;
      if (A.has_g())
        collectFreeNames(A.g(), Inner);
      for (const auto &Sub : A.graphs())
        collectFreeNames(Sub, Inner);
      for (const std::string &S : Inner)
        Use(S);
    }
  }
  for (const auto &O : GP.output())
    Use(O.name());
}

Error Importer::convertAttribute(const onnx::AttributeProto &AP,
                                 const Node &Owner, Graph &G, Attribute &A) {
  A.Name = AP.name();
  auto Where = [&]() {
    return "node '" + Owner.getName().str() + "' (" +
           Owner.getQualifiedOpType() + "): attribute '" + AP.name() + "'";
  };
  onnx::AttributeProto::AttributeType Ty = AP.type();
  if (Ty == onnx::AttributeProto::UNDEFINED) {
    // IR version 1 models leave the type implicit.
    if (AP.has_f())
      Ty = onnx::AttributeProto::FLOAT;
    else if (AP.has_i())
      Ty = onnx::AttributeProto::INT;
    else if (AP.has_s())
      Ty = onnx::AttributeProto::STRING;
    else if (AP.has_t())
      Ty = onnx::AttributeProto::TENSOR;
    else if (AP.has_g())
      Ty = onnx::AttributeProto::GRAPH;
    else if (AP.floats_size())
      Ty = onnx::AttributeProto::FLOATS;
    else if (AP.ints_size())
      Ty = onnx::AttributeProto::INTS;
    else if (AP.strings_size())
      Ty = onnx::AttributeProto::STRINGS;
    else if (AP.tensors_size())
      Ty = onnx::AttributeProto::TENSORS;
    else if (AP.graphs_size())
      Ty = onnx::AttributeProto::GRAPHS;
    else
      return fail(Where() + " has no type and no value");
  }
  if (!AP.ref_attr_name().empty())
    return fail(Where() + " refers to a function attribute; model-local "
                          "functions are not supported");
  switch (Ty) {
  case onnx::AttributeProto::FLOAT:
    A.K = Attribute::Kind::Float;
    A.F = AP.f();
    return Error::success();
  case onnx::AttributeProto::INT:
    A.K = Attribute::Kind::Int;
    A.I = AP.i();
    return Error::success();
  case onnx::AttributeProto::STRING:
    A.K = Attribute::Kind::String;
    A.S = AP.s();
    return Error::success();
  case onnx::AttributeProto::FLOATS:
    A.K = Attribute::Kind::Floats;
    A.Fs.assign(AP.floats().begin(), AP.floats().end());
    return Error::success();
  case onnx::AttributeProto::INTS:
    A.K = Attribute::Kind::Ints;
    A.Is.assign(AP.ints().begin(), AP.ints().end());
    return Error::success();
  case onnx::AttributeProto::STRINGS:
    A.K = Attribute::Kind::Strings;
    A.Ss.assign(AP.strings().begin(), AP.strings().end());
    return Error::success();
  case onnx::AttributeProto::TENSOR:
  case onnx::AttributeProto::TENSORS: {
    A.K = Ty == onnx::AttributeProto::TENSOR ? Attribute::Kind::Tensor
                                             : Attribute::Kind::Tensors;
    auto Add = [&](const onnx::TensorProto &TP) -> Error {
      Expected<Tensor> T = convertTensor(TP);
      if (!T)
        return T.takeError();
      A.Ts.push_back(std::move(*T));
      return Error::success();
    };
    if (Ty == onnx::AttributeProto::TENSOR)
      return Add(AP.t());
    for (const auto &TP : AP.tensors())
      if (Error E = Add(TP))
        return E;
    return Error::success();
  }
  case onnx::AttributeProto::GRAPH:
  case onnx::AttributeProto::GRAPHS: {
    A.K = Ty == onnx::AttributeProto::GRAPH ? Attribute::Kind::Graph
                                            : Attribute::Kind::Graphs;
    auto Add = [&](const onnx::GraphProto &GP) -> Error {
      auto Sub = std::make_unique<Graph>(GP.name(), &G);
      if (Error E = importGraph(GP, *Sub))
        return E;
      A.Gs.push_back(std::move(Sub));
      return Error::success();
    };
    if (Ty == onnx::AttributeProto::GRAPH)
      return Add(AP.g());
    for (const auto &GP : AP.graphs())
      if (Error E = Add(GP))
        return E;
    return Error::success();
  }
  default:
    return fail(Where() +
                " has a sparse-tensor or type-proto value; not supported");
  }
}

Error Importer::importGraph(const onnx::GraphProto &GP, Graph &G) {
  G.DocString = GP.doc_string();
  if (GP.sparse_initializer_size())
    return fail("graph '" + GP.name() +
                "' has sparse initializers; not supported");
  if (Error E = importInputsAndInitializers(GP, G))
    return E;
  StringMap<unsigned> Producer;
  if (Error E = mapProducers(GP, G, Producer))
    return E;
  if (IsText)
    if (Error E = importShapeOnlyParameters(GP, G, Producer))
      return E;
  Expected<std::vector<unsigned>> Order = sortNodes(GP, G, Producer);
  if (!Order)
    return Order.takeError();
  if (Error E = importNodes(GP, G, *Order))
    return E;
  return importValueTypes(GP, G);
}

/// The graph's inputs and initializers into \p G. Initializers first: an
/// input that is also an initializer is an overridable parameter.
Error Importer::importInputsAndInitializers(const onnx::GraphProto &GP,
                                            Graph &G) {
  StringMap<const onnx::TensorProto *> Inits;
  for (const onnx::TensorProto &TP : GP.initializer())
    if (!Inits.try_emplace(TP.name(), &TP).second)
      return fail("duplicate definition of value '" + TP.name() +
                  "' (initializer)");
  StringSet<> InputNames;
  for (const onnx::ValueInfoProto &VI : GP.input()) {
    if (!InputNames.insert(VI.name()).second)
      return fail("duplicate definition of value '" + VI.name() +
                  "' (graph input)");
    if (Inits.count(VI.name()))
      continue;
    Expected<TensorType> T = convertValueInfo(VI);
    if (!T)
      return T.takeError();
    Expected<Value *> V = G.addInput(VI.name(), std::move(*T));
    if (!V)
      return fail(toString(V.takeError()));
  }
  for (const onnx::TensorProto &TP : GP.initializer()) {
    Expected<Tensor> T = convertTensor(TP);
    if (!T)
      return T.takeError();
    Expected<Value *> V =
        G.addParameter(TP.name(), std::move(T->Type), std::move(T->Data));
    if (!V)
      return fail(toString(V.takeError()));
    (*V)->AlsoGraphInput = InputNames.count(TP.name());
  }
  return Error::success();
}

/// Which node of \p GP produces each name (into \p Producer); a name
/// defined twice is an error.
Error Importer::mapProducers(const onnx::GraphProto &GP, const Graph &G,
                             StringMap<unsigned> &Producer) {
  for (int I = 0, E = GP.node_size(); I < E; ++I)
    for (const std::string &O : GP.node(I).output()) {
      if (O.empty())
        continue;
      if (G.lookupLocal(O) || !Producer.try_emplace(O, I).second)
        return fail(nodeDesc(GP.node(I)) + ": duplicate definition of value '" +
                    O + "'");
    }
  return Error::success();
}

/// Text syntax: a typed value nobody defines is a weight without data (a
/// shape-only parameter), which needs a static numeric type.
Error Importer::importShapeOnlyParameters(const onnx::GraphProto &GP, Graph &G,
                                          const StringMap<unsigned> &Producer) {
  for (const onnx::ValueInfoProto &VI : GP.value_info()) {
    if (G.lookupLocal(VI.name()) || Producer.count(VI.name()))
      continue;
    Expected<TensorType> T = convertValueInfo(VI);
    if (!T)
      return T.takeError();
    if (!T->isStatic())
      return fail("shape-only parameter '" + VI.name() +
                  "' needs a static type, got " + T->str());
    if (getDataTypeBits(T->Elem) == 0)
      return fail("shape-only parameter '" + VI.name() + "' of type " +
                  T->str() + " needs a numeric element type");
    if (!T->getSizeInBytes())
      return fail("shape-only parameter '" + VI.name() + "' of type " +
                  T->str() + " has a size that overflows int64");
    Expected<Value *> V = G.addParameter(VI.name(), std::move(*T), nullptr);
    if (!V)
      return fail(toString(V.takeError()));
    ++Stats->ShapeOnlyParameters;
  }
  return Error::success();
}

/// The order to import \p GP's nodes in: its dependencies (including the
/// outer-scope names subgraphs read) sorted topologically; an undefined
/// input or a cycle is an error.
Expected<std::vector<unsigned>>
Importer::sortNodes(const onnx::GraphProto &GP, const Graph &G,
                    const StringMap<unsigned> &Producer) {
  unsigned N = GP.node_size();
  std::vector<SmallVector<unsigned, 4>> Succs(N);
  std::vector<unsigned> InDegree(N, 0);
  for (unsigned I = 0; I < N; ++I) {
    const onnx::NodeProto &NP = GP.node(I);
    std::vector<std::string> Names(NP.input().begin(), NP.input().end());
    for (const auto &A : NP.attribute()) {
      if (A.has_g())
        collectFreeNames(A.g(), Names);
      for (const auto &Sub : A.graphs())
        collectFreeNames(Sub, Names);
    }
    SmallVector<unsigned, 4> Preds;
    for (const std::string &Name : Names) {
      if (Name.empty())
        continue;
      auto It = Producer.find(Name);
      if (It != Producer.end()) {
        Preds.push_back(It->second);
        continue;
      }
      if (!G.lookup(Name))
        return fail(nodeDesc(NP) + ": input '" + Name +
                    "' is not defined by any node, input or initializer");
    }
    llvm::sort(Preds);
    Preds.erase(std::unique(Preds.begin(), Preds.end()), Preds.end());
    for (unsigned P : Preds) {
      if (P == I)
        return fail("graph '" + GP.name() + "' has a cycle: " + nodeDesc(NP) +
                    " reads its own output");
      Succs[P].push_back(I);
      ++InDegree[I];
    }
  }
  // Kahn's algorithm taking the lowest original index first: a sorted graph
  // keeps its order, an unsorted one gets a deterministic order.
  std::priority_queue<unsigned, std::vector<unsigned>, std::greater<unsigned>>
      Ready;
  for (unsigned I = 0; I < N; ++I)
    if (!InDegree[I])
      Ready.push(I);
  std::vector<unsigned> Order;
  Order.reserve(N);
  while (!Ready.empty()) {
    unsigned I = Ready.top();
    Ready.pop();
    Order.push_back(I);
    for (unsigned S : Succs[I])
      if (--InDegree[S] == 0)
        Ready.push(S);
  }
  if (Order.size() != N) {
    for (unsigned I = 0; I < N; ++I)
      if (InDegree[I])
        return fail("graph '" + GP.name() + "' has a cycle through " +
                    nodeDesc(GP.node(I)));
  }
  return Order;
}

/// \p GP's nodes, in \p Order, into \p G with their attributes.
Error Importer::importNodes(const onnx::GraphProto &GP, Graph &G,
                            ArrayRef<unsigned> Order) {
  for (unsigned I : Order) {
    const onnx::NodeProto &NP = GP.node(I);
    SmallVector<Value *, 4> Ins;
    for (const std::string &Name : NP.input())
      Ins.push_back(Name.empty() ? nullptr : G.lookup(Name));
    std::vector<std::string> Outs(NP.output().begin(), NP.output().end());
    Expected<Node *> NodeOr =
        G.addNode(NP.op_type(), NP.domain() == "ai.onnx" ? "" : NP.domain(),
                  NP.name(), Ins, Outs);
    if (!NodeOr)
      return fail(toString(NodeOr.takeError()));
    Node *Nd = *NodeOr;
    Nd->DocString = NP.doc_string();
    StringSet<> Seen;
    for (const onnx::AttributeProto &AP : NP.attribute()) {
      if (!Seen.insert(AP.name()).second)
        return fail(nodeDesc(NP) + ": duplicate attribute '" + AP.name() + "'");
      Attribute A;
      if (Error E = convertAttribute(AP, *Nd, G, A))
        return E;
      Nd->addAttribute(std::move(A));
    }
  }
  return Error::success();
}

/// The types value_info gives computed values, and the graph's outputs.
Error Importer::importValueTypes(const onnx::GraphProto &GP, Graph &G) {
  for (const onnx::ValueInfoProto &VI : GP.value_info()) {
    Value *V = G.lookupLocal(VI.name());
    if (!V || !V->getDefiningNode())
      continue; // Inputs and parameters carry their own types.
    Expected<TensorType> T = convertValueInfo(VI);
    if (!T)
      return T.takeError();
    V->Type = std::move(*T);
  }
  for (const onnx::ValueInfoProto &VI : GP.output()) {
    Value *V = G.lookupLocal(VI.name());
    if (!V)
      V = G.lookup(VI.name());
    if (!V)
      return fail("graph '" + GP.name() + "': output '" + VI.name() +
                  "' is not defined by any node, input or initializer");
    Expected<TensorType> T = convertValueInfo(VI);
    if (!T)
      return T.takeError();
    if (V->getGraph() == &G && !V->isParameter() &&
        (T->Elem != DataType::Undefined || T->HasShape))
      V->Type = std::move(*T);
    G.addOutput(V);
  }
  return Error::success();
}

/// Default-domain opsets Loom's passes and cost rules are written for.
/// Older models are upgraded to MinOpset with ONNX's version converter (as
/// onnx-mlir does), which rewrites the few ops whose semantics changed
/// (legacy broadcast attributes, consumed_inputs, is_test, ...). Opsets 18
/// to 23 are read as they are, with the schemas ONNX 1.12 lacks registered
/// by OpsetSchemas.cpp; ai.onnx.ml up to 5 (the version opset 23 pairs
/// with); IR versions up to 11 (ONNX 1.18, FLOAT4E2M1).
static constexpr int64_t MinOpset = 7, MaxOpset = 23, MaxMLOpset = 5,
                         MaxIRVersion = 11;

/// Default-domain opset of \p P; 0 if it imports none.
static int64_t getDefaultOpset(const onnx::ModelProto &P) {
  for (const onnx::OperatorSetIdProto &O : P.opset_import())
    if (O.domain().empty() || O.domain() == "ai.onnx")
      return O.version();
  return 0;
}

/// Calls \p F on the main graph of \p P and on all its subgraphs.
static void forEachGraph(onnx::GraphProto &GP,
                         function_ref<void(onnx::GraphProto &)> F) {
  F(GP);
  for (onnx::NodeProto &N : *GP.mutable_node())
    for (onnx::AttributeProto &A : *N.mutable_attribute()) {
      if (A.has_g())
        forEachGraph(*A.mutable_g(), F);
      for (onnx::GraphProto &Sub : *A.mutable_graphs())
        forEachGraph(Sub, F);
    }
}
static void forEachGraph(onnx::ModelProto &P,
                         function_ref<void(onnx::GraphProto &)> F) {
  forEachGraph(*P.mutable_graph(), F);
}

Error Importer::upgradeOpset(const Model &Old, int64_t From) {
  auto Fail = [&](StringRef Why) {
    return fail("cannot upgrade default-domain opset " + Twine(From) + " to " +
                Twine(MinOpset) + ": " + Why.trim());
  };
  // The converter crashes on malformed graphs (undefined names, unsorted
  // nodes): give it Loom's export of the validated, sorted import.
  auto Source = std::make_unique<onnx::ModelProto>();
  if (Error E = exportModelToProto(Old, *Source))
    return Fail(toString(std::move(E)));
  auto Upgraded = std::make_shared<onnx::ModelProto>(*Source);
  // Before IR version 4 the converter sees only initializers that are also
  // graph inputs; Loom accepts the others (text-syntax weights) everywhere.
  int64_t IRVersion = Upgraded->ir_version();
  if (IRVersion < 4)
    Upgraded->set_ir_version(4);
  try {
    // The converter's adapters also crash on nodes their schema rejects (an
    // Add without inputs): check every default-domain node against its
    // schema at the old opset first, as onnx::checker would.
    std::string Bad;
    forEachGraph(*Source, [&](onnx::GraphProto &GP) {
      for (const onnx::NodeProto &N : GP.node()) {
        if (!Bad.empty() || (!N.domain().empty() && N.domain() != "ai.onnx"))
          continue;
        const onnx::OpSchema *S =
            onnx::OpSchemaRegistry::Schema(N.op_type(), From, "");
        if (!S) {
          Bad = nodeDesc(N) + ": no such operator at opset " +
                std::to_string(From);
          continue;
        }
        S->Verify(N); // Throws onnx::ValidationError.
      }
    });
    if (!Bad.empty())
      return Fail(Bad);
    // Some adapters (legacy broadcast) need the shapes of intermediate
    // values; ONNX's Python convert_version infers them first too.
    guardConvPoolShapeInference();
    onnx::shape_inference::InferShapes(*Upgraded);
    // ConvertVersion would build a converter per call, copying every
    // schema of every opset twice (tens of milliseconds); convert_version
    // is const, so one converter serves every import.
    static const onnx::version_conversion::DefaultVersionConverter Converter;
    *Upgraded = Converter.convert_version(
        *Upgraded, onnx::OpSetID(getDefaultOpset(*Upgraded)),
        onnx::OpSetID(MinOpset));
  } catch (const std::exception &E) {
    return Fail(E.what());
  }
  Upgraded->set_ir_version(IRVersion);
  // The converter drops the external-data fields of initializers; the data
  // itself is unchanged, so restore them by name.
  StringMap<const onnx::TensorProto *> External;
  forEachGraph(*Source, [&](onnx::GraphProto &GP) {
    for (const onnx::TensorProto &TP : GP.initializer())
      if (TP.data_location() == onnx::TensorProto::EXTERNAL)
        External.try_emplace(TP.name(), &TP);
  });
  forEachGraph(*Upgraded, [&](onnx::GraphProto &GP) {
    for (onnx::TensorProto &TP : *GP.mutable_initializer())
      if (const onnx::TensorProto *Src = External.lookup(TP.name()))
        TP.CopyFrom(*Src);
  });
  if (getDefaultOpset(*Upgraded) != MinOpset)
    return Fail("the converter did not produce opset " + Twine(MinOpset).str());
  MP = std::move(Upgraded);
  return Error::success();
}

/// Counts the nodes and values of \p GP and its subgraphs into \p Nodes and
/// \p Values, refusing nesting deeper than ImportLimits::MaxSubgraphDepth on
/// the way down (so this walk, and every later recursive one, stays
/// shallow).
Error Importer::checkLimits(const onnx::GraphProto &GP, unsigned Depth,
                            uint64_t &Nodes, uint64_t &Values) {
  Nodes += GP.node_size();
  Values += (uint64_t)GP.input_size() + GP.output_size() +
            GP.initializer_size() + GP.value_info_size();
  if (Nodes > ImportLimits::MaxNodes)
    return fail("model has more than " + Twine(ImportLimits::MaxNodes) +
                " nodes (graph '" + GP.name() + "' alone has " +
                Twine(GP.node_size()) +
                "); refused as too large to plan "
                "within memory");
  if (Values > ImportLimits::MaxValues)
    return fail("model declares more than " + Twine(ImportLimits::MaxValues) +
                " values (inputs, outputs, initializers, value_info); "
                "refused as too large to plan within memory");
  for (const onnx::NodeProto &N : GP.node())
    for (const onnx::AttributeProto &A : N.attribute()) {
      if (!A.has_g() && A.graphs_size() == 0)
        continue;
      if (Depth == ImportLimits::MaxSubgraphDepth)
        return fail("graph '" + GP.name() + "': " + nodeDesc(N) +
                    " nests subgraphs deeper than " +
                    Twine(ImportLimits::MaxSubgraphDepth) + " levels");
      if (A.has_g())
        if (Error E = checkLimits(A.g(), Depth + 1, Nodes, Values))
          return E;
      for (const onnx::GraphProto &Sub : A.graphs())
        if (Error E = checkLimits(Sub, Depth + 1, Nodes, Values))
          return E;
    }
  return Error::success();
}

Expected<std::unique_ptr<Model>> Importer::run() {
  if (MP->functions_size())
    return fail("model-local function '" + MP->functions(0).name() +
                "' is not supported; inline functions before planning");
  if (!MP->has_graph())
    return fail("model has no graph");
  uint64_t Nodes = 0, Values = 0;
  if (Error E = checkLimits(MP->graph(), 0, Nodes, Values))
    return std::move(E);
  if (MP->opset_import_size() == 0)
    return fail("model imports no opset");
  StringSet<> Domains;
  for (const onnx::OperatorSetIdProto &O : MP->opset_import()) {
    std::string D = O.domain() == "ai.onnx" ? "" : O.domain();
    if (!Domains.insert(D).second)
      return fail("opset for domain '" + D + "' is imported twice");
  }
  int64_t V = getDefaultOpset(*MP);
  if (V != 0 && (V < 1 || V > MaxOpset))
    return fail("default-domain opset " + Twine(V) +
                " is outside the supported range 1-" + Twine(MaxOpset));
  for (const onnx::OperatorSetIdProto &O : MP->opset_import())
    if (O.domain() == "ai.onnx.ml" &&
        (O.version() < 1 || O.version() > MaxMLOpset))
      return fail("ai.onnx.ml opset " + Twine(O.version()) +
                  " is outside the supported range 1-" + Twine(MaxMLOpset));
  if (MP->ir_version() > MaxIRVersion)
    return fail("IR version " + Twine(MP->ir_version()) +
                " is newer than Loom reads (up to " + Twine(MaxIRVersion) +
                ", ONNX 1.18)");
  if (V == 0 || V >= MinOpset) {
    // The structural checks (names, duplicates, order) first, then every
    // node against its schema at the model's opset.
    Expected<std::unique_ptr<Model>> M = build();
    if (!M)
      return M.takeError();
    if (Error E = checkKnownOps(*MP))
      return fail(toString(std::move(E)));
    return M;
  }

  Importer Old(MP, Buffer, BaseDir, IsText, /*Stats=*/nullptr);
  Expected<std::unique_ptr<Model>> OldModel = Old.build();
  if (!OldModel)
    return OldModel.takeError();
  if (Error E = upgradeOpset(**OldModel, V))
    return std::move(E);
  return build();
}

Expected<std::unique_ptr<Model>> Importer::build() {
  const onnx::ModelProto &P = *MP;
  auto M = std::make_unique<Model>();
  M->IRVersion = P.ir_version();
  M->ProducerName = P.producer_name();
  M->ProducerVersion = P.producer_version();
  M->Domain = P.domain();
  M->ModelVersion = P.model_version();
  M->DocString = P.doc_string();
  M->BaseDir = BaseDir;
  M->SourcePath = Buffer;
  for (const auto &KV : P.metadata_props())
    M->MetadataProps.emplace_back(KV.key(), KV.value());
  for (const onnx::OperatorSetIdProto &O : P.opset_import())
    M->Opsets.push_back({O.domain(), O.version()});
  M->getGraph().setName(P.graph().name());
  if (Error E = importGraph(P.graph(), M->getGraph()))
    return std::move(E);
  return std::move(M);
}

//===----------------------------------------------------------------------===//
// Entry points (ImportModel.cpp: the files and buffers)
//===----------------------------------------------------------------------===//

/// Runs the importer; anything ONNX or protobuf throws becomes an error.
Expected<std::unique_ptr<Model>>
runImporter(std::shared_ptr<onnx::ModelProto> MP, StringRef BufferName,
            StringRef BaseDir, bool IsText, ImportStats *Stats) {
  try {
    lowerSequenceLoops(*MP);
    Importer I(std::move(MP), BufferName, BaseDir, IsText, Stats);
    return I.run();
  } catch (const std::exception &E) {
    return createStringError(inconvertibleErrorCode(), "%s: error: %s",
                             BufferName.str().c_str(), E.what());
  }
}

} // namespace loom
