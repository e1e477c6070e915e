//===- RuleFamilies.h - Shared pieces of the sharding rules -----*- C++ -*-===//
//
// Private to lib/Shard/Rules: the per-family rule functions the dispatcher
// (Rules.cpp) calls and the helpers they share. The conventions every rule
// follows are stated once, in include/loom/Shard/Rules.h.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_SHARD_RULES_RULEFAMILIES_H
#define LOOM_LIB_SHARD_RULES_RULEFAMILIES_H

#include "loom/Shard/Rules.h"

namespace loom {
namespace shardrules {

using Shape = llvm::SmallVector<int64_t, 4>;

/// The static shape of \p V, or empty.
Shape shapeOf(const Value *V);
/// The shape of \p V with -1 for each dim not static (a data-dependent
/// count: NonZero's, and what follows from it), or empty when its rank is
/// unknown. For the rules whose split never falls on such a dim: a
/// weight's columns, an element-wise op aligned with them.
Shape rankedShapeOf(const Value *V);
int64_t product(llvm::ArrayRef<int64_t> S);
/// A negative axis counted from the end.
int normAxis(int64_t A, unsigned Rank);
/// A Constant or ConstantOfShape of the default domain whose every
/// element is zero (torch's zeros_like accumulator).
bool isZeroConstant(const Value *V);
/// The axes of \p N: the "axes" attribute, the "axis" attribute, or the
/// constant input \p InputIdx (opset >= 13 Squeeze, Unsqueeze, Reduce*).
std::vector<int64_t> readAxes(const Node &N, unsigned InputIdx);
/// Every input and output replicated: the fallback that is always legal.
void replicateAll(const Node &N, OpSharding &S);
/// Every input as it arrives; every output \p Out.
void keepInputs(const Node &N, const RuleContext &Ctx, OpSharding &S,
                const AxisSpec &Out);
/// The start of a rule for an op linear in its first input (Expand,
/// (Un)Squeeze): everything replicated, a partial first input kept partial
/// through the op. Its spec where it is split (the rule goes on), else None
/// (the rule is done).
llvm::Optional<AxisSpec>
getSplitLinearInput(const Node &N, const RuleContext &Ctx, OpSharding &S);
/// Row parallel (MatMul, Gemm, Conv alike): the input \p In and the weight
/// \p Weight split along the contraction dim, so the output is a partial
/// sum -- or, with a bias, whole after the reduction, the bias (whole)
/// added once, after the one all-reduce S.Collectives declares.
void setRowParallel(const Node &N, const AxisSpec &In, const AxisSpec &Weight,
                    bool HasBias, OpSharding &S);
/// An all-reduce (\p Reduction: "sum" or "max") of a buffer of type \p T
/// that the lowering of \p N needs (OpSharding::Collectives), named after
/// N's first output with \p Suffix.
ShardCollective getLoweringAllReduce(const Node &N, const TensorType &T,
                                     llvm::StringRef Reduction,
                                     llvm::StringRef Suffix);

/// The signature of the per-family rules below: read \p N's input specs
/// from \p Ctx, write the specs (and the collectives) of its choice to \p S.
using RuleFn = void(const Node &N, RuleContext &Ctx, OpSharding &S);
/// A collective of another mesh axis already in the graph
/// (CollectiveRules.cpp).
RuleFn ruleHcomCollective;

// MatmulRules.cpp: MatMul, Gemm.
RuleFn ruleMatMul, ruleGemm;
// ElementwiseRules.cpp: element-wise maps with broadcasting, Expand.
RuleFn ruleElementwise, ruleExpand;
// MovementRules.cpp: Reshape/Flatten, Transpose, (Un)Squeeze, Split,
// Concat, Slice, Shape/Size.
void ruleReshape(const Node &N, RuleContext &Ctx, OpSharding &S, bool Flatten);
RuleFn ruleTranspose;
void ruleUnsqueezeSqueeze(const Node &N, RuleContext &Ctx, OpSharding &S,
                          bool Unsqueeze);
RuleFn ruleSplit, ruleConcat, ruleSlice, ruleShape;
// NormRules.cpp: BatchNormalization, InstanceNormalization,
// LayerNormalization.
RuleFn ruleBatchNorm, ruleLayerNorm;
// ReductionRules.cpp: Softmax family, ArgMax/ArgMin, TopK, Reduce*.
void ruleAxisOp(const Node &N, RuleContext &Ctx, OpSharding &S, int Axis,
                bool Below);
RuleFn ruleSoftmax, ruleArgMax, ruleTopK, ruleReduce;
// AttentionRules.cpp: opset 23's Attention and RotaryEmbedding (the
// heads split).
RuleFn ruleAttention, ruleRotaryEmbedding;
// ConvPoolRules.cpp: Conv, pools.
RuleFn ruleConv, rulePool;
// IndexingRules.cpp: Gather, ScatterElements, ScatterND.
RuleFn ruleGather, ruleScatter;
// LossRules.cpp: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss.
RuleFn ruleLoss;

} // namespace shardrules
} // namespace loom

#endif // LOOM_LIB_SHARD_RULES_RULEFAMILIES_H
