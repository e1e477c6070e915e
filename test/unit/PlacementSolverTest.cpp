//===- PlacementSolverTest.cpp - Device-class placement solver ------------===//
//
// solvePlacement against brute-force enumeration on random small requests
// (fixed seeds), evaluatePlacement on hand-computed cases, capacity-bound
// choices and the messages of infeasible requests.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "RunPipeline.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Solver/Placement.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <cmath>
#include <random>

using namespace loom;

namespace {

// Classes as the pass uses them; HBM holds data of the first three, SSD of
// the last.
const std::vector<std::string> Classes = {"aicore", "aicpu", "hbm_pim", "ssd"};
enum : unsigned { AICore, AICPU, PIM, SSD };

PlacementResource hbm(double Cap) {
  return {"HBM", Cap, {true, true, true, false}};
}
PlacementResource ssd(double Cap) {
  return {"SSD", Cap, {false, false, false, true}};
}

/// Transfer matrix: \p Off between different classes, 0 on the diagonal.
std::vector<double> uniformTransfer(double Off) {
  std::vector<double> M(16, Off);
  for (unsigned C = 0; C < 4; ++C)
    M[C * 4 + C] = 0;
  return M;
}

struct BruteForce {
  bool Feasible = false;
  double Objective = INFINITY;
  /// Optimum ignoring capacities (to tell capacity-bound cases apart).
  double Unconstrained = INFINITY;
};

BruteForce bruteForce(const PlacementRequest &R) {
  BruteForce B;
  std::vector<unsigned> Idx(R.Items.size(), 0), Class(R.Items.size());
  while (true) {
    for (unsigned I = 0; I < R.Items.size(); ++I)
      Class[I] = R.Items[I].Options[Idx[I]].Class;
    PlacementEvaluation Ev = evaluatePlacement(R, Class);
    B.Unconstrained = std::min(B.Unconstrained, Ev.Objective);
    if (Ev.Violations.empty()) {
      B.Feasible = true;
      B.Objective = std::min(B.Objective, Ev.Objective);
    }
    unsigned I = 0;
    for (; I < R.Items.size(); ++I) {
      if (++Idx[I] < R.Items[I].Options.size())
        break;
      Idx[I] = 0;
    }
    if (I == R.Items.size())
      return B;
  }
}

/// A random request: \p N items, each with a random non-empty subset of the
/// four classes; random (sometimes parallel or self) edges with random,
/// not necessarily metric transfer costs; random storages read by one to
/// three items; HBM and SSD capacities drawn so that some cases are
/// capacity-bound and some infeasible.
PlacementRequest randomRequest(unsigned Seed, unsigned N, unsigned NumEdges) {
  std::mt19937 Rng(Seed);
  auto Uni = [&](double Lo, double Hi) {
    return std::uniform_real_distribution<double>(Lo, Hi)(Rng);
  };
  auto Int = [&](unsigned Lo, unsigned Hi) {
    return std::uniform_int_distribution<unsigned>(Lo, Hi)(Rng);
  };
  PlacementRequest R;
  R.Classes = Classes;
  for (unsigned I = 0; I < N; ++I) {
    PlacementItem It;
    It.Name = "n" + std::to_string(I);
    It.Multiplicity = Int(0, 3) == 0 ? Int(2, 5) : 1;
    unsigned Mask = Int(1, 15);
    for (unsigned C = 0; C < 4; ++C)
      if (Mask & (1u << C))
        It.Options.push_back({C, Uni(0, 10)});
    R.Items.push_back(std::move(It));
  }
  for (unsigned E = 0; E < NumEdges; ++E) {
    PlacementEdge Ed;
    Ed.From = Int(0, N - 1);
    Ed.To = Int(0, N - 1);
    if (Ed.From == Ed.To && Int(0, 3))
      Ed.To = (Ed.To + 1) % N;
    Ed.Multiplicity = Int(1, 2);
    Ed.Cost.resize(16);
    for (unsigned A = 0; A < 4; ++A)
      for (unsigned B = 0; B < 4; ++B)
        Ed.Cost[A * 4 + B] = A == B && Int(0, 3) ? 0 : Uni(0, 6);
    R.Edges.push_back(std::move(Ed));
  }
  double Total = 0;
  for (unsigned S = 0, NS = Int(0, 4); S < NS; ++S) {
    PlacementStorage St;
    St.Name = "t" + std::to_string(S);
    St.Bytes = Int(1, 100);
    for (unsigned Rd = 0, NR = Int(1, 3); Rd < NR; ++Rd)
      St.Readers.push_back(Int(0, N - 1));
    Total += St.Bytes;
    R.Storages.push_back(std::move(St));
  }
  R.Resources.push_back(hbm(Int(0, 1) ? INFINITY : Uni(0, 1.1) * Total));
  R.Resources.push_back(ssd(Int(0, 2) ? INFINITY : Uni(0, 1.1) * Total));
  return R;
}

/// Runs \p NumCases random requests against brute force, with \p Opts;
/// when \p Method is given, every core must have been solved that way.
void checkAgainstBruteForce(
    const PlacementSolverOptions &Opts, unsigned NumEdgesScale,
    llvm::Optional<PlacementStats::Method> Method = llvm::None,
    unsigned NumCases = 400) {
  unsigned Cases = 0, CapacityBound = 0, Infeasible = 0, WithCore = 0;
  for (unsigned Seed = 1; Seed <= NumCases; ++Seed) {
    unsigned N = 2 + Seed % 7; // 2..8
    unsigned NumEdges = (Seed / 7) % (NumEdgesScale * N + 1);
    PlacementRequest R = randomRequest(Seed, N, NumEdges);
    BruteForce B = bruteForce(R);
    llvm::Expected<PlacementResult> Res = solvePlacement(R, Opts);
    ++Cases;
    if (!B.Feasible) {
      ++Infeasible;
      ASSERT_FALSE((bool)Res) << "seed " << Seed;
      std::string Msg = llvm::toString(Res.takeError());
      EXPECT_NE(Msg.find("capacit"), std::string::npos) << Msg;
      continue;
    }
    ASSERT_TRUE((bool)Res) << "seed " << Seed << ": "
                           << llvm::toString(Res.takeError());
    PlacementEvaluation Ev = evaluatePlacement(R, Res->Class);
    EXPECT_TRUE(Ev.Violations.empty()) << "seed " << Seed;
    EXPECT_NEAR(Res->Objective, Ev.Objective, 1e-12);
    EXPECT_NEAR(Res->Objective, B.Objective, 1e-9 * std::max(1.0, B.Objective))
        << "seed " << Seed;
    CapacityBound += B.Objective > B.Unconstrained + 1e-9;
    WithCore += Res->Stats.CoreItems > 0;
    if (Method && Res->Stats.CoreItems) {
      EXPECT_EQ(Res->Stats.CoreMethod, *Method) << "seed " << Seed;
    }
    EXPECT_EQ(Res->Stats.Fixed + Res->Stats.Eliminated + Res->Stats.CoreItems,
              N);
  }
  // The seeds exercise every path: capacity-bound optima, infeasible
  // requests, and cores left for Z3.
  EXPECT_EQ(Cases, NumCases);
  EXPECT_GE(CapacityBound, NumCases / 20);
  EXPECT_GE(Infeasible, NumCases / 20);
  EXPECT_GE(WithCore, NumCases / 8);
}

// Elimination plus Z3 on what is left: 400 requests of 2 to 8 items with up
// to 2 edges per item.
TEST(PlacementSolverTest, MatchesBruteForceOnRandomRequests) {
  checkAgainstBruteForce(PlacementSolverOptions(), 2);
}

// Each exact method for the core on its own, nothing eliminated first.
TEST(PlacementSolverTest, MatchesBruteForceWithEnumerationOnly) {
  PlacementSolverOptions Opts;
  Opts.Eliminate = false;
  checkAgainstBruteForce(Opts, 4, PlacementStats::Enumeration);
}

TEST(PlacementSolverTest, MatchesBruteForceWithParetoOnly) {
  PlacementSolverOptions Opts;
  Opts.Eliminate = false;
  Opts.MaxEnumeration = 0;
  Opts.MaxEliminationTable = 1e9;
  checkAgainstBruteForce(Opts, 4, PlacementStats::Pareto);
}

TEST(PlacementSolverTest, MatchesBruteForceWithZ3Only) {
  PlacementSolverOptions Opts;
  Opts.Eliminate = false;
  Opts.MaxEnumeration = 0;
  Opts.MaxParetoPoints = 0;
  checkAgainstBruteForce(Opts, 2, PlacementStats::Z3, 200);
}

// Denser graphs (up to 4 edges per item) and a small elimination limit, so
// that wide joints stay in the core, which Z3 solves.
TEST(PlacementSolverTest, MatchesBruteForceWithWideJointsInZ3) {
  PlacementSolverOptions Opts;
  Opts.MaxEliminationTable = 4;
  Opts.MaxEnumeration = 0;
  Opts.MaxParetoPoints = 0;
  checkAgainstBruteForce(Opts, 4, PlacementStats::Z3, 200);
}

// Hand-computed: a -> b -> c.
//   a: aicore 1.0;           b: aicore 4.0, hbm_pim 1.0;   c: aicore 1.0
//   edges a->b and b->c carry 2.0 between different classes.
// All on aicore: 1 + 4 + 1 = 6.0. b on hbm_pim: 1 + 1 + 1 + 2 + 2 = 7.0.
TEST(PlacementSolverTest, EvaluateHandComputed) {
  PlacementRequest R;
  R.Classes = Classes;
  R.Items = {{"a", {{AICore, 1.0}}, 1},
             {"b", {{AICore, 4.0}, {PIM, 1.0}}, 1},
             {"c", {{AICore, 1.0}}, 1}};
  R.Edges = {{0, 1, 1, uniformTransfer(2.0), 0},
             {1, 2, 1, uniformTransfer(2.0), 0}};
  PlacementEvaluation All = evaluatePlacement(R, {AICore, AICore, AICore});
  EXPECT_TRUE(All.Violations.empty());
  EXPECT_DOUBLE_EQ(All.ComputeSeconds, 6.0);
  EXPECT_DOUBLE_EQ(All.TransferSeconds, 0.0);
  PlacementEvaluation Pim = evaluatePlacement(R, {AICore, PIM, AICore});
  EXPECT_DOUBLE_EQ(Pim.ComputeSeconds, 3.0);
  EXPECT_DOUBLE_EQ(Pim.TransferSeconds, 4.0);
  EXPECT_DOUBLE_EQ(Pim.Objective, 7.0);
  llvm::Expected<PlacementResult> Res = solvePlacement(R);
  ASSERT_TRUE((bool)Res) << llvm::toString(Res.takeError());
  EXPECT_EQ(Res->Class, (std::vector<unsigned>{AICore, AICore, AICore}));
  EXPECT_DOUBLE_EQ(Res->Objective, 6.0);
  // With cheaper transfers (1.0 each) hbm_pim wins: 3 + 2 = 5.0 < 6.0.
  R.Edges[0].Cost = R.Edges[1].Cost = uniformTransfer(1.0);
  Res = solvePlacement(R);
  ASSERT_TRUE((bool)Res) << llvm::toString(Res.takeError());
  EXPECT_EQ(Res->Class, (std::vector<unsigned>{AICore, PIM, AICore}));
  EXPECT_DOUBLE_EQ(Res->Objective, 5.0);
  // The explanation numbers: moving b back to aicore costs +3 compute and
  // saves 2 of transfers.
  std::vector<ItemCosts> IC = computeItemCosts(R, Res->Class);
  EXPECT_DOUBLE_EQ(IC[1].Compute[AICore] - IC[1].Compute[PIM], 3.0);
  EXPECT_DOUBLE_EQ(IC[1].Transfer[PIM] - IC[1].Transfer[AICore], 2.0);
  EXPECT_TRUE(std::isinf(IC[1].Compute[AICPU]));
}

TEST(PlacementSolverTest, EvaluateListsViolations) {
  PlacementRequest R;
  R.Classes = Classes;
  R.Items = {{"emb", {{AICore, 1.0}, {SSD, 3.0}}, 1},
             {"mm", {{AICore, 2.0}}, 2}};
  R.Storages = {{"table", 100, {0}}, {"w", 30, {1}}};
  R.Resources = {hbm(120), ssd(1000)};
  // emb on aicore: HBM holds 100 + 30 = 130 > 120.
  PlacementEvaluation Ev = evaluatePlacement(R, {AICore, AICore});
  EXPECT_DOUBLE_EQ(Ev.ComputeSeconds, 1.0 + 2 * 2.0);
  EXPECT_DOUBLE_EQ(Ev.ResourceBytes[0], 130);
  EXPECT_DOUBLE_EQ(Ev.ResourceBytes[1], 0);
  ASSERT_EQ(Ev.Violations.size(), 1u);
  EXPECT_EQ(Ev.Violations[0],
            "HBM holds 130.0 B, more than its capacity 120.0 B");
  // mm on aicpu: not a candidate.
  Ev = evaluatePlacement(R, {SSD, AICPU});
  ASSERT_EQ(Ev.Violations.size(), 1u);
  EXPECT_EQ(Ev.Violations[0],
            "item 'mm' on 'aicpu', not one of its candidates");
  Ev = evaluatePlacement(R, {SSD});
  ASSERT_EQ(Ev.Violations.size(), 1u);
  EXPECT_EQ(Ev.Violations[0], "assignment has 1 classes for 2 items");
  // The solver moves the table to SSD: 3 + 4 = 7.
  llvm::Expected<PlacementResult> Res = solvePlacement(R);
  ASSERT_TRUE((bool)Res) << llvm::toString(Res.takeError());
  EXPECT_EQ(Res->Class, (std::vector<unsigned>{SSD, AICore}));
  EXPECT_DOUBLE_EQ(Res->Objective, 7.0);
}

// Three tables, HBM room for 100 of their 150 bytes beyond 10 pinned ones.
// Moving a table to SSD costs (ssd - aicore time):
//   a (60 B): 5.0 - 1.0 = 4.0;  b (50 B): 3.0 - 1.0 = 2.0;
//   c (40 B): 2.5 - 1.0 = 1.5.
// Off-HBM sets that leave <= 100 B: {a} (90), {b} (100), {a,b}, ... The
// cheapest is {b}: 2.0 (vs {a}: 4.0, {c}: 1.5 leaves 110 > 100).
TEST(PlacementSolverTest, CapacityBoundChoosesCheapestTablesToMove) {
  PlacementRequest R;
  R.Classes = Classes;
  R.Items = {{"ga", {{AICore, 1.0}, {SSD, 5.0}}, 1},
             {"gb", {{AICore, 1.0}, {SSD, 3.0}}, 1},
             {"gc", {{AICore, 1.0}, {SSD, 2.5}}, 1},
             {"mm", {{AICore, 1.0}, {AICPU, 9.0}}, 1}};
  for (unsigned I = 0; I < 3; ++I)
    R.Edges.push_back({I, 3, 1, uniformTransfer(0.25), 0});
  R.Storages = {{"a", 60, {0}}, {"b", 50, {1}}, {"c", 40, {2}}, {"w", 10, {3}}};
  R.Resources = {hbm(110), ssd(1e9)};
  llvm::Expected<PlacementResult> Res = solvePlacement(R);
  ASSERT_TRUE((bool)Res) << llvm::toString(Res.takeError());
  EXPECT_EQ(Res->Class, (std::vector<unsigned>{AICore, SSD, AICore, AICore}));
  // 1 + 3 + 1 + 1 compute, one crossing edge 0.25.
  EXPECT_DOUBLE_EQ(Res->Objective, 6.25);
  EXPECT_GT(Res->Stats.CoreItems, 0u);
  // A shared table stays in HBM if any reader stays on a class HBM holds:
  // ga and gb both read 'a'; only both on SSD free it.
  R.Storages[0].Readers = {0, 1};
  R.Storages[1].Bytes = 0;
  // Now off-HBM options: {ga, gb} frees 60 (cost 6.0), {gc} frees 40 and
  // leaves 60 + 10 = 70 <= 110: cost 1.5.
  Res = solvePlacement(R);
  ASSERT_TRUE((bool)Res) << llvm::toString(Res.takeError());
  EXPECT_EQ(Res->Class,
            (std::vector<unsigned>{AICore, AICore, AICore, AICore}));
  R.Resources[0].Capacity = 30;
  // 110 B; must free >= 80: {a via ga+gb, c} = 100 (cost 4 + 2 + 1.5 plus
  // three crossings 0.75).
  Res = solvePlacement(R);
  ASSERT_TRUE((bool)Res) << llvm::toString(Res.takeError());
  EXPECT_EQ(Res->Class, (std::vector<unsigned>{SSD, SSD, SSD, AICore}));
  EXPECT_DOUBLE_EQ(Res->Objective, 5.0 + 3.0 + 2.5 + 1.0 + 0.75);
}

// DLRM-style: 24 embedding tables feeding one interaction node, HBM too
// small for all of them. 2^24 joint choices is beyond enumeration; Pareto
// elimination solves the core (Z3's MaxSAT needs seconds for this
// knapsack). Moving table i to SSD costs its extra lookup time d_i
// plus the transfer t to the interaction node on aicore; which tables move
// is a knapsack (free at least Need bytes at least cost), solved here by a
// dynamic program over integer bytes.
TEST(PlacementSolverTest, ManyTablesKnapsack) {
  std::mt19937 Rng(11);
  std::uniform_int_distribution<int> ByteDist(1, 40);
  std::uniform_real_distribution<double> Extra(0.5, 5.0);
  const unsigned T = 24;
  const double Transfer = 0.3;
  PlacementRequest R;
  R.Classes = Classes;
  std::vector<int> B(T);
  std::vector<double> D(T);
  int Total = 0;
  for (unsigned I = 0; I < T; ++I) {
    B[I] = ByteDist(Rng);
    D[I] = Extra(Rng);
    Total += B[I];
    R.Items.push_back(
        {"g" + std::to_string(I), {{AICore, 1.0}, {SSD, 1.0 + D[I]}}, 1});
    R.Storages.push_back({"t" + std::to_string(I), (double)B[I], {I}});
  }
  R.Items.push_back({"interact", {{AICore, 2.0}}, 1});
  for (unsigned I = 0; I < T; ++I)
    R.Edges.push_back({I, T, 1, uniformTransfer(Transfer), 0});
  int Capacity = Total / 2;
  R.Resources = {hbm(Capacity), ssd(INFINITY)};
  // Best[b]: least cost of moving tables that free at least b bytes.
  int Need = Total - Capacity;
  std::vector<double> Best(Need + 1, INFINITY);
  Best[0] = 0;
  for (unsigned I = 0; I < T; ++I)
    for (int Bt = Need; Bt >= 0; --Bt)
      if (std::isfinite(Best[Bt])) {
        int To = std::min(Need, Bt + B[I]);
        Best[To] = std::min(Best[To], Best[Bt] + D[I] + Transfer);
      }
  double Expected = T * 1.0 + 2.0 + Best[Need];
  llvm::Expected<PlacementResult> Res = solvePlacement(R);
  ASSERT_TRUE((bool)Res) << llvm::toString(Res.takeError());
  EXPECT_EQ(Res->Stats.CoreMethod, PlacementStats::Pareto);
  EXPECT_EQ(Res->Stats.CoreItems, T);
  EXPECT_NEAR(Res->Objective, Expected, 1e-9);
  EXPECT_TRUE(evaluatePlacement(R, Res->Class).Violations.empty());
}

TEST(PlacementSolverTest, InfeasibleNamesTheBindingCapacity) {
  PlacementRequest R;
  R.Classes = Classes;
  R.Items = {{"mm", {{AICore, 1.0}, {AICPU, 2.0}}, 1},
             {"emb", {{AICore, 1.0}, {SSD, 2.0}}, 1}};
  R.Storages = {{"w", 100, {0}}, {"table", 40, {1}}};
  // 'w' must stay in HBM whatever happens: 100 B > 50 B.
  R.Resources = {hbm(50), ssd(1000)};
  llvm::Expected<PlacementResult> Res = solvePlacement(R);
  ASSERT_FALSE((bool)Res);
  EXPECT_EQ(llvm::toString(Res.takeError()),
            "HBM capacity binds: 100.0 B must stay in HBM (largest: 'w' "
            "100.0 B) but 50.0 B is free");
  // 'w' fits, the table fits neither beside it in HBM nor on the SSD.
  R.Resources = {hbm(120), ssd(30)};
  Res = solvePlacement(R);
  ASSERT_FALSE((bool)Res);
  EXPECT_EQ(llvm::toString(Res.takeError()),
            "HBM and SSD capacities bind together: no placement of 'table' "
            "40.0 B fits (HBM: 120.0 B free, 100.0 B already held; SSD: "
            "30.0 B free, 0 B already held)");
  // SSD alone binds when the table can only be on SSD.
  R.Items[1].Options = {{SSD, 2.0}};
  Res = solvePlacement(R);
  ASSERT_FALSE((bool)Res);
  EXPECT_EQ(llvm::toString(Res.takeError()),
            "SSD capacity binds: 40.0 B must stay in SSD (largest: 'table' "
            "40.0 B) but 30.0 B is free");
}

TEST(PlacementSolverTest, RejectsMalformedRequests) {
  PlacementRequest R;
  R.Classes = Classes;
  R.Items = {{"loop", {}, 1}};
  llvm::Expected<PlacementResult> Res = solvePlacement(R);
  ASSERT_FALSE((bool)Res);
  EXPECT_EQ(llvm::toString(Res.takeError()), "'loop' runs on no device class");
  R.Items = {{"a", {{AICore, 1.0}, {AICore, 2.0}}, 1}};
  Res = solvePlacement(R);
  ASSERT_FALSE((bool)Res);
  EXPECT_EQ(llvm::toString(Res.takeError()),
            "placement request: item 'a': class 'aicore' listed twice");
  R.Items = {{"a", {{AICore, 1.0}}, 1}};
  R.Edges = {{0, 0, 1, {1.0}, 0}};
  Res = solvePlacement(R);
  ASSERT_FALSE((bool)Res);
  EXPECT_EQ(llvm::toString(Res.takeError()),
            "placement request: edge 0: cost has 1 entries, expected 16");
  R.Edges = {{0, 3, 1, uniformTransfer(1), 0}};
  Res = solvePlacement(R);
  ASSERT_FALSE((bool)Res);
  EXPECT_EQ(llvm::toString(Res.takeError()),
            "placement request: edge 0: item index out of range");
}

// A 2,000-item chain with three candidates each reduces completely (no Z3)
// and matches a Viterbi pass written out here.
TEST(PlacementSolverTest, LongChainIsEliminatedExactly) {
  std::mt19937 Rng(7);
  std::uniform_real_distribution<double> Uni(0, 1);
  PlacementRequest R;
  R.Classes = Classes;
  unsigned N = 2000;
  for (unsigned I = 0; I < N; ++I)
    R.Items.push_back({"n" + std::to_string(I),
                       {{AICore, Uni(Rng)}, {AICPU, Uni(Rng)}, {PIM, Uni(Rng)}},
                       1});
  for (unsigned I = 0; I + 1 < N; ++I) {
    PlacementEdge E{I, I + 1, 1, std::vector<double>(16), 0};
    for (double &C : E.Cost)
      C = Uni(Rng);
    R.Edges.push_back(std::move(E));
  }
  // Viterbi over the first three classes.
  std::vector<double> Best(3);
  for (unsigned C = 0; C < 3; ++C)
    Best[C] = R.Items[0].Options[C].Seconds;
  for (unsigned I = 1; I < N; ++I) {
    std::vector<double> Next(3, INFINITY);
    for (unsigned B = 0; B < 3; ++B)
      for (unsigned A = 0; A < 3; ++A)
        Next[B] = std::min(Next[B], Best[A] + R.Edges[I - 1].Cost[A * 4 + B] +
                                        R.Items[I].Options[B].Seconds);
    Best = Next;
  }
  double Viterbi = *std::min_element(Best.begin(), Best.end());
  llvm::Expected<PlacementResult> Res = solvePlacement(R);
  ASSERT_TRUE((bool)Res) << llvm::toString(Res.takeError());
  EXPECT_EQ(Res->Stats.CoreItems, 0u);
  EXPECT_EQ(Res->Stats.Eliminated, N);
  EXPECT_NEAR(Res->Objective, Viterbi, 1e-9);
}

} // namespace

//===----------------------------------------------------------------------===//
// The pass's entry point for the search: one problem, solved per HBM budget
// and parameter split.
//===----------------------------------------------------------------------===//

namespace {

const std::string ToyHW = getSSDToyHW(/*Devices=*/8, /*WithAICPU=*/true);

// table: 1e8 x 64 x 4 B = 25.6e9 B = 23.8 GiB; w: 64 x 64 x 4 B = 16 KiB.
const char *EmbeddingModel = R"(<ir_version: 8, opset_import: ["" : 17]>
emb (int64[4096] ids) => (float[4096,64] y)
  <float[100000000,64] table, float[64,64] w>
{
  e = Gather(table, ids)
  y = MatMul(e, w)
}
)";

} // namespace

TEST(PlacementSolverTest, PlacerEvaluatesPerHBMBudgetAndShardFactor) {
  llvm::Expected<HardwareModel> HW = parseHardwareModel(ToyHW, "hw.yaml");
  ASSERT_TRUE((bool)HW) << llvm::toString(HW.takeError());
  CompilationUnit CU;
  CU.HW = &*HW;
  CU.Opts.Mode = RunMode::Infer;
  llvm::Expected<std::unique_ptr<Model>> M =
      importModelFromText(EmbeddingModel, "emb.onnxtxt");
  ASSERT_TRUE((bool)M) << llvm::toString(M.takeError());
  CU.M = std::move(*M);
  PassManager PM(getRegisteredPasses());
  ASSERT_FALSE((bool)PM.parsePipeline(
      "bind-symbols,infer-shapes,detect-layers,annotate-costs"));
  std::string Log;
  llvm::raw_string_ostream OS(Log);
  ASSERT_FALSE((bool)PM.run(CU, PassInstrumentation(), OS, OS));

  llvm::Expected<std::unique_ptr<DeviceClassPlacer>> P =
      DeviceClassPlacer::create(CU);
  ASSERT_TRUE((bool)P) << llvm::toString(P.takeError());
  double GiB = 1024.0 * 1024 * 1024;
  EXPECT_EQ(DeviceClassPlacer::getUsableHBMBytes(CU), 16 * GiB);
  auto ClassOf = [](const GraphPlacement &GP, unsigned N) {
    return GP.Classes[GP.NodeClass[N]];
  };
  // Unsplit, the 23.8 GiB table does not fit in 16 GiB: SSD.
  llvm::Expected<GraphPlacement> Whole = (*P)->place(16 * GiB, 1);
  ASSERT_TRUE((bool)Whole) << llvm::toString(Whole.takeError());
  EXPECT_EQ(ClassOf(*Whole, 0), "ssd");
  EXPECT_EQ(ClassOf(*Whole, 1), "aicore");
  EXPECT_DOUBLE_EQ(Whole->SSDParamBytes, 25.6e9);
  EXPECT_DOUBLE_EQ(Whole->HBMParamBytes, 64 * 64 * 4);
  // Split 8 ways (3.0 GiB per device) it fits: HBM, and the step is
  // faster (the Gather takes 7.13 us on aicore against 372.14 us on ssd).
  llvm::Expected<GraphPlacement> Split = (*P)->place(16 * GiB, 8);
  ASSERT_TRUE((bool)Split) << llvm::toString(Split.takeError());
  EXPECT_EQ(ClassOf(*Split, 0), "aicore");
  EXPECT_DOUBLE_EQ(Split->HBMParamBytes, (25.6e9 + 64 * 64 * 4) / 8);
  EXPECT_LT(Split->getStepSeconds(), Whole->getStepSeconds());
  // aicore runs both nodes: the Gather above plus the 4096x64x64 matmul.
  EXPECT_EQ(Split->ClassNodes[0], 2u);
  // Explanations on request: the SSD reason names the sizes.
  llvm::Expected<GraphPlacement> Explained = (*P)->place(16 * GiB, 1, true);
  ASSERT_TRUE((bool)Explained) << llvm::toString(Explained.takeError());
  ASSERT_EQ(Explained->Nodes.size(), 2u);
  EXPECT_EQ(Explained->Nodes[0].Reason,
            "table 23.8 GiB > free HBM 16.0 GiB; reads 1.0 MiB/step at "
            "4.0 GB/s");
  // A budget below the matmul's 16 KiB weight: nothing fits.
  llvm::Expected<GraphPlacement> None = (*P)->place(1000, 1);
  ASSERT_FALSE((bool)None);
  EXPECT_EQ(llvm::toString(None.takeError()),
            "assign-device-classes: HBM capacity binds: 16.0 KiB must stay "
            "in HBM (largest: 'w' 16.0 KiB) but 1000.0 B is free");
  // The one-shot form matches.
  llvm::Expected<GraphPlacement> Once = placeForPlan(CU, 16 * GiB, 8);
  ASSERT_TRUE((bool)Once) << llvm::toString(Once.takeError());
  EXPECT_EQ(Once->NodeClass, Split->NodeClass);
}
