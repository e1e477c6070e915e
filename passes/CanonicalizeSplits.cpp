//===- CanonicalizeSplits.cpp - Split and equal Slices as one form --------===//
//
// A value cut into n equal consecutive parts along an axis (a fused QKV
// projection, the halves of rotate-half) is written as one `Split` or as
// n `Slice`s; a Split gives its parts' sizes or leaves them equal by
// default. The canonical form is one Split without sizes (opset 18
// names the count, `num_outputs`, instead).
//
//  - n >= 2 Slices of the same value along one axis, with constant starts
//    and ends (negative ones counted from the end, clamped to the dim as
//    Slice does), step 1, whose ranges are [0, L), [L, 2L), ...,
//    [(n-1)L, D) with D = nL the axis' static size, and no other Slice of
//    that value along that axis, become one Split whose results are the
//    Slices' own values (names, types and readers kept). It is placed
//    where the first of them was: every reader of a part came after its
//    Slice.
//  - A Split given n equal constant sizes summing to the axis' size
//    loses them: the default split is the same.
//
//===----------------------------------------------------------------------===//
#include "CanonicalizeRewrites.h"

#include <algorithm>

using namespace llvm;

namespace loom {
namespace {

/// One Slice as a range [Begin, End) of one axis of its input.
struct Range {
  int64_t Axis = 0, Begin = 0, End = 0;
  Node *Slice = nullptr;
};

/// The constant integers given as input \p I or else attribute \p Name.
Optional<std::vector<int64_t>> sliceArg(const Node &N, unsigned I,
                                        StringRef Name) {
  if (N.getNumInputs() > I && N.getInput(I))
    return getConstantInts(N.getInput(I));
  if (N.getNumInputs() > 1) // Opset >= 10 gives them all as inputs.
    return None;
  return N.getAttrInts(Name);
}

/// \p N as a single-axis, step-1 range of a static axis, if it is one.
Optional<Range> getRange(Node &N) {
  const Value *X = N.getInput(0);
  if (N.getOpType() != "Slice" || !N.getDomain().empty() || !X ||
      N.getNumOutputs() != 1 || !N.getOutput(0) || !X->Type.HasShape)
    return None;
  auto Starts = sliceArg(N, 1, "starts"), Ends = sliceArg(N, 2, "ends");
  Optional<std::vector<int64_t>> Axes = std::vector<int64_t>{0};
  if ((N.getNumInputs() > 3 && N.getInput(3)) || N.getAttribute("axes"))
    Axes = sliceArg(N, 3, "axes");
  if (N.getNumInputs() > 4 && N.getInput(4)) {
    auto Steps = getConstantInts(N.getInput(4));
    if (!Steps || Steps->size() != 1 || Steps->front() != 1)
      return None;
  }
  if (!Starts || !Ends || !Axes || Starts->size() != 1 || Ends->size() != 1 ||
      Axes->size() != 1)
    return None;
  int64_t Rank = X->Type.getRank(), Axis = Axes->front();
  if (Axis < 0)
    Axis += Rank;
  if (Axis < 0 || Axis >= Rank || !X->Type.Dims[Axis].isStatic())
    return None;
  int64_t D = X->Type.Dims[Axis].Size;
  auto Clamp = [D](int64_t P) {
    if (P < 0)
      P += D;
    return std::min(std::max<int64_t>(P, 0), D);
  };
  Range R;
  R.Axis = Axis;
  R.Begin = Clamp(Starts->front());
  R.End = Clamp(Ends->front());
  R.Slice = &N;
  return R;
}

} // namespace

bool rewriteSliceGroup(CanonContext &Ctx, unsigned &Pos, unsigned &Splits) {
  Graph &G = Ctx.G;
  Node &First = *G.getNodes()[Pos];
  Optional<Range> R0 = getRange(First);
  if (!R0)
    return false;
  Value *X = First.getInput(0);
  std::vector<Range> Parts;
  for (const Node *U : Ctx.usersOf(X)) {
    if (U->getOpType() != "Slice" || U->getInput(0) != X || U->getGraph() != &G)
      continue;
    Optional<Range> R = getRange(const_cast<Node &>(*U));
    if (!R) {
      // A Slice along an axis we cannot read could be along ours.
      if (U->getNumOutputs() == 1 && U->getOutput(0))
        return false;
      continue;
    }
    if (R->Axis == R0->Axis)
      Parts.push_back(*R);
  }
  std::stable_sort(
      Parts.begin(), Parts.end(),
      [](const Range &A, const Range &B) { return A.Begin < B.Begin; });
  int64_t D = X->Type.Dims[R0->Axis].Size, N = Parts.size();
  if (N < 2 || D % N != 0)
    return false;
  int64_t L = D / N;
  for (int64_t I = 0; I < N; ++I)
    if (Parts[I].Begin != I * L || Parts[I].End != (I + 1) * L)
      return false;
  // Named as the first Slice was (unnamed stays unnamed, as the Split
  // of the other writing).
  Expected<Node *> S = G.insertNode(Pos, "Split", "", First.getName(), {X}, {});
  if (!S) {
    consumeError(S.takeError());
    return false;
  }
  ++Pos;
  Attribute Axis;
  Axis.Name = "axis";
  Axis.K = Attribute::Kind::Int;
  Axis.I = R0->Axis;
  (*S)->addAttribute(std::move(Axis));
  if (Ctx.Opset >= 18) {
    Attribute Num;
    Num.Name = "num_outputs";
    Num.K = Attribute::Kind::Int;
    Num.I = N;
    (*S)->addAttribute(std::move(Num));
  }
  for (int64_t I = 0; I < N; ++I)
    G.moveResult(Parts[I].Slice->getOutput(0), *S, I);
  ++Splits;
  return true;
}

bool rewriteSplitSizes(CanonContext &Ctx, unsigned Pos, unsigned &Splits) {
  Node &N = *Ctx.G.getNodes()[Pos];
  const Value *X = N.getInput(0);
  bool AsInput = Ctx.Opset >= 13;
  if (!X || !X->Type.HasShape || N.getNumOutputs() < 2)
    return false;
  Optional<std::vector<int64_t>> Sizes =
      AsInput ? (N.getNumInputs() > 1 && N.getInput(1)
                     ? getConstantInts(N.getInput(1))
                     : None)
              : N.getAttrInts("split");
  int64_t Rank = X->Type.getRank(), Axis = N.getAttrInt("axis", 0);
  if (Axis < 0)
    Axis += Rank;
  if (!Sizes || Axis < 0 || Axis >= Rank ||
      Sizes->size() != N.getNumOutputs() || !X->Type.Dims[Axis].isStatic())
    return false;
  int64_t D = X->Type.Dims[Axis].Size, Parts = Sizes->size();
  if (D % Parts != 0 ||
      any_of(*Sizes, [&](int64_t S) { return S != D / Parts; }))
    return false;
  std::vector<Attribute> Attrs;
  for (Attribute &A : N.takeAttributes())
    if (A.Name != "split")
      Attrs.push_back(std::move(A));
  if (Ctx.Opset >= 18) {
    Attribute Num;
    Num.Name = "num_outputs";
    Num.K = Attribute::Kind::Int;
    Num.I = Parts;
    Attrs.push_back(std::move(Num));
  }
  N.setAttributes(std::move(Attrs));
  if (AsInput)
    N.setInputs({N.getInput(0)});
  ++Splits;
  return true;
}

} // namespace loom
