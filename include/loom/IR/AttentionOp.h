//===- AttentionOp.h - The dims of ONNX's Attention-23 op -------*- C++ -*-===//
//
// ONNX's Attention (opset 23) takes Q, K, V 4-D ([batch, heads, seq,
// head_size]) or 3-D ([batch, seq, heads * head_size], with q_num_heads
// and kv_num_heads), an optional mask and an optional KV cache (past_key,
// past_value, 4-D, concatenated before K and V along the sequence).
// Costing, the sharding rule and fused-kernel detection read its dims
// here, once.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_ATTENTIONOP_H
#define LOOM_IR_ATTENTIONOP_H

#include "loom/IR/Graph.h"
#include "llvm/ADT/Optional.h"

namespace loom {

struct AttentionDims {
  /// 3 or 4: the rank of Q, K and V.
  unsigned Rank = 4;
  int64_t Batch = 0, QHeads = 0, KVHeads = 0;
  /// Query positions; key positions including the cache.
  int64_t QSeq = 0, KVSeq = 0;
  int64_t HeadSize = 0, VHeadSize = 0;
  bool Causal = false;
  /// The dim of Q, K, V and Y that holds the heads: 1 (4-D), 2 (3-D).
  unsigned headDim() const { return Rank == 4 ? 1 : 2; }
  /// The fraction of the QSeq x KVSeq scores a causal mask keeps (1 when
  /// not causal): query i sees keys 0..i (ONNX's upper-left alignment).
  double causalFraction() const;
};

/// The dims of the default-domain Attention node \p N; None when its
/// types are not static or not a valid Attention.
llvm::Optional<AttentionDims> getAttentionDims(const Node &N);

} // namespace loom

#endif // LOOM_IR_ATTENTIONOP_H
