//===- PlanCost.cpp - Predicted cost of a plan, stage by stage ------------===//
//
// Per-node cost annotation, the plan evaluator's construction, group shapes,
// stage layers, its accessors and entry points, and the pipeline simulation
// that turns the stages' costs into a step time. The evaluator's internals
// are in PlanCostImpl.h; what it knows of each layer in LayerFacts.cpp, a
// layer's times in LayerTimes.cpp and a stage's costing in StageCost.cpp.
//
//===----------------------------------------------------------------------===//
#include "loom/Planner/PlanCost.h"
#include "PlanCostImpl.h"
#include "loom/Cost/Pipeline.h"
#include "loom/Plan/StageSplit.h"
#include "loom/Planner/ContextParallel.h"
#include "loom/Planner/OffloadCost.h"
#include <algorithm>
#include <cassert>
#include <cmath>

using namespace llvm;

namespace loom {

/// A MatMul/Gemm with a weight operand (a Linear layer).
static bool multipliesWeight(const Node &N) {
  StringRef Op = N.getOpType();
  return (Op == "MatMul" || Op == "Gemm") &&
         any_of(N.getInputs(), [](const Value *V) {
           return V && isWeightLike(V) && V->Type.getRank() >= 2;
         });
}

NodeCostMap annotateNodeCosts(const Graph &G, int64_t Opset,
                              const HardwareModel &HW,
                              const PrecisionRecipe *Recipe) {
  NodeCostMap Map;
  Map.reserve(G.getNumNodes());
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    NodeCostInfo &Info = Map[&N];
    Info.Cost = computeOpCost(N, Opset);
    if (Recipe && Info.Cost.Unit == ComputeUnit::Cube &&
        Info.Cost.Elem == Recipe->Storage)
      Recipe->applyToCube(Info.Cost, multipliesWeight(N));
    double Best = INFINITY;
    for (const auto &KV : HW.Device.Classes) {
      ClassTime T = estimateClassTime(N, Info.Cost, KV.first, HW);
      if (T.Supported && T.Seconds < Best) {
        Best = T.Seconds;
        Info.Class = KV.first;
      }
      Info.Times.emplace(KV.first, std::move(T));
    }
  }
  return Map;
}

PlanEvaluator::PlanEvaluator(const Graph &G, ArrayRef<LayerInfo> Layers,
                             const NodeCostMap &Costs, const HardwareModel &HW,
                             const EvaluatorOptions &Opts)
    : I(std::make_unique<Impl>(*this, G, Layers, Costs, HW, Opts)) {}

PlanEvaluator::~PlanEvaluator() = default;

void PlanEvaluator::setMicroBatchShapes(MicroBatchShapesFn F) {
  I->MBShapes = std::move(F);
  I->MBBytes.clear();
  I->Classified = false;
  I->FixedBytes.clear();
  I->FixedOf.clear();
  I->Configs.clear();
  I->Cache.clear();
}

const rulesplit::MicroBatchBytes *
PlanEvaluator::Impl::getMicroBatchBytes(unsigned MB) const {
  if (!MBShapes || MB == 0 || MB >= Opts.Batch)
    return nullptr;
  if (Classified) {
    if (FixedBytes.empty())
      return nullptr;
    rulesplit::MicroBatchBytes &B = FixedOf[MB];
    B = {&FixedBytes, (double)Opts.Batch / MB};
    return &B;
  }
  auto It = MBBytes.find(MB);
  if (It == MBBytes.end()) {
    std::shared_ptr<const StringMap<double>> Map = MBShapes(MB);
    rulesplit::MicroBatchBytes B{Map.get(), (double)Opts.Batch / MB};
    // The first graph built decides whether it is needed at all: every
    // value it shares with the bound graph either MB / batch of its bound
    // size or the same size.
    if (Map && MBBytes.empty()) {
      bool Classes = true;
      StringMap<double> Fixed;
      auto Check = [&](const Value *V) {
        auto W = Map->find(V->getName());
        if (!V || W == Map->end())
          return;
        double Bound = (double)V->Type.getSizeInBytes().getValueOr(0);
        if (W->second == Bound)
          Fixed[V->getName()] = Bound;
        else if (W->second * Opts.Batch != Bound * MB)
          Classes = false;
      };
      for (const Value *V : G.getInputs())
        Check(V);
      for (const auto &NP : G.getNodes())
        for (const Value *V : NP->getOutputs())
          if (V)
            Check(V);
      if (Classes) {
        Classified = true;
        FixedBytes = std::move(Fixed);
        return getMicroBatchBytes(MB);
      }
    }
    It = MBBytes.emplace(MB, std::make_pair(std::move(Map), B)).first;
  }
  return It->second.first ? &It->second.second : nullptr;
}

GroupShape PlanEvaluator::getGroupShape(
    ArrayRef<std::pair<unsigned, unsigned>> Axes) const {
  SmallVector<std::pair<unsigned, unsigned>, 3> Key;
  for (const auto &A : Axes)
    if (A.second > 1)
      Key.push_back(A);
  auto It = I->Shapes.find(Key);
  if (It != I->Shapes.end())
    return It->second;
  // The members, then per level the distinct indices they take there.
  std::vector<uint64_t> Members = {0};
  for (const auto &A : Key) {
    size_t N = Members.size();
    for (unsigned K = 1; K < A.second; ++K)
      for (size_t J = 0; J < N; ++J)
        Members.push_back(Members[J] + (uint64_t)K * A.first);
  }
  GroupShape S;
  uint64_t Inner = 1;
  std::vector<uint64_t> Idx;
  for (const TopologyLevel &L : I->HW.Topology) {
    Idx.clear();
    for (uint64_t M : Members)
      Idx.push_back((M / Inner) % std::max<uint64_t>(1, L.Size));
    std::sort(Idx.begin(), Idx.end());
    S.PerLevel.push_back(std::unique(Idx.begin(), Idx.end()) - Idx.begin());
    Inner *= std::max<uint64_t>(1, L.Size);
  }
  return I->Shapes[Key] = S;
}

GroupShape PlanEvaluator::getGroupShape(const ParallelPlan &P,
                                        StringRef Group) const {
  auto Axis = [&](MeshAxis A) {
    return std::make_pair(P.getAxisStride(A), P.getAxisSize(A));
  };
  if (Group == "tp")
    return getGroupShape({{1u, P.TP}});
  if (Group == "cp") // right outside tp (ParallelPlan.h)
    return getGroupShape({{P.TP, P.CP}});
  // Inside cp: the all-to-all over consecutive cp ranks, the ring over
  // every u-th (MindSpeed's hybrid groups; the whole cp group for a2a and
  // ring alone).
  if (Group == "cp_ulysses")
    return getGroupShape({{P.TP, P.getCPUlyssesSize()}});
  if (Group == "cp_ring")
    return getGroupShape({{P.TP * P.getCPUlyssesSize(), P.getCPRingSize()}});
  if (Group == "ep")
    return getGroupShape({Axis(MeshAxis::EP)});
  // Weight gradients are reduced over dp x cp: cp ranks hold the same
  // weights (Megatron-Core's data-parallel group with cp).
  if (Group == "dp")
    return getGroupShape(
        {{P.TP, P.CP}, Axis(MeshAxis::EP), Axis(MeshAxis::DP)});
  if (Group == "dp_ep")
    return getGroupShape({{P.TP, P.CP}, Axis(MeshAxis::DP)});
  assert(Group == "pp" && "unknown group");
  return getGroupShape({{P.getAxisStride(MeshAxis::PP), 2u}});
}

Expected<std::vector<unsigned>>
PlanEvaluator::getStageLayers(const ParallelPlan &P) const {
  // The one split shard, the manifest and the exports read too (interleaved
  // chunks included): a stage costs the layers of its chunks.
  Expected<std::vector<unsigned>> Chunks =
      getChunkLayers(P, getLayerEnds(I->Layers));
  if (!Chunks)
    return Chunks.takeError();
  return getStageTotals(*Chunks, P.PP);
}

double PlanEvaluator::getPeakFlops() const { return I->Peak; }

std::pair<int64_t, int64_t> PlanEvaluator::getAttentionHeads() const {
  for (const LayerFacts &L : I->LF)
    if (L.QHeads > 0)
      return {L.QHeads, L.KVHeads};
  return {0, 0};
}

std::string PlanEvaluator::getCPIllegalReason(const ParallelPlan &P) const {
  if (P.CP <= 1)
    return "";
  std::pair<int64_t, int64_t> H = getAttentionHeads();
  return loom::getCPIllegalReason(P, I->Opts.Seq, H.first, H.second);
}

ArrayRef<ExpertGroup> PlanEvaluator::getExpertGroups() const {
  return I->Experts;
}

unsigned PlanEvaluator::getNumLayers() const { return I->LF.size(); }

ArrayRef<EmbeddingTable> PlanEvaluator::getEmbeddingTables() const {
  return I->Tables;
}

bool PlanEvaluator::isEmbeddingTable(const Value *V) const {
  return I->TableIndex.count(V);
}

bool PlanEvaluator::holdsHBM(const Value *Param) const {
  return !I->SSDOnlyParams.count(Param);
}

bool PlanEvaluator::isShardedTable(const Value *V, EmbeddingMode Mode) const {
  auto It = I->TableIndex.find(V);
  return It != I->TableIndex.end() &&
         (Mode != EmbeddingMode::Auto || I->TableMustShard[It->second]);
}

Expected<PlanCost> PlanEvaluator::evaluate(const ParallelPlan &P) const {
  PlanCost R;
  if (Error E = evaluateStagesInto(P, R))
    return std::move(E);
  return simulate(std::move(R));
}

Expected<PlanCost> PlanEvaluator::evaluateStages(const ParallelPlan &P) const {
  PlanCost R;
  if (Error E = evaluateStagesInto(P, R))
    return std::move(E);
  return R;
}

const PipelineResult &
PlanEvaluator::Impl::simulate(const PipelineTimes &PT) const {
  auto K = std::make_tuple(PT.Forward, PT.Backward, PT.Transfer,
                           PT.NumMicroBatches, PT.VirtualStages, PT.ForwardOnly,
                           PT.MaxSimulatedMicroBatches);
  auto It = Simulations.find(K);
  if (It == Simulations.end())
    It = Simulations.emplace(std::move(K), simulatePipeline(PT)).first;
  return It->second;
}

Expected<PlanCost> PlanEvaluator::simulate(PlanCost R) const {
  const Impl &Im = *I;
  const ParallelPlan &P = R.Plan;
  // The simulation moves time, not memory: the stages' figures decide.
  setMemoryMaxima(R);
  PipelineTimes PT;
  PT.NumMicroBatches = P.NumMicroBatches;
  PT.VirtualStages = P.VirtualStages;
  PT.ForwardOnly = !Im.Opts.Train;
  // Enough for the warm-up of any pipeline Loom plans (P * V well below
  // this); a bigger global batch adds whole groups at the steady-state rate.
  PT.MaxSimulatedMicroBatches = 1024;
  for (unsigned S = 0; S < R.Stages.size(); ++S) {
    const StageCost &SC = R.Stages[S];
    // The last stage's is the wrap to stage 0 (interleaved only).
    if (S + 1 < R.Stages.size() || P.VirtualStages > 1)
      PT.Transfer.push_back(SC.PipeSendS);
    PT.Forward.push_back(SC.PipeForwardS);
    PT.Backward.push_back(SC.PipeBackwardS);
    if (P.Offload.any())
      PT.Backward.back() += SC.Offload.ExposedPerMicroBatchS;
  }
  const PipelineResult &PR = Im.simulate(PT);
  // Each stage's DP gradient sync and optimizer follow its own last
  // backward, not the pipeline's: a later stage, done earlier, updates
  // while the first still runs its backwards (Schedule.cpp places them so).
  R.StepTimeS = PR.StepTime;
  for (unsigned S = 0; S < R.Stages.size(); ++S) {
    StageCost &SC = R.Stages[S];
    SC.PipelineEndS = S < PR.Finish.size() ? PR.Finish[S] : PR.StepTime;
    R.StepTimeS =
        std::max(R.StepTimeS, SC.PipelineEndS + SC.DPExposedS + SC.OptimizerS);
  }
  R.BubbleFraction = PR.BubbleFraction;
  unsigned M = P.NumMicroBatches;
  for (unsigned S = 0; S < R.Stages.size(); ++S) {
    StageCost &SC = R.Stages[S];
    SC.ComputeS = M * (SC.ForwardS + SC.BackwardS);
    // Overlaps change what of the communication shows (OverlapFwdS/BwdS
    // hold the sends when they are waited for).
    SC.CommExposedS = M * (SC.TPCommS + SC.EPCommS + SC.CPCommS +
                           (P.PPOverlap ? SC.P2PS : 0.0) + SC.OverlapFwdS +
                           SC.OverlapBwdS + SC.Offload.ExposedPerMicroBatchS) +
                      SC.DPExposedS;
    if (SC.Memory.Embeddings + SC.EmbHostBytes + SC.EmbSSDBytes > 0)
      SC.CommExposedS += M * R.Embeddings.ExchangeS;
    SC.BubbleS = S < PR.Idle.size() ? PR.Idle[S] : 0;
  }
  R.ModelFlops = Im.ModelFlops;
  R.PerToken = Im.Opts.Seq > 0;
  if (R.StepTimeS > 0) {
    R.Throughput =
        (double)Im.Opts.Batch * (R.PerToken ? Im.Opts.Seq : 1) / R.StepTimeS;
    double Devices = P.getNumDevices();
    if (Im.Peak > 0)
      R.MFU = Im.ModelFlops / (R.StepTimeS * Devices * Im.Peak);
  }
  // No device runs faster than its peak: an MFU above 1 means the cost
  // model lost time somewhere (a node costed below the roofline, work
  // counted in ModelFlops but not in the step). Never print such a plan.
  assert(R.MFU <= 1 + 1e-9 && "MFU above 1: the step time misses work");
  if (R.MFU > 1 + 1e-9)
    return createStringError(inconvertibleErrorCode(),
                             "internal error: plan %s has MFU %.3f > 1 (the "
                             "predicted step time misses work)",
                             P.str().c_str(), R.MFU);
  return R;
}

} // namespace loom
