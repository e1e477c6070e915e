//===- PlacementReducer.h - The placement factor graph ----------*- C++ -*-===//
//
// Private to lib/Solver: the capacity model and the factor graph that
// Placement.cpp reduces (its header comment gives the algorithm) and
// PlacementPareto.cpp finishes exactly over the coupled core.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_SOLVER_PLACEMENTREDUCER_H
#define LOOM_LIB_SOLVER_PLACEMENTREDUCER_H

#include "loom/Solver/Placement.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <limits>
#include <vector>

namespace loom {
namespace placement {

constexpr double Inf = std::numeric_limits<double>::infinity();

/// An open (storage, resource) pair: held iff a coupled reader sits on a
/// class the resource holds.
struct OpenPair {
  unsigned Storage, Resource;
  llvm::SmallVector<unsigned, 2> Readers;
};

/// What capacities look like before any decision.
struct CapacityModel {
  std::vector<double> ConstantLoad; ///< Per resource.
  /// Per resource: the storages always held, for messages.
  std::vector<std::vector<unsigned>> AlwaysHeld;
  std::vector<OpenPair> Open;
  std::vector<bool> Coupled; ///< Per item.
};

/// The working problem of steps 2-4: a factor graph over the items, each
/// item's domain its candidate classes.
class Reducer {
public:
  Reducer(const PlacementRequest &R, const CapacityModel &CM,
          const PlacementSolverOptions &Opts)
      : R(R), CM(CM), Opts(Opts), K(R.Classes.size()) {}

  void run(PlacementStats &Stats);
  /// Solves the core with Z3 and back-substitutes into \p Class. False
  /// when the capacities cannot all be met.
  llvm::Expected<bool> solveCore(std::vector<unsigned> &Class,
                                 PlacementStats &Stats);

private:
  /// A cost over the items of Scope (sorted), row-major over their
  /// domains (the first item's the most significant).
  struct Factor {
    llvm::SmallVector<unsigned, 4> Scope;
    std::vector<double> T;
    bool Alive = true;
  };
  /// Item I eliminated: its best domain position for every assignment of
  /// Scope (in the same layout as a factor table).
  struct Step {
    unsigned Item;
    llvm::SmallVector<unsigned, 4> Scope;
    std::vector<uint8_t> Best;
  };

  unsigned addFactor(llvm::SmallVector<unsigned, 4> Scope,
                     std::vector<double> T);
  /// The live factors that mention \p I (drops dead ones from the list).
  llvm::SmallVector<unsigned, 8> liveFactors(unsigned I);
  /// The items \p I shares a factor with, sorted, and the table size their
  /// joint domain needs (saturating).
  llvm::SmallVector<unsigned, 8> neighbours(unsigned I, double &TableSize);
  void eliminate(unsigned I, llvm::ArrayRef<unsigned> Scope);
  /// Exhaustive branch and bound over a small core; false if infeasible.
  bool enumerateCore(llvm::ArrayRef<unsigned> Core, std::vector<unsigned> &Pos);
  /// Pareto elimination over the core; None if it outgrew its limits.
  llvm::Optional<bool> solveCoreByPareto(llvm::ArrayRef<unsigned> Core,
                                         std::vector<unsigned> &Pos);
  class ParetoElimination;
  /// Z3 MaxSAT over the core; false if infeasible.
  llvm::Expected<bool> solveCoreWithZ3(llvm::ArrayRef<unsigned> Core,
                                       std::vector<unsigned> &Pos);

  const PlacementRequest &R;
  const CapacityModel &CM;
  const PlacementSolverOptions &Opts;
  size_t K;
  std::vector<llvm::SmallVector<unsigned, 4>> Dom;
  std::vector<Factor> Factors;
  std::vector<std::vector<unsigned>> FactorsOf;
  std::vector<bool> Alive;
  std::vector<Step> Steps;
};

} // namespace placement
} // namespace loom

#endif // LOOM_LIB_SOLVER_PLACEMENTREDUCER_H
