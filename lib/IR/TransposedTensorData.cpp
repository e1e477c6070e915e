//===- TransposedTensorData.cpp - A 2-D weight read as its transpose -----===//
#include "loom/IR/TransposedTensorData.h"
#include <cstring>

using namespace llvm;

namespace loom {

TransposedTensorData::TransposedTensorData(
    std::shared_ptr<const TensorData> Source, uint64_t Rows, uint64_t Cols,
    unsigned ElemSize)
    : Source(std::move(Source)), Rows(Rows), Cols(Cols), ElemSize(ElemSize) {}

Error TransposedTensorData::transposeInto(char *Out) const {
  return Source->withBytes([&](ArrayRef<char> B) -> Error {
    if (B.size() != getSize())
      return createStringError(inconvertibleErrorCode(),
                               "transposed tensor: source has %zu bytes, "
                               "expected %llu",
                               B.size(), (unsigned long long)getSize());
    for (uint64_t I = 0; I < Rows; ++I)
      for (uint64_t J = 0; J < Cols; ++J)
        std::memcpy(Out + (J * Rows + I) * ElemSize,
                    B.data() + (I * Cols + J) * ElemSize, ElemSize);
    return Error::success();
  });
}

Expected<ArrayRef<char>> TransposedTensorData::getBytes() const {
  std::call_once(Once, [&] {
    Cache.resize(getSize());
    if (Error E = transposeInto(Cache.data())) {
      CacheError = toString(std::move(E));
      Cache.clear();
    }
    Cached = true;
  });
  if (!CacheError.empty())
    return createStringError(inconvertibleErrorCode(), "%s",
                             CacheError.c_str());
  return ArrayRef<char>(Cache);
}

Error TransposedTensorData::withBytes(
    function_ref<Error(ArrayRef<char>)> Fn) const {
  if (Cached)
    return TensorData::withBytes(Fn);
  std::vector<char> Bytes(getSize());
  if (Error E = transposeInto(Bytes.data()))
    return E;
  return Fn(Bytes);
}

Error TransposedTensorData::readStrided(uint64_t First, uint64_t Stride,
                                        uint64_t Length, uint64_t Count,
                                        char *Out) const {
  return withBytes([&](ArrayRef<char> B) -> Error {
    if (Count &&
        (First > B.size() || (Count - 1) * Stride + Length > B.size() - First))
      return createStringError(inconvertibleErrorCode(),
                               "strided read past the end of %zu bytes of "
                               "tensor data",
                               B.size());
    for (uint64_t I = 0; I < Count; ++I)
      std::memcpy(Out + I * Length, B.data() + First + I * Stride, Length);
    return Error::success();
  });
}

} // namespace loom
