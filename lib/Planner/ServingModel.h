//===- ServingModel.h - The serving model of one graph -------- -*- C++ -*-===//
//
// Shared by the pooled search (Serving.cpp) and the disaggregated one
// (ServingDisagg.cpp); not installed.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_PLANNER_SERVINGMODEL_H
#define LOOM_LIB_PLANNER_SERVINGMODEL_H

#include "loom/Planner/Serving.h"
#include <map>
#include <memory>
#include <tuple>

namespace loom {

/// The five headline keys both kinds of serving plan lead with
/// (forEachServingPredicted, forEachDisaggPredicted).
void emitServingHeadline(
    double TTFTS, double TPOTS, double TokensPerS, uint64_t MaxConcurrency,
    double KVCacheBytes,
    llvm::function_ref<void(llvm::StringRef Key, llvm::json::Value V)> Emit);

/// The serving model of one graph: per-layer facts, repeated blocks keyed,
/// decode and prefill stage times cached.
class ServingModel {
public:
  ServingModel(const PlanEvaluator &Eval, llvm::ArrayRef<LayerInfo> Layers,
               const HardwareModel &HW, const EvaluatorOptions &EO,
               const ServingOptions &O)
      : Eval(Eval), HW(HW), EO(EO), O(O) {
    NL = Eval.getNumLayers();
    Tokens = (double)EO.Batch * EO.Seq;
    Rep.resize(NL);
    for (unsigned L = 0; L < NL; ++L) {
      Rep[L] = L;
      if (Layers.size() == NL)
        for (unsigned J = 0; J < L; ++J)
          if (Layers[J].Signature == Layers[L].Signature &&
              Layers[J].NumNodes == Layers[L].NumNodes) {
            Rep[L] = J;
            break;
          }
      Facts.push_back(Eval.getLayerSummary(L));
    }
    for (const PlanEvaluator::LayerSummary &F : Facts) {
      double Elem = O.KVElementBytes > 0 ? O.KVElementBytes
                    : F.KVElements > 0   ? F.KVBytes / F.KVElements
                                         : 0;
      KVPerToken.push_back(Tokens > 0 ? F.KVElements * Elem / Tokens : 0);
      ModelKVPerToken += KVPerToken.back();
      // What a decode step reads of it: the cache once per KV head, or once
      // per query head where the engine's kernel works per query head.
      double Reads =
          O.DecodeKVPerQueryHead && F.KVHeads > 0 && F.QHeads > F.KVHeads
              ? (double)F.QHeads / F.KVHeads
              : 1.0;
      KVReadPerToken.push_back(KVPerToken.back() * Reads);
    }
    const MemoryLevel *HBM = HW.getMemory("hbm");
    BW = HBM ? HBM->Bandwidth.value() : 0;
    Peak = Eval.getPeakFlops();
    double WSum = 0, GSum = 0;
    for (const ServingWorkload::Row &R : O.Load.Rows) {
      WSum += R.Weight;
      MeanPrompt += R.Weight * R.Prompt;
      MeanPromptSq += R.Weight * (double)R.Prompt * R.Prompt;
      MeanGen += R.Weight * R.Gen;
      // Weighted by the steps a request stays in flight (its G tokens).
      GSum += R.Weight * R.Gen;
      MeanContext += R.Weight * R.Gen * (R.Prompt + R.Gen / 2.0);
      MeanKVTokens += R.Weight * R.Gen * (double)(R.Prompt + R.Gen);
    }
    MeanPrompt /= WSum;
    MeanPromptSq /= WSum;
    MeanGen /= WSum;
    MeanContext /= GSum;
    MeanKVTokens /= GSum;
    for (const ServingWorkload::Row &R : O.Load.Rows)
      PromptWeights.emplace_back(R.Prompt, R.Weight / WSum);
  }

  llvm::Expected<ServingPlanCost> cost(unsigned TP, unsigned PP, unsigned DP,
                                       unsigned Batch);

  unsigned NL = 1;
  double Tokens = 0, BW = 0, Peak = 0;
  double ModelKVPerToken = 0;
  double MeanPrompt = 0, MeanGen = 0, MeanContext = 0, MeanKVTokens = 0;
  double MeanPromptSq = 0;
  uint64_t Costed = 0;

  /// The prefill of \p K prompts together on one tp x pp instance
  /// (batchPrefill), workload mean.
  llvm::Expected<double> getBatchPrefill(unsigned TP, unsigned PP, unsigned K);

private:
  struct Shape {
    ParallelPlan Plan;
    std::vector<unsigned> First, Count;
    GroupShape TPG, PPPair;
    /// Per stage: weights, room for the KV cache, KV per sequence (bytes
    /// per device), prefill time (workload mean).
    std::vector<double> Weights, Room, KVPerSeq, Prefill;
    double PrefillS = 0, PrefillStageS = 0;
    unsigned MaxBatch = 0;
  };
  llvm::Expected<Shape *> getShape(unsigned TP, unsigned PP);
  /// One stage's step at M decoding sequences, term by term, with
  /// \p PrefTokens prompt tokens (and \p PrefAttn, the prompts' attention
  /// core as a fraction of the bound graph's) in the same forward.
  struct StageStep {
    double TimeS = 0, ComputeS = 0, WeightS = 0, KVS = 0, CommS = 0, SendS = 0;
  };
  StageStep decodeStage(const Shape &S, unsigned Stage, double M,
                        double PrefTokens = 0, double PrefAttn = 0);
  /// Static batching: the prefill of \p B prompts together (pp
  /// micro-batches of ceil(B / pp) through the stages), workload mean.
  double batchPrefill(const Shape &S, unsigned B);
  double layerTime(unsigned L, unsigned TP, double Act, double Attn) {
    auto K = std::make_tuple(Rep[L], TP, Act, Attn);
    auto It = LayerCache.find(K);
    if (It != LayerCache.end())
      return It->second;
    return LayerCache[K] = Eval.getLayerForwardTime(L, TP, Act, Attn);
  }
  double allReduce(unsigned L, unsigned TP, double Act, const GroupShape &G) {
    if (TP == 1)
      return 0;
    double T = 0;
    for (double B : Facts[L].FwdAllReduce)
      T += collectiveTime(CollectiveKind::AllReduce, B * Act, G, HW).Seconds;
    return T;
  }

  const PlanEvaluator &Eval;
  const HardwareModel &HW;
  const EvaluatorOptions &EO;
  const ServingOptions &O;
  std::vector<unsigned> Rep;
  std::vector<PlanEvaluator::LayerSummary> Facts;
  std::vector<double> KVPerToken;
  /// Per layer, the KV bytes per token a decode step reads (KVPerToken,
  /// times query heads / KV heads under DecodeKVPerQueryHead).
  std::vector<double> KVReadPerToken;
  std::vector<std::pair<int64_t, double>> PromptWeights;
  std::map<std::tuple<unsigned, unsigned, double, double>, double> LayerCache;
  std::map<std::pair<unsigned, unsigned>, std::unique_ptr<Shape>> Shapes;
};

/// The search's order: meeting the SLO, then more output tokens/s per
/// device, less TPOT, fewer devices per replica, smaller tp.
bool isBetterServing(const ServingPlanCost &A, const ServingPlanCost &B);

/// The best batch of one replica shape tp x pp (dp replicas) under \p O's
/// SLO and caps, or --plan's batch; None when not even one sequence meets
/// the SLO (its cost at one sequence goes to \p Missed) or fits.
llvm::Expected<llvm::Optional<ServingPlanCost>>
bestServingBatch(ServingModel &SM, const ServingOptions &O, unsigned TP,
                 unsigned PP, unsigned DP,
                 std::vector<ServingPlanCost> &Missed);

} // namespace loom

#endif // LOOM_LIB_PLANNER_SERVINGMODEL_H
