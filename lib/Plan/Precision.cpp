//===- Precision.cpp - The training precision recipe ----------------------===//
#include "loom/Plan/Precision.h"
#include "loom/Cost/OpCost.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/Framework.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

using namespace llvm;

namespace loom {

StringRef getPrecisionName(PrecisionKind K) {
  switch (K) {
  case PrecisionKind::BF16:
    return "bf16";
  case PrecisionKind::FP16:
    return "fp16";
  case PrecisionKind::FP32:
    return "fp32";
  case PrecisionKind::TF32:
    return "tf32";
  case PrecisionKind::FP8:
    return "fp8";
  }
  return "bf16";
}

Optional<PrecisionKind> parsePrecisionName(StringRef S) {
  return StringSwitch<Optional<PrecisionKind>>(S)
      .Case("bf16", PrecisionKind::BF16)
      .Case("fp16", PrecisionKind::FP16)
      .Case("fp32", PrecisionKind::FP32)
      .Case("tf32", PrecisionKind::TF32)
      .Case("fp8", PrecisionKind::FP8)
      .Default(None);
}

StringRef getPrecisionNames() { return "bf16, fp16, fp32, tf32, fp8"; }

PrecisionRecipe makePrecisionRecipe(PrecisionKind K, bool Serving) {
  PrecisionRecipe R;
  R.Kind = K;
  switch (K) {
  case PrecisionKind::BF16:
    R.Storage = DataType::BFloat16;
    break;
  case PrecisionKind::FP8:
    // Precision.h: bf16 around fp8 weight GEMMs. Training keeps bf16
    // weights and fp32 masters (TE casts fp8 copies from them); serving
    // stores the weights in fp8 and has no optimizer.
    R.Storage = DataType::BFloat16;
    R.CubeFormat = "fp8";
    R.Serving = Serving;
    if (Serving) {
      R.WeightBytes = 1;
      R.MasterBytes = 0;
    } else {
      R.AmaxHistory = 1024; // DelayedScaling.amax_history_len's default
    }
    break;
  case PrecisionKind::FP16:
    R.Storage = DataType::Float16;
    break;
  case PrecisionKind::FP32:
  case PrecisionKind::TF32:
    R.Storage = DataType::Float;
    R.WeightBytes = 4;
    R.MasterBytes = 0;
    R.Allows16BitGrads = false;
    if (K == PrecisionKind::TF32)
      R.CubeFormat = "tf32";
    break;
  }
  return R;
}

std::string PrecisionRecipe::getCubeFormat() const {
  return CubeFormat.empty() ? getDataTypeName(Storage).str() : CubeFormat;
}

std::string PrecisionRecipe::describe() const {
  std::string S = getPrecisionName(Kind).str();
  std::string St = getDataTypeName(Storage).str();
  if (isFP8() && Serving)
    return "fp8 serving (fp8 weights, GEMM activations and KV cache, 1 byte "
           "per element, per-tensor scales; GEMMs in fp8; norms, softmax and "
           "attention in " +
           St + ")";
  if (isFP8())
    return "fp8 training, Transformer Engine's delayed scaling (hybrid: e4m3 "
           "forward, e5m2 gradients; weight GEMMs in fp8 forward and "
           "backward; " +
           St +
           " weights, activations, attention and collectives; fp32 master "
           "weights and Adam states; amax history " +
           std::to_string(AmaxHistory) + " and one fp32 scale per tensor)";
  if (MasterBytes > 0)
    return S + " mixed precision (" + St +
           " matmuls, activations and collectives; fp32 master weights and "
           "Adam states; fp32 accumulation in norms and softmax)";
  if (!CubeFormat.empty())
    return S + " (fp32 storage, activations and collectives; matmuls in " +
           CubeFormat + " on the matrix unit; fp32 Adam states)";
  return S + " (fp32 matmuls, activations, collectives, weights and Adam "
             "states)";
}

void PrecisionRecipe::applyToCube(OpCost &C, bool WeightGemm) const {
  if (CubeFormat.empty() || (isFP8() && !WeightGemm))
    return;
  C.CubeFormat = CubeFormat;
  if (!isFP8())
    return;
  double Elem = getDataTypeSize(Storage);
  if (Serving) {
    // Weights, input and output activations stored in fp8: 1 byte per
    // element where the bf16 recipe moves Elem.
    C.BytesRead /= Elem;
    C.BytesWritten /= Elem;
    C.ParamBytes /= Elem;
    return;
  }
  // TE's quantization of each operand: one read of the Elem-byte tensor,
  // one write of its fp8 copy, which the GEMM then reads (1 byte): 2
  // bytes more per element than the bf16 GEMM's read, 2 / Elem of the
  // bytes read. The two quantized tensors of the forward (input, weight)
  // each read their amax history and scale. The backward (twice the
  // forward's bytes, OpCost::BackwardBytes) quantizes the output gradient
  // likewise.
  C.BytesRead += C.BytesRead * 2 / Elem + 2 * getScalingStateBytes();
}

json::Value PrecisionRecipe::toJSON() const {
  json::Array Grads{"fp32"};
  if (Allows16BitGrads)
    Grads.push_back("bf16");
  json::Value V = json::Object{{"recipe", getPrecisionName(Kind)},
                               {"matmul", getCubeFormat()},
                               {"storage", getDataTypeName(Storage)},
                               {"weight_bytes_per_param", WeightBytes},
                               {"master_bytes_per_param", MasterBytes},
                               {"grad_reduce", std::move(Grads)},
                               {"why", Why}};
  if (isFP8()) {
    json::Object &O = *V.getAsObject();
    O["mode"] = Serving ? "serve" : "train";
    if (Serving) {
      O["kv_cache"] = "fp8";
    } else {
      O["fp8_format"] = "hybrid";
      O["amax_history_len"] = (int64_t)AmaxHistory;
      O["amax_compute_algo"] = "max";
      O["scaling_bytes_per_tensor"] = getScalingStateBytes();
    }
  }
  return V;
}

PrecisionKind getHardwareDefaultPrecision(const HardwareModel &HW) {
  const DeviceClass *C = HW.getClass("aicore");
  if (!C)
    return PrecisionKind::FP32;
  for (PrecisionKind K : {PrecisionKind::BF16, PrecisionKind::FP16}) {
    PrecisionRecipe R = makePrecisionRecipe(K);
    if (C->getThroughput(R.getCubeFormat()) &&
        C->supportsDataType(getDataTypeName(R.Storage)))
      return K;
  }
  return PrecisionKind::FP32;
}

/// The rule \p R breaks on \p HW (from \p HWFile), or success.
static Error checkOnHardware(const PrecisionRecipe &R, const HardwareModel &HW,
                             StringRef HWFile, StringRef Flag) {
  const DeviceClass *C = HW.getClass("aicore");
  if (!C)
    return Error::success();
  std::string Where = (HWFile.empty() ? "" : HWFile.str() + ": ") + Flag.str() +
                      ": hardware '" + HW.Name + "'";
  std::string Cube = R.getCubeFormat();
  if (!C->getThroughput(Cube))
    return createStringError(
        inconvertibleErrorCode(),
        "%s, device class aicore (%s), lists no %s throughput "
        "(device.classes.aicore.throughput): the rule is that a precision "
        "recipe computes its matmuls in a format the device's matrix unit "
        "has",
        Where.c_str(), HW.Device.Name.c_str(), Cube.c_str());
  StringRef St = getDataTypeName(R.Storage);
  if (!C->supportsDataType(St))
    return createStringError(
        inconvertibleErrorCode(),
        "%s, device class aicore, does not list data type %s "
        "(device.classes.aicore.dtypes): the rule is that the recipe's "
        "activations and weights are stored in a type the device computes",
        Where.c_str(), St.str().c_str());
  return Error::success();
}

Expected<PrecisionRecipe> resolvePrecision(Optional<StringRef> Flag,
                                           const FrameworkProfile *F,
                                           const HardwareModel &HW,
                                           bool Serving, StringRef HWFile) {
  const FrameworkPrecision *FP =
      F && F->Precision ? F->Precision.getPointer() : nullptr;
  PrecisionKind K;
  std::string Why;
  if (Flag) {
    Optional<PrecisionKind> P = parsePrecisionName(*Flag);
    if (!P)
      return createStringError(
          inconvertibleErrorCode(), "--precision %s: expected one of %s",
          Flag->str().c_str(), getPrecisionNames().str().c_str());
    K = *P;
    Why = "--precision";
  } else if (FP) {
    K = FP->Default;
    Why = F->Name + "'s default (" + FP->Source + ")";
  } else {
    K = getHardwareDefaultPrecision(HW);
    Why = "Loom's default for --framework none: 16-bit mixed precision, "
          "bf16 where the hardware has it, else fp16";
  }
  PrecisionRecipe R = makePrecisionRecipe(K, Serving);
  R.Why = std::move(Why);
  std::string What =
      Flag ? ("--precision " + Flag->str())
           : ("precision " + getPrecisionName(K).str() + " (" + R.Why + ")");
  if (Error E = checkOnHardware(R, HW, HWFile, What))
    return std::move(E);
  if (FP && !is_contained(FP->Values, K)) {
    std::string Known;
    for (PrecisionKind V : FP->Values)
      Known += (Known.empty() ? "" : ", ") + getPrecisionName(V).str();
    return createStringError(
        inconvertibleErrorCode(),
        "%s: --framework %s runs only %s (%s): the rule is that Loom "
        "costs only recipes the framework can run",
        What.c_str(), F->Name.c_str(), Known.c_str(), FP->Source.c_str());
  }
  return R;
}

} // namespace loom
