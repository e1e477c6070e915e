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

#include "loom/Planner/Uncosted.h"
#include "loom/Shard/Rules.h"

namespace llvm {
class raw_ostream;
namespace json {
class Object;
}
} // namespace llvm

namespace loom {

enum class ReportFormat { Text, JSON };

/// {nodes, total_nodes, node_share, flops_share_at_least, param_share,
/// params}: the "uncosted" key of every JSON report.
llvm::json::Object uncostedJSON(const UncostedWork &U);

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
                     const PlanCost &PC, ReportFormat F, llvm::raw_ostream &OS);

} // namespace loom

#endif // LOOM_PLAN_COSTREPORT_H
