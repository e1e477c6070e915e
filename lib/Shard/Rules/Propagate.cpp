//===- Propagate.cpp - The one sharding propagation driver ----------------===//
//
// The walk every user of the rules shares (include/loom/Shard/Propagate.h).
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/Propagate.h"

using namespace llvm;

namespace loom {

bool PropagationContext::splitWeight(const Value *V, int Dim,
                                     ArrayRef<int64_t> Blocks) {
  // Context parallelism keeps every weight whole on every rank.
  if (isSequenceAxis())
    return false;
  int PDim = Dim;
  const Value *Param = traceWeight(V, PDim);
  if (!Param)
    return false;
  AxisSpec PS = AxisSpec::split(PDim);
  PS.Blocks.assign(Blocks.begin(), Blocks.end());
  auto It = Params.find(Param);
  if (It != Params.end() && It->second != PS)
    return false;
  if (It == Params.end()) {
    Params[Param] = PS;
    onParamSplit(Param, PS);
  }
  // Writes go to the value itself: the walk decides only the nodes it
  // visits, and canon() maps only the ones it skips.
  Values[Param] = PS;
  // The chain from the parameter to V, re-derived going forward.
  for (const auto &CS : getWeightChainSpecs(V, Param, PDim, Blocks)) {
    const Node *Def = CS.first->getDefiningNode();
    AxisSpec In = Values.lookup(Def->getInput(0));
    Values[CS.first] = CS.second;
    Decided.insert(Def);
    onChainNode(*Def, In, CS.second);
  }
  return true;
}

void PropagationContext::propagate(const Graph &G) {
  bool One = getAxisSize() == 1 && replicatesAtOne();
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    if (!visit(N) || Decided.count(&N))
      continue;
    SeenReplicated.clear();
    ExpertRole Role = getExpertRole(N);
    if (Role != ExpertRole::None)
      for (const Value *V : N.getInputs()) {
        AxisSpec S = getSpec(V);
        if (getExpertInputSpec(Role, S) != S)
          SeenReplicated.insert(V);
      }
    // Ops of other domains have no rule: they run replicated, asked
    // nothing (Rules.h).
    bool OtherDomain = !N.getDomain().empty() && N.getDomain() != "ai.onnx";
    OpSharding S;
    bool HasRule = true;
    if (OtherDomain || One) {
      S.InputSpecs.assign(N.getNumInputs(), AxisSpec());
      S.OutputSpecs.assign(N.getNumOutputs(), AxisSpec());
    } else {
      S = applyShardingRule(N, *this, HasRule);
    }
    S.InputSpecs.resize(N.getNumInputs());
    S.OutputSpecs.resize(N.getNumOutputs());
    for (unsigned O = 0; O < N.getNumOutputs(); ++O)
      if (const Value *V = N.getOutput(O))
        Values[V] = S.OutputSpecs[O];
    record(N, std::move(S), HasRule);
  }
  SeenReplicated.clear();
}

} // namespace loom
