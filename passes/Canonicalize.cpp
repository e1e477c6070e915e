//===- Canonicalize.cpp - One form whatever the exporter wrote ------------===//
//
// Exporters write one model in several ways; recognition (detect-layers,
// fused kernels, experts) should see one. Each rewrite here computes
// exactly what the graph computed (the emitted graphs are run in ONNX
// Runtime against the original), and each strictly shrinks the graph, turns
// a Div into a Mul, turns a Squeeze into an Identity that the next round
// bypasses, or removes an Einsum or MatMul over a stack (which no rewrite
// makes) or a ReduceSum over one (which only those make; CanonicalizeStacks.
// cpp), so the sweep reaches a fixed point; it is also bounded (MaxRounds)
// so that no input can make it loop.
//
//  - deduplicated weights: torch.onnx.export merges parameters that hold
//    equal values (a fresh nn.TransformerEncoder deep-copies its layer, so
//    every layer's weights are equal; every LayerNorm weight is ones) into
//    one initializer read through `Identity` nodes named after the other
//    parameters. Each such Identity of a parameter becomes a parameter of
//    its own again (same data, the Identity's name): the layers own their
//    weights as in the model, whether the exporter shared, deduplicated or
//    copied them. A weight read directly by two layers (tied embeddings)
//    stays shared: that is the model's own sharing.
//  - weights written as `Constant` nodes (paddle2onnx and tf2onnx store
//    every weight that way; torch.onnx writes initializers): a Constant
//    holding a floating-point tensor of two or more elements, read as a
//    weight (a matmul's or convolution's weight or bias, a norm's scale or
//    bias, PRelu's slope, the bias Added to a matmul or convolution),
//    becomes a parameter, as the initializer holding the same tensor
//    would be, so weights count, shard and train alike however the
//    exporter stored them. Other constants stay: one-element ones (scales,
//    epsilons), what fold-shape-arith folded from the batch and sequence
//    (masks, rotary tables, the zeros an index_add starts from), and
//    constants read as a weight only by nodes with no data-dependent
//    input (Hugging Face's computed rotary tables, `inv_freq @ positions`
//    with the positions folded from a Range): data, not weights.
//  - the converse: initializers that are data, not parameters, become
//    `Constant` nodes before their first reader, as torch writes them
//    (onnx.helper code stores every constant as an initializer, and they
//    counted as parameters and memory there only). A parameter is a
//    tensor that trains: integer and boolean tensors never do; a float
//    one is data when no node reads it as a weight and it is one element
//    (a scale, an epsilon) or an additive mask (0 and <= -1e4), and when
//    it only feeds table work (HF's rotary inv_freq, a buffer, times the
//    positions: one fp32 "parameter" cost a gradient bucket of its own,
//    +25 % step on a small LLaMA against its tables-as-data twin). This runs
//    once, before the sweep, so a helper writing's scale is a Constant
//    for the Div rewrite and its Where condition makes a Constant mask.
//  - other `Identity` nodes are bypassed (unless a graph output, or read
//    by name from a Loop/If/Scan body).
//  - `Div(x, c)` with c a constant scalar 2^k becomes `Mul(x, 2^-k)` (the
//    scaling of attention scores is written either way; dividing by a
//    power of two and multiplying by its reciprocal round identically).
//  - `Transpose(Transpose(x, p), q)` becomes `Transpose(x, p . q)`, and
//    disappears when that is the identity permutation.
//  - `Reshape(Reshape(x, s1), s2)` becomes `Reshape(x, s2)` when s2 is a
//    constant that copies no dim from its input (no 0 entry, or
//    allowzero=1); a Reshape to its input's own static shape disappears.
//  - the families in files of their own (CanonicalizeRewrites.h): Gemm as
//    MatMul + Add and the bias after the product (CanonicalizeLinear.cpp),
//    constant Where masks as additive ones (CanonicalizeMasks.cpp), equal
//    Slices as one Split (CanonicalizeSplits.cpp), and experts stacked,
//    weighted and summed (by ReduceSum, Einsum or MatMul) as an Add chain,
//    with Squeeze(Unsqueeze) pairs dropped (CanonicalizeStacks.cpp).
//
// Every rewrite keeps the type of every value that survives it (a merged
// Transpose or Reshape makes the outer node's own result; a given-back
// weight has its Identity's type; a Mul by 2^-k has the Div's shape), so
// no dim goes stale here. What can be stale comes from before: a dim left
// unknown by a pass that rewrote the graph (lower-embedding-bags replaces a
// Loop, whose outputs' readers were inferred when its dims were unknown).
// So once the rewrites settle, ONNX shape inference runs again whenever
// any value's shape is not static, and no dim inferred before a rewrite
// survives it. (Running it after every round instead cost as much as the
// rest of the pass on a 4-block LLaMA, for nothing.)
//
//===----------------------------------------------------------------------===//
#include "CanonicalizeRewrites.h"
#include "loom/IR/Graph.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Support/DataType.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>

using namespace llvm;

namespace loom {
namespace {

/// Rounds of rewrites before giving up on a fixed point (each round
/// removes nodes, so real graphs settle in two or three).
constexpr unsigned MaxRounds = 16;

struct Counts {
  unsigned Params = 0, Identities = 0, Divs = 0, Transposes = 0, Reshapes = 0,
           Constants = 0, Gemms = 0, BiasSwaps = 0, Masks = 0, Splits = 0,
           Stacks = 0, StackProducts = 0, Squeezes = 0, Rounds = 0,
           Reinferred = 0, DataParams = 0;
  unsigned total() const {
    return Params + Identities + Divs + Transposes + Reshapes + Constants +
           Gemms + BiasSwaps + Masks + Splits + Stacks + StackProducts +
           Squeezes;
  }
};

/// Values read by a node of a subgraph (a Loop/If/Scan body): they may be
/// outer values read by name, which a rewrite must not rename away.
static void collectSubgraphReads(const Graph &G, DenseSet<const Value *> &Out,
                                 bool Inside) {
  for (const auto &N : G.getNodes()) {
    if (Inside)
      for (const Value *V : N->getInputs())
        if (V)
          Out.insert(V);
    for (const Attribute &A : N->getAttributes())
      for (const auto &Sub : A.Gs)
        collectSubgraphReads(*Sub, Out, true);
  }
}

/// The single float value of a constant with one element, if any.
static Optional<double> getScalarFloat(const Value *V) {
  if (!V || !isConstantNodeOutput(V))
    return None;
  Optional<std::vector<double>> F = getConstantFloats(V);
  if (!F || F->size() != 1 || !isFloatingPoint(V->Type.Elem))
    return None;
  return F->front();
}

class Canonicalizer {
public:
  Canonicalizer(Graph &G, Counts &C, int64_t Opset)
      : G(G), C(C), Opset(Opset) {}

  /// One sweep of every rewrite; returns whether anything changed.
  bool sweep() {
    Users = buildUseMap(G);
    DataDep = findDataDependent(G);
    SubgraphReads.clear();
    collectSubgraphReads(G, SubgraphReads, false);
    Replace.clear();
    Masks.clear();
    unsigned Before = C.total();
    for (unsigned I = 0; I < G.getNumNodes(); ++I) {
      Node &N = *G.getNodes()[I];
      StringRef Op = N.getOpType();
      if (!N.getDomain().empty() && N.getDomain() != "ai.onnx")
        continue;
      if (Op == "Identity")
        rewriteIdentity(N);
      else if (Op == "Constant")
        rewriteConstant(N);
      else if (Op == "Div")
        rewriteDiv(N);
      else if (Op == "Transpose")
        rewriteTranspose(N);
      else if (Op == "Reshape")
        rewriteReshape(N);
      else if (Op == "Gemm" || Op == "Add" || Op == "Where" || Op == "Slice" ||
               Op == "Split" || Op == "ReduceSum" || Op == "Einsum" ||
               Op == "MatMul" || Op == "Squeeze")
        rewriteFamily(Op, I);
    }
    applyReplacements();
    G.eraseNodes([](const Node &N) {
      return N.getNumOutputs() == 1 && !N.getOutput(0);
    });
    G.eraseDeadNodes();
    return C.total() != Before;
  }

private:
  Graph &G;
  Counts &C;
  int64_t Opset;
  MaskCache Masks;
  UseMap Users;
  /// The values that depend on the graph's inputs, as of the sweep's start
  /// (a node a rewrite makes joins at the next sweep).
  DenseSet<const Value *> DataDep;
  /// The values computed from Constants alone (rewriteDataInitializers).
  DenseSet<const Value *> ConstOnly;
  DenseSet<const Value *> SubgraphReads;
  /// Uses of a value to redirect to another (bypassed no-ops).
  DenseMap<const Value *, Value *> Replace;

  bool isGraphOutput(const Value *V) const {
    return is_contained(G.getOutputs(), V);
  }

  /// Whether the uses of \p V may be redirected: not a graph output, not
  /// read by name from a body.
  bool canBypass(const Value *V) const {
    return V && !isGraphOutput(V) && !SubgraphReads.count(V);
  }

  bool hasOneUse(const Value *V) const {
    auto It = Users.find(V);
    return It != Users.end() && It->second.size() == 1 && !isGraphOutput(V) &&
           !SubgraphReads.count(V);
  }

  /// The families of CanonicalizeRewrites.h; they may insert nodes
  /// before \p I and then advance it past them.
  void rewriteFamily(StringRef Op, unsigned &I) {
    CanonContext Ctx{G, Users, SubgraphReads, Opset, Masks};
    if (Op == "Gemm")
      rewriteGemm(Ctx, I, C.Gemms);
    else if (Op == "Add")
      rewriteBiasOrder(Ctx, I, C.BiasSwaps);
    else if (Op == "Where")
      rewriteWhereMask(Ctx, I, C.Masks);
    else if (Op == "Slice")
      rewriteSliceGroup(Ctx, I, C.Splits);
    else if (Op == "ReduceSum")
      rewriteStackedSum(Ctx, I, C.Stacks);
    else if (Op == "Einsum")
      rewriteStackedEinsum(Ctx, I, C.StackProducts);
    else if (Op == "MatMul")
      rewriteStackedMatMul(Ctx, I, C.StackProducts);
    else if (Op == "Squeeze")
      rewriteSqueezeOfUnsqueeze(Ctx, I, C.Squeezes);
    else
      rewriteSplitSizes(Ctx, I, C.Splits);
  }

  void rewriteIdentity(Node &N) {
    Value *In = N.getInput(0), *Out = N.getOutput(0);
    if (!In || !Out || N.getNumOutputs() != 1)
      return;
    if (In->isParameter() && In->getGraph() == &G) {
      Out->Type = In->Type;
      G.turnResultIntoParameter(&N, In->Data);
      ++C.Params;
      return;
    }
    if (canBypass(Out)) {
      bypass(Out, In);
      ++C.Identities;
    }
  }

  /// Whether \p U reads its input \p I as a weight: a matmul's or
  /// convolution's weight or bias, a norm's scale or bias, PRelu's slope,
  /// or the bias Added to a matmul's or convolution's result.
  static bool readsAsWeight(const Node &U, unsigned I) {
    StringRef Op = U.getOpType();
    if (Op == "MatMul")
      return I == 1;
    if (Op == "Gemm" || Op == "Conv" || Op == "ConvTranspose")
      return I >= 1;
    if (Op == "BatchNormalization" || Op == "LayerNormalization" ||
        Op == "InstanceNormalization" || Op == "GroupNormalization" ||
        Op == "RMSNormalization" || Op == "PRelu")
      return I >= 1;
    if (Op == "Add" && U.getNumInputs() == 2) {
      const Node *D =
          U.getInput(1 - I) ? U.getInput(1 - I)->getDefiningNode() : nullptr;
      return D && (D->getOpType() == "MatMul" || D->getOpType() == "Gemm" ||
                   D->getOpType() == "Conv");
    }
    return false;
  }

public:
  /// Initializers that are data, not parameters, become `Constant` nodes
  /// placed just before their first reader, as torch.onnx writes them (the
  /// converse of rewriteConstant): onnx.helper code stores every constant
  /// as an initializer, and they counted as parameters (and memory) there
  /// only. The rule, one for every exporter: a parameter is a tensor that
  /// trains. So data are
  ///  - every integer or boolean tensor (no gradient flows through one):
  ///    shapes, axes, bounds, indices, conditions, expert ids;
  ///  - a floating-point tensor no node reads as a weight (readsAsWeight)
  ///    that is one element (a scale, an epsilon, a fill) or an additive
  ///    mask (every element 0 or <= -1e4, at least one masked);
  ///  - a floating-point tensor that only feeds table work
  ///    (feedsTableOnly: HF's rotary inv_freq).
  /// Other floating-point initializers stay parameters whoever reads them
  /// (a learned position table added to the tokens, a class token), and
  /// so does any initializer also declared a graph input (the user may
  /// feed it) or whose data is not inline (shape-only models).
  void rewriteDataInitializers() {
    Users = buildUseMap(G);
    DataDep = findDataDependent(G);
    ConstOnly = findConstantOnly(G);
    SubgraphReads.clear();
    collectSubgraphReads(G, SubgraphReads, false);
    std::vector<Value *> Data;
    for (Value *P : G.getParameters())
      if (isDataInitializer(P))
        Data.push_back(P);
    if (Data.empty())
      return;
    DenseMap<const Node *, unsigned> Order;
    for (unsigned I = 0; I < G.getNumNodes(); ++I)
      Order[G.getNodes()[I].get()] = I;
    // Placed before the first reader (in the order read), not all first:
    // a block's constants stay among the block's nodes, as torch writes
    // them, and every Constant comes before the nodes reading it.
    auto FirstReader = [&](const Value *P) {
      unsigned First = ~0u;
      for (const Node *U : Users.find(P)->second)
        First = std::min(First, Order.lookup(U));
      return First;
    };
    llvm::stable_sort(Data, [&](const Value *A, const Value *B) {
      return FirstReader(A) < FirstReader(B);
    });
    // Each Constant is made first, then moved before its reader: the
    // I Constants placed before it moved that reader I places on.
    for (unsigned I = 0; I < Data.size(); ++I) {
      unsigned Reader = FirstReader(Data[I]);
      G.moveNode(G.turnParameterIntoConstant(Data[I]), Reader + I);
    }
    C.DataParams += Data.size();
  }

private:
  bool isDataInitializer(const Value *P) const {
    if (P->AlsoGraphInput || !P->Data ||
        P->Data->getKind() != TensorData::Kind::Inline || !canBypass(P))
      return false;
    auto It = Users.find(P);
    if (It == Users.end() || It->second.empty())
      return false;
    if (isInteger(P->Type.Elem) || P->Type.Elem == DataType::Bool)
      return true;
    if (!isFloatingPoint(P->Type.Elem))
      return false;
    if (feedsTableOnly(P))
      return true;
    for (const Node *U : It->second)
      for (unsigned I = 0; I < U->getNumInputs(); ++I)
        if (U->getInput(I) == P && readsAsWeight(*U, I))
          return false;
    Optional<std::vector<double>> F = getConstantFloats(P);
    if (!F || F->empty())
      return false;
    if (F->size() == 1)
      return true;
    bool Masked = false;
    for (double X : *F) {
      if (X <= MaskedBelow)
        Masked = true;
      else if (X != 0)
        return false;
    }
    return Masked;
  }

  /// Whether the float initializer \p P is a table's constant: no node
  /// applies it to data directly, and the work on it, followed up to the
  /// first node that reads data, meets table work (isTableWork): Hugging
  /// Face's rotary `inv_freq`, a buffer torch.onnx writes as an
  /// initializer, times the positions folded from a Range. A weight's
  /// views and derivations (a transpose, a weight norm) meet no table.
  bool feedsTableOnly(const Value *P) const {
    SmallVector<const Value *, 8> Work{P};
    DenseSet<const Node *> Seen;
    bool Table = false;
    while (!Work.empty()) {
      const Value *V = Work.pop_back_val();
      auto It = Users.find(V);
      if (It == Users.end())
        continue;
      for (const Node *U : It->second) {
        if (!Seen.insert(U).second)
          continue;
        bool ReadsData = any_of(U->getInputs(), [&](const Value *In) {
          return In && DataDep.count(In);
        });
        if (ReadsData) {
          if (V == P)
            return false; // Applied to data as it is.
          continue;
        }
        Table |= isTableWork(*U, DataDep, ConstOnly);
        for (const Value *O : U->getOutputs())
          if (O)
            Work.push_back(O);
      }
    }
    return Table;
  }

  void rewriteConstant(Node &N) {
    Value *Out = N.getNumOutputs() == 1 ? N.getOutput(0) : nullptr;
    const Attribute *A = N.getAttribute("value");
    if (!Out || N.getNumInputs() != 0 || !A ||
        A->K != Attribute::Kind::Tensor || A->Ts.size() != 1 || !canBypass(Out))
      return;
    const Tensor &T = A->Ts.front();
    Optional<int64_t> Elems = T.Type.getNumElements();
    if (!T.Data || !isFloatingPoint(T.Type.Elem) || !Elems || *Elems < 2)
      return;
    // Read as a weight by a node that applies it to data: a node whose
    // inputs are all data-independent computes a table the backend folds
    // at load (Hugging Face's rotary `inv_freq @ positions`, positions
    // folded from a Range), and its constants are not weights.
    auto AppliesToData = [&](const Node *U) {
      return any_of(U->getInputs(), [&](const Value *V) {
        return V && V != Out && DataDep.count(V);
      });
    };
    auto It = Users.find(Out);
    if (It == Users.end() || none_of(It->second, [&](const Node *U) {
          for (unsigned I = 0; I < U->getNumInputs(); ++I)
            if (U->getInput(I) == Out && readsAsWeight(*U, I) &&
                AppliesToData(U))
              return true;
          return false;
        }))
      return;
    Out->Type = T.Type;
    G.turnResultIntoParameter(&N, T.Data);
    ++C.Constants;
  }

  void rewriteDiv(Node &N) {
    Value *X = N.getInput(1);
    Optional<double> D = getScalarFloat(X);
    if (!D || *D == 0 || !hasOneUse(X) || !N.getOutput(0))
      return;
    int Exp = 0;
    // A power of two (its reciprocal is exact), of either sign.
    if (std::frexp(std::fabs(*D), &Exp) != 0.5)
      return;
    // A [1, 1] divisor broadcasts a rank-1 x up; keep such ranks alone.
    if (X->Type.getRank() > N.getInput(0)->Type.getRank())
      return;
    SmallVector<int64_t, 4> Shape;
    for (const Dim &Dm : X->Type.Dims)
      Shape.push_back(Dm.Size);
    Node *Def = X->getDefiningNode();
    auto It = llvm::find_if(G.getNodes(), [&](const std::unique_ptr<Node> &P) {
      return P.get() == Def;
    });
    G.replaceWithConstant(
        It - G.getNodes().begin(),
        Tensor::makeFromDoubles(X->Type.Elem, Shape, {1.0 / *D}));
    N.setOpType("Mul");
    ++C.Divs;
  }

  static std::vector<int64_t> getPerm(const Node &N) {
    if (auto P = N.getAttrInts("perm"))
      return *P;
    std::vector<int64_t> Rev;
    unsigned R = N.getInput(0)->Type.getRank();
    for (unsigned I = R; I-- > 0;)
      Rev.push_back(I);
    return Rev;
  }

  void rewriteTranspose(Node &N) {
    Value *In = N.getInput(0);
    Node *Inner = In ? In->getDefiningNode() : nullptr;
    if (!Inner || Inner->getOpType() != "Transpose" || !hasOneUse(In) ||
        !Inner->getInput(0) || !Inner->getInput(0)->Type.HasShape ||
        !In->Type.HasShape)
      return;
    std::vector<int64_t> P = getPerm(*Inner), Q = getPerm(N), R;
    if (P.size() != Q.size())
      return;
    bool IsIdentity = true;
    for (unsigned I = 0; I < Q.size(); ++I) {
      if (Q[I] < 0 || Q[I] >= (int64_t)P.size())
        return;
      R.push_back(P[Q[I]]);
      IsIdentity &= R.back() == I;
    }
    N.setInput(0, Inner->getInput(0));
    std::vector<Attribute> Attrs;
    Attribute A;
    A.Name = "perm";
    A.K = Attribute::Kind::Ints;
    A.Is = R;
    Attrs.push_back(std::move(A));
    N.setAttributes(std::move(Attrs));
    if (IsIdentity && canBypass(N.getOutput(0)))
      bypass(N.getOutput(0), Inner->getInput(0));
    ++C.Transposes;
  }

  void rewriteReshape(Node &N) {
    Value *In = N.getInput(0), *Out = N.getOutput(0);
    if (!In || !Out)
      return;
    // A Reshape to its input's own static shape is a no-op.
    if (In->Type.isStatic() && Out->Type.isStatic() && In->Type == Out->Type &&
        canBypass(Out)) {
      bypass(Out, In);
      ++C.Reshapes;
      return;
    }
    Node *Inner = In->getDefiningNode();
    if (!Inner || Inner->getOpType() != "Reshape" || !hasOneUse(In))
      return;
    Optional<std::vector<int64_t>> S = getConstantInts(N.getInput(1));
    if (!S)
      return;
    bool CopiesDim = N.getAttrInt("allowzero", 0) == 0 && is_contained(*S, 0);
    if (CopiesDim)
      return;
    N.setInput(0, Inner->getInput(0));
    ++C.Reshapes;
  }

  /// Reads of \p Out are to read \p In. Nodes are visited in order and
  /// \p In is defined before \p Out, so resolving \p In here makes every
  /// entry one hop: a chain of any length (100,000 Identity nodes) is
  /// undone in one sweep, and no cycle can arise (SSA).
  void bypass(Value *Out, Value *In) {
    auto It = Replace.find(In);
    Replace[Out] = It == Replace.end() ? In : It->second;
  }

  /// Redirects every read of a bypassed value.
  void applyReplacements() {
    if (Replace.empty())
      return;
    for (const auto &N : G.getNodes())
      for (unsigned I = 0; I < N->getNumInputs(); ++I)
        if (Value *V = N->getInput(I)) {
          auto It = Replace.find(V);
          if (It != Replace.end())
            N->setInput(I, It->second);
        }
  }
};

class CanonicalizePass : public Pass {
public:
  void print(const CompilationUnit &CU, raw_ostream &OS) const override {
    Pass::print(CU, OS);
    OS << "# canonicalize: " << Last.Params << " deduplicated weight(s) "
       << "given back, " << Last.Identities << " Identity bypassed, "
       << Last.Divs << " Div -> Mul, " << Last.Transposes
       << " Transpose pair(s) merged, " << Last.Reshapes
       << " Reshape(s) merged or dropped, " << Last.Rounds << " round(s)";
    if (Last.Constants)
      OS << ", " << Last.Constants << " weight Constant(s) made parameters";
    if (Last.DataParams)
      OS << ", " << Last.DataParams << " data initializer(s) made Constants";
    if (Last.Gemms)
      OS << ", " << Last.Gemms << " Gemm -> MatMul [+ Add]";
    if (Last.BiasSwaps)
      OS << ", " << Last.BiasSwaps << " bias Add(s) reordered";
    if (Last.Masks)
      OS << ", " << Last.Masks << " Where mask(s) -> additive";
    if (Last.Splits)
      OS << ", " << Last.Splits << " Slice group(s) or sized Split(s) -> Split";
    if (Last.StackProducts)
      OS << ", " << Last.StackProducts
         << " Einsum(s) or MatMul(s) over a stack -> weighted ReduceSum";
    if (Last.Squeezes)
      OS << ", " << Last.Squeezes << " Squeeze(Unsqueeze) pair(s) dropped";
    if (Last.Stacks)
      OS << ", " << Last.Stacks << " stacked weighted sum(s) -> Add chain";
    if (Last.Reinferred)
      OS << ", " << Last.Reinferred << " type(s) refined by re-inference";
    OS << "\n";
  }

  Error run(CompilationUnit &CU) override {
    Counts C;
    Graph &G = CU.M->getGraph();
    Canonicalizer Canon(G, C, CU.M->getOpsetVersion(""));
    Canon.rewriteDataInitializers();
    unsigned Round = 0;
    for (; Round < MaxRounds; ++Round)
      if (!Canon.sweep())
        break;
    C.Rounds = Round;
    if (Round == MaxRounds)
      CU.warn("canonicalize: no fixed point after " + Twine(MaxRounds) +
              " rounds; the graph is left as the last round made it");
    G.eraseUnusedParameters();
    bool Incomplete = any_of(G.getNodes(), [](const std::unique_ptr<Node> &N) {
      return any_of(N->getOutputs(),
                    [](const Value *V) { return V && !V->Type.isStatic(); });
    });
    if (Incomplete) {
      Expected<unsigned> Inferred = inferShapes(*CU.M);
      if (!Inferred)
        return Inferred.takeError();
      C.Reinferred = *Inferred;
    }
    Last = C;
    return Error::success();
  }

private:
  Counts Last;
};

} // namespace

std::unique_ptr<Pass> createCanonicalizePass() {
  return std::make_unique<CanonicalizePass>();
}

} // namespace loom
