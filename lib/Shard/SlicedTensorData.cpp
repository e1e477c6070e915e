//===- SlicedTensorData.cpp - A rank's slice of a weight ------------------===//
#include "SlicedTensorData.h"

using namespace llvm;

namespace loom {

SlicedTensorData::SlicedTensorData(std::shared_ptr<const TensorData> Source,
                                   ArrayRef<int64_t> Shape, unsigned ElemSize,
                                   int Dim, ArrayRef<int64_t> Blocks,
                                   unsigned Parts, unsigned Index)
    : Source(std::move(Source)), Shape(Shape.begin(), Shape.end()),
      Blocks(Blocks.begin(), Blocks.end()), ElemSize(ElemSize), Dim(Dim),
      Parts(Parts), Index(Index) {
  if (this->Blocks.empty())
    this->Blocks.push_back(Shape[Dim]);
  uint64_t N = ElemSize;
  for (unsigned I = 0; I < Shape.size(); ++I)
    N *= I == (unsigned)Dim ? Shape[I] / Parts : Shape[I];
  Size = N;
}

Expected<std::vector<char>> SlicedTensorData::materialize() const {
  uint64_t Outer = 1, Inner = ElemSize;
  for (int I = 0; I < Dim; ++I)
    Outer *= Shape[I];
  for (unsigned I = Dim + 1; I < Shape.size(); ++I)
    Inner *= Shape[I];
  uint64_t Row = Shape[Dim] * Inner; // Bytes of one outer index.
  std::vector<char> Out;
  Out.reserve(Size);
  // Inline sources are read in place; external ones run by run.
  ArrayRef<char> All;
  bool InPlace = Source->getKind() == Kind::Inline;
  if (InPlace) {
    Expected<ArrayRef<char>> B = Source->getBytes();
    if (!B)
      return B.takeError();
    All = *B;
    if (All.size() < Outer * Row)
      return createStringError(inconvertibleErrorCode(),
                               "tensor data holds %zu bytes, %llu expected",
                               All.size(), (unsigned long long)(Outer * Row));
  }
  for (uint64_t O = 0; O < Outer; ++O) {
    uint64_t BlockStart = 0;
    for (int64_t B : Blocks) {
      uint64_t Piece = B / Parts;
      uint64_t Off = O * Row + (BlockStart + Index * Piece) * Inner;
      uint64_t Len = Piece * Inner;
      if (InPlace) {
        Out.insert(Out.end(), All.begin() + Off, All.begin() + Off + Len);
      } else {
        Expected<std::vector<char>> R = Source->readRange(Off, Len);
        if (!R)
          return R.takeError();
        Out.insert(Out.end(), R->begin(), R->end());
      }
      BlockStart += B;
    }
  }
  return Out;
}

Expected<ArrayRef<char>> SlicedTensorData::getBytes() const {
  std::call_once(Once, [&] {
    Expected<std::vector<char>> B = materialize();
    if (B)
      Cache = std::move(*B);
    else
      CacheError = toString(B.takeError());
  });
  if (!CacheError.empty())
    return createStringError(inconvertibleErrorCode(), CacheError.c_str());
  return ArrayRef<char>(Cache);
}

Expected<std::vector<char>> SlicedTensorData::readRange(uint64_t Offset,
                                                        uint64_t Length) const {
  if (Offset == 0 && Length == Size && Cache.empty())
    return materialize();
  return TensorData::readRange(Offset, Length);
}

} // namespace loom
