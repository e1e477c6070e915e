//===- RunWriter.cpp - Gathered writes of byte runs to a file -------------===//
#include "loom/Support/RunWriter.h"
#include <cerrno>
#include <climits>
#include <sys/uio.h>
#include <unistd.h>

using namespace llvm;

namespace loom {

// Batches stay within IOV_MAX iovecs; Linux also caps one call at
// 0x7ffff000 bytes, which the partial-write loop below absorbs.
static constexpr size_t MaxRuns = IOV_MAX;

Error RunWriter::add(ArrayRef<char> Run) {
  if (Run.empty())
    return Error::success();
  if (!Runs.empty() && Runs.back().first + Runs.back().second == Run.data()) {
    Runs.back().second += Run.size();
  } else {
    if (Runs.size() == MaxRuns)
      if (Error E = flush())
        return E;
    Runs.emplace_back(Run.data(), Run.size());
  }
  Pending += Run.size();
  return Error::success();
}

Error RunWriter::addAt(uint64_t FileOffset, ArrayRef<char> Run) {
  if (FileOffset != getEnd()) {
    if (Error E = flush())
      return E;
    Offset = FileOffset;
  }
  return add(Run);
}

Error RunWriter::flush() {
  size_t First = 0; // Runs[First] is the first not fully written.
  std::vector<iovec> Iov;
  while (First < Runs.size()) {
    Iov.clear();
    for (size_t I = First; I < Runs.size(); ++I)
      Iov.push_back({const_cast<char *>(Runs[I].first), Runs[I].second});
    ssize_t N = ::pwritev(FD, Iov.data(), (int)Iov.size(), (off_t)Offset);
    if (N < 0) {
      if (errno == EINTR)
        continue;
      return errorCodeToError(std::error_code(errno, std::generic_category()));
    }
    if (N == 0)
      return errorCodeToError(std::make_error_code(std::errc::io_error));
    Offset += N;
    Pending -= N;
    // Drop what was written; a run written in part keeps its tail.
    uint64_t Left = N;
    while (Left && Left >= Runs[First].second)
      Left -= Runs[First++].second;
    if (Left) {
      Runs[First].first += Left;
      Runs[First].second -= Left;
    }
  }
  Runs.clear();
  return Error::success();
}

} // namespace loom
