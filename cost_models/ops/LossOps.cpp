//===- LossOps.cpp - Cost rules for the training losses -------------------===//
//
// SoftmaxCrossEntropyLoss (scores [N, C, d1, ...], labels [N, d1, ...],
// optional class weights [C]; outputs the loss and optionally log_prob) and
// NegativeLogLikelihoodLoss (log_prob [N, C, d1, ...], the same labels and
// weights): what torch.onnx.export writes for F.cross_entropy (one
// SoftmaxCrossEntropyLoss) and a hand-written LogSoftmax +
// NegativeLogLikelihoodLoss pair. LogSoftmax has its rule in NormOps.cpp.
//
// Both are memory bound: a few FLOPs per score against several HBM passes
// over the [N, C, ...] scores, so the rules count the bytes of the passes
// a framework makes, not only the op's inputs and outputs.
//
// SoftmaxCrossEntropyLoss follows Megatron-LM's vocab-parallel cross
// entropy (megatron/core/tensor_parallel/cross_entropy.py,
// VocabParallelCrossEntropy; PyTorch's F.cross_entropy under autocast also
// runs in f32). Per score element, with b the bytes of the scores' type:
//   forward  .float() upcast       read b, write 4  (only when b != 4)
//            max over the classes  read 4
//            in-place subtract     read 4, write 4
//            in-place exp          read 4, write 4
//            sum of the exps       read 4
//            in-place divide       read 4, write 4  (the softmax it saves)
//            = read 20 (+ b), write 12 (+ 4); the target gather, the log
//              of the sum and the loss are per row.
//   backward grad = softmax, minus 1 at the target (per row), in-place
//            multiply by the loss gradient: read 4, write 4; the upcast's
//            gradient back to the scores' type: read 4, write b (b != 4)
//            = 8 (+ 4 + b).
// FLOPs per element: max, subtract, exp, sum, divide = 5 (Softmax's 5 in
// NormOps.cpp), +1 for the upcast, +1 (a log per element) when log_prob
// is an output; backward the multiply = 1, +1 for the cast back.
// Saved for backward: Megatron keeps the f32 softmax, a tensor of the
// scores' shape; the memory model counts saved graph values, so the scores
// stand for it (exact for f32 scores, half of it for 16-bit scores), and
// the labels (Megatron's masked target).
//
// NegativeLogLikelihoodLoss (PyTorch's nll_loss, aten/src/ATen/native/
// LossNLL.cpp): forward reads one log-probability per row (and its class
// weight) and the labels, a weighted sum per row; backward writes a zeroed
// gradient of the whole [N, C, ...] input and scatters -weight / total at
// the targets: b per element + the labels and one element per row. Saved:
// the labels (the input's gradient needs only them and the weights).
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

/// Rows of a loss over [N, C, d1, ...]: N * d1 * ... (the labels' elements).
double lossRows(const Node &N) { return numElements(N.getInput(1)); }

void costSoftmaxCrossEntropy(const Node &N, int64_t, OpCost &C) {
  const Value *Scores = N.getInput(0);
  double Elems = numElements(Scores);
  double B = Elems > 0 ? sizeInBytes(Scores) / Elems : 0;
  bool Upcast = B != 4;
  bool LogProb = N.getNumOutputs() > 1 && N.getOutput(1);
  C.Unit = ComputeUnit::Vector;
  C.Flops = (5 + (Upcast ? 1 : 0) + (LogProb ? 1 : 0)) * Elems;
  C.BackwardFlops = (1 + (Upcast ? 1 : 0)) * Elems;
  // The dispatcher counted the scores once and the outputs once: replace
  // the scores' read by the passes above, add the passes' writes.
  C.BytesRead += (20 + (Upcast ? B : 0)) * Elems - sizeInBytes(Scores);
  C.BytesWritten += (12 + (Upcast ? 4 : 0)) * Elems;
  C.BackwardBytes =
      (8 + (Upcast ? 4 + B : 0)) * Elems + sizeInBytes(N.getInput(1));
  saveValue(C, Scores);
  saveValue(C, N.getInput(1));
}

void costNegativeLogLikelihood(const Node &N, int64_t, OpCost &C) {
  const Value *LogProb = N.getInput(0);
  double Elems = numElements(LogProb);
  double B = Elems > 0 ? sizeInBytes(LogProb) / Elems : 0;
  double Rows = lossRows(N);
  bool Weighted = N.getNumInputs() > 2 && N.getInput(2);
  C.Unit = ComputeUnit::Vector;
  // Per row: the gathered value (times its weight), summed.
  C.Flops = (Weighted ? 2 : 1) * Rows;
  C.BackwardFlops = Rows;
  // One element per row of the input (and of the weights), not all of it.
  C.BytesRead = Rows * B * (Weighted ? 2 : 1) + sizeInBytes(N.getInput(1));
  C.BackwardBytes = Elems * B + Rows * B + sizeInBytes(N.getInput(1));
  saveValue(C, N.getInput(1));
}

} // namespace

void addLossRules(RuleTable &T) {
  T["SoftmaxCrossEntropyLoss"] = {costSoftmaxCrossEntropy};
  T["NegativeLogLikelihoodLoss"] = {costNegativeLogLikelihood};
}

} // namespace opcost
} // namespace loom
