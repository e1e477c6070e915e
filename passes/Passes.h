//===- Passes.h - Constructors of every registered pass ---------*- C++ -*-===//
#ifndef LOOM_PASSES_PASSES_H
#define LOOM_PASSES_PASSES_H

#include "loom/Pass/Pass.h"
#include "loom/Report/CostReport.h"
#include "loom/Report/Export.h"
#include "loom/Solver/Placement.h"

namespace loom {
std::unique_ptr<Pass> createBindSymbolsPass();
std::unique_ptr<Pass> createInferShapesPass();
std::unique_ptr<Pass> createFoldShapeArithPass();
std::unique_ptr<Pass> createLowerEmbeddingBagsPass();
std::unique_ptr<Pass> createCanonicalizePass();
std::unique_ptr<Pass> createPadVocabPass();
std::unique_ptr<Pass> createDetectLayersPass();
std::unique_ptr<Pass> createApplyPrecisionPass();
std::unique_ptr<Pass> createAnnotateCostsPass();
std::unique_ptr<Pass> createDetectFusedKernelsPass();
std::unique_ptr<Pass> createFuseKernelsPass();
std::unique_ptr<Pass> createAssignDeviceClassesPass();
std::unique_ptr<Pass> createSearchParallelismPass();
std::unique_ptr<Pass> createShardPass();
std::unique_ptr<Pass> createInsertCollectivesPass();
std::unique_ptr<Pass> createSchedulePass();
std::unique_ptr<Pass> createEmitPass();

//===-- The model at micro-batch shapes (passes/MicroBatchModel.cpp) -----===//

struct MicroBatchModel {
  std::unique_ptr<Model> M;
  std::vector<LayerInfo> Layers;
  /// The batch symbol the clone rebound (empty: the batch is static and
  /// the clone keeps it).
  std::string BatchSymbol;
};

/// \p CU's model as imported bound at micro-batch size \p MB and put
/// through the front-end passes that ran on CU.M; errors when they fail or
/// find another number of layers. \p PlanExpectedCounts: fold-shape-arith
/// gives data-dependent dims their expected size and apply-precision
/// retypes to the recipe (planning), or the dims stay dynamic and the
/// types the model's (the graphs a runtime executes).
llvm::Expected<MicroBatchModel> buildMicroBatchModel(const CompilationUnit &CU,
                                                     unsigned MB,
                                                     bool PlanExpectedCounts);

//===-- The one costing path (passes/SearchParallelism.cpp) ---------------===//

/// What every evaluator of \p CU's plans is built with: the mode, the
/// bound global batch, and the sequence length when one is bound (0
/// otherwise: throughput in samples/s).
EvaluatorOptions getEvaluatorOptions(const CompilationUnit &CU);

/// search-parallelism's work, for the tool to call when the pass is not in
/// the pipeline: refuses uncosted work (checkUncosted) unless
/// CU.Opts.AllowUncosted, completes a rest=plain --plan, searches what
/// --plan left free, annotates stages and sets CU.Search. When nothing
/// fits, CU.Search is set with no plans (its Closest costed) and the error
/// is a NoFeasiblePlanError.
llvm::Error searchParallelism(CompilationUnit &CU);

//===-- Device-class placement (passes/AssignDeviceClasses.cpp) ----------===//

/// One node's class and why.
struct NodePlacement {
  const Node *N = nullptr;
  unsigned Class = 0; ///< Index into GraphPlacement::Classes.
  /// Time on every class (forward, + backward when training); infinite
  /// where the node cannot run.
  std::vector<double> Seconds;
  std::string Reason;
};

/// The placement of the main graph for one HBM budget.
struct GraphPlacement {
  std::vector<std::string> Classes;
  /// Per main-graph node, in graph order.
  std::vector<unsigned> NodeClass;
  /// Per main-graph node: its inputs' transfers from other classes, one
  /// forward pass (bytes-proportional seconds, latencies), and their share
  /// that moves gradients back in training (floating-point values).
  struct InTransfer {
    double BytesS = 0, LatencyS = 0, BackwardBytesS = 0, BackwardLatencyS = 0;
  };
  std::vector<InTransfer> NodeTransfers;
  /// With reasons; only when asked to explain.
  std::vector<NodePlacement> Nodes;
  /// One step, whole graph: node times and cross-class transfers.
  double ComputeSeconds = 0, TransferSeconds = 0;
  unsigned CrossingEdges = 0;
  std::vector<unsigned> ClassNodes; ///< Per class.
  std::vector<double> ClassSeconds; ///< Per class.
  /// Parameter bytes (training: with gradients and optimizer states) held
  /// in HBM and on the SSD, and what was available.
  double HBMFreeBytes = 0, HBMParamBytes = 0;
  double SSDCapacityBytes = 0, SSDParamBytes = 0;
  /// Ways parameter bytes were divided (tp x pp x ZeRO-3 dp of a plan).
  double ParamShardFactor = 1;
  PlacementStats Stats;
  double getStepSeconds() const { return ComputeSeconds + TransferSeconds; }
};

/// Builds the placement problem of a costed CompilationUnit once (needs
/// annotate-costs; uses detect-layers' layers when present) and solves it
/// per HBM budget, for the search to call per candidate plan. The unit
/// must outlive the placer and not change in between.
class DeviceClassPlacer {
public:
  static llvm::Expected<std::unique_ptr<DeviceClassPlacer>>
  create(const CompilationUnit &CU);
  ~DeviceClassPlacer();
  /// \p HBMFreeBytes: HBM per device left for parameters and their
  /// training state after activations, buffers and reserve.
  /// \p ParamShardFactor (>= 1): how many ways parameters are split across
  /// devices (e.g. tp x ZeRO-3 dp); parameter bytes are divided by it, so
  /// a table split 8 ways may fit in HBM. Errors: no feasible placement
  /// (the message names the binding capacity).
  llvm::Expected<GraphPlacement> place(double HBMFreeBytes,
                                       double ParamShardFactor,
                                       bool Explain = false) const;
  /// HBM capacity minus reserved: the budget when no plan is known.
  static double getUsableHBMBytes(const CompilationUnit &CU);
  /// Parameter bytes that stay in HBM whatever the placement, per device
  /// when split \p ParamShardFactor ways.
  double getUnavoidableHBMBytes(double ParamShardFactor) const;

private:
  DeviceClassPlacer();
  struct Impl;
  std::unique_ptr<Impl> I;
};

/// One-shot placement: DeviceClassPlacer::create + place. A negative
/// \p HBMFreeBytes means the usable HBM (what the pass uses).
llvm::Expected<GraphPlacement> placeForPlan(const CompilationUnit &CU,
                                            double HBMFreeBytes = -1,
                                            double ParamShardFactor = 1,
                                            bool Explain = false);

/// The placement the pass makes before any plan exists. Parameters are
/// taken as split the --plan's tp x pp (x dp under ZeRO-3) ways, else the
/// fewest ways, a power of two up to the device count, that fit what must
/// stay in HBM into the usable HBM. If even that does not fit, the memory
/// model and the search will say so; placement then keeps as little as it
/// can in HBM and, when \p CU is given to warn on, warns.
llvm::Expected<GraphPlacement>
placeForPipeline(const CompilationUnit &CU, bool Explain,
                 CompilationUnit *Warn = nullptr);

/// --print-placement: per node its class, time on every class and the
/// reason, then totals per class. Fails if the pass has not run.
llvm::Error printPlacement(const CompilationUnit &CU, ReportFormat F,
                           llvm::raw_ostream &OS);
/// What --export needs to know of \p CU for the plan \p Chosen (emit and
/// the tool without -o share it).
ExportInput makeExportInput(const CompilationUnit &CU, const PlanCost &Chosen);

} // namespace loom

#endif
