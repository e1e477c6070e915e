//===- IndexingRules.cpp - Sharding rules of Gather -----------------------===//
//
// Gather(data, indices, axis) copies slices of data picked by indices:
// - An embedding table [V, d] (a parameter) looked up along axis 0 with
//   replicated indices splits by vocabulary rows (Megatron-LM's
//   vocab-parallel embedding, Shoeybi et al. 2019, §3): each rank looks up
//   the rows it holds, zeroes the others, and the partial rows are summed.
// - A data split on a dim other than the axis stays, at its place in the
//   output (dims after the axis shift by rank(indices) - 1).
// - Indices split on dim j with data replicated give the output split on
//   axis + j.
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"

using namespace llvm;

namespace loom {
namespace shardrules {

void ruleGather(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  const Value *Data = N.getInput(0), *Idx = N.getInput(1);
  Shape SD = shapeOf(Data);
  replicateAll(N, NS);
  // A table sharded over dp is looked up whole on every tp rank (the dp
  // exchange, RoleGraphs.cpp, replaces the lookup): no vocab split.
  if (SD.empty() || !Idx || Ctx.isShardedOverDP(Data))
    return;
  int Axis = normAxis(N.getAttrInt("axis", 0), SD.size());
  int Dummy = 0;
  AxisSpec CI = Ctx.getSpec(Idx);
  if (traceWeight(Data, Dummy) && Axis == 0 && !CI.isSplit() &&
      !CI.isPartial() && SD.size() == 2 && Ctx.isDivisible(SD[0]) &&
      Ctx.splitWeight(Data, 0, {})) {
    NS.InputSpecs = {Ctx.getStoredSpec(Data), AxisSpec()};
    NS.OutputSpecs = {AxisSpec::partial()};
    NS.Lower = ShardLowering::VocabParallelGather;
    return;
  }
  AxisSpec CD = Ctx.getSpec(Data);
  unsigned RI = Idx->Type.getRank();
  if (CD.isSplit() && CD.Dim != Axis && CD.Blocks.empty() && !CI.isPartial() &&
      !CI.isSplit()) {
    NS.InputSpecs = {CD, AxisSpec()};
    NS.OutputSpecs = {
        AxisSpec::split(CD.Dim < Axis ? CD.Dim : CD.Dim + RI - 1)};
    return;
  }
  if (CI.isSplit() && !CD.isSplit() && !CD.isPartial()) {
    NS.InputSpecs = {AxisSpec(), CI};
    NS.OutputSpecs = {AxisSpec::split(Axis + CI.Dim)};
    return;
  }
}

} // namespace shardrules
} // namespace loom
