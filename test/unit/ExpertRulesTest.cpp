//===- ExpertRulesTest.cpp - The ep axis' rules (Rules.h) -----------------===//
//
// applyExpertRules on the torch export with unrolled experts (moe-tiny) and
// on a stacked-expert graph, its errors, and the ep transitions and token
// specs the sharder, the evaluator and the search read from it.
//
//===----------------------------------------------------------------------===//

#include "loom/Shard/ExpertRules.h"
#include "loom/Analysis/Experts.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"

#include "ExpertModels.h"
#include "LoadModel.h"
#include "gtest/gtest.h"
#include <algorithm>

using namespace loom;
using namespace llvm;

namespace {

std::string errorOf(Expected<ExpertAxisRules> R) {
  return R ? std::string("no error") : toString(R.takeError());
}

TEST(ExpertRules, UnrolledBranchesAndTheirCombineChain) {
  // moe-tiny: 2 MoE layers of 4 experts, each summed by an Add chain.
  CompilationUnit CU = loadExampleModel("moe-tiny.onnx");
  const Graph &G = CU.M->getGraph();
  std::vector<ExpertGroup> Groups = findExperts(G, CU.Layers);
  ASSERT_EQ(Groups.size(), 2u);
  Expected<ExpertAxisRules> R = applyExpertRules(G, Groups, 2);
  ASSERT_TRUE(!!R) << toString(R.takeError());
  EXPECT_EQ(R->NumExperts, 4u);
  // Unrolled experts hold their own weights: nothing is sliced along dim 0.
  EXPECT_TRUE(R->SplitParams.empty());
  EXPECT_FALSE(R->BranchParams.empty());
  unsigned Branch = 0, Combine = 0;
  for (const ExpertGroup &EG : Groups)
    for (const auto &KV : EG.BranchOf) {
      ExpertNodeRule NR = R->lookup(KV.first);
      EXPECT_EQ(NR.Role, ExpertRole::Branch);
      EXPECT_EQ(NR.Expert, (int)KV.second);
      EXPECT_EQ(NR.GroupExperts, 4u);
    }
  for (const auto &KV : R->Nodes) {
    Branch += KV.second.Role == ExpertRole::Branch;
    if (KV.second.Role == ExpertRole::Combine) {
      ++Combine;
      EXPECT_EQ(KV.first->getOpType(), "Add");
    }
  }
  EXPECT_EQ(Branch, Groups[0].BranchOf.size() + Groups[1].BranchOf.size());
  // Each chain ends at the group's output; 4 experts need 3 Adds, and the
  // torch loop's first link adds expert 0 to the zero accumulator: 3 or 4
  // per layer.
  EXPECT_GE(Combine, 6u);
  EXPECT_LE(Combine, 8u);
  for (const ExpertGroup &EG : Groups)
    EXPECT_EQ(R->lookup(EG.Output->getDefiningNode()).Role,
              ExpertRole::Combine);
}

TEST(ExpertRules, StackedWorkAndItsWeights) {
  CompilationUnit CU = loadTextModel(StackedModel);
  const Graph &G = CU.M->getGraph();
  std::vector<ExpertGroup> Groups = findExperts(G, CU.Layers);
  Expected<ExpertAxisRules> R = applyExpertRules(G, Groups, 4);
  ASSERT_TRUE(!!R) << toString(R.takeError());
  EXPECT_EQ(R->NumExperts, 8u);
  std::vector<std::string> Split;
  for (const Value *V : R->SplitParams)
    Split.push_back(V->getName().str());
  std::sort(Split.begin(), Split.end());
  EXPECT_EQ(Split, (std::vector<std::string>{"w1", "w2"}));
  unsigned Stacked = 0;
  for (const auto &NP : G.getNodes()) {
    ExpertNodeRule NR = R->lookup(NP.get());
    bool Dense = NP->getOutput(0)->getName() == "z";
    EXPECT_EQ(NR.Role, Dense ? ExpertRole::None : ExpertRole::Stacked)
        << NP->getName().str();
    Stacked += NR.Role == ExpertRole::Stacked;
  }
  EXPECT_EQ(Stacked, 3u);
  // The evaluator's view (any degree) is the same work.
  Expected<ExpertAxisRules> Any =
      applyExpertRules(G, Groups, RuleContext::AnyDivides);
  ASSERT_TRUE(!!Any);
  EXPECT_EQ(Any->Nodes.size(), 3u);
  EXPECT_EQ(Any->SplitParams.size(), 2u);
}

TEST(ExpertRules, Errors) {
  CompilationUnit CU = loadTextModel(StackedModel);
  const Graph &G = CU.M->getGraph();
  std::vector<ExpertGroup> Groups = findExperts(G, CU.Layers);
  EXPECT_EQ(errorOf(applyExpertRules(G, Groups, 3)),
            "ep=3 does not divide the 8 experts");
  EXPECT_EQ(errorOf(applyExpertRules(G, {}, 2)),
            "ep=2: the model has no experts to split");
  // ep = 1 splits nothing.
  Expected<ExpertAxisRules> One = applyExpertRules(G, Groups, 1);
  ASSERT_TRUE(!!One);
  EXPECT_TRUE(One->Nodes.empty());
  // Two layers with different counts cannot share one ep numbering.
  std::vector<ExpertGroup> Two = {Groups[0], Groups[0]};
  Two[1].NumExperts = 4;
  EXPECT_EQ(errorOf(applyExpertRules(G, Two, 2)),
            "ep=2: MoE layers have different expert counts (8 and 4)");
  EXPECT_TRUE(isExpertSplitLegal(8, 1));
  EXPECT_TRUE(isExpertSplitLegal(8, 4));
  EXPECT_FALSE(isExpertSplitLegal(8, 3));
  EXPECT_FALSE(isExpertSplitLegal(0, 2));
  EXPECT_TRUE(isExpertSplitLegal(0, 1));
}

TEST(ExpertRules, TokenSpecsAndTransitions) {
  // Stacked work moves tokens along dims 0 (experts) and 1 (tokens);
  // branches gather them along dim 0; a tp split elsewhere survives.
  EXPECT_EQ(getExpertInputSpec(ExpertRole::Stacked, AxisSpec::split(1)),
            AxisSpec::replicated());
  EXPECT_EQ(getExpertInputSpec(ExpertRole::Stacked, AxisSpec::split(2)),
            AxisSpec::split(2));
  EXPECT_EQ(getExpertInputSpec(ExpertRole::Branch, AxisSpec::split(0)),
            AxisSpec::replicated());
  EXPECT_EQ(getExpertInputSpec(ExpertRole::Branch, AxisSpec::split(1)),
            AxisSpec::split(1));
  EXPECT_EQ(getExpertInputSpec(ExpertRole::Combine, AxisSpec::split(0)),
            AxisSpec::split(0));
  EXPECT_EQ(getExpertInputSpec(ExpertRole::Branch, AxisSpec::partial()),
            AxisSpec::partial());
  // Into stacked work [E, C, d]: dispatched; a broadcast [1, N, d]:
  // gathered; out of it: combined; within or outside: nothing.
  EXPECT_EQ(getStackedTransition(false, true, 8), ExpertTransition::Dispatch);
  EXPECT_EQ(getStackedTransition(false, true, 1),
            ExpertTransition::GatherTokens);
  EXPECT_EQ(getStackedTransition(true, false, 8), ExpertTransition::Combine);
  EXPECT_EQ(getStackedTransition(true, true, 8), ExpertTransition::None);
  EXPECT_EQ(getStackedTransition(false, false, 8), ExpertTransition::None);
  EXPECT_EQ(getExpertTransitionName(ExpertTransition::Dispatch).str(),
            "all-to-all dispatch");
}

/// The ep rule of each node of the crossing test's graph, by node name.
ExpertNodeRule ruleByName(const Node *N) {
  StringRef Name = N->getName();
  ExpertNodeRule R;
  R.GroupExperts = 2;
  if (Name.startswith("b")) {
    R.Role = ExpertRole::Branch;
    R.Expert = Name.back() - '0';
  } else if (Name.startswith("sum")) {
    R.Role = ExpertRole::Combine;
  } else if (Name.startswith("st")) {
    R.Role = ExpertRole::Stacked;
  }
  return R;
}

TEST(ExpertRules, CrossingsTheRoleBuilderEmitsAndTheEvaluatorPrices) {
  // Two unrolled experts (b*0, b*1) weighted by the parts of a Split of
  // the routing weights along the expert dim, summed by an Add (sum), the
  // sum read by a Relu; and stacked work (st*) on [E, C, d] and on a
  // broadcast [1, N, d].
  Expected<std::unique_ptr<Model>> M = importModelFromText(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n"
      "moe (float[4, 8] x, float[4, 2] r, float[2, 3, 8] d, float[1, 4, 8] "
      "t) => (float[4, 8] y, float[2, 3, 8] z, float[1, 4, 8] u) <float[8, "
      "8] w0, float[8, 8] w1> {\n"
      "  r0, r1 = Split <axis = 1> (r)\n"
      "  h0 = MatMul (x, w0)\n"
      "  h1 = MatMul (x, w1)\n"
      "  g0 = Mul (h0, r0)\n"
      "  g1 = Mul (h1, r1)\n"
      "  s = Add (g0, g1)\n"
      "  y = Relu (s)\n"
      "  e = Relu (d)\n"
      "  z = Neg (e)\n"
      "  u = Relu (t)\n"
      "}\n",
      "moe");
  ASSERT_TRUE(!!M) << toString(M.takeError());
  Graph &G = (*M)->getGraph();
  const char *Names[] = {"split", "b_h0", "b_h1", "b_g0", "b_g1",
                         "sum",   "out",  "st_e", "comb", "st_u"};
  unsigned I = 0;
  for (const auto &NP : G.getNodes())
    NP->setName(Names[I++]);
  // The stacked work's result as shape inference types it.
  G.getNodes()[7]->getOutput(0)->Type = G.getInputs()[2]->Type;
  DenseSet<const Value *> DD = findDataDependent(G);
  auto Crossing = [&](unsigned NodeIdx, unsigned Input) {
    ExpertCrossing XC =
        getExpertCrossing(*G.getNodes()[NodeIdx], Input, ruleByName, DD);
    return std::make_pair(XC.Kind, XC.V ? XC.V->getName().str() : "");
  };
  using T = ExpertTransition;
  // The tokens into each branch, gathered; the weight is not.
  EXPECT_EQ(Crossing(1, 0), std::make_pair(T::Gather, std::string("x")));
  EXPECT_EQ(Crossing(2, 0), std::make_pair(T::Gather, std::string("x")));
  EXPECT_EQ(Crossing(1, 1).first, T::None);
  // A routing part: the Split's input, the same on every rank.
  EXPECT_EQ(Crossing(3, 1), std::make_pair(T::Gather, std::string("r")));
  EXPECT_EQ(Crossing(4, 1), std::make_pair(T::Gather, std::string("r")));
  // Within a branch and along the chain: nothing.
  EXPECT_EQ(Crossing(3, 0).first, T::None);
  EXPECT_EQ(Crossing(5, 0).first, T::None);
  // The sum, read outside the chain: reduce-scattered.
  EXPECT_EQ(Crossing(6, 0), std::make_pair(T::ReduceScatter, std::string("s")));
  // Stacked work: dispatched in, combined out; a broadcast expert dim is
  // gathered.
  EXPECT_EQ(Crossing(7, 0), std::make_pair(T::Dispatch, std::string("d")));
  EXPECT_EQ(Crossing(8, 0), std::make_pair(T::Combine, std::string("e")));
  EXPECT_EQ(Crossing(9, 0), std::make_pair(T::GatherTokens, std::string("t")));
}

} // namespace
