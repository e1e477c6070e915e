//===- RoleReshards.cpp - Values of a role graph in the spec needed -------===//
//
// The RoleBuilder parts that give a node its inputs in the spec it needs:
// source values made local (graph inputs, parameters, values received
// from another pipeline device), and reshards between specs (tp
// collectives, local slices, whole weights), with the builders of
// constants and Hcom* nodes they use.
//
//===----------------------------------------------------------------------===//
#include "RingAttention.h"
#include "RoleBuilder.h"
#include "ShardAttrs.h"
#include "loom/Shard/SlicedTensorData.h"

#include <array>

using namespace llvm;

namespace loom {

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

/// The indices along a split dim of global size \p S that rank \p Rk of
/// \p N holds, in its local order: each block (\p Blocks, or the whole
/// dim as one) divided among the ranks -- contiguously, or under the cp
/// ring as the ring's two chunks of the block (getRingPositions: a
/// flattened [batch x seq] dim holds each sequence's ring positions).
static std::vector<int64_t> getHeldPositions(bool Ring, unsigned N, unsigned Rk,
                                             int64_t S,
                                             ArrayRef<int64_t> Blocks) {
  std::vector<int64_t> Held;
  int64_t Start = 0;
  for (int64_t B : Blocks.empty() ? makeArrayRef(S) : Blocks) {
    if (Ring)
      for (int64_t P : getRingPositions(N, Rk, B))
        Held.push_back(Start + P);
    else
      for (int64_t I = 0; I < B / N; ++I)
        Held.push_back(Start + Rk * (B / N) + I);
    Start += B;
  }
  return Held;
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
    std::vector<int64_t> Held =
        getHeldPositions(R.CPRing, TP, Rk, S, FromBlocks);
    Arrived.insert(Arrived.end(), Held.begin(), Held.end());
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
  // A blocked split under the ring (a flattened [batch x seq] dim) is
  // gathered from the whole constant (sliceActivation).
  if (R.CPRing && !Req.Blocks.empty())
    return nullptr;
  if (R.CPRing) {
    // The ring's tokens are two chunks of 2 x cp (getRingPositions): each a
    // slice of the constant, concatenated in the graph. A weight-like
    // table stays one (tp reads it as it reads the model's).
    unsigned D = Req.Dim;
    int64_t Len = V->Type.Dims[D].Size / (2 * TP);
    SmallVector<Value *, 2> Chunks;
    for (unsigned C : {TPR, 2 * TP - 1 - TPR}) {
      TensorType T = V->Type;
      T.Dims[D] = Dim(Len);
      std::shared_ptr<const TensorData> CD;
      if (Data)
        CD = std::make_shared<SlicedTensorData>(
            Data, V->Type.getStaticShape(), getDataTypeSize(V->Type.Elem), D,
            ArrayRef<int64_t>(), 2 * TP, C);
      Expected<Value *> W = G->addParameter(
          fresh((V->getName() + ".chunk" + Twine(C)).str()), T, CD);
      if (!W)
        return W.takeError();
      Chunks.push_back(*W);
    }
    Expected<Node *> N = add("Concat", fresh("slice." + V->getName().str()),
                             Chunks, {fresh(V->getName().str() + ".slice")});
    if (!N)
      return N.takeError();
    (*N)->addAttribute(intAttr("axis", D));
    TensorType T = V->Type;
    T.Dims[D] = Dim(2 * Len);
    (*N)->getOutput(0)->Type = T;
    return (*N)->getOutput(0);
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
  if (R.CPRing) {
    // The ring's tokens: this rank's two chunks (getRingPositions) of
    // each sequence.
    std::vector<int64_t> Pos =
        getHeldPositions(true, TP, TPR, S[Req.Dim], Req.Blocks);
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
    if (*Y) {
      Converted[Key] = *Y;
      return *Y;
    }
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
                                : Expected<Value *>(nullptr);
      bool Sliced = Y && *Y;
      if (Y && !*Y)
        Y = wholeWeight(V);
      if (Y && *Y && Req.isSplit() && !Sliced)
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
            return Cur.Blocks.empty() && Req.Blocks.empty()
                       ? tpCollective(*C, *X, Base, C->Result)
                       : blockedAllToAll(*C, *X, Base, Cur, Req);
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

/// \p X with dim \p D of type \p T, whose \p NB blocks are its outer
/// factor, as two dims [NB, size / NB] (\p Split) or those two merged back.
static TensorType blockedType(TensorType T, unsigned D, int64_t NB,
                              bool Split) {
  if (Split) {
    int64_t S = T.Dims[D].Size;
    T.Dims[D] = Dim(NB);
    T.Dims.insert(T.Dims.begin() + D + 1, Dim(S / NB));
  } else {
    T.Dims[D] = Dim(T.Dims[D].Size * T.Dims[D + 1].Size);
    T.Dims.erase(T.Dims.begin() + D + 1);
  }
  return T;
}

Expected<Value *> RoleBuilder::blockedAllToAll(const ShardCollective &C,
                                               Value *X, StringRef Base,
                                               const AxisSpec &Cur,
                                               const AxisSpec &Req) {
  // The blocked dim D as [blocks, size / blocks] (a rank holds its piece
  // of every block, in block order): the all-to-all splits or concatenates
  // the inner dim, so each block is divided among the ranks, or put back
  // whole, and the dims merge again. Exact for equal blocks (Rules.h,
  // hasEqualBlocks), which is what getTransitionCollective admits.
  const AxisSpec &Blocked = Cur.Blocks.empty() ? Req : Cur;
  unsigned D = Blocked.Dim;
  int64_t NB = Blocked.Blocks.size();
  auto Shift = [&](int A) { return A >= (int)D ? A + 1 : A; };
  auto Reshape = [&](Value *V, TensorType T,
                     StringRef Suffix) -> Expected<Value *> {
    std::vector<int64_t> S;
    for (const Dim &Di : T.Dims)
      S.push_back(Di.Size);
    Value *SV =
        constInt64((Base + Suffix + ".shape").str(), {(int64_t)S.size()}, S);
    Expected<Node *> N =
        add("Reshape", fresh(("reshape." + Base + Suffix).str()), {V, SV},
            {fresh((Base + Suffix).str())});
    if (!N)
      return N.takeError();
    (*N)->getOutput(0)->Type = std::move(T);
    return (*N)->getOutput(0);
  };
  Expected<Value *> In =
      Reshape(X, blockedType(X->Type, D, NB, true), ".blocks");
  if (!In)
    return In.takeError();
  TensorType Out = blockedType(C.Result, D, NB, true);
  Expected<Value *> Y =
      addAllToAllV(*In, getAxisGroupName(R), TP, (Base + "." + C.Suffix).str(),
                   Shift(C.Axis), Shift(C.ConcatAxis), Out);
  if (!Y)
    return Y.takeError();
  return Reshape(*Y, C.Result, "." + C.Suffix + ".merged");
}

std::array<Value *, 4> RoleBuilder::allToAllCounts(const Value *X, unsigned NG,
                                                   StringRef Base) {
  // HCCL's AllToAllV counts: elements per peer, equal here.
  int64_t Per = X->Type.getNumElements().getValueOr(0) / NG;
  std::vector<int64_t> Counts(NG, Per), Displ;
  for (unsigned I = 0; I < NG; ++I)
    Displ.push_back(I * Per);
  return {
      constInt64((Base + ".send_counts").str(), {(int64_t)NG}, Counts),
      constInt64((Base + ".send_displacements").str(), {(int64_t)NG}, Displ),
      constInt64((Base + ".recv_counts").str(), {(int64_t)NG}, Counts),
      constInt64((Base + ".recv_displacements").str(), {(int64_t)NG}, Displ)};
}

Expected<Value *> RoleBuilder::addAllToAllV(Value *X, StringRef Group,
                                            unsigned NG, StringRef BaseName,
                                            int SplitAxis, int ConcatAxis,
                                            TensorType OutType) {
  std::string Base = BaseName.str();
  std::array<Value *, 4> Counts = allToAllCounts(X, NG, Base);
  Expected<Node *> N = G->addNode(
      "HcomAllToAllV", "hccl", fresh("hcom." + Group.str() + "." + Base),
      {X, Counts[0], Counts[1], Counts[2], Counts[3]}, {fresh(Base)});
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

} // namespace loom
