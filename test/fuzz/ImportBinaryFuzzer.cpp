//===- ImportBinaryFuzzer.cpp - libFuzzer target: binary ONNX import ------===//
//
// Input: the bytes of a .onnx file (a serialized ModelProto).
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  llvm::StringRef Bytes(reinterpret_cast<const char *>(Data), Size);
  loom::fuzz::exerciseModel(
      loom::importModelFromBinary(Bytes, "fuzz.onnx", loom::fuzz::NoBaseDir));
  return 0;
}
