//===- RecurrentOps.cpp - Cost rules for RNN, GRU and LSTM ----------------===//
//
// ONNX's recurrent ops (torch.onnx writes nn.LSTM, nn.GRU and nn.RNN as
// them, one node per layer) run G gate products per time step and
// direction: the input X_t [B, I] by W^T [I, G*H] and the hidden state
// H_{t-1} [B, H] by R^T [H, G*H], G = 4 (LSTM: i, o, f, c), 3 (GRU: z, r,
// h) or 1 (RNN). Per step, batch row and direction:
//   products:     2 G H (I + H) FLOPs (a multiply-add is 2);
//   biases:       2 G H adds when B is given (Wb and Rb), and the G H adds
//                 of the two products' sum;
//   LSTM cell:    3 sigmoids, 2 tanh, c = f c + i g (3), h = o tanh(c)
//                 (1), and with peepholes P 3 multiply-adds (6);
//   GRU cell:     2 sigmoids, 1 tanh, r (.) (R_h h + Rb_h) (1), h = (1 - z)
//                 h~ + z h (3);
//   RNN cell:     1 tanh;
// sigmoid and tanh at their element-wise FLOPs (ElementwiseOps.cpp).
// Backward (backpropagation through time): 2x the products' FLOPs and 2x
// the cell's, as MatMul's and the element-wise rules count.
//
// Time: the steps are sequential, each one depending on the last hidden
// state, so the op is costed as one step's products on the cube (the
// shape efficiency of [dirs x B] rows, the rows a step has: the
// directions run side by side, cuDNN in two streams, CANN's DynamicRNN in
// one kernel) and one launch per step (OpCost::Steps): cuDNN's standard
// RNN algorithm launches each step's recurrent GEMM and cell as kernels
// (NVIDIA cuDNN API reference, cudnnRNNAlgo_t: CUDNN_RNN_ALGO_STANDARD;
// the persistent algorithms are the exception, for small hidden sizes),
// so a short-hidden RNN is bound by S launches, not by its FLOPs. The
// input products, which cuDNN hoists into one GEMM over all steps, are
// costed at the step's rows too: an upper bound where B is small.
//
// Saved for the backward: X, the initial states and the outputs. The
// per-step gate activations the backward also reads (cuDNN's reserve
// space, S x B x G x H per direction) are no value of the graph and are
// not counted.
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

/// FLOPs of element-wise op \p Op per element, forward and backward.
std::pair<double, double> elementFlops(StringRef Op) {
  double F = 0, B = 0;
  getElementwiseFlops(Op, F, B);
  return {F, B};
}

void costRecurrent(const Node &N, int64_t, OpCost &C) {
  StringRef Op = N.getOpType();
  unsigned Gates = Op == "LSTM" ? 4 : Op == "GRU" ? 3 : 1;
  const Value *X = N.getInput(0), *W = N.getInput(1);
  SmallVector<int64_t, 4> XS = staticShape(X), WS = staticShape(W);
  const Attribute *HA = N.getAttribute("hidden_size");
  int64_t Hidden = HA ? HA->I : 0;
  if (XS.size() != 3 || WS.size() != 3 || Hidden <= 0 ||
      WS[1] != Gates * Hidden) {
    setNoRule(C, Op.str() + " needs a 3-D X, a 3-D W of " +
                     std::to_string(Gates) +
                     " x hidden_size rows and a "
                     "hidden_size attribute");
    return;
  }
  const Attribute *LA = N.getAttribute("layout");
  bool BatchFirst = LA && LA->I == 1;
  double S = double(BatchFirst ? XS[1] : XS[0]);
  double B = double(BatchFirst ? XS[0] : XS[1]);
  double I = double(XS[2]), H = double(Hidden), G = double(Gates);
  double Dirs = double(WS[0]);
  bool Bias = N.getNumInputs() > 3 && N.getInput(3);
  bool Peep = Op == "LSTM" && N.getNumInputs() > 7 && N.getInput(7);

  auto [Sig, SigB] = elementFlops("Sigmoid");
  auto [Tanh, TanhB] = elementFlops("Tanh");
  // Per step, batch row and direction.
  double Products = 2 * G * H * (I + H);
  double Cell = G * H + (Bias ? 2 * G * H : 0);
  double CellB = Cell;
  if (Op == "LSTM") {
    Cell += H * (3 * Sig + 2 * Tanh + 4) + (Peep ? 6 * H : 0);
    CellB += H * (3 * SigB + 2 * TanhB + 4) + (Peep ? 6 * H : 0);
  } else if (Op == "GRU") {
    Cell += H * (2 * Sig + Tanh + 4);
    CellB += H * (2 * SigB + TanhB + 4);
  } else {
    Cell += H * Tanh;
    CellB += H * TanhB;
  }
  double Rows = S * B * Dirs;
  C.Unit = ComputeUnit::Cube;
  C.Flops = Rows * (Products + Cell);
  C.BackwardFlops = Rows * (2 * Products + 2 * CellB);
  // One step: [dirs x B] rows by [I + H] into G x H gates.
  C.MM.Batch = 1;
  C.MM.M = int64_t(Dirs * B);
  C.MM.K = int64_t(I + H);
  C.MM.N = int64_t(G * H);
  C.MM.SharedB = true;
  C.Steps = S;
  saveValue(C, X);
  for (unsigned Idx : {5u, 6u}) // initial_h, initial_c
    if (N.getNumInputs() > Idx)
      saveValue(C, N.getInput(Idx));
  for (const Value *V : N.getOutputs())
    saveValue(C, V);
}

} // namespace

void addRecurrentRules(RuleTable &T) {
  for (StringRef Op : {"RNN", "GRU", "LSTM"})
    T[Op] = {costRecurrent};
}

} // namespace opcost
} // namespace loom
