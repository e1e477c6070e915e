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

const Node *PropagationContext::getPairedSend(const Node &Recv) const {
  auto It = Sends.find(
      {Recv.getAttrString("group", "").str(), Recv.getAttrInt("sr_tag", -1)});
  return It == Sends.end() ? nullptr : It->second;
}

void PropagationContext::propagate(const Graph &G) {
  bool One = getAxisSize() == 1 && replicatesAtOne();
  for (const auto &NP : G.getNodes())
    if (NP->getDomain() == "hccl" && NP->getOpType() == "HcomSend")
      Sends.emplace(std::make_pair(NP->getAttrString("group", "").str(),
                                   NP->getAttrInt("sr_tag", -1)),
                    NP.get());
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    if (!visit(N) || Decided.count(&N))
      continue;
    SeenReplicated.clear();
    ExpertRole Role = getExpertRole(N);
    if (Role != ExpertRole::None)
      for (const Value *V : N.getInputs()) {
        AxisSpec S = getSpec(V);
        if (getExpertInputSpec(Role, S, isSequenceAxis()) != S)
          SeenReplicated.insert(V);
      }
    // Ops of other domains have no rule: they run replicated, asked
    // nothing (Rules.h).
    bool OtherDomain = !N.getDomain().empty() && N.getDomain() != "ai.onnx" &&
                       N.getDomain() != "hccl";
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

namespace {

bool isDataMovement(const Node &N) {
  StringRef Op = N.getOpType();
  return (N.getDomain().empty() || N.getDomain() == "ai.onnx") &&
         (Op == "Reshape" || Op == "Unsqueeze" || Op == "Squeeze" ||
          Op == "Expand" || Op == "Transpose" || Op == "Identity");
}

int64_t bytesOf(const Value *V) {
  return V->Type.getSizeInBytes().getValueOr(INT64_MAX);
}

} // namespace

SmallVector<const Node *, 4>
findSmallerMovementSource(const Value *V, const UseMap &Users,
                          function_ref<bool(const Value *)> Movable) {
  SmallVector<const Node *, 4> Chain;
  for (const Value *X = V; Chain.size() < 6;) {
    const Node *D = X->getDefiningNode();
    auto U = Users.find(X);
    if (!D || !isDataMovement(*D) || U == Users.end() ||
        U->second.size() != 1 || !D->getInput(0) || !Movable(D->getInput(0)))
      break;
    Chain.push_back(D);
    X = D->getInput(0);
  }
  unsigned Best = 0;
  int64_t BestBytes = bytesOf(V);
  for (unsigned K = 1; K <= Chain.size(); ++K)
    if (bytesOf(Chain[K - 1]->getInput(0)) < BestBytes) {
      Best = K;
      BestBytes = bytesOf(Chain[K - 1]->getInput(0));
    }
  Chain.resize(Best);
  return Chain;
}

} // namespace loom
