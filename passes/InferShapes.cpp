//===- InferShapes.cpp - ONNX shape inference over the IR -----------------===//
//
// Runs ONNX's own shape inference (strict, with data propagation, which
// follows Shape->Gather->Concat chains) and merges its results into the IR.
// fold-shape-arith reruns it as constants appear.
//
//===----------------------------------------------------------------------===//
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"

using namespace llvm;

namespace loom {
namespace {

class InferShapesPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    Expected<unsigned> Changed = inferShapes(*CU.M);
    if (!Changed)
      return Changed.takeError();
    return Error::success();
  }
};

} // namespace

std::unique_ptr<Pass> createInferShapesPass() {
  return std::make_unique<InferShapesPass>();
}

} // namespace loom
