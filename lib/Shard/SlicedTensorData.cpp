//===- SlicedTensorData.cpp - A rank's slice of a weight ------------------===//
#include "loom/Shard/SlicedTensorData.h"
#include <cstring>

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

SlicedTensorData::Geometry SlicedTensorData::getGeometry() const {
  Geometry G;
  G.Inner = ElemSize;
  for (int I = 0; I < Dim; ++I)
    G.Outer *= Shape[I];
  for (unsigned I = Dim + 1; I < Shape.size(); ++I)
    G.Inner *= Shape[I];
  G.Row = Shape[Dim] * G.Inner;
  return G;
}

Error SlicedTensorData::readAll(char *Out) const {
  auto [Outer, Inner, Row] = getGeometry();
  if (Blocks.size() == 1) {
    // One strided read: this rank's run of every outer index.
    uint64_t Piece = Blocks[0] / Parts;
    return Source->readStrided(Index * Piece * Inner, Row, Piece * Inner, Outer,
                               Out);
  }
  // Blocks (a fused QKV weight): each block's piece, interleaved per outer
  // index.
  uint64_t PerOuter = Size / std::max<uint64_t>(Outer, 1);
  uint64_t Piece0 = 0, Written = 0;
  for (int64_t B : Blocks) {
    uint64_t Piece = B / Parts, Len = Piece * Inner;
    std::vector<char> Runs(Len * Outer);
    if (Error E = Source->readStrided((Piece0 + Index * Piece) * Inner, Row,
                                      Len, Outer, Runs.data()))
      return E;
    for (uint64_t O = 0; O < Outer; ++O)
      std::memcpy(Out + O * PerOuter + Written, Runs.data() + O * Len, Len);
    Written += Len;
    Piece0 += B;
  }
  return Error::success();
}

Error SlicedTensorData::withBytes(
    function_ref<Error(ArrayRef<char>)> Fn) const {
  Expected<std::vector<char>> B = materialize();
  if (!B)
    return B.takeError();
  return Fn(*B);
}

Error SlicedTensorData::writeTo(sys::fs::file_t FD, uint64_t Offset) const {
  auto [Outer, Inner, Row] = getGeometry();
  // Each block's pieces go to their column of the slice's rows (one block:
  // the rows are the whole slice, one after another).
  uint64_t PerOuter = Size / std::max<uint64_t>(Outer, 1);
  uint64_t Piece0 = 0, Written = 0;
  for (int64_t B : Blocks) {
    uint64_t Piece = B / Parts, Len = Piece * Inner;
    if (Error E =
            Source->writeStrided((Piece0 + Index * Piece) * Inner, Row, Len,
                                 Outer, FD, Offset + Written, PerOuter))
      return E;
    Written += Len;
    Piece0 += B;
  }
  return Error::success();
}

Expected<std::vector<char>> SlicedTensorData::materialize() const {
  std::vector<char> Out(Size);
  if (Error E = readAll(Out.data()))
    return std::move(E);
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
