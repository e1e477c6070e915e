//===- KVCache.h - Find the KV cache a decoder graph carries -----*- C++
//-*-===//
//
// A decoder exported for incremental decoding takes the keys and values of
// the tokens seen so far as graph inputs and returns them, with the step's
// tokens appended, as graph outputs (HF Optimum: past_key_values.N.key /
// .value -> present.N.key / .value; a hand-written torch decoder names them
// as it likes). Serving needs to know which inputs and outputs these are:
// the emitter splits them as the attention that reads them is split (by
// heads under tp), and a runtime feeds each step's present to the next
// step's past.
//
// Detection is structural, never by name:
//  - a past cache is a graph input concatenated (Concat, the input possibly
//    through Cast/Identity) with a freshly projected tensor (a MatMul or
//    Gemm with a weight, through reshapes, transposes and element-wise
//    work such as rotary embedding), where the concatenation feeds an
//    attention MatMul (both operands activations) through view ops (the
//    GQA repeat: Unsqueeze/Expand/Reshape/Tile); the Concat's result, when
//    it is a graph output, is the matching present;
//  - a present without a past (the no-past export HF Optimum writes for
//    the prompt, decoder_model.onnx) is a graph output that is such a
//    freshly projected tensor feeding an attention MatMul.
// Key or value: a key reaches the attention MatMul whose result flows into
// a Softmax; a value is multiplied by a Softmax's result. Caches are
// numbered per kind in graph order (layer 0, 1, ...): the layer's key and
// value share the number.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_KVCACHE_H
#define LOOM_PLAN_KVCACHE_H

#include "loom/IR/Graph.h"
#include <vector>

namespace loom {

struct KVCacheTensor {
  enum Kind : uint8_t { Key, Val };
  Kind K = Key;
  /// Per kind, in graph order.
  unsigned Layer = 0;
  /// The graph input holding the past (null: a no-past export).
  const Value *Past = nullptr;
  /// The graph output holding past + this step (null: not returned).
  const Value *Present = nullptr;
  /// With a past: the Concat appending the step's tensor, the index of the
  /// past operand, and its axis (the sequence axis), normalized.
  const Node *Append = nullptr;
  unsigned PastOperand = 0;
  int SeqAxis = -1;
  /// The value the attention reads (the Concat's result, or the present
  /// of a no-past export).
  const Value *Cache = nullptr;
  /// The attention MatMul that reads it.
  const Node *Attention = nullptr;

  llvm::StringRef getKindName() const { return K == Key ? "key" : "value"; }
};

/// The KV cache tensors of \p G, keys then values of each layer in graph
/// order (sorted by layer, key before value). Empty for graphs without one.
std::vector<KVCacheTensor> findKVCache(const Graph &G);

} // namespace loom

#endif // LOOM_PLAN_KVCACHE_H
