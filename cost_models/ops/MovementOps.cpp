//===- MovementOps.cpp - Cost rules for data movement and views -----------===//
//
// Views are free: Reshape, Flatten, Squeeze, Unsqueeze and Identity keep
// the bytes where they are (row-major data needs no copy), so they have no
// kernel, no traffic and unit None. Everything else here moves bytes on the
// memory unit without arithmetic: Transpose, Concat, Split, Slice, Expand,
// Tile, Pad, Trilu, DepthToSpace, SpaceToDepth; traffic = the bytes read
// plus the bytes written (Slice reads only the slice).
//
// Backward is the inverse movement of dY (Concat <-> Split, Slice <-> Pad,
// a Transpose by the inverse permutation): no FLOPs, except Expand and
// Tile, whose gradient sums dY over the copies (one add per output
// element). Nothing is saved: shapes suffice.
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

void costView(const Node &, int64_t, OpCost &C) {
  C.Unit = ComputeUnit::None;
  C.BytesRead = C.BytesWritten = 0;
}

void costMove(const Node &, int64_t, OpCost &C) {
  C.Unit = ComputeUnit::Memory;
}

/// Slice(data, starts, ends, axes, steps): reads the slice, not the whole
/// input (the index operands are a few int64s).
void costSlice(const Node &N, int64_t, OpCost &C) {
  C.Unit = ComputeUnit::Memory;
  C.BytesRead = sizeInBytes(N.getOutput(0));
}

/// Expand, Tile: read the input once, write every copy; backward sums the
/// copies of dY.
void costBroadcastCopy(const Node &N, int64_t, OpCost &C) {
  C.Unit = ComputeUnit::Memory;
  C.BackwardFlops =
      needsGradient(N.getInput(0)) ? numElements(N.getOutput(0)) : 0;
}

} // namespace

void addMovementRules(RuleTable &T) {
  for (const char *Op :
       {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    T[Op] = {costView};
  // CenterCropPad (18) is a Slice or a Pad per axis; Col2Im (18) adds the
  // overlapping blocks back into the image (one add per input element, the
  // inverse of an im2col copy): counted as movement, its adds hidden under
  // the scattered traffic.
  for (const char *Op :
       {"Transpose", "Concat", "Split", "Pad", "Trilu", "DepthToSpace",
        "SpaceToDepth", "CenterCropPad", "Col2Im"})
    T[Op] = {costMove};
  T["Slice"] = {costSlice};
  T["Expand"] = {costBroadcastCopy};
  T["Tile"] = {costBroadcastCopy};
}

} // namespace opcost
} // namespace loom
