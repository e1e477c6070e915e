//===- FusedKernelPatterns.cpp - Fused element-wise regions, causal masks -===//
//
// Writings recognised (each tested in test/lit/passes/fused-elementwise*):
//
// RMSNorm, anchored at the ReduceMean of a square:
//   [Cast] x' = x;  Pow(x', 2) | Mul(x', x');  ReduceMean(last axis,
//   keepdims);  Add(eps);  then Sqrt + Div(x', .)  (hand-written, Apex
//   style), Sqrt + Div(1, .) + Mul(x', .)  (HF LlamaRMSNorm's rsqrt as
//   torch exports it), Sqrt + Reciprocal + Mul, or Pow(., -0.5) + Mul;
//   [Cast]; [Mul by a weight of the last axis' size]; [Cast].
// LayerNorm: the same over x' = Sub(x, ReduceMean(x)), with an optional
//   bias Add after the weight (a LayerNormalization op is already one
//   kernel and needs no pattern).
// SwiGLU: Mul(g, Sigmoid(g)) in either operand order (torch exports
//   F.silu so), then Mul by a second activation `up` of the same shape
//   (Megatron's chunked gate/up and HF's two projections alike). A SiLU
//   without the gating product, or a Sigmoid of another value (GLU), is
//   not SwiGLU.
// GELU (bias-GELU, Megatron's jit-fused bias_gelu): x times a function of
//   Erf or Tanh of a polynomial in x, whatever the spelling -- the exact
//   x * 0.5 * (1 + erf(x / sqrt 2)) with Div or Mul by 1/sqrt 2 and the
//   0.5 on either side, the tanh approximation x * 0.5 * (1 + tanh(
//   0.79788456 (x + 0.044715 x^3))) with Pow(x, 3) or x * x * x, and opset
//   20's Gelu op -- taken from the Erf/Tanh: its argument is built from one
//   activation x by Add, Sub, Mul, Div, Pow and Cast with scalar constants
//   (or x again); after it, a chain of the same ops adds 1 and multiplies
//   by x (or x scaled by a constant). With a bias Add (a weight of the last
//   axis' size) producing x and read only by the GELU, the bias is fused
//   too. Erf or Tanh used otherwise (Mish's tanh of softplus, a plain Tanh
//   activation) is not GELU.
// Rotary (rotate-half, GPT-NeoX/HF LLaMA): the halves of x's last axis by
//   two Slices or one Split; Concat(Neg(second), first); Mul by sin; Add
//   to Mul(x, cos). The interleaved (GPT-J) writing is not recognised.
//
// Causal masks (getCausalOffset): a constant whose entries keep exactly
// j <= i + d; Trilu over a uniform fill (ConstantOfShape or a constant)
// as torch.triu(full(-inf), 1) or tril(ones) write it; through Where(c,
// -inf, 0) / Where(c, 0, -inf), Not, Cast (within float or within bool),
// Unsqueeze, Squeeze, Reshape and Expand that keep the last two axes, and
// Slices from the top-left corner. Built from positions, as Megatron and
// HF build the mask at run time for long sequences: a comparison (Less,
// LessOrEqual, Greater, GreaterOrEqual) of a row index [.., S, 1] with a
// column index [.., 1, S] (each a Range or a constant counting up by one,
// through Unsqueeze / Reshape / integer Cast / Add of a scalar), used in
// a Where, or Cast to float and scaled by a large negative scalar (Mul)
// to add; a Where's fill may be a uniform tensor (HF's masked_fill of a
// full(-inf) matrix).
//
//===----------------------------------------------------------------------===//
#include "FusedKernelPatterns.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>

using namespace llvm;

namespace loom {
namespace {

/// Below this an additive mask entry is taken as "masked": exp(-1e4)
/// underflows in every float type.
// -1e4 as bf16 stores it (-9984: 8 bits of mantissa), so a mask written
// with -1e4 in fp16 and read under a bf16 recipe (passes/ApplyPrecision.cpp)
// is still a mask.
constexpr double MaskedBelow = -9984;

bool isActivation(const Value *V) {
  return V && !isConstantLike(V) && !isWeightLike(V);
}

Optional<double> scalarConstant(const Value *V) {
  if (!V || !isConstantLike(V))
    return None;
  auto N = V->Type.getNumElements();
  if (!N || *N != 1)
    return None;
  if (auto F = getConstantFloats(V))
    if (F->size() == 1)
      return (*F)[0];
  if (auto I = getConstantInts(V))
    if (I->size() == 1)
      return (double)(*I)[0];
  return None;
}

/// The last axis of a rank-\p Rank tensor named by \p Axis (negative
/// counts from the end).
bool isLastAxis(int64_t Axis, unsigned Rank) {
  return Rank && (Axis == -1 || Axis == (int64_t)Rank - 1);
}

class ElementwiseMatcher {
public:
  ElementwiseMatcher(const Graph &G, int64_t Opset,
                     DenseSet<const Node *> &Taken)
      : G(G), Opset(Opset), Taken(Taken), Users(buildUseMap(G)) {
    for (const Value *V : G.getOutputs())
      GraphOutputs.insert(V);
    unsigned I = 0;
    for (const auto &NP : G.getNodes())
      Order[NP.get()] = I++;
  }

  std::vector<ElementwiseRegion> run(ArrayRef<std::string> Kernels) {
    bool Norm = is_contained(Kernels, "rmsnorm"),
         LN = is_contained(Kernels, "layernorm"),
         Swi = is_contained(Kernels, "swiglu"),
         Gel = is_contained(Kernels, "gelu"),
         Rot = is_contained(Kernels, "rotary");
    std::vector<ElementwiseRegion> Out;
    for (const auto &NP : G.getNodes()) {
      const Node &N = *NP;
      if (N.getDomain() != "" || Taken.count(&N))
        continue;
      StringRef Op = N.getOpType();
      ElementwiseRegion R;
      bool Found = false;
      if (Op == "ReduceMean" && (Norm || LN))
        Found = matchNorm(N, R) && (R.Kernel == "rmsnorm" ? Norm : LN);
      else if (Op == "Sigmoid" && Swi)
        Found = matchSwiGLU(N, R);
      else if ((Op == "Erf" || Op == "Tanh" || Op == "Gelu") && Gel)
        Found = matchGelu(N, R);
      else if (Op == "Neg" && Rot)
        Found = matchRotary(N, R);
      else if ((Op == "RMSNormalization" && Norm) ||
               (Op == "RotaryEmbedding" && Rot))
        Found = matchStandardOp(N, R);
      if (!Found || !finish(R))
        continue;
      for (const Node *M : R.Members)
        Taken.insert(M);
      Out.push_back(std::move(R));
    }
    return Out;
  }

private:
  const Graph &G;
  int64_t Opset;
  DenseSet<const Node *> &Taken;
  UseMap Users;
  DenseSet<const Value *> GraphOutputs;
  DenseMap<const Node *, unsigned> Order;

  const Node *def(const Value *V, StringRef Op) const {
    const Node *D = V ? V->getDefiningNode() : nullptr;
    if (!D || D->getDomain() != "" || D->getOpType() != Op || Taken.count(D))
      return nullptr;
    return D;
  }

  /// The one node reading \p V (no graph output), of type \p Op.
  const Node *onlyUser(const Value *V, StringRef Op) const {
    if (!V || GraphOutputs.count(V))
      return nullptr;
    auto It = Users.find(V);
    if (It == Users.end() || It->second.size() != 1)
      return nullptr;
    const Node *U = It->second.front();
    if (U->getDomain() != "" || U->getOpType() != Op || Taken.count(U))
      return nullptr;
    return U;
  }

  /// The operand of binary \p N other than \p V, or null.
  static const Value *other(const Node *N, const Value *V) {
    if (!N || N->getNumInputs() != 2)
      return nullptr;
    if (N->getInput(0) == V)
      return N->getInput(1);
    if (N->getInput(1) == V)
      return N->getInput(0);
    return nullptr;
  }

  /// ReduceMean over the last axis with keepdims.
  bool isLastAxisMean(const Node &RM) const {
    const Value *In = RM.getInput(0);
    if (!In || !In->Type.HasShape || !RM.getAttrInt("keepdims", 1))
      return false;
    Optional<std::vector<int64_t>> Axes;
    if (Opset >= 18 && RM.getNumInputs() > 1)
      Axes = getConstantInts(RM.getInput(1));
    else
      Axes = RM.getAttrInts("axes");
    return Axes && Axes->size() == 1 &&
           isLastAxis((*Axes)[0], In->Type.getRank());
  }

  /// The value a weight-like operand of the last axis' size scales, or
  /// null.
  static bool isNormWeight(const Value *W, const Value *Of) {
    if (!W || !isWeightLike(W) || !Of->Type.HasShape || !Of->Type.getRank())
      return false;
    auto N = W->Type.getNumElements();
    int64_t Last = Of->Type.Dims.back().Size;
    return N && Last > 0 && *N == Last;
  }

  bool matchNorm(const Node &RM, ElementwiseRegion &R) {
    if (!isLastAxisMean(RM))
      return false;
    const Value *Sq = RM.getInput(0), *Xp = nullptr;
    const Node *SqN = nullptr;
    if ((SqN = def(Sq, "Pow"))) {
      Optional<double> E = scalarConstant(SqN->getInput(1));
      if (!E || *E != 2)
        return false;
      Xp = SqN->getInput(0);
    } else if ((SqN = def(Sq, "Mul"))) {
      if (SqN->getInput(0) != SqN->getInput(1))
        return false;
      Xp = SqN->getInput(0);
    } else {
      return false;
    }
    if (!isActivation(Xp))
      return false;
    std::vector<const Node *> M = {SqN, &RM};
    // Add eps.
    const Node *AddN = onlyUser(RM.getOutput(0), "Add");
    if (!AddN)
      return false;
    Optional<double> Eps = scalarConstant(other(AddN, RM.getOutput(0)));
    if (!Eps || *Eps < 0)
      return false;
    M.push_back(AddN);
    const Value *A = AddN->getOutput(0), *Y = nullptr;
    // 1 / sqrt.
    auto MulByXp = [&](const Value *Rs) -> const Value * {
      const Node *MulN = onlyUser(Rs, "Mul");
      if (!MulN || other(MulN, Rs) != Xp)
        return nullptr;
      M.push_back(MulN);
      return MulN->getOutput(0);
    };
    if (const Node *SqrtN = onlyUser(A, "Sqrt")) {
      M.push_back(SqrtN);
      const Value *S = SqrtN->getOutput(0);
      if (const Node *DivN = onlyUser(S, "Div")) {
        if (DivN->getInput(1) != S)
          return false;
        M.push_back(DivN);
        if (DivN->getInput(0) == Xp) {
          Y = DivN->getOutput(0);
        } else {
          Optional<double> One = scalarConstant(DivN->getInput(0));
          if (!One || *One != 1)
            return false;
          Y = MulByXp(DivN->getOutput(0));
        }
      } else if (const Node *RecN = onlyUser(S, "Reciprocal")) {
        M.push_back(RecN);
        Y = MulByXp(RecN->getOutput(0));
      }
    } else if (const Node *PowN = onlyUser(A, "Pow")) {
      Optional<double> E = scalarConstant(PowN->getInput(1));
      if (PowN->getInput(0) != A || !E || *E != -0.5)
        return false;
      M.push_back(PowN);
      Y = MulByXp(PowN->getOutput(0));
    }
    if (!Y)
      return false;
    // LayerNorm: x' = x - mean(x).
    R.Kernel = "rmsnorm";
    const Value *X = Xp;
    if (const Node *SubN = def(Xp, "Sub")) {
      const Node *MeanN = def(SubN->getInput(1), "ReduceMean");
      if (MeanN && MeanN->getInput(0) == SubN->getInput(0) &&
          isLastAxisMean(*MeanN) && isActivation(SubN->getInput(0))) {
        R.Kernel = "layernorm";
        X = SubN->getInput(0);
        M.push_back(MeanN);
        M.push_back(SubN);
      }
    }
    // The Cast into f32 is the kernel's own when nothing else reads its
    // output (torch may hand the cast value on to the residual).
    auto ReadInside = [&](const Value *V) {
      auto It = Users.find(V);
      return !GraphOutputs.count(V) && It != Users.end() &&
             all_of(It->second,
                    [&](const Node *U) { return is_contained(M, U); });
    };
    if (R.Kernel == "rmsnorm" && ReadInside(Xp))
      if (const Node *CastN = def(Xp, "Cast"))
        if (isActivation(CastN->getInput(0))) {
          X = CastN->getInput(0);
          M.push_back(CastN);
        }
    R.Inputs.push_back(X);
    R.Saved.push_back(X);
    // [Cast] [Mul weight] [Add bias] [Cast].
    auto Step = [&](StringRef Op, bool Weight) {
      const Node *U = onlyUser(Y, Op);
      if (!U)
        return false;
      if (Weight) {
        const Value *W = other(U, Y);
        if (!isNormWeight(W, Y))
          return false;
        R.Inputs.push_back(W);
      } else if (U->getInput(0) != Y) {
        return false;
      }
      M.push_back(U);
      Y = U->getOutput(0);
      return true;
    };
    Step("Cast", false);
    bool Scaled = Step("Mul", true);
    if (Scaled && R.Kernel == "layernorm")
      Step("Add", true);
    Step("Cast", false);
    R.Out = Y;
    R.Members = std::move(M);
    return true;
  }

  bool matchSwiGLU(const Node &S, ElementwiseRegion &R) {
    const Value *Gt = S.getInput(0), *Sg = S.getOutput(0);
    if (!isActivation(Gt))
      return false;
    const Node *M1 = onlyUser(Sg, "Mul");
    if (!M1 || other(M1, Sg) != Gt)
      return false;
    const Value *Act = M1->getOutput(0);
    const Node *M2 = onlyUser(Act, "Mul");
    if (!M2)
      return false;
    const Value *Up = other(M2, Act);
    if (!isActivation(Up) || Up == Gt || Up == Act || !Up->Type.isStatic() ||
        Up->Type != Act->Type)
      return false;
    R.Kernel = "swiglu";
    R.Inputs = {Gt, Up};
    R.Saved = {Gt, Up};
    R.Out = M2->getOutput(0);
    R.Members = {&S, M1, M2};
    // A fused gate-up projection cut in two by a Split over the last axis
    // (Megatron-Core's linear_fc1 and chunk, a view): the kernel reads and
    // saves the projection whole, as bias_swiglu does; no copy.
    const Node *Sp = def(Gt, "Split");
    const Value *GU = Sp ? Sp->getInput(0) : nullptr;
    auto ReadOnlyBy = [&](const Value *V, ArrayRef<const Node *> Ns) {
      auto It = Users.find(V);
      return It != Users.end() && !GraphOutputs.count(V) &&
             all_of(It->second,
                    [&](const Node *U) { return is_contained(Ns, U); });
    };
    if (Sp && Sp->getNumOutputs() == 2 && Up->getDefiningNode() == Sp &&
        isActivation(GU) && GU->Type.HasShape &&
        isLastAxis(Sp->getAttrInt("axis", 0), GU->Type.getRank()) &&
        ReadOnlyBy(Gt, {&S, M1}) && ReadOnlyBy(Up, {M2})) {
      R.Inputs = {GU};
      R.Saved = {GU};
      R.Members.insert(R.Members.begin(), Sp);
    }
    return true;
  }

  /// The element-wise steps a GELU's polynomial and its x * (1 + .) are
  /// written with.
  static bool isPolyStep(const Node *D) {
    if (!D || D->getDomain() != "" || D->getNumOutputs() != 1)
      return false;
    StringRef Op = D->getOpType();
    return Op == "Add" || Op == "Sub" || Op == "Mul" || Op == "Div" ||
           Op == "Pow" || Op == "Cast";
  }

  /// Whether every input of \p D is a scalar constant or in \p Of, and at
  /// least one is in \p Of.
  static bool readsOnly(const Node *D, const DenseSet<const Value *> &Of) {
    bool Any = false;
    for (const Value *V : D->getInputs()) {
      if (V && Of.count(V))
        Any = true;
      else if (!V || !scalarConstant(V))
        return false;
    }
    return Any;
  }

  bool matchGelu(const Node &A, ElementwiseRegion &R) {
    const Value *X = A.getInput(0);
    std::vector<const Node *> M = {&A};
    bool Times = false, PlusOne = false;
    if (A.getOpType() == "Gelu") {
      Times = PlusOne = true;
    } else {
      // Up: the argument's steps back to the one activation x they read.
      SmallVector<const Value *, 8> Work = {X};
      DenseSet<const Value *> Leaves;
      while (!Work.empty() && M.size() < 16) {
        const Value *V = Work.pop_back_val();
        const Node *D = V ? V->getDefiningNode() : nullptr;
        bool Step = isPolyStep(D) && !Taken.count(D) &&
                    all_of(D->getInputs(), [](const Value *In) {
                      return In && (scalarConstant(In) || isActivation(In));
                    });
        if (!Step) {
          Leaves.insert(V);
          continue;
        }
        if (!is_contained(M, D))
          M.push_back(D);
        for (const Value *In : D->getInputs())
          if (!scalarConstant(In))
            Work.push_back(In);
      }
      if (!Work.empty() || Leaves.size() != 1 || !isActivation(*Leaves.begin()))
        return false;
      X = *Leaves.begin();
    }
    // Down: 1 + ., times x (or a scaled x), scaled, cast.
    DenseSet<const Value *> FromX = {X};
    const Value *Cur = A.getOutput(0);
    DenseSet<const Value *> Known = {Cur};
    for (const Node *D : M)
      Known.insert(D->getOutput(0));
    while (A.getOpType() != "Gelu") {
      auto It = Users.find(Cur);
      if (GraphOutputs.count(Cur) || It == Users.end() ||
          It->second.size() != 1)
        break;
      const Node *U = It->second.front();
      if (!isPolyStep(U) || Taken.count(U))
        break;
      const Value *O = U->getNumInputs() == 2 ? other(U, Cur) : nullptr;
      if (O && !scalarConstant(O) && !FromX.count(O)) {
        // x scaled on the side (Mul(x, 0.5)) before the product.
        const Node *Side = O->getDefiningNode();
        if (!isPolyStep(Side) || Taken.count(Side) || !readsOnly(Side, FromX))
          break;
        M.push_back(Side);
        FromX.insert(O);
      }
      if (U->getOpType() == "Add" && O && scalarConstant(O))
        PlusOne |= *scalarConstant(O) == 1;
      if (U->getOpType() == "Mul" && O && FromX.count(O))
        Times = true;
      M.push_back(U);
      Cur = U->getOutput(0);
    }
    if (!Times || !PlusOne || !Cur->Type.HasShape || Cur->Type != X->Type)
      return false;
    R.Kernel = "gelu";
    R.Out = A.getOpType() == "Gelu" ? A.getOutput(0) : Cur;
    R.Inputs = {X};
    R.Saved = {X};
    // Bias-GELU: the bias Add before it, when only the GELU reads its sum.
    const Node *B = def(X, "Add");
    const Value *Bias = B ? (isNormWeight(B->getInput(1), X)   ? B->getInput(1)
                             : isNormWeight(B->getInput(0), X) ? B->getInput(0)
                                                               : nullptr)
                          : nullptr;
    const Value *Y = Bias ? other(B, Bias) : nullptr;
    auto XUsers = Users.find(X);
    if (Y && isActivation(Y) && Y->Type == X->Type && !GraphOutputs.count(X) &&
        XUsers != Users.end() && all_of(XUsers->second, [&](const Node *U) {
          return is_contained(M, U);
        })) {
      M.push_back(B);
      R.Inputs = {Y, Bias};
      R.Saved = {Y};
    }
    R.Members = std::move(M);
    return true;
  }

  /// [Start, End) of a Slice over the last axis of its input, step 1.
  Optional<std::pair<int64_t, int64_t>> lastAxisSlice(const Node *Sl) const {
    const Value *X = Sl->getInput(0);
    if (!X || !X->Type.isStatic() || !X->Type.getRank())
      return None;
    unsigned Rank = X->Type.getRank();
    int64_t D = X->Type.Dims.back().Size;
    Optional<std::vector<int64_t>> Starts, Ends, Axes, Steps;
    if (Opset >= 10) {
      Starts = getConstantInts(Sl->getInput(1));
      Ends = getConstantInts(Sl->getInput(2));
      if (Sl->getInput(3))
        Axes = getConstantInts(Sl->getInput(3));
      if (Sl->getInput(4))
        Steps = getConstantInts(Sl->getInput(4));
      if ((Sl->getInput(3) && !Axes) || (Sl->getInput(4) && !Steps))
        return None;
    } else {
      Starts = Sl->getAttrInts("starts");
      Ends = Sl->getAttrInts("ends");
      Axes = Sl->getAttrInts("axes");
    }
    if (!Starts || !Ends || Starts->size() != 1 || Ends->size() != 1)
      return None;
    int64_t Axis = Axes ? (Axes->size() == 1 ? (*Axes)[0] : -2) : 0;
    if (!isLastAxis(Axis, Rank) ||
        (Steps && (Steps->size() != 1 || (*Steps)[0] != 1)))
      return None;
    auto Norm = [&](int64_t I) {
      if (I < 0)
        I += D;
      return std::max<int64_t>(0, std::min(I, D));
    };
    return std::make_pair(Norm((*Starts)[0]), Norm((*Ends)[0]));
  }

  bool matchRotary(const Node &N, ElementwiseRegion &R) {
    const Value *A = N.getInput(0), *Ng = N.getOutput(0);
    const Node *Cat = onlyUser(Ng, "Concat");
    if (!A || !Cat || Cat->getNumInputs() != 2 || Cat->getInput(0) != Ng ||
        !A->Type.isStatic() ||
        !isLastAxis(Cat->getAttrInt("axis", 0), A->Type.getRank()))
      return false;
    const Value *B = Cat->getInput(1), *X = nullptr;
    std::vector<const Node *> M;
    if (const Node *Sp = def(A, "Split")) {
      // Split(x) -> (first, second): Concat(Neg(second), first).
      X = Sp->getInput(0);
      if (Sp->getNumOutputs() != 2 || Sp->getOutput(1) != A ||
          Sp->getOutput(0) != B || !X || !X->Type.isStatic() ||
          !isLastAxis(Sp->getAttrInt("axis", 0), X->Type.getRank()) ||
          A->Type != B->Type)
        return false;
      M.push_back(Sp);
    } else {
      const Node *SA = def(A, "Slice"), *SB = def(B, "Slice");
      if (!SA || !SB || SA->getInput(0) != SB->getInput(0))
        return false;
      X = SA->getInput(0);
      auto HA = lastAxisSlice(SA), HB = lastAxisSlice(SB);
      int64_t D = X->Type.isStatic() && X->Type.getRank()
                      ? X->Type.Dims.back().Size
                      : 0;
      if (!HA || !HB || D <= 0 || D % 2 || *HA != std::make_pair(D / 2, D) ||
          *HB != std::make_pair(0L, D / 2))
        return false;
      M.push_back(SA);
      M.push_back(SB);
    }
    if (!isActivation(X))
      return false;
    M.push_back(&N);
    M.push_back(Cat);
    const Value *Rot = Cat->getOutput(0);
    const Node *MS = onlyUser(Rot, "Mul");
    if (!MS || Rot->Type != X->Type)
      return false;
    const Value *Sin = other(MS, Rot);
    const Node *AddN = onlyUser(MS->getOutput(0), "Add");
    if (!AddN)
      return false;
    const Value *P = other(AddN, MS->getOutput(0));
    const Node *MC = def(P, "Mul");
    const Value *Cos = MC ? other(MC, X) : nullptr;
    if (!Sin || !Cos || Sin == X || Cos == X || Sin == Rot ||
        AddN->getOutput(0)->Type != X->Type)
      return false;
    M.push_back(MS);
    M.push_back(MC);
    M.push_back(AddN);
    R.Kernel = "rotary";
    R.Inputs = {X, Cos, Sin};
    R.Saved = {Cos, Sin};
    R.Out = AddN->getOutput(0);
    R.Members = std::move(M);
    return true;
  }

  /// Sorts the members, checks no value inside leaks out, names the form.
  /// Opset 23's RMSNormalization and RotaryEmbedding are the kernels they
  /// name: a region of one node, reading what the spelled-out region
  /// reads (the norm: input and weight; rotary: input and the cos/sin
  /// tables, position ids being a few int64s) and keeping what its fused
  /// backward keeps (FusedKernels.h: the norm's input and weight, the
  /// rotary tables).
  bool matchStandardOp(const Node &N, ElementwiseRegion &R) {
    if (N.getNumInputs() < (N.getOpType() == "RotaryEmbedding" ? 3u : 2u) ||
        !N.getOutput(0))
      return false;
    for (unsigned I = 0; I < N.getNumInputs(); ++I)
      if (!N.getInput(I))
        return false;
    bool Rotary = N.getOpType() == "RotaryEmbedding";
    R.Kernel = Rotary ? "rotary" : "rmsnorm";
    R.Out = N.getOutput(0);
    R.Members = {&N};
    R.Inputs.push_back(N.getInput(0));
    R.Inputs.push_back(N.getInput(1));
    if (Rotary)
      R.Inputs.push_back(N.getInput(2));
    if (!Rotary)
      R.Saved = {N.getInput(0), N.getInput(1)};
    else
      R.Saved = {N.getInput(1), N.getInput(2)};
    return true;
  }

  bool finish(ElementwiseRegion &R) {
    auto &M = R.Members;
    llvm::sort(M, [&](const Node *X, const Node *Y) {
      return Order.lookup(X) < Order.lookup(Y);
    });
    M.erase(std::unique(M.begin(), M.end()), M.end());
    DenseSet<const Node *> In(M.begin(), M.end());
    for (const Node *N : M) {
      if (Taken.count(N))
        return false;
      for (const Value *O : N->getOutputs()) {
        if (!O || O == R.Out)
          continue;
        if (GraphOutputs.count(O))
          return false;
        auto It = Users.find(O);
        if (It != Users.end())
          for (const Node *U : It->second)
            if (!In.count(U))
              return false;
      }
    }
    R.Anchor = R.Out->getDefiningNode();
    std::string Form;
    for (const Node *N : M)
      Form += (Form.empty() ? "" : ",") + N->getOpType().str();
    R.Form = Form;
    return true;
  }
};

/// The single value of a uniform constant or ConstantOfShape, or None.
Optional<double> uniformFill(const Value *V) {
  const Node *D = V ? V->getDefiningNode() : nullptr;
  if (D && D->getDomain() == "" && D->getOpType() == "ConstantOfShape") {
    const Attribute *A = D->getAttribute("value");
    if (!A || A->Ts.empty())
      return 0.0;
    if (auto F = A->Ts[0].getFloatValues())
      return F->empty() ? None : Optional<double>((*F)[0]);
    else
      consumeError(F.takeError());
    if (auto I = A->Ts[0].getIntValues())
      return I->empty() ? None : Optional<double>((double)(*I)[0]);
    else
      consumeError(I.takeError());
    return None;
  }
  if (!isConstantLike(V))
    return None;
  auto N = V->Type.getNumElements();
  if (!N || *N > (1 << 24))
    return None;
  Optional<std::vector<double>> F = getConstantFloats(V);
  if (!F) {
    auto I = getConstantInts(V);
    if (!I)
      return None;
    F.emplace(I->begin(), I->end());
  }
  if (F->empty() || any_of(*F, [&](double X) { return X != F->front(); }))
    return None;
  return F->front();
}

/// A constant mask: the offset its entries prove, or None.
Optional<int64_t> constantOffset(const Value *V, MaskUse Use) {
  const TensorType &T = V->Type;
  if (!T.isStatic() || T.getRank() < 2)
    return None;
  unsigned Rank = T.getRank();
  int64_t Sq = T.Dims[Rank - 2].Size, Sk = T.Dims[Rank - 1].Size;
  auto N = T.getNumElements();
  if (!N || *N != Sq * Sk || *N > (1 << 24) || Sq <= 0 || Sk <= 0)
    return None;
  Optional<std::vector<double>> F = getConstantFloats(V);
  if (!F) {
    auto I = getConstantInts(V);
    if (!I)
      return None;
    F.emplace(I->begin(), I->end());
  }
  if ((int64_t)F->size() != Sq * Sk)
    return None;
  // 1 kept, 0 masked, -1 neither (an additive bias, not a mask).
  auto Kept = [&](double X) {
    switch (Use) {
    case MaskUse::Additive:
      return X == 0 ? 1 : (X <= MaskedBelow ? 0 : -1);
    case MaskUse::MaskedWhenTrue:
      return X == 0 ? 1 : 0;
    case MaskUse::KeptWhenTrue:
      return X != 0 ? 1 : 0;
    }
    return -1;
  };
  int64_t Row0 = 0;
  while (Row0 < Sk && Kept((*F)[Row0]) == 1)
    ++Row0;
  if (Row0 == 0)
    return None;
  int64_t Off = Row0 - 1;
  bool AnyMasked = false;
  for (int64_t I = 0; I < Sq; ++I)
    for (int64_t J = 0; J < Sk; ++J) {
      int K = Kept((*F)[I * Sk + J]);
      if (K != (J <= I + Off ? 1 : 0))
        return None;
      AnyMasked |= K == 0;
    }
  return AnyMasked ? Optional<int64_t>(Off) : None;
}

/// A position index over one of the last two axes of a rank >= 2 tensor:
/// the axis (0: rows, -2; 1: columns, -1) and the first position.
struct PositionIndex {
  int Axis = 0;
  int64_t Start = 0;
};

/// An int64 scalar or [1] constant.
Optional<int64_t> scalarInt(const Value *V) {
  Optional<double> S = scalarConstant(V);
  if (!S || *S != std::floor(*S))
    return None;
  return (int64_t)*S;
}

/// \p V's positions counting up by one from Start, along a 1-D vector or
/// its last two axes (the other axis of the two of size 1, leading axes of
/// size 1): a constant, a Range(start, limit, 1) or an Add of a scalar, through
/// Unsqueeze, Reshape and integer Casts. Axis is -1 for a 1-D vector.
Optional<PositionIndex> positionIndex(const Value *V, unsigned Depth) {
  if (!V || Depth > 8 || !V->Type.isStatic() || !isInteger(V->Type.Elem))
    return None;
  const TensorType &T = V->Type;
  unsigned Rank = T.getRank();
  if (Rank == 0 || any_of(ArrayRef<Dim>(T.Dims).drop_back(std::min(2u, Rank)),
                          [](const Dim &D) { return D.Size != 1; }))
    return None;
  int64_t Rows = Rank >= 2 ? T.Dims[Rank - 2].Size : 1,
          Cols = T.Dims[Rank - 1].Size;
  int Axis;
  if (Rank >= 2 && Cols == 1 && Rows > 1)
    Axis = 0;
  else if (Rows == 1 && Cols > 1)
    Axis = 1;
  else
    return None;
  auto WithAxis = [&](Optional<PositionIndex> P) -> Optional<PositionIndex> {
    // The source counts along its own vector; V lays it on Axis.
    if (P)
      P->Axis = Axis;
    return P;
  };
  if (isConstantLike(V)) {
    Optional<std::vector<int64_t>> I = getConstantInts(V);
    if (!I || I->empty())
      return None;
    for (size_t K = 1; K < I->size(); ++K)
      if ((*I)[K] != (*I)[0] + (int64_t)K)
        return None;
    return PositionIndex{Axis, (*I)[0]};
  }
  const Node *D = V->getDefiningNode();
  if (!D || D->getDomain() != "")
    return None;
  StringRef Op = D->getOpType();
  if (Op == "Range" && D->getNumInputs() == 3) {
    Optional<int64_t> Start = scalarInt(D->getInput(0)),
                      Delta = scalarInt(D->getInput(2));
    if (!Start || !Delta || *Delta != 1)
      return None;
    return PositionIndex{Axis, *Start};
  }
  const Value *In = D->getInput(0);
  if (!In || !In->Type.isStatic() ||
      In->Type.getNumElements() != T.getNumElements())
    return None;
  if (Op == "Unsqueeze" || Op == "Reshape" || Op == "Cast")
    return WithAxis(positionIndex(In, Depth + 1));
  if (Op == "Add" && D->getNumInputs() == 2) {
    for (unsigned K = 0; K < 2; ++K) {
      Optional<int64_t> C = scalarInt(D->getInput(1 - K));
      const Value *X = D->getInput(K);
      if (!C || !X || !X->Type.isStatic() ||
          X->Type.getNumElements() != T.getNumElements())
        continue;
      if (Optional<PositionIndex> P = positionIndex(X, Depth + 1)) {
        P->Axis = Axis;
        P->Start += *C;
        return P;
      }
    }
  }
  return None;
}

/// A comparison of a row position i + a with a column position j + b
/// (either order) as a mask used as \p Use: the offset d with "kept"
/// exactly when j <= i + d, or None.
Optional<int64_t> comparisonOffset(const Node &D, MaskUse Use) {
  if (Use == MaskUse::Additive || D.getNumInputs() != 2)
    return None;
  Optional<PositionIndex> L = positionIndex(D.getInput(0), 0),
                          R = positionIndex(D.getInput(1), 0);
  if (!L || !R || L->Axis == R->Axis)
    return None;
  StringRef Op = D.getOpType();
  // Written as row OP col: swapping the operands mirrors the comparison.
  if (L->Axis == 1) {
    std::swap(L, R);
    Op = StringSwitch<StringRef>(Op)
             .Case("Less", "Greater")
             .Case("Greater", "Less")
             .Case("LessOrEqual", "GreaterOrEqual")
             .Case("GreaterOrEqual", "LessOrEqual");
  }
  int64_t Diff = L->Start - R->Start; // i + a vs j + b: j vs i + Diff
  // True exactly when j > i + d (a masked-when-true mask) or j <= i + d
  // (kept when true).
  bool TrueKeeps;
  int64_t Off;
  if (Op == "Less") { // j > i + Diff
    TrueKeeps = false, Off = Diff;
  } else if (Op == "LessOrEqual") { // j >= i + Diff
    TrueKeeps = false, Off = Diff - 1;
  } else if (Op == "Greater") { // j < i + Diff
    TrueKeeps = true, Off = Diff - 1;
  } else if (Op == "GreaterOrEqual") { // j <= i + Diff
    TrueKeeps = true, Off = Diff;
  } else {
    return None;
  }
  if (TrueKeeps != (Use == MaskUse::KeptWhenTrue))
    return None;
  // As constantOffset: row 0 keeps a key and some entry is masked.
  const TensorType &T = D.getOutput(0)->Type;
  int64_t Sk = T.getRank() >= 2 ? T.Dims[T.getRank() - 1].Size : 0;
  if (Off < 0 || Sk <= 0 || Off >= Sk - 1)
    return None;
  return Off;
}

Optional<int64_t> causalOffset(const Value *V, MaskUse Use, unsigned Depth) {
  if (!V || Depth > 12)
    return None;
  if (isConstantLike(V))
    return constantOffset(V, Use);
  const Node *D = V->getDefiningNode();
  if (!D || D->getDomain() != "")
    return None;
  StringRef Op = D->getOpType();
  const Value *In = D->getInput(0);
  if (!In)
    return None;
  auto LastTwoKept = [&]() {
    const TensorType &A = In->Type, &B = V->Type;
    if (!A.isStatic() || !B.isStatic() || A.getRank() < 2 || B.getRank() < 2)
      return false;
    return A.Dims[A.getRank() - 1] == B.Dims[B.getRank() - 1] &&
           A.Dims[A.getRank() - 2] == B.Dims[B.getRank() - 2];
  };
  if (Op == "Cast" || Op == "Identity") {
    if (isFloatingPoint(In->Type.Elem) != isFloatingPoint(V->Type.Elem))
      return None;
    return causalOffset(In, Use, Depth + 1);
  }
  if (Op == "Less" || Op == "LessOrEqual" || Op == "Greater" ||
      Op == "GreaterOrEqual")
    return comparisonOffset(*D, Use);
  if (Op == "Mul" && Use == MaskUse::Additive && D->getNumInputs() == 2) {
    // Cast(bool mask) * big negative: the entries where the mask is true
    // are masked.
    for (unsigned K = 0; K < 2; ++K) {
      Optional<double> C = scalarConstant(D->getInput(1 - K));
      const Node *Cast =
          D->getInput(K) ? D->getInput(K)->getDefiningNode() : nullptr;
      if (!C || *C > MaskedBelow || !Cast || Cast->getDomain() != "" ||
          Cast->getOpType() != "Cast" || !Cast->getInput(0) ||
          Cast->getInput(0)->Type.Elem != DataType::Bool)
        continue;
      return causalOffset(Cast->getInput(0), MaskUse::MaskedWhenTrue,
                          Depth + 1);
    }
    return None;
  }
  if (Op == "Unsqueeze" || Op == "Squeeze" || Op == "Reshape" || Op == "Expand")
    return LastTwoKept() ? causalOffset(In, Use, Depth + 1) : None;
  if (Op == "Slice") {
    // A top-left block of a causal mask keeps the same diagonal.
    Optional<std::vector<int64_t>> Starts =
        D->getNumInputs() > 1 ? getConstantInts(D->getInput(1))
                              : D->getAttrInts("starts");
    if (!Starts || any_of(*Starts, [](int64_t S) { return S != 0; }))
      return None;
    if (D->getInput(4)) {
      auto Steps = getConstantInts(D->getInput(4));
      if (!Steps || any_of(*Steps, [](int64_t S) { return S != 1; }))
        return None;
    }
    return causalOffset(In, Use, Depth + 1);
  }
  if (Op == "Not") {
    if (Use == MaskUse::Additive)
      return None;
    return causalOffset(In,
                        Use == MaskUse::KeptWhenTrue ? MaskUse::MaskedWhenTrue
                                                     : MaskUse::KeptWhenTrue,
                        Depth + 1);
  }
  if (Op == "Where" && Use == MaskUse::Additive && D->getNumInputs() == 3) {
    Optional<double> A = uniformFill(D->getInput(1)),
                     B = uniformFill(D->getInput(2));
    if (!A || !B)
      return None;
    if (*A <= MaskedBelow && *B == 0)
      return causalOffset(In, MaskUse::MaskedWhenTrue, Depth + 1);
    if (*A == 0 && *B <= MaskedBelow)
      return causalOffset(In, MaskUse::KeptWhenTrue, Depth + 1);
    return None;
  }
  if (Op == "Trilu") {
    if (!LastTwoKept())
      return None;
    int64_t K = 0;
    if (D->getInput(1)) {
      auto Ks = getConstantInts(D->getInput(1));
      if (!Ks || Ks->size() != 1)
        return None;
      K = (*Ks)[0];
    }
    bool Upper = D->getAttrInt("upper", 1) != 0;
    Optional<double> Fill = uniformFill(In);
    if (!Fill)
      return None;
    // upper: entries with j - i >= k keep the fill, the rest are 0;
    // lower: entries with j - i <= k.
    switch (Use) {
    case MaskUse::Additive:
      if (Upper && *Fill <= MaskedBelow)
        return K - 1;
      return None;
    case MaskUse::MaskedWhenTrue:
      if (Upper && *Fill != 0)
        return K - 1;
      return None;
    case MaskUse::KeptWhenTrue:
      if (!Upper && *Fill != 0)
        return K;
      return None;
    }
  }
  return None;
}

} // namespace

std::vector<ElementwiseRegion>
findElementwiseRegions(const Graph &G, int64_t Opset,
                       ArrayRef<std::string> Kernels,
                       DenseSet<const Node *> &Taken) {
  if (Kernels.empty())
    return {};
  return ElementwiseMatcher(G, Opset, Taken).run(Kernels);
}

Optional<int64_t> getCausalOffset(const Value *Mask, MaskUse Use) {
  return causalOffset(Mask, Use, 0);
}

double getCausalKeptFraction(int64_t Sq, int64_t Sk, int64_t Offset) {
  if (Sq <= 0 || Sk <= 0)
    return 1.0;
  double Kept = 0;
  for (int64_t I = 0; I < Sq; ++I)
    Kept += (double)std::max<int64_t>(0, std::min<int64_t>(Sk, I + Offset + 1));
  return Kept / ((double)Sq * (double)Sk);
}

} // namespace loom
