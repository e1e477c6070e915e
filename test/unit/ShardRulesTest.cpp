//===- ShardRulesTest.cpp - The per-op sharding rule table --------------===//
//
// Each case applies the rule table (include/loom/Shard/Rules.h) over a
// small hand-written graph along one axis of a given size and checks the
// specs, weight splits, transitions and per-rank shapes against values
// worked out by hand beside them.
//
//===----------------------------------------------------------------------===//
#include "RunPipeline.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Planner/Search.h"
#include "loom/Shard/Rules.h"
#include "gtest/gtest.h"
#include <map>

using namespace loom;
using namespace llvm;

namespace {

/// A minimal propagation: the rules over every node in order, weights
/// split as the rules ask (no chains, no conflicts beyond a different
/// split of the same parameter).
class WalkContext final : public RuleContext {
public:
  /// \p SeqInputs: on context parallelism's axis (RuleContext::
  /// isSequenceAxis), the graph inputs that arrive split and their dim.
  /// \p Ring: cp_algo=ring (RuleContext::isSequenceRing).
  WalkContext(const Graph &G, unsigned TP, bool SP = false,
              std::map<std::string, int> SeqInputs = {}, bool Ring = false)
      : RuleContext(TP, SP, 17) {
    setSequenceAxis(!SeqInputs.empty());
    setSequenceRing(Ring);
    for (const Value *V : G.getInputs())
      if (SeqInputs.count(V->getName().str()))
        Values[V] = AxisSpec::split(SeqInputs[V->getName().str()]);
    for (const auto &NP : G.getNodes())
      for (const Value *V : NP->getInputs())
        if (V)
          Users[V].push_back(NP.get());
    for (const auto &NP : G.getNodes()) {
      bool HasRule;
      OpSharding S = applyShardingRule(*NP, *this, HasRule);
      for (unsigned O = 0; O < NP->getNumOutputs(); ++O)
        Values[NP->getOutput(O)] = S.OutputSpecs[O];
      Decided[NP->getOutput(0)->getName().str()] = S;
    }
  }
  AxisSpec getSpec(const Value *V) const override {
    return V ? Values.lookup(V) : AxisSpec();
  }
  bool splitWeight(const Value *V, int Dim, ArrayRef<int64_t> B) override {
    if (isSequenceAxis())
      return false;
    int D = Dim;
    const Value *P = traceWeight(V, D);
    if (!P)
      return false;
    AxisSpec S = AxisSpec::split(D);
    S.Blocks.assign(B.begin(), B.end());
    auto It = Values.find(P);
    if (It != Values.end() && It->second != S)
      return false;
    Values[P] = S;
    return true;
  }
  ArrayRef<const Node *> getUsers(const Value *V) const override {
    auto It = Users.find(V);
    return It == Users.end() ? ArrayRef<const Node *>()
                             : ArrayRef<const Node *>(It->second);
  }
  /// The specs of the node producing \p Out.
  const OpSharding &at(StringRef Out) { return Decided[Out.str()]; }
  std::string out(StringRef Out) { return at(Out).OutputSpecs[0].str(); }
  std::string in(StringRef Out, unsigned I) {
    return at(Out).InputSpecs[I].str();
  }

  DenseMap<const Value *, AxisSpec> Values;
  DenseMap<const Value *, SmallVector<const Node *, 2>> Users;
  std::map<std::string, OpSharding> Decided;
};

CompilationUnit load(StringRef Text) {
  CompilationUnit CU;
  auto M = importModelFromText(Text, "rules.onnxtxt");
  EXPECT_TRUE(!!M) << (M ? "" : toString(M.takeError()));
  CU.M = std::move(*M);
  runPipeline(CU, "infer-shapes");
  return CU;
}

const Value *param(const Graph &G, StringRef Name) {
  for (const Value *P : G.getParameters())
    if (P->getName() == Name)
      return P;
  return nullptr;
}

// A Megatron MLP block, attention heads and a vocab-parallel embedding:
// ids [2,8] -> emb [96,16] -> x [2,8,16] -> w1 [16,64] -> Relu ->
// w2 [64,16] -> reshape to heads [2,8,4,4] -> Softmax over the last axis.
const char *Block = R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64[2,8] ids) => (float[2,8,4,4] y, float[2,8] s, float[2,8] m,
                       float[2,8,16] a)
<float[96,16] emb, float[16,64] w1, float[64,16] w2, float[16,48] wq,
 int64[4] hs = {2,8,6,8}, int64[1] ax = {2}>
{
  x = Gather (emb, ids)
  u = MatMul (x, w1)
  r = Relu (u)
  d = MatMul (r, w2)
  q = MatMul (d, wq)
  qh = Reshape (q, hs)
  z = Reshape (d, hs4)
  y = Softmax <axis = -1> (z)
  s = ReduceSum <keepdims = 0> (q, ax)
  m = ReduceMax <keepdims = 0, axes = [2]> (q)
  a = Relu (d)
}
)";

std::string blockText() {
  // hs4 = {2,8,4,4}: the 16 features as 4 heads of 4.
  std::string T = Block;
  T.replace(T.find("int64[1] ax"), 0, "int64[4] hs4 = {2,8,4,4}, ");
  return T;
}

TEST(ShardRules, MegatronBlockAtTP4) {
  CompilationUnit CU = load(blockText());
  const Graph &G = CU.M->getGraph();
  WalkContext C(G, 4);
  // Vocab-parallel lookup: table rows split (96 / 4 = 24 per rank), ids
  // whole, the output a partial sum (each rank zeroes rows it lacks).
  EXPECT_EQ(C.out("x"), "P");
  EXPECT_EQ(C.in("x", 0), "S(0)");
  EXPECT_EQ(C.at("x").Lower, ShardLowering::VocabParallelGather);
  // Column parallel: the partial x is all-reduced first (a matmul is not
  // linear in a partial activation times a split weight), w1 split by its
  // 64 columns, u split on its last dim.
  EXPECT_EQ(C.in("u", 0), "R");
  EXPECT_EQ(C.Values.lookup(param(G, "w1")).str(), "S(1)");
  EXPECT_EQ(C.out("u"), "S(2)");
  EXPECT_EQ(C.out("r"), "S(2)");
  // Row parallel: r split on k = 64, w2 split by rows, d partial.
  EXPECT_EQ(C.in("d", 0), "S(2)");
  EXPECT_EQ(C.Values.lookup(param(G, "w2")).str(), "S(0)");
  EXPECT_EQ(C.out("d"), "P");
  // Partial d through a Reshape stays partial (linear); Softmax needs it
  // resolved: replicated without sequence parallelism.
  EXPECT_EQ(C.out("z"), "P");
  EXPECT_EQ(C.in("y", 0), "R");
  EXPECT_EQ(C.out("y"), "R");
  // q = d wq: column parallel again (48 columns, 12 per rank); the heads
  // reshape [2,8,48] -> [2,8,6,8]: the prefix 2*8 = 16 of dim 2 meets
  // output dim 2 (6 heads), which 4 does not divide, and no later dim
  // starts at the same offset: replicated (gathered) at tp = 4.
  EXPECT_EQ(C.out("q"), "S(2)");
  EXPECT_EQ(C.out("qh"), "R");
  EXPECT_EQ(C.in("qh", 0), "R");
  // ReduceSum over the split dim: each rank sums its 12 columns, partial.
  // ReduceMax over it needs the whole row.
  EXPECT_EQ(C.out("s"), "P");
  EXPECT_EQ(C.in("s", 0), "S(2)");
  EXPECT_EQ(C.in("m", 0), "R");
  EXPECT_EQ(C.out("m"), "R");
}

// An index-routed expert (HF Mixtral's eager path): the tokens it takes
// are a data-dependent count n (NonZero's), so its rows are never split,
// while its weights split as for any MLP at tp 4: w1 by columns, the
// element-wise op and a reshape that only moves the leading dims keep the
// split on the static last dim, w2 by rows, the output a partial sum.
// Shape of a partial reads the global shape as is; of a split value with
// n in it, the value is gathered first (no constant could hold n).
TEST(ShardRules, DataDependentRowsNeverSplitTheWeightsStill) {
  CompilationUnit CU = load(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[n,16] t) => (float[n,16] d, int64[2] sd, int64[3] sh)
<float[16,64] w1, float[64,16] w2, int64[3] lead = {1, -1, 64},
 int64[2] flat = {-1, 64}>
{
  u = MatMul (t, w1)
  r = Relu (u)
  h = Reshape (r, lead)
  f = Reshape (h, flat)
  d = MatMul (f, w2)
  sd = Shape (d)
  sh = Shape (h)
}
)");
  const Graph &G = CU.M->getGraph();
  WalkContext C(G, 4);
  EXPECT_EQ(C.Values.lookup(param(G, "w1")).str(), "S(1)");
  EXPECT_EQ(C.out("u"), "S(1)");
  EXPECT_EQ(C.out("r"), "S(1)");
  EXPECT_EQ(C.out("h"), "S(2)");
  EXPECT_EQ(C.out("f"), "S(1)");
  EXPECT_EQ(C.Values.lookup(param(G, "w2")).str(), "S(0)");
  EXPECT_EQ(C.in("d", 0), "S(1)");
  EXPECT_EQ(C.out("d"), "P");
  EXPECT_EQ(C.in("sd", 0), "P");
  EXPECT_EQ(C.at("sd").Lower, ShardLowering::None);
  EXPECT_EQ(C.in("sh", 0), "R");
}

// HF Mixtral's accumulation as torch.onnx writes index_add_: each expert's
// row-parallel output (a partial sum over tp) scattered into zeros, the
// experts' scatters added up. Scatters that overwrite or add are linear in
// data and updates together (IndexingRules.cpp), so the partials flow
// through every expert: one all-reduce after the last, not one per
// expert. A scatter that multiplies, or partial updates into whole
// non-zero data, takes whole updates (reduced first) and stays whole.
TEST(ShardRules, ScattersIntoZerosKeepExpertPartials) {
  CompilationUnit CU = load(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,16] t, int64[4,16] i) => (float[8,16] xb, float[8,16] mu,
                                     float[8,16] ow)
<float[16,64] a1, float[64,16] a2, float[16,64] b1, float[64,16] b2,
 float[8,16] base, int64[2] shp = {8, 16}>
{
  z = ConstantOfShape (shp)
  ua = MatMul (t, a1)
  ra = Relu (ua)
  ya = MatMul (ra, a2)
  ub = MatMul (t, b1)
  rb = Relu (ub)
  yb = MatMul (rb, b2)
  xa = ScatterElements <axis = 0> (z, i, ya)
  xb = ScatterElements <axis = 0, reduction = "add"> (xa, i, yb)
  mu = ScatterElements <axis = 0, reduction = "mul"> (z, i, yb)
  ow = ScatterElements <axis = 0> (base, i, ya)
}
)");
  const Graph &G = CU.M->getGraph();
  WalkContext C(G, 4);
  // Megatron's MLP per expert: w1 by columns, w2 by rows, a partial sum.
  EXPECT_EQ(C.out("ya"), "P");
  EXPECT_EQ(C.out("yb"), "P");
  // Into zeros (whole on every rank; they sum to zeros), then into the
  // partial accumulator: partial throughout, indices whole.
  EXPECT_EQ(C.in("xa", 0), "R");
  EXPECT_EQ(C.in("xa", 1), "R");
  EXPECT_EQ(C.in("xa", 2), "P");
  EXPECT_EQ(C.out("xa"), "P");
  EXPECT_EQ(C.in("xb", 0), "P");
  EXPECT_EQ(C.out("xb"), "P");
  // Not linear: the updates are reduced first (R), the output whole.
  EXPECT_EQ(C.in("mu", 2), "R");
  EXPECT_EQ(C.out("mu"), "R");
  EXPECT_EQ(C.in("ow", 2), "R");
  EXPECT_EQ(C.out("ow"), "R");
}

TEST(ShardRules, HeadsSplitWhereTheDegreeDividesThem) {
  CompilationUnit CU = load(blockText());
  // tp = 2 and 3 divide the 6 heads: the split lands on dim 2 of qh.
  for (unsigned TP : {2u, 3u}) {
    WalkContext C(CU.M->getGraph(), TP);
    EXPECT_EQ(C.out("qh"), "S(2)") << "tp=" << TP;
  }
}

TEST(ShardRules, SequenceParallelResolvesPartialsOntoTokens) {
  CompilationUnit CU = load(blockText());
  // Relu is not linear: the partial d [2,8,16] is resolved. Without sp it
  // is all-reduced; with sp reduce-scattered onto its first dim > 1 the
  // degree divides: dim 0 (the 2 sequences) at tp = 2, dim 1 (the 8
  // tokens) at tp = 4. Softmax has no such choice: it reads z replicated.
  WalkContext NoSP(CU.M->getGraph(), 2);
  EXPECT_EQ(NoSP.in("a", 0), "R");
  WalkContext SP2(CU.M->getGraph(), 2, /*SP=*/true);
  EXPECT_EQ(SP2.in("a", 0), "S(0)");
  EXPECT_EQ(SP2.out("a"), "S(0)");
  EXPECT_EQ(SP2.in("y", 0), "R");
  WalkContext SP4(CU.M->getGraph(), 4, /*SP=*/true);
  EXPECT_EQ(SP4.in("a", 0), "S(1)");
  EXPECT_EQ(getTransition(AxisSpec::partial(), AxisSpec::split(1)),
            Transition::ReduceScatter);
}

// Context parallelism over 2 ranks (all-to-all over heads): x [2,8,16]
// arrives split on its 8 tokens; attention of 4 heads of 4, a 16-class
// head and the mean cross entropy over every token.
const char *CPBlock = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,8,16] x, int64[2,8] labels) => (float loss)
<float[16,16] wq, float[16,16] wk, float[16,16] wo,
 int64[4] hs = {2,8,4,4}, int64[3] os = {2,8,16}>
{
  q = MatMul (x, wq)
  k = MatMul (x, wk)
  qh = Reshape (q, hs)
  kh = Reshape (k, hs)
  qt = Transpose <perm = [0, 2, 1, 3]> (qh)
  kt = Transpose <perm = [0, 2, 3, 1]> (kh)
  s = MatMul (qt, kt)
  p = Softmax <axis = -1> (s)
  c = MatMul (p, qt)
  ct = Transpose <perm = [0, 2, 1, 3]> (c)
  cr = Reshape (ct, os)
  o = MatMul (cr, wo)
  ot = Transpose <perm = [0, 2, 1]> (o)
  loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (ot, labels)
}
)";

TEST(ShardRules, SequenceAxisMovesTokensToHeadsAroundAttention) {
  CompilationUnit CU = load(CPBlock);
  const Graph &G = CU.M->getGraph();
  WalkContext C(G, 2, false, {{"x", 1}, {"labels", 1}});
  // Weights stay whole; the projections keep the token split.
  EXPECT_EQ(C.Values.lookup(param(G, "wq")).str(), "R");
  EXPECT_EQ(C.in("q", 0), "S(1)");
  EXPECT_EQ(C.out("q"), "S(1)");
  EXPECT_EQ(C.out("qh"), "S(1)");
  // [2,4,8,4]: tokens on dim 2; K^T [2,4,4,8] on dim 3.
  EXPECT_EQ(C.out("qt"), "S(2)");
  EXPECT_EQ(C.out("kt"), "S(3)");
  // Q K^T on the 4 heads (dim 1): both operands moved to S(1) (the
  // transitions S(2) -> S(1) and S(3) -> S(1), all-to-alls on this axis),
  // the scores [2,4,8,8] over the whole sequence, 2 heads per rank.
  EXPECT_EQ(C.in("s", 0), "S(1)");
  EXPECT_EQ(C.in("s", 1), "S(1)");
  EXPECT_EQ(C.out("s"), "S(1)");
  EXPECT_EQ(C.out("p"), "S(1)");
  EXPECT_EQ(C.out("c"), "S(1)");
  // The context [2,8,16] arrives split on its head columns (dim 2, k of
  // the output projection): the projection asks for it on the tokens.
  EXPECT_EQ(C.out("cr"), "S(2)");
  EXPECT_EQ(C.in("o", 0), "S(1)");
  EXPECT_EQ(C.out("o"), "S(1)");
  // The mean loss: each rank's rows, a partial sum of the mean.
  EXPECT_EQ(C.in("loss", 0), "S(2)");
  EXPECT_EQ(C.in("loss", 1), "S(1)");
  EXPECT_EQ(C.out("loss"), "P");
  EXPECT_EQ(C.at("loss").Lower, ShardLowering::MeanOfShards);
  // Off the sequence axis the same loss runs replicated.
  WalkContext TP(G, 2);
  EXPECT_EQ(TP.out("loss"), "R");
}

// Collectives of another axis, as a tp rank's graph holds tp's and a cp
// rank's graph cp's when the other axis is propagated over it
// (CollectiveRules.cpp, ComposeContextParallel.cpp).
const char *OtherAxisBlock =
    R"(<ir_version: 8, opset_import: ["" : 17, "hccl" : 1]>
g (float[2,8,16] x) => (float[2,16,32] out, float[2,16,32] keep,
                        float[2,8,64] tout)
<float[16,32] w>
{
  h = MatMul (x, w)
  s = hccl.HcomAllReduce <group = "cp", reduction = "sum"> (h)
  gc = hccl.HcomAllGather <group = "cp", rank_size = 2, axis = 1> (s)
  out = Identity (gc)
  gk = hccl.HcomAllGather <group = "cp", rank_size = 2, axis = 1> (s)
  keep = Relu (gk)
  gt = hccl.HcomAllGather <group = "tp", rank_size = 2, axis = 2> (h)
  tout = Identity (gt)
}
)";

TEST(ShardRules, CollectivesOfAnotherAxisPassSplitsThrough) {
  CompilationUnit CU = load(OtherAxisBlock);
  const Graph &G = CU.M->getGraph();
  // tp over a cp rank's graph: h column-parallel (S(2)); the all-reduce
  // and the all-gather over the tokens keep it; an output gathered for the
  // caller is gathered over tp first, at cp's share of the tokens.
  WalkContext TP(G, 2);
  EXPECT_EQ(TP.out("h"), "S(2)");
  EXPECT_EQ(TP.out("s"), "S(2)");
  EXPECT_EQ(TP.out("gk"), "S(2)");
  EXPECT_EQ(TP.out("keep"), "S(2)");
  EXPECT_EQ(TP.in("gc", 0), "R");
  EXPECT_EQ(TP.out("gc"), "R");
  // An all-gather along the split dim itself runs on whole values.
  EXPECT_EQ(TP.in("gt", 0), "R");
  // cp over a tp rank's graph: tokens (S(1)) pass tp's all-gather of the
  // columns, output or not; cp's own all-gathers along the tokens do not
  // (they run on whole values).
  WalkContext CP(G, 2, false, {{"x", 1}});
  EXPECT_EQ(CP.out("s"), "S(1)");
  EXPECT_EQ(CP.out("gt"), "S(1)");
  EXPECT_EQ(CP.in("gc", 0), "R");
}

TEST(ShardRules, SequenceRingKeepsQueriesOnTokens) {
  CompilationUnit CU = load(CPBlock);
  const Graph &G = CU.M->getGraph();
  WalkContext C(G, 2, false, {{"x", 1}, {"labels", 1}}, /*Ring=*/true);
  // Q K^T keeps the queries' token split (rows, dim 2 of [2,4,8,8]) and
  // reads K^T whole: the role graphs pass K and V around the ring
  // (RingAttention.cpp) instead of gathering them.
  EXPECT_EQ(C.in("s", 0), "S(2)");
  EXPECT_EQ(C.in("s", 1), "R");
  EXPECT_EQ(C.out("s"), "S(2)");
  EXPECT_EQ(C.out("p"), "S(2)");
  EXPECT_EQ(C.in("c", 1), "R");
  EXPECT_EQ(C.out("c"), "S(2)");
  // The context stays on the tokens: no move back before the projection.
  EXPECT_EQ(C.in("o", 0), "S(1)");
}

TEST(ShardRules, SequenceAxisMeanWithIgnoreIndexCountsOverTheGroup) {
  std::string Text = CPBlock;
  std::string Old = "<reduction = \"mean\">";
  Text.replace(Text.find(Old), Old.size(),
               "<reduction = \"mean\", ignore_index = 0>");
  CompilationUnit CU = load(Text);
  const Graph &G = CU.M->getGraph();
  WalkContext C(G, 2, false, {{"x", 1}, {"labels", 1}});
  // The ranks count different tokens: each one's sum and count are
  // all-reduced and divided inside the lowering, the output replicated.
  EXPECT_EQ(C.in("loss", 0), "S(2)");
  EXPECT_EQ(C.in("loss", 1), "S(1)");
  EXPECT_EQ(C.out("loss"), "R");
  EXPECT_EQ(C.at("loss").Lower, ShardLowering::MeanOverCount);
  // Two all-reduces of one scalar each (4 bytes): the sum and the count.
  ASSERT_EQ(C.at("loss").Collectives.size(), 2u);
  EXPECT_EQ(C.at("loss").Collectives[0].Bytes, 4.0);
  EXPECT_EQ(C.at("loss").Collectives[1].Suffix, "count");
}

TEST(ShardRules, TransitionsAndLocalShapes) {
  AxisSpec R, P = AxisSpec::partial(), S0 = AxisSpec::split(0),
              S1 = AxisSpec::split(1);
  AxisSpec Blk = AxisSpec::split(1);
  Blk.Blocks = {64, 16, 16};
  EXPECT_EQ(getTransition(P, R), Transition::AllReduce);
  EXPECT_EQ(getTransition(P, S0), Transition::ReduceScatter);
  EXPECT_EQ(getTransition(P, Blk), Transition::Unsupported);
  EXPECT_EQ(getTransition(S1, R), Transition::AllGather);
  // A blocked split gathers (the role graph reorders the pieces).
  EXPECT_EQ(getTransition(Blk, R), Transition::AllGather);
  EXPECT_EQ(getTransition(Blk, S0), Transition::GatherSlice);
  EXPECT_EQ(getTransition(R, S1), Transition::LocalSlice);
  EXPECT_EQ(getTransition(S0, S1), Transition::GatherSlice);
  EXPECT_EQ(getTransition(R, P), Transition::Zeros);
  EXPECT_EQ(getTransition(S1, S1), Transition::None);
  EXPECT_EQ(getTransitionName(Transition::ReduceScatter), "reduce-scatter");
  // [4, 96] at tp = 2: S(1) holds 48 columns; in blocks 64|16|16 a rank
  // holds 32 + 8 + 8 = 48 too; replicated and partial hold it whole.
  using Sh = SmallVector<int64_t, 4>;
  EXPECT_EQ(getLocalShape({4, 96}, S1, 2), (Sh{4, 48}));
  EXPECT_EQ(getLocalShape({4, 96}, Blk, 2), (Sh{4, 48}));
  EXPECT_EQ(getLocalShape({4, 96}, P, 2), (Sh{4, 96}));
  // 16 is not divisible by 32; 4 rows by 3; the blocks must sum to 96.
  EXPECT_TRUE(getLocalShape({4, 96}, Blk, 32).empty());
  EXPECT_TRUE(getLocalShape({4, 96}, S0, 3).empty());
  AxisSpec Bad = AxisSpec::split(1);
  Bad.Blocks = {64, 16};
  EXPECT_TRUE(getLocalShape({4, 96}, Bad, 2).empty());
}

TEST(ShardRules, TransitionsNameTheirCollective) {
  // One float [4, 96] value (1,536 bytes whole) at tp = 2. Every kind
  // moves the whole value's bytes per rank (Collectives.h: the buffer of
  // an all-reduce, an all-gather's output, a reduce-scatter's input).
  TensorType T;
  T.Elem = DataType::Float;
  T.HasShape = true;
  T.Dims = {Dim(4), Dim(96)};
  AxisSpec R, P = AxisSpec::partial(), S0 = AxisSpec::split(0),
              S1 = AxisSpec::split(1);
  Optional<ShardCollective> AR = getTransitionCollective(P, R, T, 2);
  ASSERT_TRUE(AR.hasValue());
  EXPECT_EQ(AR->Kind, CollectiveKind::AllReduce);
  EXPECT_EQ(AR->Reduction, "sum");
  EXPECT_EQ(AR->Bytes, 1536.0); // 4 x 96 x 4 bytes
  EXPECT_EQ(AR->Result.Dims[1].Size, 96);
  // P -> S(0): reduce-scatter over dim 0, each rank keeps [2, 96].
  Optional<ShardCollective> RS = getTransitionCollective(P, S0, T, 2);
  ASSERT_TRUE(RS.hasValue());
  EXPECT_EQ(RS->Kind, CollectiveKind::ReduceScatter);
  EXPECT_EQ(RS->Axis, 0);
  EXPECT_EQ(RS->Result.Dims[0].Size, 2); // 4 / 2
  EXPECT_EQ(RS->Bytes, 1536.0);
  // S(1) -> R and S(0) -> S(1) (gathered, then sliced locally): an
  // all-gather along the dim the value arrives split on.
  for (const AxisSpec &To : {R, S1}) {
    Optional<ShardCollective> AG = getTransitionCollective(S0, To, T, 2);
    ASSERT_TRUE(AG.hasValue());
    EXPECT_EQ(AG->Kind, CollectiveKind::AllGather);
    EXPECT_EQ(AG->Axis, 0);
    EXPECT_EQ(AG->Result.Dims[0].Size, 4);
  }
  // On the sequence axis (context parallelism) S(0) -> S(1) is one
  // all-to-all: split on dim 1 among the peers, concatenated on dim 0;
  // each rank keeps [4, 48] and sends its share, 1,536 / 2 = 768 bytes.
  Optional<ShardCollective> A2A = getTransitionCollective(S0, S1, T, 2, true);
  ASSERT_TRUE(A2A.hasValue());
  EXPECT_EQ(A2A->Kind, CollectiveKind::AllToAll);
  EXPECT_EQ(A2A->Axis, 1);
  EXPECT_EQ(A2A->ConcatAxis, 0);
  EXPECT_EQ(A2A->Result.Dims[0].Size, 4);
  EXPECT_EQ(A2A->Result.Dims[1].Size, 48); // 96 / 2
  EXPECT_EQ(A2A->Bytes, 768.0);
  // Heads folded into the batch move in equal blocks (each sample's
  // heads): S(0) -> S(1; blocks=48,48) is the same all-to-all (the role
  // builder gives the blocks a dim of their own); unequal blocks are
  // gathered.
  AxisSpec S1B = S1;
  S1B.Blocks = {48, 48};
  Optional<ShardCollective> A2AB = getTransitionCollective(S0, S1B, T, 2, true);
  ASSERT_TRUE(A2AB.hasValue());
  EXPECT_EQ(A2AB->Kind, CollectiveKind::AllToAll);
  EXPECT_EQ(A2AB->Result.Dims[1].Size, 48);
  EXPECT_EQ(A2AB->Bytes, 768.0);
  S1B.Blocks = {64, 32};
  EXPECT_EQ(getTransitionCollective(S0, S1B, T, 2, true)->Kind,
            CollectiveKind::AllGather);
  // ... and a split to replicated is still an all-gather there.
  Optional<ShardCollective> AGS = getTransitionCollective(S0, R, T, 2, true);
  ASSERT_TRUE(AGS.hasValue());
  EXPECT_EQ(AGS->Kind, CollectiveKind::AllGather);
  // No collective: same spec, a local slice, zeros, blocks.
  AxisSpec Blk = AxisSpec::split(1);
  Blk.Blocks = {64, 16, 16};
  EXPECT_FALSE(getTransitionCollective(S1, S1, T, 2).hasValue());
  EXPECT_FALSE(getTransitionCollective(R, S1, T, 2).hasValue());
  EXPECT_FALSE(getTransitionCollective(R, P, T, 2).hasValue());
  EXPECT_FALSE(getTransitionCollective(P, Blk, T, 2).hasValue());
  // The hccl op of each kind and back; schedule.json's names.
  EXPECT_EQ(getHcomOpName(CollectiveKind::ReduceScatter), "HcomReduceScatter");
  EXPECT_EQ(getHcomCollectiveKind("HcomAllToAllV"), CollectiveKind::AllToAll);
  EXPECT_EQ(getHcomCollectiveKind("HcomBroadcast"), CollectiveKind::AllReduce);
  EXPECT_EQ(getScheduleEventKind(CollectiveKind::AllGather), "allgather");
  EXPECT_EQ(parseScheduleEventKind("reducescatter"),
            CollectiveKind::ReduceScatter);
  EXPECT_EQ(parseScheduleEventKind("send"), CollectiveKind::AllReduce);
}

TEST(ShardRules, RulesDeclareTheirLoweringsCollectives) {
  // x [4,16] -> column-parallel w1 [16,32] -> Relu -> row-parallel Gemm
  // with a bias (w2 [32,8], b [8]) -> column-parallel head wv [8,64] ->
  // SoftmaxCrossEntropyLoss over the 64 classes, at tp = 2.
  CompilationUnit CU = load(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,16] x, int64[4] lbl) => (float loss)
<float[16,32] w1, float[32,8] w2, float[8] b, float[8,64] wv>
{
  u = MatMul (x, w1)
  r = Relu (u)
  y = Gemm (r, w2, b)
  s = MatMul (y, wv)
  loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (s, lbl)
}
)");
  WalkContext Ctx(CU.M->getGraph(), 2);
  // The bias is added once after one all-reduce (sum) of the partial
  // products: [4, 8] floats, 128 bytes.
  const OpSharding &G = Ctx.at("y");
  EXPECT_EQ(G.Lower, ShardLowering::BiasAfterReduce);
  ASSERT_EQ(G.Collectives.size(), 1u);
  EXPECT_EQ(G.Collectives[0].Kind, CollectiveKind::AllReduce);
  EXPECT_EQ(G.Collectives[0].Reduction, "sum");
  EXPECT_EQ(G.Collectives[0].Bytes, 128.0); // 4 x 8 x 4 bytes
  EXPECT_EQ(G.Collectives[0].On->getName(), "y");
  // Megatron's vocab-parallel cross entropy: the row max (max), the sum
  // of exps and the target score (sum), one float per row: [4, 1], 16
  // bytes each.
  const OpSharding &L = Ctx.at("loss");
  EXPECT_EQ(L.Lower, ShardLowering::VocabParallelCrossEntropy);
  ASSERT_EQ(L.Collectives.size(), 3u);
  const char *Red[] = {"max", "sum", "sum"};
  const char *Suffix[] = {"max", "sum_exp", "target"};
  for (unsigned I = 0; I < 3; ++I) {
    EXPECT_EQ(L.Collectives[I].Kind, CollectiveKind::AllReduce);
    EXPECT_EQ(L.Collectives[I].Reduction, Red[I]);
    EXPECT_EQ(L.Collectives[I].Suffix, Suffix[I]);
    EXPECT_EQ(L.Collectives[I].Bytes, 16.0); // 4 rows x 1 x 4 bytes
  }
  // A column-parallel MatMul needs none of its own.
  EXPECT_TRUE(Ctx.at("s").Collectives.empty());
}

TEST(ShardRules, SplitDimsAreWhatTheRulesSplit) {
  CompilationUnit CU = load(blockText());
  // At a degree dividing everything: emb rows 96, w1 columns 64 (and u, r),
  // w2 rows 64, wq columns 48 (q, and the 48 reduced by s), the 6 heads
  // of qh. d is partial, z/y/a replicated: {6, 48, 64, 96}, gcd 2.
  SplitDimSizes D = collectSplitDims(CU.M->getGraph(), 17);
  std::vector<uint64_t> Sizes;
  for (const auto &KV : D)
    Sizes.push_back(KV.first);
  EXPECT_EQ(Sizes, (std::vector<uint64_t>{6, 48, 64, 96}));
  EXPECT_EQ(D[6], "dim 2 of 'qh'");
  EXPECT_EQ(D[96], "dim 0 of 'emb'");
  TPDivisibility T = computeTPDivisibility(CU.M->getGraph(), 17);
  EXPECT_EQ(T.Divisor, 2u);
  EXPECT_EQ(T.Why, "gcd of 6 = dim 2 of 'qh', 64 = dim 1 of 'w1'");
}

// Issue 30: a tp degree dividing some split dims but not all keeps the
// weights it cannot split whole; the rest split as at any degree.
TEST(ShardRules, UnsplitWeightsAreTheOnesTheDegreeDoesNotDivide) {
  // x [4,8] -> w1 [8,8] (columns) -> Relu -> w2 [8,8] (rows, partial) ->
  // Relu (all-reduced) -> head [8,10] (columns): split dims {8, 10}.
  CompilationUnit CU = load(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,8] x) => (float[4,10] y)
<float[8,8] w1, float[8,8] w2, float[8,10] head>
{
  h = MatMul (x, w1)
  a = Relu (h)
  o = MatMul (a, w2)
  r = Relu (o)
  y = MatMul (r, head)
})");
  const Graph &G = CU.M->getGraph();
  TPDivisibility T = computeTPDivisibility(G, 17, {2, 3, 4, 8});
  EXPECT_EQ(T.Sizes, (std::vector<uint64_t>{8, 10}));
  EXPECT_EQ(T.Divisor, 2u);
  // 2 divides both; 3 neither (splits nothing: not a tp degree); 4 and 8
  // divide 8 only.
  EXPECT_TRUE(T.allows(2));
  EXPECT_FALSE(T.allows(3));
  EXPECT_TRUE(T.allows(4));
  EXPECT_TRUE(T.allows(8));
  EXPECT_EQ(T.Replicated.count(2), 0u); // splits everything
  EXPECT_EQ(T.Replicated.count(3), 0u); // not a degree
  ASSERT_EQ(T.Replicated.count(4), 1u);
  const std::vector<UnsplitWeight> &W = T.Replicated[4];
  ASSERT_EQ(W.size(), 1u);
  EXPECT_EQ(W[0].Weight, "head");
  EXPECT_EQ(W[0].Reader, "y");
  EXPECT_EQ(W[0].Dim, 1);
  EXPECT_EQ(W[0].Size, 10);
  EXPECT_EQ(describeUnsplitWeights(W), "'head' (dim 1 of 10, read by 'y')");
  EXPECT_TRUE(collectUnsplitWeights(G, 17, 2).empty());
}

// Opset 23: a grouped-query Attention (4 q heads, 2 kv heads, 3-D with a
// KV cache) after column-parallel Q/K/V projections, RotaryEmbedding on
// the 3-D queries, RMSNormalization on the tokens.
const char *LLM = R"(<ir_version: 10, opset_import: ["" : 23]>
g (float[2,5,16] x, float[2,2,3,4] pk, float[2,2,3,4] pv, float[8,2] cos,
   float[8,2] sin, int64[2,5] pos) => (float[2,5,16] o, float[2,5,16] n)
<float[16,16] wq, float[16,8] wk, float[16,8] wv, float[16,16] wo,
 float[16] g>
{
  q = MatMul (x, wq)
  k = MatMul (x, wk)
  v = MatMul (x, wv)
  qr = RotaryEmbedding <num_heads = 4> (q, cos, sin, pos)
  a, pko, pvo = Attention <q_num_heads = 4, kv_num_heads = 2, is_causal = 1> (qr, k, v, , pk, pv)
  o = MatMul (a, wo)
  n = RMSNormalization (o, g)
}
)";

TEST(ShardRules, AttentionSplitsQueryAndKVHeads) {
  CompilationUnit CU = load(LLM);
  // tp = 2 divides 4 q heads and 2 kv heads: Q, K, V split on their
  // hidden dim (whole heads: 4 and 4 features a rank), the cache and the
  // present key/value on their heads dim (1), the output on its hidden
  // dim, which the row-parallel wo reduces into a partial sum.
  WalkContext C(CU.M->getGraph(), 2);
  EXPECT_EQ(C.out("qr"), "S(2)");
  EXPECT_EQ(C.in("a", 0), "S(2)");
  EXPECT_EQ(C.in("a", 1), "S(2)");
  EXPECT_EQ(C.in("a", 4), "S(1)");
  EXPECT_EQ(C.out("a"), "S(2)");
  EXPECT_EQ(C.at("a").OutputSpecs[1].str(), "S(1)");
  EXPECT_EQ(C.out("o"), "P");
  // The norm reads o reduced (its hidden dim is the normalized axis).
  EXPECT_EQ(C.in("n", 0), "R");
  // The per-rank head counts of the emitted node: 4 / 2 and 2 / 2.
  std::vector<Attribute> Attrs;
  const Node *Att = nullptr;
  for (const auto &NP : CU.M->getGraph().getNodes())
    if (NP->getOpType() == "Attention")
      Att = NP.get();
  ASSERT_TRUE(Att);
  for (const Attribute &A : Att->getAttributes())
    Attrs.push_back(copyAttributeValues(A));
  localizeHeadAttributes(*Att, C.at("a"), 2, Attrs);
  std::map<std::string, int64_t> Heads;
  for (const Attribute &A : Attrs)
    Heads[A.Name] = A.I;
  EXPECT_EQ(Heads["q_num_heads"], 2);
  EXPECT_EQ(Heads["kv_num_heads"], 1);
  EXPECT_EQ(Heads["is_causal"], 1);
  // tp = 4 does not divide the 2 kv heads: Attention reads everything
  // whole.
  WalkContext C4(CU.M->getGraph(), 4);
  EXPECT_EQ(C4.in("a", 0), "R");
  EXPECT_EQ(C4.in("a", 1), "R");
  EXPECT_EQ(C4.out("a"), "R");
}

} // namespace
