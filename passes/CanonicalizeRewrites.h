//===- CanonicalizeRewrites.h - canonicalize's rewrite families -*- C++ -*-===//
//
// The rewrite families of canonicalize that live in files of their own
// (CanonicalizeLinear.cpp, CanonicalizeMasks.cpp, CanonicalizeSplits.cpp,
// CanonicalizeStacks.cpp).
// Each looks at the node at a position of the graph being swept, rewrites
// it (and the nodes it absorbs) in place, and says whether it did. A
// rewrite may insert nodes before that position: it then advances the
// position past them, so the sweep goes on with the node after.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES_CANONICALIZEREWRITES_H
#define LOOM_PASSES_CANONICALIZEREWRITES_H

#include "loom/IR/Graph.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <tuple>

namespace loom {

/// The additive masks made in one sweep, by (condition, fill, whether the
/// condition keeps the scores, element type): Wheres that read one
/// condition share one mask, as the additive writing shares its mask.
using MaskCache =
    std::map<std::tuple<const Value *, double, bool, unsigned>, Value *>;

/// What a rewrite may read about the graph being swept. The use map was
/// built at the start of the sweep: values made during it are not in it.
struct CanonContext {
  Graph &G;
  const UseMap &Users;
  /// Values read by name from a Loop/If/Scan body.
  const llvm::DenseSet<const Value *> &SubgraphReads;
  /// The model's default-domain opset (Split's form depends on it).
  int64_t Opset;
  MaskCache &Masks;

  bool isGraphOutput(const Value *V) const {
    return llvm::is_contained(G.getOutputs(), V);
  }
  /// Whether \p V may be removed or get a new definition: not a graph
  /// output, not read by name from a body.
  bool canBypass(const Value *V) const {
    return V && !isGraphOutput(V) && !SubgraphReads.count(V);
  }
  /// The nodes reading \p V (each once per input slot).
  llvm::ArrayRef<const Node *> usersOf(const Value *V) const {
    auto It = Users.find(V);
    if (It == Users.end())
      return {};
    return It->second;
  }
  bool hasOneUse(const Value *V) const {
    return usersOf(V).size() == 1 && canBypass(V);
  }
};

/// Inserts `Constant(T)` (node \p NodeName, result \p Name) at position
/// \p Pos of \p G and advances \p Pos past it. Null if that fails.
Value *insertConstant(Graph &G, unsigned &Pos, llvm::StringRef NodeName,
                      llvm::StringRef Name, Tensor T);

/// `Gemm(A, B[, C])` with transA = 0 and alpha = beta = 1 becomes
/// `MatMul(A, B')` [+ `Add(., C)`]; `Add(bias, MatMul(..))` reads the
/// product first. Counts into \p Gemms and \p Swapped.
bool rewriteGemm(CanonContext &Ctx, unsigned &Pos, unsigned &Gemms);
bool rewriteBiasOrder(CanonContext &Ctx, unsigned Pos, unsigned &Swapped);

/// As detect-fused-kernels: at or below this an additive mask's entry is
/// masked (-1e4 in bf16 is -9984).
constexpr double MaskedBelow = -9984;

/// `Where(cond, x, fill)` / `Where(cond, fill, x)` with a constant
/// condition and a large negative fill becomes `Add(x, additive mask)`.
bool rewriteWhereMask(CanonContext &Ctx, unsigned &Pos, unsigned &Masks);

/// Slices that cut one value into n equal consecutive parts along an axis
/// become one Split; a Split given n equal sizes loses the sizes.
bool rewriteSliceGroup(CanonContext &Ctx, unsigned &Pos, unsigned &Splits);
bool rewriteSplitSizes(CanonContext &Ctx, unsigned Pos, unsigned &Splits);

/// `ReduceSum(Mul(Concat(Unsqueeze(y_e, a)..), G), axes = [a])` (experts
/// stacked, weighted and summed) becomes the chain of
/// `Mul(y_e, Gather(G, e))` Adds that the other writing of the same sum is.
bool rewriteStackedSum(CanonContext &Ctx, unsigned &Pos, unsigned &Stacks);
/// `Einsum(stack, W)` contracting the stack's axis (`btde,bte->btd`)
/// becomes that `ReduceSum(Mul(stack, W'), axes = [a])`.
bool rewriteStackedEinsum(CanonContext &Ctx, unsigned &Pos, unsigned &Stacks);
/// `MatMul(stack, V)` contracting the stack's axis against a vector of
/// gates (V's free dim 1) becomes `Unsqueeze(ReduceSum(Mul(stack, V^T)))`.
bool rewriteStackedMatMul(CanonContext &Ctx, unsigned &Pos, unsigned &Stacks);
/// `Squeeze(Unsqueeze(x, axes), axes)` becomes `Identity(x)`.
bool rewriteSqueezeOfUnsqueeze(CanonContext &Ctx, unsigned Pos,
                               unsigned &Pairs);

} // namespace loom

#endif
