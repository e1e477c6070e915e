//===- RunPipeline.h - Run a pass pipeline in a unit test -------*- C++ -*-===//
//
// Parses "a,b,c" with the registered passes and runs it on a unit,
// failing the test (with the error) when either step fails.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TEST_UNIT_RUNPIPELINE_H
#define LOOM_TEST_UNIT_RUNPIPELINE_H

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

} // namespace loom

#endif // LOOM_TEST_UNIT_RUNPIPELINE_H
