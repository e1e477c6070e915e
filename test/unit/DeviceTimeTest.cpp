//===- DeviceTimeTest.cpp - Tests for per-device-class op times -----------===//
//
// Times of small nodes on a small inline hardware description, each worked
// out by hand beside the check: the aicore roofline on both sides of the
// ridge, cube efficiency for small and unaligned dims, launch overheads,
// the aicpu fallback, hbm_pim, ssd, and every reason a class says no.
//
//===----------------------------------------------------------------------===//

#include "loom/Cost/DeviceTime.h"
#include "loom/ONNX/ONNX.h"

#include "RunPipeline.h"
#include "gtest/gtest.h"

#include <cmath>

using namespace loom;
using namespace llvm;

namespace {

// Round numbers so the expected times can be worked out by hand:
// cube fp16 256 TFLOPS at efficiency 0.5 = 1.28e14 FLOP/s for aligned
// shapes; vector fp16 10 TFLOPS; HBM 1e12 B/s; launches 5 us (aicore),
// 20 us (aicpu), 2 us (hbm_pim), 10 us (ssd).
const char *const HW = R"(name: small
device:
  name: npu
  classes:
    aicore:
      throughput: {fp16: 256TFLOPS, fp32: 64TFLOPS}
      vector_throughput: {fp16: 10TFLOPS, fp32: 5TFLOPS}
      launch_overhead: 5us
      efficiency: 0.5
      alignment: 16
      ops: ["*"]
      exclude_ops: [Loop]
      dtypes: [fp16, fp32, int32, int64, bool]
    aicpu:
      throughput: {fp32: 100GFLOPS, int64: 10GOPS}
      launch_overhead: 20us
      efficiency: 0.5
      ops: ["*"]
    hbm_pim:
      bandwidth: 2TB/s
      launch_overhead: 2us
      ops: [Add, Mul, ReduceSum]
      dtypes: [fp16, fp32]
    ssd:
      bandwidth: 4GB/s
      latency: 100us
      launch_overhead: 10us
      ops: [Gather]
  memory:
    hbm: {capacity: 64GiB, bandwidth: 1TB/s}
    ssd: {capacity: 4TB, bandwidth: 4GB/s, latency: 100us}
topology:
  - {name: hccs, size: 8, bandwidth: 200GB/s, latency: 1us}
)";

const Node *producer(const Model *M, StringRef Out) {
  const Value *V = M ? M->getGraph().lookup(Out) : nullptr;
  const Node *N = V ? V->getDefiningNode() : nullptr;
  if (!N)
    ADD_FAILURE() << "no node defines '" << Out.str() << "'";
  return N;
}

/// Time of the node defining \p Out on class \p Class (with its own cost,
/// or \p C when given).
ClassTime timeOf(const Model *M, StringRef Out, StringRef Class,
                 const HardwareModel &H, const OpCost *C = nullptr) {
  const Node *N = producer(M, Out);
  if (!N)
    return ClassTime();
  OpCost Own = computeOpCost(*N, M->getOpsetVersion(""));
  return estimateClassTime(*N, C ? *C : Own, Class, H);
}

/// Relative 1e-9: the expected values are exact decimal arithmetic, the
/// code divides in binary.
void expectTime(double Got, double Want) {
  EXPECT_NEAR(Got, Want, 1e-9 * std::fabs(Want) + 1e-18);
}

TEST(DeviceTimeTest, CubeShapeEfficiency) {
  // Aligned and at least one 64-wide tile (4 fractals of 16): full speed.
  EXPECT_DOUBLE_EQ(cubeShapeEfficiency({1, 64, 64, 64}, 16), 1.0);
  EXPECT_DOUBLE_EQ(cubeShapeEfficiency({8, 4096, 4096, 4000}, 16), 1.0);
  // M = 100 pads to 112: 100 / 112 = 25 / 28.
  EXPECT_DOUBLE_EQ(cubeShapeEfficiency({1, 100, 4096, 4096}, 16), 25.0 / 28);
  // K = 4001 pads to 4016.
  EXPECT_DOUBLE_EQ(cubeShapeEfficiency({1, 4096, 4096, 4001}, 16),
                   4001.0 / 4016);
  // M = N = 16: aligned, but a quarter of a tile each: 0.25 * 0.25.
  EXPECT_DOUBLE_EQ(cubeShapeEfficiency({1, 16, 16, 4096}, 16), 0.0625);
  // A scalar product: (1/16)^3 padding, (16/64)^2 fill = 1 / 65536.
  EXPECT_DOUBLE_EQ(cubeShapeEfficiency({1, 1, 1, 1}, 16), 1.0 / 65536);
  // Alignment 1 (no fractal): only dims under 4 lose.
  EXPECT_DOUBLE_EQ(cubeShapeEfficiency({1, 100, 100, 100}, 1), 1.0);
  // An empty product wastes nothing.
  EXPECT_DOUBLE_EQ(cubeShapeEfficiency({1, 0, 16, 16}, 16), 1.0);
}

TEST(DeviceTimeTest, MatmulTileEfficiency) {
  MatmulTiles T{128, 256, /*SerialStore=*/true, "test"};
  // H100-like: 132 cores. M 4096, N 2048: 32 x 8 = 256 tiles, 2 waves of
  // 132 slots: 256 / 264 = 32 / 33 of them useful. K 2048 with a store
  // worth 207 steps of K: 2048 / 2255.
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 4096, 2048, 2048}, T, 132, 8, 207),
                   32.0 / 33 * 2048 / 2255);
  // Batch multiplies the tiles: 4 x 1 x 1 = 4 tiles on 4 cores, 1 wave; M
  // 100 of a 128-row tile: 100 / 128; no serial store.
  MatmulTiles P{128, 256, false, "test"};
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({4, 100, 256, 64}, P, 4, 8, 207),
                   100.0 / 128);
  // K 60 pads to 64 at alignment 8: 60 / 64; M and N fill one tile.
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 128, 256, 60}, P, 1, 8, 0),
                   60.0 / 64);
  // Nothing to compute, or no cores given: no loss.
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 0, 256, 64}, T, 4, 8, 207), 1.0);
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 128, 256, 64}, T, 0, 8, 207), 1.0);
  // The store's K: 2 bytes x 1.28e14 / (2 x 1e12) = 128.
  EXPECT_DOUBLE_EQ(matmulStoreK(2, 1.28e14, 1e12), 128.0);
}

TEST(DeviceTimeTest, MatmulTileEfficiencyStreamK) {
  // A 128-token prefill GEMM on 132 cores: M 128, N 4096, K 4096 is 1 x 16
  // tiles, one wave with 116 cores idle: 16 / 132 whole-tile.
  MatmulTiles DP{128, 256, false, "test"};
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 128, 4096, 4096}, DP, 132, 8, 0),
                   16.0 / 132);
  // Stream-K with k = 64: 16 tiles x 64 iterations = 1024, ceil(1024 /
  // 132) = 8 per core: 1024 / (8 x 132) = 0.9697.
  MatmulTiles SK{128, 256, false, "test", /*K=*/64, /*StreamK=*/true};
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 128, 4096, 4096}, SK, 132, 8, 0),
                   1024.0 / (8 * 132));
  // Whole waves gain nothing: 264 tiles on 132 cores, 2 waves, either way.
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 1408, 6144, 4096}, SK, 132, 8, 0),
                   matmulTileEfficiency({1, 1408, 6144, 4096}, DP, 132, 8, 0));
  // K 100 at k 64: 2 iterations; one tile on 4 cores: whole-tile, one
  // core of 4 works (1 / 4); stream-K gives the two iterations to two
  // cores (ceil(2 / 4) = 1 each): 2 / 4.
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 128, 256, 100}, SK, 4, 4, 0),
                   2.0 / 4);
}

TEST(DeviceTimeTest, MatmulTileEfficiencyMinM) {
  // M 8 on 128 x 256 tiles: 8 of 128 rows useful, 1 x 16 tiles on 132
  // cores, one wave: 8 x 4096 / (132 x 128 x 256) whole-tile.
  MatmulTiles T{128, 256, false, "test"};
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 8, 4096, 4096}, T, 132, 8, 0),
                   8.0 * 4096 / (132.0 * 128 * 256));
  // min_m 64: the tile is 64 rows, so 8 / 64 of it is useful.
  T.MinM = 64;
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 8, 4096, 4096}, T, 132, 8, 0),
                   8.0 * 4096 / (132.0 * 64 * 256));
  // M 96 rounds up to 128 rows: no change; M 128 and more: the full tile.
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 96, 4096, 4096}, T, 132, 8, 0),
                   96.0 * 4096 / (132.0 * 128 * 256));
  EXPECT_DOUBLE_EQ(matmulTileEfficiency({1, 1024, 4096, 4096}, T, 132, 8, 0),
                   matmulTileEfficiency({1, 1024, 4096, 4096},
                                        MatmulTiles{128, 256, false, "t"}, 132,
                                        8, 0));
}

TEST(DeviceTimeTest, AICoreMatmulTiles) {
  // HW with 4 cores and 128 x 256 tiles, serial store: the store's K is
  // 2 B x 1.28e14 / (2 x 1e12 B/s) = 128.
  std::string Text = HW;
  size_t At = Text.find("      alignment: 16\n");
  Text.insert(At, "      cores: 4\n      matmul_tiles: {m: 128, n: 256, "
                  "serial_store: true, source: \"test\"}\n");
  HardwareModel H = parseTestHardware(Text);
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float16[4096,4096] a, float16[4,1024,512] x)
  => (float16[4096,4096] c, float16[4,1024,4096] y)
  <float16[4096,4096] w, float16[512,4096] v> {
  c = MatMul(a, w)
  y = MatMul(x, v)
})");
  // c: 32 x 16 = 512 tiles = 128 full waves of 4; K 4096: 4096 / 4224 =
  // 32 / 33. 2^37 FLOPs at 1.28e14 x 32 / 33 = 1.107296256 ms (traffic
  // 0.1007 ms hides), + 5 us.
  ClassTime C = timeOf(M.get(), "c", "aicore", H);
  ASSERT_TRUE(C.Supported) << C.Reason;
  expectTime(C.Seconds, 1.112296256e-3);
  // Backward: dX and dW both (4096, 4096, 4096), 32 / 33: 2 x 1.107296256
  // ms + 5 us.
  expectTime(C.BackwardSeconds, 2.219592512e-3);
  // y: Batch 4, M 1024, N 4096, K 512 (v shared over the batch). Forward:
  // 4 x 8 x 16 = 512 tiles, full waves; K 512: 512 / 640 = 0.8. 2^34
  // FLOPs at 1.024e14 = 167.77216 us (traffic 41.9 us), + 5 us.
  ClassTime Y = timeOf(M.get(), "y", "aicore", H);
  ASSERT_TRUE(Y.Supported) << Y.Reason;
  expectTime(Y.Seconds, 172.77216e-6);
  // Backward: dX (4, 1024, 512, K 4096) and dW over the batch (1, 512,
  // 4096, K 4 x 1024) both 64 full waves and K 4096: 32 / 33. 2^35 FLOPs
  // at 1.28e14 x 32 / 33 = 276.824064 us, + 5 us. (Without the shared
  // weight, dW's K would be 1024: 8 / 9, slower.)
  expectTime(Y.BackwardSeconds, 281.824064e-6);
}

TEST(DeviceTimeTest, AICoreCubeRoofline) {
  HardwareModel H = parseTestHardware(HW);
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float16[4096,4096] a, float16[16,4096] v, float16[4100,4100] u)
  => (float16[4096,4096] c, float16[16,4096] d, float16[4100,4100] e)
  <float16[4096,4096] w, float16[4100,4100] w2> {
  c = MatMul(a, w)
  d = MatMul(v, w)
  e = MatMul(u, w2)
})");
  // Compute-bound: 2 * 4096^3 = 2^37 = 137,438,953,472 FLOPs at 1.28e14
  // = 1.073741824 ms; 3 * 4096^2 * 2 B = 100,663,296 B at 1e12 B/s =
  // 0.100663296 ms. Plus 5 us launch: 1.078741824 ms.
  ClassTime C = timeOf(M.get(), "c", "aicore", H);
  ASSERT_TRUE(C.Supported) << C.Reason;
  expectTime(C.Seconds, 1.078741824e-3);
  // Backward: 2 x FLOPs = 2.147483648 ms (2 x traffic = 0.2013 ms) + 5 us.
  expectTime(C.BackwardSeconds, 2.152483648e-3);

  // Memory-bound: M = 16 runs at a quarter of the cube (a quarter tile):
  // 2 * 16 * 4096^2 = 536,870,912 FLOPs at 3.2e13 = 16.777216 us, while
  // (16*4096 + 4096^2 + 16*4096) * 2 B = 33,816,576 B take 33.816576 us.
  // Plus 5 us: 38.816576 us.
  ClassTime D = timeOf(M.get(), "d", "aicore", H);
  expectTime(D.Seconds, 38.816576e-6);

  // Unaligned: 4100 pads to 4112 in M, N and K: efficiency
  // (4100/4112)^3 = 0.991271, i.e. the cube computes the padded product:
  // 2 * 4112^3 = 139,055,865,856 FLOPs at 1.28e14 = 1.086373952 ms, plus
  // 5 us = 1.091373952 ms (the aligned 4096^3 took 1.078741824 ms).
  ClassTime E = timeOf(M.get(), "e", "aicore", H);
  double Eff = std::pow(4100.0 / 4112.0, 3);
  expectTime(E.Seconds, 2 * std::pow(4100.0, 3) / (1.28e14 * Eff) + 5e-6);
  expectTime(E.Seconds, 1.091373952e-3);
}

TEST(DeviceTimeTest, AICoreMatmulRooflineNorm) {
  // matmul_roofline norm 2: the memory-bound M = 16 GEMM of
  // AICoreCubeRoofline (c = 16.777216 us, m = 33.816576 us) takes
  // sqrt(c^2 + m^2) = 37.749... us, + 5 us; its backward (2 c, 2 m) twice
  // that, + 5 us. The Relu after it (vector) keeps the max.
  std::string Text = HW;
  size_t At = Text.find("      alignment: 16\n");
  Text.insert(At, "      matmul_roofline: {norm: 2, source: \"test\"}\n");
  HardwareModel H = parseTestHardware(Text);
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float16[16,4096] v) => (float16[16,4096] r) <float16[4096,4096] w> {
  d = MatMul(v, w)
  r = Relu(d)
})");
  double C = 16.777216e-6, Mem = 33.816576e-6;
  ClassTime D = timeOf(M.get(), "d", "aicore", H);
  ASSERT_TRUE(D.Supported) << D.Reason;
  expectTime(D.Seconds, std::hypot(C, Mem) + 5e-6);
  expectTime(D.BackwardSeconds, 2 * std::hypot(C, Mem) + 5e-6);
  ClassTime R = timeOf(M.get(), "r", "aicore", H);
  ClassTime R0 = timeOf(M.get(), "r", "aicore", parseTestHardware(HW));
  expectTime(R.Seconds, R0.Seconds);

  // Norm 1 is the sum; a huge norm is the max (no power overflows).
  auto WithNorm = [&](const char *Norm) {
    std::string T = HW;
    T.insert(T.find("      alignment: 16\n"),
             std::string("      matmul_roofline: {norm: ") + Norm +
                 ", source: \"test\"}\n");
    return parseTestHardware(T);
  };
  expectTime(timeOf(M.get(), "d", "aicore", WithNorm("1")).Seconds,
             C + Mem + 5e-6);
  EXPECT_NEAR(timeOf(M.get(), "d", "aicore", WithNorm("1e6")).Seconds,
              Mem + 5e-6, 1e-9);
}

TEST(DeviceTimeTest, AICoreVectorMemoryAndFree) {
  HardwareModel H = parseTestHardware(HW);
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float16[1] s, float16[1024,1024] a, float16[1024,1024] b)
  => (float16[1] t, float16[1024,1024] c, float16[1024,1024] tr,
      float16[1048576] r, float16[1024,1024] sm) {
  t = Add(s, s)
  c = Add(a, b)
  tr = Transpose(a)
  shape = Constant <value = int64[1] {1048576}> ()
  r = Reshape(a, shape)
  sm = Softmax(a)
})");
  // A one-element Add is all launch: max(1 FLOP / 1e13, 4 B / 1e12) + 5 us.
  ClassTime T = timeOf(M.get(), "t", "aicore", H);
  expectTime(T.Seconds, 4e-12 + 5e-6);
  // Add of two 2 MiB f16 tensors: memory-bound, 3 * 2,097,152 B =
  // 6,291,456 B = 6.291456 us (1,048,576 FLOPs at 1e13 = 0.1 us), + 5 us.
  ClassTime C = timeOf(M.get(), "c", "aicore", H);
  expectTime(C.Seconds, 11.291456e-6);
  // Backward: twice the traffic, 12.582912 us + 5 us.
  expectTime(C.BackwardSeconds, 17.582912e-6);
  // Transpose moves 2 x 2 MiB: 4.194304 us + 5 us.
  ClassTime Tr = timeOf(M.get(), "tr", "aicore", H);
  expectTime(Tr.Seconds, 9.194304e-6);
  // A Reshape has no kernel and no launch, wherever it is placed.
  ClassTime R = timeOf(M.get(), "r", "aicore", H);
  EXPECT_TRUE(R.Supported);
  EXPECT_EQ(R.Seconds, 0);
  EXPECT_EQ(timeOf(M.get(), "r", "aicpu", H).Seconds, 0);

  // Vector peak versus the cube / 16 fallback, on a compute-bound cost:
  // 1.6e8 FLOPs at 10 TFLOPS = 16 us; 4 MiB of traffic = 4.19 us.
  const Node *Sm = producer(M.get(), "sm");
  OpCost Heavy = computeOpCost(*Sm, 17);
  Heavy.Flops = 1.6e8;
  expectTime(timeOf(M.get(), "sm", "aicore", H, &Heavy).Seconds, 16e-6 + 5e-6);
  // Without vector_throughput: 256 TFLOPS / 16 = 16 TFLOPS -> 10 us.
  std::string NoVector = HW;
  NoVector.erase(NoVector.find("      vector_throughput"),
                 std::string("      vector_throughput: {fp16: 10TFLOPS, "
                             "fp32: 5TFLOPS}\n")
                     .size());
  HardwareModel H2 = parseTestHardware(NoVector);
  expectTime(timeOf(M.get(), "sm", "aicore", H2, &Heavy).Seconds, 10e-6 + 5e-6);
}

TEST(DeviceTimeTest, AICPU) {
  HardwareModel H = parseTestHardware(HW);
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64[1024] i, bool[1024] p, float[64,64] x, float[4,4] x0)
  => (int64[1024] j, bool[1024] q, float[64,64] y, int64[2] s,
      float[4,4] l) <float[64,64] w, float[4,4] w4> {
  j = Add(i, i)
  q = And(p, p)
  y = MatMul(x, w)
  s = Shape(x)
  trips = Constant <value = int64 {10}> ()
  cond = Constant <value = bool {1}> ()
  l = Loop(trips, cond, x0) <body = body (int64 it, bool c, float[4,4] xi)
      => (bool co, float[4,4] xo) {
    co = Identity(c)
    xo = MatMul(xi, w4)
  }>
})");
  // int64 arithmetic is not for the AI core, even where dtypes allows i64.
  ClassTime JC = timeOf(M.get(), "j", "aicore", H);
  EXPECT_FALSE(JC.Supported);
  EXPECT_EQ(JC.Reason,
            "aicore does no i64 arithmetic (Add is int64 index work for the "
            "aicpu)");
  // On the aicpu: 1024 ops at 10 GOPS * 0.5 = 0.2048 us (i read once and
  // j written, 16 KiB: 0.016 us), + 20 us = 20.2048 us.
  ClassTime J = timeOf(M.get(), "j", "aicpu", H);
  ASSERT_TRUE(J.Supported) << J.Reason;
  expectTime(J.Seconds, 20.2048e-6);
  EXPECT_EQ(J.BackwardSeconds, 0);
  // bool has no listed rate: the slowest one (10 GOPS) is used.
  expectTime(timeOf(M.get(), "q", "aicpu", H).Seconds, 20.2048e-6);
  // A matmul without a cube: 2 * 64^3 = 524,288 FLOPs at 100 GFLOPS * 0.5
  // = 10.48576 us, + 20 us.
  expectTime(timeOf(M.get(), "y", "aicpu", H).Seconds, 30.48576e-6);
  // Shape arithmetic is AICPU work.
  ClassTime SC = timeOf(M.get(), "s", "aicore", H);
  EXPECT_FALSE(SC.Supported);
  EXPECT_EQ(SC.Reason, "aicore has no kernel for control op Shape (control "
                       "flow and shape work run on the aicpu)");
  // Loop: excluded from the aicore by the YAML. On the aicpu: 10 x 128
  // FLOPs at 5e10 = 0.0256 us, 1920 B = 0.00192 us; launches: the Loop
  // plus 10 iterations x 2 body nodes = 21 x 20 us = 420 us.
  ClassTime LC = timeOf(M.get(), "l", "aicore", H);
  EXPECT_FALSE(LC.Supported);
  EXPECT_EQ(LC.Reason, "aicore does not support op Loop");
  ClassTime L = timeOf(M.get(), "l", "aicpu", H);
  ASSERT_TRUE(L.Supported) << L.Reason;
  expectTime(L.Seconds, 420.0256e-6);
  // Backward: 2560 FLOPs = 0.0512 us, + 420 us.
  expectTime(L.BackwardSeconds, 420.0512e-6);
}

TEST(DeviceTimeTest, HBMPIM) {
  HardwareModel H = parseTestHardware(HW);
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float16[1024,1024] a, float16[1024,1024] b, int32[8] i)
  => (float16[1024,1024] c, float16[1024,1024] d, float16[1024] r,
      int32[8] k) {
  c = Add(a, b)
  d = Sub(a, b)
  axes = Constant <value = int64[1] {1}> ()
  r = ReduceSum <keepdims = 0> (a, axes)
  k = Add(i, i)
})");
  // 6,291,456 B at the internal 2e12 B/s = 3.145728 us, + 2 us.
  ClassTime C = timeOf(M.get(), "c", "hbm_pim", H);
  ASSERT_TRUE(C.Supported) << C.Reason;
  expectTime(C.Seconds, 5.145728e-6);
  // Backward: twice the traffic, 6.291456 us + 2 us.
  expectTime(C.BackwardSeconds, 8.291456e-6);
  ClassTime D = timeOf(M.get(), "d", "hbm_pim", H);
  EXPECT_FALSE(D.Supported);
  EXPECT_EQ(D.Reason, "hbm_pim does not support op Sub");
  // Listed in the YAML, but a reduction is not element-wise.
  ClassTime R = timeOf(M.get(), "r", "hbm_pim", H);
  EXPECT_FALSE(R.Supported);
  EXPECT_EQ(R.Reason,
            "hbm_pim runs only element-wise ops, not ReduceSum (vector)");
  ClassTime K = timeOf(M.get(), "k", "hbm_pim", H);
  EXPECT_FALSE(K.Supported);
  EXPECT_EQ(K.Reason, "hbm_pim does not support data type i32 (Add)");
}

TEST(DeviceTimeTest, SSDGather) {
  HardwareModel H = parseTestHardware(HW);
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64[4,128] ids, float[1000,1024] data, float[4,4] x)
  => (float[4,128,1024] e, float[4,128,1024] f, float[4,4] y)
  <float[50000,1024] table, float[4,4] w> {
  e = Gather(table, ids)
  f = Gather(data, ids)
  y = MatMul(x, w)
})");
  // Only the touched rows: 512 rows x 4 KiB = 2,097,152 B at 4e9 B/s =
  // 524.288 us, + one 100 us latency (the reads are issued together), +
  // 10 us launch = 634.288 us -- not the 204.8 MB table's 51.2 ms.
  ClassTime E = timeOf(M.get(), "e", "ssd", H);
  ASSERT_TRUE(E.Supported) << E.Reason;
  expectTime(E.Seconds, 634.288e-6);
  // Backward writes the row gradients back: 2 x 524.288 + 110 us.
  expectTime(E.BackwardSeconds, 1158.576e-6);
  // The same Gather from HBM on the aicore: (2,101,248 + 2,097,152) B =
  // 4.1984 us, + 5 us.
  expectTime(timeOf(M.get(), "e", "aicore", H).Seconds, 9.1984e-6);
  ClassTime F = timeOf(M.get(), "f", "ssd", H);
  EXPECT_FALSE(F.Supported);
  EXPECT_EQ(F.Reason, "ssd serves only Gather from a parameter table; "
                      "'data' is not a parameter");
  ClassTime Y = timeOf(M.get(), "y", "ssd", H);
  EXPECT_FALSE(Y.Supported);
  EXPECT_EQ(Y.Reason, "ssd does not support op MatMul");
}

TEST(DeviceTimeTest, UnsupportedReasons) {
  HardwareModel H = parseTestHardware(HW);
  auto M =
      loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17, "com.foo" : 1]>
g (double[4] a, float[4] b) => (double[4] c, float[4] d) {
  c = Add(a, a)
  d = com.foo.Bar(b)
})");
  ClassTime C = timeOf(M.get(), "c", "aicore", H);
  EXPECT_FALSE(C.Supported);
  EXPECT_EQ(C.Reason, "aicore does not support data type f64 (Add)");
  ClassTime D = timeOf(M.get(), "d", "aicpu", H);
  EXPECT_FALSE(D.Supported);
  EXPECT_EQ(D.Reason, "no cost rule for op 'com.foo.Bar'");
  std::string NoPIM = HW;
  size_t From = NoPIM.find("    hbm_pim:"), To = NoPIM.find("    ssd:");
  NoPIM.erase(From, To - From);
  HardwareModel H2 = parseTestHardware(NoPIM);
  ClassTime P = timeOf(M.get(), "c", "hbm_pim", H2);
  EXPECT_FALSE(P.Supported);
  EXPECT_EQ(P.Reason, "no device class 'hbm_pim' in hardware 'small'");
}

/// Every costed node of the example models can run somewhere on the
/// shipped Atlas 800T A2 description (the aicpu is the fallback), and the
/// classes agree with DESIGN §5: matmuls and norms on the aicore, shape
/// arithmetic on the aicpu only.
TEST(DeviceTimeTest, ExampleModelsArePlaceable) {
  Expected<HardwareModel> H = loadHardwareModel(
      std::string(LOOM_SOURCE_DIR) + "/examples/hw/atlas800t-a2.yaml");
  ASSERT_TRUE(bool(H)) << toString(H.takeError());
  for (const char *Name : {"gpt2-tiny", "llama-tiny", "mlp-tiny"}) {
    std::string Path =
        std::string(LOOM_SOURCE_DIR) + "/examples/models/" + Name + ".onnx";
    Expected<std::unique_ptr<Model>> M = importModelFile(Path);
    ASSERT_TRUE(bool(M)) << toString(M.takeError());
    for (Value *In : (*M)->getGraph().getInputs())
      for (Dim &D : In->Type.Dims)
        if (!D.isStatic())
          D = Dim(D.Symbol == "batch" ? 2 : 16);
    Expected<unsigned> Changed = inferShapes(**M);
    ASSERT_TRUE(bool(Changed)) << toString(Changed.takeError());
    for (const auto &N : (*M)->getGraph().getNodes()) {
      OpCost C = computeOpCost(*N, (*M)->getOpsetVersion(""));
      if (!C.HasRule)
        continue;
      ClassTime Core = estimateClassTime(*N, C, "aicore", *H);
      ClassTime CPU = estimateClassTime(*N, C, "aicpu", *H);
      EXPECT_TRUE(Core.Supported || CPU.Supported)
          << Name << ": " << N->getOpType().str() << ": " << Core.Reason << "; "
          << CPU.Reason;
      StringRef Op = N->getOpType();
      if (Op == "MatMul" || Op == "Gemm" || Op == "LayerNormalization" ||
          Op == "Softmax")
        EXPECT_TRUE(Core.Supported) << Name << ": " << Core.Reason;
      if (Op == "Shape" || Op == "Range")
        EXPECT_FALSE(Core.Supported) << Name << ": " << Op.str();
    }
  }
}

} // namespace

TEST(DeviceTimeTest, LossBackwardTrafficIsTheRules) {
  // The losses count their backward's bytes (cost_models/ops/LossOps.cpp)
  // instead of twice the forward's. f16 scores [1024,1024] = 2^20
  // elements of 2 bytes, int64 labels [1024] = 8,192 B.
  HardwareModel H = parseTestHardware(HW);
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float16[1024,1024] x, int64[1024] labels) => (float16 ce, float16 nll) {
  ce = SoftmaxCrossEntropyLoss(x, labels)
  lp = LogSoftmax <axis = 1> (x)
  nll = NegativeLogLikelihoodLoss(lp, labels)
})");
  // SoftmaxCrossEntropyLoss, f16 so upcast to f32: read (2 + 20) x 2^20
  // + 8,192 = 23,076,864 B, written (4 + 12) x 2^20 + the f16 loss 2 =
  // 16,777,218 B: 39.854082 us of traffic (6 x 2^20 FLOPs at 10 TFLOPS =
  // 0.63 us), + 5 us.
  ClassTime CE = timeOf(M.get(), "ce", "aicore", H);
  expectTime(CE.Seconds, 39.854082e-6 + 5e-6);
  // Backward: (8 + 4 + 2) x 2^20 + 8,192 = 14,688,256 B = 14.688256 us
  // (2 x 2^20 FLOPs = 0.21 us), + 5 us; twice the forward's would be 79.7.
  expectTime(CE.BackwardSeconds, 14.688256e-6 + 5e-6);
  // NegativeLogLikelihoodLoss reads one f16 per row and the labels: 1,024
  // x 2 + 8,192 + the loss 2 = 10,242 B; its backward writes the zeroed
  // gradient 2^20 x 2, scatters 1,024 x 2 and reads the labels: 2,107,392
  // B.
  ClassTime NLL = timeOf(M.get(), "nll", "aicore", H);
  expectTime(NLL.Seconds, 0.010242e-6 + 5e-6);
  expectTime(NLL.BackwardSeconds, 2.107392e-6 + 5e-6);
}
