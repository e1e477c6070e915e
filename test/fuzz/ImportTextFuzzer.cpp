//===- ImportTextFuzzer.cpp - libFuzzer target: ONNX text-syntax import ---===//
//
// Input: the contents of a .onnxtxt file.
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  llvm::StringRef Text(reinterpret_cast<const char *>(Data), Size);
  loom::fuzz::exerciseModel(
      loom::importModelFromText(Text, "fuzz.onnxtxt", loom::fuzz::NoBaseDir));
  return 0;
}
