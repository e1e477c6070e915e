//===- Embedding.h - Embedding tables sharded across devices ----*- C++ -*-===//
//
// Issue 17 item 2. A recommender's embedding tables (TorchRec's "embedding
// tables": a weight initializer read only by row lookups) can be far larger
// than one card; they are sharded over the plan's dp group instead of being
// replicated like the dense part (anchor: TorchRec's sharding planner,
// torchrec/distributed/planner: table-wise, row-wise and column-wise
// sharding types, each shard given a storage tier and a cost). Loom's model:
//
//  * table-wise: the whole table on one rank of the group (the rank with
//    the least embedding bytes so far); it looks up every id of the
//    group's micro-batch.
//  * row-wise: rows split evenly (ceil) over the group; each rank looks up
//    the ids in its row range (on average 1/N of the group's ids).
//  * column-wise: the embedding dim split evenly over the group (N must
//    divide it); each rank looks up every id of the group at Dim/N columns.
//
// Each shard lives in HBM, host DRAM or SSD, the nearest tier that still
// has room on every rank holding it (tables hottest per byte first). A
// lookup reads the row rounded up to the tier's access granule at the
// tier's YAML bandwidth, plus the tier's latency once per micro-batch;
// training also reads and writes the looked-up rows' training state
// (16 B per parameter) for the sparse update.
//
// The exchange is what the emitted graphs do (lib/Shard/RoleEmbeddings.cpp):
// the group's ids are all-gathered (int64), and row- and table-wise shards'
// partial embeddings of the group's micro-batch are reduce-scattered (the
// ranks that do not hold a row contribute zeros); column-wise slices go
// back by an all-to-all. Training sends the gradients back the reverse
// way (all-gather, resp. all-to-all, of the same bytes).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_EMBEDDING_H
#define LOOM_PLANNER_EMBEDDING_H

#include "loom/Cost/Collectives.h"
#include "loom/Cost/Offload.h"
#include "loom/Plan/EmbeddingPlan.h"
#include "loom/Plan/ParallelPlan.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace loom {

class Graph;
class Node;
class Value;
struct HardwareModel;

struct EmbeddingTable {
  const Value *Weight = nullptr;
  std::string Name;
  int64_t Rows = 0, Dim = 0;
  /// Bytes of one element of the table.
  double ElemBytes = 4;
  /// Ids looked up per sample (all lookup nodes of the table together).
  double LookupsPerSample = 0;
  /// The lookups: Gather(table, ids) on axis 0, or GatherElements.
  std::vector<const Node *> Lookups;
  /// detect-layers' layer of the first lookup (-1 when none).
  int Layer = -1;
  double getParams() const { return (double)Rows * Dim; }
};

/// The tables of \p G: rank-2 floating-point parameters read only as the
/// data input of Gather (axis 0) or GatherElements (axis 0, same-width
/// indices), at the bound global batch \p Batch.
std::vector<EmbeddingTable> findEmbeddingTables(const Graph &G, int64_t Batch);

/// Bytes per parameter a table keeps at rest: 16 when training (bf16
/// weight and gradient, fp32 master and Adam moments, DESIGN §10), its own
/// element bytes otherwise.
double getTableBytesPerParam(const EmbeddingTable &T, bool Train);

/// Under emb=auto, whether \p T is sharded: no tier of one card (usable
/// HBM, host DRAM, SSD) holds it whole.
bool mustShardTable(const EmbeddingTable &T, const HardwareModel &HW,
                    bool Train);
/// Whether \p T is sharded under \p Mode.
bool isShardedTable(const EmbeddingTable &T, EmbeddingMode Mode,
                    const HardwareModel &HW, bool Train);

struct EmbeddingInputs {
  bool Train = true;
  EmbeddingMode Mode = EmbeddingMode::Auto;
  /// The dp group and its shape on the topology.
  unsigned Group = 1;
  GroupShape Shape;
  /// Samples per rank per micro-batch.
  double MicroBatch = 1;
  /// Per rank, what each tier has left for table shards.
  double HBMFree = 0, HostFree = 0, SSDFree = 0;
};

/// Chooses every sharded table's kind (by cost, or \p In.Mode) and tier.
EmbeddingCost planEmbeddings(llvm::ArrayRef<EmbeddingTable> Tables,
                             const EmbeddingInputs &In,
                             const HardwareModel &HW);

/// Adds \p From (another pipeline stage's tables) to \p Into: tables
/// appended, bytes per rank the larger (other devices), times summed.
void mergeEmbeddingCost(EmbeddingCost &Into, EmbeddingCost From);

/// Access granule of a tier (bytes read per row lookup are rounded up to
/// it) and its bandwidth and latency from the YAML.
double getTierGranule(MemoryTier T);

} // namespace loom

#endif // LOOM_PLANNER_EMBEDDING_H
