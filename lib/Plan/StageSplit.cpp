//===- StageSplit.cpp - The one split of layers into pipeline chunks -----===//
#include "loom/Plan/StageSplit.h"
#include <algorithm>

using namespace llvm;

namespace loom {

/// The prologue and epilogue runs of the \p N layers whose kinds \p KindOf
/// gives (no copy: the evaluator asks this once per plan it costs).
template <typename KindFn>
static LayerEnds getLayerEnds(unsigned N, KindFn KindOf) {
  LayerEnds E;
  E.NumLayers = N;
  while (E.Prologue < N && KindOf(E.Prologue) == LayerInfo::Kind::Prologue)
    ++E.Prologue;
  while (E.Epilogue < N - E.Prologue &&
         KindOf(N - 1 - E.Epilogue) == LayerInfo::Kind::Epilogue)
    ++E.Epilogue;
  return E;
}

LayerEnds getLayerEnds(ArrayRef<LayerInfo::Kind> Kinds) {
  return getLayerEnds(Kinds.size(), [&](unsigned I) { return Kinds[I]; });
}

LayerEnds getLayerEnds(ArrayRef<LayerInfo> Layers) {
  return getLayerEnds(Layers.size(), [&](unsigned I) { return Layers[I].K; });
}

Expected<std::vector<unsigned>> getChunkLayers(const ParallelPlan &P,
                                               LayerEnds E) {
  unsigned NL = E.NumLayers, PP = std::max(1u, P.PP),
           V = std::max(1u, P.VirtualStages);
  std::vector<unsigned> Stages;
  if (!P.StageLayers.empty()) {
    unsigned Sum = 0;
    for (unsigned C : P.StageLayers)
      Sum += C;
    if (Sum != NL || P.StageLayers.size() != PP)
      return createStringError(inconvertibleErrorCode(),
                               "--plan stages=...: %u stages with %u layers "
                               "in all, but pp=%u and the model has %u "
                               "layers",
                               (unsigned)P.StageLayers.size(), Sum, PP, NL);
    Stages = P.StageLayers;
  } else {
    if (PP > NL)
      return createStringError(inconvertibleErrorCode(),
                               "pp=%u exceeds the model's %u layers", PP, NL);
    unsigned Mid = NL - E.Prologue - E.Epilogue;
    if (Mid < PP * V) {
      E.Prologue = E.Epilogue = 0;
      Mid = NL;
    }
    Stages.assign(PP, Mid / PP);
    for (unsigned S = 0; S < Mid % PP; ++S)
      ++Stages[PP - 1 - S];
    Stages.front() += E.Prologue;
    Stages.back() += E.Epilogue;
  }
  if (PP * V > NL)
    return createStringError(inconvertibleErrorCode(),
                             "pp=%u x vpp=%u chunks exceed the model's %u "
                             "layers",
                             PP, V, NL);
  // Given stages too short to hold the prologue or epilogue beside a block
  // per chunk: every layer counts as a block.
  if (Stages.front() < E.Prologue + V || Stages.back() < E.Epilogue + V ||
      (PP == 1 && Stages.front() < E.Prologue + E.Epilogue + V))
    E.Prologue = E.Epilogue = 0;
  std::vector<unsigned> Chunks(PP * V, 0);
  for (unsigned S = 0; S < PP; ++S) {
    unsigned Blocks =
        Stages[S] - (S == 0 ? E.Prologue : 0) - (S == PP - 1 ? E.Epilogue : 0);
    for (unsigned J = 0; J < V; ++J)
      Chunks[J * PP + S] = Blocks / V + (J >= V - Blocks % V ? 1 : 0);
  }
  Chunks.front() += E.Prologue;
  Chunks.back() += E.Epilogue;
  return Chunks;
}

std::vector<unsigned> getStageTotals(ArrayRef<unsigned> Chunks, unsigned PP) {
  std::vector<unsigned> Totals(std::max(1u, PP), 0);
  for (unsigned C = 0; C < Chunks.size(); ++C)
    Totals[C % Totals.size()] += Chunks[C];
  return Totals;
}

SmallVector<unsigned, 64> getChunkStarts(ArrayRef<unsigned> Chunks) {
  SmallVector<unsigned, 64> Starts(Chunks.size() + 1, 0);
  for (unsigned C = 0; C < Chunks.size(); ++C)
    Starts[C + 1] = Starts[C] + Chunks[C];
  return Starts;
}

SmallVector<std::pair<unsigned, unsigned>, 4>
getStageLayerRuns(ArrayRef<unsigned> Starts, unsigned PP, unsigned Stage) {
  SmallVector<std::pair<unsigned, unsigned>, 4> Runs;
  for (size_t C = Stage; C + 1 < Starts.size(); C += std::max(1u, PP))
    if (Starts[C + 1] > Starts[C])
      Runs.push_back({Starts[C], Starts[C + 1]});
  return Runs;
}

SmallVector<std::pair<unsigned, unsigned>, 4>
getStageLayerRuns(const PlanCost &PC, unsigned Stage) {
  if (!PC.ChunkLayers.empty())
    return getStageLayerRuns(getChunkStarts(PC.ChunkLayers), PC.Plan.PP, Stage);
  const StageCost &SC = PC.Stages[Stage];
  return {{SC.FirstLayer, SC.FirstLayer + SC.NumLayers}};
}

std::string getStageLayersText(const PlanCost &PC, unsigned Stage) {
  std::string S;
  for (auto [First, End] : getStageLayerRuns(PC, Stage)) {
    S += (S.empty() ? "" : ",") + std::to_string(First);
    if (End - First > 1)
      S += "-" + std::to_string(End - 1);
  }
  return S;
}

} // namespace loom
