//===- Search.h - The parallelism search of DESIGN §6 -----------*- C++ -*-===//
//
// Finds the plan with the least predicted step time (PlanEvaluator) over
// dp, tp, pp, ep, sp, micro-batch size and count, virtual stages,
// recompute, ZeRO stage, DP gradient precision, the order of the mesh axes
// over the topology, and stage boundaries, subject to DESIGN §6's
// constraints.
// Exact enumeration with bounds: candidates are ordered by a cheap lower
// bound on their step time and evaluated in that order until the bound
// exceeds the incumbents; per-device memory is bounded (parameters alone)
// before anything is evaluated, then checked exactly without simulating the
// pipeline, and only the survivors are simulated. Pruning never changes the
// answer (tests compare with brute force and with Z3).
//
// Expert parallelism (ep > 1) is searched where the model has experts
// (findExperts): ep over the divisors of dp that divide every MoE layer's
// expert count.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_SEARCH_H
#define LOOM_PLAN_SEARCH_H

#include "loom/Analysis/Experts.h"
#include "loom/Plan/Framework.h"
#include "loom/Planner/PlanCost.h"
#include "loom/Planner/Uncosted.h"
#include "loom/Shard/Rules.h"
#include "llvm/ADT/Optional.h"
#include "llvm/Support/Error.h"
#include <map>
#include <string>
#include <vector>

namespace loom {

//===-- What the graph says about TP and EP -------------------------------===//

/// What tp can split: the dims the sharding rules split (collectSplitDims,
/// include/loom/Shard/Rules.h: the rules that cut the graphs, applied at a
/// degree that divides everything): the columns of column-parallel and the
/// rows of row-parallel weight matmuls and convolutions, the vocabulary of
/// a vocab-parallel embedding, the dims a split lands on after a reshape
/// (the attention heads, and the KV heads of grouped-query attention), and
/// every dim a split is carried through. A degree dividing all of them
/// (Divisor, their gcd) splits every layer; one dividing only some leaves
/// the ops it cannot split replicated on every tp rank (the rules' own
/// fallback: full compute and memory there, transitions around them, all
/// priced by the evaluator from the same rules), named in Replicated; one
/// dividing none splits nothing and is not a tp degree (allows()).
struct TPDivisibility {
  /// 0 when the graph splits nothing (no bound).
  uint64_t Divisor = 0;
  /// The sizes that set it, e.g. "8 = dim 1 of
  /// '/layers.0/self_attn/Reshape_1' (heads)".
  std::string Why;
  /// Distinct split dims found.
  unsigned NumSplitDims = 0;
  /// The distinct sizes split, increasing.
  std::vector<uint64_t> Sizes;
  /// Per degree the space holds (a divisor of the devices or of the tp
  /// limit) that does not divide Divisor: the weights the rules leave
  /// whole there (collectUnsplitWeights).
  std::map<uint64_t, std::vector<UnsplitWeight>> Replicated;
  /// tp may be \p TP: 1, no split dims, or a degree dividing one of them.
  bool allows(uint64_t TP) const;
};
/// \p Opset: the model's default-domain opset (0: the latest rules);
/// \p Degrees: the tp degrees to name replicated weights for.
TPDivisibility computeTPDivisibility(const Graph &G, int64_t Opset = 0,
                                     llvm::ArrayRef<uint64_t> Degrees = {});
/// "'head.weight' (dim 0 of 10, read by 'head'), ..." (at most \p Max,
/// then "and N more").
std::string describeUnsplitWeights(llvm::ArrayRef<UnsplitWeight> W,
                                   unsigned Max = 4);

/// What the search needs of the model's experts (findExperts, Experts.h).
struct ExpertInfo {
  /// The gcd of the MoE layers' expert counts (ep must divide it); 0 when
  /// the model has no experts.
  unsigned NumExperts = 0;
  /// MoE layers, and how many of them have stacked expert weights.
  unsigned NumGroups = 0, NumStacked = 0;
  /// A parameter of the first group, for messages.
  std::string Parameter;
  /// How the layers are written (getExpertPattern's names): "stacked,
  /// Einsum dispatch", or "unrolled (1), unrolled, dense-gated (2)" when
  /// they differ, each with its layer count, in layer order.
  std::string Patterns;
  /// MoE routing Loom recognises but does not split by ep (planned at
  /// ep=1), described for the report; empty when there is none.
  std::string NotSplit;
};
ExpertInfo summarizeExperts(llvm::ArrayRef<ExpertGroup> Groups);

//===-- Stage boundaries --------------------------------------------------===//

/// The contiguous partition of layers with costs \p LayerCost into
/// \p NumStages non-empty stages minimizing the most expensive stage, where
/// stage 0 costs \p FirstExtra and the last stage \p LastExtra more (work
/// outside the numbered layers). Among optimal partitions the
/// lexicographically smallest list of counts (fewest layers early, where
/// 1F1B keeps the most micro-batches in flight). Exact dynamic program,
/// O(P L log L): the best split point of a suffix is where a non-decreasing
/// and a non-increasing function cross, found by bisection. Costs must be
/// non-negative; requires 1 <= NumStages <= LayerCost.size().
std::vector<unsigned> partitionStages(llvm::ArrayRef<double> LayerCost,
                                      unsigned NumStages, double FirstExtra = 0,
                                      double LastExtra = 0);
/// What the balanced boundaries balance: one micro-batch's forward, and
/// when training its backward with the recomputation \p RC adds.
double getLayerWork(const PlanEvaluator::LayerTime &T, Recompute RC,
                    bool Train);
/// The most expensive stage of \p Counts (same extras).
double getBottleneck(llvm::ArrayRef<double> LayerCost,
                     llvm::ArrayRef<unsigned> Counts, double FirstExtra = 0,
                     double LastExtra = 0);

//===-- Cost terms --------------------------------------------------------===//

enum class CostTerm {
  Compute,
  TPComm,
  EPComm,
  /// Context parallelism's attention traffic not hidden behind attention.
  CPComm,
  Bubble,
  DPComm,
  Optimizer,
  /// Offload transfers the busiest stage's compute does not hide.
  Offload
};
llvm::StringRef getCostTermName(CostTerm T);

/// The step time split into what one device spends it on: for the busiest
/// stage (least idle) its compute, TP and EP communication and idle time
/// (bubble, including waits for pipeline transfers), plus the exposed DP
/// gradient sync and the optimizer of the stage that finishes last. Sums to
/// StepTimeS.
struct StepBreakdown {
  double ComputeS = 0, TPCommS = 0, EPCommS = 0, CPCommS = 0, BubbleS = 0,
         DPCommS = 0, OptimizerS = 0, OffloadS = 0;
  double get(CostTerm T) const;
  CostTerm getDominant() const;
};
StepBreakdown getStepBreakdown(const PlanCost &PC);

/// The search's order: less step time; then fp32 gradients (numerically
/// safer; bf16 wins only by time); then the axis order earlier in
/// getAllAxisOrders() (the default first); then the lower ZeRO stage
/// (fewer partitions are the safer runtime choice); then less memory; then
/// the plan string. A strict total order: deterministic.
bool isBetterPlan(const PlanCost &A, const PlanCost &B);

//===-- The search --------------------------------------------------------===//

struct SearchOptions {
  /// What --plan fixed.
  PlanSpec Fixed;
  /// Plans to rank (at least 1).
  unsigned TopK = 1;
  /// Bound-based pruning; off, every candidate is evaluated in full (the
  /// tests' brute force).
  bool Prune = true;
  /// Also try min-max balanced stage boundaries (vpp = 1, pp > 1).
  bool BalanceStages = true;
  /// 0: the hardware's device count.
  uint64_t Devices = 0;
  /// Also try plans that leave devices idle (IdleDevices.h).
  bool AllowIdle = true;
  /// The model as imported has a static batch dim: only plans with dp =
  /// nmb = 1 can be emitted (loom/Plan/BatchSplit.h), so only those rank.
  bool StaticBatch = false;
  /// The frameworks that will run the plan (loom/Plan/Framework.h): only
  /// plans every one of them can run are candidates, and --plan asking for
  /// another is an error naming the rule. Empty: any plan (none).
  std::vector<const FrameworkProfile *> Frameworks;
  /// When the winner offloads, also search the best plan all in HBM
  /// (SearchResult::NoOffload, OffloadNeeded; NoOffloadSearched); when it
  /// splits the sequence, the best plan without cp (NoCP, NoCPSearched).
  bool FindNoOffload = true;
};

struct SearchSpace;
/// Whether every framework of \p Opts can run \p P (the search's legality
/// filter; the rules read the model's block count from \p Space).
bool isRunnable(const SearchOptions &Opts, const SearchSpace &Space,
                const ParallelPlan &P);

/// The fewest tokens of a sequence a cp rank is left with in the search
/// ([assume]: the published long-context recipes keep 8K-16K tokens per
/// cp rank -- Llama 3 405B at 128K with cp 16, MindSpeed-LLM's Mixtral
/// 8x7B at 32K with cp 2 -- and none splits 4K sequences; below this the
/// K/V ring's sends outgrow the chunk attention that hides them and the
/// space grows for nothing). --plan cp=N is costed at any N.
constexpr int64_t MinCPTokens = 4096;

/// The structural part of the space, for reports and the Z3 model.
struct SearchSpace {
  uint64_t Devices = 1;
  int64_t Batch = 1;
  unsigned NumLayers = 1, NumBlocks = 0;
  /// The attention's K/V heads (0: not found; FrameworkContext).
  int64_t KVHeads = 0;
  uint64_t TPLimit = 1;
  std::string TPLimitWhy;
  TPDivisibility TPDiv;
  ExpertInfo Experts;
  bool Train = true;
  /// Why ep > 1 is left out of the search ('' when it is searched): the
  /// plans shard an embedding table over dp, emitted at ep=1 only.
  std::string EPNotSearched;
  /// SearchOptions::StaticBatch.
  bool StaticBatch = false;
  /// The cp degrees searched (1 first) and why the list stops there
  /// (ContextParallel.h): each divides the devices and leaves every rank
  /// at least MinCPTokens of the sequence.
  std::vector<unsigned> CPs = {1};
  std::string CPWhy;
  /// Whether hybrid cp is searched (runsHybridCP, or --plan asks for it).
  bool HybridCP = false;
  /// Loom's own runtime (no --framework, or only any_plan profiles) runs
  /// the graphs -o emits: the search ranks no plan whose cp has no graphs
  /// (loom/Plan/CPEmission.h) unless --plan pins what makes it so.
  bool CPEmitOnly = false;
  /// The plans shard an embedding table over dp (at --plan's emb=).
  bool ShardedTables = false;
};

/// The least memory found at one (tp, pp) (for explanations).
struct MemoryFloor {
  unsigned TP = 1, PP = 1;
  double Bytes = 0;
  unsigned Stage = 0;
  ParallelPlan Plan;
};

struct SearchStats {
  /// Candidates in the space (all constraints but memory met).
  uint64_t Candidates = 0;
  /// Skipped: the step-time bound exceeded the incumbents; the parameter
  /// memory bound exceeded HBM.
  uint64_t TimeBoundPruned = 0, MemoryBoundPruned = 0;
  /// Evaluated without the pipeline simulation (memory, stage times); of
  /// those, over HBM; and simulated in full.
  uint64_t StagesEvaluated = 0, OverMemory = 0, Simulated = 0;
  /// Distinct stage partitions computed by the dynamic program.
  uint64_t Partitions = 0;
  /// Skipped: offload placements that cost exactly what a placement
  /// offloading less costs (act:host with one micro-batch in flight), when
  /// that one ranks too low for them to rank.
  uint64_t Dominated = 0;
  /// Skipped: over memory at a placement where the same plan at another
  /// mesh order was (the order moves no memory).
  uint64_t SameMemoryOver = 0;
  /// Wall time, and the CPU time of the searching thread (what the
  /// search costs on a machine shared with other work).
  double Seconds = 0, CPUSeconds = 0;
};

struct SearchResult {
  SearchSpace Space;
  /// The precision recipe the plans were costed under (None: the graph's
  /// own types; loom/Plan/Precision.h).
  llvm::Optional<PrecisionRecipe> Precision;
  /// "vocab padded V -> V' (...)" when pad-vocab padded the vocabulary
  /// (passes/PadVocab.cpp); empty otherwise.
  std::string VocabPadded;
  /// Best first; empty when nothing fits.
  std::vector<PlanCost> Top;
  /// The best plan whose (tp, pp, ep) differs from Top[0]'s (explanations).
  llvm::Optional<PlanCost> OtherDegrees;
  /// When Top[0]'s axis order is not the default: Top[0] with the default
  /// order, and where the groups of each land ("tp inside hccs, ep inside
  /// hccs, dp across spine").
  llvm::Optional<PlanCost> DefaultOrder;
  std::string WinnerGroups, DefaultOrderGroups;
  /// When Top[0] reduces gradients in bf16: Top[0] with fp32 gradients.
  llvm::Optional<PlanCost> FP32Grad;
  /// Top[0] with each overlap flipped (tp with tp > 1, dp with dp > 1 in
  /// training, pp with pp > 1), in that order.
  std::vector<PlanCost> OverlapFlips;
  /// When Top[0] leaves devices idle: the best plan on all of them (None
  /// when none fits).
  llvm::Optional<PlanCost> BestAllDevices;
  /// The space had candidates on every device (whether or not one fits).
  bool TriedAllDevices = false;
  /// --plan fixed the stage boundaries.
  bool StagesGiven = false;
  /// --plan fixed something: Top is the best plan under its constraints.
  bool Constrained = false;
  /// The best plan without --plan's constraints (when asked for; None when
  /// none fits).
  llvm::Optional<PlanCost> Unconstrained;
  /// --compare: each request as given and its best completion (None when
  /// none fits).
  std::vector<std::pair<std::string, llvm::Optional<PlanCost>>> Compared;
  /// --fail: the devices lost, how they were named, and the best plan on
  /// the intact cluster (None when none fits there).
  uint64_t FailedDevices = 0;
  std::string FailureWhat;
  llvm::Optional<PlanCost> BeforeFailure;
  /// When nothing fits: per (tp, pp) with candidates, the least memory.
  std::vector<MemoryFloor> Floors;
  /// Offload (Plan/Offload.h): the search tried placements off HBM because
  /// no plan fit with everything in HBM (OffloadNeeded), and, when the
  /// winner offloads and a plan without offload fits, the best such plan
  /// (under the same --plan constraints).
  bool OffloadNeeded = false;
  llvm::Optional<PlanCost> NoOffload;
  /// Whether NoOffload and OffloadNeeded were searched (FindNoOffload).
  bool NoOffloadSearched = false;
  /// When Top[0] has cp > 1 and --plan left cp free: the best plan at
  /// cp = 1 under the same constraints (None when none fits).
  bool NoCPSearched = false;
  llvm::Optional<PlanCost> NoCP;
  /// When nothing fits: the candidate with the least memory, costed in
  /// full (--print-costs=stage shows it, marked as not fitting).
  llvm::Optional<PlanCost> Closest;
  /// --plan ... rest=plain: the keys --plan left out were set to their
  /// plain values, not searched.
  bool RestPlain = false;
  /// Work without a cost rule (search-parallelism fills it).
  UncostedWork Uncosted;
  /// The hardware's reliability section, when given: reports add the
  /// expected goodput (Goodput.h). search-parallelism fills it.
  llvm::Optional<Reliability> Reliab;
  /// --objective goodput: Top was re-ranked by goodput, best first.
  bool RankedByGoodput = false;
  SearchStats Stats;
};

/// Derives the structural space (TP limit from the topology, divisibility
/// from the graph, layers, devices, batch).
SearchSpace describeSearchSpace(const Graph &G,
                                llvm::ArrayRef<LayerInfo> Layers,
                                const HardwareModel &HW,
                                const EvaluatorOptions &EO,
                                uint64_t Devices = 0);

/// Runs the search. Errors: a --plan the search cannot honour (ep > 1 on a
/// model without experts or not dividing their number, stages that do not
/// sum to the layers). No feasible plan is not an
/// error here: Top is empty and Floors says why.
llvm::Expected<SearchResult>
searchPlans(const PlanEvaluator &Eval, const Graph &G,
            llvm::ArrayRef<LayerInfo> Layers, const HardwareModel &HW,
            const EvaluatorOptions &EO, const SearchOptions &Opts);

/// Every candidate of the space, unevaluated, in a fixed order (tests and
/// brute force). Balanced stage boundaries are filled in.
std::vector<ParallelPlan>
enumerateCandidates(const PlanEvaluator &Eval, const Graph &G,
                    llvm::ArrayRef<LayerInfo> Layers, const HardwareModel &HW,
                    const EvaluatorOptions &EO, const SearchOptions &Opts);

/// The search found nothing that fits (plan-parallel exits 2).
class NoFeasiblePlanError : public llvm::ErrorInfo<NoFeasiblePlanError> {
public:
  static char ID;
  explicit NoFeasiblePlanError(std::string Msg) : Msg(std::move(Msg)) {}
  void log(llvm::raw_ostream &OS) const override;
  std::error_code convertToErrorCode() const override;

private:
  std::string Msg;
};

} // namespace loom

#endif // LOOM_PLAN_SEARCH_H
