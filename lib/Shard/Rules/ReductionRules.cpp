//===- ReductionRules.cpp - Softmax, ArgMax, TopK, Reduce* ----------------===//
//
// Ops that combine elements along some axes and work independently along
// the others keep a split of any other dim:
// - Softmax/LogSoftmax/Hardmax (opset >= 13: along one axis; before: over
//   the dims from axis on, so only dims below it; a blocked split as well,
//   the heads of each sample after torch's attention reshape), ArgMax/ArgMin
//   with keepdims, TopK along its axis (every output of the input's rank: the
//   values and the indices).
// - Reduce*: a split of a kept dim stays (shifted past removed dims when
//   keepdims = 0). A split of a reduced dim: ReduceSum gives partial sums
//   (each rank sums its slice); every other reduction needs its input
//   whole. Partial sums pass through ReduceSum and ReduceMean (linear).
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"

using namespace llvm;

namespace loom {
namespace shardrules {

void ruleAxisOp(const Node &N, RuleContext &Ctx, OpSharding &NS, int Axis,
                bool Below) {
  AxisSpec CX = Ctx.getSpec(N.getInput(0));
  replicateAll(N, NS);
  // A blocked split too: the dim it is on is not combined.
  if (!CX.isSplit())
    return;
  bool OK = Below ? CX.Dim < Axis : CX.Dim != Axis;
  if (!OK)
    return;
  NS.InputSpecs[0] = CX;
  for (unsigned O = 0; O < N.getNumOutputs(); ++O)
    if (N.getOutput(O) &&
        N.getOutput(O)->Type.getRank() == N.getInput(0)->Type.getRank())
      NS.OutputSpecs[O] = CX;
}

void ruleSoftmax(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  unsigned Rank = N.getInput(0)->Type.getRank();
  if (Ctx.getOpset() >= 13)
    ruleAxisOp(N, Ctx, NS, normAxis(N.getAttrInt("axis", -1), Rank), false);
  else
    ruleAxisOp(N, Ctx, NS, normAxis(N.getAttrInt("axis", 1), Rank), true);
}

void ruleArgMax(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  unsigned Rank = N.getInput(0)->Type.getRank();
  if (N.getAttrInt("keepdims", 1))
    ruleAxisOp(N, Ctx, NS, normAxis(N.getAttrInt("axis", 0), Rank), false);
  else
    replicateAll(N, NS);
}

void ruleTopK(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  unsigned Rank = N.getInput(0)->Type.getRank();
  ruleAxisOp(N, Ctx, NS, normAxis(N.getAttrInt("axis", -1), Rank), false);
}

void ruleReduce(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  StringRef Op = N.getOpType();
  const Value *X = N.getInput(0);
  unsigned Rank = X->Type.getRank();
  AxisSpec CX = Ctx.getSpec(X);
  bool Linear = Op == "ReduceSum" || Op == "ReduceMean";
  replicateAll(N, NS);
  if (CX.isPartial()) {
    if (Linear) {
      NS.InputSpecs[0] = CX;
      NS.OutputSpecs[0] = CX;
    }
    return;
  }
  if (!CX.isSplit() || !CX.Blocks.empty())
    return;
  std::vector<int64_t> Axes = readAxes(N, 1);
  bool AxesFromInput =
      !N.getAttrInts("axes") && N.getNumInputs() > 1 && N.getInput(1);
  if (!AxesFromInput && !N.getAttrInts("axes") && N.getNumInputs() > 1 &&
      N.getInput(1))
    return;
  bool Keep = N.getAttrInt("keepdims", 1);
  if (Axes.empty()) {
    if (N.getAttrInt("noop_with_empty_axes", 0))
      return;
    for (unsigned I = 0; I < Rank; ++I)
      Axes.push_back(I);
  }
  bool Reduced = false;
  int Below = 0;
  for (int64_t A : Axes) {
    int I = normAxis(A, Rank);
    if (I == CX.Dim)
      Reduced = true;
    else if (I < CX.Dim)
      ++Below;
  }
  NS.InputSpecs[0] = CX;
  if (Reduced) {
    if (Op == "ReduceSum") {
      NS.OutputSpecs[0] = AxisSpec::partial();
      return;
    }
    NS.InputSpecs[0] = AxisSpec();
    return;
  }
  NS.OutputSpecs[0] = AxisSpec::split(Keep ? CX.Dim : CX.Dim - Below);
}

} // namespace shardrules
} // namespace loom
