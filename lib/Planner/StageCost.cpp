//===- StageCost.cpp - One pipeline stage's cost --------------------------===//
//
// The steps of PlanEvaluator::evaluateStagesInto: the plan's legality and
// context, then per stage its layers' compute and collectives, sharded
// embedding tables, ZeRO-3 gathers, pipeline sends and overlaps, memory, DP
// gradient sync, optimizer step and offload.
//
//===----------------------------------------------------------------------===//
#include "PlanCostImpl.h"
#include "loom/Cost/Collectives.h"
#include "loom/Cost/Overlap.h"
#include "loom/Plan/StageSplit.h"
#include "loom/Planner/ContextParallel.h"
#include "loom/Planner/OffloadCost.h"
#include "loom/Shard/ExpertRules.h"
#include <algorithm>

using namespace llvm;

namespace loom {

Error PlanEvaluator::Impl::checkPlan(const ParallelPlan &P) const {
  if (P.EP > 1) {
    if (Experts.empty())
      return createStringError(inconvertibleErrorCode(),
                               "ep=%u: the model has no experts (no stacked "
                               "[E, d, f] expert weights and no unrolled "
                               "expert branches)",
                               P.EP);
    for (const ExpertGroup &EG : Experts)
      if (!isExpertSplitLegal(EG.NumExperts, P.EP))
        return createStringError(
            inconvertibleErrorCode(),
            "ep=%u does not divide the %u experts of layer %u", P.EP,
            EG.NumExperts, EG.Layer);
    if (P.DP % P.EP)
      return createStringError(inconvertibleErrorCode(),
                               "ep=%u does not divide dp=%u", P.EP, P.DP);
  }
  std::string Why = Outer.getCPIllegalReason(P);
  if (!Why.empty())
    return createStringError(inconvertibleErrorCode(), Why.c_str());
  if (Error E = checkOverlapHardware(P.TPOverlap && P.TP > 1, HW))
    return E;
  return checkOffloadHardware(P.Offload, HW, Opts.Train);
}

PlanCost PlanEvaluator::Impl::startPlan(const ParallelPlan &P) const {
  PlanCost R;
  R.Plan = P;
  if (P.EP > 1 &&
      any_of(Experts, [](const ExpertGroup &EG) { return EG.isStacked(); }))
    R.MoEImbalance = Opts.MoEImbalance;
  const MemoryLevel *HBM = HW.getMemory("hbm");
  R.HBMBytes = HBM ? HBM->getUsableCapacity().value() : 0;
  if (const MemoryLevel *Host = HW.getMemory("host"))
    R.HostCapacity = Host->getUsableCapacity().value();
  if (const MemoryLevel *SSD = HW.getMemory("ssd"))
    R.SSDCapacity = SSD->getUsableCapacity().value();
  return R;
}

/// The plan-wide values every stage's costing reads.
const PlanEvaluator::Impl::PlanGroups &
PlanEvaluator::Impl::getPlanGroups(const ParallelPlan &P) const {
  auto Key = std::make_tuple(P.TP, P.CP, P.getCPUlyssesSize(), P.EP, P.DP, P.PP,
                             getAxisOrderIndex(P.Order));
  auto It = GroupsOf.find(Key);
  if (It != GroupsOf.end())
    return It->second;
  // Where each group lands follows the plan's axis order (ParallelPlan.h).
  PlanGroups Gs{
      Outer.getGroupShape(P, "tp"),     Outer.getGroupShape(P, "dp"),
      Outer.getGroupShape(P, "ep"),     Outer.getGroupShape(P, "dp_ep"),
      Outer.getGroupShape(P, "pp"),     Outer.getGroupShape(P, "cp_ulysses"),
      Outer.getGroupShape(P, "cp_ring")};
  return GroupsOf.try_emplace(Key, std::move(Gs)).first->second;
}

PlanContext PlanEvaluator::Impl::makePlanContext(const ParallelPlan &P) const {
  int64_t Batch = Opts.Batch;
  const PlanGroups &Gs = getPlanGroups(P);
  PlanContext C{P,
                P.TP,
                P.EP,
                Gs.TPG,
                Gs.DPG,
                Gs.EPG,
                Gs.DPEPG,
                Gs.PPPair,
                P.getGradBytes(),
                P.SP ? (double)P.TP : 1.0,
                (double)P.MicroBatchSize / Batch / P.CP,
                P.CP,
                Gs.CPUlyssesG,
                Gs.CPRingG};
  C.DPCP = P.DP * P.CP;
  if (const DeviceClass *AC = HW.getClass("aicore"))
    if (AC->Overlap) {
      C.OvTP = AC->Overlap->TP.getValueOr(0);
      C.OvDP = AC->Overlap->DP.getValueOr(0);
      C.OvPP = AC->Overlap->PP.getValueOr(0);
    }
  C.HBM = HW.getMemory("hbm");
  return C;
}

double PlanEvaluator::Impl::costEPComms(const LayerFacts &F,
                                        const LayerSplit &LS,
                                        const PlanContext &C) const {
  // Stacked, routed experts: the most loaded rank receives and returns
  // MoEImbalance times the mean; a dispatcher that sends a token once per
  // destination rank (DeepEP) moves getEPRankCopies of its k expert copies
  // there, and its combine sums a rank's k outputs before sending them
  // back.
  double A2AScale = 1;
  for (const EPTraffic &X : F.EP)
    if (X.Stacked) {
      A2AScale = Opts.MoEImbalance;
      if (Opts.EPDispatchPerRank && X.TopK > 1)
        A2AScale *= getEPRankCopies(X.NumExperts, X.TopK, C.EP) / X.TopK;
      break;
    }
  const HardwareModel &AH = Opts.EPDispatchEfficiency > 0 ? EPHW : HW;
  double Cm = 0;
  forEachEPComm(LS.EPFwd, C.ActScale, C.EP,
                [&](const rulesplit::EPComm &, CollectiveKind K, double B) {
                  bool A2A = K == CollectiveKind::AllToAll;
                  Cm += collectiveTime(K, A2A ? B * A2AScale : B, C.EPG,
                                       A2A ? AH : HW)
                            .Seconds;
                });
  return Cm;
}

void PlanEvaluator::Impl::sumStageLayers(const PlanContext &C, StageCost &SC,
                                         StageSums &S) const {
  const ParallelPlan &P = C.P;
  unsigned TP = C.TP, EP = C.EP;
  // How the plan's tp, sp and ep split each layer (the rule table).
  bool AllTables = P.Emb != EmbeddingMode::Auto;
  const ConfigSplit &CS = getConfig(TP, P.SP, EP, AllTables, P.MicroBatchSize);
  // The last EP exchange costed: a stage's MoE layers are mostly alike,
  // and the collective model is the same function of the same bytes.
  struct {
    const LayerSplit *LS = nullptr;
    double Cm = 0;
  } LastEP;
  // The layer times looked up so far, by representative (layerTimes'
  // key at this plan's tp, mb, sp, ep): a stage repeats a few blocks, and
  // the map lookup per layer was a tenth of the search.
  struct Seen {
    unsigned Rep;
    bool NoEP;
    const LayerTimes *T;
  };
  SmallVector<Seen, 8> SeenTimes;
  // Values other layers read too, converted by this stage's device so far
  // (sharedRepeats), and their gradients' collectives.
  SharedConversions Converted, ConvertedBack;
  for (const auto &Run : S.Runs)
    for (unsigned L = Run.first; L < Run.second; ++L) {
      const LayerFacts &F = LF[L];
      const LayerSplit &LS = CS.get(L);
      unsigned Rep = CS.RepOf[L];
      bool NoEP = F.EP.empty();
      auto SeenIt = llvm::find_if(SeenTimes, [&](const Seen &X) {
        return X.Rep == Rep && X.NoEP == NoEP;
      });
      const LayerTimes *Found = SeenIt != SeenTimes.end() ? SeenIt->T : nullptr;
      if (!Found) {
        Found = &layerTimes(L, TP, P.MicroBatchSize, P.SP, EP, AllTables, P.CP);
        if (SeenTimes.size() < 8) // layers that do not repeat: the map
          SeenTimes.push_back({Rep, NoEP, Found});
      }
      const LayerTimes &T = *Found;
      if (P.CP > 1 && F.KVBytes > 0) {
        // The sequence split's attention traffic, per rank: K/V and the
        // output at the tp and cp split (ActScale has the cp).
        CPLayerInputs CI;
        CI.KVBytes = F.KVBytes / TP * C.ActScale;
        if (P.getCPUlyssesSize() > 1)
          CI.KVBytes = getUlyssesKVBytes(P.getCPUlyssesSize(), TP, F.QHeads,
                                         F.KVHeads, CI.KVBytes);
        CI.QOBytes = F.QOBytes / TP * C.ActScale;
        CI.AttnFwdS = T.CoreFwd;
        CI.AttnBwdS = T.CoreBwd;
        CI.Train = Opts.Train;
        S.CP += costContextParallelLayer(P, CI, C.CPUlyssesG, C.CPRingG, HW);
      }
      SC.ForwardS += T.Fwd;
      SC.GemmFwdS += T.GemmFwd;
      SC.GemmBwdS += T.GemmBwd;
      double Recompute = P.RC == Recompute::Full        ? T.Fwd
                         : P.RC == Recompute::Selective ? T.AttnFwd
                                                        : 0;
      SC.BackwardS += T.Bwd + (Opts.Train ? Recompute : 0);
      S.Params += LS.ParamsSplit / TP + LS.ParamsWhole;
      if (L == SC.FirstLayer)
        S.FirstLayerMaxParam =
            std::max(LS.MaxParamSplit / TP, LS.MaxParamWhole);
      S.ExpertParams += (LS.ExpertSplit / TP + LS.ExpertWhole) / EP;
      // EP: per micro-batch, what the ep rules communicate where values
      // cross into or out of expert work (getExpertCrossing: the tokens
      // and routing values gathered into unrolled branches, the combined
      // sum reduce-scattered back; stacked work's all-to-all dispatch and
      // combine), in forward and as much again in backward (their duals:
      // a gather's is a reduce-scatter of the same bytes).
      if (EP > 1 && !F.EP.empty()) {
        if (LastEP.LS != &LS) {
          LastEP.LS = &LS;
          LastEP.Cm = costEPComms(F, LS, C);
        }
        S.EPFwd += LastEP.Cm;
        if (Opts.Train)
          S.EPBwd += LastEP.Cm;
      }
      // Activations per rank: the split ones 1/tp (under sp the token dim
      // too, where the rules keep it split).
      double LayerAct;
      double Saved = LS.SavedSplit / TP + LS.SavedWhole;
      S.MaxLayerAct = std::max(S.MaxLayerAct, Saved * C.ActScale);
      if (P.RC == Recompute::Full)
        LayerAct = LS.InputSplit / TP + LS.InputWhole;
      else
        LayerAct = Saved - (P.RC == Recompute::Selective
                                ? LS.SavedAttnSplit / TP + LS.SavedAttnWhole
                                : 0.0);
      S.Act += std::max(0.0, LayerAct) * C.ActScale;
      S.KV += F.KVBytes / TP * C.ActScale;
      S.MaxLayerLive = std::max(
          S.MaxLayerLive, (LS.LiveSplit / TP + LS.LiveWhole) * C.ActScale);
      double LayerTPFwd = T.CommFwd, LayerTPBwd = T.CommBwd;
      double LayerBwdBytes = T.BwdBytes;
      if (LS.HasShared && TP > 1) {
        LayerTPFwd -=
            sharedRepeats(L, LS.Fwd, TP, C.ActScale, EP, Converted).first;
        if (Opts.Train) {
          auto [Time, Bytes] =
              sharedRepeats(L, LS.Bwd, TP, C.ActScale, EP, ConvertedBack);
          LayerTPBwd -= Time;
          LayerBwdBytes -= Bytes;
        }
      }
      S.TPFwd += LayerTPFwd;
      S.TPBwd += LayerTPBwd;
      S.TPBwdBytes += LayerBwdBytes;
      if (P.TPOverlap && P.SP && TP > 1) {
        // Each collective is fused with one linear layer's GEMM and hides
        // behind that GEMM only: Transformer Engine's userbuffers overlap
        // one GEMM per linear (qkv/proj/fc1/fc2 fprop, dgrad and wgrad),
        // and CANN's MC2 ops wrap one matmul each (AllGatherMatmul,
        // MatmulReduceScatter). With sp every TP collective of a layer
        // moves the same [s*b/tp, h] hidden states, one per linear in the
        // forward (all-gather into a column linear, reduce-scatter out of a
        // row linear), so the layer's collective time splits equally over
        // its linears; the backward's likewise. A linear shorter than its
        // collective leaves the rest exposed (the attention output
        // projection, an h x h/tp GEMM, against a full hidden-state
        // reduce-scatter), which the stage-wide max(C, W / (1 - s)) hid
        // behind the MLP's GEMMs. A layer with collectives but no linear
        // (a vocab-parallel embedding's all-reduce) hides nothing.
        size_t NLin = T.LinearFwd.size();
        if (NLin == 0) {
          S.TPPairedFwd += LayerTPFwd;
          S.TPPairedBwd += LayerTPBwd;
        } else {
          for (size_t I = 0; I < NLin; ++I) {
            double Bwd =
                T.LinearBwd[I] +
                (Opts.Train && P.RC == Recompute::Full ? T.LinearFwd[I] : 0.0);
            S.TPPairedFwd +=
                overlapExposed(T.LinearFwd[I], LayerTPFwd / NLin, C.OvTP, true);
            if (Opts.Train)
              S.TPPairedBwd +=
                  overlapExposed(Bwd, LayerTPBwd / NLin, C.OvTP, true);
          }
        }
      }
    }
}

void PlanEvaluator::Impl::takeShardedTables(const PlanContext &C,
                                            const StageCost &SC,
                                            StageSums &S) const {
  for (unsigned T = 0; T < Tables.size(); ++T) {
    unsigned L = TableLayer[T];
    if (SSDOnlyParams.count(Tables[T].Weight) || !S.holdsLayer(L) ||
        (C.P.Emb == EmbeddingMode::Auto && !TableMustShard[T]))
      continue;
    // Its split as the rules decide it at the plan's tp (vocab-parallel).
    bool TPSplit = getConfig(C.TP, C.P.SP, C.EP, C.P.Emb != EmbeddingMode::Auto)
                       .get(L)
                       .ParamSplit[TableParamIndex[T]];
    double PerRank = Tables[T].getParams() / (TPSplit ? C.TP : 1);
    S.Params -= PerRank;
    // Its gradients are the shard's own, outside the DP sync: not the
    // tensor the last bucket holds (dpTailS).
    if (L == SC.FirstLayer && PerRank >= S.FirstLayerMaxParam)
      S.FirstLayerMaxParam = 0;
    S.Tables.push_back(Tables[T]);
  }
}

void PlanEvaluator::Impl::addZero3Gathers(const PlanContext &C,
                                          StageSums &S) const {
  const ParallelPlan &P = C.P;
  if (P.ZeroStage >= 3 && C.DPCP > 1) {
    double Gather =
        collectiveTime(CollectiveKind::AllGather,
                       S.Params * Opts.WeightBytesPerParam, C.DPG, HW)
            .Seconds;
    if (S.ExpertParams > 0 && P.DP / C.EP > 1)
      Gather +=
          collectiveTime(CollectiveKind::AllGather,
                         S.ExpertParams * Opts.WeightBytesPerParam, C.DPEPG, HW)
              .Seconds;
    S.TPFwd += Gather;
    if (Opts.Train)
      S.TPBwd += Gather;
  }
}

void PlanEvaluator::Impl::costStageComm(const PlanContext &C, unsigned Stage,
                                        StageCost &SC, StageSums &S) const {
  const ParallelPlan &P = C.P;
  SC.TPCommS = S.TPFwd + S.TPBwd;
  SC.EPCommS = S.EPFwd + S.EPBwd;
  SC.CPCommS = S.CP.FwdExposedS + S.CP.BwdExposedS;
  SC.CPCommTotalS = S.CP.FwdS + S.CP.BwdS;
  SC.ForwardCommS = S.TPFwd + S.EPFwd + S.CP.FwdExposedS;
  SC.BackwardCommS = S.TPBwd + S.EPBwd + S.CP.BwdExposedS;
  SC.ParamCount = S.Params + S.ExpertParams;
  SC.ExpertParamCount = S.ExpertParams;
  // Pipeline transfers: the boundary activations, split across TP ranks
  // (Megatron's scatter/gather optimization).
  double SendBytes =
      Stage + 1 < P.PP ? BoundaryBytes[S.Runs.empty() ? SC.FirstLayer
                                                      : S.Runs.front().second] *
                             C.ActScale / C.TP
                       : 0;
  S.SendTime = SendBytes > 0 ? collectiveTime(CollectiveKind::SendRecv,
                                              SendBytes, C.PPPair, HW)
                                   .Seconds
                             : 0;
  // Interleaved 1F1B (vpp = V > 1): each device runs V chunks, and a
  // micro-batch leaves every chunk but the very last virtual stage, so
  // each stage sends V times per micro-batch each way (the last stage
  // V - 1 times, over the wrap to stage 0; stage 0 V - 1 gradients
  // back): "the amount of communication also increases by v"
  // (Narayanan et al. 2021, arXiv 2104.04473, sec. 2.2.2). The chunk
  // boundaries are layer boundaries like the stage's own; the last
  // stage's wrap carries what its first layer receives.
  unsigned V = std::max(1u, P.VirtualStages);
  if (V > 1 && P.PP > 1) {
    double ChunkBytes = Stage + 1 < P.PP
                            ? SendBytes
                            : BoundaryBytes[SC.FirstLayer] * C.ActScale / C.TP;
    S.ChunkSendTime = ChunkBytes > 0 ? collectiveTime(CollectiveKind::SendRecv,
                                                      ChunkBytes, C.PPPair, HW)
                                           .Seconds
                                     : 0;
  }
  SC.P2PS = std::max(S.SendTime, S.ChunkSendTime) * (Opts.Train ? 2 : 1);
}

void PlanEvaluator::Impl::applyOverlaps(const PlanContext &C, StageCost &SC,
                                        const StageSums &S,
                                        double PrevSend) const {
  const ParallelPlan &P = C.P;
  if (P.TPOverlap && C.TP > 1) {
    // The TP all-reduces (reduce-scatters and all-gathers with sp) beside
    // the sharded GEMMs; full recompute repeats the forward's GEMMs in
    // the backward, beside its all-reduces as well.
    double BwdGemm =
        SC.GemmBwdS +
        (Opts.Train && P.RC == Recompute::Full ? SC.GemmFwdS : 0.0);
    // With sp, per linear (sumStageLayers); without (Megatron's
    // --tp-comm-overlap requires sp), the stage's all-reduces against
    // all its GEMMs.
    SC.OverlapFwdS +=
        (P.SP ? S.TPPairedFwd
              : overlapExposed(SC.GemmFwdS, S.TPActFwd, C.OvTP, true)) -
        S.TPActFwd;
    if (Opts.Train)
      SC.OverlapBwdS +=
          (P.SP ? S.TPPairedBwd
                : overlapExposed(BwdGemm, S.TPActBwd, C.OvTP, true)) -
          S.TPActBwd;
    SC.TPOverlapS = SC.OverlapFwdS + SC.OverlapBwdS;
  }
  // Per micro-batch, all chunks together: the stage's own boundary send
  // (its input gradient back) plus, interleaved, V - 1 chunk sends each
  // way (sumStageLayers).
  double ChunkSends = (std::max(1u, P.VirtualStages) - 1) * S.ChunkSendTime;
  double FwdSends = S.SendTime + ChunkSends, BwdSends = PrevSend + ChunkSends;
  if (P.PPOverlap) {
    // The send runs beside the stage's next compute, holding its share
    // while it runs: s * T. The receiver waits for it (the pipeline's
    // transfer delay); as before these were choices, a send does not
    // hold the link against the next one.
    SC.SendLagS = std::max(S.SendTime, S.ChunkSendTime);
    SC.OverlapFwdS += C.OvPP * FwdSends;
    if (Opts.Train)
      SC.OverlapBwdS += C.OvPP * BwdSends;
  } else {
    // Waited for: the sender's forward ends when its activations are
    // sent, its backward when its input gradient is; the receiver has
    // them then.
    SC.OverlapFwdS += FwdSends;
    if (Opts.Train)
      SC.OverlapBwdS += BwdSends;
  }
  SC.PipeSendS = SC.SendLagS;
  SC.PipeForwardS =
      SC.ForwardS + S.TPFwd + S.EPFwd + S.CP.FwdExposedS + SC.OverlapFwdS;
  SC.PipeBackwardS =
      SC.BackwardS + S.TPBwd + S.EPBwd + S.CP.BwdExposedS + SC.OverlapBwdS;
}

StageMemoryInputs
PlanEvaluator::Impl::costStageMemory(const PlanContext &C, unsigned Stage,
                                     StageCost &SC, const StageSums &S) const {
  const ParallelPlan &P = C.P;
  StageMemoryInputs MI;
  MI.Train = Opts.Train;
  MI.ParamCount = S.Params;
  MI.ActivationBytesPerMicroBatch = Opts.Train ? S.Act : 0;
  MI.InFlightMicroBatches =
      inFlightMicroBatches(Stage, P.PP, P.NumMicroBatches, P.VirtualStages);
  // Full recompute rebuilds one layer's activations at a time during
  // backward: the largest layer's, alive once.
  MI.ActivationWorkspaceBytes =
      Opts.Train && P.RC == Recompute::Full ? S.MaxLayerAct : 0;
  // Inference keeps nothing between layers but the KV cache: what is
  // alive at once in the stage's largest layer, for the one micro-batch
  // the stage runs at a time.
  if (!Opts.Train)
    MI.ActivationWorkspaceBytes = S.MaxLayerLive;
  MI.DP = C.DPCP; // ZeRO partitions over dp x cp (Megatron-Core)
  MI.ZeroStage = P.ZeroStage;
  MI.WeightBytesPerParam = Opts.WeightBytesPerParam;
  MI.GradBytesPerParam = C.GradWidth;
  MI.OptimizerBytesPerParam = Opts.OptimizerBytesPerParam;
  bool AnyComm = C.TP > 1 || C.DPCP > 1 || P.PP > 1;
  MI.CommBufferBytes = AnyComm ? Opts.CommBufferBytes : 0;
  // Reserved HBM is already outside HBMBytes (capacity - reserved), the
  // budget the stage is compared with: not counted again here.
  MI.ReservedBytes = 0;
  if (!Opts.Train)
    MI.KVCacheBytes = S.KV * P.NumMicroBatches;
  SC.Memory = estimateStageMemory(MI);
  if (S.ExpertParams > 0) {
    // Expert weights, gradients and optimizer states: 1/ep of the
    // experts, ZeRO-partitioned over the dp/ep ranks holding the same.
    StageMemoryInputs XI;
    XI.Train = Opts.Train;
    XI.ParamCount = S.ExpertParams;
    XI.DP = P.DP / C.EP * C.CP;
    XI.ZeroStage = P.ZeroStage;
    XI.WeightBytesPerParam = Opts.WeightBytesPerParam;
    XI.GradBytesPerParam = C.GradWidth;
    XI.OptimizerBytesPerParam = Opts.OptimizerBytesPerParam;
    XI.InFlightMicroBatches = 0;
    MemoryBreakdown XM = estimateStageMemory(XI);
    SC.Memory.Weights += XM.Weights;
    SC.Memory.Gradients += XM.Gradients;
    SC.Memory.OptimizerStates += XM.OptimizerStates;
  }
  SC.MemoryBytes = SC.Memory.total();
  return MI;
}

void PlanEvaluator::Impl::costDPSync(const PlanContext &C, StageCost &SC,
                                     const StageSums &S) const {
  const ParallelPlan &P = C.P;
  if (!Opts.Train || C.DPCP <= 1)
    return;
  double GradBytes = S.Params * C.GradWidth;
  CollectiveKind K = P.ZeroStage >= 1 ? CollectiveKind::ReduceScatter
                                      : CollectiveKind::AllReduce;
  // The last micro-batch's backward TP traffic runs alongside.
  auto Shares = shareBandwidth({K, CollectiveKind::AllReduce}, {C.DPG, C.TPG},
                               {GradBytes, C.TP > 1 ? S.TPBwdBytes : 0.0}, HW);
  SC.DPSyncS = collectiveTime(K, GradBytes, C.DPG, HW, Shares[0]).Seconds;
  if (P.ZeroStage >= 1) // Updated (bf16) parameters gathered back.
    SC.DPSyncS += collectiveTime(CollectiveKind::AllGather,
                                 S.Params * Opts.WeightBytesPerParam, C.DPG, HW)
                      .Seconds;
  // Expert gradients over dp_ep (the ranks holding the same experts),
  // after the rest.
  double ExpertGrad = S.ExpertParams * C.GradWidth;
  if (ExpertGrad > 0 && P.DP / C.EP * C.CP > 1) {
    SC.DPSyncS += collectiveTime(K, ExpertGrad, C.DPEPG, HW).Seconds;
    if (P.ZeroStage >= 1)
      SC.DPSyncS +=
          collectiveTime(CollectiveKind::AllGather,
                         S.ExpertParams * Opts.WeightBytesPerParam, C.DPEPG, HW)
              .Seconds;
  }
  // dp_overlap: beside the last micro-batch's backward, whose compute
  // the reduction's kernels share (loom/Cost/Overlap.h); off: after
  // it, exposed whole.
  SC.DPExposedS = overlapExposed(SC.BackwardS, SC.DPSyncS, C.OvDP, P.DPOverlap,
                                 OverlapHold::WhileRunning);
  if (P.DPOverlap)
    SC.DPExposedS =
        std::max(SC.DPExposedS, std::min(SC.DPSyncS, dpTailS(C, S, K)));
}

double PlanEvaluator::Impl::dpTailS(const PlanContext &C, const StageSums &S,
                                    CollectiveKind K) const {
  // What dp overlap cannot hide. Megatron-Core's DDP fills gradient
  // buckets in reverse parameter order and closes one once it holds
  // bucket_size = max(40M, 1M x dp) parameters (its default with
  // --overlap-grad-reduce, distributed_data_parallel.py), so the last
  // bucket holds the stage's first-read parameters, at least the first
  // layer's largest tensor (an embedding table, whole); their gradients
  // are ready when the backward ends, and the bucket's reduction runs
  // after it. With ZeRO (--overlap-param-gather) the same bucket's
  // parameter all-gather is the first the next forward waits for.
  const ParallelPlan &P = C.P;
  double Bucket = Opts.DDPBucketParams > 0 ? Opts.DDPBucketParams
                                           : std::max(40e6, 1e6 * C.DPCP);
  double Tail = std::min(S.Params, std::max(Bucket, S.FirstLayerMaxParam));
  double T = collectiveTime(K, Tail * C.GradWidth, C.DPG, HW).Seconds;
  if (P.ZeroStage >= 1)
    T += collectiveTime(CollectiveKind::AllGather,
                        Tail * Opts.WeightBytesPerParam, C.DPG, HW)
             .Seconds;
  return T;
}

void PlanEvaluator::Impl::costOptimizer(const PlanContext &C, StageCost &SC,
                                        const StageSums &S) const {
  const ParallelPlan &P = C.P;
  if (!Opts.Train || !C.HBM)
    return;
  // AdamW touches ~28 bytes per local parameter (fp32 master, m, v
  // read and written, the gradient in, bf16 weight out). The same for
  // either gradient precision: a bf16-reduced gradient is widened into
  // the fp32 update anyway, and the 2 bytes it saves are noise next to
  // the 24 of the states; plans that differ only in gradient precision
  // tie when the DP sync is hidden, and the tie goes to fp32.
  double Local = P.ZeroStage >= 1
                     ? S.Params / C.DPCP + S.ExpertParams / (P.DP / C.EP * C.CP)
                     : S.Params + S.ExpertParams;
  SC.OptimizerS = Local * 28 / C.HBM->Bandwidth.value();
}

void PlanEvaluator::Impl::costOffload(const PlanContext &C, StageCost &SC,
                                      const StageSums &S,
                                      const StageMemoryInputs &MI) const {
  // cost_models/memory/Offload.cpp
  const ParallelPlan &P = C.P;
  OffloadInputs &OI = SC.OffloadIn;
  OI.Train = Opts.Train;
  OI.ActivationBytesPerMicroBatch = MI.ActivationBytesPerMicroBatch;
  OI.InFlightMicroBatches = MI.InFlightMicroBatches;
  OI.ActivationWorkspaceBytes = MI.ActivationWorkspaceBytes;
  OI.UpdatedParams =
      P.ZeroStage >= 1
          ? S.Params / C.DPCP + S.ExpertParams / (P.DP / C.EP * C.CP)
          : S.Params + S.ExpertParams;
  OI.WeightBytesPerParam = MI.WeightBytesPerParam;
  OI.GradBytesPerParam = MI.GradBytesPerParam;
  OI.NumLayers = SC.NumLayers;
  OI.NumMicroBatches = P.NumMicroBatches;
  OI.ComputePerMicroBatchS = SC.ForwardS + SC.BackwardS;
  if (P.Offload.any())
    applyOffload(SC, OI, P.Offload, HW);
}

void PlanEvaluator::Impl::costStageEmbeddings(const PlanContext &C,
                                              StageCost &SC, StageSums &S,
                                              PlanCost &R) const {
  // lib/Planner/Embedding.cpp
  if (S.Tables.empty())
    return;
  const ParallelPlan &P = C.P;
  EmbeddingInputs EI;
  EI.Train = Opts.Train;
  EI.Mode = P.Emb;
  EI.Group = P.DP;
  EI.Shape = C.DPG;
  EI.MicroBatch = P.MicroBatchSize;
  EI.HBMFree = R.HBMBytes - SC.MemoryBytes;
  EI.HostFree = R.HostCapacity - SC.Offload.HostBytes;
  EI.SSDFree = R.SSDCapacity - SC.Offload.SSDBytes;
  EmbeddingCost E = planEmbeddings(S.Tables, EI, HW);
  SC.Memory.Embeddings = E.HBMBytes;
  SC.MemoryBytes = SC.Memory.total();
  SC.EmbHostBytes = E.HostBytes;
  SC.EmbSSDBytes = E.SSDBytes;
  SC.PipeForwardS += E.ForwardS;
  // The stage's work as schedule.json and the reports see it: lookups
  // with the compute, the exchange with the exposed communication.
  SC.ForwardS += E.LookupS;
  SC.ForwardCommS += E.ExchangeFwdS;
  if (Opts.Train) {
    SC.PipeBackwardS += E.BackwardS;
    SC.BackwardS += E.UpdateS;
    SC.BackwardCommS += E.ExchangeBwdS;
  }
  mergeEmbeddingCost(R.Embeddings, std::move(E));
}

StageCost
PlanEvaluator::Impl::costStage(const PlanContext &C, unsigned Stage,
                               ArrayRef<std::pair<unsigned, unsigned>> Runs,
                               double &PrevSend, PlanCost &R) const {
  StageCost SC;
  SC.FirstLayer = Runs.empty() ? 0 : Runs.front().first;
  for (const auto &Run : Runs)
    SC.NumLayers += Run.second - Run.first;
  StageSums S;
  S.Runs = Runs;
  sumStageLayers(C, SC, S);
  // Tables the plan shards (Embedding.h) leave the replicated parameters:
  // their shards are placed below, over the dp group.
  takeShardedTables(C, SC, S);
  S.TPActFwd = S.TPFwd;
  S.TPActBwd = S.TPBwd;
  addZero3Gathers(C, S);
  costStageComm(C, Stage, SC, S);
  // The plan's overlaps (loom/Cost/Overlap.h): what each adds to the
  // stage's forward and backward per micro-batch.
  applyOverlaps(C, SC, S, PrevSend);
  PrevSend = S.SendTime;
  StageMemoryInputs MI = costStageMemory(C, Stage, SC, S);
  costDPSync(C, SC, S);
  costOptimizer(C, SC, S);
  costOffload(C, SC, S, MI);
  costStageEmbeddings(C, SC, S, R);
  return SC;
}

Error PlanEvaluator::evaluateStagesInto(const ParallelPlan &P,
                                        PlanCost &R) const {
  const Impl &Im = *I;
  // The one split shard, the manifest and the exports read too: a stage
  // costs the layers of its chunks (StageSplit.h).
  Expected<std::vector<unsigned>> Chunks =
      getChunkLayers(P, getLayerEnds(Im.Layers));
  if (!Chunks)
    return Chunks.takeError();
  if (Error E = Im.checkPlan(P))
    return E;
  std::vector<StageCost> Stages = std::move(R.Stages);
  R = Im.startPlan(P);
  Stages.clear();
  R.Stages = std::move(Stages);
  R.ChunkLayers = std::move(*Chunks);
  PlanContext C = Im.makePlanContext(P);
  double PrevSend = 0;
  R.Stages.reserve(P.PP);
  SmallVector<unsigned, 64> Starts = getChunkStarts(R.ChunkLayers);
  for (unsigned S = 0; S < P.PP; ++S)
    R.Stages.push_back(
        Im.costStage(C, S, getStageLayerRuns(Starts, P.PP, S), PrevSend, R));
  // The simulation moves time, not memory: the stages' figures decide.
  setMemoryMaxima(R);
  R.ModelFlops = Im.ModelFlops;
  return Error::success();
}

} // namespace loom
