//===- CalibrationTest.cpp - loom-calibrate's readers and fits -----------===//
#include "loom/Calibrate/Calibration.h"
#include "loom/Cost/DeviceTime.h"
#include "loom/Cost/OpCost.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace loom;
using namespace llvm;

namespace {

const char *BaseYAML = R"(
name: t
device:
  name: npu
  classes:
    aicore:
      throughput: {fp16: 100TFLOPS}
      vector_throughput: {fp16: 1000TFLOPS}
      launch_overhead: 2us
      efficiency: 0.5
      alignment: 16
      ops: ["*"]
  memory:
    hbm: {capacity: 64GiB, bandwidth: 1TB/s}
topology:
  - {name: hccs, size: 8, bandwidth: 100GB/s, latency: 2us, efficiency: 0.5}
)";

HardwareModel parseOrDie(StringRef Text) {
  Expected<HardwareModel> HW = parseHardwareModel(Text, "t.yaml");
  EXPECT_TRUE(!!HW) << (HW ? "" : toString(HW.takeError()));
  return HW ? std::move(*HW) : HardwareModel();
}

TEST(CalibrationTest, CurveFitRecoversParameters) {
  // t = launch + (w + half) / max with max 0.8, half 5us, launch 2us.
  std::vector<double> W = {1e-6, 4e-6, 20e-6, 100e-6, 1e-3}, T;
  for (double X : W)
    T.push_back(2e-6 + (X + 5e-6) / 0.8);
  Expected<CurveFit> F = fitEfficiencyCurve(W, T, 2e-6);
  ASSERT_TRUE(!!F) << toString(F.takeError());
  EXPECT_NEAR(F->Curve.Max, 0.8, 1e-9);
  EXPECT_NEAR(F->Curve.HalfTime.value(), 5e-6, 1e-12);
  EXPECT_TRUE(F->Notes.empty());
}

TEST(CalibrationTest, CurveFitClampsMaxAboveOne) {
  // Measured at 1.25x the peak: max clamps to 1, the note says so.
  std::vector<double> W = {1e-6, 1e-5, 1e-4}, T;
  for (double X : W)
    T.push_back(X / 1.25 + 1e-6);
  Expected<CurveFit> F = fitEfficiencyCurve(W, T, 0);
  ASSERT_TRUE(!!F) << toString(F.takeError());
  EXPECT_EQ(F->Curve.Max, 1.0);
  ASSERT_EQ(F->Notes.size(), 1u);
  EXPECT_NE(F->Notes[0].find("clamped to 1"), std::string::npos);
}

TEST(CalibrationTest, CurveFitNeedsTwoSizes) {
  std::vector<double> W = {1e-5, 1e-5}, T = {3e-5, 3e-5};
  Expected<CurveFit> F = fitEfficiencyCurve(W, T, 0);
  ASSERT_FALSE(!!F);
  EXPECT_NE(toString(F.takeError()).find("two different sizes"),
            std::string::npos);
}

TEST(CalibrationTest, CollectiveFitRecoversLatencyAndEfficiency) {
  HardwareModel HW = parseOrDie(BaseYAML);
  // AllReduce on 8 ranks: t = 14 alpha + 1.75 S / (100GB/s * eff * S /
  // (S + 1MiB)), alpha 3us, eff 0.8.
  CollectiveTable T;
  T.Level = "hccs";
  T.Kind = CollectiveKind::AllReduce;
  T.Ranks = 8;
  for (double S : {8192.0, 1048576.0, 67108864.0}) {
    double BW = 100e9 * 0.8 * S / (S + 1048576.0);
    T.Samples.push_back({"t", S, 14 * 3e-6 + 1.75 * S / BW});
  }
  Expected<LevelFit> F = fitTopologyLevel(HW, "hccs", {T});
  ASSERT_TRUE(!!F) << toString(F.takeError());
  EXPECT_NEAR(F->Latency, 3e-6, 1e-12);
  EXPECT_NEAR(F->Efficiency, 0.8, 1e-9);
}

TEST(CalibrationTest, CurveInHardwareYAMLChangesDeviceTime) {
  std::string Text = BaseYAML;
  Text.replace(Text.find("      ops:"), 0,
               "      efficiency_curves:\n"
               "        matmul: {max: 0.8, half_time: 5us, source: p.csv}\n");
  HardwareModel HW = parseOrDie(Text);
  const EfficiencyCurve &C =
      HW.getClass("aicore")->EfficiencyCurves.at("matmul");
  EXPECT_EQ(C.Max, 0.8);
  EXPECT_EQ(C.Source, "p.csv");
  Expected<std::unique_ptr<Model>> M = importModelFromText(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n"
      "g (float16[1024,1024] a, float16[1024,2048] b) => (y) {\n"
      "  y = MatMul(a, b)\n}\n",
      "mm");
  ASSERT_TRUE(!!M) << toString(M.takeError());
  ASSERT_TRUE(!!inferShapes(**M));
  const Node &N = *(*M)->getGraph().getNodes().front();
  OpCost Cost = computeOpCost(N, 17);
  EXPECT_EQ(Cost.Family, "matmul");
  // F = 2 * 1024 * 1024 * 2048 = 4.294967296e9; w = F / 100 TFLOPS =
  // 42.94967296us (bytes 8 MiB / 1 TB/s = 8.39us is less).
  // With the curve: 2us + (42.94967296us + 5us) / 0.8 = 61.93709120us.
  ClassTime T = estimateClassTime(N, Cost, "aicore", HW);
  ASSERT_TRUE(T.Supported);
  EXPECT_NEAR(T.Seconds, 61.9370912e-6, 1e-12);
  // Without it: 2us + 42.94967296us / 0.5 = 87.89934592us.
  HardwareModel Plain = parseOrDie(BaseYAML);
  EXPECT_NEAR(estimateClassTime(N, Cost, "aicore", Plain).Seconds,
              87.89934592e-6, 1e-12);
}

TEST(CalibrationTest, CurveValidation) {
  std::string Text = BaseYAML;
  Text.replace(Text.find("      ops:"), 0,
               "      efficiency_curves:\n"
               "        matmul: {max: 1.5, half_time: 5us}\n");
  Expected<HardwareModel> HW = parseHardwareModel(Text, "t.yaml");
  ASSERT_FALSE(!!HW);
  EXPECT_NE(toString(HW.takeError())
                .find("device.classes.aicore.efficiency_curves.matmul.max: "
                      "must be in (0, 1], got 1.5"),
            std::string::npos);
  Text = BaseYAML;
  Text.replace(Text.find("      ops:"), 0,
               "      efficiency_curves:\n"
               "        attention: {max: 0.5, half_time: 5us}\n");
  HW = parseHardwareModel(Text, "t.yaml");
  ASSERT_FALSE(!!HW);
  EXPECT_NE(toString(HW.takeError()).find("unknown op family 'attention'"),
            std::string::npos);
}

TEST(CalibrationTest, MsprofMissingColumnIsAnError) {
  Expected<ProfileRead> R = readMsprofOpSummary(
      "OP Type,Task Type,Task Duration(us),Input Shapes\nAdd,AI_CORE,1,\"1\"\n",
      "p.csv");
  ASSERT_FALSE(!!R);
  EXPECT_EQ(toString(R.takeError()),
            "p.csv:1: error: missing column 'Input Data Types' (an msprof "
            "op_summary CSV has OP Type, Task Type, Task Duration(us), Input "
            "Shapes, Input Data Types)");
}

TEST(CalibrationTest, MsprofBadRowsAreWarnings) {
  Expected<ProfileRead> R = readMsprofOpSummary(
      "OP Type,Task Type,Task Duration(us),Input Shapes,Input Data Types\n"
      "Add,AI_CORE,-3,\"4,4;4,4\",DT_FLOAT16;DT_FLOAT16\n"
      "Add,AI_CORE,0,\"4,4;4,4\",DT_FLOAT16;DT_FLOAT16\n"
      "Add,AI_CORE,1.2.3,\"4,4;4,4\",DT_FLOAT16;DT_FLOAT16\n"
      "Frob,AI_CORE,3,\"4,4\",DT_FLOAT16\n"
      "MatMulV2,AI_CORE,3,\"4,5;6,7\",DT_FLOAT16;DT_FLOAT16\n"
      "Add,AI_CORE,3,\"4,x\",DT_FLOAT16\n"
      "Add,AI_CORE,5,\"4,4;4,4\",DT_FLOAT16;DT_FLOAT16\n",
      "p.csv");
  ASSERT_TRUE(!!R) << toString(R.takeError());
  ASSERT_EQ(R->Samples.size(), 1u);
  EXPECT_EQ(R->Samples[0].Where, "p.csv:8");
  EXPECT_NEAR(R->Samples[0].Seconds, 5e-6, 1e-15);
  ASSERT_EQ(R->Warnings.size(), 6u);
  EXPECT_EQ(R->Warnings[0],
            "p.csv:2: warning: negative duration -3 us; row left out");
  EXPECT_EQ(R->Warnings[1],
            "p.csv:3: warning: zero duration 0 us; row left out");
  EXPECT_EQ(R->Warnings[2],
            "p.csv:4: warning: malformed duration '1.2.3'; row left out");
  EXPECT_NE(R->Warnings[3].find("p.csv:5: warning: unknown op 'Frob'"),
            std::string::npos);
  EXPECT_NE(R->Warnings[4].find("do not agree on the inner dimension"),
            std::string::npos);
  EXPECT_EQ(R->Warnings[5],
            "p.csv:7: warning: malformed shape '4,x'; row left out");
}

TEST(CalibrationTest, MatmulOperandsAreOriented) {
  // transpose_x2: B is [N, K]; the sample is rewritten to [K, N].
  Expected<ProfileRead> R = readMsprofOpSummary(
      "OP Type,Task Type,Task Duration(us),Input Shapes,Input Data Types\n"
      "MatMulV2,AI_CORE,3,\"32,64;128,64\",DT_FLOAT16;DT_FLOAT16\n",
      "p.csv");
  ASSERT_TRUE(!!R);
  ASSERT_EQ(R->Samples.size(), 1u);
  EXPECT_EQ(R->Samples[0].InputShapes[1], (std::vector<int64_t>{64, 128}));
}

TEST(CalibrationTest, TorchTraceUsesKernelTime) {
  // aten::matmul wraps aten::mm; the kernel carries aten::mm's External id.
  const char *Trace = R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::matmul", "pid": 1, "tid": 1,
     "ts": 0, "dur": 50, "args": {"External id": 1,
     "Input Dims": [[8, 16], [16, 32]], "Input type": ["float", "float"]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
     "ts": 1, "dur": 40, "args": {"External id": 2,
     "Input Dims": [[8, 16], [16, 32]], "Input type": ["float", "float"]}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
     "ts": 5, "dur": 3.5, "args": {"External id": 2}}]})";
  Expected<ProfileRead> R = readTorchTrace(Trace, "t.json");
  ASSERT_TRUE(!!R) << toString(R.takeError());
  ASSERT_EQ(R->Samples.size(), 1u);
  EXPECT_EQ(R->Samples[0].ProfileOp, "aten::mm");
  EXPECT_NEAR(R->Samples[0].Seconds, 3.5e-6, 1e-15);
  EXPECT_TRUE(R->Warnings.empty());

  Expected<ProfileRead> Bad = readTorchTrace("{\"traceEvents\": [", "t.json");
  ASSERT_FALSE(!!Bad);
  EXPECT_NE(toString(Bad.takeError()).find("t.json: error: malformed JSON"),
            std::string::npos);
}

TEST(CalibrationTest, BusBandwidthTables) {
  Expected<CollectiveRead> H = readBusBandwidthTable(
      "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | "
      "check_result:\n8192 | 12.50 | 0.65 | success\n16384 | -1 | 0 | "
      "success\n",
      "h.txt");
  ASSERT_TRUE(!!H) << toString(H.takeError());
  ASSERT_EQ(H->Samples.size(), 1u);
  EXPECT_EQ(H->Samples[0].Bytes, 8192);
  EXPECT_NEAR(H->Samples[0].Seconds, 12.5e-6, 1e-15);
  ASSERT_EQ(H->Warnings.size(), 1u);
  EXPECT_EQ(H->Warnings[0],
            "h.txt:3: warning: negative duration -1 us; row left out");

  Expected<CollectiveRead> N = readBusBandwidthTable(
      "#  size  count  type  redop  root  time  algbw  busbw #wrong  time\n"
      "  1024    256  float    sum    -1  20.0   0.05   0.09      0  19.0\n",
      "n.txt");
  ASSERT_TRUE(!!N) << toString(N.takeError());
  ASSERT_EQ(N->Samples.size(), 1u);
  EXPECT_NEAR(N->Samples[0].Seconds, 20e-6, 1e-15);

  Expected<CollectiveRead> E = readBusBandwidthTable("1024 20.0\n", "e.txt");
  ASSERT_FALSE(!!E);
  EXPECT_NE(toString(E.takeError())
                .find("e.txt:1: error: data row before a "
                      "header"),
            std::string::npos);
}

} // namespace

namespace {

TEST(CalibrationTest, HostOnlyTraceKeepsLeafOps) {
  // No kernels: aten::matmul encloses aten::mm on the same thread, so only
  // aten::mm is a kernel, timed by its own duration; aten::add beside it
  // is a leaf too.
  const char *Trace = R"([
    {"ph": "X", "cat": "cpu_op", "name": "aten::matmul", "pid": 1, "tid": 1,
     "ts": 0, "dur": 50, "args": {"Input Dims": [[8, 16], [16, 32]],
     "Input type": ["float", "float"]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
     "ts": 1, "dur": 40, "args": {"Input Dims": [[8, 16], [16, 32]],
     "Input type": ["float", "float"]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1,
     "ts": 60, "dur": 7, "args": {"Input Dims": [[8, 32], []],
     "Input type": ["float", "Scalar"]}}])";
  Expected<ProfileRead> R = readTorchTrace(Trace, "t.json");
  ASSERT_TRUE(!!R) << toString(R.takeError());
  ASSERT_EQ(R->Samples.size(), 2u);
  EXPECT_EQ(R->Samples[0].ProfileOp, "aten::mm");
  EXPECT_NEAR(R->Samples[0].Seconds, 40e-6, 1e-15);
  EXPECT_EQ(R->Samples[1].OpType, "Add");
  // The Python scalar becomes a 0-d tensor of the other operand's type.
  EXPECT_EQ(R->Samples[1].InputTypes[1], DataType::Float);
  EXPECT_TRUE(R->Samples[1].InputShapes[1].empty());
}

} // namespace
