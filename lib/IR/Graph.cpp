//===- Graph.cpp - Loom's dataflow graph IR -------------------------------===//
#include "loom/IR/Graph.h"
#include "loom/IR/Subgraphs.h"
#include "loom/Support/RunWriter.h"
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

//===----------------------------------------------------------------------===//
// TensorData and Tensor
//===----------------------------------------------------------------------===//

TensorData::~TensorData() = default;

Error TensorData::readStrided(uint64_t First, uint64_t Stride, uint64_t Length,
                              uint64_t Count, char *Out) const {
  Expected<ArrayRef<char>> B = getBytes();
  if (!B)
    return B.takeError();
  if (Count && First + (Count - 1) * Stride + Length > B->size())
    return createStringError(inconvertibleErrorCode(),
                             "strided read past the end of %zu bytes of "
                             "tensor data",
                             B->size());
  for (uint64_t I = 0; I < Count; ++I)
    std::memcpy(Out + I * Length, B->data() + First + I * Stride, Length);
  return Error::success();
}

Error TensorData::withBytes(function_ref<Error(ArrayRef<char>)> Fn) const {
  Expected<ArrayRef<char>> B = getBytes();
  if (!B)
    return B.takeError();
  return Fn(*B);
}

Error TensorData::writeStrided(uint64_t First, uint64_t Stride, uint64_t Length,
                               uint64_t Count, sys::fs::file_t FD,
                               uint64_t Offset, uint64_t DestStride) const {
  return withBytes([&](ArrayRef<char> B) -> Error {
    if (Count &&
        (First > B.size() || (Count - 1) * Stride + Length > B.size() - First))
      return createStringError(inconvertibleErrorCode(),
                               "strided write past the end of %zu bytes of "
                               "tensor data",
                               B.size());
    RunWriter W(FD, Offset);
    for (uint64_t I = 0; I < Count; ++I)
      if (Error E = W.addAt(Offset + I * DestStride,
                            B.slice(First + I * Stride, Length)))
        return E;
    return W.flush();
  });
}

Expected<std::vector<char>> TensorData::readRange(uint64_t Offset,
                                                  uint64_t Length) const {
  Expected<ArrayRef<char>> B = getBytes();
  if (!B)
    return B.takeError();
  if (Offset > B->size() || Length > B->size() - Offset)
    return createStringError(inconvertibleErrorCode(),
                             "read of %llu bytes at offset %llu is past the "
                             "end of %zu bytes of tensor data",
                             (unsigned long long)Length,
                             (unsigned long long)Offset, B->size());
  return std::vector<char>(B->begin() + Offset, B->begin() + Offset + Length);
}

static float halfToFloat(uint16_t H) {
  uint32_t Sign = (H & 0x8000u) << 16, Exp = (H >> 10) & 0x1f, Man = H & 0x3ffu,
           Bits;
  if (Exp == 0) {
    if (Man == 0) {
      Bits = Sign;
    } else { // Subnormal: normalize.
      Exp = 127 - 15 + 1;
      while (!(Man & 0x400u)) {
        Man <<= 1;
        --Exp;
      }
      Man &= 0x3ffu;
      Bits = Sign | (Exp << 23) | (Man << 13);
    }
  } else if (Exp == 31) {
    Bits = Sign | 0x7f800000u | (Man << 13);
  } else {
    Bits = Sign | ((Exp + 127 - 15) << 23) | (Man << 13);
  }
  float F;
  std::memcpy(&F, &Bits, 4);
  return F;
}

template <typename T> static T load(const char *P) {
  T V;
  std::memcpy(&V, P, sizeof(T));
  return V;
}

static Error checkDataSize(const Tensor &T, size_t Have, int64_t &N) {
  Optional<int64_t> NE = T.Type.getNumElements();
  if (!NE)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' has no static shape", T.Name.c_str());
  N = *NE;
  unsigned ES = getDataTypeSize(T.Type.Elem);
  if (ES == 0 || (uint64_t)Have != (uint64_t)N * ES)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' has %zu bytes of data but its type "
                             "%s needs %lld",
                             T.Name.c_str(), Have, T.Type.str().c_str(),
                             (long long)(N * ES));
  return Error::success();
}

Expected<std::vector<int64_t>> Tensor::getIntValues() const {
  if (!Data)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' has no data", Name.c_str());
  Expected<ArrayRef<char>> B = Data->getBytes();
  if (!B)
    return B.takeError();
  int64_t N;
  if (Error E = checkDataSize(*this, B->size(), N))
    return std::move(E);
  std::vector<int64_t> Out;
  Out.reserve(N);
  const char *P = B->data();
  for (int64_t I = 0; I < N; ++I) {
    switch (Type.Elem) {
    case DataType::Int64:
      Out.push_back(load<int64_t>(P + 8 * I));
      break;
    case DataType::Int32:
      Out.push_back(load<int32_t>(P + 4 * I));
      break;
    case DataType::Int16:
      Out.push_back(load<int16_t>(P + 2 * I));
      break;
    case DataType::Int8:
      Out.push_back(load<int8_t>(P + I));
      break;
    case DataType::UInt8:
      Out.push_back(load<uint8_t>(P + I));
      break;
    case DataType::Bool:
      Out.push_back(load<uint8_t>(P + I) != 0);
      break;
    case DataType::UInt16:
      Out.push_back(load<uint16_t>(P + 2 * I));
      break;
    case DataType::UInt32:
      Out.push_back(load<uint32_t>(P + 4 * I));
      break;
    case DataType::UInt64:
      Out.push_back((int64_t)load<uint64_t>(P + 8 * I));
      break;
    default:
      return createStringError(inconvertibleErrorCode(),
                               "tensor '%s' of type %s is not an integer "
                               "tensor",
                               Name.c_str(), Type.str().c_str());
    }
  }
  return Out;
}

Expected<std::vector<double>> Tensor::getFloatValues() const {
  if (!Data)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' has no data", Name.c_str());
  if (!isFloatingPoint(Type.Elem)) {
    Expected<std::vector<int64_t>> Ints = getIntValues();
    if (!Ints)
      return Ints.takeError();
    return std::vector<double>(Ints->begin(), Ints->end());
  }
  Expected<ArrayRef<char>> B = Data->getBytes();
  if (!B)
    return B.takeError();
  int64_t N;
  if (Error E = checkDataSize(*this, B->size(), N))
    return std::move(E);
  std::vector<double> Out;
  Out.reserve(N);
  const char *P = B->data();
  for (int64_t I = 0; I < N; ++I) {
    switch (Type.Elem) {
    case DataType::Float:
      Out.push_back(load<float>(P + 4 * I));
      break;
    case DataType::Double:
      Out.push_back(load<double>(P + 8 * I));
      break;
    case DataType::Float16:
      Out.push_back(halfToFloat(load<uint16_t>(P + 2 * I)));
      break;
    default: { // BFloat16: the top half of an f32.
      uint32_t Bits = (uint32_t)load<uint16_t>(P + 2 * I) << 16;
      float F;
      std::memcpy(&F, &Bits, 4);
      Out.push_back(F);
    }
    }
  }
  return Out;
}

Tensor Tensor::makeInt64(ArrayRef<int64_t> Shape, ArrayRef<int64_t> Values) {
  return makeFromInts(DataType::Int64, Shape, Values);
}

template <typename T> static void append(std::vector<char> &B, T V) {
  char Tmp[sizeof(T)];
  std::memcpy(Tmp, &V, sizeof(T));
  B.insert(B.end(), Tmp, Tmp + sizeof(T));
}

static uint16_t floatToHalf(float F) {
  uint32_t X;
  std::memcpy(&X, &F, 4);
  uint32_t Sign = (X >> 16) & 0x8000u;
  int32_t Exp = (int32_t)((X >> 23) & 0xff) - 127 + 15;
  uint32_t Man = X & 0x7fffffu;
  if (((X >> 23) & 0xff) == 0xff) // Inf / NaN.
    return Sign | 0x7c00u | (Man ? 0x200u : 0);
  if (Exp >= 31)
    return Sign | 0x7c00u;
  if (Exp <= 0) {
    if (Exp < -10)
      return Sign;
    Man |= 0x800000u;
    uint32_t Shift = 14 - Exp;
    uint32_t H = Man >> Shift;
    // Round to nearest, ties to even, as IEEE casts (and ONNX Runtime) do.
    uint32_t Rem = Man & ((1u << Shift) - 1), Half = 1u << (Shift - 1);
    if (Rem > Half || (Rem == Half && (H & 1)))
      ++H;
    return Sign | H;
  }
  uint32_t H = Sign | ((uint32_t)Exp << 10) | (Man >> 13);
  // Ties to even; a carry into the exponent (up to infinity) is correct.
  uint32_t Rem = Man & 0x1fffu;
  if (Rem > 0x1000u || (Rem == 0x1000u && (H & 1)))
    ++H;
  return H;
}

static uint16_t floatToBFloat16(float F) {
  uint32_t X;
  std::memcpy(&X, &F, 4);
  if ((X & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a (quiet) NaN.
    return (uint16_t)((X >> 16) | 0x40u);
  // Round to nearest, ties to even (truncating would bias every value
  // towards zero and differ from what frameworks store).
  X += 0x7fffu + ((X >> 16) & 1);
  return (uint16_t)(X >> 16);
}

static void appendElement(std::vector<char> &B, DataType Elem, int64_t IV,
                          double DV, bool IsInt) {
  switch (Elem) {
  case DataType::Int64:
    append<int64_t>(B, IsInt ? IV : (int64_t)DV);
    break;
  case DataType::Int32:
    append<int32_t>(B, IsInt ? IV : (int32_t)DV);
    break;
  case DataType::Int16:
    append<int16_t>(B, IsInt ? IV : (int16_t)DV);
    break;
  case DataType::Int8:
    append<int8_t>(B, IsInt ? IV : (int8_t)DV);
    break;
  case DataType::UInt8:
    append<uint8_t>(B, IsInt ? IV : (uint8_t)DV);
    break;
  case DataType::UInt16:
    append<uint16_t>(B, IsInt ? IV : (uint16_t)DV);
    break;
  case DataType::UInt32:
    append<uint32_t>(B, IsInt ? IV : (uint32_t)DV);
    break;
  case DataType::UInt64:
    append<uint64_t>(B, IsInt ? IV : (uint64_t)DV);
    break;
  case DataType::Bool:
    append<uint8_t>(B, (IsInt ? IV : DV) != 0);
    break;
  case DataType::Float:
    append<float>(B, IsInt ? (float)IV : (float)DV);
    break;
  case DataType::Double:
    append<double>(B, IsInt ? (double)IV : DV);
    break;
  case DataType::Float16:
    append<uint16_t>(B, floatToHalf(IsInt ? (float)IV : (float)DV));
    break;
  case DataType::BFloat16:
    append<uint16_t>(B, floatToBFloat16(IsInt ? (float)IV : (float)DV));
    break;
  default:
    break;
  }
}

Tensor Tensor::makeFromInts(DataType Elem, ArrayRef<int64_t> Shape,
                            ArrayRef<int64_t> Values) {
  Tensor T;
  T.Type = TensorType(Elem, Shape);
  std::vector<char> B;
  B.reserve(Values.size() * getDataTypeSize(Elem));
  for (int64_t V : Values)
    appendElement(B, Elem, V, 0, /*IsInt=*/true);
  T.Data = std::make_shared<BufferTensorData>(std::move(B));
  return T;
}

Tensor Tensor::makeFromDoubles(DataType Elem, ArrayRef<int64_t> Shape,
                               ArrayRef<double> Values) {
  Tensor T;
  T.Type = TensorType(Elem, Shape);
  std::vector<char> B;
  B.reserve(Values.size() * getDataTypeSize(Elem));
  for (double V : Values)
    appendElement(B, Elem, 0, V, /*IsInt=*/false);
  T.Data = std::make_shared<BufferTensorData>(std::move(B));
  return T;
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
