//===- ShapeArithKernels.cpp - Constant evaluation of shape ops -----------===//
//
// The kernels of fold-shape-arith: each op family's evaluation of a node
// over constant operands (Const, ShapeArithKernels.h), with numpy-style
// broadcasting for the element-wise ops. FoldShapeArith.cpp finds the
// constants, dispatches to these and stores what they compute.
//
//===----------------------------------------------------------------------===//
#include "ShapeArithKernels.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include <cmath>
#include <functional>

using namespace llvm;

namespace loom {
namespace shapearith {

int64_t product(ArrayRef<int64_t> S) {
  int64_t N = 1;
  for (int64_t D : S)
    N *= D;
  return N;
}

Optional<Const> fromTensor(const Tensor &T) {
  Optional<int64_t> N = T.Type.getNumElements();
  if (!N || *N > FoldLimit || !T.Data || T.Type.Elem == DataType::String ||
      T.Type.Elem == DataType::Complex64 || T.Type.Elem == DataType::Complex128)
    return None;
  Const C;
  C.Elem = T.Type.Elem;
  C.Shape = T.Type.getStaticShape();
  if (C.isFloat()) {
    Expected<std::vector<double>> V = T.getFloatValues();
    if (!V) {
      consumeError(V.takeError());
      return None;
    }
    C.F = std::move(*V);
  } else {
    Expected<std::vector<int64_t>> V = T.getIntValues();
    if (!V) {
      consumeError(V.takeError());
      return None;
    }
    C.I = std::move(*V);
  }
  return C;
}

/// Normalizes an axis against a rank; None if out of range.
Optional<int64_t> normAxis(int64_t A, int64_t Rank) {
  if (A < 0)
    A += Rank;
  if (A < 0 || A >= Rank)
    return None;
  return A;
}

SmallVector<int64_t, 4> stridesOf(ArrayRef<int64_t> Shape) {
  SmallVector<int64_t, 4> S(Shape.size(), 1);
  for (int I = (int)Shape.size() - 2; I >= 0; --I)
    S[I] = S[I + 1] * Shape[I + 1];
  return S;
}

/// Numpy-style multidirectional broadcast of shapes.
static Optional<SmallVector<int64_t, 4>>
broadcastShapes(ArrayRef<const Const *> Ins) {
  size_t Rank = 0;
  for (const Const *C : Ins)
    Rank = std::max(Rank, C->Shape.size());
  SmallVector<int64_t, 4> Out(Rank, 1);
  for (const Const *C : Ins)
    for (size_t I = 0; I < C->Shape.size(); ++I) {
      int64_t &O = Out[Rank - C->Shape.size() + I];
      int64_t D = C->Shape[I];
      if (D == O || D == 1)
        continue;
      if (O != 1)
        return None;
      O = D;
    }
  return Out;
}

/// Index into \p C of output element \p Flat under broadcasting.
static int64_t broadcastIndex(const Const &C, ArrayRef<int64_t> OutShape,
                              ArrayRef<int64_t> OutStrides, int64_t Flat) {
  SmallVector<int64_t, 4> CS = stridesOf(C.Shape);
  size_t Off = OutShape.size() - C.Shape.size();
  int64_t Idx = 0;
  for (size_t D = 0; D < OutShape.size(); ++D) {
    int64_t Coord = (Flat / OutStrides[D]) % OutShape[D];
    if (D >= Off && C.Shape[D - Off] != 1)
      Idx += Coord * CS[D - Off];
  }
  return Idx;
}

using ElemFn = std::function<Optional<double>(ArrayRef<double>)>;
using IntFn = std::function<Optional<int64_t>(ArrayRef<int64_t>)>;

/// Applies an element-wise function with broadcasting. The result has
/// element type \p OutElem; integer inputs use \p IF when given.
static Optional<Const> elementwise(ArrayRef<const Const *> Ins,
                                   DataType OutElem, const ElemFn &FF,
                                   const IntFn &IF) {
  auto Shape = broadcastShapes(Ins);
  if (!Shape)
    return None;
  int64_t N = product(*Shape);
  if (N > FoldLimit)
    return None;
  SmallVector<int64_t, 4> Strides = stridesOf(*Shape);
  bool AllInt = IF && none_of(Ins, [](const Const *C) { return C->isFloat(); });
  Const R;
  R.Elem = OutElem;
  R.Shape = *Shape;
  SmallVector<double, 3> FA(Ins.size());
  SmallVector<int64_t, 3> IA(Ins.size());
  for (int64_t K = 0; K < N; ++K) {
    for (size_t J = 0; J < Ins.size(); ++J) {
      int64_t Idx = broadcastIndex(*Ins[J], *Shape, Strides, K);
      if (AllInt)
        IA[J] = Ins[J]->I[Idx];
      else
        FA[J] = Ins[J]->getF(Idx);
    }
    if (AllInt) {
      Optional<int64_t> V = IF(IA);
      if (!V)
        return None;
      if (R.isFloat())
        R.F.push_back((double)*V);
      else
        R.I.push_back(*V);
    } else {
      Optional<double> V = FF(FA);
      if (!V)
        return None;
      if (R.isFloat())
        R.F.push_back(*V);
      else
        R.I.push_back((int64_t)*V);
    }
  }
  return R;
}

Optional<DataType> castTarget(const Node &N) {
  int64_t To = N.getAttrInt("to", 0);
  // Float8 and 4-bit values are not decoded (isPostONNX112Type): such
  // Casts are left to run.
  if (!isKnownDataTypeCode(To) || To == (int64_t)DataType::String ||
      To == (int64_t)DataType::Complex64 ||
      To == (int64_t)DataType::Complex128 ||
      isPostONNX112Type(static_cast<DataType>(To)))
    return None;
  return static_cast<DataType>(To);
}

Const convertTo(const Const &X, DataType To) {
  Const R;
  R.Elem = To;
  R.Shape = X.Shape;
  for (int64_t K = 0; K < X.size(); ++K) {
    if (R.isFloat())
      R.F.push_back(X.getF(K));
    else if (To == DataType::Bool)
      R.I.push_back(X.getF(K) != 0);
    else
      R.I.push_back(X.isFloat() ? (int64_t)X.F[K] : X.I[K]);
  }
  return R;
}

FoldFamily getFoldFamily(StringRef Op) {
  return StringSwitch<FoldFamily>(Op)
      .Cases("Shape", "Size", FoldFamily::ShapeOf)
      .Case("Constant", FoldFamily::Constant)
      .Case("ConstantOfShape", FoldFamily::ConstantOfShape)
      .Case("Cast", FoldFamily::Cast)
      .Cases("Identity", "Unsqueeze", "Squeeze", "Reshape", FoldFamily::Layout)
      .Cases("Concat", "Gather", "Slice", "Expand", "Tile", "Transpose",
             FoldFamily::DataMovement)
      .Cases("Range", "NonZero", "Trilu", FoldFamily::Generator)
      .Cases("ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin",
             FoldFamily::Reduction)
      .Cases("Neg", "Abs", "Sqrt", "Reciprocal", "Floor", "Ceil", "Not",
             FoldFamily::UnaryMath)
      .Cases("Add", "Sub", "Mul", "Div", "Mod", "Pow", FoldFamily::Arithmetic)
      .Cases("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
             FoldFamily::Comparison)
      .Cases("And", "Or", "Xor", FoldFamily::Comparison)
      .Cases("Where", "Max", "Min", FoldFamily::Selection)
      .Default(FoldFamily::None);
}

bool has(ArrayRef<Optional<Const>> In, unsigned I) {
  return I < In.size() && In[I].hasValue();
}

using OD = Optional<double>;
using OI = Optional<int64_t>;

/// A one-operand element-wise op of the operand's element type.
static Optional<Const> foldUnary(ArrayRef<const Const *> Ptrs,
                                 std::function<double(double)> F,
                                 IntFn IF = nullptr) {
  if (Ptrs.size() != 1)
    return None;
  return elementwise(
      Ptrs, Ptrs[0]->Elem, [&](ArrayRef<double> A) { return F(A[0]); }, IF);
}

/// A two-operand element-wise op; \p F or \p IF may give up on an element.
static Optional<Const>
foldBinary(ArrayRef<const Const *> Ptrs, DataType OutElem,
           std::function<Optional<double>(double, double)> F,
           std::function<Optional<int64_t>(int64_t, int64_t)> IF) {
  if (Ptrs.size() != 2)
    return None;
  return elementwise(
      Ptrs, OutElem, [&](ArrayRef<double> A) { return F(A[0], A[1]); },
      [&](ArrayRef<int64_t> A) { return IF(A[0], A[1]); });
}

/// A comparison to Bool, integers compared as doubles.
static Optional<Const> foldCompare(ArrayRef<const Const *> Ptrs,
                                   std::function<bool(double, double)> F) {
  return foldBinary(
      Ptrs, DataType::Bool,
      [F](double A, double B) -> OD { return F(A, B) ? 1.0 : 0.0; },
      [F](int64_t A, int64_t B) -> OI {
        return F((double)A, (double)B) ? 1 : 0;
      });
}

/// Shape and Size: the input needs a static type, not data.
Optional<Const> foldShapeOf(const Node &N) {
  StringRef Op = N.getOpType();
  const Value *X = N.getInput(0);
  if (!X || !X->Type.isStatic())
    return None;
  SmallVector<int64_t, 4> S = X->Type.getStaticShape();
  if (Op == "Size")
    return Const{DataType::Int64, {}, {product(S)}, {}};
  int64_t Rank = S.size();
  int64_t Start = N.getAttrInt("start", 0), End = N.getAttrInt("end", Rank);
  if (Start < 0)
    Start += Rank;
  if (End < 0)
    End += Rank;
  Start = std::max<int64_t>(0, std::min(Start, Rank));
  End = std::max<int64_t>(Start, std::min(End, Rank));
  std::vector<int64_t> V(S.begin() + Start, S.begin() + End);
  return Const{DataType::Int64, {(int64_t)V.size()}, V, {}};
}

/// ConstantOfShape: the shape input filled with the value attribute (a
/// float 0 without one).
Optional<Const> foldConstantOfShape(const Node &N,
                                    ArrayRef<Optional<Const>> In) {
  if (!has(In, 0))
    return None;
  SmallVector<int64_t, 4> S(In[0]->I.begin(), In[0]->I.end());
  if (any_of(S, [](int64_t D) { return D < 0; }) || product(S) > FoldLimit)
    return None;
  Const Fill{DataType::Float, {1}, {}, {0.0}};
  if (const Attribute *A = N.getAttribute("value"))
    if (A->K == Attribute::Kind::Tensor)
      if (auto C = fromTensor(A->Ts[0]))
        Fill = *C;
  Const R;
  R.Elem = Fill.Elem;
  R.Shape = S;
  int64_t Count = product(S);
  if (R.isFloat())
    R.F.assign(Count, Fill.F.empty() ? 0.0 : Fill.F[0]);
  else
    R.I.assign(Count, Fill.I.empty() ? 0 : Fill.I[0]);
  return R;
}

/// Reshape; a 0 copies the input's dim (unless allowzero), one -1 is
/// inferred.
Optional<Const> foldReshape(const Node &N, ArrayRef<Optional<Const>> In) {
  const Const &X = *In[0];
  if (!has(In, 1))
    return None;
  bool AllowZero = N.getAttrInt("allowzero", 0);
  SmallVector<int64_t, 4> S(In[1]->I.begin(), In[1]->I.end());
  int64_t Known = 1, Infer = -1;
  for (size_t D = 0; D < S.size(); ++D) {
    if (S[D] == 0 && !AllowZero) {
      if (D >= X.Shape.size())
        return None;
      S[D] = X.Shape[D];
    }
    if (S[D] == -1) {
      if (Infer >= 0)
        return None;
      Infer = D;
    } else if (S[D] < 0) {
      return None;
    } else {
      Known *= S[D];
    }
  }
  if (Infer >= 0) {
    if (Known == 0 || X.size() % Known)
      return None;
    S[Infer] = X.size() / Known;
  }
  if (product(S) != X.size())
    return None;
  Const R = X;
  R.Shape = S;
  return R;
}

/// Concat of constants of one element type and rank.
Optional<Const> foldConcat(const Node &N, ArrayRef<Optional<Const>> In) {
  const Const &X = *In[0];
  for (unsigned I = 0; I < In.size(); ++I)
    if (!has(In, I) || In[I]->Elem != X.Elem ||
        In[I]->Shape.size() != X.Shape.size())
      return None;
  int64_t Rank = X.Shape.size();
  auto Axis = normAxis(N.getAttrInt("axis", 0), Rank);
  if (!Axis)
    return None;
  Const R;
  R.Elem = X.Elem;
  R.Shape = X.Shape;
  R.Shape[*Axis] = 0;
  for (auto &C : In)
    R.Shape[*Axis] += C->Shape[*Axis];
  int64_t Outer = product(makeArrayRef(X.Shape).take_front(*Axis));
  for (int64_t O = 0; O < Outer; ++O)
    for (auto &C : In) {
      int64_t Chunk = product(makeArrayRef(C->Shape).drop_front(*Axis));
      for (int64_t K = O * Chunk; K < (O + 1) * Chunk; ++K) {
        if (R.isFloat())
          R.F.push_back(C->F[K]);
        else
          R.I.push_back(C->I[K]);
      }
    }
  return R;
}

/// Gather along axis; negative indices count from the end.
Optional<Const> foldGather(const Node &N, ArrayRef<Optional<Const>> In) {
  const Const &X = *In[0];
  if (!has(In, 1) || In[1]->isFloat())
    return None;
  int64_t Rank = X.Shape.size();
  auto Axis = normAxis(N.getAttrInt("axis", 0), Rank);
  if (!Axis)
    return None;
  const Const &Idx = *In[1];
  Const R;
  R.Elem = X.Elem;
  R.Shape.append(X.Shape.begin(), X.Shape.begin() + *Axis);
  R.Shape.append(Idx.Shape.begin(), Idx.Shape.end());
  R.Shape.append(X.Shape.begin() + *Axis + 1, X.Shape.end());
  int64_t Outer = product(makeArrayRef(X.Shape).take_front(*Axis));
  int64_t Inner = product(makeArrayRef(X.Shape).drop_front(*Axis + 1));
  int64_t D = X.Shape[*Axis];
  for (int64_t O = 0; O < Outer; ++O)
    for (int64_t J : Idx.I) {
      if (J < 0)
        J += D;
      if (J < 0 || J >= D)
        return None;
      for (int64_t K = 0; K < Inner; ++K) {
        int64_t Src = (O * D + J) * Inner + K;
        if (R.isFloat())
          R.F.push_back(X.F[Src]);
        else
          R.I.push_back(X.I[Src]);
      }
    }
  return R;
}

/// Expand: X broadcast against the shape input.
Optional<Const> foldExpand(ArrayRef<Optional<Const>> In) {
  const Const &X = *In[0];
  if (!has(In, 1))
    return None;
  Const ShapeC;
  ShapeC.Elem = X.Elem;
  ShapeC.Shape.assign(In[1]->I.begin(), In[1]->I.end());
  if (any_of(ShapeC.Shape, [](int64_t D) { return D < 0; }))
    return None;
  // Broadcast X against a tensor of the target shape.
  auto Shape = broadcastShapes({&X, &ShapeC});
  if (!Shape || product(*Shape) > FoldLimit)
    return None;
  Const R;
  R.Elem = X.Elem;
  R.Shape = *Shape;
  SmallVector<int64_t, 4> Str = stridesOf(*Shape);
  for (int64_t K = 0, E = product(*Shape); K < E; ++K) {
    int64_t Idx = broadcastIndex(X, *Shape, Str, K);
    if (R.isFloat())
      R.F.push_back(X.F[Idx]);
    else
      R.I.push_back(X.I[Idx]);
  }
  return R;
}

/// Tile: X repeated along each dim by the repeats input.
Optional<Const> foldTile(ArrayRef<Optional<Const>> In) {
  const Const &X = *In[0];
  if (!has(In, 1) || In[1]->size() != (int64_t)X.Shape.size())
    return None;
  SmallVector<int64_t, 4> OutS;
  for (size_t D = 0; D < X.Shape.size(); ++D) {
    if (In[1]->I[D] < 0)
      return None;
    OutS.push_back(X.Shape[D] * In[1]->I[D]);
  }
  if (product(OutS) > FoldLimit)
    return None;
  Const R;
  R.Elem = X.Elem;
  R.Shape = OutS;
  SmallVector<int64_t, 4> OS = stridesOf(OutS), XS = stridesOf(X.Shape);
  for (int64_t K = 0, E = product(OutS); K < E; ++K) {
    int64_t Idx = 0;
    for (size_t D = 0; D < OutS.size(); ++D)
      Idx += ((K / OS[D]) % OutS[D] % X.Shape[D]) * XS[D];
    if (R.isFloat())
      R.F.push_back(X.F[Idx]);
    else
      R.I.push_back(X.I[Idx]);
  }
  return R;
}

/// Transpose by perm (the dims reversed without it).
Optional<Const> foldTranspose(const Node &N, const Const &X) {
  int64_t Rank = X.Shape.size();
  std::vector<int64_t> Perm;
  if (auto P = N.getAttrInts("perm"))
    Perm = *P;
  else
    for (int64_t D = Rank - 1; D >= 0; --D)
      Perm.push_back(D);
  if ((int64_t)Perm.size() != Rank)
    return None;
  Const R;
  R.Elem = X.Elem;
  for (int64_t P : Perm) {
    if (P < 0 || P >= Rank)
      return None;
    R.Shape.push_back(X.Shape[P]);
  }
  SmallVector<int64_t, 4> OS = stridesOf(R.Shape), XS = stridesOf(X.Shape);
  for (int64_t K = 0; K < X.size(); ++K) {
    int64_t Idx = 0;
    for (int64_t D = 0; D < Rank; ++D)
      Idx += ((K / OS[D]) % R.Shape[D]) * XS[Perm[D]];
    if (R.isFloat())
      R.F.push_back(X.F[Idx]);
    else
      R.I.push_back(X.I[Idx]);
  }
  return R;
}

/// Range(start, limit, delta) of scalars.
static Optional<Const> foldRange(ArrayRef<Optional<Const>> In) {
  const Const &X = *In[0];
  if (!has(In, 1) || !has(In, 2) || X.size() != 1 || In[1]->size() != 1 ||
      In[2]->size() != 1)
    return None;
  double S = X.getF(0), L = In[1]->getF(0), D = In[2]->getF(0);
  if (D == 0)
    return None;
  double Count = std::max(0.0, std::ceil((L - S) / D));
  if (Count > FoldLimit)
    return None;
  Const R;
  R.Elem = X.Elem;
  R.Shape = {(int64_t)Count};
  for (int64_t K = 0; K < (int64_t)Count; ++K) {
    if (R.isFloat())
      R.F.push_back(S + K * D);
    else
      R.I.push_back(X.I[0] + K * In[2]->I[0]);
  }
  return R;
}

/// NonZero: the indices of the non-zero elements, one row per dim.
static Optional<Const> foldNonZero(const Const &X) {
  int64_t Rank = X.Shape.size();
  SmallVector<int64_t, 4> XS = stridesOf(X.Shape);
  std::vector<int64_t> Hits;
  for (int64_t K = 0; K < X.size(); ++K)
    if (X.getF(K) != 0)
      Hits.push_back(K);
  Const R;
  R.Elem = DataType::Int64;
  R.Shape = {Rank, (int64_t)Hits.size()};
  for (int64_t D = 0; D < Rank; ++D)
    for (int64_t K : Hits)
      R.I.push_back((K / XS[D]) % X.Shape[D]);
  return R;
}

/// Trilu: zeroes what lies outside the upper (or lower) triangle
/// shifted by k.
static Optional<Const> foldTrilu(const Node &N, ArrayRef<Optional<Const>> In) {
  const Const &X = *In[0];
  if (X.Shape.size() < 2)
    return None;
  int64_t K = 0;
  if (N.getInput(1)) {
    if (!has(In, 1) || In[1]->size() != 1)
      return None;
    K = In[1]->getI(0);
  }
  bool Upper = N.getAttrInt("upper", 1);
  int64_t Rows = X.Shape[X.Shape.size() - 2], Cols = X.Shape.back();
  Const R = X;
  for (int64_t E = 0; E < X.size(); ++E) {
    int64_t C = E % Cols, Rw = (E / Cols) % Rows;
    bool Keep = Upper ? C - Rw >= K : C - Rw <= K;
    if (!Keep) {
      if (R.isFloat())
        R.F[E] = 0;
      else
        R.I[E] = 0;
    }
  }
  return R;
}

/// Mod: Python's sign rule, or C's with fmod=1.
static Optional<Const> foldModulo(const Node &N, ArrayRef<const Const *> Ptrs) {
  const Const &X = *Ptrs[0];
  bool FMod = N.getAttrInt("fmod", 0);
  return foldBinary(
      Ptrs, X.Elem,
      [FMod](double A, double B) -> OD {
        if (B == 0)
          return None;
        double R = std::fmod(A, B);
        if (!FMod && R != 0 && ((R < 0) != (B < 0)))
          R += B;
        return R;
      },
      [FMod](int64_t A, int64_t B) -> OI {
        if (B == 0)
          return None;
        int64_t R = A % B;
        if (!FMod && R != 0 && ((R < 0) != (B < 0)))
          R += B;
        return R;
      });
}

/// Max and Min over any number of broadcast inputs.
static Optional<Const> foldMinMax(StringRef Op, ArrayRef<const Const *> Ptrs) {
  const Const &X = *Ptrs[0];
  bool IsMax = Op == "Max";
  return elementwise(
      Ptrs, X.Elem,
      [IsMax](ArrayRef<double> A) -> OD {
        double R = A[0];
        for (double V : A)
          R = IsMax ? std::max(R, V) : std::min(R, V);
        return R;
      },
      [IsMax](ArrayRef<int64_t> A) -> OI {
        int64_t R = A[0];
        for (int64_t V : A)
          R = IsMax ? std::max(R, V) : std::min(R, V);
        return R;
      });
}

/// Equal; exact on integers.
static Optional<Const> foldEqual(ArrayRef<const Const *> Ptrs) {
  const Const &X = *Ptrs[0];
  if (!X.isFloat() && Ptrs.size() == 2 && !Ptrs[1]->isFloat())
    return foldBinary(Ptrs, DataType::Bool, nullptr,
                      [](int64_t A, int64_t B) -> OI { return A == B; });
  return foldCompare(Ptrs, [](double A, double B) { return A == B; });
}

Optional<Const> foldUnaryMath(StringRef Op, ArrayRef<const Const *> Ptrs) {
  if (Op == "Neg")
    return foldUnary(
        Ptrs, [](double A) { return -A; },
        [](ArrayRef<int64_t> A) -> Optional<int64_t> { return -A[0]; });
  if (Op == "Abs")
    return foldUnary(
        Ptrs, [](double A) { return std::fabs(A); },
        [](ArrayRef<int64_t> A) -> Optional<int64_t> {
          return A[0] < 0 ? -A[0] : A[0];
        });
  if (Op == "Sqrt")
    return foldUnary(Ptrs, [](double A) { return std::sqrt(A); });
  if (Op == "Reciprocal")
    return foldUnary(Ptrs, [](double A) { return 1.0 / A; });
  if (Op == "Floor")
    return foldUnary(Ptrs, [](double A) { return std::floor(A); });
  if (Op == "Ceil")
    return foldUnary(Ptrs, [](double A) { return std::ceil(A); });
  assert(Op == "Not");
  return foldUnary(
      Ptrs, [](double A) { return A == 0 ? 1.0 : 0.0; },
      [](ArrayRef<int64_t> A) -> Optional<int64_t> { return A[0] == 0; });
}

Optional<Const> foldArithmetic(const Node &N, ArrayRef<const Const *> Ptrs) {
  StringRef Op = N.getOpType();
  DataType Elem = Ptrs[0]->Elem;
  if (Op == "Add")
    return foldBinary(
        Ptrs, Elem, [](double A, double B) -> OD { return A + B; },
        [](int64_t A, int64_t B) -> OI { return A + B; });
  if (Op == "Sub")
    return foldBinary(
        Ptrs, Elem, [](double A, double B) -> OD { return A - B; },
        [](int64_t A, int64_t B) -> OI { return A - B; });
  if (Op == "Mul")
    return foldBinary(
        Ptrs, Elem, [](double A, double B) -> OD { return A * B; },
        [](int64_t A, int64_t B) -> OI { return A * B; });
  if (Op == "Div")
    return foldBinary(
        Ptrs, Elem, [](double A, double B) -> OD { return A / B; },
        [](int64_t A, int64_t B) -> OI {
          if (B == 0)
            return None;
          return A / B; // Truncation, as ONNX Runtime does.
        });
  if (Op == "Mod")
    return foldModulo(N, Ptrs);
  assert(Op == "Pow");
  return foldBinary(
      Ptrs, Elem, [](double A, double B) -> OD { return std::pow(A, B); },
      [](int64_t A, int64_t B) -> OI {
        if (B < 0)
          return None;
        int64_t R = 1;
        for (int64_t K = 0; K < B && K < 64; ++K)
          R *= A;
        return R;
      });
}

/// Comparisons and logic ops, all to Bool.
Optional<Const> foldComparison(StringRef Op, ArrayRef<const Const *> Ptrs) {
  if (Op == "Equal")
    return foldEqual(Ptrs);
  if (Op == "Less")
    return foldCompare(Ptrs, [](double A, double B) { return A < B; });
  if (Op == "Greater")
    return foldCompare(Ptrs, [](double A, double B) { return A > B; });
  if (Op == "LessOrEqual")
    return foldCompare(Ptrs, [](double A, double B) { return A <= B; });
  if (Op == "GreaterOrEqual")
    return foldCompare(Ptrs, [](double A, double B) { return A >= B; });
  assert(Op == "And" || Op == "Or" || Op == "Xor");
  return foldBinary(Ptrs, DataType::Bool, nullptr,
                    [Op](int64_t A, int64_t B) -> OI {
                      if (Op == "And")
                        return (A != 0) && (B != 0);
                      if (Op == "Or")
                        return (A != 0) || (B != 0);
                      return (A != 0) != (B != 0);
                    });
}

/// Where, Max and Min: each element picks one of its operands'.
Optional<Const> foldSelection(StringRef Op, ArrayRef<const Const *> Ptrs) {
  if (Op == "Where") {
    if (Ptrs.size() != 3 || Ptrs[1]->Elem != Ptrs[2]->Elem)
      return None;
    return elementwise(
        Ptrs, Ptrs[1]->Elem,
        [](ArrayRef<double> A) -> OD { return A[0] != 0 ? A[1] : A[2]; },
        [](ArrayRef<int64_t> A) -> OI { return A[0] != 0 ? A[1] : A[2]; });
  }
  return foldMinMax(Op, Ptrs);
}

/// The ops whose result is computed from positions: Range, NonZero, Trilu.
Optional<Const> foldGenerator(const Node &N, ArrayRef<Optional<Const>> In) {
  StringRef Op = N.getOpType();
  if (Op == "Range")
    return foldRange(In);
  if (Op == "NonZero")
    return foldNonZero(*In[0]);
  return foldTrilu(N, In);
}

} // namespace shapearith
} // namespace loom
