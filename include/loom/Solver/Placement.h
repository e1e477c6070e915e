//===- Placement.h - Device-class placement, plain data ---------*- C++ -*-===//
//
// The optimization behind assign-device-classes (DESIGN §5), in the style of
// XLA's auto-sharding solver: the pass hands over a plain-data request and
// gets a plain-data result; evaluatePlacement() recomputes the cost of any
// assignment and lists what it violates, so tests check costs without the
// solver and compare it with brute force.
//
// The problem: give every item (a graph node, or one position of a repeated
// layer standing for all its copies) one of its candidate classes so that
//
//   sum_i Mult_i * Seconds_i(class_i) + sum_e Mult_e * Cost_e(class_u, class_v)
//
// is minimal, subject to capacities: a storage (a group of parameters) is
// held by a resource (HBM, SSD) when at least one of its readers sits on a
// class whose data that resource holds, and the bytes each resource holds
// must not exceed its capacity.
//
// This is labeling with arbitrary pairwise costs plus knapsack constraints,
// NP-hard in general (multiway cut and knapsack are special cases), so the
// solver is exact rather than polynomial: it eliminates exactly what bucket
// elimination can (chains, trees and narrow fork/join blocks, i.e. "chains
// contracted"), and solves the rest -- the items tied to a capacity and
// joints too wide to eliminate -- by branch and bound when small, by
// Pareto (cost, bytes) elimination (Nemhauser-Ullmann) otherwise, and by
// Z3's MaxSAT engine when frontiers grow too large. See
// lib/Solver/Placement.cpp for why each step keeps the optimum; tests
// compare every path with brute force.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SOLVER_PLACEMENT_H
#define LOOM_SOLVER_PLACEMENT_H

#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace loom {

/// One class an item may run on, with the time of one copy there.
struct PlacementOption {
  unsigned Class = 0;
  double Seconds = 0;
};

/// A node, or one position of a repeated layer (then Multiplicity copies,
/// all placed alike).
struct PlacementItem {
  std::string Name; ///< For messages.
  /// Candidate classes, each at most once; none is an error.
  std::vector<PlacementOption> Options;
  double Multiplicity = 1;
};

/// Data flowing from item From to item To. Cost is the time of moving it
/// between classes, a Classes.size()^2 row-major matrix indexed
/// [class of From][class of To] (zero on the diagonal in practice, but any
/// non-negative values are allowed). From == To is allowed: both ends then
/// share one class, so only the diagonal counts.
struct PlacementEdge {
  unsigned From = 0, To = 0;
  double Multiplicity = 1;
  std::vector<double> Cost;
  double Bytes = 0; ///< Informational.
};

/// Parameters that live together: held by a resource when any reader sits
/// on a class the resource holds data for.
struct PlacementStorage {
  std::string Name; ///< For messages: "table 'emb' (96.0 GiB)".
  double Bytes = 0; ///< Non-negative; all copies included.
  std::vector<unsigned> Readers;
};

/// A capacity: HBM, SSD.
struct PlacementResource {
  std::string Name;
  double Capacity = 0;
  /// Per class: whether a storage read by an item on that class is held
  /// here.
  std::vector<bool> Holds;
};

struct PlacementRequest {
  std::vector<std::string> Classes;
  std::vector<PlacementItem> Items;
  std::vector<PlacementEdge> Edges;
  std::vector<PlacementStorage> Storages;
  std::vector<PlacementResource> Resources;
};

/// How the solver got there (reports and benchmarks).
struct PlacementStats {
  unsigned Items = 0;
  /// Items with one candidate, fixed up front.
  unsigned Fixed = 0;
  /// Items removed exactly by variable elimination (not tied to a
  /// capacity).
  unsigned Eliminated = 0;
  /// Items and cost terms over several items left after elimination (0
  /// when elimination decided everything).
  unsigned CoreItems = 0, CoreEdges = 0;
  /// How the core was solved.
  enum Method { None, Enumeration, Pareto, Z3 } CoreMethod = None;
};

/// "none", "branch and bound", "Pareto elimination", "Z3".
const char *getCoreMethodName(PlacementStats::Method M);

struct PlacementResult {
  /// Per item, the chosen class (an index into Classes).
  std::vector<unsigned> Class;
  double Objective = 0;
  PlacementStats Stats;
};

struct PlacementSolverOptions {
  /// Eliminate items exactly before Z3 sees the rest (tests turn it off to
  /// check the Z3 encoding alone).
  bool Eliminate = true;
  /// Largest table (joint assignments of an eliminated item's neighbours)
  /// an elimination may create; beyond it the item is left to Z3.
  double MaxEliminationTable = 4096;
  /// Cores with at most this many joint assignments are searched by
  /// branch and bound instead of Z3 (whose first context alone costs tens
  /// of milliseconds); 0 sends every core to Z3.
  double MaxEnumeration = 65536;
  /// Larger cores are solved by Pareto elimination while its lists stay
  /// under this many points, else by Z3; 0 sends them to Z3.
  size_t MaxParetoPoints = 50000;
};

/// Solves \p R to optimality. Errors: a malformed request (the message says
/// which field), an item without candidates (names it), and an infeasible
/// one: the message names the capacity that binds, what it needs at least
/// and what it has, e.g. "HBM capacity binds: at least 71.3 GiB must stay in
/// HBM (largest: 'wte' 40.0 GiB, ...) but 62.0 GiB is free".
llvm::Expected<PlacementResult>
solvePlacement(const PlacementRequest &R,
               const PlacementSolverOptions &Opts = PlacementSolverOptions());

/// Per resource, the bytes it holds whatever the placement: storages that
/// some reader can only read from there.
std::vector<double> computeUnavoidableLoads(const PlacementRequest &R);

/// The cost of an assignment and what it breaks.
struct PlacementEvaluation {
  double ComputeSeconds = 0, TransferSeconds = 0;
  double Objective = 0;
  /// Bytes each resource holds.
  std::vector<double> ResourceBytes;
  /// Empty when the assignment is valid and feasible.
  std::vector<std::string> Violations;
};

/// Recomputes the objective of \p Class (one class per item) and lists
/// violations: wrong size, a class that is not a candidate, an exceeded
/// capacity.
PlacementEvaluation evaluatePlacement(const PlacementRequest &R,
                                      const std::vector<unsigned> &Class);

/// What one item costs on each class with every other item where \p Class
/// puts it: its own time (infinite where it is not a candidate) and the
/// transfers on its edges. At an optimum no single item can move to a
/// cheaper total unless the move overflows a capacity, which is what
/// explanations ("hbm_pim would save 1.2 us but add 4.0 us of transfers")
/// are made of.
struct ItemCosts {
  std::vector<double> Compute, Transfer; ///< Per class.
};
std::vector<ItemCosts> computeItemCosts(const PlacementRequest &R,
                                        const std::vector<unsigned> &Class);

} // namespace loom

#endif // LOOM_SOLVER_PLACEMENT_H
