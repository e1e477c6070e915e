//===- Pipeline.cpp - Critical path of pipeline schedules -----------------===//
//
// Each device runs its operations in the order the schedule fixes (below);
// an operation starts when its device has finished the previous one and its
// input has arrived:
//
//   forward  (d, c, m): forward (d-1, c, m) + Transfer[d-1]; on device 0 for
//                       chunk c > 0, forward (P-1, c-1, m) + the wrap
//                       transfer (Transfer[P-1], 0 if absent)
//   backward (d, c, m): backward (d+1, c, m) + Transfer[d]; on device P-1
//                       for chunk c < V-1, backward (0, c+1, m) + the wrap
//                       transfer; the very last virtual stage's backward
//                       needs only its own forward
//
// Device d, chunk c is virtual stage c * P + d (Megatron-LM's layer
// assignment), and each chunk takes Forward[d] / V and Backward[d] / V.
// Processing operations in any order that respects these edges gives every
// operation its earliest start, so the result is the longest path of the
// schedule's DAG -- deterministic, and independent of event tie-breaking.
//
// Schedules (Narayanan et al. 2021, "Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM"):
//  - V = 1, 1F1B / PipeDream-Flush (§2.2.1): stage s runs min(P-s-1, M)
//    warm-up forwards, then pairs of one forward and one backward, then the
//    remaining backwards.
//  - V > 1, interleaved 1F1B (§2.2.2), in the order of Megatron-LM's
//    forward_backward_pipelining_with_interleaving: micro-batches go in
//    groups of P; within a group every chunk in turn runs the whole group
//    (forwards chunk 0..V-1, backwards chunk V-1..0). Warm-up is
//    min(2(P-s-1) + (V-1)P, M V) chunk forwards, then 1F1B pairs, then the
//    remaining backwards. Megatron-LM (as published) requires M % P == 0.
//    When it does not hold, the last group simply has M % P micro-batches
//    (what later Megatron-LM releases do); should an order ever be unable
//    to make progress (a cycle between devices), the simulator falls back
//    to all forwards, then all backwards, in group order on every device
//    (GPipe-like, always acyclic), so a result is always returned. Callers
//    that want Megatron's exact schedule check M % P == 0 themselves.
//  - ForwardOnly: the forwards of the same order, nothing else.
//
//===----------------------------------------------------------------------===//

#include "loom/Cost/Pipeline.h"

#include <algorithm>
#include <cassert>
#include <cstdint>

namespace loom {

namespace {

/// Chunk forwards in Megatron-LM's interleaved order: groups of P
/// micro-batches (the last one may be smaller), each group run by chunk
/// 0..V-1. Backwards use the same order with chunks reversed.
std::vector<PipelineOp> getChunkOrder(unsigned P, unsigned M, unsigned V,
                                      bool Backward) {
  std::vector<PipelineOp> Order;
  Order.reserve((size_t)M * V);
  for (unsigned First = 0; First < M; First += P) {
    unsigned Group = std::min(P, M - First);
    for (unsigned C = 0; C != V; ++C)
      for (unsigned J = 0; J != Group; ++J)
        Order.push_back({Backward, Backward ? V - 1 - C : C, First + J});
  }
  return Order;
}

/// The operations of device \p D in schedule order, from the chunk orders
/// \p Fwd and \p Bwd (getChunkOrder's, the same on every device).
std::vector<PipelineOp> getDeviceOrder(unsigned D, unsigned P, unsigned V,
                                       const std::vector<PipelineOp> &Fwd,
                                       const std::vector<PipelineOp> &Bwd,
                                       bool ForwardOnly, bool FallBack) {
  if (ForwardOnly)
    return Fwd;
  size_t Total = Fwd.size();
  // Warm-up forwards; see Memory.cpp (warmupChunks), which counts the
  // activations this leaves in flight.
  size_t Warmup = V == 1 ? P - D - 1 : 2 * (P - D - 1) + (V - 1) * P;
  if (FallBack)
    Warmup = Total;
  Warmup = std::min(Warmup, Total);
  std::vector<PipelineOp> Order;
  Order.reserve(2 * Total);
  Order.insert(Order.end(), Fwd.begin(), Fwd.begin() + Warmup);
  for (size_t I = 0; I + Warmup < Total; ++I) {
    Order.push_back(Fwd[Warmup + I]);
    Order.push_back(Bwd[I]);
  }
  Order.insert(Order.end(), Bwd.begin() + (Total - Warmup), Bwd.end());
  return Order;
}

using DeviceOrders = std::vector<std::vector<PipelineOp>>;

DeviceOrders getDeviceOrders(unsigned P, unsigned M, unsigned V,
                             bool ForwardOnly, bool FallBack) {
  std::vector<PipelineOp> Fwd = getChunkOrder(P, M, V, /*Backward=*/false);
  std::vector<PipelineOp> Bwd;
  if (!ForwardOnly)
    Bwd = getChunkOrder(P, M, V, /*Backward=*/true);
  DeviceOrders Orders;
  Orders.reserve(P);
  for (unsigned D = 0; D != P; ++D)
    Orders.push_back(getDeviceOrder(D, P, V, Fwd, Bwd, ForwardOnly, FallBack));
  return Orders;
}

/// Runs the schedule; returns false if some device's next operation can
/// never start (the order has a cycle).
bool runSchedule(const PipelineTimes &T, const DeviceOrders &Orders, unsigned M,
                 unsigned V, std::vector<double> &Finish) {
  unsigned P = Orders.size();
  auto transfer = [&](unsigned I) {
    return I < T.Transfer.size() ? T.Transfer[I] : 0.0;
  };
  auto time = [&](const std::vector<double> &PerStage, unsigned D) {
    return D < PerStage.size() ? PerStage[D] / V : 0.0;
  };
  // Finish times by [device][chunk * M + micro]; negative = not yet run.
  std::vector<std::vector<double>> FwdDone(P, std::vector<double>(V * M, -1));
  std::vector<std::vector<double>> BwdDone = FwdDone;

  // When op's input is ready, or a negative value if it has not been
  // produced yet.
  auto ready = [&](unsigned D, const PipelineOp &Op) -> double {
    unsigned C = Op.Chunk, Mb = Op.MicroBatch;
    double Src;
    if (!Op.Backward) {
      if (D > 0) {
        Src = FwdDone[D - 1][C * M + Mb];
        return Src < 0 ? -1 : Src + transfer(D - 1);
      }
      if (C == 0)
        return 0;
      Src = FwdDone[P - 1][(C - 1) * M + Mb];
      return Src < 0 ? -1 : Src + transfer(P - 1);
    }
    if (D + 1 < P) {
      Src = BwdDone[D + 1][C * M + Mb];
      return Src < 0 ? -1 : Src + transfer(D);
    }
    if (C + 1 < V) {
      Src = BwdDone[0][(C + 1) * M + Mb];
      return Src < 0 ? -1 : Src + transfer(P - 1);
    }
    return FwdDone[D][C * M + Mb];
  };

  // A worklist of devices that may be able to run their next operation:
  // finishing an operation can only unblock the devices it feeds (the
  // neighbours, and across the wrap device 0 and P - 1), so every
  // operation is looked at a bounded number of times.
  std::vector<size_t> Next(P, 0);
  std::vector<double> Free(P, 0.0);
  std::vector<unsigned> Work;
  std::vector<char> Queued(P, 1);
  for (unsigned D = P; D-- > 0;)
    Work.push_back(D);
  auto wake = [&](unsigned D) {
    if (!Queued[D]) {
      Queued[D] = 1;
      Work.push_back(D);
    }
  };
  while (!Work.empty()) {
    unsigned D = Work.back();
    Work.pop_back();
    Queued[D] = 0;
    bool Ran = false;
    while (Next[D] < Orders[D].size()) {
      const PipelineOp &Op = Orders[D][Next[D]];
      double Ready = ready(D, Op);
      if (Ready < 0)
        break;
      double Start = std::max(Free[D], Ready);
      double Finish = Start + time(Op.Backward ? T.Backward : T.Forward, D);
      (Op.Backward ? BwdDone : FwdDone)[D][Op.Chunk * M + Op.MicroBatch] =
          Finish;
      Free[D] = Finish;
      ++Next[D];
      Ran = true;
    }
    if (!Ran)
      continue;
    if (D > 0)
      wake(D - 1);
    if (D + 1 < P)
      wake(D + 1);
    if (D == 0)
      wake(P - 1);
    if (D == P - 1)
      wake(0);
  }
  for (unsigned D = 0; D != P; ++D)
    if (Next[D] != Orders[D].size())
      return false;
  Finish = std::move(Free);
  return true;
}

} // namespace

std::vector<std::vector<PipelineOp>>
getPipelineOrder(unsigned P, unsigned M, unsigned V, bool ForwardOnly) {
  V = std::max(1u, V);
  DeviceOrders Orders = getDeviceOrders(P, M, V, ForwardOnly, false);
  // Whether an order can make progress does not depend on the times.
  PipelineTimes Zero;
  Zero.Forward.assign(P, 0.0);
  Zero.Backward.assign(P, 0.0);
  Zero.ForwardOnly = ForwardOnly;
  std::vector<double> Finish;
  if (P && M && !runSchedule(Zero, Orders, M, V, Finish))
    Orders = getDeviceOrders(P, M, V, ForwardOnly, true);
  return Orders;
}

PipelineResult simulatePipeline(const PipelineTimes &T) {
  PipelineResult R;
  unsigned P = T.Forward.size();
  unsigned M = T.NumMicroBatches;
  unsigned V = std::max(1u, T.VirtualStages);
  assert((T.ForwardOnly || T.Backward.size() == P) &&
         "one backward time per stage");
  if (P == 0 || M == 0) {
    R.Idle.assign(P, 0.0);
    R.Finish.assign(P, 0.0);
    return R;
  }

  auto Simulate = [&](unsigned Micro) {
    std::vector<double> Finish;
    if (!runSchedule(T, getDeviceOrders(P, Micro, V, T.ForwardOnly, false),
                     Micro, V, Finish)) {
      bool Ok =
          runSchedule(T, getDeviceOrders(P, Micro, V, T.ForwardOnly, true),
                      Micro, V, Finish);
      assert(Ok && "all-forward-then-all-backward order cannot deadlock");
      (void)Ok;
    }
    return Finish;
  };
  uint64_t Cap = T.MaxSimulatedMicroBatches;
  if (Cap && M > Cap + 2 * (uint64_t)P) {
    // Past the warm-up the step grows by the steady state's time per
    // micro-batch, measured between two simulated lengths M1 < M2 that end
    // in the same partial group as M (M1 = M2 = M mod P). The steady state
    // may oscillate with a period other than P, so this is an estimate:
    // within 0.2% of the full simulation on random uneven pipelines
    // (PipelineTest), and only used past a bound no real global batch
    // reaches.
    // Each device's finish is extrapolated alike.
    unsigned M2 = Cap - Cap % P + M % P, M1 = M2 / 2 - (M2 / 2) % P + M % P;
    std::vector<double> S1 = Simulate(M1), S2 = Simulate(M2);
    for (unsigned D = 0; D != P; ++D)
      R.Finish.push_back(S2[D] +
                         (double)(M - M2) * (S2[D] - S1[D]) / (M2 - M1));
  } else {
    R.Finish = Simulate(M);
  }
  double Step = *std::max_element(R.Finish.begin(), R.Finish.end());
  R.StepTime = Step;

  double LeastIdle = Step;
  for (unsigned D = 0; D != P; ++D) {
    double Busy = M * T.Forward[D];
    if (!T.ForwardOnly)
      Busy += M * T.Backward[D];
    // Rounding noise is no bubble: the makespan, a sum of the same times
    // in another order, may differ from the busy time by a few ulps either
    // way (a one-stage pipeline printed "bubble 0.00 ns" and a comparison
    // ratio of 3e14).
    double Idle = Step - Busy;
    if (Idle <= 1e-9 * std::max(Step, Busy))
      Idle = 0;
    R.Idle.push_back(Idle);
    LeastIdle = std::min(LeastIdle, Idle);
  }
  R.BubbleFraction = Step > 0 ? LeastIdle / Step : 0.0;
  return R;
}

} // namespace loom
