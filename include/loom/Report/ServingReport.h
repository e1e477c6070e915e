//===- ServingReport.h - The serving search's reports -----------*- C++ -*-===//
//
// What --mode serve prints (lib/Planner/Serving.cpp finds the plans).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_REPORT_SERVINGREPORT_H
#define LOOM_REPORT_SERVINGREPORT_H

#include "loom/Planner/Serving.h"

namespace loom {

/// Why no plan meets the SLO, naming the binding term of the plan closest
/// to it.
std::string describeNoServingPlan(const ServingResult &R);

/// Which layout won (pooled or disaggregated) and why, against the best of
/// the other: lines for report.txt, --explain, JSON and HTML; none without
/// a disaggregated plan.
std::vector<std::string> describeServingLayout(const ServingResult &R);
/// The disaggregated plan's summary: its pools, TTFT term by term, TPOT,
/// the pools' rates, the KV transfer, the decode pool's cache.
void printDisaggSummary(const ServingResult &R, llvm::raw_ostream &OS);

/// The summary lines (workload, SLO, plan, TTFT, TPOT, throughput,
/// concurrency, KV cache, what binds).
void printServingSummary(const ServingResult &R, llvm::raw_ostream &OS);
/// --top K: the best plan of each of the K best (tp, pp).
void printServingTop(const ServingResult &R, unsigned K, llvm::raw_ostream &OS);
/// --explain: why the chosen plan beats the runner-up.
void printServingExplanation(const ServingResult &R, llvm::raw_ostream &OS);
/// The chosen plan at other batches: TTFT, TPOT and tokens/s (report.txt).
void printServingSweep(const ServingResult &R, llvm::raw_ostream &OS);
/// --compare under --mode serve: each plan beside the best, with ratios.
void printServingComparison(const ServingResult &R, llvm::raw_ostream &OS);
/// predicted{ttft_s, tpot_s, output_tokens_per_s, max_concurrency,
/// kv_cache_bytes, ...} of \p P.
llvm::json::Object getServingPredictedJSON(const ServingPlanCost &P);
/// --format json: plan, predicted, workload, slo, top[], explain[].
void printServingJSON(const ServingResult &R, unsigned K, bool Explain,
                      llvm::raw_ostream &OS);

} // namespace loom

#endif // LOOM_REPORT_SERVINGREPORT_H
