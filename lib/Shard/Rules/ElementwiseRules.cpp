//===- ElementwiseRules.cpp - Element-wise maps, broadcasting, Expand ----===//
//
// An element-wise map computes each output element from the input elements
// at the same (broadcast) index, so a split of the output dim d is exact
// when every input is split on the dim it aligns with d (right-aligned
// numpy broadcasting) or broadcasts along it (size 1 or absent: then it is
// replicated). The first split input decides d.
// Partial operands pass only through maps linear in them: Add/Sub of
// partials (a zero constant counts as a partial of zeros), Mul by one
// replicated factor, Div by a replicated divisor, Neg/Identity/Dropout, and
// a Cast to a floating-point type. Any other op resolves them first.
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"
#include "llvm/ADT/STLExtras.h"

using namespace llvm;

namespace loom {
namespace shardrules {

void ruleElementwise(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  StringRef Op = N.getOpType();
  const Value *OutV = N.getOutput(0);
  unsigned OutRank = OutV ? OutV->Type.getRank() : 0;
  // Dims not static (-1: a data-dependent count) are never split; a split
  // dim must be static in every operand that is not broadcast along it.
  Shape OutShape = rankedShapeOf(OutV);
  unsigned NIn = N.getNumInputs();
  SmallVector<AxisSpec, 4> In;
  for (const Value *V : N.getInputs())
    In.push_back(Ctx.getSpec(V));
  bool AnyP = any_of(In, [](const AxisSpec &S) { return S.isPartial(); });
  if (AnyP) {
    // Linear in the partial operands: the local results sum to the global
    // one.
    bool Linear = false;
    if (Op == "Add" || Op == "Sub") {
      Linear = true;
      for (unsigned I = 0; I < NIn; ++I)
        Linear &= In[I].isPartial() || isZeroConstant(N.getInput(I));
    } else if (Op == "Mul") {
      unsigned NP =
          count_if(In, [](const AxisSpec &S) { return S.isPartial(); });
      Linear =
          NP == 1 && all_of(In, [](const AxisSpec &S) { return !S.isSplit(); });
    } else if (Op == "Div") {
      Linear = In[0].isPartial() && NIn > 1 && !In[1].isPartial() &&
               !In[1].isSplit();
    } else if (Op == "Neg" || Op == "Identity" || Op == "Dropout") {
      Linear = true;
    } else if (Op == "Cast") {
      Linear = OutV && isFloatingPoint(OutV->Type.Elem);
    }
    // A partial sum some other reader needs reduced is reduced once, here
    // too (RuleContext::mayStayPartial).
    for (unsigned I = 0; I < NIn && Linear; ++I)
      if (In[I].isPartial() && !Ctx.mayStayPartial(N.getInput(I)))
        Linear = false;
    if (Linear) {
      NS.InputSpecs.assign(In.begin(), In.end());
      NS.OutputSpecs.assign(N.getNumOutputs(), AxisSpec());
      NS.OutputSpecs[0] = AxisSpec::partial();
      return;
    }
    for (unsigned I = 0; I < NIn; ++I)
      if (In[I].isPartial())
        In[I] = Ctx.resolvePartial(N.getInput(I));
  }
  // The output dim a split lands on: the first split input decides.
  int OutDim = -1;
  std::vector<int64_t> Blocks;
  for (unsigned I = 0; I < NIn; ++I) {
    const Value *V = N.getInput(I);
    if (!V || !In[I].isSplit())
      continue;
    OutDim = In[I].Dim + (int)(OutRank - V->Type.getRank());
    Blocks = In[I].Blocks;
    break;
  }
  NS.InputSpecs.assign(NIn, AxisSpec());
  NS.OutputSpecs.assign(N.getNumOutputs(), AxisSpec());
  if (OutDim < 0 || (unsigned)OutDim >= OutShape.size() || OutShape[OutDim] < 0)
    return; // Nothing split (or shapes unknown): replicated.
  for (unsigned I = 0; I < NIn; ++I) {
    const Value *V = N.getInput(I);
    if (!V)
      continue;
    int Local = OutDim - (int)(OutRank - V->Type.getRank());
    Shape S = rankedShapeOf(V);
    bool Broadcast = Local < 0 || (unsigned)Local >= S.size() || S[Local] == 1;
    if (!V->Type.HasShape || (!Broadcast && S[Local] < 0)) {
      // Aligned with the split or broadcast along it: unknown.
      NS.InputSpecs.assign(NIn, AxisSpec());
      return;
    }
    if (Broadcast) {
      NS.InputSpecs[I] = AxisSpec(); // Replicated, broadcast along the split.
      continue;
    }
    AxisSpec Want = AxisSpec::split(Local);
    Want.Blocks = Blocks;
    NS.InputSpecs[I] = Want;
  }
  AxisSpec Out = AxisSpec::split(OutDim);
  Out.Blocks = Blocks;
  for (unsigned O = 0; O < N.getNumOutputs(); ++O)
    if (N.getOutput(O) && N.getOutput(O)->Type.getRank() == OutRank)
      NS.OutputSpecs[O] = Out;
}

/// Expand broadcasts to a constant shape: a split dim keeps its place from
/// the right (the split dim is not the broadcast one: broadcasting a size-1
/// dim of a split value cannot happen, size 1 is never split), and its
/// blocks with it (HF's repeat_kv on K/V heads moved in tp's head groups);
/// partial sums broadcast to partial sums.
void ruleExpand(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  const Value *X = N.getInput(0), *Y = N.getOutput(0);
  Optional<AxisSpec> In = getSplitLinearInput(N, Ctx, NS);
  if (!In || !getConstantInts(N.getInput(1)))
    return;
  const AxisSpec &CX = *In;
  int OutDim = CX.Dim + (int)(Y->Type.getRank() - X->Type.getRank());
  Shape SX = shapeOf(X), SY = shapeOf(Y);
  if (!CX.Blocks.empty() &&
      (SX.empty() || SY.empty() || SX[CX.Dim] != SY[OutDim]))
    return;
  NS.InputSpecs[0] = CX;
  NS.OutputSpecs[0] = AxisSpec::split(OutDim);
  NS.OutputSpecs[0].Blocks = CX.Blocks;
}

} // namespace shardrules
} // namespace loom
