//===- EmbeddingPlan.h - How a plan shards its embedding tables -*- C++ -*-===//
//
// Plan vocabulary for issue 17 item 2: the sharding kinds of an embedding
// table over the dp group and the record of each table's chosen shard
// (kind, storage tier, shard shape and its predicted times). The planner
// chooses and costs them (loom/Planner/Embedding.h); the sharder builds
// each dp rank's shard from them (loom/Shard/EmbeddingShards.h), so they
// live here, below both.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_EMBEDDINGPLAN_H
#define LOOM_PLAN_EMBEDDINGPLAN_H

#include "loom/Cost/Offload.h"
#include "loom/Plan/ParallelPlan.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <string>
#include <vector>

namespace loom {

/// How one table is split over the group.
enum class EmbShardKind : uint8_t { Table, Row, Col };
llvm::StringRef getEmbShardKindName(EmbShardKind K); // table, row, col

/// One table's sharding, as chosen.
struct EmbeddingShard {
  std::string Table;
  int64_t Rows = 0, Dim = 0;
  EmbShardKind Kind = EmbShardKind::Row;
  MemoryTier Tier = MemoryTier::HBM;
  /// Ranks holding a shard (1 for table-wise), the table-wise owner's
  /// index in the group, rows and columns of the largest shard.
  unsigned Shards = 1, Owner = 0;
  int64_t ShardRows = 0, ShardCols = 0;
  double ShardBytes = 0;
  /// Per micro-batch on the busiest rank holding it: ids looked up, their
  /// time, the sparse update's (training), and the exchange (forward:
  /// ids all-gathered + embeddings; backward: gradients).
  double Lookups = 0, LookupS = 0, UpdateS = 0;
  double IdBytes = 0, EmbBytes = 0, ExchangeFwdS = 0, ExchangeBwdS = 0;
  /// Busiest holder's lookups and update plus the exchange, per
  /// micro-batch: what the kinds are compared by.
  double Score = 0;
  /// Kinds considered and not taken, with the reason (cost or capacity).
  std::vector<std::string> Rejected;
};

/// What sharding the tables adds to a plan. Empty when there are none.
struct EmbeddingCost {
  unsigned Group = 1;
  EmbeddingMode Mode = EmbeddingMode::Auto;
  std::vector<EmbeddingShard> Tables;
  /// The most bytes one rank holds in each tier.
  double HBMBytes = 0, HostBytes = 0, SSDBytes = 0;
  /// Per micro-batch: lookups of the busiest rank plus every exchange.
  double ForwardS = 0, BackwardS = 0;
  /// Per micro-batch: the exchange part of ForwardS + BackwardS, and its
  /// forward and backward shares; the busiest rank's lookups and update.
  double ExchangeS = 0, ExchangeFwdS = 0, ExchangeBwdS = 0;
  double LookupS = 0, UpdateS = 0;
  /// Every table found a tier; else Why says which did not.
  bool Fits = true;
  std::string Why;
  bool empty() const { return Tables.empty(); }
};

} // namespace loom

#endif // LOOM_PLAN_EMBEDDINGPLAN_H
