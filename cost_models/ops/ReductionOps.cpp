//===- ReductionOps.cpp - Cost rules for reductions, arg and top-k --------===//
//
// Reduce*, ArgMax/ArgMin, TopK and CumSum: vector unit. FLOPs count one op
// per input element for each element-wise step before the accumulation
// (the accumulation itself is one add/compare per input element) plus the
// per-output finish (divide, sqrt, log). The axes do not matter: every
// input element is read once whatever is reduced; the output shape, which
// the dispatcher has checked is static, says how many results there are.
//
// Backward broadcasts the output gradient back over the input: at least
// one op per input element, more where the derivative needs the input.
// Arg* have no gradient; TopK scatters k gradients per row.
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

#include <cmath>

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

struct ReduceSpec {
  const char *Op;
  double PerInput;  ///< FLOPs per input element.
  double PerOutput; ///< FLOPs per output element (the finish).
  double BackPerIn; ///< Backward FLOPs per input element (0: no grad).
  bool SaveInput, SaveOutput;
};

// clang-format off
const ReduceSpec Specs[] = {
    {"ReduceSum",       1, 0, 1, false, false}, // dX = broadcast g
    {"ReduceMean",      1, 1, 1, false, false}, // sum, / n; dX = g / n
    {"ReduceMax",       1, 0, 2, true,  true},  // dX = g * (x == y)
    {"ReduceMin",       1, 0, 2, true,  true},
    {"ReduceProd",      1, 0, 2, true,  true},  // dX = g * y / x
    {"ReduceL1",        2, 0, 2, true,  false}, // abs, add; g * sign(x)
    {"ReduceL2",        2, 1, 2, true,  true},  // sq, add, sqrt; g * x / y
    {"ReduceSumSquare", 2, 0, 2, true,  false}, // sq, add; 2 * x * g
    {"ReduceLogSum",    1, 1, 1, false, true},  // add, ln; g / y
    // max, sub, exp, add per input; ln and add back the max per output;
    // dX = g * exp(x - y): sub, exp, mul.
    {"ReduceLogSumExp", 4, 2, 3, true,  true},
    {"ArgMax",          1, 0, 0, false, false}, // compares; no gradient
    {"ArgMin",          1, 0, 0, false, false},
    {"CumSum",          1, 0, 1, false, false}, // dX = reverse cumsum of g
};
// clang-format on

void costReduce(const Node &N, int64_t, OpCost &C) {
  const ReduceSpec *S = nullptr;
  for (const ReduceSpec &R : Specs)
    if (N.getOpType() == R.Op)
      S = &R;
  double In = numElements(N.getInput(0)), Out = numElements(N.getOutput(0));
  C.Unit = ComputeUnit::Vector;
  C.Flops = S->PerInput * In + S->PerOutput * Out;
  C.BackwardFlops = S->BackPerIn * In;
  if (C.BackwardFlops == 0)
    return;
  if (S->SaveInput)
    saveValue(C, N.getInput(0));
  if (S->SaveOutput)
    saveValue(C, N.getOutput(0));
}

/// TopK: a heap of k over each row of n: n * log2(k) compares per row (at
/// least n, for k = 1), k read from the output's static shape so that the
/// K input (opset >= 10) or attribute (before) need not be constant.
/// Backward scatters the k gradients of each row: one op per output
/// element, at the saved indices.
void costTopK(const Node &N, int64_t, OpCost &C) {
  SmallVector<int64_t, 4> In = staticShape(N.getInput(0));
  SmallVector<int64_t, 4> Out = staticShape(N.getOutput(0));
  if (In.empty() || In.size() != Out.size()) {
    setNoRule(C, "TopK needs input and output of the same rank >= 1");
    return;
  }
  unsigned Axis = normalizeAxis(N.getAttrInt("axis", -1), In.size());
  double Rows = numElements(N.getInput(0)) / std::max<int64_t>(In[Axis], 1);
  double Len = double(In[Axis]), K = double(Out[Axis]);
  C.Unit = ComputeUnit::Vector;
  C.Flops = Rows * Len * std::max(1.0, std::log2(std::max(K, 1.0)));
  C.BackwardFlops = numElements(N.getOutput(0));
  saveValue(C, N.getOutput(1));
}

} // namespace

void addReductionRules(RuleTable &T) {
  for (const ReduceSpec &S : Specs)
    T[S.Op] = {costReduce};
  T["TopK"] = {costTopK};
}

} // namespace opcost
} // namespace loom
