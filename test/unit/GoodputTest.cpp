//===- GoodputTest.cpp - Young/Daly goodput, derived by hand
//---------------===//

#include "loom/Planner/Goodput.h"
#include "loom/Hardware/HardwareModel.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace loom;

namespace {

TEST(GoodputTest, YoungDalyByHand) {
  Reliability R;
  // 1.25e8 FIT per device: 1e8 + 2 x 1e7 + 1 x 5e6.
  R.DeviceFIT = 1e8;
  R.OpticalModuleFIT = 1e7;
  R.OpticalModulesPerDevice = 2;
  R.SwitchPortFIT = 5e6;
  R.PortsPerDevice = 1;
  R.CheckpointBandwidth = BytesPerSecond(1e9);
  R.RestartTime = Seconds(60);
  EXPECT_DOUBLE_EQ(R.getFITPerDevice(), 1.25e8);
  // 8 devices: 1e9 FIT = 1 failure per hour, MTBF 3600 s. 20 GB at
  // 1 GB/s: delta = 20 s; tau = sqrt(2 x 20 x 3600) = 379.47 s;
  // fraction = 1 - 20/379.47 - (189.74 + 60)/3600
  //          = 1 - 0.052705 - 0.069371 = 0.877924.
  GoodputEstimate G = estimateGoodput(R, 8, 20e9, 1000);
  EXPECT_NEAR(G.ClusterMTBFS, 3600, 1e-9);
  EXPECT_NEAR(G.CheckpointS, 20, 1e-12);
  EXPECT_NEAR(G.IntervalS, std::sqrt(144000.0), 1e-9);
  double Expected =
      1 - 20 / std::sqrt(144000.0) - (std::sqrt(144000.0) / 2 + 60) / 3600;
  EXPECT_NEAR(G.Fraction, Expected, 1e-12);
  EXPECT_NEAR(G.Fraction, 0.877924, 1e-6);
  EXPECT_NEAR(G.Goodput, 1000 * Expected, 1e-9);
  EXPECT_EQ(describeGoodput(G), "0.878 of throughput (cluster MTBF 1.0 h, "
                                "checkpoint 20.0 s every 6.3 min, "
                                "Young/Daly)");
}

TEST(GoodputTest, ClampsAndNoFailures) {
  Reliability R;
  R.CheckpointBandwidth = BytesPerSecond(1e9);
  // No failure rate: nothing is lost.
  GoodputEstimate G = estimateGoodput(R, 1024, 1e12, 5);
  EXPECT_TRUE(std::isinf(G.ClusterMTBFS));
  EXPECT_EQ(G.Fraction, 1);
  EXPECT_EQ(G.Goodput, 5);
  // A restart longer than the MTBF: clamped to 0.
  R.DeviceFIT = 1e9; // 1 failure per hour per device
  R.RestartTime = Seconds(7200);
  G = estimateGoodput(R, 1, 1e9, 5);
  EXPECT_EQ(G.Fraction, 0);
  EXPECT_EQ(G.Goodput, 0);
}

TEST(GoodputTest, ParsesReliabilitySection) {
  const char *Base = R"(name: t
device:
  name: d
  classes:
    aicore: {throughput: {fp32: 100TFLOPS}, launch_overhead: 1us, ops: ["*"]}
  memory:
    hbm: {capacity: 64GiB, bandwidth: 1TB/s}
topology:
  - {name: hccs, size: 4, bandwidth: 100GB/s, latency: 1us}
)";
  std::string Text = std::string(Base) + R"(reliability:
  device_fit: 2000
  optical_module_fit: 100
  optical_modules_per_device: 4
  checkpoint_bandwidth: 2GB/s
  restart_time: 600s
)";
  llvm::Expected<HardwareModel> M = parseHardwareModel(Text, "t.yaml");
  ASSERT_TRUE(bool(M)) << llvm::toString(M.takeError());
  ASSERT_TRUE(M->Reliab.hasValue());
  EXPECT_DOUBLE_EQ(M->Reliab->getFITPerDevice(), 2400);
  EXPECT_DOUBLE_EQ(M->Reliab->CheckpointBandwidth.value(), 2e9);
  EXPECT_DOUBLE_EQ(M->Reliab->RestartTime.value(), 600);

  llvm::Expected<HardwareModel> None = parseHardwareModel(Base, "t.yaml");
  ASSERT_TRUE(bool(None)) << llvm::toString(None.takeError());
  EXPECT_FALSE(None->Reliab.hasValue());

  std::string Bad = std::string(Base) + "reliability:\n  device_fit: 1\n"
                                        "  checkpoint_bandwidth: 0B/s\n";
  llvm::Expected<HardwareModel> E = parseHardwareModel(Bad, "t.yaml");
  ASSERT_FALSE(bool(E));
  EXPECT_NE(llvm::toString(E.takeError())
                .find("reliability.checkpoint_bandwidth: must be positive"),
            std::string::npos);
}

} // namespace
