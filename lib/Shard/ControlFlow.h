//===- ControlFlow.h - Loop/If/Scan in a role graph -------------*- C++ -*-===//
//
// Control-flow nodes are emitted replicated: the role graph holds the node
// with its bodies copied whole (types and shapes as in the source), and the
// values the bodies read from the enclosing graph supplied whole first.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SHARD_CONTROLFLOW_H
#define LOOM_SHARD_CONTROLFLOW_H

#include "loom/IR/Subgraphs.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

namespace loom {

/// Adds a copy of control-flow node \p N to \p G reading \p In and
/// producing \p OutNames; its subgraphs are cloned into \p G, their
/// outer-scope reads taken through \p Outer (source value -> value of
/// \p G). Fails, naming the node and the value, when a captured value has
/// no entry in \p Outer. Output types are left to the caller.
llvm::Expected<Node *>
emitControlFlowNode(Graph &G, const Node &N, llvm::ArrayRef<Value *> In,
                    llvm::ArrayRef<std::string> OutNames,
                    const llvm::DenseMap<const Value *, Value *> &Outer);

} // namespace loom

#endif // LOOM_SHARD_CONTROLFLOW_H
