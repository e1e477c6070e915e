//===- SearchPruneTest.cpp - Pruned search equals exhaustive, with offload ===//
//
// The search's pruning (Search.cpp: the step bound with the optimizer
// phase of each offload placement, the memory bound per placement, stage
// costs shared by the placements of one plan and simulated without being
// costed again, act:host placements skipped when they cost what act:hbm
// costs) must not change what it returns. Random small transformers on
// clusters whose HBM is too small for the training state, with host DRAM
// and SSD beside it (capacities that sometimes bind), searched with and
// without pruning: the same top plans, step times and memory, the same
// best plan with other degrees and the same best plan without offload.
//
//===----------------------------------------------------------------------===//

#include "RunPipeline.h"
#include "SearchTestCases.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Planner/OffloadCost.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"
#include <random>

using namespace loom;
using namespace loom::searchtest;
using namespace llvm;

namespace {

struct OffloadCase {
  RandomCase C;
  unsigned HostKiB = 0, SSDKiB = 0;
  unsigned HostMBps = 0, SSDMBps = 0, UpdateMBps = 0;
  std::string str() const {
    return C.str() + " host=" + std::to_string(HostKiB) +
           "KiB ssd=" + std::to_string(SSDKiB) +
           "KiB pcie=" + std::to_string(HostMBps) +
           "MB/s nvme=" + std::to_string(SSDMBps) +
           "MB/s update=" + std::to_string(UpdateMBps) + "MB/s";
  }
};

OffloadCase makeOffloadCase(unsigned Seed) {
  std::mt19937 R(Seed * 7919 + 17);
  auto Pick = [&](std::initializer_list<unsigned> L) {
    return *(L.begin() + R() % L.size());
  };
  OffloadCase O;
  O.C = makeRandomCase(Seed);
  O.C.Train = true;
  O.C.Inner = Pick({2, 4});
  O.C.Outer = Pick({1, 2});
  O.C.Batch = Pick({2, 4, 8});
  O.C.HBMKiB = Pick({32, 48, 64, 96});
  O.HostKiB = Pick({64, 256, 4096});
  O.SSDKiB = Pick({256, 65536});
  O.HostMBps = Pick({100, 1000});
  O.SSDMBps = Pick({20, 200});
  O.UpdateMBps = Pick({50, 500});
  return O;
}

std::string makeOffloadHardware(const OffloadCase &O) {
  std::string Y;
  raw_string_ostream OS(Y);
  OS << "name: test\ndevice:\n  name: npu\n  classes:\n"
     << "    aicore: {throughput: {fp32: 20GFLOPS}, vector_throughput: "
        "{fp32: 2GFLOPS}, launch_overhead: 50ns, ops: [\"*\"]}\n"
     << "  memory:\n    hbm: {capacity: " << O.C.HBMKiB
     << "KiB, bandwidth: 100GB/s}\n"
     << "    host: {capacity: " << O.HostKiB << "KiB, bandwidth: " << O.HostMBps
     << "MB/s, update_bandwidth: " << O.UpdateMBps << "MB/s}\n"
     << "    ssd: {capacity: " << O.SSDKiB << "KiB, bandwidth: " << O.SSDMBps
     << "MB/s}\n"
     << "topology:\n"
     << "  - {name: hccs, size: " << O.C.Inner
     << ", bandwidth: 100GB/s, latency: 100ns, allow_tp: true}\n";
  if (O.C.Outer > 1)
    OS << "  - {name: roce, size: " << O.C.Outer
       << ", bandwidth: 5GB/s, latency: 2us, allow_tp: false}\n";
  return OS.str();
}

struct OffloadFixture {
  OffloadCase O;
  HardwareModel HW;
  CompilationUnit CU;
  EvaluatorOptions EO;
  std::unique_ptr<PlanEvaluator> Eval;

  explicit OffloadFixture(const OffloadCase &OC) : O(OC) {
    loadAndCost(CU, HW, makeOffloadHardware(O), makeTransformer(O.C));
    EO.Train = true;
    EO.Batch = O.C.Batch;
    EO.Seq = O.C.Seq;
    EO.CommBufferBytes = 16 << 10;
    Eval = std::make_unique<PlanEvaluator>(CU.M->getGraph(), CU.Layers,
                                           CU.NodeCosts, HW, EO);
  }
  Expected<SearchResult> search(const SearchOptions &SO) const {
    return searchPlans(*Eval, CU.M->getGraph(), CU.Layers, HW, EO, SO);
  }
};

void expectSamePlan(const PlanCost &A, const PlanCost &B, const char *What) {
  EXPECT_EQ(A.Plan.str(), B.Plan.str()) << What;
  EXPECT_EQ(A.StepTimeS, B.StepTimeS) << What << " " << A.Plan.str();
  EXPECT_EQ(A.MaxMemoryBytes, B.MaxMemoryBytes) << What;
  EXPECT_EQ(A.MaxHostBytes, B.MaxHostBytes) << What;
  EXPECT_EQ(A.MaxSSDBytes, B.MaxSSDBytes) << What;
}

const unsigned NumOffloadCases = 14;

TEST(SearchPruneTest, PrunedEqualsExhaustiveWithOffload) {
  unsigned Offloaded = 0, Infeasible = 0;
  uint64_t Simulated = 0, All = 0, Dominated = 0;
  for (unsigned Seed = 1; Seed <= NumOffloadCases; ++Seed) {
    OffloadFixture F(makeOffloadCase(Seed));
    SCOPED_TRACE("seed " + std::to_string(Seed) + ": " + F.O.str());
    for (unsigned K : {2u, 5u}) {
      SearchOptions Pruned, Full;
      Pruned.TopK = Full.TopK = K;
      Full.Prune = false;
      Expected<SearchResult> A = F.search(Pruned), B = F.search(Full);
      ASSERT_TRUE(!!A) << toString(A.takeError());
      ASSERT_TRUE(!!B) << toString(B.takeError());
      EXPECT_EQ(A->Stats.Candidates, B->Stats.Candidates);
      EXPECT_EQ(A->OffloadNeeded, B->OffloadNeeded);
      ASSERT_EQ(A->Top.size(), B->Top.size()) << "K=" << K;
      for (unsigned I = 0; I < A->Top.size(); ++I)
        expectSamePlan(A->Top[I], B->Top[I], "rank");
      ASSERT_EQ(!!A->OtherDegrees, !!B->OtherDegrees);
      if (A->OtherDegrees)
        expectSamePlan(*A->OtherDegrees, *B->OtherDegrees, "other degrees");
      ASSERT_EQ(!!A->NoOffload, !!B->NoOffload);
      if (A->NoOffload)
        expectSamePlan(*A->NoOffload, *B->NoOffload, "no offload");
      if (A->Top.empty()) {
        ++Infeasible;
        ASSERT_EQ(A->Floors.size(), B->Floors.size());
        for (unsigned I = 0; I < A->Floors.size(); ++I)
          EXPECT_EQ(A->Floors[I].Bytes, B->Floors[I].Bytes);
      }
      if (K == 2) {
        Offloaded += A->OffloadNeeded;
        Simulated += A->Stats.Simulated;
        All += B->Stats.Simulated;
        Dominated += A->Stats.Dominated;
      }
    }
  }
  // The cases exercise what they are meant to: offload needed and found,
  // nothing fitting even with it, the act:host twins skipped; and pruning
  // pays off.
  EXPECT_GE(Offloaded, 4u);
  EXPECT_GE(Infeasible, 1u);
  EXPECT_GT(Dominated, 0u);
  EXPECT_LT(Simulated * 4, All);
}

/// evaluateStages then simulate equals evaluate, placement by placement:
/// what the pruned search computes is what the exhaustive one does.
TEST(SearchPruneTest, SimulateFromStagesEqualsEvaluate) {
  OffloadFixture F(makeOffloadCase(3));
  SearchOptions SO;
  std::vector<ParallelPlan> Plans = enumerateCandidates(
      *F.Eval, F.CU.M->getGraph(), F.CU.Layers, F.HW, F.EO, SO);
  ASSERT_FALSE(Plans.empty());
  for (unsigned I = 0; I < Plans.size(); I += 7) {
    for (const char *Off : {"none", "opt:ssd,grad:host", "param:host,act:host",
                            "opt:host,param:ssd"}) {
      ParallelPlan P = Plans[I];
      Expected<OffloadTiers> T = parseOffloadTiers(Off);
      ASSERT_TRUE(!!T);
      P.Offload = *T;
      Expected<PlanCost> Whole = F.Eval->evaluate(P);
      ParallelPlan Base = P;
      Base.Offload = OffloadTiers();
      Expected<PlanCost> Staged = F.Eval->evaluateStages(Base);
      ASSERT_TRUE(Whole && Staged);
      applyOffloadToPlan(*Staged, P.Offload, F.HW);
      Expected<PlanCost> Sim = F.Eval->simulate(std::move(*Staged));
      ASSERT_TRUE(!!Sim);
      SCOPED_TRACE(P.str());
      expectSamePlan(*Sim, *Whole, "simulated");
      EXPECT_EQ(Sim->FitsMemory, Whole->FitsMemory);
      EXPECT_EQ(Sim->BubbleFraction, Whole->BubbleFraction);
      EXPECT_EQ(Sim->MFU, Whole->MFU);
      ASSERT_EQ(Sim->Stages.size(), Whole->Stages.size());
      for (unsigned S = 0; S < Sim->Stages.size(); ++S) {
        EXPECT_EQ(Sim->Stages[S].BubbleS, Whole->Stages[S].BubbleS);
        EXPECT_EQ(Sim->Stages[S].OptimizerS, Whole->Stages[S].OptimizerS);
        EXPECT_EQ(Sim->Stages[S].MemoryBytes, Whole->Stages[S].MemoryBytes);
      }
    }
  }
}

} // namespace
