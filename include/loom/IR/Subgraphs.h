//===- Subgraphs.h - Control-flow bodies and what they read -----*- C++ -*-===//
//
// Loop, If and Scan bodies (Graphs owned by attributes) may read values of
// enclosing graphs by name. These helpers list those reads and copy a body
// into another graph (the role builder moves control-flow nodes into rank
// graphs).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_SUBGRAPHS_H
#define LOOM_IR_SUBGRAPHS_H

#include "loom/IR/Graph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include <memory>
#include <vector>

namespace loom {

/// A copy of subgraph \p From owned by \p NewParent (a Loop/If/Scan body
/// moved into another graph): its reads of enclosing graphs go through
/// \p Outer, which must hold every captured value (getCapturedValues).
std::unique_ptr<Graph>
cloneSubgraph(const Graph &From, Graph &NewParent,
              const llvm::DenseMap<const Value *, Value *> &Outer);

/// The values of enclosing graphs that \p N's subgraphs (at any depth) read
/// by name, in order of first use: a control-flow node's implicit inputs.
std::vector<const Value *> getCapturedValues(const Node &N);
/// Whether \p N has a Graph or Graphs attribute (Loop, If, Scan).
bool hasSubgraphs(const Node &N);
/// Adds every value name defined inside \p G's subgraphs (at any depth).
void collectSubgraphValueNames(const Graph &G, llvm::StringSet<> &Names);

} // namespace loom

#endif // LOOM_IR_SUBGRAPHS_H
