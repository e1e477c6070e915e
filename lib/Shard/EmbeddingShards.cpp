//===- EmbeddingShards.cpp - One dp rank's embedding table shard ----------===//
//
// See EmbeddingShards.h.
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/EmbeddingShards.h"
#include "loom/Shard/SlicedTensorData.h"
#include "loom/Support/DataType.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>

using namespace llvm;

namespace loom {

Expected<EmbeddingShardData> getEmbeddingShardData(const Value &W,
                                                   EmbShardKind K, unsigned N,
                                                   unsigned DPR) {
  auto Err = [&](const Twine &Msg) {
    return createStringError(inconvertibleErrorCode(),
                             "embedding table '%s': %s",
                             W.getName().str().c_str(), Msg.str().c_str());
  };
  const TensorType &T = W.Type;
  if (T.getRank() != 2 || !T.isStatic() || N == 0 || DPR >= N)
    return Err("needs a static [rows, dim] table and a dp rank");
  int64_t Rows = T.Dims[0].Size, D = T.Dims[1].Size;
  unsigned ES = getDataTypeSize(T.Elem);
  SmallVector<int64_t, 2> Shape = T.getStaticShape();
  EmbeddingShardData R;
  R.Type = T;
  R.Rows = Rows;
  switch (K) {
  case EmbShardKind::Table:
    R.Data = W.Data;
    return std::move(R);
  case EmbShardKind::Col: {
    if (D % N)
      return Err("dim " + Twine(D) + " is not divisible by dp=" + Twine(N) +
                 " (column-wise)");
    R.Type.Dims[1] = Dim(D / N);
    if (W.Data)
      R.Data = std::make_shared<SlicedTensorData>(W.Data, Shape, ES, 1,
                                                  ArrayRef<int64_t>(), N, DPR);
    return std::move(R);
  }
  case EmbShardKind::Row: {
    int64_t C = (Rows + N - 1) / N;
    R.FirstRow = (int64_t)DPR * C;
    R.Rows = C;
    R.Type.Dims[0] = Dim(C);
    if (!W.Data)
      return std::move(R);
    if (Rows % N == 0) {
      R.Data = std::make_shared<SlicedTensorData>(W.Data, Shape, ES, 0,
                                                  ArrayRef<int64_t>(), N, DPR);
      return std::move(R);
    }
    // Uneven: this rank's rows, then zero rows up to C (never looked up
    // unmasked). Only small tables are uneven in practice (C rows of a
    // table too big for one card divide evenly or are copied once here).
    uint64_t RowBytes = (uint64_t)D * ES;
    int64_t Have = std::max<int64_t>(0, std::min(C, Rows - R.FirstRow));
    std::vector<char> Bytes((uint64_t)C * RowBytes, 0);
    if (Have > 0) {
      Expected<std::vector<char>> Part =
          W.Data->readRange((uint64_t)R.FirstRow * RowBytes, Have * RowBytes);
      if (!Part)
        return Part.takeError();
      std::copy(Part->begin(), Part->end(), Bytes.begin());
    }
    R.Data = std::make_shared<BufferTensorData>(std::move(Bytes));
    return std::move(R);
  }
  }
  return Err("unknown sharding");
}

} // namespace loom
