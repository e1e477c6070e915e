//===- LossRules.cpp - Sharding rules of the training losses --------------===//
//
// SoftmaxCrossEntropyLoss (scores [N, C, d1, ...], labels [N, d1, ...],
// optional class weights [C]; outputs the loss and optionally log_prob of
// the scores' shape) and NegativeLogLikelihoodLoss (log_prob, labels,
// weights; one output) normalize or pick along the class axis (dim 1):
// - A split of the class axis (the vocab, from a column-parallel head):
//   SoftmaxCrossEntropyLoss without class weights and without the log_prob
//   output, at opset 13 to 17, is lowered as Megatron-LM's vocab-parallel
//   cross entropy (megatron/core/tensor_parallel/cross_entropy.py): the
//   scores stay split, each rank's row max is all-reduced (max), its sum of
//   exps and its masked target score all-reduced (sum); loss = log(sum) -
//   (target - max). The role builder emits it (RoleLowerings.cpp,
//   lowerVocabParallelCrossEntropy) and the evaluator prices (RuleSplit.cpp)
//   the three all-reduces of one value per row that the rule declares
//   (OpSharding::Collectives). Otherwise (weights,
//   log_prob, NegativeLogLikelihoodLoss) the scores are needed whole:
//   every input replicated, so the propagation all-gathers them over tp.
// - A split of another dim (the batch or a token dim, under sequence
//   parallelism) is exact with reduction = "none": each rank's rows give
//   their own losses; the labels split alike (dim D of the scores is dim
//   D - 1 of the labels past the class axis), the weights whole. The
//   reductions "mean" and "sum" over all rows run replicated, except on
//   context parallelism's axis (RuleContext::isSequenceAxis), where the
//   rows stay split and the loss is reduced over the cp group (Megatron-
//   Core all-reduces the loss over its cp group the same way): "sum" of the
//   local rows is a partial sum; "mean" without class weights or
//   ignore_index (every rank then counts the same rows) is the local mean
//   scaled by 1/cp, a partial sum too (ShardLowering::MeanOfShards). With
//   ignore_index the ranks count different rows, so the mean is the sum
//   over every rank's counted rows over their count: each rank's "sum"
//   and its count of labels other than ignore_index are all-reduced over
//   cp and divided (ShardLowering::MeanOverCount; Megatron-Core reduces
//   the loss and the number of tokens over its cp group alike). Class
//   weights keep the mean replicated.
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"

using namespace llvm;

namespace loom {
namespace shardrules {

/// Megatron's vocab-parallel cross entropy applies: scores split on the
/// class axis, no weights, no log_prob output, an opset whose Reduce* and
/// (Un)Squeeze the lowering writes.
static bool isVocabParallelCE(const Node &N, const RuleContext &Ctx,
                              const AxisSpec &CX) {
  StringRef Red = N.getAttrString("reduction", "mean");
  return N.getOpType() == "SoftmaxCrossEntropyLoss" && CX.isSplit() &&
         CX.Blocks.empty() && CX.Dim == 1 && Ctx.getOpset() >= 13 &&
         Ctx.getOpset() <= 17 && !(N.getNumInputs() > 2 && N.getInput(2)) &&
         !(N.getNumOutputs() > 1 && N.getOutput(1)) &&
         (Red == "none" || Red == "mean" || Red == "sum");
}

void ruleLoss(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  replicateAll(N, NS);
  const Value *X = N.getInput(0), *Labels = N.getInput(1);
  if (!X || !Labels)
    return;
  unsigned Rank = X->Type.getRank();
  AxisSpec CX = Ctx.getSpec(X);
  if (Labels->Type.getRank() + 1 == Rank && isVocabParallelCE(N, Ctx, CX)) {
    NS.InputSpecs[0] = CX;
    NS.Lower = ShardLowering::VocabParallelCrossEntropy;
    // One value of the scores' type per row (the labels' shape with the
    // class axis kept as 1), all-reduced three times: the row max, the
    // sum of exps, the target score. No backward collective.
    TensorType RowT = X->Type;
    RowT.Dims[1] = Dim(1);
    NS.Collectives = {getLoweringAllReduce(N, RowT, "max", "max"),
                      getLoweringAllReduce(N, RowT, "sum", "sum_exp"),
                      getLoweringAllReduce(N, RowT, "sum", "target")};
    return;
  }
  StringRef Red = N.getAttrString("reduction", "mean");
  bool Weighted = N.getNumInputs() > 2 && N.getInput(2);
  bool Ignore = N.getAttribute("ignore_index") != nullptr;
  bool OverCP =
      Ctx.isSequenceAxis() && (Red == "sum" || (Red == "mean" && !Weighted));
  if (Red != "none" && !OverCP)
    return;
  // MeanOverCount writes the loss alone.
  if (Red == "mean" && Ignore && N.getNumOutputs() > 1 && N.getOutput(1))
    return;
  if (!CX.isSplit() || !CX.Blocks.empty() || CX.Dim == 1 ||
      CX.Dim >= (int)Rank || Labels->Type.getRank() + 1 != Rank)
    return;
  AxisSpec Row = AxisSpec::split(CX.Dim == 0 ? 0 : CX.Dim - 1);
  NS.InputSpecs[0] = CX;
  NS.InputSpecs[1] = Row;
  NS.OutputSpecs[0] = Row;
  if (Red == "mean" && Ignore) {
    // The sum and the count all-reduced inside the lowering: one scalar
    // each.
    NS.OutputSpecs[0] = AxisSpec();
    NS.Lower = ShardLowering::MeanOverCount;
    TensorType One = N.getOutput(0)->Type;
    NS.Collectives = {getLoweringAllReduce(N, One, "sum", "sum"),
                      getLoweringAllReduce(N, One, "sum", "count")};
  } else if (Red != "none") {
    NS.OutputSpecs[0] = AxisSpec::partial();
    if (Red == "mean")
      NS.Lower = ShardLowering::MeanOfShards;
  }
  if (N.getNumOutputs() > 1 && N.getOutput(1))
    NS.OutputSpecs[1] = CX;
}

} // namespace shardrules
} // namespace loom
