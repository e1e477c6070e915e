//===- SearchTestCases.h - Random small cases for the search tests -*- C++
//-*-===//
//
// Random small transformers (ONNX text, shape-only weights) on random
// two-level clusters with small HBM, costed and ready for the search;
// shared by SearchTest.cpp (which defines them) and PlanConstraintsTest.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TEST_UNIT_SEARCHTESTCASES_H
#define LOOM_TEST_UNIT_SEARCHTESTCASES_H

#include "loom/Hardware/HardwareModel.h"
#include "loom/Pass/Pass.h"
#include "loom/Planner/Search.h"
#include <memory>
#include <string>
#include <vector>

namespace loom {
namespace searchtest {

/// A random case: model shape, cluster, batch.
struct RandomCase {
  unsigned Layers = 2, Hidden = 32, Heads = 4, FFN = 64, Vocab = 64;
  unsigned Batch = 8, Seq = 16;
  unsigned Inner = 4, Outer = 2; ///< Topology level sizes.
  unsigned TPLevels = 1;         ///< Levels that allow TP (innermost first).
  unsigned HBMKiB = 4096;
  bool Train = true;
  std::string str() const;
};

/// Deterministic for a seed.
RandomCase makeRandomCase(unsigned Seed);
std::string makeTransformer(const RandomCase &C);
std::string makeHardware(const RandomCase &C);

/// A costed unit for a case, and the evaluator the search uses.
struct Fixture {
  RandomCase C;
  HardwareModel HW;
  CompilationUnit CU;
  EvaluatorOptions EO;
  std::unique_ptr<PlanEvaluator> Eval;

  explicit Fixture(const RandomCase &RC);
  uint64_t getDevices() const;
  llvm::Expected<SearchResult> search(const SearchOptions &O) const;
};

std::vector<uint64_t> divisorsOf(uint64_t N);

} // namespace searchtest
} // namespace loom

#endif // LOOM_TEST_UNIT_SEARCHTESTCASES_H
