//===- RuleSplit.cpp - How a candidate splits each layer, from the rules --===//
//
// The propagation here is the one driver lib/Shard/Propagation.cpp also
// runs (include/loom/Shard/Propagate.h: the rule table in graph order,
// weight chains decided by their consumer, tokens entering expert work
// seen replicated at ep > 1, everything replicated at tp = 1), run on the
// planning graph and skipping layers that repeat a representative
// (RuleSplit.h).
//
//===----------------------------------------------------------------------===//
#include "RuleSplit.h"
#include "loom/Analysis/KVCache.h"
#include "loom/Shard/Propagate.h"
#include "llvm/ADT/STLExtras.h"
#include <cstdint>
#include <map>
#include <set>
#include <string>

using namespace llvm;

namespace loom {
namespace rulesplit {

static double valueBytes(const Value *V) {
  return (double)V->Type.getSizeInBytes().getValueOr(0);
}

RuleSplitter::RuleSplitter(const Graph &G, std::vector<LayerValues> LVs,
                           const ExpertAxisRules &Experts, int64_t Opset)
    : G(G), Layers(std::move(LVs)), Opset(Opset), Users(buildUseMap(G)) {
  DenseMap<const Node *, unsigned> Order;
  for (const auto &NP : G.getNodes())
    Order[NP.get()] = Order.size();
  for (unsigned L = 0; L < Layers.size(); ++L)
    for (unsigned I = 0; I < Layers[L].Nodes.size(); ++I)
      Where[Layers[L].Nodes[I]] = {L, I};
  for (const auto &KV : Experts.Nodes)
    if (KV.second.Role != ExpertRole::None)
      Roles[KV.first] = KV.second;
  GraphOutputs.insert(G.getOutputs().begin(), G.getOutputs().end());
  DataDependent = findDataDependent(G);
  for (const KVCacheTensor &T : findKVCache(G))
    if (T.Present)
      KVPresentSeqAxis[T.Present] = T.SeqAxis;
  // Values with a gradient: floating point, computed from a parameter.
  for (const auto &NP : G.getNodes())
    if (any_of(NP->getInputs(), [&](const Value *V) {
          return V && (NeedsGrad.count(V) ||
                       (V->isParameter() && isFloatingPoint(V->Type.Elem)));
        }))
      for (const Value *V : NP->getOutputs())
        if (V && isFloatingPoint(V->Type.Elem))
          NeedsGrad.insert(V);

  // Layers of the same structure: node by node the same op and output
  // types, every outside input made before the layer starts, and no
  // parameter shared with another layer (a tied weight may be split by
  // whichever layer reads it first).
  DupOf.assign(Layers.size(), -1);
  External.resize(Layers.size());
  DenseMap<const Value *, unsigned> ParamLayer;
  std::vector<bool> OwnParams(Layers.size(), true),
      InputsBefore(Layers.size(), true);
  for (unsigned L = 0; L < Layers.size(); ++L) {
    const LayerValues &LV = Layers[L];
    unsigned First = LV.Nodes.empty() ? 0 : Order.lookup(LV.Nodes.front());
    for (unsigned I = 0; I < LV.Nodes.size(); ++I) {
      const Node *N = LV.Nodes[I];
      for (unsigned J = 0; J < N->getNumInputs(); ++J) {
        const Value *V = N->getInput(J);
        if (!V)
          continue;
        if (V->isParameter()) {
          auto Ins = ParamLayer.try_emplace(V, L);
          if (!Ins.second && Ins.first->second != L)
            OwnParams[L] = OwnParams[Ins.first->second] = false;
          continue;
        }
        const Node *D = V->getDefiningNode();
        auto W = D ? Where.find(D) : Where.end();
        if (W != Where.end() && W->second.first == L)
          continue;
        External[L].push_back({I, J});
        if (D && Order.lookup(D) >= First)
          InputsBefore[L] = false;
      }
    }
  }
  auto SameStructure = [&](unsigned A, unsigned B) {
    const LayerValues &X = Layers[A], &Y = Layers[B];
    if (X.Nodes.size() != Y.Nodes.size() ||
        External[A].size() != External[B].size())
      return false;
    for (unsigned I = 0; I < X.Nodes.size(); ++I) {
      const Node *M = X.Nodes[I], *N = Y.Nodes[I];
      if (M->getOpType() != N->getOpType() ||
          M->getNumInputs() != N->getNumInputs() ||
          M->getNumOutputs() != N->getNumOutputs())
        return false;
      for (unsigned O = 0; O < M->getNumOutputs(); ++O) {
        const Value *P = M->getOutput(O), *Q = N->getOutput(O);
        if (!P != !Q || (P && !(P->Type == Q->Type)))
          return false;
      }
    }
    return External[A] == External[B];
  };
  for (unsigned L = 1; L < Layers.size(); ++L) {
    if (!OwnParams[L] || !InputsBefore[L])
      continue;
    for (unsigned J = 0; J < L; ++J)
      if (DupOf[J] < 0 && OwnParams[J] && SameStructure(J, L)) {
        DupOf[L] = J;
        break;
      }
  }
}

/// The rules' context at one configuration: the one driver
/// (Propagate.h) over representatives only.
class SplitContext final : public PropagationContext {
public:
  SplitContext(const RuleSplitter &RS, ConfigSplit &C, unsigned TP, bool SP,
               bool EP, const DenseSet<const Value *> &DPTables,
               const MicroBatchBytes *MB)
      : PropagationContext(TP, SP, RS.Opset > 0 ? RS.Opset : INT64_MAX,
                           OwnValues, RS.Users),
        RS(RS), C(C), EP(EP), DPTables(DPTables), MB(MB) {}
  /// Under sp at a micro-batch below the graph's batch: the token dim is
  /// chosen at the dims the sharder's graph, bound at that micro-batch,
  /// has.
  void setMicroBatch(unsigned N) {
    if (RS.hasMicroBatchDims(N)) {
      MicroBatch = N;
      BatchDims = &RS.getBatchDims();
    }
  }
  SmallVector<int64_t, 4> getTokenShape(const Value *V) const override {
    SmallVector<int64_t, 4> S = RuleContext::getTokenShape(V);
    if (!BatchDims || S.empty())
      return S;
    auto It = BatchDims->find(V);
    if (It == BatchDims->end() || It->second < 0 ||
        (size_t)It->second >= S.size() || S[It->second] % RS.Batch)
      return S;
    // The batch is the dim's outermost factor (merged with the sequence
    // or heads after it): the micro-batch holds MicroBatch / Batch of it.
    S[It->second] = S[It->second] / RS.Batch * MicroBatch;
    return S;
  }

  bool isStackedExpertWork(const Node *N) const override {
    return EP && RS.Roles.lookup(N).Role == ExpertRole::Stacked;
  }
  bool isShardedOverDP(const Value *Table) const override {
    return DPTables.count(Table);
  }

  void run();

private:
  /// The value a skipped layer's \p V stands for in its representative.
  const Value *canon(const Value *V) const override {
    const Node *D = V ? V->getDefiningNode() : nullptr;
    if (!D)
      return V;
    auto W = RS.Where.find(D);
    if (W == RS.Where.end())
      return V;
    unsigned Rep = C.RepOf[W->second.first];
    if (Rep == W->second.first)
      return V;
    const Node *RD = RS.Layers[Rep].Nodes[W->second.second];
    for (unsigned O = 0; O < D->getNumOutputs(); ++O)
      if (D->getOutput(O) == V)
        return RD->getOutput(O);
    return V;
  }
  /// Only layers' nodes, of the representatives (decided on first visit).
  bool visit(const Node &N) override {
    auto W = RS.Where.find(&N);
    if (W == RS.Where.end())
      return false;
    unsigned L = W->second.first;
    if (!State[L])
      decide(L);
    return State[L] != 2;
  }
  // Expert work at ep > 1 sees the tokens ep moves replicated over tp.
  ExpertRole getExpertRole(const Node &N) const override {
    return expertRule(N).Role;
  }
  ExpertNodeRule expertRule(const Node &N) const {
    return EP ? RS.Roles.lookup(&N) : ExpertNodeRule();
  }
  void record(const Node &N, OpSharding S, bool) override {
    Specs[&N] = std::move(S);
  }
  void onChainNode(const Node &Def, const AxisSpec &In,
                   const AxisSpec &Out) override {
    OpSharding &NS = Specs[&Def];
    NS.InputSpecs.assign(1, In);
    NS.OutputSpecs.assign(1, Out);
  }
  void decide(unsigned L);
  /// \p V is read by a layer other than \p L, wherever it is made (the
  /// layer making it may convert it for its own readers first: a
  /// Perceiver's embedded inputs, read by its cross-attention's k and v
  /// projections in two layers).
  bool isReadByOtherLayers(const Value *V, unsigned L) const {
    auto Us = RS.Users.find(V);
    if (Us == RS.Users.end())
      return false;
    return any_of(Us->second, [&](const Node *U) {
      auto UW = RS.Where.find(U);
      return UW != RS.Where.end() && UW->second.first != L;
    });
  }
  void summarize(unsigned L);
  void countForward(unsigned L);
  void countBackward(unsigned L);
  /// The ep crossings on \p N's inputs (getExpertCrossing) into
  /// \p LS.EPFwd, each once (\p Done: value, kind, spec -> its index).
  void countExpertCrossings(
      LayerSplit &LS, const Node &N, const OpSharding &S,
      std::map<std::tuple<const Value *, ExpertTransition, std::string>, size_t>
          &Done);
  const OpSharding &specsOf(const Node *N) const {
    auto It = Specs.find(N);
    assert(It != Specs.end() && "node not propagated");
    return It->second;
  }

  /// Made from constants and weights alone: its size is the same at every
  /// micro-batch (TPComm::Fixed).
  bool holdsNoSample(const Value *V) const {
    return !RS.DataDependent.count(V);
  }
  /// An activation's bytes: the micro-batch graph's, scaled to the full
  /// batch, where it has them (RuleSplit.h, MicroBatchBytes).
  double valueBytes(const Value *V) const {
    if (MB && MB->ByName && !V->isParameter() && !isConstantLike(V)) {
      auto It = MB->ByName->find(V->getName());
      if (It != MB->ByName->end())
        return It->second * MB->Scale;
    }
    return rulesplit::valueBytes(V);
  }
  /// What a collective on \p V moves, in the units the evaluator scales
  /// (TPComm::Fixed): valueBytes, or the value's own bytes when it holds
  /// no sample.
  double commBytes(const Value *V) const {
    return holdsNoSample(V) ? rulesplit::valueBytes(V) : valueBytes(V);
  }
  /// commBytes(V) over its bytes in the graph: what a collective sized
  /// from the graph's types (the rules') is scaled by.
  double batchScale(const Value *V) const {
    double Bound = V ? rulesplit::valueBytes(V) : 0;
    return Bound > 0 ? commBytes(V) / Bound : 1;
  }

  const RuleSplitter &RS;
  ConfigSplit &C;
  bool EP;
  unsigned MicroBatch = 0;
  const DenseMap<const Value *, int> *BatchDims = nullptr;
  const DenseSet<const Value *> &DPTables;
  const MicroBatchBytes *MB;
  /// Per layer: 0 undecided, 1 propagated, 2 takes its representative's.
  std::vector<uint8_t> State;
  /// Per structure (its first layer): the representatives propagated.
  DenseMap<unsigned, SmallVector<unsigned, 2>> RepsOf;
  DenseMap<const Value *, AxisSpec> OwnValues;
  DenseMap<const Node *, OpSharding> Specs;
};

void SplitContext::decide(unsigned L) {
  State[L] = 1;
  int J = RS.DupOf[L];
  // The representatives of L's structure so far: the first block whose
  // input arrives otherwise (the embedding's output, say) starts a second
  // one that the blocks after it take.
  SmallVector<unsigned, 2> &Reps = RepsOf[J < 0 ? L : (unsigned)J];
  const LayerValues &Mine = RS.Layers[L];
  for (unsigned Rep : llvm::reverse(Reps)) {
    const LayerValues &Theirs = RS.Layers[Rep];
    if (all_of(RS.External[L], [&](const std::pair<unsigned, unsigned> &E) {
          return getStoredSpec(Mine.Nodes[E.first]->getInput(E.second)) ==
                 getStoredSpec(Theirs.Nodes[E.first]->getInput(E.second));
        })) {
      State[L] = 2;
      C.RepOf[L] = Rep;
      return;
    }
  }
  Reps.push_back(L);
}

void SplitContext::run() {
  unsigned NL = RS.Layers.size();
  State.assign(NL, 0);
  C.RepOf.resize(NL);
  for (unsigned L = 0; L < NL; ++L)
    C.RepOf[L] = L;
  C.Layers.assign(NL, LayerSplit());
  propagate(RS.G);
  for (unsigned L = 0; L < NL; ++L)
    if (State[L] == 1) {
      summarize(L);
      countForward(L);
      countBackward(L);
    }
}

/// The matmul dim a split node divides (cost_models/ops: MatMul's Batch,
/// M, N, K; Gemm's M x N over K; Conv's M = N x pixels, N = Cout, K = Cin x
/// kernel).
static MMDim getSplitMMDim(const Node &N, const OpSharding &S) {
  if (S.OutputSpecs.empty())
    return MMDim::None;
  const AxisSpec &O = S.OutputSpecs[0];
  if (O.isPartial() || S.Lower == ShardLowering::BiasAfterReduce)
    return MMDim::K;
  if (!O.isSplit())
    return MMDim::None;
  unsigned RY = N.getOutput(0) ? N.getOutput(0)->Type.getRank() : 0;
  StringRef Op = N.getOpType();
  if (Op == "Conv")
    return O.Dim == 1 ? MMDim::N : MMDim::M;
  if (O.Dim == (int)RY - 1)
    return MMDim::N;
  if (O.Dim == (int)RY - 2 || RY < 3)
    return MMDim::M;
  return MMDim::Batch;
}

void SplitContext::summarize(unsigned L) {
  const LayerValues &LV = RS.Layers[L];
  LayerSplit &LS = C.Layers[L];
  LS.Nodes.resize(LV.Nodes.size());
  for (unsigned I = 0; I < LV.Nodes.size(); ++I) {
    const Node *N = LV.Nodes[I];
    NodeSplit &NS = LS.Nodes[I];
    NS.S = specsOf(N);
    auto IsSplit = [](const AxisSpec &S) { return S.isSplit(); };
    NS.Sharded =
        any_of(NS.S.InputSpecs, IsSplit) || any_of(NS.S.OutputSpecs, IsSplit);
    double WBytes = 0, WSplit = 0;
    for (unsigned J = 0; J < N->getNumInputs(); ++J) {
      const Value *V = N->getInput(J);
      if (!V || !isWeightLike(V))
        continue;
      WBytes += valueBytes(V);
      if (NS.S.InputSpecs[J].isSplit())
        WSplit += valueBytes(V);
    }
    NS.ParamSplitFrac = WBytes > 0 ? WSplit / WBytes : 0;
    if (NS.Sharded || NS.S.Lower == ShardLowering::BiasAfterReduce)
      NS.MM = getSplitMMDim(*N, NS.S);
  }
  auto Split = [&](const Value *V) { return getStoredSpec(V).isSplit(); };
  for (const auto &P : LV.Params) {
    LS.ParamSplit.push_back(Split(P.first));
    double Count = P.first->Type.getNumElements().getValueOr(0);
    if (P.second) {
      (Split(P.first) ? LS.ExpertSplit : LS.ExpertWhole) += Count;
      continue;
    }
    (Split(P.first) ? LS.ParamsSplit : LS.ParamsWhole) += Count;
    double &Max = Split(P.first) ? LS.MaxParamSplit : LS.MaxParamWhole;
    Max = std::max(Max, Count);
  }
  for (const auto &S : LV.Saved) {
    double B = valueBytes(S.first);
    bool Sp = Split(S.first);
    (Sp ? LS.SavedSplit : LS.SavedWhole) += B;
    if (S.second)
      (Sp ? LS.SavedAttnSplit : LS.SavedAttnWhole) += B;
  }
  for (const Value *V : LV.Inputs)
    (Split(V) ? LS.InputSplit : LS.InputWhole) += valueBytes(V);
  for (const Value *V : LV.PeakLive)
    (Split(V) ? LS.LiveSplit : LS.LiveWhole) += valueBytes(V);
}

void SplitContext::countForward(unsigned L) {
  const LayerValues &LV = RS.Layers[L];
  LayerSplit &LS = C.Layers[L];
  // The role builder converts a value once per spec asked of it.
  std::set<std::pair<const Value *, std::string>> Done;
  std::map<std::tuple<const Value *, ExpertTransition, std::string>, size_t>
      EPDone;
  for (unsigned I = 0; I < LV.Nodes.size(); ++I) {
    const Node *N = LV.Nodes[I];
    const OpSharding &S = LS.Nodes[I].S;
    ExpertNodeRule E = expertRule(*N);
    for (unsigned J = 0; J < N->getNumInputs(); ++J) {
      const Value *V = N->getInput(J);
      // Weights are stored whole or in the slice a rule needs, constants
      // sliced locally: no collective.
      if (!V || isConstantLike(V) || isWeightLike(V))
        continue;
      Optional<ShardCollective> C = getTransitionCollective(
          getStoredSpec(V), S.InputSpecs[J], V->Type, getAxisSize());
      if (!C || !Done.insert({canon(V), S.InputSpecs[J].str()}).second)
        continue;
      // The combining chain's sum converted where it leaves the experts
      // (before ep scatters it back) is still the ep group's tokens.
      // Unless ep scatters it first (isEPScatterFirst): then tp reshards
      // one ep share.
      ExpertNodeRule From = E;
      if (E.Role == ExpertRole::None && V->getDefiningNode() &&
          expertRule(*V->getDefiningNode()).Role == ExpertRole::Combine &&
          !(EP &&
            isEPScatterFirst(getStoredSpec(V), S.InputSpecs[J], getAxisSize())))
        From = expertRule(*V->getDefiningNode());
      LS.Fwd.push_back({C->Kind, C->Bytes * batchScale(V), V, From});
      LS.Fwd.back().Fixed = holdsNoSample(V);
      if (isReadByOtherLayers(V, L)) {
        LS.Fwd.back().SharedNode = (int)I;
        LS.Fwd.back().SharedInput = (int)J;
        LS.HasShared = true;
      }
    }
    countExpertCrossings(LS, *N, S, EPDone);
    // What the rule's lowering needs beyond its operands' transitions
    // (a bias after reduce, a vocab-parallel cross entropy): the rule
    // declares it, named after its node as the role builder names it.
    // Its rows follow the rows of the node's first operand (a loss's
    // scores, a row-parallel product's input) at the micro-batch.
    for (const ShardCollective &C : S.Collectives) {
      const Value *Rows = N->getNumInputs() ? N->getInput(0) : C.On;
      LS.Fwd.push_back({C.Kind, C.Bytes * batchScale(Rows), C.On, E});
      LS.Fwd.back().Fixed = Rows && holdsNoSample(Rows);
    }
    // Graph outputs leave replicated, a KV cache output as it is held.
    for (unsigned O = 0; O < N->getNumOutputs(); ++O) {
      const Value *V = N->getOutput(O);
      if (!V || !RS.GraphOutputs.count(V))
        continue;
      auto KV = RS.KVPresentSeqAxis.find(V);
      AxisSpec Leave = KV == RS.KVPresentSeqAxis.end()
                           ? AxisSpec()
                           : getKVCacheSpec(S.OutputSpecs[O], KV->second);
      if (Optional<ShardCollective> C = getTransitionCollective(
              S.OutputSpecs[O], Leave, V->Type, getAxisSize()))
        LS.Fwd.push_back({C->Kind, C->Bytes, V, E});
    }
  }
}

void SplitContext::countExpertCrossings(
    LayerSplit &LS, const Node &N, const OpSharding &S,
    std::map<std::tuple<const Value *, ExpertTransition, std::string>, size_t>
        &Done) {
  if (!EP)
    return;
  ExpertNodeRule Reader = expertRule(N);
  for (unsigned J = 0; J < N.getNumInputs(); ++J) {
    ExpertCrossing XC = getExpertCrossing(
        N, J, [&](const Node *X) { return expertRule(*X); }, RS.DataDependent);
    if (XC.Kind == ExpertTransition::None)
      continue;
    // The role builder communicates a value once (a reduce-scatter once
    // per spec asked of it).
    const AxisSpec &Spec = S.InputSpecs[J];
    auto Ins = Done.try_emplace(
        {XC.V, XC.Kind,
         XC.Kind == ExpertTransition::ReduceScatter ? Spec.str() : ""},
        LS.EPFwd.size());
    if (!Ins.second) {
      ExpertNodeRule &First = LS.EPFwd[Ins.first->second].Reader;
      if (Reader.Role == ExpertRole::Branch)
        First.Expert = std::min(First.Expert, Reader.Expert);
      continue;
    }
    // ep's reduce-scatter runs on what tp's reshard left, or, when it
    // goes first (isEPScatterFirst), on the sum as held.
    unsigned A = getAxisSize();
    bool Before = XC.Kind == ExpertTransition::ReduceScatter &&
                  isEPScatterFirst(getStoredSpec(XC.V), Spec, A);
    double Div = Spec.isSplit() && A > 1 && !Before ? A : 1;
    LS.EPFwd.push_back({XC.Kind, valueBytes(XC.V) / Div, XC.V, Reader});
  }
}

/// The collective that turns a gradient arriving as \p Grad into the spec
/// \p From its value was produced in: the dual of the forward transition
/// (all-gather <-> reduce-scatter; an all-reduce's gradient passes as is; a
/// partial gradient of a replicated value is all-reduced).
static bool getBackwardCollective(const AxisSpec &Grad, const AxisSpec &From,
                                  CollectiveKind &K) {
  if (Grad == From)
    return false;
  if (Grad.isPartial()) {
    if (From.isReplicated()) {
      K = CollectiveKind::AllReduce;
      return true;
    }
    if (From.isSplit() && From.Blocks.empty()) {
      K = CollectiveKind::ReduceScatter;
      return true;
    }
    return false;
  }
  if (Grad.isSplit() && Grad.Blocks.empty()) {
    K = CollectiveKind::AllGather; // From R or P (dual of a reduce-scatter),
    return true;                   // or a split elsewhere.
  }
  return false;
}

void SplitContext::countBackward(unsigned L) {
  const LayerValues &LV = RS.Layers[L];
  LayerSplit &LS = C.Layers[L];
  // Per activation read here, the gradients its readers give back (summed
  // locally, then one collective).
  DenseMap<const Value *, SmallVector<AxisSpec, 2>> Grads;
  // In the order first read, with the ep rule of that first reader and
  // where it reads it (node, operand).
  struct FirstRead {
    const Value *V;
    ExpertNodeRule Rule;
    unsigned Node, Input;
  };
  std::vector<FirstRead> Order;
  for (unsigned I = 0; I < LV.Nodes.size(); ++I) {
    const Node *N = LV.Nodes[I];
    const NodeSplit &NS = LS.Nodes[I];
    for (unsigned J = 0; J < N->getNumInputs(); ++J) {
      const Value *V = N->getInput(J);
      if (!V || !RS.NeedsGrad.count(V) || isConstantLike(V) || isWeightLike(V))
        continue;
      const AxisSpec &In = NS.S.InputSpecs[J];
      // Split work on a replicated operand: each rank's gradient of it is
      // an addend (Megatron's f operator). An operand read as a partial sum
      // gets the whole gradient on every rank (each addend's is the sum's).
      AxisSpec G = NS.Sharded && In.isReplicated() ? AxisSpec::partial()
                   : In.isPartial()                ? AxisSpec()
                                                   : In;
      auto Ins = Grads.try_emplace(V);
      if (Ins.second)
        Order.push_back({V, expertRule(*N), I, J});
      if (!is_contained(Ins.first->second, G))
        Ins.first->second.push_back(G);
    }
  }
  // A value other layers read too: its gradients from them all are summed
  // before the one collective (TPComm::SharedNode).
  auto Push = [&](CollectiveKind K, const FirstRead &R) {
    LS.Bwd.push_back({K, commBytes(R.V), R.V, R.Rule});
    LS.Bwd.back().Fixed = holdsNoSample(R.V);
    if (isReadByOtherLayers(R.V, L)) {
      LS.Bwd.back().SharedNode = (int)R.Node;
      LS.Bwd.back().SharedInput = (int)R.Input;
      LS.HasShared = true;
    }
  };
  for (const FirstRead &VE : Order) {
    const Value *V = VE.V;
    const SmallVector<AxisSpec, 2> &Gs = Grads[V];
    AxisSpec From = getStoredSpec(V);
    // A value produced as a partial sum (a row-parallel output) takes its
    // gradient whole: each addend's is the sum's. A partial gradient of it
    // (its reduced value read by split work, Megatron's g then f) is
    // all-reduced like a replicated value's.
    if (From.isPartial())
      From = AxisSpec();
    CollectiveKind K;
    if (any_of(Gs, [](const AxisSpec &S) { return S.isPartial(); })) {
      if (getBackwardCollective(AxisSpec::partial(), From, K))
        Push(K, VE);
      continue;
    }
    for (const AxisSpec &G : Gs)
      if (getBackwardCollective(G, From, K))
        Push(K, VE);
  }
}

ConfigSplit RuleSplitter::run(unsigned TP, bool SP, bool EP,
                              const DenseSet<const Value *> &DPTables,
                              const MicroBatchBytes *MB,
                              unsigned MicroBatch) const {
  ConfigSplit C;
  SplitContext Ctx(*this, C, TP, SP, EP, DPTables, MB);
  if (SP)
    Ctx.setMicroBatch(MicroBatch);
  Ctx.run();
  return C;
}

void RuleSplitter::setInputBatchDims(const std::map<std::string, int> &Dims,
                                     int64_t B) {
  InputBatchDims = Dims;
  Batch = std::max<int64_t>(1, B);
  BatchDims.reset();
}

const DenseMap<const Value *, int> &RuleSplitter::getBatchDims() const {
  if (!BatchDims)
    BatchDims = findBatchDims(G, InputBatchDims, Batch);
  return *BatchDims;
}

} // namespace rulesplit
} // namespace loom
