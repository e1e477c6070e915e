//===- FusedKernelPatterns.h - Fused element-wise regions, causal masks --===//
//
// Pattern helpers of detect-fused-kernels (DetectFusedKernels.cpp), kept
// apart from the attention matcher there:
//
// - findElementwiseRegions: the regions a fused RMSNorm, LayerNorm, SwiGLU
//   or rotary-embedding kernel computes in one launch, as exporters write
//   them (FusedKernelPatterns.cpp says which writings);
// - getCausalOffset: whether an attention mask is causal, proven from the
//   graph (a triangular constant, Trilu, Where over either, Not), and the
//   diagonal it keeps up to.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES_FUSEDKERNELPATTERNS_H
#define LOOM_PASSES_FUSEDKERNELPATTERNS_H

#include "loom/IR/Graph.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace loom {

/// One fused element-wise region.
struct ElementwiseRegion {
  /// rmsnorm, layernorm, swiglu or rotary (the YAML's kernel names).
  std::string Kernel;
  /// How the graph wrote it ("Pow,ReduceMean,Add,Sqrt,Div,Mul,Mul").
  std::string Form;
  /// The node computing Out: carries the kernel's cost.
  const Node *Anchor = nullptr;
  /// What the kernel reads from HBM: activations, weights, rotary tables.
  llvm::SmallVector<const Value *, 4> Inputs;
  const Value *Out = nullptr;
  /// What its backward keeps (loom/Cost/FusedKernels.h).
  llvm::SmallVector<const Value *, 4> Saved;
  /// In graph order.
  std::vector<const Node *> Members;
};

/// The regions of the kernels named in \p Kernels (rmsnorm, layernorm,
/// swiglu, rotary), none containing a node of \p Taken; the nodes of each
/// region found are added to \p Taken. Every value inside a region is read
/// only inside it and is no graph output.
std::vector<ElementwiseRegion>
findElementwiseRegions(const Graph &G, int64_t Opset,
                       llvm::ArrayRef<std::string> Kernels,
                       llvm::DenseSet<const Node *> &Taken);

/// How an attention mask enters the scores.
enum class MaskUse {
  Additive,       ///< scores + mask: a large negative entry masks
  MaskedWhenTrue, ///< Where(mask, fill, scores)
  KeptWhenTrue,   ///< Where(mask, scores, fill)
};

/// If \p Mask (used as \p Use) is provably causal over its last two axes,
/// the offset d such that score (i, j) is kept exactly when j <= i + d;
/// None when it is not causal or cannot be proven so.
llvm::Optional<int64_t> getCausalOffset(const Value *Mask, MaskUse Use);

/// The fraction of an Sq x Sk score matrix that j <= i + d keeps.
double getCausalKeptFraction(int64_t Sq, int64_t Sk, int64_t Offset);

} // namespace loom

#endif // LOOM_PASSES_FUSEDKERNELPATTERNS_H
