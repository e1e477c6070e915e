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
#include <memory>
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

/// \p Text parsed as "hw.yaml"; an empty model (and a test failure) on
/// error.
inline HardwareModel parseTestHardware(llvm::StringRef Text) {
  llvm::Expected<HardwareModel> M = parseHardwareModel(Text, "hw.yaml");
  if (!M) {
    ADD_FAILURE() << llvm::toString(M.takeError());
    return HardwareModel();
  }
  return std::move(*M);
}

/// Imports ONNX text \p Text and infers its shapes; null (with a test
/// failure) on error.
inline std::unique_ptr<Model> loadShapedModel(llvm::StringRef Text) {
  llvm::Expected<std::unique_ptr<Model>> M = importModelFromText(Text, "test");
  if (!M) {
    ADD_FAILURE() << llvm::toString(M.takeError());
    return nullptr;
  }
  llvm::Expected<unsigned> Changed = inferShapes(**M);
  if (!Changed) {
    ADD_FAILURE() << llvm::toString(Changed.takeError());
    return nullptr;
  }
  return std::move(*M);
}

/// The toy NPU of the memory-tier tests: an aicore class (100 TFLOPS fp32,
/// 10 TFLOPS on the vector unit, 5 us per launch), an ssd class serving
/// Gathers (4 GB/s, 100 us per read), 16 GiB of HBM and 1 TB of SSD; with
/// \p WithAICPU also an aicpu class (100 GFLOPS fp32, 30 us per launch).
/// \p Devices of them over hccs at 100 GB/s.
inline std::string getSSDToyHW(unsigned Devices, bool WithAICPU) {
  std::string Y = "name: toy\n"
                  "device:\n"
                  "  name: toy-npu\n"
                  "  classes:\n"
                  "    aicore:\n"
                  "      throughput: {fp32: 100TFLOPS}\n"
                  "      vector_throughput: {fp32: 10TFLOPS}\n"
                  "      launch_overhead: 5us\n"
                  "      ops: [\"*\"]\n"
                  "      dtypes: [fp32, int32]\n";
  if (WithAICPU)
    Y += "    aicpu:\n"
         "      throughput: {fp32: 100GFLOPS, int64: 10GOPS}\n"
         "      launch_overhead: 30us\n"
         "      ops: [\"*\"]\n";
  Y += "    ssd:\n"
       "      bandwidth: 4GB/s\n"
       "      latency: 100us\n"
       "      launch_overhead: 10us\n"
       "      ops: [Gather]\n"
       "  memory:\n"
       "    hbm: {capacity: 16GiB, bandwidth: 1TB/s}\n"
       "    ssd: {capacity: 1TB, bandwidth: 4GB/s, latency: 100us}\n"
       "  transfers:\n"
       "    - {from: aicore, to: ssd, bandwidth: 1TB/s, latency: 10us}\n"
       "topology:\n"
       "  - {name: hccs, size: " +
       std::to_string(Devices) + ", bandwidth: 100GB/s, latency: 1us}\n";
  return Y;
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
