//===- SchemaTable.cpp - ONNX schemas built from Loom's schema tables -----===//
//
// The schemas Loom registers (OpsetSchemas*.cpp, MLSchemas.cpp) are written
// as rows of data (SchemaSpec in OpsetSchemas.h), not as one builder chain
// per op; this file turns a row into an onnx::OpSchema. A malformed row is
// a programming error: it aborts at registration (once, at start-up), as
// ONNX's own registration does.
//
//===----------------------------------------------------------------------===//
#include "OpsetSchemas.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"
#include <string>

namespace loom {
namespace opset {

using namespace onnx;
using llvm::StringRef;

namespace {

[[noreturn]] void badEntry(StringRef Name, int Version, StringRef Entry) {
  llvm::report_fatal_error("schema table row " + llvm::Twine(Name) + "-" +
                           llvm::Twine(Version) + ": malformed entry '" +
                           Entry + "'");
}

[[noreturn]] void badRow(const SchemaSpec &Spec, StringRef Entry) {
  badEntry(Spec.Name, Spec.Version, Entry);
}

/// "name:type" with "?", "..." or "...*" after the type.
void addParam(OpSchema &S, const SchemaSpec &Spec, bool IsInput, int Index,
              StringRef Entry) {
  auto [Name, Type] = Entry.split(':');
  if (Name.empty() || Type.empty())
    badRow(Spec, Entry);
  OpSchema::FormalParameterOption Opt = OpSchema::Single;
  bool Homogeneous = true;
  if (Type.consume_back("...*")) {
    Opt = OpSchema::Variadic;
    Homogeneous = false;
  } else if (Type.consume_back("...")) {
    Opt = OpSchema::Variadic;
  } else if (Type.consume_back("?")) {
    Opt = OpSchema::Optional;
  }
  if (IsInput)
    S.Input(Index, Name.str(), "", Type.str(), Opt, Homogeneous);
  else
    S.Output(Index, Name.str(), "", Type.str(), Opt, Homogeneous);
}

/// "name:kind", "name:kind=value" or "name:kind?".
void addAttr(OpSchema &S, StringRef Entry) {
  auto [Name, Rest] = Entry.split(':');
  auto [Kind, Default] = Rest.split('=');
  bool HasDefault = Rest.contains('=');
  bool Optional = !HasDefault && Kind.consume_back("?");
  auto Type = llvm::StringSwitch<int>(Kind)
                  .Case("int", AttributeProto::INT)
                  .Case("float", AttributeProto::FLOAT)
                  .Case("string", AttributeProto::STRING)
                  .Case("ints", AttributeProto::INTS)
                  .Case("floats", AttributeProto::FLOATS)
                  .Case("strings", AttributeProto::STRINGS)
                  .Case("tensor", AttributeProto::TENSOR)
                  .Default(-1);
  if (Name.empty() || Type < 0)
    badEntry(S.Name(), S.SinceVersion(), Entry);
  auto T = (AttributeProto::AttributeType)Type;
  if (!HasDefault) {
    S.Attr(Name.str(), "", T, /*required=*/!Optional);
    return;
  }
  switch (T) {
  case AttributeProto::INT: {
    long long V;
    if (Default.getAsInteger(10, V))
      badEntry(S.Name(), S.SinceVersion(), Entry);
    S.Attr(Name.str(), "", T, (int64_t)V);
    return;
  }
  case AttributeProto::FLOAT:
    S.Attr(Name.str(), "", T, std::stof(Default.str()));
    return;
  case AttributeProto::STRING:
    S.Attr(Name.str(), "", T, Default.str());
    return;
  default:
    badEntry(S.Name(), S.SinceVersion(), Entry);
  }
}

} // namespace

void addAttributes(OpSchema &S, const std::vector<const char *> &Attrs) {
  for (const char *A : Attrs)
    addAttr(S, A);
}

SchemaSpec revised(const std::vector<SchemaSpec> &Table, const char *Name,
                   int Version, std::vector<const char *> NewAttrs) {
  for (const SchemaSpec &Row : Table)
    if (StringRef(Row.Name) == Name) {
      SchemaSpec S = Row;
      S.Version = Version;
      S.Attrs.insert(S.Attrs.end(), NewAttrs.begin(), NewAttrs.end());
      return S;
    }
  llvm::report_fatal_error("schema table has no row " + llvm::Twine(Name));
}

OpSchema buildSchema(const SchemaSpec &Spec, const char *Domain) {
  OpSchema S;
  S.SetName(Spec.Name).SetDomain(Domain).SinceVersion(Spec.Version);
  S.SetDoc("Registered by Loom (lib/ONNX/OpsetSchemas*.cpp, MLSchemas.cpp); "
           "see the ONNX operator documentation.");
  for (size_t I = 0; I < Spec.Inputs.size(); ++I)
    addParam(S, Spec, /*IsInput=*/true, (int)I, Spec.Inputs[I]);
  for (size_t I = 0; I < Spec.Outputs.size(); ++I)
    addParam(S, Spec, /*IsInput=*/false, (int)I, Spec.Outputs[I]);
  addAttributes(S, Spec.Attrs);
  for (const auto &[Param, Allowed] : Spec.Types)
    S.TypeConstraint(Param, Allowed, "");
  if (Spec.Infer)
    S.TypeAndShapeInferenceFunction(Spec.Infer);
  return S;
}

void addSchemas(std::vector<OpSchema> &Out,
                const std::vector<SchemaSpec> &Table, const char *Domain) {
  for (const SchemaSpec &Spec : Table)
    Out.push_back(buildSchema(Spec, Domain));
}

} // namespace opset
} // namespace loom
