//===- Exporter.cpp - loom::Model to ONNX, checker, shape inference -------===//
#include "ProtoTensorData.h"
#include "loom/IR/ShapeChecks.h"
#include "loom/ONNX/ONNX.h"
#include "onnx/checker.h"
#include "onnx/shape_inference/implementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"
#ifdef __linux__
#include <fcntl.h>
#endif

using namespace llvm;

namespace loom {

namespace {

/// Location written for parameters that have no data; the file never exists,
/// so re-importing yields shape-only parameters again (DESIGN §8: planning at
/// full scale without weights).
constexpr const char *ShapeOnlyLocation = "loom-shape-only.bin";

class Exporter {
public:
  explicit Exporter(const ExportOptions &Opts) : Opts(Opts) {}
  Error exportModel(const Model &M, onnx::ModelProto &P);

private:
  Error exportGraph(const Graph &G, onnx::GraphProto &GP);
  Error exportTensor(const Tensor &T, onnx::TensorProto &TP);
  Error exportAttribute(const Attribute &A, onnx::AttributeProto &AP);
  const ExportOptions &Opts;
  uint64_t ExternalOffset = 0;
};

} // namespace

static void exportType(const TensorType &T, onnx::TypeProto &TP) {
  if (T.Elem == DataType::Undefined && !T.HasShape)
    return;
  onnx::TypeProto::Tensor *TT = TP.mutable_tensor_type();
  TT->set_elem_type(static_cast<int32_t>(T.Elem));
  if (!T.HasShape)
    return;
  onnx::TensorShapeProto *S = TT->mutable_shape();
  for (const Dim &D : T.Dims) {
    onnx::TensorShapeProto::Dimension *PD = S->add_dim();
    if (D.isStatic())
      PD->set_dim_value(D.Size);
    else if (D.isSymbolic())
      PD->set_dim_param(D.Symbol);
  }
}

static void exportValueInfo(StringRef Name, const TensorType &T,
                            onnx::ValueInfoProto &VI) {
  VI.set_name(Name.str());
  onnx::TypeProto TP;
  exportType(T, TP);
  if (TP.has_tensor_type())
    *VI.mutable_type() = std::move(TP);
}

Error Exporter::exportTensor(const Tensor &T, onnx::TensorProto &TP) {
  if (T.Data) {
    if (auto *PD = dynamic_cast<const ProtoTensorData *>(T.Data.get())) {
      TP.CopyFrom(PD->getProto());
      TP.set_name(T.Name);
      return Error::success();
    }
  }
  TP.set_name(T.Name);
  TP.set_data_type(static_cast<int32_t>(T.Type.Elem));
  for (const Dim &D : T.Type.Dims)
    TP.add_dims(D.Size);
  auto SetExternal = [&](StringRef Loc, uint64_t Off, uint64_t Len) {
    TP.set_data_location(onnx::TensorProto::EXTERNAL);
    auto Add = [&](const char *K, const std::string &V) {
      onnx::StringStringEntryProto *E = TP.add_external_data();
      E->set_key(K);
      E->set_value(V);
    };
    Add("location", Loc.str());
    Add("offset", std::to_string(Off));
    Add("length", std::to_string(Len));
  };
  if (!T.Data) {
    SetExternal(ShapeOnlyLocation, 0, T.Type.getSizeInBytes().getValueOr(0));
    return Error::success();
  }
  if (T.Data->getKind() == TensorData::Kind::External) {
    SetExternal(T.Data->getLocation(), T.Data->getOffset(), T.Data->getSize());
    return Error::success();
  }
  Expected<ArrayRef<char>> B = T.Data->getBytes();
  if (!B)
    return B.takeError();
  if (T.Type.Elem == DataType::String) {
    Expected<std::vector<std::string>> Strings =
        decodeStrings(*B, T.Type.getNumElements().getValueOr(0));
    if (!Strings)
      return createStringError(inconvertibleErrorCode(), "tensor '%s': %s",
                               T.Name.c_str(),
                               toString(Strings.takeError()).c_str());
    for (std::string &S : *Strings)
      TP.add_string_data(std::move(S));
    return Error::success();
  }
  TP.set_raw_data(B->data(), B->size());
  return Error::success();
}

Error Exporter::exportAttribute(const Attribute &A, onnx::AttributeProto &AP) {
  AP.set_name(A.Name);
  switch (A.K) {
  case Attribute::Kind::Float:
    AP.set_type(onnx::AttributeProto::FLOAT);
    AP.set_f(A.F);
    break;
  case Attribute::Kind::Int:
    AP.set_type(onnx::AttributeProto::INT);
    AP.set_i(A.I);
    break;
  case Attribute::Kind::String:
    AP.set_type(onnx::AttributeProto::STRING);
    AP.set_s(A.S);
    break;
  case Attribute::Kind::Floats:
    AP.set_type(onnx::AttributeProto::FLOATS);
    for (float F : A.Fs)
      AP.add_floats(F);
    break;
  case Attribute::Kind::Ints:
    AP.set_type(onnx::AttributeProto::INTS);
    for (int64_t I : A.Is)
      AP.add_ints(I);
    break;
  case Attribute::Kind::Strings:
    AP.set_type(onnx::AttributeProto::STRINGS);
    for (const std::string &S : A.Ss)
      AP.add_strings(S);
    break;
  case Attribute::Kind::Tensor:
    AP.set_type(onnx::AttributeProto::TENSOR);
    if (A.Ts.size() != 1)
      return createStringError(inconvertibleErrorCode(),
                               "attribute '%s' must hold one tensor",
                               A.Name.c_str());
    return exportTensor(A.Ts[0], *AP.mutable_t());
  case Attribute::Kind::Tensors:
    AP.set_type(onnx::AttributeProto::TENSORS);
    for (const Tensor &T : A.Ts)
      if (Error E = exportTensor(T, *AP.add_tensors()))
        return E;
    break;
  case Attribute::Kind::Graph:
    AP.set_type(onnx::AttributeProto::GRAPH);
    if (A.Gs.size() != 1)
      return createStringError(inconvertibleErrorCode(),
                               "attribute '%s' must hold one graph",
                               A.Name.c_str());
    return exportGraph(*A.Gs[0], *AP.mutable_g());
  case Attribute::Kind::Graphs:
    AP.set_type(onnx::AttributeProto::GRAPHS);
    for (const auto &G : A.Gs)
      if (Error E = exportGraph(*G, *AP.add_graphs()))
        return E;
    break;
  }
  return Error::success();
}

Error Exporter::exportGraph(const Graph &G, onnx::GraphProto &GP) {
  GP.set_name(G.getName().str());
  if (!G.DocString.empty())
    GP.set_doc_string(G.DocString);
  for (const Value *V : G.getInputs())
    exportValueInfo(V->getName(), V->Type, *GP.add_input());
  for (const Value *P : G.getParameters()) {
    bool Small = P->Data && P->Data->getSize() <= Opts.SmallParameterBytes;
    if (!Opts.IncludeParameterData && !Small) {
      exportValueInfo(P->getName(), P->Type, *GP.add_input());
      continue;
    }
    if (P->AlsoGraphInput)
      exportValueInfo(P->getName(), P->Type, *GP.add_input());
    Tensor T;
    T.Name = P->getName().str();
    T.Type = P->Type;
    T.Data = P->Data;
    if (!Opts.ExternalDataLocation.empty() && P->Data &&
        G.getParent() == nullptr && P->Type.Elem != DataType::String &&
        P->Data->getSize() >= Opts.ExternalMinBytes) {
      uint64_t Size = P->Data->getSize();
      ExternalOffset = alignTo(ExternalOffset, 4096);
      onnx::TensorProto &TP = *GP.add_initializer();
      TP.set_name(T.Name);
      TP.set_data_type(static_cast<int32_t>(T.Type.Elem));
      for (const Dim &D : T.Type.Dims)
        TP.add_dims(D.Size);
      TP.set_data_location(onnx::TensorProto::EXTERNAL);
      auto Add = [&](const char *K, const std::string &V) {
        onnx::StringStringEntryProto *E = TP.add_external_data();
        E->set_key(K);
        E->set_value(V);
      };
      Add("location", Opts.ExternalDataLocation);
      Add("offset", std::to_string(ExternalOffset));
      Add("length", std::to_string(Size));
      if (Opts.ExternalLayout)
        Opts.ExternalLayout->push_back({P->Data, ExternalOffset, Size});
      ExternalOffset += Size;
      continue;
    }
    if (!Opts.ExternalDataLocation.empty() && P->Data &&
        P->Type.Elem != DataType::String &&
        !dynamic_cast<const ProtoTensorData *>(P->Data.get())) {
      // A small parameter of a self-contained output: its bytes inline,
      // wherever the source kept them (a slice of source external data
      // must not point into the source's file).
      onnx::TensorProto &TP = *GP.add_initializer();
      TP.set_name(T.Name);
      TP.set_data_type(static_cast<int32_t>(T.Type.Elem));
      for (const Dim &D : T.Type.Dims)
        TP.add_dims(D.Size);
      std::string Bytes(P->Data->getSize(), '\0');
      if (Error E = P->Data->readAll(Bytes.data()))
        return E;
      TP.set_raw_data(std::move(Bytes));
      continue;
    }
    if (Error E = exportTensor(T, *GP.add_initializer()))
      return E;
  }
  DenseSet<const Value *> Outputs(G.getOutputs().begin(), G.getOutputs().end());
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    onnx::NodeProto *P = GP.add_node();
    P->set_op_type(N.getOpType().str());
    if (!N.getDomain().empty())
      P->set_domain(N.getDomain().str());
    if (!N.getName().empty())
      P->set_name(N.getName().str());
    if (!N.DocString.empty())
      P->set_doc_string(N.DocString);
    for (const Value *V : N.getInputs())
      P->add_input(V ? V->getName().str() : "");
    for (const Value *V : N.getOutputs())
      P->add_output(V ? V->getName().str() : "");
    for (const Attribute &A : N.getAttributes())
      if (Error E = exportAttribute(A, *P->add_attribute()))
        return E;
    if (!Opts.IncludeValueInfo)
      continue;
    for (const Value *V : N.getOutputs())
      if (V && !Outputs.count(V) &&
          (V->Type.Elem != DataType::Undefined || V->Type.HasShape))
        exportValueInfo(V->getName(), V->Type, *GP.add_value_info());
  }
  for (const Value *V : G.getOutputs())
    exportValueInfo(V->getName(), V->Type, *GP.add_output());
  return Error::success();
}

Error Exporter::exportModel(const Model &M, onnx::ModelProto &P) {
  P.set_ir_version(M.IRVersion);
  if (!M.ProducerName.empty())
    P.set_producer_name(M.ProducerName);
  if (!M.ProducerVersion.empty())
    P.set_producer_version(M.ProducerVersion);
  if (!M.Domain.empty())
    P.set_domain(M.Domain);
  if (M.ModelVersion)
    P.set_model_version(M.ModelVersion);
  if (!M.DocString.empty())
    P.set_doc_string(M.DocString);
  for (const auto &KV : M.MetadataProps) {
    onnx::StringStringEntryProto *E = P.add_metadata_props();
    E->set_key(KV.first);
    E->set_value(KV.second);
  }
  for (const OpsetImport &O : M.Opsets) {
    onnx::OperatorSetIdProto *OP = P.add_opset_import();
    OP->set_domain(O.Domain);
    OP->set_version(O.Version);
  }
  return exportGraph(M.getGraph(), *P.mutable_graph());
}

static Error exportToProto(const Model &M, const ExportOptions &Opts,
                           onnx::ModelProto &P) {
  try {
    Exporter E(Opts);
    return E.exportModel(M, P);
  } catch (const std::exception &E) {
    return createStringError(inconvertibleErrorCode(), "cannot export: %s",
                             E.what());
  }
}

Error exportModelToProto(const Model &M, onnx::ModelProto &P) {
  return exportToProto(M, ExportOptions(), P);
}

Expected<std::string> exportModel(const Model &M, const ExportOptions &Opts) {
  onnx::ModelProto P;
  if (Error E = exportToProto(M, Opts, P))
    return std::move(E);
  std::string Bytes;
  if (!P.SerializeToString(&Bytes))
    return createStringError(inconvertibleErrorCode(),
                             "cannot serialize the model (larger than 2 GiB "
                             "without external data?)");
  return Bytes;
}

Error writeModelFile(const Model &M, StringRef Path,
                     const ExportOptions &Opts) {
  Expected<std::string> Bytes = exportModel(M, Opts);
  if (!Bytes)
    return Bytes.takeError();
  std::error_code EC;
  raw_fd_ostream OS(Path, EC, sys::fs::OF_None);
  if (EC)
    return createStringError(EC, "cannot write '%s': %s", Path.str().c_str(),
                             EC.message().c_str());
  OS << *Bytes;
  OS.close();
  if (OS.has_error())
    return createStringError(OS.error(), "cannot write '%s'",
                             Path.str().c_str());
  return Error::success();
}

Error writeExternalData(ArrayRef<ExportOptions::ExternalEntry> Layout,
                        StringRef Path) {
  uint64_t Total = 0;
  for (const ExportOptions::ExternalEntry &E : Layout)
    Total = std::max(Total, E.Offset + E.Size);
  auto CannotWrite = [&](std::error_code EC) {
    return createStringError(EC, "cannot write '%s': %s", Path.str().c_str(),
                             EC.message().c_str());
  };
  Expected<sys::fs::file_t> FD = sys::fs::openNativeFileForWrite(
      Path, sys::fs::CD_CreateAlways, sys::fs::OF_None);
  if (!FD)
    return CannotWrite(errorToErrorCode(FD.takeError()));
  auto Close = make_scope_exit([&] { sys::fs::closeFile(*FD); });
  // Tensor by tensor, each written at its offset with positioned writes;
  // the gaps (alignment padding) stay holes that read as zeros.
  for (const ExportOptions::ExternalEntry &E : Layout) {
    if (!E.Size)
      continue;
    if (Error Err = E.Data->writeTo(*FD, E.Offset))
      return createStringError(inconvertibleErrorCode(),
                               "cannot write '%s': %s", Path.str().c_str(),
                               toString(std::move(Err)).c_str());
#ifdef __linux__
    // Start writing this tensor back now (without waiting for it), so that
    // the disk works while the next tensors are copied instead of all at
    // the end.
    ::sync_file_range(*FD, E.Offset, E.Size, SYNC_FILE_RANGE_WRITE);
#endif
  }
  if (std::error_code EC = sys::fs::resize_file(*FD, Total))
    return CannotWrite(EC);
  return Error::success();
}

Error checkModel(const Model &M, bool ParameterData) {
  registerHcclSchemas();
  registerOpsetSchemas();
  onnx::ModelProto P;
  // Shape-only parameters have no data to check: the checker sees them as
  // typed inputs.
  ExportOptions Opts;
  Opts.IncludeParameterData = ParameterData;
  if (any_of(M.getGraph().getParameters(),
             [](const Value *V) { return V->isShapeOnly(); })) {
    Opts.IncludeParameterData = false;
    Opts.SmallParameterBytes = 0;
  }
  if (Error E = exportToProto(M, Opts, P))
    return E;
  try {
    onnx::checker::CheckerContext Ctx;
    Ctx.set_ir_version(static_cast<int>(P.ir_version()));
    std::unordered_map<std::string, int> Opsets;
    for (const auto &O : P.opset_import())
      Opsets[O.domain()] = static_cast<int>(O.version());
    Ctx.set_opset_imports(Opsets);
    Ctx.set_model_dir(M.BaseDir);
    onnx::checker::LexicalScopeContext Scope;
    onnx::checker::check_graph(P.graph(), Ctx, Scope);
  } catch (const std::exception &E) {
    return createStringError(inconvertibleErrorCode(), "ONNX checker: %s",
                             E.what());
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Shape inference
//===----------------------------------------------------------------------===//

static Expected<bool> mergeType(Value &V, const TensorType &Inf) {
  TensorType &Cur = V.Type;
  auto Conflict = [&]() {
    std::string Where;
    if (const Node *D = V.getDefiningNode())
      Where = "node '" +
              (D->getName().empty() ? "%" + V.getName().str()
                                    : D->getName().str()) +
              "' (" + D->getQualifiedOpType() + "): ";
    return createStringError(inconvertibleErrorCode(),
                             "%sshape inference: value '%s' has type %s but "
                             "ONNX infers %s",
                             Where.c_str(), V.getName().str().c_str(),
                             Cur.str().c_str(), Inf.str().c_str());
  };
  bool Changed = false;
  if (Cur.Elem == DataType::Undefined && Inf.Elem != DataType::Undefined) {
    Cur.Elem = Inf.Elem;
    Changed = true;
  } else if (Inf.Elem != DataType::Undefined && Cur.Elem != Inf.Elem) {
    return Conflict();
  }
  if (!Inf.HasShape)
    return Changed;
  if (!Cur.HasShape) {
    Cur.HasShape = true;
    Cur.Dims = Inf.Dims;
    return true;
  }
  if (Cur.Dims.size() != Inf.Dims.size())
    return Conflict();
  for (unsigned I = 0; I < Cur.Dims.size(); ++I) {
    Dim &C = Cur.Dims[I];
    const Dim &N = Inf.Dims[I];
    if (C.isStatic()) {
      if (N.isStatic() && N.Size != C.Size)
        return Conflict();
      continue;
    }
    if (N.isStatic() || (!C.isSymbolic() && N.isSymbolic())) {
      C = N;
      Changed = true;
    }
  }
  return Changed;
}

static TensorType importInferredType(const onnx::TypeProto &T) {
  TensorType TT;
  if (!T.has_tensor_type())
    return TT;
  const auto &TP = T.tensor_type();
  if (isKnownDataTypeCode(TP.elem_type()))
    TT.Elem = static_cast<DataType>(TP.elem_type());
  if (!TP.has_shape())
    return TT;
  TT.HasShape = true;
  for (const auto &D : TP.shape().dim()) {
    if (D.has_dim_value() && D.dim_value() >= 0)
      TT.Dims.push_back(Dim(D.dim_value()));
    else if (D.has_dim_param() && !D.dim_param().empty())
      TT.Dims.push_back(Dim::symbol(D.dim_param()));
    else
      TT.Dims.push_back(Dim());
  }
  return TT;
}

static Error mergeGraph(Graph &G, const onnx::GraphProto &GP,
                        unsigned &Changed) {
  auto MergeVI = [&](const onnx::ValueInfoProto &VI) -> Error {
    Value *V = G.lookupLocal(VI.name());
    if (!V || !V->getDefiningNode() || !VI.has_type())
      return Error::success();
    Expected<bool> C = mergeType(*V, importInferredType(VI.type()));
    if (!C)
      return C.takeError();
    Changed += *C;
    return Error::success();
  };
  for (const auto &VI : GP.value_info())
    if (Error E = MergeVI(VI))
      return E;
  for (const auto &VI : GP.output())
    if (Error E = MergeVI(VI))
      return E;
  // Subgraphs: the exporter kept node and attribute order.
  if ((int)G.getNumNodes() != GP.node_size())
    return Error::success();
  for (int I = 0; I < GP.node_size(); ++I) {
    Node &N = *G.getNodes()[I];
    const onnx::NodeProto &NP = GP.node(I);
    unsigned A = 0;
    for (const Attribute &Attr : N.getAttributes()) {
      if (A >= (unsigned)NP.attribute_size())
        break;
      const onnx::AttributeProto &AP = NP.attribute(A++);
      if (Attr.K == Attribute::Kind::Graph && AP.has_g()) {
        if (Error E = mergeGraph(*Attr.Gs[0], AP.g(), Changed))
          return E;
      } else if (Attr.K == Attribute::Kind::Graphs) {
        for (unsigned J = 0; J < Attr.Gs.size() && (int)J < AP.graphs_size();
             ++J)
          if (Error E = mergeGraph(*Attr.Gs[J], AP.graphs(J), Changed))
            return E;
      }
    }
  }
  return Error::success();
}

/// Names the unnamed nodes of \p GP (and its subgraphs) "%FIRST_OUTPUT",
/// as Loom's messages do, so that ONNX's errors say which node failed.
static void nameUnnamedNodes(onnx::GraphProto &GP) {
  for (onnx::NodeProto &N : *GP.mutable_node()) {
    if (N.name().empty())
      for (const std::string &O : N.output())
        if (!O.empty()) {
          N.set_name("%" + O);
          break;
        }
    for (onnx::AttributeProto &A : *N.mutable_attribute()) {
      if (A.has_g())
        nameUnnamedNodes(*A.mutable_g());
      for (onnx::GraphProto &Sub : *A.mutable_graphs())
        nameUnnamedNodes(Sub);
    }
  }
}

/// ONNX's "[ShapeInferenceError] Shape inference error(s): (op_type:Add,
/// node name: %y): [ShapeInferenceError] Incompatible dimensions" as
/// "node '%y' (Add): shape inference: Incompatible dimensions".
static std::string describeShapeInferenceError(StringRef Msg) {
  Msg = Msg.trim();
  Regex Where("\\(op_type:([^,)]*), node name: ([^)]*)\\): *(.*)$");
  SmallVector<StringRef, 4> M;
  std::string Rest;
  std::string Prefix;
  if (Where.match(Msg, &M)) {
    Prefix = "node '" + M[2].str() + "' (" + M[1].str() + "): ";
    Rest = M[3].str();
  } else {
    Rest = Msg.str();
  }
  // Drop ONNX's repeated "[ShapeInferenceError] " tags.
  StringRef R = Rest;
  while (R.consume_front("[ShapeInferenceError]") ||
         R.consume_front("[TypeInferenceError]"))
    R = R.ltrim();
  R.consume_front("Shape inference error(s):");
  return Prefix + "shape inference failed: " + R.trim().str();
}

Expected<unsigned> inferShapes(Model &M) {
  registerHcclSchemas();
  registerOpsetSchemas();
  guardConvPoolShapeInference();
  // On an arena: the proto lives for this call only, and a large model's
  // thousands of messages are freed at once (the 10T MoE's search runs
  // this twice, on the planning and the micro-batch graph).
  google::protobuf::Arena Arena;
  onnx::ModelProto &P =
      *google::protobuf::Arena::CreateMessage<onnx::ModelProto>(&Arena);
  ExportOptions Opts;
  Opts.IncludeParameterData = false;
  if (Error E = exportToProto(M, Opts, P))
    return std::move(E);
  nameUnnamedNodes(*P.mutable_graph());
  try {
    // ONNX 1.12 cannot parse the type strings of float8 and 4-bit types:
    // a model that carries them is inferred without its type check (the
    // importer checked every node against its schema already).
    onnx::ShapeInferenceOptions SIO(
        /*check_type=*/!usesPostONNX112Types(P), /*strict_mode=*/1,
        /*data_prop=*/true);
    onnx::shape_inference::InferShapes(P, onnx::OpSchemaRegistry::Instance(),
                                       SIO);
  } catch (const std::exception &E) {
    return make_error<StringError>(describeShapeInferenceError(E.what()),
                                   inconvertibleErrorCode());
  }
  unsigned Changed = 0;
  if (Error E = mergeGraph(M.getGraph(), P.graph(), Changed))
    return std::move(E);
  if (Error E = checkStaticShapes(M.getGraph()))
    return std::move(E);
  return Changed;
}

} // namespace loom
