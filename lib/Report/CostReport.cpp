//===- CostReport.cpp - --print-costs output, text and JSON ---------------===//
#include "loom/Report/CostReport.h"
#include "loom/IR/NodeLabel.h"
#include "loom/Plan/StageSplit.h"
#include "loom/Report/EmbeddingReport.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <map>
#include <set>

using namespace llvm;

namespace loom {

namespace {
struct Totals {
  double Flops = 0, BackwardFlops = 0, ParamCount = 0;
  std::vector<const Node *> NoRule;
  UncostedWork U;
};
} // namespace

static Totals computeTotals(const Graph &G, const NodeCostMap &Costs) {
  Totals T;
  T.U = summarizeUncosted(G, Costs);
  for (const auto &NP : G.getNodes()) {
    auto It = Costs.find(NP.get());
    if (It == Costs.end())
      continue;
    const OpCost &C = It->second.Cost;
    if (!C.HasRule)
      continue;
    T.Flops += C.Flops;
    T.BackwardFlops += C.BackwardFlops;
  }
  T.NoRule = T.U.NoRule;
  T.ParamCount = getTotalParameterCount(G);
  return T;
}

static std::string fmtCount(double V) {
  std::string S;
  raw_string_ostream(S) << format("%.0f", V);
  return S;
}

/// Bytes of the activations a node keeps for backward.
static double savedBytes(const OpCost &C) {
  double Saved = 0;
  for (const Value *V : C.SavedValues)
    Saved += V->Type.getSizeInBytes().getValueOr(0);
  return Saved;
}

static void printSummaryLine(raw_ostream &OS, const Graph &G, const Totals &T) {
  OS << "total: " << G.getNumNodes() << " nodes, forward FLOPs "
     << fmtCount(T.Flops) << ", backward FLOPs " << fmtCount(T.BackwardFlops)
     << ", parameters " << fmtCount(T.ParamCount) << ", " << T.NoRule.size()
     << " node(s) without a cost rule";
  if (!T.NoRule.empty()) {
    OS << " (" << describeUncosted(T.U) << ")";
    OS << ":";
    for (const Node *N : T.NoRule)
      OS << " '" << getNodeLabel(*N) << "'";
  }
  OS << "\n";
}

static json::Array noRuleJSON(const Totals &T, const NodeCostMap &Costs) {
  json::Array A;
  for (const Node *N : T.NoRule)
    A.push_back(
        json::Object{{"node", getNodeLabel(*N)},
                     {"op", N->getQualifiedOpType()},
                     {"reason", Costs.find(N)->second.Cost.NoRuleReason}});
  return A;
}

json::Object uncostedJSON(const UncostedWork &U) {
  return json::Object{{"nodes", (int64_t)U.Nodes},
                      {"total_nodes", (int64_t)U.TotalNodes},
                      {"node_share", U.getNodeShare()},
                      {"flops_share_at_least", U.getFlopShare()},
                      {"param_share", U.getParamShare()},
                      {"params", U.UncostedParams}};
}

/// The summary keys every JSON report ends with, plus \p Key = \p Items.
static void printTotalsJSON(raw_ostream &OS, const Totals &T,
                            const NodeCostMap &Costs, StringRef Key,
                            json::Array Items) {
  json::Object Root{{Key, std::move(Items)},
                    {"forward_flops", T.Flops},
                    {"backward_flops", T.BackwardFlops},
                    {"parameters", T.ParamCount},
                    {"nodes_without_cost_rule", noRuleJSON(T, Costs)},
                    {"uncosted", uncostedJSON(T.U)}};
  OS << formatv("{0:2}", json::Value(std::move(Root))) << "\n";
}

void printNodeCosts(const Graph &G, const NodeCostMap &Costs,
                    const HardwareModel &HW, ReportFormat F, raw_ostream &OS,
                    const DenseMap<const Node *, AxisSpec> *TPSpecs) {
  auto TPSpec = [&](const Node &N) {
    auto It = TPSpecs->find(&N);
    return It == TPSpecs->end() ? AxisSpec() : It->second;
  };
  Totals T = computeTotals(G, Costs);
  if (F == ReportFormat::JSON) {
    json::Array Nodes;
    for (const auto &NP : G.getNodes()) {
      const Node &N = *NP;
      const NodeCostInfo &Info = Costs.find(&N)->second;
      const OpCost &C = Info.Cost;
      if (C.FusedInto)
        continue; // in its region's entry
      json::Object O{{"node", getNodeLabel(N)},
                     {"op", N.getQualifiedOpType()},
                     {"layer", N.Layer}};
      if (!C.FusedKernel.empty()) {
        O["fused_kernel"] = C.FusedKernel;
        json::Array Members;
        for (const Node *M : C.FusedMembers)
          Members.push_back(getNodeLabel(*M));
        O["members"] = std::move(Members);
      }
      if (N.getNumOutputs() && N.getOutput(0))
        O["shape"] = N.getOutput(0)->Type.str();
      if (TPSpecs)
        O["tp"] = TPSpec(N).str();
      if (!C.HasRule) {
        O["cost_rule"] = false;
        O["reason"] = C.NoRuleReason;
        Nodes.push_back(std::move(O));
        continue;
      }
      O["unit"] = getComputeUnitName(C.Unit);
      O["flops"] = C.Flops;
      O["backward_flops"] = C.BackwardFlops;
      O["bytes_read"] = C.BytesRead;
      O["bytes_written"] = C.BytesWritten;
      if (C.BackwardBytes > 0)
        O["backward_bytes"] = C.BackwardBytes;
      O["param_count"] = C.ParamCount;
      O["saved_bytes"] = savedBytes(C);
      O["class"] = Info.Class;
      json::Object Times;
      for (const auto &KV : Info.Times)
        Times[KV.first] = KV.second.Supported ? json::Value(KV.second.Seconds)
                                              : json::Value(nullptr);
      O["time_s"] = std::move(Times);
      Nodes.push_back(std::move(O));
    }
    printTotalsJSON(OS, T, Costs, "nodes", std::move(Nodes));
    return;
  }
  OS << "# node costs: op, output, unit, forward FLOPs, bytes read/written, "
        "parameters, saved bytes, class, time per class\n";
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    const NodeCostInfo &Info = Costs.find(&N)->second;
    const OpCost &C = Info.Cost;
    if (C.FusedInto)
      continue; // on its region's line
    OS << "node '" << getNodeLabel(N) << "' " << N.getQualifiedOpType();
    if (!C.FusedKernel.empty()) {
      OS << " fused=" << C.FusedKernel << " members=";
      ListSeparator LS(",");
      for (const Node *M : C.FusedMembers)
        OS << LS << getNodeLabel(*M);
    }
    if (N.Layer >= 0)
      OS << " layer=" << N.Layer;
    if (N.getNumOutputs() && N.getOutput(0))
      OS << " out=" << N.getOutput(0)->Type.str();
    if (!C.HasRule) {
      OS << " NO COST RULE: " << C.NoRuleReason << "\n";
      continue;
    }
    double Saved = savedBytes(C);
    OS << " unit=" << getComputeUnitName(C.Unit)
       << " flops=" << fmtCount(C.Flops) << " read=" << fmtCount(C.BytesRead)
       << " written=" << fmtCount(C.BytesWritten);
    if (C.BackwardBytes > 0) // a rule that counts its backward's traffic
      OS << " backward_bytes=" << fmtCount(C.BackwardBytes);
    OS << " params=" << fmtCount(C.ParamCount) << " saved=" << fmtCount(Saved)
       << " class=" << (Info.Class.empty() ? "none" : Info.Class);
    for (const auto &KV : HW.Device.Classes) {
      auto It = Info.Times.find(KV.first);
      OS << ' ' << KV.first << '=';
      if (It == Info.Times.end() || !It->second.Supported)
        OS << '-';
      else
        OS << formatDuration(Seconds(It->second.Seconds));
    }
    if (TPSpecs)
      OS << " tp=" << TPSpec(N).str();
    OS << "\n";
  }
  printSummaryLine(OS, G, T);
}

namespace {
struct LayerSum {
  unsigned Nodes = 0;
  /// Kernels launched: nodes costed on their own or anchoring a fused
  /// kernel (named or generic), not the members inside one nor free ops.
  unsigned Kernels = 0;
  /// Fused kernels by name (attention, fusion.loop, ...): how many.
  std::map<std::string, unsigned> Fused;
  double Flops = 0, BackwardFlops = 0, Params = 0, Time = 0, BackwardTime = 0;
};
} // namespace

void printLayerCosts(const Graph &G, ArrayRef<LayerInfo> Layers,
                     const NodeCostMap &Costs, ReportFormat F,
                     raw_ostream &OS) {
  Totals T = computeTotals(G, Costs);
  std::vector<LayerSum> Sums(std::max<size_t>(Layers.size(), 1));
  for (const auto &NP : G.getNodes()) {
    const NodeCostInfo &Info = Costs.find(NP.get())->second;
    LayerSum &S = Sums[std::max(0, std::min<int>(NP->Layer, Sums.size() - 1))];
    ++S.Nodes;
    if (!Info.Cost.HasRule)
      continue;
    S.Flops += Info.Cost.Flops;
    S.BackwardFlops += Info.Cost.BackwardFlops;
    if (!Info.Cost.FusedInto && Info.Cost.Unit != ComputeUnit::None)
      ++S.Kernels;
    if (!Info.Cost.FusedInto && !Info.Cost.FusedKernel.empty())
      ++S.Fused[Info.Cost.FusedKernel];
    auto It = Info.Times.find(Info.Class);
    if (It != Info.Times.end()) {
      S.Time += It->second.Seconds;
      S.BackwardTime += It->second.BackwardSeconds;
    }
  }
  for (unsigned L = 0; L < Layers.size(); ++L)
    Sums[L].Params = Layers[L].ParamCount;
  if (F == ReportFormat::JSON) {
    json::Array A;
    for (unsigned L = 0; L < Sums.size(); ++L) {
      json::Object O{{"layer", (int64_t)L},
                     {"nodes", (int64_t)Sums[L].Nodes},
                     {"flops", Sums[L].Flops},
                     {"backward_flops", Sums[L].BackwardFlops},
                     {"param_count", Sums[L].Params},
                     {"forward_s", Sums[L].Time},
                     {"backward_s", Sums[L].BackwardTime},
                     {"kernels", (int64_t)Sums[L].Kernels}};
      json::Object Fused;
      for (const auto &KV : Sums[L].Fused)
        Fused[KV.first] = (int64_t)KV.second;
      O["fused_kernels"] = std::move(Fused);
      if (L < Layers.size()) {
        O["kind"] = getLayerKindName(Layers[L].K);
        O["signature"] = formatv("{0:x16}", Layers[L].Signature).str();
      }
      A.push_back(std::move(O));
    }
    printTotalsJSON(OS, T, Costs, "layers", std::move(A));
    return;
  }
  OS << "# layer costs at the bound batch, on each node's class (placed; "
        "before placement, the fastest)\n";
  for (unsigned L = 0; L < Sums.size(); ++L) {
    const LayerSum &S = Sums[L];
    OS << "layer " << L;
    if (L < Layers.size())
      OS << ' ' << getLayerKindName(Layers[L].K);
    OS << " nodes=" << S.Nodes << " params=" << fmtCount(S.Params)
       << " flops=" << fmtCount(S.Flops)
       << " backward_flops=" << fmtCount(S.BackwardFlops)
       << " forward=" << formatDuration(Seconds(S.Time))
       << " backward=" << formatDuration(Seconds(S.BackwardTime))
       << " kernels=" << S.Kernels;
    for (const auto &KV : S.Fused)
      OS << ' ' << KV.first << '=' << KV.second;
    OS << "\n";
  }
  printSummaryLine(OS, G, T);
}

/// The offload of stage \p SC, placed as \p Tiers say (Cost/Offload.h), as
/// JSON.
static json::Object offloadJSON(const StageCost &SC,
                                const OffloadTiers &Tiers) {
  const OffloadCost &O = SC.Offload;
  json::Array Terms;
  for (const OffloadTerm &T : getOffloadTerms(SC.OffloadIn, Tiers))
    Terms.push_back(json::Object{{"name", T.Name},
                                 {"tier", getMemoryTierName(T.Tier)},
                                 {"bytes", T.Bytes},
                                 {"s", T.Seconds}});
  return json::Object{{"host_bytes", O.HostBytes},
                      {"ssd_bytes", O.SSDBytes},
                      {"stream_host_bytes_per_microbatch", O.StreamHostBytes},
                      {"stream_ssd_bytes_per_microbatch", O.StreamSSDBytes},
                      {"stream_per_microbatch_s", O.StreamS},
                      {"exposed_per_microbatch_s", O.ExposedPerMicroBatchS},
                      {"optimizer_host_bytes", O.TailHostBytes},
                      {"optimizer_ssd_bytes", O.TailSSDBytes},
                      {"host_optimizer_s", O.HostOptimizerS},
                      {"optimizer_phase_s", O.TailS},
                      {"terms", std::move(Terms)}};
}

/// The offload lines of stage \p SC, placed as \p Tiers say, in the text
/// report.
static void printOffloadLines(const StageCost &SC, const OffloadTiers &Tiers,
                              raw_ostream &OS) {
  const OffloadCost &O = SC.Offload;
  OS << "  offload: host " << formatBytes(Bytes(O.HostBytes)) << ", ssd "
     << formatBytes(Bytes(O.SSDBytes)) << "; per micro-batch host "
     << formatBytes(Bytes(O.StreamHostBytes)) << ", ssd "
     << formatBytes(Bytes(O.StreamSSDBytes)) << " in "
     << formatDuration(Seconds(O.StreamS)) << " (exposed "
     << formatDuration(Seconds(O.ExposedPerMicroBatchS))
     << "); optimizer phase host " << formatBytes(Bytes(O.TailHostBytes))
     << ", ssd " << formatBytes(Bytes(O.TailSSDBytes)) << ", host cpu "
     << formatDuration(Seconds(O.HostOptimizerS)) << "\n";
  SmallVector<OffloadTerm, 8> Terms = getOffloadTerms(SC.OffloadIn, Tiers);
  if (!Terms.empty())
    OS << "  offload binds: " << Terms.front().Name << ", "
       << formatBytes(Bytes(Terms.front().Bytes)) << " per step in "
       << formatDuration(Seconds(Terms.front().Seconds)) << "\n";
}

void printStageCosts(const Graph &G, const NodeCostMap &Costs,
                     const PlanCost &PC, ReportFormat F, raw_ostream &OS) {
  Totals T = computeTotals(G, Costs);
  const ParallelPlan &P = PC.Plan;
  if (F == ReportFormat::JSON) {
    json::Array Stages;
    for (unsigned S = 0; S < PC.Stages.size(); ++S) {
      const StageCost &SC = PC.Stages[S];
      json::Array Layers;
      for (auto [First, End] : getStageLayerRuns(PC, S))
        for (unsigned L = First; L < End; ++L)
          Layers.push_back((int64_t)L);
      const MemoryBreakdown &M = SC.Memory;
      Stages.push_back(json::Object{
          {"stage", (int64_t)S},
          {"layers", std::move(Layers)},
          {"compute_s", SC.ComputeS},
          {"comm_exposed_s", SC.CommExposedS},
          {"bubble_s", SC.BubbleS},
          {"memory_bytes", SC.MemoryBytes},
          {"forward_per_microbatch_s", SC.ForwardS},
          {"backward_per_microbatch_s", SC.BackwardS},
          {"tp_comm_per_microbatch_s", SC.TPCommS},
          {"ep_comm_per_microbatch_s", SC.EPCommS},
          {"p2p_per_microbatch_s", SC.P2PS},
          {"dp_sync_s", SC.DPSyncS},
          {"dp_exposed_s", SC.DPExposedS},
          {"overlap_forward_s", SC.OverlapFwdS},
          {"overlap_backward_s", SC.OverlapBwdS},
          {"optimizer_s", SC.OptimizerS},
          {"memory", json::Object{{"weights", M.Weights},
                                  {"gradients", M.Gradients},
                                  {"optimizer_states", M.OptimizerStates},
                                  {"activations", M.Activations},
                                  {"kv_cache", M.KVCache},
                                  {"comm_buffers", M.CommBuffers}}}});
      if (P.Offload.any())
        Stages.back().getAsObject()->try_emplace("offload",
                                                 offloadJSON(SC, P.Offload));
    }
    // The plan as every JSON writes it (writePlanJSON), with the layers of
    // each stage as costed.
    std::vector<unsigned> StageLayers;
    for (const StageCost &SC : PC.Stages)
      StageLayers.push_back(SC.NumLayers);
    json::Object Root{{"plan", getPlanJSON(P, StageLayers)},
                      {"step_time_s", PC.StepTimeS},
                      {PC.getThroughputKey(),
                       PC.FitsMemory ? json::Value(PC.Throughput) : nullptr},
                      {"mfu", PC.FitsMemory ? json::Value(PC.MFU) : nullptr},
                      {"bubble_fraction", PC.BubbleFraction},
                      {"max_memory_bytes", PC.MaxMemoryBytes},
                      {"hbm_bytes", PC.HBMBytes},
                      {"host_bytes", PC.MaxHostBytes},
                      {"ssd_bytes", PC.MaxSSDBytes},
                      {"fits_memory", PC.FitsMemory},
                      {"moe_imbalance", PC.MoEImbalance},
                      {"stages", std::move(Stages)},
                      {"nodes_without_cost_rule", noRuleJSON(T, Costs)},
                      {"uncosted", uncostedJSON(T.U)}};
    if (!PC.Embeddings.empty())
      Root["embedding_tables"] = embeddingCostToJSON(PC.Embeddings);
    OS << formatv("{0:2}", json::Value(std::move(Root))) << "\n";
    return;
  }
  OS << "plan: " << P.str() << "\n";
  if (PC.MoEImbalance != 1)
    OS << "moe: load imbalance " << format("%.3g", PC.MoEImbalance)
       << " on the most loaded ep rank (its expert compute and all-to-all)\n";
  for (unsigned S = 0; S < PC.Stages.size(); ++S) {
    const StageCost &SC = PC.Stages[S];
    OS << "stage " << S << ": layers " << getStageLayersText(PC, S)
       << " compute " << formatDuration(Seconds(SC.ComputeS))
       << " comm_exposed " << formatDuration(Seconds(SC.CommExposedS))
       << " bubble " << formatDuration(Seconds(SC.BubbleS)) << " memory "
       << formatBytes(Bytes(SC.MemoryBytes)) << " / "
       << formatBytes(Bytes(PC.HBMBytes)) << "\n";
    const MemoryBreakdown &M = SC.Memory;
    OS << "  memory: weights " << formatBytes(Bytes(M.Weights))
       << ", gradients " << formatBytes(Bytes(M.Gradients)) << ", optimizer "
       << formatBytes(Bytes(M.OptimizerStates)) << ", activations "
       << formatBytes(Bytes(M.Activations)) << ", kv cache "
       << formatBytes(Bytes(M.KVCache)) << ", buffers "
       << formatBytes(Bytes(M.CommBuffers)) << " (of the usable HBM)\n";
    OS << "  per micro-batch: forward " << formatDuration(Seconds(SC.ForwardS))
       << ", backward " << formatDuration(Seconds(SC.BackwardS)) << ", tp comm "
       << formatDuration(Seconds(SC.TPCommS))
       << (P.EP > 1 ? ", ep comm " + formatDuration(Seconds(SC.EPCommS))
                    : std::string())
       << (P.CP > 1
               ? ", cp comm " + formatDuration(Seconds(SC.CPCommS)) +
                     " exposed of " + formatDuration(Seconds(SC.CPCommTotalS))
               : std::string())
       << ", p2p " << formatDuration(Seconds(SC.P2PS)) << "; dp sync "
       << formatDuration(Seconds(SC.DPSyncS)) << " (exposed "
       << formatDuration(Seconds(SC.DPExposedS)) << "), optimizer "
       << formatDuration(Seconds(SC.OptimizerS)) << "\n";
    if (P.Offload.any())
      printOffloadLines(SC, P.Offload, OS);
    if (SC.Memory.Embeddings + SC.EmbHostBytes + SC.EmbSSDBytes > 0)
      printEmbeddingCost(PC.Embeddings, OS);
    // The overlaps (Cost/Overlap.h), when they change anything: hidden TP
    // collectives, held compute, or sends waited for.
    if (P.TPOverlap || !P.DPOverlap || !P.PPOverlap || SC.OverlapFwdS != 0 ||
        SC.OverlapBwdS != 0)
      OS << "  overlap: tp " << (P.TPOverlap ? "on" : "off") << ", dp "
         << (P.DPOverlap ? "on" : "off") << ", pp "
         << (P.PPOverlap ? "on" : "off") << "; per micro-batch forward "
         << (SC.OverlapFwdS < 0 ? "-" : "+")
         << formatDuration(Seconds(std::abs(SC.OverlapFwdS))) << ", backward "
         << (SC.OverlapBwdS < 0 ? "-" : "+")
         << formatDuration(Seconds(std::abs(SC.OverlapBwdS))) << " (tp "
         << (SC.TPOverlapS < 0 ? "-" : "+")
         << formatDuration(Seconds(std::abs(SC.TPOverlapS))) << ")\n";
  }
  // A plan that does not fit has no throughput or MFU to speak of: the
  // numbers are printed to show how far off it is, not as a prediction.
  OS << "step: " << formatDuration(Seconds(PC.StepTimeS)) << ", "
     << PC.getThroughputUnit() << " ";
  if (PC.FitsMemory)
    OS << format("%.0f", PC.Throughput) << ", MFU " << format("%.3f", PC.MFU);
  else
    OS << "-, MFU -";
  OS << ", bubble " << format("%.3f", PC.BubbleFraction) << ", memory "
     << formatBytes(Bytes(PC.MaxMemoryBytes)) << " of "
     << formatBytes(Bytes(PC.HBMBytes));
  if (P.Offload.any())
    OS << ", host " << formatBytes(Bytes(PC.MaxHostBytes)) << " of "
       << formatBytes(Bytes(PC.HostCapacity)) << ", ssd "
       << formatBytes(Bytes(PC.MaxSSDBytes)) << " of "
       << formatBytes(Bytes(PC.SSDCapacity));
  OS << (PC.FitsMemory ? "" : " (DOES NOT FIT)") << "\n";
  printSummaryLine(OS, G, T);
}

} // namespace loom
