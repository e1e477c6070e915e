//===- Graph.cpp - Loom's dataflow graph IR -------------------------------===//
#include "loom/IR/Graph.h"
#include "loom/IR/Subgraphs.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cstring>

using namespace llvm;

namespace loom {

//===----------------------------------------------------------------------===//
// TensorType
//===----------------------------------------------------------------------===//

TensorType::TensorType(DataType Elem, ArrayRef<int64_t> Shape)
    : Elem(Elem), HasShape(true) {
  for (int64_t D : Shape)
    Dims.push_back(Dim(D));
}

bool TensorType::isStatic() const {
  if (!HasShape)
    return false;
  for (const Dim &D : Dims)
    if (!D.isStatic())
      return false;
  return true;
}

Optional<int64_t> TensorType::getNumElements() const {
  if (!isStatic())
    return None;
  int64_t N = 1;
  for (const Dim &D : Dims)
    if (MulOverflow(N, D.Size, N))
      return None;
  return N;
}

Optional<int64_t> TensorType::getSizeInBytes() const {
  Optional<int64_t> N = getNumElements();
  if (!N)
    return None;
  // 4-bit types pack two elements to a byte (an odd count rounds up).
  return getStorageBytes(Elem, *N);
}

SmallVector<int64_t, 4> TensorType::getStaticShape() const {
  SmallVector<int64_t, 4> S;
  for (const Dim &D : Dims)
    S.push_back(D.Size);
  return S;
}

void TensorType::print(raw_ostream &OS) const {
  OS << getDataTypeName(Elem);
  if (!HasShape) {
    OS << "[*]";
    return;
  }
  OS << '[';
  for (unsigned I = 0; I < Dims.size(); ++I) {
    if (I)
      OS << ',';
    if (Dims[I].isStatic())
      OS << Dims[I].Size;
    else if (Dims[I].isSymbolic())
      OS << Dims[I].Symbol;
    else
      OS << '?';
  }
  OS << ']';
}

std::string TensorType::str() const {
  std::string S;
  raw_string_ostream OS(S);
  print(OS);
  return OS.str();
}

Attribute::~Attribute() = default;

//===----------------------------------------------------------------------===//
// Node
//===----------------------------------------------------------------------===//

const Attribute *Node::getAttribute(StringRef N) const {
  for (const Attribute &A : Attrs)
    if (A.Name == N)
      return &A;
  return nullptr;
}

int64_t Node::getAttrInt(StringRef N, int64_t Default) const {
  const Attribute *A = getAttribute(N);
  return A && A->K == Attribute::Kind::Int ? A->I : Default;
}

float Node::getAttrFloat(StringRef N, float Default) const {
  const Attribute *A = getAttribute(N);
  return A && A->K == Attribute::Kind::Float ? A->F : Default;
}

StringRef Node::getAttrString(StringRef N, StringRef Default) const {
  const Attribute *A = getAttribute(N);
  return A && A->K == Attribute::Kind::String ? StringRef(A->S) : Default;
}

Optional<std::vector<int64_t>> Node::getAttrInts(StringRef N) const {
  const Attribute *A = getAttribute(N);
  if (!A || A->K != Attribute::Kind::Ints)
    return None;
  return A->Is;
}

std::string Node::getQualifiedOpType() const {
  if (Domain.empty() || Domain == "ai.onnx")
    return OpType;
  return Domain + "." + OpType;
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

Graph::~Graph() = default;

Value *Graph::createValue(StringRef N, Value::Kind K) {
  Values.push_back(std::make_unique<Value>());
  Value *V = Values.back().get();
  V->Name = N.str();
  V->K = K;
  V->Owner = this;
  ValuesByName[N] = V;
  return V;
}

static Error duplicateValue(StringRef Graph, StringRef Name) {
  return createStringError(inconvertibleErrorCode(),
                           "duplicate definition of value '%s' in graph '%s'",
                           Name.str().c_str(), Graph.str().c_str());
}

Expected<Value *> Graph::addInput(StringRef N, TensorType T) {
  if (ValuesByName.count(N))
    return duplicateValue(Name, N);
  Value *V = createValue(N, Value::Kind::Input);
  V->Type = std::move(T);
  Inputs.push_back(V);
  return V;
}

Expected<Value *> Graph::addParameter(StringRef N, TensorType T,
                                      std::shared_ptr<const TensorData> D) {
  if (ValuesByName.count(N))
    return duplicateValue(Name, N);
  Value *V = createValue(N, Value::Kind::Parameter);
  V->Type = std::move(T);
  V->Data = std::move(D);
  Parameters.push_back(V);
  return V;
}

Expected<Node *> Graph::addNode(StringRef OpType, StringRef Domain,
                                StringRef NodeName, ArrayRef<Value *> Ins,
                                ArrayRef<std::string> OutputNames) {
  for (unsigned I = 0; I < OutputNames.size(); ++I) {
    const std::string &O = OutputNames[I];
    // A name listed twice among this node's own results is a double
    // definition too.
    if (!O.empty() &&
        (ValuesByName.count(O) || is_contained(OutputNames.take_front(I), O)))
      return createStringError(
          inconvertibleErrorCode(),
          "node '%s' (%s): duplicate definition of value '%s'",
          NodeName.str().c_str(), OpType.str().c_str(), O.c_str());
  }
  Nodes.push_back(std::make_unique<Node>());
  Node *N = Nodes.back().get();
  N->OpType = OpType.str();
  N->Domain = Domain.str();
  N->Name = NodeName.str();
  N->Owner = this;
  N->Inputs.assign(Ins.begin(), Ins.end());
  for (unsigned I = 0; I < OutputNames.size(); ++I) {
    if (OutputNames[I].empty()) {
      N->Outputs.push_back(nullptr);
      continue;
    }
    Value *V = createValue(OutputNames[I], Value::Kind::Result);
    V->Def = N;
    V->ResultNo = I;
    N->Outputs.push_back(V);
  }
  return N;
}

Expected<Node *> Graph::insertNode(unsigned Pos, StringRef OpType,
                                   StringRef Domain, StringRef NodeName,
                                   ArrayRef<Value *> Ins,
                                   ArrayRef<std::string> OutputNames) {
  assert(Pos <= Nodes.size() && "insertion point out of range");
  Expected<Node *> N = addNode(OpType, Domain, NodeName, Ins, OutputNames);
  if (N)
    std::rotate(Nodes.begin() + Pos, Nodes.end() - 1, Nodes.end());
  return N;
}

void Graph::moveResult(Value *V, Node *To, unsigned Slot) {
  assert(V->Def && V->Def->Owner == this && To->Owner == this &&
         "a result of this graph moves to a node of this graph");
  V->Def->Outputs[V->ResultNo] = nullptr;
  if (To->Outputs.size() <= Slot)
    To->Outputs.resize(Slot + 1, nullptr);
  To->Outputs[Slot] = V;
  V->Def = To;
  V->ResultNo = Slot;
}

std::string Graph::getFreshName(StringRef Base) const {
  std::string Name = Base.str();
  for (unsigned I = 1; ValuesByName.count(Name); ++I)
    Name = (Base + "_" + Twine(I)).str();
  return Name;
}

Value *Graph::lookup(StringRef N) const {
  for (const Graph *G = this; G; G = G->Parent)
    if (Value *V = G->lookupLocal(N))
      return V;
  return nullptr;
}

unsigned Graph::countNodesRecursively() const {
  unsigned Count = 0;
  for (const auto &N : Nodes) {
    ++Count;
    for (const Attribute &A : N->getAttributes())
      for (const auto &G : A.Gs)
        Count += G->countNodesRecursively();
  }
  return Count;
}

Node *Graph::replaceWithConstant(Node *Old, Tensor T) {
  for (unsigned I = 0; I < Nodes.size(); ++I)
    if (Nodes[I].get() == Old)
      return replaceWithConstant(I, std::move(T));
  llvm_unreachable("node not in graph");
}

Node *Graph::replaceWithConstant(unsigned Index, Tensor T) {
  Node *Old = Nodes[Index].get();
  auto NewNode = std::make_unique<Node>();
  NewNode->OpType = "Constant";
  NewNode->Name = Old->Name;
  NewNode->Owner = this;
  NewNode->Layer = Old->Layer;
  Value *Out = Old->Outputs.empty() ? nullptr : Old->Outputs[0];
  assert(Out && "folded node must have a result");
  // Other outputs of a multi-output node must be dead; drop them.
  for (unsigned I = 1; I < Old->Outputs.size(); ++I)
    if (Value *V = Old->Outputs[I])
      ValuesByName.erase(V->Name);
  NewNode->Outputs.push_back(Out);
  Out->Def = NewNode.get();
  Out->ResultNo = 0;
  Out->Type = T.Type;
  Attribute A;
  A.Name = "value";
  A.K = Attribute::Kind::Tensor;
  T.Name = "";
  A.Ts.push_back(std::move(T));
  NewNode->Attrs.push_back(std::move(A));
  Nodes[Index] = std::move(NewNode);
  return Nodes[Index].get();
}

static void countUses(const Graph &G,
                      DenseMap<const Value *, unsigned> &Counts) {
  for (const auto &N : G.getNodes()) {
    for (const Value *V : N->getInputs())
      if (V)
        ++Counts[V];
    for (const Attribute &A : N->getAttributes())
      for (const auto &Sub : A.Gs)
        countUses(*Sub, Counts);
  }
  for (const Value *V : G.getOutputs())
    ++Counts[V];
}

DenseMap<const Value *, unsigned> Graph::computeUseCounts() const {
  DenseMap<const Value *, unsigned> Counts;
  countUses(*this, Counts);
  return Counts;
}

Error Graph::renameValue(Value *V, StringRef NewName) {
  if (ValuesByName.count(NewName))
    return duplicateValue(Name, NewName);
  ValuesByName.erase(V->Name);
  V->Name = NewName.str();
  ValuesByName[V->Name] = V;
  return Error::success();
}

void Graph::moveNode(Node *N, unsigned Index) {
  auto It = llvm::find_if(
      Nodes, [&](const std::unique_ptr<Node> &P) { return P.get() == N; });
  if (It == Nodes.end() || Index >= Nodes.size())
    return;
  unsigned From = It - Nodes.begin();
  std::unique_ptr<Node> Held = std::move(Nodes[From]);
  Nodes.erase(Nodes.begin() + From);
  Nodes.insert(Nodes.begin() + Index, std::move(Held));
}

void Graph::eraseNodes(function_ref<bool(const Node &)> Dead) {
  std::vector<std::unique_ptr<Node>> Kept;
  Kept.reserve(Nodes.size());
  for (auto &N : Nodes) {
    if (!Dead(*N)) {
      Kept.push_back(std::move(N));
      continue;
    }
    for (Value *V : N->Outputs)
      if (V)
        ValuesByName.erase(V->Name);
  }
  Nodes = std::move(Kept);
  // Values stay allocated (cheap) so dangling pointers cannot arise.
}

Value *Graph::turnResultIntoParameter(Node *N,
                                      std::shared_ptr<const TensorData> D) {
  assert(N->Owner == this && N->getNumOutputs() == 1 && N->Outputs[0] &&
         "one result to turn into a parameter");
  Value *V = N->Outputs[0];
  N->Outputs[0] = nullptr; // eraseNodes would drop the name.
  V->K = Value::Kind::Parameter;
  V->Def = nullptr;
  V->ResultNo = 0;
  V->Data = std::move(D);
  Parameters.push_back(V);
  return V;
}

Node *Graph::turnParameterIntoConstant(Value *P) {
  assert(P->Owner == this && P->isParameter() && P->Data &&
         "a parameter with data to turn into a constant");
  Parameters.erase(llvm::find(Parameters, P));
  Nodes.insert(Nodes.begin(), std::make_unique<Node>());
  Node *N = Nodes.front().get();
  N->OpType = "Constant";
  N->Name = P->Name;
  N->Owner = this;
  Attribute A;
  A.Name = "value";
  A.K = Attribute::Kind::Tensor;
  Tensor T;
  T.Name = P->Name;
  T.Type = P->Type;
  T.Data = std::move(P->Data);
  A.Ts.push_back(std::move(T));
  N->addAttribute(std::move(A));
  P->Data = nullptr;
  P->AlsoGraphInput = false;
  P->K = Value::Kind::Result;
  P->Def = N;
  P->ResultNo = 0;
  N->Outputs.push_back(P);
  return N;
}

void Graph::eraseDeadNodes() {
  llvm::DenseMap<const Value *, unsigned> Uses = computeUseCounts();
  llvm::DenseSet<const Node *> Dead;
  for (int I = (int)getNumNodes() - 1; I >= 0; --I) {
    const Node &N = *getNodes()[I];
    bool HasSubgraph = llvm::any_of(
        N.getAttributes(), [](const Attribute &A) { return !A.Gs.empty(); });
    if (HasSubgraph || N.getNumOutputs() == 0 ||
        llvm::any_of(N.getOutputs(),
                     [&](const Value *V) { return V && Uses.lookup(V); }))
      continue;
    Dead.insert(&N);
    for (const Value *V : N.getInputs())
      if (V && Uses.lookup(V))
        --Uses[V];
  }
  if (!Dead.empty())
    eraseNodes([&](const Node &N) { return Dead.count(&N); });
}

void Graph::eraseUnusedParameters() {
  DenseMap<const Value *, unsigned> Uses = computeUseCounts();
  std::vector<Value *> Kept;
  for (Value *P : Parameters) {
    if (Uses.lookup(P) || P->AlsoGraphInput)
      Kept.push_back(P);
    else
      ValuesByName.erase(P->Name);
  }
  Parameters = std::move(Kept);
}

int64_t Model::getOpsetVersion(StringRef D) const {
  bool Default = D.empty() || D == "ai.onnx";
  for (const OpsetImport &O : Opsets)
    if (O.Domain == D ||
        (Default && (O.Domain.empty() || O.Domain == "ai.onnx")))
      return O.Version;
  return 0;
}

uint64_t getTotalParameterBytes(const Graph &G) {
  uint64_t Total = 0;
  for (const Value *P : G.getParameters())
    if (Optional<int64_t> B = P->Type.getSizeInBytes())
      Total += *B;
  return Total;
}

StringRef getLayerKindName(LayerInfo::Kind K) {
  switch (K) {
  case LayerInfo::Kind::Prologue:
    return "prologue";
  case LayerInfo::Kind::Block:
    return "block";
  case LayerInfo::Kind::Epilogue:
    return "epilogue";
  case LayerInfo::Kind::Other:
    return "other";
  }
  return "other";
}

uint64_t getTotalParameterCount(const Graph &G) {
  uint64_t Total = 0;
  for (const Value *P : G.getParameters())
    if (Optional<int64_t> N = P->Type.getNumElements())
      Total += *N;
  return Total;
}

DenseSet<const Value *> findDataDependent(const Graph &G) {
  DenseSet<const Value *> DD;
  for (const Value *V : G.getInputs())
    DD.insert(V);
  for (const auto &NP : G.getNodes()) {
    bool Dep = any_of(NP->getInputs(),
                      [&](const Value *V) { return V && DD.count(V); });
    for (const Attribute &A : NP->getAttributes())
      if (A.K == Attribute::Kind::Graph || A.K == Attribute::Kind::Graphs)
        Dep = true;
    if (Dep)
      for (const Value *O : NP->getOutputs())
        if (O)
          DD.insert(O);
  }
  return DD;
}

DenseSet<const Value *> findConstantOnly(const Graph &G) {
  DenseSet<const Value *> C;
  for (const auto &NP : G.getNodes()) {
    bool Only =
        NP->getOpType() == "Constant" ||
        (NP->getNumInputs() > 0 && all_of(NP->getInputs(), [&](const Value *V) {
           return !V || C.count(V);
         }));
    for (const Attribute &A : NP->getAttributes())
      if (A.K == Attribute::Kind::Graph || A.K == Attribute::Kind::Graphs)
        Only = false;
    if (Only)
      for (const Value *O : NP->getOutputs())
        if (O)
          C.insert(O);
  }
  return C;
}

bool isTableWork(const Node &N, const DenseSet<const Value *> &DD,
                 const DenseSet<const Value *> &ConstOnly) {
  if (any_of(N.getInputs(), [&](const Value *V) { return V && DD.count(V); }))
    return false;
  return any_of(N.getInputs(), [&](const Value *V) {
    if (!V || !ConstOnly.count(V) || !isFloatingPoint(V->Type.Elem))
      return false;
    Optional<int64_t> Elems = V->Type.getNumElements();
    return !Elems || *Elems >= 2;
  });
}

bool isConstantNodeOutput(const Value *V) {
  const Node *D = V ? V->getDefiningNode() : nullptr;
  return D && D->getOpType() == "Constant" && D->getDomain().empty();
}

bool isConstantLike(const Value *V) {
  return V->isParameter() || isConstantNodeOutput(V);
}

UseMap buildUseMap(const Graph &G) {
  UseMap Users;
  for (const auto &NP : G.getNodes())
    for (const Value *V : NP->getInputs())
      if (V)
        Users[V].push_back(NP.get());
  return Users;
}

Attribute copyAttributeValues(const Attribute &A) {
  Attribute C;
  C.Name = A.Name;
  C.K = A.K;
  C.F = A.F;
  C.I = A.I;
  C.S = A.S;
  C.Fs = A.Fs;
  C.Is = A.Is;
  C.Ss = A.Ss;
  C.Ts = A.Ts;
  return C;
}

/// The tensor a Constant node holds in one of its value attributes.
Optional<Tensor> getConstantTensor(const Value *V) {
  if (!V)
    return None;
  if (V->isParameter()) {
    if (!V->Data)
      return None;
    Tensor T;
    T.Type = V->Type;
    T.Data = V->Data;
    return T;
  }
  const Node *D = V->getDefiningNode();
  if (!D || D->getOpType() != "Constant" || !D->getDomain().empty())
    return None;
  if (const Attribute *A = D->getAttribute("value"))
    if (A->K == Attribute::Kind::Tensor && A->Ts.size() == 1)
      return A->Ts.front();
  if (const Attribute *A = D->getAttribute("value_int"))
    return Tensor::makeInt64({}, {A->I});
  if (const Attribute *A = D->getAttribute("value_ints"))
    return Tensor::makeInt64({(int64_t)A->Is.size()}, A->Is);
  if (const Attribute *A = D->getAttribute("value_float"))
    return Tensor::makeFromDoubles(DataType::Float, {}, {(double)A->F});
  if (const Attribute *A = D->getAttribute("value_floats")) {
    std::vector<double> Ds(A->Fs.begin(), A->Fs.end());
    return Tensor::makeFromDoubles(DataType::Float, {(int64_t)Ds.size()}, Ds);
  }
  return None;
}

Optional<std::vector<int64_t>> getConstantInts(const Value *V) {
  Optional<Tensor> T = getConstantTensor(V);
  if (!T || !(isInteger(T->Type.Elem) || T->Type.Elem == DataType::Bool))
    return None;
  Expected<std::vector<int64_t>> R = T->getIntValues();
  if (!R) {
    consumeError(R.takeError());
    return None;
  }
  return std::move(*R);
}

Optional<std::vector<double>> getConstantFloats(const Value *V) {
  Optional<Tensor> T = getConstantTensor(V);
  if (!T || !isFloatingPoint(T->Type.Elem))
    return None;
  Expected<std::vector<double>> R = T->getFloatValues();
  if (!R) {
    consumeError(R.takeError());
    return None;
  }
  return std::move(*R);
}

const Value *getWeightParameter(const Value *V) {
  for (unsigned Depth = 0; V && Depth < 4; ++Depth) {
    if (V->isParameter())
      return V;
    const Node *D = V->getDefiningNode();
    if (!D || D->getNumInputs() != 1 ||
        !(D->getOpType() == "Transpose" || D->getOpType() == "Cast" ||
          D->getOpType() == "Identity"))
      return nullptr;
    V = D->getInput(0);
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Cloning
//===----------------------------------------------------------------------===//

namespace {
/// Copies graphs into fresh ones; Map takes every source value to its copy
/// (outer values first, so subgraphs reading them by name find them).
class GraphCloner {
public:
  GraphCloner() = default;
  /// Outer values already copied (a subgraph cloned on its own).
  explicit GraphCloner(const DenseMap<const Value *, Value *> &Outer)
      : Map(Outer) {}
  void cloneInto(const Graph &From, Graph &To) {
    To.DocString = From.DocString;
    for (const Value *V : From.getInputs())
      Map[V] = cantFail(To.addInput(V->getName(), V->Type));
    for (const Value *V : From.getParameters()) {
      Value *C = cantFail(To.addParameter(V->getName(), V->Type, V->Data));
      C->AlsoGraphInput = V->AlsoGraphInput;
      Map[V] = C;
    }
    for (const auto &NP : From.getNodes()) {
      const Node &N = *NP;
      SmallVector<Value *, 4> Ins;
      for (const Value *V : N.getInputs())
        Ins.push_back(V ? Map.lookup(V) : nullptr);
      SmallVector<std::string, 2> Outs;
      for (const Value *V : N.getOutputs())
        Outs.push_back(V ? V->getName().str() : std::string());
      Node *C = cantFail(
          To.addNode(N.getOpType(), N.getDomain(), N.getName(), Ins, Outs));
      for (unsigned I = 0; I < N.getNumOutputs(); ++I)
        if (const Value *V = N.getOutput(I)) {
          C->getOutput(I)->Type = V->Type;
          Map[V] = C->getOutput(I);
        }
      C->Layer = N.Layer;
      C->Stage = N.Stage;
      C->DeviceClass = N.DeviceClass;
      C->DocString = N.DocString;
      for (const Attribute &A : N.getAttributes())
        C->addAttribute(cloneAttribute(A, To));
    }
    SmallVector<Value *, 4> Outs;
    for (const Value *V : From.getOutputs())
      Outs.push_back(Map.lookup(V));
    To.setOutputs(Outs);
  }

private:
  Attribute cloneAttribute(const Attribute &A, Graph &Owner) {
    Attribute C = copyAttributeValues(A);
    for (const auto &G : A.Gs) {
      auto Sub = std::make_unique<Graph>(G->getName(), &Owner);
      cloneInto(*G, *Sub);
      C.Gs.push_back(std::move(Sub));
    }
    return C;
  }
  DenseMap<const Value *, Value *> Map;
};
} // namespace

std::unique_ptr<Graph>
cloneSubgraph(const Graph &From, Graph &NewParent,
              const DenseMap<const Value *, Value *> &Outer) {
  auto Sub = std::make_unique<Graph>(From.getName(), &NewParent);
  GraphCloner(Outer).cloneInto(From, *Sub);
  return Sub;
}

std::unique_ptr<Model> cloneModel(const Model &M) {
  auto C = std::make_unique<Model>();
  C->IRVersion = M.IRVersion;
  C->Opsets = M.Opsets;
  C->ProducerName = M.ProducerName;
  C->ProducerVersion = M.ProducerVersion;
  C->Domain = M.Domain;
  C->DocString = M.DocString;
  C->ModelVersion = M.ModelVersion;
  C->MetadataProps = M.MetadataProps;
  C->BaseDir = M.BaseDir;
  C->SourcePath = M.SourcePath;
  C->getGraph().setName(M.getGraph().getName());
  GraphCloner().cloneInto(M.getGraph(), C->getGraph());
  return C;
}

std::string findBatchSymbol(const Graph &G) {
  for (const Value *V : G.getInputs())
    for (const Dim &D : V->Type.Dims)
      if (D.isSymbolic() && (D.Symbol == "batch" || D.Symbol == "batch_size"))
        return D.Symbol;
  for (const Value *V : G.getInputs())
    if (V->Type.HasShape && V->Type.getRank() > 0 &&
        V->Type.Dims[0].isSymbolic())
      return V->Type.Dims[0].Symbol;
  return "";
}

} // namespace loom
