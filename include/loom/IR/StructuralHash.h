//===- StructuralHash.h - Name-free hashes of subgraphs ---------*- C++ -*-===//
//
// A hash of a set of nodes that two writings of the same computation share
// and two different computations do not: op kinds, attributes, result types,
// operand positions and where each operand comes from (another node of the
// set, hashed the same way; a parameter by its type; a constant by its type,
// and by its values only when they are few integers, which set shapes; any
// other value from outside the set by its type). Value and node names, the
// identity of parameters (shared, deduplicated or copied weights) and the
// order the exporter listed independent nodes in play no part. Each node's
// hash covers everything upstream of it inside the set (a Merkle hash over
// the DAG, the limit of Weisfeiler-Lehman refinement on an acyclic graph);
// the set's hash is that of the sorted multiset of its nodes' hashes.
// Constant nodes are not hashed as nodes: whether the exporter wrote one
// per use or one for all is not structure.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_STRUCTURALHASH_H
#define LOOM_IR_STRUCTURALHASH_H

#include "loom/IR/Graph.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include <map>
#include <string>

namespace loom {

/// The structure of a set of nodes: its hash, and what a report needs to
/// say how two differ.
struct StructureSummary {
  uint64_t Hash = 0;
  unsigned NumNodes = 0; ///< Not counting Constant nodes.
  std::map<std::string, unsigned> OpCounts;
};

/// Hashes \p Nodes (in topological order, all of one graph).
StructureSummary hashStructure(llvm::ArrayRef<const Node *> Nodes);

/// "+Slice x4, +Concat x2, -Identity x1": the op counts \p B has more
/// (+) or fewer (-) of than \p A, most first; "" when equal.
std::string describeStructureDifference(const StructureSummary &A,
                                        const StructureSummary &B);

} // namespace loom

#endif // LOOM_IR_STRUCTURALHASH_H
