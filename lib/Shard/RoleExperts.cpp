//===- RoleExperts.cpp - Expert-parallel regions of a role graph ----------===//
//
// The RoleBuilder parts for expert parallelism: tokens gathered over the
// ep group into expert branches, the all-to-all dispatch and combine of
// stacked experts, the combine chain's partial sums reduce-scattered
// back on leaving the region, and the inputs of each node (buildInput),
// which cross into or out of that work.
//
//===----------------------------------------------------------------------===//
#include "RoleBuilder.h"
#include "ShardAttrs.h"
#include "loom/IR/NodeLabel.h"
#include "loom/Shard/ExpertRules.h"
#include "llvm/ADT/STLExtras.h"

using namespace llvm;

namespace loom {

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
  // (The crossing, getExpertCrossing, found D a Split along a dim after
  // the tokens'.)
  const Node *D = V->getDefiningNode();
  auto NI = R.Nodes.find(D);
  if (NI == R.Nodes.end())
    return nullptr;
  const NodeSharding &NSD = NI->second;
  const Value *In = D->getInput(0);
  int64_t Rank = In->Type.getRank(), Axis = D->getAttrInt("axis", 0);
  Axis = Axis < 0 ? Axis + Rank : Axis;
  unsigned K = find(D->getOutputs(), V) - D->getOutputs().begin();
  if (Req.isPartial() || (Req.isSplit() && Req.Dim == Axis) ||
      NSD.InputSpecs.empty() || NSD.InputSpecs[0] != Req ||
      NSD.OutputSpecs[K] != Req)
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

/// Whether input \p I of \p N is the weight side of a matrix product:
/// MatMul's and Gemm's B (and Gemm's C).
static bool isWeightOperand(const Node &N, unsigned I) {
  StringRef Op = N.getOpType();
  return N.getDomain().empty() && I >= 1 && (Op == "MatMul" || Op == "Gemm");
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
  // What ep communicates here: the rules' decision, which the evaluator
  // prices (ExpertRules.h getExpertCrossing).
  ExpertCrossing XC;
  if (EP > 1)
    XC = getExpertCrossing(
        N, I, [&](const Node *X) { return R.getExpertRule(X); }, DD);
  if (XC.Kind == ExpertTransition::ReduceScatter)
    return leaveExpertRegion(V, NS.InputSpecs[I]);
  Expected<Value *> X = materialize(V, NS.InputSpecs[I]);
  if (!X || !*X)
    return X;
  // Into or out of stacked expert work: the all-to-all dispatch brings
  // this rank's experts the ep group's tokens (a broadcast expert dim
  // [1, N, d] is gathered); the combine returns every expert's output for
  // this rank's tokens.
  ExpertTransition XT = XC.Kind;
  if (XT == ExpertTransition::Dispatch || XT == ExpertTransition::Combine ||
      XT == ExpertTransition::GatherTokens) {
    if ((*X)->Type.getRank() < 2)
      return err(describeNode(N) + ": expert input '" + V->getName() +
                 "' has rank < 2");
    return XT == ExpertTransition::Combine
               ? allToAll(V, *X, /*SplitAxis=*/1, /*ConcatAxis=*/0, ".combine")
           : XT == ExpertTransition::GatherTokens
               ? gatherTokens(V, *X)
               : allToAll(V, *X, /*SplitAxis=*/0, /*ConcatAxis=*/1,
                          ".dispatch");
  }
  if (XT == ExpertTransition::Gather) {
    // Tokens entering an expert branch: every expert sees every token of
    // the ep group.
    if (XC.V == V)
      return epGathered(V, *X);
    Expected<Value *> Part = epGatheredPart(V, NS.InputSpecs[I]);
    if (Part && !*Part)
      return err(describeNode(N) + ": input '" + V->getName() +
                 "' is a part of '" + XC.V->getName() +
                 "' split otherwise over tp; ep>1 cannot gather it");
    return Part;
  }
  if (IsBranch && !DD.count(V) && EPTokens > 0 && (*X)->Type.getRank() &&
      V->Type.getRank() && V->Type.Dims[0].Size == EPTokens &&
      !V->isParameter() && !isWeightOperand(N, I)) {
    // A constant with one row per token (torch's zeros_like): widen it
    // to the gathered tokens when it is a fill (from the rank's rows: cp
    // keeps a branch's tokens split, getExpertInputSpec). (A weight folded to a
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
  auto Key = std::make_pair(V, std::string("ep-rs") + Spec.str());
  auto It = Converted.find(Key);
  if (It != Converted.end())
    return It->second;
  auto EPScatter = [&](Value *X) {
    TensorType T = X->Type;
    if (!T.Dims.empty())
      T.Dims[0] = Dim(T.Dims[0].Size / EP);
    return collective(
        "HcomReduceScatter", "ep", X, (V->getName() + ".epscatter").str(), T,
        {{"reduction", 0, "sum"}, {"rank_size", EP}, {"axis", 0}});
  };
  AxisSpec Cur = producedSpec(V);
  Expected<Value *> Y = nullptr;
  if (isEPScatterFirst(Cur, Spec, TP)) {
    // Leaving split over tp along dim 0, the ep dim: the tokens came in
    // gathered over tp and then over ep (buildInput: materialize, then
    // epGathered), so ep's reduce-scatter goes first and tp's
    // reduce-scatter or slice then takes this rank's part of what is left
    // (tp first would hand tp rank t the t-th part of every ep rank's rows).
    // The evaluator prices this order (ExpertRules.h isEPScatterFirst).
    Expected<Value *> X = produced(V);
    if (!X || !*X)
      return X;
    Y = EPScatter(*X);
    if (!Y)
      return Y.takeError();
    TensorType GT = (*Y)->Type;
    std::string Base = (V->getName() + ".epscatter").str();
    if (Optional<ShardCollective> C =
            getTransitionCollective(Cur, Spec, GT, TP))
      Y = tpCollective(*C, *Y, Base, C->Result, Cur.Blocks);
    else if (Cur.isReplicated())
      Y = sliceActivation(*Y, GT, Spec, Base);
    else
      return err("cannot reshard '" + V->getName() + "' from " + Cur.str() +
                 " to " + Spec.str() + " on leaving its expert region");
  } else {
    Expected<Value *> X = materialize(V, Spec);
    if (!X)
      return X.takeError();
    Y = EPScatter(*X);
  }
  if (!Y)
    return Y.takeError();
  Converted.emplace(Key, *Y);
  return *Y;
}

} // namespace loom
