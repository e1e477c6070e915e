//===- CollectiveRules.cpp - Collectives of another mesh axis ------------===//
//
// A graph propagated along one axis may already hold another axis'
// collectives: under cp beside tp, each tp rank's graph, with tp's hccl
// nodes, is propagated along cp (lib/Shard/ComposeContextParallel.cpp).
// HcomAllReduce (any reduction) combines its group's buffers element by
// element, so a split along this axis passes through it: each rank reduces
// its own piece with the same piece of its peers. HcomAllGather
// concatenates them along its `axis`, so a split of another dim passes
// through likewise. Any other collective runs on whole values.
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"

using namespace llvm;

namespace loom {
namespace shardrules {

void ruleHcomCollective(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  replicateAll(N, NS);
  StringRef Op = N.getOpType();
  const Value *X = N.getNumInputs() ? N.getInput(0) : nullptr;
  if (!X || N.getNumOutputs() != 1 ||
      (Op != "HcomAllReduce" && Op != "HcomAllGather"))
    return;
  AxisSpec C = Ctx.getSpec(X);
  if (!C.isSplit() || !C.Blocks.empty())
    return;
  if (Op == "HcomAllGather" &&
      C.Dim == normAxis(N.getAttrInt("axis", 0), X->Type.getRank()))
    return;
  NS.InputSpecs[0] = C;
  NS.OutputSpecs[0] = C;
}

} // namespace shardrules
} // namespace loom
