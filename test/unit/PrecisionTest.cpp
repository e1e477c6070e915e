//===- PrecisionTest.cpp - Tests for the precision recipe -----------------===//
#include "loom/Plan/Precision.h"
#include "loom/Cost/OpCost.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/Framework.h"
#include "gtest/gtest.h"

using namespace llvm;
using namespace loom;

namespace {

HardwareModel loadHW(StringRef Name) {
  Expected<HardwareModel> HW = loadHardwareModel(
      (Twine(LOOM_SOURCE_DIR) + "/examples/hw/" + Name + ".yaml").str());
  if (!HW) {
    ADD_FAILURE() << toString(HW.takeError());
    return HardwareModel();
  }
  return std::move(*HW);
}

FrameworkProfile loadFW(StringRef Name) {
  Expected<FrameworkProfile> F = loadFrameworkProfile(Name);
  if (!F) {
    ADD_FAILURE() << toString(F.takeError());
    return FrameworkProfile();
  }
  return std::move(*F);
}

TEST(PrecisionTest, Recipes) {
  // Mixed precision: 2-byte weights, a 4-byte fp32 master copy (with Adam's
  // two 4-byte moments, the profiles' 12 bytes of optimizer state).
  PrecisionRecipe B = makePrecisionRecipe(PrecisionKind::BF16);
  EXPECT_EQ(B.Storage, DataType::BFloat16);
  EXPECT_EQ(B.getCubeFormat(), "bf16");
  EXPECT_EQ(B.WeightBytes, 2);
  EXPECT_EQ(B.MasterBytes, 4);
  EXPECT_TRUE(B.Allows16BitGrads);
  // fp32: the weights are their own master copy, no 16-bit gradients.
  PrecisionRecipe F = makePrecisionRecipe(PrecisionKind::FP32);
  EXPECT_EQ(F.Storage, DataType::Float);
  EXPECT_EQ(F.WeightBytes, 4);
  EXPECT_EQ(F.MasterBytes, 0);
  EXPECT_FALSE(F.Allows16BitGrads);
  // tf32: fp32 storage, matmuls at the cube's tf32 key.
  PrecisionRecipe T = makePrecisionRecipe(PrecisionKind::TF32);
  EXPECT_EQ(T.Storage, DataType::Float);
  EXPECT_EQ(T.getCubeFormat(), "tf32");
  EXPECT_EQ(parsePrecisionName("fp16"), PrecisionKind::FP16);
  EXPECT_FALSE(parsePrecisionName("fp4").hasValue());
  // fp8 training (issue 38 item 3): Transformer Engine's recipe, bf16
  // around the fp8 GEMMs, fp32 masters, amax history 1024: (1024 + 2) x 4
  // = 4104 bytes of scaling state per tensor.
  EXPECT_EQ(parsePrecisionName("fp8"), PrecisionKind::FP8);
  PrecisionRecipe E = makePrecisionRecipe(PrecisionKind::FP8);
  EXPECT_EQ(E.Storage, DataType::BFloat16);
  EXPECT_EQ(E.getCubeFormat(), "fp8");
  EXPECT_EQ(E.WeightBytes, 2);
  EXPECT_EQ(E.MasterBytes, 4);
  EXPECT_EQ(E.getScalingStateBytes(), 4104);
  // fp8 serving: 1-byte weights, no optimizer, no scaling history.
  PrecisionRecipe S = makePrecisionRecipe(PrecisionKind::FP8, true);
  EXPECT_EQ(S.WeightBytes, 1);
  EXPECT_EQ(S.MasterBytes, 0);
  EXPECT_EQ(S.getScalingStateBytes(), 0);
}

// How the fp8 recipes retype one weight GEMM's cost (bf16 storage, 2-byte
// elements): training adds 2 / 2 of the bytes read (quantize: read bf16,
// write fp8, GEMM reads fp8) and 2 x 4104 bytes of amax history; serving
// moves 1 byte an element. Activation GEMMs are left alone.
TEST(PrecisionTest, FP8CubeCost) {
  OpCost C;
  C.BytesRead = 1000;
  C.BytesWritten = 200;
  C.ParamBytes = 600;
  OpCost T = C;
  makePrecisionRecipe(PrecisionKind::FP8).applyToCube(T, true);
  EXPECT_EQ(T.CubeFormat, "fp8");
  EXPECT_EQ(T.BytesRead, 1000 + 1000 + 8208);
  EXPECT_EQ(T.BytesWritten, 200);
  EXPECT_EQ(T.ParamBytes, 600);
  OpCost S = C;
  makePrecisionRecipe(PrecisionKind::FP8, true).applyToCube(S, true);
  EXPECT_EQ(S.BytesRead, 500);
  EXPECT_EQ(S.BytesWritten, 100);
  EXPECT_EQ(S.ParamBytes, 300);
  OpCost A = C;
  makePrecisionRecipe(PrecisionKind::FP8).applyToCube(A, false);
  EXPECT_EQ(A.CubeFormat, "");
  EXPECT_EQ(A.BytesRead, 1000);
  // tf32 retypes every matrix op, weights or not.
  OpCost F = C;
  makePrecisionRecipe(PrecisionKind::TF32).applyToCube(F, false);
  EXPECT_EQ(F.CubeFormat, "tf32");
  EXPECT_EQ(F.BytesRead, 1000);
}

TEST(PrecisionTest, Defaults) {
  HardwareModel A100 = loadHW("dgx-a100"), Atlas = loadHW("atlas800t-a2");
  // none: bf16 where the aicore lists a bf16 cube throughput (both do).
  EXPECT_EQ(getHardwareDefaultPrecision(A100), PrecisionKind::BF16);
  EXPECT_EQ(getHardwareDefaultPrecision(Atlas), PrecisionKind::BF16);
  // Without bf16: fp16.
  A100.Device.Classes["aicore"].Throughput.erase("bf16");
  EXPECT_EQ(getHardwareDefaultPrecision(A100), PrecisionKind::FP16);
  // The profiles' defaults: bf16.
  FrameworkProfile M = loadFW("megatron-core");
  ASSERT_TRUE(M.Precision.hasValue());
  EXPECT_EQ(M.Precision->Default, PrecisionKind::BF16);
  Expected<PrecisionRecipe> R = resolvePrecision(None, &M, Atlas);
  ASSERT_TRUE((bool)R) << toString(R.takeError());
  EXPECT_EQ(R->Kind, PrecisionKind::BF16);
  EXPECT_NE(R->Why.find("megatron-core's default"), std::string::npos);
}

TEST(PrecisionTest, Errors) {
  HardwareModel Atlas = loadHW("atlas800t-a2");
  // The Ascend cube has no TF32.
  Expected<PrecisionRecipe> R =
      resolvePrecision(StringRef("tf32"), nullptr, Atlas);
  ASSERT_FALSE((bool)R);
  // The message names the device class (and the file where one is given).
  EXPECT_EQ(toString(R.takeError()),
            "--precision tf32: hardware 'atlas800t-a2', device class aicore "
            "(Ascend 910B2), lists no tf32 throughput "
            "(device.classes.aicore.throughput): the rule is that a "
            "precision recipe computes its matmuls in a format the device's "
            "matrix unit has");
  // fp8 on the 910B (no fp8 format), with the file named; the H100 has it.
  Expected<PrecisionRecipe> H =
      resolvePrecision(StringRef("fp8"), nullptr, loadHW("dgx-h100"), true);
  ASSERT_TRUE((bool)H) << toString(H.takeError());
  EXPECT_TRUE(H->Serving);
  R = resolvePrecision(StringRef("fp8"), nullptr, Atlas, false, "hw.yaml");
  ASSERT_FALSE((bool)R);
  EXPECT_EQ(toString(R.takeError()).substr(0, 95),
            "hw.yaml: --precision fp8: hardware 'atlas800t-a2', device class "
            "aicore (Ascend 910B2), lists no");
  // MindSpeed-LLM does not run tf32 (its profile lists no tf32).
  HardwareModel A100 = loadHW("dgx-a100");
  FrameworkProfile MS = loadFW("mindspeed-llm");
  R = resolvePrecision(StringRef("tf32"), &MS, A100);
  ASSERT_FALSE((bool)R);
  EXPECT_NE(toString(R.takeError())
                .find("--framework mindspeed-llm runs only "
                      "bf16, fp16, fp32"),
            std::string::npos);
  R = resolvePrecision(StringRef("fp64"), nullptr, A100);
  ASSERT_FALSE((bool)R);
  EXPECT_EQ(toString(R.takeError()),
            "--precision fp64: expected one of bf16, fp16, fp32, tf32, fp8");
}

} // namespace
