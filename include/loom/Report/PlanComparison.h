//===- PlanComparison.h - Plans side by side, term by term ------*- C++ -*-===//
//
// --compare PLAN and --compare-hw: the predicted step of each plan split
// into the same terms as the search's breakdown (compute, TP, EP and DP
// communication, bubble, optimizer), with tokens/s, MFU, memory and the
// devices used, beside a reference column, and each value's ratio to the
// reference.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_PLANCOMPARISON_H
#define LOOM_PLAN_PLANCOMPARISON_H

#include "loom/Planner/PlanCost.h"
#include "llvm/ADT/ArrayRef.h"
#include <string>

namespace llvm {
class raw_ostream;
}

namespace loom {

/// One column: a label ("best", "[1]", a cluster's name), what it is ("the
/// search without constraints", "--compare tp=8,pp=3"), and its plan (null:
/// nothing fits).
struct ComparisonColumn {
  std::string Label, What;
  const PlanCost *Cost = nullptr;
};

/// Prints "compare:" lines naming each column's plan, then a table with a
/// row per term and, for every column after the first, its ratio to the
/// first ("1.25x"; "-" where the first is 0 or a column has no plan).
void printComparison(llvm::ArrayRef<ComparisonColumn> Columns,
                     llvm::raw_ostream &OS);

} // namespace loom

#endif // LOOM_PLAN_PLANCOMPARISON_H
