//===- NormOps.cpp - Cost rules for fused normalizations and softmax ------===//
//
// Softmax, LogSoftmax, LayerNormalization, RMSNormalization and its
// com.microsoft spellings, Group/InstanceNormalization, BatchNormalization:
// vector unit, one pass over the input for statistics and one to
// normalize. FLOPs per element are counted from the ops of each one's ONNX
// function body (onnx/defs/math/defs.cc, onnx/defs/nn/defs.cc): only the
// steps that touch every element count; per-row work (eps, sqrt,
// reciprocal of one statistic) is negligible next to a row of thousands.
// The decomposed forms exporters emit (ReduceMean, Sub, Pow, Sqrt, Div,
// ...) are costed piece by piece by ReductionOps.cpp and
// ElementwiseOps.cpp and add up to the same order.
//
// Saved for backward: the input (statistics are recomputed or tiny);
// Softmax and LogSoftmax save their output, from which the derivative
// follows without the input.
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

/// Softmax: ReduceMax, Sub, Exp, ReduceSum, Div = 5 per element.
/// LogSoftmax: ReduceMax, Sub, Exp, ReduceSum, then Sub of the log-sum = 5.
/// Backward: Softmax dX = Y * (g - sum(g * Y)): mul, sum, sub, mul = 4;
/// LogSoftmax dX = g - exp(Y) * sum(g): exp, mul, sub, sum = 4.
void costSoftmax(const Node &N, int64_t, OpCost &C) {
  double Elems = numElements(N.getInput(0));
  C.Unit = ComputeUnit::Vector;
  C.Flops = 5 * Elems;
  C.BackwardFlops = 4 * Elems;
  saveValue(C, N.getOutput(0));
}

/// LayerNormalization's function body: ReduceMean(X), Sub, Mul (square),
/// ReduceMean, Mul by 1/std, Mul by Scale, Add B = 7 per element (6
/// without B), plus a Cast in and out when X is not of stash_type (f32 by
/// default): 9 for f16 inputs. Group/InstanceNormalization and
/// BatchNormalization in training have the same structure over other
/// axes.
/// Backward (13): recompute xhat (sub, mul), dScale += g * xhat (2),
/// dB += g (1), gs = g * Scale (1), mean(gs) (1), mean(gs * xhat) (2),
/// dX = rstd * (gs - m1 - xhat * m2) (4).
double layerNormFlops(const Node &N, const Value *Bias) {
  double PerElem = Bias ? 7 : 6;
  const Value *X = N.getInput(0);
  int64_t Stash = N.getAttrInt("stash_type", (int64_t)DataType::Float);
  if (X && (int64_t)X->Type.Elem != Stash)
    PerElem += 2;
  return PerElem * numElements(X);
}

void costLayerNorm(const Node &N, int64_t, OpCost &C) {
  C.Unit = ComputeUnit::Vector;
  C.Flops = layerNormFlops(N, N.getInput(2));
  C.BackwardFlops = 13 * numElements(N.getInput(0));
  saveValue(C, N.getInput(0));
}

/// RMSNormalization (opset 23) and com.microsoft.SimplifiedLayerNormalization:
/// Mul (square), ReduceMean, Mul by 1/rms, Mul by Scale = 4 per element.
/// Backward (9): xhat = x * rstd (1), dScale += g * xhat (2), gs = g *
/// Scale (1), mean(gs * xhat) (2), dX = rstd * (gs - xhat * m) (3).
/// The Skip variants add the residual first (1 more; its gradient is a
/// copy) and save the sum when they output it.
void costRMSNorm(const Node &N, int64_t, OpCost &C) {
  double Elems = numElements(N.getInput(0));
  bool Skip = N.getOpType().startswith("Skip");
  C.Unit = ComputeUnit::Vector;
  C.Flops = (Skip ? 5 : 4) * Elems;
  C.BackwardFlops = 9 * Elems;
  if (Skip && N.getOutput(3))
    saveValue(C, N.getOutput(3));
  else {
    saveValue(C, N.getInput(0));
    if (Skip)
      saveValue(C, N.getInput(1));
  }
}

/// com.microsoft.SkipLayerNormalization: LayerNorm of input + skip (+
/// bias): one more Add per element (two with the bias), input order
/// (input, skip, gamma, beta, bias).
void costSkipLayerNorm(const Node &N, int64_t, OpCost &C) {
  double Elems = numElements(N.getInput(0));
  C.Unit = ComputeUnit::Vector;
  C.Flops = layerNormFlops(N, N.getInput(3)) + (N.getInput(4) ? 2 : 1) * Elems;
  C.BackwardFlops = 13 * Elems;
  if (N.getOutput(3))
    saveValue(C, N.getOutput(3));
  else {
    saveValue(C, N.getInput(0));
    saveValue(C, N.getInput(1));
  }
}

/// GroupNormalization (X, scale, bias) and InstanceNormalization
/// (input, scale, B): LayerNorm's 7 steps over other axes.
void costGroupNorm(const Node &N, int64_t, OpCost &C) {
  C.Unit = ComputeUnit::Vector;
  C.Flops = 7 * numElements(N.getInput(0));
  C.BackwardFlops = 13 * numElements(N.getInput(0));
  saveValue(C, N.getInput(0));
}

/// BatchNormalization. Inference form (one output, or training_mode = 0
/// from opset 14): the statistics are inputs, so per channel the op folds
/// to Y = X * a + b: 2 per element; backward with frozen statistics:
/// dX = g * a, dScale, dB = 3. Training form (training_mode = 1 from opset
/// 14; more than one output before): batch statistics as in LayerNorm, 7
/// per element, backward 13; the running-statistics update is per channel.
void costBatchNorm(const Node &N, int64_t Opset, OpCost &C) {
  unsigned Outs = 0;
  for (const Value *V : N.getOutputs())
    Outs += V != nullptr;
  bool Training =
      Opset >= 14 ? N.getAttrInt("training_mode", 0) != 0 : Outs > 1;
  double Elems = numElements(N.getInput(0));
  C.Unit = ComputeUnit::Vector;
  C.Flops = (Training ? 7 : 2) * Elems;
  C.BackwardFlops = (Training ? 13 : 3) * Elems;
  saveValue(C, N.getInput(0));
}

} // namespace

void addNormRules(RuleTable &T) {
  T["Softmax"] = {costSoftmax};
  T["LogSoftmax"] = {costSoftmax};
  T["LayerNormalization"] = {costLayerNorm};
  T["RMSNormalization"] = {costRMSNorm};
  T["com.microsoft.SimplifiedLayerNormalization"] = {costRMSNorm};
  T["com.microsoft.SkipSimplifiedLayerNormalization"] = {costRMSNorm};
  T["com.microsoft.SkipLayerNormalization"] = {costSkipLayerNorm};
  T["GroupNormalization"] = {costGroupNorm};
  T["InstanceNormalization"] = {costGroupNorm};
  T["BatchNormalization"] = {costBatchNorm};
}

} // namespace opcost
} // namespace loom
