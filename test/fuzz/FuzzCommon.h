//===- FuzzCommon.h - Shared helpers for Loom's libFuzzer targets -*- C++
//-*-===//
//
// Each target feeds one input to a Loom entry point and, when it is
// accepted, walks the result through the code a real run would touch next
// (verifier, printer, exporter). Rejections are the expected outcome for
// almost every input; only crashes, sanitizer reports, leaks and timeouts
// count as findings.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TEST_FUZZ_FUZZCOMMON_H
#define LOOM_TEST_FUZZ_FUZZCOMMON_H

#include "loom/IR/Graph.h"
#include "loom/ONNX/ONNX.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace loom {
namespace fuzz {

/// External data named by a fuzzed model resolves against this directory,
/// which does not exist: the importer sees every external tensor as
/// shape-only and never opens a file the input chose.
inline constexpr const char *NoBaseDir = "/nonexistent/loom-fuzz";

/// Runs what follows a successful import: the verifier, the IR printer and
/// the exporter (which reads every inline tensor's bytes).
inline void exerciseModel(llvm::Expected<std::unique_ptr<Model>> M) {
  if (!M) {
    llvm::consumeError(M.takeError());
    return;
  }
  llvm::consumeError(verifyModel(**M));
  llvm::raw_null_ostream OS;
  printModel(**M, OS);
  llvm::Expected<std::string> Bytes = exportModel(**M);
  if (!Bytes)
    llvm::consumeError(Bytes.takeError());
}

} // namespace fuzz
} // namespace loom

#endif // LOOM_TEST_FUZZ_FUZZCOMMON_H
