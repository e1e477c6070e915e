//===- EmbeddingReport.h - Sharded embedding tables' reports ----*- C++ -*-===//
//
// What the plan summary, --print-costs=stage, --explain and --format json
// say about the embedding tables a plan shards over dp
// (lib/Planner/Embedding.cpp chooses and costs them).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_REPORT_EMBEDDINGREPORT_H
#define LOOM_REPORT_EMBEDDINGREPORT_H

#include "loom/Planner/Embedding.h"
#include "llvm/Support/JSON.h"

namespace llvm {
class raw_ostream;
}

namespace loom {

/// "  embedding tables over dp=N: ..." and one line per table.
void printEmbeddingCost(const EmbeddingCost &E, llvm::raw_ostream &OS);
/// "explain: embedding table ...": per table why its kind and tier won.
void explainEmbeddingCost(const EmbeddingCost &E, llvm::raw_ostream &OS);
/// JSON embedding_tables: the group, per-tier bytes, times and every
/// table's sharding, tier and terms.
llvm::json::Value embeddingCostToJSON(const EmbeddingCost &E);

} // namespace loom

#endif // LOOM_REPORT_EMBEDDINGREPORT_H
