//===- ShapeChecks.h - Shape facts ONNX shape inference does not check ----===//
//
// ONNX shape inference takes a Reshape's target shape as given: a constant
// target written for another batch (an export with the batch baked in,
// bound with another --batch) infers a result with a different element
// count, and only the runtime fails. Loom checks what it can see statically.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_SHAPECHECKS_H
#define LOOM_IR_SHAPECHECKS_H

#include "loom/IR/Graph.h"
#include "llvm/Support/Error.h"

namespace loom {

/// The first node of \p G (not of its subgraphs) whose static input and
/// result types contradict each other, as "node 'X' (Op): shape inference
/// failed: ..." (the form of ONNX's own inference errors); success if none.
/// Checked: Reshape keeps the element count.
llvm::Error checkStaticShapes(const Graph &G);

} // namespace loom

#endif // LOOM_IR_SHAPECHECKS_H
