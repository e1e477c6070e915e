//===- FuseKernelsTest.cpp - Generic fused kernels, by hand ---------------===//
#include "loom/Cost/FusedKernels.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Pass/Pass.h"
#include "loom/Planner/PlanCost.h"

#include "LoadModel.h"
#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

// Cube 100 TFLOPS, vector 10 TFLOPS, HBM 1 GB/s, launch 1 us.
std::string fusionHW(StringRef Rules) {
  return "name: fusionunit\n"
         "device:\n"
         "  name: npu\n"
         "  classes:\n"
         "    aicore:\n"
         "      throughput: {fp32: 100TFLOPS}\n"
         "      vector_throughput: {fp32: 10TFLOPS}\n"
         "      launch_overhead: 1us\n"
         "      ops: [\"*\"]\n"
         "      fusion:\n" +
         Rules.str() +
         "  memory:\n"
         "    hbm: {capacity: 64GiB, bandwidth: 1GB/s}\n"
         "topology:\n"
         "  - {name: hccs, size: 8, bandwidth: 100GB/s, latency: 1us}\n";
}

const char *Chain = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,256] x, float[4,256] y) => (float[4,256] z)
{
  a = Add (x, y)
  r = Relu (a)
  z = Mul (r, x)
}
)";

CompilationUnit fuse(StringRef Text, const HardwareModel &HW) {
  return loadTextModel(Text,
                       "infer-shapes,detect-layers,annotate-costs,"
                       "detect-fused-kernels,fuse-kernels",
                       &HW, CompileOptions());
}

const Node *nodeNamedBy(const Graph &G, StringRef Output) {
  for (const auto &NP : G.getNodes())
    if (NP->getOutput(0) && NP->getOutput(0)->getName() == Output)
      return NP.get();
  return nullptr;
}

TEST(FuseKernelsTest, LoopCostedOnceByItsBoundary) {
  auto H =
      parseHardwareModel(fusionHW("        loop: {source: unit}\n"), "hw.yaml");
  ASSERT_TRUE(!!H) << toString(H.takeError());
  CompilationUnit CU = fuse(Chain, *H);
  const Graph &G = CU.M->getGraph();
  const Node *A = nodeNamedBy(G, "a"), *R = nodeNamedBy(G, "r"),
             *Z = nodeNamedBy(G, "z");
  ASSERT_TRUE(A && R && Z);
  const OpCost &K = CU.NodeCosts.find(Z)->second.Cost;
  EXPECT_EQ(K.FusedKernel, "fusion.loop");
  EXPECT_EQ(K.FusedMembers.size(), 3u);
  EXPECT_EQ(CU.NodeCosts.find(A)->second.Cost.FusedInto, Z);
  EXPECT_EQ(CU.NodeCosts.find(R)->second.Cost.FusedInto, Z);
  // x and y read once (x feeds Add and Mul): 2 x 4096 B; z written once.
  EXPECT_EQ(K.BytesRead, 8192);
  EXPECT_EQ(K.BytesWritten, 4096);
  // The members' own FLOPs: 1024 each.
  EXPECT_EQ(K.Flops, 3072);
  // max(3072 / 1e13, 12288 B / 1e9 B/s = 12.288 us) + one launch.
  const ClassTime &T =
      CU.NodeCosts.find(Z)->second.Times.find("aicore")->second;
  EXPECT_NEAR(T.Seconds, 13.288e-6, 1e-12);
  // Op by op: three launches and 4 tensors more of traffic.
  CompileOptions Off;
  Off.GenericFusion = false;
  CompilationUnit Plain =
      loadTextModel(Chain,
                    "infer-shapes,detect-layers,annotate-costs,"
                    "detect-fused-kernels,fuse-kernels",
                    &*H, Off);
  double Sum = 0;
  for (const auto &NP : Plain.M->getGraph().getNodes())
    Sum += Plain.NodeCosts.find(NP.get())
               ->second.Times.find("aicore")
               ->second.Seconds;
  // Add 12288 B, Relu 8192 B, Mul 12288 B: 32.768 us + 3 us.
  EXPECT_NEAR(Sum, 35.768e-6, 1e-12);
}

TEST(FuseKernelsTest, RulesAreData) {
  // Without a loop rule nothing fuses.
  auto H = parseHardwareModel(fusionHW("        reduction: {source: unit}\n"),
                              "hw.yaml");
  ASSERT_TRUE(!!H) << toString(H.takeError());
  CompilationUnit CU = fuse(Chain, *H);
  for (const auto &NP : CU.M->getGraph().getNodes())
    EXPECT_TRUE(CU.NodeCosts.find(NP.get())->second.Cost.FusedKernel.empty());
  // A rule without its source is refused, naming the key.
  auto Bad = parseHardwareModel(fusionHW("        loop: {}\n"), "hw.yaml");
  ASSERT_FALSE(!!Bad);
  std::string Msg = toString(Bad.takeError());
  EXPECT_NE(Msg.find("device.classes.aicore.fusion.loop"), std::string::npos)
      << Msg;
}

} // namespace
