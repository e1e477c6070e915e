//===- RuleSplit.h - How a candidate splits each layer ----------*- C++ -*-===//
//
// The evaluator's (PlanCost.cpp) view of tensor and sequence parallelism:
// the per-op rule table (include/loom/Shard/Rules.h) propagated over the
// planning graph at one (tp, sp, ep) -- the same rules, propagation driver
// (include/loom/Shard/Propagate.h) and transition -> collective mapping
// (getTransitionCollective) the sharder (lib/Shard/Propagation.cpp,
// RoleReshards.cpp) applies -- but only over one representative layer per
// layer structure:
// a layer whose nodes repeat an earlier one's (op types and output shapes,
// node by node), whose inputs arrive in the same specs and whose
// parameters are its own takes the result of the latest such layer whose
// inputs arrived alike. So an 80-block LLaMA costs four layers of rule
// applications per configuration (prologue, the first block -- its input
// is the embedding's -- the block after it, which the other 78 take, and
// epilogue), and the evaluator caches them per configuration.
//
// What comes out per layer: per node its specs (hence its per-rank shapes:
// getLocalShape of each output), whether its work is divided across the tp
// group and which matmul dim that divides; per value class the bytes that
// are split and whole (parameters, saved activations, layer inputs, the
// live peak); and the tp collectives of the forward (the transitions
// getTransitionCollective lowers at every input, the collectives a rule
// declares for its own lowering -- a row-parallel bias' all-reduce, the
// vocab-parallel cross entropy's three -- graph outputs gathered) and of
// the backward (their duals: the gradient
// of a replicated input of split work is a partial sum, all-reduced or
// reduce-scattered; the gradient of a reduce-scatter is an all-gather).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_PLANNER_RULESPLIT_H
#define LOOM_LIB_PLANNER_RULESPLIT_H

#include "loom/Cost/Collectives.h"
#include "loom/Shard/ExpertRules.h"
#include "loom/Shard/Rules.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringMap.h"
#include <map>
#include <string>
#include <vector>

namespace loom {
namespace rulesplit {

/// The matmul dim (OpCost::MM) split work divides.
enum class MMDim : uint8_t { None, Batch, M, N, K };

struct NodeSplit {
  /// The rule's decision: the specs the node needs and produces.
  OpSharding S;
  /// Its work is divided across the tp group (some operand or result it
  /// computes on is split).
  bool Sharded = false;
  /// Share of the bytes of its weight-like operands that arrive split.
  double ParamSplitFrac = 0;
  MMDim MM = MMDim::None;
};

/// One tp collective at the graph's full batch.
struct TPComm {
  CollectiveKind Kind = CollectiveKind::AllReduce;
  double Bytes = 0;
  const Value *V = nullptr;
  /// At ep > 1: the ep rule of the node it serves (a branch of an unrolled
  /// expert, the chain combining them: their tokens are the ep group's;
  /// PlanCostImpl.h's forEachRankComm).
  ExpertNodeRule Expert;
  /// A conversion of a value made outside the layer and read by other
  /// layers too (an encoder's output, read by every decoder layer's
  /// cross-attention): the reading node's index in the layer and the
  /// operand (-1: none). A pipeline device converts a value once per spec
  /// (the role builder's cache), so a stage prices it once, on the value
  /// its own layer reads there (a repeated layer takes its
  /// representative's list).
  int SharedNode = -1, SharedInput = -1;
  /// A value made from constants and weights alone (T5's relative position
  /// bias, computed once and added in every layer): the same bytes at
  /// every micro-batch, so not scaled by the activation scale.
  bool Fixed = false;
};

/// What ep communicates where a value crosses into or out of expert work
/// (getExpertCrossing, the decision the role builder emits), per tp rank
/// at the graph's full batch: the bytes of one ep rank's share of the
/// value (an all-gather's output and the reduce-scatter's input hold ep
/// of them; PlanCostImpl.h forEachEPComm).
struct EPComm {
  ExpertTransition Kind = ExpertTransition::None;
  double Bytes = 0;
  const Value *V = nullptr;
  /// The expert node reading it; a branch's Expert is the lowest of the
  /// experts whose branches read it (rank r gathers it when it owns one).
  ExpertNodeRule Reader;
};

/// A representative layer at one configuration. Bytes and counts are at
/// the graph's full (global) shapes, activations those of the micro-batch
/// graph scaled to the full batch where the evaluator has it
/// (MicroBatchBytes); the split part divides by tp.
struct LayerSplit {
  std::vector<NodeSplit> Nodes;
  double ParamsSplit = 0, ParamsWhole = 0, ExpertSplit = 0, ExpertWhole = 0;
  /// The largest non-expert parameter tensor arriving split, and whole
  /// (elements): what one DP gradient bucket holds at least.
  double MaxParamSplit = 0, MaxParamWhole = 0;
  /// Per LayerValues::Params entry: whether it arrives split.
  std::vector<bool> ParamSplit;
  double SavedSplit = 0, SavedWhole = 0, SavedAttnSplit = 0, SavedAttnWhole = 0;
  double InputSplit = 0, InputWhole = 0, LiveSplit = 0, LiveWhole = 0;
  std::vector<TPComm> Fwd, Bwd;
  /// Some of Fwd convert values other layers read too (SharedNode).
  bool HasShared = false;
  /// At ep > 1: the forward's ep crossings, in the order first read.
  std::vector<EPComm> EPFwd;
};

/// What the configurations classify, per layer (config-independent).
struct LayerValues {
  std::vector<const Node *> Nodes;
  /// Parameters first read here; whether each is an expert's.
  std::vector<std::pair<const Value *, bool>> Params;
  /// Saved activations; whether each is the attention core's.
  std::vector<std::pair<const Value *, bool>> Saved;
  /// Activations entering the layer; those alive at its forward's peak.
  std::vector<const Value *> Inputs, PeakLive;
};

struct ConfigSplit {
  /// Per layer: the representative whose LayerSplit it takes.
  std::vector<unsigned> RepOf;
  /// Filled at representatives.
  std::vector<LayerSplit> Layers;
  const LayerSplit &get(unsigned L) const { return Layers[RepOf[L]]; }
};

/// Activation byte sizes at one micro-batch size, for graphs whose
/// activations do not scale with the batch (a capacity dispatch of T x E x
/// C one-hot, C proportional to the tokens T, grows as the square of the
/// batch): the micro-batch graph's bytes by value name, times \p Scale
/// (global batch / micro-batch), so that the evaluator's ActScale
/// (micro-batch / global batch) gives them back exactly. Values the
/// micro-batch graph does not name keep the full-batch bytes.
struct MicroBatchBytes {
  const llvm::StringMap<double> *ByName = nullptr;
  double Scale = 1;
};

/// Each value of \p G whose dim carries the batch (BatchDims.cpp), from the
/// graph inputs' batch dims \p Inputs (name -> dim) at batch \p Batch.
llvm::DenseMap<const Value *, int>
findBatchDims(const Graph &G, const std::map<std::string, int> &Inputs,
              int64_t Batch);

class RuleSplitter {
public:
  /// \p Experts: the ep rules' roles (ExpertRules.h), applied at ep > 1.
  RuleSplitter(const Graph &G, std::vector<LayerValues> Layers,
               const ExpertAxisRules &Experts, int64_t Opset);
  /// The rules at tp \p TP (RuleContext::AnyDivides: every split any
  /// degree could take), sequence parallelism \p SP, and ep > 1 (\p EP:
  /// tokens entering expert work arrive replicated over tp).
  /// \p DPTables: embedding tables sharded over dp (their lookups stay
  /// whole on every tp rank: RuleContext::isShardedOverDP).
  /// \p MB: activation bytes at the micro-batch (null: the graph's).
  /// \p MicroBatch: under sp, the micro-batch (of the graph's batch,
  /// setInputBatchDims) at whose dims the token dim is chosen (0: the
  /// graph's dims).
  ConfigSplit run(unsigned TP, bool SP, bool EP,
                  const llvm::DenseSet<const Value *> &DPTables,
                  const MicroBatchBytes *MB = nullptr,
                  unsigned MicroBatch = 0) const;
  llvm::ArrayRef<LayerValues> getLayers() const { return Layers; }
  /// The graph inputs' batch dims (EvaluatorOptions::InputBatchDims) and
  /// the batch the graph is bound at.
  void setInputBatchDims(const std::map<std::string, int> &Dims, int64_t Batch);
  /// Whether a micro-batch of \p MicroBatch has other dims than the
  /// graph's (some input's batch dim is known and MicroBatch divides the
  /// batch).
  bool hasMicroBatchDims(unsigned MicroBatch) const {
    return !InputBatchDims.empty() && MicroBatch > 0 && MicroBatch < Batch &&
           Batch % MicroBatch == 0;
  }
  /// Each value's dim that carries the batch (findBatchDims); computed on
  /// first use.
  const llvm::DenseMap<const Value *, int> &getBatchDims() const;

private:
  friend class SplitContext;
  const Graph &G;
  std::vector<LayerValues> Layers;
  int64_t Opset;
  UseMap Users;
  /// Node -> (layer, index in it).
  llvm::DenseMap<const Node *, std::pair<unsigned, unsigned>> Where;
  /// Per layer: an earlier layer of the same structure whose result it
  /// may take (-1: none), and its inputs (node index, input index) coming
  /// from outside it.
  std::vector<int> DupOf;
  std::vector<std::vector<std::pair<unsigned, unsigned>>> External;
  /// EP: each expert node's rule (branch, stacked work, combine).
  llvm::DenseMap<const Node *, ExpertNodeRule> Roles;
  llvm::DenseSet<const Value *> GraphOutputs;
  /// The KV cache outputs among them (findKVCache) -> their sequence axis:
  /// they leave as getKVCacheSpec says, not replicated.
  llvm::DenseMap<const Value *, int> KVPresentSeqAxis;
  /// Values computed from the model's inputs (findDataDependent); the
  /// others hold no sample (TPComm::Fixed).
  llvm::DenseSet<const Value *> DataDependent;
  /// Activations with a gradient (computed from a parameter).
  llvm::DenseSet<const Value *> NeedsGrad;
  std::map<std::string, int> InputBatchDims;
  int64_t Batch = 1;
  mutable llvm::Optional<llvm::DenseMap<const Value *, int>> BatchDims;
};

} // namespace rulesplit
} // namespace loom

#endif // LOOM_LIB_PLANNER_RULESPLIT_H
