//===- ExternalData.cpp - Strided reads of external weight data -----------===//
//
// A rank's slice of a weight is many runs spread over the tensor (one per
// row when columns are split). Mapping the span once and copying the runs
// touches only the pages the slice lives on, and the mapping is dropped at
// the end, so emitting never holds more than one slice and one span's
// page-table.
//
//===----------------------------------------------------------------------===//
#include "ProtoTensorData.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include <cstring>

using namespace llvm;

namespace loom {

Error ExternalTensorData::readStrided(uint64_t First, uint64_t Stride,
                                      uint64_t Len, uint64_t Count,
                                      char *Out) const {
  if (!Count)
    return Error::success();
  uint64_t Span = (Count - 1) * Stride + Len;
  if (First > Length || Span > Length - First)
    return createStringError(inconvertibleErrorCode(),
                             "read past the end of external data '%s'",
                             Location.c_str());
  if (Count == 1 || Stride == Len || Len >= 512) {
    // Runs of at least a few hundred bytes: read each straight into the
    // caller's buffer (one copy, from the page cache). Mapping the span
    // instead would map every page of it (the kernel's fault-around), for
    // every rank.
    Expected<sys::fs::file_t> F = sys::fs::openNativeFileForRead(Path);
    if (!F)
      return createStringError(errorToErrorCode(F.takeError()),
                               "cannot read external data '%s'", Path.c_str());
    auto Close = make_scope_exit([&] { sys::fs::closeFile(*F); });
    bool Contiguous = Count == 1 || Stride == Len;
    uint64_t Runs = Contiguous ? 1 : Count;
    uint64_t RunLen = Contiguous ? Len * Count : Len;
    for (uint64_t I = 0; I < Runs; ++I) {
      uint64_t Done = 0;
      char *Dst = Out + I * RunLen;
      uint64_t Src = Offset + First + I * Stride;
      while (Done < RunLen) {
        Expected<size_t> N = sys::fs::readNativeFileSlice(
            *F, makeMutableArrayRef(Dst + Done, RunLen - Done), Src + Done);
        if (!N)
          return N.takeError();
        if (*N == 0)
          return createStringError(inconvertibleErrorCode(),
                                   "external data '%s' is shorter than "
                                   "declared",
                                   Path.c_str());
        Done += *N;
      }
    }
    return Error::success();
  }
  ErrorOr<std::unique_ptr<MemoryBuffer>> MB = MemoryBuffer::getFileSlice(
      Path, Span, Offset + First, /*IsVolatile=*/false);
  if (!MB)
    return createStringError(MB.getError(), "cannot read external data '%s'",
                             Path.c_str());
  const char *Base = (*MB)->getBufferStart();
  for (uint64_t I = 0; I < Count; ++I)
    std::memcpy(Out + I * Len, Base + I * Stride, Len);
  return Error::success();
}

} // namespace loom
