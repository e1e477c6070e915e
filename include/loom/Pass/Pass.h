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
#include "loom/Plan/PlanCost.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
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
  llvm::Optional<unsigned> Devices;
  /// Plans search-parallelism ranks (--top).
  unsigned TopPlans = 1;
  /// The output directory emit writes (-o); empty: plan only.
  std::string OutputDir;
  /// Replace an existing OutputDir (--force).
  bool Force = false;
  /// Also write one graph file per global rank (--emit per-rank).
  bool EmitPerRank = false;
  /// Check the emitted program's invariants (--verify-output).
  bool VerifyOutput = false;
  /// Plan even when more than 1% of the FLOPs or parameters have no cost
  /// rule (--allow-uncosted).
  bool AllowUncosted = false;
};

/// What a pipeline works on: the model, the hardware, options, and the
/// results passes add (the plan, once the search exists).
class CompilationUnit {
public:
  std::unique_ptr<Model> M;
  /// Filled by detect-layers; Node::Layer indexes it.
  std::vector<LayerInfo> Layers;
  /// Filled by annotate-costs: every node of the main graph.
  NodeCostMap NodeCosts;
  /// What --plan fixed (empty when not given).
  llvm::Optional<PlanSpec> PlanRequest;
  /// Filled by search-parallelism: the chosen plan first, the runners-up,
  /// and how the search went (loom/Plan/Search.h).
  std::shared_ptr<const SearchResult> Search;
  /// Filled by shard, insert-collectives and schedule; written by emit.
  std::shared_ptr<ShardedProgram> Sharded;
  const HardwareModel *HW = nullptr;
  CompileOptions Opts;
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

class Pass {
public:
  virtual ~Pass();
  /// The command-line name: kebab-case of the class name minus "Pass".
  virtual llvm::StringRef getArgument() const = 0;
  virtual llvm::StringRef getDescription() const = 0;
  virtual llvm::Error run(CompilationUnit &CU) = 0;
  /// What --print-after=PASS shows: the model, unless the pass's result
  /// lives elsewhere (the transform passes print the sharded program).
  virtual void print(const CompilationUnit &CU, llvm::raw_ostream &OS) const;
};

struct PassInfo {
  const char *Argument;
  const char *Description;
  std::unique_ptr<Pass> (*Create)();
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
  void addPass(std::unique_ptr<Pass> P) { Passes.push_back(std::move(P)); }
  /// Parses "a,b,c" into passes; unknown names are an error listing the
  /// registered ones.
  llvm::Error parsePipeline(llvm::StringRef Pipeline);
  /// The default pipeline: every registered pass, in order.
  void addDefaultPipeline();
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
