//===- CanonicalizeMasks.cpp - Additive and Where masks as one form -------===//
//
// A mask on attention scores is written two ways: added (`scores + M`,
// M holding 0 where a score is kept and -inf, -1e9, -1e4 or the type's
// lowest value where it is masked: torch.triu(full(-inf), 1), HF's
// extended attention mask) or selected (`Where(cond, scores, fill)`,
// torch's masked_fill as `Where(cond, fill, scores)`). The canonical form
// is the added one: `Add(scores, M)` with M a constant, which the causal
// mask detection of detect-fused-kernels reads entry by entry.
//
// `Where(c, x, fill)` (or `Where(c, fill, x)`) with c a constant, fill a
// one-element constant <= -1e4 and x not a constant becomes `Add(x, M)`,
// M[i] = 0 where x is kept, fill where the fill is selected. This is exact
// where x + fill == fill: fill = -inf, or the type's lowest value (the sum
// rounds back to it for any score below 1e31). A finite fill above the
// lowest (-1e9, -1e4) changes the masked scores from `fill` to
// `x + fill`: the rewrite is made only when every reader is a Softmax
// over the last axis, where both give exp(. - max) = 0 in every float
// type (the same bound, -1e4, that detect-fused-kernels takes as masked).
// A condition that is not a constant (a padding mask computed from the
// inputs) stays a Where.
//
//===----------------------------------------------------------------------===//
#include "CanonicalizeRewrites.h"

#include "loom/Support/DataType.h"

#include <cmath>
#include <limits>

using namespace llvm;

namespace loom {
namespace {

/// Whether a masked entry reading x + Fill instead of Fill computes the
/// same for every reader of \p Out.
bool fillIsAbsorbed(CanonContext &Ctx, const Value *Out, double Fill,
                    DataType Elem) {
  if (std::isinf(Fill))
    return true;
  double Lowest =
      Elem == DataType::Float16  ? -65504.0
      : Elem == DataType::Float  ? double(std::numeric_limits<float>::lowest())
      : Elem == DataType::Double ? std::numeric_limits<double>::lowest()
      : Elem == DataType::BFloat16 ? -3.3895313892515355e38
                                   : 0;
  if (Lowest != 0 && Fill == Lowest)
    return true;
  ArrayRef<const Node *> Users = Ctx.usersOf(Out);
  unsigned Rank = Out->Type.getRank();
  return !Users.empty() && Ctx.canBypass(Out) &&
         all_of(Users, [&](const Node *U) {
           int64_t Axis = U->getAttrInt("axis", -1);
           return U->getOpType() == "Softmax" && U->getDomain().empty() &&
                  Rank && (Axis == -1 || Axis == (int64_t)Rank - 1);
         });
}

/// The additive mask, stored as the condition was: an initializer when
/// the condition was one (the additive writing stores its float mask
/// there too), else a Constant node placed before \p Pos (advanced past
/// it). Null if that fails.
Value *makeMask(Graph &G, const Node &Where, unsigned &Pos, const Value &C,
                Tensor T) {
  const Value *Out = Where.getOutput(0);
  std::string Name = G.getFreshName((Out->getName() + "_mask").str());
  if (C.isParameter()) {
    Expected<Value *> P = G.addParameter(Name, T.Type, T.Data);
    if (!P) {
      consumeError(P.takeError());
      return nullptr;
    }
    return *P;
  }
  std::string NodeName =
      Where.getName().empty() ? "" : (Where.getName() + "_mask").str();
  return insertConstant(G, Pos, NodeName, Name, std::move(T));
}

} // namespace

bool rewriteWhereMask(CanonContext &Ctx, unsigned &Pos, unsigned &Masks) {
  Graph &G = Ctx.G;
  Node &N = *G.getNodes()[Pos];
  Value *Out = N.getNumOutputs() == 1 ? N.getOutput(0) : nullptr;
  if (!Out || N.getNumInputs() != 3 || !Out->Type.isStatic())
    return false;
  Value *C = N.getInput(0);
  if (!C || !isConstantLike(C) || !C->Type.isStatic())
    return false;
  // Which operand is the fill: the one-element constant of the two.
  unsigned FillIdx = 0;
  for (unsigned I : {1u, 2u}) {
    const Value *V = N.getInput(I);
    auto Elems = V ? V->Type.getNumElements() : None;
    if (V && isConstantLike(V) && Elems && *Elems == 1)
      FillIdx = FillIdx ? 3 : I;
  }
  if (FillIdx != 1 && FillIdx != 2)
    return false;
  Value *X = N.getInput(3 - FillIdx), *F = N.getInput(FillIdx);
  if (!X || isConstantLike(X) || !isFloatingPoint(X->Type.Elem) ||
      F->Type.getRank() > C->Type.getRank())
    return false;
  Optional<std::vector<double>> Fill = getConstantFloats(F);
  Optional<std::vector<int64_t>> Cond = getConstantInts(C);
  auto CondElems = C->Type.getNumElements();
  if (!Fill || Fill->size() != 1 || Fill->front() > MaskedBelow || !Cond ||
      !CondElems || (int64_t)Cond->size() != *CondElems ||
      !fillIsAbsorbed(Ctx, Out, Fill->front(), X->Type.Elem))
    return false;
  // x is selected where the condition is true when x is the second input.
  bool KeptWhenTrue = FillIdx == 2;
  // Wheres reading one condition share one mask (one parameter, counted
  // once in memory, as the additive writing's shared mask).
  auto Key = std::make_tuple(static_cast<const Value *>(C), Fill->front(),
                             KeptWhenTrue, unsigned(X->Type.Elem));
  Value *&Mask = Ctx.Masks[Key];
  if (!Mask) {
    std::vector<double> M;
    M.reserve(Cond->size());
    for (int64_t B : *Cond)
      M.push_back((B != 0) == KeptWhenTrue ? 0.0 : Fill->front());
    SmallVector<int64_t, 4> Shape = C->Type.getStaticShape();
    Tensor T = Tensor::makeFromDoubles(X->Type.Elem, Shape, M);
    Mask = makeMask(G, N, Pos, *C, std::move(T));
  }
  if (!Mask)
    return false;
  Node &Add = *G.getNodes()[Pos];
  Add.setOpType("Add");
  Add.setInputs({X, Mask});
  ++Masks;
  return true;
}

} // namespace loom
