//===- PlanCostTest.cpp - Invariants of the plan evaluator ----------------===//
//
// MFU never exceeds 1: the evaluator measures it against the fastest peak
// among the matmuls' element types, and refuses (an error, an assertion
// in debug builds) a plan whose predicted step would beat the hardware.
// A table the placement serves from SSD holds no HBM, in the evaluator and
// in the search alike (holdsHBM).
//
//===----------------------------------------------------------------------===//

#include "loom/Planner/PlanCost.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"

#include "RunPipeline.h"
#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

// A small fp32 matmul first, then a large fp16 one: measured against the
// first matmul's fp32 peak (78 TFLOPS on the 910B2, a quarter of fp16's
// 313), the fp16 matmul alone would put MFU near 4 x its efficiency.
const char *MixedModel = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4096,64] x) => (float16[4096,4096] y)
<float[64,4096] w0, float16[4096,4096] w1>
{
  a = MatMul (x, w0)
  b = Cast <to = 10> (a)
  y = MatMul (b, w1)
}
)";

TEST(PlanCostTest, MFUNeverAboveOne) {
  CompilationUnit CU;
  auto M = importModelFromText(MixedModel, "mixed.onnxtxt");
  ASSERT_TRUE(!!M) << toString(M.takeError());
  CU.M = std::move(*M);
  Expected<HardwareModel> HW = loadHardwareModel(
      std::string(LOOM_SOURCE_DIR) + "/examples/hw/atlas800t-a2.yaml");
  ASSERT_TRUE(!!HW) << toString(HW.takeError());
  CU.HW = &*HW;
  runPipeline(CU, "infer-shapes,detect-layers,annotate-costs");
  for (bool Train : {true, false}) {
    EvaluatorOptions EO;
    EO.Train = Train;
    EO.Batch = 4096;
    PlanEvaluator Eval(CU.M->getGraph(), CU.Layers, CU.NodeCosts, *HW, EO);
    for (unsigned TP : {1u, 2u, 4u, 8u}) {
      ParallelPlan P;
      P.TP = TP;
      P.DP = 8 / TP;
      P.MicroBatchSize = 4096 / P.DP;
      Expected<PlanCost> PC = Eval.evaluate(P);
      ASSERT_TRUE(!!PC) << toString(PC.takeError());
      EXPECT_GT(PC->MFU, 0.0) << P.str();
      EXPECT_LE(PC->MFU, 1.0) << P.str();
      // No sequence dim bound: samples/s, the batch over the step.
      EXPECT_FALSE(PC->PerToken);
      EXPECT_DOUBLE_EQ(PC->Throughput, 4096 / PC->StepTimeS);
      EXPECT_EQ(PC->getThroughputKey(), "samples_per_s");
    }
  }
}

// --plan rest=plain: the keys not given take their plain values (the
// search then costs that one plan); rest=search is the default.
TEST(PlanCostTest, RestPlainFixesEveryChoice) {
  PlanSpec S = cantFail(parsePlanSpec("tp=2,rest=plain"));
  EXPECT_TRUE(S.RestPlain);
  EXPECT_FALSE(cantFail(parsePlanSpec("tp=2,rest=search")).RestPlain);
  EXPECT_FALSE(cantFail(parsePlanSpec("tp=2")).RestPlain);
  Expected<PlanSpec> Bad = parsePlanSpec("tp=2,rest=maybe");
  ASSERT_FALSE(!!Bad);
  EXPECT_NE(toString(Bad.takeError()).find("rest=maybe"), std::string::npos);
  // 8 devices, batch 16: dp = 8 / 2 = 4, mb 1, nmb 16 / 4 = 4.
  ParallelPlan P = cantFail(completePlan(S, 8, 16));
  PlanSpec F = getFixedSpec(P);
  EXPECT_EQ(*F.TP, 2u);
  EXPECT_EQ(*F.DP, 4u);
  EXPECT_EQ(*F.PP, 1u);
  EXPECT_EQ(*F.MicroBatchSize, 1u);
  EXPECT_EQ(*F.NumMicroBatches, 4u);
  EXPECT_EQ(*F.VirtualStages, 1u);
  EXPECT_EQ(*F.ZeroStage, 0u);
  EXPECT_FALSE(*F.SP);
  EXPECT_EQ(*F.RC, Recompute::None);
  EXPECT_EQ(*F.Grad, GradPrecision::FP32);
  EXPECT_EQ(cantFail(completePlan(F, 8, 16)).str(), P.str());
}

// costs/placed-class.test's DLRM on one toy NPU: table_a (10^8 x 64 fp32,
// 23.8 GiB) does not fit 16 GiB of HBM, so its Gather goes to ssd; table_b
// (1000 x 64) stays on the cores.
const char *SSDTableModel = R"(<ir_version: 8, opset_import: ["" : 17]>
dlrm (int64[4096] ids_a, int64[4096] ids_b, float[4096,64] dense) => (float[4096,64] out)
  <float[100000000,64] table_a, float[1000,64] table_b>
{
  ea = Gather(table_a, ids_a)
  eb = Gather(table_b, ids_b)
  s = Add(ea, eb)
  out = Add(s, dense)
}
)";

const std::string SSDTableHW = getSSDToyHW(/*Devices=*/1, /*WithAICPU=*/false);

TEST(PlanCostTest, TableServedFromSSDHoldsNoHBM) {
  CompilationUnit CU;
  HardwareModel HW;
  loadAndCost(CU, HW, SSDTableHW, SSDTableModel);
  CU.Opts.Mode = RunMode::Infer;
  runPipeline(CU, "assign-device-classes");
  const Graph &G = CU.M->getGraph();
  EvaluatorOptions EO;
  EO.Train = false;
  EO.Batch = 4096;
  EO.WeightBytesPerParam = 4; // fp32 weights: 23.8 GiB if counted
  PlanEvaluator Eval(G, CU.Layers, CU.NodeCosts, HW, EO);
  EXPECT_FALSE(Eval.holdsHBM(G.lookup("table_a")));
  EXPECT_TRUE(Eval.holdsHBM(G.lookup("table_b")));
  ParallelPlan P;
  P.MicroBatchSize = 4096;
  Expected<PlanCost> PC = Eval.evaluate(P);
  ASSERT_TRUE(!!PC) << toString(PC.takeError());
  // Only table_b: 1000 x 64 x 4 B = 256,000 B of weights.
  ASSERT_EQ(PC->Stages.size(), 1u);
  EXPECT_DOUBLE_EQ(PC->Stages[0].Memory.Weights, 256000.0);
  EXPECT_TRUE(PC->FitsMemory);
  // The search's memory bound reads the same: the plan is found.
  CU.Opts.Batch = 4096;
  runPipeline(CU, "search-parallelism");
  ASSERT_TRUE(CU.Search && !CU.Search->Top.empty());
  EXPECT_EQ(CU.Search->Top.front().Plan.str(), PC->Plan.str());
}

} // namespace
