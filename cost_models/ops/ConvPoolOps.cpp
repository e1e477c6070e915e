//===- ConvPoolOps.cpp - Cost rules for convolutions, pools and Resize ----===//
//
// Conv and ConvTranspose run on the cube as implicit GEMMs (im2col without
// materializing the columns, which is how the Da Vinci cube runs them:
// the img2col load unit feeds fractals straight into L0A). Strides, pads
// and dilations only change the output size, which shape inference has
// already put in the output type, so the FLOPs follow from the shapes:
//   Conv: 2 * N * Cout * prod(out spatial) * (Cin / group) * prod(kernel)
//   ConvTranspose: 2 * N * Cin * prod(in spatial) * (Cout / group) *
//                  prod(kernel)   (every input pixel scatters a kernel)
// plus one add per output element for a bias. Backward: one product of
// the forward's size for dX and one for dW (2x), one add per output
// element for dB; the input is saved (the weight is a parameter).
//
// Pools and Resize run on the vector unit (Resize with nearest neighbours
// only moves bytes).
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

#include <cmath>

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

double product(ArrayRef<int64_t> Dims) {
  double P = 1;
  for (int64_t D : Dims)
    P *= double(D);
  return P;
}

void costConv(const Node &N, int64_t, OpCost &C) {
  bool Transposed = N.getOpType() == "ConvTranspose";
  SmallVector<int64_t, 4> X = staticShape(N.getInput(0));
  SmallVector<int64_t, 4> W = staticShape(N.getInput(1));
  SmallVector<int64_t, 4> Y = staticShape(N.getOutput(0));
  if (X.size() < 3 || W.size() != X.size() || Y.size() != X.size()) {
    setNoRule(C, N.getOpType().str() +
                     " needs input, weight and output of the same rank >= 3");
    return;
  }
  int64_t Group = std::max<int64_t>(N.getAttrInt("group", 1), 1);
  double Kernel = product(makeArrayRef(W).drop_front(2));
  double OutPixels = product(makeArrayRef(Y).drop_front(2));
  double OutElems = numElements(N.getOutput(0));
  MatmulShape MM;
  MM.Batch = Group;
  if (!Transposed) {
    // W: [Cout, Cin / group, k...]; one GEMM per group:
    // [N * out pixels, (Cin/g) * k] x [(Cin/g) * k, Cout / g].
    MM.M = X[0] * (int64_t)OutPixels;
    MM.N = W[0] / Group;
    MM.K = W[1] * (int64_t)Kernel;
  } else {
    // W: [Cin, Cout / group, k...]; per group:
    // [N * in pixels, Cin / g] x [Cin / g, (Cout/g) * k], then col2im.
    double InPixels = product(makeArrayRef(X).drop_front(2));
    MM.M = X[0] * (int64_t)InPixels;
    MM.N = W[1] * (int64_t)Kernel;
    MM.K = W[0] / Group;
  }
  double Product =
      2 * double(MM.Batch) * double(MM.M) * double(MM.N) * double(MM.K);
  const Value *Bias = N.getInput(2);
  C.Unit = ComputeUnit::Cube;
  C.MM = MM;
  C.Flops = Product + (Bias ? OutElems : 0);
  C.BackwardFlops = (needsGradient(N.getInput(0)) ? Product : 0) +
                    (needsGradient(N.getInput(1)) ? Product : 0) +
                    (needsGradient(Bias) ? OutElems : 0);
  saveValue(C, N.getInput(0));
  saveValue(C, N.getInput(1));
}

/// MaxPool: prod(kernel) compares per output element; backward routes g to
/// the maximum (one op per output element), from the saved input.
/// AveragePool: prod(kernel) adds + a divide per output element; backward
/// spreads g / n over the window.
void costPool(const Node &N, int64_t, OpCost &C) {
  double Window = 1;
  if (Optional<std::vector<int64_t>> K = N.getAttrInts("kernel_shape"))
    Window = product(*K);
  double Out = numElements(N.getOutput(0));
  C.Unit = ComputeUnit::Vector;
  if (N.getOpType() == "MaxPool") {
    C.Flops = Window * Out;
    C.BackwardFlops = Out;
    saveValue(C, N.getInput(0));
  } else {
    C.Flops = (Window + 1) * Out;
    C.BackwardFlops = Window * Out;
  }
}

/// GlobalAveragePool: one add per input element and a divide per output;
/// GlobalMaxPool: one compare per input element (its backward compares
/// again and selects: 2).
void costGlobalPool(const Node &N, int64_t, OpCost &C) {
  double In = numElements(N.getInput(0)), Out = numElements(N.getOutput(0));
  C.Unit = ComputeUnit::Vector;
  if (N.getOpType() == "GlobalMaxPool") {
    C.Flops = In;
    C.BackwardFlops = 2 * In;
    saveValue(C, N.getInput(0));
  } else {
    C.Flops = In + Out;
    C.BackwardFlops = In;
  }
}

/// Resize: "nearest" copies one input element per output element (memory
/// unit); "linear" blends 2^r neighbours and "cubic" 4^r (mul + add each)
/// over the r dims whose size changes. Backward scatters g back with the
/// same weights (nearest: one add per output element).
void costResize(const Node &N, int64_t, OpCost &C) {
  SmallVector<int64_t, 4> X = staticShape(N.getInput(0));
  SmallVector<int64_t, 4> Y = staticShape(N.getOutput(0));
  double Out = numElements(N.getOutput(0));
  unsigned Resized = 0;
  for (unsigned I = 0; I < X.size() && I < Y.size(); ++I)
    Resized += X[I] != Y[I];
  StringRef Mode = N.getAttrString("mode", "nearest");
  bool Differentiable = needsGradient(N.getInput(0));
  if (Mode == "nearest") {
    C.Unit = ComputeUnit::Memory;
    C.BackwardFlops = Differentiable ? Out : 0;
    return;
  }
  double Taps = std::pow(Mode == "cubic" ? 4.0 : 2.0, double(Resized));
  C.Unit = ComputeUnit::Vector;
  C.Flops = 2 * Taps * Out;
  C.BackwardFlops = Differentiable ? C.Flops : 0;
}

} // namespace

void addConvPoolRules(RuleTable &T) {
  T["Conv"] = {costConv};
  T["ConvTranspose"] = {costConv};
  T["MaxPool"] = {costPool};
  T["AveragePool"] = {costPool};
  T["GlobalAveragePool"] = {costGlobalPool};
  T["GlobalMaxPool"] = {costGlobalPool};
  T["Resize"] = {costResize};
}

} // namespace opcost
} // namespace loom
