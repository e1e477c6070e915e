//===- BatchSplit.h - Batch splits that can be emitted ----------*- C++ -*-===//
//
// The role graphs hold one micro-batch: shard binds the model as imported
// at the micro-batch size. A model whose batch dim is static (no symbol to
// bind) is emitted only for one micro-batch of the whole batch, dp = nmb =
// 1. One rule, read by the shard pass (which refuses) and by the search
// (which ranks only what shard emits, issue 30), so that the two cannot
// drift apart.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_BATCHSPLIT_H
#define LOOM_PLAN_BATCHSPLIT_H

#include "llvm/Support/Error.h"
#include <cstdint>

namespace loom {

/// Graphs for \p DP replicas x \p NMB micro-batches can be emitted.
inline bool isBatchSplitEmittable(bool SymbolicBatch, uint64_t DP,
                                  uint64_t NMB) {
  return SymbolicBatch || DP * NMB == 1;
}

/// The same rule as an error naming the plan's split.
llvm::Error checkBatchSplit(bool SymbolicBatch, uint64_t DP, uint64_t NMB);

/// The rule in words, for the search's explanations.
inline const char *getStaticBatchRule() {
  return "dp = 1 and nmb = 1 (the model's batch dim is static; graphs for "
         "several micro-batches need a symbolic batch dim)";
}

} // namespace loom

#endif // LOOM_PLAN_BATCHSPLIT_H
