//===- HcclSchemas.cpp - ONNX schemas of the hccl domain (DESIGN §7) ------===//
//
// Emitted graphs carry collectives as ops of domain `hccl`, version 1, named
// and attributed like the Ascend graph engine's HCCL operators. Registering
// their schemas (with shape inference) lets onnx::checker and ONNX shape
// inference check emitted graphs end to end. Loom adds the explicit `axis`
// (gather/scatter) and `split_axis`/`concat_axis` (all-to-all) attributes.
//
//===----------------------------------------------------------------------===//
#include "loom/ONNX/ONNX.h"
#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"
#include <mutex>

namespace loom {

using namespace onnx;

static const char *const AllTypes[] = {
    "tensor(float)", "tensor(float16)", "tensor(bfloat16)", "tensor(double)",
    "tensor(int8)",  "tensor(int16)",   "tensor(int32)",    "tensor(int64)",
    "tensor(uint8)", "tensor(uint16)",  "tensor(uint32)",   "tensor(uint64)",
    "tensor(bool)"};

static std::vector<std::string> allTypes() {
  return std::vector<std::string>(std::begin(AllTypes), std::end(AllTypes));
}

/// Output 0 = input 0 with dim \p Axis multiplied (\p Mul) or divided by
/// rank_size.
static void scaleAxis(InferenceContext &Ctx, const char *AxisAttr, bool Mul) {
  propagateElemTypeFromInputToOutput(Ctx, 0, 0);
  if (!hasInputShape(Ctx, 0))
    return;
  const TensorShapeProto &In = getInputShape(Ctx, 0);
  int64_t N = getAttribute(Ctx, "rank_size", 1);
  int64_t Axis = getAttribute(Ctx, AxisAttr, 0);
  int Rank = In.dim_size();
  if (Axis < 0)
    Axis += Rank;
  if (Axis < 0 || Axis >= Rank)
    fail_shape_inference("axis ", Axis, " is out of range for rank ", Rank);
  TensorShapeProto Out = In;
  auto *D = Out.mutable_dim((int)Axis);
  if (D->has_dim_value()) {
    if (!Mul && D->dim_value() % N)
      fail_shape_inference("dim ", Axis, " (", D->dim_value(),
                           ") is not divisible by rank_size ", N);
    D->set_dim_value(Mul ? D->dim_value() * N : D->dim_value() / N);
  } else {
    D->clear_dim_param();
  }
  updateOutputShape(Ctx, 0, Out);
}

static OpSchema base(const char *Name) {
  OpSchema S;
  S.SetName(Name).SetDomain("hccl").SinceVersion(1);
  S.Attr("group", "Symbolic group name, resolved per rank by the manifest",
         AttributeProto::STRING);
  return S;
}

void registerHcclSchemas() {
  static std::once_flag Once;
  std::call_once(Once, [] {
    OpSchemaRegistry::DomainToVersionRange::Instance().AddDomainToVersion(
        "hccl", 1, 1);
    std::vector<OpSchema> Schemas;
    {
      OpSchema S = base("HcomAllReduce");
      S.Attr("reduction", "sum, max, min or prod", AttributeProto::STRING,
             std::string("sum"));
      S.Attr("fusion", "Fusion mode", AttributeProto::INT, (int64_t)1);
      S.Attr("fusion_id", "Fusion bucket", AttributeProto::INT, (int64_t)-1);
      S.Input(0, "x", "", "T").Output(0, "y", "", "T");
      S.TypeConstraint("T", allTypes(), "");
      S.TypeAndShapeInferenceFunction(propagateShapeAndTypeFromFirstInput);
      Schemas.push_back(S);
    }
    {
      OpSchema S = base("HcomAllGather");
      S.Attr("rank_size", "Group size", AttributeProto::INT);
      S.Attr("axis", "Gather axis", AttributeProto::INT, (int64_t)0);
      S.Input(0, "x", "", "T").Output(0, "y", "", "T");
      S.TypeConstraint("T", allTypes(), "");
      S.TypeAndShapeInferenceFunction(
          [](InferenceContext &Ctx) { scaleAxis(Ctx, "axis", true); });
      Schemas.push_back(S);
    }
    {
      OpSchema S = base("HcomReduceScatter");
      S.Attr("reduction", "sum, max, min or prod", AttributeProto::STRING,
             std::string("sum"));
      S.Attr("rank_size", "Group size", AttributeProto::INT);
      S.Attr("axis", "Scatter axis", AttributeProto::INT, (int64_t)0);
      S.Input(0, "x", "", "T").Output(0, "y", "", "T");
      S.TypeConstraint("T", allTypes(), "");
      S.TypeAndShapeInferenceFunction(
          [](InferenceContext &Ctx) { scaleAxis(Ctx, "axis", false); });
      Schemas.push_back(S);
    }
    {
      OpSchema S = base("HcomBroadcast");
      S.Attr("root_rank", "Source group rank", AttributeProto::INT);
      S.Input(0, "x", "", "T", OpSchema::Variadic)
          .Output(0, "y", "", "T", OpSchema::Variadic);
      S.TypeConstraint("T", allTypes(), "");
      S.TypeAndShapeInferenceFunction([](InferenceContext &Ctx) {
        for (size_t I = 0; I < Ctx.getNumOutputs() && I < Ctx.getNumInputs();
             ++I) {
          propagateElemTypeFromInputToOutput(Ctx, I, I);
          if (hasInputShape(Ctx, I))
            propagateShapeFromInputToOutput(Ctx, I, I);
        }
      });
      Schemas.push_back(S);
    }
    {
      OpSchema S = base("HcomAllToAllV");
      S.Attr("rank_size", "Group size", AttributeProto::INT);
      S.Attr("split_axis", "Axis split among peers", AttributeProto::INT,
             (int64_t)0);
      S.Attr("concat_axis", "Axis received chunks are concatenated on",
             AttributeProto::INT, (int64_t)0);
      S.Input(0, "x", "", "T")
          .Input(1, "send_counts", "", "tensor(int64)")
          .Input(2, "send_displacements", "", "tensor(int64)")
          .Input(3, "recv_counts", "", "tensor(int64)")
          .Input(4, "recv_displacements", "", "tensor(int64)")
          .Output(0, "y", "", "T");
      S.TypeConstraint("T", allTypes(), "");
      S.TypeAndShapeInferenceFunction([](InferenceContext &Ctx) {
        propagateElemTypeFromInputToOutput(Ctx, 0, 0);
        if (!hasInputShape(Ctx, 0))
          return;
        TensorShapeProto Out = getInputShape(Ctx, 0);
        int64_t N = getAttribute(Ctx, "rank_size", 1);
        int Rank = Out.dim_size();
        int64_t SA = getAttribute(Ctx, "split_axis", 0),
                CA = getAttribute(Ctx, "concat_axis", 0);
        if (SA < 0)
          SA += Rank;
        if (CA < 0)
          CA += Rank;
        if (SA < 0 || SA >= Rank || CA < 0 || CA >= Rank)
          fail_shape_inference("split_axis/concat_axis out of range");
        if (SA != CA) {
          auto *S = Out.mutable_dim((int)SA), *C = Out.mutable_dim((int)CA);
          if (S->has_dim_value())
            S->set_dim_value(S->dim_value() / N);
          if (C->has_dim_value())
            C->set_dim_value(C->dim_value() * N);
        }
        updateOutputShape(Ctx, 0, Out);
      });
      Schemas.push_back(S);
    }
    {
      OpSchema S = base("HcomSend");
      S.Attr("sr_tag", "Tag matching the HcomReceive", AttributeProto::INT);
      S.Attr("dest_rank", "Destination group rank", AttributeProto::INT);
      S.Input(0, "x", "", "T");
      S.TypeConstraint("T", allTypes(), "");
      Schemas.push_back(S);
    }
    {
      OpSchema S = base("HcomReceive");
      S.Attr("sr_tag", "Tag matching the HcomSend", AttributeProto::INT);
      S.Attr("src_rank", "Source group rank", AttributeProto::INT);
      S.Attr("shape", "Shape of the received tensor", AttributeProto::INTS);
      S.Attr("dtype", "TensorProto element type", AttributeProto::INT);
      S.Output(0, "y", "", "T");
      S.TypeConstraint("T", allTypes(), "");
      S.TypeAndShapeInferenceFunction([](InferenceContext &Ctx) {
        int64_t DT = getAttribute(Ctx, "dtype", 0);
        updateOutputElemType(Ctx, 0, (int32_t)DT);
        std::vector<int64_t> Shape;
        if (const AttributeProto *A = Ctx.getAttribute("shape")) {
          TensorShapeProto Out;
          for (int64_t D : A->ints())
            Out.add_dim()->set_dim_value(D);
          updateOutputShape(Ctx, 0, Out);
        }
      });
      Schemas.push_back(S);
    }
    for (OpSchema &S : Schemas)
      OpSchemaRegistry::OpSchemaRegisterOnce Reg(S);
  });
}

} // namespace loom
