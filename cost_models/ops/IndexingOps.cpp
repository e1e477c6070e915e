//===- IndexingOps.cpp - Cost rules for gathers and scatters --------------===//
//
// Gather, GatherElements, GatherND, Scatter, ScatterElements, ScatterND,
// OneHot: memory unit, no FLOPs (a scatter with a reduction adds one op
// per update). Traffic counts the bytes touched, not whole tables: a Gather
// on a [V, d] embedding table with n indices reads n * d elements (exactly
// the output's size) plus the indices. The table still counts in full as
// the node's parameter (ParamCount/ParamBytes): it has to be stored
// somewhere, which is what the memory model and the ssd class need.
//
// Scatters are costed in place (read updates and indices, write the
// updated rows): ONNX's Scatter* are out-of-place, but runtimes reuse the
// data buffer when nothing else reads it, as the Ascend graph engine's
// ScatterNdUpdate / ScatterUpdate do by design (they update their ref
// input "var").
//
// Backward: a Gather's gradient is a scatter-add of dY into the table (one
// add per gathered element); a scatter's is a gather of dY for the updates.
// Both save the indices.
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

/// Gather, GatherElements, GatherND: (data, indices) -> gathered rows.
void costGather(const Node &N, int64_t, OpCost &C) {
  const Value *Data = N.getInput(0), *Indices = N.getInput(1);
  const Value *Out = N.getOutput(0);
  C.Unit = ComputeUnit::Memory;
  C.BytesRead = sizeInBytes(Out) + (Indices != Data ? sizeInBytes(Indices) : 0);
  C.BytesWritten = sizeInBytes(Out);
  C.BackwardFlops = needsGradient(Data) ? numElements(Out) : 0;
  saveValue(C, Indices);
}

/// Scatter (opset < 11), ScatterElements, ScatterND: (data, indices,
/// updates) -> data with the updates written at the indices.
void costScatter(const Node &N, int64_t, OpCost &C) {
  const Value *Indices = N.getInput(1), *Updates = N.getInput(2);
  double Touched = sizeInBytes(Updates);
  bool Reduces = N.getAttrString("reduction", "none") != "none";
  C.Unit = ComputeUnit::Memory;
  // Read the updates and indices (and the rows they combine with when
  // reducing); write the rows.
  C.BytesRead = Touched + sizeInBytes(Indices) + (Reduces ? Touched : 0);
  C.BytesWritten = Touched;
  C.Flops = Reduces ? numElements(Updates) : 0;
  C.BackwardFlops = 0;
  saveValue(C, Indices);
}

/// OneHot(indices, depth, values): reads the indices, writes the output.
/// Index work: Elem is the indices' type, and there is no gradient worth
/// having (values is a 2-element tensor).
void costOneHot(const Node &N, int64_t, OpCost &C) {
  C.Unit = ComputeUnit::Memory;
  C.BytesRead = sizeInBytes(N.getInput(0));
  if (const Value *I = N.getInput(0))
    C.Elem = I->Type.Elem;
}

} // namespace

void addIndexingRules(RuleTable &T) {
  T["Gather"] = {costGather};
  T["GatherElements"] = {costGather};
  T["GatherND"] = {costGather};
  T["Scatter"] = {costScatter};
  T["ScatterElements"] = {costScatter};
  T["ScatterND"] = {costScatter};
  T["OneHot"] = {costOneHot};
}

} // namespace opcost
} // namespace loom
