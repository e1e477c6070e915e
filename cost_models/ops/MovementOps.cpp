//===- MovementOps.cpp - Cost rules for data movement and views -----------===//
//
// Views are free: Reshape, Flatten, Squeeze, Unsqueeze and Identity keep
// the bytes where they are (row-major data needs no copy), so they have no
// kernel, no traffic and unit None; so does a Transpose that moves only
// dims of size 1. Everything else here moves bytes on the
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

/// A Transpose that moves only dims of size 1 keeps every other dim in
/// its order, so the row-major bytes are already the result's: a view
/// (PyTorch's transpose of a unit dim is one; XLA's algebraic simplifier
/// turns such a transpose into a bitcast). Any other is a move.
void costTranspose(const Node &N, int64_t Batch, OpCost &C) {
  const Value *X = N.getInput(0);
  Optional<std::vector<int64_t>> Perm = N.getAttrInts("perm");
  if (X && X->Type.HasShape && Perm && Perm->size() == X->Type.getRank()) {
    int64_t Last = -1;
    bool Ordered = true;
    for (int64_t P : *Perm) {
      if (P < 0 || P >= (int64_t)X->Type.getRank()) {
        Ordered = false;
        break;
      }
      const Dim &D = X->Type.Dims[P];
      if (D.isStatic() && D.Size == 1)
        continue;
      Ordered &= P > Last;
      Last = P;
    }
    if (Ordered)
      return costView(N, Batch, C);
  }
  costMove(N, Batch, C);
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
  for (const char *Op : {"Concat", "Split", "Pad", "Trilu", "DepthToSpace",
                         "SpaceToDepth", "CenterCropPad", "Col2Im"})
    T[Op] = {costMove};
  T["Transpose"] = {costTranspose};
  T["Slice"] = {costSlice};
  T["Expand"] = {costBroadcastCopy};
  T["Tile"] = {costBroadcastCopy};
}

} // namespace opcost
} // namespace loom
