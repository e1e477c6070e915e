//===- ComposeContextParallel.cpp - cp beside tp, one axis at a time ------===//
//
// A plan with context parallelism beside tensor parallelism (cp > 1, tp > 1)
// shards every attention twice: tp over heads (Megatron's column and row
// splits), cp over tokens (Ulysses' all-to-alls or the K/V ring). Sharding
// specs hold one mesh axis, so the two are composed one after the other,
// as Megatron-Core nests its groups (tp innermost, cp right outside it):
//
//  1. the shard pass propagates tp over the micro-batch graph;
//  2. each tp rank's graph is built whole (every pipeline chunk on one
//     device, each node tagged with its chunk) -- a model in its own right,
//     with tp's collectives as hccl nodes;
//  3. that graph is propagated along cp (its collectives are elementwise
//     over the tokens, Rules/CollectiveRules.cpp) and cut into the plan's
//     pipeline devices x cp ranks.
//
// Exact because each step is: tp's graph computes what the model computes
// (on every tp rank, with its tp peers), and cp's rules are exact on any
// graph. tp's activations must be whole along the sequence (sp off): with
// sp, tp's token split would interleave cp's.
//
// A role's index on the mesh's inner axis is tp_idx + cp_idx x tp (the
// rank order of ParallelPlan.h), so the output's rank arithmetic is that
// of one axis of tp x cp ranks (splitInnerIndex).
//
//===----------------------------------------------------------------------===//
#include "loom/IR/Subgraphs.h"
#include "loom/Shard/Sharding.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

using namespace llvm;

namespace loom {

/// The cp stage of tp rank \p TG's graph: the plan's pipeline and dp, cp on
/// the propagated axis, chunks as the tp stage tagged them.
static std::unique_ptr<ShardingResult> makeCPStage(const ShardingResult &R,
                                                   RoleGraph &TG) {
  auto C = std::make_unique<ShardingResult>();
  C->Plan = R.Plan;
  C->Plan.TP = R.OuterCP;
  C->Plan.CP = 1;
  C->Plan.SP = false;
  C->CPAxis = true;
  C->CPRing = R.Plan.CPA == CPAlgo::Ring;
  C->InputSeqAxis = R.InputSeqAxis;
  C->CommFloatType = R.CommFloatType;
  C->ExpectedShapes = R.ExpectedShapes;
  C->InputBatchAxis = R.InputBatchAxis;
  C->OutputBatchAxis = R.OutputBatchAxis;
  C->GlobalInputTypes = R.GlobalInputTypes;
  C->GlobalOutputTypes = R.GlobalOutputTypes;
  C->NumChunks = R.NumChunks;
  C->ChunkLayers = R.ChunkLayers;
  C->ChunksFromStages = true;
  C->M = std::move(TG.M);
  return C;
}

/// The tp stage's shape constants that cp's local shapes replaced.
static void eraseUnreadConstants(Graph &G) {
  DenseSet<const Value *> Read(G.getOutputs().begin(), G.getOutputs().end());
  for (const auto &NP : G.getNodes()) {
    Read.insert(NP->getInputs().begin(), NP->getInputs().end());
    if (hasSubgraphs(*NP))
      for (const Value *V : getCapturedValues(*NP))
        Read.insert(V);
  }
  G.eraseNodes([&](const Node &N) {
    return N.getOpType() == "Constant" && N.getDomain().empty() &&
           N.getNumOutputs() == 1 && !Read.count(N.getOutput(0));
  });
}

Expected<std::vector<RoleGraph>> buildComposedRoleGraphs(ShardingResult &R) {
  // 2. Each tp rank's graph, whole: one pipeline device holds every chunk.
  unsigned PP = R.Plan.PP;
  R.Plan.PP = 1;
  Expected<std::vector<RoleGraph>> TPRoles = buildRoleGraphs(R);
  R.Plan.PP = PP;
  if (!TPRoles)
    return TPRoles.takeError();
  // 3. Each along cp.
  std::vector<RoleGraph> Out;
  std::string Name = R.M->getGraph().getName().str();
  R.CPStages.clear();
  for (RoleGraph &TG : *TPRoles) {
    unsigned T = TG.TP;
    std::unique_ptr<ShardingResult> C = makeCPStage(R, TG);
    if (Error E = propagateSharding(*C))
      return createStringError(inconvertibleErrorCode(), "tp rank %u, cp: %s",
                               T, toString(std::move(E)).c_str());
    Expected<std::vector<RoleGraph>> Roles = buildRoleGraphs(*C);
    if (!Roles)
      return createStringError(inconvertibleErrorCode(), "tp rank %u, cp: %s",
                               T, toString(Roles.takeError()).c_str());
    for (RoleGraph &RG : *Roles) {
      unsigned CPIdx = RG.TP;
      RG.TP = T + CPIdx * R.InnerTP;
      RG.FileName = ("pp" + Twine(RG.PP) + "_tp" + Twine(T) + "_cp" +
                     Twine(CPIdx) + ".onnx")
                        .str();
      eraseUnreadConstants(RG.M->getGraph());
      RG.M->getGraph().setName(Name + "_" +
                               StringRef(RG.FileName).drop_back(5).str());
      Out.push_back(std::move(RG));
    }
    for (const std::string &N : C->Notes)
      if (!is_contained(R.Notes, N))
        R.Notes.push_back(N);
    R.CPStages.push_back(std::move(C));
  }
  llvm::stable_sort(Out, [](const RoleGraph &A, const RoleGraph &B) {
    return std::make_pair(A.PP, A.TP) < std::make_pair(B.PP, B.TP);
  });
  // The output's rank arithmetic: one inner axis of tp x cp ranks.
  R.Plan.TP = R.InnerTP * R.OuterCP;
  return std::move(Out);
}

} // namespace loom
