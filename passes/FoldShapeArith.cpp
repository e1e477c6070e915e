//===- FoldShapeArith.cpp - Fold shape arithmetic into constants ----------===//
//
// Exporters compute shapes at run time: Shape -> Gather -> Unsqueeze ->
// Concat -> Reshape, ConstantOfShape, Range, Expand, Where on shapes, causal
// masks from Trilu... Once bind-symbols and infer-shapes have made shapes
// static, these are constants. This pass evaluates them (small tensors only:
// FoldLimit elements, so masks of long sequences stay as computations),
// reruns ONNX shape inference so that Reshape/Expand targets that became
// constant give static result shapes, repeats to a fixed point, and removes
// what became dead. The evaluation kernels live in ShapeArithKernels.cpp,
// except those of the ops with opset-dependent operands (below), which are
// Folder members here.
//
// Opset-dependent operands (Unsqueeze/Squeeze/ReduceSum axes, Slice bounds)
// are read per the model's default-domain opset.
//
//===----------------------------------------------------------------------===//
#include "ShapeArithKernels.h"
#include "loom/Analysis/Experts.h"
#include "loom/IR/NodeLabel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>

using namespace llvm;

namespace loom {
namespace {

using namespace shapearith;

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
