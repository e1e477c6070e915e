//===- SplitDims.cpp - The dims the rules split, at any degree ------------===//
//
// The search's legality (which tp degrees divide what) comes from the same
// rules that cut the graphs: the rule table is applied over the planning
// graph with a symbolic axis size that divides every dim larger than 1
// (RuleContext::AnyDivides), so every split a rule can make is made, and
// each dim a rule splits (a weight's rows or columns, a vocabulary, the
// heads after a reshape, a block of a fused projection) is recorded with
// its size. A degree that divides all of them lets every rule take its
// split; one that divides only some leaves the ops whose dims it does not
// divide replicated (every rule falls back to replicated operands and
// results), which the evaluator prices from the same rules at that degree
// (lib/Planner/RuleSplit.h) and collectUnsplitWeights names for the
// report: the same context applied at the concrete degree.
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"
#include "loom/Shard/Propagate.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Twine.h"
#include <limits>

using namespace llvm;

namespace loom {

namespace {

class SymbolicContext final : public PropagationContext {
public:
  SymbolicContext(const Graph &G, int64_t Opset, SplitDimSizes &Out,
                  unsigned AxisSize = AnyDivides)
      : PropagationContext(AxisSize, /*SP=*/false,
                           Opset > 0 ? Opset
                                     : std::numeric_limits<int64_t>::max(),
                           OwnValues, OwnUsers),
        Out(Out), OwnUsers(buildUseMap(G)) {}

  void run(const Graph &G) { propagate(G); }
  /// Parameter -> the spec it is stored in.
  const DenseMap<const Value *, AxisSpec> &getParams() const { return Params; }

private:
  // The rules decide at any degree, 1 included (collectUnsplitWeights).
  bool replicatesAtOne() const override { return false; }
  void onParamSplit(const Value *Param, const AxisSpec &PS) override {
    recordSpec(Param, PS, Param->getName());
  }
  void record(const Node &N, OpSharding S, bool) override {
    StringRef Label = N.getName().empty() && N.getOutput(0)
                          ? N.getOutput(0)->getName()
                          : StringRef(N.getName());
    for (unsigned O = 0; O < N.getNumOutputs(); ++O)
      if (const Value *V = N.getOutput(O))
        recordSpec(V, S.OutputSpecs[O], Label);
    // An operand the rule slices locally (a replicated constant) is split
    // too.
    for (unsigned I = 0; I < N.getNumInputs(); ++I)
      if (const Value *V = N.getInput(I))
        if (!V->isParameter() && S.InputSpecs[I] != getSpec(V))
          recordSpec(V, S.InputSpecs[I], Label);
  }
  void recordSize(int64_t Size, const Twine &Why) {
    if (Size > 1)
      Out.emplace((uint64_t)Size, Why.str());
  }
  void recordSpec(const Value *V, const AxisSpec &S, const Twine &Where) {
    if (!S.isSplit())
      return;
    shardrules::Shape Sh = shardrules::shapeOf(V);
    if (S.Dim < 0 || (size_t)S.Dim >= Sh.size())
      return;
    if (S.Blocks.empty()) {
      recordSize(Sh[S.Dim], "dim " + Twine(S.Dim) + " of '" + Where + "'");
      return;
    }
    for (int64_t B : S.Blocks)
      recordSize(B, "a block of dim " + Twine(S.Dim) + " of '" + Where + "'");
  }

  SplitDimSizes &Out;
  DenseMap<const Value *, AxisSpec> OwnValues;
  UseMap OwnUsers;
};

} // namespace

SplitDimSizes collectSplitDims(const Graph &G, int64_t Opset) {
  SplitDimSizes Out;
  SymbolicContext Ctx(G, Opset, Out);
  Ctx.run(G);
  return Out;
}

std::vector<UnsplitWeight> collectUnsplitWeights(const Graph &G, int64_t Opset,
                                                 unsigned AxisSize) {
  SplitDimSizes Any, At;
  SymbolicContext AnyCtx(G, Opset, Any), AtCtx(G, Opset, At, AxisSize);
  AnyCtx.run(G);
  AtCtx.run(G);
  std::vector<UnsplitWeight> Out;
  // Graph order (parameters as their first reader meets them): the
  // context's maps are unordered.
  DenseSet<const Value *> Seen;
  for (const auto &NP : G.getNodes())
    for (const Value *V : NP->getInputs()) {
      if (!V || !Seen.insert(V).second)
        continue;
      auto It = AnyCtx.getParams().find(V);
      if (It == AnyCtx.getParams().end() || AtCtx.getParams().count(V))
        continue;
      const AxisSpec &S = It->second;
      shardrules::Shape Sh = shardrules::shapeOf(V);
      UnsplitWeight W;
      W.Weight = V->getName().str();
      W.Reader = NP->getName().empty() && NP->getOutput(0)
                     ? NP->getOutput(0)->getName().str()
                     : NP->getName().str();
      W.Dim = S.Dim;
      W.Size = S.Dim >= 0 && (size_t)S.Dim < Sh.size() ? Sh[S.Dim] : 0;
      for (int64_t B : S.Blocks)
        if (AxisSize && B % AxisSize) {
          W.Size = B;
          break;
        }
      Out.push_back(std::move(W));
    }
  return Out;
}

} // namespace loom
