//===- ShardAttrs.h - Attribute builders of the role graphs -----*- C++ -*-===//
//
// Small constructors of node attributes shared by the role graph builder
// (RoleGraphs.cpp) and the cp ring's lowering (RingAttention.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_SHARD_SHARDATTRS_H
#define LOOM_LIB_SHARD_SHARDATTRS_H

#include "loom/IR/Graph.h"

namespace loom {

inline Attribute intAttr(llvm::StringRef Name, int64_t V) {
  Attribute A;
  A.Name = Name.str();
  A.K = Attribute::Kind::Int;
  A.I = V;
  return A;
}
inline Attribute intsAttr(llvm::StringRef Name, llvm::ArrayRef<int64_t> V) {
  Attribute A;
  A.Name = Name.str();
  A.K = Attribute::Kind::Ints;
  A.Is.assign(V.begin(), V.end());
  return A;
}
inline Attribute strAttr(llvm::StringRef Name, llvm::StringRef V) {
  Attribute A;
  A.Name = Name.str();
  A.K = Attribute::Kind::String;
  A.S = V.str();
  return A;
}
inline Attribute tensorAttr(llvm::StringRef Name, Tensor T) {
  Attribute A;
  A.Name = Name.str();
  A.K = Attribute::Kind::Tensor;
  A.Ts.push_back(std::move(T));
  return A;
}

} // namespace loom

#endif // LOOM_LIB_SHARD_SHARDATTRS_H
