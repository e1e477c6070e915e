//===- PricedCollectivesTest.cpp - Priced against emitted collectives -----===//
//
// comparePricedCollectives (issue 31's property) on a one-device program
// whose role graph holds one tp all-reduce: agreement, the message naming
// what only one side has, groups compared apart (a group of one rank
// moves nothing), and a value whose rows are a data-dependent
// count (an index-routed expert's tokens), weighed at its expected size
// (ShardingResult::ExpectedShapes) as the plan prices it.
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/PricedCollectives.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Shard/Schedule.h"
#include "loom/Shard/Sharding.h"
#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

/// A program of one pipeline device whose role graph all-reduces x over tp;
/// x is f32[\p Rows, 8].
ShardedProgram makeProgram(StringRef Rows) {
  std::string Text = "<ir_version: 8, opset_import: [\"\" : 17, \"hccl\" : "
                     "1]>\nrole (float[" +
                     Rows.str() + ", 8] x) => (float[" + Rows.str() +
                     ", 8] y) {\n"
                     "  y = hccl.HcomAllReduce <group = \"tp\", reduction = "
                     "\"sum\"> (x)\n}\n";
  Expected<std::unique_ptr<Model>> M = importModelFromText(Text, "role");
  EXPECT_TRUE(!!M) << (M ? "" : toString(M.takeError()));
  ShardedProgram SP;
  SP.Sharding.Plan.PP = 1;
  SP.Sharding.Plan.TP = 2;
  SP.Sharding.ChunkLayers = {1};
  RoleGraph RG;
  RG.FileName = "pp0_tp0.onnx";
  RG.M = std::move(*M);
  SP.Roles.push_back(std::move(RG));
  return SP;
}

/// SP against one all-reduce of x priced at \p Priced bytes over \p Group.
std::vector<std::string> compare(const ShardedProgram &SP, double Priced,
                                 StringRef Group = "tp") {
  return comparePricedCollectives(SP, [&](unsigned) {
    return std::vector<PricedCollective>{
        {CollectiveKind::AllReduce, Priced, "x", Group.str()}};
  });
}

TEST(PricedCollectives, AgreeOnKindBytesAndCount) {
  ShardedProgram SP = makeProgram("16");
  // 16 x 8 floats = 512 B.
  EXPECT_TRUE(compare(SP, 512).empty());
  std::vector<std::string> P = compare(SP, 256);
  ASSERT_EQ(P.size(), 1u);
  EXPECT_EQ(P[0], "pipeline device 0 (pp0_tp0.onnx): priced, not emitted: "
                  "1 x tp allreduce of 256 B (on 'x'); emitted, not priced: "
                  "1 x tp allreduce of 512 B (on 'x')");
}

TEST(PricedCollectives, GroupsAreComparedApart) {
  // The same all-reduce priced over ep is not the emitted tp one.
  std::vector<std::string> P = compare(makeProgram("16"), 512, "ep");
  ASSERT_EQ(P.size(), 1u);
  EXPECT_EQ(P[0], "pipeline device 0 (pp0_tp0.onnx): priced, not emitted: "
                  "1 x ep allreduce of 512 B (on 'x'); emitted, not priced: "
                  "1 x tp allreduce of 512 B (on 'x')");
}

TEST(PricedCollectives, GroupsOfOneRankMoveNothing) {
  // At tp = 1 the all-reduce is over one rank: nothing on the wire, and
  // nothing priced.
  ShardedProgram SP = makeProgram("16");
  SP.Sharding.Plan.TP = 1;
  EXPECT_TRUE(comparePricedCollectives(SP, [](unsigned) {
                return std::vector<PricedCollective>();
              }).empty());
}

TEST(PricedCollectives, DataDependentRowsAtTheirExpectedCount) {
  ShardedProgram SP = makeProgram("n");
  const Node &AR = *SP.Roles[0].M->getGraph().getNodes().front();
  // Without an expected size the bytes are unknown until the step runs.
  EXPECT_EQ(getHcomWireBytes(AR, DataType::Undefined), 0.0);
  EXPECT_EQ(compare(SP, 512).size(), 1u);
  // At the expected 16 rows: 512 B, as priced; in a bf16 recipe 256 B.
  SP.Sharding.ExpectedShapes["x"] = {16, 8};
  EXPECT_EQ(
      getHcomWireBytes(AR, DataType::Undefined, SP.Sharding.ExpectedShapes),
      512.0);
  EXPECT_EQ(
      getHcomWireBytes(AR, DataType::BFloat16, SP.Sharding.ExpectedShapes),
      256.0);
  EXPECT_TRUE(compare(SP, 512).empty());
}

} // namespace
