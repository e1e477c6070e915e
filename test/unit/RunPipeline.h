//===- RunPipeline.h - Run a pass pipeline in a unit test -------*- C++ -*-===//
//
// Parses "a,b,c" with the registered passes and runs it on a unit,
// failing the test (with the error) when either step fails.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TEST_UNIT_RUNPIPELINE_H
#define LOOM_TEST_UNIT_RUNPIPELINE_H

#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <string>

namespace loom {

inline void runPipeline(CompilationUnit &CU, llvm::StringRef Pipeline) {
  PassManager PM(getRegisteredPasses());
  ASSERT_FALSE(!!PM.parsePipeline(Pipeline));
  std::string Sink;
  llvm::raw_string_ostream OS(Sink);
  llvm::Error E = PM.run(CU, PassInstrumentation(), OS, OS);
  ASSERT_FALSE(!!E) << llvm::toString(std::move(E));
}

/// Parses \p HWYaml into \p HW and \p Model (ONNX text) into \p CU, then
/// shapes, layers and costs it: what an evaluator needs.
inline void loadAndCost(CompilationUnit &CU, HardwareModel &HW,
                        const std::string &HWYaml, const std::string &Model) {
  llvm::Expected<HardwareModel> H = parseHardwareModel(HWYaml, "hw.yaml");
  ASSERT_TRUE(!!H) << (H ? "" : llvm::toString(H.takeError()));
  HW = std::move(*H);
  auto M = importModelFromText(Model, "model.onnxtxt");
  ASSERT_TRUE(!!M) << (M ? "" : llvm::toString(M.takeError()));
  CU.M = std::move(*M);
  CU.HW = &HW;
  runPipeline(CU, "infer-shapes,detect-layers,annotate-costs");
}

} // namespace loom

#endif // LOOM_TEST_UNIT_RUNPIPELINE_H
