//===- ExternalData.cpp - Reading and copying external weight data --------===//
//
// A rank's slice of a weight is many runs spread over the tensor (one per
// row when columns are split). Reads copy the runs with pread, run by run;
// writes of a slice into an emitted data file copy them file to file with
// copy_file_range, so the bytes never pass through Loom's memory and nothing
// of the source is mapped: emitting holds no weight data at all.
//
//===----------------------------------------------------------------------===//
#include "ProtoTensorData.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include <cerrno>
#include <cstring>
#include <unistd.h>

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

/// Copies \p Len bytes from \p Src at \p SrcOff to \p Dst at \p DstOff.
/// copy_file_range(2) moves them page cache to page cache inside the kernel
/// (no user-space copy, no mapping); where it is refused (another file
/// system on old kernels, special files) \p UseCopy is cleared and the
/// bytes go through \p Buf with pread/pwrite.
static std::error_code copyRange(int Src, uint64_t SrcOff, int Dst,
                                 uint64_t DstOff, uint64_t Len, bool &UseCopy,
                                 std::vector<char> &Buf) {
  while (Len && UseCopy) {
    loff_t In = SrcOff, Out = DstOff;
    ssize_t N = ::copy_file_range(Src, &In, Dst, &Out, Len, 0);
    if (N > 0) {
      SrcOff += N;
      DstOff += N;
      Len -= N;
      continue;
    }
    if (N == 0) // The source ends early.
      return std::make_error_code(std::errc::io_error);
    if (errno == EINTR)
      continue;
    if (errno != EXDEV && errno != EINVAL && errno != ENOSYS &&
        errno != EOPNOTSUPP && errno != EBADF)
      return std::error_code(errno, std::generic_category());
    UseCopy = false;
  }
  if (Buf.empty() && Len)
    Buf.resize(1 << 20);
  while (Len) {
    size_t Chunk = std::min<uint64_t>(Len, Buf.size());
    ssize_t N = ::pread(Src, Buf.data(), Chunk, SrcOff);
    if (N < 0 && errno == EINTR)
      continue;
    if (N <= 0)
      return N < 0 ? std::error_code(errno, std::generic_category())
                   : std::make_error_code(std::errc::io_error);
    for (ssize_t Done = 0; Done < N;) {
      ssize_t W = ::pwrite(Dst, Buf.data() + Done, N - Done, DstOff + Done);
      if (W < 0 && errno == EINTR)
        continue;
      if (W <= 0)
        return W < 0 ? std::error_code(errno, std::generic_category())
                     : std::make_error_code(std::errc::io_error);
      Done += W;
    }
    SrcOff += N;
    DstOff += N;
    Len -= N;
  }
  return std::error_code();
}

Error ExternalTensorData::writeStrided(uint64_t First, uint64_t Stride,
                                       uint64_t Len, uint64_t Count,
                                       sys::fs::file_t FD, uint64_t Off,
                                       uint64_t DestStride) const {
  if (!Count)
    return Error::success();
  if (First > Length || (Count - 1) * Stride + Len > Length - First)
    return createStringError(inconvertibleErrorCode(),
                             "read past the end of external data '%s'",
                             Location.c_str());
  Expected<sys::fs::file_t> Src = sys::fs::openNativeFileForRead(Path);
  if (!Src)
    return createStringError(errorToErrorCode(Src.takeError()),
                             "cannot read external data '%s'", Path.c_str());
  auto Close = make_scope_exit([&] { sys::fs::closeFile(*Src); });
  // Runs adjacent both in the source and in the file are one copy.
  if (Stride == Len && DestStride == Len) {
    Len *= Count;
    Count = 1;
  }
  bool UseCopy = true;
  std::vector<char> Buf;
  for (uint64_t I = 0; I < Count; ++I)
    if (std::error_code EC = copyRange(*Src, Offset + First + I * Stride, FD,
                                       Off + I * DestStride, Len, UseCopy, Buf))
      return createStringError(EC, "copying external data '%s': %s",
                               Path.c_str(), EC.message().c_str());
  return Error::success();
}

Error ExternalTensorData::withBytes(
    function_ref<Error(ArrayRef<char>)> Fn) const {
  const MemoryBuffer *Kept;
  {
    std::lock_guard<std::mutex> Lock(MappedLock);
    Kept = Mapped.get(); // Once set by getBytes(), kept for good.
  }
  if (Kept)
    return Fn(ArrayRef<char>(Kept->getBufferStart(), Kept->getBufferSize()));
  // A mapping for this call only: its pages leave the process with it.
  Expected<std::unique_ptr<MemoryBuffer>> MB = map();
  if (!MB)
    return MB.takeError();
  return Fn(ArrayRef<char>((*MB)->getBufferStart(), (*MB)->getBufferSize()));
}

Expected<std::unique_ptr<MemoryBuffer>> ExternalTensorData::map() const {
  ErrorOr<std::unique_ptr<MemoryBuffer>> MB =
      MemoryBuffer::getFileSlice(Path, Length, Offset, /*IsVolatile=*/false);
  if (!MB)
    return createStringError(MB.getError(),
                             "cannot read external data '%s': %s", Path.c_str(),
                             MB.getError().message().c_str());
  if ((*MB)->getBufferSize() != Length)
    return createStringError(inconvertibleErrorCode(),
                             "external data '%s' is shorter than declared",
                             Path.c_str());
  return std::move(*MB);
}

} // namespace loom
