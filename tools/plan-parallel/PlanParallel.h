//===- PlanParallel.h - plan-parallel's shared declarations -----*- C++ -*-===//
//
// Private to tools/plan-parallel: the command-line options (defined, in
// registration order, in plan-parallel.cpp), the error and progress
// reporting, and the steps of main() that Options.cpp and Reports.cpp
// define.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TOOLS_PLAN_PARALLEL_PLANPARALLEL_H
#define LOOM_TOOLS_PLAN_PARALLEL_PLANPARALLEL_H

#include "loom/Hardware/HardwareModel.h"
#include "loom/Hardware/HardwareOverlay.h"
#include "loom/Pass/Pass.h"
#include "loom/Report/CostReport.h"
#include "loom/Report/Export.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace planparallel {

// The values of some options (plan-parallel.cpp).
enum class CostLevel { None, Node, Layer, Stage };
// serve plans inference (RunMode::Infer) for a serving workload.
enum class ToolMode { Train, Infer, Serve };
enum class Objective { Step, Goodput };
enum class EmitKind { Roles, PerRank };
enum class TraceKind { Window, Full };

// The options read outside plan-parallel.cpp.
extern llvm::cl::opt<std::string> ModelPath;
extern llvm::cl::list<std::string> HWPaths;
extern llvm::cl::list<std::string> Sets;
extern llvm::cl::list<std::string> ComparePlans;
extern llvm::cl::list<std::string> CompareHW;
extern llvm::cl::opt<std::string> FailOpt;
extern llvm::cl::opt<unsigned> DevicesOpt;
extern llvm::cl::opt<int64_t> Batch;
extern llvm::cl::opt<int64_t> Seq;
extern llvm::cl::list<std::string> DimBindings;
extern llvm::cl::opt<std::string> MaxMemory;
extern llvm::cl::opt<bool> PrintGraph;
extern llvm::cl::opt<bool> PrintHW;
extern llvm::cl::opt<std::string> PassPipeline;
extern llvm::cl::list<std::string> PrintAfter;
extern llvm::cl::opt<std::string> StopAfter;
extern llvm::cl::opt<bool> VerifyEach;
extern llvm::cl::opt<bool> TimePasses;
extern llvm::cl::opt<CostLevel> PrintCosts;
extern llvm::cl::opt<loom::ReportFormat> Format;
extern llvm::cl::opt<std::string> PlanText;
extern llvm::cl::opt<ToolMode> Mode;
extern llvm::cl::opt<int64_t> PromptLen;
extern llvm::cl::opt<int64_t> GenLen;
extern llvm::cl::opt<std::string> LengthsFile;
extern llvm::cl::opt<std::string> SLOText;
extern llvm::cl::opt<std::string> EngineName;
extern llvm::cl::opt<unsigned> TopPlans;
extern llvm::cl::opt<Objective> ObjectiveOpt;
extern llvm::cl::opt<bool> ExplainPlan;
extern llvm::cl::opt<bool> AllowUncosted;
extern llvm::cl::opt<unsigned> VocabDivisibleBy;
extern llvm::cl::opt<bool> NoPrune;
extern llvm::cl::opt<std::string> FusedKernelsOpt;
extern llvm::cl::opt<std::string> FusionOpt;
extern llvm::cl::opt<bool> Quiet;
extern llvm::cl::opt<bool> PrintPlacement;
extern llvm::cl::opt<std::string> OutputDir;
extern llvm::cl::opt<bool> Force;
extern llvm::cl::opt<EmitKind> EmitMode;
extern llvm::cl::opt<bool> NoVerifyOutput;
extern llvm::cl::opt<bool> TestCorruptOutput;
extern llvm::cl::opt<bool> CheckPricedCollectives;
extern llvm::cl::opt<TraceKind> TraceMode;
extern llvm::cl::list<std::string> ExportTo;
extern llvm::cl::opt<std::string> PrecisionOpt;
extern llvm::StringRef ToolName;

// plan-parallel.cpp

/// Prints one error, once (on stderr; returns \p Code).
int reportError(llvm::Error E, int Code = 1);

/// One line on stderr saying what a long run is doing ("[12.3 s]
/// search-parallelism (7/11)"), redrawn in place, shown only when stderr is
/// a terminal and the run has taken more than a second; erased before
/// anything else is printed. Tests and pipes never see it.
class ProgressLine {
public:
  ProgressLine();
  ~ProgressLine();
  /// The one of this run, for reportError.
  static ProgressLine *Active;
  /// The callback for CompileOptions::Progress.
  void set(const std::string &What);
  /// Erases the line and stops redrawing it.
  void stop();

private:
  void tick();
  bool Enabled;
  bool Stopping = false;
  bool Shown = false;
  std::string Now;
  std::mutex Mu;
  std::condition_variable CV;
  std::thread Ticker;
};

// Options.cpp

/// --max-memory and -o's directory, checked before any work.
llvm::Error checkLimits();
/// The cluster of --hw with the hardware paths of --set applied.
llvm::Expected<loom::HardwareModel>
loadHardware(std::vector<loom::HardwareOverride> &Overrides);
/// Fills \p CU from the command line; returns the --export targets.
llvm::Expected<std::vector<loom::ExportTarget>>
parseInputs(const loom::HardwareModel &HW,
            llvm::ArrayRef<loom::HardwareOverride> Overrides,
            ProgressLine &Progress, loom::CompilationUnit &CU);
/// Imports and verifies the model into \p CU; its number of nodes.
llvm::Expected<unsigned> importInput(loom::CompilationUnit &CU,
                                     ProgressLine &Progress);

// Reports.cpp

/// --pass-pipeline, or the default pipeline, into \p PM.
llvm::Error buildPipeline(loom::PassManager &PM);
/// --print-after, --stop-after, --verify-each and --time-passes.
loom::PassInstrumentation getInstrumentation();

/// What a run of the pipeline leaves besides the compilation unit.
struct FrontEndResult {
  /// The IR dumps, buffered so that a failing pipeline prints only its
  /// error.
  std::string Dumps;
  /// Whether annotate-costs ran (node costs exist).
  bool HaveCosts = false;
  /// Whether emit wrote the output directory.
  bool Wrote = false;
};

/// Runs the pipeline (and the search --plan asks for).
llvm::Error runFrontEnd(loom::CompilationUnit &CU, loom::PassManager &PM,
                        const loom::PassInstrumentation &PI,
                        ProgressLine &Progress, FrontEndResult &Out);
/// The pipeline failed: the exit status when the run ends here.
llvm::Optional<int> handlePipelineError(llvm::Error E,
                                        const loom::CompilationUnit &CU,
                                        const loom::PassInstrumentation &PI,
                                        bool HaveExports,
                                        llvm::Optional<std::string> &NoPlanMsg);
/// The plan --print-costs=stage reports (null when none).
llvm::Expected<const loom::PlanCost *>
getCostedPlan(const loom::CompilationUnit &CU, bool HaveCosts,
              bool NoPlanPending);
/// The IR dumps, --print-hw, --print-graph and --print-costs.
void printPlanlessReports(const loom::CompilationUnit &CU,
                          const std::string &Dumps,
                          const loom::PlanCost *Costed);
/// The plan's reports on stdout; returns the exit status.
int writeOutputs(const loom::CompilationUnit &CU, const loom::PassManager &PM,
                 const loom::PassInstrumentation &PI,
                 llvm::ArrayRef<loom::ExportTarget> Exports,
                 const loom::PlanCost *Costed, unsigned NodesBefore,
                 bool Wrote);

} // namespace planparallel

#endif // LOOM_TOOLS_PLAN_PARALLEL_PLANPARALLEL_H
