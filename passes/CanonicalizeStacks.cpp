//===- CanonicalizeStacks.cpp - A stacked weighted sum as an Add chain ----===//
//
// A mixture of experts whose experts all run on every token (the writing
// torch.onnx can trace without data-dependent shapes) combines them in one
// of two ways: a chain of Adds of each expert's output times its gate
// (`out = out + expert_e(x) * w[..., e]`), or a stack of the outputs
// weighted and summed along the stacking axis
// (`(torch.stack(outs, -1) * w.unsqueeze(-2)).sum(-1)`). They compute the
// same sum; find-experts reads the first (lib/Analysis/Experts.cpp). The
// canonical form is the chain:
//
//   ReduceSum(Mul(Concat(Unsqueeze(y_0, a), .., Unsqueeze(y_{E-1}, a);
//                        axis = a), G), axes = [a], keepdims = 0)
//     -> Add(..Add(Mul(y_0, g_0), Mul(y_1, g_1)).., Mul(y_{E-1}, g_{E-1}))
//
// with the Mul's operands in either order and E >= 2. g_e is G without the
// stacked axis: broadcasting aligns dims from the right, so the axis a of
// the rank-r stack is axis a' = a - (r - q) of the rank-q gate; g_e is
// `Gather(G, e, axis = a')` (a scalar index drops the axis) when G's dim
// a' is E, `Gather(G, 0, axis = a')` when it is 1, and G itself when G has
// no such axis (a' < 0). An a' other than G's last axis is moved last first
// (one Transpose that every Gather reads): the gates' leading dims are then
// the tokens', as the expert outputs' are, and ep gathers both along dim 0
// (`torch.stack(outs, 0) * w.permute(2, 0, 1).unsqueeze(-1)`, summed over
// dim 0). Each Mul(y_e, g_e) then has the reduction's
// shape, as every term of the sum does. The stack, its Unsqueezes and the
// weighting Mul must have no other reader (they become dead); anything
// else is left as written. The sum runs in the order of the stack, as a
// sequential ReduceSum does.
//
// The same sum written as an Einsum over the stack
// (`torch.einsum("btde,bte->btd", torch.stack(outs, -1), w)`) is first
// written as the ReduceSum above: `Einsum(S, W)` (either order), S a
// Concat read once, whose subscripts are distinct letters, the stack
// axis' letter c contracted (in W, not in the result), the result S's
// subscripts without c in S's order, and W's letters distinct and all
// S's, becomes `ReduceSum(Mul(S, W'), axes = [a], keepdims = 0)`, W'
// being W transposed into S's order of its letters and unsqueezed where S
// has letters W lacks (so it broadcasts as the Einsum multiplies). The
// next sweep then makes the chain. Ellipses and other equations stay.
//
// And as a product with the gates as a vector
// (`(torch.stack(outs, -1) @ w.unsqueeze(-1)).squeeze(-1)`): `MatMul(S,
// V)` with S the stack along its last axis and V's last dim 1, or
// `MatMul(V, S)` with S stacked along its second last axis and V's second
// last dim 1, contracts the stack: it becomes `Unsqueeze(ReduceSum(Mul(S,
// V^T), axes = [a]), a)`, V^T being V with its last two dims swapped,
// written as a Squeeze of its 1 and an Unsqueeze on the other side (views,
// where a Transpose would be a kernel). A `Squeeze` of an `Unsqueeze` along
// the same axes becomes an Identity of the Unsqueeze's input (exact: the
// pair moves no element), which the Identity bypass then drops: the
// product's Squeeze(-1) and the gates' unsqueeze(-1) go, and the writing
// is, node for node, the stacked weighted sum's.
//
//===----------------------------------------------------------------------===//
#include "CanonicalizeRewrites.h"

#include <algorithm>
#include <cctype>

using namespace llvm;

namespace loom {
namespace {

/// The single axis of \p N (a ReduceSum or Unsqueeze), given as input 1
/// (opset >= 13) or as the `axes` attribute, normalised against \p Rank.
Optional<int64_t> singleAxis(const Node &N, int64_t Rank) {
  Optional<std::vector<int64_t>> Axes;
  if (N.getNumInputs() > 1 && N.getInput(1))
    Axes = getConstantInts(N.getInput(1));
  else if (N.getNumInputs() == 1)
    Axes = N.getAttrInts("axes");
  if (!Axes || Axes->size() != 1)
    return None;
  int64_t A = Axes->front();
  if (A < 0)
    A += Rank;
  if (A < 0 || A >= Rank)
    return None;
  return A;
}

/// Inserts a one-output node of \p Op reading \p Inputs at \p Pos
/// (advancing it), its result of type \p Type.
Value *insertOne(Graph &G, unsigned &Pos, StringRef Op,
                 ArrayRef<Value *> Inputs, const TensorType &Type,
                 StringRef Base) {
  Expected<Node *> N =
      G.insertNode(Pos, Op, "", "", Inputs, {G.getFreshName(Base)});
  if (!N) {
    consumeError(N.takeError());
    return nullptr;
  }
  ++Pos;
  (*N)->getOutput(0)->Type = Type;
  return (*N)->getOutput(0);
}

/// Inserts `Transpose(X, Perm)` at \p Pos (advancing it).
Value *insertTranspose(Graph &G, unsigned &Pos, Value *X,
                       ArrayRef<int64_t> Perm, StringRef Base) {
  TensorType T = X->Type;
  for (size_t I = 0; I < Perm.size(); ++I)
    T.Dims[I] = X->Type.Dims[Perm[I]];
  Value *Y = insertOne(G, Pos, "Transpose", {X}, T, Base);
  if (!Y)
    return nullptr;
  Attribute P;
  P.Name = "perm";
  P.K = Attribute::Kind::Ints;
  P.Is.assign(Perm.begin(), Perm.end());
  const_cast<Node *>(Y->getDefiningNode())->addAttribute(std::move(P));
  return Y;
}

/// The operands and attributes of `Op(X, axes = Axes)` as opset \p Opset
/// writes it (axes an input from 13, an attribute before; a ReduceSum
/// with keepdims = 0), inserting the axes constant at \p Pos (advancing
/// it). False if that fails.
bool axesOperands(Graph &G, unsigned &Pos, int64_t Opset, StringRef Op,
                  Value *X, ArrayRef<int64_t> Axes, StringRef Base,
                  SmallVectorImpl<Value *> &Ins,
                  std::vector<Attribute> &Attrs) {
  Ins.assign({X});
  Attrs.clear();
  if (Op == "ReduceSum") {
    Attribute Keep;
    Keep.Name = "keepdims";
    Keep.K = Attribute::Kind::Int;
    Keep.I = 0;
    Attrs.push_back(std::move(Keep));
  }
  if (Opset < 13) {
    Attribute Ax;
    Ax.Name = "axes";
    Ax.K = Attribute::Kind::Ints;
    Ax.Is.assign(Axes.begin(), Axes.end());
    Attrs.push_back(std::move(Ax));
    return true;
  }
  SmallVector<int64_t, 4> Shape = {(int64_t)Axes.size()};
  Value *K = insertConstant(G, Pos, "", G.getFreshName((Base + "_axes").str()),
                            Tensor::makeInt64(Shape, Axes));
  if (!K)
    return false;
  Ins.push_back(K);
  return true;
}

/// Inserts `Op(X, axes = Axes)` (axesOperands) of result type \p Type at
/// \p Pos (advancing it).
Value *insertAxesOp(Graph &G, unsigned &Pos, int64_t Opset, StringRef Op,
                    Value *X, ArrayRef<int64_t> Axes, const TensorType &Type,
                    StringRef Base) {
  SmallVector<Value *, 2> Ins;
  std::vector<Attribute> Attrs;
  if (!axesOperands(G, Pos, Opset, Op, X, Axes, Base, Ins, Attrs))
    return nullptr;
  Value *Y = insertOne(G, Pos, Op, Ins, Type, Base);
  if (Y)
    const_cast<Node *>(Y->getDefiningNode())->setAttributes(std::move(Attrs));
  return Y;
}

/// Makes \p N (at or after \p Pos) `Op(X, axes = Axes)`, keeping its
/// result.
bool becomeAxesOp(Graph &G, unsigned &Pos, int64_t Opset, Node &N, StringRef Op,
                  Value *X, ArrayRef<int64_t> Axes, StringRef Base) {
  SmallVector<Value *, 2> Ins;
  std::vector<Attribute> Attrs;
  if (!axesOperands(G, Pos, Opset, Op, X, Axes, Base, Ins, Attrs))
    return false;
  N.setOpType(Op);
  N.setAttributes(std::move(Attrs));
  N.setInputs(Ins);
  return true;
}

/// What the Concat \p C stacks along its axis \p Axis (of its rank): the
/// inputs of the Unsqueezes along that axis it reads, each read once,
/// when every input is one; else empty (a Concat of features, not a stack).
std::vector<Value *> getStackedPieces(const CanonContext &Ctx, const Node &C,
                                      int64_t Axis) {
  std::vector<Value *> Ys;
  const Value *S = C.getOutput(0);
  if (!S || !S->Type.HasShape || C.getNumInputs() < 2)
    return Ys;
  for (Value *U : C.getInputs()) {
    const Node *UN = U ? U->getDefiningNode() : nullptr;
    if (!UN || UN->getOpType() != "Unsqueeze" || !UN->getDomain().empty() ||
        !Ctx.hasOneUse(U) || !UN->getInput(0) ||
        singleAxis(*UN, S->Type.getRank()) != Axis)
      return {};
    Ys.push_back(UN->getInput(0));
  }
  return Ys;
}

/// The result of \p N when it reads two values and makes one of known
/// shape (the products that contract a stack), else null.
Value *getBinaryResult(const Node &N) {
  Value *Out = N.getNumOutputs() == 1 ? N.getOutput(0) : nullptr;
  if (!Out || !Out->Type.HasShape || N.getNumInputs() != 2 || !N.getInput(0) ||
      !N.getInput(1))
    return nullptr;
  return Out;
}

} // namespace

Value *insertConstant(Graph &G, unsigned &Pos, StringRef NodeName,
                      StringRef Name, Tensor T) {
  Expected<Node *> K =
      G.insertNode(Pos, "Constant", "", NodeName, {}, {Name.str()});
  if (!K) {
    consumeError(K.takeError());
    return nullptr;
  }
  ++Pos;
  (*K)->getOutput(0)->Type = T.Type;
  Attribute A;
  A.Name = "value";
  A.K = Attribute::Kind::Tensor;
  A.Ts.push_back(std::move(T));
  (*K)->addAttribute(std::move(A));
  return (*K)->getOutput(0);
}

bool rewriteStackedEinsum(CanonContext &Ctx, unsigned &Pos, unsigned &Stacks) {
  Graph &G = Ctx.G;
  Node &N = *G.getNodes()[Pos];
  Value *Out = getBinaryResult(N);
  if (!Out)
    return false;
  std::string Eq;
  for (char Ch : N.getAttrString("equation", ""))
    if (Ch != ' ')
      Eq.push_back(Ch);
  size_t Arrow = Eq.find("->"), Comma = Eq.find(',');
  if (Arrow == std::string::npos || Comma == std::string::npos ||
      Comma > Arrow || Eq.find('.') != std::string::npos)
    return false;
  std::string Terms[2] = {Eq.substr(0, Comma),
                          Eq.substr(Comma + 1, Arrow - Comma - 1)};
  std::string Res = Eq.substr(Arrow + 2);
  auto Distinct = [](StringRef T) {
    for (size_t I = 0; I < T.size(); ++I)
      if (!isalpha(T[I]) || T.find(T[I], I + 1) != StringRef::npos)
        return false;
    return true;
  };
  if (!Distinct(Terms[0]) || !Distinct(Terms[1]) || !Distinct(Res))
    return false;
  for (unsigned SI = 0; SI < 2; ++SI) {
    Value *S = N.getInput(SI), *W = N.getInput(1 - SI);
    StringRef Sub = Terms[SI], WSub = Terms[1 - SI];
    const Node *C = S->getDefiningNode();
    int64_t R = Sub.size();
    if (!C || C->getOpType() != "Concat" || !C->getDomain().empty() ||
        !Ctx.hasOneUse(S) || !S->Type.HasShape || S->Type.getRank() != R ||
        !W->Type.HasShape || W->Type.getRank() != (int64_t)WSub.size() ||
        W->Type.Elem != S->Type.Elem)
      continue;
    int64_t A = C->getAttrInt("axis", 0);
    if (A < 0)
      A += R;
    if (A < 0 || A >= R)
      continue;
    if (getStackedPieces(Ctx, *C, A).empty())
      continue;
    char Contracted = Sub[A];
    std::string Kept = Sub.str();
    Kept.erase(A, 1);
    if (Res != Kept || WSub.find(Contracted) == StringRef::npos ||
        any_of(WSub, [&](char Ch) { return Sub.find(Ch) == StringRef::npos; }))
      continue;
    // W's letters in S's order, then the axes S has and W lacks.
    std::vector<int64_t> Perm, Missing;
    for (int64_t K = 0; K < R; ++K) {
      size_t At = WSub.find(Sub[K]);
      if (At == StringRef::npos)
        Missing.push_back(K);
      else
        Perm.push_back(At);
    }
    std::string Base = Out->getName().str();
    Value *Aligned = W;
    if (!std::is_sorted(Perm.begin(), Perm.end())) {
      Aligned = insertTranspose(G, Pos, W, Perm, Base + "_gates");
      if (!Aligned)
        return false;
    }
    if (!Missing.empty()) {
      TensorType UT = Aligned->Type;
      for (int64_t K : Missing)
        UT.Dims.insert(UT.Dims.begin() + K, Dim(1));
      Aligned = insertAxesOp(G, Pos, Ctx.Opset, "Unsqueeze", Aligned, Missing,
                             UT, Base + "_gates");
      if (!Aligned)
        return false;
    }
    // The product broadcasts S against the aligned W.
    TensorType MT = S->Type;
    for (int64_t K = 0; K < R; ++K) {
      const Dim &D = Aligned->Type.Dims[K];
      if (MT.Dims[K].isStatic() && MT.Dims[K].Size == 1)
        MT.Dims[K] = D;
    }
    Value *M = insertOne(G, Pos, "Mul", {S, Aligned}, MT, Base + "_weighted");
    if (!M)
      return false;
    // The Einsum (now at Pos) becomes the sum over the stack.
    if (!becomeAxesOp(G, Pos, Ctx.Opset, *G.getNodes()[Pos], "ReduceSum", M,
                      {A}, Base + "_stack"))
      return false;
    ++Stacks;
    return true;
  }
  return false;
}

bool rewriteStackedMatMul(CanonContext &Ctx, unsigned &Pos, unsigned &Stacks) {
  Graph &G = Ctx.G;
  Node &N = *G.getNodes()[Pos];
  Value *Out = getBinaryResult(N);
  if (!Out)
    return false;
  for (unsigned SI = 0; SI < 2; ++SI) {
    Value *S = N.getInput(SI), *V = N.getInput(1 - SI);
    const Node *C = S->getDefiningNode();
    int64_t R = S->Type.getRank(), Q = V->Type.getRank();
    if (!C || C->getOpType() != "Concat" || !C->getDomain().empty() ||
        !Ctx.hasOneUse(S) || !S->Type.HasShape || !V->Type.HasShape || R < 2 ||
        Q < 2 || Q > R || V->Type.Elem != S->Type.Elem ||
        Out->Type.getRank() != R)
      continue;
    int64_t A = C->getAttrInt("axis", 0);
    if (A < 0)
      A += R;
    // The stack is what the product contracts (S's last axis on the left,
    // its second last on the right), and the other operand's free dim is 1.
    const Dim &Free = V->Type.Dims[SI == 0 ? Q - 1 : Q - 2];
    if (A != (SI == 0 ? R - 1 : R - 2) || !Free.isStatic() || Free.Size != 1 ||
        getStackedPieces(Ctx, *C, A).empty())
      continue;
    std::string Base = Out->getName().str();
    // V with its last two dims swapped; its free dim being 1, that is a
    // Squeeze of it and an Unsqueeze on the other side, which move no
    // element (a Transpose would be a kernel).
    int64_t FreeAxis = SI == 0 ? Q - 1 : Q - 2;
    TensorType ST = V->Type, GT = V->Type;
    ST.Dims.erase(ST.Dims.begin() + FreeAxis);
    std::swap(GT.Dims[Q - 1], GT.Dims[Q - 2]);
    Value *Squeezed = insertAxesOp(G, Pos, Ctx.Opset, "Squeeze", V, {FreeAxis},
                                   ST, Base + "_gates");
    Value *Gate =
        Squeezed ? insertAxesOp(G, Pos, Ctx.Opset, "Unsqueeze", Squeezed,
                                {SI == 0 ? Q - 2 : Q - 1}, GT, Base + "_gates")
                 : nullptr;
    if (!Gate)
      return false;
    TensorType MT = S->Type;
    for (int64_t J = 0; J < Q; ++J) {
      Dim &D = MT.Dims[R - Q + J];
      if (D.isStatic() && D.Size == 1)
        D = Gate->Type.Dims[J];
    }
    Value *M = insertOne(G, Pos, "Mul", {S, Gate}, MT, Base + "_weighted");
    if (!M)
      return false;
    TensorType RT = MT;
    RT.Dims.erase(RT.Dims.begin() + A);
    Value *Sum = insertAxesOp(G, Pos, Ctx.Opset, "ReduceSum", M, {A}, RT,
                              Base + "_stack");
    // The product (now at Pos) puts the summed axis back as its 1.
    if (!Sum || !becomeAxesOp(G, Pos, Ctx.Opset, *G.getNodes()[Pos],
                              "Unsqueeze", Sum, {A}, Base + "_stack_dim"))
      return false;
    ++Stacks;
    return true;
  }
  return false;
}

bool rewriteSqueezeOfUnsqueeze(CanonContext &Ctx, unsigned Pos,
                               unsigned &Pairs) {
  Node &N = *Ctx.G.getNodes()[Pos];
  Value *U = N.getNumInputs() >= 1 ? N.getInput(0) : nullptr;
  const Node *D = U ? U->getDefiningNode() : nullptr;
  if (!D || D->getOpType() != "Unsqueeze" || !D->getDomain().empty() ||
      !D->getInput(0) || !U->Type.HasShape || N.getNumOutputs() != 1)
    return false;
  // Both ops' axes, as input 1 or the attribute, normalised against the
  // unsqueezed rank.
  auto Axes = [&](const Node &X) -> Optional<std::vector<int64_t>> {
    Optional<std::vector<int64_t>> A;
    if (X.getNumInputs() > 1 && X.getInput(1))
      A = getConstantInts(X.getInput(1));
    else if (X.getNumInputs() == 1)
      A = X.getAttrInts("axes");
    if (!A || A->empty())
      return None;
    int64_t Rank = U->Type.getRank();
    for (int64_t &I : *A) {
      if (I < 0)
        I += Rank;
      if (I < 0 || I >= Rank)
        return None;
    }
    llvm::sort(*A);
    return A;
  };
  Optional<std::vector<int64_t>> In = Axes(*D), Out = Axes(N);
  if (!In || !Out || *In != *Out)
    return false;
  N.setOpType("Identity");
  N.setAttributes({});
  N.setInputs({D->getInput(0)});
  ++Pairs;
  return true;
}

bool rewriteStackedSum(CanonContext &Ctx, unsigned &Pos, unsigned &Stacks) {
  Graph &G = Ctx.G;
  Node &R = *G.getNodes()[Pos];
  Value *Out = R.getNumOutputs() == 1 ? R.getOutput(0) : nullptr;
  Value *P = R.getNumInputs() >= 1 ? R.getInput(0) : nullptr;
  if (!Out || !P || !Out->Type.HasShape || !P->Type.HasShape ||
      R.getAttrInt("keepdims", 1) != 0 || !Ctx.hasOneUse(P))
    return false;
  const Node *M = P->getDefiningNode();
  if (!M || M->getOpType() != "Mul" || !M->getDomain().empty() ||
      M->getNumInputs() != 2 || !M->getInput(0) || !M->getInput(1))
    return false;
  int64_t Rank = P->Type.getRank();
  Optional<int64_t> Axis = singleAxis(R, Rank);
  if (!Axis)
    return false;
  // Which Mul operand is the stack.
  for (unsigned SI = 0; SI < 2; ++SI) {
    Value *S = M->getInput(SI), *Gate = M->getInput(1 - SI);
    const Node *C = S->getDefiningNode();
    if (!C || C->getOpType() != "Concat" || !C->getDomain().empty() ||
        !Ctx.hasOneUse(S) || S->Type.getRank() != Rank ||
        C->getNumInputs() < 2 || !Gate->Type.HasShape ||
        Gate->Type.Elem != S->Type.Elem)
      continue;
    int64_t CA = C->getAttrInt("axis", 0);
    if (CA < 0)
      CA += Rank;
    if (CA != *Axis)
      continue;
    std::vector<Value *> Ys = getStackedPieces(Ctx, *C, *Axis);
    int64_t E = C->getNumInputs();
    if (Ys.empty())
      continue;
    // The gate's axis under broadcasting, and its per-expert slice.
    int64_t Q = Gate->Type.getRank(), GA = *Axis - (Rank - Q);
    TensorType SliceType = Gate->Type;
    bool Gather = GA >= 0;
    if (Gather) {
      const Dim &D = Gate->Type.Dims[GA];
      if (!D.isStatic() || (D.Size != E && D.Size != 1))
        continue;
      SliceType.Dims.erase(SliceType.Dims.begin() + GA);
    }
    std::string Base = Out->getName().str();
    if (Gather && GA + 1 != Q) {
      // The expert axis last (see the file comment).
      std::vector<int64_t> Perm;
      for (int64_t D = 0; D < Q; ++D)
        if (D != GA)
          Perm.push_back(D);
      Perm.push_back(GA);
      Gate = insertTranspose(G, Pos, Gate, Perm, Base + "_expert_gates");
      if (!Gate)
        return false;
      GA = Q - 1;
    }
    Value *Sum = nullptr;
    for (int64_t I = 0; I < E; ++I) {
      Value *GE = Gate;
      if (Gather) {
        int64_t Index = Gate->Type.Dims[GA].Size == 1 ? 0 : I;
        Value *K =
            insertConstant(G, Pos, "", G.getFreshName(Base + "_expert_index"),
                           Tensor::makeInt64({}, {Index}));
        if (!K)
          return false;
        GE = insertOne(G, Pos, "Gather", {Gate, K}, SliceType,
                       Base + "_expert_gate");
        if (!GE)
          return false;
        Attribute A;
        A.Name = "axis";
        A.K = Attribute::Kind::Int;
        A.I = GA;
        const_cast<Node *>(GE->getDefiningNode())->addAttribute(std::move(A));
      }
      Value *Term =
          insertOne(G, Pos, "Mul", {Ys[I], GE}, Out->Type, Base + "_expert");
      if (!Term)
        return false;
      if (!Sum) {
        Sum = Term;
        continue;
      }
      if (I + 1 < E) {
        Sum = insertOne(G, Pos, "Add", {Sum, Term}, Out->Type, Base + "_sum");
        if (!Sum)
          return false;
        continue;
      }
      // The reduction (now at Pos) becomes the chain's last Add, keeping
      // its result, name and readers.
      R.setOpType("Add");
      R.setAttributes({});
      R.setInputs({Sum, Term});
    }
    ++Stacks;
    return true;
  }
  return false;
}

} // namespace loom
