//===- OpsetSchemas.cpp - Default-domain schemas of opsets 18 to 23 -------===//
//
// ONNX 1.12 (Debian 12's library) knows schemas up to opset 17. Models from
// current exporters are at opset 18 to 23, so Loom registers, in ONNX's own
// registry, the schemas of the operators that changed or appeared since,
// with shape inference written here. Everything that reads the registry
// then works at the new opsets: the importer's node check, ONNX shape
// inference (infer-shapes, fold-shape-arith, emission verification) and
// onnx::checker on emitted graphs.
//
// An op whose only change since opset 17 is a wider type list (opset 19,
// 21, 22 and 23 added bfloat16, float8 and 4-bit types to many ops, e.g.
// Reshape-21, Relu-22) needs nothing: the registry's lookup returns the
// newest schema at or below the model's opset, whose shape inference holds.
// The same holds for a change of attribute values only (ScatterElements-18
// and ScatterND-18's "max"/"min" reductions, Resize-19's
// "half_pixel_symmetric", Pad-19's "wrap"): schemas check attribute names
// and types, not their values. The ops registered here changed inputs or
// attributes, or are new:
//   18  ReduceL1/L2/LogSum/LogSumExp/Max/Mean/Min/Prod/SumSquare (axes as
//       an input), Split (num_outputs), Pad (axes input), Resize (antialias,
//       axes, keep_aspect_ratio_policy), LpPool (ceil_mode),
//       GroupNormalization, BitwiseAnd/Or/Xor/Not, Col2Im, CenterCropPad,
//       Mish
//   19  Cast, CastLike, QuantizeLinear (saturate), DequantizeLinear,
//       AveragePool (dilations)
//   20  ReduceMax/ReduceMin (bool), Gelu, DFT (axis, dft_length inputs),
//       AffineGrid, GridSample (N-d, linear/cubic)
//   21  QuantizeLinear/DequantizeLinear (block_size, output_dtype),
//       GroupNormalization (per-channel scale and bias, stash_type)
//   23  Attention, RotaryEmbedding, RMSNormalization; QuantizeLinear
//       (precision), DequantizeLinear (output_dtype)
// Not registered, hence refused by name at import: ImageDecoder,
// RegexFullMatch, StringConcat, StringSplit, DeformConv and the Optional
// ops (Loom plans dense tensors). The table of supported versions is
// include/loom/ONNX/SupportedOps.md.
//
// Element types newer than ONNX 1.12 (float8, int4, uint4, float4) are not
// among the type strings the schemas below list: ONNX 1.12 cannot parse
// them. Models carrying them are inferred without ONNX's type check
// (Exporter.cpp, inferShapes), and the inference functions here set
// element types by number.
//
//===----------------------------------------------------------------------===//
#include "OpsetSchemas.h"
#include "ProtoTensorData.h"
#include "loom/Support/DataType.h"
#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"
#include "onnx/defs/tensor_proto_util.h"
#include "llvm/Support/Error.h"
#include <mutex>

namespace loom {

using namespace onnx;
using namespace llvm;
using namespace opset;

/// The ONNX 1.12 schema \p From at \p FromVersion, rebuilt as \p Name at
/// \p Version: same inputs, outputs, attributes, type constraints and
/// inference. (Copying the schema object would not do: registration
/// finalizes it again, counting its inputs twice.)
OpSchema cloneSchema(const char *From, int FromVersion, const char *Name,
                     int Version, const std::vector<const char *> &NewAttrs,
                     InferenceFunction Infer) {
  const OpSchema *Src = OpSchemaRegistry::Schema(From, FromVersion, "");
  OpSchema S;
  S.SetName(Name).SetDomain(ONNX_DOMAIN).SinceVersion(Version);
  S.SetDoc("Registered by Loom from ONNX 1.12's " + std::string(From) + "-" +
           std::to_string(Src->SinceVersion()) +
           " (lib/ONNX/OpsetSchemas.cpp).");
  int I = 0;
  for (const OpSchema::FormalParameter &P : Src->inputs())
    S.Input(I++, P.GetName(), "", P.GetTypeStr(), P.GetOption(),
            P.GetIsHomogeneous(), P.GetMinArity());
  I = 0;
  for (const OpSchema::FormalParameter &P : Src->outputs())
    S.Output(I++, P.GetName(), "", P.GetTypeStr(), P.GetOption(),
             P.GetIsHomogeneous(), P.GetMinArity());
  for (const auto &KV : Src->attributes())
    S.Attr(KV.second);
  for (const OpSchema::TypeConstraintParam &T : Src->typeConstraintParams())
    S.TypeConstraint(T.type_param_str, T.allowed_type_strs, "");
  addAttributes(S, NewAttrs);
  if (Infer)
    S.TypeAndShapeInferenceFunction(Infer);
  else if (Src->has_type_and_shape_inference_function())
    S.TypeAndShapeInferenceFunction(Src->GetTypeAndShapeInferenceFunction());
  return S;
}

namespace {

/// The int64 values of input \p I when they are a constant (initializer or
/// folded), else false.
bool constantInts(InferenceContext &Ctx, size_t I, std::vector<int64_t> &Out) {
  if (I >= Ctx.getNumInputs() || !Ctx.getInputType(I))
    return false;
  const TensorProto *T = Ctx.getInputData(I);
  if (!T)
    return false;
  Out = ParseData<int64_t>(T);
  return true;
}

bool hasInput(InferenceContext &Ctx, size_t I) {
  return I < Ctx.getNumInputs() && Ctx.getInputType(I);
}

int64_t normalizeAxis(int64_t Axis, int Rank) {
  if (Axis < -Rank || Axis >= Rank)
    fail_shape_inference("axis ", Axis, " is out of range for rank ", Rank);
  return Axis < 0 ? Axis + Rank : Axis;
}

void sameAsInput(InferenceContext &Ctx) {
  propagateShapeAndTypeFromFirstInput(Ctx);
}

//===----------------------------------------------------------------------===//
// Opset 18
//===----------------------------------------------------------------------===//

/// Split-18: an even split into num_outputs pieces, the last smaller when
/// the dim does not divide (ceil(d / n) each before it).
void inferSplit(InferenceContext &Ctx) {
  const AttributeProto *NumOutputs = Ctx.getAttribute("num_outputs");
  static const InferenceFunction Split13 =
      OpSchemaRegistry::Schema("Split", 13, "")
          ->GetTypeAndShapeInferenceFunction();
  if (!NumOutputs || hasInput(Ctx, 1)) {
    if (NumOutputs)
      fail_shape_inference("'split' input and 'num_outputs' attribute are "
                           "exclusive");
    Split13(Ctx);
    return;
  }
  int64_t N = NumOutputs->i();
  if (N < 1 || N != (int64_t)Ctx.getNumOutputs())
    fail_shape_inference("num_outputs is ", N, " but the node has ",
                         Ctx.getNumOutputs(), " outputs");
  for (size_t I = 0; I < Ctx.getNumOutputs(); ++I)
    propagateElemTypeFromInputToOutput(Ctx, 0, I);
  if (!hasInputShape(Ctx, 0))
    return;
  const TensorShapeProto &In = getInputShape(Ctx, 0);
  int64_t Axis = normalizeAxis(getAttribute(Ctx, "axis", 0), In.dim_size());
  for (size_t I = 0; I < Ctx.getNumOutputs(); ++I) {
    TensorShapeProto Out = In;
    auto *D = Out.mutable_dim((int)Axis);
    if (In.dim((int)Axis).has_dim_value()) {
      int64_t Total = In.dim((int)Axis).dim_value();
      int64_t Chunk = (Total + N - 1) / N;
      int64_t Size = std::max<int64_t>(
          0, std::min<int64_t>(Chunk, Total - Chunk * (int64_t)I));
      D->set_dim_value(Size);
    } else {
      D->Clear();
    }
    updateOutputShape(Ctx, I, Out);
  }
}

/// Pad-18: pads (and the axes they apply to, default all) as inputs.
void inferPad(InferenceContext &Ctx) {
  propagateElemTypeFromInputToOutput(Ctx, 0, 0);
  if (!hasInputShape(Ctx, 0))
    return;
  const TensorShapeProto &In = getInputShape(Ctx, 0);
  int Rank = In.dim_size();
  TensorShapeProto Out;
  for (int I = 0; I < Rank; ++I)
    Out.add_dim();
  std::vector<int64_t> Pads, Axes;
  if (!constantInts(Ctx, 1, Pads)) {
    updateOutputShape(Ctx, 0, Out);
    return;
  }
  if (hasInput(Ctx, 3)) {
    if (!constantInts(Ctx, 3, Axes)) {
      updateOutputShape(Ctx, 0, Out);
      return;
    }
  } else {
    for (int I = 0; I < Rank; ++I)
      Axes.push_back(I);
  }
  if (Pads.size() != 2 * Axes.size())
    fail_shape_inference("pads has ", Pads.size(), " values for ", Axes.size(),
                         " axes; it needs ", 2 * Axes.size());
  for (int I = 0; I < Rank; ++I)
    *Out.mutable_dim(I) = In.dim(I);
  for (size_t I = 0; I < Axes.size(); ++I) {
    int64_t A = normalizeAxis(Axes[I], Rank);
    auto *D = Out.mutable_dim((int)A);
    if (D->has_dim_value()) {
      int64_t V = D->dim_value() + Pads[I] + Pads[I + Axes.size()];
      if (V < 0)
        fail_shape_inference("padding makes dim ", A, " negative");
      D->set_dim_value(V);
    } else {
      D->Clear();
    }
  }
  updateOutputShape(Ctx, 0, Out);
}

/// Resize-18: sizes (optionally on `axes`, optionally keeping the aspect
/// ratio) or scales; output dims floor(d * scale) (ONNX's Resize formula).
void inferResize(InferenceContext &Ctx) {
  propagateElemTypeFromInputToOutput(Ctx, 0, 0);
  if (!hasInputShape(Ctx, 0))
    return;
  const TensorShapeProto &In = getInputShape(Ctx, 0);
  int Rank = In.dim_size();
  std::vector<int64_t> Axes;
  if (!getRepeatedAttribute(Ctx, "axes", Axes))
    for (int I = 0; I < Rank; ++I)
      Axes.push_back(I);
  for (int64_t &A : Axes)
    A = normalizeAxis(A, Rank);
  TensorShapeProto Out = In;
  std::vector<int64_t> Sizes;
  const TensorProto *Scales = hasInput(Ctx, 2) ? Ctx.getInputData(2) : nullptr;
  bool HaveSizes = constantInts(Ctx, 3, Sizes);
  auto Unknown = [&] {
    for (int64_t A : Axes)
      Out.mutable_dim((int)A)->Clear();
    updateOutputShape(Ctx, 0, Out);
  };
  if (HaveSizes) {
    if (Sizes.size() != Axes.size())
      fail_shape_inference("sizes has ", Sizes.size(), " values for ",
                           Axes.size(), " axes");
    std::string Policy =
        getAttribute(Ctx, "keep_aspect_ratio_policy", std::string("stretch"));
    if (Policy == "stretch") {
      for (size_t I = 0; I < Axes.size(); ++I)
        Out.mutable_dim((int)Axes[I])->set_dim_value(Sizes[I]);
      updateOutputShape(Ctx, 0, Out);
      return;
    }
    double Scale = Policy == "not_larger" ? 1e300 : 0;
    for (size_t I = 0; I < Axes.size(); ++I) {
      const auto &D = In.dim((int)Axes[I]);
      if (!D.has_dim_value() || D.dim_value() == 0)
        return Unknown();
      double S = (double)Sizes[I] / (double)D.dim_value();
      Scale = Policy == "not_larger" ? std::min(Scale, S) : std::max(Scale, S);
    }
    for (int64_t A : Axes)
      Out.mutable_dim((int)A)->set_dim_value((int64_t)std::floor(
          Scale * (double)In.dim((int)A).dim_value() + 0.5));
    updateOutputShape(Ctx, 0, Out);
    return;
  }
  if (!Scales || Scales->data_type() != TensorProto::FLOAT)
    return Unknown();
  std::vector<float> S = ParseData<float>(Scales);
  if (S.size() != Axes.size())
    fail_shape_inference("scales has ", S.size(), " values for ", Axes.size(),
                         " axes");
  for (size_t I = 0; I < Axes.size(); ++I) {
    auto *D = Out.mutable_dim((int)Axes[I]);
    if (D->has_dim_value())
      D->set_dim_value((int64_t)std::floor((double)D->dim_value() * S[I]));
    else
      D->Clear();
  }
  updateOutputShape(Ctx, 0, Out);
}

/// Col2Im-18: [N, C * prod(block), L] -> [N, C, *image_shape].
void inferCol2Im(InferenceContext &Ctx) {
  propagateElemTypeFromInputToOutput(Ctx, 0, 0);
  std::vector<int64_t> Image, Block;
  if (!hasInputShape(Ctx, 0) || !constantInts(Ctx, 1, Image) ||
      !constantInts(Ctx, 2, Block))
    return;
  const TensorShapeProto &In = getInputShape(Ctx, 0);
  if (In.dim_size() != 3 || Image.size() != Block.size())
    fail_shape_inference("Col2Im needs a rank-3 input and as many block "
                         "dims as image dims");
  TensorShapeProto Out;
  *Out.add_dim() = In.dim(0);
  auto *C = Out.add_dim();
  int64_t BlockSize = 1;
  for (int64_t B : Block)
    BlockSize *= B;
  if (In.dim(1).has_dim_value() && BlockSize > 0) {
    if (In.dim(1).dim_value() % BlockSize)
      fail_shape_inference("input dim 1 (", In.dim(1).dim_value(),
                           ") is not a multiple of the block size ", BlockSize);
    C->set_dim_value(In.dim(1).dim_value() / BlockSize);
  }
  for (int64_t D : Image)
    Out.add_dim()->set_dim_value(D);
  updateOutputShape(Ctx, 0, Out);
}

/// CenterCropPad-18: the dims on `axes` (default all) become `shape`.
void inferCenterCropPad(InferenceContext &Ctx) {
  propagateElemTypeFromInputToOutput(Ctx, 0, 0);
  std::vector<int64_t> Shape, Axes;
  if (!hasInputShape(Ctx, 0) || !constantInts(Ctx, 1, Shape))
    return;
  const TensorShapeProto &In = getInputShape(Ctx, 0);
  int Rank = In.dim_size();
  if (!getRepeatedAttribute(Ctx, "axes", Axes))
    for (int I = 0; I < Rank; ++I)
      Axes.push_back(I);
  if (Axes.size() != Shape.size())
    fail_shape_inference("shape has ", Shape.size(), " values for ",
                         Axes.size(), " axes");
  TensorShapeProto Out = In;
  for (size_t I = 0; I < Axes.size(); ++I)
    Out.mutable_dim((int)normalizeAxis(Axes[I], Rank))->set_dim_value(Shape[I]);
  updateOutputShape(Ctx, 0, Out);
}

void inferBroadcast(InferenceContext &Ctx) {
  propagateElemTypeFromInputToOutput(Ctx, 0, 0);
  if (hasNInputShapes(Ctx, 2))
    bidirectionalBroadcastShapeInference(
        getInputShape(Ctx, 0), getInputShape(Ctx, 1), *getOutputShape(Ctx, 0));
}

std::vector<std::string> indexTypes() {
  return {"tensor(int32)", "tensor(int64)"};
}

/// Opset 18's new and changed ops (file header), as data.
std::vector<SchemaSpec> opset18Table() {
  std::vector<SchemaSpec> T = {
      {"Split",
       18,
       {"input:T", "split:tensor(int64)?"},
       {"outputs:T...*"},
       {"axis:int=0", "num_outputs:int?"},
       {{"T", allTypes()}},
       inferSplit},
      {"Pad",
       18,
       {"data:T", "pads:tensor(int64)", "constant_value:T?", "axes:Tind?"},
       {"output:T"},
       {"mode:string=constant"},
       {{"T", allTypes()}, {"Tind", indexTypes()}},
       inferPad},
      {"Resize",
       18,
       {"X:T1", "roi:T2?", "scales:tensor(float)?", "sizes:tensor(int64)?"},
       {"Y:T1"},
       {"antialias:int=0", "axes:ints?",
        "coordinate_transformation_mode:string=half_pixel",
        "cubic_coeff_a:float=-0.75", "exclude_outside:int=0",
        "extrapolation_value:float=0",
        "keep_aspect_ratio_policy:string=stretch", "mode:string=nearest",
        "nearest_mode:string=round_prefer_floor"},
       {{"T1", allTypes()}, {"T2", types(FloatTypes)}},
       inferResize},
      {"GroupNormalization",
       18,
       {"X:T", "scale:T", "bias:T"},
       {"Y:T"},
       {"epsilon:float=1e-5", "num_groups:int"},
       {{"T", types(FloatTypes)}},
       sameAsInput},
      {"BitwiseNot",
       18,
       {"X:T"},
       {"Y:T"},
       {},
       {{"T", types(IntTypes)}},
       sameAsInput},
      {"Mish",
       18,
       {"X:T"},
       {"Y:T"},
       {},
       {{"T", types(FloatTypes)}},
       sameAsInput},
      {"Col2Im",
       18,
       {"input:T", "image_shape:tensor(int64)", "block_shape:tensor(int64)"},
       {"output:T"},
       {"dilations:ints?", "pads:ints?", "strides:ints?"},
       {{"T", allTypes()}},
       inferCol2Im},
      {"CenterCropPad",
       18,
       {"input_data:T", "shape:Tind"},
       {"output_data:T"},
       {"axes:ints?"},
       {{"T", allTypes()}, {"Tind", indexTypes()}},
       inferCenterCropPad},
  };
  // Opset 21: GroupNormalization's scale and bias per channel (C) instead
  // of per group, and the statistics' precision.
  T.push_back(revised(T, "GroupNormalization", 21, {"stash_type:int=1"}));
  for (const char *Op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"})
    T.push_back({Op,
                 18,
                 {"A:T", "B:T"},
                 {"C:T"},
                 {},
                 {{"T", types(IntTypes)}},
                 inferBroadcast});
  return T;
}

void addOpset18(std::vector<OpSchema> &Out) {
  for (const char *Op :
       {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
        "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare"})
    Out.push_back(cloneSchema("ReduceSum", 13, Op, 18));
  // ReduceMax and ReduceMin take bool and 8-bit types from opset 20; the
  // inference is ReduceSum's.
  for (const char *Op : {"ReduceMax", "ReduceMin"})
    Out.push_back(cloneSchema("ReduceSum", 13, Op, 20));
  Out.push_back(cloneSchema("LpPool", 11, "LpPool", 18, {"ceil_mode:int=0"},
                            inferPoolWithDilations));
  addSchemas(Out, opset18Table());
}

} // namespace

void registerOpsetSchemas() {
  static std::once_flag Once;
  std::call_once(Once, [] {
    // ONNX 1.12 registers default-domain versions 1-17 and ai.onnx.ml 1-3;
    // the range check in OpSchemaRegisterOnce refuses higher versions. The
    // registry hands out the map only as const (it has no update call):
    // widening it once, before any schema is looked up at these versions,
    // is what a newer ONNX's constructor would have done.
    auto &Map =
        const_cast<std::unordered_map<std::string, std::pair<int, int>> &>(
            OpSchemaRegistry::DomainToVersionRange::Instance().Map());
    Map[ONNX_DOMAIN].second = 23;
    Map[AI_ONNX_ML_DOMAIN].second = 5;
    std::vector<OpSchema> Schemas;
    addOpset18(Schemas);
    addOpset19To23Schemas(Schemas);
    addMLSchemas(Schemas);
    for (OpSchema &S : Schemas)
      OpSchemaRegistry::OpSchemaRegisterOnce Reg(S);
  });
}

} // namespace loom

namespace loom {

/// Does \p GP (or a subgraph) carry an element type ONNX 1.12 cannot name?
static bool usesNewTypes(const onnx::GraphProto &GP) {
  auto NewType = [](int64_t Code) {
    return Code > (int64_t)DataType::BFloat16;
  };
  auto NewVI = [&](const onnx::ValueInfoProto &VI) {
    return VI.type().has_tensor_type() &&
           NewType(VI.type().tensor_type().elem_type());
  };
  for (const auto &VI : GP.input())
    if (NewVI(VI))
      return true;
  for (const auto &VI : GP.output())
    if (NewVI(VI))
      return true;
  for (const auto &VI : GP.value_info())
    if (NewVI(VI))
      return true;
  for (const auto &T : GP.initializer())
    if (NewType(T.data_type()))
      return true;
  for (const auto &N : GP.node())
    for (const auto &A : N.attribute()) {
      if ((A.name() == "to" || A.name() == "output_dtype") && NewType(A.i()))
        return true;
      if (A.has_t() && NewType(A.t().data_type()))
        return true;
      if (A.has_g() && usesNewTypes(A.g()))
        return true;
      for (const auto &Sub : A.graphs())
        if (usesNewTypes(Sub))
          return true;
    }
  return false;
}

bool usesPostONNX112Types(const onnx::ModelProto &P) {
  return usesNewTypes(P.graph());
}

/// The version \p P imports for \p Domain ("" and "ai.onnx" alike), or 0.
static int64_t importedVersion(const onnx::ModelProto &P, StringRef Domain) {
  for (const onnx::OperatorSetIdProto &O : P.opset_import()) {
    StringRef D = O.domain() == "ai.onnx" ? "" : StringRef(O.domain());
    if (D == Domain)
      return O.version();
  }
  return 0;
}

static Error checkNodes(const onnx::GraphProto &GP, int64_t Default,
                        int64_t ML) {
  for (const onnx::NodeProto &N : GP.node()) {
    StringRef D = N.domain() == "ai.onnx" ? "" : StringRef(N.domain());
    if (D.empty() || D == AI_ONNX_ML_DOMAIN) {
      int64_t V = D.empty() ? Default : ML;
      std::string Where =
          "node '" +
          (N.name().empty()
               ? "%" + (N.output_size() ? N.output(0) : std::string())
               : N.name()) +
          "' (" + N.op_type() + ")";
      std::string Dom = D.empty() ? "ai.onnx" : D.str();
      if (V == 0)
        return createStringError(inconvertibleErrorCode(),
                                 "%s: the model imports no opset for "
                                 "domain '%s'",
                                 Where.c_str(), Dom.c_str());
      const OpSchema *S =
          OpSchemaRegistry::Schema(N.op_type(), (int)V, D.str());
      if (!S)
        return createStringError(
            inconvertibleErrorCode(),
            "%s: Loom knows no operator '%s' in domain '%s' at version %lld "
            "(include/loom/ONNX/SupportedOps.md lists the supported operators "
            "and versions)",
            Where.c_str(), N.op_type().c_str(), Dom.c_str(), (long long)V);
      try {
        S->Verify(N);
      } catch (const std::exception &E) {
        return createStringError(inconvertibleErrorCode(),
                                 "%s: not valid as %s-%d (domain '%s', "
                                 "opset %lld): %s",
                                 Where.c_str(), N.op_type().c_str(),
                                 S->SinceVersion(), Dom.c_str(), (long long)V,
                                 StringRef(E.what()).trim().str().c_str());
      }
    }
    for (const onnx::AttributeProto &A : N.attribute()) {
      if (A.has_g())
        if (Error E = checkNodes(A.g(), Default, ML))
          return E;
      for (const onnx::GraphProto &Sub : A.graphs())
        if (Error E = checkNodes(Sub, Default, ML))
          return E;
    }
  }
  return Error::success();
}

Error checkKnownOps(const onnx::ModelProto &P) {
  registerOpsetSchemas();
  return checkNodes(P.graph(), importedVersion(P, ""),
                    importedVersion(P, AI_ONNX_ML_DOMAIN));
}

} // namespace loom
