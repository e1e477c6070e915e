//===- RoleBuilder.h - The builder of one role's graph ----------*- C++ -*-===//
//
// Private to the role graph builder (RoleGraphs.cpp and the Role*.cpp files
// beside it): class RoleBuilder, which writes one role's sharded ONNX graph,
// and the pieces its member functions share across those files.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_SHARD_ROLEBUILDER_H
#define LOOM_LIB_SHARD_ROLEBUILDER_H

#include "loom/Shard/Sharding.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace loom {

using Shape = llvm::SmallVector<int64_t, 4>;

/// A string error with message \p Msg.
llvm::Error err(const llvm::Twine &Msg);

/// Cross-device edges: (value, destination device) -> sr_tag.
struct Edges {
  std::map<std::pair<std::string, unsigned>, int> Tag;
  /// Per value: destination devices, in order.
  llvm::DenseMap<const Value *, std::vector<unsigned>> Dests;
};

/// Writes the graph of one role: pipeline device \p Dev, tp rank \p TPR,
/// ep rank \p EPR and, where embedding tables are sharded over dp, dp rank
/// \p DPR.
class RoleBuilder {
public:
  RoleBuilder(const ShardingResult &R, const Edges &E,
              const llvm::DenseSet<const Value *> &DD, unsigned Dev,
              unsigned TPR, unsigned EPR, int DPR = -1)
      : R(R), E(E), DD(DD), Dev(Dev), TPR(TPR), EPR(EPR), TP(R.Plan.TP),
        EP(R.Plan.EP), DPR(DPR), Src(R.M->getGraph()) {}
  llvm::Expected<RoleGraph> build();

private:
  unsigned deviceOf(const Node *N) const {
    return R.Nodes.lookup(N).Chunk % R.Plan.PP;
  }
  AxisSpec producedSpec(const Value *V) const {
    // A dp-sharded table's lookup is made whole on every tp rank.
    if (EmbLookups.count(V))
      return AxisSpec();
    auto It = R.Values.find(V);
    return It == R.Values.end() ? AxisSpec() : It->second;
  }
  bool ownsExpert(int X) const {
    if (X < 0 || EP == 1)
      return true;
    unsigned Per = R.NumExperts / EP;
    return (unsigned)X / Per == EPR;
  }
  TensorType localType(const Value *V, const AxisSpec &S, bool Gathered) const;
  llvm::Expected<Value *> produced(const Value *V);
  llvm::Expected<Value *> materialize(const Value *V, const AxisSpec &Req);
  llvm::Expected<Value *> epGathered(const Value *V, Value *Local);
  /// Part \p V of a Split outside expert work that an expert branch reads
  /// as \p Req, with the ep group's tokens: the Split's input (the
  /// crossing's value, getExpertCrossing) gathered and cut here. Null when
  /// the Split's specs do not let it be cut alike.
  llvm::Expected<Value *> epGatheredPart(const Value *V, const AxisSpec &Req);
  /// Removes the local Splits all of whose parts were read gathered.
  void eraseUnreadParts();
  llvm::Expected<Value *> sliceConstant(const Value *V, Value *X,
                                        const AxisSpec &Req);
  /// A weight-like value (getWeightParameter) whole in this rank's graph,
  /// built from the source parameter (no communication).
  llvm::Expected<Value *> wholeWeight(const Value *V);
  llvm::Expected<Value *> sliceActivation(Value *X, const TensorType &GT,
                                          const AxisSpec &Req,
                                          llvm::StringRef Name);
  /// A copyable attribute for collective(): a string when S is set.
  struct Attr {
    const char *Name;
    int64_t I;
    const char *S = nullptr;
  };
  llvm::Expected<Value *> collective(llvm::StringRef Op, llvm::StringRef Group,
                                     Value *X, llvm::StringRef Name,
                                     TensorType OutType,
                                     llvm::ArrayRef<Attr> Attrs);
  /// The tp collective \p C (a transition's or a rule's, Rules.h) on \p X,
  /// its output named \p Base "." C.Suffix, of this rank's type \p T; an
  /// all-gather of a split in \p FromBlocks put back in the blocks' order.
  llvm::Expected<Value *> tpCollective(const ShardCollective &C, Value *X,
                                       llvm::StringRef Base, TensorType T,
                                       llvm::ArrayRef<int64_t> FromBlocks = {});
  Value *constInt64(llvm::StringRef Name, llvm::ArrayRef<int64_t> Shape,
                    llvm::ArrayRef<int64_t> Vals);
  Value *constScalar(llvm::StringRef Name, DataType T, double V);
  llvm::Expected<Node *> add(llvm::StringRef Op, llvm::StringRef Name,
                             llvm::ArrayRef<Value *> In,
                             llvm::ArrayRef<std::string> Out) {
    return G->addNode(Op, "", Name, In, Out);
  }
  std::string fresh(llvm::StringRef Base) {
    std::string N = Base.str();
    for (unsigned I = 1; G->lookupLocal(N) || UsedNames.count(N); ++I)
      N = (Base + "." + llvm::Twine(I)).str();
    UsedNames.insert(N);
    return N;
  }
  /// Builds \p N; its errors name it (buildNodeUnnamed's do not).
  llvm::Error buildNode(const Node &N);
  /// The cp ring's attention at its context node (RingAttention.cpp).
  llvm::Error buildRing(const Node &N, const RingSite &Site,
                        llvm::StringRef OutName);
  friend class RingAdapter;
  llvm::Error buildNodeUnnamed(const Node &N);
  // The steps of buildNodeUnnamed.
  /// A node of the expert combine chain (a sum over experts): returns
  /// whether it is built already (both addends absent on this rank, or one:
  /// the other passes through); otherwise marks its output a partial sum
  /// over ep.
  llvm::Expected<bool> buildExpertCombine(const Node &N,
                                          const NodeSharding &NS);
  /// The value this rank's copy of \p N reads as input \p I: materialized
  /// in the spec \p NS wants, through the ep dispatch/combine or gather
  /// where it crosses into or out of expert work (\p IsBranch: \p N is
  /// an expert branch's). Null for an absent input or a global-shape
  /// lowering.
  llvm::Expected<Value *> buildInput(const Node &N, const NodeSharding &NS,
                                     unsigned I, bool IsBranch);
  /// Leaving the expert region: the sum over experts of \p V in \p Spec,
  /// reduce-scattered back to this rank's tokens (once per value and spec).
  llvm::Expected<Value *> leaveExpertRegion(const Value *V,
                                            const AxisSpec &Spec);
  /// Fresh names of \p N's outputs; a model output computed sharded or in
  /// expert work (\p InExpertWork) is named "<name>.local", its final
  /// replicated value keeping the name.
  llvm::SmallVector<std::string, 2>
  getOutputNames(const Node &N, const NodeSharding &NS, bool InExpertWork);
  /// \p N copied into the rank's graph on inputs \p In with local shapes:
  /// its shape and split-size inputs and attributes made local, its
  /// outputs typed per their specs (stacked expert outputs: this rank's
  /// experts, the group's tokens) and recorded as produced.
  llvm::Error cloneLocal(const Node &N, const NodeSharding &NS,
                         llvm::MutableArrayRef<Value *> In,
                         llvm::ArrayRef<std::string> OutNames, bool IsBranch);
  /// Reshape/Expand: the target shape input replaced by the local output
  /// shape (\p YGathered: the output holds the ep group's tokens).
  void localizeShapeInput(const Node &N, const NodeSharding &NS,
                          llvm::MutableArrayRef<Value *> In, bool YGathered);
  /// Split of a blocked input: each block's size divided by tp, in the
  /// "split" attribute or the sizes input.
  void localizeSplitSizes(const Node &N, const NodeSharding &NS,
                          llvm::MutableArrayRef<Value *> In,
                          std::vector<Attribute> &Attrs);
  llvm::Error buildControlFlow(const Node &N, const NodeSharding &NS);
  llvm::Expected<Value *> widenFill(const Value *V, Value *X);
  llvm::Expected<Value *> allToAll(const Value *V, Value *X, int SplitAxis,
                                   int ConcatAxis, llvm::StringRef Suffix);
  llvm::Expected<Value *> gatherTokens(const Value *V, Value *X);
  /// Values of stacked expert work (this rank's experts, the group's tokens).
  llvm::DenseSet<const Value *> StackedRegion;
  llvm::Error lowerSpecial(const Node &N, const NodeSharding &NS,
                           llvm::ArrayRef<Value *> In,
                           llvm::ArrayRef<std::string> OutNames);
  /// Size or Shape of a value sharded here: the global answer, a constant.
  llvm::Error lowerGlobalShape(const Node &N,
                               llvm::ArrayRef<std::string> OutNames);
  /// A Gather from a vocab-parallel table: this rank's rows looked up, ids
  /// outside them masked to zero rows: a partial output over tp.
  /// SoftmaxCrossEntropyLoss on this rank's classes (LossRules.cpp).
  llvm::Error
  lowerVocabParallelCrossEntropy(const Node &N, const NodeSharding &NS,
                                 llvm::ArrayRef<Value *> In,
                                 llvm::ArrayRef<std::string> OutNames);
  llvm::Error lowerVocabParallelGather(const Node &N,
                                       llvm::ArrayRef<Value *> In,
                                       llvm::ArrayRef<std::string> OutNames);
  /// Row-parallel Gemm/Conv: partial products all-reduced over tp, then the
  /// bias added once.
  /// A mean loss with ignore_index over rows split on the sequence axis:
  /// the local sum and count of counted rows all-reduced, then divided.
  llvm::Error lowerMeanOverCount(const Node &N, llvm::ArrayRef<Value *> In,
                                 llvm::ArrayRef<std::string> OutNames);
  llvm::Error lowerBiasAfterReduce(const Node &N, const NodeSharding &NS,
                                   llvm::ArrayRef<Value *> In,
                                   llvm::ArrayRef<std::string> OutNames);
  void emitSends(const Node &N);
  /// \p N is built: the sends of its outputs follow.
  llvm::Error finishNode(const Node &N) {
    Building.erase(&N);
    emitSends(N);
    return llvm::Error::success();
  }
  /// \p N is built, \p Y (or its error) standing for its output \p OutV.
  llvm::Error finishNode(const Node &N, const Value *OutV,
                         llvm::Expected<Value *> Y) {
    if (!Y)
      return Y.takeError();
    Produced[OutV] = *Y;
    return finishNode(N);
  }
  /// A lookup in an embedding table sharded over dp: the group's ids
  /// all-gathered, this rank's rows looked up (the others masked to 0),
  /// the partial embeddings reduce-scattered back to each rank's samples.
  llvm::Error lowerEmbeddingLookup(const Node &N, const EmbeddingShard &S);
  /// Results of lowerEmbeddingLookup: replicated over tp whatever spec
  /// the propagation gave the lookup.
  llvm::DenseSet<const Value *> EmbLookups;
  /// HcomAllToAllV of \p X over the dp group (equal blocks): block j of
  /// \p SplitAxis to rank j, the received blocks concatenated along
  /// \p ConcatAxis in rank order.
  llvm::Expected<Value *> allToAllDP(Value *X, llvm::StringRef Name,
                                     int SplitAxis, int ConcatAxis,
                                     TensorType OutType);
  /// Context parallelism's all-to-all \p C (Ulysses) between \p Cur and
  /// \p Req where one is split in equal blocks (heads folded into the
  /// batch, tp's head groups under cp first): the blocks as a dim of their
  /// own around it.
  llvm::Expected<Value *> blockedAllToAll(const ShardCollective &C, Value *X,
                                          llvm::StringRef Base,
                                          const AxisSpec &Cur,
                                          const AxisSpec &Req);
  /// An HcomAllToAllV's count and displacement inputs for \p X over \p NG
  /// ranks (equal blocks), named after \p Base.
  std::array<Value *, 4> allToAllCounts(const Value *X, unsigned NG,
                                        llvm::StringRef Base);
  /// HcomAllToAllV of \p X over \p Group (\p NG ranks, equal blocks),
  /// its count and displacement inputs named after \p Base.
  llvm::Expected<Value *> addAllToAllV(Value *X, llvm::StringRef Group,
                                       unsigned NG, llvm::StringRef Base,
                                       int SplitAxis, int ConcatAxis,
                                       TensorType OutType);

  const ShardingResult &R;
  const Edges &E;
  const llvm::DenseSet<const Value *> &DD;
  unsigned Dev, TPR, EPR, TP, EP;
  int DPR;
  const Graph &Src;
  std::unique_ptr<Model> M;
  Graph *G = nullptr;
  llvm::DenseMap<const Value *, Value *> Produced;
  /// Expert-branch outputs of experts this rank does not own, and zero
  /// accumulators: they contribute nothing to the partial sum.
  llvm::DenseSet<const Value *> Absent;
  /// Values inside the expert region: gathered over ep.
  llvm::DenseSet<const Value *> InEPRegion;
  /// EP partial sums (the combine chain).
  llvm::DenseSet<const Value *> EPPartial;
  std::map<std::pair<const Value *, std::string>, Value *> Converted;
  llvm::DenseMap<const Value *, Value *> Gathered;
  /// Splits cut again from their gathered input (epGatheredPart).
  llvm::DenseMap<const Node *, llvm::SmallVector<Value *, 4>> GatheredParts;
  llvm::StringSet<> UsedNames;
  std::set<const Node *> Building;
  RoleGraph Out;
  int64_t EPTokens = -1;
};

} // namespace loom

#endif // LOOM_LIB_SHARD_ROLEBUILDER_H
