//===- Propagate.h - The one sharding propagation driver --------*- C++ -*-===//
//
// One forward walk over a graph in topological order applying the rule
// table (Rules.h) to every node, shared by the three users of the rules:
// the shard pass (lib/Shard/Propagation.cpp, on the micro-batch graph),
// the evaluator (lib/Planner/RuleSplit.cpp, on one representative per
// layer structure) and the search's legality (lib/Shard/Rules/SplitDims.cpp,
// at a symbolic degree). Each user derives a PropagationContext and says
// only what is its own: which nodes it visits, where a value's spec is
// read from (a representative's), and what it records of each decision.
// The walk, the weight slicing, the expert inputs seen replicated and the
// nodes that run replicated (axis size 1, ops of other domains) are here.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SHARD_PROPAGATE_H
#define LOOM_SHARD_PROPAGATE_H

#include "loom/Shard/ExpertRules.h"
#include "loom/Shard/Rules.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include <map>
#include <string>

namespace loom {

/// The propagation state a driver's user shares with the rules: the spec
/// of every value decided so far (\p Values, owned by the user), the
/// parameters split and the weight chains their consumers decided.
class PropagationContext : public RuleContext {
public:
  PropagationContext(unsigned AxisSize, bool SP, int64_t Opset,
                     llvm::DenseMap<const Value *, AxisSpec> &Values,
                     const UseMap &Users)
      : RuleContext(AxisSize, SP, Opset), Values(Values), Users(Users) {}

  AxisSpec getSpec(const Value *V) const override {
    if (!V || SeenReplicated.count(V))
      return AxisSpec();
    return Values.lookup(canon(V));
  }
  AxisSpec getStoredSpec(const Value *V) const override {
    return V ? Values.lookup(canon(V)) : AxisSpec();
  }
  llvm::ArrayRef<const Node *> getUsers(const Value *V) const override {
    auto It = Users.find(V);
    if (It == Users.end())
      return {};
    return It->second;
  }
  /// Splits the parameter behind \p V (traceWeight) and records the specs
  /// of the chain from it to V (Transpose/Cast/Identity nodes, decided
  /// here by their consumer's rule and skipped by the walk). False when the
  /// parameter is already split otherwise (a tied weight).
  bool splitWeight(const Value *V, int Dim,
                   llvm::ArrayRef<int64_t> Blocks) override;

  /// The walk: every node the user visits, in graph order.
  void propagate(const Graph &G);
  const Node *getPairedSend(const Node &Recv) const override;

protected:
  /// The value whose spec stands for \p V (a representative layer's).
  virtual const Value *canon(const Value *V) const { return V; }
  /// Whether the walk applies the rules to \p N (false: skipped).
  virtual bool visit(const Node &N) { return true; }
  /// The ep rule's role of \p N (ExpertRules.h): its inputs that ep moves
  /// are seen replicated over tp.
  virtual ExpertRole getExpertRole(const Node &N) const {
    return ExpertRole::None;
  }
  /// Whether an axis of size 1 runs every node replicated without asking
  /// the rules (false: the rules decide, as at any size).
  virtual bool replicatesAtOne() const { return true; }
  /// \p N decided \p S (\p HasRule false: the table has no rule for its
  /// op; ops the walk replicates without asking count as having one); its
  /// outputs' specs are already in Values. Called while N's inputs are still
  /// seen as the rule saw them.
  virtual void record(const Node &N, OpSharding S, bool HasRule) = 0;
  /// The parameter \p Param is now stored as \p PS (first time only).
  virtual void onParamSplit(const Value *Param, const AxisSpec &PS) {}
  /// The weight chain node \p Def, decided by its consumer.
  virtual void onChainNode(const Node &Def, const AxisSpec &In,
                           const AxisSpec &Out) {}

  llvm::DenseMap<const Value *, AxisSpec> &Values;
  const UseMap &Users;
  /// Parameter -> the spec it is stored in.
  llvm::DenseMap<const Value *, AxisSpec> Params;
  /// Weight chains (Transpose/Cast/Identity) their consumer decided.
  llvm::DenseSet<const Node *> Decided;
  /// Inputs the current node's rule sees replicated (tokens entering
  /// expert work, which ep gathers along a dim tp must not split).
  llvm::DenseSet<const Value *> SeenReplicated;
  /// The graph's HcomSend nodes by group and sr_tag (getPairedSend).
  std::map<std::pair<std::string, int64_t>, const Node *> Sends;
};

/// Where a value the attention reads split otherwise (Ulysses' heads) or
/// passes around (the cp ring's K/V blocks) is better moved: the chain of
/// data movement ops (Reshape, Unsqueeze, Squeeze, Expand, Transpose,
/// Identity) that made \p V, each value read only by the next, walked up
/// while \p Movable holds of the value it starts from, cut at its smallest
/// value (the nearest among equals). Chain[0] makes V; the value to move is
/// Chain.back()'s input. Empty when no value up the chain is smaller than
/// V (HF's repeat_kv: K and V before their Unsqueeze, Expand and Reshape to
/// the query heads).
llvm::SmallVector<const Node *, 4>
findSmallerMovementSource(const Value *V, const UseMap &Users,
                          llvm::function_ref<bool(const Value *)> Movable);

} // namespace loom

#endif // LOOM_SHARD_PROPAGATE_H
