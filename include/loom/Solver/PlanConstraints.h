//===- PlanConstraints.h - The search's decision space in Z3 ----*- C++ -*-===//
//
// The constraint model of DESIGN §6 over the decision variables of the
// parallelism search (tp, pp, dp, ep, micro-batch size and count, virtual
// stages, sp, recompute, ZeRO, DP gradient precision, the order of the mesh
// axes, stage-boundary kind), as plain data in and
// plain data out, in the style of XLA's auto-sharding solver. The search
// itself (lib/Planner/Search.cpp) enumerates with bounds, which is far faster
// than one Z3 call per candidate (DESIGN §6 measured ~9 ms each); Z3 is
// used for what it does well:
//
//  - explaining infeasibility: every constraint is a tracked assertion
//    named in plain words, the search adds what it measured as facts
//    ("memory(tp=8,pp=1) >= 71.3 GiB > 62.0 GiB HBM"), and the unsat core
//    names the constraints that bind -- one solver call;
//  - certifying optimality in tests: given a finite table of candidates
//    with their predicted step time and memory, z3::optimize finds the
//    minimum step time over the rows the model admits, independently of
//    the search's own filters and pruning.
//
// Every variable is a finite domain (one-hot booleans, degrees over the
// divisors of the device count and of the global batch), so dp * tp * pp =
// devices and "batch divisible by dp * mb" stay propositional.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SOLVER_PLANCONSTRAINTS_H
#define LOOM_SOLVER_PLANCONSTRAINTS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>
#include <vector>

namespace loom {

/// The structural part of the decision space.
struct PlanSpaceDesc {
  uint64_t Devices = 1;
  /// Global batch (samples per step).
  uint64_t Batch = 1;
  /// Layers as detect-layers numbers them, and how many of them are
  /// repeated blocks (interleaving splits those evenly).
  unsigned NumLayers = 1, NumBlocks = 0;
  /// tp <= TPLimit: the devices of the innermost topology levels that allow
  /// TP, e.g. 8 with TPLimitWhy "hccs domain".
  uint64_t TPLimit = 1;
  std::string TPLimitWhy;
  /// tp divides one of TPSplitSizes (the dims the sharding rules split;
  /// none: no bound): a degree dividing only some leaves the ops it cannot
  /// split replicated, one dividing none splits nothing.
  std::vector<uint64_t> TPSplitSizes;
  bool Train = true;
  /// Experts per MoE layer (the gcd over layers); 0: no experts, ep = 1.
  uint64_t NumExperts = 0;
  /// What --plan fixed; 0 (or -1 for the ints) means free. FixedOrder is
  /// an index as CandidateRow::Order; FixedGrad 0 fp32, 1 bf16.
  unsigned FixedTP = 0, FixedPP = 0, FixedDP = 0, FixedMB = 0, FixedNMB = 0,
           FixedVPP = 0, FixedEP = 0;
  int FixedZero = -1, FixedRecompute = -1, FixedSP = -1, FixedOrder = -1,
      FixedGrad = -1;
  /// --plan fixed the stage boundaries (layer counts per stage).
  bool FixedStages = false;
  /// Non-empty: only dp = nmb = 1 can be emitted, for this reason (a
  /// static batch dim, loom/Plan/BatchSplit.h); the constraint's name.
  std::string SingleBatchSplit;
};

/// The least per-device memory the search found at one (tp, pp), over all
/// the other choices (mb, sp, vpp, recompute, ZeRO, stage boundaries).
struct MemoryFloorFact {
  unsigned TP = 1, PP = 1;
  double Bytes = 0;
  /// The stage that needs it, and the rest of the plan that got there
  /// ("mb=1,sp=1,recompute=full,zero=3").
  unsigned Stage = 0;
  std::string Choices;
};

/// Why nothing fits.
struct InfeasibilityExplanation {
  /// One line: "no plan fits: stage 0 needs 71.3 GiB > 62.0 GiB HBM for
  /// every tp <= 8 (hccs domain) and pp <= 80 (layers)".
  std::string Summary;
  /// The unsat core, each constraint in plain words, in a fixed order.
  std::vector<std::string> Core;
  /// Summary, then the core as an indented list.
  std::string str() const;
};

/// Builds the constraint model of \p Space with one fact per entry of
/// \p Floors (each (tp, pp) whose floor exceeds \p HBMBytes is excluded by
/// a tracked assertion) and asks Z3 for an unsat core. Errors if the model
/// is satisfiable (the search and the model disagree: a bug) or Z3 fails.
llvm::Expected<InfeasibilityExplanation>
explainInfeasibility(const PlanSpaceDesc &Space,
                     llvm::ArrayRef<MemoryFloorFact> Floors, double HBMBytes);

/// One fully decided candidate with its predicted cost.
struct CandidateRow {
  unsigned TP = 1, PP = 1, DP = 1, EP = 1, MB = 1, NMB = 1, VPP = 1;
  unsigned Zero = 0, Recompute = 0; ///< Recompute: 0 none, 1 selective, 2 full.
  bool SP = false;
  /// Stage boundaries from the min-max partition rather than the even split.
  bool Balanced = false;
  /// DP gradients reduced (and buffered) in bf16 rather than fp32.
  bool BF16Grad = false;
  /// The mesh axes above tp, innermost first, as an index into the
  /// permutations of (ep, dp, pp) in lexicographic order: 0 ep-dp-pp (the
  /// default), 1 ep-pp-dp, 2 dp-ep-pp, 3 dp-pp-ep, 4 pp-ep-dp, 5 pp-dp-ep
  /// (ParallelPlan's getAllAxisOrders numbers them the same way). "dp" is
  /// the part of dp outside ep (size dp / ep).
  unsigned Order = 0;
  double StepTimeS = 0, MemoryBytes = 0;
};

struct OptimumCertificate {
  /// False when no row satisfies the model.
  bool Feasible = false;
  /// The row Z3 chose and its step time.
  unsigned Row = 0;
  double StepTimeS = 0;
};

/// z3::optimize: the minimum StepTimeS over the rows of \p Rows that
/// satisfy the constraint model of \p Space and MemoryBytes <= HBMBytes.
/// One solver call; meant for tests on small tables (hundreds of rows).
llvm::Expected<OptimumCertificate>
certifyMinimumStepTime(const PlanSpaceDesc &Space,
                       llvm::ArrayRef<CandidateRow> Rows, double HBMBytes);

} // namespace loom

#endif // LOOM_SOLVER_PLANCONSTRAINTS_H
