//===- EmbeddingTest.cpp - Sharded embedding tables: choice and cost ------===//
//
// planEmbeddings on the Atlas 800T A2 file (HBM 1.6 TB/s, host over PCIe
// 31.5 GB/s with 2 us latency, SSD 3.5 GB/s with 80 us): kinds, tiers,
// owners and the lookup terms, worked out by hand in the comments.
//
//===----------------------------------------------------------------------===//

#include "loom/Planner/Embedding.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/ParallelPlan.h"

#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

const HardwareModel &hw() {
  static HardwareModel HW = [] {
    Expected<HardwareModel> H = loadHardwareModel(
        std::string(LOOM_SOURCE_DIR) + "/examples/hw/atlas800t-a2.yaml");
    EXPECT_TRUE((bool)H);
    return std::move(*H);
  }();
  return HW;
}

EmbeddingTable table(const char *Name, int64_t Rows, int64_t Dim,
                     double Lookups) {
  EmbeddingTable T;
  T.Name = Name;
  T.Rows = Rows;
  T.Dim = Dim;
  T.ElemBytes = 4;
  T.LookupsPerSample = Lookups;
  return T;
}

EmbeddingInputs inputs(unsigned Group, double HBM, double Host, double SSD) {
  EmbeddingInputs In;
  In.Train = false;
  In.Group = Group;
  In.Shape.PerLevel = {Group};
  In.MicroBatch = 256;
  In.HBMFree = HBM;
  In.HostFree = Host;
  In.SSDFree = SSD;
  return In;
}

TEST(EmbeddingTest, OneRankRowWiseInHBM) {
  // One rank: no exchange; 256 samples x 4 ids = 1024 rows of 128 x 4 B =
  // 512 B (8 granules of 64 B): 1024 x 512 B / 1.6 TB/s = 327.68 ns.
  EmbeddingCost E = planEmbeddings({table("t", 1000000, 128, 4)},
                                   inputs(1, 1e12, 1e12, 1e12), hw());
  ASSERT_EQ(1u, E.Tables.size());
  const EmbeddingShard &S = E.Tables[0];
  EXPECT_TRUE(E.Fits);
  EXPECT_EQ(EmbShardKind::Row, S.Kind);
  EXPECT_EQ(MemoryTier::HBM, S.Tier);
  EXPECT_DOUBLE_EQ(1024, S.Lookups);
  EXPECT_NEAR(327.68e-9, S.LookupS, 1e-15);
  EXPECT_EQ(0, S.ExchangeFwdS);
  // 10^6 x 128 x 4 B = 512 MB in HBM.
  EXPECT_DOUBLE_EQ(512e6, E.HBMBytes);
  EXPECT_NEAR(327.68e-9, E.ForwardS, 1e-15);
}

TEST(EmbeddingTest, TierByCapacity) {
  // 512 MB does not fit 100 MB of HBM: host DRAM, read over PCIe:
  // 2 us + 1024 x 512 B / 31.5 GB/s = 2 us + 16.644 us.
  EmbeddingCost E = planEmbeddings({table("t", 1000000, 128, 4)},
                                   inputs(1, 100e6, 1e12, 1e12), hw());
  EXPECT_EQ(MemoryTier::Host, E.Tables[0].Tier);
  EXPECT_NEAR(2e-6 + 1024 * 512 / 31.5e9, E.Tables[0].LookupS, 1e-12);
  EXPECT_DOUBLE_EQ(512e6, E.HostBytes);
  // Nor the host: the SSD, in 4 KiB blocks: 80 us + 1024 x 4096 B /
  // 3.5 GB/s = 80 us + 1.198 ms.
  E = planEmbeddings({table("t", 1000000, 128, 4)},
                     inputs(1, 100e6, 100e6, 1e12), hw());
  EXPECT_EQ(MemoryTier::SSD, E.Tables[0].Tier);
  EXPECT_NEAR(80e-6 + 1024 * 4096 / 3.5e9, E.Tables[0].LookupS, 1e-12);
  // Nowhere: the plan does not fit, and says which table.
  E = planEmbeddings({table("t", 1000000, 128, 4)},
                     inputs(1, 100e6, 100e6, 100e6), hw());
  EXPECT_FALSE(E.Fits);
  EXPECT_NE(std::string::npos, E.Why.find("table 't'"));
  EXPECT_NE(std::string::npos, E.Why.find("fits no tier"));
}

TEST(EmbeddingTest, RowWiseHalvesShardsAndLookups) {
  // Two ranks, row-wise: 500000 rows each (256 MB), each looks up its half
  // of the group's 2 x 1024 ids = 1024 rows.
  EmbeddingInputs In = inputs(2, 1e12, 1e12, 1e12);
  In.Mode = EmbeddingMode::Row;
  EmbeddingCost E = planEmbeddings({table("t", 1000000, 128, 4)}, In, hw());
  const EmbeddingShard &S = E.Tables[0];
  EXPECT_EQ(2u, S.Shards);
  EXPECT_EQ(500000, S.ShardRows);
  EXPECT_DOUBLE_EQ(256e6, E.HBMBytes);
  EXPECT_DOUBLE_EQ(1024, S.Lookups);
  // Ids all-gathered: 2 x 1024 x 8 B per rank; rows reduce-scattered:
  // 2 x 1024 x 512 B per rank.
  EXPECT_DOUBLE_EQ(16384, S.IdBytes);
  EXPECT_DOUBLE_EQ(1048576, S.EmbBytes);
  EXPECT_GT(S.ExchangeFwdS, 0);
}

TEST(EmbeddingTest, TableWiseOwnersAndColumnDivisibility) {
  // Table-wise: two tables go to the two ranks, each owner looking up the
  // group's 2048 ids.
  EmbeddingInputs In = inputs(2, 1e12, 1e12, 1e12);
  In.Mode = EmbeddingMode::Table;
  EmbeddingCost E = planEmbeddings(
      {table("a", 1000, 16, 1), table("b", 1000, 16, 1)}, In, hw());
  ASSERT_EQ(2u, E.Tables.size());
  EXPECT_EQ(0u, E.Tables[0].Owner);
  EXPECT_EQ(1u, E.Tables[1].Owner);
  EXPECT_DOUBLE_EQ(512, E.Tables[0].Lookups);
  // Column-wise needs the group to divide the dim: 3 does not divide 16.
  In = inputs(3, 1e12, 1e12, 1e12);
  In.Mode = EmbeddingMode::Col;
  E = planEmbeddings({table("a", 1000, 16, 1)}, In, hw());
  EXPECT_FALSE(E.Fits);
  EXPECT_NE(std::string::npos, E.Why.find("not divisible by 3"));
}

TEST(EmbeddingTest, PlanKey) {
  Expected<PlanSpec> S = parsePlanSpec("dp=4,emb=col");
  ASSERT_TRUE((bool)S);
  EXPECT_EQ(EmbeddingMode::Col, *S->Emb);
  Expected<ParallelPlan> P = completePlan(*S, 4, 8);
  ASSERT_TRUE((bool)P);
  EXPECT_NE(std::string::npos, P->str().find(",emb=col"));
  Expected<PlanSpec> Bad = parsePlanSpec("emb=diag");
  ASSERT_FALSE((bool)Bad);
  EXPECT_EQ("--plan: emb=diag: expected auto, table, row or col",
            toString(Bad.takeError()));
}

} // namespace
