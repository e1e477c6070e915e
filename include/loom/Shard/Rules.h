//===- Rules.h - The per-op sharding rule table -----------------*- C++ -*-===//
//
// How each ONNX op may be split along one mesh axis: the one description
// that sharding propagation (lib/Shard/Propagation.cpp, which cuts the
// graphs) and the search's legality (lib/Planner/SearchSpace.cpp, which degrees
// divide what) both read, in the style of MLIR's ShardingInterface
// (mlir/include/mlir/Dialect/Shard/Interfaces/ShardingInterface.td: one
// per-op description that serves propagation and partitioning).
//
// Conventions every rule follows (lib/Shard/Rules/*.cpp, one file per op
// family):
// - A spec is per value and per axis: Replicated, Split(dim) (optionally in
//   blocks, each block divided: a fused QKV projection) or Partial (each
//   rank holds an addend of the value; the sum is the value).
// - A rule reads the specs its operands arrive in (RuleContext::getSpec)
//   and returns the specs it needs them in and the specs of its results.
//   Every choice is exact: the local computation on the local pieces gives
//   the local piece of the global result. Where no split survives, the rule
//   asks for its operands replicated and produces replicated results, which
//   is always legal.
// - A rule splits a dim only when the axis size divides it
//   (RuleContext::isDivisible); with a symbolic axis (AnyDivides) every
//   split is taken and the context records the sizes split, which is how
//   the search learns which degrees are legal.
// - Weights: a rule that splits a parameter (through Transpose, Cast,
//   Identity) asks RuleContext::splitWeight; a parameter no rule splits is
//   stored whole. A rule may find the parameter already split another way
//   (a tied weight): then it falls back to another choice.
// - Partial results come only from contractions over a split dim
//   (row-parallel matmul, ReduceSum over the split dim, a vocab-parallel
//   lookup) and pass unchanged through ops linear in them (Add of
//   partials, scaling by a replicated factor, Reshape, Transpose, ...).
//   Anywhere else a partial operand is first resolved
//   (RuleContext::resolvePartial): all-reduced, or reduce-scattered onto
//   the token dim under sequence parallelism.
// - Where a producer's spec differs from the spec a rule needs, the
//   transition is getTransition(From, To) (AllReduce, ReduceScatter,
//   AllGather, a local slice), lowered by the one collective
//   getTransitionCollective names; a lowering that needs more (a bias after
//   reduce, a vocab-parallel cross entropy) declares it in
//   OpSharding::Collectives. The role builder emits exactly these, the
//   evaluator prices exactly these.
// - One driver walks the graph (include/loom/Shard/Propagate.h).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SHARD_RULES_H
#define LOOM_SHARD_RULES_H

#include "loom/Cost/Collectives.h"
#include "loom/IR/Graph.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include <map>
#include <string>
#include <vector>

namespace loom {

/// How a value is laid out along one mesh axis.
struct AxisSpec {
  enum Kind : uint8_t { Replicated, Split, Partial };
  Kind K = Replicated;
  /// Split: the dim divided among the axis' ranks.
  int Dim = -1;
  /// Split into blocks that are each divided (a fused QKV projection whose
  /// output is Split into Q, K and V): block sizes along Dim, globally.
  std::vector<int64_t> Blocks;

  static AxisSpec replicated() { return AxisSpec(); }
  static AxisSpec split(int D) {
    AxisSpec S;
    S.K = Split;
    S.Dim = D;
    return S;
  }
  static AxisSpec partial() {
    AxisSpec S;
    S.K = Partial;
    return S;
  }
  bool isReplicated() const { return K == Replicated; }
  bool isSplit() const { return K == Split; }
  bool isPartial() const { return K == Partial; }
  bool operator==(const AxisSpec &O) const {
    return K == O.K && Dim == O.Dim && Blocks == O.Blocks;
  }
  bool operator!=(const AxisSpec &O) const { return !(*this == O); }
  /// "R", "S(2)", "S(1;blocks=64,32,32)", "P".
  std::string str() const;
};

/// The communication (or local work) that turns a value laid out as From
/// into To along one axis.
enum class Transition : uint8_t {
  None,          ///< Same spec.
  AllReduce,     ///< Partial -> Replicated.
  ReduceScatter, ///< Partial -> Split(dim), no blocks (sequence parallelism).
  AllGather,     ///< Split(dim), in blocks or not -> Replicated.
  LocalSlice,    ///< Replicated -> Split: each rank keeps its piece.
  GatherSlice,   ///< Split -> Split elsewhere: all-gather, then slice.
  Zeros,         ///< Replicated -> Partial: only for a zero constant.
  Unsupported,   ///< Partial -> blocks, split -> partial.
};
Transition getTransition(const AxisSpec &From, const AxisSpec &To);
llvm::StringRef getTransitionName(Transition T);

/// The shape one rank holds of a value of global shape \p Global laid out
/// as \p S over \p AxisSize ranks (each block of a blocked split divided).
/// Empty when the split dim is out of range or not divisible.
llvm::SmallVector<int64_t, 4> getLocalShape(llvm::ArrayRef<int64_t> Global,
                                            const AxisSpec &S,
                                            unsigned AxisSize);

/// One collective along the tp axis that a sharding decision needs: the
/// reshard of a spec transition (getTransitionCollective) or a rule's own
/// lowering (OpSharding::Collectives). The role builder emits it as the
/// hccl op getHcomOpName(Kind); the evaluator and the schedule price it
/// with collectiveTime(Kind, Bytes, ...).
struct ShardCollective {
  CollectiveKind Kind = CollectiveKind::AllReduce;
  /// AllReduce, ReduceScatter: "sum" or "max".
  std::string Reduction = "sum";
  /// AllGather: the dim gathered; ReduceScatter: the dim scattered;
  /// AllToAll: the dim split among the peers (split_axis); -1 otherwise.
  int Axis = -1;
  /// AllToAll: the dim the peers' pieces are concatenated on
  /// (concat_axis); -1 otherwise.
  int ConcatAxis = -1;
  /// The per-rank type it produces: the reduced buffer, the whole value
  /// gathered, a reduce-scatter's slice.
  TensorType Result;
  /// Per-rank bytes as collectiveTime counts them (Collectives.h): the
  /// buffer of an all-reduce, an all-gather's output, a reduce-scatter's
  /// input; for every transition the value's bytes replicated.
  double Bytes = 0;
  /// Runs in the forward pass (the role graphs are forward programs).
  bool Forward = true;
  /// The value it acts on (a rule's: the node's first output, which the
  /// role builder names it after) and the suffix of its output's name.
  const Value *On = nullptr;
  std::string Suffix;
};
/// \p S has no blocks or blocks of one size.
bool hasEqualBlocks(const AxisSpec &S);

/// The collective that lowers the transition \p From -> \p To of a value
/// whose type, replicated along the axis of \p AxisSize ranks, is \p Whole:
/// AllReduce (P -> R), ReduceScatter (P -> S), AllGather (S -> R, and
/// S -> S' before a local slice). None where the transition needs no
/// collective (same spec, a local slice, zeros) or none can do it
/// (Unsupported). On the sequence axis (\p SeqAxis: context parallelism,
/// RuleContext::isSequenceAxis) a split moved to another dim (GatherSlice
/// between two unblocked splits) is one all-to-all (DeepSpeed-Ulysses,
/// Jacobs et al. 2023: tokens to heads before attention, heads to tokens
/// after), not a gather and a slice.
llvm::Optional<ShardCollective> getTransitionCollective(const AxisSpec &From,
                                                        const AxisSpec &To,
                                                        const TensorType &Whole,
                                                        unsigned AxisSize,
                                                        bool SeqAxis = false);
/// The spec a KV cache tensor produced (or wanted) as \p S is held in
/// between steps (lib/Shard/KVCache.cpp): split along a dim other than its
/// sequence axis \p SeqAxis (-1: none), without blocks, stays so (each tp
/// rank keeps its heads, no gather); anything else is replicated. A model
/// output leaves replicated unless it is a KV cache output, which leaves
/// in this spec; the evaluator prices, and the role builder emits, the
/// collective between.
AxisSpec getKVCacheSpec(const AxisSpec &S, int SeqAxis);

/// The hccl op that lowers \p K ("HcomAllReduce", ...; DESIGN §7), and
/// the kind an hccl op performs (HcomAllToAllV: AllToAll; HcomSend and
/// HcomReceive: SendRecv; any other: AllReduce).
llvm::StringRef getHcomOpName(CollectiveKind K);
CollectiveKind getHcomCollectiveKind(llvm::StringRef Op);
/// The name schedule.json gives a collective event ("allreduce",
/// "allgather", "reducescatter", "alltoall"), and back (AllReduce for a
/// name it does not know).
llvm::StringRef getScheduleEventKind(CollectiveKind K);
CollectiveKind parseScheduleEventKind(llvm::StringRef Kind);

/// Special lowering a rule asks of the role builder.
enum class ShardLowering : uint8_t {
  None,
  /// Gather on a vocab-split table: masked local lookup, partial output.
  VocabParallelGather,
  /// Row-parallel Gemm/Conv with a bias: the bias is added once, after
  /// the partial sums are reduced (a separate Add).
  BiasAfterReduce,
  /// Shape of a split value: the global shape, as a constant.
  GlobalShape,
  /// SoftmaxCrossEntropyLoss on scores split on the class axis: Megatron's
  /// vocab-parallel cross entropy (all-reduced row max, sum of exps and
  /// target score), the scores never gathered.
  VocabParallelCrossEntropy,
  /// A loss's "mean" over rows split evenly on the sequence axis: each
  /// rank's mean over its rows, scaled by 1 / axis size, is an addend of
  /// the mean (a Partial output; LossRules.cpp).
  MeanOfShards,
  /// A loss's "mean" over the rows it counts (ignore_index), rows split on
  /// the sequence axis: each rank's sum and count of counted rows are
  /// all-reduced and divided (a replicated output; LossRules.cpp).
  MeanOverCount,
};

/// What a rule decided for one node.
struct OpSharding {
  /// The spec each input must have when the node runs (size = inputs).
  std::vector<AxisSpec> InputSpecs;
  /// The spec of each output.
  std::vector<AxisSpec> OutputSpecs;
  ShardLowering Lower = ShardLowering::None;
  /// The collectives the lowering itself needs, beyond the transitions of
  /// its operands (which getTransitionCollective derives), in the order
  /// the role builder emits them: the all-reduce of a bias after reduce,
  /// the three of a vocab-parallel cross entropy. The role builder emits
  /// exactly these and the evaluator prices exactly these.
  std::vector<ShardCollective> Collectives;
};

/// What a rule may ask about the graph and the propagation state, and the
/// one decision it makes outside its node (splitting a weight).
class RuleContext {
public:
  /// \p AxisSize: the tp degree; 0 stands for a symbolic degree that
  /// divides every dim (AnyDivides).
  RuleContext(unsigned AxisSize, bool SP, int64_t Opset)
      : AxisSize(AxisSize), SP(SP), Opset(Opset) {}
  virtual ~RuleContext();
  static constexpr unsigned AnyDivides = 0;

  unsigned getAxisSize() const { return AxisSize; }
  bool isSequenceParallel() const { return SP; }
  /// The axis is context parallelism's (cp, issue 34), not tp's: every
  /// rank holds all weights (splitWeight refuses), activations are split on
  /// their tokens, and the attention's activation x activation matmuls
  /// move the split to the heads (MatmulRules.cpp).
  bool isSequenceAxis() const { return SeqAxis; }
  void setSequenceAxis(bool On) { SeqAxis = On; }
  /// On the sequence axis, attention runs as a ring (cp_algo=ring): the
  /// activation x activation matmuls keep the queries' token split and
  /// read K and V whole, which the role graphs lower to the K/V ring
  /// (lib/Shard/RingAttention.cpp) instead of a gather.
  bool isSequenceRing() const { return SeqAxis && SeqRing; }
  void setSequenceRing(bool On) { SeqRing = On; }
  /// The sequences the graph holds (its micro-batch): on the sequence
  /// axis, heads folded into the batch ([B x H, S, D], torch's
  /// MultiheadAttention) move as B blocks of H (MatmulRules.cpp).
  unsigned getSequences() const { return Sequences; }
  void setSequences(unsigned N) { Sequences = N; }
  /// On the sequence axis with tp inside (cp first, tp's sp splitting
  /// cp's tokens: ComposeContextParallel.cpp), the tp ranks the heads are
  /// cut among afterwards: Ulysses' head split nests in each tp rank's
  /// heads (Megatron-Core's order), so the heads move as that many
  /// blocks, each divided among the cp ranks.
  unsigned getHeadGroups() const { return HeadGroups; }
  void setHeadGroups(unsigned N) { HeadGroups = N; }
  int64_t getOpset() const { return Opset; }
  /// The axis size divides \p Size (> 0); a symbolic size divides every
  /// size but 1 (no degree > 1 splits a unit dim).
  bool isDivisible(int64_t Size) const {
    return AxisSize == AnyDivides ? Size > 1 : Size > 0 && Size % AxisSize == 0;
  }

  /// The spec \p V arrives in (parameters: as stored).
  virtual AxisSpec getSpec(const Value *V) const = 0;
  /// Splits the weight-like \p V (traceWeight) along its dim \p Dim in
  /// \p Blocks; after it getSpec(V) is that split. False when the
  /// parameter is already split differently.
  virtual bool splitWeight(const Value *V, int Dim,
                           llvm::ArrayRef<int64_t> Blocks) = 0;
  /// The spec \p V is stored in (a weight after splitWeight); differs
  /// from getSpec where the propagation makes a consumer see a value
  /// replicated (tokens entering expert work).
  virtual AxisSpec getStoredSpec(const Value *V) const { return getSpec(V); }
  /// The nodes reading \p V.
  virtual llvm::ArrayRef<const Node *> getUsers(const Value *V) const = 0;
  /// \p N is stacked expert work (Sharding.h, NodeSharding::Stacked).
  virtual bool isStackedExpertWork(const Node *N) const { return false; }
  /// The HcomSend of the graph that pairs with HcomReceive \p Recv (same
  /// group and sr_tag: a transfer of another axis between ranks that run
  /// the same graph, as the cp ring's), or null.
  virtual const Node *getPairedSend(const Node &Recv) const { return nullptr; }
  /// \p Table is an embedding table the plan shards over dp (Sharding.h,
  /// EmbeddingShard): its lookups stay whole on every tp rank.
  virtual bool isShardedOverDP(const Value *Table) const { return false; }

  /// The spec a Partial \p V takes for a consumer not linear in it:
  /// Split(token dim) under sequence parallelism (a reduce-scatter), else
  /// Replicated (an all-reduce). Stacked expert work reshapes its leading
  /// dims over ep; a tp split there would not survive the all-to-all.
  AxisSpec resolvePartial(const Value *V) const;
  /// Whether a partial sum \p V may stay partial through a linear op: every
  /// reader of it takes a partial sum (a linear element-wise op, a layout
  /// op, a product with a replicated operand).
  /// Where one reader needs it reduced anyway (a norm's square, a
  /// Softmax), the others read the reduced value: one collective, as
  /// Megatron's row-parallel all-reduce, instead of one per path.
  bool mayStayPartial(const Value *V) const;
  /// Dim of \p V a sequence-parallel ReduceScatter splits: the outermost
  /// non-feature dim the axis divides (the tokens), or -1, at the dims of
  /// getTokenShape.
  int getTokenDim(const Value *V) const;
  /// \p V's dims as one micro-batch holds them, which getTokenDim reads:
  /// its static type's, the sharder's graph being bound at the
  /// micro-batch; the evaluator's, bound at the whole batch, divides the
  /// dims that carry the batch (RuleSplit.cpp).
  virtual llvm::SmallVector<int64_t, 4> getTokenShape(const Value *V) const;

private:
  unsigned AxisSize;
  bool SP;
  bool SeqAxis = false;
  bool SeqRing = false;
  unsigned Sequences = 1, HeadGroups = 1;
  int64_t Opset;
};

/// Traces a weight-like value (a parameter, or a Transpose/Cast/Identity
/// of one, at most 4 deep) back to its parameter; maps \p Dim of \p V to
/// the parameter's dim. Null when \p V is not weight-like.
const Value *traceWeight(const Value *V, int &Dim);
/// The values of the chain traceWeight walked from \p Param (split along
/// \p PDim, in \p Blocks) to \p V, from the parameter's first reader on,
/// each with the split it carries (a Transpose moves the dim): what the
/// weight-slicing of every propagation records.
llvm::SmallVector<std::pair<const Value *, AxisSpec>, 4>
getWeightChainSpecs(const Value *V, const Value *Param, int PDim,
                    llvm::ArrayRef<int64_t> Blocks);

/// Applies the rule of \p N's op. \p HasRule is false when the op has no
/// rule (it then runs replicated). Non-default domains have no rule.
OpSharding applyShardingRule(const Node &N, RuleContext &Ctx, bool &HasRule);

/// Size -> the first place a rule splits a dim of that size ("dim 2 of
/// 'q_reshape'", "dim 1 of 'lm_head.weight'").
using SplitDimSizes = std::map<uint64_t, std::string>;
/// Applies the rule table over \p G (default-domain opset \p Opset; 0:
/// the latest) at a symbolic degree dividing every dim larger than 1, and
/// returns the sizes of every dim a rule splits (SplitDims.cpp). A tp
/// degree lets every rule take its split iff it divides all of them.
SplitDimSizes collectSplitDims(const Graph &G, int64_t Opset);

/// A weight some degree splits (collectSplitDims) that the rules leave
/// whole at one degree: its readers run replicated on every rank of the
/// axis (full compute and memory), with the transitions around them.
struct UnsplitWeight {
  std::string Weight;
  /// Its first reader (node name, or first output's).
  std::string Reader;
  /// The dim the rules split at other degrees and its size (a block's,
  /// for a blocked split).
  int Dim = -1;
  int64_t Size = 0;
};
/// The weights the rule table splits at a symbolic degree but not at
/// \p AxisSize, in graph order (SplitDims.cpp).
std::vector<UnsplitWeight> collectUnsplitWeights(const Graph &G, int64_t Opset,
                                                 unsigned AxisSize);

/// The per-rank head counts of an Attention or RotaryEmbedding whose heads
/// \p S splits over \p AxisSize ranks: q_num_heads, kv_num_heads and
/// num_heads in \p Attrs (a copy of the node's) divided
/// (lib/Shard/Rules/AttentionRules.cpp).
void localizeHeadAttributes(const Node &N, const OpSharding &S,
                            unsigned AxisSize, std::vector<Attribute> &Attrs);

/// Element-wise ops (one output element per broadcast input element):
/// the ones the element-wise rule handles.
bool isShardableElementwise(llvm::StringRef Op);

} // namespace loom

#endif // LOOM_SHARD_RULES_H
