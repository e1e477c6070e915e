//===- LoadModel.h - Models and hardware set up for unit tests --*- C++ -*-===//
//
// The set-up that several tests repeated: a compilation unit holding a
// model (ONNX text, or one of examples/models) after a pass pipeline, and
// the one-class device the fused-kernel tests cost on. Failures fail the
// test with the error.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TEST_UNIT_LOADMODEL_H
#define LOOM_TEST_UNIT_LOADMODEL_H

#include "RunPipeline.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "gtest/gtest.h"
#include <string>

namespace loom {

/// A unit holding the model of ONNX text \p Text ("model.onnxtxt") after
/// \p Pipeline, run with the options \p Opts and the hardware \p HW (not
/// owned; may be null).
inline CompilationUnit
loadTextModel(llvm::StringRef Text,
              llvm::StringRef Pipeline = "infer-shapes,detect-layers",
              const HardwareModel *HW = nullptr,
              CompileOptions Opts = CompileOptions()) {
  CompilationUnit CU;
  auto M = importModelFromText(Text, "model.onnxtxt");
  EXPECT_TRUE(!!M) << (M ? "" : llvm::toString(M.takeError()));
  CU.M = std::move(*M);
  CU.Opts = std::move(Opts);
  CU.HW = HW;
  runPipeline(CU, Pipeline);
  return CU;
}

/// A unit holding examples/models/\p Name bound at batch 2 and sequence 16,
/// its shapes inferred and folded and its layers detected.
inline CompilationUnit loadExampleModel(const char *Name) {
  CompilationUnit CU;
  auto M = importModelFile(std::string(LOOM_SOURCE_DIR) + "/examples/models/" +
                           Name);
  EXPECT_TRUE(!!M) << (M ? "" : llvm::toString(M.takeError()));
  CU.M = std::move(*M);
  CU.Opts.Batch = 2;
  CU.Opts.Seq = 16;
  runPipeline(CU, "bind-symbols,infer-shapes,fold-shape-arith,detect-layers");
  return CU;
}

/// The YAML of the fused-kernel tests' device: one aicore class at 100
/// TFLOPS fp16 (and \p VectorThroughput on the vector unit, when given),
/// 1 us per launch, the fused kernel \p Kernel at efficiency 0.5 forward
/// and 0.25 backward, and HBM at \p HBMBandwidth; 8 of them over hccs.
inline std::string getFusedKernelHW(llvm::StringRef Kernel,
                                    llvm::StringRef HBMBandwidth,
                                    llvm::StringRef VectorThroughput = "") {
  std::string Y = "name: fusedunit\n"
                  "device:\n"
                  "  name: npu\n"
                  "  classes:\n"
                  "    aicore:\n"
                  "      throughput: {fp16: 100TFLOPS}\n";
  if (!VectorThroughput.empty())
    Y += "      vector_throughput: {fp16: " + VectorThroughput.str() + "}\n";
  Y += "      launch_overhead: 1us\n"
       "      ops: [\"*\"]\n"
       "      fused_kernels:\n"
       "        " +
       Kernel.str() +
       ": {efficiency: 0.5, backward_efficiency: 0.25}\n"
       "  memory:\n"
       "    hbm: {capacity: 64GiB, bandwidth: " +
       HBMBandwidth.str() +
       "}\n"
       "topology:\n"
       "  - {name: hccs, size: 8, bandwidth: 100GB/s, latency: 1us}\n";
  return Y;
}

/// \p Text costed on \p HW through the fused-kernel recognition, with the
/// options \p Opts (e.g. --fused-kernels).
inline CompilationUnit costFused(llvm::StringRef Text, const HardwareModel &HW,
                                 CompileOptions Opts = CompileOptions()) {
  return loadTextModel(Text,
                       "infer-shapes,detect-layers,annotate-costs,"
                       "detect-fused-kernels",
                       &HW, std::move(Opts));
}

} // namespace loom

#endif // LOOM_TEST_UNIT_LOADMODEL_H
