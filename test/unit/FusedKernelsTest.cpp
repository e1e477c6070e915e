//===- FusedKernelsTest.cpp - Fused attention costs, by hand --------------===//
#include "loom/Cost/FusedKernels.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Planner/PlanCost.h"

#include "LoadModel.h"
#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

const char *Model = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float16[1,4,64,16] q, float16[1,4,16,64] kt, float16[1,4,64,16] v)
  => (float16[1,4,64,16] o)
{
  s = MatMul (q, kt)
  p = Softmax <axis = -1> (s)
  o = MatMul (p, v)
}
)";

// Fused attention at 0.5 (0.25 backward) of 100 TFLOPS, HBM at 1 TB/s.
const std::string HW = getFusedKernelHW("attention", "1TB/s");

const Node *nodeNamedBy(const Graph &G, StringRef Output) {
  for (const auto &NP : G.getNodes())
    if (NP->getOutput(0) && NP->getOutput(0)->getName() == Output)
      return NP.get();
  return nullptr;
}

TEST(FusedKernelsTest, AttentionCostedAsOneKernel) {
  auto H = parseHardwareModel(HW, "hw.yaml");
  ASSERT_TRUE(!!H) << toString(H.takeError());
  CompilationUnit CU = costFused(Model, *H);
  const Graph &G = CU.M->getGraph();
  const Node *S = nodeNamedBy(G, "s"), *P = nodeNamedBy(G, "p"),
             *O = nodeNamedBy(G, "o");
  ASSERT_TRUE(S && P && O);
  const NodeCostInfo &A = CU.NodeCosts.find(O)->second;
  // Each product: 2 * 4*64*64*16 = 524288 FLOPs.
  EXPECT_EQ(A.Cost.FusedKernel, "attention");
  EXPECT_EQ(A.Cost.Flops, 1048576);
  // Gradients of both operands of both products: 2 x forward.
  EXPECT_EQ(A.Cost.BackwardFlops, 2097152);
  // Q K^T again in backward: FlashAttention-2's 2.5x in all.
  EXPECT_EQ(A.Cost.RecomputeFlops, 524288);
  // q, kt, v: 4*64*16*2 = 8192 bytes each; the output 8192.
  EXPECT_EQ(A.Cost.BytesRead, 24576);
  EXPECT_EQ(A.Cost.BytesWritten, 8192);
  EXPECT_EQ(A.Cost.SavedValues.size(), 4u);
  EXPECT_EQ(A.Cost.FusedMembers.size(), 3u);
  // Forward: max(1048576 / (1e14 * 0.5) = 2.10e-8 s, 32768 B / 1e12 B/s =
  // 3.28e-8 s) + 1 us = 1.032768 us.
  const ClassTime &T = A.Times.find("aicore")->second;
  EXPECT_TRUE(T.Supported);
  EXPECT_NEAR(T.Seconds, 1.032768e-6, 1e-12);
  // Backward: (2097152 + 524288) / (1e14 * 0.25) = 1.048576e-7 s against
  // 2 x 32768 B / 1e12 = 6.55e-8 s; + 1 us = 1.1048576 us.
  EXPECT_NEAR(T.BackwardSeconds, 1.1048576e-6, 1e-12);
  // The members cost nothing and name the anchor.
  for (const Node *N : {S, P}) {
    const NodeCostInfo &I = CU.NodeCosts.find(N)->second;
    EXPECT_EQ(I.Cost.FusedInto, O);
    EXPECT_EQ(I.Cost.Flops, 0);
    EXPECT_TRUE(I.Cost.SavedValues.empty());
    EXPECT_EQ(I.Times.find("aicore")->second.Seconds, 0);
  }
}

TEST(FusedKernelsTest, NoneLeavesOpsAlone) {
  auto H = parseHardwareModel(HW, "hw.yaml");
  ASSERT_TRUE(!!H) << toString(H.takeError());
  CompileOptions Opts;
  Opts.FusedKernels.emplace(); // --fused-kernels=none
  CompilationUnit CU = costFused(Model, *H, Opts);
  const Node *O = nodeNamedBy(CU.M->getGraph(), "o");
  const NodeCostInfo &A = CU.NodeCosts.find(O)->second;
  EXPECT_TRUE(A.Cost.FusedKernel.empty());
  EXPECT_EQ(A.Cost.Flops, 524288);
}

} // namespace
