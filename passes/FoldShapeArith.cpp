//===- FoldShapeArith.cpp - Fold shape arithmetic into constants ----------===//
//
// Exporters compute shapes at run time: Shape -> Gather -> Unsqueeze ->
// Concat -> Reshape, ConstantOfShape, Range, Expand, Where on shapes, causal
// masks from Trilu... Once bind-symbols and infer-shapes have made shapes
// static, these are constants. This pass evaluates them (small tensors only:
// FoldLimit elements, so masks of long sequences stay as computations),
// reruns ONNX shape inference so that Reshape/Expand targets that became
// constant give static result shapes, repeats to a fixed point, and removes
// what became dead.
//
// Opset-dependent operands (Unsqueeze/Squeeze/ReduceSum axes, Slice bounds)
// are read per the model's default-domain opset.
//
//===----------------------------------------------------------------------===//
#include "loom/Analysis/Experts.h"
#include "loom/IR/NodeLabel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>
#include <functional>

using namespace llvm;

namespace loom {
namespace {

constexpr int64_t FoldLimit = 1 << 16;

/// A small constant tensor; integers (and bool) in I, floats in F.
struct Const {
  DataType Elem = DataType::Undefined;
  SmallVector<int64_t, 4> Shape;
  std::vector<int64_t> I;
  std::vector<double> F;

  bool isFloat() const { return isFloatingPoint(Elem); }
  int64_t size() const { return isFloat() ? F.size() : I.size(); }
  double getF(int64_t K) const { return isFloat() ? F[K] : (double)I[K]; }
  int64_t getI(int64_t K) const { return isFloat() ? (int64_t)F[K] : I[K]; }
  Tensor toTensor() const {
    return isFloat() ? Tensor::makeFromDoubles(Elem, Shape, F)
                     : Tensor::makeFromInts(Elem, Shape, I);
  }
};

static int64_t product(ArrayRef<int64_t> S) {
  int64_t N = 1;
  for (int64_t D : S)
    N *= D;
  return N;
}

static Optional<Const> fromTensor(const Tensor &T) {
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
static Optional<int64_t> normAxis(int64_t A, int64_t Rank) {
  if (A < 0)
    A += Rank;
  if (A < 0 || A >= Rank)
    return None;
  return A;
}

static SmallVector<int64_t, 4> stridesOf(ArrayRef<int64_t> Shape) {
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

class Folder {
public:
  Folder(Model &M) : Opset(M.getOpsetVersion("")) {}
  /// One sweep over \p G and its subgraphs; returns the number of folds.
  unsigned sweep(Graph &G);
  /// Loom's own shape rules where ONNX 1.12's inference gives up although
  /// the operands that decide the shape are constants (MoE routing: OneHot's
  /// depth, TopK's k, Einsum's labels); returns the number of values whose
  /// type became more static.
  unsigned refineShapes(Graph &G);
  /// Gives the data-dependent dim of a NonZero over an MoE routing mask
  /// (getRoutingMaskClasses) its expected size; returns the nodes bound, and
  /// describes the first in \p First.
  unsigned bindExpectedCounts(Graph &G, double CapacityFactor,
                              std::string &First);
  void eliminateDeadNodes(Graph &G);

private:
  Optional<Const> getConst(const Value *V);
  Optional<std::vector<int64_t>> getInts(const Value *V) {
    Optional<Const> C = getConst(V);
    if (!C || C->isFloat())
      return None;
    return C->I;
  }
  /// Axes from an attribute before \p InputSince, from input \p Idx after.
  Optional<std::vector<int64_t>> getAxes(const Node &N, int64_t InputSince,
                                         unsigned Idx, bool &Absent);
  /// The constant \p N computes, if its operands are constants; dispatches
  /// to one function per family of ops.
  Optional<Const> fold(const Node &N);
  Optional<Const> foldLayout(const Node &N, ArrayRef<Optional<Const>> In);
  Optional<Const> foldSqueeze(const Node &N, const Const &X);
  Optional<Const> foldDataMovement(const Node &N, ArrayRef<Optional<Const>> In);
  Optional<Const> foldSlice(const Node &N, const Const &X);
  Optional<Const> foldReduce(const Node &N, const Const &X);
  Optional<SmallVector<int64_t, 4>> inferStaticShape(const Node &N);

  int64_t Opset;
  DenseMap<const Value *, Const> Cache;
};

Optional<Const> Folder::getConst(const Value *V) {
  if (!V)
    return None;
  auto It = Cache.find(V);
  if (It != Cache.end())
    return It->second;
  Optional<Const> C;
  // Weights stay parameters: only integer (shape-like) or scalar
  // parameters take part in folding.
  if (V->isParameter() && V->Data && !V->AlsoGraphInput &&
      (!isFloatingPoint(V->Type.Elem) ||
       V->Type.getNumElements().getValueOr(2) <= 1)) {
    Tensor T;
    T.Type = V->Type;
    T.Data = V->Data;
    C = fromTensor(T);
  } else if (const Node *N = V->getDefiningNode()) {
    if (N->getOpType() == "Constant" && N->getDomain().empty()) {
      if (const Attribute *A = N->getAttribute("value")) {
        if (A->K == Attribute::Kind::Tensor)
          C = fromTensor(A->Ts[0]);
      } else if (const Attribute *A = N->getAttribute("value_int")) {
        C = Const{DataType::Int64, {}, {A->I}, {}};
      } else if (const Attribute *A = N->getAttribute("value_ints")) {
        C = Const{DataType::Int64, {(int64_t)A->Is.size()}, A->Is, {}};
      } else if (const Attribute *A = N->getAttribute("value_float")) {
        C = Const{DataType::Float, {}, {}, {A->F}};
      } else if (const Attribute *A = N->getAttribute("value_floats")) {
        C = Const{DataType::Float,
                  {(int64_t)A->Fs.size()},
                  {},
                  std::vector<double>(A->Fs.begin(), A->Fs.end())};
      }
    }
  }
  if (C)
    Cache[V] = *C;
  return C;
}

Optional<std::vector<int64_t>>
Folder::getAxes(const Node &N, int64_t InputSince, unsigned Idx, bool &Absent) {
  Absent = false;
  if (Opset < InputSince) {
    if (auto A = N.getAttrInts("axes"))
      return *A;
    Absent = true;
    return std::vector<int64_t>();
  }
  if (!N.getInput(Idx)) {
    Absent = true;
    return std::vector<int64_t>();
  }
  return getInts(N.getInput(Idx));
}

Optional<Const> Folder::foldSlice(const Node &N, const Const &X) {
  std::vector<int64_t> Starts, Ends, Axes, Steps;
  if (Opset < 10) {
    auto S = N.getAttrInts("starts"), E = N.getAttrInts("ends");
    if (!S || !E)
      return None;
    Starts = *S;
    Ends = *E;
    if (auto A = N.getAttrInts("axes"))
      Axes = *A;
  } else {
    auto S = getInts(N.getInput(1)), E = getInts(N.getInput(2));
    if (!S || !E)
      return None;
    Starts = *S;
    Ends = *E;
    if (N.getInput(3)) {
      auto A = getInts(N.getInput(3));
      if (!A)
        return None;
      Axes = *A;
    }
    if (N.getInput(4)) {
      auto St = getInts(N.getInput(4));
      if (!St)
        return None;
      Steps = *St;
    }
  }
  int64_t Rank = X.Shape.size();
  if (Axes.empty())
    for (int64_t I = 0; I < (int64_t)Starts.size(); ++I)
      Axes.push_back(I);
  if (Steps.empty())
    Steps.assign(Starts.size(), 1);
  if (Ends.size() != Starts.size() || Axes.size() != Starts.size() ||
      Steps.size() != Starts.size())
    return None;
  SmallVector<int64_t, 4> Begin(Rank, 0), Step(Rank, 1), Count(X.Shape);
  for (size_t K = 0; K < Starts.size(); ++K) {
    auto A = normAxis(Axes[K], Rank);
    if (!A || Steps[K] == 0)
      return None;
    int64_t D = X.Shape[*A], S = Starts[K], E = Ends[K], St = Steps[K];
    if (S < 0)
      S += D;
    if (E < 0)
      E += D;
    if (St > 0) {
      S = std::max<int64_t>(0, std::min(S, D));
      E = std::max<int64_t>(0, std::min(E, D));
      Count[*A] = E > S ? (E - S + St - 1) / St : 0;
    } else {
      S = std::max<int64_t>(-1, std::min(S, D - 1));
      E = std::max<int64_t>(-1, std::min(E, D - 1));
      Count[*A] = S > E ? (S - E - St - 1) / -St : 0;
    }
    Begin[*A] = S;
    Step[*A] = St;
  }
  Const R;
  R.Elem = X.Elem;
  R.Shape = Count;
  SmallVector<int64_t, 4> InStr = stridesOf(X.Shape), OutStr = stridesOf(Count);
  int64_t N2 = product(Count);
  for (int64_t K = 0; K < N2; ++K) {
    int64_t Idx = 0;
    for (int64_t D = 0; D < Rank; ++D)
      Idx += (Begin[D] + ((K / OutStr[D]) % Count[D]) * Step[D]) * InStr[D];
    if (R.isFloat())
      R.F.push_back(X.F[Idx]);
    else
      R.I.push_back(X.I[Idx]);
  }
  return R;
}

Optional<Const> Folder::foldReduce(const Node &N, const Const &X) {
  bool Absent;
  int64_t InputSince = N.getOpType() == "ReduceSum" ? 13 : 18;
  auto Axes = getAxes(N, InputSince, 1, Absent);
  if (!Axes)
    return None;
  int64_t Rank = X.Shape.size();
  SmallVector<bool, 4> Reduced(Rank, Absent || Axes->empty());
  if (Absent || Axes->empty()) {
    if (N.getAttrInt("noop_with_empty_axes", 0) && !Absent)
      return X;
  }
  for (int64_t A : *Axes) {
    auto NA = normAxis(A, Rank);
    if (!NA)
      return None;
    Reduced[*NA] = true;
  }
  bool KeepDims = N.getAttrInt("keepdims", 1);
  SmallVector<int64_t, 4> OutShape, KeptShape;
  for (int64_t D = 0; D < Rank; ++D) {
    KeptShape.push_back(Reduced[D] ? 1 : X.Shape[D]);
    if (!Reduced[D] || KeepDims)
      OutShape.push_back(Reduced[D] ? 1 : X.Shape[D]);
  }
  StringRef Op = N.getOpType();
  int64_t OutN = product(KeptShape);
  std::vector<double> Acc(OutN, Op == "ReduceProd"  ? 1.0
                                : Op == "ReduceMax" ? -INFINITY
                                : Op == "ReduceMin" ? INFINITY
                                                    : 0.0);
  SmallVector<int64_t, 4> InStr = stridesOf(X.Shape),
                          OutStr = stridesOf(KeptShape);
  for (int64_t K = 0; K < X.size(); ++K) {
    int64_t O = 0;
    for (int64_t D = 0; D < Rank; ++D)
      if (!Reduced[D])
        O += ((K / InStr[D]) % X.Shape[D]) * OutStr[D];
    double V = X.getF(K);
    if (Op == "ReduceProd")
      Acc[O] *= V;
    else if (Op == "ReduceSum")
      Acc[O] += V;
    else if (Op == "ReduceMax")
      Acc[O] = std::max(Acc[O], V);
    else
      Acc[O] = std::min(Acc[O], V);
  }
  Const R;
  R.Elem = X.Elem;
  R.Shape = OutShape;
  for (double V : Acc)
    if (R.isFloat())
      R.F.push_back(V);
    else
      R.I.push_back((int64_t)V);
  return R;
}

static Optional<DataType> castTarget(const Node &N) {
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

static Const convertTo(const Const &X, DataType To) {
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

/// The groups of fold() rules; an op in none of them is not folded.
enum class FoldFamily {
  ShapeOf,
  Constant,
  ConstantOfShape,
  Cast,
  Layout,
  DataMovement,
  Generator,
  Reduction,
  UnaryMath,
  Arithmetic,
  Comparison,
  Selection,
  None
};

static FoldFamily getFoldFamily(StringRef Op) {
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

static bool has(ArrayRef<Optional<Const>> In, unsigned I) {
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
static Optional<Const> foldShapeOf(const Node &N) {
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
static Optional<Const> foldConstantOfShape(const Node &N,
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

/// Unsqueeze and Squeeze.
Optional<Const> Folder::foldSqueeze(const Node &N, const Const &X) {
  StringRef Op = N.getOpType();
  bool Absent;
  auto Axes = getAxes(N, 13, 1, Absent);
  if (!Axes)
    return None;
  Const R = X;
  if (Op == "Unsqueeze") {
    int64_t Rank = X.Shape.size() + Axes->size();
    SmallVector<bool, 8> Ins(Rank, false);
    for (int64_t A : *Axes) {
      auto NA = normAxis(A, Rank);
      if (!NA || Ins[*NA])
        return None;
      Ins[*NA] = true;
    }
    R.Shape.clear();
    unsigned J = 0;
    for (int64_t D = 0; D < Rank; ++D)
      R.Shape.push_back(Ins[D] ? 1 : X.Shape[J++]);
    return R;
  }
  int64_t Rank = X.Shape.size();
  SmallVector<bool, 8> Drop(Rank, false);
  for (int64_t A : *Axes) {
    auto NA = normAxis(A, Rank);
    if (!NA || X.Shape[*NA] != 1)
      return None;
    Drop[*NA] = true;
  }
  R.Shape.clear();
  for (int64_t D = 0; D < Rank; ++D)
    if (!(Absent ? X.Shape[D] == 1 : Drop[D]))
      R.Shape.push_back(X.Shape[D]);
  return R;
}

/// Reshape; a 0 copies the input's dim (unless allowzero), one -1 is
/// inferred.
static Optional<Const> foldReshape(const Node &N,
                                   ArrayRef<Optional<Const>> In) {
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
static Optional<Const> foldConcat(const Node &N, ArrayRef<Optional<Const>> In) {
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
static Optional<Const> foldGather(const Node &N, ArrayRef<Optional<Const>> In) {
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
static Optional<Const> foldExpand(ArrayRef<Optional<Const>> In) {
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
static Optional<Const> foldTile(ArrayRef<Optional<Const>> In) {
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
static Optional<Const> foldTranspose(const Node &N, const Const &X) {
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

static Optional<Const> foldUnaryMath(StringRef Op,
                                     ArrayRef<const Const *> Ptrs) {
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

static Optional<Const> foldArithmetic(const Node &N,
                                      ArrayRef<const Const *> Ptrs) {
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
static Optional<Const> foldComparison(StringRef Op,
                                      ArrayRef<const Const *> Ptrs) {
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
static Optional<Const> foldSelection(StringRef Op,
                                     ArrayRef<const Const *> Ptrs) {
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

/// Identity and the ops that change only the shape.
Optional<Const> Folder::foldLayout(const Node &N,
                                   ArrayRef<Optional<Const>> In) {
  StringRef Op = N.getOpType();
  if (Op == "Identity")
    return *In[0];
  if (Op == "Reshape")
    return foldReshape(N, In);
  return foldSqueeze(N, *In[0]);
}

/// The ops that pick, repeat or reorder elements.
Optional<Const> Folder::foldDataMovement(const Node &N,
                                         ArrayRef<Optional<Const>> In) {
  StringRef Op = N.getOpType();
  if (Op == "Concat")
    return foldConcat(N, In);
  if (Op == "Gather")
    return foldGather(N, In);
  if (Op == "Slice")
    return foldSlice(N, *In[0]);
  if (Op == "Expand")
    return foldExpand(In);
  if (Op == "Tile")
    return foldTile(In);
  return foldTranspose(N, *In[0]);
}

/// The ops whose result is computed from positions: Range, NonZero, Trilu.
static Optional<Const> foldGenerator(const Node &N,
                                     ArrayRef<Optional<Const>> In) {
  StringRef Op = N.getOpType();
  if (Op == "Range")
    return foldRange(In);
  if (Op == "NonZero")
    return foldNonZero(*In[0]);
  return foldTrilu(N, In);
}

Optional<Const> Folder::fold(const Node &N) {
  if (!N.getDomain().empty() || N.getNumOutputs() != 1 || !N.getOutput(0))
    return None;
  FoldFamily Family = getFoldFamily(N.getOpType());
  if (Family == FoldFamily::ShapeOf)
    return foldShapeOf(N);
  if (Family == FoldFamily::Constant) {
    // Normalizes value_int(s)/value_float(s) to a tensor constant.
    if (N.getAttribute("value"))
      return None;
    return getConst(N.getOutput(0));
  }

  // Everything else needs constant inputs.
  SmallVector<Optional<Const>, 4> In;
  for (const Value *V : N.getInputs())
    In.push_back(V ? getConst(V) : None);
  if (Family == FoldFamily::ConstantOfShape)
    return foldConstantOfShape(N, In);
  if (In.empty() || !has(In, 0))
    return None;
  switch (Family) {
  case FoldFamily::Cast: {
    auto To = castTarget(N);
    if (!To)
      return None;
    return convertTo(*In[0], *To);
  }
  case FoldFamily::Layout:
    return foldLayout(N, In);
  case FoldFamily::DataMovement:
    return foldDataMovement(N, In);
  case FoldFamily::Generator:
    return foldGenerator(N, In);
  case FoldFamily::Reduction:
    return foldReduce(N, *In[0]);
  default:
    break;
  }

  // Element-wise operators.
  SmallVector<const Const *, 3> Ptrs;
  for (unsigned I = 0; I < In.size(); ++I) {
    if (!has(In, I))
      return None;
    Ptrs.push_back(In[I].getPointer());
  }
  switch (Family) {
  case FoldFamily::UnaryMath:
    return foldUnaryMath(N.getOpType(), Ptrs);
  case FoldFamily::Arithmetic:
    return foldArithmetic(N, Ptrs);
  case FoldFamily::Comparison:
    return foldComparison(N.getOpType(), Ptrs);
  case FoldFamily::Selection:
    return foldSelection(N.getOpType(), Ptrs);
  default:
    return None;
  }
}

unsigned Folder::sweep(Graph &G) {
  unsigned Folds = 0;
  for (unsigned I = 0; I < G.getNumNodes(); ++I) {
    Node *N = G.getNodes()[I].get();
    for (const Attribute &A : N->getAttributes())
      for (const auto &Sub : A.Gs)
        Folds += sweep(*Sub);
    if (N->getOpType() == "Constant" && N->getAttribute("value"))
      continue;
    Optional<Const> C = fold(*N);
    if (!C)
      continue;
    // Multi-output nodes are never folded (fold() requires one output).
    Value *Out = N->getOutput(0);
    // Later folds read the values back from the stored tensor (getConst):
    // storing rounds or wraps them to the element type (a Cast to uint8 or
    // f16, f32 arithmetic done in double), and they must see what the
    // constant holds, not the wider intermediate.
    Tensor T = C->toTensor();
    G.replaceWithConstant(I, std::move(T));
    Cache.erase(Out);
    ++Folds;
  }
  return Folds;
}

/// The static shape of \p N's first output from its operands, for ops whose
/// ONNX 1.12 inference leaves dims unknown even when everything that decides
/// them is known:
///  - OneHot(indices, depth, values, axis): ONNX never reads depth; the
///    result is indices' shape with depth inserted at axis (GShard/Switch
///    routers one-hot the expert index over E, and the position over the
///    capacity, which exporters compute from the token count).
///  - TopK(X, K, axis): X's shape with K at axis.
///  - Einsum(equation): each result label takes its operand's dim.
Optional<SmallVector<int64_t, 4>> Folder::inferStaticShape(const Node &N) {
  StringRef Op = N.getOpType();
  if (!N.getDomain().empty() || N.getNumOutputs() == 0 || !N.getOutput(0))
    return None;
  auto StaticIn = [&](unsigned I) -> Optional<SmallVector<int64_t, 4>> {
    const Value *V = N.getInput(I);
    if (!V || !V->Type.isStatic())
      return None;
    return V->Type.getStaticShape();
  };
  if (Op == "OneHot") {
    auto Ind = StaticIn(0);
    Optional<Const> Depth = getConst(N.getInput(1));
    if (!Ind || !Depth || Depth->size() != 1)
      return None;
    int64_t D = Depth->isFloat() ? (int64_t)Depth->F[0] : Depth->I[0];
    int64_t Rank = Ind->size() + 1;
    Optional<int64_t> Axis = normAxis(N.getAttrInt("axis", -1), Rank);
    if (D <= 0 || !Axis)
      return None;
    SmallVector<int64_t, 4> S(*Ind);
    S.insert(S.begin() + *Axis, D);
    return S;
  }
  if (Op == "TopK") {
    auto X = StaticIn(0);
    Optional<std::vector<int64_t>> K = getInts(N.getInput(1));
    if (!X || !K || K->size() != 1 || (*K)[0] < 0)
      return None;
    Optional<int64_t> Axis = normAxis(N.getAttrInt("axis", -1), X->size());
    if (!Axis || (*K)[0] > (*X)[*Axis])
      return None;
    SmallVector<int64_t, 4> S(*X);
    S[*Axis] = (*K)[0];
    return S;
  }
  if (Op == "Einsum") {
    const Attribute *Eq = N.getAttribute("equation");
    if (!Eq || Eq->K != Attribute::Kind::String)
      return None;
    std::string E;
    for (char Ch : Eq->S)
      if (Ch != ' ')
        E += Ch;
    StringRef Lhs = E, Rhs;
    std::tie(Lhs, Rhs) = StringRef(E).split("->");
    if (!StringRef(E).contains("->") || StringRef(E).contains("..."))
      return None; // implicit output or ellipsis: ONNX's own rule decides
    SmallVector<StringRef, 4> Terms;
    Lhs.split(Terms, ',');
    if (Terms.size() != N.getNumInputs())
      return None;
    DenseMap<char, int64_t> Size;
    for (unsigned I = 0; I < Terms.size(); ++I) {
      auto S = StaticIn(I);
      if (!S || S->size() != Terms[I].size())
        return None;
      for (unsigned D = 0; D < S->size(); ++D) {
        auto Ins = Size.insert({Terms[I][D], (*S)[D]});
        // Broadcast of a 1 against another size keeps the other.
        if (!Ins.second && Ins.first->second != (*S)[D]) {
          if (Ins.first->second == 1)
            Ins.first->second = (*S)[D];
          else if ((*S)[D] != 1)
            return None;
        }
      }
    }
    SmallVector<int64_t, 4> S;
    for (char L : Rhs) {
      auto It = Size.find(L);
      if (It == Size.end())
        return None;
      S.push_back(It->second);
    }
    return S;
  }
  return None;
}

unsigned Folder::refineShapes(Graph &G) {
  unsigned Refined = 0;
  for (const auto &NP : G.getNodes()) {
    for (const Attribute &A : NP->getAttributes())
      for (const auto &Sub : A.Gs)
        Refined += refineShapes(*Sub);
    // TopK's values and indices share the shape; the other ops have one
    // result.
    unsigned NumOuts = NP->getOpType() == "TopK"
                           ? NP->getNumOutputs()
                           : std::min(1u, NP->getNumOutputs());
    bool Changed = false;
    Optional<SmallVector<int64_t, 4>> S;
    for (unsigned O = 0; O < NumOuts; ++O) {
      Value *Out = NP->getOutput(O);
      if (!Out || Out->Type.isStatic())
        continue;
      if (!S && !(S = inferStaticShape(*NP)))
        break;
      TensorType &T = Out->Type;
      // Only fill what is unknown; a known dim that disagrees is left for
      // the verifier to report.
      if (T.HasShape && T.getRank() != S->size())
        continue;
      if (!T.HasShape) {
        T.HasShape = true;
        T.Dims.assign(S->size(), Dim());
      }
      for (unsigned D = 0; D < S->size(); ++D)
        if (!T.Dims[D].isStatic()) {
          T.Dims[D] = Dim((*S)[D]);
          Changed = true;
        }
    }
    Refined += Changed;
  }
  return Refined;
}

unsigned Folder::bindExpectedCounts(Graph &G, double CapacityFactor,
                                    std::string &First) {
  unsigned Bound = 0;
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    if (N.getOpType() != "NonZero" || !N.getDomain().empty() ||
        !N.getOutput(0) || N.getOutput(0)->Type.isStatic())
      continue;
    const Value *X = N.getInput(0);
    if (!X || !X->Type.isStatic())
      continue;
    unsigned Experts = getRoutingMaskClasses(X);
    if (!Experts)
      continue;
    int64_t Elems = X->Type.getNumElements().getValueOr(0);
    // An expert's even share of the mask's ones (top-k x tokens / E), times
    // the capacity factor, never more than the mask holds.
    int64_t Count = std::min<int64_t>(
        Elems,
        (int64_t)std::ceil((double)Elems / Experts * CapacityFactor - 1e-9));
    TensorType &T = N.getOutput(0)->Type;
    T.HasShape = true;
    T.Dims.assign({Dim((int64_t)X->Type.getRank()), Dim(Count)});
    if (!Bound++) {
      raw_string_ostream OS(First);
      OS << "NonZero '" << N.getName() << "': " << Elems << " / " << Experts
         << " experts x capacity factor " << format("%.3g", CapacityFactor)
         << " = " << Count;
    }
  }
  return Bound;
}

void Folder::eliminateDeadNodes(Graph &G) {
  G.eraseDeadNodes();
  G.eraseUnusedParameters();
}

class FoldShapeArithPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    Folder F(*CU.M);
    Graph &G = CU.M->getGraph();
    // Each round folds what static shapes allow, then lets shape inference
    // turn the new constants into static shapes further down.
    auto FixedPoint = [&]() -> Error {
      for (unsigned Round = 0; Round < 64; ++Round) {
        unsigned Changed = F.sweep(G);
        Changed += F.refineShapes(G);
        if (!Changed)
          break;
        Expected<unsigned> Inferred = inferShapes(*CU.M);
        if (!Inferred)
          return Inferred.takeError();
      }
      return Error::success();
    };
    if (Error E = FixedPoint())
      return E;
    // Index-routed MoE (a NonZero per expert over the routing mask): the
    // planning graph takes the expected tokens per expert so that the
    // experts are costed; the graphs shard emits keep the dim dynamic.
    if (CU.Opts.PlanExpectedCounts) {
      double CF = CU.Opts.MoECapacityFactor.getValueOr(1.0);
      std::string First;
      if (unsigned Bound = F.bindExpectedCounts(G, CF, First)) {
        CU.warn("fold-shape-arith: " + Twine(Bound) +
                " data-dependent dim(s) of MoE routing planned at their "
                "expected size (" +
                First + "; --set moe.capacity_factor=F to change)");
        Expected<unsigned> Inferred = inferShapes(*CU.M);
        if (!Inferred)
          return Inferred.takeError();
        if (Error E = FixedPoint())
          return E;
      }
    }
    F.eliminateDeadNodes(G);
    // Data-dependent shapes (NonZero, Loop outputs, ...) legitimately stay
    // dynamic; say how many and where.
    unsigned Dynamic = 0;
    const Value *First = nullptr;
    for (const auto &N : G.getNodes())
      for (const Value *V : N->getOutputs())
        if (V && !V->Type.isStatic()) {
          ++Dynamic;
          if (!First)
            First = V;
        }
    if (Dynamic) {
      const Node *D = First->getDefiningNode();
      CU.warn("fold-shape-arith: " + Twine(Dynamic) +
              " value(s) keep a non-static shape, first '" + First->getName() +
              "' of " + describeNode(*D));
    }
    return Error::success();
  }
};

} // namespace

std::unique_ptr<Pass> createFoldShapeArithPass() {
  return std::make_unique<FoldShapeArithPass>();
}

} // namespace loom
