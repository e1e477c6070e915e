//===- SlicedTensorData.h - A rank's slice of a weight, read lazily -------===//
//
// The shard of a parameter one rank holds: the source tensor's data (inline
// or external, never loaded whole) cut along one dim, optionally in blocks
// (a fused QKV weight is split block by block). Bytes are produced on demand,
// one contiguous run at a time, so emitting a 2 GB model at tp=8 never holds
// more than one slice.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SHARD_SLICEDTENSORDATA_H
#define LOOM_SHARD_SLICEDTENSORDATA_H

#include "loom/IR/Graph.h"
#include <mutex>

namespace loom {

class SlicedTensorData : public TensorData {
public:
  /// Slice \p Index of \p Parts along \p Dim of a tensor of \p Shape with
  /// \p ElemSize-byte elements; \p Blocks (global sizes along Dim) are each
  /// cut into Parts and the pieces of one index concatenated.
  SlicedTensorData(std::shared_ptr<const TensorData> Source,
                   llvm::ArrayRef<int64_t> Shape, unsigned ElemSize, int Dim,
                   llvm::ArrayRef<int64_t> Blocks, unsigned Parts,
                   unsigned Index);
  Kind getKind() const override { return Kind::Inline; }
  llvm::Expected<llvm::ArrayRef<char>> getBytes() const override;
  llvm::Expected<std::vector<char>> readRange(uint64_t Offset,
                                              uint64_t Length) const override;
  uint64_t getSize() const override { return Size; }
  llvm::Error readAll(char *Out) const override;
  /// Produces the slice for the call only (no cache kept).
  llvm::Error withBytes(
      llvm::function_ref<llvm::Error(llvm::ArrayRef<char>)> Fn) const override;
  /// Copies the slice's runs from the source straight into the file
  /// (TensorData::writeStrided: in the kernel for external data).
  llvm::Error writeTo(llvm::sys::fs::file_t FD, uint64_t Offset) const override;

private:
  /// The source seen as [Outer][Row bytes]: Outer is the product of the dims
  /// before Dim, Inner the bytes of one index of Dim.
  struct Geometry {
    uint64_t Outer = 1, Inner = 1, Row = 0;
  };
  Geometry getGeometry() const;
  llvm::Expected<std::vector<char>> materialize() const;

  std::shared_ptr<const TensorData> Source;
  std::vector<int64_t> Shape, Blocks;
  unsigned ElemSize;
  int Dim;
  unsigned Parts, Index;
  uint64_t Size = 0;
  mutable std::once_flag Once;
  mutable std::vector<char> Cache;
  mutable std::string CacheError;
};

} // namespace loom

#endif
