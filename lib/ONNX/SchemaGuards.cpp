//===- SchemaGuards.cpp - Rank checks ahead of ONNX's conv/pool inference -===//
//
// ONNX 1.12's legacy convolution and pooling shape inference (Conv-1,
// MaxPool-1/8, AveragePool-1/7, ...) indexes the input's dims by the
// weight's rank and by the attribute lists without checking them: a Conv
// whose input is rank 3 and weight rank 4 reads past the end of the input
// shape and crashes (found by loom-fuzz-onnx-text through the opset-3 to 7
// upgrade; the same ops run in the infer-shapes pass for opsets 7-10).
// Every schema of these ops gets a check first that turns such a node into
// an ONNX inference error (the importer's and infer-shapes' named errors).
//
//===----------------------------------------------------------------------===//
#include "ProtoTensorData.h"
#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"
#include <mutex>
#include <set>

namespace loom {

using namespace onnx;

/// Input \p W is the weight (-1: none).
static void checkConvPoolRanks(InferenceContext &Ctx, int W) {
  if (!hasInputShape(Ctx, 0))
    return;
  int Rank = getInputShape(Ctx, 0).dim_size();
  if (Rank < 2)
    fail_shape_inference("input has rank ", Rank,
                         "; convolution and pooling need at least 2 (N, C)");
  if (W >= 0 && (int)Ctx.getNumInputs() > W && hasInputShape(Ctx, W) &&
      getInputShape(Ctx, W).dim_size() != Rank)
    fail_shape_inference("weight has rank ", getInputShape(Ctx, W).dim_size(),
                         " but the input has rank ", Rank);
  int Spatial = Rank - 2;
  for (const char *Name : {"kernel_shape", "strides", "dilations", "pads",
                           "output_padding", "output_shape"}) {
    const AttributeProto *A = Ctx.getAttribute(Name);
    if (!A)
      continue;
    int Want = std::string(Name) == "pads" ? 2 * Spatial : Spatial;
    if (A->ints_size() != Want &&
        !(std::string(Name) == "output_shape" && A->ints_size() == Rank))
      fail_shape_inference("attribute ", Name, " has ", A->ints_size(),
                           " values; the input's ", Spatial,
                           " spatial dims need ", Want);
  }
}

void guardConvPoolShapeInference() {
  static std::once_flag Once;
  std::call_once(Once, [] {
    const std::pair<const char *, int> Ops[] = {
        {"Conv", 1},        {"ConvTranspose", 1}, {"ConvInteger", 1},
        {"QLinearConv", 3}, {"MaxPool", -1},      {"AveragePool", -1},
        {"LpPool", -1},     {"MaxRoiPool", -1},   {"MaxUnpool", -1}};
    int MaxOpset =
        OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second;
    std::set<const OpSchema *> Done;
    for (auto [Op, W] : Ops)
      for (int V = 1; V <= MaxOpset; ++V) {
        const OpSchema *S = OpSchemaRegistry::Schema(Op, V, "");
        if (!S || !Done.insert(S).second ||
            !S->has_type_and_shape_inference_function())
          continue;
        InferenceFunction Orig = S->GetTypeAndShapeInferenceFunction();
        int Weight = W;
        // The registry hands out const schemas; replacing the inference
        // function once, before any inference runs, is what ONNX's own
        // schema registration does.
        const_cast<OpSchema *>(S)->TypeAndShapeInferenceFunction(
            [Orig, Weight](InferenceContext &Ctx) {
              checkConvPoolRanks(Ctx, Weight);
              Orig(Ctx);
            });
      }
  });
}

} // namespace loom
