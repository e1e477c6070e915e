//===- ExpertsTest.cpp - MoE experts found, and expert parallelism costed -===//
//
// findExperts on the torch export with unrolled experts (moe-tiny), on a
// stacked-expert graph, and on graphs that look like experts but are not;
// then the evaluator's EP semantics (ParallelPlan.h) on both forms.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/Experts.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Planner/PlanCost.h"

#include "ExpertModels.h"
#include "LoadModel.h"
#include "gtest/gtest.h"
#include <set>

using namespace loom;
using namespace llvm;

namespace {

/// The expert number in a torch node name ".../experts.3/...", or -1.
int expertInName(StringRef Name) {
  size_t P = Name.find("experts.");
  if (P == StringRef::npos)
    return -1;
  unsigned N;
  StringRef Rest = Name.drop_front(P + 8);
  if (Rest.take_while([](char C) { return isDigit(C); }).getAsInteger(10, N))
    return -1;
  return N;
}

TEST(ExpertsTest, UnrolledTorchExperts) {
  // moe-tiny: 2 decoder layers, each a MoE of 4 SwiGLU experts written as a
  // Python loop (tiny_models.py, MoEMLP): out = out + expert_e(x) * w_e.
  CompilationUnit CU = loadExampleModel("moe-tiny.onnx");
  std::vector<ExpertGroup> Groups = findExperts(CU.M->getGraph(), CU.Layers);
  ASSERT_EQ(Groups.size(), 2u);
  EXPECT_LT(Groups[0].Layer, Groups[1].Layer);
  for (const ExpertGroup &EG : Groups) {
    EXPECT_EQ(EG.NumExperts, 4u);
    EXPECT_FALSE(EG.isStacked());
    EXPECT_TRUE(EG.StackedNodes.empty());
    ASSERT_NE(EG.Combine, nullptr);
    EXPECT_EQ(EG.Combine->getOpType(), "Add");
    ASSERT_NE(EG.Tokens, nullptr);
    ASSERT_NE(EG.Output, nullptr);
    // The token tensor [b*t, h] = [32, 64]; the sum has the same shape.
    EXPECT_EQ(EG.Tokens->Type.str(), "f32[32,64]");
    EXPECT_EQ(EG.Output->Type.str(), "f32[32,64]");
    // Every node of a branch is the expert its torch scope names (the
    // routing-weight nodes Equal/Where/ReduceSum are outside any expert's
    // scope but belong to its branch); each branch has the same size.
    std::vector<unsigned> Size(4, 0);
    unsigned Named = 0;
    for (const auto &NP : CU.M->getGraph().getNodes()) {
      auto It = EG.BranchOf.find(NP.get());
      int InName = expertInName(NP->getName());
      if (It == EG.BranchOf.end()) {
        EXPECT_TRUE(InName < 0 || NP->Layer != (int)EG.Layer)
            << NP->getName().str();
        continue;
      }
      EXPECT_EQ(NP->Layer, (int)EG.Layer);
      ++Size[It->second];
      if (InName >= 0) {
        ++Named;
        EXPECT_EQ(InName, (int)It->second) << NP->getName().str();
      }
    }
    EXPECT_GT(Named, 0u);
    for (unsigned E = 1; E < 4; ++E)
      EXPECT_EQ(Size[E], Size[0]);
    // gate, up and down projections, each expert its own.
    ASSERT_EQ(EG.BranchParams.size(), 4u);
    for (unsigned E = 0; E < 4; ++E) {
      ASSERT_EQ(EG.BranchParams[E].size(), 3u);
      for (const Value *P : EG.BranchParams[E])
        EXPECT_NE(P->getName().find("experts." + std::to_string(E) + "."),
                  StringRef::npos)
            << P->getName().str();
    }
  }
  // The router, attention and norms are no expert's.
  for (const auto &NP : CU.M->getGraph().getNodes())
    if (NP->getName().contains("/gate/") || NP->getName().contains("attn"))
      for (const ExpertGroup &EG : Groups)
        EXPECT_FALSE(EG.contains(NP.get())) << NP->getName().str();
}

TEST(ExpertsTest, GroupsCutByLayersAreKeptWhole) {
  // moe-tiny as detect-layers numbers it, then cut again between experts 1
  // and 2 of its first MoE layer (what detect-layers did when the expert
  // branches repeated and the blocks did not): every node of that layer
  // from expert 2's first node on moves to a new layer.
  CompilationUnit CU = loadExampleModel("moe-tiny.onnx");
  Graph &G = CU.M->getGraph();
  std::vector<ExpertGroup> Before = findExperts(G, CU.Layers);
  ASSERT_EQ(Before.size(), 2u);
  int L = (int)Before[0].Layer;
  unsigned NumLayers = CU.Layers.size();
  std::vector<int> Original;
  for (const auto &NP : G.getNodes())
    Original.push_back(NP->Layer);
  bool Cut = false;
  for (const auto &NP : G.getNodes()) {
    auto It = Before[0].BranchOf.find(NP.get());
    Cut |= It != Before[0].BranchOf.end() && It->second == 2;
    if (NP->Layer > L || (Cut && NP->Layer == L))
      ++NP->Layer;
  }
  CU.Layers.insert(CU.Layers.begin() + L + 1, CU.Layers[L]);
  for (unsigned I = 0; I < CU.Layers.size(); ++I)
    CU.Layers[I].Id = I;
  // The chain is followed across the cut: still 4 experts per group.
  std::vector<ExpertGroup> Split = findExperts(G, CU.Layers);
  ASSERT_EQ(Split.size(), 2u);
  EXPECT_EQ(Split[0].NumExperts, 4u);

  ASSERT_TRUE(keepExpertGroupsWhole(G, CU.Layers));
  // The MoE layer whole, from its router to its combine chain; what the
  // cut layer held before the router multiplies weights (block 0's
  // attention) and stays a layer of its own: one layer more than
  // detect-layers' own numbering, the second block as it was.
  EXPECT_EQ(CU.Layers.size(), NumLayers + 1);
  for (unsigned I = 0; I < G.getNodes().size(); ++I) {
    const Node &N = *G.getNodes()[I];
    if (Original[I] < L)
      EXPECT_EQ(N.Layer, Original[I]) << N.getName().str();
    else if (Original[I] > L)
      EXPECT_EQ(N.Layer, Original[I] + 1) << N.getName().str();
    else
      EXPECT_TRUE(N.Layer == L || N.Layer == L + 1) << N.getName().str();
    // No value is read by a layer before the one that makes it.
    for (const Value *V : N.getInputs())
      if (const Node *D = V ? V->getDefiningNode() : nullptr)
        EXPECT_LE(D->Layer, N.Layer) << N.getName().str();
  }
  std::vector<ExpertGroup> After = findExperts(G, CU.Layers);
  ASSERT_EQ(After.size(), 2u);
  for (const ExpertGroup &EG : After) {
    EXPECT_EQ(EG.NumExperts, 4u);
    for (const auto &KV : EG.BranchOf)
      EXPECT_EQ(KV.first->Layer, (int)EG.Layer);
    // The router (MatMul -> Softmax -> TopK) too.
    for (const auto &NP : G.getNodes())
      if (NP->getOpType() == "TopK" &&
          NP->getName().startswith(EG.Layer == (unsigned)L + 1 ? "/layers.0/"
                                                               : "/layers.1/"))
        EXPECT_EQ(NP->Layer, (int)EG.Layer);
  }
  // Nothing spans layers any more: a second call changes nothing.
  EXPECT_FALSE(keepExpertGroupsWhole(G, CU.Layers));
}

TEST(ExpertsTest, StackedExperts) {
  CompilationUnit CU = loadTextModel(StackedModel);
  std::vector<ExpertGroup> Groups = findExperts(CU.M->getGraph(), CU.Layers);
  ASSERT_EQ(Groups.size(), 1u);
  const ExpertGroup &EG = Groups[0];
  EXPECT_TRUE(EG.isStacked());
  EXPECT_EQ(EG.NumExperts, 8u);
  ASSERT_EQ(EG.StackedParams.size(), 2u);
  EXPECT_EQ(EG.StackedParams[0]->getName(), "w1");
  EXPECT_EQ(EG.StackedParams[1]->getName(), "w2");
  EXPECT_EQ(EG.Tokens->getName(), "xe");
  EXPECT_EQ(EG.Output->getName(), "y");
  ASSERT_EQ(EG.StackedNodes.size(), 3u);
  EXPECT_EQ(EG.StackedNodes[0]->getOpType(), "MatMul");
  EXPECT_EQ(EG.StackedNodes[1]->getOpType(), "Relu");
  EXPECT_EQ(EG.StackedNodes[2]->getOpType(), "MatMul");
  EXPECT_TRUE(EG.BranchOf.empty());
  EXPECT_EQ(EG.Combine, nullptr);
}

/// Two branches on the same tokens summed by an Add chain; \p Second is
/// the second branch's body (its projections w3, w4).
std::string makeBranches(const std::string &Second) {
  return "<ir_version: 8, opset_import: [\"\" : 17]>\n"
         "g (float[32,16] x) => (float[32,16] y)\n"
         "<float[16,32] w1, float[32,16] w2, float[16,32] w3, "
         "float[32,16] w4, float[16,16] w5> {\n"
         "  a1 = MatMul (x, w1)\n  a2 = Relu (a1)\n  a3 = MatMul (a2, w2)\n" +
         Second + "  s = Add (a3, b3)\n  y = Add (s, x)\n}\n";
}

TEST(ExpertsTest, IsomorphicBranchesOnly) {
  // Without detect-layers (which would take two identical branches for two
  // layers of a model this small) the graph is one layer.
  auto Load = [](const std::string &Second) {
    return loadTextModel(makeBranches(Second), "infer-shapes");
  };
  // Isomorphic: two experts, numbered by chain order (no names).
  {
    CompilationUnit CU = Load(
        "  b1 = MatMul (x, w3)\n  b2 = Relu (b1)\n  b3 = MatMul (b2, w4)\n");
    std::vector<ExpertGroup> Groups = findExperts(CU.M->getGraph(), CU.Layers);
    ASSERT_EQ(Groups.size(), 1u);
    EXPECT_EQ(Groups[0].NumExperts, 2u);
    EXPECT_EQ(Groups[0].BranchOf.size(), 6u);
    EXPECT_EQ(Groups[0].Tokens->getName(), "x");
    EXPECT_EQ(Groups[0].Combine->getOutput(0)->getName(), "s");
    // The experts' sum, not the residual add after it.
    EXPECT_EQ(Groups[0].Output->getName(), "s");
    EXPECT_EQ(Groups[0].BranchParams[1][0]->getName(), "w3");
  }
  // Not isomorphic (Sigmoid for Relu): a residual sum of two different
  // blocks, not experts.
  {
    CompilationUnit CU =
        Load("  b1 = MatMul (x, w3)\n  b2 = Sigmoid (b1)\n  b3 = MatMul (b2, "
             "w4)\n");
    EXPECT_TRUE(findExperts(CU.M->getGraph(), CU.Layers).empty());
  }
  // Shared weights: the same projection twice is not two experts.
  {
    CompilationUnit CU = Load(
        "  b1 = MatMul (x, w1)\n  b2 = Relu (b1)\n  b3 = MatMul (b2, w2)\n");
    EXPECT_TRUE(findExperts(CU.M->getGraph(), CU.Layers).empty());
  }
  // Different token tensors (x and a projection of it): not experts of one
  // MoE layer.
  {
    CompilationUnit CU =
        Load("  xx = MatMul (x, w5)\n  b1 = MatMul (xx, w3)\n  b2 = Relu (b1)\n"
             "  b3 = MatMul (b2, w4)\n");
    EXPECT_TRUE(findExperts(CU.M->getGraph(), CU.Layers).empty());
  }
}

TEST(ExpertsTest, ExpertParallelCost) {
  CompilationUnit CU = loadTextModel(StackedModel);
  // One Atlas 800T A2 server: 8 NPUs over HCCS.
  Expected<HardwareModel> HW = loadHardwareModel(
      std::string(LOOM_SOURCE_DIR) + "/examples/hw/atlas800t-a2.yaml");
  ASSERT_TRUE(!!HW) << toString(HW.takeError());
  CU.HW = &*HW;
  runPipeline(CU, "annotate-costs");
  EvaluatorOptions EO;
  EO.Batch = 8;
  EO.Seq = 4;
  PlanEvaluator Eval(CU.M->getGraph(), CU.Layers, CU.NodeCosts, *HW, EO);
  ASSERT_EQ(Eval.getExpertGroups().size(), 1u);
  auto Cost = [&](unsigned DP, unsigned EP, unsigned Zero) {
    ParallelPlan P;
    P.DP = DP;
    P.TP = 8 / DP;
    P.EP = EP;
    P.ZeroStage = Zero;
    P.NumMicroBatches = 8 / DP;
    Expected<PlanCost> PC = Eval.evaluate(P);
    EXPECT_TRUE(!!PC) << (PC ? "" : toString(PC.takeError()));
    return PC ? *PC : PlanCost();
  };
  // Expert parameters 2 * 8*16*32 = 8192, dense 256. At tp=1, dp=8:
  // ep=1 holds all, ep=8 one expert (1024), ep=2 four (4096).
  PlanCost E1 = Cost(8, 1, 0), E2 = Cost(8, 2, 0), E8 = Cost(8, 8, 0);
  EXPECT_EQ(E1.Stages[0].ParamCount, 8192 + 256);
  EXPECT_EQ(E2.Stages[0].ExpertParamCount, 4096);
  EXPECT_EQ(E8.Stages[0].ExpertParamCount, 1024);
  EXPECT_EQ(E8.Stages[0].ParamCount, 1024 + 256);
  // Weights (2 bytes), fp32 gradients (4, the default grad=fp32) and Adam
  // (12): 18 bytes each.
  EXPECT_DOUBLE_EQ(E1.Stages[0].Memory.Weights + E1.Stages[0].Memory.Gradients +
                       E1.Stages[0].Memory.OptimizerStates -
                       (E8.Stages[0].Memory.Weights +
                        E8.Stages[0].Memory.Gradients +
                        E8.Stages[0].Memory.OptimizerStates),
                   (8192 - 1024) * 18.0);
  // ZeRO-1 at ep=2: Adam states of the dense part over dp=8, of the
  // experts over dp/ep=4: 12 * (256/8 + 4096/4).
  PlanCost Z = Cost(8, 2, 1);
  EXPECT_DOUBLE_EQ(Z.Stages[0].Memory.OptimizerStates,
                   12.0 * (256.0 / 8 + 4096.0 / 4));
  // AllToAll traffic only with ep > 1; same FLOPs, fewer weight bytes.
  EXPECT_EQ(E1.Stages[0].EPCommS, 0);
  EXPECT_GT(E2.Stages[0].EPCommS, 0);
  // The server's HCCS is a full mesh (atlas800t-a2.yaml, full_mesh): ep=2
  // sends half its tokens over the one link to its peer (1/7 of the
  // bandwidth), ep=8 sends 7/8 of them over all 7 links, so ep=8's
  // AllToAll is the faster one: 7/8 / 1 against 1/2 / (1/7) = 3.5 of the
  // bandwidth term. (Before HCCS was costed as a mesh, a switch gave each
  // group the whole bandwidth and ep=8, moving more bytes, was slower.)
  EXPECT_LT(E8.Stages[0].EPCommS, E2.Stages[0].EPCommS);
  EXPECT_LE(E8.Stages[0].ForwardS, E1.Stages[0].ForwardS);
  // ep must divide dp and the experts; a model without experts refuses it.
  ParallelPlan Bad;
  Bad.DP = 4;
  Bad.TP = 2;
  Bad.EP = 8;
  Expected<PlanCost> R = Eval.evaluate(Bad);
  ASSERT_FALSE(!!R);
  EXPECT_EQ(toString(R.takeError()), "ep=8 does not divide dp=4");
  Bad.EP = 3;
  Bad.DP = 6;
  R = Eval.evaluate(Bad);
  ASSERT_FALSE(!!R);
  EXPECT_EQ(toString(R.takeError()), "ep=3 does not divide the 8 experts of "
                                     "layer 0");
}

TEST(ExpertsTest, CompletePlanCarvesEPOutOfDP) {
  PlanSpec S;
  S.TP = 2;
  S.EP = 4;
  Expected<ParallelPlan> P = completePlan(S, 16, 64);
  ASSERT_TRUE(!!P) << toString(P.takeError());
  EXPECT_EQ(P->DP, 8u);
  EXPECT_EQ(P->EP, 4u);
  S.EP = 16; // divides dp*tp = 16 but not dp = 8
  P = completePlan(S, 16, 64);
  ASSERT_FALSE(!!P);
  EXPECT_EQ(toString(P.takeError()),
            "--plan: ep=16 does not divide dp = 8 (expert-parallel ranks are "
            "carved out of the data-parallel ones)");
}

} // namespace

TEST(ExpertsTest, RankCopiesOfADispatcherThatSendsPerRank) {
  // One expert per rank: a token's k experts are on k ranks.
  EXPECT_DOUBLE_EQ(getEPRankCopies(8, 2, 8), 2.0);
  // Top-1: one rank whatever the split.
  EXPECT_DOUBLE_EQ(getEPRankCopies(16, 1, 4), 1.0);
  // 8 experts over 2 ranks, top-2: a rank holds neither with probability
  // C(4,2)/C(8,2) = 6/28, so 2 (1 - 6/28) = 22/14 ranks per token.
  EXPECT_DOUBLE_EQ(getEPRankCopies(8, 2, 2), 22.0 / 14);
  // Qwen3-30B-A3B at ep=8: 8 (1 - C(112,8)/C(128,8)) = 5.3394 (Python's
  // math.comb: 5.339356895383487) of its 8 copies.
  EXPECT_NEAR(getEPRankCopies(128, 8, 8), 5.339356895383487, 1e-12);
  // No ep split: the k copies stay.
  EXPECT_DOUBLE_EQ(getEPRankCopies(128, 8, 1), 8.0);
}

/// StackedModel with a router: scores [32, 8] over the 8 experts, top-2.
static const char *RoutedStackedModel =
    R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[8,4,16] xe, float[32,16] x) => (float[8,4,16] y, float[32,16] z, float[32,2] v)
<float[16,16] wd, float[16,8] wr, float[8,16,32] w1, float[8,32,16] w2, int64[1] k = {2}> {
  z = MatMul (x, wd)
  s = MatMul (x, wr)
  v, i = TopK <axis = -1> (s, k)
  h = MatMul (xe, w1)
  r = Relu (h)
  y = MatMul (r, w2)
}
)";

TEST(ExpertsTest, PerRankDispatchMovesFewerCopies) {
  CompilationUnit CU = loadTextModel(RoutedStackedModel);
  std::vector<ExpertGroup> Groups = findExperts(CU.M->getGraph(), CU.Layers);
  ASSERT_EQ(Groups.size(), 1u);
  EXPECT_EQ(getRouterTopK(CU.M->getGraph(), Groups[0]), 2u);
  EXPECT_EQ(getRouterTopK(loadTextModel(StackedModel).M->getGraph(), Groups[0]),
            0u);
  Expected<HardwareModel> HW = loadHardwareModel(
      std::string(LOOM_SOURCE_DIR) + "/examples/hw/atlas800t-a2.yaml");
  ASSERT_TRUE(!!HW) << toString(HW.takeError());
  CU.HW = &*HW;
  runPipeline(CU, "annotate-costs");
  auto EPComm = [&](bool PerRank, double Imb) {
    EvaluatorOptions EO;
    EO.Batch = 8;
    EO.Seq = 4;
    EO.MoEImbalance = Imb;
    EO.EPDispatchPerRank = PerRank;
    PlanEvaluator Eval(CU.M->getGraph(), CU.Layers, CU.NodeCosts, *HW, EO);
    ParallelPlan P;
    P.DP = 8;
    P.EP = 2;
    P.NumMicroBatches = 1;
    Expected<PlanCost> PC = Eval.evaluate(P);
    EXPECT_TRUE(!!PC) << (PC ? "" : toString(PC.takeError()));
    return PC ? PC->Stages[0].EPCommS : 0.0;
  };
  // The all-to-all is L + X (latency, bytes); moe.imbalance 2 doubles the
  // bytes: X = EP(2) - EP(1). Per rank, 8 experts over ep=2 at top-2
  // send 22/14 of the 2 copies (above): L + 11/14 X.
  double One = EPComm(false, 1), Two = EPComm(false, 2), Rank = EPComm(true, 1);
  double X = Two - One;
  EXPECT_GT(X, 0);
  EXPECT_NEAR(Rank, One - (1 - 11.0 / 14) * X, 1e-12);
}
