//===- ShardTest.cpp - Slicing, mesh coordinates, the emitted program ----===//
#include "Passes.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Planner/Search.h"
#include "loom/Shard/OutputDir.h"
#include "loom/Shard/Schedule.h"
#include "loom/Shard/Sharding.h"
#include "loom/Shard/SlicedTensorData.h"
#include "gtest/gtest.h"
#include <algorithm>
#include <cstring>

using namespace loom;
using namespace llvm;

namespace {

std::shared_ptr<const TensorData> iota(unsigned N) {
  std::vector<char> B(N * 4);
  for (int32_t I = 0; I < (int32_t)N; ++I)
    std::memcpy(B.data() + 4 * I, &I, 4);
  return std::make_shared<BufferTensorData>(std::move(B));
}

std::vector<int32_t> ints(const TensorData &D) {
  std::vector<int32_t> Out(D.getSize() / 4);
  cantFail(D.readAll(reinterpret_cast<char *>(Out.data())));
  return Out;
}

TEST(SlicedTensorData, ColumnsRowsAndBlocks) {
  // A 4 x 6 matrix holding 0..23 row by row.
  auto Src = iota(24);
  // Columns split in 2: rank 1 holds columns 3..5 of every row.
  SlicedTensorData Cols(Src, {4, 6}, 4, 1, {}, 2, 1);
  EXPECT_EQ(Cols.getSize(), 4u * 3 * 4);
  EXPECT_EQ(ints(Cols),
            (std::vector<int32_t>{3, 4, 5, 9, 10, 11, 15, 16, 17, 21, 22, 23}));
  // Rows split in 4: rank 2 holds row 2.
  SlicedTensorData Rows(Src, {4, 6}, 4, 0, {}, 4, 2);
  EXPECT_EQ(ints(Rows), (std::vector<int32_t>{12, 13, 14, 15, 16, 17}));
  // Fused blocks of 2 and 4 columns (Q | KV), each split in 2: rank 1
  // holds column 1 of the first block and columns 4, 5 of the second.
  SlicedTensorData Blocks(Src, {4, 6}, 4, 1, {2, 4}, 2, 1);
  EXPECT_EQ(ints(Blocks),
            (std::vector<int32_t>{1, 4, 5, 7, 10, 11, 13, 16, 17, 19, 22, 23}));
  // getBytes() agrees with readAll().
  Expected<ArrayRef<char>> B = Blocks.getBytes();
  ASSERT_TRUE(!!B);
  int32_t First;
  std::memcpy(&First, B->data(), 4);
  EXPECT_EQ(First, 1);
}

TEST(Mesh, RankCoordinatesAndGroups) {
  ParallelPlan P;
  P.DP = 4;
  P.TP = 2;
  P.PP = 2;
  P.EP = 2;
  // rank = (pp * dp + dp_idx) * tp + tp_idx: 13 = (1 * 4 + 2) * 2 + 1.
  RankCoords C = getRankCoords(P, 13);
  EXPECT_EQ(C.PP, 1u);
  EXPECT_EQ(C.DP, 2u);
  EXPECT_EQ(C.TP, 1u);
  EXPECT_EQ(C.EP, 0u);      // dp_idx % ep
  EXPECT_EQ(C.DPOuter, 1u); // dp_idx / ep
  EXPECT_EQ(getGroupRanks(P, "tp", 13), (std::vector<unsigned>{12, 13}));
  EXPECT_EQ(getGroupRanks(P, "pp", 13), (std::vector<unsigned>{5, 13}));
  EXPECT_EQ(getGroupRanks(P, "dp", 13), (std::vector<unsigned>{9, 11, 13, 15}));
  // ep: dp_idx 2 and 3 (dp_outer 1); dp_ep: dp_idx 0 and 2 (ep_idx 0).
  EXPECT_EQ(getGroupRanks(P, "ep", 13), (std::vector<unsigned>{13, 15}));
  EXPECT_EQ(getGroupRanks(P, "dp_ep", 13), (std::vector<unsigned>{9, 13}));
}

TEST(Mesh, TPAndCPSplitTheInnerAxis) {
  // tp 2 beside cp 2 (cp right outside tp), dp 2: the inner axis holds
  // tp_idx + 2 cp_idx. Rank 5 = inner index 1 (tp 1, cp 0) of dp rank 1.
  ShardingResult R;
  R.Plan.TP = 4;
  R.Plan.DP = 2;
  R.OuterCP = 2;
  R.InnerTP = 2;
  EXPECT_EQ(getTPSize(R), 2u);
  EXPECT_EQ(getCPSize(R), 2u);
  EXPECT_EQ(splitInnerIndex(R, 1), std::make_pair(1u, 0u));
  EXPECT_EQ(splitInnerIndex(R, 2), std::make_pair(0u, 1u));
  // tp: the same cp index (inner 0, 1); cp: the same tp index (inner 1, 3).
  EXPECT_EQ(getOutputGroupRanks(R, "tp", 5), (std::vector<unsigned>{4, 5}));
  EXPECT_EQ(getOutputGroupRanks(R, "cp", 5), (std::vector<unsigned>{5, 7}));
  EXPECT_EQ(getOutputGroupRanks(R, "dp", 5), (std::vector<unsigned>{1, 5}));
  // The weight gradients' group: dp x cp.
  EXPECT_EQ(getOutputGroupRanks(R, "dp_cp", 5),
            (std::vector<unsigned>{1, 3, 5, 7}));
  ParallelPlan P = getPlanAsPlanned(R);
  EXPECT_EQ(P.TP, 2u);
  EXPECT_EQ(P.CP, 2u);
  // cp alone (the propagated axis is cp's, tp = 1) and tp alone.
  ShardingResult C;
  C.Plan.TP = 4;
  C.CPAxis = true;
  EXPECT_EQ(getOutputGroupRanks(C, "tp", 2), (std::vector<unsigned>{2}));
  EXPECT_EQ(getOutputGroupRanks(C, "cp", 2),
            (std::vector<unsigned>{0, 1, 2, 3}));
  ShardingResult T;
  T.Plan.TP = 4;
  EXPECT_EQ(getOutputGroupRanks(T, "tp", 2),
            (std::vector<unsigned>{0, 1, 2, 3}));
  EXPECT_EQ(getOutputGroupRanks(T, "cp", 2), (std::vector<unsigned>{2}));
}

TEST(Mesh, AxisOrderMovesTheGroups) {
  // order=tp-pp-ep-dp at tp 2, pp 2, ep 2, dp 4 (dp_outer 2): strides tp 1,
  // pp 2, ep 4, dp 8. Rank 13 = 1 + 0 * 2 + 1 * 4 + 1 * 8: tp 1, pp 0,
  // ep 1, dp_outer 1, so dp_idx = 1 * 2 + 1 = 3.
  ParallelPlan P;
  P.DP = 4;
  P.TP = 2;
  P.PP = 2;
  P.EP = 2;
  P.Order = {MeshAxis::PP, MeshAxis::EP, MeshAxis::DP};
  EXPECT_EQ(P.getAxisStride(MeshAxis::PP), 2u);
  EXPECT_EQ(P.getAxisStride(MeshAxis::EP), 4u);
  EXPECT_EQ(P.getAxisStride(MeshAxis::DP), 8u);
  RankCoords C = getRankCoords(P, 13);
  EXPECT_EQ(C.TP, 1u);
  EXPECT_EQ(C.PP, 0u);
  EXPECT_EQ(C.EP, 1u);
  EXPECT_EQ(C.DPOuter, 1u);
  EXPECT_EQ(C.DP, 3u);
  EXPECT_EQ(getGroupRanks(P, "tp", 13), (std::vector<unsigned>{12, 13}));
  // pp: the neighbour stage is 2 ranks away.
  EXPECT_EQ(getGroupRanks(P, "pp", 13), (std::vector<unsigned>{13, 15}));
  // dp_idx 0..3 at tp 1, pp 0: 1 + (d % 2) * 4 + (d / 2) * 8.
  EXPECT_EQ(getGroupRanks(P, "dp", 13), (std::vector<unsigned>{1, 5, 9, 13}));
  // ep: dp_outer 1, ep 0 and 1; dp_ep: ep 1, dp_outer 0 and 1.
  EXPECT_EQ(getGroupRanks(P, "ep", 13), (std::vector<unsigned>{9, 13}));
  EXPECT_EQ(getGroupRanks(P, "dp_ep", 13), (std::vector<unsigned>{5, 13}));
  // A bijection for every order.
  for (const AxisOrder &O : getAllAxisOrders()) {
    P.Order = O;
    std::vector<bool> Seen(16, false);
    for (unsigned R = 0; R < 16; ++R) {
      RankCoords RC = getRankCoords(P, R);
      EXPECT_EQ(getRank(P, RC.PP, RC.DP, RC.TP), R) << getAxisOrderName(O);
      Seen[getRank(P, RC.PP, RC.DP, RC.TP)] = true;
    }
    EXPECT_EQ(std::count(Seen.begin(), Seen.end(), true), 16);
  }
}

TEST(Mesh, OrderAndGradInPlanStrings) {
  PlanSpec S = cantFail(parsePlanSpec("tp=2,pp=2,ep=2,order=tp-pp-ep-dp,"
                                      "grad=bf16"));
  ParallelPlan P = cantFail(completePlan(S, 16, 8));
  EXPECT_EQ(P.str(), "tp=2,pp=2,dp=4,ep=2,sp=0,mb=1,nmb=2,vpp=1,"
                     "recompute=none,zero=0,grad=bf16,order=tp-pp-ep-dp");
  // Without tp, the same order; the defaults print nothing.
  S = cantFail(parsePlanSpec("pp=2,order=ep-dp-pp,grad=fp32"));
  EXPECT_EQ(cantFail(completePlan(S, 8, 8)).str(),
            "tp=1,pp=2,dp=4,ep=1,sp=0,mb=1,nmb=2,vpp=1,recompute=none,zero=0");
  // ep = 1: tp-ep-pp-dp is the same mesh as tp-pp-ep-dp and tp-pp-dp-ep
  // (pp inside dp); plans keep the last, the axis of size 1 outside.
  S = cantFail(parsePlanSpec("pp=2,order=tp-ep-pp-dp"));
  EXPECT_EQ(getAxisOrderName(cantFail(completePlan(S, 8, 8)).Order),
            "tp-pp-dp-ep");
  // Errors name the key.
  // Axes left out go outside, in the default order.
  S = cantFail(parsePlanSpec("order=tp-pp-dp"));
  EXPECT_EQ(getAxisOrderName(*S.Order), "tp-pp-dp-ep");
  for (const char *Bad : {"order=tp", "order=ep-tp-dp-pp", "order=tp-ep-ep-pp",
                          "order=tp-ep-dp-pp-xx", "order=tp-ep-dp-tp"}) {
    Expected<PlanSpec> E = parsePlanSpec(Bad);
    ASSERT_FALSE(!!E) << Bad;
    EXPECT_NE(toString(E.takeError()).find("--plan: order="),
              std::string::npos);
  }
  Expected<PlanSpec> E = parsePlanSpec("grad=fp16");
  ASSERT_FALSE(!!E);
  EXPECT_EQ(toString(E.takeError()),
            "--plan: grad=fp16: expected fp32 or bf16");
}

/// mlp-tiny at tp=2, pp=1 through the transform passes.
std::unique_ptr<CompilationUnit> shardMLP(const HardwareModel &HW) {
  auto CU = std::make_unique<CompilationUnit>();
  Expected<std::unique_ptr<Model>> M =
      importModelFile(LOOM_SOURCE_DIR "/examples/models/mlp-tiny.onnx");
  EXPECT_TRUE(!!M);
  if (!M)
    return nullptr;
  CU->M = std::move(*M);
  CU->HW = &HW;
  CU->Opts.Batch = 8;
  CU->Opts.Mode = RunMode::Infer;
  CU->PlanRequest = cantFail(parsePlanSpec("tp=2,pp=1,mb=2,sp=0"));
  PassManager PM(getRegisteredPasses());
  EXPECT_FALSE(!!PM.parsePipeline(
      "bind-symbols,infer-shapes,fold-shape-arith,detect-layers,annotate-"
      "costs,assign-device-classes,search-parallelism,shard,insert-"
      "collectives,schedule"));
  std::string S;
  raw_string_ostream OS(S);
  if (Error E = PM.run(*CU, PassInstrumentation(), OS, OS)) {
    ADD_FAILURE() << toString(std::move(E));
    return nullptr;
  }
  return CU;
}

TEST(VerifyOutput, CatchesBrokenPrograms) {
  Expected<HardwareModel> HW =
      loadHardwareModel(LOOM_SOURCE_DIR "/examples/hw/atlas800t-a2.yaml");
  ASSERT_TRUE(!!HW);
  std::unique_ptr<CompilationUnit> CU = shardMLP(*HW);
  ASSERT_TRUE(CU);
  ShardedProgram &SP = *CU->Sharded;
  ASSERT_EQ(SP.Roles.size(), 2u);
  const PlanCost &Best = CU->Search->Top.front();
  EXPECT_TRUE(verifyShardedProgram(SP, Best, 64e9).empty());

  // The second tp rank skips its collective: the group's order differs.
  Graph &G1 = SP.Roles[1].M->getGraph();
  Node *Coll = nullptr;
  for (const auto &NP : G1.getNodes())
    if (NP->getDomain() == "hccl")
      Coll = NP.get();
  ASSERT_NE(Coll, nullptr);
  Coll->setName("hcom.tp.renamed");
  std::vector<std::string> P = verifyShardedProgram(SP, Best, 64e9);
  ASSERT_FALSE(P.empty());
  EXPECT_NE(P.front().find("issue different collectives"), std::string::npos)
      << P.front();

  // Memory over HBM is named.
  Coll->setName(SP.Roles[0].M->getGraph().getNodes().back()->getName());
  std::vector<std::string> Q = verifyShardedProgram(SP, Best, 1.0);
  bool Memory = false;
  for (const std::string &S : Q)
    Memory |= S.find("exceeds usable HBM") != std::string::npos;
  EXPECT_TRUE(Memory);
}

TEST(RoleGraphs, ReshardsAreTheRuleTablesTransitions) {
  // mlp-tiny at tp=2: a node reading a column-parallel (Split) value is
  // made to ask for it otherwise; the role builder lowers what
  // getTransition names (Rules.h) and refuses what the table refuses.
  Expected<HardwareModel> HW =
      loadHardwareModel(LOOM_SOURCE_DIR "/examples/hw/atlas800t-a2.yaml");
  ASSERT_TRUE(!!HW);
  std::unique_ptr<CompilationUnit> CU = shardMLP(*HW);
  ASSERT_TRUE(CU);
  ShardingResult &R = CU->Sharded->Sharding;
  const Node *Reader = nullptr;
  unsigned Operand = 0;
  for (const auto &NP : R.M->getGraph().getNodes())
    for (unsigned I = 0; I < NP->getNumInputs() && !Reader; ++I) {
      const Value *V = NP->getInput(I);
      if (V && !V->isParameter() && R.Values.lookup(V).isSplit() &&
          R.Nodes[NP.get()].InputSpecs[I] == R.Values.lookup(V)) {
        Reader = NP.get();
        Operand = I;
      }
    }
  ASSERT_NE(Reader, nullptr);
  const Value *V = Reader->getInput(Operand);
  AxisSpec Cur = R.Values.lookup(V);
  auto Count = [](const std::vector<RoleGraph> &Roles, StringRef Op) {
    unsigned N = 0;
    for (const auto &NP : Roles[0].M->getGraph().getNodes())
      N += NP->getOpType() == Op;
    return N;
  };
  Expected<std::vector<RoleGraph>> Base = buildRoleGraphs(R);
  ASSERT_TRUE(!!Base) << toString(Base.takeError());
  unsigned Gathers = Count(*Base, "HcomAllGather");

  // Split -> Replicated: AllGather, one more HcomAllGather.
  AxisSpec &Want = R.Nodes[Reader].InputSpecs[Operand];
  Want = AxisSpec::replicated();
  EXPECT_EQ(getTransition(Cur, Want), Transition::AllGather);
  Expected<std::vector<RoleGraph>> Gathered = buildRoleGraphs(R);
  ASSERT_TRUE(!!Gathered) << toString(Gathered.takeError());
  EXPECT_EQ(Count(*Gathered, "HcomAllGather"), Gathers + 1);

  // Split -> Partial: unsupported by the table, refused by name (the
  // if-chain passed the split value on as a partial sum).
  Want = AxisSpec::partial();
  EXPECT_EQ(getTransition(Cur, Want), Transition::Unsupported);
  Expected<std::vector<RoleGraph>> Bad = buildRoleGraphs(R);
  ASSERT_FALSE(!!Bad);
  EXPECT_NE(toString(Bad.takeError())
                .find("cannot reshard '" + V->getName().str() + "' from " +
                      Cur.str() + " to P (unsupported)"),
            std::string::npos);
}

TEST(Schedule, ExpandCommsAroundComputeEvents) {
  // Chunk 0 of a program: receive (forward direction), two collectives,
  // send; chunk 1 has one collective that chunk 0's events must not show.
  ScheduleProgram P;
  auto Comm = [&](StringRef Kind, StringRef Op, unsigned Chunk, double T) {
    ScheduleComm C;
    C.Kind = Kind.str();
    C.Op = Op.str();
    C.Group = Kind == "send" || Kind == "recv" ? "pp" : "tp";
    C.Chunk = Chunk;
    C.TimeS = T;
    P.Comms.push_back(C);
  };
  Comm("recv", "r", 0, 0.25);
  Comm("allreduce", "a1", 0, 0.1);
  Comm("allreduce", "a2", 0, 0.1);
  Comm("send", "s", 0, 0.5);
  Comm("allreduce", "other", 1, 0.1);
  ScheduleEvent F;
  F.Kind = "forward";
  F.MicroBatch = 3;
  F.Chunk = 0;
  F.StartS = 1.0;
  F.EndS = 4.0;
  std::vector<ScheduleEvent> Out;
  expandComms(P, F, [&](const ScheduleEvent &E) { Out.push_back(E); });
  ASSERT_EQ(Out.size(), 4u);
  // Receive over [1 - 0.25, 1]; collective k of 2 at 1 + 3 * k / 3 (k = 1,
  // 2); send over [4, 4 + 0.5].
  EXPECT_EQ(Out[0].Op, "r");
  EXPECT_EQ(Out[0].Kind, "recv");
  EXPECT_DOUBLE_EQ(Out[0].StartS, 0.75);
  EXPECT_DOUBLE_EQ(Out[0].EndS, 1.0);
  EXPECT_EQ(Out[1].Op, "a1");
  EXPECT_DOUBLE_EQ(Out[1].StartS, 2.0);
  EXPECT_DOUBLE_EQ(Out[1].EndS, 2.1);
  EXPECT_EQ(Out[2].Op, "a2");
  EXPECT_DOUBLE_EQ(Out[2].StartS, 3.0);
  EXPECT_EQ(Out[3].Op, "s");
  EXPECT_EQ(Out[3].Kind, "send");
  EXPECT_DOUBLE_EQ(Out[3].EndS, 4.5);
  for (const ScheduleEvent &E : Out)
    EXPECT_EQ(E.MicroBatch, 3);
  // Backward: the send's gradient arrives first, collectives reversed, the
  // receive's gradient is sent back last.
  F.Kind = "backward";
  Out.clear();
  expandComms(P, F, [&](const ScheduleEvent &E) { Out.push_back(E); });
  ASSERT_EQ(Out.size(), 4u);
  EXPECT_EQ(Out[0].Op, "s");
  EXPECT_EQ(Out[0].Kind, "recv");
  EXPECT_DOUBLE_EQ(Out[0].StartS, 0.5);
  EXPECT_EQ(Out[1].Op, "a2");
  EXPECT_EQ(Out[2].Op, "a1");
  EXPECT_EQ(Out[3].Op, "r");
  EXPECT_EQ(Out[3].Kind, "send");
  EXPECT_DOUBLE_EQ(Out[3].EndS, 4.25);
}

} // namespace
