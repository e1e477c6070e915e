//===- MLSchemas.cpp - ai.onnx.ml schemas of versions 4 and 5 -------------===//
//
// Exporters that write default-domain opsets 18-23 pair them with ai.onnx.ml
// 3, 4 or 5 (skl2onnx, onnxmltools: opset 21 goes with ai.onnx.ml 4 or 5).
// ONNX 1.12 registers ai.onnx.ml 1-3; what changed since (onnx/defs/
// traditionalml/defs.cc and the operator changelog, ONNX 1.15-1.16):
//   4  LabelEncoder-4: keys, values and the default as tensors
//      (keys_tensor, values_tensor, default_tensor) and int16/int32 types
//      besides the lists of version 2.
//   5  TreeEnsemble-5: one tree-ensemble op with interior nodes (nodes_*)
//      and leaves (leaf_*) apart, thresholds and weights as tensors of the
//      input's type, the set-membership mode; output [N, n_targets].
//      TreeEnsembleClassifier and TreeEnsembleRegressor are deprecated at
//      5: registered here as deprecated, so that a model using them at
//      ai.onnx.ml 5 is refused by name (ONNX Runtime refuses it too).
// Every other ai.onnx.ml op is unchanged since ONNX 1.12 (Binarizer-1,
// Scaler-1, ArrayFeatureExtractor-1, OneHotEncoder-1, ...): the registry's
// lookup returns that schema at versions 4 and 5.
//
// ONNX 1.12 gives some of those ops no shape inference (Binarizer, Scaler,
// Normalizer, Imputer, ArrayFeatureExtractor, OneHotEncoder,
// LinearRegressor, FeatureVectorizer, SVMRegressor, and only element types
// for the tree ensembles; later ONNX versions added most of them); Loom adds
// it where the output shape follows from the input and the attributes, as the
// operator documentation defines them. (SVMClassifier's score width depends
// on the runtime's binary-class handling and is left to ONNX's type-only
// rule.)
//
//===----------------------------------------------------------------------===//
#include "OpsetSchemas.h"
#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"
#include <mutex>
#include <tuple>

namespace loom {

using namespace onnx;
using namespace opset;

namespace {

const char *const ML = AI_ONNX_ML_DOMAIN;

/// Element type and length of the first of \p Names the node sets: a 1-D
/// tensor attribute, or a list (strings, ints, floats); {0, 0} if none.
std::pair<int32_t, int64_t>
attrTypeAndLength(InferenceContext &Ctx,
                  std::initializer_list<const char *> Names) {
  for (const char *Name : Names) {
    const AttributeProto *A = Ctx.getAttribute(Name);
    if (!A)
      continue;
    switch (A->type()) {
    case AttributeProto::TENSOR: {
      int64_t N = 1;
      for (int64_t D : A->t().dims())
        N *= D;
      return {A->t().data_type(), N};
    }
    case AttributeProto::STRINGS:
      return {TensorProto::STRING, A->strings_size()};
    case AttributeProto::INTS:
      return {TensorProto::INT64, A->ints_size()};
    case AttributeProto::FLOATS:
      return {TensorProto::FLOAT, A->floats_size()};
    case AttributeProto::STRING:
      return {TensorProto::STRING, 1};
    case AttributeProto::INT:
      return {TensorProto::INT64, 1};
    case AttributeProto::FLOAT:
      return {TensorProto::FLOAT, 1};
    default:
      fail_shape_inference("attribute '", Name, "' has an unexpected type");
    }
  }
  return {0, 0};
}

int32_t inputElemType(InferenceContext &Ctx, size_t I) {
  const TypeProto *T = I < Ctx.getNumInputs() ? Ctx.getInputType(I) : nullptr;
  return T && T->has_tensor_type() ? T->tensor_type().elem_type() : 0;
}

/// LabelEncoder-4: Y has X's shape and the values' element type; keys
/// match X's type, values and keys have one length, the default (if any)
/// the values' type and one element.
void inferLabelEncoder(InferenceContext &Ctx) {
  auto [KeyType, KeyLen] = attrTypeAndLength(
      Ctx, {"keys_tensor", "keys_strings", "keys_int64s", "keys_floats"});
  if (!KeyType)
    fail_shape_inference("one of keys_tensor, keys_strings, keys_int64s, "
                         "keys_floats must be set");
  int32_t In = inputElemType(Ctx, 0);
  if (In && In != KeyType)
    fail_shape_inference("input element type ", In,
                         " differs from the keys' type ", KeyType);
  auto [ValueType, ValueLen] =
      attrTypeAndLength(Ctx, {"values_tensor", "values_strings",
                              "values_int64s", "values_floats"});
  if (!ValueType)
    fail_shape_inference("one of values_tensor, values_strings, "
                         "values_int64s, values_floats must be set");
  if (KeyLen != ValueLen)
    fail_shape_inference(KeyLen, " keys but ", ValueLen, " values");
  auto [DefaultType, DefaultLen] =
      attrTypeAndLength(Ctx, {"default_tensor", "default_string",
                              "default_int64", "default_float"});
  if (DefaultType && DefaultType != ValueType)
    fail_shape_inference("the default's element type ", DefaultType,
                         " differs from the values' type ", ValueType);
  if (Ctx.getAttribute("default_tensor") && DefaultLen != 1)
    fail_shape_inference("default_tensor must hold one element, not ",
                         DefaultLen);
  updateOutputElemType(Ctx, 0, ValueType);
  if (hasInputShape(Ctx, 0))
    propagateShapeFromInputToOutput(Ctx, 0, 0);
}

/// Checks that the node's list attribute \p Name (ints, or a 1-D tensor)
/// has \p Len entries when it is set; \p Required: it must be set.
void checkLength(InferenceContext &Ctx, const char *Name, int64_t Len,
                 bool Required) {
  const AttributeProto *A = Ctx.getAttribute(Name);
  if (!A) {
    if (Required)
      fail_shape_inference("attribute '", Name, "' is required");
    return;
  }
  int64_t N = A->type() == AttributeProto::TENSOR
                  ? (A->t().dims_size() == 1 ? A->t().dims(0) : -1)
                  : A->ints_size();
  if (N != Len)
    fail_shape_inference("attribute '", Name, "' has ", N, " entries; ",
                         "nodes_splits has ", Len);
}

/// TreeEnsemble-5's forest is well formed: every root and every branch
/// names an interior node (or a leaf, where nodes_*leafs says so) that
/// exists, and no walk from a root comes back to a node (ONNX Runtime
/// refuses such a model when it loads it; Loom says so at import).
void checkForest(InferenceContext &Ctx, int64_t NumNodes, int64_t NumLeaves) {
  std::vector<int64_t> Roots, Ids[2], Leaf[2];
  getRepeatedAttribute(Ctx, "tree_roots", Roots);
  getRepeatedAttribute(Ctx, "nodes_truenodeids", Ids[1]);
  getRepeatedAttribute(Ctx, "nodes_falsenodeids", Ids[0]);
  getRepeatedAttribute(Ctx, "nodes_trueleafs", Leaf[1]);
  getRepeatedAttribute(Ctx, "nodes_falseleafs", Leaf[0]);
  for (int64_t R : Roots)
    if (R < 0 || R >= NumNodes)
      fail_shape_inference("tree root ", R, " is not one of the ", NumNodes,
                           " nodes");
  for (int B = 0; B < 2; ++B)
    for (int64_t I = 0; I < NumNodes; ++I) {
      int64_t To = Ids[B][I], Max = Leaf[B][I] ? NumLeaves : NumNodes;
      if (To < 0 || To >= Max)
        fail_shape_inference("node ", I, "'s ", B ? "true" : "false",
                             " branch goes to ", Leaf[B][I] ? "leaf " : "node ",
                             To, ", not one of the ", Max);
    }
  // Depth-first from every root; 1: on the current path, 2: done.
  std::vector<char> State(NumNodes, 0);
  std::vector<std::pair<int64_t, int>> Stack;
  for (int64_t R : Roots) {
    if (State[R])
      continue;
    Stack.push_back({R, 0});
    State[R] = 1;
    while (!Stack.empty()) {
      auto &[I, Next] = Stack.back();
      if (Next == 2) {
        State[I] = 2;
        Stack.pop_back();
        continue;
      }
      int B = Next++;
      if (Leaf[B][I])
        continue;
      int64_t To = Ids[B][I];
      if (State[To] == 1)
        fail_shape_inference("the trees have a cycle through node ", To);
      if (!State[To]) {
        State[To] = 1;
        Stack.push_back({To, 0});
      }
    }
  }
}

/// TreeEnsemble-5: X [N, F] -> Y [N, n_targets] of X's type; the nodes_*
/// attributes have one length, leaf_targetids as many entries as
/// leaf_weights, thresholds and weights X's type. Without n_targets the
/// width is the largest leaf target id + 1.
void inferTreeEnsemble(InferenceContext &Ctx) {
  int32_t In = inputElemType(Ctx, 0);
  const AttributeProto *Splits = Ctx.getAttribute("nodes_splits");
  if (!Splits || Splits->t().dims_size() != 1)
    fail_shape_inference("nodes_splits must be a 1-D tensor");
  if (In && Splits->t().data_type() != In)
    fail_shape_inference("nodes_splits has element type ",
                         Splits->t().data_type(), "; the input has ", In);
  int64_t Len = Splits->t().dims(0);
  for (const char *Name :
       {"nodes_featureids", "nodes_modes", "nodes_truenodeids",
        "nodes_falsenodeids", "nodes_trueleafs", "nodes_falseleafs"})
    checkLength(Ctx, Name, Len, /*Required=*/true);
  for (const char *Name : {"nodes_hitrates", "nodes_missing_value_tracks_true"})
    checkLength(Ctx, Name, Len, /*Required=*/false);
  const AttributeProto *Targets = Ctx.getAttribute("leaf_targetids");
  const AttributeProto *Weights = Ctx.getAttribute("leaf_weights");
  if (!Targets || !Weights || Weights->t().dims_size() != 1)
    fail_shape_inference("leaf_targetids and a 1-D leaf_weights tensor must "
                         "both be set");
  if (Targets->ints_size() != Weights->t().dims(0))
    fail_shape_inference("leaf_targetids has ", Targets->ints_size(),
                         " entries; leaf_weights has ", Weights->t().dims(0));
  if (In && Weights->t().data_type() != In)
    fail_shape_inference("leaf_weights has element type ",
                         Weights->t().data_type(), "; the input has ", In);
  checkForest(Ctx, Len, Weights->t().dims(0));
  int64_t NTargets = getAttribute(Ctx, "n_targets", (int64_t)0);
  if (!NTargets)
    for (int64_t T : Targets->ints())
      NTargets = std::max(NTargets, T + 1);
  if (In)
    updateOutputElemType(Ctx, 0, In);
  if (!hasInputShape(Ctx, 0))
    return;
  const TensorShapeProto &X = getInputShape(Ctx, 0);
  if (X.dim_size() != 2)
    fail_shape_inference("TreeEnsemble needs a 2-D input [N, F], not rank ",
                         X.dim_size());
  TensorShapeProto Y;
  *Y.add_dim() = X.dim(0);
  Y.add_dim()->set_dim_value(NTargets);
  updateOutputShape(Ctx, 0, Y);
}

std::vector<std::string> mlKeyTypes() {
  return {"tensor(string)", "tensor(int64)", "tensor(float)",
          "tensor(int32)",  "tensor(int16)", "tensor(double)"};
}

/// The schemas of ai.onnx.ml 4 and 5 (file header).
std::vector<SchemaSpec> mlTable() {
  return {
      {"LabelEncoder",
       4,
       {"X:T1"},
       {"Y:T2"},
       {"keys_tensor:tensor?", "keys_strings:strings?", "keys_int64s:ints?",
        "keys_floats:floats?", "values_tensor:tensor?",
        "values_strings:strings?", "values_int64s:ints?",
        "values_floats:floats?", "default_string:string=_Unused",
        "default_int64:int=-1", "default_float:float=-0.0",
        "default_tensor:tensor?"},
       {{"T1", mlKeyTypes()}, {"T2", mlKeyTypes()}},
       inferLabelEncoder},
      {"TreeEnsemble",
       5,
       {"X:T"},
       {"Y:T"},
       {"nodes_featureids:ints", "nodes_splits:tensor",
        "nodes_hitrates:tensor?", "nodes_modes:tensor",
        "nodes_truenodeids:ints", "nodes_falsenodeids:ints",
        "nodes_trueleafs:ints", "nodes_falseleafs:ints",
        "nodes_missing_value_tracks_true:ints?", "tree_roots:ints",
        "membership_values:tensor?", "leaf_targetids:ints",
        "leaf_weights:tensor", "n_targets:int?", "post_transform:int=0",
        "aggregate_function:int=1"},
       {{"T", {"tensor(float)", "tensor(double)", "tensor(float16)"}}},
       inferTreeEnsemble},
  };
}

/// Output 0: input 0's shape, element type \p Elem (0: input 0's).
void sameShape(InferenceContext &Ctx, int32_t Elem) {
  updateOutputElemType(Ctx, 0, Elem ? Elem : inputElemType(Ctx, 0));
  if (hasInputShape(Ctx, 0))
    propagateShapeFromInputToOutput(Ctx, 0, 0);
}

/// The batch dim of a [N, C] or [C] input (1 for [C]), or false.
bool batchDim(InferenceContext &Ctx, TensorShapeProto::Dimension &N) {
  if (!hasInputShape(Ctx, 0))
    return false;
  const TensorShapeProto &X = getInputShape(Ctx, 0);
  if (X.dim_size() == 1)
    N.set_dim_value(1);
  else if (X.dim_size() == 2)
    N = X.dim(0);
  else
    fail_shape_inference("input must be [N, C] or [C], not rank ",
                         X.dim_size());
  return true;
}

/// Output 0 is float [N, \p Width].
void batchByWidth(InferenceContext &Ctx, int64_t Width) {
  updateOutputElemType(Ctx, 0, TensorProto::FLOAT);
  TensorShapeProto::Dimension N;
  if (!batchDim(Ctx, N))
    return;
  TensorShapeProto Y;
  *Y.add_dim() = N;
  Y.add_dim()->set_dim_value(Width);
  updateOutputShape(Ctx, 0, Y);
}

/// FeatureVectorizer: the inputs side by side, [N, sum of inputdimensions]
/// (each input's last dim when the attribute is absent).
void inferFeatureVectorizer(InferenceContext &Ctx) {
  std::vector<int64_t> Dims;
  if (!getRepeatedAttribute(Ctx, "inputdimensions", Dims))
    for (size_t I = 0; I < Ctx.getNumInputs(); ++I) {
      if (!hasInputShape(Ctx, I))
        return updateOutputElemType(Ctx, 0, TensorProto::FLOAT);
      const TensorShapeProto &S = getInputShape(Ctx, I);
      if (!S.dim_size() || !S.dim(S.dim_size() - 1).has_dim_value())
        return updateOutputElemType(Ctx, 0, TensorProto::FLOAT);
      Dims.push_back(S.dim(S.dim_size() - 1).dim_value());
    }
  if (Dims.size() != Ctx.getNumInputs())
    fail_shape_inference("inputdimensions has ", Dims.size(), " entries for ",
                         Ctx.getNumInputs(), " inputs");
  int64_t Width = 0;
  for (int64_t D : Dims)
    Width += D;
  batchByWidth(Ctx, Width);
}

/// ArrayFeatureExtractor: the indices select along the last dim: X [..., C]
/// -> [..., K] for K indices; a 1-D X gives [1, K] (as ONNX Runtime does).
void inferArrayFeatureExtractor(InferenceContext &Ctx) {
  updateOutputElemType(Ctx, 0, inputElemType(Ctx, 0));
  if (!hasNInputShapes(Ctx, 2))
    return;
  const TensorShapeProto &X = getInputShape(Ctx, 0);
  const TensorShapeProto &Idx = getInputShape(Ctx, 1);
  int64_t K = 1;
  for (const auto &D : Idx.dim()) {
    if (!D.has_dim_value())
      return;
    K *= D.dim_value();
  }
  TensorShapeProto Y;
  if (X.dim_size() <= 1)
    Y.add_dim()->set_dim_value(1);
  for (int I = 0; I + 1 < X.dim_size(); ++I)
    *Y.add_dim() = X.dim(I);
  Y.add_dim()->set_dim_value(K);
  updateOutputShape(Ctx, 0, Y);
}

/// OneHotEncoder: one more dim than X, as wide as the category list.
void inferOneHotEncoder(InferenceContext &Ctx) {
  std::vector<int64_t> Ints;
  std::vector<std::string> Strings;
  bool HasInts = getRepeatedAttribute(Ctx, "cats_int64s", Ints);
  bool HasStrings = getRepeatedAttribute(Ctx, "cats_strings", Strings);
  if (HasInts == HasStrings)
    fail_shape_inference("exactly one of cats_int64s and cats_strings must "
                         "be set");
  updateOutputElemType(Ctx, 0, TensorProto::FLOAT);
  if (!hasInputShape(Ctx, 0))
    return;
  TensorShapeProto Y = getInputShape(Ctx, 0);
  Y.add_dim()->set_dim_value(HasInts ? Ints.size() : Strings.size());
  updateOutputShape(Ctx, 0, Y);
}

/// TreeEnsembleClassifier 1 and 3: Y [N] labels (strings or int64), Z
/// [N, E] float scores for the E class labels.
void inferTreeEnsembleClassifier(InferenceContext &Ctx) {
  std::vector<std::string> Strings;
  std::vector<int64_t> Ints;
  getRepeatedAttribute(Ctx, "classlabels_strings", Strings);
  getRepeatedAttribute(Ctx, "classlabels_int64s", Ints);
  updateOutputElemType(
      Ctx, 0, Strings.empty() ? TensorProto::INT64 : TensorProto::STRING);
  updateOutputElemType(Ctx, 1, TensorProto::FLOAT);
  TensorShapeProto::Dimension N;
  if (!batchDim(Ctx, N))
    return;
  TensorShapeProto Y, Z;
  *Y.add_dim() = N;
  *Z.add_dim() = N;
  Z.add_dim()->set_dim_value(Strings.empty() ? Ints.size() : Strings.size());
  updateOutputShape(Ctx, 0, Y);
  updateOutputShape(Ctx, 1, Z);
}

/// Inference for the ONNX 1.12 ai.onnx.ml schemas that have none, or only
/// an element type for some outputs (the tree ensembles).
void addMissingInference() {
  auto TreeRegressor = [](InferenceContext &Ctx) {
    batchByWidth(Ctx, getAttribute(Ctx, "n_targets", (int64_t)1));
  };
  const std::tuple<const char *, int, InferenceFunction> Rules[] = {
      {"Binarizer", 1, [](InferenceContext &Ctx) { sameShape(Ctx, 0); }},
      {"ArrayFeatureExtractor", 1, inferArrayFeatureExtractor},
      {"OneHotEncoder", 1, inferOneHotEncoder},
      {"Normalizer", 1,
       [](InferenceContext &Ctx) { sameShape(Ctx, TensorProto::FLOAT); }},
      {"Scaler", 1,
       [](InferenceContext &Ctx) { sameShape(Ctx, TensorProto::FLOAT); }},
      {"Imputer", 1, [](InferenceContext &Ctx) { sameShape(Ctx, 0); }},
      {"LinearRegressor", 1,
       [](InferenceContext &Ctx) {
         batchByWidth(Ctx, getAttribute(Ctx, "targets", (int64_t)1));
       }},
      // One score per row (ONNX Runtime writes [N, 1]).
      {"SVMRegressor", 1, [](InferenceContext &Ctx) { batchByWidth(Ctx, 1); }},
      {"FeatureVectorizer", 1, inferFeatureVectorizer},
      {"TreeEnsembleRegressor", 1, TreeRegressor},
      {"TreeEnsembleRegressor", 3, TreeRegressor},
      {"TreeEnsembleClassifier", 1, inferTreeEnsembleClassifier},
      {"TreeEnsembleClassifier", 3, inferTreeEnsembleClassifier},
  };
  for (const auto &[Op, Version, Fn] : Rules) {
    const OpSchema *S = OpSchemaRegistry::Schema(Op, Version, ML);
    if (!S || S->SinceVersion() != Version)
      continue;
    // The registry hands out const schemas; setting the inference function
    // once, before any inference runs, is what ONNX's registration does
    // (SchemaGuards.cpp does the same). Where ONNX has a function (the
    // tree ensembles' attribute checks), it runs first.
    InferenceFunction Rule = Fn;
    if (S->has_type_and_shape_inference_function())
      Rule = [Orig = S->GetTypeAndShapeInferenceFunction(),
              Ours = Fn](InferenceContext &Ctx) {
        Orig(Ctx);
        Ours(Ctx);
      };
    const_cast<OpSchema *>(S)->TypeAndShapeInferenceFunction(Rule);
  }
}

} // namespace

void addMLSchemas(std::vector<OpSchema> &Out) {
  addSchemas(Out, mlTable(), ML);
  for (const char *Op : {"TreeEnsembleClassifier", "TreeEnsembleRegressor"}) {
    OpSchema S;
    S.SetName(Op).SetDomain(ML).SinceVersion(5);
    S.SetDoc("Deprecated at ai.onnx.ml 5 (use TreeEnsemble); registered by "
             "Loom (lib/ONNX/MLSchemas.cpp).");
    S.Deprecate();
    Out.push_back(S);
  }
  addMissingInference();
}

} // namespace loom
