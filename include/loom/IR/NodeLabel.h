//===- NodeLabel.h - How messages name a node -------------------*- C++ -*-===//
//
// One way for errors and reports to name a node, as ONNX shape inference and
// the importer do: its name, or "%OUT" (its first result) when it has none.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_NODELABEL_H
#define LOOM_IR_NODELABEL_H

#include "loom/IR/Graph.h"
#include "llvm/ADT/StringRef.h"
#include <string>

namespace loom {

/// The node's name; for an unnamed node "%" and its first result's name,
/// or "<unnamed Op>" when it has no result either.
std::string getNodeLabel(const Node &N);

/// "node 'LABEL' (Op)", the prefix of an error about \p N.
std::string describeNode(const Node &N);

/// Whether \p Message already names a node ("node '...", possibly after a
/// context such as "at micro-batch size 2: "), so that a caller adding its
/// own node does not name two.
bool namesNode(llvm::StringRef Message);

} // namespace loom

#endif // LOOM_IR_NODELABEL_H
