//===- Sharding.h - Per-value sharding specs and per-rank programs -*- C++
//-*-===//
//
// The transform half of Loom (DESIGN §2 passes 9-12) works on a ShardedModel:
//
//  * shard: re-binds the model at micro-batch shapes (folded shape constants
//    encode the batch, so the planning graph cannot be reused), assigns
//    every node its pipeline chunk, and propagates a sharding spec along the
//    TP mesh axis through the graph (as MLIR's sharding propagation and XLA's
//    SPMD partitioner do): Replicated, Split(dim) or Partial(sum). Each node
//    rule (the rule table, Rules.h) says which input specs it needs; where
//    a producer's spec differs a reshard is recorded (AllGather, AllReduce,
//    ReduceScatter, a local Slice), and every rule is exact, so the emitted
//    graphs compute what the original computes. Megatron's column/row splits,
//    vocab-parallel embeddings, attention heads, sequence parallelism and
//    channel splits of convolutions all fall out of the rules; ops without a
//    rule run replicated. Unrolled expert branches are split over the EP axis.
//  * insert-collectives: builds one graph per role (pipeline device x tp
//    rank x ep rank): local shapes, sliced weights (read lazily, slice by
//    slice), rewritten shape constants, Hcom* nodes for the reshards, and
//    HcomSend/HcomReceive where a value crosses pipeline devices.
//  * schedule: the per-rank program of one step.
//  * emit: the output directory (include/loom/Shard/OutputFormat.md).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SHARD_SHARDING_H
#define LOOM_SHARD_SHARDING_H

#include "loom/IR/Graph.h"
#include "loom/Plan/EmbeddingPlan.h"
#include "loom/Plan/ParallelPlan.h"
#include "loom/Shard/ExpertRules.h"
#include "loom/Shard/Rules.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
namespace json {
class OStream;
} // namespace json
} // namespace llvm

namespace loom {

struct RoleGraph;

/// How a node's parameter input is sliced for a rank.
struct ParamSlice {
  /// Dim of the parameter split along the axis; -1: whole.
  int Dim = -1;
  std::vector<int64_t> Blocks;
};

/// Everything the rules decided for one node of the micro-batch graph:
/// its specs and lowering (the rule table, Rules.h) and what the plan
/// decided before propagation.
struct NodeSharding : OpSharding {
  using Lowering = ShardLowering;
  /// Pipeline chunk (virtual stage) the node runs in.
  unsigned Chunk = 0;
  /// EP: the expert whose branch the node belongs to, or -1.
  int Expert = -1;
  /// EP: the node is a link of the Add chain that sums an unrolled group's
  /// experts (ExpertGroup::Combine up to ExpertGroup::Output): each rank
  /// adds the experts it holds; the sum is reduce-scattered where the chain
  /// ends. Adds after it (a residual) are ordinary nodes.
  bool ExpertCombine = false;
  /// EP: the node is expert work on stacked weights [E, ...]: it runs on
  /// this rank's E/ep experts and the ep group's tokens (dim 1), between an
  /// all-to-all dispatch and an all-to-all combine (GShard, Lepikhin et al.
  /// 2020).
  bool Stacked = false;
};

/// A KV cache tensor of the model (findKVCache,
/// include/loom/Analysis/KVCache.h) as the role graphs take or return it: split
/// along the tp axis as the attention that reads it (by heads), or replicated.
struct KVCacheShard {
  std::string Name;
  bool IsPast = true; ///< A graph input (past) or output (present).
  unsigned Layer = 0;
  bool IsKey = true;
  /// The other end in the same graph (the present a past is appended into,
  /// the past a present extends); empty when there is none.
  std::string Pair;
  int SeqAxis = -1; ///< -1: not known (a present without a past).
  /// The value in the micro-batch graph.
  const Value *V = nullptr;
  /// How each tp rank holds it (Replicated or Split(Dim) without blocks).
  AxisSpec Spec;
  /// Why it is replicated although tp > 1 (empty otherwise).
  std::string Reason;
};

/// An attention the cp ring computes (cp_algo=ring,
/// lib/Shard/RingAttention.cpp): the scores MatMul Q K^T, the elementwise
/// chain after it (scale, mask, ...) ending with the Softmax over the keys,
/// and the context MatMul P V (through Post). The chain is computed once per
/// K/V block at the context node; the scores and chain nodes emit nothing of
/// their own.
struct RingSite {
  const Node *Scores = nullptr;
  /// After Scores, in order; the last is the Softmax.
  std::vector<const Node *> Chain;
  /// Per chain node, the input slot that carries the scores.
  std::vector<unsigned> ChainSlot;
  /// Casts from the softmax to the context, applied to each step's
  /// probabilities.
  std::vector<const Node *> Post;
  const Node *Context = nullptr;
  /// The data movement that made K^T (V) from a smaller value (HF's
  /// repeat_kv; findSmallerMovementSource, Propagate.h), Chain[0] making
  /// it: the ring passes the smaller value's blocks and repeats the
  /// movement on each, as Megatron-Core passes un-repeated K/V. Empty: K^T
  /// (V) itself goes around.
  std::vector<const Node *> KChain, VChain;
  /// The site's number (its transfers' tags).
  unsigned Index = 0;
};

/// Result of the shard pass.
struct ShardingResult {
  /// The plan the graphs are cut for. With context parallelism (cp > 1,
  /// tp = 1) the one propagated axis is cp's: Plan holds it
  /// in TP (tp = cp, cp = 1: the same mesh, cp sitting right outside a tp
  /// of 1) and CPAxis is set; the output names it "cp" (getAxisGroupName,
  /// getPlanAsPlanned).
  ParallelPlan Plan;
  bool CPAxis = false;
  /// Context parallelism beside tp (cp > 1 and tp > 1): the shard pass
  /// propagates one axis -- tp (Plan.TP = InnerTP) with sp off, cp
  /// (CPAxis, the ring) with sp on -- and insert-collectives propagates the
  /// other over each of its ranks' graphs (ComposeContextParallel.cpp),
  /// then sets Plan.TP to tp x cp, the mesh's
  /// inner axis: a role's TP index is tp_idx + cp_idx x tp (cp sits right
  /// outside tp, ParallelPlan.h). OuterCP is 1 otherwise.
  unsigned OuterCP = 1, InnerTP = 1;
  bool InnerSP = false;
  /// OuterCP: the second axis' propagation over the first axis' rank 0
  /// graph (the others' are alike; the report reads it).
  std::unique_ptr<ShardingResult> SecondStage;
  /// CPAxis with cp_algo=ring: attention runs as the K/V ring at RingSites
  /// (found after propagation); otherwise all-to-all over heads.
  bool CPRing = false;
  std::vector<RingSite> RingSites;
  /// Attentions under the ring that read K and V all-gathered instead.
  unsigned RingFallbacks = 0;
  /// cp's transfers that move a value before the data movement that made
  /// the attention's operand from it (K and V before a GQA repeat):
  /// Ulysses' all-to-alls (hoistAllToAlls) and the ring's K or V blocks
  /// (RingSite::KChain, VChain).
  unsigned CPMovedBeforeRepeat = 0;
  /// Scores, chain and context nodes -> index into RingSites.
  llvm::DenseMap<const Node *, unsigned> RingNodes;
  const RingSite *findRingSite(const Node *N) const {
    auto It = RingNodes.find(N);
    return It == RingNodes.end() ? nullptr : &RingSites[It->second];
  }
  /// CPAxis: per model input, the axis of its sequence dim (-1: none): the
  /// input arrives whole and each cp rank keeps its tokens.
  std::map<std::string, int> InputSeqAxis;
  /// The precision recipe's storage type (loom/Plan/Precision.h): what the
  /// schedule's collectives carry floating tensors in, whatever the
  /// emitted graphs (the model's own types) hold; Undefined: as held.
  DataType CommFloatType = DataType::Undefined;
  /// The values whose dims depend on the data (NonZero's counts, and what
  /// follows from them: the tokens an index-routed expert takes), by name:
  /// their shape at the expected counts, as the plan prices them
  /// (fold-shape-arith's capacity-factor estimate). The emitted graphs
  /// keep such dims dynamic; the schedule times their collectives at
  /// these sizes (getHcomWireBytes).
  std::map<std::string, std::vector<int64_t>> ExpectedShapes;
  /// The model re-bound at micro-batch shapes (what the roles are cut from).
  std::unique_ptr<Model> M;
  std::vector<LayerInfo> Layers;
  /// Per node of M's main graph.
  llvm::DenseMap<const Node *, NodeSharding> Nodes;
  /// Spec of every value as produced (parameters: as stored per rank).
  llvm::DenseMap<const Value *, AxisSpec> Values;
  /// Parameter slicing along the TP axis.
  llvm::DenseMap<const Value *, ParamSlice> Params;
  /// Pipeline chunks: NumChunks = pp * vpp; chunk c runs on device c % pp.
  unsigned NumChunks = 1;
  /// M's nodes carry their chunks in Node::Stage (a tp rank's graph under
  /// cp beside tp): propagation keeps them; NumChunks and ChunkLayers are
  /// set by the caller.
  bool ChunksFromStages = false;
  /// Layers per chunk.
  std::vector<unsigned> ChunkLayers;
  /// Per model input/output: the axis the batch is on (-1: none).
  std::map<std::string, int> InputBatchAxis, OutputBatchAxis;
  /// Global (planning) shapes of the model's inputs and outputs.
  std::map<std::string, TensorType> GlobalInputTypes, GlobalOutputTypes;
  /// EP: number of experts per MoE group (unrolled branches) and which
  /// expert indices each ep rank owns follow from NumExperts / ep.
  unsigned NumExperts = 0;
  /// The ep rule of \p N as propagation marked it (ExpertRules.h).
  ExpertNodeRule getExpertRule(const Node *N) const;
  /// EP on stacked experts: parameters whose dim 0 is the expert dim.
  llvm::DenseSet<const Value *> ExpertParams;
  /// Notes for the report (ops run replicated for want of a rule, ...).
  std::vector<std::string> Notes;
  /// The KV cache inputs and outputs (shardKVCache), layer then key/value.
  std::vector<KVCacheShard> KVCache;
  /// Embedding tables the plan shards over dp (PlanCost::Embeddings,
  /// loom/Plan/PredictedCost.h): each
  /// dp rank's role holds its shard (RoleGraphs.cpp).
  std::vector<EmbeddingShard> EmbShards;
  const EmbeddingShard *findEmbShard(const Value *Table) const {
    for (const EmbeddingShard &S : EmbShards)
      if (S.Table == Table->getName())
        return &S;
    return nullptr;
  }
  const KVCacheShard *findKVCache(const Value *V) const {
    for (const KVCacheShard &C : KVCache)
      if (C.V == V)
        return &C;
    return nullptr;
  }
};

/// One distinct graph of the output: pipeline device x tp rank x ep rank.
struct RoleGraph {
  unsigned PP = 0, TP = 0, EP = 0;
  /// The dp rank, when the role holds its own embedding table shards; -1:
  /// every dp rank runs it.
  int DP = -1;
  std::string FileName; ///< "pp0_tp1_ep0.onnx"
  std::unique_ptr<Model> M;
  std::vector<std::string> Inputs, Outputs; ///< Model inputs/outputs used.
};

/// One event of a role's step (schedule.json).
struct ScheduleEvent {
  std::string Kind; ///< forward, backward, send, recv, allreduce, ...
  int MicroBatch = -1, Chunk = -1;
  double StartS = 0, EndS = 0;
  std::string Stream, Group, Level, Op;
  double Bytes = 0;
  /// send/recv: the peer's pipeline device (its rank in the pp group).
  int Peer = -1, Tag = -1, FusionId = -1;
};

/// One hccl node of a role graph, implied by every compute event of its
/// chunk (expandComms): a collective runs inside every forward and (in
/// reverse graph order) backward; a transfer ("send"/"recv": the graph
/// node's forward direction) around them.
struct ScheduleComm {
  std::string Kind, Op, Group, Level;
  unsigned Chunk = 0;
  double Bytes = 0, TimeS = 0;
  /// Transfers: the peer's pipeline device and the tag.
  int Peer = -1, Tag = -1;
};

/// The program of one step that every rank of some roles runs: DP replicas
/// run their role's program, and roles whose graphs communicate alike
/// (the tp ranks of a pipeline device, usually) share one.
struct ScheduleProgram {
  unsigned PP = 0;
  /// In graph order.
  std::vector<ScheduleComm> Comms;
  /// Compute, gradient buckets and optimizer, in start order; the
  /// collectives and transfers follow from the compute events.
  std::vector<ScheduleEvent> Events;
};

/// The transform passes' state in the CompilationUnit.
struct ShardedProgram {
  ShardingResult Sharding;
  std::vector<RoleGraph> Roles;
  std::vector<ScheduleProgram> Programs;
  /// Per role (index into Roles): its program (index into Programs).
  std::vector<unsigned> RoleProgram;
  /// Micro-batches per replica; the schedule's step time.
  unsigned NumMicroBatches = 0;
  double ScheduleStepS = 0;
};

/// The communication events compute event \p E of \p P implies, in
/// order: the transfers before it (forward: the chunk's receives, over
/// [StartS - TimeS, StartS]; backward: the gradients of its sends), the
/// chunk's collectives in graph order (backward: reversed), the k-th of n
/// over StartS + (EndS - StartS) * (k + 1) / (n + 1) plus its TimeS, then
/// the transfers after it (forward: the sends; backward: the gradients of
/// its receives, sent back), over [EndS, EndS + TimeS].
void expandComms(const ScheduleProgram &P, const ScheduleEvent &E,
                 llvm::function_ref<void(const ScheduleEvent &)> Fn);

/// Mesh coordinates of a global rank (include/loom/Shard/OutputFormat.md).
/// The group name of the propagated axis: "cp" when it is context
/// parallelism's (ShardingResult::CPAxis), "tp" otherwise.
inline llvm::StringRef getAxisGroupName(const ShardingResult &R) {
  return R.CPAxis ? "cp" : "tp";
}
/// The tp and cp degrees of the plan as searched.
inline unsigned getTPSize(const ShardingResult &R) {
  return R.OuterCP > 1 ? R.InnerTP : R.CPAxis ? 1 : R.Plan.TP;
}
inline unsigned getCPSize(const ShardingResult &R) {
  return R.OuterCP > 1 ? R.OuterCP : R.CPAxis ? R.Plan.TP : 1;
}
/// The tp and cp indices of a role's or rank's index \p Idx on the
/// mesh's inner axis (RoleGraph::TP, RankCoords::TP).
inline std::pair<unsigned, unsigned> splitInnerIndex(const ShardingResult &R,
                                                     unsigned Idx) {
  unsigned TP = getTPSize(R);
  return {Idx % TP, Idx / TP};
}
/// Where context parallelism was propagated: R itself, or (cp beside tp,
/// tp first) the first tp rank's cp stage; null without cp.
inline const ShardingResult *getCPSharding(const ShardingResult &R) {
  if (R.CPAxis)
    return &R;
  return R.SecondStage.get();
}
/// The plan as searched (tp = 1, cp = Plan.TP when CPAxis).
inline ParallelPlan getPlanAsPlanned(const ShardingResult &R) {
  ParallelPlan P = R.Plan;
  if (R.OuterCP > 1) {
    P.TP = R.InnerTP;
    P.CP = R.OuterCP;
    P.SP = R.InnerSP;
  } else if (R.CPAxis) {
    P.CP = P.TP;
    P.TP = 1;
    P.CPA = R.CPRing ? CPAlgo::Ring : CPAlgo::A2A;
  }
  return P;
}

struct RankCoords {
  unsigned DP = 0, PP = 0, TP = 0, EP = 0, DPOuter = 0;
};
RankCoords getRankCoords(const ParallelPlan &P, unsigned Rank);
unsigned getRank(const ParallelPlan &P, unsigned PPIdx, unsigned DPIdx,
                 unsigned TPIdx);
/// Members of group \p Name ("tp", "pp", "dp", "ep", "dp_ep") of \p Rank.
std::vector<unsigned> getGroupRanks(const ParallelPlan &P, llvm::StringRef Name,
                                    unsigned Rank);
/// Members of group \p Name of \p Rank in the output of \p R: "tp" and "cp"
/// split the mesh's inner axis (tp_idx + cp_idx x tp), "dp_cp" is the
/// weight gradients' group under cp (dp x cp); the others as
/// getGroupRanks.
std::vector<unsigned> getOutputGroupRanks(const ShardingResult &R,
                                          llvm::StringRef Name, unsigned Rank);

/// Propagates specs through \p R.M (already bound, inferred, folded and
/// with layers detected) for \p R.Plan. Fills Nodes, Values, Params, chunks.
llvm::Error propagateSharding(ShardingResult &R);

/// Writes ONNX Attention ops (opset 23) of \p G as the MatMul, scale,
/// mask, Softmax and MatMul they compute, in the micro-batch graph of a cp
/// plan before propagation: every one for the ring (\p KVHeadSplit 0),
/// which lowers those ops; for Ulysses those whose K/V heads
/// \p KVHeadSplit (tp x the all-to-all's degree) does not divide, whose
/// K and V then move repeated. Returns how many, with a note in \p Notes
/// for each left as it is (lib/Shard/ExpandAttention.cpp).
unsigned expandAttentionOps(Graph &G, unsigned KVHeadSplit,
                            std::vector<std::string> &Notes);

/// Under the cp ring (R.CPRing, after propagation): the attentions the
/// ring computes (RingSites); an attention that does not fit reads K and V
/// all-gathered, with a note (lib/Shard/RingAttention.cpp).
void findRingSites(ShardingResult &R, const UseMap &Users);

/// Finds the model's KV cache (findKVCache) and decides, after
/// propagateSharding, how each tp rank holds each cache input and output:
/// as the attention that reads it wants it (lib/Shard/KVCache.cpp). A
/// split past input arrives sliced, a split present output leaves sliced.
void shardKVCache(ShardingResult &R);
/// Writes role \p RG's "kv_cache" array of manifest.json (OutputFormat.md).
void writeRoleKVCache(llvm::json::OStream &J, const ShardingResult &R,
                      const RoleGraph &RG);

/// Dumps (--print-after): per node its chunk, expert and specs.
void printShardingResult(const ShardingResult &R, llvm::raw_ostream &OS);
/// Dumps every role graph.
void printRoleGraphs(const ShardedProgram &SP, llvm::raw_ostream &OS);

/// Builds the role graphs (insert-collectives).
llvm::Expected<std::vector<RoleGraph>> buildRoleGraphs(const ShardingResult &R);
/// Builds the role graphs of a plan with cp beside tp (R.OuterCP > 1):
/// each graph of R's axis, whole (every pipeline chunk), is propagated
/// along the other axis and cut into its pipeline devices x ranks
/// (ComposeContextParallel.cpp).
llvm::Expected<std::vector<RoleGraph>>
buildComposedRoleGraphs(ShardingResult &R);

} // namespace loom

#endif // LOOM_SHARD_SHARDING_H
