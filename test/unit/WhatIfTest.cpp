//===- WhatIfTest.cpp - Idle devices, hardware layering and --set ---------===//
#include "loom/Hardware/HardwareOverlay.h"
#include "loom/Plan/BatchSplit.h"
#include "loom/Plan/IdleDevices.h"
#include "loom/Report/SearchReport.h"
#include "gtest/gtest.h"
#include <set>

using namespace loom;

namespace {

std::set<std::string> asStrings(const std::vector<MeshDegrees> &Ds) {
  std::set<std::string> S;
  for (const MeshDegrees &D : Ds)
    S.insert(std::to_string(D.TP) + "," + std::to_string(D.PP) + "," +
             std::to_string(D.DP));
  return S;
}

TEST(IdleDevicesTest, FullClusterOnly) {
  // 8 devices, tp <= 4, 4 layers (2 blocks), batch 8: tp in {1, 2, 4},
  // pp | 8 / tp and <= 4, dp = 8 / (tp * pp) dividing 8.
  DegreeSpace S;
  S.Devices = 8;
  S.Batch = 8;
  S.NumLayers = 4;
  S.NumBlocks = 2;
  S.TPLimit = 4;
  std::set<std::string> Want = {"1,1,8", "1,2,4", "1,4,2", "2,1,4",
                                "2,2,2", "2,4,1", "4,1,2", "4,2,1"};
  EXPECT_EQ(asStrings(enumerateMeshDegrees(S, PlanSpec(), false)), Want);
}

TEST(IdleDevicesTest, BatchTooSmall) {
  // Batch 2 on 8 devices, tp <= 4, pp <= 4: the full cluster needs
  // dp = 8 / (tp * pp) dividing 2: (1,4,2), (2,2,2), (2,4,1), (4,1,2),
  // (4,2,1). With idle devices, per (tp, pp) the largest dp <= 8 / (tp*pp)
  // dividing 2, kept when it leaves devices idle: (1,1,2) on 2, (1,2,2) on
  // 4, (2,1,2) on 4; every other pair fills the 8 or is listed already.
  DegreeSpace S;
  S.Devices = 8;
  S.Batch = 2;
  S.NumLayers = 4;
  S.NumBlocks = 2;
  S.TPLimit = 4;
  std::set<std::string> Full = {"1,4,2", "2,2,2", "2,4,1", "4,1,2", "4,2,1"};
  EXPECT_EQ(asStrings(enumerateMeshDegrees(S, PlanSpec(), false)), Full);
  std::set<std::string> All = Full;
  All.insert({"1,1,2", "1,2,2", "2,1,2"});
  EXPECT_EQ(asStrings(enumerateMeshDegrees(S, PlanSpec(), true)), All);
}

TEST(IdleDevicesTest, StaticBatch) {
  // BatchSplit.h: a static batch dim emits at dp = nmb = 1 only.
  EXPECT_TRUE(isBatchSplitEmittable(true, 4, 2));
  EXPECT_TRUE(isBatchSplitEmittable(false, 1, 1));
  EXPECT_FALSE(isBatchSplitEmittable(false, 2, 1));
  EXPECT_FALSE(isBatchSplitEmittable(false, 1, 2));
  EXPECT_EQ(toString(checkBatchSplit(false, 2, 4)),
            "the model's batch dim is static; graphs for dp=2 x nmb=4 "
            "micro-batches need a symbolic batch dim");
  // The space of FullClusterOnly, static batch: the full cluster with
  // dp = 1 needs tp * pp = 8: (2,4,1), (4,2,1) (tp, pp <= 4); with idle
  // devices every other (tp, pp) at dp = 1: tp in {1,2,4} x pp in {1,2,4}
  // (pp from the 2 blocks' divisors and the full cluster's 4) with
  // tp * pp <= 8.
  DegreeSpace S;
  S.Devices = 8;
  S.Batch = 8;
  S.NumLayers = 4;
  S.NumBlocks = 2;
  S.TPLimit = 4;
  S.StaticBatch = true;
  std::set<std::string> Full = {"2,4,1", "4,2,1"};
  EXPECT_EQ(asStrings(enumerateMeshDegrees(S, PlanSpec(), false)), Full);
  std::set<std::string> All = {"1,1,1", "1,2,1", "1,4,1", "2,1,1",
                               "2,2,1", "2,4,1", "4,1,1", "4,2,1"};
  EXPECT_EQ(asStrings(enumerateMeshDegrees(S, PlanSpec(), true)), All);
  ParallelPlan P;
  P.TP = 2;
  EXPECT_EQ(describeIdleDevices(P, 8, 8, nullptr, false, true),
            "6 of 8 devices idle (plan on 2): dp=1 of the 4 replicas that "
            "fit: the model's batch dim is static (graphs for several "
            "micro-batches need a symbolic one)");
}

TEST(IdleDevicesTest, SeedPlanOn128) {
  // tp=8, pp=3 on 128 NPUs: 128 / 24 = 5 replicas fit (120 NPUs); a batch
  // of 480 takes dp = 5, one of 512 only dp = 4 (96 NPUs).
  DegreeSpace S;
  S.Devices = 128;
  S.NumLayers = 42;
  S.NumBlocks = 40;
  S.TPLimit = 8;
  PlanSpec F;
  F.TP = 8;
  F.PP = 3;
  S.Batch = 480;
  EXPECT_EQ(asStrings(enumerateMeshDegrees(S, F, true)),
            std::set<std::string>{"8,3,5"});
  S.Batch = 512;
  EXPECT_EQ(asStrings(enumerateMeshDegrees(S, F, true)),
            std::set<std::string>{"8,3,4"});
  EXPECT_TRUE(enumerateMeshDegrees(S, F, false).empty());

  ParallelPlan P;
  P.TP = 8;
  P.PP = 3;
  P.DP = 4;
  P.MicroBatchSize = 2;
  EXPECT_EQ(describeIdleDevices(P, 128, 512, nullptr),
            "32 of 128 devices idle (plan on 96): tp*pp = 24 does not divide "
            "128, so at most 5 replicas (120 devices); the global batch 512 "
            "divides into at most dp=4 of the 5 replicas that fit (dp*mb must "
            "divide it)");
  // 5 replicas x mb 2 = 10: 512 lies between 510 and 520; 510 is nearer.
  EXPECT_EQ(suggestGlobalBatch(P, 128, 512), llvm::Optional<int64_t>(510));
  P.DP = 5;
  EXPECT_EQ(suggestGlobalBatch(P, 128, 510), llvm::None);
  EXPECT_EQ(describeIdleDevices(P, 128, 510, nullptr, true),
            "8 of 128 devices idle (plan on 120): tp*pp = 24 does not divide "
            "128, so at most 5 replicas (120 devices); no plan on all 128 "
            "devices fits");
  P.DP = 16;
  P.PP = 1;
  EXPECT_EQ(describeIdleDevices(P, 128, 512, nullptr), "");
}

const char *Base = R"(name: two
device:
  name: npu
  classes:
    aicore: {throughput: {fp16: 100TFLOPS}, launch_overhead: 5us, ops: ["*"]}
  memory:
    hbm: {capacity: 32GiB, bandwidth: 1TB/s}
topology:
  - {name: hccs, size: 8, bandwidth: 196GB/s, latency: 1.2us}
  - {name: roce, size: 2, bandwidth: 200Gbps, latency: 4us}
devices: 16
)";

TEST(HardwareOverlayTest, LayersMergeByKeyAndName) {
  std::vector<HardwareOverride> O;
  llvm::Expected<HardwareModel> HW = parseLayeredHardware(
      {Base, "topology:\n  - {name: roce, bandwidth: 400Gbps}\n"},
      {"a.yaml", "b.yaml"}, {}, O);
  ASSERT_TRUE(!!HW) << toString(HW.takeError());
  // 400 Gbps = 50e9 B/s; the hccs level and the device are untouched.
  EXPECT_EQ(HW->Topology[1].Bandwidth.value(), 50e9);
  EXPECT_EQ(HW->Topology[0].Bandwidth.value(), 196e9);
  EXPECT_EQ(HW->getNumDevices(), 16u);
  ASSERT_EQ(O.size(), 1u);
  EXPECT_EQ(describeOverride(O[0]),
            "topology.roce.bandwidth: 200Gbps -> 400Gbps (b.yaml)");
}

TEST(HardwareOverlayTest, SetsApplyInOrder) {
  std::vector<HardwareOverride> O;
  llvm::Expected<HardwareModel> HW = parseLayeredHardware(
      {Base}, {"a.yaml"},
      {"device.memory.hbm.capacity=64GiB", "device.memory.hbm.capacity=96GiB",
       "device.classes.aicore.throughput.fp16=200TFLOPS"},
      O);
  ASSERT_TRUE(!!HW) << toString(HW.takeError());
  EXPECT_EQ(HW->getMemory("hbm")->Capacity.value(), 96.0 * (1ull << 30));
  EXPECT_EQ(HW->getClass("aicore")->getThroughput("fp16")->value(), 200e12);
  EXPECT_EQ(O.size(), 3u);
  llvm::Expected<HardwareModel> Bad =
      parseLayeredHardware({Base}, {"a.yaml"}, {"device.classes.cube.x=1"}, O);
  ASSERT_FALSE(!!Bad);
  EXPECT_EQ(toString(Bad.takeError()),
            "--set device.classes.cube.x=1: 'cube' matches nothing at "
            "'device.classes'; valid keys: aicore");
}

} // namespace
