//===- PlanConstraintsTest.cpp - The decision space in Z3 -----------------===//
//
// Explanations: unsat cores in plain words, checked text for text.
// Certificates: z3::optimize over a finite table of fully decided
// candidates, each with its predicted step time and memory, admits rows by
// DESIGN §6's constraints (not by the search's filters) and must find the
// search's optimum on random small cases. The table is a superset of the
// space -- rows that break the TP limit, the TP divisibility, dp*tp*pp =
// devices, batch divisibility, sp without tp, interleaving rules -- so the
// model's constraints are what keeps them out.
//
//===----------------------------------------------------------------------===//

#include "loom/Solver/PlanConstraints.h"
#include "SearchTestCases.h"

#include "gtest/gtest.h"
#include <numeric>

using namespace loom;
using namespace llvm;

using namespace loom::searchtest;

namespace {

constexpr double GiB = 1024.0 * 1024 * 1024;

PlanSpaceDesc makeSpace(uint64_t Devices, uint64_t Batch, unsigned Layers,
                        uint64_t TPLimit) {
  PlanSpaceDesc D;
  D.Devices = Devices;
  D.Batch = Batch;
  D.NumLayers = Layers;
  D.NumBlocks = Layers;
  D.TPLimit = TPLimit;
  D.TPLimitWhy = "hccs domain";
  return D;
}

TEST(PlanConstraintsTest, ExplainsMemoryAtEveryAdmissibleDegree) {
  // 16 devices, TP inside 4, 2 layers: (tp, pp) in {1, 2, 4} x {1, 2}; each
  // needs more than 8 GiB, the least 10 GiB at tp=4, pp=2 (stage 1). The
  // TP limit removes tp = 8, 16 and the layer count pp = 4, 8, 16, so both
  // are in the core with the six memory facts; the device product is not
  // needed (every pair left has a fact).
  PlanSpaceDesc D = makeSpace(16, 16, 2, 4);
  std::vector<MemoryFloorFact> Floors = {
      {1, 1, 40 * GiB, 0, "mb=1"}, {1, 2, 20 * GiB, 0, "mb=1"},
      {2, 1, 20 * GiB, 0, "mb=1"}, {2, 2, 12 * GiB, 0, "mb=1"},
      {4, 1, 11 * GiB, 0, "mb=1"}, {4, 2, 10 * GiB, 1, "mb=1"}};
  Expected<InfeasibilityExplanation> X =
      explainInfeasibility(D, Floors, 8 * GiB);
  ASSERT_TRUE(!!X) << toString(X.takeError());
  EXPECT_EQ(X->Summary,
            "no plan fits: stage 1 needs 10.0 GiB > 8.0 GiB HBM for every tp "
            "and pp with tp <= 4 (hccs domain) and pp <= 2 (layers)");
  std::vector<std::string> Core = {
      "tp <= 4 (hccs domain)",
      "pp <= 2 (layers)",
      "memory(tp=1,pp=1) >= 40.0 GiB > 8.0 GiB HBM (stage 0 at mb=1)",
      "memory(tp=1,pp=2) >= 20.0 GiB > 8.0 GiB HBM (stage 0 at mb=1)",
      "memory(tp=2,pp=1) >= 20.0 GiB > 8.0 GiB HBM (stage 0 at mb=1)",
      "memory(tp=2,pp=2) >= 12.0 GiB > 8.0 GiB HBM (stage 0 at mb=1)",
      "memory(tp=4,pp=1) >= 11.0 GiB > 8.0 GiB HBM (stage 0 at mb=1)",
      "memory(tp=4,pp=2) >= 10.0 GiB > 8.0 GiB HBM (stage 1 at mb=1)"};
  EXPECT_EQ(X->Core, Core);
  EXPECT_EQ(X->str().substr(0, X->Summary.size() + 37),
            X->Summary + "\nbinding constraints (Z3 unsat core):");
}

TEST(PlanConstraintsTest, ExplainsMemoryWithTheDeviceProduct) {
  // 8 devices, TP anywhere, 8 layers: every divisor pair with tp*pp <= 8
  // has a fact; tp*pp > 8 is ruled out only by dp*tp*pp = 8.
  PlanSpaceDesc D = makeSpace(8, 8, 8, 8);
  std::vector<MemoryFloorFact> Floors;
  for (unsigned TP : {1, 2, 4, 8})
    for (unsigned PP : {1, 2, 4, 8})
      if (TP * PP <= 8)
        Floors.push_back({TP, PP, (70.0 + TP + PP) * GiB, 0, ""});
  Expected<InfeasibilityExplanation> X =
      explainInfeasibility(D, Floors, 62 * GiB);
  ASSERT_TRUE(!!X) << toString(X.takeError());
  EXPECT_EQ(X->Summary, "no plan fits: stage 0 needs 72.0 GiB > 62.0 GiB "
                        "HBM for every tp and pp with dp*tp*pp = 8 devices");
  EXPECT_EQ(X->Core.front(), "dp*tp*pp = 8 devices");
  EXPECT_EQ(X->Core.size(), 1 + Floors.size());
}

TEST(PlanConstraintsTest, ExplainsImpossibleFixedChoices) {
  PlanSpaceDesc D = makeSpace(8, 8, 4, 8);
  D.FixedTP = 3;
  Expected<InfeasibilityExplanation> X = explainInfeasibility(D, {}, GiB);
  ASSERT_TRUE(!!X) << toString(X.takeError());
  EXPECT_EQ(X->Summary, "no plan satisfies the constraints: tp = 3 (--plan), "
                        "not a divisor of the 8 devices");

  // tp = 4 with TP limited to 2.
  D.FixedTP = 4;
  D.TPLimit = 2;
  X = explainInfeasibility(D, {}, GiB);
  ASSERT_TRUE(!!X) << toString(X.takeError());
  EXPECT_EQ(X->Summary, "no plan satisfies the constraints: tp <= 2 (hccs "
                        "domain); tp = 4 (--plan)");

  // Interleaving with 3 blocks: vpp = 2 divides the blocks per stage at
  // no pp, so pp = 2 is not needed in the core.
  D = makeSpace(8, 8, 3, 8);
  D.FixedPP = 2;
  D.FixedVPP = 2;
  X = explainInfeasibility(D, {}, GiB);
  ASSERT_TRUE(!!X) << toString(X.takeError());
  EXPECT_EQ(X->Summary,
            "no plan satisfies the constraints: vpp > 1 needs pp > 1, nmb "
            "divisible by pp, the even split and vpp dividing the blocks per "
            "stage; vpp = 2 (--plan)");
}

TEST(PlanConstraintsTest, ExpertParallelism) {
  // 8 devices, 4 experts per MoE layer: ep = 8 divides dp = 8 but not the
  // experts.
  PlanSpaceDesc D = makeSpace(8, 8, 4, 8);
  D.NumExperts = 4;
  D.FixedEP = 8;
  Expected<InfeasibilityExplanation> X = explainInfeasibility(D, {}, GiB);
  ASSERT_TRUE(!!X) << toString(X.takeError());
  EXPECT_EQ(X->Summary, "no plan satisfies the constraints: ep divides the 4 "
                        "experts per MoE layer; ep = 8 (--plan)");
  // ep = 4 with tp = 4: dp = 2 (pp = 1 and 2 leave dp <= 2), ep does not
  // divide it.
  D.FixedEP = 4;
  D.FixedTP = 4;
  X = explainInfeasibility(D, {}, GiB);
  ASSERT_TRUE(!!X) << toString(X.takeError());
  EXPECT_EQ(X->Summary,
            "no plan satisfies the constraints: dp*tp*pp = 8 devices; ep "
            "divides dp (expert-parallel ranks are carved out of the "
            "data-parallel ones); tp = 4 (--plan); ep = 4 (--plan)");
  // Without experts ep stays 1.
  D = makeSpace(8, 8, 4, 8);
  D.FixedEP = 2;
  X = explainInfeasibility(D, {}, GiB);
  ASSERT_TRUE(!!X) << toString(X.takeError());
  EXPECT_EQ(X->Summary, "no plan satisfies the constraints: ep = 1 (the "
                        "model has no experts); ep = 2 (--plan)");
  // Certificate: the row with ep = 3 is outside the model, ep = 2 is in.
  D = makeSpace(4, 4, 4, 4);
  D.NumExperts = 6;
  CandidateRow R;
  R.DP = 4;
  R.EP = 2;
  R.StepTimeS = 2;
  CandidateRow Bad = R;
  Bad.EP = 4; // divides dp = 4 but not the 6 experts
  Bad.StepTimeS = 1;
  Expected<OptimumCertificate> C = certifyMinimumStepTime(D, {Bad, R}, 10);
  ASSERT_TRUE(!!C) << toString(C.takeError());
  ASSERT_TRUE(C->Feasible);
  EXPECT_EQ(C->Row, 1u);
}

TEST(PlanConstraintsTest, OrderAndGradByHand) {
  // 8 devices, batch 8, TP inside 2, 4 layers, no experts (ep = 1).
  PlanSpaceDesc D = makeSpace(8, 8, 4, 2);
  auto Row = [](unsigned TP, unsigned PP, unsigned DP, unsigned Order,
                bool BF16, double T) {
    CandidateRow R;
    R.TP = TP;
    R.PP = PP;
    R.DP = DP;
    R.NMB = 8 / DP;
    R.Order = Order;
    R.BF16Grad = BF16;
    R.StepTimeS = T;
    R.MemoryBytes = 1;
    return R;
  };
  std::vector<CandidateRow> Rows = {
      Row(1, 4, 2, 0, false, 1.0),  // ep-dp-pp: dp inside pp, admitted
      Row(1, 4, 2, 5, true, 0.9),   // pp-dp-ep: pp inside dp, bf16, the optimum
      Row(1, 4, 2, 1, false, 0.5),  // ep-pp-dp: the same mesh, not its
                                    // representative (ep = 1 goes outside)
      Row(2, 4, 1, 0, true, 0.4),   // bf16 without a DP sync
      Row(2, 4, 1, 5, false, 0.45), // only pp > 1: the same mesh as the default
  };
  Expected<OptimumCertificate> C = certifyMinimumStepTime(D, Rows, 10);
  ASSERT_TRUE(!!C) << toString(C.takeError());
  ASSERT_TRUE(C->Feasible);
  EXPECT_EQ(C->Row, 1u);
  // order=tp-pp-ep-dp (4) is that mesh too; the default order and fp32 each
  // leave row 0.
  D.FixedOrder = 4;
  C = certifyMinimumStepTime(D, Rows, 10);
  ASSERT_TRUE(!!C);
  EXPECT_EQ(C->Row, 1u);
  D.FixedOrder = 0;
  C = certifyMinimumStepTime(D, Rows, 10);
  ASSERT_TRUE(!!C);
  EXPECT_EQ(C->Row, 0u);
  D.FixedOrder = -1;
  D.FixedGrad = 0;
  C = certifyMinimumStepTime(D, Rows, 10);
  ASSERT_TRUE(!!C);
  EXPECT_EQ(C->Row, 0u);
  // Inference: no gradients to narrow.
  D.FixedGrad = -1;
  D.Train = false;
  C = certifyMinimumStepTime(D, Rows, 10);
  ASSERT_TRUE(!!C);
  EXPECT_EQ(C->Row, 0u);
}

TEST(PlanConstraintsTest, SatisfiableModelIsAnInternalError) {
  PlanSpaceDesc D = makeSpace(8, 8, 4, 8);
  D.FixedTP = 8;
  Expected<InfeasibilityExplanation> X = explainInfeasibility(D, {}, GiB);
  ASSERT_FALSE(!!X);
  EXPECT_EQ(toString(X.takeError()),
            "internal error: the search found no plan but the constraint "
            "model admits tp=8 pp=1 (a memory floor is missing)");
}

TEST(PlanConstraintsTest, CertificateByHand) {
  // 4 devices, batch 4, TP inside 2, 4 layers.
  PlanSpaceDesc D = makeSpace(4, 4, 4, 2);
  auto Row = [](unsigned TP, unsigned PP, unsigned DP, unsigned MB, double T,
                double Mem) {
    CandidateRow R;
    R.TP = TP;
    R.PP = PP;
    R.DP = DP;
    R.MB = MB;
    R.NMB = std::max(1u, 4 / (DP * MB));
    R.StepTimeS = T;
    R.MemoryBytes = Mem;
    return R;
  };
  std::vector<CandidateRow> Rows = {
      Row(2, 2, 1, 1, 1.0, 1),   // admitted
      Row(4, 1, 1, 1, 0.5, 1),   // tp > 2
      Row(1, 1, 1, 1, 0.1, 1),   // dp*tp*pp = 1 != 4
      Row(1, 1, 4, 1, 0.9, 100), // memory over 10
      Row(1, 2, 2, 4, 0.2, 1),   // batch 4 not divisible by dp*mb = 8
      Row(2, 1, 2, 1, 0.95, 1),  // admitted, the optimum
  };
  Expected<OptimumCertificate> C = certifyMinimumStepTime(D, Rows, 10);
  ASSERT_TRUE(!!C) << toString(C.takeError());
  ASSERT_TRUE(C->Feasible);
  EXPECT_EQ(C->Row, 5u);
  EXPECT_EQ(C->StepTimeS, 0.95);
  // Without the two admitted rows nothing is left.
  Rows.erase(Rows.begin());
  Rows.pop_back();
  C = certifyMinimumStepTime(D, Rows, 10);
  ASSERT_TRUE(!!C);
  EXPECT_FALSE(C->Feasible);
}

TEST(PlanConstraintsTest, CertifiesTheSearchOnRandomCases) {
  unsigned Checked = 0, Feasible = 0;
  for (unsigned Seed = 1; Seed <= 24; ++Seed) {
    Fixture F(makeRandomCase(Seed));
    const RandomCase &C = F.C;
    SCOPED_TRACE("seed " + std::to_string(Seed) + ": " + C.str());
    uint64_t N = F.getDevices();
    unsigned NL = F.Eval->getNumLayers(), Blocks = NL - 2;

    PlanSpaceDesc D;
    D.Devices = N;
    D.Batch = C.Batch;
    D.NumLayers = NL;
    D.NumBlocks = Blocks;
    D.TPLimit = C.TPLevels > 1 ? N : C.Inner;
    // The dims the rules split (TPDivisibility): a tp dividing one of
    // them is a candidate, the others replicated where it does not divide.
    D.TPSplitSizes = computeTPDivisibility(F.CU.M->getGraph()).Sizes;
    D.Train = C.Train;

    // The superset table.
    std::vector<CandidateRow> Rows;
    auto Add = [&](ParallelPlan P, bool Balanced) {
      Expected<PlanCost> PC = F.Eval->evaluate(P);
      if (!PC) { // pp > layers: the evaluator refuses, the model excludes
        consumeError(PC.takeError());
        return;
      }
      CandidateRow R;
      R.TP = P.TP;
      R.PP = P.PP;
      R.DP = P.DP;
      R.MB = P.MicroBatchSize;
      R.NMB = P.NumMicroBatches;
      R.VPP = P.VirtualStages;
      R.Zero = P.ZeroStage;
      R.Recompute = (unsigned)P.RC;
      R.SP = P.SP;
      R.Balanced = Balanced;
      R.BF16Grad = P.Grad == GradPrecision::BF16;
      R.Order = getAxisOrderIndex(P.Order);
      R.StepTimeS = PC->StepTimeS;
      R.MemoryBytes = PC->MaxMemoryBytes;
      Rows.push_back(R);
    };
    // Both gradient precisions and every distinct mesh; for the rows
    // without ZeRO and recompute also the inadmissible variants (bf16
    // without a DP sync, all six orders, most of them the same mesh as
    // another): the model must exclude those. (All twelve variants of
    // every row made Z3 ten times slower for no more coverage.)
    auto AddAll = [&](ParallelPlan P, bool Balanced) {
      bool Everything = P.ZeroStage == 0 && P.RC == Recompute::None;
      for (GradPrecision G : {GradPrecision::FP32, GradPrecision::BF16}) {
        if (G == GradPrecision::BF16 && P.DP == 1 && !Everything)
          continue;
        SmallVector<AxisOrder, 6> Orders =
            getDistinctAxisOrders(P.EP, P.DP / P.EP, P.PP);
        if (Everything)
          Orders.assign(getAllAxisOrders().begin(), getAllAxisOrders().end());
        for (const AxisOrder &O : Orders) {
          P.Grad = G;
          P.Order = O;
          Add(P, Balanced);
        }
      }
    };
    for (uint64_t TP : divisorsOf(N))
      for (uint64_t PP : divisorsOf(N / TP)) {
        if (PP > NL)
          continue;
        uint64_t DP = N / (TP * PP);
        ParallelPlan Probe;
        Probe.PP = PP;
        std::vector<unsigned> Even = cantFail(F.Eval->getStageLayers(Probe));
        for (uint64_t MB : divisorsOf(C.Batch)) {
          unsigned NMB = std::max<uint64_t>(1, C.Batch / (DP * MB));
          for (bool SP : {false, true})
            for (unsigned RC = 0; RC < 3; ++RC) {
              std::vector<double> Work;
              for (unsigned L = 0; L < NL; ++L) {
                Work.push_back(getLayerWork(F.Eval->getLayerTime(L, TP, MB, SP),
                                            (Recompute)RC, C.Train));
              }
              std::vector<std::pair<unsigned, std::vector<unsigned>>> Lays = {
                  {1, {}}, {2, {}}};
              if (Blocks % std::max<uint64_t>(PP, 1) == 0)
                for (uint64_t V : divisorsOf(Blocks / PP))
                  if (V > 2)
                    Lays.push_back({(unsigned)V, {}});
              if (PP > 1) {
                std::vector<unsigned> Bal = partitionStages(Work, PP);
                if (Bal != Even &&
                    getBottleneck(Work, Bal) < getBottleneck(Work, Even))
                  Lays.push_back({1, Bal});
              }
              for (auto &Lay : Lays)
                for (unsigned Z = 0; Z < 4; ++Z) {
                  // Inference: recompute and ZeRO rows beyond 0 only once.
                  if (!C.Train && (RC || Z) && (MB != 1 || SP))
                    continue;
                  ParallelPlan P;
                  P.TP = TP;
                  P.PP = PP;
                  P.DP = DP;
                  P.SP = SP;
                  P.MicroBatchSize = MB;
                  P.NumMicroBatches = NMB;
                  P.VirtualStages = Lay.first;
                  P.StageLayers = Lay.second;
                  P.RC = (Recompute)RC;
                  P.ZeroStage = Z;
                  AddAll(P, !Lay.second.empty());
                }
            }
        }
        // A wrong dp (the device product must exclude it).
        if (DP > 1) {
          ParallelPlan P;
          P.TP = TP;
          P.PP = PP;
          P.DP = 1;
          P.NumMicroBatches = C.Batch;
          Add(P, false);
        }
      }

    // The Z3 model states dp*tp*pp = devices: the full-cluster space.
    SearchOptions Full;
    Full.AllowIdle = false;
    Expected<SearchResult> R = F.search(Full);
    ASSERT_TRUE(!!R) << toString(R.takeError());
    Expected<OptimumCertificate> Cert =
        certifyMinimumStepTime(D, Rows, F.C.HBMKiB * 1024);
    ASSERT_TRUE(!!Cert) << toString(Cert.takeError());
    ASSERT_EQ(Cert->Feasible, !R->Top.empty()) << Rows.size() << " rows";
    if (Cert->Feasible) {
      EXPECT_EQ(Cert->StepTimeS, R->Top[0].StepTimeS);
      ++Feasible;
    }
    ++Checked;
  }
  EXPECT_EQ(Checked, 24u);
  EXPECT_GE(Feasible, 12u);
}

} // namespace
