//===- RingAttention.h - The cp ring's lowering in a role graph -*- C++ -*-===//
//
// Context parallelism with cp_algo=ring: each cp rank keeps its queries and
// passes its K/V block around the cp group (HcomSend/HcomReceive over group
// "cp"); every step scores the local queries against the block it holds
// and merges the step's softmax into the running one (RingAttention.cpp).
// The role builder (RoleLowerings.cpp) supplies the graph operations.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_SHARD_RINGATTENTION_H
#define LOOM_LIB_SHARD_RINGATTENTION_H

#include "loom/Shard/Sharding.h"
#include "llvm/Support/Error.h"

namespace loom {

/// What the ring's lowering needs of the role graph it writes into.
class RingGraphBuilder {
public:
  virtual ~RingGraphBuilder() = default;
  /// Source value \p V of the model in this rank's graph, in spec \p S
  /// (the role builder's reshards included).
  virtual llvm::Expected<Value *> get(const Value *V, const AxisSpec &S) = 0;
  /// A default-domain node \p Op on \p In with one output of type \p T,
  /// named after \p Base (or exactly \p OutName when given).
  virtual llvm::Expected<Value *> op(llvm::StringRef Op, llvm::StringRef Base,
                                     llvm::ArrayRef<Value *> In,
                                     const TensorType &T,
                                     std::vector<Attribute> Attrs,
                                     llvm::StringRef OutName = "") = 0;
  virtual Value *constInt64(llvm::StringRef Name, llvm::ArrayRef<int64_t> Shape,
                            llvm::ArrayRef<int64_t> Vals) = 0;
  /// HcomSend of \p X to cp rank \p Dest; HcomReceive of a \p T from cp
  /// rank \p Src; both with tag \p Tag.
  virtual void send(Value *X, unsigned Dest, int Tag, llvm::StringRef Base) = 0;
  virtual llvm::Expected<Value *> recv(const TensorType &T, unsigned Src,
                                       int Tag, llvm::StringRef Base) = 0;
};

/// The global sequence positions cp rank \p Rank of \p CP holds of a
/// sequence of \p S tokens (S divisible by 2 CP), in its local order: its
/// chunks Rank and 2 CP - 1 - Rank of 2 CP (the causal load balance).
std::vector<int64_t> getRingPositions(unsigned CP, unsigned Rank, int64_t S);

/// Writes \p Site's attention for cp rank \p Rank of \p CP through \p B;
/// the context output named \p OutName. Returns it.
llvm::Expected<Value *> lowerRingAttention(const ShardingResult &R,
                                           const RingSite &Site, unsigned CP,
                                           unsigned Rank, RingGraphBuilder &B,
                                           llvm::StringRef OutName);

} // namespace loom

#endif // LOOM_LIB_SHARD_RINGATTENTION_H
