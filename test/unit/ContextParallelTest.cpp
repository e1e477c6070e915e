//===- ContextParallelTest.cpp - Tests for cp's per-layer cost ------------===//
//
// Every expected time is worked out by hand beside it, on two levels:
// hccs 8 x 196 GB/s, 1.2 us, efficiency 0.8 (156.8e9 B/s effective), and
// roce 16 x 25 GB/s, 4 us, efficiency 0.65 (16.25e9 B/s effective). With
// the collective model's bus efficiency S / (S + 1 MiB), a send of S bytes
// takes (S + 2^20) / BW + latency, and an all-to-all of S bytes per rank
// over n ranks on one level (n - 1) / n * (S + 2^20) / BW + (n - 1) *
// latency (cost_models/collectives/Collectives.cpp).
//
//===----------------------------------------------------------------------===//

#include "loom/Planner/ContextParallel.h"
#include "loom/Plan/CPEmission.h"

#include "TestTopology.h"
#include "gtest/gtest.h"

using namespace loom;

namespace {

constexpr double MiB = 1024.0 * 1024.0;

ParallelPlan cpPlan(CPAlgo A, unsigned CP, unsigned TP = 1, unsigned U = 1) {
  ParallelPlan P;
  P.CPA = A;
  P.CP = CP;
  P.TP = TP;
  P.CPUlysses = U;
  return P;
}

TEST(ContextParallel, RingInsideTheServer) {
  HardwareModel HW = atlas900Topology();
  CPLayerInputs In;
  In.KVBytes = 1 * MiB;
  In.AttnFwdS = 10e-6;
  In.AttnBwdS = 60e-6;
  GroupShape G{{2, 1}};
  CPLayerCost C =
      costContextParallelLayer(cpPlan(CPAlgo::Ring, 2), In, {}, G, HW);
  // One step: send 1 MiB, (2 MiB) / 156.8e9 + 1.2 us = 13.3747 + 1.2 =
  // 14.5747 us, beside the held chunk's attention, 10 / 2 = 5 us: 9.5747
  // us exposed.
  EXPECT_NEAR(C.FwdS, 14.5747e-6, 1e-10);
  EXPECT_NEAR(C.FwdExposedS, 9.5747e-6, 1e-10);
  // Backward: K/V and their gradients, 2 MiB: (3 MiB) / 156.8e9 + 1.2 us
  // = 20.0620 + 1.2 = 21.2620 us, beside 60 / 2 = 30 us of attention
  // backward: hidden.
  EXPECT_NEAR(C.BwdS, 21.2620e-6, 1e-10);
  EXPECT_EQ(C.BwdExposedS, 0.0);
}

TEST(ContextParallel, RingAcrossServers) {
  HardwareModel HW = atlas900Topology();
  CPLayerInputs In;
  In.KVBytes = 1 * MiB;
  In.Train = false;
  // cp = 4, one rank per server: 3 steps over roce, each (2 MiB) /
  // 16.25e9 + 4 us = 129.0555 + 4 = 133.0555 us; no attention to hide
  // behind: 399.1665 us, all exposed; no backward in inference.
  GroupShape G{{1, 4}};
  CPLayerCost C =
      costContextParallelLayer(cpPlan(CPAlgo::Ring, 4), In, {}, G, HW);
  EXPECT_NEAR(C.FwdS, 399.1665e-6, 1e-9);
  EXPECT_NEAR(C.FwdExposedS, 399.1665e-6, 1e-9);
  EXPECT_EQ(C.BwdS, 0.0);
}

TEST(ContextParallel, AllToAllOverHeads) {
  HardwareModel HW = atlas900Topology();
  CPLayerInputs In;
  In.KVBytes = 1 * MiB;
  In.QOBytes = 1 * MiB;
  In.AttnFwdS = 1; // a2a hides nothing
  In.AttnBwdS = 1;
  GroupShape G{{2, 1}};
  CPLayerCost C =
      costContextParallelLayer(cpPlan(CPAlgo::A2A, 2), In, G, {}, HW);
  // Q and O: all-to-alls of 1 MiB over 2 ranks, each 1/2 * (1 MiB + 1 MiB)
  // / 156.8e9 + 1.2 us = 6.6874 + 1.2 = 7.8874 us; K and V (1 MiB
  // together): one each of 0.5 MiB, 1/2 * (0.5 MiB + 1 MiB) / 156.8e9 +
  // 1.2 us = 5.0155 + 1.2 = 6.2155 us. 2 x 7.8874 + 2 x 6.2155 = 28.2057
  // us, all exposed; the backward the same again.
  EXPECT_NEAR(C.FwdS, 28.2057e-6, 1e-10);
  EXPECT_NEAR(C.FwdExposedS, C.FwdS, 1e-15);
  EXPECT_NEAR(C.BwdExposedS, 28.2057e-6, 1e-10);
}

TEST(ContextParallel, HybridAllToAllInsideTheServerRingAcross) {
  // cp 4 as 2 x 2: the all-to-alls over the 2 consecutive cp ranks in one
  // server, the ring over the 2 servers.
  HardwareModel HW = atlas900Topology();
  CPLayerInputs In;
  In.KVBytes = 1 * MiB;
  In.QOBytes = 1 * MiB;
  In.AttnFwdS = 10e-6;
  In.AttnBwdS = 60e-6;
  GroupShape UG{{2, 1}}, RG{{1, 2}};
  CPLayerCost C =
      costContextParallelLayer(cpPlan(CPAlgo::Hybrid, 4, 1, 2), In, UG, RG, HW);
  // The all-to-alls as in AllToAllOverHeads: 28.2057 us each way, exposed.
  // The ring: cp / u = 2 ranks, one step over roce: the rank's K/V block
  // (1 MiB, as before the all-to-alls), (2 MiB) / 16.25e9 + 4 us =
  // 133.0555 us beside 10 / 2 = 5 us of attention: 128.0555 us exposed.
  // Forward 28.2057 + 133.0555 = 161.2612 us, 156.2612 us exposed.
  EXPECT_NEAR(C.FwdS, 161.2612e-6, 1e-9);
  EXPECT_NEAR(C.FwdExposedS, 156.2612e-6, 1e-9);
  // Backward: the ring sends K/V and their gradients, (3 MiB) / 16.25e9
  // + 4 us = 197.5833 us beside 60 / 2 = 30 us: 167.5833 exposed. With
  // the all-to-alls: 225.7890 us, 195.7890 us exposed.
  EXPECT_NEAR(C.BwdS, 225.7890e-6, 1e-9);
  EXPECT_NEAR(C.BwdExposedS, 195.7890e-6, 1e-9);
}

TEST(ContextParallel, Legality) {
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::Ring, 1, 8), 0, 0, 0), "");
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::Ring, 2, 8), 4096, 0, 0), "");
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::Ring, 2, 1), 0, 32, 32),
            "cp=2 splits the sequence, and no sequence dim is bound (--seq)");
  // 2 * cp = 8 chunks do not divide 4100.
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::Ring, 4, 1), 4100, 32, 32),
            "cp=4 with cp_algo=ring: sequence 4100 is not divisible by 8 "
            "(2*cp chunks balance the causal ring)");
  // a2a: 64 heads, 8 K/V heads (LLaMA-2-70B). tp 8 x cp 2 = 16 does not
  // divide the 8 K/V heads: they are repeated to the 64 query heads before
  // the all-to-all (legal; getUlyssesKVBytes prices it). tp 16 x cp 2 = 32
  // divides the query heads but tp 16 not the K/V heads; tp 8 x cp 16 =
  // 128 not the query heads.
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::A2A, 2, 8), 4096, 64, 8), "");
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::A2A, 2, 4), 4096, 64, 8), "");
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::A2A, 2, 16), 4096, 64, 8),
            "cp=2 with cp_algo=a2a: 64 heads are not divisible by tp*cp = 32 "
            "or 8 K/V heads by tp = 16");
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::A2A, 16, 8), 4096, 64, 8),
            "cp=16 with cp_algo=a2a: 64 heads are not divisible by tp*cp = "
            "128");
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::A2A, 2, 1), 4096, 0, 0),
            "cp=2 with cp_algo=a2a splits the heads, and the model's "
            "attention heads were not found");
  // hybrid: the ring's 2 * cp chunks, the all-to-all's heads by tp * u
  // (64 heads, tp 8, u 4: 32 divides them; u 16 of cp 32: 128 does not).
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::Hybrid, 8, 8, 4), 4096, 64, 8),
            "");
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::Hybrid, 8, 1, 2), 4104, 32, 32),
            "cp=8 with cp_algo=hybrid,cp_ulysses=2: sequence 4104 is not "
            "divisible by 16 (2*cp chunks balance the causal ring)");
  EXPECT_EQ(
      getCPIllegalReason(cpPlan(CPAlgo::Hybrid, 32, 8, 16), 4096, 64, 8),
      "cp=32 with cp_algo=hybrid,cp_ulysses=16: 64 heads are not divisible "
      "by tp*cp_ulysses = 128");
  EXPECT_EQ(getCPIllegalReason(cpPlan(CPAlgo::Hybrid, 4, 1, 4), 4096, 32, 32),
            "cp=4 with cp_algo=hybrid,cp_ulysses=4: cp_ulysses must divide "
            "cp and lie strictly between 1 and cp");
}

TEST(ContextParallel, UlyssesMovesRepeatedKVWhereTPxCPDoesNotDivide) {
  // 1 MiB of K and V before the repeat, 64 query and 8 K/V heads.
  // tp 4 x cp 2 = 8 divides the 8 K/V heads: they move as they are.
  EXPECT_EQ(getUlyssesKVBytes(2, 4, 64, 8, 1 * MiB), 1 * MiB);
  // tp 8 x cp 2 = 16 does not: repeated to the query heads, 64 / 8 = 8x.
  EXPECT_EQ(getUlyssesKVBytes(2, 8, 64, 8, 1 * MiB), 8 * MiB);
  // Multi-head attention: nothing to repeat.
  EXPECT_EQ(getUlyssesKVBytes(4, 8, 16, 16, 1 * MiB), 1 * MiB);
}

} // namespace

// What the role graphs carry (loom/Plan/CPEmission.h): the ring and the
// all-to-all alone and beside tp (sp on or off), not hybrid, not cp beside
// tp with ep or sharded tables; and the --plan keys that, pinned, keep
// such a plan in the search.
TEST(ContextParallel, EmitGaps) {
  EXPECT_FALSE(getCPEmitGap(cpPlan(CPAlgo::Ring, 4), false));
  EXPECT_FALSE(getCPEmitGap(cpPlan(CPAlgo::A2A, 4, 2), false));
  for (CPAlgo A : {CPAlgo::Ring, CPAlgo::A2A}) {
    ParallelPlan SP = cpPlan(A, 2, 2);
    SP.SP = true;
    EXPECT_FALSE(getCPEmitGap(SP, false));
  }
  CPEmitGap H = getCPEmitGap(cpPlan(CPAlgo::Hybrid, 4, 1, 2), false);
  ASSERT_TRUE(H);
  EXPECT_EQ(H.Keys, unsigned(CPEmitGap::Algo));
  PlanSpec F;
  EXPECT_FALSE(pinsAllKeys(F, H));
  F.CPA = CPAlgo::Hybrid;
  EXPECT_TRUE(pinsAllKeys(F, H));
  ParallelPlan EP = cpPlan(CPAlgo::Ring, 2, 2);
  EP.EP = 2;
  EXPECT_EQ(getCPEmitGap(EP, false).Keys,
            unsigned(CPEmitGap::TP | CPEmitGap::CP | CPEmitGap::EP));
  EP.TP = 1; // cp beside ep alone is emitted
  EXPECT_FALSE(getCPEmitGap(EP, false));
  EXPECT_TRUE(getCPEmitGap(cpPlan(CPAlgo::Ring, 2, 2), true));
  EXPECT_FALSE(getCPEmitGap(cpPlan(CPAlgo::Ring, 2, 1), true));
  ParallelPlan NoCP = cpPlan(CPAlgo::Hybrid, 1, 8, 2);
  EXPECT_FALSE(getCPEmitGap(NoCP, true));
}
