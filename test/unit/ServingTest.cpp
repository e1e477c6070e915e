//===- ServingTest.cpp - Serving plans: prefill, decode, SLO --------------===//
#include "loom/Planner/Serving.h"
#include "RunPipeline.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Planner/Search.h"
#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

// One attention block, 8 heads of 8 (hidden 64), fp32, symbolic batch and
// sequence: torch's head split by Reshape/Transpose.
const char *Decoder = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,seq,64] x) => (float[batch,seq,64] y)
<float[64,64] wq, float[64,64] wk, float[64,64] wv, float[64,64] wo>
{
  sh = Constant <value = int64[4] {0,0,8,8}> ()
  q0 = MatMul (x, wq)
  q1 = Reshape (q0, sh)
  q = Transpose <perm = [0,2,1,3]> (q1)
  k0 = MatMul (x, wk)
  k1 = Reshape (k0, sh)
  kt = Transpose <perm = [0,2,3,1]> (k1)
  v0 = MatMul (x, wv)
  v1 = Reshape (v0, sh)
  v = Transpose <perm = [0,2,1,3]> (v1)
  s = MatMul (q, kt)
  p = Softmax <axis = -1> (s)
  c0 = MatMul (p, v)
  c1 = Transpose <perm = [0,2,1,3]> (c0)
  so = Constant <value = int64[3] {0,0,64}> ()
  c = Reshape (c1, so)
  y = MatMul (c, wo)
}
)";

struct Fixture {
  CompilationUnit CU;
  HardwareModel HW;
  EvaluatorOptions EO;
  std::unique_ptr<PlanEvaluator> Eval;
};

std::unique_ptr<Fixture> load(int64_t Prompt) {
  auto F = std::make_unique<Fixture>();
  Expected<HardwareModel> HW = loadHardwareModel(
      std::string(LOOM_SOURCE_DIR) + "/examples/hw/atlas800t-a2.yaml");
  EXPECT_TRUE(!!HW);
  F->HW = std::move(*HW);
  auto M = importModelFromText(Decoder, "model.onnxtxt");
  EXPECT_TRUE(!!M);
  F->CU.M = std::move(*M);
  F->CU.HW = &F->HW;
  F->CU.Opts.Mode = RunMode::Infer;
  F->CU.Opts.Batch = 1;
  F->CU.Opts.Seq = Prompt;
  runPipeline(F->CU, "bind-symbols,infer-shapes,fold-shape-arith,"
                     "detect-layers,annotate-costs");
  F->EO.Train = false;
  F->EO.Batch = 1;
  F->EO.Seq = Prompt;
  F->Eval = std::make_unique<PlanEvaluator>(F->CU.M->getGraph(), F->CU.Layers,
                                            F->CU.NodeCosts, F->HW, F->EO);
  return F;
}

TEST(ServingTest, PrefillIsTheEvaluatorsForward) {
  // At the bound shape (one prompt of the bound length), the prefill is
  // the inference forward evaluate() costs for one micro-batch: the same
  // per-node times and all-reduces, nothing modelled twice.
  auto F = load(128);
  ServingOptions O;
  O.Load.Rows.push_back({128, 32, 1.0});
  for (unsigned TP : {1u, 2u, 4u}) {
    ParallelPlan P;
    P.TP = TP;
    Expected<PlanCost> PC = F->Eval->evaluate(P);
    ASSERT_TRUE(!!PC);
    Expected<ServingPlanCost> S =
        costServingPlan(*F->Eval, F->CU.Layers, F->HW, F->EO, O, TP, 1, 1, 4);
    ASSERT_TRUE(!!S) << toString(S.takeError());
    EXPECT_NEAR(PC->StepTimeS, S->PrefillS, 1e-12 + 1e-9 * PC->StepTimeS)
        << "tp=" << TP;
  }
}

TEST(ServingTest, LatencyAndThroughputIdentities) {
  auto F = load(256);
  ServingOptions O;
  O.Load.Rows.push_back({256, 64, 1.0});
  Expected<ServingPlanCost> S =
      costServingPlan(*F->Eval, F->CU.Layers, F->HW, F->EO, O, 2, 1, 4, 16);
  ASSERT_TRUE(!!S);
  // In-flight: TTFT = prefill + the running step; TPOT = the step, which
  // carries the prompts joining it (16 / 64 of a prompt); tokens/s = dp *
  // batch / TPOT.
  EXPECT_DOUBLE_EQ(S->PrefillS + S->DecodeStepS, S->TTFTS);
  EXPECT_DOUBLE_EQ(S->DecodeStepS, S->TPOTS);
  EXPECT_DOUBLE_EQ(4 * 16 / S->TPOTS, S->TokensPerS);
  EXPECT_DOUBLE_EQ(S->TokensPerS / 8, S->TokensPerSPerDevice);
  // KV: 8 heads of 8, K and V, fp32: 512 B per token; 256 + 64 tokens a
  // sequence, split over tp=2: 16 * 320 * 512 / 2 = 1310720 B.
  EXPECT_DOUBLE_EQ(1310720, S->KVCacheBytes);
  // KV cache read per step: 16 sequences, mean context 256 + 32, / tp at
  // HBM bandwidth (1.6 TB/s on the A2).
  EXPECT_NEAR(16 * 288 * 512 / 2 / 1.6e12, S->KVReadS, 1e-15);
  // An int8 cache is a quarter of fp32's.
  O.KVElementBytes = 1;
  Expected<ServingPlanCost> Q =
      costServingPlan(*F->Eval, F->CU.Layers, F->HW, F->EO, O, 2, 1, 4, 16);
  ASSERT_TRUE(!!Q);
  EXPECT_DOUBLE_EQ(1310720 / 4.0, Q->KVCacheBytes);
}

TEST(ServingTest, StaticBatchingIdentities) {
  auto F = load(256);
  ServingOptions O;
  O.Load.Rows.push_back({256, 64, 1.0});
  Expected<ServingPlanCost> In =
      costServingPlan(*F->Eval, F->CU.Layers, F->HW, F->EO, O, 2, 1, 4, 16);
  O.StaticBatching = true;
  Expected<ServingPlanCost> St =
      costServingPlan(*F->Eval, F->CU.Layers, F->HW, F->EO, O, 2, 1, 4, 16);
  ASSERT_TRUE(In && St);
  // Static: every request's first token comes with the batch's prefill;
  // then G - 1 steps of decode alone, lighter than the in-flight step
  // that also prefills the joining prompts.
  EXPECT_DOUBLE_EQ(St->PrefillS, St->TTFTS);
  EXPECT_DOUBLE_EQ(St->DecodeStepS, St->TPOTS);
  EXPECT_LT(St->DecodeStepS, In->DecodeStepS);
  EXPECT_DOUBLE_EQ(4 * 16 * 64 / (St->PrefillS + 63 * St->DecodeStepS),
                   St->TokensPerS);
  // Sixteen prompts together take longer than one, and no longer than
  // sixteen one by one (one weight read, one set of launches).
  EXPECT_GT(St->PrefillS, In->PrefillS);
  EXPECT_LE(St->PrefillS, 16 * In->PrefillS);
  // At batch 1 the static prefill is the one prompt's, and in flight no
  // step runs for the request to wait for.
  Expected<ServingPlanCost> One =
      costServingPlan(*F->Eval, F->CU.Layers, F->HW, F->EO, O, 2, 1, 4, 1);
  O.StaticBatching = false;
  Expected<ServingPlanCost> InOne =
      costServingPlan(*F->Eval, F->CU.Layers, F->HW, F->EO, O, 2, 1, 4, 1);
  ASSERT_TRUE(One && InOne);
  EXPECT_NEAR(In->PrefillS, One->PrefillS, 1e-12 * In->PrefillS);
  EXPECT_DOUBLE_EQ(InOne->PrefillS, InOne->TTFTS);
}

TEST(ServingTest, ParseSLO) {
  Expected<ServingSLO> S = parseSLO("ttft=500ms,tpot=50ms");
  ASSERT_TRUE(!!S);
  EXPECT_DOUBLE_EQ(0.5, *S->TTFT);
  EXPECT_DOUBLE_EQ(0.05, *S->TPOT);
  Expected<ServingSLO> T = parseSLO("tpot=20us");
  ASSERT_TRUE(!!T);
  EXPECT_FALSE(T->TTFT.hasValue());
  EXPECT_DOUBLE_EQ(20e-6, *T->TPOT);
  Expected<ServingSLO> Zero = parseSLO("tpot=0ms");
  EXPECT_FALSE(!!Zero);
  consumeError(Zero.takeError());
  EXPECT_EQ(2.0, getKVDTypeBytes("bf16").getValue());
  EXPECT_FALSE(getKVDTypeBytes("int4").hasValue());
}

TEST(ServingTest, ParseDisaggPlan) {
  Expected<ServingPin> P =
      parseServingPlan("layout=disagg,prefill_tp=2,prefill_devices=4,"
                       "decode_tp=4,decode_pp=2,batch=64");
  ASSERT_TRUE(!!P);
  EXPECT_EQ(ServingLayout::Disaggregated, *P->Layout);
  EXPECT_EQ(2u, *P->PrefillTP);
  EXPECT_EQ(4u, *P->PrefillDevices);
  EXPECT_EQ(4u, *P->DecodeTP);
  EXPECT_EQ(2u, *P->DecodePP);
  EXPECT_EQ(64u, *P->Batch);
  EXPECT_FALSE(P->isPooled());
  // A pool key alone implies the layout; tp alone is a pooled plan.
  Expected<ServingPin> Q = parseServingPlan("decode_tp=2");
  ASSERT_TRUE(!!Q);
  EXPECT_EQ(ServingLayout::Disaggregated, *Q->Layout);
  Expected<ServingPin> R = parseServingPlan("tp=2,batch=8");
  ASSERT_TRUE(!!R);
  EXPECT_TRUE(R->isPooled());
  EXPECT_FALSE(R->Layout.hasValue());
  for (const char *Bad : {"layout=disagg,tp=2", "layout=pooled,prefill_tp=1",
                          "layout=both", "prefill_devices=0"}) {
    Expected<ServingPin> E = parseServingPlan(Bad);
    EXPECT_FALSE(!!E) << Bad;
    if (!E)
      consumeError(E.takeError());
  }
}

TEST(ServingTest, DisaggregatedIdentities) {
  auto F = load(256);
  ServingOptions O;
  O.Load.Rows.push_back({256, 64, 1.0});
  O.Pin = ServingPin();
  O.Pin->Layout = ServingLayout::Disaggregated;
  O.Pin->PrefillTP = 1;
  O.Pin->PrefillDevices = 2;
  O.Pin->DecodeTP = 2;
  O.Pin->Batch = 16;
  SearchSpace Space =
      describeSearchSpace(F->CU.M->getGraph(), F->CU.Layers, F->HW, F->EO, 8);
  Expected<Optional<DisaggPlanCost>> D =
      searchDisaggregated(*F->Eval, F->CU.Layers, F->HW, F->EO, Space, O, 8);
  ASSERT_TRUE(D && *D);
  const DisaggPlanCost &C = **D;
  // Two prefill instances of tp=1; six decode devices, three tp=2
  // instances of 16 sequences.
  EXPECT_EQ(2u, C.PrefillDevices);
  EXPECT_EQ(6u, C.DecodeDevices);
  EXPECT_EQ(2u, C.Prefill.DP);
  EXPECT_EQ(3u, C.Decode.DP);
  EXPECT_EQ(16u, C.Decode.Batch);
  // The decode instance is the pooled model's step with no prompt in it
  // (one evaluator): the same cost as a decode-only costServingPlan.
  ServingOptions DO = O;
  DO.Pin = None;
  DO.DecodeOnly = true;
  Expected<ServingPlanCost> Dec =
      costServingPlan(*F->Eval, F->CU.Layers, F->HW, F->EO, DO, 2, 1, 1, 16);
  ASSERT_TRUE(!!Dec);
  EXPECT_DOUBLE_EQ(Dec->TPOTS, C.TPOTS);
  // TTFT = queue + prefill forward + KV transfer; the queue is the running
  // forward times the prefill pool's utilisation.
  EXPECT_DOUBLE_EQ(C.QueueS + C.PrefillForwardS + C.KVTransferS, C.TTFTS);
  EXPECT_DOUBLE_EQ(C.Utilisation * C.PrefillForwardS, C.QueueS);
  // Rates: prefill k prompts per forward per instance, decode b / (TPOT G)
  // per instance; the served rate is the smaller, 64 tokens a request.
  EXPECT_DOUBLE_EQ(2.0 * C.PrefillBatch / C.PrefillForwardS, C.PrefillRate);
  EXPECT_NEAR(3.0 * 16 / (C.TPOTS * 64), C.DecodeRate, 1e-9 * C.DecodeRate);
  EXPECT_DOUBLE_EQ(std::min(C.PrefillRate, C.DecodeRate) * 64, C.TokensPerS);
  EXPECT_DOUBLE_EQ(C.TokensPerS / 8, C.TokensPerSPerDevice);
  // The cache sent: 512 B per token (8 heads of 8, K and V, fp32) x 256
  // prompt tokens = 131072 B, all from the one prefill device, over the
  // A2's HCCS (8 devices: one level).
  EXPECT_DOUBLE_EQ(131072, C.KVTransferBytes);
  EXPECT_DOUBLE_EQ(131072, C.KVTransferPerDevice);
  EXPECT_EQ("hccs", C.LinkName);
  EXPECT_EQ("layout=disagg,prefill_tp=1,prefill_devices=2,decode_tp=2,batch=16",
            C.str());
}

} // namespace
