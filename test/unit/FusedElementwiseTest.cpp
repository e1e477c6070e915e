//===- FusedElementwiseTest.cpp - Fused vector kernels, causal skip -------===//
#include "FusedKernelPatterns.h"
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

// SwiGLU, f16, 1024 elements per operand.
const char *Model = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float16[2,8,64] gate, float16[2,8,64] up) => (float16[2,8,64] o)
{
  sg = Sigmoid (gate)
  a = Mul (gate, sg)
  o = Mul (a, up)
}
)";

// SwiGLU at 0.5 (0.25 backward) of the 1 TFLOPS vector unit, HBM at 1 GB/s.
const std::string HW = getFusedKernelHW("swiglu", "1GB/s", "1TFLOPS");

TEST(FusedElementwiseTest, SwiGLUCostedAsOneKernel) {
  auto H = parseHardwareModel(HW, "hw.yaml");
  ASSERT_TRUE(!!H) << toString(H.takeError());
  CompilationUnit CU = costFused(Model, *H);
  const Graph &G = CU.M->getGraph();
  const Node *O = G.getOutputs()[0]->getDefiningNode();
  const NodeCostInfo &A = CU.NodeCosts.find(O)->second;
  EXPECT_EQ(A.Cost.FusedKernel, "swiglu");
  EXPECT_EQ(A.Cost.Unit, ComputeUnit::Vector);
  EXPECT_EQ(A.Cost.FusedMembers.size(), 3u);
  // gate and up read (2048 B each), o written (2048 B).
  EXPECT_EQ(A.Cost.BytesRead, 4096);
  EXPECT_EQ(A.Cost.BytesWritten, 2048);
  EXPECT_EQ(A.Cost.SavedValues.size(), 2u);
  // Forward: 6144 B / (1 GB/s * 0.5) = 12.288 us (FLOPs: 6144 / 0.5
  // TFLOPS = 0.012 us) + 1 us.
  const ClassTime &T = A.Times.find("aicore")->second;
  EXPECT_NEAR(T.Seconds, 13.288e-6, 1e-12);
  // Backward: twice the traffic at 0.25: 12288 / 0.25e9 = 49.152 us + 1.
  EXPECT_NEAR(T.BackwardSeconds, 50.152e-6, 1e-12);
  for (const auto &NP : G.getNodes())
    if (NP.get() != O)
      EXPECT_EQ(CU.NodeCosts.find(NP.get())->second.Cost.FusedInto, O);
}

TEST(FusedElementwiseTest, CausalKeptFraction) {
  // Square, from the top-left: S (S + 1) / 2 of S^2.
  EXPECT_DOUBLE_EQ(getCausalKeptFraction(64, 64, 0), 2080.0 / 4096);
  EXPECT_DOUBLE_EQ(getCausalKeptFraction(4096, 4096, 0), 4097.0 / 8192);
  // 16 new queries over 64 keys: rows keep 49..64.
  EXPECT_DOUBLE_EQ(getCausalKeptFraction(16, 64, 48), 904.0 / 1024);
  // An offset past the last key keeps everything.
  EXPECT_DOUBLE_EQ(getCausalKeptFraction(8, 8, 100), 1.0);
  // Trilu(k = 0, upper) masks the diagonal too: 0..S-1 of S per row.
  EXPECT_DOUBLE_EQ(getCausalKeptFraction(4, 4, -1), 6.0 / 16);
}

} // namespace
