//===- RoleGraphs.cpp - One graph per role, with collectives --------------===//
//
// Lowers the sharding decided by Propagation.cpp into one ONNX graph per
// role (pipeline device x tp rank x ep rank). Every node of the device's
// chunks is rebuilt with local shapes; where an input arrives in another
// spec than the node needs, the reshard becomes an Hcom* node (DESIGN §7)
// or a local Slice; values made on another pipeline device arrive through
// HcomReceive (sent by HcomSend right after they are made), except values
// that do not depend on the data (masks, rotary tables), which each device
// recomputes. Expert branches owned by another ep rank are left out; their
// tokens are gathered over the ep group before and the weighted sum is
// reduce-scattered after.
//
//===----------------------------------------------------------------------===//
#include "ControlFlow.h"
#include "RingAttention.h"
#include "ShardAttrs.h"
#include "loom/IR/NodeLabel.h"
#include "loom/Shard/EmbeddingShards.h"
#include "loom/Shard/ExpertRules.h"
#include "loom/Shard/Sharding.h"
#include "loom/Shard/SlicedTensorData.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include <map>
#include <set>

using namespace llvm;

namespace loom {
namespace {

using Shape = SmallVector<int64_t, 4>;

Error err(const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), Msg.str().c_str());
}

/// Cross-device edges: (value, destination device) -> sr_tag.
struct Edges {
  std::map<std::pair<std::string, unsigned>, int> Tag;
  /// Per value: destination devices, in order.
  DenseMap<const Value *, std::vector<unsigned>> Dests;
};

/// The dp-sharded table \p N looks up (a Gather on axis 0 of it), if any.
static const EmbeddingShard *getEmbeddingShard(const ShardingResult &R,
                                               const Node &N) {
  if (R.EmbShards.empty() || N.getOpType() != "Gather" ||
      !N.getDomain().empty() || N.getAttrInt("axis", 0) != 0 ||
      N.getNumInputs() < 2 || !N.getInput(0) || !N.getInput(0)->isParameter())
    return nullptr;
  return R.findEmbShard(N.getInput(0));
}

class RoleBuilder {
public:
  RoleBuilder(const ShardingResult &R, const Edges &E,
              const DenseSet<const Value *> &DD, unsigned Dev, unsigned TPR,
              unsigned EPR, int DPR = -1)
      : R(R), E(E), DD(DD), Dev(Dev), TPR(TPR), EPR(EPR), TP(R.Plan.TP),
        EP(R.Plan.EP), DPR(DPR), Src(R.M->getGraph()) {}
  Expected<RoleGraph> build();

private:
  unsigned deviceOf(const Node *N) const {
    return R.Nodes.lookup(N).Chunk % R.Plan.PP;
  }
  AxisSpec producedSpec(const Value *V) const {
    // A dp-sharded table's lookup is made whole on every tp rank.
    if (EmbLookups.count(V))
      return AxisSpec();
    auto It = R.Values.find(V);
    return It == R.Values.end() ? AxisSpec() : It->second;
  }
  bool ownsExpert(int X) const {
    if (X < 0 || EP == 1)
      return true;
    unsigned Per = R.NumExperts / EP;
    return (unsigned)X / Per == EPR;
  }
  TensorType localType(const Value *V, const AxisSpec &S, bool Gathered) const;
  Expected<Value *> produced(const Value *V);
  Expected<Value *> materialize(const Value *V, const AxisSpec &Req);
  Expected<Value *> epGathered(const Value *V, Value *Local);
  /// Part \p V of a Split outside expert work that an expert branch reads
  /// as \p Req, with the ep group's tokens: the Split's input gathered and
  /// cut here. Null when V is not such a part.
  Expected<Value *> epGatheredPart(const Value *V, const AxisSpec &Req);
  /// Removes the local Splits all of whose parts were read gathered.
  void eraseUnreadParts();
  Expected<Value *> sliceConstant(const Value *V, Value *X,
                                  const AxisSpec &Req);
  /// A weight-like value (getWeightParameter) whole in this rank's graph,
  /// built from the source parameter (no communication).
  Expected<Value *> wholeWeight(const Value *V);
  Expected<Value *> sliceActivation(Value *X, const TensorType &GT,
                                    const AxisSpec &Req, StringRef Name);
  /// A copyable attribute for collective(): a string when S is set.
  struct Attr {
    const char *Name;
    int64_t I;
    const char *S = nullptr;
  };
  Expected<Value *> collective(StringRef Op, StringRef Group, Value *X,
                               StringRef Name, TensorType OutType,
                               ArrayRef<Attr> Attrs);
  /// The tp collective \p C (a transition's or a rule's, Rules.h) on \p X,
  /// its output named \p Base "." C.Suffix, of this rank's type \p T; an
  /// all-gather of a split in \p FromBlocks put back in the blocks' order.
  Expected<Value *> tpCollective(const ShardCollective &C, Value *X,
                                 StringRef Base, TensorType T,
                                 ArrayRef<int64_t> FromBlocks = {});
  Value *constInt64(StringRef Name, ArrayRef<int64_t> Shape,
                    ArrayRef<int64_t> Vals);
  Value *constScalar(StringRef Name, DataType T, double V);
  Expected<Node *> add(StringRef Op, StringRef Name, ArrayRef<Value *> In,
                       ArrayRef<std::string> Out) {
    return G->addNode(Op, "", Name, In, Out);
  }
  std::string fresh(StringRef Base) {
    std::string N = Base.str();
    for (unsigned I = 1; G->lookupLocal(N) || UsedNames.count(N); ++I)
      N = (Base + "." + Twine(I)).str();
    UsedNames.insert(N);
    return N;
  }
  /// Builds \p N; its errors name it (buildNodeUnnamed's do not).
  Error buildNode(const Node &N);
  /// The cp ring's attention at its context node (RingAttention.cpp).
  Error buildRing(const Node &N, const RingSite &Site, StringRef OutName);
  friend class RingAdapter;
  Error buildNodeUnnamed(const Node &N);
  // The steps of buildNodeUnnamed.
  /// A node of the expert combine chain (a sum over experts): returns
  /// whether it is built already (both addends absent on this rank, or one:
  /// the other passes through); otherwise marks its output a partial sum
  /// over ep.
  Expected<bool> buildExpertCombine(const Node &N, const NodeSharding &NS);
  /// The value this rank's copy of \p N reads as input \p I: materialized
  /// in the spec \p NS wants, through the ep dispatch/combine or gather
  /// where it crosses into or out of expert work (\p IsBranch: \p N is
  /// an expert branch's). Null for an absent input or a global-shape
  /// lowering.
  Expected<Value *> buildInput(const Node &N, const NodeSharding &NS,
                               unsigned I, bool IsBranch);
  /// Leaving the expert region: the sum over experts of \p V in \p Spec,
  /// reduce-scattered back to this rank's tokens (once per value and spec).
  Expected<Value *> leaveExpertRegion(const Value *V, const AxisSpec &Spec);
  /// Fresh names of \p N's outputs; a model output computed sharded or in
  /// expert work (\p InExpertWork) is named "<name>.local", its final
  /// replicated value keeping the name.
  SmallVector<std::string, 2>
  getOutputNames(const Node &N, const NodeSharding &NS, bool InExpertWork);
  /// \p N copied into the rank's graph on inputs \p In with local shapes:
  /// its shape and split-size inputs and attributes made local, its
  /// outputs typed per their specs (stacked expert outputs: this rank's
  /// experts, the group's tokens) and recorded as produced.
  Error cloneLocal(const Node &N, const NodeSharding &NS,
                   MutableArrayRef<Value *> In, ArrayRef<std::string> OutNames,
                   bool IsBranch);
  /// Reshape/Expand: the target shape input replaced by the local output
  /// shape (\p YGathered: the output holds the ep group's tokens).
  void localizeShapeInput(const Node &N, const NodeSharding &NS,
                          MutableArrayRef<Value *> In, bool YGathered);
  /// Split of a blocked input: each block's size divided by tp, in the
  /// "split" attribute or the sizes input.
  void localizeSplitSizes(const Node &N, const NodeSharding &NS,
                          MutableArrayRef<Value *> In,
                          std::vector<Attribute> &Attrs);
  Error buildControlFlow(const Node &N, const NodeSharding &NS);
  Expected<Value *> widenFill(const Value *V, Value *X);
  Expected<Value *> allToAll(const Value *V, Value *X, int SplitAxis,
                             int ConcatAxis, StringRef Suffix);
  Expected<Value *> gatherTokens(const Value *V, Value *X);
  /// Values of stacked expert work (this rank's experts, the group's tokens).
  DenseSet<const Value *> StackedRegion;
  Error lowerSpecial(const Node &N, const NodeSharding &NS,
                     ArrayRef<Value *> In, ArrayRef<std::string> OutNames);
  /// Size or Shape of a value sharded here: the global answer, a constant.
  Error lowerGlobalShape(const Node &N, ArrayRef<std::string> OutNames);
  /// A Gather from a vocab-parallel table: this rank's rows looked up, ids
  /// outside them masked to zero rows: a partial output over tp.
  /// SoftmaxCrossEntropyLoss on this rank's classes (LossRules.cpp).
  Error lowerVocabParallelCrossEntropy(const Node &N, const NodeSharding &NS,
                                       ArrayRef<Value *> In,
                                       ArrayRef<std::string> OutNames);
  Error lowerVocabParallelGather(const Node &N, ArrayRef<Value *> In,
                                 ArrayRef<std::string> OutNames);
  /// Row-parallel Gemm/Conv: partial products all-reduced over tp, then the
  /// bias added once.
  /// A mean loss with ignore_index over rows split on the sequence axis:
  /// the local sum and count of counted rows all-reduced, then divided.
  Error lowerMeanOverCount(const Node &N, ArrayRef<Value *> In,
                           ArrayRef<std::string> OutNames);
  Error lowerBiasAfterReduce(const Node &N, const NodeSharding &NS,
                             ArrayRef<Value *> In,
                             ArrayRef<std::string> OutNames);
  void emitSends(const Node &N);
  /// \p N is built: the sends of its outputs follow.
  Error finishNode(const Node &N) {
    Building.erase(&N);
    emitSends(N);
    return Error::success();
  }
  /// \p N is built, \p Y (or its error) standing for its output \p OutV.
  Error finishNode(const Node &N, const Value *OutV, Expected<Value *> Y) {
    if (!Y)
      return Y.takeError();
    Produced[OutV] = *Y;
    return finishNode(N);
  }
  /// A lookup in an embedding table sharded over dp: the group's ids
  /// all-gathered, this rank's rows looked up (the others masked to 0),
  /// the partial embeddings reduce-scattered back to each rank's samples.
  Error lowerEmbeddingLookup(const Node &N, const EmbeddingShard &S);
  /// Results of lowerEmbeddingLookup: replicated over tp whatever spec
  /// the propagation gave the lookup.
  DenseSet<const Value *> EmbLookups;
  /// HcomAllToAllV of \p X over the dp group (equal blocks): block j of
  /// \p SplitAxis to rank j, the received blocks concatenated along
  /// \p ConcatAxis in rank order.
  Expected<Value *> allToAllDP(Value *X, StringRef Name, int SplitAxis,
                               int ConcatAxis, TensorType OutType);
  /// HcomAllToAllV of \p X over \p Group (\p NG ranks, equal blocks),
  /// its count and displacement inputs named after \p Base.
  Expected<Value *> addAllToAllV(Value *X, StringRef Group, unsigned NG,
                                 StringRef Base, int SplitAxis, int ConcatAxis,
                                 TensorType OutType);

  const ShardingResult &R;
  const Edges &E;
  const DenseSet<const Value *> &DD;
  unsigned Dev, TPR, EPR, TP, EP;
  int DPR;
  const Graph &Src;
  std::unique_ptr<Model> M;
  Graph *G = nullptr;
  DenseMap<const Value *, Value *> Produced;
  /// Expert-branch outputs of experts this rank does not own, and zero
  /// accumulators: they contribute nothing to the partial sum.
  DenseSet<const Value *> Absent;
  /// Values inside the expert region: gathered over ep.
  DenseSet<const Value *> InEPRegion;
  /// EP partial sums (the combine chain).
  DenseSet<const Value *> EPPartial;
  std::map<std::pair<const Value *, std::string>, Value *> Converted;
  DenseMap<const Value *, Value *> Gathered;
  /// Splits cut again from their gathered input (epGatheredPart).
  DenseMap<const Node *, SmallVector<Value *, 4>> GatheredParts;
  StringSet<> UsedNames;
  std::set<const Node *> Building;
  RoleGraph Out;
  int64_t EPTokens = -1;
};

TensorType RoleBuilder::localType(const Value *V, const AxisSpec &S,
                                  bool EPGathered) const {
  TensorType T = V->Type;
  if (S.isSplit() && (unsigned)S.Dim < T.Dims.size() &&
      T.Dims[S.Dim].isStatic())
    T.Dims[S.Dim] = Dim(T.Dims[S.Dim].Size / TP);
  if (EPGathered && !T.Dims.empty() && T.Dims[0].isStatic())
    T.Dims[0] = Dim(T.Dims[0].Size * EP);
  return T;
}

Value *RoleBuilder::constInt64(StringRef Name, ArrayRef<int64_t> Shape,
                               ArrayRef<int64_t> Vals) {
  std::string N = fresh(Name);
  Tensor T = Tensor::makeInt64(Shape, Vals);
  T.Name = N;
  Node *C = cantFail(G->addNode("Constant", "", N, {}, {N}));
  C->getOutput(0)->Type = T.Type;
  C->addAttribute(tensorAttr("value", std::move(T)));
  return C->getOutput(0);
}

Value *RoleBuilder::constScalar(StringRef Name, DataType Ty, double V) {
  std::string N = fresh(Name);
  Tensor T = isFloatingPoint(Ty) ? Tensor::makeFromDoubles(Ty, {}, {V})
                                 : Tensor::makeFromInts(Ty, {}, {(int64_t)V});
  T.Name = N;
  Node *C = cantFail(G->addNode("Constant", "", N, {}, {N}));
  C->getOutput(0)->Type = T.Type;
  C->addAttribute(tensorAttr("value", std::move(T)));
  return C->getOutput(0);
}

Expected<Value *> RoleBuilder::collective(StringRef Op, StringRef Group,
                                          Value *X, StringRef Name,
                                          TensorType OutType,
                                          ArrayRef<Attr> Attrs) {
  std::string NodeName = fresh(("hcom." + Group + "." + Name).str());
  std::string OutName = fresh(Name);
  Expected<Node *> N = G->addNode(Op, "hccl", NodeName, {X}, {OutName});
  if (!N)
    return N.takeError();
  (*N)->addAttribute(strAttr("group", Group));
  for (const Attr &A : Attrs)
    (*N)->addAttribute(A.S ? strAttr(A.Name, A.S) : intAttr(A.Name, A.I));
  (*N)->getOutput(0)->Type = std::move(OutType);
  return (*N)->getOutput(0);
}

Expected<Value *> RoleBuilder::tpCollective(const ShardCollective &C, Value *X,
                                            StringRef Base, TensorType T,
                                            ArrayRef<int64_t> FromBlocks) {
  SmallVector<Attr, 3> Attrs;
  if (C.Kind == CollectiveKind::AllReduce ||
      C.Kind == CollectiveKind::ReduceScatter)
    Attrs.push_back({"reduction", 0, C.Reduction.c_str()});
  if (C.Kind == CollectiveKind::AllGather ||
      C.Kind == CollectiveKind::ReduceScatter) {
    Attrs.push_back({"rank_size", TP});
    Attrs.push_back({"axis", C.Axis});
  }
  if (C.Kind == CollectiveKind::AllToAll)
    return addAllToAllV(X, getAxisGroupName(R), TP,
                        (Base + "." + C.Suffix).str(), C.Axis, C.ConcatAxis,
                        std::move(T));
  if (R.CPRing && C.Kind == CollectiveKind::ReduceScatter)
    return err("a reduce-scatter onto the cp ring's tokens (its two chunks "
               "per rank are not one slice)");
  Expected<Value *> Y = collective(getHcomOpName(C.Kind), getAxisGroupName(R),
                                   X, (Base + "." + C.Suffix).str(), T, Attrs);
  if (!Y || C.Kind != CollectiveKind::AllGather ||
      (!R.CPRing && FromBlocks.empty()))
    return Y;
  // The pieces arrive in rank order: the ring's chunks (rank r's chunks r
  // and 2 cp - 1 - r) back to the sequence's order, a blocked split's
  // (rank r's piece of every block) back to the blocks'.
  int64_t S = T.Dims[C.Axis].Size;
  std::vector<int64_t> Arrived, Order(S);
  for (unsigned Rk = 0; Rk < TP; ++Rk) {
    if (R.CPRing) {
      for (int64_t P : getRingPositions(TP, Rk, S))
        Arrived.push_back(P);
      continue;
    }
    int64_t Start = 0;
    for (int64_t B : FromBlocks) {
      for (int64_t I = 0; I < B / TP; ++I)
        Arrived.push_back(Start + Rk * (B / TP) + I);
      Start += B;
    }
  }
  if ((int64_t)Arrived.size() != S)
    return err("cannot gather '" + Base + "': its blocks do not make dim " +
               Twine(C.Axis) + " (" + Twine(S) + ")");
  for (int64_t I = 0; I < S; ++I)
    Order[Arrived[I]] = I;
  Value *Idx = constInt64((Base + ".order").str(), {S}, Order);
  std::string ON = fresh((Base + "." + C.Suffix + ".ordered").str());
  Expected<Node *> N =
      add("Gather", fresh(("order." + Base).str()), {*Y, Idx}, {ON});
  if (!N)
    return N.takeError();
  (*N)->addAttribute(intAttr("axis", C.Axis));
  (*N)->getOutput(0)->Type = T;
  return (*N)->getOutput(0);
}

Expected<Value *> RoleBuilder::produced(const Value *V) {
  if (!V)
    return nullptr;
  auto It = Produced.find(V);
  if (It != Produced.end())
    return It->second;
  if (V->isInput()) {
    // A split KV cache input arrives as this rank's slice (KVCache.cpp);
    // under context parallelism an input arrives whole and the rank keeps
    // its tokens.
    AxisSpec S = producedSpec(V);
    bool Whole = R.CPAxis && S.isSplit();
    Expected<Value *> In =
        G->addInput(V->getName(), localType(V, Whole ? AxisSpec() : S, false));
    if (!In)
      return In.takeError();
    UsedNames.insert(V->getName());
    Out.Inputs.push_back(V->getName().str());
    Value *X = *In;
    if (Whole) {
      Expected<Value *> Y = sliceActivation(X, V->Type, S, V->getName());
      if (!Y)
        return Y.takeError();
      X = *Y;
    }
    Produced[V] = X;
    return X;
  }
  if (V->isParameter()) {
    AxisSpec S = producedSpec(V);
    TensorType T = localType(V, S, false);
    std::shared_ptr<const TensorData> D = V->Data;
    auto PI = R.Params.find(V);
    if (D && TP > 1 && PI != R.Params.end() && PI->second.Dim >= 0)
      D = std::make_shared<SlicedTensorData>(
          V->Data, V->Type.getStaticShape(), getDataTypeSize(V->Type.Elem),
          PI->second.Dim, PI->second.Blocks, TP, TPR);
    if (EP > 1 && R.ExpertParams.count(V)) {
      // This rank's experts: a slice of dim 0 (of the tp slice, if any).
      if (D)
        D = std::make_shared<SlicedTensorData>(D, T.getStaticShape(),
                                               getDataTypeSize(V->Type.Elem), 0,
                                               ArrayRef<int64_t>(), EP, EPR);
      T.Dims[0] = Dim(T.Dims[0].Size / EP);
    }
    Expected<Value *> P = G->addParameter(fresh(V->getName()), T, std::move(D));
    if (!P)
      return P.takeError();
    Produced[V] = *P;
    return *P;
  }
  const Node *D = V->getDefiningNode();
  if (!D)
    return err("value '" + V->getName() + "' has no producer");
  if (deviceOf(D) == Dev || !DD.count(V)) {
    // Made here (or recomputed here: it does not depend on the data).
    if (Error Er = buildNode(*D))
      return std::move(Er);
    It = Produced.find(V);
    if (It == Produced.end())
      return err("value '" + V->getName() +
                 "' is not available on pipeline "
                 "device " +
                 Twine(Dev));
    return It->second;
  }
  // Received from the device that makes it.
  auto T = E.Tag.find({V->getName().str(), Dev});
  if (T == E.Tag.end())
    return err("value '" + V->getName() +
               "' crosses pipeline devices without "
               "a send");
  TensorType LT = localType(V, producedSpec(V), false);
  std::string Name = V->getName().str();
  UsedNames.insert(Name);
  Expected<Node *> N = G->addNode("HcomReceive", "hccl",
                                  fresh("hcom.pp.recv." + Name), {}, {Name});
  if (!N)
    return N.takeError();
  (*N)->addAttribute(strAttr("group", "pp"));
  (*N)->addAttribute(intAttr("sr_tag", T->second));
  (*N)->addAttribute(intAttr("src_rank", deviceOf(D)));
  SmallVector<int64_t, 4> S = LT.getStaticShape();
  (*N)->addAttribute(intsAttr("shape", S));
  (*N)->addAttribute(intAttr("dtype", (int64_t)LT.Elem));
  (*N)->getOutput(0)->Type = LT;
  Produced[V] = (*N)->getOutput(0);
  return (*N)->getOutput(0);
}

Expected<Value *> RoleBuilder::sliceConstant(const Value *V, Value *X,
                                             const AxisSpec &Req) {
  // A replicated constant (parameter or Constant node) needed split: this
  // rank's slice as a new initializer.
  std::shared_ptr<const TensorData> Data = V->Data;
  if (!V->isParameter()) {
    const Node *D = V->getDefiningNode();
    const Attribute *A = D ? D->getAttribute("value") : nullptr;
    if (!A || A->K != Attribute::Kind::Tensor || A->Ts.empty())
      return nullptr;
    Data = A->Ts[0].Data;
  }
  if (R.CPRing) {
    // The ring's chunks are not one contiguous slice: the constant whole,
    // its tokens gathered in the graph (sliceActivation).
    Expected<Value *> W = G->addParameter(fresh(V->getName()), V->Type, Data);
    if (!W)
      return W.takeError();
    return sliceActivation(*W, V->Type, Req, V->getName());
  }
  (void)X;
  TensorType T = localType(V, Req, false);
  if (Data)
    Data = std::make_shared<SlicedTensorData>(Data, V->Type.getStaticShape(),
                                              getDataTypeSize(V->Type.Elem),
                                              Req.Dim, Req.Blocks, TP, TPR);
  if (EP > 1 && R.ExpertParams.count(V)) {
    if (Data)
      Data = std::make_shared<SlicedTensorData>(
          Data, T.getStaticShape(), getDataTypeSize(V->Type.Elem), 0,
          ArrayRef<int64_t>(), EP, EPR);
    T.Dims[0] = Dim(T.Dims[0].Size / EP);
  }
  // The original name when the whole tensor is not in this graph.
  std::string Name = fresh(V->getName());
  return G->addParameter(Name, T, std::move(Data));
}

Expected<Value *> RoleBuilder::wholeWeight(const Value *V) {
  auto Key = std::make_pair(V, std::string("whole"));
  auto It = Converted.find(Key);
  if (It != Converted.end())
    return It->second;
  Value *Result = nullptr;
  if (V->isParameter()) {
    Expected<Value *> P = G->addParameter(
        fresh((V->getName() + ".whole").str()), V->Type, V->Data);
    if (!P)
      return P.takeError();
    Result = *P;
  } else {
    // A layout change (Transpose/Cast/Identity) of a weight: the same op on
    // the whole weight.
    const Node *D = V->getDefiningNode();
    Expected<Value *> In = wholeWeight(D->getInput(0));
    if (!In)
      return In.takeError();
    std::string Name = fresh((V->getName() + ".whole").str());
    Expected<Node *> N =
        G->addNode(D->getOpType(), D->getDomain(), Name, {*In}, {Name});
    if (!N)
      return N.takeError();
    for (const Attribute &A : D->getAttributes())
      (*N)->addAttribute(copyAttributeValues(A));
    (*N)->getOutput(0)->Type = V->Type;
    Result = (*N)->getOutput(0);
  }
  Converted[Key] = Result;
  return Result;
}

Expected<Value *> RoleBuilder::sliceActivation(Value *X, const TensorType &GT,
                                               const AxisSpec &Req,
                                               StringRef Name) {
  // Replicated -> split without communication: this rank's slice, block by
  // block.
  Shape S = GT.getStaticShape();
  if (R.CPRing && Req.Blocks.empty()) {
    // The ring's tokens: this rank's two chunks (getRingPositions).
    std::vector<int64_t> Pos = getRingPositions(TP, TPR, S[Req.Dim]);
    Value *Idx =
        constInt64(Name.str() + ".positions", {(int64_t)Pos.size()}, Pos);
    std::string ON = fresh(Name.str() + ".slice");
    Expected<Node *> N =
        add("Gather", fresh("slice." + Name.str()), {X, Idx}, {ON});
    if (!N)
      return N.takeError();
    (*N)->addAttribute(intAttr("axis", Req.Dim));
    TensorType T = GT;
    T.Dims[Req.Dim] = Dim((int64_t)Pos.size());
    (*N)->getOutput(0)->Type = T;
    return (*N)->getOutput(0);
  }
  std::vector<int64_t> Blocks = Req.Blocks;
  if (Blocks.empty())
    Blocks.push_back(S[Req.Dim]);
  std::vector<Value *> Pieces;
  int64_t Start = 0;
  for (int64_t B : Blocks) {
    int64_t Piece = B / TP;
    int64_t Lo = Start + TPR * Piece;
    Value *Starts = constInt64(Name.str() + ".starts", {1}, {Lo});
    Value *Ends = constInt64(Name.str() + ".ends", {1}, {Lo + Piece});
    Value *Axes = constInt64(Name.str() + ".axes", {1}, {Req.Dim});
    std::string ON = fresh(Name.str() + ".slice");
    Expected<Node *> N = add("Slice", fresh("slice." + Name.str()),
                             {X, Starts, Ends, Axes}, {ON});
    if (!N)
      return N.takeError();
    TensorType T = GT;
    T.Dims[Req.Dim] = Dim(Piece);
    (*N)->getOutput(0)->Type = T;
    Pieces.push_back((*N)->getOutput(0));
    Start += B;
  }
  if (Pieces.size() == 1)
    return Pieces[0];
  std::string ON = fresh(Name.str() + ".blocks");
  Expected<Node *> N =
      add("Concat", fresh("concat." + Name.str()), Pieces, {ON});
  if (!N)
    return N.takeError();
  (*N)->addAttribute(intAttr("axis", Req.Dim));
  TensorType T = GT;
  T.Dims[Req.Dim] = Dim(S[Req.Dim] / TP);
  (*N)->getOutput(0)->Type = T;
  return (*N)->getOutput(0);
}

Expected<Value *> RoleBuilder::materialize(const Value *V,
                                           const AxisSpec &Req) {
  if (!V)
    return nullptr;
  AxisSpec Cur = producedSpec(V);
  // The rule table names the reshard (Rules.h); each case below lowers it.
  Transition T = TP > 1 ? getTransition(Cur, Req) : Transition::None;
  auto Refuse = [&]() {
    return err("cannot reshard '" + V->getName() + "' from " + Cur.str() +
               " to " + Req.str() + " (" + getTransitionName(T) + ")");
  };
  auto Key = std::make_pair(V, Req.str());
  if (T == Transition::LocalSlice && V->isParameter() && !Produced.count(V)) {
    // Only this rank's slice of a replicated parameter is needed (a bias
    // beside a column-parallel matmul): never add the whole tensor.
    auto It = Converted.find(Key);
    if (It != Converted.end())
      return It->second;
    Expected<Value *> Y = sliceConstant(V, nullptr, Req);
    if (!Y)
      return Y.takeError();
    Converted[Key] = *Y;
    return *Y;
  }
  // A split value needed whole or split otherwise: an all-gather (and a
  // slice), or, split in blocks, nothing a collective can do.
  bool Regather =
      T == Transition::AllGather || T == Transition::GatherSlice ||
      (T == Transition::Unsupported && Cur.isSplit() && !Req.isPartial());
  if (Regather && !InEPRegion.count(V)) {
    // A weight stored sliced for one consumer and needed whole, or sliced
    // otherwise, by another (torch ties equal initializers: one zero bias
    // feeds a column-parallel Gemm and, through an Identity, a LayerNorm):
    // the rank's graph holds that view too, taken from the source data,
    // instead of gathering the slice back at every micro-batch.
    const Value *P = getWeightParameter(V);
    if (P && !R.ExpertParams.count(P)) {
      auto It = Converted.find(Key);
      if (It != Converted.end())
        return It->second;
      Expected<Value *> Y = V->isParameter() && Req.isSplit()
                                ? sliceConstant(V, nullptr, Req)
                                : wholeWeight(V);
      if (Y && *Y && Req.isSplit() && !V->isParameter())
        Y = sliceActivation(*Y, V->Type, Req, V->getName());
      if (!Y)
        return Y.takeError();
      Converted[Key] = *Y;
      return *Y;
    }
  }
  // (A value this rank does not hold, an expert it does not own, needs
  // no reshard.)
  Expected<Value *> X = produced(V);
  if (!X || !*X || T == Transition::None)
    return X;
  if (T == Transition::Unsupported)
    return Refuse();
  auto It = Converted.find(Key);
  if (It != Converted.end())
    return It->second;
  bool Gath = InEPRegion.count(V);
  // Types follow the value as this rank holds it (expert work may have
  // changed its leading dims): GT is it replicated over tp.
  TensorType GT = (*X)->Type;
  if (Cur.isSplit() && (unsigned)Cur.Dim < GT.getRank() &&
      GT.Dims[Cur.Dim].isStatic())
    GT.Dims[Cur.Dim] = Dim(GT.Dims[Cur.Dim].Size * TP);
  std::string Base = V->getName().str();
  auto Lower = [&]() -> Expected<Value *> {
    switch (T) {
    case Transition::AllReduce:
    case Transition::ReduceScatter:
    case Transition::AllGather: {
      // The one transition -> collective mapping (Rules.h), at the type
      // this rank holds the value in.
      Optional<ShardCollective> C = getTransitionCollective(Cur, Req, GT, TP);
      if (!C)
        return Refuse();
      return tpCollective(*C, *X, Base, C->Result, Cur.Blocks);
    }
    case Transition::GatherSlice:
      // On the sequence axis one all-to-all moves the split (Rules.h).
      if (R.CPAxis)
        if (Optional<ShardCollective> C =
                getTransitionCollective(Cur, Req, GT, TP, true))
          if (C->Kind == CollectiveKind::AllToAll)
            return tpCollective(*C, *X, Base, C->Result);
      {
        Expected<Value *> Full = materialize(V, AxisSpec());
        if (!Full)
          return Full.takeError();
        return sliceActivation(*Full, GT, Req, Base);
      }
    case Transition::LocalSlice: {
      // A constant's slice as a new constant; an activation's by Slice.
      bool ConstLike =
          V->isParameter() || (V->getDefiningNode() &&
                               V->getDefiningNode()->getOpType() == "Constant");
      if (ConstLike && !Gath) {
        Expected<Value *> C = sliceConstant(V, *X, Req);
        if (!C || *C)
          return C;
      }
      return sliceActivation(*X, GT, Req, Base);
    }
    case Transition::Zeros:
      // A replicated zero as an addend of a sum of partials: zeros on
      // every rank sum to zero. The rules ask for it only for a zero
      // constant.
      return *X;
    case Transition::None:
    case Transition::Unsupported:
      break;
    }
    return Refuse();
  };
  Expected<Value *> Y = Lower();
  if (!Y)
    return Y.takeError();
  Converted[Key] = *Y;
  return *Y;
}

Expected<Value *> RoleBuilder::epGathered(const Value *V, Value *Local) {
  auto It = Gathered.find(V);
  if (It != Gathered.end())
    return It->second;
  TensorType T = Local->Type;
  if (!T.Dims.empty() && T.Dims[0].isStatic())
    T.Dims[0] = Dim(T.Dims[0].Size * EP);
  // Named after the original value: identical on every ep rank.
  Expected<Value *> Y = collective("HcomAllGather", "ep", Local,
                                   (V->getName() + ".epgather").str(), T,
                                   {{"rank_size", EP}, {"axis", 0}});
  if (!Y)
    return Y.takeError();
  Gathered[V] = *Y;
  return *Y;
}

Expected<Value *> RoleBuilder::epGatheredPart(const Value *V,
                                              const AxisSpec &Req) {
  // Each rank gathering the parts its own experts read would issue
  // different all-gathers (expert e's part on e's rank); the Split's input
  // gathered once is the same on every rank, as for the per-expert Slices
  // canonicalize makes into this Split (issue 29).
  const Node *D = V->getDefiningNode();
  auto NI = D ? R.Nodes.find(D) : R.Nodes.end();
  if (NI == R.Nodes.end() || D->getOpType() != "Split" ||
      !D->getDomain().empty() || NI->second.Expert >= 0 || !D->getInput(0))
    return nullptr;
  const NodeSharding &NSD = NI->second;
  const Value *In = D->getInput(0);
  int64_t Rank = In->Type.getRank(), Axis = D->getAttrInt("axis", 0);
  Axis = Axis < 0 ? Axis + Rank : Axis;
  unsigned K = find(D->getOutputs(), V) - D->getOutputs().begin();
  // Axis 0 holds the tokens the gather concatenates.
  if (!DD.count(In) || Axis <= 0 || Axis >= Rank || Req.isPartial() ||
      (Req.isSplit() && Req.Dim == Axis) || NSD.InputSpecs.empty() ||
      NSD.InputSpecs[0] != Req || NSD.OutputSpecs[K] != Req)
    return nullptr;
  auto It = GatheredParts.find(D);
  if (It != GatheredParts.end())
    return It->second[K];
  Expected<Value *> X = materialize(In, Req);
  if (!X)
    return X.takeError();
  Expected<Value *> Y = epGathered(In, *X);
  if (!Y)
    return Y.takeError();
  SmallVector<Value *, 2> Ins = {*Y};
  if (D->getNumInputs() > 1 && D->getInput(1)) {
    Expected<Value *> Sizes = materialize(D->getInput(1), AxisSpec());
    if (!Sizes)
      return Sizes.takeError();
    Ins.push_back(*Sizes);
  }
  SmallVector<std::string, 4> Names;
  for (const Value *O : D->getOutputs())
    Names.push_back(O ? fresh((O->getName() + ".epgather").str()) : "");
  // Unnamed stays unnamed, as the Split it copies.
  Expected<Node *> S =
      add("Split",
          D->getName().empty() ? "" : fresh(D->getName().str() + ".epgather"),
          Ins, Names);
  if (!S)
    return S.takeError();
  for (const Attribute &A : D->getAttributes())
    (*S)->addAttribute(copyAttributeValues(A));
  SmallVector<Value *, 4> &Parts = GatheredParts[D];
  for (unsigned O = 0; O < D->getNumOutputs(); ++O) {
    Value *P = (*S)->getOutput(O);
    if (P && D->getOutput(O))
      P->Type = localType(D->getOutput(O), Req, /*EPGathered=*/true);
    Parts.push_back(P);
  }
  return Parts[K];
}

void RoleBuilder::eraseUnreadParts() {
  DenseSet<const Value *> Local,
      Read(G->getOutputs().begin(), G->getOutputs().end());
  for (const auto &KV : GatheredParts)
    for (const Value *O : KV.first->getOutputs())
      if (Value *L = O ? Produced.lookup(O) : nullptr)
        Local.insert(L);
  if (Local.empty())
    return;
  for (const auto &NP : G->getNodes())
    Read.insert(NP->getInputs().begin(), NP->getInputs().end());
  G->eraseNodes([&](const Node &N) {
    return N.getNumOutputs() && all_of(N.getOutputs(), [&](const Value *V) {
             return !V || (Local.count(V) && !Read.count(V));
           });
  });
}

Expected<Value *> RoleBuilder::widenFill(const Value *V, Value *X) {
  auto It = Gathered.find(V);
  if (It != Gathered.end())
    return It->second;
  const Node *D = V->getDefiningNode();
  if (!D)
    return nullptr;
  Tensor Fill;
  if (D->getOpType() == "ConstantOfShape") {
    const Attribute *A = D->getAttribute("value");
    if (A && A->K == Attribute::Kind::Tensor && !A->Ts.empty())
      Fill = A->Ts[0];
    else
      Fill = Tensor::makeFromDoubles(DataType::Float, {1}, {0.0});
  } else if (D->getOpType() == "Constant") {
    const Attribute *A = D->getAttribute("value");
    if (!A || A->K != Attribute::Kind::Tensor || A->Ts.empty())
      return nullptr;
    Expected<std::vector<double>> F = A->Ts[0].getFloatValues();
    if (!F) {
      consumeError(F.takeError());
      return nullptr;
    }
    if (F->empty() || any_of(*F, [&](double Y) { return Y != F->front(); }))
      return nullptr;
    Fill = Tensor::makeFromDoubles(X->Type.Elem, {1}, {F->front()});
  } else {
    return nullptr;
  }
  TensorType T = X->Type;
  T.Dims[0] = Dim(T.Dims[0].Size * EP);
  SmallVector<int64_t, 4> S = T.getStaticShape();
  Value *Shp =
      constInt64((V->getName() + ".ep_shape").str(), {(int64_t)S.size()}, S);
  std::string ON = fresh((V->getName() + ".ep").str());
  Expected<Node *> C = add("ConstantOfShape", fresh("fill." + ON), {Shp}, {ON});
  if (!C)
    return C.takeError();
  Fill.Name = ON;
  (*C)->addAttribute(tensorAttr("value", std::move(Fill)));
  (*C)->getOutput(0)->Type = T;
  Gathered[V] = (*C)->getOutput(0);
  return (*C)->getOutput(0);
}

Expected<Value *> RoleBuilder::allToAll(const Value *V, Value *X, int SplitAxis,
                                        int ConcatAxis, StringRef Suffix) {
  auto Key = std::make_pair(V, ("a2a" + Suffix).str());
  auto It = Converted.find(Key);
  if (It != Converted.end())
    return It->second;
  TensorType T = X->Type;
  if ((unsigned)std::max(SplitAxis, ConcatAxis) >= T.getRank() ||
      T.Dims[SplitAxis].Size % EP)
    return err("value '" + V->getName() + "': dim " + Twine(SplitAxis) +
               " does not split over ep=" + Twine(EP));
  T.Dims[SplitAxis] = Dim(T.Dims[SplitAxis].Size / EP);
  T.Dims[ConcatAxis] = Dim(T.Dims[ConcatAxis].Size * EP);
  std::string Base = (V->getName() + Suffix).str();
  Expected<Value *> Y =
      addAllToAllV(X, "ep", EP, Base, SplitAxis, ConcatAxis, T);
  if (Y)
    Converted[Key] = *Y;
  return Y;
}

Expected<Value *> RoleBuilder::addAllToAllV(Value *X, StringRef Group,
                                            unsigned NG, StringRef BaseName,
                                            int SplitAxis, int ConcatAxis,
                                            TensorType OutType) {
  std::string Base = BaseName.str();
  // HCCL's AllToAllV counts: elements per peer, equal here.
  int64_t Per = X->Type.getNumElements().getValueOr(0) / NG;
  std::vector<int64_t> Counts(NG, Per), Displ;
  for (unsigned I = 0; I < NG; ++I)
    Displ.push_back(I * Per);
  Value *SC = constInt64(Base + ".send_counts", {(int64_t)NG}, Counts);
  Value *SD = constInt64(Base + ".send_displacements", {(int64_t)NG}, Displ);
  Value *RC = constInt64(Base + ".recv_counts", {(int64_t)NG}, Counts);
  Value *RD = constInt64(Base + ".recv_displacements", {(int64_t)NG}, Displ);
  Expected<Node *> N = G->addNode("HcomAllToAllV", "hccl",
                                  fresh("hcom." + Group.str() + "." + Base),
                                  {X, SC, SD, RC, RD}, {fresh(Base)});
  if (!N)
    return N.takeError();
  (*N)->addAttribute(strAttr("group", Group));
  (*N)->addAttribute(intAttr("rank_size", NG));
  (*N)->addAttribute(intAttr("split_axis", SplitAxis));
  (*N)->addAttribute(intAttr("concat_axis", ConcatAxis));
  (*N)->getOutput(0)->Type = std::move(OutType);
  return (*N)->getOutput(0);
}

Expected<Value *> RoleBuilder::allToAllDP(Value *X, StringRef Name,
                                          int SplitAxis, int ConcatAxis,
                                          TensorType OutType) {
  return addAllToAllV(X, "dp", R.Plan.DP, Name, SplitAxis, ConcatAxis,
                      std::move(OutType));
}

Expected<Value *> RoleBuilder::gatherTokens(const Value *V, Value *X) {
  auto Key = std::make_pair(V, std::string("ep-tokens"));
  auto It = Converted.find(Key);
  if (It != Converted.end())
    return It->second;
  TensorType T = X->Type;
  T.Dims[1] = Dim(T.Dims[1].Size * EP);
  Expected<Value *> Y =
      collective("HcomAllGather", "ep", X, (V->getName() + ".epgather").str(),
                 T, {{"rank_size", EP}, {"axis", 1}});
  if (!Y)
    return Y.takeError();
  Converted[Key] = *Y;
  return *Y;
}

/// The role builder's graph operations for the ring (RingAttention.h).
class RingAdapter : public RingGraphBuilder {
public:
  explicit RingAdapter(RoleBuilder &RB) : RB(RB) {}
  Expected<Value *> get(const Value *V, const AxisSpec &S) override {
    return RB.materialize(V, S);
  }
  Expected<Value *> op(StringRef Op, StringRef Base, ArrayRef<Value *> In,
                       const TensorType &T, std::vector<Attribute> Attrs,
                       StringRef OutName) override {
    std::string Name = RB.fresh(Base);
    std::string Out = OutName.empty() ? Name : OutName.str();
    Expected<Node *> N = RB.add(Op, Name, In, {Out});
    if (!N)
      return N.takeError();
    (*N)->setAttributes(std::move(Attrs));
    (*N)->getOutput(0)->Type = T;
    return (*N)->getOutput(0);
  }
  Value *constInt64(StringRef Name, ArrayRef<int64_t> Shape,
                    ArrayRef<int64_t> Vals) override {
    return RB.constInt64(Name, Shape, Vals);
  }
  void send(Value *X, unsigned Dest, int Tag, StringRef Base) override {
    Node *S = cantFail(RB.G->addNode(
        "HcomSend", "hccl", RB.fresh("hcom.cp.send." + Base.str()), {X}, {}));
    S->addAttribute(strAttr("group", "cp"));
    S->addAttribute(intAttr("sr_tag", Tag));
    S->addAttribute(intAttr("dest_rank", Dest));
  }
  Expected<Value *> recv(const TensorType &T, unsigned Src, int Tag,
                         StringRef Base) override {
    std::string Name = RB.fresh("hcom.cp.recv." + Base.str());
    Expected<Node *> N = RB.G->addNode("HcomReceive", "hccl", Name, {}, {Name});
    if (!N)
      return N.takeError();
    (*N)->addAttribute(strAttr("group", "cp"));
    (*N)->addAttribute(intAttr("sr_tag", Tag));
    (*N)->addAttribute(intAttr("src_rank", Src));
    (*N)->addAttribute(intsAttr("shape", T.getStaticShape()));
    (*N)->addAttribute(intAttr("dtype", (int64_t)T.Elem));
    (*N)->getOutput(0)->Type = T;
    return (*N)->getOutput(0);
  }

private:
  RoleBuilder &RB;
};

Error RoleBuilder::buildRing(const Node &N, const RingSite &Site,
                             StringRef OutName) {
  RingAdapter A(*this);
  Expected<Value *> Y = lowerRingAttention(R, Site, TP, TPR, A, OutName);
  if (!Y)
    return Y.takeError();
  Produced[N.getOutput(0)] = *Y;
  return Error::success();
}

void RoleBuilder::emitSends(const Node &N) {
  for (const Value *O : N.getOutputs()) {
    if (!O)
      continue;
    auto D = E.Dests.find(O);
    if (D == E.Dests.end() || deviceOf(&N) != Dev)
      continue;
    Value *X = Produced.lookup(O);
    if (!X)
      continue;
    for (unsigned Dst : D->second) {
      int Tag = E.Tag.at({O->getName().str(), Dst});
      Node *S = cantFail(G->addNode(
          "HcomSend", "hccl",
          fresh(("hcom.pp.send." + O->getName() + ".to" + Twine(Dst)).str()),
          {X}, {}));
      S->addAttribute(strAttr("group", "pp"));
      S->addAttribute(intAttr("sr_tag", Tag));
      S->addAttribute(intAttr("dest_rank", Dst));
    }
  }
}

Error RoleBuilder::lowerSpecial(const Node &N, const NodeSharding &NS,
                                ArrayRef<Value *> In,
                                ArrayRef<std::string> OutNames) {
  switch (NS.Lower) {
  case NodeSharding::Lowering::GlobalShape:
    return lowerGlobalShape(N, OutNames);
  case NodeSharding::Lowering::VocabParallelGather:
    return lowerVocabParallelGather(N, In, OutNames);
  case NodeSharding::Lowering::BiasAfterReduce:
    return lowerBiasAfterReduce(N, NS, In, OutNames);
  case NodeSharding::Lowering::VocabParallelCrossEntropy:
    return lowerVocabParallelCrossEntropy(N, NS, In, OutNames);
  case NodeSharding::Lowering::MeanOfShards: {
    // The mean over this rank's rows, scaled by 1 / axis size: an addend
    // of the mean over all rows (LossRules.cpp).
    SmallVector<std::string, 2> Names(OutNames.begin(), OutNames.end());
    Names[0] = fresh(OutNames[0] + ".local_mean");
    SmallVector<Value *, 4> Ins(In.begin(), In.end());
    if (Error E = cloneLocal(N, NS, Ins, Names, false))
      return E;
    const Value *Y = N.getOutput(0);
    Value *Local = Produced[Y];
    Value *Scale =
        constScalar(fresh(OutNames[0] + ".share"), Local->Type.Elem, 1.0 / TP);
    Expected<Node *> M = add("Mul", fresh("share." + OutNames[0]),
                             {Local, Scale}, {OutNames[0]});
    if (!M)
      return M.takeError();
    (*M)->getOutput(0)->Type = Local->Type;
    Produced[Y] = (*M)->getOutput(0);
    return Error::success();
  }
  case NodeSharding::Lowering::MeanOverCount:
    return lowerMeanOverCount(N, In, OutNames);
  case NodeSharding::Lowering::None:
    break;
  }
  return Error::success();
}

Error RoleBuilder::lowerMeanOverCount(const Node &N, ArrayRef<Value *> In,
                                      ArrayRef<std::string> OutNames) {
  const std::string &Y = OutNames[0];
  TensorType T = N.getOutput(0)->Type;
  // The local sum over the counted rows: the node with reduction "sum".
  std::vector<Attribute> Attrs;
  for (const Attribute &A : N.getAttributes())
    if (A.Name != "reduction")
      Attrs.push_back(copyAttributeValues(A));
  Attrs.push_back(strAttr("reduction", "sum"));
  // Named in sequence: two fresh() calls among one call's arguments would
  // be numbered in the compiler's order of evaluation.
  std::string SumOut = fresh(Y + ".local_sum");
  std::string SumName = fresh(Y + ".local_sum");
  Expected<Node *> Sum = G->addNode(N.getOpType(), N.getDomain(), SumName,
                                    In.take_front(2), {SumOut});
  if (!Sum)
    return Sum.takeError();
  (*Sum)->setAttributes(std::move(Attrs));
  (*Sum)->getOutput(0)->Type = T;
  // The local count: labels other than ignore_index.
  Value *Labels = In[1];
  Tensor Ign = Tensor::makeFromInts(Labels->Type.Elem, {},
                                    {N.getAttrInt("ignore_index", 0)});
  Ign.Name = fresh(Y + ".ignore_index");
  Node *IC = cantFail(G->addNode("Constant", "", Ign.Name, {}, {Ign.Name}));
  IC->getOutput(0)->Type = Ign.Type;
  IC->addAttribute(tensorAttr("value", std::move(Ign)));
  TensorType BoolT = Labels->Type;
  BoolT.Elem = DataType::Bool;
  Value *X = nullptr;
  auto Step = [&](StringRef Op, ArrayRef<Value *> Ins, TensorType OT,
                  std::vector<Attribute> As = {}) -> Error {
    std::string Name = fresh(Y + ".count." + Op.lower());
    Expected<Node *> S = add(Op, Name, Ins, {Name});
    if (!S)
      return S.takeError();
    (*S)->setAttributes(std::move(As));
    (*S)->getOutput(0)->Type = std::move(OT);
    X = (*S)->getOutput(0);
    return Error::success();
  };
  TensorType FloatT = Labels->Type;
  FloatT.Elem = T.Elem;
  std::vector<Attribute> CastTo;
  CastTo.push_back(intAttr("to", (int64_t)T.Elem));
  std::vector<Attribute> KeepDims;
  KeepDims.push_back(intAttr("keepdims", 0));
  if (Error E = Step("Equal", {Labels, IC->getOutput(0)}, BoolT))
    return E;
  if (Error E = Step("Not", {X}, BoolT))
    return E;
  if (Error E = Step("Cast", {X}, FloatT, std::move(CastTo)))
    return E;
  if (Error E = Step("ReduceSum", {X}, T, std::move(KeepDims)))
    return E;
  // Both summed over the group, then divided.
  StringRef Group = getAxisGroupName(R);
  Attr Sum_{"reduction", 0, "sum"};
  Expected<Value *> S = collective("HcomAllReduce", Group, (*Sum)->getOutput(0),
                                   Y + ".sum", T, {Sum_});
  if (!S)
    return S.takeError();
  Expected<Value *> C =
      collective("HcomAllReduce", Group, X, Y + ".count", T, {Sum_});
  if (!C)
    return C.takeError();
  Expected<Node *> D = add("Div", fresh("mean." + Y), {*S, *C}, {Y});
  if (!D)
    return D.takeError();
  (*D)->getOutput(0)->Type = T;
  Produced[N.getOutput(0)] = (*D)->getOutput(0);
  return Error::success();
}

Error RoleBuilder::lowerGlobalShape(const Node &N,
                                    ArrayRef<std::string> OutNames) {
  const Value *Y = N.getOutput(0);
  Shape S = N.getInput(0)->Type.getStaticShape();
  std::vector<int64_t> Vals;
  if (N.getOpType() == "Size") {
    int64_t P = 1;
    for (int64_t D : S)
      P *= D;
    Vals.push_back(P);
  } else {
    int64_t Start = N.getAttrInt("start", 0),
            End = N.getAttrInt("end", S.size());
    if (Start < 0)
      Start += S.size();
    if (End < 0)
      End += S.size();
    Start = std::max<int64_t>(0, std::min<int64_t>(Start, S.size()));
    End = std::max<int64_t>(Start, std::min<int64_t>(End, S.size()));
    Vals.assign(S.begin() + Start, S.begin() + End);
  }
  Tensor T = Tensor::makeInt64(N.getOpType() == "Size"
                                   ? ArrayRef<int64_t>()
                                   : ArrayRef<int64_t>((int64_t)Vals.size()),
                               Vals);
  T.Name = OutNames[0];
  Expected<Node *> C = add("Constant", N.getName(), {}, {OutNames[0]});
  if (!C)
    return C.takeError();
  (*C)->getOutput(0)->Type = T.Type;
  (*C)->addAttribute(tensorAttr("value", std::move(T)));
  Produced[Y] = (*C)->getOutput(0);
  return Error::success();
}

Error RoleBuilder::lowerVocabParallelGather(const Node &N, ArrayRef<Value *> In,
                                            ArrayRef<std::string> OutNames) {
  const Value *Y = N.getOutput(0);
  Value *Table = In[0], *Ids = In[1];
  int64_t Rows = Table->Type.Dims[0].Size;
  DataType IT = Ids->Type.Elem;
  std::string B = N.getName().empty() ? OutNames[0] : N.getName().str();
  Value *Start = constScalar(B + ".vocab_start", IT, (double)(TPR * Rows));
  Value *Count = constScalar(B + ".vocab_rows", IT, (double)Rows);
  Value *Zero = constScalar(B + ".zero_index", IT, 0);
  TensorType IdT = Ids->Type;
  TensorType BoolT = IdT;
  BoolT.Elem = DataType::Bool;
  auto Op = [&](StringRef Op, ArrayRef<Value *> Ins, StringRef Suffix,
                TensorType T) -> Expected<Value *> {
    std::string ON = fresh(B + "." + Suffix.str());
    Expected<Node *> Nd = add(Op, fresh(B + "/" + Suffix.str()), Ins, {ON});
    if (!Nd)
      return Nd.takeError();
    (*Nd)->getOutput(0)->Type = std::move(T);
    return (*Nd)->getOutput(0);
  };
  Expected<Value *> Local = Op("Sub", {Ids, Start}, "local_ids", IdT);
  if (!Local)
    return Local.takeError();
  Expected<Value *> Below = Op("Less", {*Local, Zero}, "below", BoolT);
  if (!Below)
    return Below.takeError();
  Expected<Value *> NotBelow = Op("Not", {*Below}, "not_below", BoolT);
  if (!NotBelow)
    return NotBelow.takeError();
  Expected<Value *> InRange = Op("Less", {*Local, Count}, "in_range", BoolT);
  if (!InRange)
    return InRange.takeError();
  Expected<Value *> Valid = Op("And", {*NotBelow, *InRange}, "valid", BoolT);
  if (!Valid)
    return Valid.takeError();
  Expected<Value *> Safe = Op("Where", {*Valid, *Local, Zero}, "safe_ids", IdT);
  if (!Safe)
    return Safe.takeError();
  TensorType GTy = localType(Y, AxisSpec(), false);
  Expected<Value *> Rows2 = Op("Gather", {Table, *Safe}, "rows", GTy);
  if (!Rows2)
    return Rows2.takeError();
  TensorType MaskT = BoolT;
  MaskT.Dims.push_back(Dim(1));
  Value *Mask;
  if (R.M->getOpsetVersion("") >= 13) {
    Value *Ax = constInt64(B + ".mask_axis", {1}, {-1});
    Expected<Value *> U = Op("Unsqueeze", {*Valid, Ax}, "mask", MaskT);
    if (!U)
      return U.takeError();
    Mask = *U;
  } else {
    std::string ON = fresh(B + ".mask");
    Expected<Node *> Nd = add("Unsqueeze", fresh(B + "/mask"), {*Valid}, {ON});
    if (!Nd)
      return Nd.takeError();
    (*Nd)->addAttribute(intsAttr("axes", {(int64_t)IdT.getRank()}));
    (*Nd)->getOutput(0)->Type = MaskT;
    Mask = (*Nd)->getOutput(0);
  }
  Value *ZeroF = constScalar(B + ".zero", Y->Type.Elem, 0);
  Expected<Node *> W =
      add("Where", N.getName(), {Mask, *Rows2, ZeroF}, {OutNames[0]});
  if (!W)
    return W.takeError();
  (*W)->getOutput(0)->Type = GTy;
  Produced[Y] = (*W)->getOutput(0);
  return Error::success();
}

/// Megatron-LM's vocab-parallel cross entropy (megatron/core/
/// tensor_parallel/cross_entropy.py), on scores X [N, C/tp, d...] and whole
/// labels [N, d...]: m = allreduce_max(ReduceMax(X)); Xs = X - m;
/// s = allreduce_sum(ReduceSum(Exp(Xs))); t = allreduce_sum(Xs at the label
/// where this rank holds its class, else 0); loss = Log(s) - t per row,
/// zero at ignore_index, then the node's reduction (mean: over the rows not
/// ignored).
Error RoleBuilder::lowerVocabParallelCrossEntropy(
    const Node &N, const NodeSharding &NS, ArrayRef<Value *> In,
    ArrayRef<std::string> OutNames) {
  const Value *Y = N.getOutput(0);
  // The rule declares the three all-reduces, in order: the row max, the
  // sum of exps, the target score (LossRules.cpp).
  if (NS.Collectives.size() != 3)
    return err("vocab-parallel cross entropy '" + N.getName() + "' declares " +
               Twine(NS.Collectives.size()) + " collectives, not 3");
  Value *X = In[0], *Labels = In[1];
  DataType FT = X->Type.Elem, IT = Labels->Type.Elem;
  int64_t Classes = X->Type.Dims[1].Size; // this rank's
  std::string B = N.getName().empty() ? OutNames[0] : N.getName().str();
  TensorType XT = X->Type, RowT = XT, LT = Labels->Type;
  RowT.Dims[1] = Dim(1);
  TensorType IdT = RowT, BoolT = RowT, LBoolT = LT;
  IdT.Elem = IT;
  BoolT.Elem = DataType::Bool;
  LBoolT.Elem = DataType::Bool;
  auto Op = [&](StringRef Op, ArrayRef<Value *> Ins, StringRef Suffix,
                TensorType T, ArrayRef<Attribute> Attrs = {},
                StringRef OutName = "") -> Expected<Value *> {
    std::string ON =
        OutName.empty() ? fresh(B + "." + Suffix.str()) : OutName.str();
    Expected<Node *> Nd = add(Op, fresh(B + "/" + Suffix.str()), Ins, {ON});
    if (!Nd)
      return Nd.takeError();
    for (const Attribute &A : Attrs)
      (*Nd)->addAttribute(copyAttributeValues(A));
    (*Nd)->getOutput(0)->Type = std::move(T);
    return (*Nd)->getOutput(0);
  };
  auto AllReduce = [&](Value *V, unsigned I) -> Expected<Value *> {
    return tpCollective(NS.Collectives[I], V, B, V->Type);
  };
  Value *Axis1 = constInt64(B + ".class_axis", {1}, {1});
#define LOOM_TRY(Var, Expr)                                                    \
  Expected<Value *> Var = Expr;                                                \
  if (!Var)                                                                    \
    return Var.takeError();
  // The row max over all classes.
  LOOM_TRY(MaxL, Op("ReduceMax", {X}, "local_max", RowT,
                    {intsAttr("axes", {1}), intAttr("keepdims", 1)}));
  LOOM_TRY(Max, AllReduce(*MaxL, 0));
  LOOM_TRY(Xs, Op("Sub", {X, *Max}, "shifted", XT));
  // The sum of exps over all classes.
  LOOM_TRY(Ex, Op("Exp", {*Xs}, "exp", XT));
  LOOM_TRY(SumL, Op("ReduceSum", {*Ex, Axis1}, "local_sum", RowT,
                    {intAttr("keepdims", 1)}));
  LOOM_TRY(Sum, AllReduce(*SumL, 1));
  // The target's shifted score, from the rank holding its class.
  TensorType LUT = LT;
  LUT.Dims.insert(LUT.Dims.begin() + 1, Dim(1));
  LOOM_TRY(Lbl, Op("Unsqueeze", {Labels, Axis1}, "labels", LUT));
  Value *Start = constScalar(B + ".class_start", IT, (double)(TPR * Classes));
  Value *Count = constScalar(B + ".class_count", IT, (double)Classes);
  Value *Zero = constScalar(B + ".zero_index", IT, 0);
  LOOM_TRY(Local, Op("Sub", {*Lbl, Start}, "local_labels", IdT));
  LOOM_TRY(Below, Op("Less", {*Local, Zero}, "below", BoolT));
  LOOM_TRY(NotBelow, Op("Not", {*Below}, "not_below", BoolT));
  LOOM_TRY(InRange, Op("Less", {*Local, Count}, "in_range", BoolT));
  LOOM_TRY(Valid, Op("And", {*NotBelow, *InRange}, "valid", BoolT));
  LOOM_TRY(Safe, Op("Where", {*Valid, *Local, Zero}, "safe_labels", IdT));
  LOOM_TRY(Picked, Op("GatherElements", {*Xs, *Safe}, "target_local", RowT,
                      {intAttr("axis", 1)}));
  Value *ZeroF = constScalar(B + ".zero", FT, 0);
  LOOM_TRY(Masked,
           Op("Where", {*Valid, *Picked, ZeroF}, "target_masked", RowT));
  LOOM_TRY(Target, AllReduce(*Masked, 2));
  // Per row: log(sum) - target, zero where the label is ignore_index.
  LOOM_TRY(Log, Op("Log", {*Sum}, "log_sum", RowT));
  LOOM_TRY(Diff, Op("Sub", {*Log, *Target}, "row_loss", RowT));
  TensorType PerRowT = LT;
  PerRowT.Elem = FT;
  std::string Red = N.getAttrString("reduction", "mean").str();
  bool Ignore = N.getAttribute("ignore_index") != nullptr;
  StringRef RowName =
      Red == "none" && !Ignore ? StringRef(OutNames[0]) : StringRef();
  LOOM_TRY(Row, Op("Squeeze", {*Diff, Axis1}, "rows", PerRowT, {}, RowName));
  Value *Rows = *Row;
  Value *Kept = nullptr;
  if (Ignore) {
    Value *II = constScalar(B + ".ignore_index", IT,
                            (double)N.getAttrInt("ignore_index", 0));
    LOOM_TRY(Ign, Op("Equal", {Labels, II}, "ignored", LBoolT));
    StringRef Name = Red == "none" ? StringRef(OutNames[0]) : StringRef();
    LOOM_TRY(R0,
             Op("Where", {*Ign, ZeroF, Rows}, "rows_kept", PerRowT, {}, Name));
    Rows = *R0;
    if (Red == "mean") {
      LOOM_TRY(NotIgn, Op("Not", {*Ign}, "counted", LBoolT));
      LOOM_TRY(Cnt, Op("Cast", {*NotIgn}, "counted_f", PerRowT,
                       {intAttr("to", (int64_t)FT)}));
      Kept = *Cnt;
    }
  }
  TensorType ScalarT;
  ScalarT.Elem = FT;
  ScalarT.HasShape = true;
  Value *Result = Rows;
  if (Red == "sum" || (Red == "mean" && !Kept)) {
    LOOM_TRY(Tot,
             Op(Red == "sum" ? "ReduceSum" : "ReduceMean", {Rows}, "reduced",
                ScalarT, {intAttr("keepdims", 0)}, OutNames[0]));
    Result = *Tot;
  } else if (Red == "mean") {
    LOOM_TRY(Tot, Op("ReduceSum", {Rows}, "total", ScalarT,
                     {intAttr("keepdims", 0)}));
    LOOM_TRY(Cnt, Op("ReduceSum", {Kept}, "count", ScalarT,
                     {intAttr("keepdims", 0)}));
    LOOM_TRY(Mean, Op("Div", {*Tot, *Cnt}, "mean", ScalarT, {}, OutNames[0]));
    Result = *Mean;
  }
#undef LOOM_TRY
  Produced[Y] = Result;
  return Error::success();
}

Error RoleBuilder::lowerBiasAfterReduce(const Node &N, const NodeSharding &NS,
                                        ArrayRef<Value *> In,
                                        ArrayRef<std::string> OutNames) {
  const Value *Y = N.getOutput(0);
  // Row-parallel Gemm/Conv: partial products, reduced, then the bias once.
  std::string B = N.getName().empty() ? OutNames[0] : N.getName().str();
  std::string PN = fresh(OutNames[0] + ".partial");
  SmallVector<Value *, 2> Ins = {In[0], In[1]};
  Expected<Node *> Mm = add(N.getOpType(), N.getName(), Ins, {PN});
  if (!Mm)
    return Mm.takeError();
  for (const Attribute &A : N.getAttributes())
    if (A.Name != "beta")
      (*Mm)->addAttribute(copyAttributeValues(A));
  TensorType T = localType(Y, AxisSpec(), false);
  (*Mm)->getOutput(0)->Type = T;
  // The one all-reduce the rule declares (Rules.cpp, setRowParallel).
  if (NS.Collectives.size() != 1)
    return err("bias after reduce of '" + N.getName() + "' declares " +
               Twine(NS.Collectives.size()) + " collectives, not 1");
  Expected<Value *> Red =
      tpCollective(NS.Collectives[0], (*Mm)->getOutput(0), OutNames[0], T);
  if (!Red)
    return Red.takeError();
  Value *Bias = In[2];
  if (N.getOpType() == "Conv") {
    // [Co] -> [Co, 1, ..., 1] to broadcast over the spatial dims.
    unsigned Spatial = T.getRank() - 2;
    std::vector<int64_t> S = {Bias->Type.Dims[0].Size};
    S.insert(S.end(), Spatial, 1);
    Value *SV = constInt64(B + ".bias_shape", {(int64_t)S.size()}, S);
    std::string RN = fresh(B + ".bias");
    Expected<Node *> Rs =
        add("Reshape", fresh(B + "/bias_reshape"), {Bias, SV}, {RN});
    if (!Rs)
      return Rs.takeError();
    TensorType BT = Bias->Type;
    BT.Dims.clear();
    for (int64_t D : S)
      BT.Dims.push_back(Dim(D));
    (*Rs)->getOutput(0)->Type = BT;
    Bias = (*Rs)->getOutput(0);
  } else if (N.getAttrFloat("beta", 1.0f) != 1.0f) {
    Value *Beta =
        constScalar(B + ".beta", Bias->Type.Elem, N.getAttrFloat("beta", 1.0f));
    std::string MN = fresh(B + ".scaled_bias");
    Expected<Node *> Mu = add("Mul", fresh(B + "/beta"), {Bias, Beta}, {MN});
    if (!Mu)
      return Mu.takeError();
    (*Mu)->getOutput(0)->Type = Bias->Type;
    Bias = (*Mu)->getOutput(0);
  }
  Expected<Node *> Ad =
      add("Add", fresh(B + "/bias"), {*Red, Bias}, {OutNames[0]});
  if (!Ad)
    return Ad.takeError();
  (*Ad)->getOutput(0)->Type = T;
  Produced[Y] = (*Ad)->getOutput(0);
  return Error::success();
}

/// Whether input \p I of \p N is the weight side of a matrix product:
/// MatMul's and Gemm's B (and Gemm's C).
static bool isWeightOperand(const Node &N, unsigned I) {
  StringRef Op = N.getOpType();
  return N.getDomain().empty() && I >= 1 && (Op == "MatMul" || Op == "Gemm");
}

Error RoleBuilder::buildNode(const Node &N) {
  Error E = buildNodeUnnamed(N);
  if (!E)
    return E;
  std::string Msg = toString(std::move(E));
  return err(namesNode(Msg) ? Msg : describeNode(N) + ": " + Msg);
}

Error RoleBuilder::buildNodeUnnamed(const Node &N) {
  // Built already (a producer recomputed for an earlier consumer).
  if (N.getNumOutputs() && Produced.count(N.getOutput(0)))
    return Error::success();
  if (!Building.insert(&N).second)
    return err(describeNode(N) + ": depends on itself across devices");
  // Every node made for N (its reshards, receives and sends included) runs
  // in N's pipeline chunk; nodes of recursively built producers keep their
  // own.
  unsigned FirstNew = G->getNumNodes();
  auto TagChunk = make_scope_exit([&, FirstNew] {
    unsigned Chunk = R.Nodes.lookup(&N).Chunk;
    for (unsigned I = FirstNew; I < G->getNumNodes(); ++I)
      if (G->getNodes()[I]->Stage < 0)
        G->getNodes()[I]->Stage = Chunk;
  });
  auto NI = R.Nodes.find(&N);
  if (NI == R.Nodes.end())
    return err(describeNode(N) + ": has no sharding");
  const NodeSharding &NS = NI->second;
  if (const RingSite *RS = R.findRingSite(&N)) {
    // The scores and the chain after them are computed inside the ring,
    // block by block, at the context node.
    Building.erase(&N);
    if (RS->Context != &N)
      return Error::success();
    if (Error Er = buildRing(N, *RS, getOutputNames(N, NS, false)[0]))
      return Er;
    emitSends(N);
    return Error::success();
  }
  if (hasSubgraphs(N))
    return buildControlFlow(N, NS);
  if (const EmbeddingShard *S = getEmbeddingShard(R, N))
    return lowerEmbeddingLookup(N, *S);

  // Expert parallelism: a branch of an expert another ep rank owns is left
  // out; the combine chain skips what is absent.
  bool IsBranch = NS.Expert >= 0;
  if (IsBranch && !ownsExpert(NS.Expert)) {
    for (const Value *O : N.getOutputs())
      if (O)
        Absent.insert(O);
    Produced[N.getOutput(0)] = nullptr;
    return Error::success();
  }
  bool AnyEPIn = false;
  for (const Value *V : N.getInputs())
    if (V && (Absent.count(V) || EPPartial.count(V) || InEPRegion.count(V)))
      AnyEPIn = true;
  if (NS.ExpertCombine) {
    Expected<bool> Done = buildExpertCombine(N, NS);
    if (!Done)
      return Done.takeError();
    if (*Done)
      return Error::success();
  }

  SmallVector<Value *, 4> In;
  for (unsigned I = 0; I < N.getNumInputs(); ++I) {
    Expected<Value *> X = buildInput(N, NS, I, IsBranch);
    if (!X)
      return X.takeError();
    In.push_back(*X);
  }
  SmallVector<std::string, 2> OutNames =
      getOutputNames(N, NS, IsBranch || AnyEPIn);
  if (NS.Lower != NodeSharding::Lowering::None) {
    if (Error Er = lowerSpecial(N, NS, In, OutNames))
      return Er;
  } else if (Error Er = cloneLocal(N, NS, In, OutNames, IsBranch)) {
    return Er;
  }
  for (const Value *O : N.getOutputs())
    if (O && DD.count(O) &&
        (IsBranch || (AnyEPIn && EPPartial.count(N.getOutput(0)))))
      InEPRegion.insert(O);
  return finishNode(N);
}

Expected<bool> RoleBuilder::buildExpertCombine(const Node &N,
                                               const NodeSharding &NS) {
  // The combine chain: a sum over experts of which this rank holds some.
  const Value *A = N.getInput(0), *B = N.getInput(1);
  auto Skip = [&](const Value *V) {
    return Absent.count(V) ||
           (!InEPRegion.count(V) && !EPPartial.count(V) && !DD.count(V));
  };
  const Value *Y = N.getOutput(0);
  bool SA = Skip(A), SB = Skip(B);
  if (SA && SB) {
    Absent.insert(Y);
    Produced[Y] = nullptr;
    return true;
  }
  if (SA || SB) {
    const Value *Keep = SA ? B : A;
    Expected<Value *> X = materialize(Keep, NS.InputSpecs[SA ? 1 : 0]);
    if (!X)
      return X.takeError();
    Produced[Y] = *X;
    EPPartial.insert(Y);
    InEPRegion.insert(Y);
    return true;
  }
  EPPartial.insert(Y);
  InEPRegion.insert(Y);
  return false;
}

Expected<Value *> RoleBuilder::buildInput(const Node &N, const NodeSharding &NS,
                                          unsigned I, bool IsBranch) {
  const Value *V = N.getInput(I);
  if (!V || NS.Lower == NodeSharding::Lowering::GlobalShape)
    return nullptr;
  if (EPPartial.count(V) && !(EPPartial.count(N.getOutput(0))))
    return leaveExpertRegion(V, NS.InputSpecs[I]);
  Expected<Value *> X = materialize(V, NS.InputSpecs[I]);
  if (!X)
    return X.takeError();
  // Into or out of stacked expert work (the ep rules, Rules.h): the
  // all-to-all dispatch brings this rank's experts the ep group's tokens
  // (a broadcast expert dim [1, N, d] is gathered); the combine returns
  // every expert's output for this rank's tokens.
  ExpertTransition XT = ExpertTransition::None;
  if (EP > 1 && *X && (StackedRegion.count(V) || (NS.Stacked && DD.count(V))))
    XT = getStackedTransition(StackedRegion.count(V), NS.Stacked,
                              (*X)->Type.getRank() ? (*X)->Type.Dims[0].Size
                                                   : 0);
  if (XT != ExpertTransition::None && (*X)->Type.getRank() < 2)
    return err(describeNode(N) + ": expert input '" + V->getName() +
               "' has rank < 2");
  if (XT != ExpertTransition::None) {
    Expected<Value *> Y =
        XT == ExpertTransition::Combine
            ? allToAll(V, *X, /*SplitAxis=*/1, /*ConcatAxis=*/0, ".combine")
        : XT == ExpertTransition::GatherTokens
            ? gatherTokens(V, *X)
            : allToAll(V, *X, /*SplitAxis=*/0, /*ConcatAxis=*/1, ".dispatch");
    if (!Y)
      return Y.takeError();
    X = *Y;
  }
  if (IsBranch && *X && DD.count(V) && !InEPRegion.count(V)) {
    // Tokens entering an expert branch: every expert sees every token of
    // the ep group.
    Expected<Value *> Part = epGatheredPart(V, NS.InputSpecs[I]);
    if (!Part || *Part)
      return Part;
    return epGathered(V, *X);
  }
  if (IsBranch && *X && !DD.count(V) && EPTokens > 0 && (*X)->Type.getRank() &&
      (*X)->Type.Dims[0].Size == EPTokens && !V->isParameter() &&
      !isWeightOperand(N, I)) {
    // A constant with one row per token (torch's zeros_like): widen it
    // to the gathered tokens when it is a fill. (A weight folded to a
    // constant, e.g. a transposed projection, may have as many rows as
    // there are tokens by chance; it is not per-token.)
    Expected<Value *> W = widenFill(V, *X);
    if (!W)
      return W.takeError();
    if (!*W)
      return err(describeNode(N) + ": constant '" + V->getName() +
                 "' has one row per token and is not a fill; ep>1 cannot "
                 "emit it");
    return *W;
  }
  return *X;
}

Expected<Value *> RoleBuilder::leaveExpertRegion(const Value *V,
                                                 const AxisSpec &Spec) {
  Expected<Value *> X = materialize(V, Spec);
  if (!X)
    return X.takeError();
  TensorType T = (*X)->Type;
  if (!T.Dims.empty())
    T.Dims[0] = Dim(T.Dims[0].Size / EP);
  auto Key = std::make_pair(V, std::string("ep-rs") + Spec.str());
  auto It = Converted.find(Key);
  if (It == Converted.end()) {
    Expected<Value *> Y = collective(
        "HcomReduceScatter", "ep", *X, (V->getName() + ".epscatter").str(), T,
        {{"reduction", 0, "sum"}, {"rank_size", EP}, {"axis", 0}});
    if (!Y)
      return Y.takeError();
    It = Converted.emplace(Key, *Y).first;
  }
  return It->second;
}

SmallVector<std::string, 2> RoleBuilder::getOutputNames(const Node &N,
                                                        const NodeSharding &NS,
                                                        bool InExpertWork) {
  SmallVector<std::string, 2> OutNames;
  for (unsigned O = 0; O < N.getNumOutputs(); ++O) {
    const Value *V = N.getOutput(O);
    if (!V) {
      OutNames.push_back("");
      continue;
    }
    bool IsModelOut = is_contained(Src.getOutputs(), V);
    std::string Name = V->getName().str();
    if (IsModelOut && (NS.OutputSpecs[O] != AxisSpec() || InExpertWork))
      Name += ".local";
    OutNames.push_back(fresh(Name));
  }
  return OutNames;
}

Error RoleBuilder::cloneLocal(const Node &N, const NodeSharding &NS,
                              MutableArrayRef<Value *> In,
                              ArrayRef<std::string> OutNames, bool IsBranch) {
  StringRef Op = N.getOpType();
  const Value *Y = N.getOutput(0);
  // Token values of the expert region hold the ep group's tokens.
  bool YGathered = (IsBranch || EPPartial.count(Y)) && DD.count(Y);
  localizeShapeInput(N, NS, In, YGathered);
  std::vector<Attribute> Attrs;
  for (const Attribute &A : N.getAttributes())
    Attrs.push_back(copyAttributeValues(A));
  localizeSplitSizes(N, NS, In, Attrs);
  localizeHeadAttributes(N, NS, TP, Attrs);
  Expected<Node *> C = G->addNode(Op, N.getDomain(), N.getName(), In, OutNames);
  if (!C)
    return C.takeError();
  (*C)->setAttributes(std::move(Attrs));
  for (unsigned O = 0; O < N.getNumOutputs(); ++O)
    if (const Value *V = N.getOutput(O)) {
      TensorType LT = localType(V, NS.OutputSpecs[O], YGathered && DD.count(V));
      if (NS.Stacked && EP > 1 && DD.count(V) && LT.getRank() >= 2) {
        // This rank's experts, the group's tokens.
        if (LT.Dims[0].Size == (int64_t)R.NumExperts)
          LT.Dims[0] = Dim(LT.Dims[0].Size / EP);
        LT.Dims[1] = Dim(LT.Dims[1].Size * EP);
        StackedRegion.insert(V);
      }
      (*C)->getOutput(O)->Type = LT;
      Produced[V] = (*C)->getOutput(O);
    }
  return Error::success();
}

void RoleBuilder::localizeShapeInput(const Node &N, const NodeSharding &NS,
                                     MutableArrayRef<Value *> In,
                                     bool YGathered) {
  StringRef Op = N.getOpType();
  const Value *Y = N.getOutput(0);
  if ((Op == "Reshape" || Op == "Expand") && Y &&
      (!NS.OutputSpecs[0].isReplicated() || YGathered) &&
      !NS.OutputSpecs[0].isPartial()) {
    TensorType LT = localType(Y, NS.OutputSpecs[0], YGathered);
    int D = NS.OutputSpecs[0].Dim;
    if (LT.isStatic()) {
      In[1] = constInt64(N.getName().str() + ".local_shape",
                         {(int64_t)LT.getRank()}, LT.getStaticShape());
    } else if (Optional<std::vector<int64_t>> Target =
                   getConstantInts(N.getInput(1));
               Target && !YGathered && D >= 0 && (unsigned)D < LT.getRank() &&
               LT.Dims[D].isStatic()) {
      // A data-dependent count beside the split (an index-routed expert's
      // tokens, ruleReshape): the model's own target shape, the split dim
      // at its local size (Expand's shape aligns from the right).
      int64_t At = D - ((int64_t)LT.getRank() - (int64_t)Target->size());
      if (At >= 0 && At < (int64_t)Target->size()) {
        (*Target)[At] = LT.Dims[D].Size;
        In[1] = constInt64(N.getName().str() + ".local_shape",
                           {(int64_t)Target->size()}, *Target);
      }
    }
  }
  if (Op == "Reshape" && Y && NS.OutputSpecs[0].isPartial() && YGathered) {
    TensorType LT = localType(Y, AxisSpec(), true);
    In[1] = constInt64(N.getName().str() + ".local_shape",
                       {(int64_t)LT.getRank()}, LT.getStaticShape());
  }
}

void RoleBuilder::localizeSplitSizes(const Node &N, const NodeSharding &NS,
                                     MutableArrayRef<Value *> In,
                                     std::vector<Attribute> &Attrs) {
  if (N.getOpType() != "Split" || NS.InputSpecs.empty() ||
      NS.InputSpecs[0].Blocks.empty())
    return;
  std::vector<int64_t> Local;
  for (int64_t B : NS.InputSpecs[0].Blocks)
    Local.push_back(B / TP);
  bool InAttr = false;
  for (Attribute &A : Attrs)
    if (A.Name == "split") {
      A.Is = Local;
      InAttr = true;
    }
  if (!InAttr && N.getNumInputs() > 1 && N.getInput(1))
    In[1] = constInt64(N.getName().str() + ".local_split",
                       {(int64_t)Local.size()}, Local);
}

Error RoleBuilder::buildControlFlow(const Node &N, const NodeSharding &NS) {
  // Loop/If/Scan run replicated: every rank runs the whole body on whole
  // tensors. Its inputs and the outer values its bodies read are gathered
  // first (materialize inserts the Hcom op); expert-parallel values, which
  // no rank holds whole, are refused.
  auto Refuse = [&](const Twine &Why) {
    return err(describeNode(N) + ": " + Why);
  };
  if (NS.Expert >= 0 || NS.Stacked || NS.ExpertCombine)
    return Refuse("control flow inside an expert region cannot be emitted");
  for (const AxisSpec &S : NS.OutputSpecs)
    if (!S.isReplicated())
      return Refuse("its outputs are sharded (" + S.str() +
                    "); control flow is emitted replicated only");
  auto IsEP = [&](const Value *V) {
    return Absent.count(V) || EPPartial.count(V) || InEPRegion.count(V);
  };
  SmallVector<Value *, 4> In;
  for (const Value *V : N.getInputs()) {
    if (V && IsEP(V))
      return Refuse("input '" + V->getName() +
                    "' is expert-parallel; no rank holds it whole");
    Expected<Value *> X = materialize(V, AxisSpec());
    if (!X)
      return X.takeError();
    In.push_back(*X);
  }
  DenseMap<const Value *, Value *> Outer;
  for (const Value *V : getCapturedValues(N)) {
    if (IsEP(V))
      return Refuse("its body reads '" + V->getName() +
                    "', which is expert-parallel; no rank holds it whole");
    Expected<Value *> X = materialize(V, AxisSpec());
    if (!X)
      return X.takeError();
    if (!*X)
      return Refuse("its body reads '" + V->getName() +
                    "', which this rank does not have");
    Outer[V] = *X;
  }
  SmallVector<std::string, 2> OutNames;
  for (const Value *V : N.getOutputs())
    OutNames.push_back(V ? fresh(V->getName()) : std::string());
  Expected<Node *> C = emitControlFlowNode(*G, N, In, OutNames, Outer);
  if (!C)
    return C.takeError();
  for (unsigned O = 0; O < N.getNumOutputs(); ++O)
    if (const Value *V = N.getOutput(O)) {
      (*C)->getOutput(O)->Type = V->Type;
      Produced[V] = (*C)->getOutput(O);
    }
  return finishNode(N);
}

Error RoleBuilder::lowerEmbeddingLookup(const Node &N,
                                        const EmbeddingShard &S) {
  unsigned NG = R.Plan.DP;
  const Value *W = N.getInput(0), *IdsV = N.getInput(1);
  const Value *OutV = N.getOutput(0);
  if (DPR < 0 || !OutV || !OutV->Type.isStatic() || !IdsV->Type.isStatic() ||
      !IdsV->Type.getRank())
    return err("embedding lookup '" + N.getName() +
               "': needs static, batched ids and a dp role");
  Expected<Value *> Ids = materialize(IdsV, AxisSpec());
  if (!Ids)
    return Ids.takeError();
  EmbLookups.insert(OutV);
  std::string Base = OutV->getName().str();
  // Names are fresh, so adding a node cannot fail.
  auto Op = [&](StringRef OpT, StringRef Suffix, ArrayRef<Value *> In,
                TensorType T) {
    std::string Name = fresh(Base + "." + Suffix.str());
    Node *X = cantFail(add(OpT, Name, In, {Name}));
    X->getOutput(0)->Type = std::move(T);
    return X->getOutput(0);
  };
  Value *I64 = *Ids;
  if (I64->Type.Elem != DataType::Int64) {
    I64 = Op("Cast", "ids64", {I64},
             TensorType(DataType::Int64, I64->Type.getStaticShape()));
    I64->getDefiningNode()->addAttribute(
        intAttr("to", (int64_t)DataType::Int64));
  }
  // The group's ids, in dp order (sample i of the group is rank i / b's).
  Shape IdShape = I64->Type.getStaticShape();
  IdShape[0] *= NG;
  Expected<Value *> GId = collective(
      "HcomAllGather", "dp", I64, (IdsV->getName() + ".dpgather").str(),
      TensorType(DataType::Int64, IdShape), {{"rank_size", NG}, {"axis", 0}});
  if (!GId)
    return GId.takeError();
  DataType ET = W->Type.Elem;
  int64_t D = W->Type.Dims[1].Size;
  Shape PShape = OutV->Type.getStaticShape();
  PShape[0] *= NG;
  Shape MShape = IdShape;
  MShape.push_back(1);
  TensorType IT(DataType::Int64, IdShape), BT(DataType::Bool, IdShape),
      PT(ET, PShape);
  // A 0/1 mask of the group's ids, [N*b, ..., 1] in the table's type.
  auto MaskOf = [&](Value *Bool) {
    Value *U;
    if (R.M->getOpsetVersion("") >= 13) {
      U = Op("Unsqueeze", "mask1",
             {Bool, constInt64(Base + ".last", {1}, {-1})},
             TensorType(DataType::Bool, MShape));
    } else {
      U = Op("Unsqueeze", "mask1", {Bool}, TensorType(DataType::Bool, MShape));
      U->getDefiningNode()->addAttribute(intsAttr("axes", {-1}));
    }
    Value *C = Op("Cast", "maskf", {U}, TensorType(ET, MShape));
    C->getDefiningNode()->addAttribute(intAttr("to", (int64_t)ET));
    return C;
  };
  auto I64Const = [&](StringRef Suffix, int64_t V) {
    return constScalar(Base + "." + Suffix.str(), DataType::Int64, (double)V);
  };
  Value *Partial = nullptr;
  if (S.Kind == EmbShardKind::Col || S.Kind == EmbShardKind::Row ||
      (int)S.Owner == DPR) {
    Expected<EmbeddingShardData> SD =
        getEmbeddingShardData(*W, S.Kind, NG, (unsigned)DPR);
    if (!SD)
      return SD.takeError();
    Expected<Value *> Shard =
        G->addParameter(fresh(W->getName()), SD->Type, SD->Data);
    if (!Shard)
      return Shard.takeError();
    if (S.Kind == EmbShardKind::Col) {
      // This rank's D/N columns of the group's rows, [N*b, ..., D/N]; an
      // all-to-all over dp sends rank j its samples' block and concatenates
      // the column slices in rank order: [b, ..., D].
      Shape LShape = PShape;
      LShape.back() = SD->Type.Dims[1].Size;
      Value *L = Op("Gather", "lookup", {*Shard, *GId}, TensorType(ET, LShape));
      return finishNode(N, OutV,
                        allToAllDP(L, Base + ".dpa2a", 0,
                                   (int)LShape.size() - 1, OutV->Type));
    }
    if (S.Kind == EmbShardKind::Table) {
      Partial = Op("Gather", "lookup", {*Shard, *GId}, PT);
    } else {
      // Rows [FirstRow, FirstRow + Rows) are here; other ids read row 0
      // and are masked to zero.
      int64_t Rows = SD->Rows;
      Value *Rel =
          Op("Sub", "rel", {*GId, I64Const("start", SD->FirstRow)}, IT);
      Value *Lo = Op("Less", "below", {Rel, I64Const("zero", 0)}, BT);
      Value *Hi = Op("Less", "inrange", {Rel, I64Const("rows", Rows)}, BT);
      Value *NotLo = Op("Not", "notbelow", {Lo}, BT);
      Value *Mine = Op("And", "mine", {NotLo, Hi}, BT);
      Value *Safe = Op("Where", "safe", {Mine, Rel, I64Const("row0", 0)}, IT);
      Value *L = Op("Gather", "lookup", {*Shard, Safe}, PT);
      Partial = Op("Mul", "partial", {L, MaskOf(Mine)}, PT);
    }
  } else {
    // Not the owner of a table-wise table: zeros, shaped by the ids so the
    // all-gather stays in the graph.
    Value *Neg = Op("Less", "none", {*GId, I64Const("neg", 0)}, BT);
    std::string ZN = fresh(Base + ".zeros");
    Tensor Z = Tensor::makeFromDoubles(ET, {D}, std::vector<double>(D, 0.0));
    Z.Name = ZN;
    Node *C = cantFail(G->addNode("Constant", "", ZN, {}, {ZN}));
    C->getOutput(0)->Type = Z.Type;
    C->addAttribute(tensorAttr("value", std::move(Z)));
    Partial = Op("Mul", "partial", {MaskOf(Neg), C->getOutput(0)}, PT);
  }
  return finishNode(
      N, OutV,
      collective("HcomReduceScatter", "dp", Partial, Base + ".dpscatter",
                 OutV->Type,
                 {{"reduction", 0, "sum"}, {"rank_size", NG}, {"axis", 0}}));
}

Expected<RoleGraph> RoleBuilder::build() {
  M = std::make_unique<Model>();
  const Model &SM = *R.M;
  M->IRVersion = std::max<int64_t>(SM.IRVersion, 8);
  M->Opsets = SM.Opsets;
  M->Opsets.push_back({"hccl", 1});
  M->ProducerName = "loom";
  M->BaseDir = SM.BaseDir;
  Out.PP = Dev;
  Out.TP = TPR;
  Out.EP = EPR;
  Out.DP = DPR;
  Out.FileName = ("pp" + Twine(Dev) + "_" + getAxisGroupName(R) + Twine(TPR) +
                  (EP > 1 ? "_ep" + Twine(EPR) : Twine()) +
                  (DPR >= 0 ? "_dp" + Twine(DPR) : Twine()) + ".onnx")
                     .str();
  G = &M->getGraph();
  G->setName(
      (Src.getName() + "_" + StringRef(Out.FileName).drop_back(5)).str());
  // Names inside copied control-flow bodies stay taken.
  collectSubgraphValueNames(Src, UsedNames);
  if (EP > 1) {
    // Token count of the expert region (rows of the tokens every expert
    // reads), to refuse per-token constants we cannot widen.
    for (const auto &NP : Src.getNodes())
      if (R.Nodes.lookup(NP.get()).Expert >= 0)
        for (const Value *V : NP->getInputs())
          if (V && DD.count(V) &&
              R.Nodes.lookup(V->getDefiningNode()).Expert < 0 &&
              V->Type.getRank() && V->Type.Dims[0].isStatic()) {
            EPTokens = V->Type.Dims[0].Size;
            break;
          }
  }
  for (const auto &NP : Src.getNodes())
    if (deviceOf(NP.get()) == Dev)
      if (Error Er = buildNode(*NP))
        return std::move(Er);
  // Model outputs made on this device, replicated over tp; a split KV
  // cache output leaves as this rank's slice (KVCache.cpp).
  for (const Value *V : Src.getOutputs()) {
    const Node *D = V->getDefiningNode();
    if (!D || deviceOf(D) != Dev)
      continue;
    const KVCacheShard *KV = R.findKVCache(V);
    Expected<Value *> X = materialize(V, KV ? KV->Spec : AxisSpec());
    if (!X)
      return err(describeNode(*D) + ": model output '" + V->getName() +
                 "': " + toString(X.takeError()));
    Value *Y = *X;
    if (EPPartial.count(V))
      return err(describeNode(*D) + ": model output '" + V->getName() +
                 "' is an expert sum");
    if (Y->getName() != V->getName()) {
      Expected<Node *> Id =
          G->addNode("Identity", "", fresh(("output." + V->getName()).str()),
                     {Y}, {V->getName().str()});
      if (!Id)
        return Id.takeError();
      (*Id)->getOutput(0)->Type = Y->Type;
      Y = (*Id)->getOutput(0);
    }
    G->addOutput(Y);
    Out.Outputs.push_back(V->getName().str());
    for (const auto &NP : G->getNodes())
      if (NP->Stage < 0)
        NP->Stage = R.Nodes.lookup(D).Chunk;
  }
  eraseUnreadParts();
  Out.M = std::move(M);
  return std::move(Out);
}

} // namespace

Expected<std::vector<RoleGraph>> buildRoleGraphs(const ShardingResult &R) {
  const Graph &G = R.M->getGraph();
  DenseSet<const Value *> DD = findDataDependent(G);
  // Cross-device edges, tagged in the order their producers appear.
  Edges E;
  int NextTag = 0;
  auto DevOf = [&](const Node *N) {
    return R.Nodes.lookup(N).Chunk % R.Plan.PP;
  };
  for (const auto &NP : G.getNodes()) {
    unsigned Dst = DevOf(NP.get());
    // A control-flow body's outer-scope reads cross devices like inputs.
    std::vector<const Value *> Reads(NP->getInputs().begin(),
                                     NP->getInputs().end());
    if (hasSubgraphs(*NP))
      for (const Value *V : getCapturedValues(*NP))
        Reads.push_back(V);
    for (const Value *V : Reads) {
      if (!V || !DD.count(V) || V->isInput())
        continue;
      const Node *D = V->getDefiningNode();
      if (!D || DevOf(D) == Dst)
        continue;
      auto Key = std::make_pair(V->getName().str(), Dst);
      if (E.Tag.count(Key))
        continue;
      E.Tag[Key] = NextTag++;
      E.Dests[V].push_back(Dst);
    }
  }
  // Pipeline devices holding embedding table shards get one role per dp
  // rank (each holds its own shard).
  // Then every device does, so that each dp rank's pipeline is its own
  // chain of roles (a send from pp0_dp1 goes to pp1_dp1).
  bool AnyShard = any_of(G.getNodes(), [&](const auto &NP) {
    return getEmbeddingShard(R, *NP) != nullptr;
  });
  std::vector<bool> PerDP(R.Plan.PP, AnyShard);
  std::vector<RoleGraph> Roles;
  for (unsigned P = 0; P < R.Plan.PP; ++P)
    for (unsigned T = 0; T < R.Plan.TP; ++T)
      for (unsigned X = 0; X < R.Plan.EP; ++X)
        for (int D = PerDP[P] ? 0 : -1; D < (PerDP[P] ? (int)R.Plan.DP : 0);
             ++D) {
          RoleBuilder B(R, E, DD, P, T, X, D);
          Expected<RoleGraph> RG = B.build();
          if (!RG)
            return createStringError(inconvertibleErrorCode(),
                                     "role pp%u/tp%u/ep%u: %s", P, T, X,
                                     toString(RG.takeError()).c_str());
          Roles.push_back(std::move(*RG));
        }
  return std::move(Roles);
}

} // namespace loom
