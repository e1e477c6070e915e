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
#include "ServingModel.h"
#include "loom/Cost/Collectives.h"
#include "loom/Support/Divisors.h"
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
  case BatchLimit::EngineCap:
    return "engine cap";
  case BatchLimit::Given:
    return "--plan";
  }
  return "";
}

std::pair<unsigned, std::string> ServingEngine::getBatchCap() const {
  // A decoding sequence takes one token of a step, so the token budget
  // caps the sequences too (a prefill is chunked to what is left).
  if (MaxTokens && (!MaxSeqs || MaxTokens < MaxSeqs))
    return {MaxTokens, MaxTokensKey};
  return {MaxSeqs, MaxSeqs ? MaxSeqsKey : ""};
}

Expected<ServingEngine> getServingEngine(StringRef Name,
                                         const HardwareModel &HW) {
  ServingEngine E;
  E.Name = Name.str();
  if (Name == "vllm") {
    // vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults (v0.10 to
    // v0.11, the OpenAI API server's usage context): 256 sequences and
    // 2048 batched tokens, 1024 and 8192 on devices of 70 GiB or more
    // that are not A100s (vLLM PR 17885 kept the A100 at the smaller).
    const MemoryLevel *HBM = HW.getMemory("hbm");
    bool Large = HBM && HBM->Capacity.value() >= 70.0 * (1ull << 30) &&
                 !StringRef(HW.Device.Name).contains_insensitive("a100");
    E.MaxSeqs = Large ? 1024 : 256;
    E.MaxTokens = Large ? 8192 : 2048;
    E.MaxSeqsKey = "max_num_seqs";
    E.MaxTokensKey = "max_num_batched_tokens";
    E.Source = "vLLM EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py)";
  } else if (Name == "mindie") {
    // MindIE Service config.json, BackendConfig.ScheduleConfig: maxBatchSize
    // 200 sequences decoded together; maxPrefillTokens (8192) bounds a
    // prefill batch only, not the decode batch.
    E.MaxSeqs = 200;
    E.MaxSeqsKey = "maxBatchSize";
    E.Source = "MindIE Service config.json ScheduleConfig (MindIE Service "
               "developer guide, configuration parameters)";
  } else if (Name == "trtllm") {
    // TensorRT-LLM BuildConfig defaults (tensorrt_llm/builder.py; the
    // performance tuning guide "Tuning Max Batch Size and Max Num
    // Tokens"): max_batch_size 2048, max_num_tokens 8192.
    E.MaxSeqs = 2048;
    E.MaxTokens = 8192;
    E.MaxSeqsKey = "max_batch_size";
    E.MaxTokensKey = "max_num_tokens";
    E.Source = "TensorRT-LLM BuildConfig (tensorrt_llm/builder.py)";
  } else if (Name != "none") {
    return createStringError(inconvertibleErrorCode(),
                             "--engine %s: unknown serving engine; valid: "
                             "vllm, mindie, trtllm, none",
                             Name.str().c_str());
  }
  return E;
}

bool ServingPin::isPooled() const {
  return TP || PP || DP || (Layout && *Layout == ServingLayout::Pooled);
}

Expected<ServingPin> parseServingPlan(StringRef Text) {
  ServingPin P;
  SmallVector<StringRef, 4> Items;
  Text.split(Items, ',', -1, /*KeepEmpty=*/false);
  auto Fail = [&](const Twine &Why) {
    return createStringError(inconvertibleErrorCode(),
                             "--mode serve: plan '" + Text + "': " + Why);
  };
  bool PoolKey = false;
  for (StringRef It : Items) {
    auto KV = It.split('=');
    StringRef K = KV.first.trim(), V = KV.second.trim();
    if (K == "layout") {
      if (V == "pooled" || V == "colocated")
        P.Layout = ServingLayout::Pooled;
      else if (V == "disagg" || V == "disaggregated")
        P.Layout = ServingLayout::Disaggregated;
      else
        return Fail("layout='" + V + "': valid: pooled, disagg");
      continue;
    }
    Optional<unsigned> *Slot = StringSwitch<Optional<unsigned> *>(K)
                                   .Case("tp", &P.TP)
                                   .Case("pp", &P.PP)
                                   .Case("dp", &P.DP)
                                   .Case("batch", &P.Batch)
                                   .Case("prefill_tp", &P.PrefillTP)
                                   .Case("prefill_pp", &P.PrefillPP)
                                   .Case("prefill_devices", &P.PrefillDevices)
                                   .Case("decode_tp", &P.DecodeTP)
                                   .Case("decode_pp", &P.DecodePP)
                                   .Default(nullptr);
    if (!Slot)
      return Fail("unknown key '" + K +
                  "'; valid keys: tp, pp, dp, batch, layout, prefill_tp, "
                  "prefill_pp, prefill_devices, decode_tp, decode_pp");
    unsigned N = 0;
    if (V.getAsInteger(10, N) || N == 0)
      return Fail(K + "='" + V + "' is not a positive integer");
    *Slot = N;
    if (K.startswith("prefill_") || K.startswith("decode_")) {
      if (!P.Layout)
        P.Layout = ServingLayout::Disaggregated;
    } else if (K != "batch") {
      PoolKey = true;
    }
  }
  bool PoolSet = P.PrefillTP || P.PrefillPP || P.PrefillDevices || P.DecodeTP ||
                 P.DecodePP;
  if (P.Layout && *P.Layout == ServingLayout::Disaggregated && PoolKey)
    return Fail("tp, pp and dp are keys of the pooled layout; a "
                "disaggregated plan takes prefill_tp, prefill_pp, "
                "prefill_devices, decode_tp, decode_pp");
  if (P.Layout && *P.Layout == ServingLayout::Pooled && PoolSet)
    return Fail("prefill_* and decode_* are keys of layout=disagg, not of "
                "layout=pooled");
  return P;
}

std::string ServingPlanCost::str() const {
  return ("tp=" + Twine(TP) + ",pp=" + Twine(PP) + ",dp=" + Twine(DP) +
          ",batch=" + Twine(Batch))
      .str();
}

void emitServingHeadline(
    double TTFTS, double TPOTS, double TokensPerS, uint64_t MaxConcurrency,
    double KVCacheBytes,
    function_ref<void(StringRef Key, json::Value V)> Emit) {
  Emit("ttft_s", TTFTS);
  Emit("tpot_s", TPOTS);
  Emit("output_tokens_per_s", TokensPerS);
  Emit("max_concurrency", (int64_t)MaxConcurrency);
  Emit("kv_cache_bytes", KVCacheBytes);
}

void forEachServingPredicted(
    const ServingPlanCost &P, bool Detail,
    function_ref<void(StringRef Key, json::Value V)> Emit) {
  emitServingHeadline(P.TTFTS, P.TPOTS, P.TokensPerS, P.MaxConcurrency,
                      P.KVCacheBytes, Emit);
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
                                                  double M, double PrefTokens,
                                                  double PrefAttn) {
  StageStep R;
  unsigned TP = S.Plan.TP;
  // The engine's token budget per forward (max_num_batched_tokens): a step
  // with more tokens takes N forwards, each reading the weights again;
  // the cache is read once per decoding token whatever the split.
  double All = M + PrefTokens;
  unsigned N = 1;
  if (O.Engine.MaxTokens && All > O.Engine.MaxTokens)
    N = (unsigned)std::ceil(All / O.Engine.MaxTokens);
  double Act = All / N / Tokens, Attn = PrefAttn / N;
  double KV = 0, WeightBytes = 0, Flops = 0;
  for (unsigned L = S.First[St]; L < S.First[St] + S.Count[St]; ++L) {
    R.TimeS += N * layerTime(L, TP, Act, Attn);
    R.CommS += N * allReduce(L, TP, Act, S.TPG);
    KV += KVReadPerToken[L] / TP;
    const PlanEvaluator::LayerSummary &F = Facts[L];
    WeightBytes += F.ParamBytesSharded / TP + F.ParamBytesReplicated;
    Flops += (F.FlopsSharded / TP + F.FlopsReplicated) * All / Tokens;
  }
  // The terms as the roofline sees them: what binds is the larger.
  R.KVS = BW > 0 ? M * MeanContext * KV / BW : 0;
  R.WeightS = BW > 0 ? N * WeightBytes / BW : 0;
  R.ComputeS = Peak > 0 ? Flops / Peak : 0;
  R.TimeS += R.KVS + R.CommS;
  if (St + 1 < S.Plan.PP) {
    double B = Facts[S.First[St] + S.Count[St] - 1].OutBoundaryBytes * All /
               Tokens / TP;
    R.SendS = collectiveTime(CollectiveKind::SendRecv, B, S.PPPair, HW).Seconds;
  }
  return R;
}

double ServingModel::batchPrefill(const Shape &S, unsigned B) {
  unsigned PP = S.Plan.PP, TP = S.Plan.TP;
  double K = std::max(1u, (B + PP - 1) / PP);
  double Sum = 0, Max = 0;
  for (unsigned St = 0; St < PP; ++St) {
    double T = 0, Send = 0;
    for (const auto &PW : PromptWeights) {
      double Act = K * PW.first / Tokens;
      double Attn = K * (double)PW.first * PW.first /
                    ((double)EO.Batch * EO.Seq * EO.Seq);
      for (unsigned L = S.First[St]; L < S.First[St] + S.Count[St]; ++L)
        T += PW.second *
             (layerTime(L, TP, Act, Attn) + allReduce(L, TP, Act, S.TPG));
      if (St + 1 < PP)
        Send += PW.second *
                collectiveTime(
                    CollectiveKind::SendRecv,
                    Facts[S.First[St] + S.Count[St] - 1].OutBoundaryBytes *
                        Act / TP,
                    S.PPPair, HW)
                    .Seconds;
    }
    Sum += T + Send;
    Max = std::max(Max, T);
  }
  return std::max(Sum, PP * Max);
}

Expected<double> ServingModel::getBatchPrefill(unsigned TP, unsigned PP,
                                               unsigned K) {
  Expected<Shape *> SE = getShape(TP, PP);
  if (!SE)
    return SE.takeError();
  return batchPrefill(**SE, K);
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
  // Batch 0: the most the KV cache holds, within the engine's cap.
  unsigned Cap = O.Engine.getBatchCap().first;
  R.Batch = Batch ? Batch : Cap ? std::min(S.MaxBatch, Cap) : S.MaxBatch;
  R.Limit = Batch || R.Batch == S.MaxBatch ? BatchLimit::Memory
                                           : BatchLimit::EngineCap;
  R.PrefillS = S.PrefillS;
  R.PrefillStageS = S.PrefillStageS;
  unsigned M = std::max(1u, (R.Batch + PP - 1) / PP);
  // In-flight batching: with b sequences in flight, each staying G steps,
  // b / G requests start a step; their prompts' tokens run in the same
  // forward as the decode tokens (Sarathi-Serve's mixed batches: one
  // weight read for both), chunked to the engine's token budget.
  double PrefTokens = 0, PrefAttn = 0;
  if (!O.StaticBatching && !O.DecodeOnly) {
    PrefTokens = M * MeanPrompt / MeanGen;
    PrefAttn =
        M / MeanGen * MeanPromptSq / ((double)EO.Batch * EO.Seq * EO.Seq);
  }
  double Sum = 0, Max = 0;
  unsigned Busiest = 0;
  std::vector<StageStep> Steps;
  for (unsigned St = 0; St < PP; ++St) {
    Steps.push_back(decodeStage(S, St, M, PrefTokens, PrefAttn));
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
  if (O.StaticBatching) {
    // All b prompts prefilled together (one weight read for the batch),
    // then G - 1 decode steps; every request's first token comes with the
    // batch's prefill (TensorRT-LLM's gptSessionBenchmark).
    R.PrefillS = batchPrefill(S, R.Batch);
    R.TTFTS = R.PrefillS;
    R.TPOTS = R.DecodeStepS;
    double Total = R.PrefillS + (MeanGen - 1) * R.DecodeStepS;
    R.TokensPerS = Total > 0 ? DP * R.Batch * MeanGen / Total : 0;
  } else {
    // A new request waits for the running step, if any runs.
    R.TTFTS = R.PrefillS + (R.Batch > 1 ? R.DecodeStepS : 0);
    R.TPOTS = R.DecodeStepS;
    R.TokensPerS = R.TPOTS > 0 ? DP * R.Batch / R.TPOTS : 0;
  }
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

/// The best batch of one replica shape: the largest the KV cache and the
/// engine hold that meets the SLO (TTFT and TPOT grow with the batch, and
/// so do tokens/s, b / TPOT with TPOT affine in b: bisection between 1 and
/// the most allowed), or --plan's batch. None when not even one sequence
/// meets the SLO (its cost at one sequence goes to \p Missed) or fits.
Expected<Optional<ServingPlanCost>>
bestServingBatch(ServingModel &SM, const ServingOptions &O, unsigned TP,
                 unsigned PP, unsigned DP,
                 std::vector<ServingPlanCost> &Missed) {
  if (O.Pin && O.Pin->Batch) {
    Expected<ServingPlanCost> C = SM.cost(TP, PP, DP, *O.Pin->Batch);
    if (!C)
      return C.takeError();
    if (C->Batch > C->MaxConcurrency) {
      // Kept to say why, should no other shape hold the batch.
      C->Limit = BatchLimit::Memory;
      Missed.push_back(*C);
      return None;
    }
    C->Limit = BatchLimit::Given;
    return Optional<ServingPlanCost>(*C);
  }
  Expected<ServingPlanCost> Top = SM.cost(TP, PP, DP, 0);
  if (!Top)
    return Top.takeError();
  if (Top->MaxConcurrency == 0)
    return None; // Not even one sequence's cache fits.
  ServingPlanCost Best = *Top;
  if (!Top->MeetsSLO) {
    Expected<ServingPlanCost> One = SM.cost(TP, PP, DP, 1);
    if (!One)
      return One.takeError();
    if (!One->MeetsSLO) {
      One->Limit = O.SLO.TPOT && One->TPOTS > *O.SLO.TPOT ? BatchLimit::TPOT
                                                          : BatchLimit::TTFT;
      Missed.push_back(*One);
      return None;
    }
    unsigned Lo = 1, Hi = Top->Batch; // Lo meets, Hi does not.
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
  return Optional<ServingPlanCost>(Best);
}

namespace {

/// Why --plan's tp, pp and dp admit no serving plan on \p Devices, if
/// they break a rule the search applies.
Optional<std::string> explainServingPin(const ServingPin &P,
                                        const SearchSpace &Space, unsigned NL,
                                        uint64_t Devices) {
  unsigned TP = P.TP.getValueOr(1), PP = P.PP.getValueOr(1);
  if (TP > Space.TPLimit)
    return "tp=" + std::to_string(TP) + " is over the tensor-parallel limit " +
           std::to_string(Space.TPLimit) + " (" + Space.TPLimitWhy + ")";
  if (!Space.TPDiv.allows(TP))
    return "tp=" + std::to_string(TP) +
           " divides none of the dims the sharding rules split (" +
           listSizes(Space.TPDiv.Sizes) +
           "; no padding: neither vocabulary nor heads)";
  if (PP > NL)
    return "pp=" + std::to_string(PP) + " is more than the model's " +
           std::to_string(NL) + " layers";
  uint64_t Need = (uint64_t)TP * PP * P.DP.getValueOr(1);
  if (Need > Devices)
    return "it needs " + std::to_string(Need) + " devices, and there are " +
           std::to_string(Devices);
  return None;
}

/// Every (tp, pp) on \p Devices (only --plan's, with a pin), dp =
/// devices / (tp * pp) unless pinned, each at its best batch; ranked.
Expected<ServingResult> rankServingPlans(ServingModel &SM,
                                         const SearchSpace &Space,
                                         const ServingOptions &O,
                                         uint64_t Devices) {
  ServingResult R;
  R.Devices = Devices;
  const ServingPin NoPin;
  const ServingPin &Pin = O.Pin ? *O.Pin : NoPin;
  if (O.Pin)
    if (Optional<std::string> Why =
            explainServingPin(Pin, Space, SM.NL, Devices))
      return createStringError(inconvertibleErrorCode(),
                               "--mode serve: no serving plan with these "
                               "choices: %s",
                               Why->c_str());
  std::vector<ServingPlanCost> Met, Missed;
  for (unsigned TP = 1; TP <= Devices && TP <= Space.TPLimit; ++TP) {
    if (!Space.TPDiv.allows(TP))
      continue;
    if ((Pin.TP && TP != *Pin.TP) || (!Pin.DP && Devices % TP))
      continue;
    for (unsigned PP = 1; PP <= SM.NL && TP * PP <= Devices; ++PP) {
      if ((Pin.PP && PP != *Pin.PP) || (!Pin.DP && Devices % (TP * PP)))
        continue;
      unsigned DP = Pin.DP ? *Pin.DP : Devices / (TP * PP);
      if ((uint64_t)TP * PP * DP > Devices)
        continue;
      Expected<Optional<ServingPlanCost>> B =
          bestServingBatch(SM, O, TP, PP, DP, Missed);
      if (!B)
        return B.takeError();
      if (*B)
        ((*B)->MeetsSLO || Pin.Batch ? Met : Missed).push_back(**B);
    }
  }
  if (Pin.Batch && Met.empty()) {
    // The shape that holds the most sequences says how far off it is.
    const ServingPlanCost *Most = nullptr;
    for (const ServingPlanCost &M : Missed)
      if (!Most || M.MaxConcurrency > Most->MaxConcurrency)
        Most = &M;
    return createStringError(
        inconvertibleErrorCode(),
        "--mode serve: batch=%u does not fit: the KV cache holds at most %u "
        "sequences per replica (%s)",
        *Pin.Batch, Most ? Most->MaxConcurrency : 0,
        Most
            ? ("tp=" + Twine(Most->TP) + ",pp=" + Twine(Most->PP)).str().c_str()
            : "no shape holds one");
  }
  std::sort(Met.begin(), Met.end(), isBetterServing);
  std::sort(Missed.begin(), Missed.end(), isBetterServing);
  R.Plans = Met;
  R.Plans.insert(R.Plans.end(), Missed.begin(), Missed.end());
  R.Feasible = !Met.empty();
  return R;
}

/// The chosen plan at batches 1, 2, 4, ... up to 8x its own, and at what
/// the KV cache holds.
Error sweepBatches(ServingModel &SM, ServingResult &R) {
  const ServingPlanCost &W = R.Plans.front();
  // Short: doublings up to 8x the plan's batch, then the KV cache's limit.
  std::vector<unsigned> Batches = {W.Batch, W.MaxConcurrency};
  uint64_t Last = std::min<uint64_t>(W.MaxConcurrency, 8ull * W.Batch);
  for (uint64_t B = 1; B < Last; B *= 2)
    Batches.push_back((unsigned)B);
  llvm::sort(Batches);
  Batches.erase(std::unique(Batches.begin(), Batches.end()), Batches.end());
  for (unsigned B : Batches) {
    if (!B || B > W.MaxConcurrency)
      continue;
    Expected<ServingPlanCost> C = SM.cost(W.TP, W.PP, W.DP, B);
    if (!C)
      return C.takeError();
    R.Sweep.push_back(*C);
  }
  return Error::success();
}

/// --compare, --plan's unconstrained best and --fail's intact cluster: the
/// same ranking under other pins or devices.
Error searchServingComparisons(ServingModel &SM, const SearchSpace &Space,
                               const ServingOptions &O, const HardwareModel &HW,
                               ServingResult &R) {
  ServingOptions Free = O;
  Free.Pin = None;
  if (!O.Compare.empty()) {
    if (O.Pin) {
      Expected<ServingResult> U = rankServingPlans(SM, Space, Free, R.Devices);
      if (!U)
        return U.takeError();
      if (U->Feasible)
        R.Unconstrained = U->Plans.front();
    } else {
      R.Unconstrained = R.Plans.front();
    }
  }
  for (const auto &C : O.Compare) {
    if (C.second.Layout && *C.second.Layout == ServingLayout::Disaggregated)
      return createStringError(inconvertibleErrorCode(),
                               "--compare %s: a disaggregated plan is "
                               "compared by --plan with it (the pooled best "
                               "is printed beside it), not by --compare",
                               C.first.c_str());
    ServingOptions One = O;
    One.Pin = C.second;
    Expected<ServingResult> CR = rankServingPlans(SM, Space, One, R.Devices);
    if (!CR)
      return createStringError(inconvertibleErrorCode(),
                               "--compare " + C.first + ": " +
                                   toString(CR.takeError()));
    if (!CR->Feasible)
      return createStringError(inconvertibleErrorCode(),
                               "--compare %s: no serving plan meets the SLO",
                               C.first.c_str());
    R.Compared.emplace_back(C.first, CR->Plans.front());
  }
  if (O.FailedDevices) {
    Expected<ServingResult> BR =
        rankServingPlans(SM, Space, O, R.Devices + O.FailedDevices);
    if (!BR)
      return BR.takeError();
    if (BR->Feasible)
      R.BeforeFailure = BR->Plans.front();
  }
  return Error::success();
}

} // namespace

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
  uint64_t Devices = O.Devices ? O.Devices : HW.getNumDevices();
  // layout=disagg pins the disaggregated plan; the pooled search runs free
  // beside it, to compare with.
  bool PinDisagg =
      O.Pin && O.Pin->Layout && *O.Pin->Layout == ServingLayout::Disaggregated;
  ServingOptions PO = O;
  if (PinDisagg)
    PO.Pin = None;
  Expected<ServingResult> R = rankServingPlans(SM, Space, PO, Devices);
  if (!R)
    return R.takeError();
  if (!O.Pin || !O.Pin->isPooled()) {
    if (PinDisagg && O.Pin->PrefillDevices && *O.Pin->PrefillDevices >= Devices)
      return createStringError(
          inconvertibleErrorCode(),
          "--mode serve: no disaggregated plan with these choices: "
          "prefill_devices=%u leaves no device of the %llu for the decode "
          "pool",
          *O.Pin->PrefillDevices, (unsigned long long)Devices);
    Expected<Optional<DisaggPlanCost>> D =
        searchDisaggregated(Eval, Layers, HW, EO, Space, O, Devices);
    if (!D)
      return D.takeError();
    R->Disagg = *D;
    if (PinDisagg && !R->Disagg)
      return createStringError(
          inconvertibleErrorCode(),
          "--mode serve: no disaggregated plan with these choices on %llu "
          "devices: no split into a prefill and a decode pool of these tp x "
          "pp shapes holds the model and one sequence's KV cache",
          (unsigned long long)Devices);
    R->DisaggChosen =
        R->Disagg && (PinDisagg || R->Plans.empty() ||
                      isDisaggBetter(*R->Disagg, R->Plans.front()));
  }
  bool PooledFeasible = R->Feasible;
  if (R->DisaggChosen)
    R->Feasible = R->Disagg->MeetsSLO;
  R->Opts = O;
  R->KVBytesPerToken = SM.ModelKVPerToken;
  R->MeanPrompt = SM.MeanPrompt;
  R->MeanGen = SM.MeanGen;
  R->MeanContext = SM.MeanContext;
  R->MeanKVTokens = SM.MeanKVTokens;
  if (PooledFeasible) {
    if (Error E = sweepBatches(SM, *R))
      return E;
    if (Error E = searchServingComparisons(SM, Space, PO, HW, *R))
      return E;
  }
  R->Candidates = SM.Costed;
  R->Seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
          .count();
  return R;
}

} // namespace loom
