//===- OpsetSchemas19To23.cpp - Default-domain schemas of opsets 19-23 ----===//
//
// The second half of OpsetSchemas.cpp (which says why Loom registers these
// and how): Cast, quantization and pooling at opsets 19-23, Gelu, DFT,
// AffineGrid and GridSample at 20, and opset 23's Attention,
// RotaryEmbedding and RMSNormalization.
//
// Attention-23 (onnx/defs/nn/defs.cc, ONNX 1.18): Q, K, V either 4-D
// [batch, heads, seq, head_size] or 3-D [batch, seq, heads * head_size]
// (then q_num_heads / kv_num_heads are required); an optional mask, an
// optional KV cache (past_key, past_value, 4-D, concatenated before K and
// V along the sequence); outputs Y (Q's layout, V's head size),
// present_key, present_value (past + new) and the optional QK product.
// Grouped-query attention: q_num_heads a multiple of kv_num_heads.
//
//===----------------------------------------------------------------------===//
#include "OpsetSchemas.h"
#include "loom/Support/DataType.h"
#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"
#include "onnx/defs/tensor_proto_util.h"
#include <mutex>

namespace loom {

using namespace onnx;

namespace {

using namespace opset;

std::vector<std::string> floatTypes() { return types(FloatTypes); }

bool hasInput(InferenceContext &Ctx, size_t I) {
  return I < Ctx.getNumInputs() && Ctx.getInputType(I);
}

void setElemType(InferenceContext &Ctx, size_t Out, int32_t Code) {
  if (Code < 1 || Code > MaxDataTypeCode)
    fail_type_inference("element type ", Code, " is not a tensor type");
  updateOutputElemType(Ctx, Out, Code);
}

/// Output 0 has input 0's shape and the element type \p Code.
void shapeWithType(InferenceContext &Ctx, int32_t Code) {
  setElemType(Ctx, 0, Code);
  if (hasInputShape(Ctx, 0))
    propagateShapeFromInputToOutput(Ctx, 0, 0);
}

int32_t elemTypeOf(InferenceContext &Ctx, size_t I) {
  const TypeProto *T = hasInput(Ctx, I) ? Ctx.getInputType(I) : nullptr;
  return T && T->has_tensor_type() ? T->tensor_type().elem_type() : 0;
}

void inferCast(InferenceContext &Ctx) {
  const AttributeProto *To = Ctx.getAttribute("to");
  if (!To)
    fail_type_inference("Cast needs the attribute 'to'");
  shapeWithType(Ctx, (int32_t)To->i());
}

/// QuantizeLinear: output_dtype (21), else the zero point's type, else
/// uint8.
void inferQuantize(InferenceContext &Ctx) {
  int32_t T = (int32_t)getAttribute(Ctx, "output_dtype", 0);
  if (!T)
    T = elemTypeOf(Ctx, 2);
  shapeWithType(Ctx, T ? T : (int32_t)TensorProto::UINT8);
}

/// DequantizeLinear: output_dtype (23), else the scale's type.
void inferDequantize(InferenceContext &Ctx) {
  int32_t T = (int32_t)getAttribute(Ctx, "output_dtype", 0);
  if (!T)
    T = elemTypeOf(Ctx, 1);
  if (!T)
    return;
  shapeWithType(Ctx, T);
}

/// Cast-19, QuantizeLinear 19/21/23 and DequantizeLinear 19/21/23 (file
/// header), as data.
std::vector<SchemaSpec> castAndQuantizeTable() {
  std::vector<SchemaSpec> T = {{"Cast",
                                19,
                                {"input:T1"},
                                {"output:T2"},
                                {"to:int", "saturate:int=1"},
                                {{"T1", allTypes()}, {"T2", allTypes()}},
                                inferCast}};
  // QuantizeLinear: saturate (19); block_size, output_dtype (21);
  // precision (23). DequantizeLinear: block_size (21), output_dtype (23).
  auto Any3 = [] {
    return std::vector<std::pair<const char *, std::vector<std::string>>>{
        {"T1", allTypes()}, {"T2", allTypes()}, {"T3", allTypes()}};
  };
  for (int V : {19, 21, 23}) {
    SchemaSpec Q{"QuantizeLinear",
                 V,
                 {"x:T1", "y_scale:T2", "y_zero_point:T3?"},
                 {"y:T3"},
                 {"axis:int=1", "saturate:int=1"},
                 Any3(),
                 inferQuantize};
    SchemaSpec D{"DequantizeLinear",
                 V,
                 {"x:T1", "x_scale:T2", "x_zero_point:T1?"},
                 {"y:T3"},
                 {"axis:int=1"},
                 Any3(),
                 inferDequantize};
    if (V >= 21) {
      Q.Attrs.insert(Q.Attrs.end(), {"block_size:int=0", "output_dtype:int=0"});
      D.Attrs.push_back("block_size:int=0");
    }
    if (V >= 23) {
      Q.Attrs.push_back("precision:int=0");
      D.Attrs.push_back("output_dtype:int=0");
    }
    T.push_back(Q);
    T.push_back(D);
  }
  return T;
}

void addCastAndQuantize(std::vector<OpSchema> &Out) {
  addSchemas(Out, castAndQuantizeTable());
  Out.push_back(cloneSchema(
      "CastLike", 15, "CastLike", 19, {"saturate:int=1"},
      [](InferenceContext &Ctx) { shapeWithType(Ctx, elemTypeOf(Ctx, 1)); }));
  Out.push_back(cloneSchema("AveragePool", 11, "AveragePool", 19,
                            {"dilations:ints?"}, inferPoolWithDilations));
}

/// DFT-20: axis and dft_length as inputs; the last dim is 1 (real) or 2
/// (complex) in and 2 out; onesided keeps floor(n / 2) + 1 frequencies.
void inferDFT(InferenceContext &Ctx) {
  propagateElemTypeFromInputToOutput(Ctx, 0, 0);
  if (!hasInputShape(Ctx, 0))
    return;
  const TensorShapeProto &In = getInputShape(Ctx, 0);
  int Rank = In.dim_size();
  if (Rank < 2)
    fail_shape_inference("DFT needs rank >= 2");
  int64_t Axis = -2;
  if (hasInput(Ctx, 2)) {
    const TensorProto *A = Ctx.getInputData(2);
    if (!A)
      return;
    Axis = ParseData<int64_t>(A).at(0);
  }
  if (Axis < -Rank || Axis >= Rank - 1)
    fail_shape_inference("axis ", Axis, " is out of range for rank ", Rank);
  if (Axis < 0)
    Axis += Rank;
  TensorShapeProto Out = In;
  Out.mutable_dim(Rank - 1)->set_dim_value(2);
  auto *D = Out.mutable_dim((int)Axis);
  if (hasInput(Ctx, 1)) {
    const TensorProto *L = Ctx.getInputData(1);
    if (L)
      D->set_dim_value(L->data_type() == TensorProto::INT32
                           ? ParseData<int32_t>(L).at(0)
                           : ParseData<int64_t>(L).at(0));
    else
      D->Clear();
  }
  if (getAttribute(Ctx, "onesided", 0) && D->has_dim_value())
    D->set_dim_value(D->dim_value() / 2 + 1);
  updateOutputShape(Ctx, 0, Out);
}

/// AffineGrid-20: theta [N, 2, 3] and size (N, C, H, W) give [N, H, W, 2];
/// theta [N, 3, 4] and (N, C, D, H, W) give [N, D, H, W, 3].
void inferAffineGrid(InferenceContext &Ctx) {
  propagateElemTypeFromInputToOutput(Ctx, 0, 0);
  const TensorProto *Size = hasInput(Ctx, 1) ? Ctx.getInputData(1) : nullptr;
  if (!Size)
    return;
  std::vector<int64_t> S = ParseData<int64_t>(Size);
  if (S.size() != 4 && S.size() != 5)
    fail_shape_inference("size has ", S.size(),
                         " values; AffineGrid needs "
                         "4 (2-D) or 5 (3-D)");
  TensorShapeProto Out;
  Out.add_dim()->set_dim_value(S[0]);
  for (size_t I = 2; I < S.size(); ++I)
    Out.add_dim()->set_dim_value(S[I]);
  Out.add_dim()->set_dim_value((int64_t)S.size() - 2);
  updateOutputShape(Ctx, 0, Out);
}

/// GridSample-20: X [N, C, D1..Dr], grid [N, H1..Hr, r] -> [N, C, H1..Hr].
void inferGridSample(InferenceContext &Ctx) {
  propagateElemTypeFromInputToOutput(Ctx, 0, 0);
  if (!hasNInputShapes(Ctx, 2))
    return;
  const TensorShapeProto &X = getInputShape(Ctx, 0);
  const TensorShapeProto &Grid = getInputShape(Ctx, 1);
  if (X.dim_size() < 3 || Grid.dim_size() != X.dim_size())
    fail_shape_inference("GridSample needs X of rank >= 3 and a grid of the "
                         "same rank");
  TensorShapeProto Out;
  *Out.add_dim() = X.dim(0);
  *Out.add_dim() = X.dim(1);
  for (int I = 1; I + 1 < Grid.dim_size(); ++I)
    *Out.add_dim() = Grid.dim(I);
  updateOutputShape(Ctx, 0, Out);
}

/// Opset 20's new and changed ops, as data.
std::vector<SchemaSpec> opset20Table() {
  return {
      {"Gelu",
       20,
       {"X:T"},
       {"Y:T"},
       {"approximate:string=none"},
       {{"T", floatTypes()}},
       propagateShapeAndTypeFromFirstInput},
      {"DFT",
       20,
       {"input:T1", "dft_length:T2?", "axis:tensor(int64)?"},
       {"output:T1"},
       {"inverse:int=0", "onesided:int=0"},
       {{"T1", floatTypes()}, {"T2", {"tensor(int32)", "tensor(int64)"}}},
       inferDFT},
      {"AffineGrid",
       20,
       {"theta:T1", "size:tensor(int64)"},
       {"grid:T1"},
       {"align_corners:int=0"},
       {{"T1", floatTypes()}},
       inferAffineGrid},
      {"GridSample",
       20,
       {"X:T1", "grid:T2"},
       {"Y:T1"},
       {"align_corners:int=0", "mode:string=linear",
        "padding_mode:string=zeros"},
       {{"T1", allTypes()}, {"T2", floatTypes()}},
       inferGridSample},
  };
}

/// A static dim of \p S at \p I, or -1.
int64_t dimOf(const TensorShapeProto &S, int I) {
  return I < S.dim_size() && S.dim(I).has_dim_value() ? S.dim(I).dim_value()
                                                      : -1;
}

/// Attention-23's shapes (the file header has the layouts).
void inferAttention(InferenceContext &Ctx) {
  propagateElemTypeFromInputToOutput(Ctx, 0, 0);
  for (size_t I = 1; I < 3 && I < Ctx.getNumOutputs(); ++I)
    if (hasInput(Ctx, 1))
      propagateElemTypeFromInputToOutput(Ctx, I, I);
  if (Ctx.getNumOutputs() > 3)
    propagateElemTypeFromInputToOutput(Ctx, 0, 3);
  if (!hasNInputShapes(Ctx, 3))
    return;
  const TensorShapeProto &Q = getInputShape(Ctx, 0);
  const TensorShapeProto &K = getInputShape(Ctx, 1);
  const TensorShapeProto &V = getInputShape(Ctx, 2);
  int Rank = Q.dim_size();
  if ((Rank != 3 && Rank != 4) || K.dim_size() != Rank || V.dim_size() != Rank)
    fail_shape_inference("Q, K and V must all be 3-D or all 4-D");
  int64_t QHeads = getAttribute(Ctx, "q_num_heads", 0);
  int64_t KVHeads = getAttribute(Ctx, "kv_num_heads", 0);
  if (Rank == 3 && (QHeads <= 0 || KVHeads <= 0))
    fail_shape_inference("3-D Q, K, V need q_num_heads and kv_num_heads");
  int64_t QH = Rank == 4 ? dimOf(Q, 1) : QHeads;
  int64_t KVH = Rank == 4 ? dimOf(K, 1) : KVHeads;
  if (QH > 0 && KVH > 0 && QH % KVH)
    fail_shape_inference("q heads (", QH, ") are not a multiple of kv heads (",
                         KVH, ")");
  int64_t VHidden = dimOf(V, Rank - 1);
  int64_t VHead = Rank == 4 ? VHidden : (VHidden > 0 ? VHidden / KVHeads : -1);
  if (Rank == 3 && VHidden > 0 && VHidden % KVHeads)
    fail_shape_inference("V's hidden size (", VHidden,
                         ") is not a multiple of kv_num_heads (", KVHeads, ")");
  TensorShapeProto Y = Q;
  if (VHead > 0)
    Y.mutable_dim(Rank - 1)->set_dim_value(Rank == 4 ? VHead : VHead * QH);
  else
    Y.mutable_dim(Rank - 1)->Clear();
  updateOutputShape(Ctx, 0, Y);
  // present = past (4-D) + new along the sequence.
  int64_t Total = -1;
  for (int I = 1; I <= 2 && (int)Ctx.getNumOutputs() > I; ++I) {
    if (!hasInput(Ctx, 3 + I) || !hasInputShape(Ctx, 3 + I))
      continue;
    const TensorShapeProto &Past = getInputShape(Ctx, 3 + I);
    const TensorShapeProto &New = I == 1 ? K : V;
    int64_t NewSeq = dimOf(New, Rank == 4 ? 2 : 1);
    TensorShapeProto P = Past;
    if (P.dim_size() != 4)
      fail_shape_inference("past_key and past_value must be 4-D");
    int64_t PastSeq = dimOf(Past, 2);
    if (PastSeq >= 0 && NewSeq >= 0)
      P.mutable_dim(2)->set_dim_value(PastSeq + NewSeq);
    else
      P.mutable_dim(2)->Clear();
    if (I == 1)
      Total = dimOf(P, 2);
    updateOutputShape(Ctx, I, P);
  }
  if (Ctx.getNumOutputs() > 3) {
    TensorShapeProto S;
    *S.add_dim() = Q.dim(0);
    if (QH > 0)
      S.add_dim()->set_dim_value(QH);
    else
      S.add_dim();
    *S.add_dim() = Q.dim(Rank == 4 ? 2 : 1);
    if (Total < 0)
      Total = dimOf(K, Rank == 4 ? 2 : 1);
    if (Total >= 0)
      S.add_dim()->set_dim_value(Total);
    else
      S.add_dim();
    updateOutputShape(Ctx, 3, S);
  }
}

void inferRotaryEmbedding(InferenceContext &Ctx) {
  propagateShapeAndTypeFromFirstInput(Ctx);
  if (hasInputShape(Ctx, 0)) {
    int R = getInputShape(Ctx, 0).dim_size();
    if (R != 3 && R != 4)
      fail_shape_inference("RotaryEmbedding needs a 3-D or 4-D X");
  }
}

void inferRMSNormalization(InferenceContext &Ctx) {
  propagateElemTypeFromInputToOutput(Ctx, 1, 0);
  if (hasInputShape(Ctx, 0))
    propagateShapeFromInputToOutput(Ctx, 0, 0);
}

/// Opset 23's LLM ops, as data.
std::vector<SchemaSpec> opset23Table() {
  return {
      {"Attention",
       23,
       {"Q:T1", "K:T1", "V:T2", "attn_mask:U?", "past_key:T1?",
        "past_value:T2?"},
       {"Y:T1", "present_key:T1?", "present_value:T2?", "qk_matmul_output:T1?"},
       {"is_causal:int=0", "kv_num_heads:int?", "q_num_heads:int?",
        "qk_matmul_output_mode:int=0", "scale:float?", "softcap:float=0",
        "softmax_precision:int?"},
       {{"T1", floatTypes()},
        {"T2", floatTypes()},
        {"U",
         {"tensor(bool)", "tensor(float)", "tensor(float16)",
          "tensor(bfloat16)", "tensor(double)"}}},
       inferAttention},
      {"RotaryEmbedding",
       23,
       {"X:T", "cos_cache:T", "sin_cache:T", "position_ids:M?"},
       {"Y:T"},
       {"interleaved:int=0", "num_heads:int?", "rotary_embedding_dim:int=0"},
       {{"T", floatTypes()}, {"M", {"tensor(int64)"}}},
       inferRotaryEmbedding},
      {"RMSNormalization",
       23,
       {"X:T", "scale:V"},
       {"Y:V"},
       {"axis:int=-1", "epsilon:float=1e-5", "stash_type:int=1"},
       {{"T", floatTypes()}, {"V", floatTypes()}},
       inferRMSNormalization},
  };
}

} // namespace

void addOpset19To23Schemas(std::vector<OpSchema> &Out) {
  addCastAndQuantize(Out);
  addSchemas(Out, opset20Table());
  addSchemas(Out, opset23Table());
}

} // namespace loom
