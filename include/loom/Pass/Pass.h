//===- Pass.h - Passes, the compilation unit, the pass manager --*- C++ -*-===//
//
// Every stage of Loom is a Pass over one CompilationUnit (DESIGN §2). Passes
// are registered by their kebab-case command-line name in one table
// (passes/PassRegistry.cpp); the PassManager runs a pipeline of them with
// LLVM-style instrumentation (--print-after, --stop-after, --verify-each,
// --time-passes).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASS_PASS_H
#define LOOM_PASS_PASS_H

#include "loom/IR/Graph.h"
#include "loom/Plan/Framework.h"
#include "loom/Planner/PlanCost.h"
#include "loom/Planner/Serving.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace loom {

struct HardwareModel;
struct SearchResult;
struct ShardedProgram;

enum class RunMode { Train, Infer };

/// Options every pass may read; set by the tool from its flags.
struct CompileOptions {
  llvm::Optional<int64_t> Batch;
  llvm::Optional<int64_t> Seq;
  /// --dim NAME=V, in command-line order.
  std::vector<std::pair<std::string, int64_t>> Dims;
  RunMode Mode = RunMode::Train;
  /// --devices N (or the cluster minus --fail): plan on the first N devices
  /// of the topology, innermost levels filled first; None: all of them.
  llvm::Optional<unsigned> Devices;
  /// What-if studies (--set, --hw A --hw B): each hardware override,
  /// described ("topology.roce.bandwidth: 200Gbps -> 400Gbps (--set)").
  std::vector<std::string> HardwareOverrides;
  /// --set moe.capacity_factor=F: the tokens an expert accepts relative to
  /// an even share (GShard/Switch's capacity factor), for the MoE costing.
  llvm::Optional<double> MoECapacityFactor;
  /// --set moe.imbalance=F: the most loaded EP rank's routed tokens over
  /// the mean (>= 1); unset: the capacity factor (at least 1), the most an
  /// expert may take, so the load of a rank at capacity.
  llvm::Optional<double> MoEImbalance;
  /// --set ddp.bucket_size=N: the DP gradient bucket, in parameters;
  /// unset: Megatron-Core's default (EvaluatorOptions::DDPBucketParams).
  llvm::Optional<double> DDPBucketParams;
  /// The framework's MoE dispatcher sends a routed token once per
  /// destination ep rank (FrameworkProfile::EPDispatchPerRank).
  bool EPDispatchPerRank = false;
  /// Its all-to-all's share of link bandwidth; 0: the topology's.
  double EPDispatchEfficiency = 0;
  /// --compare PLAN (as given, and parsed): plans search-parallelism also
  /// completes and costs beside the unconstrained best.
  std::vector<std::pair<std::string, PlanSpec>> Compare;
  /// Also search without --plan's constraints (--explain with --plan, and
  /// --compare), so reports compare with the true best.
  bool SearchUnconstrained = false;
  /// When the winner offloads, also find the best plan all in HBM (what
  /// the explanation says offload buys), and when it uses cp, the best
  /// plan without cp: --explain and -o, whose reports print them; the
  /// extra searches are skipped otherwise.
  bool FindNoOffload = true;
  /// --fail: devices lost (Devices is the cluster minus these); the search
  /// also plans the intact cluster to report the throughput kept.
  unsigned FailedDevices = 0;
  /// How --fail was given ("1 server of 8 devices", "3 devices").
  std::string FailureWhat;
  /// Plans search-parallelism ranks (--top).
  unsigned TopPlans = 1;
  /// --objective goodput: rank the search's plans by expected goodput
  /// (needs the hardware's reliability section).
  bool RankByGoodput = false;
  /// The output directory emit writes (-o); empty: plan only.
  std::string OutputDir;
  /// Replace an existing OutputDir (--force).
  bool Force = false;
  /// Also write one graph file per global rank (--emit per-rank).
  bool EmitPerRank = false;
  /// What the run is doing now ("search-parallelism (7/11)", "emit: ..."),
  /// for a progress line; called from any thread; may be empty.
  std::function<void(const std::string &)> Progress;
  /// Check the emitted program's invariants before writing (on unless
  /// --no-verify-output).
  bool VerifyOutput = true;
  /// Tests only: damage the program before verification
  /// (--test-corrupt-output).
  bool TestCorruptOutput = false;
  /// The schedule pass fails unless the tp, ep and dp collectives the cost
  /// model priced are the role graphs' (--check-priced-collectives;
  /// loom/Shard/PricedCollectives.h).
  bool CheckPricedCollectives = false;
  /// trace.json shows every rank and micro-batch (--trace=full).
  bool TraceFull = false;
  /// --framework (or what --export implies): the frameworks that will run
  /// the plan; the search ranks only plans each can run. Empty: none (any
  /// plan, today's costs).
  std::vector<std::shared_ptr<const FrameworkProfile>> Frameworks;
  /// Optimizer-state bytes per parameter (the framework profile's); None:
  /// EvaluatorOptions' default.
  llvm::Optional<double> OptimizerBytesPerParam;
  /// Launch-argument files emit writes (--export): framework names as
  /// loom/Report/Export.h parses them, already checked by the tool.
  std::vector<std::string> Export;
  /// --make-vocab-size-divisible-by N (Megatron-LM's flag and default,
  /// megatron/training/arguments.py): pad-vocab pads a vocabulary tp does
  /// not divide to a multiple of N x tp.
  unsigned VocabDivisibleBy = 128;
  /// fold-shape-arith gives data-dependent dims of MoE routing their
  /// expected size (planning); shard's micro-batch graph keeps them dynamic.
  bool PlanExpectedCounts = true;
  /// Plan even when more than 1% of the FLOPs or parameters have no cost
  /// rule (--allow-uncosted).
  bool AllowUncosted = false;
  /// --no-prune (hidden, for tests): the search evaluates every candidate
  /// in full, no bound cuts anything (SearchOptions::Prune).
  bool NoPrune = false;
  /// --fused-kernels: the fused kernels detect-fused-kernels may use (empty:
  /// none); None: every kernel the hardware offers.
  llvm::Optional<std::vector<std::string>> FusedKernels;
  /// --fusion: fuse-kernels groups ops into the kernels the hardware's
  /// fusion rules (device.classes.aicore.fusion) describe; false
  /// (--fusion=none): one kernel per op, the named fused kernels aside.
  bool GenericFusion = true;
  /// The precision recipe (--precision, or the framework's default):
  /// apply-precision retypes the planning graph to it and the evaluator
  /// takes weight, master and gradient bytes from it. None (library use,
  /// explicit pipelines without it): the graph's own types, 2-byte
  /// weights.
  llvm::Optional<PrecisionRecipe> Precision;
  /// --mode serve (Mode is Infer): the workload, SLO and KV element type
  /// search-parallelism plans serving for (loom/Planner/Serving.h).
  std::shared_ptr<const ServingOptions> Serve;
};

/// What pad-vocab did: the vocabulary grown to a multiple of
/// DivisibleBy x TP (Megatron-LM's _vocab_size_with_padding).
struct VocabPadding {
  /// --make-vocab-size-divisible-by and the tp degree padded for (the
  /// --plan's tp, else the largest the search considers).
  unsigned DivisibleBy = 0, TP = 0;
  /// The embedding table, its vocabulary before and after; empty when
  /// nothing was padded.
  std::string Table;
  int64_t From = 0, To = 0;
  /// Every parameter grown (table, LM head, its bias).
  std::vector<std::string> Params;
  bool padded() const { return To > From; }
};

/// What a pipeline works on: the model, the hardware, options, and the
/// results passes add (the plan, once the search exists).
class CompilationUnit {
public:
  std::unique_ptr<Model> M;
  /// Filled by pad-vocab (shard's replay reuses its tp).
  llvm::Optional<VocabPadding> VocabPad;
  /// Filled by detect-layers; Node::Layer indexes it.
  std::vector<LayerInfo> Layers;
  /// Filled by annotate-costs: every node of the main graph.
  NodeCostMap NodeCosts;
  /// What --plan fixed (empty when not given).
  llvm::Optional<PlanSpec> PlanRequest;
  /// Filled by search-parallelism: the chosen plan first, the runners-up,
  /// and how the search went (loom/Planner/Search.h).
  std::shared_ptr<const SearchResult> Search;
  /// --mode serve: the serving search's result (its best plan is the one
  /// search-parallelism costs and shard emits, one replica).
  std::shared_ptr<const ServingResult> Serving;
  /// Filled by shard, insert-collectives and schedule; written by emit.
  std::shared_ptr<ShardedProgram> Sharded;
  const HardwareModel *HW = nullptr;
  CompileOptions Opts;
  /// The model as imported, before any pass: shard binds a clone of it at
  /// the micro-batch size (the folded shape constants of M encode the
  /// planned batch). PassManager::run keeps it when a pass of the pipeline
  /// needs it; parameters share their data with M.
  std::shared_ptr<const Model> Imported;
  /// The passes that have run on M, in order (shard replays the front end
  /// among them on its clone).
  std::vector<std::string> PassesRun;
  /// The sequence length bind-symbols bound (--seq, or --dim of a
  /// sequence symbol); None when no sequence dim was bound.
  llvm::Optional<int64_t> BoundSeq;
  /// Shape-only parameters seen at import (absent external data or
  /// declared-only weights): planning proceeds without weight data.
  unsigned ShapeOnlyParameters = 0;

  /// Records a warning; the tool prints them to stderr (unless --quiet).
  void warn(const llvm::Twine &Msg) { Warnings.push_back(Msg.str()); }
  llvm::ArrayRef<std::string> getWarnings() const { return Warnings; }

private:
  std::vector<std::string> Warnings;
};

struct PassInfo;

class Pass {
public:
  virtual ~Pass();
  /// The command-line name (kebab-case of the class name minus "Pass") and
  /// the one-line description: the registry's entry, the only place they
  /// are written (passes/PassRegistry.cpp).
  llvm::StringRef getArgument() const;
  llvm::StringRef getDescription() const;
  virtual llvm::Error run(CompilationUnit &CU) = 0;
  /// What --print-after=PASS shows: the model, unless the pass's result
  /// lives elsewhere (the transform passes print the sharded program).
  virtual void print(const CompilationUnit &CU, llvm::raw_ostream &OS) const;
  /// The pass works on CompilationUnit::Imported.
  virtual bool needsImportedModel() const { return false; }
  /// The pass's errors are about the model, and the pass manager names the
  /// model file in front of them (false for passes whose errors name their
  /// own files, such as emit's output directory).
  virtual bool errorsNameModel() const { return true; }

private:
  friend class PassManager;
  const PassInfo *Info = nullptr; ///< Set when the pass manager adds it.
};

/// What a pass does to the unit: planning passes annotate the model and
/// choose a plan; transform passes build the sharded program from the
/// plan; the emit pass writes it to the output directory.
enum class PassKind { Planning, Transform, Emit };

struct PassInfo {
  const char *Argument;
  const char *Description;
  std::unique_ptr<Pass> (*Create)();
  PassKind Kind;
};

/// Which part of the registry the default pipeline runs.
struct DefaultPipelineOptions {
  /// The transform passes (shard, insert-collectives, schedule).
  bool Transforms = true;
  /// The emit pass (only with Transforms).
  bool Emit = true;
};

/// All registered passes, in DESIGN §2's order. Defined in the passes
/// library (passes/PassRegistry.cpp), which sits above this one.
llvm::ArrayRef<PassInfo> getRegisteredPasses();

struct PassInstrumentation {
  std::vector<std::string> PrintAfter; ///< Pass names; "all" for every pass.
  std::string StopAfter;
  bool VerifyEach = false;
  bool TimePasses = false;
};

class PassManager {
public:
  /// \p Registry names the passes parsePipeline and the default pipeline
  /// may use (usually getRegisteredPasses()).
  explicit PassManager(llvm::ArrayRef<PassInfo> Registry)
      : Registry(Registry) {}
  const PassInfo *lookupPass(llvm::StringRef Argument) const;
  /// Adds a new instance of the registered pass \p PI.
  void addPass(const PassInfo &PI);
  /// Parses "a,b,c" into passes; unknown names are an error listing the
  /// registered ones.
  llvm::Error parsePipeline(llvm::StringRef Pipeline);
  /// The default pipeline: the registered passes, in order, that \p O
  /// asks for.
  void addDefaultPipeline(const DefaultPipelineOptions &O = {});
  /// Whether \p Argument names a registered pass of kind Transform or Emit.
  bool isTransformPass(llvm::StringRef Argument) const;
  /// Checks that --print-after/--stop-after name passes in the pipeline.
  llvm::Error validate(const PassInstrumentation &PI) const;
  /// Runs the pipeline. IR dumps go to \p Out; the timing report to
  /// \p Report. Stops after PI.StopAfter.
  llvm::Error run(CompilationUnit &CU, const PassInstrumentation &PI,
                  llvm::raw_ostream &Out, llvm::raw_ostream &Report);
  std::vector<std::string> getPipelineNames() const;

private:
  std::string registeredNames() const;
  llvm::ArrayRef<PassInfo> Registry;
  std::vector<std::unique_ptr<Pass>> Passes;
};

} // namespace loom

#endif // LOOM_PASS_PASS_H
