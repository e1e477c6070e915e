//===- SearchOrderTest.cpp - The search's lazy order and memory families --===//
//
// Two things the search's speed (issue 17: the 10T MoE at a training
// batch) rests on:
//  - CandidateQueue, merging each base's placements (sorted by their tail
//    bound) into one order, visits the candidates in exactly the order a
//    stable sort of all of them by step bound would (CandidateOrder.h);
//  - a plan's memory (HBM per stage, host, SSD, whether it fits) is the
//    same at every mesh order, at every offload placement: the search
//    does not cost a plan's other orders at a placement found over HBM.
//    If the evaluator ever makes memory depend on the order (a buffer
//    sized by where a group lands), this test says so before the search
//    drops a plan that fits.
//
//===----------------------------------------------------------------------===//

#include "ExpertModels.h"
#include "RunPipeline.h"
#include "SearchTestCases.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Plan/Offload.h"
#include "loom/Planner/CandidateOrder.h"
#include "loom/Planner/OffloadCost.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"
#include <random>

using namespace loom;
using namespace loom::searchtest;
using namespace llvm;

namespace {

/// The queue's visits against a stable sort, for \p NumBases bases.
void checkQueueOrder(unsigned NumBases, std::mt19937 &R) {
  SCOPED_TRACE(NumBases);
  const unsigned NumOffs = 7;
  // Bounds on a coarse grid, so that ties (broken by enumeration index)
  // are common, and placements of a table shared by several bases.
  std::vector<PlacementTable> Tables;
  for (unsigned T = 0; T < 5; ++T) {
    std::vector<double> Tails, Mem;
    for (unsigned O = 0; O < NumOffs; ++O) {
      Tails.push_back(R() % 6);
      Mem.push_back(R() % 4);
    }
    Tables.push_back(PlacementTable::build(Tails, Mem, /*HBM=*/2.0, true));
    const PlacementTable &PT = Tables.back();
    // Both parts in increasing tail (the over-memory part too: the search
    // counts the ones a visit passed by binary search).
    for (unsigned I = 0; I + 1 < PT.Entries.size(); ++I)
      if (I + 1 != PT.Fit)
        EXPECT_LE(PT.Entries[I].Tail, PT.Entries[I + 1].Tail);
    for (unsigned I = 0; I < PT.Entries.size(); ++I)
      EXPECT_EQ(I < PT.Fit, PT.Entries[I].Memory <= 2.0);
  }
  std::vector<double> Pipe(NumBases);
  std::vector<unsigned> TableOf(NumBases);
  for (unsigned B = 0; B < NumBases; ++B) {
    Pipe[B] = R() % 8;
    TableOf[B] = R() % Tables.size();
  }
  // Every candidate that fits, stable-sorted by bound (enumeration order:
  // base, then placement).
  std::vector<std::pair<double, uint64_t>> All;
  for (unsigned B = 0; B < NumBases; ++B)
    for (unsigned O = 0; O < NumOffs; ++O)
      for (const PlacementTable::Entry &E : Tables[TableOf[B]].Entries)
        if (E.Off == O && E.Memory <= 2.0)
          All.push_back(
              {combineStepBound(Pipe[B], E.Tail), (uint64_t)B * NumOffs + O});
  std::stable_sort(All.begin(), All.end(), [](const auto &A, const auto &B) {
    return A.first < B.first;
  });
  CandidateQueue Q;
  auto ItemAt = [&](unsigned B, unsigned Pos) {
    const PlacementTable::Entry &E = Tables[TableOf[B]].Entries[Pos];
    return CandidateQueue::Item{combineStepBound(Pipe[B], E.Tail), B, Pos};
  };
  auto IndexOf = [&](const CandidateQueue::Item &I) {
    return (uint64_t)I.Base * NumOffs +
           Tables[TableOf[I.Base]].Entries[I.Pos].Off;
  };
  for (unsigned B = 0; B < NumBases; ++B)
    if (Tables[TableOf[B]].Fit)
      Q.push(ItemAt(B, 0));
  std::vector<std::pair<double, uint64_t>> Visited;
  while (!Q.empty()) {
    CandidateQueue::Item I = Q.pop();
    Visited.push_back({I.Bound, IndexOf(I)});
    if (I.Pos + 1 < Tables[TableOf[I.Base]].Fit)
      Q.push(ItemAt(I.Base, I.Pos + 1));
  }
  EXPECT_EQ(Visited, All);
  // The search's way (SearchRanking.cpp, visitInOrder): the first items heaped
  // at once, then each visited one replaced by its base's next in one sift.
  std::vector<CandidateQueue::Item> First;
  for (unsigned B = 0; B < NumBases; ++B)
    if (Tables[TableOf[B]].Fit)
      First.push_back(ItemAt(B, 0));
  Q.assign(std::move(First));
  Visited.clear();
  while (!Q.empty()) {
    CandidateQueue::Item I = Q.top();
    Visited.push_back({I.Bound, IndexOf(I)});
    if (I.Pos + 1 < Tables[TableOf[I.Base]].Fit)
      Q.replaceTop(ItemAt(I.Base, I.Pos + 1));
    else
      Q.pop();
  }
  EXPECT_EQ(Visited, All);
}

TEST(SearchOrderTest, QueueVisitsInStableSortedOrder) {
  std::mt19937 R(42);
  // Heaps of one item, of a partly filled last level, and of several
  // levels (the queue is 4-ary).
  for (unsigned NumBases : {1u, 2u, 4u, 5u, 6u, 21u, 22u, 200u})
    checkQueueOrder(NumBases, R);
}

/// A costed model on a two-level cluster with host DRAM and SSD.
struct TierFixture {
  HardwareModel HW;
  CompilationUnit CU;
  EvaluatorOptions EO;
  std::unique_ptr<PlanEvaluator> Eval;

  TierFixture(const std::string &Model, unsigned Inner, unsigned Outer,
              unsigned Batch, unsigned Seq) {
    std::string Y;
    raw_string_ostream OS(Y);
    OS << "name: test\ndevice:\n  name: npu\n  classes:\n"
       << "    aicore: {throughput: {fp32: 20GFLOPS}, launch_overhead: 50ns, "
          "ops: [\"*\"]}\n"
       << "  memory:\n    hbm: {capacity: 64KiB, bandwidth: 100GB/s}\n"
       << "    host: {capacity: 256KiB, bandwidth: 1GB/s, update_bandwidth: "
          "500MB/s}\n"
       << "    ssd: {capacity: 64MiB, bandwidth: 200MB/s}\n"
       << "topology:\n  - {name: hccs, size: " << Inner
       << ", bandwidth: 100GB/s, latency: 100ns, allow_tp: true}\n"
       << "  - {name: roce, size: " << Outer
       << ", bandwidth: 5GB/s, latency: 2us}\n";
    loadAndCost(CU, HW, OS.str(), Model);
    EO.Train = true;
    EO.Batch = Batch;
    EO.Seq = Seq;
    EO.CommBufferBytes = 16 << 10;
    Eval = std::make_unique<PlanEvaluator>(CU.M->getGraph(), CU.Layers,
                                           CU.NodeCosts, HW, EO);
  }

  /// Every enumerated plan (every 'Step'-th), at each of its distinct mesh
  /// orders and several placements: the memory of the default order.
  /// Returns how many plans had more than one order.
  unsigned expectSameMemoryAtEveryOrder(unsigned Step) {
    std::vector<ParallelPlan> Plans = enumerateCandidates(
        *Eval, CU.M->getGraph(), CU.Layers, HW, EO, SearchOptions());
    EXPECT_FALSE(Plans.empty());
    unsigned Checked = 0;
    for (unsigned I = 0; I < Plans.size(); I += Step) {
      const ParallelPlan &P = Plans[I];
      SmallVector<AxisOrder, 6> Orders =
          getDistinctAxisOrders(P.EP, P.DP / P.EP, P.PP);
      if (Orders.size() < 2)
        continue;
      ++Checked;
      for (const OffloadTiers &Off : getSearchedOffloads(HW)) {
        Optional<PlanCost> First;
        for (const AxisOrder &O : Orders) {
          ParallelPlan Q = P;
          Q.Order = O;
          Q.Offload = Off;
          SCOPED_TRACE(Q.str());
          Expected<PlanCost> PC = Eval->evaluateStages(Q);
          EXPECT_TRUE(!!PC) << (PC ? "" : toString(PC.takeError()));
          if (!PC)
            return Checked;
          if (!First) {
            First = std::move(*PC);
            continue;
          }
          EXPECT_EQ(PC->FitsMemory, First->FitsMemory);
          EXPECT_EQ(PC->MaxMemoryBytes, First->MaxMemoryBytes);
          EXPECT_EQ(PC->MaxHostBytes, First->MaxHostBytes);
          EXPECT_EQ(PC->MaxSSDBytes, First->MaxSSDBytes);
          EXPECT_EQ(PC->Stages.size(), First->Stages.size());
          for (unsigned S = 0; S < PC->Stages.size(); ++S)
            EXPECT_EQ(PC->Stages[S].MemoryBytes, First->Stages[S].MemoryBytes);
        }
      }
    }
    return Checked;
  }
};

TEST(SearchOrderTest, MemoryIsTheSameAtEveryMeshOrder) {
  // Random small transformers (dp and pp over two levels).
  unsigned Checked = 0;
  for (unsigned Seed = 1; Seed <= 3; ++Seed) {
    RandomCase C = makeRandomCase(Seed);
    SCOPED_TRACE("seed " + std::to_string(Seed) + ": " + C.str());
    TierFixture F(makeTransformer(C), 2, 4, 8, C.Seq);
    Checked += F.expectSameMemoryAtEveryOrder(5);
  }
  EXPECT_GT(Checked, 10u);
}

TEST(SearchOrderTest, MemoryIsTheSameAtEveryMeshOrderWithExperts) {
  // Stacked experts: ep inside or outside dp.
  TierFixture F(StackedModel, 4, 2, 8, 0);
  EXPECT_GT(F.expectSameMemoryAtEveryOrder(1), 0u);
}

} // namespace
