//===- PaddedTensorData.cpp - A weight padded with zeros along one dim ----===//
#include "loom/IR/PaddedTensorData.h"
#include <cstring>

using namespace llvm;

namespace loom {

PaddedTensorData::PaddedTensorData(std::shared_ptr<const TensorData> Source,
                                   ArrayRef<int64_t> Shape, unsigned ElemSize,
                                   int Dim, int64_t NewSize)
    : Source(std::move(Source)) {
  uint64_t Inner = ElemSize;
  for (unsigned I = 0; I < Shape.size(); ++I) {
    if ((int)I < Dim)
      Outer *= Shape[I];
    else if ((int)I > Dim)
      Inner *= Shape[I];
  }
  SrcRow = Inner * Shape[Dim];
  DstRow = Inner * NewSize;
  Size = Outer * DstRow;
}

Expected<ArrayRef<char>> PaddedTensorData::getBytes() const {
  std::call_once(Once, [&] {
    Cache.assign(Size, 0);
    if (Error E = Source->withBytes([&](ArrayRef<char> B) -> Error {
          if (B.size() != Outer * SrcRow)
            return createStringError(inconvertibleErrorCode(),
                                     "padded tensor: source has %zu bytes, "
                                     "expected %llu",
                                     B.size(),
                                     (unsigned long long)(Outer * SrcRow));
          for (uint64_t O = 0; O < Outer; ++O)
            std::memcpy(Cache.data() + O * DstRow, B.data() + O * SrcRow,
                        SrcRow);
          return Error::success();
        })) {
      CacheError = toString(std::move(E));
      Cache.clear();
    }
  });
  if (!CacheError.empty())
    return createStringError(inconvertibleErrorCode(), "%s",
                             CacheError.c_str());
  return ArrayRef<char>(Cache);
}

} // namespace loom
