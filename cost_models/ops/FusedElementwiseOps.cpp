//===- FusedElementwiseOps.cpp - Cost of fused vector kernels -------------===//
//
// Fused RMSNorm, LayerNorm, SwiGLU, GELU and rotary embedding: one launch
// for a region of element-wise ops. The formulas and their sources are in
// loom/Cost/FusedKernels.h.
//
//===----------------------------------------------------------------------===//
#include "OpCostRules.h"
#include "loom/Cost/FusedKernels.h"

#include "llvm/ADT/STLExtras.h"

namespace loom {

static double bytesOf(const Value *V) {
  return V ? (double)V->Type.getSizeInBytes().getValueOr(0) : 0.0;
}

/// The FLOPs the kernel \p Kernel defines for itself, forward and backward,
/// per element of its output \p Out, whatever ops the exporter spelled it
/// with; false where the members' own FLOPs stand (the kernels below the
/// table). gelu: the exact GELU, x/2 (1 + erf(x / sqrt 2)), as the ONNX
/// Gelu op is counted (ElementwiseOps.cpp: Erf's 20 + 4 = 24 each way), so
/// the erf and tanh writings, Pow(x, 3) or x*x*x, and opset 20's Gelu
/// report one count; a fused bias Add (bias-GELU: every input after the
/// activation is a bias) adds the Add rule's 1 + 1 per element.
static bool getKernelFlops(const FusedKernel &Kernel,
                           llvm::ArrayRef<const Value *> Inputs,
                           const Value *Out, double &Flops,
                           double &BackwardFlops) {
  double Fwd = 0, Bwd = 0, AddFwd = 0, AddBwd = 0;
  if (Kernel.Name != "gelu" || !Out ||
      !opcost::getElementwiseFlops("Gelu", Fwd, Bwd) ||
      !opcost::getElementwiseFlops("Add", AddFwd, AddBwd))
    return false;
  double Biases = Inputs.empty() ? 0.0 : (double)(Inputs.size() - 1);
  double Elems = opcost::numElements(Out);
  Flops = Elems * (Fwd + Biases * AddFwd);
  BackwardFlops = Elems * (Bwd + Biases * AddBwd);
  return true;
}

OpCost fusedElementwiseCost(llvm::ArrayRef<const OpCost *> MemberCosts,
                            llvm::ArrayRef<const Value *> Inputs,
                            const Value *Out,
                            llvm::ArrayRef<const Value *> Saved,
                            const FusedKernel &Kernel,
                            llvm::ArrayRef<const Node *> Members) {
  OpCost C;
  C.HasRule = true;
  C.Unit = ComputeUnit::Vector;
  // The output's element type sets the vector rate (a norm computed in
  // f32 between Casts still reads and writes the model's type).
  C.Elem = Out ? Out->Type.Elem : DataType::Undefined;
  for (const OpCost *M : MemberCosts) {
    if (!M)
      continue;
    C.Flops += M->Flops;
    C.BackwardFlops += M->BackwardFlops;
    if (C.Elem == DataType::Undefined)
      C.Elem = M->Elem;
  }
  getKernelFlops(Kernel, Inputs, Out, C.Flops, C.BackwardFlops);
  // Parameters: the weights and tables among the inputs (scalar constants
  // such as eps sit in the kernel's arguments, not in HBM traffic).
  for (const Value *V : Inputs) {
    C.BytesRead += bytesOf(V);
    if (V && isConstantLike(V)) {
      C.ParamBytes += bytesOf(V);
      C.ParamCount += (double)V->Type.getNumElements().getValueOr(0);
    }
  }
  C.BytesWritten = bytesOf(Out);
  for (const Value *V : Saved)
    if (V && !llvm::is_contained(C.SavedValues, V))
      C.SavedValues.push_back(V);
  C.KernelEfficiency = Kernel.Efficiency;
  C.BackwardKernelEfficiency = Kernel.getBackwardEfficiency();
  C.FusedKernel = Kernel.Name;
  C.FusedMembers.assign(Members.begin(), Members.end());
  return C;
}

} // namespace loom
