//===- StageSplitTest.cpp - The one split of layers into chunks ----------===//
#include "loom/Plan/StageSplit.h"
#include "gtest/gtest.h"

using namespace loom;

namespace {

LayerEnds ends(unsigned Blocks) { return {Blocks + 2, 1, 1}; }

std::vector<unsigned> chunks(const ParallelPlan &P, LayerEnds E) {
  llvm::Expected<std::vector<unsigned>> C = getChunkLayers(P, E);
  if (!C) {
    ADD_FAILURE() << llvm::toString(C.takeError());
    return {};
  }
  return *C;
}

TEST(StageSplitTest, StagesAtVpp1) {
  ParallelPlan P;
  P.PP = 4;
  // 96 blocks + E + L: 24 blocks a stage, E on the first, L on the last.
  EXPECT_EQ((std::vector<unsigned>{25, 24, 24, 25}), chunks(P, ends(96)));
  // 10 blocks over 4: 2 each, the 2 extra on the last stages.
  EXPECT_EQ((std::vector<unsigned>{3, 2, 3, 4}), chunks(P, ends(10)));
}

TEST(StageSplitTest, InterleavedKeepsTheStageTotals) {
  // The case: 96 blocks, pp 4 x vpp 2. Stages 25:24:24:25 (the
  // summary's), each stage's 24 blocks 12 + 12 over its chunks, E opening
  // chunk 0 and L closing chunk 7 -- not 98 / 8 = 12 with the 2 left over
  // on the last chunks (stages 24:24:25:25).
  ParallelPlan P;
  P.PP = 4;
  P.VirtualStages = 2;
  std::vector<unsigned> C = chunks(P, ends(96));
  EXPECT_EQ((std::vector<unsigned>{13, 12, 12, 12, 12, 12, 12, 13}), C);
  EXPECT_EQ((std::vector<unsigned>{25, 24, 24, 25}), getStageTotals(C, 4));
  // Given stages: stage 0's 7 layers are E + 6 blocks, 3 + 3; stage 1's 5
  // are 4 blocks + L, 2 + 2.
  P.PP = 2;
  P.StageLayers = {7, 5};
  EXPECT_EQ((std::vector<unsigned>{4, 2, 3, 3}), chunks(P, ends(10)));
}

TEST(StageSplitTest, Errors) {
  ParallelPlan P;
  P.PP = 4;
  P.VirtualStages = 2;
  llvm::Expected<std::vector<unsigned>> C = getChunkLayers(P, {6, 0, 0});
  ASSERT_FALSE((bool)C);
  EXPECT_EQ("pp=4 x vpp=2 chunks exceed the model's 6 layers",
            llvm::toString(C.takeError()));
  P.VirtualStages = 1;
  P.StageLayers = {3, 3};
  C = getChunkLayers(P, {6, 0, 0});
  ASSERT_FALSE((bool)C);
  EXPECT_EQ("--plan stages=...: 2 stages with 6 layers in all, but pp=4 and "
            "the model has 6 layers",
            llvm::toString(C.takeError()));
}

} // namespace
