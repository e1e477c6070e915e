//===- ServingReport.cpp - The serving search's text and JSON reports -----===//
//
// What --mode serve prints: the chosen plan, --top, --explain and
// --format json, from the serving search's results (lib/Planner/Serving.cpp).
//
//===----------------------------------------------------------------------===//
#include "loom/Report/ServingReport.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>

using namespace llvm;

namespace loom {

namespace {

std::string ms(double S) { return formatDuration(Seconds(S)); }

std::string tokensPerS(double T) {
  // Thousands separated, as the other reports print token rates.
  std::string Digits = std::to_string((long long)std::llround(T));
  std::string Out;
  for (size_t I = 0; I < Digits.size(); ++I) {
    if (I && (Digits.size() - I) % 3 == 0)
      Out += ',';
    Out += Digits[I];
  }
  return Out;
}

std::string describeSLO(const ServingSLO &S) {
  std::vector<std::string> P;
  if (S.TTFT)
    P.push_back("TTFT <= " + ms(*S.TTFT));
  if (S.TPOT)
    P.push_back("TPOT <= " + ms(*S.TPOT));
  return P.empty() ? "none" : join(P, ", ");
}

std::string shapeOf(const ServingPlanCost &P) {
  std::string S = "tp=" + std::to_string(P.TP);
  if (P.PP > 1)
    S += ",pp=" + std::to_string(P.PP);
  return (P.DP > 1 ? std::to_string(P.DP) + " x " : "") + S;
}

/// The step's terms as a sentence: what one decode step spends.
std::string describeStep(const ServingPlanCost &P) {
  return "(busiest stage, " + std::to_string(P.MicroBatch) +
         (P.MicroBatch == 1 ? " sequence" : " sequences") +
         " a visit: " + ms(P.StageS) + ") reads the weights in " +
         ms(P.WeightReadS) + " and " + formatBytes(Bytes(P.KVCacheBytes)) +
         " of KV cache in " + ms(P.KVReadS) + " per device, computes " +
         ms(P.ComputeS) + ", communicates " + ms(P.CommS);
}

/// What keeps \p P's batch from growing, in words; the engine's cap by
/// its own key ("vllm max_num_seqs=256").
std::string describeLimit(const ServingPlanCost &P, const ServingOptions &O) {
  std::string L = getBatchLimitName(P.Limit).str();
  if (P.Limit == BatchLimit::EngineCap) {
    auto Cap = O.Engine.getBatchCap();
    L += " (" + O.Engine.Name + " " + Cap.second + "=" +
         std::to_string(Cap.first) + ")";
  }
  return L;
}

std::string describeEngine(const ServingEngine &E) {
  if (!E.MaxSeqs && !E.MaxTokens)
    return E.Name + " (no batch cap: the KV cache's room bounds the batch)";
  std::vector<std::string> Caps;
  if (E.MaxSeqs)
    Caps.push_back(E.MaxSeqsKey + " " + std::to_string(E.MaxSeqs));
  if (E.MaxTokens)
    Caps.push_back(E.MaxTokensKey + " " + std::to_string(E.MaxTokens));
  return E.Name + " (" + join(Caps, ", ") +
         (E.Source.empty() ? "" : "; " + E.Source) + ")";
}

std::vector<std::string> explain(const ServingResult &R) {
  std::vector<std::string> Out;
  if (R.Plans.empty() || R.DisaggChosen)
    return Out; // describeServingLayout says why.
  const ServingPlanCost &W = R.Plans.front();
  auto Line = [&](const ServingPlanCost &P) {
    return shapeOf(P) + ": " + std::to_string(P.Batch) +
           " sequences per replica (limit: " + describeLimit(P, R.Opts) +
           "), TTFT " + ms(P.TTFTS) + ", TPOT " + ms(P.TPOTS) + ", " +
           tokensPerS(P.TokensPerSPerDevice) + " tokens/s per device";
  };
  Out.push_back("chosen " + Line(W) + "; its decode step " + describeStep(W) +
                ": bound by " + getServingTermName(W.StepBound).str());
  const ServingPlanCost *Next = R.Plans.size() > 1 ? &R.Plans[1] : nullptr;
  if (!Next)
    return Out;
  if (!Next->MeetsSLO) {
    Out.push_back("next " + shapeOf(*Next) +
                  " misses the SLO even at one "
                  "sequence: TTFT " +
                  ms(Next->TTFTS) + ", TPOT " + ms(Next->TPOTS));
    return Out;
  }
  Out.push_back("next " + Line(*Next));
  // Per device: the sequences each device keeps in flight and the TPOT
  // they see (tokens/s per device = sequences per device / TPOT).
  auto PerDevice = [&](const ServingPlanCost &P) {
    return formatv("{0:F1}", (double)P.Batch / (P.TP * P.PP)).str() +
           " sequences per device at TPOT " + ms(P.TPOTS);
  };
  std::string Why = shapeOf(W) + " keeps " + PerDevice(W) + ", " +
                    shapeOf(*Next) + " " + PerDevice(*Next);
  if (Next->Limit == BatchLimit::Memory)
    Why += "; the KV cache caps " + shapeOf(*Next) + " at " +
           std::to_string(Next->MaxConcurrency) + " sequences per replica (" +
           formatBytes(Bytes(Next->KVCapacityBytes)) + " free per device)";
  else
    Why += "; the " + describeLimit(*Next, R.Opts) + " caps " + shapeOf(*Next) +
           " at " + std::to_string(Next->Batch) + " sequences per replica";
  Out.push_back(
      shapeOf(W) + " wins by " +
      formatv("{0:F2}x", W.TokensPerSPerDevice /
                             std::max(1e-30, Next->TokensPerSPerDevice))
          .str() +
      " in output tokens/s per device: " + Why);
  return Out;
}

std::string percent(double F) { return formatv("{0:F1} %", 100 * F).str(); }

/// The disaggregated plan's pools in words.
std::string describePools(const DisaggPlanCost &D) {
  auto Pool = [](const ServingPlanCost &P) {
    std::string S = std::to_string(P.DP) + " x tp=" + std::to_string(P.TP);
    return P.PP > 1 ? S + ",pp=" + std::to_string(P.PP) : S;
  };
  return "prefill pool " + std::to_string(D.PrefillDevices) + " device" +
         (D.PrefillDevices == 1 ? "" : "s") + " (" + Pool(D.Prefill) + ", " +
         std::to_string(D.PrefillBatch) +
         (D.PrefillBatch == 1 ? " prompt" : " prompts") +
         " a forward), decode pool " + std::to_string(D.DecodeDevices) +
         " device" + (D.DecodeDevices == 1 ? "" : "s") + " (" + Pool(D.Decode) +
         ", " + std::to_string(D.Decode.Batch) +
         " sequences in flight per instance)";
}

/// What binds the disaggregated plan's rate, in words.
std::string describeDisaggBound(const DisaggPlanCost &D) {
  return std::string("bound by the ") +
         (D.PrefillBound ? "prefill pool" : "decode pool") + " (prefill " +
         formatv("{0:F1}", D.PrefillRate).str() + " requests/s, decode " +
         formatv("{0:F1}", D.DecodeRate).str() +
         " requests/s; the prefill pool busy " + percent(D.Utilisation) + ")";
}

} // namespace

std::vector<std::string> describeServingLayout(const ServingResult &R) {
  std::vector<std::string> Out;
  if (!R.Disagg)
    return Out;
  const DisaggPlanCost &D = *R.Disagg;
  std::string DNums = "TTFT " + ms(D.TTFTS) + ", TPOT " + ms(D.TPOTS) + ", " +
                      tokensPerS(D.TokensPerSPerDevice) +
                      " tokens/s per device";
  if (R.Plans.empty()) {
    Out.push_back("layout: disaggregated: no pooled plan holds the model and "
                  "one sequence's KV cache");
    return Out;
  }
  const ServingPlanCost &P = R.Plans.front();
  std::string PNums = "TTFT " + ms(P.TTFTS) + ", TPOT " + ms(P.TPOTS) + ", " +
                      tokensPerS(P.TokensPerSPerDevice) +
                      " tokens/s per device";
  double Ratio =
      R.DisaggChosen
          ? D.TokensPerSPerDevice / std::max(1e-30, P.TokensPerSPerDevice)
          : P.TokensPerSPerDevice / std::max(1e-30, D.TokensPerSPerDevice);
  std::string By = formatv("{0:F2}x", Ratio).str();
  std::string Pooled =
      "pooled " + shapeOf(P) + " at " + std::to_string(P.Batch) +
      (P.Batch == 1 ? " sequence (" : " sequences (") + PNums + ")";
  std::string Disagg = "disaggregated " + D.str() + " (" + DNums + ")";
  bool Pinned = R.Opts.Pin && R.Opts.Pin->Layout &&
                *R.Opts.Pin->Layout == ServingLayout::Disaggregated;
  if (R.DisaggChosen) {
    std::string Why =
        Pinned ? "chosen by --plan"
        : D.MeetsSLO && !P.MeetsSLO
            ? "the pooled layout misses the SLO even at one sequence per "
              "replica"
            : "wins by " + By + " in output tokens/s per device";
    Out.push_back("layout: " + Disagg + " over " + Pooled + ": " + Why);
  } else {
    std::string Why = P.MeetsSLO && !D.MeetsSLO
                          ? "the disaggregated layout misses the SLO"
                          : "wins by " + By + " in output tokens/s per device";
    Out.push_back("layout: " + Pooled + " over " + Disagg + ": " + Why);
  }
  // The trade: the decode steps lose their joining prompts (TPOT), the
  // prefill pool's devices serve no decode, the cache crosses a link.
  Out.push_back("layout: disaggregated decode steps carry no prompt (TPOT " +
                ms(D.TPOTS) + " at " + std::to_string(D.Decode.Batch) +
                " sequences per instance, pooled " + ms(P.TPOTS) + " at " +
                std::to_string(P.Batch) + " with its joining prompts); " +
                describeDisaggBound(D) + "; each request's KV cache, " +
                formatBytes(Bytes(D.KVTransferBytes)) + ", crosses " +
                D.LinkName + " in " + ms(D.KVTransferS));
  return Out;
}

void printDisaggSummary(const ServingResult &R, raw_ostream &OS) {
  const DisaggPlanCost &D = *R.Disagg;
  OS << "serving plan" << (R.Opts.Pin ? " (--plan)" : "")
     << ": disaggregated on " << D.PrefillDevices + D.DecodeDevices << " of "
     << R.Devices << " devices: " << describePools(D) << " (max "
     << D.Decode.MaxConcurrency << ")" << (D.MeetsSLO ? "" : "; misses the SLO")
     << "\n";
  OS << "predicted: TTFT " << ms(D.TTFTS) << " (queue " << ms(D.QueueS)
     << " + prefill " << ms(D.PrefillForwardS) << " + KV transfer "
     << ms(D.KVTransferS) << "), TPOT " << ms(D.TPOTS)
     << " (decode step, no prompt in it), " << tokensPerS(D.TokensPerS)
     << " output tokens/s (" << tokensPerS(D.TokensPerSPerDevice)
     << " per device)\n";
  OS << "pools: " << describeDisaggBound(D) << "\n";
  OS << "kv transfer: " << formatBytes(Bytes(D.KVTransferBytes))
     << " per request (" << formatBytes(Bytes(D.KVTransferPerDevice))
     << " from each prefill device) over " << D.LinkName << ": "
     << ms(D.KVTransferS) << "\n";
  OS << "kv cache: decode pool " << formatBytes(Bytes(D.Decode.KVCacheBytes))
     << " per device of " << formatBytes(Bytes(D.Decode.KVCapacityBytes))
     << " free after " << formatBytes(Bytes(D.Decode.WeightBytes))
     << " of weights; batch limited by " << describeLimit(D.Decode, R.Opts)
     << "\n";
}

/// The disaggregated plan's latencies, for the no-plan message.
static std::string describeDisaggMiss(const DisaggPlanCost &D) {
  return D.str() + " has TTFT " + ms(D.TTFTS) + " (queue " + ms(D.QueueS) +
         " + prefill " + ms(D.PrefillForwardS) + " + KV transfer " +
         ms(D.KVTransferS) + "), TPOT " + ms(D.TPOTS);
}

std::string describeNoServingPlan(const ServingResult &R) {
  std::string SLO = describeSLO(R.Opts.SLO);
  bool PinDisagg = R.Opts.Pin && R.Opts.Pin->Layout &&
                   *R.Opts.Pin->Layout == ServingLayout::Disaggregated;
  if (R.Disagg && (PinDisagg || R.Plans.empty()))
    return "no serving plan meets the SLO (" + SLO + "): the disaggregated " +
           describeDisaggMiss(*R.Disagg);
  std::string Disagg =
      R.Disagg ? "; the best disaggregated, " + describeDisaggMiss(*R.Disagg)
               : "";
  if (R.Plans.empty())
    return "no serving plan on " + std::to_string(R.Devices) +
           " devices: the weights leave no room for one sequence's KV cache "
           "(" +
           formatBytes(Bytes(R.KVBytesPerToken * R.MeanKVTokens)) +
           " per sequence) on any tp x pp; bound by memory";
  const ServingPlanCost &P = R.Plans.front();
  bool TPOT = P.Limit == BatchLimit::TPOT;
  double Got = TPOT ? P.TPOTS : P.TTFTS;
  std::string Term =
      TPOT ? getServingTermName(P.StepBound).str()
           : "compute (prefill of " +
                 std::to_string((long long)std::llround(R.MeanPrompt)) +
                 " tokens: " + ms(P.PrefillS) + ")";
  return "no serving plan meets the SLO (" + SLO + "): the closest, " +
         shapeOf(P) + " at one sequence per replica, has " +
         (TPOT ? "TPOT " : "TTFT ") + ms(Got) + "; bound by " + Term +
         (TPOT ? " (its decode step " + describeStep(P) + ")" : "") + Disagg;
}

void printServingSummary(const ServingResult &R, raw_ostream &OS) {
  const ServingOptions &O = R.Opts;
  OS << "serving: ";
  if (O.Load.Rows.size() == 1)
    OS << "prompt " << O.Load.Rows[0].Prompt << " tokens, "
       << O.Load.Rows[0].Gen << " generated";
  else
    OS << O.Load.Rows.size() << " request classes, mean prompt "
       << format("%.0f", R.MeanPrompt) << " tokens, mean generated "
       << format("%.0f", R.MeanGen);
  OS << "; SLO " << describeSLO(O.SLO) << "; KV cache "
     << formatBytes(Bytes(R.KVBytesPerToken)) << " per token"
     << (O.KVDType.empty() ? "" : " (" + O.KVDType + ")") << "\n";
  if (R.DisaggChosen) {
    OS << "engine: " << describeEngine(O.Engine) << "\n";
    if (O.FailedDevices)
      OS << "failure: " << O.FailureWhat << " lost; re-planned on " << R.Devices
         << " of " << R.Devices + O.FailedDevices << " devices\n";
    printDisaggSummary(R, OS);
    for (const std::string &L : describeServingLayout(R))
      OS << L << "\n";
    return;
  }
  if (!R.Feasible || R.Plans.empty()) {
    OS << "serving plan: none meets the SLO\n";
    return;
  }
  OS << "engine: " << describeEngine(O.Engine) << "\n";
  const ServingPlanCost &P = R.Plans.front();
  OS << "serving plan" << (O.Pin ? " (--plan)" : "") << ": " << P.DP
     << " replica" << (P.DP == 1 ? "" : "s") << " of tp=" << P.TP
     << ",pp=" << P.PP << " ("
     << (P.DP * P.TP * P.PP == R.Devices
             ? ""
             : std::to_string(P.DP * P.TP * P.PP) + " of ")
     << R.Devices << (R.Devices == 1 ? " device), " : " devices), ") << P.Batch
     << " sequences in flight per replica (max " << P.MaxConcurrency << ")"
     << (P.MeetsSLO ? "" : "; misses the SLO") << "\n";
  if (O.FailedDevices) {
    OS << "failure: " << O.FailureWhat << " lost; re-planned on " << R.Devices
       << " of " << R.Devices + O.FailedDevices << " devices: ";
    if (R.BeforeFailure)
      OS << tokensPerS(P.TokensPerS) << " output tokens/s vs "
         << tokensPerS(R.BeforeFailure->TokensPerS) << " on all "
         << R.Devices + O.FailedDevices << " (" << R.BeforeFailure->str()
         << "): "
         << formatv("{0:F1}%", 100 * P.TokensPerS /
                                   std::max(1e-30, R.BeforeFailure->TokensPerS))
                .str()
         << " of the throughput kept\n";
    else
      OS << "no serving plan meets the SLO on the intact cluster to compare "
            "with\n";
  }
  OS << "predicted: TTFT " << ms(P.TTFTS) << " (prefill " << ms(P.PrefillS)
     << "), TPOT " << ms(P.TPOTS) << " (decode step " << ms(P.DecodeStepS)
     << "), " << tokensPerS(P.TokensPerS) << " output tokens/s ("
     << tokensPerS(P.TokensPerSPerDevice) << " per device)\n";
  OS << "kv cache: " << formatBytes(Bytes(P.KVCacheBytes)) << " per device of "
     << formatBytes(Bytes(P.KVCapacityBytes)) << " free after "
     << formatBytes(Bytes(P.WeightBytes)) << " of weights\n";
  OS << "bound: " << getServingTermName(P.Bound) << " (busiest stage, "
     << P.MicroBatch << " sequence" << (P.MicroBatch == 1 ? "" : "s")
     << " a visit: " << ms(P.StageS) << " = weights " << ms(P.WeightReadS)
     << " + KV cache " << ms(P.KVReadS) << " + communication " << ms(P.CommS)
     << " + other kernels "
     << ms(std::max(0.0, P.StageS - P.WeightReadS - P.KVReadS - P.CommS))
     << "; compute floor " << ms(P.ComputeS) << "; batch limited by "
     << describeLimit(P, O) << ")\n";
  for (const std::string &L : describeServingLayout(R))
    OS << L << "\n";
}

void printServingTop(const ServingResult &R, unsigned K, raw_ostream &OS) {
  OS << "rank  plan                       batch  max   TTFT        TPOT        "
        "tokens/s/dev  limit\n";
  unsigned N = std::min<size_t>(K, R.Plans.size());
  for (unsigned I = 0; I < N; ++I) {
    const ServingPlanCost &P = R.Plans[I];
    OS << format(
        "%-5u %-26s %-6u %-5u %-11s %-11s %-13s %s\n", I + 1, P.str().c_str(),
        P.Batch, P.MaxConcurrency, ms(P.TTFTS).c_str(), ms(P.TPOTS).c_str(),
        tokensPerS(P.TokensPerSPerDevice).c_str(),
        P.MeetsSLO ? getBatchLimitName(P.Limit).str().c_str()
                   : ("misses " + getBatchLimitName(P.Limit).str()).c_str());
  }
}

void printServingSweep(const ServingResult &R, raw_ostream &OS) {
  if (R.Sweep.empty())
    return;
  const ServingPlanCost &W = R.Plans.front();
  OS << "batch sweep of " << shapeOf(W)
     << " (sequences in flight per replica; * the plan's batch):\n";
  OS << "  batch     TTFT        TPOT        output tokens/s  per device    "
        "KV cache/device\n";
  for (const ServingPlanCost &P : R.Sweep)
    OS << format("  %-7u %s %-11s %-11s %-16s %-13s %s\n", P.Batch,
                 (const char *)(P.Batch == W.Batch ? "*" : " "),
                 ms(P.TTFTS).c_str(), ms(P.TPOTS).c_str(),
                 tokensPerS(P.TokensPerS).c_str(),
                 tokensPerS(P.TokensPerSPerDevice).c_str(),
                 formatBytes(Bytes(P.KVCacheBytes)).c_str());
}

void printServingComparison(const ServingResult &R, raw_ostream &OS) {
  if (R.Compared.empty())
    return;
  std::vector<std::pair<std::string, const ServingPlanCost *>> Cols;
  if (R.Unconstrained)
    Cols.emplace_back("best", &*R.Unconstrained);
  for (const auto &C : R.Compared)
    Cols.emplace_back("--compare " + C.first, &C.second);
  const ServingPlanCost *Base = Cols.front().second;
  OS << "serving comparison (ratios against " << Cols.front().first << "):\n";
  for (const auto &C : Cols) {
    const ServingPlanCost &P = *C.second;
    OS << "  " << C.first << ": " << P.str() << ": TTFT " << ms(P.TTFTS)
       << ", TPOT " << ms(P.TPOTS) << ", " << tokensPerS(P.TokensPerS)
       << " output tokens/s ("
       << formatv("{0:F2}x", P.TokensPerS / std::max(1e-30, Base->TokensPerS))
              .str()
       << "), " << tokensPerS(P.TokensPerSPerDevice) << " per device ("
       << formatv("{0:F2}x", P.TokensPerSPerDevice /
                                 std::max(1e-30, Base->TokensPerSPerDevice))
              .str()
       << "), KV cache " << formatBytes(Bytes(P.KVCacheBytes))
       << " per device, batch limited by " << describeLimit(P, R.Opts) << "\n";
  }
}

void printServingExplanation(const ServingResult &R, raw_ostream &OS) {
  OS << "why this serving plan:\n";
  for (const std::string &S : describeServingLayout(R))
    OS << "  " << S << "\n";
  for (const std::string &S : explain(R))
    OS << "  " << S << "\n";
}

json::Object getServingPredictedJSON(const ServingPlanCost &P) {
  json::Object O;
  forEachServingPredicted(
      P, /*Detail=*/true,
      [&](StringRef Key, json::Value V) { O[Key] = std::move(V); });
  return O;
}

void printServingJSON(const ServingResult &R, unsigned K, bool Explain,
                      raw_ostream &OS) {
  json::Object Root;
  json::Array Rows;
  for (const ServingWorkload::Row &W : R.Opts.Load.Rows)
    Rows.push_back(json::Object{
        {"prompt_len", W.Prompt}, {"gen_len", W.Gen}, {"weight", W.Weight}});
  json::Object SLO;
  if (R.Opts.SLO.TTFT)
    SLO["ttft_s"] = *R.Opts.SLO.TTFT;
  if (R.Opts.SLO.TPOT)
    SLO["tpot_s"] = *R.Opts.SLO.TPOT;
  Root["mode"] = "serve";
  Root["workload"] = std::move(Rows);
  Root["slo"] = std::move(SLO);
  Root["kv_bytes_per_token"] = R.KVBytesPerToken;
  Root["devices"] = (int64_t)R.Devices;
  Root["feasible"] = R.Feasible;
  Root["layout"] = R.DisaggChosen ? "disagg" : "pooled";
  if (R.Disagg) {
    json::Object D;
    forEachDisaggPredicted(
        *R.Disagg, /*Detail=*/true,
        [&](StringRef Key, json::Value V) { D[Key] = std::move(V); });
    D["plan_string"] = R.Disagg->str();
    D["meets_slo"] = R.Disagg->MeetsSLO;
    Root["disagg"] = std::move(D);
    json::Array Why;
    for (const std::string &L : describeServingLayout(R))
      Why.push_back(L);
    Root["layout_why"] = std::move(Why);
  }
  if (R.Feasible && R.DisaggChosen) {
    const DisaggPlanCost &D = *R.Disagg;
    Root["plan"] = json::Object{{"layout", "disagg"},
                                {"prefill_tp", (int64_t)D.Prefill.TP},
                                {"prefill_pp", (int64_t)D.Prefill.PP},
                                {"prefill_devices", (int64_t)D.PrefillDevices},
                                {"decode_tp", (int64_t)D.Decode.TP},
                                {"decode_pp", (int64_t)D.Decode.PP},
                                {"batch", (int64_t)D.Decode.Batch}};
    Root["plan_string"] = D.str();
    json::Object Pr;
    forEachDisaggPredicted(
        D, /*Detail=*/true,
        [&](StringRef Key, json::Value V) { Pr[Key] = std::move(V); });
    Root["predicted"] = std::move(Pr);
  } else if (R.Feasible) {
    const ServingPlanCost &P = R.Plans.front();
    Root["plan"] = json::Object{{"tp", (int64_t)P.TP},
                                {"pp", (int64_t)P.PP},
                                {"dp", (int64_t)P.DP},
                                {"batch", (int64_t)P.Batch}};
    Root["plan_string"] = P.str();
    Root["predicted"] = getServingPredictedJSON(P);
  }
  json::Array Top;
  for (unsigned I = 0; I < std::min<size_t>(K, R.Plans.size()); ++I) {
    json::Object O = getServingPredictedJSON(R.Plans[I]);
    O["plan_string"] = R.Plans[I].str();
    O["meets_slo"] = R.Plans[I].MeetsSLO;
    Top.push_back(std::move(O));
  }
  Root["top"] = std::move(Top);
  Root["batching"] = R.Opts.StaticBatching ? "static" : "inflight";
  Root["engine"] =
      json::Object{{"name", R.Opts.Engine.Name},
                   {"max_seqs", (int64_t)R.Opts.Engine.MaxSeqs},
                   {"max_batched_tokens", (int64_t)R.Opts.Engine.MaxTokens}};
  json::Array Sweep;
  for (const ServingPlanCost &P : R.Sweep)
    Sweep.push_back(json::Object{{"batch", (int64_t)P.Batch},
                                 {"ttft_s", P.TTFTS},
                                 {"tpot_s", P.TPOTS},
                                 {"output_tokens_per_s", P.TokensPerS}});
  Root["batch_sweep"] = std::move(Sweep);
  if (!R.Compared.empty()) {
    json::Array C;
    for (const auto &KV : R.Compared) {
      json::Object O = getServingPredictedJSON(KV.second);
      O["request"] = KV.first;
      O["plan_string"] = KV.second.str();
      C.push_back(std::move(O));
    }
    Root["compare"] = std::move(C);
  }
  if (R.Opts.FailedDevices && R.BeforeFailure)
    Root["before_failure"] = getServingPredictedJSON(*R.BeforeFailure);
  if (Explain) {
    json::Array E;
    for (const std::string &S : describeServingLayout(R))
      E.push_back(S);
    for (const std::string &S : explain(R))
      E.push_back(S);
    Root["explain"] = std::move(E);
  }
  OS << formatv("{0:2}", json::Value(std::move(Root))) << "\n";
}

} // namespace loom
