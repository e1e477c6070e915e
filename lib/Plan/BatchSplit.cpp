//===- BatchSplit.cpp - Which batch splits graphs can be emitted for ------===//
#include "loom/Plan/BatchSplit.h"

using namespace llvm;

namespace loom {

Error checkBatchSplit(bool SymbolicBatch, uint64_t DP, uint64_t NMB) {
  if (isBatchSplitEmittable(SymbolicBatch, DP, NMB))
    return Error::success();
  return createStringError(inconvertibleErrorCode(),
                           "the model's batch dim is static; graphs for "
                           "dp=%llu x nmb=%llu micro-batches need a symbolic "
                           "batch dim",
                           (unsigned long long)DP, (unsigned long long)NMB);
}

} // namespace loom
