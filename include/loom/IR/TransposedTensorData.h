//===- TransposedTensorData.h - A 2-D weight read as its transpose -------===//
//
// The data of a [R, C] parameter seen as [C, R] (canonicalize: a Gemm's
// transB=1 weight becomes the MatMul weight torch writes for rank > 2).
// Nothing is copied when the view is made: each read transposes the
// source for that call only, so an imported model's inline weights stay
// held once (issue 35: vit_b_16's 12 attention out-projections, 28 MB,
// were held a second time as eager copies). getBytes(), which must return
// lasting bytes, caches its one result.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_TRANSPOSEDTENSORDATA_H
#define LOOM_IR_TRANSPOSEDTENSORDATA_H

#include "loom/IR/Graph.h"
#include <atomic>
#include <mutex>

namespace loom {

class TransposedTensorData : public TensorData {
public:
  /// \p Source holds a row-major [\p Rows, \p Cols] tensor of
  /// \p ElemSize-byte elements.
  TransposedTensorData(std::shared_ptr<const TensorData> Source, uint64_t Rows,
                       uint64_t Cols, unsigned ElemSize);
  Kind getKind() const override { return Kind::Inline; }
  llvm::Expected<llvm::ArrayRef<char>> getBytes() const override;
  uint64_t getSize() const override { return Rows * Cols * ElemSize; }
  llvm::Error readStrided(uint64_t First, uint64_t Stride, uint64_t Length,
                          uint64_t Count, char *Out) const override;
  /// Produces the transpose for the call only (the cache when getBytes()
  /// made one).
  llvm::Error withBytes(
      llvm::function_ref<llvm::Error(llvm::ArrayRef<char>)> Fn) const override;

private:
  /// Writes the [Cols, Rows] transpose of the source into \p Out.
  llvm::Error transposeInto(char *Out) const;

  std::shared_ptr<const TensorData> Source;
  uint64_t Rows, Cols;
  unsigned ElemSize;
  mutable std::once_flag Once;
  mutable std::vector<char> Cache;
  mutable std::string CacheError;
  mutable std::atomic<bool> Cached{false};
};

} // namespace loom

#endif
