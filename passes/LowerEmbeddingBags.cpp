//===- LowerEmbeddingBags.cpp - Pooled lookups written as a Loop -> Gather ===//
//
// torch.onnx.export writes nn.EmbeddingBag as a Loop over the bags: the
// body gathers bag b's offsets (starts[b], ends[b]), slices the flat ids
// [starts[b]:ends[b]], gathers those rows of the table (read from the
// enclosing graph by name), optionally multiplies them by the matching
// slice of per_sample_weights, and reduces them over axis 0 (sum, mean or
// max); the scan output stacks one [dim] bag per iteration. With 2-D ids
// (a fixed bag size L), once bind-symbols and fold-shape-arith have made
// the offsets constants [0, L, 2L, ...], that Loop computes exactly
//
//   Reduce{Sum,Mean,Max}(Gather(table, ids[B, L]) (* w[B, L, 1]), axes=[1])
//
// the form a hand-written DLRM (or nn.Embedding followed by sum/mean) has,
// which the embedding planner (lib/Planner/Embedding.cpp) recognises as a
// lookup of a large table and the sharder emits row-, column- or
// table-wise over dp with the HcomAllToAllV exchange. This pass rewrites
// such a Loop into that form, in place of the Loop, so that the planning
// graph and the graphs shard emits (it replays the front-end passes) agree.
//
// With 1-D ids and an offsets input (TorchRec's and the reference DLRM's
// form: bags of any size), the offsets are data: bag b reads the ids in
// [starts[b], ends[b]) of vectors the Loop reads at the iteration (torch:
// Concat(offsets, [N]) and its Slice [1:]). That Loop computes
//
//   mask[b, n] = starts[b] <= n < ends[b]                       [B, N]
//   sum  = MatMul(mask, Gather(table, ids[N]) (* w[N, 1]))
//   mean = sum / max(count, 1),  max = Where(mask, rows, -inf) reduced
//
// for offsets that are positions (non-negative, as torch requires them);
// the one lookup of all N ids makes the table shardable like the others.
// An empty bag pools to 0 there, as torch defines it (the exported Loop
// gives ONNX Runtime's NaN / -inf for a mean / max over no rows).
//
// Anything else stays a Loop (emitted replicated): a body with any other
// node, constant offsets not of one stride, bounds that are neither
// constants nor static vectors of the enclosing graph, loop-carried
// values, a reduction over another axis or with keepdims, ids read other
// than by the one slice.
//
//===----------------------------------------------------------------------===//
#include "loom/IR/Graph.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Support/DataType.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"
#include <cmath>

using namespace llvm;

namespace loom {
namespace {

/// One recognised bag Loop.
struct BagLoop {
  Node *Loop = nullptr;
  Value *Table = nullptr;   ///< [rows, dim] parameter.
  Value *FlatIds = nullptr; ///< [B * L] ids the body slices.
  Value *FlatWts = nullptr; ///< [B * L] per-sample weights, or null.
  std::string Reduce;       ///< ReduceSum / ReduceMean / ReduceMax.
  int64_t Bags = 0, BagSize = 0;
  /// Bags of any size (1-D ids + offsets): bag b is FlatIds[Starts[b],
  /// Ends[b]) (or [Starts[b], Starts[b] + EndDelta)), bounds read at run
  /// time; BagSize is unused.
  bool Ragged = false;
  Value *Starts = nullptr, *Ends = nullptr;
  int64_t EndDelta = 0;
};

bool isDefault(const Node &N) {
  return N.getDomain().empty() || N.getDomain() == "ai.onnx";
}

/// The node defining \p V when it is \p Op in \p Body's default domain.
Node *defIn(const Value *V, const Graph &Body, StringRef Op) {
  if (!V || V->getGraph() != &Body)
    return nullptr;
  Node *N = V->getDefiningNode();
  return N && isDefault(*N) && N->getOpType() == Op ? N : nullptr;
}

/// The axes of a Reduce/Unsqueeze/Squeeze node: the attribute (older
/// opsets) or the constant second input (newer ones).
Optional<std::vector<int64_t>> getAxes(const Node &N) {
  if (Optional<std::vector<int64_t>> A = N.getAttrInts("axes"))
    return A;
  if (N.getNumInputs() > 1 && N.getInput(1))
    return getConstantInts(N.getInput(1));
  return None;
}

bool hasAxes(const Node &N, ArrayRef<int64_t> Want) {
  Optional<std::vector<int64_t>> A = getAxes(N);
  return A && ArrayRef<int64_t>(*A) == Want;
}

/// A rank-1 static value of the enclosing graph with \p Count elements.
bool isOuterFlat(const Value *V, const Graph &Body, int64_t Count) {
  return V && V->getGraph() != &Body && V->Type.getRank() == 1 &&
         V->Type.isStatic() && V->Type.Dims[0].Size == Count;
}

/// The constant offsets vector a bag's start (or end) reads: [1]-shaped
/// Unsqueeze/Reshape of Gather(offsets, iteration) in the body.
const Value *matchBound(const Value *V, const Graph &Body, const Value *Iter,
                        SmallPtrSetImpl<const Node *> &Used) {
  Node *U = defIn(V, Body, "Unsqueeze");
  if (U && !hasAxes(*U, {0}) && !hasAxes(*U, {-1}))
    return nullptr;
  if (!U) {
    U = defIn(V, Body, "Reshape");
    Optional<std::vector<int64_t>> S =
        U ? getConstantInts(U->getInput(1)) : None;
    if (!S || S->size() != 1 || ((*S)[0] != 1 && (*S)[0] != -1))
      return nullptr;
  }
  Node *G = defIn(U->getInput(0), Body, "Gather");
  if (!G || G->getAttrInt("axis", 0) != 0 || G->getInput(1) != Iter)
    return nullptr;
  const Value *Offsets = G->getInput(0);
  if (!Offsets || Offsets->getGraph() == &Body)
    return nullptr;
  Used.insert(U);
  Used.insert(G);
  return Offsets;
}

/// Where a bag's ids start and end: constant offsets vectors read at the
/// iteration, the end either its own vector (torch: offsets shifted by
/// one) or the start plus a constant bag size (a hand-written body).
struct BagBounds {
  const Value *Starts = nullptr, *Ends = nullptr;
  int64_t EndDelta = 0;
  bool operator==(const BagBounds &O) const {
    return Starts == O.Starts && Ends == O.Ends && EndDelta == O.EndDelta;
  }
};

/// Slice(Flat, start, end[, axes=[0][, steps=[1]]]) of an outer rank-1
/// value; sets (or checks against) the bounds it reads.
Value *matchBagSlice(const Value *V, const Graph &Body, const Value *Iter,
                     BagBounds &Bounds, SmallPtrSetImpl<const Node *> &Used) {
  Node *S = defIn(V, Body, "Slice");
  if (!S || S->getNumInputs() < 3)
    return nullptr;
  if (S->getNumInputs() > 3 && S->getInput(3)) {
    Optional<std::vector<int64_t>> Ax = getConstantInts(S->getInput(3));
    if (!Ax ||
        (*Ax != std::vector<int64_t>{0} && *Ax != std::vector<int64_t>{-1}))
      return nullptr;
  }
  if (S->getNumInputs() > 4 && S->getInput(4)) {
    Optional<std::vector<int64_t>> St = getConstantInts(S->getInput(4));
    if (!St || *St != std::vector<int64_t>{1})
      return nullptr;
  }
  BagBounds B;
  B.Starts = matchBound(S->getInput(1), Body, Iter, Used);
  if (Node *A = defIn(S->getInput(2), Body, "Add")) {
    for (unsigned K = 0; K < 2; ++K) {
      Optional<std::vector<int64_t>> C =
          A->getInput(1 - K) ? getConstantInts(A->getInput(1 - K)) : None;
      if (A->getInput(K) == S->getInput(1) && C && C->size() == 1 &&
          (*C)[0] > 0) {
        B.EndDelta = (*C)[0];
        Used.insert(A);
        if (A->getInput(1 - K)->getGraph() == &Body)
          Used.insert(A->getInput(1 - K)->getDefiningNode());
      }
    }
  } else {
    B.Ends = matchBound(S->getInput(2), Body, Iter, Used);
  }
  if (!B.Starts || (!B.Ends && !B.EndDelta) ||
      (Bounds.Starts && !(Bounds == B)))
    return nullptr;
  Bounds = B;
  Used.insert(S);
  return S->getInput(0);
}

/// Whether \p V is (a Cast/Identity of) the body's condition input or a
/// non-zero constant: the loop runs all its trip count.
bool isAlwaysTrue(const Value *V, const Graph &Body,
                  SmallPtrSetImpl<const Node *> &Used) {
  if (V == Body.getInputs()[1])
    return true;
  if (Optional<std::vector<int64_t>> C = getConstantInts(V)) {
    if (C->size() == 1 && (*C)[0] != 0) {
      if (V->getGraph() == &Body)
        Used.insert(V->getDefiningNode());
      return true;
    }
    return false;
  }
  Node *N = defIn(V, Body, "Cast");
  if (!N)
    N = defIn(V, Body, "Identity");
  if (!N || !isAlwaysTrue(N->getInput(0), Body, Used))
    return false;
  Used.insert(N);
  return true;
}

/// A vector of bag bounds read at run time: a rank-1 static integer value
/// of the enclosing graph with at least \p B elements.
bool isOuterBounds(const Value *V, const Graph &Body, int64_t B) {
  return V && V->getGraph() != &Body && V->Type.getRank() == 1 &&
         V->Type.isStatic() && V->Type.Dims[0].Size >= B &&
         isInteger(V->Type.Elem);
}

/// The bags of any size of 1-D ids + offsets: the bounds are data, read
/// at the iteration from outer vectors (torch: Concat(offsets, [N]) and
/// its Slice [1:]), or the start plus a constant size.
bool matchRaggedBounds(const BagBounds &Bounds, const Graph &Body, int64_t N,
                       BagLoop &R) {
  int64_t B = R.Bags;
  if (!isOuterFlat(R.FlatIds, Body, N) ||
      (R.FlatWts && !isOuterFlat(R.FlatWts, Body, N)) ||
      !isOuterBounds(Bounds.Starts, Body, B) ||
      (Bounds.Ends && !isOuterBounds(Bounds.Ends, Body, B)))
    return false;
  R.Ragged = true;
  R.Starts = const_cast<Value *>(Bounds.Starts);
  R.Ends = const_cast<Value *>(Bounds.Ends);
  // Slice clamps the end at N: a larger size reads the same ids (and
  // start + size cannot overflow once the size is at most N).
  R.EndDelta = std::min(Bounds.EndDelta, N);
  return true;
}

/// Whether \p L is a torch-style EmbeddingBag Loop of fixed bag size;
/// fills \p R.
bool matchBagLoop(Node &L, BagLoop &R) {
  const Attribute *BodyA = L.getAttribute("body");
  if (!isDefault(L) || L.getOpType() != "Loop" || !BodyA ||
      BodyA->Gs.size() != 1 || L.getNumInputs() != 2 ||
      L.getNumOutputs() != 1 || !L.getOutput(0))
    return false;
  const Graph &Body = *BodyA->Gs[0];
  if (Body.getInputs().size() != 2 || Body.getOutputs().size() != 2)
    return false;
  Optional<std::vector<int64_t>> Trip =
      L.getInput(0) ? getConstantInts(L.getInput(0)) : None;
  if (!Trip || Trip->size() != 1 || (*Trip)[0] < 1)
    return false;
  if (L.getInput(1)) {
    Optional<std::vector<int64_t>> C = getConstantInts(L.getInput(1));
    if (!C || C->size() != 1 || (*C)[0] == 0)
      return false;
  }
  SmallPtrSet<const Node *, 16> Used;
  if (!isAlwaysTrue(Body.getOutputs()[0], Body, Used))
    return false;

  // The pooled bag: Reduce(rows, axes=[0], keepdims=0).
  const Value *Iter = Body.getInputs()[0];
  Node *Red = nullptr;
  for (StringRef Op : {"ReduceSum", "ReduceMean", "ReduceMax"})
    if (!Red)
      Red = defIn(Body.getOutputs()[1], Body, Op);
  if (!Red || Red->getAttrInt("keepdims", 1) != 0 || !hasAxes(*Red, {0}))
    return false;
  Used.insert(Red);

  // rows = Gather(table, Slice(ids)) [* Unsqueeze(Slice(weights), 1)].
  const Value *Rows = Red->getInput(0);
  const Value *Wts = nullptr;
  if (Node *M = defIn(Rows, Body, "Mul")) {
    for (unsigned K = 0; K < 2 && !Wts; ++K) {
      Node *G = defIn(M->getInput(K), Body, "Gather");
      Node *U = defIn(M->getInput(1 - K), Body, "Unsqueeze");
      if (G && U && (hasAxes(*U, {1}) || hasAxes(*U, {-1}))) {
        Rows = G->getOutput(0);
        Wts = U->getInput(0);
        Used.insert(M);
        Used.insert(U);
      }
    }
    if (!Wts)
      return false;
  }
  Node *G = defIn(Rows, Body, "Gather");
  if (!G || G->getAttrInt("axis", 0) != 0)
    return false;
  Value *Table = G->getInput(0);
  if (!Table || !Table->isParameter() || Table->Type.getRank() != 2 ||
      !Table->Type.isStatic() || !isFloatingPoint(Table->Type.Elem))
    return false;
  Used.insert(G);
  BagBounds Bounds;
  Value *Flat = matchBagSlice(G->getInput(1), Body, Iter, Bounds, Used);
  Value *FlatW = nullptr;
  if (!Flat || (Wts && !(FlatW = matchBagSlice(Wts, Body, Iter, Bounds, Used))))
    return false;
  // The body does nothing else (constants of the axes aside).
  for (const auto &N : Body.getNodes())
    if (!Used.count(N.get()) &&
        !(isDefault(*N) && N->getOpType() == "Constant"))
      return false;

  int64_t B = (*Trip)[0];
  if (Flat->Type.getRank() != 1 || !Flat->Type.isStatic())
    return false;
  int64_t N = Flat->Type.Dims[0].Size;
  if (!isInteger(Flat->Type.Elem) ||
      (FlatW && FlatW->Type.Elem != Table->Type.Elem))
    return false;
  Optional<std::vector<int64_t>> S = getConstantInts(Bounds.Starts);
  Optional<std::vector<int64_t>> E =
      Bounds.Ends ? getConstantInts(Bounds.Ends) : None;
  R.Loop = &L;
  R.Table = Table;
  R.FlatIds = Flat;
  R.FlatWts = FlatW;
  R.Reduce = Red->getOpType().str();
  R.Bags = B;
  // Bounds that are data (1-D ids + an offsets input): bags of any size.
  if (!S || (Bounds.Ends && !E))
    return matchRaggedBounds(Bounds, Body, N, R);

  // Offsets of one stride L over all N ids: bag b is ids[b L, (b + 1) L).
  // Bounds are checked against N before any product (no overflow on
  // hostile offsets).
  if (N < B || N % B)
    return false;
  int64_t Len = N / B;
  if (!S || (int64_t)S->size() < B ||
      (Bounds.Ends && (!E || (int64_t)E->size() < B)) ||
      (!Bounds.Ends && Bounds.EndDelta != Len))
    return false;
  for (int64_t K = 0; K < B; ++K)
    if ((*S)[K] != K * Len || (Bounds.Ends && (*E)[K] != (K + 1) * Len))
      return false;
  if (!isOuterFlat(Flat, Body, N) || (FlatW && !isOuterFlat(FlatW, Body, N)))
    return false;
  R.BagSize = Len;
  return true;
}

/// Rewrites the recognised Loops. The IR appends nodes only, so every node
/// from the first such Loop on is taken out and appended again in order,
/// each Loop replaced by its Gather + Reduce nodes, inputs remapped.
class Rewriter {
public:
  Rewriter(Model &M) : G(M.getGraph()), Opset(M.getOpsetVersion("")) {}

  void run(ArrayRef<BagLoop> Bags) {
    DenseMap<const Node *, const BagLoop *> ByLoop;
    for (const BagLoop &R : Bags)
      ByLoop[R.Loop] = &R;
    unsigned First = 0;
    while (!ByLoop.count(G.getNodes()[First].get()))
      ++First;
    // Saved holds move-only attributes: kept by pointer.
    std::vector<std::unique_ptr<Saved>> Tail;
    for (unsigned I = First; I < G.getNumNodes(); ++I) {
      Node &N = *G.getNodes()[I];
      Tail.push_back(std::make_unique<Saved>());
      Saved &S = *Tail.back();
      S.Bag = ByLoop.lookup(&N);
      S.Op = N.getOpType().str();
      S.Domain = N.getDomain().str();
      S.Name = N.getName().str();
      S.In.assign(N.getInputs().begin(), N.getInputs().end());
      S.Outs.assign(N.getOutputs().begin(), N.getOutputs().end());
      for (Value *V : S.Outs)
        if (V)
          Taken.insert(V->getName());
      if (!S.Bag)
        S.Attrs = N.takeAttributes();
      S.Layer = N.Layer;
      S.Stage = N.Stage;
      S.DeviceClass = N.DeviceClass;
      S.DocString = N.DocString;
    }
    DenseSet<const Node *> Out;
    for (unsigned I = First; I < G.getNumNodes(); ++I)
      Out.insert(G.getNodes()[I].get());
    G.eraseNodes([&](const Node &N) { return Out.count(&N); });

    for (const std::unique_ptr<Saved> &SP : Tail) {
      Saved &S = *SP;
      if (S.Bag) {
        Map[S.Outs[0]] = rewrite(*S.Bag, S.Name, S.Outs[0]->getName());
        continue;
      }
      SmallVector<Value *, 4> In;
      for (Value *V : S.In)
        In.push_back(map(V));
      std::vector<std::string> Names;
      for (Value *V : S.Outs)
        Names.push_back(V ? V->getName().str() : std::string());
      Node *N = cantFail(G.addNode(S.Op, S.Domain, S.Name, In, Names));
      N->setAttributes(std::move(S.Attrs));
      N->Layer = S.Layer;
      N->Stage = S.Stage;
      N->DeviceClass = S.DeviceClass;
      N->DocString = S.DocString;
      for (unsigned K = 0; K < S.Outs.size(); ++K)
        if (S.Outs[K]) {
          N->getOutput(K)->Type = S.Outs[K]->Type;
          Map[S.Outs[K]] = N->getOutput(K);
        }
      // Bodies of re-appended control flow read outer values by pointer.
      for (const Attribute &A : N->getAttributes())
        for (const auto &Sub : A.Gs)
          remapReads(*Sub);
    }
    SmallVector<Value *, 4> Outs;
    for (Value *V : G.getOutputs())
      Outs.push_back(map(V));
    G.setOutputs(Outs);
  }

private:
  struct Saved {
    const BagLoop *Bag = nullptr;
    std::string Op, Domain, Name, DeviceClass, DocString;
    SmallVector<Value *, 4> In, Outs;
    std::vector<Attribute> Attrs;
    int Layer = -1, Stage = -1;
  };
  Graph &G;
  int64_t Opset;
  std::string Prefix;
  DenseMap<Value *, Value *> Map;
  StringSet<> Taken;

  Value *map(Value *V) const {
    auto It = Map.find(V);
    return It == Map.end() ? V : It->second;
  }

  void remapReads(Graph &Sub) {
    for (const auto &N : Sub.getNodes()) {
      for (unsigned I = 0; I < N->getNumInputs(); ++I)
        N->setInput(I, map(N->getInput(I)));
      for (const Attribute &A : N->getAttributes())
        for (const auto &Deeper : A.Gs)
          remapReads(*Deeper);
    }
    SmallVector<Value *, 4> Outs;
    for (Value *V : Sub.getOutputs())
      Outs.push_back(map(V));
    Sub.setOutputs(Outs);
  }

  /// The Gather + Reduce form of \p R; the pooled value takes the Loop
  /// result's name \p OutName (graph outputs keep their names).
  Value *rewrite(const BagLoop &R, StringRef LoopName, StringRef OutName) {
    Prefix = LoopName.empty() ? OutName.str() : LoopName.str();
    if (R.Ragged)
      return rewriteRagged(R, OutName);
    int64_t B = R.Bags, L = R.BagSize, D = R.Table->Type.Dims[1].Size;
    DataType Elem = R.Table->Type.Elem;
    Value *Ids = as2D(map(R.FlatIds), B, L, "ids");
    Value *Rows =
        add("Gather", {R.Table, Ids}, "rows", TensorType(Elem, {B, L, D}));
    setInt(Rows->getDefiningNode(), "axis", 0);
    if (R.FlatWts) {
      Value *W2 = as2D(map(R.FlatWts), B, L, "weights");
      Value *W3 = add("Reshape", {W2, constant("weights_shape", {B, L, 1})},
                      "weights3", TensorType(Elem, {B, L, 1}));
      Rows = add("Mul", {Rows, W3}, "weighted", TensorType(Elem, {B, L, D}));
    }
    // Axes are an input from opset 13 (ReduceSum) or 18 (Mean, Max).
    bool AxesIn = Opset >= (R.Reduce == "ReduceSum" ? 13 : 18);
    SmallVector<Value *, 2> In{Rows};
    if (AxesIn)
      In.push_back(constant("axes", {1}));
    Node *Red = cantFail(
        G.addNode(R.Reduce, "", Prefix + "/pooled", In, {OutName.str()}));
    Red->getOutput(0)->Type = TensorType(Elem, {B, D});
    if (!AxesIn)
      setInts(Red, "axes", {1});
    setInt(Red, "keepdims", 0);
    return Red->getOutput(0);
  }

  /// Bags of any size: the N ids' rows, one lookup of the table,
  /// pooled by a [B, N] 0/1 membership mask (pos in [start, end)):
  ///   sum  = MatMul(mask, rows)
  ///   mean = sum / max(count, 1)
  ///   max  = Where(count > 0, ReduceMax(Where(mask, rows, -inf), 1), 0)
  /// An empty bag pools to 0, as torch defines it.
  Value *rewriteRagged(const BagLoop &R, StringRef OutName) {
    int64_t B = R.Bags, N = R.FlatIds->Type.Dims[0].Size,
            D = R.Table->Type.Dims[1].Size;
    DataType Elem = R.Table->Type.Elem;
    TensorType BN(DataType::Bool, {B, N}), FBN(Elem, {B, N}), B1(Elem, {B, 1}),
        BD(Elem, {B, D});
    Value *Rows = add("Gather", {R.Table, map(R.FlatIds)}, "rows",
                      TensorType(Elem, {N, D}));
    setInt(Rows->getDefiningNode(), "axis", 0);
    if (R.FlatWts) {
      Value *W =
          add("Reshape", {map(R.FlatWts), constant("weights_shape", {N, 1})},
              "weights_col", TensorType(Elem, {N, 1}));
      Rows = add("Mul", {Rows, W}, "weighted", TensorType(Elem, {N, D}));
    }
    // Bag b's bounds, [B, 1]: element b of the vectors the body read.
    std::vector<int64_t> Idx(B), Pos(N);
    for (int64_t K = 0; K < B; ++K)
      Idx[K] = K;
    for (int64_t K = 0; K < N; ++K)
      Pos[K] = K;
    TensorType I64B1(DataType::Int64, {B, 1});
    Value *Bag = constant("bag_index", Idx, {B, 1});
    Value *Start = add("Gather", {map(R.Starts), Bag}, "starts", I64B1);
    Value *End = R.Ends
                     ? add("Gather", {map(R.Ends), Bag}, "ends", I64B1)
                     : add("Add", {Start, constant("bag_size", {R.EndDelta})},
                           "ends", I64B1);
    Value *Positions = constant("positions", Pos, {1, N});
    Value *Before = add("Less", {Positions, Start}, "before", BN);
    Value *From = add("Not", {Before}, "from", BN);
    Value *Upto = add("Less", {Positions, End}, "upto", BN);
    Value *In = add("And", {From, Upto}, "in_bag", BN);
    Value *Mask = add("Cast", {In}, "mask", FBN);
    setInt(Mask->getDefiningNode(), "to", (int64_t)Elem);
    if (R.Reduce == "ReduceMax")
      return raggedMax(R, OutName, Rows, In, Mask);
    bool Sum1 = R.Reduce == "ReduceSum";
    Value *Sum = add("MatMul", {Mask, Rows}, Sum1 ? "pooled" : "sum", BD,
                     Sum1 ? OutName : StringRef());
    if (R.Reduce == "ReduceSum")
      return Sum;
    Value *Count = count(Mask, B1);
    Value *Div = add("Max", {Count, scalar("one", Elem, 1.0)}, "divisor", B1);
    return add("Div", {Sum, Div}, "pooled", BD, OutName);
  }

  Value *raggedMax(const BagLoop &R, StringRef OutName, Value *Rows, Value *In,
                   Value *Mask) {
    int64_t B = R.Bags, N = R.FlatIds->Type.Dims[0].Size,
            D = R.Table->Type.Dims[1].Size;
    DataType Elem = R.Table->Type.Elem;
    Value *In3 = add("Reshape", {In, constant("mask_shape", {B, N, 1})},
                     "in_bag3", TensorType(DataType::Bool, {B, N, 1}));
    Value *Rows3 = add("Reshape", {Rows, constant("rows_shape", {1, N, D})},
                       "rows3", TensorType(Elem, {1, N, D}));
    Value *Masked =
        add("Where", {In3, Rows3, scalar("lowest", Elem, -INFINITY)}, "masked",
            TensorType(Elem, {B, N, D}));
    bool AxesIn = Opset >= 18;
    SmallVector<Value *, 2> Ins{Masked};
    if (AxesIn)
      Ins.push_back(constant("axes", {1}));
    Value *Max = add("ReduceMax", Ins, "max", TensorType(Elem, {B, D}));
    if (!AxesIn)
      setInts(Max->getDefiningNode(), "axes", {1});
    setInt(Max->getDefiningNode(), "keepdims", 0);
    Value *Count = count(Mask, TensorType(Elem, {B, 1}));
    Value *Some = add("Less", {scalar("zero", Elem, 0.0), Count}, "nonempty",
                      TensorType(DataType::Bool, {B, 1}));
    return add("Where", {Some, Max, scalar("empty", Elem, 0.0)}, "pooled",
               TensorType(Elem, {B, D}), OutName);
  }

  /// Ids per bag, [B, 1].
  Value *count(Value *Mask, TensorType T) {
    bool AxesIn = Opset >= 13;
    SmallVector<Value *, 2> Ins{Mask};
    if (AxesIn)
      Ins.push_back(constant("count_axes", {1}));
    Value *C = add("ReduceSum", Ins, "count", std::move(T));
    if (!AxesIn)
      setInts(C->getDefiningNode(), "axes", {1});
    setInt(C->getDefiningNode(), "keepdims", 1);
    return C;
  }

  /// A Constant node named Prefix/What holding \p T.
  Value *constantOf(StringRef What, Tensor T) {
    std::string Name = fresh(Prefix + "/" + What);
    Node *N = cantFail(G.addNode("Constant", "", Name, {}, {Name}));
    N->getOutput(0)->Type = T.Type;
    Attribute A;
    A.Name = "value";
    A.K = Attribute::Kind::Tensor;
    A.Ts.push_back(std::move(T));
    N->addAttribute(std::move(A));
    return N->getOutput(0);
  }

  Value *scalar(StringRef What, DataType Elem, double V) {
    return constantOf(What, Tensor::makeFromDoubles(Elem, {}, {V}));
  }

  std::string fresh(const Twine &Base) {
    std::string N = Base.str();
    for (unsigned K = 1; G.lookup(N) || Taken.count(N); ++K)
      N = (Base + "_" + Twine(K)).str();
    return N;
  }

  /// A node named Prefix/What; its output takes \p Out when given (the
  /// pooled result keeps the Loop output's name), the node's name if not.
  Value *add(StringRef Op, ArrayRef<Value *> In, StringRef What, TensorType T,
             StringRef Out = "") {
    std::string Name = fresh(Prefix + "/" + What);
    Node *N =
        cantFail(G.addNode(Op, "", Name, In, {Out.empty() ? Name : Out.str()}));
    N->getOutput(0)->Type = std::move(T);
    return N->getOutput(0);
  }

  Value *constant(StringRef What, ArrayRef<int64_t> Vals,
                  ArrayRef<int64_t> Shape = {}) {
    std::vector<int64_t> S(Shape.begin(), Shape.end());
    if (S.empty())
      S.push_back((int64_t)Vals.size());
    return constantOf(What, Tensor::makeInt64(S, Vals));
  }

  static void setInt(Node *N, StringRef Name, int64_t I) {
    Attribute A;
    A.Name = Name.str();
    A.K = Attribute::Kind::Int;
    A.I = I;
    N->addAttribute(std::move(A));
  }

  static void setInts(Node *N, StringRef Name, ArrayRef<int64_t> Is) {
    Attribute A;
    A.Name = Name.str();
    A.K = Attribute::Kind::Ints;
    A.Is.assign(Is.begin(), Is.end());
    N->addAttribute(std::move(A));
  }

  /// \p Flat as [B, L]: the 2-D value the exporter flattened when it is
  /// one (torch's Reshape(ids, [-1])), so the lookup reads the per-sample
  /// ids; a Reshape otherwise.
  Value *as2D(Value *Flat, int64_t B, int64_t L, StringRef What) {
    if (Node *R = Flat->getDefiningNode())
      if (isDefault(*R) && R->getOpType() == "Reshape" && R->getInput(0)) {
        const TensorType &T = R->getInput(0)->Type;
        if (T.isStatic() && T.getRank() == 2 && T.Dims[0].Size == B &&
            T.Dims[1].Size == L)
          return R->getInput(0);
      }
    return add("Reshape", {Flat, constant((What + "_shape").str(), {B, L})},
               (What + "2d").str(), TensorType(Flat->Type.Elem, {B, L}));
  }
};

/// Why a Loop whose body gathers rows of a table (a 2-D parameter) was
/// not proven a pooled lookup; None for other nodes.
Optional<std::string> whyNotBag(const Node &L) {
  const Attribute *BodyA = L.getAttribute("body");
  if (!isDefault(L) || L.getOpType() != "Loop" || !BodyA ||
      BodyA->Gs.size() != 1)
    return None;
  const Graph &Body = *BodyA->Gs[0];
  const Value *Table = nullptr;
  for (const auto &N : Body.getNodes())
    if (isDefault(*N) && N->getOpType() == "Gather" && N->getInput(0) &&
        N->getInput(0)->isParameter() && N->getInput(0)->Type.getRank() == 2)
      Table = N->getInput(0);
  if (!Table)
    return None;
  std::string Why = "Loop '" + L.getName().str() + "' gathers rows of '" +
                    Table->getName().str() + "' but stays a Loop: ";
  if (L.getNumInputs() < 1 || !L.getInput(0) || !getConstantInts(L.getInput(0)))
    return Why + "its trip count is not a constant (bind the batch and "
                 "ids dims with --batch / --dim)";
  for (const auto &N : Body.getNodes())
    if (isDefault(*N) && N->getOpType() == "Slice" && N->getInput(0) &&
        N->getInput(0)->getGraph() != &Body && !N->getInput(0)->Type.isStatic())
      return Why + "the ids it slices, '" + N->getInput(0)->getName().str() +
             "', have no static shape (bind their dims with --dim)";
  return Why + "its body is not one slice of the ids per iteration, one "
               "lookup of the table and a sum, mean or max over the rows "
               "with nothing carried between iterations, or its constant "
               "offsets are not of one stride over all the ids";
}

class LowerEmbeddingBagsPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    Graph &G = CU.M->getGraph();
    std::vector<BagLoop> Bags;
    for (const auto &N : G.getNodes()) {
      BagLoop R;
      if (matchBagLoop(*N, R))
        Bags.push_back(R);
      else if (Optional<std::string> Why = whyNotBag(*N))
        CU.warn("lower-embedding-bags: " + *Why +
                " (not a pooled lookup it can prove; the table stays "
                "replicated)");
    }
    if (Bags.empty())
      return Error::success();
    std::string First = Bags[0].Loop->getName().str();
    Rewriter(*CU.M).run(Bags);
    // The nodes the Loops alone read (offset arithmetic, flattened ids).
    G.eraseDeadNodes();
    // fold-shape-arith left the Loops' outputs with unknown dims, and
    // everything computed from them (torch.cat of the pooled bags) too:
    // re-infer so that no stale dim survives the rewrite.
    if (Error E = verifyGraph(G))
      return E;
    Expected<unsigned> Inferred = inferShapes(*CU.M);
    if (!Inferred)
      return Inferred.takeError();
    size_t Ragged = count_if(Bags, [](const BagLoop &R) { return R.Ragged; });
    CU.warn("lower-embedding-bags: " + Twine(Bags.size()) +
            " Loop(s) over bags (" + Twine(Bags.size() - Ragged) +
            " of fixed size, " + Twine(Ragged) +
            " of any size: 1-D ids + offsets), first '" + First +
            "', rewritten to Gather + Reduce (static shapes, tables "
            "shardable)");
    return verifyGraph(G);
  }
};

} // namespace

std::unique_ptr<Pass> createLowerEmbeddingBagsPass() {
  return std::make_unique<LowerEmbeddingBagsPass>();
}

} // namespace loom
