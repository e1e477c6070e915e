//===- PlanCost.cpp - Predicted cost of a plan, stage by stage ------------===//
#include "loom/Planner/PlanCost.h"
#include "RuleSplit.h"
#include "loom/Cost/Collectives.h"
#include "loom/Cost/Overlap.h"
#include "loom/Cost/Pipeline.h"
#include "loom/IR/Subgraphs.h"
#include "loom/Plan/StageSplit.h"
#include "loom/Planner/ContextParallel.h"
#include "loom/Planner/OffloadCost.h"
#include "loom/Shard/ExpertRules.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <set>
#include <tuple>

using namespace llvm;

namespace loom {

/// A MatMul/Gemm with a weight operand (a Linear layer).
static bool multipliesWeight(const Node &N) {
  StringRef Op = N.getOpType();
  return (Op == "MatMul" || Op == "Gemm") &&
         any_of(N.getInputs(), [](const Value *V) {
           return V && isWeightLike(V) && V->Type.getRank() >= 2;
         });
}

NodeCostMap annotateNodeCosts(const Graph &G, int64_t Opset,
                              const HardwareModel &HW,
                              const PrecisionRecipe *Recipe) {
  NodeCostMap Map;
  Map.reserve(G.getNumNodes());
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    NodeCostInfo &Info = Map[&N];
    Info.Cost = computeOpCost(N, Opset);
    if (Recipe && Info.Cost.Unit == ComputeUnit::Cube &&
        Info.Cost.Elem == Recipe->Storage)
      Recipe->applyToCube(Info.Cost, multipliesWeight(N));
    double Best = INFINITY;
    for (const auto &KV : HW.Device.Classes) {
      ClassTime T = estimateClassTime(N, Info.Cost, KV.first, HW);
      if (T.Supported && T.Seconds < Best) {
        Best = T.Seconds;
        Info.Class = KV.first;
      }
      Info.Times.emplace(KV.first, std::move(T));
    }
  }
  return Map;
}

namespace {

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

/// One MoE layer's EP traffic at the full batch: tokens in, outputs back.
struct EPTraffic {
  bool Stacked = false;
  double TokenBytes = 0, OutputBytes = 0;
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

static double valueBytes(const Value *V) {
  return (double)V->Type.getSizeInBytes().getValueOr(0);
}

/// The tensor a KV cache holds for attention operand \p V (K^T of the
/// score matmul, V of the context matmul): walks back through what only
/// moves or repeats it -- Transpose, Reshape, Unsqueeze/Squeeze, and the
/// Expand, Tile or Concat of the same tensor with which grouped-query
/// attention repeats each KV head for its query heads (torch's repeat_kv
/// exports Unsqueeze+Expand+Reshape) -- to the un-expanded tensor, which
/// is what an inference runtime caches (Ainslie et al. 2023, GQA §2: the
/// cache shrinks by heads / kv_heads).
static const Value *kvCacheSource(const Value *V) {
  for (unsigned Steps = 0; V && Steps < 64; ++Steps) {
    const Node *D = V->getDefiningNode();
    if (!D || D->getNumInputs() == 0 || !D->getInput(0))
      return V;
    StringRef Op = D->getOpType();
    if (Op == "Concat") {
      // Only a repeat: every input the same tensor.
      const Value *In = D->getInput(0);
      if (!all_of(D->getInputs(), [&](const Value *X) { return X == In; }))
        return V;
      V = In;
      continue;
    }
    if (Op != "Transpose" && Op != "Reshape" && Op != "Unsqueeze" &&
        Op != "Squeeze" && Op != "Expand" && Op != "Tile" && Op != "Identity" &&
        Op != "Flatten")
      return V;
    if (isConstantLike(D->getInput(0)))
      return V;
    V = D->getInput(0);
  }
  return V;
}

/// A value a fused kernel keeps on chip (detect-fused-kernels): produced
/// and consumed only inside one fused region, and no graph output.
static bool fusedInternal(
    const Value *V, const NodeCostMap &Costs,
    const DenseMap<const Value *, SmallVector<const Node *, 2>> &Users,
    const DenseSet<const Value *> &GraphOutputs) {
  const Node *D = V->getDefiningNode();
  auto It = D ? Costs.find(D) : Costs.end();
  if (It == Costs.end() || It->second.Cost.FusedKernel.empty() ||
      GraphOutputs.count(V))
    return false;
  const Node *Anchor =
      It->second.Cost.FusedInto ? It->second.Cost.FusedInto : D;
  auto U = Users.find(V);
  return U != Users.end() && all_of(U->second, [&](const Node *N) {
           auto NI = Costs.find(N);
           return N == Anchor ||
                  (NI != Costs.end() && NI->second.Cost.FusedInto == Anchor);
         });
}

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
  GroupShape CPG;
  unsigned DPCP = 1;
  /// Shares of compute the overlapped collectives hold (0 where the YAML
  /// gives none).
  double OvTP = 0, OvDP = 0, OvPP = 0;
  const MemoryLevel *HBM = nullptr;
};

/// One stage's running sums, filled step by step by the stage's costing.
struct StageSums {
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

} // namespace

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
  DenseMap<const Value *, unsigned> TableIndex;
  std::vector<unsigned> TableLayer, TableParamIndex;
  /// Parameters only the placement's SSD class reads (tables served from
  /// SSD): they hold no HBM, are not among any layer's parameters and are
  /// never sharded over the dp group (holdsHBM; the search's memory bound
  /// reads the same set).
  DenseSet<const Value *> SSDOnlyParams;
  std::vector<bool> TableMustShard;
  /// Lookups of the tables emb=auto shards: they read the rows of their
  /// ids, not the (huge) table their ParamBytes count.
  DenseSet<const Node *> ShardedLookups;
  /// The tables emb=auto shards, and every table (emb=row|table|col).
  DenseSet<const Value *> ShardedTableWeights, AllTableWeights;
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
  mutable std::map<unsigned, std::pair<std::shared_ptr<const StringMap<double>>,
                                       rulesplit::MicroBatchBytes>>
      MBBytes;
  /// Set once the first micro-batch graph showed every value either
  /// scaling with the batch or independent of it (a causal mask, rotary
  /// tables): the bound graph's bytes times micro-batch / batch are exact
  /// for the first, FixedBytes (the bound bytes) for the second, at every
  /// micro-batch size, and no other graph is built.
  mutable bool Classified = false;
  mutable StringMap<double> FixedBytes;
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
  mutable std::map<SmallVector<std::pair<unsigned, unsigned>, 3>, GroupShape>
      Shapes;
  /// A plan's groups (PlanContext), by what they read: tp, cp, ep, dp,
  /// pp and the mesh order. The search costs tens of thousands of plans
  /// over a few hundred of these.
  struct PlanGroups {
    GroupShape TPG, DPG, EPG, DPEPG, PPPair, CPG;
  };
  mutable DenseMap<
      std::tuple<unsigned, unsigned, unsigned, unsigned, unsigned, unsigned>,
      PlanGroups>
      GroupsOf;
  const PlanGroups &getPlanGroups(const ParallelPlan &P) const;
  PlanContext makePlanContext(const ParallelPlan &P) const;

  /// The evaluator (its group shapes).
  const PlanEvaluator &Outer;

  Impl(const PlanEvaluator &Outer, const Graph &G, ArrayRef<LayerInfo> Ls,
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
                          const DenseSet<const Value *> &ExpertParams);
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
    auto K =
        std::make_tuple(TP, SP && TP > 1, EP > 1, AllTables, MBB ? MB : 0u);
    auto It = Configs.find(K);
    if (It == Configs.end())
      It =
          Configs
              .emplace(K, std::make_unique<ConfigSplit>(Splitter->run(
                              TP, SP && TP > 1, EP > 1,
                              AllTables ? AllTableWeights : ShardedTableWeights,
                              MBB)))
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
  /// Calls \p F(comm, bytes) for each tp collective of \p Comms one rank
  /// runs at ep \p EP, its bytes at activation scale \p ActScale: what the
  /// stage costing prices and --check-priced-collectives compares. At ep >
  /// 1 the role graph gathers the ep group's tokens before unrolled
  /// experts' work, so a branch's collectives and the combining chain's
  /// carry ep times the rank's tokens, and a rank runs only the branches
  /// of the E/ep experts it holds (ep rank 0's: the others' are alike).
  template <typename Fn>
  static void forEachRankComm(ArrayRef<rulesplit::TPComm> Comms,
                              double ActScale, unsigned EP, Fn F) {
    for (const rulesplit::TPComm &X : Comms) {
      double Scale = ActScale;
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
  const LayerTimes &layerTimes(unsigned L, unsigned TP, unsigned MB, bool SP,
                               unsigned EP, bool AllTables = false,
                               unsigned CP = 1) const;
  double nodeTime(const NodeFacts &F, const NodeSplit &S, double ActScale,
                  unsigned TP, bool Backward, unsigned EP) const;

  // The steps of PlanEvaluator::evaluateStagesInto, in the order it takes them.

  /// Whether \p P is one this model and hardware can run at all: ep must
  /// divide every expert group and dp, and the offload tiers must exist.
  Error checkPlan(const ParallelPlan &P) const;
  /// The plan's cost before its stages: the plan, the MoE imbalance it
  /// costs with, and the HBM, host and SSD capacities it is held to.
  PlanCost startPlan(const ParallelPlan &P) const;
  /// Pipeline stage \p Stage of layers [First, First + NumLayers): all of
  /// its per-micro-batch times, memory and per-step work. \p PrevSend is
  /// the previous stage's send time in, this stage's out; embedding costs
  /// are merged into \p R.
  StageCost costStage(const PlanContext &C, unsigned Stage, unsigned First,
                      unsigned NumLayers, double &PrevSend, PlanCost &R) const;
  /// The stage's layers one by one: compute (with recomputation), the
  /// parameters, saved and live activations, KV cache, and the TP and EP
  /// collectives of each micro-batch.
  void sumStageLayers(const PlanContext &C, StageCost &SC, StageSums &S) const;
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
  /// The stage's sharded embedding tables (lib/Plan/Embedding.cpp): their
  /// memory, lookups and exchanges, merged into \p R's embedding cost.
  void costStageEmbeddings(const PlanContext &C, StageCost &SC, StageSums &S,
                           PlanCost &R) const;
};

void PlanEvaluator::Impl::analyze() {
  LF.assign(Layers.size(), LayerFacts());
  Experts = findExperts(G, Layers);
  Tables = findEmbeddingTables(G, Opts.Batch);
  TableLayer.assign(Tables.size(), 0);
  TableParamIndex.assign(Tables.size(), 0);
  for (unsigned T = 0; T < Tables.size(); ++T) {
    TableIndex[Tables[T].Weight] = T;
    TableMustShard.push_back(mustShardTable(Tables[T], HW, Opts.Train));
    AllTableWeights.insert(Tables[T].Weight);
    if (TableMustShard.back()) {
      ShardedTableWeights.insert(Tables[T].Weight);
      ShardedLookups.insert(Tables[T].Lookups.begin(), Tables[T].Lookups.end());
    }
  }
  // Expert work and weights as the ep rules (Rules.h) see them at any
  // degree.
  ExpertAxisRules XR;
  if (Expected<ExpertAxisRules> X =
          applyExpertRules(G, Experts, RuleContext::AnyDivides))
    XR = std::move(*X);
  else
    consumeError(X.takeError()); // Unchecked at AnyDivides: cannot fail.
  DenseSet<const Value *> ExpertParams = XR.SplitParams;
  ExpertParams.insert(XR.BranchParams.begin(), XR.BranchParams.end());
  collectNodes(XR);
  UseMap Users = buildUseMap(G);
  findAttentionCore(Users);
  collectLayerValues(Users, ExpertParams);
  findPeakLive(Users);
  collectTransfers();
  computeModelFlops();

  std::vector<rulesplit::LayerValues> Values;
  for (LayerFacts &L : LF)
    Values.push_back(std::move(L.Values));
  Splitter = std::make_unique<rulesplit::RuleSplitter>(G, std::move(Values), XR,
                                                       Opts.Opset);
}

void PlanEvaluator::Impl::collectNodes(const ExpertAxisRules &XR) {
  auto LayerOf = [&](const Node &N) {
    return (unsigned)std::max(0, std::min<int>(N.Layer, LF.size() - 1));
  };

  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    LayerFacts &L = LF[LayerOf(N)];
    NodeFacts F;
    F.N = &N;
    auto CI = Costs.find(&N);
    F.C = CI == Costs.end() ? nullptr : &CI->second;
    StringRef Op = N.getOpType();
    ExpertNodeRule XN = XR.lookup(&N);
    if (XN.Role == ExpertRole::Branch || XN.Role == ExpertRole::Stacked) {
      F.Expert = true;
      F.StackedExperts = XN.Role == ExpertRole::Stacked ? XN.GroupExperts : 0;
    }
    if (Op == "MatMul" || Op == "Gemm") {
      bool Weight = false, Act = false;
      for (const Value *V : N.getInputs()) {
        if (!V)
          continue;
        if (isWeightLike(V) && V->Type.getRank() >= 2)
          Weight = true;
        else if (!isConstantLike(V))
          Act = true;
      }
      F.WeightGemm = Weight && Act;
    }
    if (F.C) {
      L.Flops += F.C->Cost.Flops;
      L.BackwardFlops += F.C->Cost.BackwardFlops;
    }
    L.Nodes.push_back(F);
    L.Values.Nodes.push_back(&N);
  }
}

void PlanEvaluator::Impl::collectLayerValues(
    const UseMap &Users, const DenseSet<const Value *> &ExpertParams) {
  DenseSet<const Value *> CountedParams;
  // Element-wise chains run as one fused kernel (GeLU exported as
  // Div/Erf/Add/Mul/Mul, the tail of a decomposed RMSNorm): its backward
  // recomputes internal values from the chain's inputs, so a saved value
  // produced inside a chain stands for the chain's external inputs.
  // Regions: union-find over element-wise nodes joined through values all
  // of whose consumers are element-wise.
  DenseMap<const Node *, const Node *> Parent;
  std::function<const Node *(const Node *)> Find = [&](const Node *N) {
    const Node *P = Parent.lookup(N);
    if (!P || P == N)
      return N;
    const Node *Root = Find(P);
    Parent[N] = Root;
    return Root;
  };
  for (const auto &NP : G.getNodes()) {
    const Node *N = NP.get();
    if (!isElementwiseOp(*N))
      continue;
    Parent.try_emplace(N, N);
    for (const Value *V : N->getInputs()) {
      const Node *D = V ? V->getDefiningNode() : nullptr;
      if (!D || !isElementwiseOp(*D) || D->Layer != N->Layer ||
          any_of(Users.lookup(V),
                 [](const Node *U) { return !isElementwiseOp(*U); }) ||
          is_contained(G.getOutputs(), V))
        continue;
      Parent.try_emplace(D, D);
      Parent[Find(D)] = Find(N);
    }
  }
  DenseMap<const Node *, SmallVector<const Value *, 2>> RegionInputs;
  for (const auto &NP : G.getNodes()) {
    const Node *N = NP.get();
    if (!Parent.count(N))
      continue;
    const Node *R = Find(N);
    for (const Value *V : N->getInputs()) {
      if (!V || isConstantLike(V))
        continue;
      const Node *D = V->getDefiningNode();
      if (D && Parent.count(D) && Find(D) == R)
        continue;
      if (!is_contained(RegionInputs[R], V))
        RegionInputs[R].push_back(V);
    }
  }
  auto SavedFor = [&](const Node *N, const Value *V,
                      SmallVectorImpl<const Value *> &Out) {
    const Node *D = V->getDefiningNode();
    if (Parent.count(N) && D && Parent.count(D) && Find(D) == Find(N)) {
      for (const Value *In : RegionInputs[Find(N)])
        Out.push_back(In);
      return;
    }
    Out.push_back(V);
  };

  // A Loop/If/Scan reads the values its bodies capture (a table an
  // EmbeddingBag Loop gathers from) as well as its inputs.
  auto ReadsOf = [](const NodeFacts &F) {
    std::vector<const Value *> Reads(F.N->getInputs().begin(),
                                     F.N->getInputs().end());
    if (hasSubgraphs(*F.N))
      for (const Value *V : getCapturedValues(*F.N))
        Reads.push_back(V);
    return Reads;
  };
  // A parameter the placement serves from SSD holds no HBM (DESIGN
  // section 5) unless a reader on another class needs it there too.
  DenseSet<const Value *> OffSSD;
  for (const LayerFacts &L : LF)
    for (const NodeFacts &F : L.Nodes)
      for (const Value *V : ReadsOf(F))
        if (V && V->isParameter())
          (F.C && F.C->Class == "ssd" ? SSDOnlyParams : OffSSD).insert(V);
  for (const Value *V : OffSSD)
    SSDOnlyParams.erase(V);

  // Parameters, saved activations, layer inputs.
  DenseSet<const Value *> Saved;
  for (unsigned LI = 0; LI < LF.size(); ++LI) {
    LayerFacts &L = LF[LI];
    Saved.clear();
    DenseSet<const Value *> Inputs;
    for (const NodeFacts &F : L.Nodes) {
      for (const Value *V : ReadsOf(F)) {
        if (!V)
          continue;
        if (V->isParameter()) {
          // Counted at its first reader off the SSD class, if any.
          if (F.C && F.C->Class == "ssd")
            continue;
          if (CountedParams.insert(V).second) {
            auto TI = TableIndex.find(V);
            if (TI != TableIndex.end()) {
              TableLayer[TI->second] = LI;
              TableParamIndex[TI->second] = L.Values.Params.size();
            }
            L.Values.Params.push_back({V, ExpertParams.count(V) != 0});
          }
          continue;
        }
        const Node *D = V->getDefiningNode();
        if (!isConstantLike(V) && (!D || (unsigned)D->Layer != LI) &&
            Inputs.insert(V).second)
          L.Values.Inputs.push_back(V);
      }
      if (!F.C)
        continue;
      SmallVector<const Value *, 4> Keep;
      for (const Value *V : F.C->Cost.SavedValues)
        if (V)
          SavedFor(F.N, V, Keep);
      for (const Value *V : Keep)
        if (!isConstantLike(V) && Saved.insert(V).second)
          L.Values.Saved.push_back({V, F.AttentionCore});
    }
  }
}

void PlanEvaluator::Impl::findPeakLive(const UseMap &Users) {
  // Inference activations: per layer, the values alive at once at the
  // peak of its forward, walking its nodes in order. Alive: the layer's
  // inputs until their last use here, each output from its node until its
  // last use here, or to the layer's end when a later layer or the graph's
  // outputs read it.
  DenseSet<const Value *> GraphOutputs(G.getOutputs().begin(),
                                       G.getOutputs().end());
  for (unsigned LI = 0; LI < LF.size(); ++LI) {
    LayerFacts &L = LF[LI];
    unsigned End = L.Nodes.size();
    DenseMap<const Value *, unsigned> Last;
    auto Live = [&](const Value *V) {
      return V && !isConstantLike(V) && !V->isParameter() &&
             !fusedInternal(V, Costs, Users, GraphOutputs);
    };
    for (unsigned I = 0; I < End; ++I)
      for (const Value *V : L.Nodes[I].N->getInputs())
        if (Live(V))
          Last[V] = I;
    for (unsigned I = 0; I < End; ++I)
      for (const Value *V : L.Nodes[I].N->getOutputs()) {
        if (!Live(V))
          continue;
        bool Later = GraphOutputs.count(V) ||
                     any_of(Users.lookup(V), [&](const Node *U) {
                       return (unsigned)std::max(0, U->Layer) != LI;
                     });
        if (Later)
          Last[V] = End;
        else if (!Last.count(V))
          Last[V] = I; // unused: freed at once
      }
    double Bytes = 0, PeakBytes = 0;
    std::vector<const Value *> Alive;
    auto Add = [&](const Value *V) {
      Alive.push_back(V);
      Bytes += valueBytes(V);
    };
    auto Free = [&](const Value *V) {
      auto It = std::find(Alive.begin(), Alive.end(), V);
      if (It != Alive.end()) {
        Alive.erase(It);
        Bytes -= valueBytes(V);
      }
    };
    DenseSet<const Value *> In;
    for (unsigned I = 0; I < End; ++I)
      for (const Value *V : L.Nodes[I].N->getInputs())
        if (Live(V) &&
            (!V->getDefiningNode() ||
             (unsigned)std::max(0, V->getDefiningNode()->Layer) != LI) &&
            In.insert(V).second)
          Add(V);
    for (unsigned I = 0; I < End; ++I) {
      const Node *N = L.Nodes[I].N;
      for (const Value *V : N->getOutputs())
        if (Live(V))
          Add(V);
      if (Bytes > PeakBytes) {
        PeakBytes = Bytes;
        L.Values.PeakLive = Alive;
      }
      SmallPtrSet<const Value *, 4> Freed;
      for (const Value *V : N->getInputs())
        if (Live(V) && Last.lookup(V) == I && Freed.insert(V).second)
          Free(V);
      for (const Value *V : N->getOutputs())
        if (Live(V) && Last.lookup(V) == I && Freed.insert(V).second)
          Free(V);
    }
  }
}

void PlanEvaluator::Impl::collectTransfers() {
  // EP traffic per MoE layer.
  for (const ExpertGroup &EG : Experts) {
    if (EG.Layer >= LF.size() || !EG.Tokens || !EG.Output)
      continue;
    EPTraffic T;
    T.Stacked = EG.isStacked();
    T.TokenBytes = valueBytes(EG.Tokens);
    T.OutputBytes = valueBytes(EG.Output);
    T.NumExperts = EG.NumExperts;
    T.TopK = T.Stacked ? getRouterTopK(G, EG) : 0;
    LF[EG.Layer].EP.push_back(T);
  }

  // Activations crossing layer boundaries (pipeline Send/Recv).
  BoundaryBytes.assign(LF.size() + 1, 0);
  DenseMap<const Value *, unsigned> LastUse;
  for (const auto &NP : G.getNodes())
    for (const Value *V : NP->getInputs())
      if (V && !isConstantLike(V) && V->getDefiningNode()) {
        unsigned &U = LastUse[V];
        U = std::max<unsigned>(U, std::max(0, NP->Layer));
      }
  for (const auto &NP : G.getNodes())
    for (const Value *V : NP->getOutputs()) {
      auto It = V ? LastUse.find(V) : LastUse.end();
      if (It == LastUse.end())
        continue;
      unsigned Def = std::max(0, NP->Layer);
      for (unsigned B = Def + 1; B <= It->second && B < BoundaryBytes.size();
           ++B)
        BoundaryBytes[B] += valueBytes(V);
    }
}

void PlanEvaluator::Impl::computeModelFlops() {
  // Model FLOPs and the peak MFU is measured against: the cube's fastest
  // rate among the element types the matmuls run in (a model with one
  // fp32 matmul among fp16 ones is measured against the fp16 peak, so
  // that no op can beat the peak and MFU stays <= 1), in the format the
  // precision recipe computes them in (tf32).
  for (const LayerFacts &L : LF) {
    ModelFlops += L.Flops + (Opts.Train ? L.BackwardFlops : 0);
    for (const NodeFacts &F : L.Nodes)
      if (F.C && F.C->Cost.Unit == ComputeUnit::Cube)
        if (const DeviceClass *AC = HW.getClass("aicore"))
          if (auto P = AC->getThroughput(F.C->Cost.CubeFormat.empty()
                                             ? getDataTypeName(F.C->Cost.Elem)
                                             : StringRef(F.C->Cost.CubeFormat)))
            Peak = std::max(Peak, P->value());
  }
  if (Peak == 0)
    for (const auto &KV : HW.Device.Classes)
      for (const auto &T : KV.second.Throughput)
        Peak = std::max(Peak, T.second.value());
}

/// The attention core (what selective recompute recomputes instead of
/// storing, and what a KV cache holds the operands of): the products of
/// two activations on either side of a Softmax -- the scores feeding it
/// and the context it weights -- and the Softmax itself, found through at
/// most a few element-wise or layout ops (scale, mask, dropout, head
/// reshapes). A product of two activations elsewhere (a gating product, a
/// bilinear layer) is ordinary work.
/// What cp's a2a needs of an attention core product \p N of layer \p L:
/// a context product's output is the attention output; a scores product
/// reads Q as [B, H, S, D] (the matmul's batch dims), whose dim 1 is the
/// heads.
static void noteAttentionShape(LayerFacts &L, const Node &N, bool Context) {
  if (N.getOpType() == "Softmax")
    return;
  if (Context) {
    if (N.getOutput(0))
      L.QOBytes += valueBytes(N.getOutput(0));
    return;
  }
  const Value *Q = N.getInput(0);
  if (Q && Q->Type.getRank() == 4 && Q->Type.Dims[1].isStatic())
    L.QHeads = Q->Type.Dims[1].Size;
}

void PlanEvaluator::Impl::findAttentionCore(const UseMap &Users) {
  DenseMap<const Node *, NodeFacts *> FactsOf;
  for (LayerFacts &L : LF)
    for (NodeFacts &F : L.Nodes)
      FactsOf[F.N] = &F;
  auto IsProduct = [&](const Node *N) {
    const NodeFacts *F = FactsOf.lookup(N);
    if (!F || !F->C)
      return false;
    // A product inside a fused kernel (detect-fused-kernels) is still one.
    bool Cube = F->C->Cost.Unit == ComputeUnit::Cube ||
                (F->C->Cost.FusedInto && N->getOpType() == "MatMul");
    return Cube && none_of(N->getInputs(), [](const Value *V) {
             return V && isWeightLike(V) && V->Type.getRank() >= 2;
           });
  };
  auto IsPassThrough = [&](const Node *N) {
    const NodeFacts *F = FactsOf.lookup(N);
    return N->getOpType() != "Softmax" && N->getNumOutputs() == 1 &&
           !(F && F->C && F->C->Cost.Unit == ComputeUnit::Cube);
  };
  constexpr unsigned MaxSteps = 6;
  DenseSet<const Node *> Core, Context;
  for (const auto &NP : G.getNodes()) {
    const Node *S = NP.get();
    if (S->getOpType() != "Softmax" || !S->getInput(0) || !S->getOutput(0))
      continue;
    bool Scores = false;
    // Back to the scores' product.
    SmallVector<std::pair<const Value *, unsigned>, 8> Work = {
        {S->getInput(0), 0}};
    DenseSet<const Value *> Seen;
    while (!Work.empty()) {
      auto [V, Steps] = Work.pop_back_val();
      const Node *D = V->getDefiningNode();
      if (!D || isConstantLike(V) || !Seen.insert(V).second)
        continue;
      if (IsProduct(D)) {
        Core.insert(D);
        Scores = true;
      } else if (Steps < MaxSteps && IsPassThrough(D)) {
        for (const Value *In : D->getInputs())
          if (In)
            Work.push_back({In, Steps + 1});
      }
    }
    if (!Scores)
      continue;
    Core.insert(S);
    // On to the context's product.
    Work = {{S->getOutput(0), 0}};
    Seen.clear();
    while (!Work.empty()) {
      auto [V, Steps] = Work.pop_back_val();
      if (!Seen.insert(V).second)
        continue;
      auto U = Users.find(V);
      if (U == Users.end())
        continue;
      for (const Node *N : U->second) {
        if (IsProduct(N)) {
          Core.insert(N);
          Context.insert(N);
        } else if (Steps < MaxSteps && IsPassThrough(N) && N->getOutput(0))
          Work.push_back({N->getOutput(0), Steps + 1});
      }
    }
  }
  DenseSet<const Value *> KVCounted;
  for (LayerFacts &L : LF)
    for (NodeFacts &F : L.Nodes) {
      if (!Core.count(F.N))
        continue;
      F.AttentionCore = true;
      F.CoreNode = true;
      noteAttentionShape(L, *F.N, Context.count(F.N));
      // K^T of the scores and V of the context: each cached once, at its
      // size before any GQA repeat.
      if (F.N->getOpType() != "Softmax" && F.N->getNumInputs() >= 2 &&
          F.N->getInput(1)) {
        const Value *Src = kvCacheSource(F.N->getInput(1));
        if (KVCounted.insert(Src).second) {
          L.KVBytes += valueBytes(Src);
          L.KVElements += Src->Type.getNumElements().getValueOr(0);
        }
      }
      // A fused attention kernel keeps no scores to recompute.
      if (F.C && F.C->Cost.FusedKernel == "attention")
        F.AttentionCore = false;
    }
  // K/V heads from the sizes, whatever their layout: K and V hold
  // 2 * B * S * KVH * D elements, the output B * S * QH * D.
  for (LayerFacts &L : LF) {
    double QOElems = 0;
    for (const NodeFacts &F : L.Nodes)
      if (Context.count(F.N) && F.N->getOutput(0))
        QOElems += F.N->getOutput(0)->Type.getNumElements().getValueOr(0);
    if (L.QHeads > 0 && QOElems > 0)
      L.KVHeads = std::llround(L.QHeads * L.KVElements / (2 * QOElems));
  }
}

double PlanEvaluator::Impl::nodeTime(const NodeFacts &F, const NodeSplit &S,
                                     double ActScale, unsigned TP,
                                     bool Backward, unsigned EP) const {
  if (!F.C || F.C->Class.empty() || !F.C->Cost.HasRule)
    return 0;
  // Placed where it has no time (a Constant: data at rest, placed anywhere).
  auto Placed = F.C->Times.find(F.C->Class);
  if (Placed == F.C->Times.end() || !Placed->second.Supported)
    return 0;
  // An unrolled expert's branch runs on 1/ep of the devices, on ep times
  // the tokens: its time at ep x the activations, divided by ep.
  double Share = 1;
  if (F.Expert && !F.StackedExperts && EP > 1) {
    ActScale *= EP;
    Share = 1.0 / EP;
  }
  // Per rank (the rules' local shapes): split work is 1/tp of the node's
  // at the micro-batch; its weights are 1/tp where they arrive split.
  OpCost C = F.C->Cost;
  double ActF = ActScale / (S.Sharded ? TP : 1);
  double ParamF = 1 - S.ParamSplitFrac * (1 - 1.0 / TP);
  C.Flops *= ActF;
  C.BackwardFlops *= ActF;
  C.RecomputeFlops *= ActF; // a fused kernel's backward recomputation
  if (ShardedLookups.count(F.N))
    C.BytesRead *= ActF; // the rows of this micro-batch's ids
  else
    C.BytesRead = (C.BytesRead - C.ParamBytes) * ActF + C.ParamBytes * ParamF;
  C.BytesWritten *= ActF;
  C.BackwardBytes *= ActF;
  C.ParamBytes *= ParamF;
  if (F.StackedExperts) {
    // All experts at once: each device keeps NumExperts / ep of them (the
    // weight reads shrink) and gets ep times the tokens per expert (the
    // FLOPs do not change).
    C.BytesRead -= C.ParamBytes * (1 - 1.0 / EP);
    C.ParamBytes /= EP;
  }
  if (C.Unit == ComputeUnit::Cube && F.StackedExperts &&
      C.MM.Batch == (int64_t)F.StackedExperts) {
    C.MM.Batch = std::max<int64_t>(1, C.MM.Batch / EP);
    C.MM.M = std::max<int64_t>(1, std::llround(C.MM.M * ActScale * EP));
  } else if (C.Unit == ComputeUnit::Cube) {
    if (C.MM.Batch > 1)
      C.MM.Batch = std::max<int64_t>(1, std::llround(C.MM.Batch * ActScale));
    else
      C.MM.M = std::max<int64_t>(1, std::llround(C.MM.M * ActScale));
  }
  // The dim the split divides: the columns (column parallel), the
  // contraction (row parallel), the heads or the rows.
  if (C.Unit == ComputeUnit::Cube && TP > 1) {
    auto Div = [&](int64_t &D) { D = std::max<int64_t>(1, D / TP); };
    switch (S.MM) {
    case rulesplit::MMDim::N:
      Div(C.MM.N);
      break;
    case rulesplit::MMDim::K:
      Div(C.MM.K);
      break;
    case rulesplit::MMDim::Batch:
      Div(C.MM.Batch > 1 ? C.MM.Batch : C.MM.M);
      break;
    case rulesplit::MMDim::M:
      Div(C.MM.M);
      break;
    case rulesplit::MMDim::None:
      break;
    }
  }
  ClassTime T = estimateClassTime(*F.N, C, F.C->Class, HW);
  // Inputs arriving from another class (placement): the bytes scale with
  // the node's activations, the latencies do not.
  double Transfer =
      Backward ? F.C->BackwardTransferS * ActF + F.C->BackwardTransferLatencyS
               : F.C->TransferS * ActF + F.C->TransferLatencyS;
  return ((Backward ? T.BackwardSeconds : T.Seconds) + Transfer) * Share;
}

const LayerTimes &PlanEvaluator::Impl::layerTimes(unsigned L, unsigned TP,
                                                  unsigned MB, bool SP,
                                                  unsigned EP, bool AllTables,
                                                  unsigned CP) const {
  // Identical blocks cost the same: key by the representative the rules
  // ran over.
  AllTables &= !Tables.empty();
  const ConfigSplit &CS = getConfig(TP, SP, EP, AllTables, MB);
  unsigned Key = CS.RepOf[L];
  if (LF[L].EP.empty())
    EP = 1; // no experts: the same times at every ep
  auto K = std::make_tuple(Key, TP, MB, SP, EP, AllTables, CP);
  auto It = Cache.find(K);
  if (It != Cache.end())
    return It->second;
  double ActScale = getActScale(MB, CP);
  LayerTimes T;
  DenseMap<const Value *, unsigned> LinearOf;
  const LayerSplit &LS = CS.get(L);
  for (unsigned I = 0; I < LF[Key].Nodes.size(); ++I) {
    const NodeFacts &F = LF[Key].Nodes[I];
    const NodeSplit &NS = LS.Nodes[I];
    // Routed tokens spread unevenly over the ep ranks: the most loaded one
    // runs its experts on MoEImbalance times the mean, and the rest wait.
    double Imb = F.StackedExperts && EP > 1 ? Opts.MoEImbalance : 1.0;
    double Fwd = nodeTime(F, NS, ActScale, TP, false, EP) * Imb;
    T.Fwd += Fwd;
    double Bwd =
        Opts.Train ? nodeTime(F, NS, ActScale, TP, true, EP) * Imb : 0.0;
    T.Bwd += Bwd;
    if (F.WeightGemm && NS.Sharded) {
      T.GemmFwd += Fwd;
      T.GemmBwd += Bwd;
      const Value *Act = nullptr;
      for (const Value *V : F.N->getInputs())
        if (V && !(isWeightLike(V) && V->Type.getRank() >= 2) &&
            !isConstantLike(V)) {
          Act = V;
          break;
        }
      auto Ins = LinearOf.try_emplace(Act, T.LinearFwd.size());
      if (Ins.second) {
        T.LinearFwd.push_back(0);
        T.LinearBwd.push_back(0);
      }
      T.LinearFwd[Ins.first->second] += Fwd;
      T.LinearBwd[Ins.first->second] += Bwd;
    }
    if (F.AttentionCore)
      T.AttnFwd += Fwd;
    if (F.CoreNode) {
      T.CoreFwd += Fwd;
      T.CoreBwd += Bwd;
    }
  }
  if (TP > 1) {
    GroupShape TPG = Outer.getGroupShape({{1u, TP}});
    forEachRankComm(
        LS.Fwd, ActScale, EP, [&](const rulesplit::TPComm &X, double Bytes) {
          T.CommFwd += collectiveTime(X.Kind, Bytes, TPG, HW).Seconds;
        });
    if (Opts.Train)
      forEachRankComm(
          LS.Bwd, ActScale, EP, [&](const rulesplit::TPComm &X, double Bytes) {
            T.CommBwd += collectiveTime(X.Kind, Bytes, TPG, HW).Seconds;
            T.BwdBytes += Bytes;
          });
  }
  return Cache.emplace(K, std::move(T)).first->second;
}

PlanEvaluator::PlanEvaluator(const Graph &G, ArrayRef<LayerInfo> Layers,
                             const NodeCostMap &Costs, const HardwareModel &HW,
                             const EvaluatorOptions &Opts)
    : I(std::make_unique<Impl>(*this, G, Layers, Costs, HW, Opts)) {}

PlanEvaluator::~PlanEvaluator() = default;

void PlanEvaluator::setMicroBatchShapes(MicroBatchShapesFn F) {
  I->MBShapes = std::move(F);
  I->MBBytes.clear();
  I->Classified = false;
  I->FixedBytes.clear();
  I->FixedOf.clear();
  I->Configs.clear();
  I->Cache.clear();
}

const rulesplit::MicroBatchBytes *
PlanEvaluator::Impl::getMicroBatchBytes(unsigned MB) const {
  if (!MBShapes || MB == 0 || MB >= Opts.Batch)
    return nullptr;
  if (Classified) {
    if (FixedBytes.empty())
      return nullptr;
    rulesplit::MicroBatchBytes &B = FixedOf[MB];
    B = {&FixedBytes, (double)Opts.Batch / MB};
    return &B;
  }
  auto It = MBBytes.find(MB);
  if (It == MBBytes.end()) {
    std::shared_ptr<const StringMap<double>> Map = MBShapes(MB);
    rulesplit::MicroBatchBytes B{Map.get(), (double)Opts.Batch / MB};
    // The first graph built decides whether it is needed at all: every
    // value it shares with the bound graph either MB / batch of its bound
    // size or the same size.
    if (Map && MBBytes.empty()) {
      bool Classes = true;
      StringMap<double> Fixed;
      auto Check = [&](const Value *V) {
        auto W = Map->find(V->getName());
        if (!V || W == Map->end())
          return;
        double Bound = (double)V->Type.getSizeInBytes().getValueOr(0);
        if (W->second == Bound)
          Fixed[V->getName()] = Bound;
        else if (W->second * Opts.Batch != Bound * MB)
          Classes = false;
      };
      for (const Value *V : G.getInputs())
        Check(V);
      for (const auto &NP : G.getNodes())
        for (const Value *V : NP->getOutputs())
          if (V)
            Check(V);
      if (Classes) {
        Classified = true;
        FixedBytes = std::move(Fixed);
        return getMicroBatchBytes(MB);
      }
    }
    It = MBBytes.emplace(MB, std::make_pair(std::move(Map), B)).first;
  }
  return It->second.first ? &It->second.second : nullptr;
}

GroupShape PlanEvaluator::getGroupShape(
    ArrayRef<std::pair<unsigned, unsigned>> Axes) const {
  SmallVector<std::pair<unsigned, unsigned>, 3> Key;
  for (const auto &A : Axes)
    if (A.second > 1)
      Key.push_back(A);
  auto It = I->Shapes.find(Key);
  if (It != I->Shapes.end())
    return It->second;
  // The members, then per level the distinct indices they take there.
  std::vector<uint64_t> Members = {0};
  for (const auto &A : Key) {
    size_t N = Members.size();
    for (unsigned K = 1; K < A.second; ++K)
      for (size_t J = 0; J < N; ++J)
        Members.push_back(Members[J] + (uint64_t)K * A.first);
  }
  GroupShape S;
  uint64_t Inner = 1;
  std::vector<uint64_t> Idx;
  for (const TopologyLevel &L : I->HW.Topology) {
    Idx.clear();
    for (uint64_t M : Members)
      Idx.push_back((M / Inner) % std::max<uint64_t>(1, L.Size));
    std::sort(Idx.begin(), Idx.end());
    S.PerLevel.push_back(std::unique(Idx.begin(), Idx.end()) - Idx.begin());
    Inner *= std::max<uint64_t>(1, L.Size);
  }
  return I->Shapes[Key] = S;
}

GroupShape PlanEvaluator::getGroupShape(const ParallelPlan &P,
                                        StringRef Group) const {
  auto Axis = [&](MeshAxis A) {
    return std::make_pair(P.getAxisStride(A), P.getAxisSize(A));
  };
  if (Group == "tp")
    return getGroupShape({{1u, P.TP}});
  if (Group == "cp") // right outside tp (ParallelPlan.h)
    return getGroupShape({{P.TP, P.CP}});
  if (Group == "ep")
    return getGroupShape({Axis(MeshAxis::EP)});
  // Weight gradients are reduced over dp x cp: cp ranks hold the same
  // weights (Megatron-Core's data-parallel group with cp).
  if (Group == "dp")
    return getGroupShape(
        {{P.TP, P.CP}, Axis(MeshAxis::EP), Axis(MeshAxis::DP)});
  if (Group == "dp_ep")
    return getGroupShape({{P.TP, P.CP}, Axis(MeshAxis::DP)});
  assert(Group == "pp" && "unknown group");
  return getGroupShape({{P.getAxisStride(MeshAxis::PP), 2u}});
}

Expected<std::vector<unsigned>>
PlanEvaluator::getStageLayers(const ParallelPlan &P) const {
  // The one split shard, the manifest and the exports read too (interleaved
  // chunks included): a stage costs the layers of its chunks.
  Expected<std::vector<unsigned>> Chunks =
      getChunkLayers(P, getLayerEnds(I->Layers));
  if (!Chunks)
    return Chunks.takeError();
  return getStageTotals(*Chunks, P.PP);
}

PlanEvaluator::LayerTime PlanEvaluator::getLayerTime(unsigned Layer,
                                                     unsigned TP, unsigned MB,
                                                     bool SP, unsigned EP,
                                                     unsigned CP) const {
  const LayerTimes &T =
      I->layerTimes(std::min<unsigned>(Layer, I->LF.size() - 1), TP, MB, SP, EP,
                    /*AllTables=*/false, CP);
  return {T.Fwd, T.Bwd, T.AttnFwd};
}

double PlanEvaluator::getLayerForwardTime(unsigned Layer, unsigned TP,
                                          double ActScale,
                                          double AttnScale) const {
  double T = 0;
  unsigned L = std::min<unsigned>(Layer, I->LF.size() - 1);
  const ConfigSplit &CS = I->getConfig(TP, /*SP=*/false, 1);
  unsigned Rep = CS.RepOf[L];
  for (unsigned J = 0; J < I->LF[Rep].Nodes.size(); ++J) {
    const NodeFacts &F = I->LF[Rep].Nodes[J];
    double Scale = F.AttentionCore ? AttnScale : ActScale;
    if (Scale > 0)
      T += I->nodeTime(F, CS.get(L).Nodes[J], Scale, TP, /*Backward=*/false, 1);
  }
  return T;
}

PlanEvaluator::LayerSummary
PlanEvaluator::getLayerSummary(unsigned Layer) const {
  unsigned L = std::min<unsigned>(Layer, I->LF.size() - 1);
  const LayerFacts &F = I->LF[L];
  LayerSummary S;
  std::tie(S.KVBytes, S.KVElements, S.QHeads, S.KVHeads, S.Flops) =
      std::tie(F.KVBytes, F.KVElements, F.QHeads, F.KVHeads, F.Flops);
  S.OutBoundaryBytes = I->BoundaryBytes[L + 1];
  // Classified by every split some degree could take (serving's tp
  // divides them all: the search's legality).
  const LayerSplit &LS = I->getConfig(RuleContext::AnyDivides, false, 1).get(L);
  std::vector<double> &AR = I->SummaryAllReduce[L];
  AR.clear();
  for (const rulesplit::TPComm &X : LS.Fwd)
    if (X.Kind == CollectiveKind::AllReduce)
      AR.push_back(X.Bytes);
  S.FwdAllReduce = AR;
  for (unsigned J = 0; J < F.Nodes.size(); ++J) {
    const NodeFacts &N = F.Nodes[J];
    if (!N.C || N.AttentionCore || !N.C->Cost.HasRule)
      continue;
    bool Sharded = LS.Nodes[J].Sharded;
    (Sharded ? S.ParamBytesSharded : S.ParamBytesReplicated) +=
        N.C->Cost.ParamBytes;
    (Sharded ? S.FlopsSharded : S.FlopsReplicated) += N.C->Cost.Flops;
  }
  return S;
}

PlanEvaluator::TPSplit PlanEvaluator::getTPSplit(unsigned Layer, unsigned TP,
                                                 bool SP, unsigned EP) const {
  unsigned L = std::min<unsigned>(Layer, I->LF.size() - 1);
  const LayerSplit &LS = I->getConfig(TP, SP, EP).get(L);
  TPSplit R;
  for (unsigned J = 0; J < I->LF[L].Nodes.size(); ++J) {
    R.Nodes.push_back(I->LF[L].Nodes[J].N);
    R.Specs.push_back(LS.Nodes[J].S);
    R.Sharded.push_back(LS.Nodes[J].Sharded);
  }
  for (const rulesplit::TPComm &X : LS.Fwd)
    R.Collectives.push_back({X.Kind, X.Bytes, X.V, false});
  for (const rulesplit::TPComm &X : LS.Bwd)
    R.Collectives.push_back({X.Kind, X.Bytes, X.V, true});
  return R;
}

std::vector<PlanEvaluator::TPCollective>
PlanEvaluator::getPricedForwardCollectives(const ParallelPlan &P,
                                           unsigned Layer) const {
  // As costStage and layerTimes price them.
  std::vector<TPCollective> R;
  if (P.TP <= 1)
    return R;
  unsigned L = std::min<unsigned>(Layer, I->LF.size() - 1);
  bool AllTables = P.Emb != EmbeddingMode::Auto && !I->Tables.empty();
  const LayerSplit &LS =
      I->getConfig(P.TP, P.SP, P.EP, AllTables, P.MicroBatchSize).get(L);
  // layerTimes' ep: 1 where the layer has no experts (no expert comms).
  Impl::forEachRankComm(LS.Fwd, I->getActScale(P.MicroBatchSize, P.CP), P.EP,
                        [&](const rulesplit::TPComm &X, double Bytes) {
                          R.push_back({X.Kind, Bytes, X.V, false});
                        });
  return R;
}

double PlanEvaluator::getPeakFlops() const { return I->Peak; }

std::string PlanEvaluator::getCPIllegalReason(const ParallelPlan &P) const {
  if (P.CP <= 1)
    return "";
  // The attention layers' heads (the first that has them).
  int64_t QH = 0, KVH = 0;
  for (const LayerFacts &L : I->LF)
    if (L.QHeads > 0) {
      QH = L.QHeads;
      KVH = L.KVHeads;
      break;
    }
  return loom::getCPIllegalReason(P.CPA, P.CP, P.TP, I->Opts.Seq, QH, KVH);
}

ArrayRef<ExpertGroup> PlanEvaluator::getExpertGroups() const {
  return I->Experts;
}

unsigned PlanEvaluator::getNumLayers() const { return I->LF.size(); }

ArrayRef<EmbeddingTable> PlanEvaluator::getEmbeddingTables() const {
  return I->Tables;
}

bool PlanEvaluator::isEmbeddingTable(const Value *V) const {
  return I->TableIndex.count(V);
}

bool PlanEvaluator::holdsHBM(const Value *Param) const {
  return !I->SSDOnlyParams.count(Param);
}

bool PlanEvaluator::isShardedTable(const Value *V, EmbeddingMode Mode) const {
  auto It = I->TableIndex.find(V);
  return It != I->TableIndex.end() &&
         (Mode != EmbeddingMode::Auto || I->TableMustShard[It->second]);
}

Expected<PlanCost> PlanEvaluator::evaluate(const ParallelPlan &P) const {
  PlanCost R;
  if (Error E = evaluateStagesInto(P, R))
    return std::move(E);
  return simulate(std::move(R));
}

Expected<PlanCost> PlanEvaluator::evaluateStages(const ParallelPlan &P) const {
  PlanCost R;
  if (Error E = evaluateStagesInto(P, R))
    return std::move(E);
  return R;
}

Error PlanEvaluator::Impl::checkPlan(const ParallelPlan &P) const {
  if (P.EP > 1) {
    if (Experts.empty())
      return createStringError(inconvertibleErrorCode(),
                               "ep=%u: the model has no experts (no stacked "
                               "[E, d, f] expert weights and no unrolled "
                               "expert branches)",
                               P.EP);
    for (const ExpertGroup &EG : Experts)
      if (!isExpertSplitLegal(EG.NumExperts, P.EP))
        return createStringError(
            inconvertibleErrorCode(),
            "ep=%u does not divide the %u experts of layer %u", P.EP,
            EG.NumExperts, EG.Layer);
    if (P.DP % P.EP)
      return createStringError(inconvertibleErrorCode(),
                               "ep=%u does not divide dp=%u", P.EP, P.DP);
  }
  std::string Why = Outer.getCPIllegalReason(P);
  if (!Why.empty())
    return createStringError(inconvertibleErrorCode(), Why.c_str());
  if (Error E = checkOverlapHardware(P.TPOverlap && P.TP > 1, HW))
    return E;
  return checkOffloadHardware(P.Offload, HW, Opts.Train);
}

PlanCost PlanEvaluator::Impl::startPlan(const ParallelPlan &P) const {
  PlanCost R;
  R.Plan = P;
  if (P.EP > 1 &&
      any_of(Experts, [](const ExpertGroup &EG) { return EG.isStacked(); }))
    R.MoEImbalance = Opts.MoEImbalance;
  const MemoryLevel *HBM = HW.getMemory("hbm");
  R.HBMBytes = HBM ? HBM->getUsableCapacity().value() : 0;
  if (const MemoryLevel *Host = HW.getMemory("host"))
    R.HostCapacity = Host->getUsableCapacity().value();
  if (const MemoryLevel *SSD = HW.getMemory("ssd"))
    R.SSDCapacity = SSD->getUsableCapacity().value();
  return R;
}

/// The plan-wide values every stage's costing reads.
const PlanEvaluator::Impl::PlanGroups &
PlanEvaluator::Impl::getPlanGroups(const ParallelPlan &P) const {
  auto Key =
      std::make_tuple(P.TP, P.CP, P.EP, P.DP, P.PP, getAxisOrderIndex(P.Order));
  auto It = GroupsOf.find(Key);
  if (It != GroupsOf.end())
    return It->second;
  // Where each group lands follows the plan's axis order (ParallelPlan.h).
  PlanGroups Gs{Outer.getGroupShape(P, "tp"), Outer.getGroupShape(P, "dp"),
                Outer.getGroupShape(P, "ep"), Outer.getGroupShape(P, "dp_ep"),
                Outer.getGroupShape(P, "pp"), Outer.getGroupShape(P, "cp")};
  return GroupsOf.try_emplace(Key, std::move(Gs)).first->second;
}

PlanContext PlanEvaluator::Impl::makePlanContext(const ParallelPlan &P) const {
  int64_t Batch = Opts.Batch;
  const PlanGroups &Gs = getPlanGroups(P);
  PlanContext C{P,
                P.TP,
                P.EP,
                Gs.TPG,
                Gs.DPG,
                Gs.EPG,
                Gs.DPEPG,
                Gs.PPPair,
                P.getGradBytes(),
                P.SP ? (double)P.TP : 1.0,
                (double)P.MicroBatchSize / Batch / P.CP,
                P.CP,
                Gs.CPG};
  C.DPCP = P.DP * P.CP;
  if (const DeviceClass *AC = HW.getClass("aicore"))
    if (AC->Overlap) {
      C.OvTP = AC->Overlap->TP.getValueOr(0);
      C.OvDP = AC->Overlap->DP.getValueOr(0);
      C.OvPP = AC->Overlap->PP.getValueOr(0);
    }
  C.HBM = HW.getMemory("hbm");
  return C;
}

void PlanEvaluator::Impl::sumStageLayers(const PlanContext &C, StageCost &SC,
                                         StageSums &S) const {
  const ParallelPlan &P = C.P;
  unsigned TP = C.TP, EP = C.EP;
  // How the plan's tp, sp and ep split each layer (the rule table).
  bool AllTables = P.Emb != EmbeddingMode::Auto;
  const ConfigSplit &CS = getConfig(TP, P.SP, EP, AllTables, P.MicroBatchSize);
  // The last EP exchange costed: a stage's MoE layers are mostly alike,
  // and the collective model is the same function of the same bytes.
  struct {
    bool Valid = false, Stacked = false;
    double In = 0, Out = 0, Cm = 0;
  } LastEP;
  // The layer times looked up so far, by representative (layerTimes'
  // key at this plan's tp, mb, sp, ep): a stage repeats a few blocks, and
  // the map lookup per layer was a tenth of the search.
  struct Seen {
    unsigned Rep;
    bool NoEP;
    const LayerTimes *T;
  };
  SmallVector<Seen, 8> SeenTimes;
  for (unsigned L = SC.FirstLayer; L < SC.FirstLayer + SC.NumLayers; ++L) {
    const LayerFacts &F = LF[L];
    const LayerSplit &LS = CS.get(L);
    unsigned Rep = CS.RepOf[L];
    bool NoEP = F.EP.empty();
    auto SeenIt = llvm::find_if(SeenTimes, [&](const Seen &X) {
      return X.Rep == Rep && X.NoEP == NoEP;
    });
    const LayerTimes *Found = SeenIt != SeenTimes.end() ? SeenIt->T : nullptr;
    if (!Found) {
      Found = &layerTimes(L, TP, P.MicroBatchSize, P.SP, EP, AllTables, P.CP);
      if (SeenTimes.size() < 8) // layers that do not repeat: the map
        SeenTimes.push_back({Rep, NoEP, Found});
    }
    const LayerTimes &T = *Found;
    if (P.CP > 1 && F.KVBytes > 0) {
      // The sequence split's attention traffic, per rank: K/V and the
      // output at the tp and cp split (ActScale has the cp).
      CPLayerInputs CI;
      CI.KVBytes = F.KVBytes / TP * C.ActScale;
      CI.QOBytes = F.QOBytes / TP * C.ActScale;
      CI.AttnFwdS = T.CoreFwd;
      CI.AttnBwdS = T.CoreBwd;
      CI.Train = Opts.Train;
      S.CP += costContextParallelLayer(P.CPA, P.CP, CI, C.CPG, HW);
    }
    SC.ForwardS += T.Fwd;
    SC.GemmFwdS += T.GemmFwd;
    SC.GemmBwdS += T.GemmBwd;
    double Recompute = P.RC == Recompute::Full        ? T.Fwd
                       : P.RC == Recompute::Selective ? T.AttnFwd
                                                      : 0;
    SC.BackwardS += T.Bwd + (Opts.Train ? Recompute : 0);
    S.Params += LS.ParamsSplit / TP + LS.ParamsWhole;
    if (L == SC.FirstLayer)
      S.FirstLayerMaxParam = std::max(LS.MaxParamSplit / TP, LS.MaxParamWhole);
    S.ExpertParams += (LS.ExpertSplit / TP + LS.ExpertWhole) / EP;
    // EP: per micro-batch, the tokens (split over TP only with SP) go
    // out and the expert outputs come back, in forward and in backward.
    if (EP > 1)
      for (const EPTraffic &X : F.EP) {
        // The most loaded rank receives and returns MoEImbalance times
        // the mean (stacked, routed experts only).
        double Imb = X.Stacked ? Opts.MoEImbalance : 1.0;
        double In = X.TokenBytes * C.ActScale / C.SeqDiv * Imb,
               Out = X.OutputBytes * C.ActScale / C.SeqDiv * Imb;
        // A dispatcher that sends a token once per destination rank
        // (DeepEP) moves getEPRankCopies of its k expert copies there,
        // and its combine sums a rank's k outputs before sending them back.
        if (Opts.EPDispatchPerRank && X.Stacked && X.TopK > 1) {
          double F = getEPRankCopies(X.NumExperts, X.TopK, EP) / X.TopK;
          In *= F;
          Out *= F;
        }
        if (LastEP.Valid && LastEP.Stacked == X.Stacked && LastEP.In == In &&
            LastEP.Out == Out) {
          S.EPFwd += LastEP.Cm;
          if (Opts.Train)
            S.EPBwd += LastEP.Cm;
          continue;
        }
        const HardwareModel &AH = Opts.EPDispatchEfficiency > 0 ? EPHW : HW;
        double Cm =
            X.Stacked
                ? collectiveTime(CollectiveKind::AllToAll, In, C.EPG, AH)
                          .Seconds +
                      collectiveTime(CollectiveKind::AllToAll, Out, C.EPG, AH)
                          .Seconds
                // Every expert sees every token: gather the ep ranks'
                // tokens, reduce-scatter the summed output back.
                : collectiveTime(CollectiveKind::AllGather, In * EP, C.EPG, HW)
                          .Seconds +
                      collectiveTime(CollectiveKind::ReduceScatter, Out * EP,
                                     C.EPG, HW)
                          .Seconds;
        LastEP = {true, X.Stacked, In, Out, Cm};
        S.EPFwd += Cm;
        if (Opts.Train)
          S.EPBwd += Cm;
      }
    // Activations per rank: the split ones 1/tp (under sp the token dim
    // too, where the rules keep it split).
    double LayerAct;
    double Saved = LS.SavedSplit / TP + LS.SavedWhole;
    S.MaxLayerAct = std::max(S.MaxLayerAct, Saved * C.ActScale);
    if (P.RC == Recompute::Full)
      LayerAct = LS.InputSplit / TP + LS.InputWhole;
    else
      LayerAct = Saved - (P.RC == Recompute::Selective
                              ? LS.SavedAttnSplit / TP + LS.SavedAttnWhole
                              : 0.0);
    S.Act += std::max(0.0, LayerAct) * C.ActScale;
    S.KV += F.KVBytes / TP * C.ActScale;
    S.MaxLayerLive = std::max(S.MaxLayerLive,
                              (LS.LiveSplit / TP + LS.LiveWhole) * C.ActScale);
    double LayerTPFwd = T.CommFwd, LayerTPBwd = T.CommBwd;
    S.TPFwd += LayerTPFwd;
    S.TPBwd += LayerTPBwd;
    S.TPBwdBytes += T.BwdBytes;
    if (P.TPOverlap && P.SP && TP > 1) {
      // Each collective is fused with one linear layer's GEMM and hides
      // behind that GEMM only: Transformer Engine's userbuffers overlap
      // one GEMM per linear (qkv/proj/fc1/fc2 fprop, dgrad and wgrad),
      // and CANN's MC2 ops wrap one matmul each (AllGatherMatmul,
      // MatmulReduceScatter). With sp every TP collective of a layer
      // moves the same [s*b/tp, h] hidden states, one per linear in the
      // forward (all-gather into a column linear, reduce-scatter out of a
      // row linear), so the layer's collective time splits equally over
      // its linears; the backward's likewise. A linear shorter than its
      // collective leaves the rest exposed (the attention output
      // projection, an h x h/tp GEMM, against a full hidden-state
      // reduce-scatter), which the stage-wide max(C, W / (1 - s)) hid
      // behind the MLP's GEMMs. A layer with collectives but no linear
      // (a vocab-parallel embedding's all-reduce) hides nothing.
      size_t NLin = T.LinearFwd.size();
      if (NLin == 0) {
        S.TPPairedFwd += LayerTPFwd;
        S.TPPairedBwd += LayerTPBwd;
      } else {
        for (size_t I = 0; I < NLin; ++I) {
          double Bwd =
              T.LinearBwd[I] +
              (Opts.Train && P.RC == Recompute::Full ? T.LinearFwd[I] : 0.0);
          S.TPPairedFwd +=
              overlapExposed(T.LinearFwd[I], LayerTPFwd / NLin, C.OvTP, true);
          if (Opts.Train)
            S.TPPairedBwd +=
                overlapExposed(Bwd, LayerTPBwd / NLin, C.OvTP, true);
        }
      }
    }
  }
}

void PlanEvaluator::Impl::takeShardedTables(const PlanContext &C,
                                            const StageCost &SC,
                                            StageSums &S) const {
  for (unsigned T = 0; T < Tables.size(); ++T) {
    unsigned L = TableLayer[T];
    if (SSDOnlyParams.count(Tables[T].Weight) || L < SC.FirstLayer ||
        L >= SC.FirstLayer + SC.NumLayers ||
        (C.P.Emb == EmbeddingMode::Auto && !TableMustShard[T]))
      continue;
    // Its split as the rules decide it at the plan's tp (vocab-parallel).
    bool TPSplit = getConfig(C.TP, C.P.SP, C.EP, C.P.Emb != EmbeddingMode::Auto)
                       .get(L)
                       .ParamSplit[TableParamIndex[T]];
    double PerRank = Tables[T].getParams() / (TPSplit ? C.TP : 1);
    S.Params -= PerRank;
    // Its gradients are the shard's own, outside the DP sync: not the
    // tensor the last bucket holds (dpTailS).
    if (L == SC.FirstLayer && PerRank >= S.FirstLayerMaxParam)
      S.FirstLayerMaxParam = 0;
    S.Tables.push_back(Tables[T]);
  }
}

void PlanEvaluator::Impl::addZero3Gathers(const PlanContext &C,
                                          StageSums &S) const {
  const ParallelPlan &P = C.P;
  if (P.ZeroStage >= 3 && C.DPCP > 1) {
    double Gather =
        collectiveTime(CollectiveKind::AllGather,
                       S.Params * Opts.WeightBytesPerParam, C.DPG, HW)
            .Seconds;
    if (S.ExpertParams > 0 && P.DP / C.EP > 1)
      Gather +=
          collectiveTime(CollectiveKind::AllGather,
                         S.ExpertParams * Opts.WeightBytesPerParam, C.DPEPG, HW)
              .Seconds;
    S.TPFwd += Gather;
    if (Opts.Train)
      S.TPBwd += Gather;
  }
}

void PlanEvaluator::Impl::costStageComm(const PlanContext &C, unsigned Stage,
                                        StageCost &SC, StageSums &S) const {
  const ParallelPlan &P = C.P;
  SC.TPCommS = S.TPFwd + S.TPBwd;
  SC.EPCommS = S.EPFwd + S.EPBwd;
  SC.CPCommS = S.CP.FwdExposedS + S.CP.BwdExposedS;
  SC.CPCommTotalS = S.CP.FwdS + S.CP.BwdS;
  SC.ForwardCommS = S.TPFwd + S.EPFwd + S.CP.FwdExposedS;
  SC.BackwardCommS = S.TPBwd + S.EPBwd + S.CP.BwdExposedS;
  SC.ParamCount = S.Params + S.ExpertParams;
  SC.ExpertParamCount = S.ExpertParams;
  // Pipeline transfers: the boundary activations, split across TP ranks
  // (Megatron's scatter/gather optimization).
  double SendBytes =
      Stage + 1 < P.PP
          ? BoundaryBytes[SC.FirstLayer + SC.NumLayers] * C.ActScale / C.TP
          : 0;
  S.SendTime = SendBytes > 0 ? collectiveTime(CollectiveKind::SendRecv,
                                              SendBytes, C.PPPair, HW)
                                   .Seconds
                             : 0;
  // Interleaved 1F1B (vpp = V > 1): each device runs V chunks, and a
  // micro-batch leaves every chunk but the very last virtual stage, so
  // each stage sends V times per micro-batch each way (the last stage
  // V - 1 times, over the wrap to stage 0; stage 0 V - 1 gradients
  // back): "the amount of communication also increases by v"
  // (Narayanan et al. 2021, arXiv 2104.04473, sec. 2.2.2). The chunk
  // boundaries are layer boundaries like the stage's own; the last
  // stage's wrap carries what its first layer receives.
  unsigned V = std::max(1u, P.VirtualStages);
  if (V > 1 && P.PP > 1) {
    double ChunkBytes = Stage + 1 < P.PP
                            ? SendBytes
                            : BoundaryBytes[SC.FirstLayer] * C.ActScale / C.TP;
    S.ChunkSendTime = ChunkBytes > 0 ? collectiveTime(CollectiveKind::SendRecv,
                                                      ChunkBytes, C.PPPair, HW)
                                           .Seconds
                                     : 0;
  }
  SC.P2PS = std::max(S.SendTime, S.ChunkSendTime) * (Opts.Train ? 2 : 1);
}

void PlanEvaluator::Impl::applyOverlaps(const PlanContext &C, StageCost &SC,
                                        const StageSums &S,
                                        double PrevSend) const {
  const ParallelPlan &P = C.P;
  if (P.TPOverlap && C.TP > 1) {
    // The TP all-reduces (reduce-scatters and all-gathers with sp) beside
    // the sharded GEMMs; full recompute repeats the forward's GEMMs in
    // the backward, beside its all-reduces as well.
    double BwdGemm =
        SC.GemmBwdS +
        (Opts.Train && P.RC == Recompute::Full ? SC.GemmFwdS : 0.0);
    // With sp, per linear (sumStageLayers); without (Megatron's
    // --tp-comm-overlap requires sp), the stage's all-reduces against
    // all its GEMMs.
    SC.OverlapFwdS +=
        (P.SP ? S.TPPairedFwd
              : overlapExposed(SC.GemmFwdS, S.TPActFwd, C.OvTP, true)) -
        S.TPActFwd;
    if (Opts.Train)
      SC.OverlapBwdS +=
          (P.SP ? S.TPPairedBwd
                : overlapExposed(BwdGemm, S.TPActBwd, C.OvTP, true)) -
          S.TPActBwd;
    SC.TPOverlapS = SC.OverlapFwdS + SC.OverlapBwdS;
  }
  // Per micro-batch, all chunks together: the stage's own boundary send
  // (its input gradient back) plus, interleaved, V - 1 chunk sends each
  // way (sumStageLayers).
  double ChunkSends = (std::max(1u, P.VirtualStages) - 1) * S.ChunkSendTime;
  double FwdSends = S.SendTime + ChunkSends, BwdSends = PrevSend + ChunkSends;
  if (P.PPOverlap) {
    // The send runs beside the stage's next compute, holding its share
    // while it runs: s * T. The receiver waits for it (the pipeline's
    // transfer delay); as before these were choices, a send does not
    // hold the link against the next one.
    SC.SendLagS = std::max(S.SendTime, S.ChunkSendTime);
    SC.OverlapFwdS += C.OvPP * FwdSends;
    if (Opts.Train)
      SC.OverlapBwdS += C.OvPP * BwdSends;
  } else {
    // Waited for: the sender's forward ends when its activations are
    // sent, its backward when its input gradient is; the receiver has
    // them then.
    SC.OverlapFwdS += FwdSends;
    if (Opts.Train)
      SC.OverlapBwdS += BwdSends;
  }
  SC.PipeSendS = SC.SendLagS;
  SC.PipeForwardS =
      SC.ForwardS + S.TPFwd + S.EPFwd + S.CP.FwdExposedS + SC.OverlapFwdS;
  SC.PipeBackwardS =
      SC.BackwardS + S.TPBwd + S.EPBwd + S.CP.BwdExposedS + SC.OverlapBwdS;
}

StageMemoryInputs
PlanEvaluator::Impl::costStageMemory(const PlanContext &C, unsigned Stage,
                                     StageCost &SC, const StageSums &S) const {
  const ParallelPlan &P = C.P;
  StageMemoryInputs MI;
  MI.Train = Opts.Train;
  MI.ParamCount = S.Params;
  MI.ActivationBytesPerMicroBatch = Opts.Train ? S.Act : 0;
  MI.InFlightMicroBatches =
      inFlightMicroBatches(Stage, P.PP, P.NumMicroBatches, P.VirtualStages);
  // Full recompute rebuilds one layer's activations at a time during
  // backward: the largest layer's, alive once.
  MI.ActivationWorkspaceBytes =
      Opts.Train && P.RC == Recompute::Full ? S.MaxLayerAct : 0;
  // Inference keeps nothing between layers but the KV cache: what is
  // alive at once in the stage's largest layer, for the one micro-batch
  // the stage runs at a time.
  if (!Opts.Train)
    MI.ActivationWorkspaceBytes = S.MaxLayerLive;
  MI.DP = C.DPCP; // ZeRO partitions over dp x cp (Megatron-Core)
  MI.ZeroStage = P.ZeroStage;
  MI.WeightBytesPerParam = Opts.WeightBytesPerParam;
  MI.GradBytesPerParam = C.GradWidth;
  MI.OptimizerBytesPerParam = Opts.OptimizerBytesPerParam;
  bool AnyComm = C.TP > 1 || C.DPCP > 1 || P.PP > 1;
  MI.CommBufferBytes = AnyComm ? Opts.CommBufferBytes : 0;
  // Reserved HBM is already outside HBMBytes (capacity - reserved), the
  // budget the stage is compared with: not counted again here.
  MI.ReservedBytes = 0;
  if (!Opts.Train)
    MI.KVCacheBytes = S.KV * P.NumMicroBatches;
  SC.Memory = estimateStageMemory(MI);
  if (S.ExpertParams > 0) {
    // Expert weights, gradients and optimizer states: 1/ep of the
    // experts, ZeRO-partitioned over the dp/ep ranks holding the same.
    StageMemoryInputs XI;
    XI.Train = Opts.Train;
    XI.ParamCount = S.ExpertParams;
    XI.DP = P.DP / C.EP * C.CP;
    XI.ZeroStage = P.ZeroStage;
    XI.WeightBytesPerParam = Opts.WeightBytesPerParam;
    XI.GradBytesPerParam = C.GradWidth;
    XI.OptimizerBytesPerParam = Opts.OptimizerBytesPerParam;
    XI.InFlightMicroBatches = 0;
    MemoryBreakdown XM = estimateStageMemory(XI);
    SC.Memory.Weights += XM.Weights;
    SC.Memory.Gradients += XM.Gradients;
    SC.Memory.OptimizerStates += XM.OptimizerStates;
  }
  SC.MemoryBytes = SC.Memory.total();
  return MI;
}

void PlanEvaluator::Impl::costDPSync(const PlanContext &C, StageCost &SC,
                                     const StageSums &S) const {
  const ParallelPlan &P = C.P;
  if (!Opts.Train || C.DPCP <= 1)
    return;
  double GradBytes = S.Params * C.GradWidth;
  CollectiveKind K = P.ZeroStage >= 1 ? CollectiveKind::ReduceScatter
                                      : CollectiveKind::AllReduce;
  // The last micro-batch's backward TP traffic runs alongside.
  auto Shares = shareBandwidth({K, CollectiveKind::AllReduce}, {C.DPG, C.TPG},
                               {GradBytes, C.TP > 1 ? S.TPBwdBytes : 0.0}, HW);
  SC.DPSyncS = collectiveTime(K, GradBytes, C.DPG, HW, Shares[0]).Seconds;
  if (P.ZeroStage >= 1) // Updated (bf16) parameters gathered back.
    SC.DPSyncS += collectiveTime(CollectiveKind::AllGather,
                                 S.Params * Opts.WeightBytesPerParam, C.DPG, HW)
                      .Seconds;
  // Expert gradients over dp_ep (the ranks holding the same experts),
  // after the rest.
  double ExpertGrad = S.ExpertParams * C.GradWidth;
  if (ExpertGrad > 0 && P.DP / C.EP * C.CP > 1) {
    SC.DPSyncS += collectiveTime(K, ExpertGrad, C.DPEPG, HW).Seconds;
    if (P.ZeroStage >= 1)
      SC.DPSyncS +=
          collectiveTime(CollectiveKind::AllGather,
                         S.ExpertParams * Opts.WeightBytesPerParam, C.DPEPG, HW)
              .Seconds;
  }
  // dp_overlap: beside the last micro-batch's backward, whose compute
  // the reduction's kernels share (loom/Cost/Overlap.h); off: after
  // it, exposed whole.
  SC.DPExposedS = overlapExposed(SC.BackwardS, SC.DPSyncS, C.OvDP, P.DPOverlap,
                                 OverlapHold::WhileRunning);
  if (P.DPOverlap)
    SC.DPExposedS =
        std::max(SC.DPExposedS, std::min(SC.DPSyncS, dpTailS(C, S, K)));
}

double PlanEvaluator::Impl::dpTailS(const PlanContext &C, const StageSums &S,
                                    CollectiveKind K) const {
  // What dp overlap cannot hide. Megatron-Core's DDP fills gradient
  // buckets in reverse parameter order and closes one once it holds
  // bucket_size = max(40M, 1M x dp) parameters (its default with
  // --overlap-grad-reduce, distributed_data_parallel.py), so the last
  // bucket holds the stage's first-read parameters, at least the first
  // layer's largest tensor (an embedding table, whole); their gradients
  // are ready when the backward ends, and the bucket's reduction runs
  // after it. With ZeRO (--overlap-param-gather) the same bucket's
  // parameter all-gather is the first the next forward waits for.
  const ParallelPlan &P = C.P;
  double Bucket = Opts.DDPBucketParams > 0 ? Opts.DDPBucketParams
                                           : std::max(40e6, 1e6 * C.DPCP);
  double Tail = std::min(S.Params, std::max(Bucket, S.FirstLayerMaxParam));
  double T = collectiveTime(K, Tail * C.GradWidth, C.DPG, HW).Seconds;
  if (P.ZeroStage >= 1)
    T += collectiveTime(CollectiveKind::AllGather,
                        Tail * Opts.WeightBytesPerParam, C.DPG, HW)
             .Seconds;
  return T;
}

void PlanEvaluator::Impl::costOptimizer(const PlanContext &C, StageCost &SC,
                                        const StageSums &S) const {
  const ParallelPlan &P = C.P;
  if (!Opts.Train || !C.HBM)
    return;
  // AdamW touches ~28 bytes per local parameter (fp32 master, m, v
  // read and written, the gradient in, bf16 weight out). The same for
  // either gradient precision: a bf16-reduced gradient is widened into
  // the fp32 update anyway, and the 2 bytes it saves are noise next to
  // the 24 of the states; plans that differ only in gradient precision
  // tie when the DP sync is hidden, and the tie goes to fp32.
  double Local = P.ZeroStage >= 1
                     ? S.Params / C.DPCP + S.ExpertParams / (P.DP / C.EP * C.CP)
                     : S.Params + S.ExpertParams;
  SC.OptimizerS = Local * 28 / C.HBM->Bandwidth.value();
}

void PlanEvaluator::Impl::costOffload(const PlanContext &C, StageCost &SC,
                                      const StageSums &S,
                                      const StageMemoryInputs &MI) const {
  // cost_models/memory/Offload.cpp
  const ParallelPlan &P = C.P;
  OffloadInputs &OI = SC.OffloadIn;
  OI.Train = Opts.Train;
  OI.ActivationBytesPerMicroBatch = MI.ActivationBytesPerMicroBatch;
  OI.InFlightMicroBatches = MI.InFlightMicroBatches;
  OI.ActivationWorkspaceBytes = MI.ActivationWorkspaceBytes;
  OI.UpdatedParams =
      P.ZeroStage >= 1
          ? S.Params / C.DPCP + S.ExpertParams / (P.DP / C.EP * C.CP)
          : S.Params + S.ExpertParams;
  OI.WeightBytesPerParam = MI.WeightBytesPerParam;
  OI.GradBytesPerParam = MI.GradBytesPerParam;
  OI.NumLayers = SC.NumLayers;
  OI.NumMicroBatches = P.NumMicroBatches;
  OI.ComputePerMicroBatchS = SC.ForwardS + SC.BackwardS;
  if (P.Offload.any())
    applyOffload(SC, OI, P.Offload, HW);
}

void PlanEvaluator::Impl::costStageEmbeddings(const PlanContext &C,
                                              StageCost &SC, StageSums &S,
                                              PlanCost &R) const {
  // lib/Plan/Embedding.cpp
  if (S.Tables.empty())
    return;
  const ParallelPlan &P = C.P;
  EmbeddingInputs EI;
  EI.Train = Opts.Train;
  EI.Mode = P.Emb;
  EI.Group = P.DP;
  EI.Shape = C.DPG;
  EI.MicroBatch = P.MicroBatchSize;
  EI.HBMFree = R.HBMBytes - SC.MemoryBytes;
  EI.HostFree = R.HostCapacity - SC.Offload.HostBytes;
  EI.SSDFree = R.SSDCapacity - SC.Offload.SSDBytes;
  EmbeddingCost E = planEmbeddings(S.Tables, EI, HW);
  SC.Memory.Embeddings = E.HBMBytes;
  SC.MemoryBytes = SC.Memory.total();
  SC.EmbHostBytes = E.HostBytes;
  SC.EmbSSDBytes = E.SSDBytes;
  SC.PipeForwardS += E.ForwardS;
  // The stage's work as schedule.json and the reports see it: lookups
  // with the compute, the exchange with the exposed communication.
  SC.ForwardS += E.LookupS;
  SC.ForwardCommS += E.ExchangeFwdS;
  if (Opts.Train) {
    SC.PipeBackwardS += E.BackwardS;
    SC.BackwardS += E.UpdateS;
    SC.BackwardCommS += E.ExchangeBwdS;
  }
  mergeEmbeddingCost(R.Embeddings, std::move(E));
}

StageCost PlanEvaluator::Impl::costStage(const PlanContext &C, unsigned Stage,
                                         unsigned First, unsigned NumLayers,
                                         double &PrevSend, PlanCost &R) const {
  StageCost SC;
  SC.FirstLayer = First;
  SC.NumLayers = NumLayers;
  StageSums S;
  sumStageLayers(C, SC, S);
  // Tables the plan shards (Embedding.h) leave the replicated parameters:
  // their shards are placed below, over the dp group.
  takeShardedTables(C, SC, S);
  S.TPActFwd = S.TPFwd;
  S.TPActBwd = S.TPBwd;
  addZero3Gathers(C, S);
  costStageComm(C, Stage, SC, S);
  // The plan's overlaps (loom/Cost/Overlap.h): what each adds to the
  // stage's forward and backward per micro-batch.
  applyOverlaps(C, SC, S, PrevSend);
  PrevSend = S.SendTime;
  StageMemoryInputs MI = costStageMemory(C, Stage, SC, S);
  costDPSync(C, SC, S);
  costOptimizer(C, SC, S);
  costOffload(C, SC, S, MI);
  costStageEmbeddings(C, SC, S, R);
  return SC;
}

Error PlanEvaluator::evaluateStagesInto(const ParallelPlan &P,
                                        PlanCost &R) const {
  const Impl &Im = *I;
  Expected<std::vector<unsigned>> SL = getStageLayers(P);
  if (!SL)
    return SL.takeError();
  if (Error E = Im.checkPlan(P))
    return E;
  std::vector<StageCost> Stages = std::move(R.Stages);
  R = Im.startPlan(P);
  Stages.clear();
  R.Stages = std::move(Stages);
  PlanContext C = Im.makePlanContext(P);
  double PrevSend = 0;
  unsigned First = 0;
  R.Stages.reserve(P.PP);
  for (unsigned S = 0; S < P.PP; ++S) {
    R.Stages.push_back(Im.costStage(C, S, First, (*SL)[S], PrevSend, R));
    First += (*SL)[S];
  }
  // The simulation moves time, not memory: the stages' figures decide.
  setMemoryMaxima(R);
  R.ModelFlops = Im.ModelFlops;
  return Error::success();
}

const PipelineResult &
PlanEvaluator::Impl::simulate(const PipelineTimes &PT) const {
  auto K = std::make_tuple(PT.Forward, PT.Backward, PT.Transfer,
                           PT.NumMicroBatches, PT.VirtualStages, PT.ForwardOnly,
                           PT.MaxSimulatedMicroBatches);
  auto It = Simulations.find(K);
  if (It == Simulations.end())
    It = Simulations.emplace(std::move(K), simulatePipeline(PT)).first;
  return It->second;
}

Expected<PlanCost> PlanEvaluator::simulate(PlanCost R) const {
  const Impl &Im = *I;
  const ParallelPlan &P = R.Plan;
  // The simulation moves time, not memory: the stages' figures decide.
  setMemoryMaxima(R);
  PipelineTimes PT;
  PT.NumMicroBatches = P.NumMicroBatches;
  PT.VirtualStages = P.VirtualStages;
  PT.ForwardOnly = !Im.Opts.Train;
  // Enough for the warm-up of any pipeline Loom plans (P * V well below
  // this); a bigger global batch adds whole groups at the steady-state rate.
  PT.MaxSimulatedMicroBatches = 1024;
  for (unsigned S = 0; S < R.Stages.size(); ++S) {
    const StageCost &SC = R.Stages[S];
    // The last stage's is the wrap to stage 0 (interleaved only).
    if (S + 1 < R.Stages.size() || P.VirtualStages > 1)
      PT.Transfer.push_back(SC.PipeSendS);
    PT.Forward.push_back(SC.PipeForwardS);
    PT.Backward.push_back(SC.PipeBackwardS);
    if (P.Offload.any())
      PT.Backward.back() += SC.Offload.ExposedPerMicroBatchS;
  }
  const PipelineResult &PR = Im.simulate(PT);
  // Each stage's DP gradient sync and optimizer follow its own last
  // backward, not the pipeline's: a later stage, done earlier, updates
  // while the first still runs its backwards (Schedule.cpp places them so).
  R.StepTimeS = PR.StepTime;
  for (unsigned S = 0; S < R.Stages.size(); ++S) {
    StageCost &SC = R.Stages[S];
    SC.PipelineEndS = S < PR.Finish.size() ? PR.Finish[S] : PR.StepTime;
    R.StepTimeS =
        std::max(R.StepTimeS, SC.PipelineEndS + SC.DPExposedS + SC.OptimizerS);
  }
  R.BubbleFraction = PR.BubbleFraction;
  unsigned M = P.NumMicroBatches;
  for (unsigned S = 0; S < R.Stages.size(); ++S) {
    StageCost &SC = R.Stages[S];
    SC.ComputeS = M * (SC.ForwardS + SC.BackwardS);
    // Overlaps change what of the communication shows (OverlapFwdS/BwdS
    // hold the sends when they are waited for).
    SC.CommExposedS = M * (SC.TPCommS + SC.EPCommS + SC.CPCommS +
                           (P.PPOverlap ? SC.P2PS : 0.0) + SC.OverlapFwdS +
                           SC.OverlapBwdS + SC.Offload.ExposedPerMicroBatchS) +
                      SC.DPExposedS;
    if (SC.Memory.Embeddings + SC.EmbHostBytes + SC.EmbSSDBytes > 0)
      SC.CommExposedS += M * R.Embeddings.ExchangeS;
    SC.BubbleS = S < PR.Idle.size() ? PR.Idle[S] : 0;
  }
  R.ModelFlops = Im.ModelFlops;
  R.PerToken = Im.Opts.Seq > 0;
  if (R.StepTimeS > 0) {
    R.Throughput =
        (double)Im.Opts.Batch * (R.PerToken ? Im.Opts.Seq : 1) / R.StepTimeS;
    double Devices = P.getNumDevices();
    if (Im.Peak > 0)
      R.MFU = Im.ModelFlops / (R.StepTimeS * Devices * Im.Peak);
  }
  // No device runs faster than its peak: an MFU above 1 means the cost
  // model lost time somewhere (a node costed below the roofline, work
  // counted in ModelFlops but not in the step). Never print such a plan.
  assert(R.MFU <= 1 + 1e-9 && "MFU above 1: the step time misses work");
  if (R.MFU > 1 + 1e-9)
    return createStringError(inconvertibleErrorCode(),
                             "internal error: plan %s has MFU %.3f > 1 (the "
                             "predicted step time misses work)",
                             P.str().c_str(), R.MFU);
  return R;
}

} // namespace loom
