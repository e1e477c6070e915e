//===- MovementRules.cpp - Reshape, Transpose, Slice, Concat, Split, ... -===//
//
// Ops that move data without computing on it carry a split to wherever its
// elements go (GSPMD, Xu et al. 2021, §3.3):
// - Reshape/Flatten keep the row-major order. A split of dim d of X holds,
//   per rank, contiguous runs of prod(X[d:])/n elements after a prefix of
//   prod(X[:d]) runs; an output dim j with the same prefix product
//   prod(Y[:j]) == prod(X[:d]) and a size the axis divides has the same
//   runs (4096 -> 32 x 128 puts a hidden split on the 32 heads). Where Y's
//   dim j also takes the last M runs of the prefix (prod(Y[:j]) x M ==
//   prod(X[:d])), it is a blocked split of M blocks (torch's
//   MultiheadAttention: [S, B, E] -> [S, B x heads, E / heads] puts the
//   heads of each sample in one block), and back: a blocked split of M
//   equal blocks is the split of a dim [M, block] on the block.
// - Transpose moves the split dim by the permutation; (Un)Squeeze shifts it
//   past the removed/inserted unit dims.
// - Slice, Split and Concat along another axis keep the split; a Split
//   along a blocked split dim gives each output one block, split.
// - Shape/Size of a split value is the global shape: a constant.
// Partial sums pass through Reshape, Transpose, (Un)Squeeze and Slice
// unchanged (each is linear).
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"
#include "llvm/ADT/STLExtras.h"

using namespace llvm;

namespace loom {
namespace shardrules {

void ruleReshape(const Node &N, RuleContext &Ctx, OpSharding &NS,
                 bool Flatten) {
  const Value *X = N.getInput(0), *Y = N.getOutput(0);
  Shape SX = shapeOf(X), SY = shapeOf(Y);
  AxisSpec CX = Ctx.getSpec(X);
  replicateAll(N, NS);
  if (CX.isPartial()) {
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs[0] = CX;
    return;
  }
  // The role builder writes the rank's target shape (localizeShapeInput):
  // a constant.
  if (!CX.isSplit() || (!Flatten && !getConstantInts(N.getInput(1))))
    return;
  if (SX.empty() || SY.empty()) {
    // A data-dependent count among the dims (an index-routed expert's
    // tokens): the split dim and every dim after it equal and static on
    // both sides keep their elements in place (row-major), however the
    // dims before them are merged or split.
    Shape RX = rankedShapeOf(X), RY = rankedShapeOf(Y);
    size_t K = RX.size() - CX.Dim;
    if (RX.empty() || RY.size() < K || !CX.Blocks.empty())
      return;
    for (size_t I = 1; I <= K; ++I)
      if (RX[RX.size() - I] < 0 || RX[RX.size() - I] != RY[RY.size() - I])
        return;
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs[0] = AxisSpec::split(RY.size() - K);
    return;
  }
  // A blocked split dim of M equal blocks reads as dims [M, block] split on
  // the block.
  int64_t Blocks = 1;
  if (!CX.Blocks.empty()) {
    if (!is_splat(CX.Blocks))
      return;
    Blocks = CX.Blocks.size();
  }
  int64_t Pre = product(makeArrayRef(SX).take_front(CX.Dim)) * Blocks;
  int64_t Acc = 1;
  for (unsigned J = 0; J < SY.size(); ++J) {
    // Y's dim J starts with the last M = Pre / Acc runs of the prefix:
    // each holds one run, G elements of it per prefix index.
    int64_t M = Pre % Acc ? 0 : Pre / Acc;
    if (M && SY[J] % M == 0 && SY[J] / M > 1 && Ctx.isDivisible(SY[J] / M)) {
      NS.InputSpecs[0] = CX;
      NS.OutputSpecs[0] = AxisSpec::split(J);
      if (M > 1)
        NS.OutputSpecs[0].Blocks.assign(M, SY[J] / M);
      return;
    }
    Acc *= SY[J];
    if (Acc > Pre)
      break;
  }
}

void ruleTranspose(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  AxisSpec CX = Ctx.getSpec(N.getInput(0));
  unsigned Rank = N.getInput(0)->Type.getRank();
  keepInputs(N, Ctx, NS, CX);
  if (!CX.isSplit())
    return;
  Optional<std::vector<int64_t>> Perm = N.getAttrInts("perm");
  for (unsigned J = 0; J < Rank; ++J)
    if ((Perm ? (*Perm)[J] : (int64_t)(Rank - 1 - J)) == CX.Dim) {
      AxisSpec Out = CX;
      Out.Dim = J;
      NS.OutputSpecs[0] = Out;
    }
}

void ruleUnsqueezeSqueeze(const Node &N, RuleContext &Ctx, OpSharding &NS,
                          bool Unsqueeze) {
  const Value *X = N.getInput(0), *Y = N.getOutput(0);
  Optional<AxisSpec> In = getSplitLinearInput(N, Ctx, NS);
  if (!In)
    return;
  const AxisSpec &CX = *In;
  std::vector<int64_t> Axes = readAxes(N, 1);
  unsigned RX = X->Type.getRank(), RY = Y->Type.getRank();
  std::vector<bool> Marked(Unsqueeze ? RY : RX, false);
  for (int64_t A : Axes) {
    int I = normAxis(A, Unsqueeze ? RY : RX);
    if (I >= 0 && (unsigned)I < Marked.size())
      Marked[I] = true;
  }
  if (!Unsqueeze && Axes.empty()) {
    Shape SX = shapeOf(X);
    for (unsigned I = 0; I < SX.size(); ++I)
      Marked[I] = SX[I] == 1;
  }
  int Out = -1;
  if (Unsqueeze) {
    int Seen = 0;
    for (unsigned J = 0; J < RY; ++J)
      if (!Marked[J] && Seen++ == CX.Dim)
        Out = J;
  } else {
    if (Marked[CX.Dim])
      return;
    Out = CX.Dim;
    for (int I = 0; I < CX.Dim; ++I)
      Out -= Marked[I] ? 1 : 0;
  }
  if (Out < 0)
    return;
  NS.InputSpecs[0] = CX;
  AxisSpec O = CX;
  O.Dim = Out;
  NS.OutputSpecs[0] = O;
}

void ruleSplit(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  const Value *X = N.getInput(0);
  AxisSpec CX = Ctx.getSpec(X);
  unsigned Rank = X->Type.getRank();
  replicateAll(N, NS);
  // Each part of a partial sum is the partial sum of that part, as for
  // Slice (canonicalize writes equal Slices as one Split, issue 29).
  if (CX.isPartial()) {
    keepInputs(N, Ctx, NS, AxisSpec());
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs.assign(N.getNumOutputs(), CX);
    return;
  }
  if (!CX.isSplit())
    return;
  int Axis = normAxis(N.getAttrInt("axis", 0), Rank);
  if (CX.Dim != Axis && CX.Blocks.empty()) {
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs.assign(N.getNumOutputs(), CX);
    return;
  }
  if (CX.Dim == Axis && !CX.Blocks.empty() &&
      CX.Blocks.size() == N.getNumOutputs()) {
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs.assign(N.getNumOutputs(), AxisSpec::split(Axis));
  }
}

void ruleConcat(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  const Value *Y = N.getOutput(0);
  unsigned Rank = Y->Type.getRank();
  int Axis = normAxis(N.getAttrInt("axis", 0), Rank);
  int Dim = -1;
  for (const Value *V : N.getInputs()) {
    AxisSpec C = Ctx.getSpec(V);
    if (C.isSplit() && C.Blocks.empty()) {
      Dim = C.Dim;
      break;
    }
  }
  replicateAll(N, NS);
  if (Dim < 0 || Dim == Axis)
    return;
  for (unsigned I = 0; I < N.getNumInputs(); ++I)
    if (N.getInput(I))
      NS.InputSpecs[I] = AxisSpec::split(Dim);
  NS.OutputSpecs[0] = AxisSpec::split(Dim);
}

void ruleSlice(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  const Value *X = N.getInput(0);
  AxisSpec CX = Ctx.getSpec(X);
  replicateAll(N, NS);
  if (CX.isPartial()) {
    keepInputs(N, Ctx, NS, AxisSpec());
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs[0] = CX;
    return;
  }
  if (!CX.isSplit() || !CX.Blocks.empty())
    return;
  unsigned Rank = X->Type.getRank();
  std::vector<int64_t> Axes;
  if (Ctx.getOpset() < 10) {
    if (Optional<std::vector<int64_t>> A = N.getAttrInts("axes"))
      Axes = *A;
    else if (Optional<std::vector<int64_t>> S = N.getAttrInts("starts"))
      for (unsigned I = 0; I < S->size(); ++I)
        Axes.push_back(I);
  } else if (N.getInput(3)) {
    Optional<std::vector<int64_t>> A = getConstantInts(N.getInput(3));
    if (!A)
      return;
    Axes = *A;
  } else if (Optional<std::vector<int64_t>> S =
                 getConstantInts(N.getInput(1))) {
    for (unsigned I = 0; I < S->size(); ++I)
      Axes.push_back(I);
  } else {
    return;
  }
  for (int64_t A : Axes)
    if (normAxis(A, Rank) == CX.Dim)
      return;
  NS.InputSpecs[0] = CX;
  NS.OutputSpecs[0] = CX;
}

void ruleShape(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  // A partial sum has the global shape already; a split value's global
  // shape is a constant where it is static, else (a data-dependent count
  // beside the split) the value is gathered and its shape read.
  const Value *X = N.getInput(0);
  AxisSpec CX = Ctx.getSpec(X);
  if (CX.isSplit() && !X->Type.isStatic()) {
    replicateAll(N, NS);
    return;
  }
  keepInputs(N, Ctx, NS, AxisSpec());
  if (CX.isSplit())
    NS.Lower = ShardLowering::GlobalShape;
}

} // namespace shardrules
} // namespace loom
