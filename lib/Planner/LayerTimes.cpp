//===- LayerTimes.cpp - One layer's time at a plan's degrees --------------===//
//
// How long a node and a layer take per rank at (tp, micro-batch, sp, ep, cp),
// with the tp collectives they price, and the per-layer queries built on the
// same split: getLayerTime, getLayerForwardTime, getLayerSummary, getTPSplit
// and getPricedForwardCollectives.
//
//===----------------------------------------------------------------------===//
#include "PlanCostImpl.h"
#include "loom/Cost/Collectives.h"
#include <algorithm>
#include <cmath>
#include <tuple>

using namespace llvm;

namespace loom {

double PlanEvaluator::Impl::nodeTime(const NodeFacts &F, const NodeSplit &S,
                                     double ActScale, unsigned TP,
                                     bool Backward, unsigned EP) const {
  if (!F.C || F.C->Class.empty() || !F.C->Cost.HasRule)
    return 0;
  // Placed where it has no time (a Constant: data at rest, placed anywhere).
  auto Placed = F.C->Times.find(F.C->Class);
  if (Placed == F.C->Times.end() || !Placed->second.Supported)
    return 0;
  // An unrolled expert's branch runs on 1/ep of the devices, on ep times
  // the tokens: its time at ep x the activations, divided by ep.
  double Share = 1;
  if (F.Expert && !F.StackedExperts && EP > 1) {
    ActScale *= EP;
    Share = 1.0 / EP;
  }
  // Per rank (the rules' local shapes): split work is 1/tp of the node's
  // at the micro-batch; its weights are 1/tp where they arrive split.
  OpCost C = F.C->Cost;
  double ActF = ActScale / (S.Sharded ? TP : 1);
  double ParamF = 1 - S.ParamSplitFrac * (1 - 1.0 / TP);
  C.Flops *= ActF;
  C.BackwardFlops *= ActF;
  C.RecomputeFlops *= ActF; // a fused kernel's backward recomputation
  if (ShardedLookups.count(F.N))
    C.BytesRead *= ActF; // the rows of this micro-batch's ids
  else
    C.BytesRead = (C.BytesRead - C.ParamBytes) * ActF + C.ParamBytes * ParamF;
  C.BytesWritten *= ActF;
  C.BackwardBytes *= ActF;
  C.ParamBytes *= ParamF;
  if (F.StackedExperts) {
    // All experts at once: each device keeps NumExperts / ep of them (the
    // weight reads shrink) and gets ep times the tokens per expert (the
    // FLOPs do not change).
    C.BytesRead -= C.ParamBytes * (1 - 1.0 / EP);
    C.ParamBytes /= EP;
  }
  if (C.Unit == ComputeUnit::Cube && F.StackedExperts &&
      C.MM.Batch == (int64_t)F.StackedExperts) {
    C.MM.Batch = std::max<int64_t>(1, C.MM.Batch / EP);
    C.MM.M = std::max<int64_t>(1, std::llround(C.MM.M * ActScale * EP));
  } else if (C.Unit == ComputeUnit::Cube) {
    if (C.MM.Batch > 1)
      C.MM.Batch = std::max<int64_t>(1, std::llround(C.MM.Batch * ActScale));
    else
      C.MM.M = std::max<int64_t>(1, std::llround(C.MM.M * ActScale));
  }
  // The dim the split divides: the columns (column parallel), the
  // contraction (row parallel), the heads or the rows.
  if (C.Unit == ComputeUnit::Cube && TP > 1) {
    auto Div = [&](int64_t &D) { D = std::max<int64_t>(1, D / TP); };
    switch (S.MM) {
    case rulesplit::MMDim::N:
      Div(C.MM.N);
      break;
    case rulesplit::MMDim::K:
      Div(C.MM.K);
      break;
    case rulesplit::MMDim::Batch:
      Div(C.MM.Batch > 1 ? C.MM.Batch : C.MM.M);
      break;
    case rulesplit::MMDim::M:
      Div(C.MM.M);
      break;
    case rulesplit::MMDim::None:
      break;
    }
  }
  ClassTime T = estimateClassTime(*F.N, C, F.C->Class, HW);
  // Inputs arriving from another class (placement): the bytes scale with
  // the node's activations, the latencies do not.
  double Transfer =
      Backward ? F.C->BackwardTransferS * ActF + F.C->BackwardTransferLatencyS
               : F.C->TransferS * ActF + F.C->TransferLatencyS;
  return ((Backward ? T.BackwardSeconds : T.Seconds) + Transfer) * Share;
}

const LayerTimes &PlanEvaluator::Impl::layerTimes(unsigned L, unsigned TP,
                                                  unsigned MB, bool SP,
                                                  unsigned EP, bool AllTables,
                                                  unsigned CP) const {
  // Identical blocks cost the same: key by the representative the rules
  // ran over.
  AllTables &= !Tables.empty();
  const ConfigSplit &CS = getConfig(TP, SP, EP, AllTables, MB);
  unsigned Key = CS.RepOf[L];
  if (LF[L].EP.empty())
    EP = 1; // no experts: the same times at every ep
  auto K = std::make_tuple(Key, TP, MB, SP, EP, AllTables, CP);
  auto It = Cache.find(K);
  if (It != Cache.end())
    return It->second;
  double ActScale = getActScale(MB, CP);
  LayerTimes T;
  DenseMap<const Value *, unsigned> LinearOf;
  const LayerSplit &LS = CS.get(L);
  for (unsigned I = 0; I < LF[Key].Nodes.size(); ++I) {
    const NodeFacts &F = LF[Key].Nodes[I];
    const NodeSplit &NS = LS.Nodes[I];
    // Routed tokens spread unevenly over the ep ranks: the most loaded one
    // runs its experts on MoEImbalance times the mean, and the rest wait.
    double Imb = F.StackedExperts && EP > 1 ? Opts.MoEImbalance : 1.0;
    double Fwd = nodeTime(F, NS, ActScale, TP, false, EP) * Imb;
    T.Fwd += Fwd;
    double Bwd =
        Opts.Train ? nodeTime(F, NS, ActScale, TP, true, EP) * Imb : 0.0;
    T.Bwd += Bwd;
    if (F.WeightGemm && NS.Sharded) {
      T.GemmFwd += Fwd;
      T.GemmBwd += Bwd;
      const Value *Act = nullptr;
      for (const Value *V : F.N->getInputs())
        if (V && !(isWeightLike(V) && V->Type.getRank() >= 2) &&
            !isConstantLike(V)) {
          Act = V;
          break;
        }
      auto Ins = LinearOf.try_emplace(Act, T.LinearFwd.size());
      if (Ins.second) {
        T.LinearFwd.push_back(0);
        T.LinearBwd.push_back(0);
      }
      T.LinearFwd[Ins.first->second] += Fwd;
      T.LinearBwd[Ins.first->second] += Bwd;
    }
    if (F.AttentionCore)
      T.AttnFwd += Fwd;
    if (F.CoreNode) {
      T.CoreFwd += Fwd;
      T.CoreBwd += Bwd;
    }
  }
  if (TP > 1) {
    GroupShape TPG = Outer.getGroupShape({{1u, TP}});
    forEachRankComm(
        LS.Fwd, ActScale, EP, [&](const rulesplit::TPComm &X, double Bytes) {
          T.CommFwd += collectiveTime(X.Kind, Bytes, TPG, HW).Seconds;
        });
    if (Opts.Train)
      forEachRankComm(
          LS.Bwd, ActScale, EP, [&](const rulesplit::TPComm &X, double Bytes) {
            T.CommBwd += collectiveTime(X.Kind, Bytes, TPG, HW).Seconds;
            T.BwdBytes += Bytes;
          });
  }
  return Cache.emplace(K, std::move(T)).first->second;
}

void PlanEvaluator::Impl::forEachSharedRepeat(
    unsigned L, ArrayRef<rulesplit::TPComm> Comms, double ActScale, unsigned EP,
    SharedConversions &Converted,
    function_ref<void(const rulesplit::TPComm &, double)> F) const {
  forEachRankComm(
      Comms, ActScale, EP, [&](const rulesplit::TPComm &X, double Bytes) {
        const Value *V = getSharedValue(L, X);
        if (V && !Converted.insert({V, X.Kind, std::llround(Bytes)}).second)
          F(X, Bytes);
      });
}

std::pair<double, double> PlanEvaluator::Impl::sharedRepeats(
    unsigned L, ArrayRef<rulesplit::TPComm> Comms, unsigned TP, double ActScale,
    unsigned EP, SharedConversions &Converted) const {
  // As layerTimes priced them.
  GroupShape TPG = Outer.getGroupShape({{1u, TP}});
  double T = 0, B = 0;
  forEachSharedRepeat(L, Comms, ActScale, EP, Converted,
                      [&](const rulesplit::TPComm &X, double Bytes) {
                        T += collectiveTime(X.Kind, Bytes, TPG, HW).Seconds;
                        B += Bytes;
                      });
  return {T, B};
}

PlanEvaluator::LayerTime PlanEvaluator::getLayerTime(unsigned Layer,
                                                     unsigned TP, unsigned MB,
                                                     bool SP, unsigned EP,
                                                     unsigned CP) const {
  unsigned L = std::min<unsigned>(Layer, I->LF.size() - 1);
  const LayerTimes &T =
      I->layerTimes(L, TP, MB, SP, EP, /*AllTables=*/false, CP);
  LayerTime R{T.Fwd, T.Bwd, T.AttnFwd};
  if (EP > 1 && !I->LF[L].EP.empty()) {
    // The default mesh order puts ep right outside tp (and cp).
    ParallelPlan P;
    P.TP = TP;
    P.EP = P.DP = EP;
    P.CP = CP;
    P.SP = SP;
    P.MicroBatchSize = MB;
    R.EPCommS =
        I->costEPComms(I->LF[L], I->getConfig(TP, SP, EP, false, MB).get(L),
                       I->makePlanContext(P));
  }
  return R;
}

double PlanEvaluator::getLayerForwardTime(unsigned Layer, unsigned TP,
                                          double ActScale,
                                          double AttnScale) const {
  double T = 0;
  unsigned L = std::min<unsigned>(Layer, I->LF.size() - 1);
  const ConfigSplit &CS = I->getConfig(TP, /*SP=*/false, 1);
  unsigned Rep = CS.RepOf[L];
  for (unsigned J = 0; J < I->LF[Rep].Nodes.size(); ++J) {
    const NodeFacts &F = I->LF[Rep].Nodes[J];
    double Scale = F.AttentionCore ? AttnScale : ActScale;
    if (Scale > 0)
      T += I->nodeTime(F, CS.get(L).Nodes[J], Scale, TP, /*Backward=*/false, 1);
  }
  return T;
}

PlanEvaluator::LayerSummary
PlanEvaluator::getLayerSummary(unsigned Layer) const {
  unsigned L = std::min<unsigned>(Layer, I->LF.size() - 1);
  const LayerFacts &F = I->LF[L];
  LayerSummary S;
  std::tie(S.KVBytes, S.KVElements, S.QHeads, S.KVHeads, S.Flops) =
      std::tie(F.KVBytes, F.KVElements, F.QHeads, F.KVHeads, F.Flops);
  S.OutBoundaryBytes = I->BoundaryBytes[L + 1];
  // Classified by every split some degree could take (serving's tp
  // divides them all: the search's legality).
  const LayerSplit &LS = I->getConfig(RuleContext::AnyDivides, false, 1).get(L);
  std::vector<double> &AR = I->SummaryAllReduce[L];
  AR.clear();
  for (const rulesplit::TPComm &X : LS.Fwd)
    if (X.Kind == CollectiveKind::AllReduce)
      AR.push_back(X.Bytes);
  S.FwdAllReduce = AR;
  for (unsigned J = 0; J < F.Nodes.size(); ++J) {
    const NodeFacts &N = F.Nodes[J];
    if (!N.C || N.AttentionCore || !N.C->Cost.HasRule)
      continue;
    bool Sharded = LS.Nodes[J].Sharded;
    (Sharded ? S.ParamBytesSharded : S.ParamBytesReplicated) +=
        N.C->Cost.ParamBytes;
    (Sharded ? S.FlopsSharded : S.FlopsReplicated) += N.C->Cost.Flops;
  }
  return S;
}

PlanEvaluator::TPSplit PlanEvaluator::getTPSplit(unsigned Layer, unsigned TP,
                                                 bool SP, unsigned EP) const {
  unsigned L = std::min<unsigned>(Layer, I->LF.size() - 1);
  const LayerSplit &LS = I->getConfig(TP, SP, EP).get(L);
  TPSplit R;
  for (unsigned J = 0; J < I->LF[L].Nodes.size(); ++J) {
    R.Nodes.push_back(I->LF[L].Nodes[J].N);
    R.Specs.push_back(LS.Nodes[J].S);
    R.Sharded.push_back(LS.Nodes[J].Sharded);
  }
  for (const rulesplit::TPComm &X : LS.Fwd)
    R.Collectives.push_back({X.Kind, X.Bytes, X.V, false});
  for (const rulesplit::TPComm &X : LS.Bwd)
    R.Collectives.push_back({X.Kind, X.Bytes, X.V, true});
  return R;
}

std::vector<PlanEvaluator::LayerCollective>
PlanEvaluator::getPricedForwardCollectives(const ParallelPlan &P,
                                           unsigned Layer) const {
  // As costStage and layerTimes price them.
  std::vector<LayerCollective> R;
  if (P.TP <= 1 && P.EP <= 1 && P.CP <= 1)
    return R;
  unsigned L = std::min<unsigned>(Layer, I->LF.size() - 1);
  bool AllTables = P.Emb != EmbeddingMode::Auto && !I->Tables.empty();
  const LayerSplit &LS =
      I->getConfig(P.TP, P.SP, P.EP, AllTables, P.MicroBatchSize).get(L);
  double ActScale = I->getActScale(P.MicroBatchSize, P.CP);
  if (P.TP > 1)
    Impl::forEachRankComm(LS.Fwd, ActScale, P.EP,
                          [&](const rulesplit::TPComm &X, double Bytes) {
                            R.push_back({X.Kind, Bytes, X.V, false});
                            R.back().Shared = I->getSharedValue(L, X);
                          });
  // As costEPComms prices them, before the load imbalance and a
  // dispatcher's copies (the graphs hold the mean).
  if (!I->LF[L].EP.empty())
    Impl::forEachEPComm(
        LS.EPFwd, ActScale, P.EP,
        [&](const rulesplit::EPComm &X, CollectiveKind K, double Bytes) {
          R.push_back({K, Bytes, X.V, false, "ep"});
        });
  // As costContextParallelLayer prices them: Ulysses' all-to-alls of Q,
  // K, V and the output, each of the rank's share, then the ring's
  // ring - 1 sends of the rank's K/V block (one buffer).
  const LayerFacts &F = I->LF[L];
  if (P.CP <= 1 || F.KVBytes <= 0)
    return R;
  unsigned U = P.getCPUlyssesSize();
  double KV = F.KVBytes / P.TP * ActScale;
  if (U > 1) {
    KV = getUlyssesKVBytes(U, P.TP, F.QHeads, F.KVHeads, KV);
    double QO = F.QOBytes / P.TP * ActScale;
    for (double Bytes : {QO, KV / 2, KV / 2, QO})
      R.push_back({CollectiveKind::AllToAll, Bytes, nullptr, false, "cp"});
  }
  for (unsigned S = 1; S < P.getCPRingSize(); ++S)
    R.push_back({CollectiveKind::SendRecv, KV, nullptr, false, "cp"});
  return R;
}

} // namespace loom
