//===- ElementwiseOps.cpp - Cost rules for element-wise maps --------------===//
//
// Unary and (broadcasting) binary maps and activations: vector unit, FLOPs
// per output element from the table below, HBM traffic = the inputs read
// once plus the output written (the dispatcher's default).
//
// The FLOPs column counts the vector instructions of a straightforward
// kernel: one per arithmetic op, compare or select, and one per exp, ln,
// sqrt or reciprocal, which the Da Vinci vector unit executes as single
// instructions (Ascend C basic APIs Exp, Ln, Sqrt, Reciprocal). Functions
// without such an instruction are counted by their usual expansion, shown
// beside each. These ops are memory-bound on any NPU (a few FLOPs per 4-12
// bytes moved), so the constants matter little for time; they are there
// so that FLOP totals are honest.
//
// The backward column is the FLOPs per output element of the gradient of
// every floating-point input; roughly 1x forward for the family, spelled
// out where the derivative is cheaper or dearer. Ops whose result is
// piecewise constant (compare, floor, sign, logic) have no gradient: 0.
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

/// What backward needs from the forward pass.
enum class Save {
  Nothing,   ///< Add, Sub, Neg, Cast: the gradient passes through.
  Input,     ///< The first input (Erf, Tanh, Sigmoid, GeLU, ...).
  Inputs,    ///< Every non-constant input (Mul, Div, Max, ...).
  Output,    ///< The output (Relu, Exp, Sqrt, Reciprocal).
  Condition, ///< Where: its condition.
};

struct ElementwiseSpec {
  const char *Op;
  /// FLOPs per output element.
  double Flops;
  /// Backward FLOPs per output element (0: no gradient).
  double Backward;
  Save Saved;
};

// clang-format off
const ElementwiseSpec Specs[] = {
    // Binary arithmetic. Add's backward is the reduction of dY over
    // broadcast dims (1 per element); Mul needs dA = g*B and dB = g*A;
    // Div needs dA = g/B and dB = -dA*Y.
    {"Add", 1, 1, Save::Nothing},
    {"Sub", 1, 1, Save::Nothing},
    {"Mul", 1, 2, Save::Inputs},
    {"Div", 1, 3, Save::Inputs},
    // Pow: exp(b * ln a) = 3; a constant exponent 2 or 0.5 is one mul or
    // sqrt (see costElementwise). dA = g*b*a^(b-1): the power plus 2.
    {"Pow", 3, 5, Save::Inputs},
    // Mod: a - floor(a / b) * b = div, floor, mul, sub.
    {"Mod", 4, 2, Save::Inputs},
    // Variadic: n-1 ops per element (see costElementwise); backward 1 per
    // input (a mask select for Max/Min, a copy for Sum, a scale for Mean).
    {"Max", 1, 2, Save::Inputs},
    {"Min", 1, 2, Save::Inputs},
    {"Sum", 1, 2, Save::Nothing},
    {"Mean", 2, 2, Save::Nothing},
    // Unary arithmetic.
    {"Neg", 1, 1, Save::Nothing},
    {"Abs", 1, 2, Save::Input},          // dX = g * sign(x)
    {"Sqrt", 1, 2, Save::Output},        // dX = g * 0.5 / y
    {"Reciprocal", 1, 2, Save::Output},  // dX = -g * y * y
    {"Exp", 1, 1, Save::Output},         // dX = g * y
    {"Log", 1, 1, Save::Input},          // dX = g / x
    // Sin, Cos: range reduction (3) + degree-7 Horner polynomial (7) = 10;
    // the derivative is the other function times g: 11.
    {"Sin", 10, 11, Save::Input},
    {"Cos", 10, 11, Save::Input},
    // Erf: Abramowitz & Stegun 7.1.26: t = 1/(1+p|x|) (abs, mul, add, rec:
    // 4), 5-term Horner (9), exp(-x^2) (square, neg, exp: 3), 1 - poly*e
    // (2), sign restore (2) = 20. dX = g * 2/sqrt(pi) * exp(-x^2) = 5.
    {"Erf", 20, 5, Save::Input},
    // Tanh = (e - 1) / (e + 1), e = exp(2x): mul, exp, sub, add, div = 5;
    // dX = g * (1 - y^2) = 3.
    {"Tanh", 5, 3, Save::Input},
    // Sigmoid = 1 / (1 + exp(-x)): neg, exp, add, rec = 4;
    // dX = g * y * (1 - y) = 3.
    {"Sigmoid", 4, 3, Save::Input},
    // Gelu (opset 20), exact form 0.5 x (1 + erf(x / sqrt 2)): Erf + 4 = 24;
    // tanh form in costElementwise. Backward ~1x forward (erf and the
    // Gaussian density both reappear).
    {"Gelu", 24, 24, Save::Input},
    // Activations with a select: compare + select (+ mul).
    {"Relu", 1, 1, Save::Output},
    {"LeakyRelu", 2, 2, Save::Input},
    {"PRelu", 2, 3, Save::Inputs},       // slope gradient too
    {"ThresholdedRelu", 2, 1, Save::Input},
    {"Elu", 4, 2, Save::Input},          // exp, sub, mul, select
    {"Celu", 5, 3, Save::Input},         // Elu + a divide and a mul
    {"Selu", 5, 3, Save::Input},         // Elu + the scale
    {"Softplus", 3, 4, Save::Input},     // ln(1 + exp x); dX = g*sigmoid
    {"Softsign", 3, 4, Save::Input},     // x / (1 + |x|)
    {"HardSigmoid", 4, 2, Save::Input},  // mul, add, max, min
    {"HardSwish", 5, 3, Save::Input},    // HardSigmoid * x
    {"Mish", 9, 9, Save::Input},         // x * tanh(softplus x): 1+5+3
    {"Clip", 2, 2, Save::Input},         // max, min; dX = g * in-range
    {"Where", 1, 2, Save::Condition},    // a select; route g to X or Y
    // Conversions and rounding: no gradient through rounding.
    {"Cast", 1, 1, Save::Nothing},
    {"CastLike", 1, 1, Save::Nothing},
    {"Floor", 1, 0, Save::Nothing},
    {"Ceil", 1, 0, Save::Nothing},
    {"Round", 1, 0, Save::Nothing},
    {"Sign", 1, 0, Save::Nothing},
    // Compares and logic: bool results, no gradient.
    {"Equal", 1, 0, Save::Nothing},
    {"Less", 1, 0, Save::Nothing},
    {"Greater", 1, 0, Save::Nothing},
    {"LessOrEqual", 1, 0, Save::Nothing},
    {"GreaterOrEqual", 1, 0, Save::Nothing},
    {"And", 1, 0, Save::Nothing},
    {"Or", 1, 0, Save::Nothing},
    {"Xor", 1, 0, Save::Nothing},
    {"Not", 1, 0, Save::Nothing},
    {"IsNaN", 1, 0, Save::Nothing},
    {"IsInf", 1, 0, Save::Nothing},
    {"BitShift", 1, 0, Save::Nothing},
    {"BitwiseAnd", 1, 0, Save::Nothing},
    {"BitwiseOr", 1, 0, Save::Nothing},
    {"BitwiseXor", 1, 0, Save::Nothing},
    {"BitwiseNot", 1, 0, Save::Nothing},
    // Quantization (no gradient through rounding): QuantizeLinear divides
    // by the scale, rounds, adds the zero point and saturates (4);
    // DequantizeLinear subtracts the zero point and multiplies (2).
    {"QuantizeLinear", 4, 0, Save::Nothing},
    {"DequantizeLinear", 2, 0, Save::Nothing},
};
// clang-format on

const ElementwiseSpec *findSpec(StringRef Op) {
  for (const ElementwiseSpec &S : Specs)
    if (Op == S.Op)
      return &S;
  return nullptr;
}

void costElementwise(const Node &N, int64_t, OpCost &C) {
  // A Cast to the type its input already has is the identity (ONNX Cast),
  // which runtimes elide: a view. apply-precision makes an exporter's
  // upcasts around norms and softmax such (passes/ApplyPrecision.cpp).
  if ((N.getOpType() == "Cast" || N.getOpType() == "CastLike") &&
      N.getInput(0) && N.getOutput(0) &&
      N.getInput(0)->Type.Elem == N.getOutput(0)->Type.Elem) {
    C.Unit = ComputeUnit::None;
    C.BytesRead = C.BytesWritten = 0;
    return;
  }
  const ElementwiseSpec *S = findSpec(N.getOpType());
  double Elems = 0;
  for (const Value *V : N.getOutputs())
    Elems = std::max(Elems, numElements(V));
  double Flops = S->Flops, Backward = S->Backward;
  StringRef Op = N.getOpType();
  unsigned NumIn = 0;
  for (const Value *V : N.getInputs())
    NumIn += V != nullptr;
  if (Op == "Max" || Op == "Min" || Op == "Sum") {
    Flops = NumIn > 1 ? NumIn - 1 : 0;
    Backward = NumIn;
  } else if (Op == "Mean") {
    Flops = NumIn;
    Backward = NumIn;
  } else if (Op == "Pow") {
    // x^2 is one mul and x^0.5 one sqrt: RMSNorm exports spell the square
    // as Pow(x, 2).
    Optional<std::vector<double>> E = getConstantFloats(N.getInput(1));
    if (!E)
      if (Optional<std::vector<int64_t>> I = getConstantInts(N.getInput(1)))
        E = std::vector<double>(I->begin(), I->end());
    if (E && E->size() == 1 && ((*E)[0] == 2.0 || (*E)[0] == 0.5)) {
      Flops = 1;
      Backward = 2;
    }
  } else if (Op == "Gelu" && N.getAttrString("approximate", "none") == "tanh") {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): x^3 (2), mul, add,
    // mul, Tanh (5), add, mul, mul = 13.
    Flops = 13;
    Backward = 13;
  } else if (Op == "Cast" || Op == "CastLike") {
    // Casting from an integer has no gradient.
    if (!needsGradient(N.getInput(0)))
      Backward = 0;
  }
  C.Unit = ComputeUnit::Vector;
  C.Flops = Flops * Elems;
  C.BackwardFlops = Backward * Elems;
  if (C.BackwardFlops == 0)
    return;
  switch (S->Saved) {
  case Save::Nothing:
    break;
  case Save::Input:
    saveValue(C, N.getInput(0));
    break;
  case Save::Inputs:
    if (Op == "Mul") {
      // dA = g*B needs B only if A needs a gradient, and vice versa: a
      // scale by a constant keeps nothing.
      for (unsigned I = 0; I < N.getNumInputs(); ++I)
        for (unsigned J = 0; J < N.getNumInputs(); ++J)
          if (I != J && needsGradient(N.getInput(J))) {
            saveValue(C, N.getInput(I));
            break;
          }
    } else if (Op == "Div") {
      // dA = g/B needs only B; dB = -g*A/B^2 needs A and B. Dividing by a
      // constant (attention's 1/sqrt(d), GeLU's sqrt(2)) keeps nothing.
      if (needsGradient(N.getInput(1)))
        for (const Value *V : N.getInputs())
          saveValue(C, V);
    } else {
      for (const Value *V : N.getInputs())
        saveValue(C, V);
    }
    break;
  case Save::Output:
    saveValue(C, N.getOutput(0));
    break;
  case Save::Condition:
    saveValue(C, N.getInput(0));
    break;
  }
}

/// Dropout. In training (a mask output, or a training_mode input that is
/// not the constant false) it draws a random number, compares, selects and
/// scales: 4 FLOPs per element; backward multiplies by the saved mask and
/// scales: 2. Otherwise it is the identity: free, no kernel. Before opset
/// 12 there is no training_mode input and only the mask output tells.
void costDropout(const Node &N, int64_t Opset, OpCost &C) {
  const Value *Mask = N.getOutput(1);
  bool Training = Mask != nullptr;
  if (Opset >= 12)
    if (const Value *TM = N.getInput(2)) {
      Optional<std::vector<int64_t>> V = getConstantInts(TM);
      Training |= !V || (V->size() == 1 && (*V)[0] != 0);
    }
  if (!Training) {
    C.Unit = ComputeUnit::None;
    C.BytesRead = C.BytesWritten = 0;
    return;
  }
  double Elems = numElements(N.getOutput(0));
  C.Unit = ComputeUnit::Vector;
  C.Flops = 4 * Elems;
  C.BackwardFlops = 2 * Elems;
  saveValue(C, Mask);
}

} // namespace

void addElementwiseRules(RuleTable &T) {
  for (const ElementwiseSpec &S : Specs)
    T[S.Op] = {costElementwise, ShapePolicy::AllStatic, /*ElementWise=*/true};
  T["Dropout"] = {costDropout};
}

bool getElementwiseFlops(StringRef Op, double &Forward, double &Backward) {
  const ElementwiseSpec *S = findSpec(Op);
  if (!S)
    return false;
  Forward = S->Flops;
  Backward = S->Backward;
  return true;
}

} // namespace opcost
} // namespace loom
