//===- RunWriter.h - Gathered writes of byte runs to a file -----*- C++ -*-===//
//
// Emitting a rank's slice of a weight means writing many runs (one per row
// when columns are split) that sit far apart in the source. RunWriter hands
// them to the kernel in batches of pwritev(2) iovecs, so each byte is copied
// once, from the (mapped) source straight into the file's page cache: no
// staging buffer and no page faults on the destination.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SUPPORT_RUNWRITER_H
#define LOOM_SUPPORT_RUNWRITER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include <cstdint>
#include <vector>

namespace loom {

class RunWriter {
public:
  /// Writes to \p FD starting at byte \p Offset.
  RunWriter(llvm::sys::fs::file_t FD, uint64_t Offset)
      : FD(FD), Offset(Offset) {}
  /// Appends \p Run; its bytes must stay valid until the next flush() (add()
  /// flushes by itself when a batch is full). A run that continues the
  /// previous one in memory extends it.
  llvm::Error add(llvm::ArrayRef<char> Run);
  /// Appends \p Run to go at \p FileOffset (flushing first unless it
  /// continues the pending runs in the file).
  llvm::Error addAt(uint64_t FileOffset, llvm::ArrayRef<char> Run);
  /// Writes every pending run.
  llvm::Error flush();
  /// File offset just past the last byte added.
  uint64_t getEnd() const { return Offset + Pending; }

private:
  llvm::sys::fs::file_t FD;
  uint64_t Offset; ///< Where the pending runs go.
  uint64_t Pending = 0;
  std::vector<std::pair<const char *, uint64_t>> Runs;
};

} // namespace loom

#endif // LOOM_SUPPORT_RUNWRITER_H
