//===- OverlapTest.cpp - Communication overlapped with compute ------------===//
#include "loom/Cost/Overlap.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/ParallelPlan.h"
#include "gtest/gtest.h"

using namespace loom;

namespace {

TEST(OverlapTest, WindowModel) {
  // Off: waited for, W + C.
  EXPECT_DOUBLE_EQ(overlapWindow(10, 4, 0.2, false), 14);
  // On: max(C, W / (1 - s)) = max(4, 12.5).
  EXPECT_DOUBLE_EQ(overlapWindow(10, 4, 0.2, true), 12.5);
  // A long collective: the window is the collective.
  EXPECT_DOUBLE_EQ(overlapWindow(10, 30, 0.2, true), 30);
  // Share 0: the old always-hidden model, max(W, C).
  EXPECT_DOUBLE_EQ(overlapWindow(10, 4, 0, true), 10);
  // Nothing to hide holds nothing.
  EXPECT_DOUBLE_EQ(overlapWindow(10, 0, 0.5, true), 10);
  EXPECT_DOUBLE_EQ(overlapExposed(10, 4, 0.2, true), 2.5);
  EXPECT_DOUBLE_EQ(overlapExposed(10, 4, 0.2, false), 4);
  // On pays off exactly when C > W * s / (1 - s) (2.5 here).
  EXPECT_LT(overlapWindow(10, 2.6, 0.2, true),
            overlapWindow(10, 2.6, 0.2, false));
  EXPECT_GT(overlapWindow(10, 2.4, 0.2, true),
            overlapWindow(10, 2.4, 0.2, false));
  // Held while the collective runs: W + s * C = 10.8, or C when longer.
  EXPECT_DOUBLE_EQ(overlapWindow(10, 4, 0.2, true, OverlapHold::WhileRunning),
                   10.8);
  EXPECT_DOUBLE_EQ(overlapWindow(10, 30, 0.2, true, OverlapHold::WhileRunning),
                   30);
  // ... never worse than waiting.
  for (double C : {0.1, 1.0, 9.0, 12.0, 50.0})
    EXPECT_LE(overlapWindow(10, C, 0.3, true, OverlapHold::WhileRunning),
              overlapWindow(10, C, 0.3, false));
}

TEST(OverlapTest, PlanKeys) {
  auto S = parsePlanSpec("tp=2,tp_overlap=on,dp_overlap=off,pp_overlap=0");
  ASSERT_TRUE(!!S);
  EXPECT_EQ(*S->TPOverlap, true);
  EXPECT_EQ(*S->DPOverlap, false);
  EXPECT_EQ(*S->PPOverlap, false);
  auto P = completePlan(*S, 8, 8);
  ASSERT_TRUE(!!P);
  EXPECT_EQ(P->str(), "tp=2,pp=1,dp=4,ep=1,sp=0,mb=1,nmb=2,vpp=1,"
                      "recompute=none,zero=0,tp_overlap=on,dp_overlap=off,"
                      "pp_overlap=off");
  // The string parses back to the same plan.
  auto Back = parsePlanSpec(P->str());
  ASSERT_TRUE(!!Back);
  auto Q = completePlan(*Back, 8, 8);
  ASSERT_TRUE(!!Q);
  EXPECT_EQ(Q->str(), P->str());
  // Defaults: tp off, dp and pp on, not printed.
  auto D = completePlan(*parsePlanSpec("tp=2"), 8, 8);
  ASSERT_TRUE(!!D);
  EXPECT_FALSE(D->TPOverlap);
  EXPECT_TRUE(D->DPOverlap && D->PPOverlap);
  EXPECT_EQ(D->str().find("overlap"), std::string::npos);
  // tp overlap without TP communication.
  auto Bad = completePlan(*parsePlanSpec("tp=1,tp_overlap=on"), 8, 8);
  ASSERT_FALSE(!!Bad);
  EXPECT_NE(llvm::toString(Bad.takeError()).find("needs tp > 1"),
            std::string::npos);
  auto BadVal = parsePlanSpec("dp_overlap=maybe");
  ASSERT_FALSE(!!BadVal);
  EXPECT_EQ(llvm::toString(BadVal.takeError()),
            "--plan: dp_overlap=maybe: expected on or off");
}

TEST(OverlapTest, TPOverlapNeedsTheHardwaresShare) {
  HardwareModel HW;
  HW.Name = "bare";
  HW.Device.Classes["aicore"].Name = "aicore";
  // Off needs nothing.
  EXPECT_FALSE(bool(checkOverlapHardware(false, HW)));
  // On without comm_overlap, and with one that leaves tp out: the key is
  // named.
  std::string Missing =
      "tp_overlap=on: hardware 'bare' gives no TP overlap share "
      "(device.classes.aicore.comm_overlap.tp: the share of the compute "
      "units the TP collectives hold beside the GEMMs), so the overlap "
      "cannot be costed; add it (examples/hw/overlap/*.yaml, another --hw) "
      "or give a --framework whose profile states it";
  EXPECT_EQ(llvm::toString(checkOverlapHardware(true, HW)), Missing);
  CommOverlap Ov;
  Ov.DP = 0.074;
  HW.Device.Classes["aicore"].Overlap = Ov;
  EXPECT_EQ(llvm::toString(checkOverlapHardware(true, HW)), Missing);
  // A stated share, even 0, is the hardware's word.
  Ov.TP = 0;
  HW.Device.Classes["aicore"].Overlap = Ov;
  EXPECT_FALSE(bool(checkOverlapHardware(true, HW)));
}

} // namespace
