//===- Validation.h - Hardware model checks, with key paths -----*- C++ -*-===//
//
// Private to lib/Hardware. validate() reports a violation as a key path and a
// message; the YAML loader turns the path back into a line and column, so
// one set of checks serves both hand-built models and files.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_HARDWARE_VALIDATION_H
#define LOOM_LIB_HARDWARE_VALIDATION_H

#include "loom/Hardware/HardwareModel.h"

#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace loom {
namespace hardware_detail {

/// The first rule \p M breaks.
struct Violation {
  /// Key path in the YAML, e.g. "topology[1].bandwidth" or
  /// "device.classes.aicore.throughput.f16" (map keys as normalized).
  std::string Path;
  std::string Message;
  /// Point at the key itself rather than its value (unknown names).
  bool AtKey = false;
};

llvm::Optional<Violation> findViolation(const HardwareModel &M);

/// The IR's short name for a data type spelled \p Name in any accepted way
/// (fp16, float16, F16 -> "f16"), or "" if unknown.
llvm::StringRef canonicalDataTypeName(llvm::StringRef Name);

} // namespace hardware_detail
} // namespace loom

#endif // LOOM_LIB_HARDWARE_VALIDATION_H
