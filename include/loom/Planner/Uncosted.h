//===- Uncosted.h - The work the cost model cannot see ----------*- C++ -*-===//
//
// Nodes without a cost rule are listed by name and counted in every
// report, with their share of the model's forward FLOPs and parameters:
// work the cost model cannot see must never pass for a costed plan.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_UNCOSTED_H
#define LOOM_PLANNER_UNCOSTED_H

#include "loom/Planner/PlanCost.h"

namespace loom {

/// The work without a cost rule, against the whole graph.
struct UncostedWork {
  unsigned Nodes = 0, TotalNodes = 0;
  /// Forward FLOPs of the costed nodes, and an estimate of the uncosted
  /// ones from whatever of their shapes is known (unknown dims count as 1,
  /// so it is a lower bound).
  double CostedFlops = 0, UncostedFlops = 0;
  /// All parameter elements, and those read by a node without a rule.
  double Params = 0, UncostedParams = 0;
  std::vector<const Node *> NoRule;
  /// The first dim that stayed symbolic or unknown among the uncosted
  /// nodes' operands: its symbol (empty when unnamed), value and node.
  std::string Symbol;
  const Value *SymbolicValue = nullptr;
  unsigned SymbolicDim = 0;
  const Node *SymbolicNode = nullptr;

  double getFlopShare() const {
    double T = CostedFlops + UncostedFlops;
    return T > 0 ? UncostedFlops / T : 0;
  }
  double getParamShare() const {
    return Params > 0 ? UncostedParams / Params : 0;
  }
  double getNodeShare() const {
    return TotalNodes ? (double)Nodes / TotalNodes : 0;
  }
};
UncostedWork summarizeUncosted(const Graph &G, const NodeCostMap &Costs);
/// "704 of 2310 nodes, >= 0.3% of forward FLOPs, 45.2% of parameters".
std::string describeUncosted(const UncostedWork &U);

/// Refuses a plan costed without part of the model: more than
/// \p Threshold of the forward FLOPs or of the parameters have no cost
/// rule. The message names the first nodes, the dim that stayed symbolic
/// and how to bind it, and --allow-uncosted.
llvm::Error checkUncosted(const UncostedWork &U, double Threshold = 0.01);

/// The error checkUncosted returns (plan-parallel: exit 1, but reports
/// that need no plan still print).
class UncostedWorkError : public llvm::ErrorInfo<UncostedWorkError> {
public:
  static char ID;
  explicit UncostedWorkError(std::string Msg) : Msg(std::move(Msg)) {}
  void log(llvm::raw_ostream &OS) const override;
  std::error_code convertToErrorCode() const override;

private:
  std::string Msg;
};

} // namespace loom

#endif // LOOM_PLANNER_UNCOSTED_H
