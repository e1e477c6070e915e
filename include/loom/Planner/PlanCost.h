//===- PlanCost.h - Predicted cost of a plan, stage by stage ----*- C++ -*-===//
//
// Composes the cost models into the prediction of DESIGN §6: per pipeline
// stage the compute and exposed communication of its micro-batches, the
// pipeline bubble, and memory against HBM; the step time, throughput
// (tokens/s or samples/s) and MFU.
// Like XLA auto-sharding's evaluate(), it is plain data in, plain data out,
// so tests check costs without running the search.
//
// Tensor parallelism follows Megatron-LM (Shoeybi et al. 2019): a weight
// matmul whose activation input is replicated is split by columns (its
// output is split across TP ranks), one whose input is split is split by
// rows (its output is a partial sum, all-reduced); element-wise work on
// split values is split too; a Gather on a weight table is vocab-parallel
// (partial, all-reduced). The analysis runs once per graph; evaluate() is
// cheap per plan, as the search needs.
//
// Expert parallelism (ParallelPlan.h has the semantics and the rank order):
// expert parameters are divided by ep (and by tp where Megatron splits
// them); per MoE layer and micro-batch, stacked experts pay an AllToAll
// dispatch of the dispatched tokens and an AllToAll combine of the expert
// outputs over the ep group, unrolled dense experts (every expert sees
// every token) an AllGather of the tokens and a ReduceScatter of the
// experts' summed output, in forward and again in backward. Each device
// runs 1/ep of the experts on ep times the tokens: the expert FLOPs per
// device do not change, the weight reads shrink by ep and the matmuls get
// ep times more rows (better cube efficiency). Expert gradients sync over
// dp/ep (dp_ep), the rest over dp; ZeRO partitions each over its group.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_PLANCOST_H
#define LOOM_PLAN_PLANCOST_H

#include "loom/Analysis/Experts.h"
#include "loom/Cost/Collectives.h"
#include "loom/Cost/DeviceTime.h"
#include "loom/Cost/Memory.h"
#include "loom/Cost/Offload.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/IR/Graph.h"
#include "loom/Plan/ParallelPlan.h"
#include "loom/Plan/Precision.h"
#include "loom/Plan/PredictedCost.h"
#include "loom/Planner/Embedding.h"
#include "loom/Shard/Rules.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include <functional>
#include <map>
#include <memory>

namespace loom {

/// The cost of one node at the model's full (global-batch) shapes.
struct NodeCostInfo {
  OpCost Cost;
  /// Time on every class of the hardware, by class name.
  std::map<std::string, ClassTime> Times;
  /// The class the node runs on, which predictions cost: the one
  /// assign-device-classes placed it on; before that pass, the fastest
  /// supported one.
  std::string Class;
  /// Moving the node's inputs to Class from the classes of their producers
  /// (the placement's edge model), at the full batch: seconds that scale
  /// with the bytes, and fixed latencies. Backward moves the gradients of
  /// floating-point inputs back the same way. Zero until placement runs.
  double TransferS = 0, TransferLatencyS = 0;
  double BackwardTransferS = 0, BackwardTransferLatencyS = 0;
};
using NodeCostMap = llvm::DenseMap<const Node *, NodeCostInfo>;

struct EvaluatorOptions {
  bool Train = true;
  /// Global batch the graph was bound with, and its sequence length: 0
  /// when no sequence dim was bound (throughput in samples/s, not
  /// tokens/s).
  int64_t Batch = 1, Seq = 0;
  /// Graph input -> the dim the batch symbol bound (the model as
  /// imported). Under sp, the token dim is chosen at one micro-batch's
  /// dims (RuleContext::getTokenShape), as the sharder's graphs, bound at
  /// the micro-batch, have them. Empty: the bound graph's dims.
  std::map<std::string, int> InputBatchDims;
  /// HCCL buffer per device (DESIGN §10: 128-256 MB is the sweet spot).
  double CommBufferBytes = 256.0 * (1 << 20);
  /// Load of the most loaded EP rank over the mean for routed tokens
  /// (stacked experts at ep > 1): its expert compute and all-to-all take
  /// that much longer, and every rank waits for it. 1: balanced.
  double MoEImbalance = 1.0;
  /// The DP gradient bucket in parameters; 0: Megatron-Core's default
  /// with --overlap-grad-reduce, max(40M, 1M x dp) (DDP's bucket_size).
  /// With dp overlap the last bucket's reduction is exposed.
  double DDPBucketParams = 0;
  /// The MoE dispatch sends a routed token once per destination ep rank
  /// (DeepEP), not once per chosen expert: the stacked experts' all-to-all
  /// carries getEPRankCopies of the k copies (the combine likewise).
  bool EPDispatchPerRank = false;
  /// The MoE all-to-all's share of each link's bandwidth (the
  /// dispatcher's measured figure, replacing the topology level's
  /// efficiency for it); 0: the level's.
  double EPDispatchEfficiency = 0;
  /// The model's default-domain opset (the sharding rules of Softmax and
  /// Slice depend on it); 0: the latest.
  int64_t Opset = 0;
  /// Optimizer-state bytes per parameter (fp32 master weights and Adam's
  /// two moments: 12); the framework profile's when one is given.
  double OptimizerBytesPerParam = 12;
  /// Bytes per parameter of the weights the kernels read (the precision
  /// recipe's: 2 for bf16/fp16, 4 for fp32; loom/Plan/Precision.h): HBM
  /// they take and the ZeRO parameter all-gather's payload.
  double WeightBytesPerParam = 2;
  /// Whether the recipe lets gradients be reduced in 16 bits (grad=bf16
  /// searched): the 16-bit recipes.
  bool Allows16BitGrads = true;
};

/// Computes NodeCostInfo for every node of \p G (subgraphs are folded into
/// their parent node by the op rules).
/// \p Recipe (null: none): the precision recipe, which retypes matrix ops
/// computing in its storage type (PrecisionRecipe::applyToCube: tf32's
/// format, fp8's format and bytes).
NodeCostMap annotateNodeCosts(const Graph &G, int64_t Opset,
                              const HardwareModel &HW,
                              const PrecisionRecipe *Recipe = nullptr);

class PlanEvaluator {
public:
  PlanEvaluator(const Graph &G, llvm::ArrayRef<LayerInfo> Layers,
                const NodeCostMap &Costs, const HardwareModel &HW,
                const EvaluatorOptions &Opts);
  ~PlanEvaluator();

  /// Layers per stage for \p P: P.StageLayers if given, else blocks split
  /// evenly with the prologue on the first and the epilogue on the last
  /// stage. Errors if there are fewer layers than stages.
  llvm::Expected<std::vector<unsigned>>
  getStageLayers(const ParallelPlan &P) const;

  llvm::Expected<PlanCost> evaluate(const ParallelPlan &P) const;

  /// Activations per micro-batch (issue 31 item 3): \p F gives the byte
  /// sizes of the activations of the graph bound at a micro-batch size, by
  /// value name (null when it cannot be built). The evaluator asks it for
  /// the plans' micro-batch sizes until one graph shows every activation
  /// it sizes scaling with the batch (then the bound graph's, scaled, are
  /// exact); a capacity dispatch whose one-hot grows as the square of the
  /// tokens never does. Without it, activations are the bound graph's
  /// scaled by micro-batch / batch.
  using MicroBatchShapesFn =
      std::function<std::shared_ptr<const llvm::StringMap<double>>(unsigned)>;
  void setMicroBatchShapes(MicroBatchShapesFn F);

  /// evaluate() without simulating the pipeline: stages (per-micro-batch
  /// times, DP sync, optimizer), memory and FitsMemory are filled; the step
  /// time, bubble, tokens/s and MFU are 0. The search checks memory and
  /// bounds the step time with it before paying for the simulation.
  llvm::Expected<PlanCost> evaluateStages(const ParallelPlan &P) const;
  /// evaluateStages into \p Out, whose storage (the stages) it reuses: the
  /// search's cache of costed plans recycles its entries, so a plan costs
  /// no allocation once the cache is full.
  llvm::Error evaluateStagesInto(const ParallelPlan &P, PlanCost &Out) const;
  /// Completes \p Staged, a result of evaluateStages (possibly re-placed by
  /// applyOffloadToPlan): simulates the pipeline and fills the step time,
  /// bubble, throughput and MFU. Equal to evaluate(Staged.Plan), without
  /// costing the stages again (the search simulates what it has costed).
  /// The pipeline simulation is kept per its inputs (stage times, sends,
  /// micro-batches, virtual stages): plans that differ only after the last
  /// backward (DP sync, optimizer, gradient precision) reuse it.
  llvm::Expected<PlanCost> simulate(PlanCost Staged) const;

  /// Compute time of layer \p Layer for one micro-batch of \p MB samples
  /// on one device at \p TP (and SP): forward, backward without
  /// recomputation, and the attention core's forward (what selective
  /// recompute repeats). Cached, like evaluate()'s. At ep > 1, EPCommS:
  /// at least the layer's forward ep communication (and as much again in
  /// backward), priced with the ep group right outside tp, the nearest any
  /// mesh order places it (the search's step bound).
  struct LayerTime {
    double ForwardS = 0, BackwardS = 0, AttentionForwardS = 0;
    double EPCommS = 0;
  };
  LayerTime getLayerTime(unsigned Layer, unsigned TP, unsigned MB, bool SP,
                         unsigned EP = 1, unsigned CP = 1) const;
  /// Why \p P's cp and cp_algo cannot split this model (ContextParallel.h:
  /// the sequence, the heads); empty when they can.
  std::string getCPIllegalReason(const ParallelPlan &P) const;
  /// The query and K/V heads of the first attention layer ({0, 0}: none).
  std::pair<int64_t, int64_t> getAttentionHeads() const;
  /// Serving (Serving.h): layer \p Layer's forward time on one device at
  /// \p TP, the nodes outside the attention core at \p ActScale of the
  /// bound graph's activations and the attention core (activation x
  /// activation matmuls, their softmax) at \p AttnScale (0 leaves it out).
  /// Uncached: the caller keys repeated blocks.
  double getLayerForwardTime(unsigned Layer, unsigned TP, double ActScale,
                             double AttnScale) const;
  /// What serving reads of the per-layer analysis, at the bound graph's
  /// full shapes: the KV cache (K and V before any GQA repeat), the forward
  /// FLOPs, the row-parallel all-reduces of the forward, and the
  /// activations leaving the layer for the next (a pipeline transfer).
  struct LayerSummary {
    double KVBytes = 0, KVElements = 0, Flops = 0, OutBoundaryBytes = 0;
    /// Outside the attention core: weight bytes the nodes read and their
    /// FLOPs, divided by tp (Sharded) or not (Replicated).
    double ParamBytesSharded = 0, ParamBytesReplicated = 0;
    double FlopsSharded = 0, FlopsReplicated = 0;
    llvm::ArrayRef<double> FwdAllReduce;
    /// Heads of Q and of K/V in the attention core (0: not found): a
    /// decode kernel that reads the cache once per query head reads it
    /// QHeads / KVHeads times (grouped-query attention).
    int64_t QHeads = 0, KVHeads = 0;
  };
  LayerSummary getLayerSummary(unsigned Layer) const;
  /// How the rule table (loom/Shard/Rules.h) splits layer \p Layer at
  /// \p TP, \p SP and \p EP, as every cost above sees it: per node of the
  /// layer, in graph order, the specs it needs and produces (its per-rank
  /// shapes are getLocalShape of them) and whether its work is divided
  /// over tp; the tp collectives of the layer's forward and backward, at
  /// the graph's full batch.
  struct LayerCollective {
    CollectiveKind Kind = CollectiveKind::AllReduce;
    double Bytes = 0;
    const Value *V = nullptr;
    bool Backward = false;
    /// Its group: "tp", "ep" or "cp" (Ulysses' all-to-alls, the ring's
    /// sends).
    llvm::StringRef Group = "tp";
    /// A conversion of a value other layers read too (the layer's own
    /// operand, which V names in the layers' representative): a pipeline
    /// device makes it once.
    const Value *Shared = nullptr;
  };
  struct TPSplit {
    std::vector<const Node *> Nodes;
    std::vector<OpSharding> Specs;
    std::vector<bool> Sharded;
    std::vector<LayerCollective> Collectives;
  };
  TPSplit getTPSplit(unsigned Layer, unsigned TP, bool SP,
                     unsigned EP = 1) const;
  /// The collectives the stage costing prices for one micro-batch's
  /// forward through layer \p Layer of \p P: the rule table's over tp at
  /// the plan's tp, sp, ep, table sharding and micro-batch, then the ep
  /// crossings' over ep (ep rank 0's), each with the bytes collectiveTime
  /// is given (on the wire, in the recipe's communication type). The role
  /// graphs must hold exactly these (--check-priced-collectives,
  /// loom/Shard/PricedCollectives.h).
  std::vector<LayerCollective>
  getPricedForwardCollectives(const ParallelPlan &P, unsigned Layer) const;
  /// The cube peak MFU is measured against (FLOP/s).
  double getPeakFlops() const;
  /// The model's expert groups (findExperts).
  llvm::ArrayRef<ExpertGroup> getExpertGroups() const;
  /// Layers as evaluate() numbers them (at least 1).
  unsigned getNumLayers() const;
  /// The embedding tables of the graph (findEmbeddingTables); every one is
  /// left out of the replicated parameters and added back per plan unless
  /// the plan shards it.
  llvm::ArrayRef<EmbeddingTable> getEmbeddingTables() const;
  bool isEmbeddingTable(const Value *V) const;
  /// Whether parameter \p Param holds HBM on every device of its stage:
  /// false for one only the placement's SSD class reads (a table served
  /// from SSD, DESIGN section 5). The evaluator's stage memory and the
  /// search's memory bound both ask this.
  bool holdsHBM(const Value *Param) const;
  /// Whether a plan with \p Mode shards table \p V (isShardedTable).
  bool isShardedTable(const Value *V, EmbeddingMode Mode) const;

  /// Mesh axis -> topology: how group \p Group of \p P's mesh spreads over
  /// the topology levels. Groups as getGroupRanks names them: "tp", "ep",
  /// "dp" (axes ep and dp), "dp_ep" (axis dp), and "pp" for two
  /// neighbouring stages (a pipeline transfer). TP is innermost; the rest
  /// follow P.Order (ParallelPlan.h gives the rank order).
  GroupShape getGroupShape(const ParallelPlan &P, llvm::StringRef Group) const;
  /// The group of ranks sum_i k_i * Stride_i (k_i < Size_i) for \p Axes =
  /// {(Stride_i, Size_i)}: per topology level, how many distinct indices
  /// its members take there.
  GroupShape
  getGroupShape(llvm::ArrayRef<std::pair<unsigned, unsigned>> Axes) const;

private:
  struct Impl;
  std::unique_ptr<Impl> I;
};

} // namespace loom

#endif // LOOM_PLAN_PLANCOST_H
