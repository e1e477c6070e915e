//===- MemoryLimit.h - A memory bound that fails with a message -*- C++ -*-===//
//
// A process that outgrows the machine is OOM-killed without a word. Tools
// call installMemoryLimit() first: it caps the process's data segment
// (RLIMIT_DATA: heap and anonymous mappings) and turns an allocation that
// the cap refuses into one error line and exit status 1.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SUPPORT_MEMORYLIMIT_H
#define LOOM_SUPPORT_MEMORYLIMIT_H

#include "llvm/ADT/StringRef.h"
#include <cstdint>

namespace loom {

/// Physical memory of the machine in bytes, or 0 if unknown.
uint64_t getPhysicalMemoryBytes();

/// Caps the data segment at \p Bytes (0: leave it) and installs the
/// out-of-memory handler, which prints "<Tool>: error: out of memory: ..."
/// and exits with status 1. Under AddressSanitizer only the handler is
/// installed: ASan's shadow memory would count against the cap.
void installMemoryLimit(uint64_t Bytes, llvm::StringRef Tool);

} // namespace loom

#endif // LOOM_SUPPORT_MEMORYLIMIT_H
