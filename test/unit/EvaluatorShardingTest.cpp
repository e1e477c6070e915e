//===- EvaluatorShardingTest.cpp - The evaluator splits as the sharder --===//
//
// The plan evaluator (PlanEvaluator::getTPSplit, lib/Planner/RuleSplit.cpp)
// and the sharder (shard + insert-collectives) read one rule table. Each
// case plans a small hand-written graph at tp = 2 with one micro-batch of
// the whole batch (so the planning graph and the micro-batch graph have the
// same shapes), emits the role graphs, and checks that
// - every value the evaluator's specs give a per-rank shape has that shape
//   in tp rank 0's graph (getLocalShape of the spec), and
// - the tp collectives the evaluator costs in the forward are the Hcom
//   nodes of the role graph, kind by kind and value by value;
// then checks both against the collectives worked out by hand, and the
// backward collectives the evaluator adds (their duals) by hand.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Planner/PlanCost.h"
#include "loom/Planner/Search.h"
#include "loom/Shard/Sharding.h"
#include "gtest/gtest.h"
#include <map>
#include <set>

using namespace loom;
using namespace llvm;

namespace {

struct Planned {
  std::unique_ptr<CompilationUnit> CU;
  std::unique_ptr<PlanEvaluator> Eval;
};

/// Plans \p Text with --plan \p Plan (tp = 2, one micro-batch of the
/// batch \p Batch) and emits its role graphs.
Planned plan(StringRef Text, StringRef Plan, int64_t Batch,
             const HardwareModel &HW) {
  Planned P;
  P.CU = std::make_unique<CompilationUnit>();
  CompilationUnit &CU = *P.CU;
  Expected<std::unique_ptr<Model>> M = importModelFromText(Text, "t.onnxtxt");
  EXPECT_TRUE(!!M) << (M ? "" : toString(M.takeError()));
  if (!M)
    return P;
  CU.M = std::move(*M);
  CU.HW = &HW;
  CU.Opts.Batch = Batch;
  CU.Opts.Mode = RunMode::Train;
  CU.PlanRequest = cantFail(parsePlanSpec(Plan));
  PassManager PM(getRegisteredPasses());
  EXPECT_FALSE(!!PM.parsePipeline(
      "bind-symbols,infer-shapes,fold-shape-arith,detect-layers,annotate-"
      "costs,assign-device-classes,search-parallelism,shard,insert-"
      "collectives"));
  std::string S;
  raw_string_ostream OS(S);
  if (Error E = PM.run(CU, PassInstrumentation(), OS, OS)) {
    ADD_FAILURE() << toString(std::move(E));
    P.CU.reset();
    return P;
  }
  P.Eval = std::make_unique<PlanEvaluator>(
      CU.M->getGraph(), CU.Layers, CU.NodeCosts, HW, getEvaluatorOptions(CU));
  return P;
}

/// "AllReduce y" per tp collective; from the role graph, the Hcom node's
/// kind and the value it was named after ("y.allreduce", "y.local...").
using CommList = std::multiset<std::string>;

std::string baseName(StringRef Name) {
  Name = Name.take_front(Name.find('.'));
  return Name.str();
}

CommList roleCollectives(const Graph &G) {
  CommList L;
  for (const auto &NP : G.getNodes()) {
    if (NP->getDomain() != "hccl")
      continue;
    const Attribute *Group = NP->getAttribute("group");
    if (Group && Group->S != "tp")
      continue;
    StringRef Op = NP->getOpType();
    std::string Kind = Op == "HcomAllReduce"       ? "AllReduce"
                       : Op == "HcomAllGather"     ? "AllGather"
                       : Op == "HcomReduceScatter" ? "ReduceScatter"
                                                   : Op.str();
    L.insert(Kind + " " + baseName(NP->getOutput(0)->getName()));
  }
  return L;
}

/// The evaluator's collectives over every layer, forward or backward.
CommList evaluatorCollectives(const PlanEvaluator &E, bool SP, bool Backward,
                              double *Bytes = nullptr) {
  CommList L;
  for (unsigned Layer = 0; Layer < E.getNumLayers(); ++Layer)
    for (const auto &C : E.getTPSplit(Layer, 2, SP).Collectives) {
      if (C.Backward != Backward)
        continue;
      L.insert(getCollectiveName(C.Kind).str() + " " +
               baseName(C.V->getName()));
      if (Bytes)
        *Bytes += C.Bytes;
    }
  return L;
}

/// Checks every value's per-rank shape in tp rank 0's graph; returns how
/// many values were compared and how many of them are split.
std::pair<unsigned, unsigned> checkShapes(const Planned &P, bool SP) {
  const ShardedProgram &SPg = *P.CU->Sharded;
  const RoleGraph *Rank0 = nullptr;
  for (const RoleGraph &R : SPg.Roles)
    if (R.TP == 0 && R.PP == 0)
      Rank0 = &R;
  EXPECT_NE(Rank0, nullptr);
  if (!Rank0)
    return {0, 0};
  std::map<std::string, const Value *> Local;
  for (const auto &NP : Rank0->M->getGraph().getNodes())
    for (const Value *V : NP->getOutputs())
      if (V)
        Local[V->getName().str()] = V;
  unsigned Compared = 0, Split = 0;
  const PlanEvaluator &E = *P.Eval;
  for (unsigned Layer = 0; Layer < E.getNumLayers(); ++Layer) {
    PlanEvaluator::TPSplit S = E.getTPSplit(Layer, 2, SP);
    for (unsigned I = 0; I < S.Nodes.size(); ++I)
      for (unsigned O = 0; O < S.Nodes[I]->getNumOutputs(); ++O) {
        const Value *V = S.Nodes[I]->getOutput(O);
        if (!V || !V->Type.isStatic() || isConstantLike(V))
          continue;
        // A model output keeps its name for the gathered value; the
        // rank's own piece is NAME.local.
        bool IsOut = is_contained(P.CU->M->getGraph().getOutputs(), V);
        auto It = Local.find(V->getName().str() + (IsOut ? ".local" : ""));
        if (It == Local.end())
          continue;
        SmallVector<int64_t, 4> Want = getLocalShape(
            V->Type.getStaticShape(), S.Specs[I].OutputSpecs[O], 2);
        SmallVector<int64_t, 4> HaveS = It->second->Type.getStaticShape();
        std::vector<int64_t> Have(HaveS.begin(), HaveS.end());
        EXPECT_EQ(std::vector<int64_t>(Want.begin(), Want.end()), Have)
            << V->getName().str() << " " << S.Specs[I].OutputSpecs[O].str();
        ++Compared;
        Split += S.Specs[I].OutputSpecs[O].isSplit();
      }
  }
  return {Compared, Split};
}

const HardwareModel &hw() {
  static HardwareModel HW = cantFail(
      loadHardwareModel(LOOM_SOURCE_DIR "/examples/hw/atlas800t-a2.yaml"));
  return HW;
}

TEST(EvaluatorSharding, ConvNetTP2) {
  // conv1 is column parallel (W [8,3,3,3] split on Cout: y1 [8,4,16,16] per
  // rank), relu keeps the split, conv2 row parallel (W split on Cin) with
  // its bias added after an all-reduce of [8,8,16,16] fp32 = 65,536 B; the
  // pool, flatten and the Gemm's input replicated; the Gemm column
  // parallel (W [8,10]: 10 / 2 = 5 columns), its output [8,10] = 320 B
  // gathered as the model's output.
  Planned P = plan(R"(
<ir_version: 8, opset_import: ["" : 17]>
convnet (float[8,3,16,16] x) => (float[8,10] y)
<float[8,3,3,3] w1, float[8] b1, float[8,8,3,3] w2, float[8] b2,
 float[8,10] w3, float[10] b3> {
  y1 = Conv <pads = [1,1,1,1]> (x, w1, b1)
  r1 = Relu (y1)
  y2 = Conv <pads = [1,1,1,1]> (r1, w2, b2)
  r2 = Relu (y2)
  p = GlobalAveragePool (r2)
  f = Flatten (p)
  y = Gemm (f, w3, b3)
}
)",
                   "tp=2,pp=1,dp=1,mb=8", 8, hw());
  ASSERT_TRUE(P.CU && P.Eval);
  std::pair<unsigned, unsigned> N = checkShapes(P, false);
  EXPECT_GE(N.first, 5u);
  EXPECT_EQ(N.second, 3u); // y1 and r1 on their channels, y's piece
  // The convolutions are split work: conv1 by its output channels.
  PlanEvaluator::TPSplit S = P.Eval->getTPSplit(0, 2, false);
  for (unsigned I = 0; I < S.Nodes.size(); ++I)
    if (S.Nodes[I]->getOpType() == "Conv")
      EXPECT_TRUE(S.Sharded[I]) << S.Nodes[I]->getOutput(0)->getName().str();
  CommList Role = roleCollectives(P.CU->Sharded->Roles[0].M->getGraph());
  double Bytes = 0;
  EXPECT_EQ(evaluatorCollectives(*P.Eval, false, false, &Bytes), Role);
  EXPECT_EQ(Role, (CommList{"AllReduce y2", "AllGather y"}));
  EXPECT_DOUBLE_EQ(Bytes, 65536.0 + 320.0);
  // Backward: r1's gradient from the row-parallel conv2 is split like r1
  // (no collective); conv1 reads the model input (no gradient). Nothing
  // but the gradient of f, read replicated by the column-parallel Gemm:
  // an addend per rank, all-reduced ([8,8] fp32).
  Bytes = 0;
  EXPECT_EQ(evaluatorCollectives(*P.Eval, false, true, &Bytes),
            (CommList{"AllReduce f"}));
  EXPECT_DOUBLE_EQ(Bytes, 8 * 8 * 4.0);
}

TEST(EvaluatorSharding, AttentionWithWeightlessMatmulsTP2) {
  // Two heads of 8: the Q, K and V projections are column parallel, the
  // head reshapes and transposes keep the split on the heads, the score
  // and context matmuls (two activations, no weight) run on one head per
  // rank, and the output projection is row parallel: one all-reduce of
  // its [2,4,16] fp32 output (512 B) before the residual Add.
  Planned P = plan(R"(
<ir_version: 8, opset_import: ["" : 17]>
attn (float[2,4,16] x) => (float[2,4,16] y)
<float[16,16] wq, float[16,16] wk, float[16,16] wv, float[16,16] wo> {
  hs = Constant <value = int64[4] {2,4,2,8}> ()
  ms = Constant <value = int64[3] {2,4,16}> ()
  sc = Constant <value = float {2.8284}> ()
  q0 = MatMul (x, wq)
  k0 = MatMul (x, wk)
  v0 = MatMul (x, wv)
  q1 = Reshape (q0, hs)
  k1 = Reshape (k0, hs)
  v1 = Reshape (v0, hs)
  q = Transpose <perm = [0,2,1,3]> (q1)
  kt = Transpose <perm = [0,2,3,1]> (k1)
  v = Transpose <perm = [0,2,1,3]> (v1)
  s0 = MatMul (q, kt)
  s = Div (s0, sc)
  a = Softmax <axis = -1> (s)
  c0 = MatMul (a, v)
  c1 = Transpose <perm = [0,2,1,3]> (c0)
  c = Reshape (c1, ms)
  o = MatMul (c, wo)
  y = Add (o, x)
}
)",
                   "tp=2,pp=1,dp=1,mb=2", 2, hw());
  ASSERT_TRUE(P.CU && P.Eval);
  std::pair<unsigned, unsigned> N = checkShapes(P, false);
  EXPECT_GE(N.first, 14u);
  // q0 k0 v0, q1 k1 v1, q kt v, s0 s a c0, c1 c: 15 values split (y is
  // replicated: no piece of its own).
  EXPECT_EQ(N.second, 15u);
  // The weightless matmuls are split work (one head per rank).
  PlanEvaluator::TPSplit S = P.Eval->getTPSplit(0, 2, false);
  for (unsigned I = 0; I < S.Nodes.size(); ++I) {
    StringRef Out = S.Nodes[I]->getOutput(0)->getName();
    if (Out == "s0" || Out == "c0") {
      EXPECT_TRUE(S.Sharded[I]) << Out.str();
      EXPECT_EQ(S.Specs[I].OutputSpecs[0].str(), "S(1)") << Out.str();
    }
  }
  CommList Role = roleCollectives(P.CU->Sharded->Roles[0].M->getGraph());
  double Bytes = 0;
  EXPECT_EQ(evaluatorCollectives(*P.Eval, false, false, &Bytes), Role);
  EXPECT_EQ(Role, (CommList{"AllReduce o"}));
  EXPECT_DOUBLE_EQ(Bytes, 2 * 4 * 16 * 4.0);
  // Backward: x's gradient (model input) is not needed; nothing else
  // changes spec: none.
  EXPECT_EQ(evaluatorCollectives(*P.Eval, false, true), CommList{});
}

TEST(EvaluatorSharding, SequenceParallelMLPTP2) {
  // Two residual MLPs under sequence parallelism (Korthikanti et al. 2022,
  // §4.2.2): each row-parallel output (partial) is reduce-scattered onto
  // the token dim (dim 0 of [4,8,16]: 2 of the 4 rows per rank) for the
  // residual Add, and the next column-parallel matmul all-gathers its
  // input; the model's output leaves gathered. Each tensor is [4,8,16]
  // fp32 = 2,048 B.
  Planned P = plan(R"(
<ir_version: 8, opset_import: ["" : 17]>
mlp (float[4,8,16] x) => (float[4,8,16] y)
<float[16,32] w1, float[32,16] w2, float[16,32] w3, float[32,16] w4> {
  h1 = MatMul (x, w1)
  g1 = Relu (h1)
  m1 = MatMul (g1, w2)
  y1 = Add (m1, x)
  h2 = MatMul (y1, w3)
  g2 = Relu (h2)
  m2 = MatMul (g2, w4)
  y = Add (m2, y1)
}
)",
                   "tp=2,pp=1,dp=1,mb=4,sp=1", 4, hw());
  ASSERT_TRUE(P.CU && P.Eval);
  std::pair<unsigned, unsigned> N = checkShapes(P, true);
  EXPECT_GE(N.first, 6u);
  CommList Role = roleCollectives(P.CU->Sharded->Roles[0].M->getGraph());
  double Bytes = 0;
  EXPECT_EQ(evaluatorCollectives(*P.Eval, true, false, &Bytes), Role);
  EXPECT_EQ(Role, (CommList{"ReduceScatter m1", "AllGather y1",
                            "ReduceScatter m2", "AllGather y"}));
  EXPECT_DOUBLE_EQ(Bytes, 4 * 2048.0);
  // Backward, the duals: y1's gradient (an addend from the column-parallel
  // w3, a token slice from the residual Add) reduce-scattered; m1's and
  // m2's gradients, token slices, all-gathered. x is the model's input.
  Bytes = 0;
  EXPECT_EQ(evaluatorCollectives(*P.Eval, true, true, &Bytes),
            (CommList{"AllGather m1", "ReduceScatter y1", "AllGather m2"}));
  EXPECT_DOUBLE_EQ(Bytes, 3 * 2048.0);
}

TEST(EvaluatorSharding, VocabParallelCrossEntropyTP2) {
  // An MLP (column then row parallel), a Relu, a column-parallel vocab
  // head (64 classes, 32 per rank) and SoftmaxCrossEntropyLoss on its split
  // scores: Megatron's vocab-parallel cross entropy (LossRules.cpp).
  // Forward: y
  // [4,16] f32 = 256 B all-reduced, and the loss's row max, sum of exps
  // and target score, 4 rows x 4 B = 16 B each, all-reduced: 304 B. The
  // scores are never gathered.
  Planned P = plan(R"(
<ir_version: 8, opset_import: ["" : 17]>
head (float[4,16] x, int64[4] labels) => (float loss)
<float[16,32] w1, float[32,16] w2, float[16,64] wh> {
  h = MatMul (x, w1)
  r = Relu (h)
  y = MatMul (r, w2)
  a = Relu (y)
  logits = MatMul (a, wh)
  loss = SoftmaxCrossEntropyLoss (logits, labels)
}
)",
                   "tp=2,pp=1,dp=1,mb=4,sp=0", 4, hw());
  ASSERT_TRUE(P.CU && P.Eval);
  std::pair<unsigned, unsigned> N = checkShapes(P, false);
  EXPECT_GE(N.second, 2u); // h, r and logits split
  CommList Role = roleCollectives(P.CU->Sharded->Roles[0].M->getGraph());
  double Bytes = 0;
  EXPECT_EQ(evaluatorCollectives(*P.Eval, false, false, &Bytes), Role);
  EXPECT_EQ(Role, (CommList{"AllReduce y", "AllReduce loss", "AllReduce loss",
                            "AllReduce loss"}));
  EXPECT_DOUBLE_EQ(Bytes, 256 + 3 * 16.0);
  // Backward: the scores' gradient is split as they are (no collective);
  // a's, an addend from the column-parallel head, all-reduced.
  Bytes = 0;
  EXPECT_EQ(evaluatorCollectives(*P.Eval, false, true, &Bytes),
            (CommList{"AllReduce a"}));
  EXPECT_DOUBLE_EQ(Bytes, 256.0);
}

} // namespace
