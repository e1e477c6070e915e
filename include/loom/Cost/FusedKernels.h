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
// Causal masks: the kernels skip the tiles above the diagonal
// (FlashAttention-2, arXiv 2307.08691, §3.1.1 "Causal masking": about half
// the blocks need no computation, a 1.7-1.8x speedup over non-causal).
// When detect-fused-kernels proves the mask causal, the FLOPs of both
// products, forward, backward and recomputation, are scaled by the
// fraction of score entries the mask keeps ((S+1)/2S for a square
// causal mask); traffic and saved values do not change. The tiles on
// the diagonal, computed whole, are left out: at S = 4096 and 128-row
// tiles they add 1.6 % of the full FLOPs.
//
// Fused element-wise kernels (rmsnorm, layernorm, swiglu, rotary; the
// vector unit): one launch for the region; FLOPs and backward FLOPs are
// the members' own; HBM traffic is the region's inputs (activations,
// weights, rotary tables) read once and its output written once; saved
// for the backward: what the fused backward reads (norms: the input and
// weight, the per-row statistics being B x S floats, left out, as
// attention's; swiglu: both inputs, as Megatron's fused bias_swiglu
// saves its input; rotary: only the cos/sin tables, the backward being
// the inverse rotation). Time: the vector roofline with the YAML's
// efficiency applied to the vector peak and to the HBM bandwidth.
//
// Generic fused kernels (fuse-kernels, the hardware's fusion: rules): a
// group of ops the backend's compiler runs as one kernel -- a loop over
// element-wise and broadcast ops, a row reduction with its prologue and
// epilogue, or a product with its element-wise epilogue -- is costed once:
//   FLOPs      the members' own, forward and backward (a product's
//              epilogue adds its few FLOPs to the product's);
//   traffic    the values crossing the kernel's boundary: every distinct
//              input produced outside it read once, every output a node
//              outside it (or the graph) reads written once; nothing
//              between members reaches HBM;
//   time       the member unit's roofline over those totals (the cube's,
//              with the product's shape, when the kernel holds one; else
//              the vector's), launch overhead once;
//   memory     what a fused backward keeps: the values the members save
//              that cross into the kernel, and a product's output; a
//              member's element-wise intermediate is recomputed in the
//              backward from the kernel inputs it derives from (as fused
//              kernels and Megatron's fusions do), so saved bytes do not
//              depend on how many ops the exporter spelled.
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
                          llvm::ArrayRef<const Node *> Members,
                          double CausalFraction = 1.0);

/// The cost of a fused element-wise region (rmsnorm, layernorm, swiglu,
/// rotary) whose members cost \p MemberCosts as plain ops; \p Inputs are
/// the values it reads from HBM (activations, weights, tables), \p Out its
/// output, \p Saved what its backward keeps.
OpCost fusedElementwiseCost(llvm::ArrayRef<const OpCost *> MemberCosts,
                            llvm::ArrayRef<const Value *> Inputs,
                            const Value *Out,
                            llvm::ArrayRef<const Value *> Saved,
                            const FusedKernel &Kernel,
                            llvm::ArrayRef<const Node *> Members);

/// The cost of a generic fused kernel (see above) named \p Kernel: its
/// members' plain costs \p MemberCosts (graph order, as \p Members), the
/// values crossing into it \p Inputs and out of it \p Outputs, what its
/// backward keeps \p Saved, and its product's cost \p Product (null for a
/// vector kernel).
OpCost fusedGroupCost(llvm::ArrayRef<const OpCost *> MemberCosts,
                      llvm::ArrayRef<const Node *> Members,
                      llvm::ArrayRef<const Value *> Inputs,
                      llvm::ArrayRef<const Value *> Outputs,
                      llvm::ArrayRef<const Value *> Saved,
                      const OpCost *Product, llvm::StringRef Kernel);

/// What a member of a fused region other than its anchor costs: nothing,
/// no kernel of its own.
OpCost fusedMemberCost(const OpCost &Original, const Node *Anchor,
                       llvm::StringRef Kernel);

} // namespace loom

#endif // LOOM_COST_FUSEDKERNELS_H
