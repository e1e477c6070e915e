//===- Precision.cpp - The training precision recipe ----------------------===//
#include "loom/Plan/Precision.h"
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
  }
  return "bf16";
}

Optional<PrecisionKind> parsePrecisionName(StringRef S) {
  return StringSwitch<Optional<PrecisionKind>>(S)
      .Case("bf16", PrecisionKind::BF16)
      .Case("fp16", PrecisionKind::FP16)
      .Case("fp32", PrecisionKind::FP32)
      .Case("tf32", PrecisionKind::TF32)
      .Default(None);
}

StringRef getPrecisionNames() { return "bf16, fp16, fp32, tf32"; }

PrecisionRecipe makePrecisionRecipe(PrecisionKind K) {
  PrecisionRecipe R;
  R.Kind = K;
  switch (K) {
  case PrecisionKind::BF16:
    R.Storage = DataType::BFloat16;
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

json::Value PrecisionRecipe::toJSON() const {
  json::Array Grads{"fp32"};
  if (Allows16BitGrads)
    Grads.push_back("bf16");
  return json::Object{{"recipe", getPrecisionName(Kind)},
                      {"matmul", getCubeFormat()},
                      {"storage", getDataTypeName(Storage)},
                      {"weight_bytes_per_param", WeightBytes},
                      {"master_bytes_per_param", MasterBytes},
                      {"grad_reduce", std::move(Grads)},
                      {"why", Why}};
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

/// The rule \p R breaks on \p HW, or success.
static Error checkOnHardware(const PrecisionRecipe &R, const HardwareModel &HW,
                             StringRef Flag) {
  const DeviceClass *C = HW.getClass("aicore");
  if (!C)
    return Error::success();
  std::string Cube = R.getCubeFormat();
  std::string Name = getPrecisionName(R.Kind).str();
  if (!C->getThroughput(Cube))
    return createStringError(
        inconvertibleErrorCode(),
        "%s: hardware '%s' lists no %s throughput for its aicore "
        "(device.classes.aicore.throughput): the rule is that a precision "
        "recipe computes its matmuls in a format the device's matrix unit "
        "has",
        Flag.str().c_str(), HW.Name.c_str(), Cube.c_str());
  StringRef St = getDataTypeName(R.Storage);
  if (!C->supportsDataType(St))
    return createStringError(
        inconvertibleErrorCode(),
        "%s: hardware '%s' aicore does not list data type %s "
        "(device.classes.aicore.dtypes): the rule is that the recipe's "
        "activations and weights are stored in a type the device computes",
        Flag.str().c_str(), HW.Name.c_str(), St.str().c_str());
  (void)Name;
  return Error::success();
}

Expected<PrecisionRecipe> resolvePrecision(Optional<StringRef> Flag,
                                           const FrameworkProfile *F,
                                           const HardwareModel &HW) {
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
  PrecisionRecipe R = makePrecisionRecipe(K);
  R.Why = std::move(Why);
  std::string What =
      Flag ? ("--precision " + Flag->str())
           : ("precision " + getPrecisionName(K).str() + " (" + R.Why + ")");
  if (Error E = checkOnHardware(R, HW, What))
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
