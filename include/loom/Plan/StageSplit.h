//===- StageSplit.h - The one split of layers into chunks ------*- C++ -*-===//
//
// Which layers each pipeline stage and each interleaved chunk holds. The
// evaluator costs the stage totals, shard places the chunks, the manifest
// and the framework exports write them: all from getChunkLayers, so the
// plan that is costed is the plan that is emitted (issue 31 item 3).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_STAGESPLIT_H
#define LOOM_PLAN_STAGESPLIT_H

#include "loom/IR/Graph.h"
#include "loom/Plan/ParallelPlan.h"
#include "loom/Plan/PredictedCost.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include <string>
#include <utility>
#include <vector>

namespace loom {

/// The layer count and the prologue / epilogue layers at its ends (the
/// embedding and the head: detect-layers' Prologue and Epilogue kinds).
struct LayerEnds {
  unsigned NumLayers = 0, Prologue = 0, Epilogue = 0;
};
LayerEnds getLayerEnds(llvm::ArrayRef<LayerInfo::Kind> Kinds);
LayerEnds getLayerEnds(llvm::ArrayRef<LayerInfo> Layers);

/// Layers per chunk, pp x vpp contiguous runs in layer order; chunk c runs
/// on stage c % pp (interleaved 1F1B, Narayanan et al. 2021, sec. 2.2).
/// A stage's total is P.StageLayers[s] when given, else its share of the
/// blocks split evenly (the extra blocks on the last stages: the first
/// stage has the most micro-batches in flight) plus the prologue on the
/// first and the epilogue on the last stage (DESIGN §6); when there are
/// fewer blocks than chunks every layer counts as a block. A stage's
/// blocks (its total less the prologue or epilogue it holds) are split
/// evenly over its vpp chunks, the extra ones on its later chunks; the
/// prologue opens chunk 0 and the epilogue closes the last chunk.
/// Errors when the stages or chunks outnumber the layers or the given
/// stages do not cover them.
llvm::Expected<std::vector<unsigned>> getChunkLayers(const ParallelPlan &P,
                                                     LayerEnds E);

/// Per stage, the layers of its chunks (chunk c on stage c % \p PP).
std::vector<unsigned> getStageTotals(llvm::ArrayRef<unsigned> Chunks,
                                     unsigned PP);
/// Where each chunk of \p Chunks starts, and their total last: the
/// prefix sums getStageLayerRuns reads.
llvm::SmallVector<unsigned, 64> getChunkStarts(llvm::ArrayRef<unsigned> Chunks);
/// The layers stage \p Stage holds, [first, end) per chunk in layer
/// order (chunk c on stage c % \p PP; empty chunks left out), from the
/// chunks' \p Starts (getChunkStarts).
llvm::SmallVector<std::pair<unsigned, unsigned>, 4>
getStageLayerRuns(llvm::ArrayRef<unsigned> Starts, unsigned PP, unsigned Stage);
/// The layers stage \p Stage of \p PC holds, as above from its
/// ChunkLayers, or its one run where it has none.
llvm::SmallVector<std::pair<unsigned, unsigned>, 4>
getStageLayerRuns(const PlanCost &PC, unsigned Stage);
/// The same as text: "0-4", or with interleaving "0-2,5-6" (a run of
/// one layer as "9").
std::string getStageLayersText(const PlanCost &PC, unsigned Stage);

} // namespace loom

#endif // LOOM_PLAN_STAGESPLIT_H
