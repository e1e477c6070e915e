//===- IndexingRules.cpp - Sharding rules of Gather and Scatter -----------===//
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
// - Gather is linear in its data: whole indices pick the rows of a partial
//   sum as a partial sum of the rows.
//
// ScatterElements and ScatterND with reduction "add" (torch's scatter_add_)
// or "none" (torch's index_add_ as exported: HF Mixtral scatters each
// expert's output into zeros and adds it up) are linear in data and
// updates together, with whole indices: "add" because a sum of sums is a
// sum; "none" because the positions indices name take sum_r U_r and the
// others sum_r D_r (duplicate indices leave "none" undefined, ONNX's
// ScatterElements and ScatterND, so a well-defined model has none). So
// sum_r scatter(D_r, I, U_r) = scatter(sum_r D_r, I, sum_r U_r): partial
// updates into a partial accumulator -- or into zeros (torch.zeros),
// which sum to zeros -- give a partial output, and the experts'
// row-parallel outputs are reduced once after the last expert rather
// than once per expert. Any other scatter ("mul", "max", "min", or
// partial updates into whole data) stays replicated.
//
// ScatterElements writes along its axis only: output[.., i_axis, ..] takes
// updates[.., j, ..] at i_axis = indices[.., j, ..], every other index the
// same in the three. Indices and updates split alike on another dim, over
// which data has their size, scatter each rank's rows into its own rows
// (any reduction): data is asked for the same split (whole zeros are
// sliced) and the output keeps it (HF Mixtral's routing weights scattered
// into [tokens, experts] under cp's token split).
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
  // exchange, RoleEmbeddings.cpp, replaces the lookup): no vocab split.
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
  // Gather is linear in its data: the rows of a partial sum are the sum of
  // the partials' rows (a cp rank's positions picked from a vocab-parallel
  // lookup, ComposeContextParallel.cpp).
  if (CD.isPartial() && !CI.isSplit() && !CI.isPartial() &&
      Ctx.mayStayPartial(Data)) {
    NS.InputSpecs = {CD, AxisSpec()};
    NS.OutputSpecs = {AxisSpec::partial()};
    return;
  }
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

/// ScatterElements with indices and updates split alike on a dim other than
/// its axis, where data has their size: that split throughout.
static bool scatterRowsSplit(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  if (N.getOpType() != "ScatterElements" || N.getNumInputs() < 3)
    return false;
  const Value *Data = N.getInput(0), *Idx = N.getInput(1), *Upd = N.getInput(2);
  AxisSpec CD = Ctx.getSpec(Data), CI = Ctx.getSpec(Idx), CU = Ctx.getSpec(Upd);
  unsigned Rank = Data->Type.getRank();
  int64_t Axis = N.getAttrInt("axis", 0);
  if (Axis < 0)
    Axis += Rank;
  if (!CI.isSplit() || !CI.Blocks.empty() || CU != CI || CI.Dim == Axis ||
      (unsigned)CI.Dim >= Rank || Idx->Type.getRank() != Rank ||
      !Data->Type.Dims[CI.Dim].isStatic() ||
      Data->Type.Dims[CI.Dim] != Idx->Type.Dims[CI.Dim] ||
      !(CD == CI || CD.isReplicated()))
    return false;
  NS.InputSpecs = {CI, CI, CI};
  NS.OutputSpecs = {CI};
  return true;
}

void ruleScatter(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  replicateAll(N, NS);
  if (scatterRowsSplit(N, Ctx, NS))
    return;
  StringRef Reduction = N.getAttrString("reduction", "none");
  if (N.getNumInputs() < 3 || (Reduction != "add" && Reduction != "none"))
    return;
  const Value *Data = N.getInput(0), *Idx = N.getInput(1), *Upd = N.getInput(2);
  AxisSpec CD = Ctx.getSpec(Data), CI = Ctx.getSpec(Idx), CU = Ctx.getSpec(Upd);
  if (!CU.isPartial() || CI.isSplit() || CI.isPartial() ||
      !(CD.isPartial() || (!CD.isSplit() && isZeroConstant(Data))))
    return;
  keepInputs(N, Ctx, NS, AxisSpec::partial());
}

} // namespace shardrules
} // namespace loom
