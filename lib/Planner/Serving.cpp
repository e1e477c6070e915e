//===- Serving.cpp - Serving plans: prefill, decode, KV cache, SLO --------===//
//
// The model is stated in Serving.h. Anchors: continuous batching and the
// paged KV cache (Kwon et al. 2023, vLLM), decode bound by weight and
// cache reads (Pope et al. 2022, "Efficiently Scaling Transformer
// Inference", §2), prefill/decode interference (Agrawal et al. 2024,
// Sarathi-Serve).
//
//===----------------------------------------------------------------------===//
#include "loom/Planner/Serving.h"
#include "loom/Cost/Collectives.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

using namespace llvm;

namespace loom {

int64_t ServingWorkload::getMaxPrompt() const {
  int64_t M = 0;
  for (const Row &R : Rows)
    M = std::max(M, R.Prompt);
  return M;
}

Expected<ServingWorkload> parseLengthFile(StringRef Path) {
  auto Buf = MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!Buf)
    return createStringError(Buf.getError(), "%s: error: cannot read: %s",
                             Path.str().c_str(),
                             Buf.getError().message().c_str());
  ServingWorkload W;
  SmallVector<StringRef, 0> Lines;
  (*Buf)->getBuffer().split(Lines, '\n');
  for (unsigned I = 0; I < Lines.size(); ++I) {
    StringRef L = Lines[I].trim();
    auto Fail = [&](const Twine &Why) {
      return createStringError(inconvertibleErrorCode(),
                               Path + ":" + Twine(I + 1) + ": error: " + Why);
    };
    if (L.empty() || L.startswith("#"))
      continue;
    SmallVector<StringRef, 4> F;
    L.split(F, ',');
    for (StringRef &S : F)
      S = S.trim();
    if (F.size() == 3 && F[0] == "prompt_len" && F[1] == "gen_len" &&
        F[2] == "weight" && W.Rows.empty())
      continue;
    if (F.size() != 3)
      return Fail("expected prompt_len,gen_len,weight, got '" + L + "'");
    ServingWorkload::Row R;
    if (F[0].getAsInteger(10, R.Prompt) || R.Prompt <= 0)
      return Fail("prompt_len '" + F[0] + "' is not a positive integer");
    if (F[1].getAsInteger(10, R.Gen) || R.Gen <= 0)
      return Fail("gen_len '" + F[1] + "' is not a positive integer");
    if (F[2].getAsDouble(R.Weight) || !(R.Weight > 0) ||
        !std::isfinite(R.Weight))
      return Fail("weight '" + F[2] + "' is not a positive number");
    W.Rows.push_back(R);
  }
  if (W.Rows.empty())
    return createStringError(inconvertibleErrorCode(),
                             "%s: error: no request lengths (lines "
                             "prompt_len,gen_len,weight)",
                             Path.str().c_str());
  return W;
}

Expected<ServingSLO> parseSLO(StringRef Text) {
  ServingSLO S;
  SmallVector<StringRef, 2> Parts;
  Text.split(Parts, ',');
  for (StringRef P : Parts) {
    auto KV = P.split('=');
    StringRef K = KV.first.trim(), V = KV.second.trim();
    Optional<double> *Slot = K == "ttft"   ? &S.TTFT
                             : K == "tpot" ? &S.TPOT
                                           : nullptr;
    if (!Slot)
      return createStringError(inconvertibleErrorCode(),
                               "--slo %s: unknown target '%s'; valid: ttft, "
                               "tpot (e.g. ttft=500ms,tpot=50ms)",
                               Text.str().c_str(), K.str().c_str());
    if (*Slot)
      return createStringError(inconvertibleErrorCode(),
                               "--slo %s: '%s' given twice", Text.str().c_str(),
                               K.str().c_str());
    Expected<Seconds> D = parseDuration(V);
    if (!D)
      return createStringError(inconvertibleErrorCode(), "--slo %s: %s: %s",
                               Text.str().c_str(), K.str().c_str(),
                               toString(D.takeError()).c_str());
    if (!(D->value() > 0))
      return createStringError(inconvertibleErrorCode(),
                               "--slo %s: %s must be positive",
                               Text.str().c_str(), K.str().c_str());
    *Slot = D->value();
  }
  return S;
}

Optional<double> getKVDTypeBytes(StringRef Name) {
  return StringSwitch<Optional<double>>(Name)
      .Cases("fp32", "float32", 4.0)
      .Cases("fp16", "float16", "bf16", "bfloat16", 2.0)
      .Cases("fp8", "int8", 1.0)
      .Default(None);
}

StringRef getServingTermName(ServingTerm T) {
  switch (T) {
  case ServingTerm::Compute:
    return "compute";
  case ServingTerm::HBMBandwidth:
    return "HBM bandwidth";
  case ServingTerm::Communication:
    return "communication";
  case ServingTerm::Memory:
    return "memory";
  case ServingTerm::OtherKernels:
    return "other kernels (activations, launches)";
  }
  return "";
}

StringRef getBatchLimitName(BatchLimit L) {
  switch (L) {
  case BatchLimit::Memory:
    return "memory (KV cache)";
  case BatchLimit::TTFT:
    return "TTFT target";
  case BatchLimit::TPOT:
    return "TPOT target";
  }
  return "";
}

std::string ServingPlanCost::str() const {
  return ("tp=" + Twine(TP) + ",pp=" + Twine(PP) + ",dp=" + Twine(DP) +
          ",batch=" + Twine(Batch))
      .str();
}

void forEachServingPredicted(
    const ServingPlanCost &P, bool Detail,
    function_ref<void(StringRef Key, json::Value V)> Emit) {
  Emit("ttft_s", P.TTFTS);
  Emit("tpot_s", P.TPOTS);
  Emit("output_tokens_per_s", P.TokensPerS);
  Emit("max_concurrency", (int64_t)P.MaxConcurrency);
  Emit("kv_cache_bytes", P.KVCacheBytes);
  if (!Detail)
    return;
  Emit("output_tokens_per_s_per_device", P.TokensPerSPerDevice);
  Emit("batch", (int64_t)P.Batch);
  Emit("kv_capacity_bytes", P.KVCapacityBytes);
  Emit("prefill_s", P.PrefillS);
  Emit("decode_step_s", P.DecodeStepS);
  Emit("bound", getServingTermName(P.Bound));
  Emit("batch_limit", getBatchLimitName(P.Limit));
  Emit("decode_breakdown", json::Object{{"micro_batch", (int64_t)P.MicroBatch},
                                        {"stage_s", P.StageS},
                                        {"compute_s", P.ComputeS},
                                        {"weight_read_s", P.WeightReadS},
                                        {"kv_read_s", P.KVReadS},
                                        {"comm_s", P.CommS}});
}

namespace {

/// The serving model of one graph: per-layer facts, repeated blocks keyed,
/// decode and prefill stage times cached.
class ServingModel {
public:
  ServingModel(const PlanEvaluator &Eval, ArrayRef<LayerInfo> Layers,
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
    }
    const MemoryLevel *HBM = HW.getMemory("hbm");
    BW = HBM ? HBM->Bandwidth.value() : 0;
    Peak = Eval.getPeakFlops();
    double WSum = 0, GSum = 0;
    for (const ServingWorkload::Row &R : O.Load.Rows) {
      WSum += R.Weight;
      MeanPrompt += R.Weight * R.Prompt;
      MeanGen += R.Weight * R.Gen;
      // Weighted by the steps a request stays in flight (its G tokens).
      GSum += R.Weight * R.Gen;
      MeanContext += R.Weight * R.Gen * (R.Prompt + R.Gen / 2.0);
      MeanKVTokens += R.Weight * R.Gen * (double)(R.Prompt + R.Gen);
    }
    MeanPrompt /= WSum;
    MeanGen /= WSum;
    MeanContext /= GSum;
    MeanKVTokens /= GSum;
    for (const ServingWorkload::Row &R : O.Load.Rows)
      PromptWeights.emplace_back(R.Prompt, R.Weight / WSum);
  }

  Expected<ServingPlanCost> cost(unsigned TP, unsigned PP, unsigned DP,
                                 unsigned Batch);

  unsigned NL = 1;
  double Tokens = 0, BW = 0, Peak = 0;
  double ModelKVPerToken = 0;
  double MeanPrompt = 0, MeanGen = 0, MeanContext = 0, MeanKVTokens = 0;
  uint64_t Costed = 0;

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
  Expected<Shape *> getShape(unsigned TP, unsigned PP);
  /// One stage's decode step at M sequences, term by term.
  struct StageStep {
    double TimeS = 0, ComputeS = 0, WeightS = 0, KVS = 0, CommS = 0, SendS = 0;
  };
  StageStep decodeStage(const Shape &S, unsigned Stage, unsigned M);
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
  std::vector<std::pair<int64_t, double>> PromptWeights;
  std::map<std::tuple<unsigned, unsigned, double, double>, double> LayerCache;
  std::map<std::pair<unsigned, unsigned>, std::unique_ptr<Shape>> Shapes;
};

Expected<ServingModel::Shape *> ServingModel::getShape(unsigned TP,
                                                       unsigned PP) {
  auto &Slot = Shapes[{TP, PP}];
  if (Slot)
    return Slot.get();
  auto S = std::make_unique<Shape>();
  S->Plan.TP = TP;
  S->Plan.PP = PP;
  S->Plan.MicroBatchSize = std::max<int64_t>(1, EO.Batch);
  Expected<std::vector<unsigned>> SL = Eval.getStageLayers(S->Plan);
  if (!SL)
    return SL.takeError();
  S->Count = *SL;
  unsigned F = 0;
  for (unsigned C : S->Count) {
    S->First.push_back(F);
    F += C;
  }
  S->TPG = Eval.getGroupShape(S->Plan, "tp");
  S->PPPair = Eval.getGroupShape(S->Plan, "pp");
  // Memory as an inference forward of the bound graph has it (weights,
  // working set, communication buffers); the KV cache takes the rest.
  Expected<PlanCost> PC = Eval.evaluateStages(S->Plan);
  if (!PC)
    return PC.takeError();
  S->MaxBatch = ~0u;
  for (unsigned St = 0; St < PP; ++St) {
    const StageCost &SC = PC->Stages[St];
    S->Weights.push_back(SC.Memory.Weights);
    S->Room.push_back(
        std::max(0.0, PC->HBMBytes - (SC.MemoryBytes - SC.Memory.KVCache)));
    double KV = 0;
    for (unsigned L = S->First[St]; L < S->First[St] + S->Count[St]; ++L)
      KV += KVPerToken[L] / TP;
    KV *= MeanKVTokens;
    S->KVPerSeq.push_back(KV);
    S->MaxBatch = std::min<unsigned>(
        S->MaxBatch,
        KV > 0 ? (unsigned)std::min(1e9, std::floor(S->Room.back() / KV)) : 0);
    // Prefill of one prompt: the nodes outside the attention core scale
    // with its tokens, the core with their square.
    double Pre = 0;
    for (const auto &PW : PromptWeights) {
      double Act = PW.first / Tokens;
      double Attn =
          (double)PW.first * PW.first / ((double)EO.Batch * EO.Seq * EO.Seq);
      double T = 0;
      for (unsigned L = S->First[St]; L < S->First[St] + S->Count[St]; ++L)
        T += layerTime(L, TP, Act, Attn) + allReduce(L, TP, Act, S->TPG);
      double Send = 0;
      if (St + 1 < PP) {
        double B =
            Facts[S->First[St] + S->Count[St] - 1].OutBoundaryBytes * Act / TP;
        Send =
            collectiveTime(CollectiveKind::SendRecv, B, S->PPPair, HW).Seconds;
      }
      Pre += PW.second * T;
      S->PrefillS += PW.second * (T + Send);
    }
    S->Prefill.push_back(Pre);
    S->PrefillStageS = std::max(S->PrefillStageS, Pre);
  }
  Slot = std::move(S);
  return Slot.get();
}

ServingModel::StageStep ServingModel::decodeStage(const Shape &S, unsigned St,
                                                  unsigned M) {
  StageStep R;
  double Act = M / Tokens;
  unsigned TP = S.Plan.TP;
  double KV = 0, WeightBytes = 0, Flops = 0;
  for (unsigned L = S.First[St]; L < S.First[St] + S.Count[St]; ++L) {
    R.TimeS += layerTime(L, TP, Act, 0);
    R.CommS += allReduce(L, TP, Act, S.TPG);
    KV += KVPerToken[L] / TP;
    const PlanEvaluator::LayerSummary &F = Facts[L];
    WeightBytes += F.ParamBytesSharded / TP + F.ParamBytesReplicated;
    Flops += (F.FlopsSharded / TP + F.FlopsReplicated) * Act;
  }
  // The terms as the roofline sees them: what binds is the larger.
  R.KVS = BW > 0 ? M * MeanContext * KV / BW : 0;
  R.WeightS = BW > 0 ? WeightBytes / BW : 0;
  R.ComputeS = Peak > 0 ? Flops / Peak : 0;
  R.TimeS += R.KVS + R.CommS;
  if (St + 1 < S.Plan.PP) {
    double B = Facts[S.First[St] + S.Count[St] - 1].OutBoundaryBytes * Act / TP;
    R.SendS = collectiveTime(CollectiveKind::SendRecv, B, S.PPPair, HW).Seconds;
  }
  return R;
}

Expected<ServingPlanCost> ServingModel::cost(unsigned TP, unsigned PP,
                                             unsigned DP, unsigned Batch) {
  Expected<Shape *> SE = getShape(TP, PP);
  if (!SE)
    return SE.takeError();
  const Shape &S = **SE;
  ++Costed;
  ServingPlanCost R;
  R.TP = TP;
  R.PP = PP;
  R.DP = DP;
  R.MaxConcurrency = S.MaxBatch;
  R.Batch = Batch ? Batch : S.MaxBatch;
  R.PrefillS = S.PrefillS;
  R.PrefillStageS = S.PrefillStageS;
  unsigned M = std::max(1u, (R.Batch + PP - 1) / PP);
  double Sum = 0, Max = 0;
  unsigned Busiest = 0;
  std::vector<StageStep> Steps;
  for (unsigned St = 0; St < PP; ++St) {
    Steps.push_back(decodeStage(S, St, M));
    Sum += Steps.back().TimeS + Steps.back().SendS;
    if (Steps.back().TimeS > Max) {
      Max = Steps.back().TimeS;
      Busiest = St;
    }
  }
  // One micro-batch's token crosses every stage; with pp micro-batches in
  // flight the busiest stage serves each of them once per step.
  R.DecodeStepS = std::max(Sum, PP * Max);
  const StageStep &B = Steps[Busiest];
  R.ComputeS = B.ComputeS;
  R.WeightReadS = B.WeightS;
  R.KVReadS = B.KVS;
  R.CommS = B.CommS + B.SendS;
  R.MicroBatch = M;
  R.StageS = B.TimeS + B.SendS;
  R.KVCacheBytes = R.Batch * S.KVPerSeq[Busiest];
  R.KVCapacityBytes = S.Room[Busiest];
  R.WeightBytes = S.Weights[Busiest];
  R.TTFTS = R.PrefillS + R.DecodeStepS;
  R.TPOTS = R.DecodeStepS + R.Batch * R.PrefillStageS / MeanGen;
  R.TokensPerS = R.TPOTS > 0 ? DP * R.Batch / R.TPOTS : 0;
  R.TokensPerSPerDevice = R.TokensPerS / ((double)DP * TP * PP);
  double HBMTerm = R.WeightReadS + R.KVReadS;
  double Other = std::max(0.0, R.StageS - HBMTerm - R.CommS);
  R.StepBound =
      R.ComputeS >= HBMTerm && R.ComputeS >= R.CommS && R.ComputeS >= Other
          ? ServingTerm::Compute
      : R.CommS > HBMTerm && R.CommS >= Other ? ServingTerm::Communication
      : Other > HBMTerm                       ? ServingTerm::OtherKernels
                                              : ServingTerm::HBMBandwidth;
  R.Bound = R.StepBound;
  R.MeetsSLO = (!O.SLO.TTFT || R.TTFTS <= *O.SLO.TTFT) &&
               (!O.SLO.TPOT || R.TPOTS <= *O.SLO.TPOT);
  return R;
}

/// The search's order: meeting the SLO, then more output tokens/s per
/// device, less TPOT, fewer devices per replica, smaller tp.
bool isBetterServing(const ServingPlanCost &A, const ServingPlanCost &B) {
  if (A.MeetsSLO != B.MeetsSLO)
    return A.MeetsSLO;
  if (A.MeetsSLO && A.TokensPerSPerDevice != B.TokensPerSPerDevice)
    return A.TokensPerSPerDevice > B.TokensPerSPerDevice;
  if (A.TPOTS != B.TPOTS)
    return A.TPOTS < B.TPOTS;
  if (A.TP * A.PP != B.TP * B.PP)
    return A.TP * A.PP < B.TP * B.PP;
  return A.TP < B.TP;
}

} // namespace

Expected<ServingPlanCost>
costServingPlan(const PlanEvaluator &Eval, ArrayRef<LayerInfo> Layers,
                const HardwareModel &HW, const EvaluatorOptions &EO,
                const ServingOptions &O, unsigned TP, unsigned PP, unsigned DP,
                unsigned Batch) {
  ServingModel SM(Eval, Layers, HW, EO, O);
  Expected<ServingPlanCost> C = SM.cost(TP, PP, DP, Batch);
  if (C && C->MaxConcurrency == 0)
    return createStringError(inconvertibleErrorCode(),
                             "tp=%u,pp=%u: the weights leave no room for one "
                             "sequence's KV cache",
                             TP, PP);
  return C;
}

Expected<ServingResult>
searchServing(const PlanEvaluator &Eval, ArrayRef<LayerInfo> Layers,
              const HardwareModel &HW, const EvaluatorOptions &EO,
              const SearchSpace &Space, const ServingOptions &O) {
  auto Start = std::chrono::steady_clock::now();
  if (EO.Seq <= 0)
    return createStringError(inconvertibleErrorCode(),
                             "--mode serve needs a sequence dim (symbol "
                             "'seq', or --seq/--dim): none was bound");
  if (O.Load.Rows.empty())
    return createStringError(inconvertibleErrorCode(),
                             "--mode serve: no request lengths");
  ServingModel SM(Eval, Layers, HW, EO, O);
  if (!(SM.ModelKVPerToken > 0))
    return createStringError(
        inconvertibleErrorCode(),
        "--mode serve: the model has no KV cache (no attention: no "
        "activation x activation matmul whose K and V could be cached)");
  ServingResult R;
  R.Opts = O;
  R.KVBytesPerToken = SM.ModelKVPerToken;
  R.MeanPrompt = SM.MeanPrompt;
  R.MeanGen = SM.MeanGen;
  R.MeanContext = SM.MeanContext;
  R.MeanKVTokens = SM.MeanKVTokens;
  R.Devices = O.Devices ? O.Devices : HW.getNumDevices();
  std::vector<ServingPlanCost> Met, Missed;
  for (unsigned TP = 1; TP <= R.Devices && TP <= Space.TPLimit; ++TP) {
    if (R.Devices % TP || (Space.TPDiv.Divisor && Space.TPDiv.Divisor % TP))
      continue;
    for (unsigned PP = 1; PP <= SM.NL && TP * PP <= R.Devices; ++PP) {
      if (R.Devices % (TP * PP))
        continue;
      unsigned DP = R.Devices / (TP * PP);
      Expected<ServingPlanCost> Top = SM.cost(TP, PP, DP, 0);
      if (!Top) {
        consumeError(Top.takeError());
        continue;
      }
      if (Top->MaxConcurrency == 0)
        continue; // Not even one sequence's cache fits.
      // TTFT and TPOT grow with the batch, and so do tokens/s (b / TPOT
      // with TPOT affine in b): the best batch is the largest that meets
      // the SLO. Bisection between 1 and the most that fit.
      ServingPlanCost Best = *Top;
      Best.Limit = BatchLimit::Memory;
      if (!Top->MeetsSLO) {
        Expected<ServingPlanCost> One = SM.cost(TP, PP, DP, 1);
        if (!One)
          return One.takeError();
        if (!One->MeetsSLO) {
          One->Limit = O.SLO.TPOT && One->TPOTS > *O.SLO.TPOT
                           ? BatchLimit::TPOT
                           : BatchLimit::TTFT;
          Missed.push_back(*One);
          continue;
        }
        unsigned Lo = 1, Hi = Top->MaxConcurrency; // Lo meets, Hi does not.
        ServingPlanCost AtLo = *One, AtHi = *Top;
        while (Hi - Lo > 1) {
          unsigned Mid = Lo + (Hi - Lo) / 2;
          Expected<ServingPlanCost> C = SM.cost(TP, PP, DP, Mid);
          if (!C)
            return C.takeError();
          (C->MeetsSLO ? AtLo : AtHi) = *C;
          (C->MeetsSLO ? Lo : Hi) = Mid;
        }
        Best = AtLo;
        Best.Limit = O.SLO.TPOT && AtHi.TPOTS > *O.SLO.TPOT ? BatchLimit::TPOT
                                                            : BatchLimit::TTFT;
      }
      if (Best.Limit == BatchLimit::Memory)
        Best.Bound = ServingTerm::Memory;
      Met.push_back(Best);
    }
  }
  std::sort(Met.begin(), Met.end(), isBetterServing);
  std::sort(Missed.begin(), Missed.end(), isBetterServing);
  R.Plans = Met;
  R.Plans.insert(R.Plans.end(), Missed.begin(), Missed.end());
  R.Feasible = !Met.empty();
  R.Candidates = SM.Costed;
  R.Seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
          .count();
  return R;
}

} // namespace loom
