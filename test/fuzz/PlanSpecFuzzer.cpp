//===- PlanSpecFuzzer.cpp - libFuzzer target: the --plan string -----------===//
//
// Input: the text of `--plan`. An accepted spec is completed for a few
// cluster sizes and batches, as `plan-parallel --plan` does after loading
// the hardware, and printed.
//
//===----------------------------------------------------------------------===//
#include "loom/Plan/ParallelPlan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  llvm::StringRef Text(reinterpret_cast<const char *>(Data), Size);
  llvm::Expected<loom::PlanSpec> Spec = loom::parsePlanSpec(Text);
  if (!Spec) {
    llvm::consumeError(Spec.takeError());
    return 0;
  }
  // Cluster sizes and batches from the shipped examples up to the largest
  // a hardware description may declare; batch 0 means "no --batch".
  static const uint64_t Devices[] = {1, 8, 128, 384, 1024, 1u << 20};
  static const int64_t Batches[] = {0, 1, 8, 1024, int64_t(1) << 40};
  for (uint64_t D : Devices)
    for (int64_t B : Batches) {
      llvm::Expected<loom::ParallelPlan> P = loom::completePlan(*Spec, D, B);
      if (P)
        (void)P->str();
      else
        llvm::consumeError(P.takeError());
    }
  return 0;
}
