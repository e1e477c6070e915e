//===- PaddedTensorData.h - A weight padded with zeros along one dim -----===//
//
// The data of a parameter grown along one dim (pad-vocab: an embedding
// table's rows or an LM head's columns padded to a vocabulary tp divides,
// as Megatron-LM pads with --make-vocab-size-divisible-by): the source's
// elements in place, zeros in the new indices. Bytes are produced on first
// use; the source is read once.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_PADDEDTENSORDATA_H
#define LOOM_IR_PADDEDTENSORDATA_H

#include "loom/IR/Graph.h"
#include <mutex>

namespace loom {

class PaddedTensorData : public TensorData {
public:
  /// \p Source holds a tensor of \p Shape with \p ElemSize-byte elements;
  /// the result has \p NewSize indices along \p Dim (>= Shape[Dim]).
  PaddedTensorData(std::shared_ptr<const TensorData> Source,
                   llvm::ArrayRef<int64_t> Shape, unsigned ElemSize, int Dim,
                   int64_t NewSize);
  Kind getKind() const override { return Kind::Inline; }
  llvm::Expected<llvm::ArrayRef<char>> getBytes() const override;
  uint64_t getSize() const override { return Size; }

private:
  std::shared_ptr<const TensorData> Source;
  /// The tensor as [Outer][Row]: Outer the product of the dims before Dim,
  /// SrcRow and DstRow the bytes of the dims from Dim on.
  uint64_t Outer = 1, SrcRow = 0, DstRow = 0, Size = 0;
  mutable std::once_flag Once;
  mutable std::vector<char> Cache;
  mutable std::string CacheError;
};

} // namespace loom

#endif
