//===- PlanCostImpl.h - The plan evaluator's internals ----------*- C++ -*-===//
//
// PlanEvaluator::Impl and the types it works with (a layer's facts, its
// times, a plan's context, a stage's running sums), shared by the files that
// define the evaluator: PlanCost.cpp, LayerFacts.cpp, LayerTimes.cpp and
// StageCost.cpp. Not installed.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_PLANNER_PLANCOSTIMPL_H
#define LOOM_LIB_PLANNER_PLANCOSTIMPL_H

#include "RuleSplit.h"
#include "loom/Cost/Pipeline.h"
#include "loom/Planner/ContextParallel.h"
#include "loom/Planner/PlanCost.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace loom {

using rulesplit::ConfigSplit;
using rulesplit::LayerSplit;
using rulesplit::NodeSplit;

struct NodeFacts {
  const Node *N = nullptr;
  const NodeCostInfo *C = nullptr;
  /// Attention core (Softmax, activation x activation matmul): what
  /// selective recompute recomputes instead of storing.
  bool AttentionCore = false;
  /// A GEMM with a weight: when the rules split it, it is column- or
  /// row-parallel, what TP communication overlaps with (tp_overlap,
  /// loom/Cost/Overlap.h).
  bool WeightGemm = false;
  /// Expert work (split across the EP group): one expert's branch
  /// (unrolled) or every expert at once (stacked, NumExperts of them).
  bool Expert = false;
  unsigned StackedExperts = 0;
  /// In the attention core, fused or not: what a cp ring overlaps its K/V
  /// sends with (ContextParallel.h).
  bool CoreNode = false;
};

/// One MoE layer's expert group, as its ep communication is costed (the
/// bytes are the crossings', RuleSplit.h EPComm).
struct EPTraffic {
  bool Stacked = false;
  /// The group's experts and its router's top-k (0: not found), for a
  /// dispatcher that sends one copy per destination rank.
  unsigned NumExperts = 0, TopK = 0;
};

/// What a layer is, whatever the plan: its nodes, MoE traffic, KV cache
/// and FLOPs. How a plan's (tp, sp, ep) splits it comes from the rules
/// (RuleSplit.h): Values lists what they classify -- the parameters, saved
/// activations, the activations entering it (full recompute keeps only
/// these) and those alive at the peak of its forward (inference).
struct LayerFacts {
  std::vector<NodeFacts> Nodes;
  rulesplit::LayerValues Values;
  std::vector<EPTraffic> EP;
  /// KV cache: the K and V tensors of the attention matmuls, before any
  /// GQA expansion (kvCacheSource).
  double KVBytes = 0, KVElements = 0;
  /// The attention output (the context products' results: the size of Q
  /// for equal head sizes) at the full batch, and the heads of Q and of
  /// K/V ([B, H, S, D] operands; 0 when not found): what cp's a2a moves
  /// and needs to divide.
  double QOBytes = 0;
  int64_t QHeads = 0, KVHeads = 0;
  double Flops = 0, BackwardFlops = 0;
};

struct LayerTimes {
  double Fwd = 0, Bwd = 0, AttnFwd = 0;
  /// The attention core's forward and backward, fused or not (CoreNode).
  double CoreFwd = 0, CoreBwd = 0;
  /// The TP-sharded weight GEMMs' part of Fwd and Bwd.
  double GemmFwd = 0, GemmBwd = 0;
  /// The tp collectives of the forward and of the backward, and the
  /// backward's bytes (what the DP sync shares links with).
  double CommFwd = 0, CommBwd = 0, BwdBytes = 0;
  /// The same per linear layer: the weight GEMMs reading one activation
  /// (q, k and v projections, or gate and up, are one linear, one GEMM
  /// in Megatron's fused QKV and fc1), in graph order.
  std::vector<double> LinearFwd, LinearBwd;
};

/// What every stage of one plan shares: its degrees, the topology shape of
/// each communication group, widths and the hardware's overlap shares.
struct PlanContext {
  const ParallelPlan &P;
  unsigned TP, EP;
  GroupShape TPG, DPG, EPG, DPEPG, PPPair;
  /// Gradient buffer and DP sync width (Megatron: fp32 main gradients
  /// unless --grad-reduce-in-bf16).
  double GradWidth;
  /// What sequence parallelism divides the replicated activations by.
  double SeqDiv;
  /// Micro-batch over the bound batch, over cp (each cp rank holds 1/cp
  /// of every sequence): scales the analysed activations.
  double ActScale;
  /// Context parallelism: its group (right outside tp), and the ranks the
  /// weight gradients are reduced and ZeRO-partitioned over, dp x cp.
  unsigned CP = 1;
  GroupShape CPUlyssesG, CPRingG;
  unsigned DPCP = 1;
  /// Shares of compute the overlapped collectives hold (0 where the YAML
  /// gives none).
  double OvTP = 0, OvDP = 0, OvPP = 0;
  const MemoryLevel *HBM = nullptr;
};

/// One stage's running sums, filled step by step by the stage's costing.
struct StageSums {
  /// The stage's layers, [first, end) per chunk in layer order.
  llvm::ArrayRef<std::pair<unsigned, unsigned>> Runs;
  bool holdsLayer(unsigned L) const {
    for (const auto &R : Runs)
      if (L >= R.first && L < R.second)
        return true;
    return false;
  }
  double Params = 0, ExpertParams = 0, Act = 0, KV = 0, TPFwd = 0, TPBwd = 0,
         EPFwd = 0, EPBwd = 0, MaxLayerAct = 0, MaxLayerLive = 0;
  /// cp's attention communication per micro-batch: all of it, and the
  /// part not hidden behind attention (ContextParallel.h).
  CPLayerCost CP;
  /// The activation all-reduces alone (TPFwd/TPBwd add ZeRO-3's gathers):
  /// what tp_overlap hides behind the GEMMs.
  double TPActFwd = 0, TPActBwd = 0;
  /// The last micro-batch's backward tp bytes (what the DP sync shares
  /// links with).
  double TPBwdBytes = 0;
  /// The largest parameter tensor (elements per rank) of the stage's
  /// first layer, whose gradients the backward produces last.
  double FirstLayerMaxParam = 0;
  /// tp_overlap with sp: what the activation collectives add to the
  /// forward and backward when each hides behind its own linear's GEMM
  /// (sumStageLayers; loom/Cost/Overlap.h).
  double TPPairedFwd = 0, TPPairedBwd = 0;
  /// The tables the plan shards in this stage (Embedding.h).
  std::vector<EmbeddingTable> Tables;
  /// The stage's forward pipeline send, one way, per micro-batch.
  double SendTime = 0;
  /// Interleaved (vpp = V > 1): one send across a chunk boundary inside
  /// the stage's layers (or, on the last stage, over the wrap to stage 0),
  /// which each micro-batch makes V - 1 more times each way.
  double ChunkSendTime = 0;
};

struct PlanEvaluator::Impl {
  const Graph &G;
  std::vector<LayerInfo> Layers;
  const NodeCostMap &Costs;
  const HardwareModel &HW;
  /// HW with the MoE dispatcher's link efficiency
  /// (EvaluatorOptions::EPDispatchEfficiency), for the ep all-to-all.
  HardwareModel EPHW;
  EvaluatorOptions Opts;
  std::vector<LayerFacts> LF;
  /// BoundaryBytes[l]: activations crossing from layers < l into >= l.
  std::vector<double> BoundaryBytes;
  double ModelFlops = 0;
  double Peak = 0;
  std::vector<ExpertGroup> Experts;
  /// Embedding tables (Embedding.h): where analyze() counted each (its
  /// layer and its index in that layer's LayerValues::Params, whose split
  /// the rules decide per configuration), and whether emb=auto shards it.
  std::vector<EmbeddingTable> Tables;
  llvm::DenseMap<const Value *, unsigned> TableIndex;
  std::vector<unsigned> TableLayer, TableParamIndex;
  /// Parameters only the placement's SSD class reads (tables served from
  /// SSD): they hold no HBM, are not among any layer's parameters and are
  /// never sharded over the dp group (holdsHBM; the search's memory bound
  /// reads the same set).
  llvm::DenseSet<const Value *> SSDOnlyParams;
  std::vector<bool> TableMustShard;
  /// Lookups of the tables emb=auto shards: they read the rows of their
  /// ids, not the (huge) table their ParamBytes count.
  llvm::DenseSet<const Node *> ShardedLookups;
  /// The tables emb=auto shards, and every table (emb=row|table|col).
  llvm::DenseSet<const Value *> ShardedTableWeights, AllTableWeights;
  /// The rule table over representative layers (RuleSplit.h), and its
  /// result per (tp, sp, ep > 1).
  std::unique_ptr<rulesplit::RuleSplitter> Splitter;
  /// Keyed by (tp, sp, ep > 1, all tables, the micro-batch size whose
  /// graph gave the activation bytes: 0 for the bound graph's).
  mutable std::map<std::tuple<unsigned, bool, bool, bool, unsigned>,
                   std::unique_ptr<ConfigSplit>>
      Configs;
  /// The activation bytes of the graph bound at a micro-batch size
  /// (PlanEvaluator::setMicroBatchShapes), per size asked; none when the
  /// bound graph's, scaled, are exact.
  MicroBatchShapesFn MBShapes;
  mutable std::map<unsigned,
                   std::pair<std::shared_ptr<const llvm::StringMap<double>>,
                             rulesplit::MicroBatchBytes>>
      MBBytes;
  /// Set once the first micro-batch graph showed every value either
  /// scaling with the batch or independent of it (a causal mask, rotary
  /// tables): the bound graph's bytes times micro-batch / batch are exact
  /// for the first, FixedBytes (the bound bytes) for the second, at every
  /// micro-batch size, and no other graph is built.
  mutable bool Classified = false;
  mutable llvm::StringMap<double> FixedBytes;
  mutable std::map<unsigned, rulesplit::MicroBatchBytes> FixedOf;
  mutable std::map<
      std::tuple<unsigned, unsigned, unsigned, bool, unsigned, bool, unsigned>,
      LayerTimes>
      Cache;
  /// getLayerSummary's all-reduces, per layer.
  mutable std::map<unsigned, std::vector<double>> SummaryAllReduce;
  /// Pipeline simulations by their inputs: plans that differ only in what
  /// follows the last backward (DP sync, optimizer, gradient precision)
  /// or in memory run the same pipeline, and the simulation is a pure
  /// function of its times (cost_models/pipeline/Pipeline.cpp).
  mutable std::map<
      std::tuple<std::vector<double>, std::vector<double>, std::vector<double>,
                 unsigned, unsigned, bool, unsigned>,
      PipelineResult>
      Simulations;
  const PipelineResult &simulate(const PipelineTimes &PT) const;
  /// Group shapes by their non-trivial (stride, size) axes.
  mutable std::map<llvm::SmallVector<std::pair<unsigned, unsigned>, 3>,
                   GroupShape>
      Shapes;
  /// A plan's groups (PlanContext), by what they read: tp, cp, ep, dp,
  /// pp and the mesh order. The search costs tens of thousands of plans
  /// over a few hundred of these.
  struct PlanGroups {
    GroupShape TPG, DPG, EPG, DPEPG, PPPair, CPUlyssesG, CPRingG;
  };
  mutable llvm::DenseMap<std::tuple<unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, unsigned>,
                         PlanGroups>
      GroupsOf;
  const PlanGroups &getPlanGroups(const ParallelPlan &P) const;
  PlanContext makePlanContext(const ParallelPlan &P) const;

  /// The evaluator (its group shapes).
  const PlanEvaluator &Outer;

  Impl(const PlanEvaluator &Outer, const Graph &G, llvm::ArrayRef<LayerInfo> Ls,
       const NodeCostMap &Costs, const HardwareModel &HW,
       const EvaluatorOptions &Opts)
      : G(G), Layers(Ls.begin(), Ls.end()), Costs(Costs), HW(HW), Opts(Opts),
        Outer(Outer) {
    if (Opts.EPDispatchEfficiency > 0) {
      EPHW = HW;
      for (TopologyLevel &L : EPHW.Topology)
        L.Efficiency = Opts.EPDispatchEfficiency;
    }
    if (Layers.empty()) {
      LayerInfo L;
      Layers.push_back(L);
    }
    analyze();
  }

  /// What the evaluator knows of the graph whatever the plan, in steps:
  void analyze();
  /// Each node's facts (cost, expert role, weight GEMM) by layer.
  void collectNodes(const ExpertAxisRules &XR);
  /// The attention core (selective recompute, KV cache).
  void findAttentionCore(const UseMap &Users);
  /// Per layer the parameters, saved activations and layer inputs the
  /// rules classify (RuleSplit.h's LayerValues).
  void collectLayerValues(const UseMap &Users,
                          const llvm::DenseSet<const Value *> &ExpertParams);
  /// Per layer the activations alive at the peak of its forward.
  void findPeakLive(const UseMap &Users);
  /// The MoE layers' ep traffic and the bytes crossing layer boundaries.
  void collectTransfers();
  /// Model FLOPs and the peak MFU is measured against.
  void computeModelFlops();
  /// How (tp, sp, ep) splits every layer; tp = 0: every split a degree
  /// could take (RuleContext::AnyDivides), what serving's per-layer
  /// summary classifies by.
  /// \p AllTables: every embedding table is sharded over dp (emb= other
  /// than auto), else those emb=auto shards; their lookups stay whole on
  /// every tp rank.
  /// \p MB: the micro-batch size whose activation bytes the result
  /// carries (getMicroBatchBytes; 0: the bound graph's).
  const ConfigSplit &getConfig(unsigned TP, bool SP, unsigned EP,
                               bool AllTables = false, unsigned MB = 0) const {
    AllTables &= !Tables.empty();
    const rulesplit::MicroBatchBytes *MBB = getMicroBatchBytes(MB);
    // Under sp the token dim is chosen at the micro-batch's dims.
    bool SPDims = SP && TP > 1 && Splitter->hasMicroBatchDims(MB);
    auto K = std::make_tuple(TP, SP && TP > 1, EP > 1, AllTables,
                             MBB || SPDims ? MB : 0u);
    auto It = Configs.find(K);
    if (It == Configs.end())
      It =
          Configs
              .emplace(K, std::make_unique<ConfigSplit>(Splitter->run(
                              TP, SP && TP > 1, EP > 1,
                              AllTables ? AllTableWeights : ShardedTableWeights,
                              MBB, SPDims ? MB : 0u)))
              .first;
    return *It->second;
  }
  /// The activation bytes at micro-batch size \p MB when the bound
  /// graph's, scaled by MB / batch, are not exact; null otherwise.
  const rulesplit::MicroBatchBytes *getMicroBatchBytes(unsigned MB) const;
  /// What one micro-batch of \p MB samples is of the bound graph's batch
  /// on one rank: cp ranks each hold 1/cp of every sequence, the tokens of
  /// MB / cp samples (attention: seq/cp queries against the whole
  /// sequence, 1/cp of the scores with the ring's balanced chunks or a2a's
  /// heads).
  double getActScale(unsigned MB, unsigned CP) const {
    return (double)MB / Opts.Batch / CP;
  }
  /// Conversions of values several layers read (TPComm::SharedNode) that a
  /// pipeline device made so far: the value, kind and bytes.
  using SharedConversions =
      std::set<std::tuple<const Value *, CollectiveKind, long long>>;
  /// The value \p X (TPComm::SharedNode) converts as layer \p L reads it
  /// (a repeated layer's own operand, where X names its
  /// representative's); null when X converts no shared value.
  const Value *getSharedValue(unsigned L, const rulesplit::TPComm &X) const {
    return X.SharedNode < 0
               ? nullptr
               : LF[L].Nodes[X.SharedNode].N->getInput(X.SharedInput);
  }
  /// Calls \p F(comm, bytes) for each tp collective of \p Comms (layer
  /// \p L's forward or backward) that converts a value other layers read
  /// too and that \p Converted already holds (the device made it for an
  /// earlier layer: the role builder converts a value once per spec, and
  /// its gradients are summed before one collective), adding the others
  /// to it.
  void forEachSharedRepeat(
      unsigned L, llvm::ArrayRef<rulesplit::TPComm> Comms, double ActScale,
      unsigned EP, SharedConversions &Converted,
      llvm::function_ref<void(const rulesplit::TPComm &, double)> F) const;
  /// The time and bytes of those repeats, as layerTimes priced them at tp
  /// \p TP.
  std::pair<double, double>
  sharedRepeats(unsigned L, llvm::ArrayRef<rulesplit::TPComm> Comms,
                unsigned TP, double ActScale, unsigned EP,
                SharedConversions &Converted) const;
  /// Calls \p F(comm, bytes) for each tp collective of \p Comms one rank
  /// runs at ep \p EP, its bytes at activation scale \p ActScale: what the
  /// stage costing prices and --check-priced-collectives compares. At ep >
  /// 1 the role graph gathers the ep group's tokens before unrolled
  /// experts' work, so a branch's collectives and the combining chain's
  /// carry ep times the rank's tokens, and a rank runs only the branches
  /// of the E/ep experts it holds (ep rank 0's: the others' are alike).
  template <typename Fn>
  static void forEachRankComm(llvm::ArrayRef<rulesplit::TPComm> Comms,
                              double ActScale, unsigned EP, Fn F) {
    for (const rulesplit::TPComm &X : Comms) {
      double Scale = X.Fixed ? 1.0 : ActScale;
      if (EP > 1 && X.Expert.Role == ExpertRole::Branch) {
        if ((unsigned)X.Expert.Expert >= X.Expert.GroupExperts / EP)
          continue;
        Scale *= EP;
      } else if (EP > 1 && X.Expert.Role == ExpertRole::Combine) {
        Scale *= EP;
      }
      F(X, X.Bytes * Scale);
    }
  }
  /// Calls \p F(comm, kind, bytes) for each ep collective of \p Comms
  /// ep rank 0 runs at ep \p EP (a branch's gather where it owns one of
  /// the branches reading it), in the bytes collectiveTime is given at
  /// activation scale \p ActScale: an all-gather's output and a
  /// reduce-scatter's input hold the group's ep shares, an all-to-all
  /// moves one.
  template <typename Fn>
  static void forEachEPComm(llvm::ArrayRef<rulesplit::EPComm> Comms,
                            double ActScale, unsigned EP, Fn F) {
    if (EP <= 1)
      return;
    for (const rulesplit::EPComm &X : Comms) {
      if (X.Reader.Role == ExpertRole::Branch &&
          (unsigned)X.Reader.Expert >= X.Reader.GroupExperts / EP)
        continue;
      bool A2A = X.Kind == ExpertTransition::Dispatch ||
                 X.Kind == ExpertTransition::Combine;
      CollectiveKind K = A2A ? CollectiveKind::AllToAll
                         : X.Kind == ExpertTransition::ReduceScatter
                             ? CollectiveKind::ReduceScatter
                             : CollectiveKind::AllGather;
      F(X, K, X.Bytes * ActScale * (A2A ? 1 : EP));
    }
  }
  const LayerTimes &layerTimes(unsigned L, unsigned TP, unsigned MB, bool SP,
                               unsigned EP, bool AllTables = false,
                               unsigned CP = 1) const;
  double nodeTime(const NodeFacts &F, const NodeSplit &S, double ActScale,
                  unsigned TP, bool Backward, unsigned EP) const;

  // The steps of PlanEvaluator::evaluateStagesInto, in the order it takes them.

  /// Whether \p P is one this model and hardware can run at all: ep must
  /// divide every expert group and dp, and the offload tiers must exist.
  llvm::Error checkPlan(const ParallelPlan &P) const;
  /// The plan's cost before its stages: the plan, the MoE imbalance it
  /// costs with, and the HBM, host and SSD capacities it is held to.
  PlanCost startPlan(const ParallelPlan &P) const;
  /// Pipeline stage \p Stage, holding the layers of \p Runs ([first, end)
  /// per chunk, StageSplit.h getStageLayerRuns): all of its
  /// per-micro-batch times, memory and per-step work. \p PrevSend is the
  /// previous stage's send time in, this stage's out; embedding costs are
  /// merged into \p R.
  StageCost costStage(const PlanContext &C, unsigned Stage,
                      llvm::ArrayRef<std::pair<unsigned, unsigned>> Runs,
                      double &PrevSend, PlanCost &R) const;
  /// The stage's layers one by one: compute (with recomputation), the
  /// parameters, saved and live activations, KV cache, and the TP and EP
  /// collectives of each micro-batch.
  void sumStageLayers(const PlanContext &C, StageCost &SC, StageSums &S) const;
  /// One micro-batch's forward ep communication through layer \p F (its
  /// split \p LS): the crossings' collectives, the stacked all-to-alls at
  /// the MoE load imbalance and the dispatcher's copies.
  double costEPComms(const LayerFacts &F, const LayerSplit &LS,
                     const PlanContext &C) const;
  /// Takes the embedding tables the plan shards out of the stage's
  /// replicated parameters, keeping them for costStageEmbeddings.
  void takeShardedTables(const PlanContext &C, const StageCost &SC,
                         StageSums &S) const;
  /// ZeRO-3 keeps 1/dp of the weights: every micro-batch gathers the
  /// stage's weights before its forward and again before its backward
  /// (Rajbhandari et al. 2020, sec. 5.3: 1.5x the DP volume per step at
  /// M=1). Counted as exposed communication; prefetching hides part of it.
  void addZero3Gathers(const PlanContext &C, StageSums &S) const;
  /// The stage's communication totals and its pipeline send (the
  /// boundary activations, split across TP ranks: Megatron's
  /// scatter/gather optimization).
  void costStageComm(const PlanContext &C, unsigned Stage, StageCost &SC,
                     StageSums &S) const;
  /// The plan's overlaps (loom/Cost/Overlap.h): what tp_overlap and the
  /// pipeline sends add to the stage's forward and backward per
  /// micro-batch; then the pipeline's per-micro-batch times.
  void applyOverlaps(const PlanContext &C, StageCost &SC, const StageSums &S,
                     double PrevSend) const;
  /// The stage's HBM: weights, gradients, optimizer states, activations
  /// or KV cache, and the experts' share. Returns the inputs, which the
  /// offload costing reads.
  StageMemoryInputs costStageMemory(const PlanContext &C, unsigned Stage,
                                    StageCost &SC, const StageSums &S) const;
  /// DP gradient sync (training, dp > 1), overlapped with the last
  /// micro-batch's backward; it shares links with that backward's TP
  /// traffic.
  void costDPSync(const PlanContext &C, StageCost &SC,
                  const StageSums &S) const;
  /// With dp overlap, the DP sync left exposed after the backward: the
  /// last gradient bucket's reduction (and, with ZeRO, its parameter
  /// all-gather before the next forward).
  double dpTailS(const PlanContext &C, const StageSums &S,
                 CollectiveKind K) const;
  /// The AdamW step's time on the stage's local parameters (training).
  void costOptimizer(const PlanContext &C, StageCost &SC,
                     const StageSums &S) const;
  /// The offload inputs of the stage and, when the plan offloads, what
  /// the tiers add (cost_models/memory/Offload.cpp).
  void costOffload(const PlanContext &C, StageCost &SC, const StageSums &S,
                   const StageMemoryInputs &MI) const;
  /// The stage's sharded embedding tables (lib/Planner/Embedding.cpp): their
  /// memory, lookups and exchanges, merged into \p R's embedding cost.
  void costStageEmbeddings(const PlanContext &C, StageCost &SC, StageSums &S,
                           PlanCost &R) const;
};

} // namespace loom

#endif // LOOM_LIB_PLANNER_PLANCOSTIMPL_H
