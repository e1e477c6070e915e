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
#include <tuple>

using namespace llvm;

namespace loom {
namespace {

struct Item {
  bool Forward;
  unsigned MB, Chunk;
  double Start = -1, End = -1;
};

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
    std::tie(CE.Kind, CE.Op, CE.Group, CE.Level, CE.Bytes, CE.Peer, CE.Tag) =
        std::tie(C.Kind, C.Op, C.Group, C.Level, C.Bytes, C.Peer, C.Tag);
    CE.MicroBatch = E.MicroBatch;
    CE.Chunk = E.Chunk;
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
    // Spread evenly over the compute they run inside, each ending by the
    // compute's end where it fits (the cost model counts it within the
    // chunk's time): a long last collective is not left sticking out.
    double Start = E.StartS + Dur * (K + 1) / (Coll.size() + 1);
    Start = std::max(E.StartS, std::min(Start, E.EndS - C.TimeS));
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

/// Bytes of \p V on the wire: a float tensor in the precision recipe's type
/// (ShardingResult::CommFloatType) where one is set.
/// \p Of names the micro-batch graph's value \p V holds (all of it, or a
/// rank's part): its key in \p Expected.
static double
wireBytes(const Value *V, DataType FloatType,
          const std::map<std::string, std::vector<int64_t>> &Expected = {},
          const Value *Of = nullptr) {
  if (!V)
    return 0;
  DataType T = V->Type.Elem;
  // Elements: a dim that depends on the data at its expected size (the
  // rules never split one, so a split dim here is the rank's static one).
  Optional<int64_t> Elems = V->Type.getNumElements();
  auto E = V->Type.isStatic() || !V->Type.HasShape
               ? Expected.end()
               : Expected.find((Of ? Of : V)->getName().str());
  if (E != Expected.end() && E->second.size() == V->Type.Dims.size()) {
    int64_t N = 1;
    for (unsigned D = 0; D < E->second.size(); ++D)
      N *= V->Type.Dims[D].isStatic() ? V->Type.Dims[D].Size : E->second[D];
    Elems = N;
  }
  if (!Elems)
    return 0;
  if (FloatType != DataType::Undefined &&
      (T == DataType::Float || T == DataType::Float16 ||
       T == DataType::BFloat16))
    return (double)*Elems * getDataTypeSize(FloatType);
  return (double)getStorageBytes(T, *Elems).getValueOr(0);
}

double
getHcomWireBytes(const Node &N, DataType FloatType,
                 const std::map<std::string, std::vector<int64_t>> &Expected) {
  // An all-gather's output is the global value its input is a part of.
  if (N.getOpType() == "HcomAllGather" && N.getNumOutputs())
    return wireBytes(N.getOutput(0), FloatType, Expected,
                     N.getNumInputs() ? N.getInput(0) : nullptr);
  return wireBytes(N.getNumInputs() ? N.getInput(0) : N.getOutput(0), FloatType,
                   Expected);
}

namespace {

/// A role's pipeline device, tp rank and ep rank.
using RoleKey = std::tuple<unsigned, unsigned, unsigned>;

/// Per role: its communication, chunk by chunk, and its parameter bytes.
struct RoleComms {
  std::map<RoleKey, std::vector<Comm>> Comms;
  std::map<RoleKey, double> ParamBytes;
};

/// Per-micro-batch times per pipeline chunk.
struct ChunkTimes {
  std::vector<double> Fwd, Bwd, P2P, Lag;
};

/// The name of the outermost topology level group \p S spans ("local"
/// inside one device).
std::string levelName(const GroupShape &S, const HardwareModel &HW) {
  int L = S.outermostLevel();
  if (L < 0 || (unsigned)L >= HW.Topology.size())
    return "local";
  return HW.Topology[L].Name;
}

/// The collectives, sends and receives of each role graph in node order,
/// each with the pipeline chunk it belongs to, and the role's parameter
/// bytes. The dp roles of embedding shards (RG.DP) communicate alike and
/// are skipped.
RoleComms collectRoleComms(const ShardedProgram &SP) {
  const ShardingResult &R = SP.Sharding;
  StringMap<unsigned> ChunkOfName;
  for (const auto &NP : R.M->getGraph().getNodes())
    if (!NP->getName().empty())
      ChunkOfName[NP->getName()] = R.Nodes.lookup(NP.get()).Chunk;
  RoleComms RC;
  for (const RoleGraph &RG : SP.Roles) {
    if (RG.DP > 0)
      continue;
    std::vector<Comm> &Cs = RC.Comms[{RG.PP, RG.TP, RG.EP}];
    double PB = 0;
    // In fp32 bytes whatever the graph's type: appendStepTail counts the
    // parameters by them.
    for (const Value *V : RG.M->getGraph().getParameters())
      PB += wireBytes(V, DataType::Float);
    RC.ParamBytes[{RG.PP, RG.TP, RG.EP}] = PB;
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
      C.Bytes = getHcomWireBytes(N, R.CommFloatType, R.ExpectedShapes);
      // The cp ring's transfers (RingAttention.cpp) run inside the
      // attention, like a collective of group cp; the pipeline's between
      // chunks.
      bool Ring = C.Group == "cp";
      if (N.getOpType() == "HcomSend") {
        C.Kind = Ring ? "ring_send" : "send";
        C.Peer = N.getAttrInt("dest_rank", 0);
        C.Tag = N.getAttrInt("sr_tag", 0);
      } else if (N.getOpType() == "HcomReceive") {
        C.Kind = Ring ? "ring_recv" : "recv";
        C.Peer = N.getAttrInt("src_rank", 0);
        C.Tag = N.getAttrInt("sr_tag", 0);
      } else {
        C.Kind =
            getScheduleEventKind(getHcomCollectiveKind(N.getOpType())).str();
      }
      Cs.push_back(C);
    }
  }
  return RC;
}

/// Per-micro-batch forward, backward, send and send-lag times per chunk,
/// from the planner's per-stage (= per device) costs.
ChunkTimes chunkTimes(const PlanCost &Cost, unsigned NumChunks, unsigned PP,
                      unsigned VPP, bool Train) {
  ChunkTimes T;
  T.Fwd.resize(NumChunks);
  T.Bwd.resize(NumChunks);
  T.P2P.resize(NumChunks);
  T.Lag.resize(NumChunks);
  for (unsigned C = 0; C < NumChunks; ++C) {
    const StageCost &S =
        Cost.Stages[std::min<size_t>(C % PP, Cost.Stages.size() - 1)];
    // Exposed TP and EP communication where the evaluator's pipeline puts
    // it: forward's with the forward, backward's with the backward.
    // The plan's overlaps (PlanCost.h: OverlapFwdS/BwdS, SendLagS).
    T.Fwd[C] = (S.ForwardS + S.ForwardCommS + S.OverlapFwdS) / VPP;
    T.Bwd[C] = (S.BackwardS + S.BackwardCommS + S.OverlapBwdS) / VPP;
    // Offload streaming its compute does not hide (the evaluator's
    // pipeline adds it to the backward).
    T.Bwd[C] += S.Offload.ExposedPerMicroBatchS / VPP;
    // The evaluator's pipeline charges one send per boundary crossing, the
    // same for every chunk (P2PS counts the forward send and, in training,
    // the backward one).
    T.P2P[C] = S.P2PS / (Train ? 2 : 1);
    T.Lag[C] = S.SendLagS;
  }
  return T;
}

/// The timeline per pipeline device: list scheduling of the 1F1B order
/// (the bubble model's, cost_models/pipeline) with the cross-chunk
/// dependencies. Fails if the order deadlocks.
Expected<std::vector<std::vector<Item>>> layTimeline(const ChunkTimes &T,
                                                     unsigned NumChunks,
                                                     unsigned PP, unsigned VPP,
                                                     unsigned M, bool Train) {
  std::vector<std::vector<Item>> Order(PP);
  std::vector<std::vector<PipelineOp>> Ops =
      getPipelineOrder(PP, M, VPP, /*ForwardOnly=*/!Train);
  for (unsigned D = 0; D < PP; ++D)
    for (const PipelineOp &Op : Ops[D])
      Order[D].push_back(Item{!Op.Backward, Op.MicroBatch, Op.Chunk * PP + D});
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
               (I.Chunk - 1) % PP == D ? 0 : T.Lag[I.Chunk - 1]);
      } else {
        Need(true, I.MB, I.Chunk, 0);
        // The gradient crosses back the boundary after this chunk: the
        // transfer this chunk's forward send takes (the evaluator's
        // pipeline charges Transfer[d] both ways).
        if (I.Chunk + 1 < NumChunks)
          Need(false, I.MB, I.Chunk + 1,
               (I.Chunk + 1) % PP == D ? 0 : T.Lag[I.Chunk]);
      }
      if (!OK)
        continue;
      I.Start = std::max(Ready, Free[D]);
      I.End = I.Start + (I.Forward ? T.Fwd[I.Chunk] : T.Bwd[I.Chunk]);
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
  return Order;
}

/// The plan's communication groups as the schedule maps them onto the
/// topology.
struct ScheduleGroups {
  GroupShape TPG, EPG, DPG, PPG, CPG;
};

/// A program's communication table: each collective with its time over
/// its group, each send and receive with the pipeline transfer time of
/// the boundary it crosses.
std::vector<ScheduleComm> programComms(ArrayRef<Comm> Cs,
                                       const ScheduleGroups &G,
                                       const ChunkTimes &T, unsigned NumChunks,
                                       const HardwareModel &HW) {
  std::vector<ScheduleComm> Out;
  for (const Comm &C : Cs) {
    ScheduleComm SC;
    SC.Kind = C.Kind;
    SC.Op = C.Op;
    SC.Group = C.Group;
    SC.Chunk = C.Chunk;
    if (C.Kind == "send" || C.Kind == "recv") {
      SC.Level = levelName(G.PPG, HW);
      SC.Peer = C.Peer;
      SC.Tag = C.Tag;
      // A send leaves over the boundary after its chunk; a receive
      // arrives over the one before.
      unsigned Boundary = C.Kind == "send" ? C.Chunk : C.Chunk - 1;
      SC.TimeS = C.Chunk < NumChunks && (C.Kind == "send" || C.Chunk > 0)
                     ? T.P2P[Boundary]
                     : 0;
    } else {
      // dp: the embedding tables' id gathers and exchanges (RG.DP roles).
      const GroupShape &GS = C.Group == "ep"   ? G.EPG
                             : C.Group == "dp" ? G.DPG
                             : C.Group == "cp" ? G.CPG
                                               : G.TPG;
      SC.Level = levelName(GS, HW);
      CollectiveKind K = C.Kind == "ring_send" || C.Kind == "ring_recv"
                             ? CollectiveKind::SendRecv
                             : parseScheduleEventKind(C.Kind);
      SC.TimeS = collectiveTime(K, C.Bytes, GS, HW).Seconds;
      SC.Peer = C.Peer;
      SC.Tag = C.Tag;
    }
    SC.Bytes = C.Bytes;
    Out.push_back(SC);
  }
  return Out;
}

/// The compute events of one pipeline device, \p Order being its timeline,
/// each followed by its offload stream event when the plan offloads.
/// Sets \p LastBwdStart and \p LastBwdEnd to the last backward's times.
void appendComputeEvents(std::vector<ScheduleEvent> &Events,
                         ArrayRef<Item> Order, const StageCost &St,
                         const ParallelPlan &P, unsigned VPP, bool Train,
                         double &LastBwdStart, double &LastBwdEnd) {
  LastBwdEnd = 0;
  LastBwdStart = 0;
  for (const Item &I : Order) {
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
    if (P.Offload.any() && St.Offload.StreamS > 0) {
      double Share = (Train ? 0.5 : 1.0) / VPP;
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
}

/// Training's step tail: the DP gradient buckets (dp > 1), overlapped with
/// the last backward as the evaluator costed it, then the optimizer.
void appendStepTail(std::vector<ScheduleEvent> &Events, const StageCost &S,
                    const ParallelPlan &P, bool CPAxis, double ParamBytes,
                    double BucketBytes, const std::string &DPLevel,
                    double LastBwdStart, double LastBwdEnd) {
  double Grad =
      ParamBytes / getDataTypeSize(DataType::Float) * P.getGradBytes();
  double Buf = std::max(1.0, BucketBytes);
  unsigned Buckets = std::max(1u, (unsigned)std::ceil(Grad / Buf));
  // Negative when dp overlap's held compute outlasts the sync: the
  // buckets then end DPExposedS after the last backward, as costed.
  double Hidden = S.DPSyncS - S.DPExposedS;
  double T = std::max(LastBwdStart, LastBwdEnd - Hidden);
  double End = LastBwdEnd;
  // Under context parallelism (P's tp is cp, Sharding.h) the weights are
  // replicated over dp x cp and their gradients reduce over group dp_cp.
  if (P.DP > 1 || CPAxis)
    for (unsigned B = 0; B < Buckets; ++B) {
      ScheduleEvent G;
      G.Kind = "grad_sync";
      G.Op = P.ZeroStage >= 2 ? "reducescatter" : "allreduce";
      G.FusionId = B;
      G.Group = CPAxis ? "dp_cp" : "dp";
      G.Level = DPLevel;
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

/// The latest end of \p Prog's events, the communication inside its
/// compute events included.
double programEnd(const ScheduleProgram &Prog) {
  double Step = 0;
  for (const ScheduleEvent &E : Prog.Events) {
    Step = std::max(Step, E.EndS);
    if (E.Stream == "compute")
      expandComms(Prog, E, [&](const ScheduleEvent &CE) {
        Step = std::max(Step, CE.EndS);
      });
  }
  return Step;
}

} // namespace

Error buildSchedule(ShardedProgram &SP, const PlanCost &Cost,
                    const ScheduleContext &Ctx) {
  const ShardingResult &R = SP.Sharding;
  const ParallelPlan &P = R.Plan;
  unsigned PP = P.PP, VPP = R.NumChunks / PP, M = P.NumMicroBatches;
  RoleComms RC = collectRoleComms(SP);
  ChunkTimes T = chunkTimes(Cost, R.NumChunks, PP, VPP, Ctx.Train);
  Expected<std::vector<std::vector<Item>>> Order =
      layTimeline(T, R.NumChunks, PP, VPP, M, Ctx.Train);
  if (!Order)
    return Order.takeError();

  // One program per role; DP replicas run their role's, and roles whose
  // communication is alike share one (a program follows from its pipeline
  // device, its collectives and transfers, and its gradient bytes).
  ScheduleGroups G{Ctx.TPGroup, Ctx.EPGroup, Ctx.DPGroup, Ctx.PPGroup,
                   Ctx.CPGroup};
  double Step = 0;
  SP.Programs.clear();
  SP.RoleProgram.clear();
  SP.NumMicroBatches = M;
  std::vector<std::tuple<unsigned, const std::vector<Comm> *, double>> Keys;
  for (const RoleGraph &RG : SP.Roles) {
    const std::vector<Comm> &Cs = RC.Comms[{RG.PP, RG.TP, RG.EP}];
    double PB = RC.ParamBytes[{RG.PP, RG.TP, RG.EP}];
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
    Prog.Comms = programComms(Cs, G, T, R.NumChunks, *Ctx.HW);
    const StageCost &St =
        Cost.Stages[std::min<size_t>(RG.PP, Cost.Stages.size() - 1)];
    double LastBwdStart, LastBwdEnd;
    appendComputeEvents(Prog.Events, (*Order)[RG.PP], St, P, VPP, Ctx.Train,
                        LastBwdStart, LastBwdEnd);
    if (Ctx.Train)
      appendStepTail(Prog.Events, St, P, getCPSize(R) > 1, PB, Ctx.BucketBytes,
                     levelName(G.DPG, *Ctx.HW), LastBwdStart, LastBwdEnd);
    std::stable_sort(Prog.Events.begin(), Prog.Events.end(),
                     [](const ScheduleEvent &A, const ScheduleEvent &B) {
                       return A.StartS < B.StartS;
                     });
    Step = std::max(Step, programEnd(Prog));
    SP.Programs.push_back(std::move(Prog));
  }
  SP.ScheduleStepS = Step;
  return Error::success();
}

} // namespace loom
