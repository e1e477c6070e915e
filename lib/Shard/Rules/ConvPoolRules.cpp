//===- ConvPoolRules.cpp - Sharding rules of Conv and the pools ----------===//
//
// A convolution (group = 1) is a matmul over the channels at every output
// position, so it splits as Megatron's weight matmuls do: W [Cout, Cin,
// k...] split on Cout gives the output split on its channels (dim 1) with
// the bias split alike (column parallel); an input split on its channels
// with W split on Cin gives partial sums (row parallel), the bias then
// added once after the reduction.
// Pools work per (sample, channel): a split of dim 0 or 1 stays.
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"

using namespace llvm;

namespace loom {
namespace shardrules {

void ruleConv(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  const Value *X = N.getInput(0), *W = N.getInput(1), *B = N.getInput(2);
  Shape SW = shapeOf(W);
  replicateAll(N, NS);
  int Dummy = 0;
  if (SW.size() < 3 || N.getAttrInt("group", 1) != 1 || !traceWeight(W, Dummy))
    return;
  AxisSpec CX = Ctx.getSpec(X);
  if (CX.isPartial())
    CX = AxisSpec();
  if (CX.isSplit() && CX.Dim == 1 && CX.Blocks.empty() &&
      Ctx.isDivisible(SW[1]) && Ctx.splitWeight(W, 1, {})) {
    setRowParallel(N, CX, Ctx.getStoredSpec(W), B != nullptr, NS);
    return;
  }
  if (!Ctx.isDivisible(SW[0]) || !Ctx.splitWeight(W, 0, {}))
    return;
  NS.InputSpecs = {AxisSpec(), Ctx.getStoredSpec(W)};
  if (B) {
    if (B->isParameter())
      Ctx.splitWeight(B, 0, {});
    NS.InputSpecs.push_back(AxisSpec::split(0));
  }
  NS.OutputSpecs = {AxisSpec::split(1)};
}

void rulePool(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  AxisSpec CX = Ctx.getSpec(N.getInput(0));
  replicateAll(N, NS);
  if (CX.isSplit() && CX.Dim <= 1 && CX.Blocks.empty()) {
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs[0] = CX;
  }
}

} // namespace shardrules
} // namespace loom
