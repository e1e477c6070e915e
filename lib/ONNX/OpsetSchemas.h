//===- OpsetSchemas.h - What the two opset-schema files share ---*- C++ -*-===//
//
// Private to lib/ONNX: the type lists and helpers that OpsetSchemas.cpp
// (opsets 18 and what it rebuilds) and OpsetSchemas19To23.cpp both use, so
// that they are written once.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_ONNX_OPSETSCHEMAS_H
#define LOOM_LIB_ONNX_OPSETSCHEMAS_H

#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"
#include <iterator>
#include <string>
#include <vector>

namespace onnx {
// Exported by libonnx (onnx/defs/nn/defs.cc), not declared in its headers.
void convPoolShapeInference(InferenceContext &Ctx, bool UseDilation,
                            bool RequireKernelShape, int Input1Idx,
                            int Input2Idx);
} // namespace onnx

namespace loom {
namespace opset {

inline const char *const NumericTypes[] = {
    "tensor(float)", "tensor(float16)", "tensor(bfloat16)", "tensor(double)",
    "tensor(int8)",  "tensor(int16)",   "tensor(int32)",    "tensor(int64)",
    "tensor(uint8)", "tensor(uint16)",  "tensor(uint32)",   "tensor(uint64)"};
inline const char *const FloatTypes[] = {"tensor(float)", "tensor(float16)",
                                         "tensor(bfloat16)", "tensor(double)"};
inline const char *const IntTypes[] = {
    "tensor(int8)",  "tensor(int16)",  "tensor(int32)",  "tensor(int64)",
    "tensor(uint8)", "tensor(uint16)", "tensor(uint32)", "tensor(uint64)"};

template <size_t N> std::vector<std::string> types(const char *const (&A)[N]) {
  return std::vector<std::string>(std::begin(A), std::end(A));
}
/// The numeric types, bool and string.
inline std::vector<std::string> allTypes() {
  std::vector<std::string> T = types(NumericTypes);
  T.push_back("tensor(bool)");
  T.push_back("tensor(string)");
  return T;
}

/// One schema as data (the tables of OpsetSchemas*.cpp and MLSchemas.cpp).
/// Formal parameters are "name:type" ("X:T", "split:tensor(int64)"), with
/// the suffix "?" for an optional one, "..." for a variadic one of one
/// type, "...*" for a variadic one of mixed types. Attributes are
/// "name:kind" (kind: int, float, string, ints, floats, strings, tensor),
/// followed by "=value" for a default (int, float or string kinds), "?"
/// for an optional one without default; neither: required.
struct SchemaSpec {
  const char *Name;
  int Version;
  std::vector<const char *> Inputs, Outputs, Attrs;
  std::vector<std::pair<const char *, std::vector<std::string>>> Types;
  onnx::InferenceFunction Infer;
};

/// The row of \p Table named \p Name, as version \p Version with the
/// attributes \p NewAttrs added (an op whose next version only adds
/// attributes).
SchemaSpec revised(const std::vector<SchemaSpec> &Table, const char *Name,
                   int Version, std::vector<const char *> NewAttrs);

/// Adds \p Attrs (SchemaSpec's notation) to \p S (SchemaTable.cpp).
void addAttributes(onnx::OpSchema &S, const std::vector<const char *> &Attrs);

/// Pooling with dilations (LpPool-18, AveragePool-19): input 0's type, the
/// shape by ONNX's convolution/pooling rule.
inline void inferPoolWithDilations(onnx::InferenceContext &Ctx) {
  onnx::propagateElemTypeFromInputToOutput(Ctx, 0, 0);
  onnx::convPoolShapeInference(Ctx, true, true, 0, 1);
}

/// \p Spec in \p Domain as an ONNX schema, its doc naming Loom as the one
/// that registered it (SchemaTable.cpp).
onnx::OpSchema buildSchema(const SchemaSpec &Spec, const char *Domain = "");
/// Appends every schema of \p Table, in \p Domain, to \p Out.
void addSchemas(std::vector<onnx::OpSchema> &Out,
                const std::vector<SchemaSpec> &Table, const char *Domain = "");

} // namespace opset

/// The ONNX 1.12 schema \p From at \p FromVersion, rebuilt as \p Name at
/// \p Version, with the attributes \p NewAttrs (SchemaSpec's notation)
/// added and, if given, the inference function \p Infer instead of the
/// old one (OpsetSchemas.cpp).
onnx::OpSchema cloneSchema(const char *From, int FromVersion, const char *Name,
                           int Version,
                           const std::vector<const char *> &NewAttrs = {},
                           onnx::InferenceFunction Infer = nullptr);
/// Opsets 19-23's schemas (OpsetSchemas19To23.cpp).
void addOpset19To23Schemas(std::vector<onnx::OpSchema> &Out);
/// ai.onnx.ml 4 and 5's schemas, and shape inference for the ONNX 1.12
/// ai.onnx.ml schemas that lack it (MLSchemas.cpp).
void addMLSchemas(std::vector<onnx::OpSchema> &Out);

} // namespace loom

#endif // LOOM_LIB_ONNX_OPSETSCHEMAS_H
