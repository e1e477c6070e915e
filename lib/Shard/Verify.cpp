//===- Verify.cpp - Invariants of an emitted program ----------------------===//
//
// What a runtime relies on and a bug in the transform passes would break:
// matched point-to-point transfers, collectives in the same order on every
// member of a group (else the job deadlocks), consistent groups, memory
// within HBM, a schedule that respects its dependencies, and graphs that
// ONNX itself accepts with the shapes Loom says they have.
//
//===----------------------------------------------------------------------===//
#include "loom/ONNX/ONNX.h"
#include "loom/Shard/OutputDir.h"
#include "loom/Shard/Schedule.h"
#include "llvm/Support/Format.h"
#include <map>
#include <set>

using namespace llvm;

namespace loom {

namespace {

struct P2P {
  unsigned From, To, TP, EP;
  int64_t Tag;
  std::vector<int64_t> Shape;
  int64_t DType;
};

} // namespace

/// 1. Sends and receives: every HcomSend has the HcomReceive of the same
/// devices, tp and ep rank and tag, with the same shape and dtype, and no
/// tag is used twice.
static void checkTransfers(const ShardedProgram &SP,
                           std::vector<std::string> &Problems) {
  auto Fail = [&](const Twine &T) { Problems.push_back(T.str()); };
  // Keyed by the dp rank too: with embedding table shards every device
  // has one role per dp rank (RoleGraphs.cpp; -1 otherwise).
  // Keyed by the group too: a pipeline transfer joins devices (the index
  // on the mesh's inner axis alike), the cp ring's (RingAttention.cpp)
  // joins cp ranks (the pipeline device and tp rank alike).
  unsigned TPSize = getTPSize(SP.Sharding);
  std::map<
      std::tuple<bool, unsigned, unsigned, unsigned, unsigned, int, int64_t>,
      P2P>
      Sends, Recvs;
  for (const RoleGraph &R : SP.Roles)
    for (const auto &NP : R.M->getGraph().getNodes()) {
      const Node &N = *NP;
      if (N.getDomain() != "hccl")
        continue;
      bool Ring = N.getAttrString("group", "") == "cp";
      auto TC = splitInnerIndex(SP.Sharding, R.TP);
      unsigned Me = Ring ? TC.second : R.PP,
               Other = Ring ? R.PP * TPSize + TC.first : R.TP;
      if (N.getOpType() == "HcomSend") {
        const Value *X = N.getInput(0);
        P2P S{Me,
              (unsigned)N.getAttrInt("dest_rank", -1),
              Other,
              R.EP,
              N.getAttrInt("sr_tag", -1),
              {},
              (int64_t)X->Type.Elem};
        for (int64_t D : X->Type.getStaticShape())
          S.Shape.push_back(D);
        auto Key = std::make_tuple(Ring, S.From, S.To, S.TP, S.EP, R.DP, S.Tag);
        if (!Sends.emplace(Key, S).second)
          Fail("role " + R.FileName + ": two HcomSend with sr_tag " +
               Twine(S.Tag) + " to device " + Twine(S.To));
      } else if (N.getOpType() == "HcomReceive") {
        P2P S{(unsigned)N.getAttrInt("src_rank", -1),
              Me,
              Other,
              R.EP,
              N.getAttrInt("sr_tag", -1),
              N.getAttrInts("shape").getValueOr(std::vector<int64_t>()),
              N.getAttrInt("dtype", 0)};
        auto Key = std::make_tuple(Ring, S.From, S.To, S.TP, S.EP, R.DP, S.Tag);
        if (!Recvs.emplace(Key, S).second)
          Fail("role " + R.FileName + ": two HcomReceive with sr_tag " +
               Twine(S.Tag) + " from device " + Twine(S.From));
      }
    }
  for (const auto &KV : Sends) {
    auto It = Recvs.find(KV.first);
    const P2P &S = KV.second;
    if (It == Recvs.end()) {
      Fail("HcomSend sr_tag " + Twine(S.Tag) + " from pp" + Twine(S.From) +
           "/tp" + Twine(S.TP) + " to device " + Twine(S.To) +
           " has no matching HcomReceive");
      continue;
    }
    if (It->second.Shape != S.Shape || It->second.DType != S.DType)
      Fail("HcomSend/HcomReceive sr_tag " + Twine(S.Tag) + " from pp" +
           Twine(S.From) + " to pp" + Twine(S.To) + ": shape or dtype differ");
  }
  for (const auto &KV : Recvs)
    if (!Sends.count(KV.first))
      Fail("HcomReceive sr_tag " + Twine(KV.second.Tag) + " on pp" +
           Twine(KV.second.To) + "/tp" + Twine(KV.second.TP) +
           " has no matching HcomSend");
}

/// 2. Collective order per group: the members of a tp group (the roles that
/// differ only in tp) and of an ep group (only in ep) issue the same
/// collectives in the same order.
static void checkCollectiveOrder(const ShardedProgram &SP,
                                 std::vector<std::string> &Problems) {
  auto Fail = [&](const Twine &T) { Problems.push_back(T.str()); };
  auto Sequence = [](const RoleGraph &R, StringRef Group) {
    std::vector<std::string> Seq;
    for (const auto &NP : R.M->getGraph().getNodes())
      if (NP->getDomain() == "hccl" && NP->getOpType() != "HcomSend" &&
          NP->getOpType() != "HcomReceive" &&
          NP->getAttrString("group", "") == Group)
        Seq.push_back((NP->getOpType() + ":" + NP->getName()).str());
    return Seq;
  };
  // The mesh's inner axis holds tp and cp (Sharding.h, splitInnerIndex):
  // a tp group's members share the cp index, a cp group's the tp index.
  const ShardingResult &R = SP.Sharding;
  for (const RoleGraph &A : SP.Roles)
    for (const RoleGraph &B : SP.Roles) {
      if (&A == &B || A.PP != B.PP)
        continue;
      auto TA = splitInnerIndex(R, A.TP), TB = splitInnerIndex(R, B.TP);
      for (StringRef Axis : {"tp", "cp"}) {
        bool Same =
            Axis == "tp" ? TA.second == TB.second : TA.first == TB.first;
        if (A.EP == B.EP && A.TP < B.TP && Same &&
            Sequence(A, Axis) != Sequence(B, Axis))
          Fail(Axis + " group of pipeline device " + Twine(A.PP) + ": " +
               A.FileName + " and " + B.FileName +
               " issue different collectives");
      }
      if (A.TP == B.TP && A.EP < B.EP && Sequence(A, "ep") != Sequence(B, "ep"))
        Fail("ep group of pipeline device " + Twine(A.PP) + ": " + A.FileName +
             " and " + B.FileName + " issue different collectives");
    }
}

/// 3. Groups: every rank is in its own tp, pp, dp, ep and dp_ep groups (cp
/// and dp_cp under cp), and their members agree on them.
static void checkGroups(const ShardingResult &R,
                        std::vector<std::string> &Problems) {
  auto Fail = [&](const Twine &T) { Problems.push_back(T.str()); };
  unsigned N = R.Plan.getNumDevices();
  for (unsigned Rank = 0; Rank < N; ++Rank)
    for (const char *G : {"tp", "pp", "dp", "ep", "dp_ep", "cp", "dp_cp"}) {
      std::vector<unsigned> M = getOutputGroupRanks(R, G, Rank);
      if (std::find(M.begin(), M.end(), Rank) == M.end())
        Fail("rank " + Twine(Rank) + " is not in its own " + G + " group");
      for (unsigned O : M)
        if (O >= N || getOutputGroupRanks(R, G, O) != M)
          Fail("rank " + Twine(Rank) + " and rank " + Twine(O) +
               " disagree on their " + G + " group");
    }
}

/// 4. Memory: the predicted memory and each role's weights within usable
/// HBM (\p HBMBytes; 0: unchecked).
static void checkMemory(const ShardedProgram &SP, const PlanCost &Cost,
                        double HBMBytes, std::vector<std::string> &Problems) {
  auto Fail = [&](const Twine &T) { Problems.push_back(T.str()); };
  if (HBMBytes > 0 && Cost.MaxMemoryBytes > HBMBytes)
    Fail("predicted memory " + Twine((uint64_t)Cost.MaxMemoryBytes) +
         " bytes per device exceeds usable HBM " + Twine((uint64_t)HBMBytes));
  for (const RoleGraph &R : SP.Roles) {
    double Bytes = 0;
    for (const Value *V : R.M->getGraph().getParameters())
      Bytes += (double)V->Type.getSizeInBytes().getValueOr(0);
    if (HBMBytes > 0 && Bytes > HBMBytes)
      Fail("role " + R.FileName + " holds " + Twine((uint64_t)Bytes) +
           " bytes of weights, more than HBM");
  }
}

/// 5. Schedule (per role program): every receive after its send (on the
/// program of the peer's role: same tp and ep rank, the peer's pipeline
/// device); compute never overlaps.
static void checkSchedule(const ShardedProgram &SP,
                          std::vector<std::string> &Problems) {
  auto Fail = [&](const Twine &T) { Problems.push_back(T.str()); };
  if (SP.RoleProgram.size() != SP.Roles.size())
    Fail("schedule: " + Twine(SP.RoleProgram.size()) + " role programs for " +
         Twine(SP.Roles.size()) + " roles");
  std::vector<std::map<std::pair<int, int>, double>> SendStart(
      SP.Programs.size());
  // Transfers are implied by the compute events (expandComms).
  std::vector<std::vector<ScheduleEvent>> RecvEvents(SP.Programs.size());
  for (size_t I = 0; I < SP.Programs.size(); ++I)
    for (const ScheduleEvent &C : SP.Programs[I].Events)
      expandComms(SP.Programs[I], C, [&](const ScheduleEvent &E) {
        if (E.Kind == "recv")
          RecvEvents[I].push_back(E);
        if (E.Kind != "send")
          return;
        auto Ins =
            SendStart[I].emplace(std::make_pair(E.Tag, E.MicroBatch), E.StartS);
        Ins.first->second = std::min(Ins.first->second, E.StartS);
      });
  for (size_t I = 0; I < SP.Programs.size(); ++I) {
    double ComputeEnd = 0;
    for (const ScheduleEvent &E : SP.Programs[I].Events) {
      if (E.Stream == "compute") {
        if (E.StartS + 1e-12 < ComputeEnd)
          Fail("schedule program " + Twine(I) + ": " + E.Kind +
               " of micro-batch " + Twine(E.MicroBatch) +
               " starts before the previous compute ends");
        ComputeEnd = std::max(ComputeEnd, E.EndS);
      }
      if (E.EndS < E.StartS)
        Fail("schedule program " + Twine(I) + ": event " + E.Kind +
             " ends before it starts");
    }
  }
  std::map<std::tuple<unsigned, unsigned, unsigned>, unsigned> ProgramOf;
  for (size_t R = 0; R < SP.Roles.size() && R < SP.RoleProgram.size(); ++R)
    ProgramOf[{SP.Roles[R].PP, SP.Roles[R].TP, SP.Roles[R].EP}] =
        SP.RoleProgram[R];
  for (size_t R = 0; R < SP.Roles.size() && R < SP.RoleProgram.size(); ++R) {
    const RoleGraph &RG = SP.Roles[R];
    for (const ScheduleEvent &E : RecvEvents[SP.RoleProgram[R]]) {
      const double *Start = nullptr;
      auto Peer = ProgramOf.find({(unsigned)E.Peer, RG.TP, RG.EP});
      if (Peer != ProgramOf.end()) {
        auto &Sends = SendStart[Peer->second];
        auto It = Sends.find({E.Tag, E.MicroBatch});
        if (It != Sends.end())
          Start = &It->second;
      }
      if (!Start)
        Fail("role " + RG.FileName + ": receive sr_tag " + Twine(E.Tag) +
             " micro-batch " + Twine(E.MicroBatch) + " from pipeline device " +
             Twine(E.Peer) + " has no send");
      else if (E.EndS + 1e-12 < *Start)
        Fail("role " + RG.FileName + ": receive sr_tag " + Twine(E.Tag) +
             " ends before its send starts");
    }
  }
}

/// 6. ONNX accepts every graph (onnx::checker), with Loom's shapes (its
/// shape inference agrees). The weights are checked as the emitted graph
/// holds them, by reference (emit writes them to external data): copying
/// them into the checked proto doubled the peak memory of -o.
static void checkONNX(ShardedProgram &SP, std::vector<std::string> &Problems) {
  auto Fail = [&](const Twine &T) { Problems.push_back(T.str()); };
  for (RoleGraph &R : SP.Roles) {
    if (Error E = checkModel(*R.M, /*ParameterData=*/false)) {
      Fail("graph " + R.FileName +
           ": onnx::checker: " + toString(std::move(E)));
      continue;
    }
    Expected<unsigned> Changed = inferShapes(*R.M);
    if (!Changed)
      Fail("graph " + R.FileName +
           ": shape inference: " + toString(Changed.takeError()));
  }
}

std::vector<std::string> verifyShardedProgram(ShardedProgram &SP,
                                              const PlanCost &Cost,
                                              double HBMBytes) {
  std::vector<std::string> Problems;
  checkTransfers(SP, Problems);
  checkCollectiveOrder(SP, Problems);
  checkGroups(SP.Sharding, Problems);
  checkMemory(SP, Cost, HBMBytes, Problems);
  checkSchedule(SP, Problems);
  checkONNX(SP, Problems);
  return Problems;
}

} // namespace loom
