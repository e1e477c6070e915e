//===- Schedule.cpp - The per-rank program of one step --------------------===//
//
// Orders each pipeline device's forward and backward micro-batches as 1F1B
// (Narayanan et al. 2021; interleaved when vpp > 1, in Megatron-LM's chunk
// order), lays them on a timeline with the planner's per-micro-batch times
// (PlanCost), and puts inside each the collectives of the device's role
// graph, the pipeline sends and receives around it, the DP gradient buckets
// overlapped with the last backward, and the optimizer. Times are the cost
// model's predictions; the order is what a runtime must follow. One program
// per role, not per rank: DP replicas run the same one, and roles that
// communicate alike share it, so the schedule of a 128-rank, 1,024
// micro-batch step stays a few MB.
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/Schedule.h"
#include "loom/Cost/Pipeline.h"
#include "loom/Shard/Sharding.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include <algorithm>

using namespace llvm;

namespace loom {
namespace {

struct Item {
  bool Forward;
  unsigned MB, Chunk;
  double Start = -1, End = -1;
};

CollectiveKind kindOf(StringRef Kind) {
  if (Kind == "allgather")
    return CollectiveKind::AllGather;
  if (Kind == "reducescatter")
    return CollectiveKind::ReduceScatter;
  if (Kind == "alltoall")
    return CollectiveKind::AllToAll;
  return CollectiveKind::AllReduce;
}

std::string eventKind(StringRef Op) {
  if (Op == "HcomAllGather")
    return "allgather";
  if (Op == "HcomReduceScatter")
    return "reducescatter";
  if (Op == "HcomAllToAllV")
    return "alltoall";
  return "allreduce";
}

struct Comm {
  std::string Op, Kind, Group;
  double Bytes = 0;
  int Peer = -1, Tag = -1;
  unsigned Chunk = 0;
  bool operator==(const Comm &O) const {
    return Op == O.Op && Kind == O.Kind && Group == O.Group &&
           Bytes == O.Bytes && Peer == O.Peer && Tag == O.Tag &&
           Chunk == O.Chunk;
  }
};

} // namespace

void expandComms(const ScheduleProgram &P, const ScheduleEvent &E,
                 function_ref<void(const ScheduleEvent &)> Fn) {
  if (E.Kind != "forward" && E.Kind != "backward")
    return;
  bool Forward = E.Kind == "forward";
  SmallVector<const ScheduleComm *, 16> Coll, In, Out;
  for (const ScheduleComm &C : P.Comms) {
    if ((int)C.Chunk != E.Chunk)
      continue;
    if (C.Kind == "recv")
      (Forward ? In : Out).push_back(&C);
    else if (C.Kind == "send")
      (Forward ? Out : In).push_back(&C);
    else
      Coll.push_back(&C);
  }
  auto Event = [&](const ScheduleComm &C, double Start, double End) {
    ScheduleEvent CE;
    CE.Kind = C.Kind;
    CE.Op = C.Op;
    CE.MicroBatch = E.MicroBatch;
    CE.Chunk = E.Chunk;
    CE.Group = C.Group;
    CE.Level = C.Level;
    CE.Bytes = C.Bytes;
    CE.Peer = C.Peer;
    CE.Tag = C.Tag;
    CE.StartS = Start;
    CE.EndS = End;
    return CE;
  };
  // Backward turns each transfer around: a send's gradient is received.
  for (const ScheduleComm *C : In) {
    ScheduleEvent CE = Event(*C, std::max(0.0, E.StartS - C->TimeS), E.StartS);
    CE.Kind = "recv";
    CE.Stream = "p2p";
    Fn(CE);
  }
  double Dur = E.EndS - E.StartS;
  for (size_t K = 0; K < Coll.size(); ++K) {
    const ScheduleComm &C = *Coll[Forward ? K : Coll.size() - 1 - K];
    double Start = E.StartS + Dur * (K + 1) / (Coll.size() + 1);
    ScheduleEvent CE = Event(C, Start, Start + C.TimeS);
    CE.Stream = C.Group;
    Fn(CE);
  }
  for (const ScheduleComm *C : Out) {
    ScheduleEvent CE = Event(*C, E.EndS, E.EndS + C->TimeS);
    CE.Kind = "send";
    CE.Stream = "p2p";
    Fn(CE);
  }
}

Error buildSchedule(ShardedProgram &SP, const PlanCost &Cost,
                    const ScheduleContext &Ctx) {
  const ShardingResult &R = SP.Sharding;
  const ParallelPlan &P = R.Plan;
  unsigned PP = P.PP, VPP = R.NumChunks / PP, M = P.NumMicroBatches;
  StringMap<unsigned> ChunkOfName;
  for (const auto &NP : R.M->getGraph().getNodes())
    if (!NP->getName().empty())
      ChunkOfName[NP->getName()] = R.Nodes.lookup(NP.get()).Chunk;

  auto LevelName = [&](const GroupShape &S) -> std::string {
    int L = S.outermostLevel();
    if (L < 0 || (unsigned)L >= Ctx.HW->Topology.size())
      return "local";
    return Ctx.HW->Topology[L].Name;
  };

  // Per role: its communication, chunk by chunk.
  std::map<std::tuple<unsigned, unsigned, unsigned>, std::vector<Comm>> Comms;
  std::map<std::tuple<unsigned, unsigned, unsigned>, double> ParamBytes;
  for (const RoleGraph &RG : SP.Roles) {
    // The dp roles of embedding shards (RG.DP) communicate alike.
    if (RG.DP > 0)
      continue;
    std::vector<Comm> &Cs = Comms[{RG.PP, RG.TP, RG.EP}];
    double PB = 0;
    for (const Value *V : RG.M->getGraph().getParameters())
      PB += (double)V->Type.getSizeInBytes().getValueOr(0);
    ParamBytes[{RG.PP, RG.TP, RG.EP}] = PB;
    unsigned Cur = RG.PP;
    for (const auto &NP : RG.M->getGraph().getNodes()) {
      const Node &N = *NP;
      auto It = ChunkOfName.find(N.getName());
      if (N.getDomain() != "hccl") {
        if (It != ChunkOfName.end())
          Cur = It->second;
        continue;
      }
      Comm C;
      C.Op = N.getName().str();
      C.Group = N.getAttrString("group", "").str();
      // The role builder tags every node with its pipeline chunk.
      C.Chunk = N.Stage >= 0 ? (unsigned)N.Stage : Cur;
      const Value *X = N.getNumInputs() ? N.getInput(0) : N.getOutput(0);
      C.Bytes = X ? (double)X->Type.getSizeInBytes().getValueOr(0) : 0;
      if (N.getOpType() == "HcomSend") {
        C.Kind = "send";
        C.Peer = N.getAttrInt("dest_rank", 0);
        C.Tag = N.getAttrInt("sr_tag", 0);
      } else if (N.getOpType() == "HcomReceive") {
        C.Kind = "recv";
        C.Peer = N.getAttrInt("src_rank", 0);
        C.Tag = N.getAttrInt("sr_tag", 0);
      } else {
        C.Kind = eventKind(N.getOpType());
        if (N.getOpType() == "HcomAllGather" && N.getOutput(0))
          C.Bytes = (double)N.getOutput(0)->Type.getSizeInBytes().getValueOr(0);
      }
      Cs.push_back(C);
    }
  }

  // Per-micro-batch times per chunk (PlanCost is per stage = device).
  std::vector<double> Fwd(R.NumChunks), Bwd(R.NumChunks), P2P(R.NumChunks),
      Lag(R.NumChunks);
  for (unsigned C = 0; C < R.NumChunks; ++C) {
    const StageCost &S = Cost.Stages[std::min<size_t>(C % PP,
                                                      Cost.Stages.size() - 1)];
    // Exposed TP and EP communication where the evaluator's pipeline puts
    // it: forward's with the forward, backward's with the backward.
    // The plan's overlaps (PlanCost.h: OverlapFwdS/BwdS, SendLagS).
    Fwd[C] = (S.ForwardS + S.ForwardCommS + S.OverlapFwdS) / VPP;
    Bwd[C] = (S.BackwardS + S.BackwardCommS + S.OverlapBwdS) / VPP;
    // Offload streaming its compute does not hide (the evaluator's
    // pipeline adds it to the backward).
    Bwd[C] += S.Offload.ExposedPerMicroBatchS / VPP;
    // The evaluator's pipeline charges one send per boundary crossing, the
    // same for every chunk (P2PS counts the forward send and, in training,
    // the backward one).
    P2P[C] = S.P2PS / (Ctx.Train ? 2 : 1);
    Lag[C] = S.SendLagS;
  }

  // Timeline per device: list scheduling of the 1F1B order with the
  // cross-chunk dependencies.
  // The order is the bubble model's (cost_models/pipeline).
  std::vector<std::vector<Item>> Order(PP);
  std::vector<std::vector<PipelineOp>> Ops =
      getPipelineOrder(PP, M, VPP, /*ForwardOnly=*/!Ctx.Train);
  for (unsigned D = 0; D < PP; ++D)
    for (const PipelineOp &Op : Ops[D])
      Order[D].push_back(
          Item{!Op.Backward, Op.MicroBatch, Op.Chunk * PP + D});
  std::map<std::tuple<bool, unsigned, unsigned>, double> EndOf;
  std::vector<size_t> Next(PP, 0);
  std::vector<double> Free(PP, 0);
  size_t Left = 0;
  for (auto &O : Order)
    Left += O.size();
  while (Left) {
    bool Progress = false;
    for (unsigned D = 0; D < PP; ++D) {
      if (Next[D] == Order[D].size())
        continue;
      Item &I = Order[D][Next[D]];
      double Ready = 0;
      bool OK = true;
      auto Need = [&](bool F, unsigned MB, unsigned C, double Lag) {
        auto It = EndOf.find({F, MB, C});
        if (It == EndOf.end())
          OK = false;
        else
          Ready = std::max(Ready, It->second + Lag);
      };
      if (I.Forward) {
        if (I.Chunk > 0)
          Need(true, I.MB, I.Chunk - 1,
               (I.Chunk - 1) % PP == D ? 0 : Lag[I.Chunk - 1]);
      } else {
        Need(true, I.MB, I.Chunk, 0);
        // The gradient crosses back the boundary after this chunk: the
        // transfer this chunk's forward send takes (the evaluator's
        // pipeline charges Transfer[d] both ways).
        if (I.Chunk + 1 < R.NumChunks)
          Need(false, I.MB, I.Chunk + 1,
               (I.Chunk + 1) % PP == D ? 0 : Lag[I.Chunk]);
      }
      if (!OK)
        continue;
      I.Start = std::max(Ready, Free[D]);
      I.End = I.Start + (I.Forward ? Fwd[I.Chunk] : Bwd[I.Chunk]);
      Free[D] = I.End;
      EndOf[{I.Forward, I.MB, I.Chunk}] = I.End;
      ++Next[D];
      --Left;
      Progress = true;
    }
    if (!Progress)
      return createStringError(inconvertibleErrorCode(),
                               "schedule: the pipeline order deadlocks (pp=%u, "
                               "vpp=%u, %u micro-batches)",
                               PP, VPP, M);
  }

  // One program per role; DP replicas run their role's, and roles whose
  // communication is alike share one (a program follows from its pipeline
  // device, its collectives and transfers, and its gradient bytes).
  GroupShape TPG = Ctx.Eval->getGroupShape(P, "tp");
  GroupShape EPG = Ctx.Eval->getGroupShape(P, "ep");
  GroupShape DPG = Ctx.Eval->getGroupShape(P, "dp");
  GroupShape PPG = Ctx.Eval->getGroupShape(P, "pp");
  double Step = 0;
  SP.Programs.clear();
  SP.RoleProgram.clear();
  SP.NumMicroBatches = M;
  std::vector<std::tuple<unsigned, const std::vector<Comm> *, double>> Keys;
  for (const RoleGraph &RG : SP.Roles) {
    const std::vector<Comm> &Cs = Comms[{RG.PP, RG.TP, RG.EP}];
    double PB = ParamBytes[{RG.PP, RG.TP, RG.EP}];
    auto Same =
        [&](const std::tuple<unsigned, const std::vector<Comm> *, double> &K) {
          return std::get<0>(K) == RG.PP && *std::get<1>(K) == Cs &&
                 std::get<2>(K) == PB;
        };
    auto Found = std::find_if(Keys.begin(), Keys.end(), Same);
    if (Found != Keys.end()) {
      SP.RoleProgram.push_back(Found - Keys.begin());
      continue;
    }
    SP.RoleProgram.push_back(Keys.size());
    Keys.emplace_back(RG.PP, &Cs, PB);
    ScheduleProgram Prog;
    Prog.PP = RG.PP;
    for (const Comm &C : Cs) {
      ScheduleComm SC;
      SC.Kind = C.Kind;
      SC.Op = C.Op;
      SC.Group = C.Group;
      SC.Chunk = C.Chunk;
      if (C.Kind == "send" || C.Kind == "recv") {
        SC.Level = LevelName(PPG);
        SC.Peer = C.Peer;
        SC.Tag = C.Tag;
        // A send leaves over the boundary after its chunk; a receive
        // arrives over the one before.
        unsigned Boundary = C.Kind == "send" ? C.Chunk : C.Chunk - 1;
        SC.TimeS = C.Chunk < R.NumChunks && (C.Kind == "send" || C.Chunk > 0)
                       ? P2P[Boundary]
                       : 0;
      } else {
        const GroupShape &GS = C.Group == "ep" ? EPG : TPG;
        SC.Level = LevelName(GS);
        SC.TimeS = collectiveTime(kindOf(C.Kind), C.Bytes, GS, *Ctx.HW).Seconds;
      }
      SC.Bytes = C.Bytes;
      Prog.Comms.push_back(SC);
    }
    std::vector<ScheduleEvent> &Events = Prog.Events;
    double LastBwdEnd = 0, LastBwdStart = 0;
    for (const Item &I : Order[RG.PP]) {
      ScheduleEvent E;
      E.Kind = I.Forward ? "forward" : "backward";
      E.MicroBatch = I.MB;
      E.Chunk = I.Chunk;
      E.StartS = I.Start;
      E.EndS = I.End;
      E.Stream = "compute";
      Events.push_back(E);
      // Offload (Cost/Offload.h): the micro-batch's PCIe/NVMe transfers on
      // their own stream, half with its forward and half with its backward
      // in training, from the compute's start.
      const StageCost &St =
          Cost.Stages[std::min<size_t>(RG.PP, Cost.Stages.size() - 1)];
      if (P.Offload.any() && St.Offload.StreamS > 0) {
        double Share = (Ctx.Train ? 0.5 : 1.0) / VPP;
        ScheduleEvent X;
        X.Kind = "offload";
        X.MicroBatch = I.MB;
        X.Chunk = I.Chunk;
        X.Op = P.Offload.str();
        X.Level = St.Offload.StreamSSDBytes > 0 ? "pcie+nvme" : "pcie";
        X.Stream = "offload";
        X.Bytes =
            (St.Offload.StreamHostBytes + St.Offload.StreamSSDBytes) * Share;
        X.StartS = I.Start;
        X.EndS = I.Start + St.Offload.StreamS * Share;
        Events.push_back(X);
      }
      if (!I.Forward && I.End >= LastBwdEnd) {
        LastBwdEnd = I.End;
        LastBwdStart = I.Start;
      }
    }
    if (Ctx.Train) {
      const StageCost &S =
          Cost.Stages[std::min<size_t>(RG.PP, Cost.Stages.size() - 1)];
      double Grad = PB / getDataTypeSize(DataType::Float) * P.getGradBytes();
      double Buf = std::max(1.0, Ctx.BucketBytes);
      unsigned Buckets = std::max(1u, (unsigned)std::ceil(Grad / Buf));
      // Negative when dp overlap's held compute outlasts the sync: the
      // buckets then end DPExposedS after the last backward, as costed.
      double Hidden = S.DPSyncS - S.DPExposedS;
      double T = std::max(LastBwdStart, LastBwdEnd - Hidden);
      double End = LastBwdEnd;
      if (P.DP > 1)
        for (unsigned B = 0; B < Buckets; ++B) {
          ScheduleEvent G;
          G.Kind = "grad_sync";
          G.Op = P.ZeroStage >= 2 ? "reducescatter" : "allreduce";
          G.FusionId = B;
          G.Group = "dp";
          G.Level = LevelName(DPG);
          G.Stream = "dp";
          G.Bytes = std::min(Buf, Grad - B * Buf);
          G.StartS = T;
          G.EndS = T + S.DPSyncS * G.Bytes / std::max(1.0, Grad);
          T = G.EndS;
          End = std::max(End, T);
          Events.push_back(G);
        }
      ScheduleEvent O;
      O.Kind = "optimizer";
      // opt:host/ssd: the host CPU updates, between the transfers of the
      // gradients down and the weights back up.
      O.Stream = P.Offload.Opt != MemoryTier::HBM ? "offload" : "compute";
      if (P.Offload.Opt != MemoryTier::HBM) {
        O.Op = P.Offload.str();
        O.Bytes = S.Offload.TailHostBytes + S.Offload.TailSSDBytes;
      }
      O.StartS = End;
      O.EndS = End + S.OptimizerS;
      Events.push_back(O);
    }
    std::stable_sort(Events.begin(), Events.end(),
                     [](const ScheduleEvent &A, const ScheduleEvent &B) {
                       return A.StartS < B.StartS;
                     });
    for (const ScheduleEvent &E : Events) {
      Step = std::max(Step, E.EndS);
      if (E.Stream == "compute")
        expandComms(Prog, E, [&](const ScheduleEvent &CE) {
          Step = std::max(Step, CE.EndS);
        });
    }
    SP.Programs.push_back(std::move(Prog));
  }
  SP.ScheduleStepS = Step;
  return Error::success();
}

} // namespace loom
