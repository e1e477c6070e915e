//===- EmbeddingShards.h - One dp rank's embedding table shard --*- C++ -*-===//
//
// Issue 17 item 2: the bytes and shape of the shard of an embedding table
// (loom/Plan/EmbeddingPlan.h) that dp rank DPR of a group of N holds, for the
// role builder (RoleEmbeddings.cpp). Row-wise: rows [r*C, (r+1)*C) with
// C = ceil(Rows / N), the ranks past the last row padded with zero rows
// (the lookup masks them); column-wise: all rows, columns
// [r*Dim/N, (r+1)*Dim/N) (N divides Dim; the search refuses it otherwise);
// table-wise: the whole table.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SHARD_EMBEDDINGSHARDS_H
#define LOOM_SHARD_EMBEDDINGSHARDS_H

#include "loom/IR/Graph.h"
#include "loom/Plan/EmbeddingPlan.h"
#include "llvm/Support/Error.h"
#include <memory>

namespace loom {

struct EmbeddingShardData {
  TensorType Type;
  /// Null when the table has no data (a shape-only model).
  std::shared_ptr<const TensorData> Data;
  /// Row-wise: the first global row this shard holds and its row count
  /// (padding included).
  int64_t FirstRow = 0, Rows = 0;
};

/// The shard of table \p W (kind \p K) on dp rank \p DPR of \p N.
llvm::Expected<EmbeddingShardData>
getEmbeddingShardData(const Value &W, EmbShardKind K, unsigned N, unsigned DPR);

} // namespace loom

#endif // LOOM_SHARD_EMBEDDINGSHARDS_H
