//===- CostReport.h - --print-costs output, text and JSON -------*- C++ -*-===//
//
// Deterministic, FileCheck-friendly cost breakdowns: per node, per layer,
// and per pipeline stage for a plan. Nodes without a cost rule are listed
// by name and counted in the summary line of every report, with their share
// of the model's forward FLOPs and parameters (summarizeUncosted): work the
// cost model cannot see must never pass for a costed plan.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_COSTREPORT_H
#define LOOM_PLAN_COSTREPORT_H

#include "loom/Plan/PlanCost.h"

namespace llvm {
class raw_ostream;
namespace json {
class Object;
}
} // namespace llvm

namespace loom {

enum class ReportFormat { Text, JSON };

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

/// {nodes, total_nodes, node_share, flops_share_at_least, param_share,
/// params}: the "uncosted" key of every JSON report.
llvm::json::Object uncostedJSON(const UncostedWork &U);

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

/// \p TPSpecs (a costed plan at tp > 1): the spec of each node's first
/// output as the evaluator costs it (PlanEvaluator::getTPSplit), printed
/// as tp=R|S(d)|P -- what the emitted graphs hold of it.
void printNodeCosts(
    const Graph &G, const NodeCostMap &Costs, const HardwareModel &HW,
    ReportFormat F, llvm::raw_ostream &OS,
    const llvm::DenseMap<const Node *, AxisSpec> *TPSpecs = nullptr);
void printLayerCosts(const Graph &G, llvm::ArrayRef<LayerInfo> Layers,
                     const NodeCostMap &Costs, ReportFormat F,
                     llvm::raw_ostream &OS);
void printStageCosts(const Graph &G, const NodeCostMap &Costs,
                     const PlanCost &PC, ReportFormat F,
                     llvm::raw_ostream &OS);

} // namespace loom

#endif // LOOM_PLAN_COSTREPORT_H
