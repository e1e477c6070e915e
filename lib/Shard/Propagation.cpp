//===- Propagation.cpp - Sharding specs along the TP axis -----------------===//
//
// One forward walk over the micro-batch graph in topological order (the
// one driver, include/loom/Shard/Propagate.h), applying the rule table
// (include/loom/Shard/Rules.h, lib/Shard/Rules/) to every node: each rule
// looks at the specs its inputs arrive in, picks the specs it needs and
// says what its outputs are. Where the producer's spec
// differs from what a rule needs, the role builder inserts the reshard
// (RoleReshards.cpp). This file adds what is not per op: pipeline chunks,
// the marks of the ep rules (include/loom/Shard/ExpertRules.h) and the
// chunk of each expert region, and the weight slicing the rules ask for.
//
//===----------------------------------------------------------------------===//
#include "loom/Analysis/Experts.h"
#include "loom/Plan/StageSplit.h"
#include "loom/Shard/ExpertRules.h"
#include "loom/Shard/Propagate.h"
#include "loom/Shard/Sharding.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include <algorithm>
#include <numeric>

using namespace llvm;

namespace loom {

ExpertNodeRule ShardingResult::getExpertRule(const Node *N) const {
  auto It = Nodes.find(N);
  if (It == Nodes.end())
    return {};
  const NodeSharding &Marks = It->second;
  ExpertNodeRule X;
  X.Role = Marks.Stacked         ? ExpertRole::Stacked
           : Marks.Expert >= 0   ? ExpertRole::Branch
           : Marks.ExpertCombine ? ExpertRole::Combine
                                 : ExpertRole::None;
  X.Expert = Marks.Expert;
  X.GroupExperts = NumExperts;
  return X;
}

// The mesh follows P.Order above tp (ParallelPlan.h): rank = tp_idx +
// sum over the axes of idx * stride.
RankCoords getRankCoords(const ParallelPlan &P, unsigned Rank) {
  RankCoords C;
  C.TP = Rank % P.TP;
  unsigned Rest = Rank / P.TP;
  for (MeshAxis A : P.Order) {
    unsigned Size = std::max(1u, P.getAxisSize(A));
    unsigned Idx = Rest % Size;
    Rest /= Size;
    (A == MeshAxis::EP ? C.EP : A == MeshAxis::DP ? C.DPOuter : C.PP) = Idx;
  }
  C.DP = C.DPOuter * P.EP + C.EP;
  return C;
}

unsigned getRank(const ParallelPlan &P, unsigned PPIdx, unsigned DPIdx,
                 unsigned TPIdx) {
  unsigned EP = std::max(1u, P.EP);
  return TPIdx + (DPIdx % EP) * P.getAxisStride(MeshAxis::EP) +
         (DPIdx / EP) * P.getAxisStride(MeshAxis::DP) +
         PPIdx * P.getAxisStride(MeshAxis::PP);
}

std::vector<unsigned> getGroupRanks(const ParallelPlan &P, StringRef Name,
                                    unsigned Rank) {
  RankCoords C = getRankCoords(P, Rank);
  std::vector<unsigned> R;
  if (Name == "tp") {
    for (unsigned T = 0; T < P.TP; ++T)
      R.push_back(getRank(P, C.PP, C.DP, T));
  } else if (Name == "pp") {
    for (unsigned S = 0; S < P.PP; ++S)
      R.push_back(getRank(P, S, C.DP, C.TP));
  } else if (Name == "dp") {
    for (unsigned D = 0; D < P.DP; ++D)
      R.push_back(getRank(P, C.PP, D, C.TP));
  } else if (Name == "ep") {
    for (unsigned E = 0; E < P.EP; ++E)
      R.push_back(getRank(P, C.PP, C.DPOuter * P.EP + E, C.TP));
  } else if (Name == "dp_ep") {
    for (unsigned O = 0; O < P.DP / P.EP; ++O)
      R.push_back(getRank(P, C.PP, O * P.EP + C.EP, C.TP));
  }
  return R;
}

std::vector<unsigned> getOutputGroupRanks(const ShardingResult &R,
                                          StringRef Name, unsigned Rank) {
  const ParallelPlan &P = R.Plan;
  std::vector<unsigned> Out;
  if (Name == "tp" || Name == "cp") {
    // The mesh's inner axis, split into tp (inner) and cp.
    std::vector<unsigned> Inner = getGroupRanks(P, "tp", Rank);
    auto Me = splitInnerIndex(R, getRankCoords(P, Rank).TP);
    for (unsigned I = 0; I < Inner.size(); ++I) {
      auto Them = splitInnerIndex(R, I);
      if (Name == "tp" ? Them.second == Me.second : Them.first == Me.first)
        Out.push_back(Inner[I]);
    }
    return Out;
  }
  if (Name == "dp_cp") {
    for (unsigned D : getGroupRanks(P, "dp", Rank))
      for (unsigned M : getOutputGroupRanks(R, "cp", D))
        Out.push_back(M);
    llvm::sort(Out);
    return Out;
  }
  return getGroupRanks(P, Name, Rank);
}

namespace {

/// Sharding propagation: the one driver (Propagate.h) over the micro-batch
/// graph; this class keeps what the shard pass records: the specs of every
/// node beside what the plan decided before (chunk, ep marks), the
/// parameter slicing, the ops that ran replicated for want of a rule.
class Propagator final : public PropagationContext {
public:
  Propagator(ShardingResult &R, const UseMap &Users)
      : PropagationContext(R.Plan.TP, R.Plan.SP, R.M->getOpsetVersion(""),
                           R.Values, Users),
        R(R), Users(Users) {
    setSequenceAxis(R.CPAxis);
    setSequenceRing(R.CPRing);
    setSequences(R.Plan.MicroBatchSize);
    if (R.CPAxis && !R.CPRing && R.OuterCP > 1)
      setHeadGroups(R.InnerTP);
  }
  Error run();

  bool isStackedExpertWork(const Node *N) const override {
    auto It = R.Nodes.find(N);
    return It != R.Nodes.end() && It->second.Stacked;
  }
  bool isShardedOverDP(const Value *Table) const override {
    return R.findEmbShard(Table);
  }

private:
  ExpertRole getExpertRole(const Node &N) const override {
    return R.getExpertRule(&N).Role;
  }
  void onParamSplit(const Value *Param, const AxisSpec &PS) override {
    ParamSlice &Slice = R.Params[Param];
    Slice.Dim = PS.Dim;
    Slice.Blocks = PS.Blocks;
  }
  void onChainNode(const Node &Def, const AxisSpec &In,
                   const AxisSpec &Out) override {
    NodeSharding &NS = R.Nodes[&Def];
    NS.InputSpecs.assign(1, In);
    NS.OutputSpecs.assign(1, Out);
  }
  void record(const Node &N, OpSharding S, bool HasRule) override;
  void hoistAllToAlls(const Graph &G);
  bool tryHoist(ArrayRef<const Node *> Chain, const AxisSpec &From,
                const AxisSpec &Req);

  ShardingResult &R;
  const UseMap &Users;
  StringSet<> NoRule;
};

void Propagator::record(const Node &N, OpSharding S, bool HasRule) {
  if (!HasRule && any_of(N.getInputs(), [&](const Value *V) {
        return !getSpec(V).isReplicated();
      }))
    NoRule.insert(N.getQualifiedOpType());
  // Keep what the plan decided before propagation (chunk, EP roles).
  NodeSharding &Slot = R.Nodes[&N];
  static_cast<OpSharding &>(Slot) = std::move(S);
}

/// \p Chain runs from the consumer's operand up (Chain[0] makes it): the
/// specs its rules give when its input arrives as \p From; committed when
/// the operand then comes out as \p Req.
bool Propagator::tryHoist(ArrayRef<const Node *> Chain, const AxisSpec &From,
                          const AxisSpec &Req) {
  const Value *U = Chain.back()->getInput(0);
  DenseMap<const Value *, AxisSpec> Saved;
  for (const Node *C : Chain)
    Saved[C->getOutput(0)] = Values.lookup(C->getOutput(0));
  AxisSpec Arrived = Values.lookup(U);
  Values[U] = From;
  std::vector<std::pair<const Node *, OpSharding>> Decided;
  bool OK = true;
  for (const Node *C : llvm::reverse(Chain)) {
    bool HasRule = true;
    OpSharding S = applyShardingRule(*C, *this, HasRule);
    S.InputSpecs.resize(C->getNumInputs());
    S.OutputSpecs.resize(C->getNumOutputs());
    if (!HasRule || S.InputSpecs[0] != Values.lookup(C->getInput(0)) ||
        !S.OutputSpecs[0].isSplit()) {
      OK = false;
      break;
    }
    Values[C->getOutput(0)] = S.OutputSpecs[0];
    Decided.emplace_back(C, std::move(S));
  }
  OK = OK && Values.lookup(Chain.front()->getOutput(0)) == Req;
  Values[U] = Arrived;
  if (!OK) {
    for (const auto &KV : Saved)
      Values[KV.first] = KV.second;
    return false;
  }
  for (auto &D : Decided)
    record(*D.first, std::move(D.second), true);
  return true;
}

/// Context parallelism over heads (Ulysses): where the scores or context
/// MatMul takes a value split by heads that arrives split by tokens, one
/// all-to-all moves it. When data movement alone made it from a smaller
/// value (HF's repeat_kv: Unsqueeze, Expand and Reshape of K or V with
/// their KV heads), the all-to-all moves the smaller value instead and the
/// movement runs on each rank's heads, as DeepSpeed-Ulysses and
/// Megatron-Core move un-repeated K/V (ContextParallel.h prices that).
/// Where no split of the smaller value comes out as the heads the consumer
/// takes (more cp ranks than KV heads), the repeated value moves, as
/// MindSpeed's --kv-head-repeat-before-uly-alltoall does.
void Propagator::hoistAllToAlls(const Graph &G) {
  for (const auto &NP : G.getNodes()) {
    auto NIt = R.Nodes.find(NP.get());
    if (NIt == R.Nodes.end())
      continue;
    for (unsigned I = 0; I < NP->getNumInputs(); ++I) {
      const Value *V = NP->getInput(I);
      if (!V || I >= NIt->second.InputSpecs.size())
        continue;
      AxisSpec Req = NIt->second.InputSpecs[I], Cur = Values.lookup(V);
      if (!Cur.isSplit() || !Req.isSplit() || Cur.Dim == Req.Dim ||
          !Cur.Blocks.empty() || !hasEqualBlocks(Req))
        continue;
      SmallVector<const Node *, 4> Up = findSmallerMovementSource(
          V, Users, [&](const Value *X) { return Values.lookup(X).isSplit(); });
      if (Up.empty())
        continue;
      const Value *U = Up.back()->getInput(0);
      AxisSpec From = Values.lookup(U);
      // Blocked heads (tp's groups inside cp, folded batches) stay as
      // many blocks of the smaller value's heads.
      int64_t NB = Req.Blocks.size();
      for (unsigned D = 0; D < U->Type.getRank(); ++D) {
        if ((int)D == From.Dim || !U->Type.Dims[D].isStatic())
          continue;
        int64_t Size = U->Type.Dims[D].Size;
        AxisSpec Try = AxisSpec::split(D);
        if (NB) {
          if (Size % NB)
            continue;
          Try.Blocks.assign(NB, Size / NB);
        }
        if (isDivisible(NB ? Size / NB : Size) && tryHoist(Up, Try, Req)) {
          ++R.CPMovedBeforeRepeat;
          break;
        }
      }
    }
  }
}

Error Propagator::run() {
  propagate(R.M->getGraph());
  if (isSequenceAxis() && !isSequenceRing())
    hoistAllToAlls(R.M->getGraph());
  for (const auto &E : NoRule)
    R.Notes.push_back(("op " + E.getKey() +
                       " has no sharding rule: its inputs are gathered and "
                       "it runs replicated")
                          .str());
  std::sort(R.Notes.begin(), R.Notes.end());
  // Graph outputs are replicated: the role builder gathers them.
  return Error::success();
}

} // namespace

/// Pipeline chunks: pp * vpp contiguous runs of layers, chunk c on device
/// c % pp (interleaved 1F1B, Narayanan et al. 2021). With vpp == 1 the
/// chunks are the plan's stages. A graph whose nodes carry their chunks
/// already (a tp rank's graph under cp beside tp, ChunksFromStages) keeps
/// them.
static Error assignChunks(ShardingResult &R) {
  const ParallelPlan &P = R.Plan;
  Graph &G = R.M->getGraph();
  if (R.ChunksFromStages) {
    for (const auto &NP : G.getNodes())
      R.Nodes[NP.get()].Chunk =
          NP->Stage >= 0 ? (unsigned)NP->Stage : R.NumChunks - 1;
    return Error::success();
  }
  unsigned NL = std::max<size_t>(R.Layers.size(), 1);
  R.NumChunks = P.PP * P.VirtualStages;
  // The split the evaluator costs (loom/Plan/StageSplit.h).
  LayerEnds Ends = getLayerEnds(R.Layers);
  Ends.NumLayers = NL;
  Expected<std::vector<unsigned>> Chunks = getChunkLayers(P, Ends);
  if (!Chunks)
    return Chunks.takeError();
  R.ChunkLayers = std::move(*Chunks);
  unsigned Sum =
      std::accumulate(R.ChunkLayers.begin(), R.ChunkLayers.end(), 0u);
  if (Sum != NL)
    return createStringError(inconvertibleErrorCode(),
                             "the plan's stages cover %u layers but the "
                             "micro-batch graph has %u",
                             Sum, NL);
  std::vector<unsigned> ChunkOfLayer;
  for (unsigned C = 0; C < R.ChunkLayers.size(); ++C)
    ChunkOfLayer.insert(ChunkOfLayer.end(), R.ChunkLayers[C], C);
  // Nodes outside every layer follow their first consumer's chunk; walk
  // backwards so consumers are decided first.
  DenseMap<const Value *, unsigned> MinUserChunk;
  auto Nodes = G.getNodes();
  for (auto It = Nodes.rbegin(); It != Nodes.rend(); ++It) {
    const Node &N = **It;
    unsigned C;
    if (N.Layer >= 0 && (unsigned)N.Layer < ChunkOfLayer.size()) {
      C = ChunkOfLayer[N.Layer];
    } else {
      C = R.NumChunks - 1;
      bool Any = false;
      for (const Value *O : N.getOutputs()) {
        auto U = MinUserChunk.find(O);
        if (U != MinUserChunk.end()) {
          C = Any ? std::min(C, U->second) : U->second;
          Any = true;
        }
      }
    }
    R.Nodes[&N].Chunk = C;
    for (const Value *V : N.getInputs())
      if (V) {
        auto Ins = MinUserChunk.try_emplace(V, C);
        if (!Ins.second)
          Ins.first->second = std::min(Ins.first->second, C);
      }
  }
  return Error::success();
}

Error propagateSharding(ShardingResult &R) {
  const ParallelPlan &P = R.Plan;
  Graph &G = R.M->getGraph();
  if (Error E = assignChunks(R))
    return E;
  // Expert work (EP): the ep axis' rules (ExpertRules.h).
  if (P.EP > 1) {
    Expected<ExpertAxisRules> XR =
        applyExpertRules(G, findExperts(G, R.Layers), P.EP);
    if (!XR)
      return XR.takeError();
    for (const auto &KV : XR->Nodes) {
      NodeSharding &NS = R.Nodes[KV.first];
      NS.Expert = KV.second.Role == ExpertRole::Branch ? KV.second.Expert : -1;
      NS.ExpertCombine = KV.second.Role == ExpertRole::Combine;
      NS.Stacked = KV.second.Role == ExpertRole::Stacked;
    }
    R.ExpertParams = std::move(XR->SplitParams);
    R.NumExperts = XR->NumExperts;
    // An expert region (branches, the Add chain merging them, and the ops
    // that consume the merged sum) runs in one pipeline chunk: its values
    // hold the ep group's tokens, which only it may see.
    DenseSet<const Node *> Region;
    DenseMap<const Value *, unsigned> RegionChunk;
    for (const auto &NP : G.getNodes()) {
      NodeSharding &NS = R.Nodes[NP.get()];
      bool FromRegion = false;
      unsigned C = NS.Chunk;
      for (const Value *V : NP->getInputs()) {
        auto It = V ? RegionChunk.find(V) : RegionChunk.end();
        if (It != RegionChunk.end()) {
          FromRegion = true;
          C = std::min(C, It->second);
        }
      }
      bool InRegion = NS.Expert >= 0 || NS.Stacked || NS.ExpertCombine;
      if (FromRegion)
        NS.Chunk = C;
      if (InRegion)
        for (const Value *O : NP->getOutputs())
          if (O)
            RegionChunk[O] = NS.Chunk;
    }
  }
  // Context parallelism: each cp rank holds its tokens of every input with
  // a sequence dim (the role graph slices the whole input it is fed).
  if (R.CPAxis)
    for (const Value *V : G.getInputs()) {
      auto It = R.InputSeqAxis.find(V->getName().str());
      if (It != R.InputSeqAxis.end() && It->second >= 0)
        R.Values[V] = AxisSpec::split(It->second);
    }
  UseMap Users = buildUseMap(G);
  Propagator Prop(R, Users);
  if (Error E = Prop.run())
    return E;
  if (R.CPRing)
    findRingSites(R, Users);
  return Error::success();
}

} // namespace loom
