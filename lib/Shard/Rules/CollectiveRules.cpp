//===- CollectiveRules.cpp - Collectives of another mesh axis ------------===//
//
// A graph propagated along one axis may already hold another axis'
// collectives: under cp beside tp, each tp rank's graph, with tp's hccl
// nodes, is propagated along cp (lib/Shard/ComposeContextParallel.cpp).
// HcomAllReduce (any reduction) combines its group's buffers element by
// element, so a split along this axis passes through it: each rank reduces
// its own piece with the same piece of its peers. HcomAllGather
// concatenates them along its `axis`, so a split of another dim passes
// through likewise -- except where cp gathered an output for the caller:
// tp gathers cp's share first (isGatheredForCaller). A transfer between ranks
// running the same graph (the cp ring's HcomSend/HcomReceive pair of one
// sr_tag) moves each rank's part: the receive is laid out as its send's input.
// HcomAllToAllV passes a split of a dim it neither splits nor concatenates.
// Any other collective runs on whole values.
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"
#include "llvm/ADT/STLExtras.h"

using namespace llvm;

namespace loom {
namespace shardrules {

/// A transfer between ranks that run the same graph (the cp ring's
/// HcomSend to the next cp rank, HcomReceive from the previous): each
/// rank sends its part of the block and receives the same part of its
/// peer's, so the receive is laid out as the paired send's input.
static void ruleHcomTransfer(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  if (N.getOpType() == "HcomSend") {
    AxisSpec C = Ctx.getSpec(N.getInput(0));
    if (C.isSplit() && C.Blocks.empty())
      NS.InputSpecs[0] = C;
    return;
  }
  const Node *S = Ctx.getPairedSend(N);
  if (!S || N.getNumOutputs() != 1 || !N.getOutput(0))
    return;
  AxisSpec C = Ctx.getSpec(S->getInput(0));
  if (C.isSplit() && C.Blocks.empty() &&
      S->getInput(0)->Type.Dims == N.getOutput(0)->Type.Dims)
    NS.OutputSpecs[0] = C;
}

/// \p V reaches nothing but the graph's outputs, through Identity nodes
/// and Gathers (the ring's reordering of its balanced chunks,
/// RingAttention.cpp): an output gathered for the caller (RoleGraphs.cpp),
/// which this axis must gather too. tp gathers it first, at cp's share of
/// the tokens, as the cost model prices tp's collectives (cp's output
/// gathers are priced by no layer).
static bool isGatheredForCaller(const Value *V, const RuleContext &Ctx) {
  ArrayRef<const Node *> Users = Ctx.getUsers(V);
  return !Users.empty() && all_of(Users, [&](const Node *U) {
    if ((U->getOpType() != "Identity" && U->getOpType() != "Gather") ||
        U->getNumOutputs() != 1 || U->getInput(0) != V)
      return false;
    return Ctx.getUsers(U->getOutput(0)).empty() ||
           isGatheredForCaller(U->getOutput(0), Ctx);
  });
}

void ruleHcomCollective(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  replicateAll(N, NS);
  StringRef Op = N.getOpType();
  if (Op == "HcomSend" || Op == "HcomReceive") {
    ruleHcomTransfer(N, Ctx, NS);
    return;
  }
  const Value *X = N.getNumInputs() ? N.getInput(0) : nullptr;
  if (!X || N.getNumOutputs() != 1 ||
      (Op != "HcomAllReduce" && Op != "HcomAllGather" && Op != "HcomAllToAllV"))
    return;
  AxisSpec C = Ctx.getSpec(X);
  // HcomAllToAllV moves pieces of its split_axis between the peers and
  // concatenates them on concat_axis: a split of any other dim, in blocks
  // or not (tp's head groups around Ulysses' all-to-all under cp first,
  // each sample's of heads folded into the batch), is each rank's own.
  if (Op == "HcomAllToAllV" && C.isSplit()) {
    unsigned Rank = X->Type.getRank();
    if (C.Dim == normAxis(N.getAttrInt("split_axis", 0), Rank) ||
        C.Dim == normAxis(N.getAttrInt("concat_axis", 0), Rank))
      return;
    for (unsigned I = 1; I < N.getNumInputs(); ++I)
      NS.InputSpecs[I] = AxisSpec();
    NS.InputSpecs[0] = C;
    NS.OutputSpecs[0] = C;
    return;
  }
  if (!C.isSplit() || !C.Blocks.empty())
    return;
  if (Op == "HcomAllGather" &&
      (C.Dim == normAxis(N.getAttrInt("axis", 0), X->Type.getRank()) ||
       (!Ctx.isSequenceAxis() && isGatheredForCaller(N.getOutput(0), Ctx))))
    return;
  NS.InputSpecs[0] = C;
  NS.OutputSpecs[0] = C;
}

} // namespace shardrules
} // namespace loom
