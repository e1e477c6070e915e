//===- ExpertRules.h - The rule table's ep axis (MoE) ------*- C++ -*-===//
//
// Part of the sharding rule table (Rules.h; implemented in
// lib/Shard/Rules/ExpertRules.cpp). The ep axis is not per op but per
// expert region: applyExpertRules says which nodes are expert work and how
// (an unrolled expert's branch, the Add chain summing them, stacked
// [E, ...] work), which weights ep slices; getExpertInputSpec which tp
// splits the tokens entering expert work give up; getExpertCrossing what
// ep communicates on each edge into or out of expert work (gathers into
// unrolled branches, the combine chain's reduce-scatter, stacked work's
// all-to-all dispatch and combine). The sharder (Propagation.cpp, and
// RoleExperts.cpp, which emits the crossings), the evaluator (RuleSplit.cpp,
// which prices them) and the search's legality (SearchSpace.cpp) read it.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SHARD_EXPERTRULES_H
#define LOOM_SHARD_EXPERTRULES_H

#include "loom/Shard/Rules.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

namespace loom {

struct ExpertGroup;

/// What a node is to expert parallelism.
enum class ExpertRole : uint8_t {
  None,
  /// Work of one unrolled expert's branch: runs on the rank owning the
  /// expert, on the ep group's tokens.
  Branch,
  /// A link of the Add chain summing an unrolled group's experts: each
  /// rank adds the experts it holds; the sum is reduce-scattered where the
  /// chain ends.
  Combine,
  /// Work on stacked [E, ...] expert weights: this rank's E/ep experts on
  /// the ep group's tokens (dim 1), between an all-to-all dispatch and an
  /// all-to-all combine.
  Stacked,
};

struct ExpertNodeRule {
  ExpertRole Role = ExpertRole::None;
  /// Branch: the expert (0-based).
  int Expert = -1;
  /// The experts of the node's MoE layer.
  unsigned GroupExperts = 0;
};

/// The ep axis' decisions for one graph.
struct ExpertAxisRules {
  /// Experts per MoE layer (one count for the whole graph under ep > 1).
  unsigned NumExperts = 0;
  llvm::DenseMap<const Node *, ExpertNodeRule> Nodes;
  /// Weights ep slices along dim 0 (stacked [E, ...] weights).
  llvm::DenseSet<const Value *> SplitParams;
  /// Weights of one unrolled expert each (held by that expert's rank).
  llvm::DenseSet<const Value *> BranchParams;

  ExpertNodeRule lookup(const Node *N) const { return Nodes.lookup(N); }
};

/// The ep rules over \p Groups (findExperts, include/loom/Analysis/Experts.h)
/// at degree \p EP. EP > 1: the groups ep splits (the unrolled ones when
/// there are any, else the stacked ones), an error when they disagree on
/// the expert count, none exist or ep does not divide the count.
/// EP == RuleContext::AnyDivides: every group's work and expert weights,
/// unchecked (the evaluator, which costs every degree).
llvm::Expected<ExpertAxisRules>
applyExpertRules(const Graph &G, llvm::ArrayRef<ExpertGroup> Groups,
                 unsigned EP);

/// Whether ep = \p EP may split layers of \p NumExperts experts.
bool isExpertSplitLegal(unsigned NumExperts, unsigned EP);

/// The spec expert work of \p Role needs a token input in that arrived as
/// \p Arrived: replicated where tp splits a dim ep moves tokens along
/// (dim 0 for branches, dims 0 and 1 for stacked work), else as arrived.
/// On cp's \p SequenceAxis a branch keeps its tokens' split: its weights
/// are whole and its ops per token, so ep gathers each rank's cp share
/// and the combine's reduce-scatter hands it back.
AxisSpec getExpertInputSpec(ExpertRole Role, const AxisSpec &Arrived,
                            bool SequenceAxis = false);

/// The communication on an edge into or out of stacked expert work.
enum class ExpertTransition : uint8_t {
  None,
  Dispatch,      ///< All-to-all: split dim 0 (experts), concat dim 1.
  GatherTokens,  ///< All-gather dim 1: a broadcast expert dim [1, N, d].
  Combine,       ///< All-to-all: split dim 1 (tokens), concat dim 0.
  ReduceScatter, ///< End of an unrolled group's combine chain (dim 0).
  Gather,        ///< All-gather dim 0: the ep group's tokens into a branch.
};
llvm::StringRef getExpertTransitionName(ExpertTransition T);
/// The edge from a value produced by stacked work or not (\p FromStacked)
/// to a consumer that is stacked work or not; \p ExpertDim: dim 0 of the
/// value as produced.
ExpertTransition getStackedTransition(bool FromStacked, bool ToStacked,
                                      int64_t ExpertDim);

/// What ep communicates on one input of a node: the role builder emits it
/// (RoleExperts.cpp buildInput) and the evaluator prices it
/// (lib/Planner/RuleSplit.cpp), so both read this one decision.
struct ExpertCrossing {
  ExpertTransition Kind = ExpertTransition::None;
  /// The value communicated: the input itself, or, for a part of a Split
  /// along a dim other than the tokens', the Split's input, gathered once
  /// for all its parts (each rank's branches read other parts, and every
  /// rank must issue the same all-gathers).
  const Value *V = nullptr;
};
/// The crossing on input \p I of \p N at ep > 1, from the ep rules of the
/// node and of its input's producer (\p RuleOf) and whether the input
/// depends on the model's inputs (\p DataDependent): a branch's tokens
/// and routing values are gathered over the group; the combine chain's
/// sum is reduce-scattered where a node outside the chain reads it; the
/// edges of stacked work are its dispatch and combine (getStackedTransition).
ExpertCrossing
getExpertCrossing(const Node &N, unsigned I,
                  llvm::function_ref<ExpertNodeRule(const Node *)> RuleOf,
                  const llvm::DenseSet<const Value *> &DataDependent);

/// Whether an unrolled group's combine sum, held as \p Held over tp,
/// leaves its expert region (a ReduceScatter crossing) to a reader that
/// wants it as \p Want, with ep's reduce-scatter before tp's reshard: when
/// tp splits dim 0, the dim ep scatters. The branch's tokens were gathered
/// over tp and then over ep, so ep's ranks are dim 0's outer factor and
/// scatter first; tp's reduce-scatter (or slice) then works on one ep
/// share. Otherwise tp reshards first (on the ep group's tokens) and ep
/// scatters what tp left. The role builder emits this order
/// (RoleExperts.cpp leaveExpertRegion) and the evaluator prices it
/// (lib/Planner/RuleSplit.cpp).
bool isEPScatterFirst(const AxisSpec &Held, const AxisSpec &Want, unsigned TP);

} // namespace loom

#endif // LOOM_SHARD_EXPERTRULES_H
