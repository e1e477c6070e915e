//===- EmbeddingPlan.cpp - How a plan shards its embedding tables --------===//
#include "loom/Plan/EmbeddingPlan.h"

using namespace llvm;

namespace loom {

StringRef getEmbShardKindName(EmbShardKind K) {
  switch (K) {
  case EmbShardKind::Table:
    return "table";
  case EmbShardKind::Row:
    return "row";
  case EmbShardKind::Col:
    return "col";
  }
  return "row";
}

} // namespace loom
