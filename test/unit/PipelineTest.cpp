//===- PipelineTest.cpp - Tests for the pipeline schedule simulator -------===//
//
// Closed forms for even stages (Narayanan et al. 2021 §2.2), hand-traced
// timelines for uneven stages and transfers, and a comparison on random
// small cases against an independent longest-path computation over the
// schedule's DAG built here.
//
//===----------------------------------------------------------------------===//

#include "loom/Cost/Pipeline.h"

#include "gtest/gtest.h"

#include <map>
#include <random>
#include <tuple>

using namespace loom;

namespace {

PipelineTimes evenStages(unsigned P, unsigned M, double F, double B,
                         unsigned V = 1) {
  PipelineTimes T;
  T.Forward.assign(P, F);
  T.Backward.assign(P, B);
  T.Transfer.assign(P > 0 ? P - 1 : 0, 0.0);
  T.NumMicroBatches = M;
  T.VirtualStages = V;
  return T;
}

TEST(PipelineTest, Even1F1B) {
  // P = 4, M = 8, t_f = 1, t_b = 2, no transfer:
  //   step = (M + P - 1)(t_f + t_b) = 11 * 3 = 33
  //   every stage is busy 8 * 3 = 24, idle 9; bubble 9/33 = (P-1)/(M+P-1)
  PipelineResult R = simulatePipeline(evenStages(4, 8, 1, 2));
  EXPECT_DOUBLE_EQ(33, R.StepTime);
  ASSERT_EQ(4u, R.Idle.size());
  for (double Idle : R.Idle)
    EXPECT_DOUBLE_EQ(9, Idle);
  EXPECT_DOUBLE_EQ(3.0 / 11.0, R.BubbleFraction);
}

TEST(PipelineTest, Even1F1BClosedFormForAllSmallShapes) {
  // (M + P - 1)(t_f + t_b) for every P <= 6, M <= 12, including M < P.
  for (unsigned P = 1; P <= 6; ++P)
    for (unsigned M = 1; M <= 12; ++M) {
      PipelineResult R = simulatePipeline(evenStages(P, M, 1.5, 2.5));
      EXPECT_DOUBLE_EQ((M + P - 1) * 4.0, R.StepTime) << P << " " << M;
      EXPECT_DOUBLE_EQ(double(P - 1) / (M + P - 1), R.BubbleFraction)
          << P << " " << M;
    }
}

TEST(PipelineTest, InterleavedDividesTheBubbleByV) {
  // P = 4, M = 8, per-device t_f = 1, t_b = 2 split over V chunks.
  // Narayanan et al. 2021 §2.2.2: bubble = (P - 1)(t_f + t_b) / V.
  //   V = 1: 24 + 9     = 33
  //   V = 2: 24 + 9 / 2 = 28.5, bubble 4.5 / 28.5
  //   V = 4: 24 + 9 / 4 = 26.25
  PipelineResult V1 = simulatePipeline(evenStages(4, 8, 1, 2, 1));
  PipelineResult V2 = simulatePipeline(evenStages(4, 8, 1, 2, 2));
  PipelineResult V4 = simulatePipeline(evenStages(4, 8, 1, 2, 4));
  EXPECT_DOUBLE_EQ(33, V1.StepTime);
  EXPECT_DOUBLE_EQ(28.5, V2.StepTime);
  EXPECT_DOUBLE_EQ(4.5 / 28.5, V2.BubbleFraction);
  EXPECT_DOUBLE_EQ(26.25, V4.StepTime);
  // Idle time relative to the ideal 24: 9 -> 4.5 -> 2.25.
  EXPECT_DOUBLE_EQ(2.0, V1.Idle[0] / V2.Idle[0]);
  EXPECT_DOUBLE_EQ(4.0, V1.Idle[0] / V4.Idle[0]);
  // Same closed form for P = 2, V = 3, M = 6 (t_f + t_b = 3):
  //   18 + 3 / 3 = 19.
  EXPECT_NEAR(19.0, simulatePipeline(evenStages(2, 6, 1, 2, 3)).StepTime,
              1e-12);
}

TEST(PipelineTest, UnevenStagesSlowLast) {
  // P = 2, M = 3; stage 0 t_f = 1, t_b = 2; stage 1 t_f = 2, t_b = 4.
  // Device 0 order: F0 | F1 B0 | F2 B1 | B2; device 1: F0 B0 F1 B1 F2 B2.
  //   d0 F0 [0,1]   d1 F0 [1,3]   d1 B0 [3,7]   d0 F1 [1,2]
  //   d0 B0 [7,9]   d1 F1 [7,9]   d1 B1 [9,13]  d0 F2 [9,10]
  //   d0 B1 [13,15] d1 F2 [13,15] d1 B2 [15,19] d0 B2 [19,21]
  // Step 21 = M (t_f + t_b)_max + (t_f + t_b) of the other stage
  //         = 3 * 6 + 3. Busy: d0 9, d1 18; idle 12 and 3.
  PipelineTimes T;
  T.Forward = {1, 2};
  T.Backward = {2, 4};
  T.Transfer = {0};
  T.NumMicroBatches = 3;
  PipelineResult R = simulatePipeline(T);
  EXPECT_DOUBLE_EQ(21, R.StepTime);
  EXPECT_DOUBLE_EQ(12, R.Idle[0]);
  EXPECT_DOUBLE_EQ(3, R.Idle[1]);
  // The busiest stage is stage 1: 3 / 21.
  EXPECT_DOUBLE_EQ(3.0 / 21.0, R.BubbleFraction);
}

TEST(PipelineTest, UnevenStagesSlowFirst) {
  // The same stages swapped: stage 0 t_f = 2, t_b = 4; stage 1 1 and 2.
  //   d0 F0 [0,2]   d1 F0 [2,3]   d1 B0 [3,5]   d0 F1 [2,4]
  //   d0 B0 [5,9]   d1 F1 [5,6]   d1 B1 [6,8]   d0 F2 [9,11]
  //   d0 B1 [11,15] d1 F2 [11,12] d1 B2 [12,14] d0 B2 [15,19]
  // Step 19: the slow first stage only waits once (from 4 to 5), which is
  // less than the 3 * 6 + 3 = 21 of the slow-last order.
  PipelineTimes T;
  T.Forward = {2, 1};
  T.Backward = {4, 2};
  T.Transfer = {0};
  T.NumMicroBatches = 3;
  PipelineResult R = simulatePipeline(T);
  EXPECT_DOUBLE_EQ(19, R.StepTime);
  EXPECT_DOUBLE_EQ(1, R.Idle[0]);
  EXPECT_DOUBLE_EQ(10, R.Idle[1]);
  EXPECT_DOUBLE_EQ(1.0 / 19.0, R.BubbleFraction);
}

TEST(PipelineTest, TransfersLengthenTheCriticalPath) {
  // P = 2, M = 2, t_f = t_b = 1, transfer 0.5:
  //   d0 F0 [0,1]   d1 F0 [1.5,2.5]  d1 B0 [2.5,3.5]  d0 F1 [1,2]
  //   d0 B0 [4,5]   d1 F1 [3.5,4.5]  d1 B1 [4.5,5.5]  d0 B1 [6,7]
  // Step 7 = (M + P - 1)(t_f + t_b) + 2 (P - 1) * 0.5; idle 3 each.
  PipelineTimes T = evenStages(2, 2, 1, 1);
  T.Transfer = {0.5};
  PipelineResult R = simulatePipeline(T);
  EXPECT_DOUBLE_EQ(7, R.StepTime);
  EXPECT_DOUBLE_EQ(3, R.Idle[0]);
  EXPECT_DOUBLE_EQ(3, R.Idle[1]);
}

TEST(PipelineTest, EachStageEndsOnItsOwn) {
  // The timelines above: each stage's last operation ends at Finish[d];
  // the first stage closes the step, later ones end earlier (their DP
  // sync and optimizer run meanwhile: PlanCost, Schedule.cpp).
  //   slow last (UnevenStagesSlowLast): d1 B2 ends 19, d0 B2 21;
  //   transfers (above): d1 B1 ends 5.5, d0 B1 7.
  PipelineTimes T;
  T.Forward = {1, 2};
  T.Backward = {2, 4};
  T.Transfer = {0};
  T.NumMicroBatches = 3;
  PipelineResult R = simulatePipeline(T);
  ASSERT_EQ(2u, R.Finish.size());
  EXPECT_DOUBLE_EQ(21, R.Finish[0]);
  EXPECT_DOUBLE_EQ(19, R.Finish[1]);
  PipelineTimes X = evenStages(2, 2, 1, 1);
  X.Transfer = {0.5};
  R = simulatePipeline(X);
  EXPECT_DOUBLE_EQ(7, R.Finish[0]);
  EXPECT_DOUBLE_EQ(5.5, R.Finish[1]);
  // Forward only: the last stage ends last. P = 2, M = 2, t_f = 1,
  // transfer 0.5: d0 F0 [0,1] F1 [1,2]; d1 F0 [1.5,2.5] F1 [2.5,3.5].
  X.ForwardOnly = true;
  R = simulatePipeline(X);
  EXPECT_DOUBLE_EQ(2, R.Finish[0]);
  EXPECT_DOUBLE_EQ(3.5, R.Finish[1]);
  EXPECT_DOUBLE_EQ(3.5, R.StepTime);
}

TEST(PipelineTest, InterleavedWrapTransfer) {
  // P = 2, V = 2, M = 2, per-chunk t_f = t_b = 1 (device totals 2 and 2),
  // every transfer 0.25, including the wrap from device 1 back to device 0.
  // Warm-up: d0 2*1 + 1*2 = 4 (all four chunk forwards), d1 0 + 2 = 2.
  // Forward order (mb, chunk): (0,0) (1,0) (0,1) (1,1); backward order
  // (0,1) (1,1) (0,0) (1,0).
  //   d0 F(0,0) [0,1]  F(1,0) [1,2]
  //   d1 F(0,0) [1.25,2.25]  F(1,0) [2.25,3.25]
  //   d0 F(0,1) needs d1 F(0,0) + 0.25 = 2.5: [2.5,3.5]; F(1,1) [3.5,4.5]
  //   d1 F(0,1) needs 3.75: [3.75,4.75]; B(0,1) [4.75,5.75]
  //      F(1,1) needs 4.75: [5.75,6.75]; B(1,1) [6.75,7.75]
  //   d0 B(0,1) needs 6.0: [6,7]; B(1,1) needs 8.0: [8,9]
  //   d1 B(0,0) needs d0 B(0,1) + 0.25 = 7.25: [7.75,8.75];
  //      B(1,0) needs 9.25: [9.25,10.25]
  //   d0 B(0,0) needs 9.0: [9,10]; B(1,0) needs 10.5: [10.5,11.5]
  // Step 11.5.
  PipelineTimes T = evenStages(2, 2, 2, 2, 2);
  T.Transfer = {0.25, 0.25};
  EXPECT_DOUBLE_EQ(11.5, simulatePipeline(T).StepTime);
}

TEST(PipelineTest, ForwardOnly) {
  // Inference, P = 3, M = 4, t_f = 1 per stage: (M + P - 1) t_f = 6.
  PipelineTimes T;
  T.Forward = {1, 1, 1};
  T.Transfer = {0, 0};
  T.NumMicroBatches = 4;
  T.ForwardOnly = true;
  EXPECT_DOUBLE_EQ(6, simulatePipeline(T).StepTime);
  // Middle stage 3x slower: 1 + 4 * 3 + 1 = 14; the middle stage idles 2.
  T.Forward = {1, 3, 1};
  PipelineResult R = simulatePipeline(T);
  EXPECT_DOUBLE_EQ(14, R.StepTime);
  EXPECT_DOUBLE_EQ(10, R.Idle[0]);
  EXPECT_DOUBLE_EQ(2, R.Idle[1]);
  EXPECT_DOUBLE_EQ(2.0 / 14.0, R.BubbleFraction);
}

TEST(PipelineTest, Degenerate) {
  // One stage: no bubble, step M (t_f + t_b) = 5 * 3.
  PipelineResult One = simulatePipeline(evenStages(1, 5, 1, 2));
  EXPECT_DOUBLE_EQ(15, One.StepTime);
  EXPECT_DOUBLE_EQ(0, One.BubbleFraction);
  // No stages or no micro-batches: nothing to run.
  EXPECT_DOUBLE_EQ(0, simulatePipeline(PipelineTimes()).StepTime);
  EXPECT_DOUBLE_EQ(0, simulatePipeline(evenStages(4, 0, 1, 2)).StepTime);
}

//===----------------------------------------------------------------------===//
// Independent reference: the schedule as an explicit DAG, longest path by
// Bellman-Ford-style relaxation until nothing changes.
//===----------------------------------------------------------------------===//

struct RefOp {
  bool Bwd;
  unsigned Dev, Chunk, Mb;
  bool operator<(const RefOp &O) const {
    return std::tie(Bwd, Dev, Chunk, Mb) <
           std::tie(O.Bwd, O.Dev, O.Chunk, O.Mb);
  }
};

/// Per device, the schedule: Megatron's table (groups of P micro-batches,
/// each run by chunk 0..V-1) with warm-up W, or all forwards then all
/// backwards when \p AllForwardFirst.
std::vector<RefOp> refOrder(unsigned Dev, unsigned P, unsigned M, unsigned V,
                            bool AllForwardFirst) {
  std::vector<std::pair<unsigned, unsigned>> Table; // (chunk, mb)
  for (unsigned G = 0; G * P < M; ++G)
    for (unsigned C = 0; C < V; ++C)
      for (unsigned Mb = G * P; Mb < std::min(M, G * P + P); ++Mb)
        Table.push_back({C, Mb});
  unsigned N = Table.size();
  unsigned W = V == 1 ? P - Dev - 1 : 2 * (P - Dev - 1) + (V - 1) * P;
  if (AllForwardFirst || W > N)
    W = N;
  std::vector<RefOp> Order;
  unsigned NextF = 0, NextB = 0;
  auto fwd = [&] {
    Order.push_back({false, Dev, Table[NextF].first, Table[NextF].second});
    ++NextF;
  };
  auto bwd = [&] {
    Order.push_back(
        {true, Dev, V - 1 - Table[NextB].first, Table[NextB].second});
    ++NextB;
  };
  while (NextF < W)
    fwd();
  while (NextF < N) {
    fwd();
    bwd();
  }
  while (NextB < N)
    bwd();
  return Order;
}

double referenceStep(const PipelineTimes &T, bool AllForwardFirst = false) {
  unsigned P = T.Forward.size(), M = T.NumMicroBatches, V = T.VirtualStages;
  auto xfer = [&](unsigned I) {
    return I < T.Transfer.size() ? T.Transfer[I] : 0.0;
  };
  // Edges (from, to, weight): the op "to" may start at finish(from) + w.
  std::vector<std::tuple<RefOp, RefOp, double>> Edges;
  std::vector<RefOp> All;
  for (unsigned D = 0; D < P; ++D) {
    std::vector<RefOp> Order = refOrder(D, P, M, V, AllForwardFirst);
    for (size_t I = 0; I < Order.size(); ++I) {
      All.push_back(Order[I]);
      if (I > 0)
        Edges.push_back({Order[I - 1], Order[I], 0.0});
    }
  }
  for (const RefOp &O : All) {
    if (!O.Bwd) {
      if (O.Dev > 0)
        Edges.push_back(
            {RefOp{false, O.Dev - 1, O.Chunk, O.Mb}, O, xfer(O.Dev - 1)});
      else if (O.Chunk > 0)
        Edges.push_back(
            {RefOp{false, P - 1, O.Chunk - 1, O.Mb}, O, xfer(P - 1)});
    } else if (O.Dev + 1 < P) {
      Edges.push_back({RefOp{true, O.Dev + 1, O.Chunk, O.Mb}, O, xfer(O.Dev)});
    } else if (O.Chunk + 1 < V) {
      Edges.push_back({RefOp{true, 0, O.Chunk + 1, O.Mb}, O, xfer(P - 1)});
    } else {
      Edges.push_back({RefOp{false, O.Dev, O.Chunk, O.Mb}, O, 0.0});
    }
  }
  auto dur = [&](const RefOp &O) {
    return (O.Bwd ? T.Backward[O.Dev] : T.Forward[O.Dev]) / V;
  };
  std::map<RefOp, double> Start;
  for (const RefOp &O : All)
    Start[O] = 0;
  for (bool Changed = true; Changed;) {
    Changed = false;
    for (auto &[From, To, W] : Edges) {
      double S = Start[From] + dur(From) + W;
      if (S > Start[To]) {
        Start[To] = S;
        Changed = true;
      }
    }
  }
  double Step = 0;
  for (const RefOp &O : All)
    Step = std::max(Step, Start[O] + dur(O));
  return Step;
}

TEST(PipelineTest, MatchesLongestPathOnRandomCases) {
  std::mt19937 Rng(20240611); // Fixed seed: deterministic cases.
  std::uniform_real_distribution<double> Time(0.5, 4.0), Xfer(0.0, 1.0);
  unsigned Checked = 0;
  for (unsigned Case = 0; Case < 40; ++Case) {
    unsigned P = 1 + Rng() % 4;
    unsigned V = 1 + Rng() % 2;
    unsigned M = 1 + Rng() % 8;
    if (V > 1)
      M = P * (1 + Rng() % 2); // Interleaving as Megatron runs it.
    PipelineTimes T;
    for (unsigned D = 0; D < P; ++D) {
      T.Forward.push_back(Time(Rng));
      T.Backward.push_back(Time(Rng));
      T.Transfer.push_back(Xfer(Rng)); // P entries: the last is the wrap.
    }
    T.NumMicroBatches = M;
    T.VirtualStages = V;
    PipelineResult R = simulatePipeline(T);
    double Ref = referenceStep(T);
    EXPECT_NEAR(Ref, R.StepTime, 1e-9 * Ref)
        << "P=" << P << " V=" << V << " M=" << M;
    // Bubble from the reference: least (step - busy) over stages.
    double LeastIdle = Ref;
    for (unsigned D = 0; D < P; ++D)
      LeastIdle = std::min(LeastIdle, Ref - M * (T.Forward[D] + T.Backward[D]));
    EXPECT_NEAR(LeastIdle / Ref, R.BubbleFraction, 1e-9);
    ++Checked;
  }
  EXPECT_EQ(40u, Checked);
}

// A long step (many micro-batches) is simulated up to a bound and
// extrapolated at the steady state's rate: close to the full simulation
// (the steady state of uneven stages may oscillate, so not exact), and
// exact below the bound.
TEST(PipelineTest, BoundedSimulationMatchesFullSimulation) {
  std::mt19937 Rng(20261129);
  std::uniform_real_distribution<double> Time(0.5, 4.0), Xfer(0.0, 1.0);
  for (unsigned Case = 0; Case < 60; ++Case) {
    unsigned P = 1 + Rng() % 8;
    unsigned V = 1 + Rng() % 3;
    PipelineTimes T;
    for (unsigned D = 0; D < P; ++D) {
      T.Forward.push_back(Time(Rng));
      T.Backward.push_back(Time(Rng));
      T.Transfer.push_back(Xfer(Rng));
    }
    T.VirtualStages = V;
    T.ForwardOnly = Case % 5 == 0;
    T.NumMicroBatches = 600 + Rng() % 400;
    if (V > 1 && Case % 2)
      T.NumMicroBatches -= T.NumMicroBatches % P; // Whole groups.
    PipelineResult Full = simulatePipeline(T);
    T.MaxSimulatedMicroBatches = 128;
    PipelineResult Bounded = simulatePipeline(T);
    EXPECT_NEAR(Full.StepTime, Bounded.StepTime, 2e-3 * Full.StepTime)
        << "P=" << P << " V=" << V << " M=" << T.NumMicroBatches;
    EXPECT_NEAR(Full.BubbleFraction, Bounded.BubbleFraction, 2e-3);
    T.MaxSimulatedMicroBatches = T.NumMicroBatches;
    EXPECT_EQ(Full.StepTime, simulatePipeline(T).StepTime);
  }
  // A billion micro-batches: bounded work, the closed form of 1F1B.
  PipelineTimes T;
  T.Forward.assign(4, 1.0);
  T.Backward.assign(4, 2.0);
  T.NumMicroBatches = 1000000000;
  T.MaxSimulatedMicroBatches = 128;
  PipelineResult R = simulatePipeline(T);
  EXPECT_DOUBLE_EQ((1000000000.0 + 3) * 3, R.StepTime);
}

TEST(PipelineTest, InterleavedWithoutWholeGroupsFallsBack) {
  // P = 4, V = 3, M = 5: the last group of micro-batches has 1, and
  // Megatron's order then waits on itself (device 3's backward of chunk 1
  // needs device 0's backward of chunk 2, queued behind a forward that
  // needs device 3's later forward). The simulator runs all forwards,
  // then all backwards, in group order.
  PipelineTimes T;
  T.Forward = {1, 1.5, 1, 2};
  T.Backward = {2, 3, 2, 4};
  T.Transfer = {0.1, 0.2, 0.1, 0.3};
  T.NumMicroBatches = 5;
  T.VirtualStages = 3;
  double Ref = referenceStep(T, /*AllForwardFirst=*/true);
  EXPECT_NEAR(Ref, simulatePipeline(T).StepTime, 1e-9 * Ref);
  // Megatron's order is used whenever it runs, whole groups or not:
  // P = 2, V = 2, M = 3 (groups of 2 and 1).
  PipelineTimes U = evenStages(2, 3, 1, 2, 2);
  EXPECT_NEAR(referenceStep(U), simulatePipeline(U).StepTime, 1e-9);
}

// The one pipeline order (simulation and schedule pass alike). P = 2,
// M = 3, V = 2 on device 0: micro-batches go in groups of P (the last has
// M % P = 1), each group through chunk 0 then chunk 1; backwards with the
// chunks reversed. Warm-up 2(P - 0 - 1) + (V - 1)P = 4 forwards of the
// 6, then forward/backward pairs, then the last backwards.
TEST(PipelineTest, OneOrderInterleavedPartialGroup) {
  std::vector<std::vector<PipelineOp>> O = getPipelineOrder(2, 3, 2, false);
  ASSERT_EQ(O.size(), 2u);
  auto Str = [](const std::vector<PipelineOp> &Ops) {
    std::string S;
    for (const PipelineOp &Op : Ops)
      S += std::string(Op.Backward ? "B" : "F") + std::to_string(Op.Chunk) +
           std::to_string(Op.MicroBatch) + " ";
    return S;
  };
  EXPECT_EQ(Str(O[0]), "F00 F01 F10 F11 F02 B10 F12 B11 B00 B01 B12 B02 ");
  // Forward only: the forwards of the same order.
  EXPECT_EQ(Str(getPipelineOrder(2, 3, 2, true)[1]),
            "F00 F01 F10 F11 F02 F12 ");
  // 1F1B (V = 1) on the last device: no warm-up.
  EXPECT_EQ(Str(getPipelineOrder(2, 2, 1, false)[1]), "F00 B00 F01 B01 ");
}

} // namespace
