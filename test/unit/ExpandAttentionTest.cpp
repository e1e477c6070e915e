//===- ExpandAttentionTest.cpp - ONNX's Attention op as its ops -----------===//
//
// expandAttentionOps (lib/Shard/ExpandAttention.cpp) on hand-written opset-23
// graphs: the ops a causal 4-D attention becomes, the mask's entries, the
// K/V repeat of a grouped-query op, which ops Ulysses leaves fused (its
// K/V heads divide), and an op left whole with the reason.
//
//===----------------------------------------------------------------------===//

#include "loom/Shard/Sharding.h"

#include "LoadModel.h"
#include "gtest/gtest.h"

#include <cmath>

using namespace loom;
using namespace llvm;

namespace {

std::string opTypes(const Graph &G) {
  std::string S;
  for (const auto &N : G.getNodes()) {
    if (!S.empty())
      S += " ";
    S += N->getOpType().str();
  }
  return S;
}

const char *Causal = R"(<ir_version: 10, opset_import: ["" : 23]>
g (float[2,2,4,8] q, float[2,2,4,8] k, float[2,2,4,8] v) => (float[2,2,4,8] y)
{
  y = Attention <is_causal = 1> (q, k, v)
})";

TEST(ExpandAttention, CausalFourD) {
  CompilationUnit CU = loadTextModel(Causal, "infer-shapes");
  Graph &G = CU.M->getGraph();
  std::vector<std::string> Notes;
  EXPECT_EQ(expandAttentionOps(G, 0, Notes), 1u);
  EXPECT_TRUE(Notes.empty());
  // K transposed, the scores, x 1/sqrt(8), + the causal mask, softmax,
  // the context; the output value is the last MatMul's.
  EXPECT_EQ(opTypes(G),
            "Transpose MatMul Constant Mul Constant Add Softmax MatMul");
  const Value *Y = G.getOutputs()[0];
  ASSERT_TRUE(Y->getDefiningNode());
  EXPECT_EQ(Y->getDefiningNode()->getOpType(), "MatMul");
  EXPECT_EQ(Y->getName(), "y");
  const Node &Scale = *G.getNodes()[2];
  Expected<std::vector<double>> S =
      Scale.getAttribute("value")->Ts[0].getFloatValues();
  ASSERT_TRUE(!!S);
  EXPECT_NEAR((*S)[0], 1 / std::sqrt(8.0), 1e-7);
  // Row i keeps keys 0..i: -inf above the diagonal of the 4 x 4 mask.
  Expected<std::vector<double>> M =
      G.getNodes()[4]->getAttribute("value")->Ts[0].getFloatValues();
  ASSERT_TRUE(!!M);
  ASSERT_EQ(M->size(), 16u);
  EXPECT_EQ((*M)[0 * 4 + 0], 0.0);
  EXPECT_TRUE(std::isinf((*M)[0 * 4 + 1]) && (*M)[0 * 4 + 1] < 0);
  EXPECT_EQ((*M)[3 * 4 + 2], 0.0);
  EXPECT_TRUE(std::isinf((*M)[2 * 4 + 3]));
}

const char *GroupedQuery = R"(<ir_version: 10, opset_import: ["" : 23]>
g (float[2,8,16] q, float[2,8,8] k, float[2,8,8] v) => (float[2,8,16] y)
{
  y = Attention <q_num_heads = 4, kv_num_heads = 2, scale = 0.25> (q, k, v)
})";

TEST(ExpandAttention, GroupedQueryThreeDAndUlysses) {
  std::vector<std::string> Notes;
  {
    // Ulysses over tp x cp = 2 ranks: the 2 K/V heads divide, the op stays.
    CompilationUnit CU = loadTextModel(GroupedQuery, "infer-shapes");
    EXPECT_EQ(expandAttentionOps(CU.M->getGraph(), 2, Notes), 0u);
    EXPECT_EQ(opTypes(CU.M->getGraph()), "Attention");
  }
  // Over 4 they do not: written out, heads cut from the 3-D inputs, K and V
  // repeated 2x (Unsqueeze, Expand, Reshape), the given scale, no mask,
  // the output put back to [2, 8, 16].
  CompilationUnit CU = loadTextModel(GroupedQuery, "infer-shapes");
  Graph &G = CU.M->getGraph();
  EXPECT_EQ(expandAttentionOps(G, 4, Notes), 1u);
  EXPECT_TRUE(Notes.empty());
  EXPECT_EQ(opTypes(G),
            "Constant Reshape Transpose "
            "Constant Reshape Transpose Constant Unsqueeze Constant Expand "
            "Constant Reshape "
            "Constant Reshape Transpose Constant Unsqueeze Constant Expand "
            "Constant Reshape "
            "Transpose MatMul Constant Mul Softmax MatMul Transpose Constant "
            "Reshape");
  for (const auto &N : G.getNodes())
    if (N->getOpType() == "Expand")
      EXPECT_EQ(N->getOutput(0)->Type.str(), "f32[2,2,2,8,4]");
  EXPECT_EQ(G.getOutputs()[0]->getDefiningNode()->getOpType(), "Reshape");
  EXPECT_EQ(G.getOutputs()[0]->Type.str(), "f32[2,8,16]");
}

TEST(ExpandAttention, PastKeyStaysWithItsReason) {
  CompilationUnit CU = loadTextModel(
      R"(<ir_version: 10, opset_import: ["" : 23]>
g (float[1,2,1,8] q, float[1,2,1,8] k, float[1,2,1,8] v, float[1,2,3,8] pk, float[1,2,3,8] pv) => (float[1,2,1,8] y)
{
  y = Attention (q, k, v, , pk, pv)
})",
      "infer-shapes");
  std::vector<std::string> Notes;
  EXPECT_EQ(expandAttentionOps(CU.M->getGraph(), 0, Notes), 0u);
  ASSERT_EQ(Notes.size(), 1u);
  EXPECT_NE(Notes[0].find("it reads a past key/value"), std::string::npos)
      << Notes[0];
}

} // namespace
