//===- SearchTest.cpp - The parallelism search against brute force --------===//
//
// Random small transformers (ONNX text, shape-only weights) on random
// two-level clusters with small HBM, so that memory, TP limits, TP
// divisibility, batch divisibility and interleaving all bind somewhere:
//  - the search's space equals a brute-force enumeration written here from
//    DESIGN §6's rules, independently of lib/Planner/Search.cpp;
//  - the search's answer equals the best of that enumeration, every
//    candidate evaluated in full;
//  - pruning never changes the answer (top 5 with and without it);
//  - the stage partition equals brute force over all compositions.
//
//===----------------------------------------------------------------------===//

#include "SearchTestCases.h"
#include "loom/ONNX/ONNX.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"
#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <set>

using namespace loom;
using namespace llvm;

namespace loom {
namespace searchtest {

std::string RandomCase::str() const {
  std::string S;
  raw_string_ostream(S) << "L=" << Layers << " h=" << Hidden
                        << " heads=" << Heads << " f=" << FFN << " V=" << Vocab
                        << " B=" << Batch << " S=" << Seq << " topo=" << Inner
                        << "x" << Outer << " tplevels=" << TPLevels
                        << " hbm=" << HBMKiB << "KiB "
                        << (Train ? "train" : "infer");
  return S;
}

RandomCase makeRandomCase(unsigned Seed) {
  std::mt19937 R(Seed);
  auto Pick = [&](std::initializer_list<unsigned> L) {
    return *(L.begin() + R() % L.size());
  };
  RandomCase C;
  C.Layers = 2 + R() % 4;
  C.Heads = Pick({2, 3, 4, 6, 8});
  C.Hidden = C.Heads * Pick({4, 8});
  C.FFN = C.Hidden * Pick({2, 3, 4});
  C.Vocab = Pick({48, 64, 96});
  C.Batch = Pick({4, 6, 8, 12});
  C.Seq = Pick({8, 16});
  C.Inner = Pick({2, 4});
  C.Outer = Pick({1, 2, 3});
  C.TPLevels = C.Outer > 1 && R() % 4 == 0 ? 2 : 1;
  C.HBMKiB = Pick({64, 256, 512, 1024, 2048, 4096, 16384});
  C.Train = R() % 5 != 0;
  return C;
}

/// Pre-norm transformer: per layer LayerNorm, Q/K/V projections reshaped
/// to heads, softmax attention, output projection, residual, LayerNorm,
/// ReLU MLP, residual; embedding Gather before, LayerNorm and head after.
std::string makeTransformer(const RandomCase &C) {
  unsigned H = C.Hidden, A = C.Heads, D = H / A, F = C.FFN, V = C.Vocab,
           B = C.Batch, S = C.Seq;
  std::string Decl, Body;
  raw_string_ostream DS(Decl), BS(Body);
  DS << "float[" << V << "," << H << "] emb, float[" << H << "," << V
     << "] head, float[" << H << "] lnf_g, float[" << H << "] lnf_b";
  BS << "  s4 = Constant <value = int64[4] {" << B << "," << S << "," << A
     << "," << D << "}> ()\n";
  BS << "  s3 = Constant <value = int64[3] {" << B << "," << S << "," << H
     << "}> ()\n";
  BS << "  h0 = Gather (emb, ids)\n";
  for (unsigned L = 0; L < C.Layers; ++L) {
    std::string I = std::to_string(L), N = std::to_string(L + 1);
    DS << ", float[" << H << "] g" << I << ", float[" << H << "] b" << I;
    for (const char *W : {"wq", "wk", "wv", "wo"})
      DS << ", float[" << H << "," << H << "] " << W << I;
    DS << ", float[" << H << "] g2_" << I << ", float[" << H << "] b2_" << I
       << ", float[" << H << "," << F << "] w1_" << I << ", float[" << F << ","
       << H << "] w2_" << I;
    BS << "  n" << I << " = LayerNormalization (h" << I << ", g" << I << ", b"
       << I << ")\n";
    for (const char *X : {"q", "k", "v"}) {
      BS << "  " << X << I << " = MatMul (n" << I << ", w" << X << I << ")\n";
      BS << "  " << X << "r" << I << " = Reshape (" << X << I << ", s4)\n";
    }
    BS << "  qt" << I << " = Transpose <perm = [0, 2, 1, 3]> (qr" << I << ")\n";
    BS << "  kt" << I << " = Transpose <perm = [0, 2, 3, 1]> (kr" << I << ")\n";
    BS << "  vt" << I << " = Transpose <perm = [0, 2, 1, 3]> (vr" << I << ")\n";
    BS << "  sc" << I << " = MatMul (qt" << I << ", kt" << I << ")\n";
    BS << "  p" << I << " = Softmax <axis = -1> (sc" << I << ")\n";
    BS << "  o" << I << " = MatMul (p" << I << ", vt" << I << ")\n";
    BS << "  ot" << I << " = Transpose <perm = [0, 2, 1, 3]> (o" << I << ")\n";
    BS << "  om" << I << " = Reshape (ot" << I << ", s3)\n";
    BS << "  a" << I << " = MatMul (om" << I << ", wo" << I << ")\n";
    BS << "  r" << I << " = Add (h" << I << ", a" << I << ")\n";
    BS << "  m" << I << " = LayerNormalization (r" << I << ", g2_" << I
       << ", b2_" << I << ")\n";
    BS << "  u" << I << " = MatMul (m" << I << ", w1_" << I << ")\n";
    BS << "  e" << I << " = Relu (u" << I << ")\n";
    BS << "  d" << I << " = MatMul (e" << I << ", w2_" << I << ")\n";
    BS << "  h" << N << " = Add (r" << I << ", d" << I << ")\n";
  }
  BS << "  f = LayerNormalization (h" << C.Layers << ", lnf_g, lnf_b)\n";
  BS << "  y = MatMul (f, head)\n";
  std::string Text;
  raw_string_ostream OS(Text);
  OS << "<ir_version: 8, opset_import: [\"\" : 17]>\n"
     << "g (int64[" << B << "," << S << "] ids) => (float[" << B << "," << S
     << "," << V << "] y)\n<" << DS.str() << ">\n{\n"
     << BS.str() << "}\n";
  return OS.str();
}

std::string makeHardware(const RandomCase &C) {
  std::string Y;
  raw_string_ostream OS(Y);
  OS << "name: test\ndevice:\n  name: npu\n  classes:\n"
     << "    aicore: {throughput: {fp32: 20GFLOPS}, vector_throughput: "
        "{fp32: 2GFLOPS}, launch_overhead: 50ns, ops: [\"*\"]}\n"
     << "  memory:\n    hbm: {capacity: " << C.HBMKiB
     << "KiB, bandwidth: 100GB/s}\n"
     << "topology:\n"
     << "  - {name: hccs, size: " << C.Inner
     << ", bandwidth: 100GB/s, latency: 100ns, allow_tp: true}\n";
  if (C.Outer > 1)
    OS << "  - {name: roce, size: " << C.Outer
       << ", bandwidth: 5GB/s, latency: 2us, allow_tp: "
       << (C.TPLevels > 1 ? "true" : "false") << "}\n";
  return OS.str();
}

Fixture::Fixture(const RandomCase &RC) : C(RC) {
  Expected<HardwareModel> H = parseHardwareModel(makeHardware(C), "hw.yaml");
  EXPECT_TRUE(!!H) << (H ? "" : toString(H.takeError()));
  HW = std::move(*H);
  auto M = importModelFromText(makeTransformer(C), "model.onnxtxt");
  EXPECT_TRUE(!!M) << (M ? "" : toString(M.takeError()));
  CU.M = std::move(*M);
  CU.HW = &HW;
  PassManager PM(getRegisteredPasses());
  EXPECT_FALSE(!!PM.parsePipeline("infer-shapes,detect-layers,annotate-costs"));
  std::string Sink;
  raw_string_ostream OS(Sink);
  Error E = PM.run(CU, PassInstrumentation(), OS, OS);
  EXPECT_FALSE(!!E) << toString(std::move(E));
  EO.Train = C.Train;
  EO.Batch = C.Batch;
  EO.Seq = C.Seq;
  EO.CommBufferBytes = 16 << 10;
  Eval = std::make_unique<PlanEvaluator>(CU.M->getGraph(), CU.Layers,
                                         CU.NodeCosts, HW, EO);
}

uint64_t Fixture::getDevices() const { return (uint64_t)C.Inner * C.Outer; }

Expected<SearchResult> Fixture::search(const SearchOptions &O) const {
  return searchPlans(*Eval, CU.M->getGraph(), CU.Layers, HW, EO, O);
}

std::vector<uint64_t> divisorsOf(uint64_t N) {
  std::vector<uint64_t> D;
  for (uint64_t I = 1; I <= N; ++I)
    if (N % I == 0)
      D.push_back(I);
  return D;
}

/// DESIGN §6's space for \p F, written from the rules, not from Search.cpp:
/// tp | devices, tp <= the TP domain, tp | gcd(hidden, ffn, vocab, heads)
/// (the dims Megatron splits: columns/rows of the projections and the MLP,
/// the vocabulary, the heads the Q/K/V reshapes land on), pp <= layers,
/// dp = devices/(tp pp) | batch, mb | batch/dp, sp only with tp > 1,
/// recompute and ZeRO when training (ZeRO only with dp > 1), balanced
/// boundaries when pp > 1 and strictly better balanced than the even split,
/// vpp > 1 when pp > 1, nmb % pp == 0 and vpp | blocks/pp with the blocks
/// split evenly; gradients fp32, or bf16 when training with dp > 1; every
/// order of the mesh axes above tp that puts the axes of size > 1 in a
/// sequence no earlier order (getAllAxisOrders) has.
/// The distinct meshes at these sizes, by hand: the default order, and
/// every other sequence of the axes of size > 1, those innermost and the
/// axes of size 1 outside in the default order.
std::vector<AxisOrder> meshesOf(unsigned EP, unsigned DP, unsigned PP) {
  auto Size = [&](MeshAxis A) {
    return A == MeshAxis::EP ? EP : A == MeshAxis::DP ? DP / EP : PP;
  };
  std::vector<MeshAxis> Big, Small;
  for (MeshAxis A : DefaultAxisOrder)
    (Size(A) > 1 ? Big : Small).push_back(A);
  std::vector<AxisOrder> Out = {DefaultAxisOrder};
  std::sort(Big.begin(), Big.end());
  do {
    std::vector<MeshAxis> Seq = Big;
    Seq.insert(Seq.end(), Small.begin(), Small.end());
    AxisOrder O = {Seq[0], Seq[1], Seq[2]};
    std::vector<MeshAxis> DefaultBig;
    for (MeshAxis A : DefaultAxisOrder)
      if (Size(A) > 1)
        DefaultBig.push_back(A);
    if (Big != DefaultBig)
      Out.push_back(O);
  } while (std::next_permutation(Big.begin(), Big.end()));
  return Out;
}

std::vector<ParallelPlan> enumerateByHand(const Fixture &F) {
  const RandomCase &C = F.C;
  uint64_t N = F.getDevices();
  uint64_t TPLimit = C.TPLevels > 1 ? N : C.Inner;
  // tp must divide one of the dims the rules split (hidden, FFN,
  // vocabulary, heads); where it divides only some, the ops it cannot
  // split run replicated (issue 30), priced by the evaluator.
  auto Splits = [&](uint64_t TP) {
    return TP == 1 || C.Hidden % TP == 0 || C.FFN % TP == 0 ||
           C.Vocab % TP == 0 || C.Heads % TP == 0;
  };
  unsigned NL = F.Eval->getNumLayers();
  // Embedding and head are the prologue and epilogue layers.
  unsigned Blocks = NL - 2;
  std::vector<ParallelPlan> Out;
  for (uint64_t TP : divisorsOf(N)) {
    if (TP > TPLimit || !Splits(TP))
      continue;
    for (uint64_t PP : divisorsOf(N / TP)) {
      if (PP > NL)
        continue;
      uint64_t DP = N / (TP * PP);
      if (C.Batch % DP)
        continue;
      ParallelPlan Probe;
      Probe.PP = PP;
      std::vector<unsigned> Even = cantFail(F.Eval->getStageLayers(Probe));
      for (uint64_t MB : divisorsOf(C.Batch / DP))
        for (bool SP : {false, true}) {
          if (SP && TP == 1)
            continue;
          for (int RC = 0; RC < (C.Train ? 3 : 1); ++RC) {
            std::vector<std::pair<unsigned, std::vector<unsigned>>> Layouts;
            Layouts.push_back({1, {}});
            if (PP > 1) {
              std::vector<double> Work;
              for (unsigned L = 0; L < NL; ++L) {
                Work.push_back(getLayerWork(F.Eval->getLayerTime(L, TP, MB, SP),
                                            (Recompute)RC, C.Train));
              }
              std::vector<unsigned> Bal = partitionStages(Work, PP);
              if (Bal != Even &&
                  getBottleneck(Work, Bal) < getBottleneck(Work, Even))
                Layouts.push_back({1, Bal});
              uint64_t NMB = C.Batch / (DP * MB);
              if (NMB % PP == 0 && Blocks % PP == 0)
                for (uint64_t V : divisorsOf(Blocks / PP))
                  if (V > 1)
                    Layouts.push_back({(unsigned)V, {}});
            }
            for (auto &Lay : Layouts)
              for (unsigned Z = 0; Z < (C.Train && DP > 1 ? 4u : 1u); ++Z)
                for (unsigned G = 0; G < (C.Train && DP > 1 ? 2u : 1u); ++G)
                  for (const AxisOrder &O : meshesOf(1, DP, PP)) {
                    ParallelPlan P;
                    P.TP = TP;
                    P.PP = PP;
                    P.DP = DP;
                    P.SP = SP;
                    P.MicroBatchSize = MB;
                    P.NumMicroBatches = C.Batch / (DP * MB);
                    P.VirtualStages = Lay.first;
                    P.StageLayers = Lay.second;
                    P.RC = (Recompute)RC;
                    P.ZeroStage = Z;
                    P.Grad = G ? GradPrecision::BF16 : GradPrecision::FP32;
                    P.Order = O;
                    Out.push_back(P);
                  }
          }
        }
    }
  }
  return Out;
}

/// The best plan of \p Plans by full evaluation, or None if none fits.
Optional<PlanCost> bruteForceBest(const Fixture &F,
                                  const std::vector<ParallelPlan> &Plans) {
  Optional<PlanCost> Best;
  for (const ParallelPlan &P : Plans) {
    PlanCost PC = cantFail(F.Eval->evaluate(P));
    if (PC.FitsMemory && (!Best || isBetterPlan(PC, *Best)))
      Best = PC;
  }
  return Best;
}

} // namespace searchtest
} // namespace loom

using namespace loom::searchtest;

namespace {

constexpr unsigned NumCases = 24;

/// The space as enumerateByHand and the Z3 model state it: every device
/// used (plans that leave devices idle are tested in IdleDevicesTest.cpp).
SearchOptions fullCluster() {
  SearchOptions O;
  O.AllowIdle = false;
  return O;
}

TEST(SearchTest, SpaceMatchesTheRules) {
  for (unsigned Seed = 1; Seed <= NumCases; ++Seed) {
    Fixture F(makeRandomCase(Seed));
    SCOPED_TRACE("seed " + std::to_string(Seed) + ": " + F.C.str());
    std::vector<ParallelPlan> Mine = enumerateByHand(F);
    std::vector<ParallelPlan> Theirs = enumerateCandidates(
        *F.Eval, F.CU.M->getGraph(), F.CU.Layers, F.HW, F.EO, fullCluster());
    std::multiset<std::string> A, B;
    for (const ParallelPlan &P : Mine)
      A.insert(P.str());
    for (const ParallelPlan &P : Theirs)
      B.insert(P.str());
    std::vector<std::string> OnlyMine, OnlyTheirs;
    std::set_difference(A.begin(), A.end(), B.begin(), B.end(),
                        std::back_inserter(OnlyMine));
    std::set_difference(B.begin(), B.end(), A.begin(), A.end(),
                        std::back_inserter(OnlyTheirs));
    EXPECT_TRUE(OnlyMine.empty()) << "not searched, e.g. " << OnlyMine[0];
    EXPECT_TRUE(OnlyTheirs.empty()) << "not allowed, e.g. " << OnlyTheirs[0];
    EXPECT_FALSE(A.empty());
  }
}

TEST(SearchTest, MatchesBruteForce) {
  unsigned Feasible = 0, Infeasible = 0;
  for (unsigned Seed = 1; Seed <= NumCases; ++Seed) {
    Fixture F(makeRandomCase(Seed));
    SCOPED_TRACE("seed " + std::to_string(Seed) + ": " + F.C.str());
    Optional<PlanCost> Brute = bruteForceBest(F, enumerateByHand(F));
    Expected<SearchResult> R = F.search(fullCluster());
    ASSERT_TRUE(!!R) << toString(R.takeError());
    if (!Brute) {
      ++Infeasible;
      EXPECT_TRUE(R->Top.empty());
      EXPECT_FALSE(R->Floors.empty());
      for (const MemoryFloor &MF : R->Floors)
        EXPECT_GT(MF.Bytes, F.C.HBMKiB * 1024);
      continue;
    }
    ++Feasible;
    ASSERT_FALSE(R->Top.empty());
    EXPECT_EQ(R->Top[0].Plan.str(), Brute->Plan.str());
    EXPECT_EQ(R->Top[0].StepTimeS, Brute->StepTimeS);
    EXPECT_TRUE(R->Top[0].FitsMemory);
  }
  // The random cases exercise both outcomes.
  EXPECT_GE(Feasible, 12u);
  EXPECT_GE(Infeasible, 1u);
}

TEST(SearchTest, PruningNeverChangesTheAnswer) {
  uint64_t Simulated = 0, All = 0;
  for (unsigned Seed = 1; Seed <= NumCases; ++Seed) {
    Fixture F(makeRandomCase(Seed));
    SCOPED_TRACE("seed " + std::to_string(Seed) + ": " + F.C.str());
    SearchOptions Pruned, Full;
    Pruned.TopK = Full.TopK = 5;
    Full.Prune = false;
    Expected<SearchResult> A = F.search(Pruned), B = F.search(Full);
    ASSERT_TRUE(A && B);
    ASSERT_EQ(A->Top.size(), B->Top.size());
    for (unsigned I = 0; I < A->Top.size(); ++I) {
      EXPECT_EQ(A->Top[I].Plan.str(), B->Top[I].Plan.str()) << "rank " << I;
      EXPECT_EQ(A->Top[I].StepTimeS, B->Top[I].StepTimeS);
    }
    ASSERT_EQ(!!A->OtherDegrees, !!B->OtherDegrees);
    if (A->OtherDegrees)
      EXPECT_EQ(A->OtherDegrees->Plan.str(), B->OtherDegrees->Plan.str());
    EXPECT_EQ(A->Stats.Candidates, B->Stats.Candidates);
    Simulated += A->Stats.Simulated;
    All += B->Stats.Simulated;
  }
  // Pruning must also pay off: far fewer simulations than candidates.
  EXPECT_LT(Simulated * 4, All);
}

TEST(SearchTest, FixedChoicesAreHonoured) {
  for (unsigned Seed = 1; Seed <= NumCases; ++Seed) {
    Fixture F(makeRandomCase(Seed));
    SCOPED_TRACE("seed " + std::to_string(Seed) + ": " + F.C.str());
    // Fix tp to every value the space allows; the answer must be the brute
    // force's best among plans with that tp.
    std::vector<ParallelPlan> All = enumerateByHand(F);
    std::set<unsigned> TPs;
    for (const ParallelPlan &P : All)
      TPs.insert(P.TP);
    for (unsigned TP : TPs) {
      std::vector<ParallelPlan> Sub;
      for (const ParallelPlan &P : All)
        if (P.TP == TP)
          Sub.push_back(P);
      Optional<PlanCost> Brute = bruteForceBest(F, Sub);
      SearchOptions O = fullCluster();
      O.Fixed.TP = TP;
      Expected<SearchResult> R = F.search(O);
      ASSERT_TRUE(!!R);
      ASSERT_EQ(!!Brute, !R->Top.empty()) << "tp=" << TP;
      if (Brute)
        EXPECT_EQ(R->Top[0].Plan.str(), Brute->Plan.str()) << "tp=" << TP;
    }
    // Fix tp and pp: one (tp, pp) in the space, so no best plan with other
    // degrees to keep (the pruning threshold is the K-th best alone).
    std::set<std::pair<unsigned, unsigned>> Pairs;
    for (const ParallelPlan &P : All)
      Pairs.insert({P.TP, P.PP});
    for (auto TPPP : Pairs) {
      std::vector<ParallelPlan> Sub;
      for (const ParallelPlan &P : All)
        if (P.TP == TPPP.first && P.PP == TPPP.second)
          Sub.push_back(P);
      Optional<PlanCost> Brute = bruteForceBest(F, Sub);
      SearchOptions O = fullCluster();
      O.Fixed.TP = TPPP.first;
      O.Fixed.PP = TPPP.second;
      Expected<SearchResult> R = F.search(O);
      ASSERT_TRUE(!!R);
      ASSERT_EQ(!!Brute, !R->Top.empty());
      EXPECT_FALSE(R->OtherDegrees);
      if (Brute)
        EXPECT_EQ(R->Top[0].Plan.str(), Brute->Plan.str())
            << "tp=" << TPPP.first << ",pp=" << TPPP.second;
    }
  }
}

TEST(SearchTest, TPDivisibilityFollowsTheHeads) {
  // h = 48, 6 heads of 8, ffn 192, vocab 96: the splits land on 48 and 192
  // (projection columns and rows), 96 (vocabulary) and 6 (heads, dim 2 of
  // the Q/K/V reshapes [B, S, 6, 8]); gcd = 6.
  RandomCase C;
  C.Hidden = 48;
  C.Heads = 6;
  C.FFN = 192;
  C.Vocab = 96;
  Fixture F(C);
  TPDivisibility D = computeTPDivisibility(F.CU.M->getGraph());
  EXPECT_EQ(D.Divisor, 6u);
  EXPECT_EQ(D.Why, "6 = dim 2 of 'qr0'");
  // 48, 96, 192 and 6.
  EXPECT_EQ(D.NumSplitDims, 4u);
  EXPECT_TRUE(findExperts(F.CU.M->getGraph(), F.CU.Layers).empty());
}

TEST(SearchTest, NoFeasiblePlanGivesFloors) {
  RandomCase C;
  C.HBMKiB = 16; // below any plan's memory
  Fixture F(C);
  Expected<SearchResult> R = F.search(fullCluster());
  ASSERT_TRUE(!!R);
  EXPECT_TRUE(R->Top.empty());
  // 4 x 2 devices, TP inside the 4-device domain, 4 layers (embedding,
  // 2 blocks, head): (tp, pp) in {1, 2, 4} x {1, 2, 4}, tp * pp | 8.
  std::set<std::pair<unsigned, unsigned>> Pairs;
  for (const MemoryFloor &MF : R->Floors) {
    Pairs.insert({MF.TP, MF.PP});
    EXPECT_GT(MF.Bytes, 16 * 1024.0);
    // The floor is the least memory over the pair's candidates.
    for (const ParallelPlan &P : enumerateByHand(F))
      if (P.TP == MF.TP && P.PP == MF.PP)
        EXPECT_GE(cantFail(F.Eval->evaluate(P)).MaxMemoryBytes, MF.Bytes);
  }
  std::set<std::pair<unsigned, unsigned>> Want = {
      {1, 1}, {1, 2}, {1, 4}, {2, 1}, {2, 2}, {2, 4}, {4, 1}, {4, 2}};
  EXPECT_EQ(Pairs, Want);
}

TEST(SearchTest, RejectsExpertParallelismWithoutExperts) {
  RandomCase C;
  Fixture F(C);
  SearchOptions O;
  O.Fixed.EP = 2;
  Expected<SearchResult> R = F.search(O);
  ASSERT_FALSE(!!R);
  EXPECT_EQ(toString(R.takeError()),
            "--plan ep=2: the model has no experts (no stacked [E, d, f] "
            "expert weights and no unrolled expert branches); use ep=1");
}

//===-- Stage partition ---------------------------------------------------===//

/// Every composition of \p L into \p P positive parts, in lexicographic
/// order.
void forEachComposition(
    unsigned L, unsigned P,
    const std::function<void(const std::vector<unsigned> &)> &Fn) {
  std::vector<unsigned> C;
  std::function<void(unsigned, unsigned)> Rec = [&](unsigned Left,
                                                    unsigned Parts) {
    if (Parts == 1) {
      C.push_back(Left);
      Fn(C);
      C.pop_back();
      return;
    }
    for (unsigned K = 1; K + Parts - 1 <= Left; ++K) {
      C.push_back(K);
      Rec(Left - K, Parts - 1);
      C.pop_back();
    }
  };
  Rec(L, P);
}

TEST(SearchTest, StagePartitionMatchesBruteForce) {
  std::mt19937 R(7);
  unsigned Cases = 0;
  for (unsigned Iter = 0; Iter < 400; ++Iter) {
    unsigned L = 1 + R() % 11, P = 1 + R() % L;
    std::vector<double> Cost(L);
    // Small integers (many ties), zeros, and irregular values.
    for (double &C : Cost)
      C = Iter % 3 == 0 ? R() % 4 : Iter % 3 == 1 ? (R() % 1000) / 7.0 : 1.0;
    double First = Iter % 4 == 0 ? (R() % 5) : 0.0;
    double Last = Iter % 5 == 0 ? (R() % 5) / 3.0 : 0.0;
    double BestCost = INFINITY;
    std::vector<unsigned> BestCounts;
    forEachComposition(L, P, [&](const std::vector<unsigned> &C) {
      double B = getBottleneck(Cost, C, First, Last);
      if (B < BestCost) { // strict: the first optimum is the lexicographic
        BestCost = B;     // smallest
        BestCounts = C;
      }
    });
    std::vector<unsigned> Got = partitionStages(Cost, P, First, Last);
    SCOPED_TRACE("iteration " + std::to_string(Iter));
    EXPECT_EQ(getBottleneck(Cost, Got, First, Last), BestCost);
    EXPECT_EQ(Got, BestCounts);
    ++Cases;
  }
  EXPECT_EQ(Cases, 400u);
}

TEST(SearchTest, StagePartitionByHand) {
  // Embedding 1, blocks 4, 4, 4, 4, head 3 on 3 stages: 5 | 8 | 7 has
  // bottleneck 8; so does 1+4 | 4+4 | 4+3 (the same), and no split does
  // better (total 20 > 3 * 6.67 and stages are whole layers).
  std::vector<double> Cost = {1, 4, 4, 4, 4, 3};
  EXPECT_EQ(partitionStages(Cost, 3), (std::vector<unsigned>{2, 2, 2}));
  EXPECT_EQ(getBottleneck(Cost, {2, 2, 2}), 8.0);
  // 4 more on the first stage: 1+4+4 | 4+4 | 4+3 costs 9, 8, 7; moving a
  // block off stage 0 gives 1+4 | 4+4+4 | 4+3 (12) or 1+4 | 4+4 | 4+4+3
  // (11): 2 | 2 | 2 stays optimal at 9.
  EXPECT_EQ(partitionStages(Cost, 3, 4, 0), (std::vector<unsigned>{2, 2, 2}));
  EXPECT_EQ(getBottleneck(Cost, {2, 2, 2}, 4, 0), 9.0);
  // Uniform layers, 8 on 3 stages: 2 | 3 | 3 (fewest layers first).
  EXPECT_EQ(partitionStages(std::vector<double>(8, 1.0), 3),
            (std::vector<unsigned>{2, 3, 3}));
}

} // namespace
