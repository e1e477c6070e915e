//===- HardwareYAMLFuzzer.cpp - libFuzzer target: hardware YAML -----------===//
//
// Input: the contents of a --hw file. An accepted description is printed
// and queried the way the cost model queries it.
//
//===----------------------------------------------------------------------===//
#include "loom/Hardware/HardwareModel.h"
#include "llvm/Support/raw_ostream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  llvm::StringRef Text(reinterpret_cast<const char *>(Data), Size);
  llvm::Expected<loom::HardwareModel> HW =
      loom::parseHardwareModel(Text, "fuzz.yaml");
  if (!HW) {
    llvm::consumeError(HW.takeError());
    return 0;
  }
  llvm::raw_null_ostream OS;
  HW->print(OS);
  (void)HW->getNumDevices();
  for (const loom::TopologyLevel &L : HW->Topology)
    (void)L.getEffectiveBandwidth();
  (void)HW->getTransfer("aicore", "aicpu");
  (void)HW->getMemory("hbm");
  return 0;
}
