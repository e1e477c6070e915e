//===- FusedGroupOps.cpp - Cost of a generic fused kernel -----------------===//
//
// One kernel for a group of ops the backend's compiler fuses (loop,
// reduction, product epilogue): the formulas are in loom/Cost/FusedKernels.h.
//
//===----------------------------------------------------------------------===//
#include "loom/Cost/FusedKernels.h"

#include "llvm/ADT/STLExtras.h"

namespace loom {

static double bytesOf(const Value *V) {
  return V ? (double)V->Type.getSizeInBytes().getValueOr(0) : 0.0;
}

OpCost fusedGroupCost(llvm::ArrayRef<const OpCost *> MemberCosts,
                      llvm::ArrayRef<const Node *> Members,
                      llvm::ArrayRef<const Value *> Inputs,
                      llvm::ArrayRef<const Value *> Outputs,
                      llvm::ArrayRef<const Value *> Saved,
                      const OpCost *Product, llvm::StringRef Kernel) {
  OpCost C;
  if (Product)
    C = *Product;
  C.HasRule = true;
  C.SavedValues.clear();
  C.BytesRead = C.BytesWritten = C.BackwardBytes = 0;
  C.ParamCount = C.ParamBytes = 0;
  if (!Product) {
    // The widest unit among the members: vector arithmetic, else data
    // movement, else nothing (a group of free layout ops).
    C.Unit = ComputeUnit::None;
    C.Flops = C.BackwardFlops = 0;
    for (const OpCost *M : MemberCosts)
      if (M->Unit == ComputeUnit::Vector ||
          (M->Unit == ComputeUnit::Memory && C.Unit == ComputeUnit::None))
        C.Unit = M->Unit;
    // The rate: the type of what the kernel writes (a norm computed in
    // f32 between Casts still streams the model's type), the members'
    // where it writes no float.
    C.Elem = DataType::Undefined;
    for (const Value *V : Outputs)
      if (isFloatingPoint(V->Type.Elem) &&
          (C.Elem == DataType::Undefined ||
           getDataTypeSize(V->Type.Elem) > getDataTypeSize(C.Elem)))
        C.Elem = V->Type.Elem;
    // The family keys efficiency curves: a reduction's when the kernel
    // holds one, else its first arithmetic member's.
    C.Family = "";
    for (const OpCost *M : MemberCosts)
      if (M->Family == "norm" || M->Family == "reduction") {
        C.Family = M->Family;
        break;
      }
    for (const OpCost *M : MemberCosts)
      if (C.Family.empty() && M->Unit == C.Unit)
        C.Family = M->Family;
    for (const OpCost *M : MemberCosts)
      if (C.Elem == DataType::Undefined && M->Unit == C.Unit)
        C.Elem = M->Elem;
  }
  for (const OpCost *M : MemberCosts) {
    if (M == Product)
      continue;
    C.Flops += M->Flops;
    C.BackwardFlops += M->BackwardFlops;
  }
  for (const Value *V : Inputs) {
    C.BytesRead += bytesOf(V);
    if (V->isParameter()) {
      C.ParamBytes += bytesOf(V);
      C.ParamCount += (double)V->Type.getNumElements().getValueOr(0);
    }
  }
  for (const Value *V : Outputs)
    C.BytesWritten += bytesOf(V);
  for (const Value *V : Saved)
    if (V && !llvm::is_contained(C.SavedValues, V))
      C.SavedValues.push_back(V);
  C.KernelEfficiency = C.BackwardKernelEfficiency = 0;
  C.FusedKernel = Kernel.str();
  C.FusedMembers.assign(Members.begin(), Members.end());
  C.FusedInto = nullptr;
  return C;
}

} // namespace loom
