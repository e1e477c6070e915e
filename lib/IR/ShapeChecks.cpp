//===- ShapeChecks.cpp - Shape facts ONNX shape inference does not check --===//
#include "loom/IR/ShapeChecks.h"
#include "loom/IR/NodeLabel.h"

using namespace llvm;

namespace loom {

Error checkStaticShapes(const Graph &G) {
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    if (!N.getDomain().empty() && N.getDomain() != "ai.onnx")
      continue;
    if (N.getOpType() != "Reshape" || N.getNumInputs() < 1 ||
        N.getNumOutputs() < 1 || !N.getInput(0) || !N.getOutput(0))
      continue;
    const TensorType &In = N.getInput(0)->Type;
    const TensorType &Out = N.getOutput(0)->Type;
    if (!In.isStatic() || !Out.isStatic())
      continue;
    Optional<int64_t> NI = In.getNumElements(), NO = Out.getNumElements();
    if (NI && NO && *NI != *NO)
      return createStringError(
          inconvertibleErrorCode(),
          "%s: shape inference failed: reshapes '%s' %s (%lld elements) to "
          "%s (%lld elements): its target shape does not fit its input "
          "(written for another --batch or --seq?)",
          describeNode(N).c_str(), N.getInput(0)->getName().str().c_str(),
          In.str().c_str(), (long long)*NI, Out.str().c_str(), (long long)*NO);
  }
  return Error::success();
}

} // namespace loom
