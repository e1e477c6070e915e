//===- SearchReport.h - The search's text and JSON reports ------*- C++ -*-===//
//
// What plan-parallel prints about a search (lib/Planner/Search.cpp finds
// the plans; this says what it found).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_REPORT_SEARCHREPORT_H
#define LOOM_REPORT_SEARCHREPORT_H

#include "loom/Planner/Search.h"

namespace loom {

/// Why \p P leaves devices idle on \p Devices (empty when it uses them
/// all): "8 of 128 devices idle: tp*pp = 24 does not divide 128, so at most
/// 5 replicas (120 devices)". \p BestAll is the best plan on every device;
/// when null, \p TriedAll says the search had candidates on every device
/// (none fit) rather than none at all (a --plan, or not searched).
/// \p StaticBatch: the model's batch dim is static, so dp = 1
/// (loom/Plan/BatchSplit.h).
std::string describeIdleDevices(const ParallelPlan &P, uint64_t Devices,
                                int64_t Batch, const PlanCost *BestAll,
                                bool TriedAll = false,
                                bool StaticBatch = false);

//===-- Reports (plan-parallel) -------------------------------------------===//

/// The chosen plan, its stages, predicted numbers and cost breakdown, and
/// how the search went (counts only: deterministic).
void printChosenPlan(const SearchResult &R, llvm::raw_ostream &OS);
/// --top K: rank, step time, tokens/s (or samples/s), MFU, memory per device,
/// dominant cost term and plan string of the best K plans.
void printTopPlans(const SearchResult &R, unsigned K, llvm::raw_ostream &OS);
/// --explain: why the winner beats the best plan with other degrees (and
/// the next plan overall), term by term, and the constraints that shaped
/// the space.
void printExplanation(const SearchResult &R, llvm::raw_ostream &OS);

/// --format json: the chosen plan (degrees, stages, predicted numbers,
/// breakdown), how the search went, the experts, the best \p K plans
/// ("top"), and with \p Explain the explanation's sentences. Keys:
/// plan{tp,pp,dp,ep,sp,micro_batch_size,num_micro_batches,virtual_stages,
/// recompute,zero_stage,grad_dtype,axis_order,stage_layers}, plan_string,
/// step_time_s, tokens_per_s or samples_per_s, mfu, max_memory_bytes,
/// hbm_bytes, breakdown{compute_s, tp_comm_s,
/// ep_comm_s,bubble_s,dp_comm_s,optimizer_s,dominant},
/// search{candidates,simulated,...}, experts{...}, uncosted{...}, top[],
/// explain[].
/// Deterministic (no wall time).
void printSearchJSON(const SearchResult &R, unsigned K, bool Explain,
                     llvm::raw_ostream &OS);

} // namespace loom

#endif // LOOM_REPORT_SEARCHREPORT_H
