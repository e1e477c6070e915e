//===- LossRules.cpp - Sharding rules of the training losses --------------===//
//
// SoftmaxCrossEntropyLoss (scores [N, C, d1, ...], labels [N, d1, ...],
// optional class weights [C]; outputs the loss and optionally log_prob of
// the scores' shape) and NegativeLogLikelihoodLoss (log_prob, labels,
// weights; one output) normalize or pick along the class axis (dim 1):
// - A split of the class axis (the vocab, from a column-parallel head)
//   needs the scores whole: every input replicated, so the propagation
//   all-gathers them over tp (Megatron instead keeps them split and
//   all-reduces the row max, the sum of exps and the target logit:
//   vocab_parallel_cross_entropy, not emitted here).
// - A split of another dim (the batch or a token dim, under sequence
//   parallelism) is exact with reduction = "none": each rank's rows give
//   their own losses; the labels split alike (dim D of the scores is dim
//   D - 1 of the labels past the class axis), the weights whole. The
//   reductions "mean" and "sum" over all rows run replicated.
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"

using namespace llvm;

namespace loom {
namespace shardrules {

void ruleLoss(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  replicateAll(N, NS);
  const Value *X = N.getInput(0), *Labels = N.getInput(1);
  if (!X || !Labels || N.getAttrString("reduction", "mean") != "none")
    return;
  unsigned Rank = X->Type.getRank();
  AxisSpec CX = Ctx.getSpec(X);
  if (!CX.isSplit() || !CX.Blocks.empty() || CX.Dim == 1 ||
      CX.Dim >= (int)Rank || Labels->Type.getRank() + 1 != Rank)
    return;
  AxisSpec Row = AxisSpec::split(CX.Dim == 0 ? 0 : CX.Dim - 1);
  NS.InputSpecs[0] = CX;
  NS.InputSpecs[1] = Row;
  NS.OutputSpecs[0] = Row;
  if (N.getNumOutputs() > 1 && N.getOutput(1))
    NS.OutputSpecs[1] = CX;
}

} // namespace shardrules
} // namespace loom
