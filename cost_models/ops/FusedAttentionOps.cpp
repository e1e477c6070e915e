//===- FusedAttentionOps.cpp - Cost of a fused attention region -----------===//
//
// The formulas and their sources are in loom/Cost/FusedKernels.h.
//
//===----------------------------------------------------------------------===//
#include "loom/Cost/FusedKernels.h"

namespace loom {

static double bytesOf(const Value *V) {
  return V ? (double)V->Type.getSizeInBytes().getValueOr(0) : 0.0;
}

OpCost fusedAttentionCost(const OpCost &Score, const OpCost &Context,
                          const Value *Q, const Value *K, const Value *V,
                          const Value *Out, const FusedKernel &Kernel,
                          llvm::ArrayRef<const Node *> Members,
                          double CausalFraction) {
  OpCost C;
  C.HasRule = true;
  C.Unit = ComputeUnit::Cube;
  C.Elem = Score.Elem;
  C.Flops = Score.Flops + Context.Flops;
  // dQ, dK from dS and dP, dV from dO: a gradient for every operand of
  // both products, as the unfused MatMuls' rules count them.
  C.BackwardFlops = Score.BackwardFlops + Context.BackwardFlops;
  // The scores Q K^T once more: the 0.5 of FlashAttention-2's 2.5x.
  C.RecomputeFlops = Score.Flops;
  C.BytesRead = bytesOf(Q) + bytesOf(K) + bytesOf(V);
  C.BytesWritten = bytesOf(Out);
  for (const Value *X : {Q, K, V, Out})
    if (X && !isConstantLike(X))
      C.SavedValues.push_back(X);
  // Causal block skipping: only the kept part of the S x S products.
  C.Flops *= CausalFraction;
  C.BackwardFlops *= CausalFraction;
  C.RecomputeFlops *= CausalFraction;
  C.MM = Context.MM;
  C.KernelEfficiency = Kernel.Efficiency;
  C.BackwardKernelEfficiency = Kernel.getBackwardEfficiency();
  C.FusedKernel = Kernel.Name;
  C.FusedMembers.assign(Members.begin(), Members.end());
  return C;
}

OpCost fusedMemberCost(const OpCost &Original, const Node *Anchor,
                       llvm::StringRef Kernel) {
  OpCost C;
  C.HasRule = true;
  C.Unit = ComputeUnit::None;
  C.Elem = Original.Elem;
  C.FusedInto = Anchor;
  C.FusedKernel = Kernel.str();
  return C;
}

} // namespace loom
