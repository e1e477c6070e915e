//===- ServingDisagg.cpp - Disaggregated prefill and decode pools ---------===//
//
// The disaggregated serving layout (Zhong et al. 2024, DistServe, OSDI'24;
// Patel et al. 2024, Splitwise, ISCA'24; MindIE Service's PD separation):
// the N devices are split into a prefill pool of N_p devices and a decode
// pool of N_d = N - N_p, each of instances with their own tp x pp; a
// request is prefilled on the first, its KV cache sent to the second, and
// decoded there. Decode steps then carry no prompt (no prefill
// interference, Sarathi-Serve's cost), at the price of the transfer and of
// devices that only prefill. Per request of mean prompt P and G generated
// tokens, with the pooled model's per-node costs (ServingModel):
//   prefill instance    tp_p x pp_p devices, k prompts a forward (k: 1,
//                       2, 4, ... up to the engine's tokens per step / P,
//                       and that; 1 without a token budget), forward time
//                       F(k) = the static-batching prefill of k prompts
//   prefill pool rate   R_p = n_p k / F(k) requests/s, n_p = N_p /
//                       (tp_p pp_p) instances
//   decode instance     tp_d x pp_d, the pooled decode step with no prompt
//                       joining it, at the largest batch b the KV cache,
//                       the engine's cap and the TPOT target allow
//   decode pool rate    R_d = n_d b / (TPOT G) requests/s
//   served rate         R = min(R_p, R_d); output tokens/s = R G, per
//                       device R G / N
//   utilisation         rho = R / R_p of the prefill pool
//   queue               rho F(k): a request waits for the running prefill
//                       forward while the pool is busy (the pooled layout's
//                       convention: it waits for the running step).
//                       Arrivals are taken as paced; DistServe's M/D/1
//                       queue (its §3.1) grows without bound as rho -> 1.
//   KV transfer         B = KV bytes per token x P (the whole model's
//                       cache); the prefill instance's tp_p pp_p devices
//                       each send their share B / (tp_p pp_p) at once, a
//                       SendRecv over the innermost topology level that
//                       holds all N devices (collectiveTime: that level's
//                       bandwidth and latency from the hardware file; on a
//                       full mesh such as the 910B server's HCCS, one link)
//   TTFT                = queue + F(k) + KV transfer
//   TPOT                = the decode pool's step
// Not modelled: sending the cache layer by layer while the prefill runs
// (Splitwise §4.3, DistServe §4.4 overlap it): the transfer is charged
// after the prefill, an upper bound.
//
//===----------------------------------------------------------------------===//
#include "ServingModel.h"
#include "loom/Cost/Collectives.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"
#include <algorithm>
#include <cmath>

using namespace llvm;

namespace loom {

std::string DisaggPlanCost::str() const {
  std::string S = "layout=disagg,prefill_tp=" + std::to_string(Prefill.TP);
  if (Prefill.PP > 1)
    S += ",prefill_pp=" + std::to_string(Prefill.PP);
  S += ",prefill_devices=" + std::to_string(PrefillDevices) +
       ",decode_tp=" + std::to_string(Decode.TP);
  if (Decode.PP > 1)
    S += ",decode_pp=" + std::to_string(Decode.PP);
  return S + ",batch=" + std::to_string(Decode.Batch);
}

void forEachDisaggPredicted(
    const DisaggPlanCost &D, bool Detail,
    function_ref<void(StringRef Key, json::Value V)> Emit) {
  emitServingHeadline(D.TTFTS, D.TPOTS, D.TokensPerS, D.Decode.MaxConcurrency,
                      D.Decode.KVCacheBytes, Emit);
  Emit("layout", "disagg");
  Emit("prefill_devices", (int64_t)D.PrefillDevices);
  Emit("prefill_tp", (int64_t)D.Prefill.TP);
  Emit("prefill_pp", (int64_t)D.Prefill.PP);
  Emit("decode_devices", (int64_t)D.DecodeDevices);
  if (!Detail)
    return;
  Emit("output_tokens_per_s_per_device", D.TokensPerSPerDevice);
  Emit("decode_tp", (int64_t)D.Decode.TP);
  Emit("decode_pp", (int64_t)D.Decode.PP);
  Emit("batch", (int64_t)D.Decode.Batch);
  Emit("prefill_batch", (int64_t)D.PrefillBatch);
  Emit("prefill_forward_s", D.PrefillForwardS);
  Emit("prefill_rate_per_s", D.PrefillRate);
  Emit("decode_rate_per_s", D.DecodeRate);
  Emit("bound_by", D.PrefillBound ? "prefill pool" : "decode pool");
  Emit("prefill_utilisation", D.Utilisation);
  Emit("queue_s", D.QueueS);
  Emit("kv_transfer", json::Object{{"bytes", D.KVTransferBytes},
                                   {"bytes_per_device", D.KVTransferPerDevice},
                                   {"seconds", D.KVTransferS},
                                   {"link", D.LinkName}});
  Emit("batch_limit", getBatchLimitName(D.Decode.Limit));
}

bool isDisaggBetter(const DisaggPlanCost &D, const ServingPlanCost &P) {
  if (D.MeetsSLO != P.MeetsSLO)
    return D.MeetsSLO;
  if (D.MeetsSLO)
    return D.TokensPerSPerDevice > P.TokensPerSPerDevice;
  return D.TPOTS < P.TPOTS;
}

namespace {

/// Meeting the SLO first, then output tokens/s per device, less TTFT, less
/// TPOT; the earlier (fewer prefill devices, smaller tp) on a tie.
bool isBetterDisagg(const DisaggPlanCost &A, const DisaggPlanCost &B) {
  if (A.MeetsSLO != B.MeetsSLO)
    return A.MeetsSLO;
  // Equal rates up to rounding (k prompts a compute-bound forward take k
  // times one's) keep the earlier, smaller k: less TTFT.
  double TA = A.TokensPerSPerDevice, TB = B.TokensPerSPerDevice;
  if (std::fabs(TA - TB) > 1e-9 * std::max(TA, TB))
    return TA > TB;
  if (A.TTFTS != B.TTFTS)
    return A.TTFTS < B.TTFTS;
  return A.TPOTS < B.TPOTS;
}

/// One instance shape of a pool, as the search costs it once.
struct PoolShape {
  unsigned TP = 1, PP = 1;
  /// Decode: the instance at its best batch (Batch, TPOTS, MeetsSLO).
  ServingPlanCost Decode;
  /// Prefill: (k prompts a forward, its time F(k)), and one instance's
  /// weights and KV room (MaxConcurrency sequences).
  std::vector<std::pair<unsigned, double>> Forwards;
  ServingPlanCost One;
};

/// The level the KV cache crosses: the innermost that holds \p N devices.
GroupShape transferGroup(const HardwareModel &HW, uint64_t N,
                         std::string &Name) {
  GroupShape G;
  G.PerLevel.assign(HW.Topology.size(), 1);
  if (HW.Topology.empty())
    return G;
  uint64_t Span = 1;
  unsigned L = 0;
  for (; L < HW.Topology.size(); ++L) {
    Span *= HW.Topology[L].Size;
    if (Span >= N)
      break;
  }
  L = std::min<unsigned>(L, HW.Topology.size() - 1);
  G.PerLevel[L] = 2;
  Name = HW.Topology[L].Name;
  return G;
}

/// The tp x pp shapes a pool of some devices may use: tp within the TP
/// limit and dividing what the rules split, pp up to the layers (only the
/// pinned ones, if given).
std::vector<std::pair<unsigned, unsigned>>
poolShapes(const SearchSpace &Space, unsigned NL, uint64_t Devices,
           Optional<unsigned> PinTP, Optional<unsigned> PinPP) {
  std::vector<std::pair<unsigned, unsigned>> Out;
  for (unsigned TP = 1; TP <= Devices && TP <= Space.TPLimit; ++TP) {
    if (!Space.TPDiv.allows(TP) || (PinTP && TP != *PinTP))
      continue;
    for (unsigned PP = 1; PP <= NL && (uint64_t)TP * PP <= Devices; ++PP)
      if (!PinPP || PP == *PinPP)
        Out.emplace_back(TP, PP);
  }
  return Out;
}

} // namespace

Expected<Optional<DisaggPlanCost>>
searchDisaggregated(const PlanEvaluator &Eval, ArrayRef<LayerInfo> Layers,
                    const HardwareModel &HW, const EvaluatorOptions &EO,
                    const SearchSpace &Space, const ServingOptions &O,
                    uint64_t Devices) {
  const ServingPin NoPin;
  const ServingPin &Pin = O.Pin ? *O.Pin : NoPin;
  if (Devices < 2)
    return Optional<DisaggPlanCost>();
  // The decode pool: no prompt joins its steps, and only TPOT is its
  // target (TTFT is the prefill pool's and the transfer's).
  ServingOptions DO = O;
  DO.DecodeOnly = true;
  DO.StaticBatching = false;
  DO.SLO.TTFT = None;
  DO.Pin = None;
  if (Pin.Batch) {
    DO.Pin = ServingPin();
    DO.Pin->Batch = Pin.Batch;
  }
  ServingModel Dec(Eval, Layers, HW, EO, DO);
  ServingModel Pre(Eval, Layers, HW, EO, O);
  unsigned NL = Dec.NL;
  unsigned Budget = O.Engine.MaxTokens;
  std::vector<PoolShape> PreShapes, DecShapes;
  for (auto TPP :
       poolShapes(Space, NL, Devices - 1, Pin.PrefillTP, Pin.PrefillPP)) {
    PoolShape S;
    S.TP = TPP.first;
    S.PP = TPP.second;
    Expected<ServingPlanCost> One = Pre.cost(S.TP, S.PP, 1, 1);
    if (!One)
      return One.takeError();
    if (One->MaxConcurrency == 0)
      continue; // The weights leave no room for one prompt's cache.
    S.One = *One;
    // k prompts a forward: doublings up to the token budget's, and it;
    // never more than the instance's KV cache holds.
    unsigned KMax = 1;
    if (Budget && Pre.MeanPrompt > 0)
      KMax = std::max(1u, (unsigned)(Budget / Pre.MeanPrompt));
    KMax = std::min(KMax, One->MaxConcurrency);
    std::vector<unsigned> Ks;
    for (unsigned K = 1; K < KMax; K *= 2)
      Ks.push_back(K);
    Ks.push_back(KMax);
    for (unsigned K : Ks) {
      Expected<double> F = Pre.getBatchPrefill(S.TP, S.PP, K);
      if (!F)
        return F.takeError();
      S.Forwards.emplace_back(K, *F);
    }
    PreShapes.push_back(std::move(S));
  }
  for (auto TPP :
       poolShapes(Space, NL, Devices - 1, Pin.DecodeTP, Pin.DecodePP)) {
    std::vector<ServingPlanCost> Missed;
    Expected<Optional<ServingPlanCost>> B =
        bestServingBatch(Dec, DO, TPP.first, TPP.second, 1, Missed);
    if (!B)
      return B.takeError();
    PoolShape S;
    S.TP = TPP.first;
    S.PP = TPP.second;
    if (*B)
      S.Decode = **B;
    else if (!Missed.empty() &&
             Missed.back().Batch <= Missed.back().MaxConcurrency &&
             Missed.back().MaxConcurrency > 0)
      S.Decode = Missed.back(); // Misses the TPOT target at one sequence.
    else
      continue;
    DecShapes.push_back(S);
  }
  std::string Link;
  GroupShape G = transferGroup(HW, Devices, Link);
  double KVBytes = Pre.ModelKVPerToken * Pre.MeanPrompt;
  Optional<DisaggPlanCost> Best;
  for (uint64_t NP = 1; NP < Devices; ++NP) {
    if (Pin.PrefillDevices && NP != *Pin.PrefillDevices)
      continue;
    uint64_t ND = Devices - NP;
    for (const PoolShape &P : PreShapes) {
      if (NP % (P.TP * P.PP))
        continue;
      unsigned NPI = NP / (P.TP * P.PP);
      double PerDevice = KVBytes / (P.TP * P.PP);
      double X =
          collectiveTime(CollectiveKind::SendRecv, PerDevice, G, HW).Seconds;
      for (const PoolShape &D : DecShapes) {
        if (ND % (D.TP * D.PP))
          continue;
        unsigned NDI = ND / (D.TP * D.PP);
        const ServingPlanCost &DC = D.Decode;
        double RD =
            DC.TPOTS > 0 ? NDI * DC.Batch / (DC.TPOTS * Dec.MeanGen) : 0;
        for (const auto &KF : P.Forwards) {
          DisaggPlanCost C;
          C.PrefillDevices = NP;
          C.DecodeDevices = ND;
          C.PrefillBatch = KF.first;
          C.PrefillForwardS = KF.second;
          C.Prefill = P.One;
          C.Prefill.DP = NPI;
          C.Decode = DC;
          C.Decode.DP = NDI;
          C.Decode.TokensPerS = RD * Dec.MeanGen;
          C.Decode.TokensPerSPerDevice = C.Decode.TokensPerS / ND;
          C.PrefillRate = KF.second > 0 ? NPI * KF.first / KF.second : 0;
          C.DecodeRate = RD;
          double R = std::min(C.PrefillRate, RD);
          C.PrefillBound = C.PrefillRate < RD;
          C.Utilisation = C.PrefillRate > 0 ? R / C.PrefillRate : 0;
          C.QueueS = C.Utilisation * KF.second;
          C.KVTransferBytes = KVBytes;
          C.KVTransferPerDevice = PerDevice;
          C.KVTransferS = X;
          C.LinkName = Link;
          C.TTFTS = C.QueueS + KF.second + X;
          C.TPOTS = DC.TPOTS;
          C.TokensPerS = R * Dec.MeanGen;
          C.TokensPerSPerDevice = C.TokensPerS / Devices;
          C.MeetsSLO = (!O.SLO.TTFT || C.TTFTS <= *O.SLO.TTFT) &&
                       (!O.SLO.TPOT || C.TPOTS <= *O.SLO.TPOT);
          if (!Best || isBetterDisagg(C, *Best))
            Best = C;
        }
      }
    }
  }
  return Best;
}

} // namespace loom
