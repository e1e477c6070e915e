//===- FusedKernels.h - Cost of a fused kernel region -----------*- C++ -*-===//
//
// A fused kernel runs a region of exported ops as one launch (the hardware
// YAML's fused_kernels; detect-fused-kernels finds the regions). Its cost
// sits on one node of the region, the anchor; the other members cost
// nothing (OpCost::FusedInto).
//
// Fused attention (FlashAttention, Dao et al. 2022; FlashAttention-2, Dao
// 2023; Ascend's FlashAttentionScore behind torch_npu.npu_fusion_attention)
// computes softmax(scale * Q K^T + mask) V tile by tile in on-chip memory:
//   FLOPs      the two products, Q K^T and P V (2 FLOPs per multiply-add);
//              the scale, mask and softmax hide under them.
//   backward   the gradients of both products (2x the forward FLOPs) plus
//              the recomputation of Q K^T from Q and K, because the S x S
//              scores are never stored: 2.5x the forward FLOPs in all, the
//              count FlashAttention-2 uses for its backward throughput
//              (arXiv 2307.08691, §4.1: 5 matmuls in the backward against
//              2 in the forward).
//   traffic    reads Q, K and V (K and V before any grouped-query repeat:
//              the kernel indexes KV heads itself) and writes the output;
//              no S x S tensor reaches HBM.
//   memory     keeps Q, K, V and the output for its backward (the
//              per-row softmax statistics, B x H x S floats, are left out:
//              2 / head_dim of the output's bytes at fp16).
//   time       roofline at the kernel's own efficiency (the YAML's
//              fused_kernels.attention.efficiency and backward_efficiency)
//              instead of the class efficiency and the shape efficiency.
// Causal masks are costed at full FLOPs: kernels that skip the masked
// blocks do about half the work, which this model does not credit.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COST_FUSEDKERNELS_H
#define LOOM_COST_FUSEDKERNELS_H

#include "loom/Cost/OpCost.h"
#include "loom/Hardware/HardwareModel.h"
#include "llvm/ADT/ArrayRef.h"

namespace loom {

/// The cost of a fused attention region whose score product (Q K^T) costs
/// \p Score and context product (P V) \p Context as plain MatMuls; \p Q,
/// \p K, \p V are the region's inputs, \p Out its output, \p Members its
/// nodes in graph order.
OpCost fusedAttentionCost(const OpCost &Score, const OpCost &Context,
                          const Value *Q, const Value *K, const Value *V,
                          const Value *Out, const FusedKernel &Kernel,
                          llvm::ArrayRef<const Node *> Members);

/// What a member of a fused region other than its anchor costs: nothing,
/// no kernel of its own.
OpCost fusedMemberCost(const OpCost &Original, const Node *Anchor,
                       llvm::StringRef Kernel);

} // namespace loom

#endif // LOOM_COST_FUSEDKERNELS_H
