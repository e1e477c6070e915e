//===- PrecisionTest.cpp - Tests for the precision recipe -----------------===//
#include "loom/Plan/Precision.h"
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
  EXPECT_FALSE(parsePrecisionName("fp8").hasValue());
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
  EXPECT_EQ(toString(R.takeError()),
            "--precision tf32: hardware 'atlas800t-a2' lists no tf32 "
            "throughput for its aicore (device.classes.aicore.throughput): "
            "the rule is that a precision recipe computes its matmuls in a "
            "format the device's matrix unit has");
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
            "--precision fp64: expected one of bf16, fp16, fp32, tf32");
}

} // namespace
