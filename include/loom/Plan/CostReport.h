//===- CostReport.h - --print-costs output, text and JSON -------*- C++ -*-===//
//
// Deterministic, FileCheck-friendly cost breakdowns: per node, per layer,
// and per pipeline stage for a plan. Nodes without a cost rule are listed
// by name and counted in the summary line of every report.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_COSTREPORT_H
#define LOOM_PLAN_COSTREPORT_H

#include "loom/Plan/PlanCost.h"

namespace llvm {
class raw_ostream;
}

namespace loom {

enum class ReportFormat { Text, JSON };

void printNodeCosts(const Graph &G, const NodeCostMap &Costs,
                    const HardwareModel &HW, ReportFormat F,
                    llvm::raw_ostream &OS);
void printLayerCosts(const Graph &G, llvm::ArrayRef<LayerInfo> Layers,
                     const NodeCostMap &Costs, ReportFormat F,
                     llvm::raw_ostream &OS);
void printStageCosts(const Graph &G, const NodeCostMap &Costs,
                     const PlanCost &PC, ReportFormat F,
                     llvm::raw_ostream &OS);

} // namespace loom

#endif // LOOM_PLAN_COSTREPORT_H
