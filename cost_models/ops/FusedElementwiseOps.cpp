//===- FusedElementwiseOps.cpp - Cost of fused vector kernels -------------===//
//
// Fused RMSNorm, LayerNorm, SwiGLU and rotary embedding: one launch for a
// region of element-wise ops. The formulas and their sources are in
// loom/Cost/FusedKernels.h.
//
//===----------------------------------------------------------------------===//
#include "loom/Cost/FusedKernels.h"

#include "llvm/ADT/STLExtras.h"

namespace loom {

static double bytesOf(const Value *V) {
  return V ? (double)V->Type.getSizeInBytes().getValueOr(0) : 0.0;
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
