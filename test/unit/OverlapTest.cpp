//===- OverlapTest.cpp - Communication overlapped with compute ------------===//
#include "loom/Cost/Overlap.h"
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

} // namespace
