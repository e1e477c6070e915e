//===- CollectivesTest.cpp - Tests for the collective cost model ----------===//
//
// Every expected time is worked out by hand in the comment beside it, on the
// atlas900 levels: hccs 8 x 196 GB/s, 1.2 us, efficiency 0.8 (156.8e9 B/s
// effective); roce 16 x 25 GB/s (200 Gbps), 4 us, efficiency 0.65
// (16.25e9 B/s effective). With busEfficiency(S) = S / (S + 1 MiB), a ring
// term f * S / (BW * busEff(S)) is f * (S + 2^20) / BW.
//
//===----------------------------------------------------------------------===//

#include "loom/Cost/Collectives.h"

#include "TestTopology.h"
#include "gtest/gtest.h"

using namespace loom;

namespace {

constexpr double MiB = 1024.0 * 1024.0;
constexpr double GiB = 1024.0 * MiB;

GroupShape group(std::initializer_list<unsigned> PerLevel) {
  GroupShape G;
  G.PerLevel.assign(PerLevel.begin(), PerLevel.end());
  return G;
}

// Relative tolerance: the expected values are exact decimal expansions of
// the hand formulas, good to ~1e-15.
void expectClose(double Expected, double Actual) {
  EXPECT_NEAR(Expected, Actual, 1e-9 * Expected)
      << "expected " << Expected << ", got " << Actual;
}

TEST(CollectivesTest, Names) {
  EXPECT_EQ("AllReduce", getCollectiveName(CollectiveKind::AllReduce));
  EXPECT_EQ("AllGather", getCollectiveName(CollectiveKind::AllGather));
  EXPECT_EQ("ReduceScatter", getCollectiveName(CollectiveKind::ReduceScatter));
  EXPECT_EQ("AllToAll", getCollectiveName(CollectiveKind::AllToAll));
  EXPECT_EQ("Broadcast", getCollectiveName(CollectiveKind::Broadcast));
  EXPECT_EQ("SendRecv", getCollectiveName(CollectiveKind::SendRecv));
}

TEST(CollectivesTest, GroupShape) {
  EXPECT_EQ(8u, group({8, 1}).size());
  EXPECT_EQ(0, group({8, 1}).outermostLevel());
  EXPECT_EQ(128u, group({8, 16}).size());
  EXPECT_EQ(1, group({8, 16}).outermostLevel());
  EXPECT_EQ(1, group({1, 16}).outermostLevel());
  EXPECT_EQ(1u, group({1, 1}).size());
  EXPECT_EQ(-1, group({1, 1}).outermostLevel());
  EXPECT_EQ(-1, group({}).outermostLevel());
}

TEST(CollectivesTest, BusEfficiency) {
  TopologyLevel L = atlas900Topology().Topology[0];
  EXPECT_EQ(MiB, getHalfBandwidthBytes(L));
  // m = n_1/2 reaches half the bandwidth; 1 GiB reaches 1024/1025.
  EXPECT_DOUBLE_EQ(0.5, busEfficiency(MiB, L));
  EXPECT_DOUBLE_EQ(1024.0 / 1025.0, busEfficiency(GiB, L));
  // 64 KiB: 64 / (64 + 1024) = 1/17.
  EXPECT_DOUBLE_EQ(1.0 / 17.0, busEfficiency(64 * 1024, L));
  EXPECT_EQ(1.0, busEfficiency(0, L));
}

TEST(CollectivesTest, HalfBandwidthSizePerLevel) {
  HardwareModel HW = atlas900Topology();
  // The level's own n_1/2: 4 MiB reaches half the bandwidth at 4 MiB and a
  // fifth at 1 MiB; 0 turns the size curve off.
  HW.Topology[0].HalfBandwidthSize = Bytes(4 * MiB);
  EXPECT_EQ(4 * MiB, getHalfBandwidthBytes(HW.Topology[0]));
  EXPECT_DOUBLE_EQ(0.5, busEfficiency(4 * MiB, HW.Topology[0]));
  EXPECT_DOUBLE_EQ(0.2, busEfficiency(MiB, HW.Topology[0]));
  HW.Topology[0].HalfBandwidthSize = Bytes(0);
  EXPECT_EQ(1.0, busEfficiency(64 * 1024, HW.Topology[0]));
  // An all-reduce of 8 MiB on the 8 ranks of level 0 (atlas900Topology:
  // 196 GB/s at efficiency 0.8 = 156.8 GB/s, latency 1.2 us): each rank
  // sends 2 * 7/8 * 8 MiB = 14 MiB, 93.6 us, plus 2 * 7 latencies, 16.8
  // us, with the curve off; at n_1/2 = 8 MiB the bandwidth halves: 187.3
  // us + 16.8 us.
  double Off =
      collectiveTime(CollectiveKind::AllReduce, 8 * MiB, group({8, 1}), HW)
          .Seconds;
  HW.Topology[0].HalfBandwidthSize = Bytes(8 * MiB);
  double Half =
      collectiveTime(CollectiveKind::AllReduce, 8 * MiB, group({8, 1}), HW)
          .Seconds;
  double Bus = 14 * MiB / 156.8e9, Lat = 14 * 1.2e-6;
  EXPECT_NEAR(Bus + Lat, Off, 1e-12);
  EXPECT_NEAR(2 * Bus + Lat, Half, 1e-12);
}

TEST(CollectivesTest, GroupOfOneIsFree) {
  HardwareModel HW = atlas900Topology();
  CollectiveTime T =
      collectiveTime(CollectiveKind::AllReduce, GiB, group({1, 1}), HW);
  EXPECT_EQ(0.0, T.Seconds);
  ASSERT_EQ(2u, T.PerLevelSeconds.size());
  EXPECT_EQ(0.0, T.PerLevelSeconds[0]);
  EXPECT_EQ(0.0, T.PerLevelSeconds[1]);
  EXPECT_EQ(
      0.0,
      collectiveTime(CollectiveKind::SendRecv, GiB, group({1, 1}), HW).Seconds);
}

//===----------------------------------------------------------------------===//
// One level
//===----------------------------------------------------------------------===//

TEST(CollectivesTest, AllReduceOneLevel) {
  HardwareModel HW = atlas900Topology();
  // AllReduce 1 GiB over 8 ranks on hccs:
  //   2*7/8 * 2^30 / (156.8e9 * 1024/1025) + 14 * 1.2us
  //   = 1.75 * 1074790400 / 156.8e9 + 16.8e-6
  //   = 0.0119954285714 + 0.0000168 = 0.0120122285714 s
  CollectiveTime T =
      collectiveTime(CollectiveKind::AllReduce, GiB, group({8, 1}), HW);
  expectClose(0.012012228571428573, T.Seconds);
  ASSERT_EQ(2u, T.PerLevelSeconds.size());
  expectClose(0.012012228571428573, T.PerLevelSeconds[0]);
  EXPECT_EQ(0.0, T.PerLevelSeconds[1]);
}

TEST(CollectivesTest, SmallMessageIsLatencyAndOverheadBound) {
  HardwareModel HW = atlas900Topology();
  // AllReduce 64 KiB over 8: busEff = 1/17, so
  //   1.75 * (65536 + 1048576) / 156.8e9 + 16.8e-6
  //   = 1.75 * 1114112 / 156.8e9 + 16.8e-6
  //   = 12.434285714e-6 + 16.8e-6 = 29.234285714e-6 s
  // (without busEff the bandwidth term would be 0.73 us).
  expectClose(
      2.923428571428571e-05,
      collectiveTime(CollectiveKind::AllReduce, 64 * 1024, group({8, 1}), HW)
          .Seconds);
}

TEST(CollectivesTest, AllGatherAndReduceScatterOneLevel) {
  HardwareModel HW = atlas900Topology();
  // 256 MiB (AllGather: per-rank output; ReduceScatter: per-rank input)
  // over 8:
  //   7/8 * (268435456 + 1048576) / 156.8e9 + 7 * 1.2us
  //   = 0.875 * 269484032 / 156.8e9 + 8.4e-6
  //   = 0.00150381714286 + 0.0000084 = 0.00151221714286 s
  expectClose(0.001512217142857143, collectiveTime(CollectiveKind::AllGather,
                                                   256 * MiB, group({8, 1}), HW)
                                        .Seconds);
  expectClose(0.001512217142857143,
              collectiveTime(CollectiveKind::ReduceScatter, 256 * MiB,
                             group({8, 1}), HW)
                  .Seconds);
}

TEST(CollectivesTest, AllToAllOneLevel) {
  HardwareModel HW = atlas900Topology();
  // 64 MiB per rank over 8:
  //   7/8 * (67108864 + 1048576) / 156.8e9 + 7 * 1.2us
  //   = 0.875 * 68157440 / 156.8e9 + 8.4e-6
  //   = 0.00038034285714 + 0.0000084 = 0.00038874285714 s
  expectClose(0.0003887428571428571, collectiveTime(CollectiveKind::AllToAll,
                                                    64 * MiB, group({8, 1}), HW)
                                         .Seconds);
}

TEST(CollectivesTest, BroadcastOneLevel) {
  HardwareModel HW = atlas900Topology();
  // Pipelined chain, 64 MiB over 8:
  //   (67108864 + 1048576) / 156.8e9 + 7 * 1.2us
  //   = 0.000434677551 + 0.0000084 = 0.000443077551 s
  expectClose(0.0004430775510204081, collectiveTime(CollectiveKind::Broadcast,
                                                    64 * MiB, group({8, 1}), HW)
                                         .Seconds);
}

TEST(CollectivesTest, SendRecvUsesTheOutermostLevelCrossed) {
  HardwareModel HW = atlas900Topology();
  // Inside the server, 16 MiB: (16777216 + 1048576) / 156.8e9 + 1.2us
  //   = 0.000113684898 + 0.0000012 = 0.000114884898 s
  CollectiveTime In =
      collectiveTime(CollectiveKind::SendRecv, 16 * MiB, group({2, 1}), HW);
  expectClose(0.00011488489795918367, In.Seconds);
  expectClose(0.00011488489795918367, In.PerLevelSeconds[0]);
  // Across servers: (16777216 + 1048576) / 16.25e9 + 4us
  //   = 0.00109697181538 + 0.000004 = 0.00110097181538 s
  CollectiveTime Out =
      collectiveTime(CollectiveKind::SendRecv, 16 * MiB, group({1, 2}), HW);
  expectClose(0.0011009718153846156, Out.Seconds);
  EXPECT_EQ(0.0, Out.PerLevelSeconds[0]);
  expectClose(0.0011009718153846156, Out.PerLevelSeconds[1]);
}

TEST(CollectivesTest, LevelsOfSizeOneAreSkipped) {
  HardwareModel HW = atlas900Topology();
  // DP of 16, one rank per server, 1 GiB: a plain ring on roce,
  //   2*15/16 * (2^30 + 2^20) / 16.25e9 + 30 * 4us
  //   = 1.875 * 1074790400 / 16.25e9 + 120e-6
  //   = 0.124014276923 + 0.00012 = 0.124134276923 s
  CollectiveTime T =
      collectiveTime(CollectiveKind::AllReduce, GiB, group({1, 16}), HW);
  expectClose(0.12413427692307691, T.Seconds);
  EXPECT_EQ(0.0, T.PerLevelSeconds[0]);
}

TEST(CollectivesTest, OversubscriptionDividesBandwidth) {
  HardwareModel HW = atlas900Topology(/*RoceOversubscription=*/2.0);
  // As above at 16.25e9 / 2 = 8.125e9 B/s:
  //   1.875 * 1074790400 / 8.125e9 + 120e-6
  //   = 0.248028553846 + 0.00012 = 0.248148553846 s
  expectClose(0.24814855384615384,
              collectiveTime(CollectiveKind::AllReduce, GiB, group({1, 16}), HW)
                  .Seconds);
}

//===----------------------------------------------------------------------===//
// Two levels (hierarchical)
//===----------------------------------------------------------------------===//

TEST(CollectivesTest, AllReduceHierarchical) {
  HardwareModel HW = atlas900Topology();
  // 1 GiB over {8, 16}: ReduceScatter + AllGather on hccs over the whole
  // 1 GiB (= a ring AllReduce of it), AllReduce across roce of 1 GiB / 8.
  //   hccs: as AllReduceOneLevel = 0.0120122285714 s
  //   roce: 2*15/16 * (134217728 + 1048576) / 16.25e9 + 30 * 4us
  //         = 1.875 * 135266304 / 16.25e9 + 120e-6
  //         = 0.0156076504615 + 0.00012 = 0.0157276504615 s
  //   total 0.0277398790330 s
  CollectiveTime T =
      collectiveTime(CollectiveKind::AllReduce, GiB, group({8, 16}), HW);
  expectClose(0.012012228571428573, T.PerLevelSeconds[0]);
  expectClose(0.01572765046153846, T.PerLevelSeconds[1]);
  expectClose(0.027739879032967034, T.Seconds);
  // The hierarchy beats a flat ring over roce alone by ~4.5x here.
  EXPECT_LT(T.Seconds, 0.12413427692307691);
}

TEST(CollectivesTest, AllGatherAndReduceScatterHierarchical) {
  HardwareModel HW = atlas900Topology();
  // 1 GiB (AllGather output / ReduceScatter input per rank) over {8, 16}.
  //   hccs: 7/8 * (2^30 + 2^20) / 156.8e9 + 7 * 1.2us
  //         = 0.875 * 1074790400 / 156.8e9 + 8.4e-6
  //         = 0.00599771428571 + 0.0000084 = 0.00600611428571 s
  //   roce (buffer 1 GiB / 8 = 128 MiB):
  //         15/16 * (134217728 + 1048576) / 16.25e9 + 15 * 4us
  //         = 0.9375 * 135266304 / 16.25e9 + 60e-6
  //         = 0.00780382523077 + 0.00006 = 0.00786382523077 s
  //   total 0.0138699395165 s: half of the AllReduce, as RS + AG = AR.
  for (CollectiveKind K :
       {CollectiveKind::AllGather, CollectiveKind::ReduceScatter}) {
    CollectiveTime T = collectiveTime(K, GiB, group({8, 16}), HW);
    expectClose(0.006006114285714286, T.PerLevelSeconds[0]);
    expectClose(0.00786382523076923, T.PerLevelSeconds[1]);
    expectClose(0.013869939516483517, T.Seconds);
  }
}

TEST(CollectivesTest, AllToAllHierarchical) {
  HardwareModel HW = atlas900Topology();
  // 256 MiB per rank over {8, 16}, 2D: the buffer stays 256 MiB per level.
  //   hccs: 7/8 * (268435456 + 1048576) / 156.8e9 + 7 * 1.2us
  //         = 0.00151221714286 s
  //   roce: 15/16 * 269484032 / 16.25e9 + 15 * 4us
  //         = 0.0155471556923 + 0.00006 = 0.0156071556923 s
  //         (= S * (1 - 1/16) leaves the server: the bytes bound for the
  //         other 15 servers)
  //   total 0.0171193728352 s
  CollectiveTime T =
      collectiveTime(CollectiveKind::AllToAll, 256 * MiB, group({8, 16}), HW);
  expectClose(0.001512217142857143, T.PerLevelSeconds[0]);
  expectClose(0.015607155692307691, T.PerLevelSeconds[1]);
  expectClose(0.017119372835164834, T.Seconds);
}

TEST(CollectivesTest, BroadcastHierarchicalIsPipelined) {
  HardwareModel HW = atlas900Topology();
  // 256 MiB over {8, 16}: the slowest level sets the rate, every level
  // adds its chain latency.
  //   hccs bandwidth term: 269484032 / 156.8e9 = 0.00171864816327 s
  //   roce bandwidth term: 269484032 / 16.25e9 = 0.0165836327385 s
  //   total = 0.0165836327385 + 7 * 1.2us + 15 * 4us
  //         = 0.0165836327385 + 0.0000684 = 0.0166520327385 s
  //   per level (busy time, overlapping): hccs 0.00172704816327,
  //   roce 0.0166436327385
  CollectiveTime T =
      collectiveTime(CollectiveKind::Broadcast, 256 * MiB, group({8, 16}), HW);
  expectClose(0.0017270481632653061, T.PerLevelSeconds[0]);
  expectClose(0.01664363273846154, T.PerLevelSeconds[1]);
  expectClose(0.01665203273846154, T.Seconds);
}

//===----------------------------------------------------------------------===//
// Contention
//===----------------------------------------------------------------------===//

TEST(CollectivesTest, ExplicitShareSlowsTheBandwidthTerm) {
  HardwareModel HW = atlas900Topology();
  // Half of hccs: 1.75 * 1074790400 / (156.8e9 * 0.5) + 16.8e-6
  //   = 0.0239908571429 + 0.0000168 = 0.0240076571429 s
  double Share[] = {0.5, 1.0};
  expectClose(
      0.024007657142857144,
      collectiveTime(CollectiveKind::AllReduce, GiB, group({8, 1}), HW, Share)
          .Seconds);
}

TEST(CollectivesTest, LevelBytes) {
  // AllReduce 1 GiB over {8, 16}: hccs 2*7/8 * 2^30, roce 2*15/16 * 2^27.
  auto AR =
      collectiveLevelBytes(CollectiveKind::AllReduce, GiB, group({8, 16}));
  ASSERT_EQ(2u, AR.size());
  EXPECT_DOUBLE_EQ(1.75 * GiB, AR[0]);
  EXPECT_DOUBLE_EQ(1.875 * GiB / 8, AR[1]);
  // AllToAll 1 GiB: 7/8 * 2^30 inside, 15/16 * 2^30 across.
  auto A2A =
      collectiveLevelBytes(CollectiveKind::AllToAll, GiB, group({8, 16}));
  EXPECT_DOUBLE_EQ(0.875 * GiB, A2A[0]);
  EXPECT_DOUBLE_EQ(0.9375 * GiB, A2A[1]);
  // SendRecv across servers: all of it on roce.
  auto SR = collectiveLevelBytes(CollectiveKind::SendRecv, GiB, group({1, 2}));
  EXPECT_EQ(0.0, SR[0]);
  EXPECT_DOUBLE_EQ(GiB, SR[1]);
}

TEST(CollectivesTest, DataParallelAndTensorParallelShareHccs) {
  HardwareModel HW = atlas900Topology();
  // DP gradient AllReduce of 1 GiB over {8, 16} while a TP AllReduce of
  // 256 MiB runs over {8, 1}. Bytes per rank on hccs: DP 1.75 * 2^30, TP
  // 1.75 * 2^28, so DP gets 4/5 of hccs and TP 1/5; only DP uses roce, so
  // its share there is 1 (TP's too: it does not use roce).
  GroupShape Groups[] = {group({8, 16}), group({8, 1})};
  double Bytes[] = {GiB, 256 * MiB};
  auto Shares = shareBandwidth(Groups, Bytes, HW);
  ASSERT_EQ(2u, Shares.size());
  ASSERT_EQ(2u, Shares[0].size());
  EXPECT_DOUBLE_EQ(0.8, Shares[0][0]);
  EXPECT_DOUBLE_EQ(1.0, Shares[0][1]);
  EXPECT_DOUBLE_EQ(0.2, Shares[1][0]);
  EXPECT_DOUBLE_EQ(1.0, Shares[1][1]);

  // DP: hccs 1.75 * 1074790400 / (156.8e9 * 0.8) + 16.8e-6
  //       = 0.0149942857143 + 0.0000168 = 0.0150110857143 s
  //     roce unchanged 0.0157276504615 s; total 0.0307387361758 s
  CollectiveTime DP =
      collectiveTime(CollectiveKind::AllReduce, GiB, Groups[0], HW, Shares[0]);
  expectClose(0.015011085714285714, DP.PerLevelSeconds[0]);
  expectClose(0.030738736175824174, DP.Seconds);
  // TP: 1.75 * (268435456 + 1048576) / (156.8e9 * 0.2) + 16.8e-6
  //       = 0.0150382142857 + 0.0000168 = 0.0150549714286 s
  // Both finish their hccs bytes together (bandwidth terms 14.99 ms and
  // 15.04 ms; they differ only through busEff of the two buffer sizes).
  CollectiveTime TP = collectiveTime(CollectiveKind::AllReduce, 256 * MiB,
                                     Groups[1], HW, Shares[1]);
  expectClose(0.015054971428571429, TP.Seconds);
}

TEST(CollectivesTest, SharesFollowBytesOfEachKind) {
  HardwareModel HW = atlas900Topology();
  // The same 1 GiB over {8, 1}: an AllReduce sends 2*7/8 S, an AllGather
  // 7/8 S, so the AllReduce gets 2/3 of hccs and the AllGather 1/3.
  CollectiveKind Kinds[] = {CollectiveKind::AllReduce,
                            CollectiveKind::AllGather};
  GroupShape Groups[] = {group({8, 1}), group({8, 1})};
  double Bytes[] = {GiB, GiB};
  auto Shares = shareBandwidth(Kinds, Groups, Bytes, HW);
  EXPECT_DOUBLE_EQ(2.0 / 3.0, Shares[0][0]);
  EXPECT_DOUBLE_EQ(1.0 / 3.0, Shares[1][0]);
  EXPECT_EQ(1.0, Shares[0][1]);
  EXPECT_EQ(1.0, Shares[1][1]);
  // Alone, a collective keeps the whole level.
  auto Alone = shareBandwidth(llvm::ArrayRef<GroupShape>(Groups[0]),
                              llvm::ArrayRef<double>(Bytes[0]), HW);
  EXPECT_EQ(1.0, Alone[0][0]);
}

} // namespace

// A full-mesh level (topology[].full_mesh): the 196 GB/s of hccs is the sum
// of 7 point-to-point links, so a group of N reaches (N - 1)/7 of it.
TEST(CollectivesTest, FullMeshGroupReachesOnlyItsPeersLinks) {
  HardwareModel HW = atlas900Topology();
  HardwareModel Mesh = atlas900Topology();
  Mesh.Topology[0].FullMesh = true;
  // AllGather 1 GiB over 4 of the 8: 3 links, 156.8e9 * 3/7 = 67.2e9 B/s:
  //   3/4 * (2^30 + 2^20) / 67.2e9 + 3 * 1.2us
  //   = 806092800 / 67.2e9 + 3.6e-6 = 0.011995428571 + 0.0000036
  //   = 0.011999028571 s
  expectClose(0.011999028571428571, collectiveTime(CollectiveKind::AllGather,
                                                   GiB, group({4, 1}), Mesh)
                                        .Seconds);
  // Switched: 806092800 / 156.8e9 + 3.6e-6 = 0.005144497959 s.
  expectClose(0.005144497959183674,
              collectiveTime(CollectiveKind::AllGather, GiB, group({4, 1}), HW)
                  .Seconds);
  // All 8 use all 7 links: the AllReduceOneLevel figure, 0.012012228571 s.
  expectClose(0.012012228571428573, collectiveTime(CollectiveKind::AllReduce,
                                                   GiB, group({8, 1}), Mesh)
                                        .Seconds);
  // A send inside the server: one link, 156.8e9 / 7 = 22.4e9 B/s:
  //   (2^30 + 2^20) / 22.4e9 + 1.2us = 0.047981714286 + 0.0000012
  //   = 0.047982914286 s
  expectClose(0.04798291428571429,
              collectiveTime(CollectiveKind::SendRecv, GiB, group({2, 1}), Mesh)
                  .Seconds);
  // Across servers roce is switched: the send is what it was.
  expectClose(
      0.0011009718153846156,
      collectiveTime(CollectiveKind::SendRecv, 16 * MiB, group({1, 2}), Mesh)
          .Seconds);
}
