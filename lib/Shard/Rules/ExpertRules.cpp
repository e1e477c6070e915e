//===- ExpertRules.cpp - How mixture-of-experts work splits along ep -----===//
//
// The ep axis' rules (Rules.h, "Expert parallelism"): which nodes of the
// expert groups findExperts recognised (include/loom/Analysis/Experts.h) are
// expert work and how, which weights ep slices, which tp splits the tokens
// entering expert work must give up, and what crosses the edges into and
// out of stacked expert work. Propagation (lib/Shard/Propagation.cpp), the
// role builder (RoleExperts.cpp), the evaluator (lib/Planner/PlanCost.cpp) and
// the search's legality (lib/Planner/Search.cpp) read these, so they agree:
//
//  - unrolled experts (one branch per expert, summed by an Add chain; the
//    dense-gated torch loop export is one): expert e's branch runs on the
//    rank owning e, on every token of the ep group (all-gathered where the
//    tokens enter); each rank sums the experts it holds along the chain and
//    the sum is reduce-scattered back to the ranks' tokens where the chain
//    ends (an expert-parallel MLP, as Megatron-LM's "allgather" token
//    dispatcher does it);
//  - stacked experts ([E, ...] weights read by batched MatMuls, fed by a
//    capacity-based dispatch, whether written as MatMuls or as GShard's
//    Einsum `nec,nh->ech`): each rank keeps E/ep experts (dim 0 of every
//    expert weight) and runs them on the ep group's tokens (dim 1) between
//    an all-to-all dispatch and an all-to-all combine (GShard, Lepikhin et
//    al. 2020, §3.2).
//
// A model with both forms is split by its unrolled branches only (their
// expert numbering is the one the ranks own); its stacked groups then run
// as ordinary (tp-split) work.
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/ExpertRules.h"
#include "RuleFamilies.h"
#include "loom/Analysis/Experts.h"

using namespace llvm;

namespace loom {

namespace {

Error err(const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), Msg);
}

/// The Add chain that sums \p EG's unrolled experts, from its first
/// expert-adding link to the one producing EG.Output; the links are the
/// single-use Adds findExperts chained.
void markCombineChain(const Graph &G, const ExpertGroup &EG,
                      ExpertAxisRules &R) {
  if (!EG.Combine || !EG.Output)
    return;
  DenseMap<const Value *, const Node *> OnlyUser;
  DenseSet<const Value *> Shared;
  for (const auto &NP : G.getNodes())
    for (const Value *V : NP->getInputs())
      if (V && !Shared.count(V) && !OnlyUser.insert({V, NP.get()}).second) {
        OnlyUser.erase(V);
        Shared.insert(V);
      }
  for (const Node *N = EG.Combine; N; N = OnlyUser.lookup(N->getOutput(0))) {
    if (N->getOpType() != "Add")
      break;
    ExpertNodeRule &NR = R.Nodes[N];
    NR.Role = ExpertRole::Combine;
    NR.GroupExperts = EG.NumExperts;
    if (N->getOutput(0) == EG.Output)
      break;
  }
}

/// Marks \p EG's work; \p Split: its weights are ep's to slice.
void markGroup(const Graph &G, const ExpertGroup &EG, bool Split,
               ExpertAxisRules &R) {
  for (const auto &KV : EG.BranchOf) {
    ExpertNodeRule &NR = R.Nodes[KV.first];
    NR.Role = ExpertRole::Branch;
    NR.Expert = KV.second;
    NR.GroupExperts = EG.NumExperts;
  }
  for (const auto &Ps : EG.BranchParams)
    R.BranchParams.insert(Ps.begin(), Ps.end());
  if (!EG.BranchOf.empty()) {
    markCombineChain(G, EG, R);
    return;
  }
  for (const Node *N : EG.StackedNodes) {
    ExpertNodeRule &NR = R.Nodes[N];
    NR.Role = ExpertRole::Stacked;
    NR.GroupExperts = EG.NumExperts;
    // The weights read here whose dim 0 is the expert dim.
    for (const Value *V : N->getInputs())
      if (Split && V && V->isParameter() && V->Type.getRank() &&
          V->Type.Dims[0].Size == (int64_t)EG.NumExperts)
        R.SplitParams.insert(V);
  }
  if (!Split)
    R.SplitParams.insert(EG.StackedParams.begin(), EG.StackedParams.end());
}

} // namespace

StringRef getExpertTransitionName(ExpertTransition T) {
  switch (T) {
  case ExpertTransition::None:
    return "none";
  case ExpertTransition::Dispatch:
    return "all-to-all dispatch";
  case ExpertTransition::GatherTokens:
    return "all-gather tokens";
  case ExpertTransition::Combine:
    return "all-to-all combine";
  case ExpertTransition::ReduceScatter:
    return "reduce-scatter";
  case ExpertTransition::Gather:
    return "all-gather";
  }
  return "?";
}

bool isExpertSplitLegal(unsigned NumExperts, unsigned EP) {
  return EP <= 1 || (NumExperts && NumExperts % EP == 0);
}

Expected<ExpertAxisRules>
applyExpertRules(const Graph &G, ArrayRef<ExpertGroup> Groups, unsigned EP) {
  ExpertAxisRules R;
  if (EP == RuleContext::AnyDivides) {
    // The evaluator: every group's work, whatever degree it is costed at.
    for (const ExpertGroup &EG : Groups)
      markGroup(G, EG, /*Split=*/false, R);
    return R;
  }
  if (EP <= 1)
    return R;
  // Unrolled branches first: they number the experts the ranks own.
  bool Unrolled = any_of(
      Groups, [](const ExpertGroup &EG) { return !EG.BranchOf.empty(); });
  for (const ExpertGroup &EG : Groups) {
    bool Take = Unrolled ? !EG.BranchOf.empty()
                         : EG.isStacked() && !EG.StackedNodes.empty();
    if (!Take)
      continue;
    if (R.NumExperts && EG.NumExperts != R.NumExperts)
      return err("ep=" + Twine(EP) +
                 ": MoE layers have different expert "
                 "counts (" +
                 Twine(R.NumExperts) + " and " + Twine(EG.NumExperts) + ")");
    R.NumExperts = EG.NumExperts;
    markGroup(G, EG, /*Split=*/true, R);
  }
  if (!R.NumExperts)
    return err("ep=" + Twine(EP) + ": the model has no experts to split");
  if (!isExpertSplitLegal(R.NumExperts, EP))
    return err("ep=" + Twine(EP) + " does not divide the " +
               Twine(R.NumExperts) + " experts");
  return R;
}

AxisSpec getExpertInputSpec(ExpertRole Role, const AxisSpec &Arrived,
                            bool SequenceAxis) {
  if (SequenceAxis && Role == ExpertRole::Branch)
    return Arrived;
  // Branches gather the tokens along dim 0, stacked work dispatches along
  // dims 0 (experts) and 1 (tokens): a tp split there would be mixed with
  // the ep group's tokens.
  int LastEPDim = Role == ExpertRole::Stacked  ? 1
                  : Role == ExpertRole::Branch ? 0
                                               : -1;
  if (Arrived.isSplit() && Arrived.Dim <= LastEPDim)
    return AxisSpec::replicated();
  return Arrived;
}

ExpertTransition getStackedTransition(bool FromStacked, bool ToStacked,
                                      int64_t ExpertDim) {
  if (FromStacked == ToStacked)
    return ExpertTransition::None;
  if (FromStacked)
    return ExpertTransition::Combine;
  // A broadcast expert dim ([1, N, d]): every local expert reads the same
  // tokens, so they are gathered rather than dispatched.
  return ExpertDim == 1 ? ExpertTransition::GatherTokens
                        : ExpertTransition::Dispatch;
}

/// The Split whose input stands for its part \p V in a branch's gather:
/// a default-domain Split outside expert work along a dim after the
/// tokens' (dim 0, which the gather concatenates).
static const Value *
getGatheredWhole(const Value *V,
                 function_ref<ExpertNodeRule(const Node *)> RuleOf,
                 const DenseSet<const Value *> &DD) {
  const Node *D = V->getDefiningNode();
  if (!D || D->getOpType() != "Split" || !D->getDomain().empty() ||
      RuleOf(D).Role != ExpertRole::None || !D->getInput(0) ||
      !DD.count(D->getInput(0)))
    return V;
  int64_t Rank = D->getInput(0)->Type.getRank();
  int64_t Axis = D->getAttrInt("axis", 0);
  Axis = Axis < 0 ? Axis + Rank : Axis;
  return Axis > 0 && Axis < Rank ? D->getInput(0) : V;
}

ExpertCrossing
getExpertCrossing(const Node &N, unsigned I,
                  function_ref<ExpertNodeRule(const Node *)> RuleOf,
                  const DenseSet<const Value *> &DD) {
  const Value *V = N.getInput(I);
  const Node *D = V ? V->getDefiningNode() : nullptr;
  if (!V)
    return {};
  ExpertRole To = RuleOf(&N).Role;
  ExpertRole From = D ? RuleOf(D).Role : ExpertRole::None;
  // The combine chain's sum, read outside the chain: each rank holds the
  // sum of its experts over the group's tokens.
  if (From == ExpertRole::Combine && To != ExpertRole::Combine)
    return {ExpertTransition::ReduceScatter, V};
  if (To == ExpertRole::Branch && DD.count(V) && From != ExpertRole::Branch &&
      From != ExpertRole::Combine)
    return {ExpertTransition::Gather, getGatheredWhole(V, RuleOf, DD)};
  bool FromStacked =
      From == ExpertRole::Stacked && DD.count(V) && V->Type.getRank() >= 2;
  bool ToStacked = To == ExpertRole::Stacked;
  if (FromStacked == ToStacked || (!FromStacked && !DD.count(V)) ||
      V->Type.getRank() < 1)
    return {};
  return {getStackedTransition(FromStacked, ToStacked, V->Type.Dims[0].Size),
          V};
}

bool isEPScatterFirst(const AxisSpec &Held, const AxisSpec &Want, unsigned TP) {
  return TP > 1 && Want.isSplit() && Want.Dim == 0 && !Held.isSplit() &&
         getTransition(Held, Want) != Transition::None;
}

} // namespace loom
