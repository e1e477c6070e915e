//===- ComposeContextParallel.cpp - cp beside tp, one axis at a time ------===//
//
// A plan with context parallelism beside tensor parallelism (cp > 1, tp > 1)
// shards every attention twice: tp over heads (Megatron's column and row
// splits), cp over tokens (Ulysses' all-to-alls or the K/V ring). Sharding
// specs hold one mesh axis, so the two are composed one after the other:
//
//  1. the shard pass propagates the first axis over the micro-batch graph;
//  2. each of its ranks' graphs is built whole (every pipeline chunk on one
//     device, each node tagged with its chunk) -- a model in its own right,
//     with the first axis' collectives as hccl nodes;
//  3. that graph is propagated along the second axis (the first axis'
//     collectives pass its splits through, Rules/CollectiveRules.cpp) and
//     cut into the plan's pipeline devices x ranks of that axis.
//
// Exact because each step is: the first axis' graphs compute what the
// model computes (on each rank, with its peers), and the rules are exact
// on any graph. The order follows what nests:
//
//  * sp off: tp first. Ulysses' all-to-alls then split each tp rank's heads
//    (heads must divide by tp x cp), as Megatron-Core nests them; the ring
//    passes each tp rank's heads of K and V.
//  * sp on: cp first, as Megatron-Core splits the sequence -- cp's tokens
//    (in the causal balance for the ring), then sp's share of them inside
//    each cp rank. The ring's K/V buffer keeps the heads as a dim of its
//    own (RingAttention.cpp), so tp splits it; the ring's receive is laid
//    out as its send. Ulysses moves the heads in tp's head groups
//    (RuleContext::getHeadGroups: each group divided among the cp ranks,
//    Megatron-Core's nesting), the groups a dim of their own around each
//    all-to-all (RoleReshards.cpp, blockedAllToAll), which tp then splits
//    and the all-to-all passes through (Rules/CollectiveRules.cpp).
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

/// The second axis' propagation over \p FG, a graph of R's axis: the plan's
/// pipeline and dp, chunks as the first stage tagged them; cp (tp first) or
/// tp with the plan's sp (cp first) on the propagated axis.
static std::unique_ptr<ShardingResult> makeSecondStage(const ShardingResult &R,
                                                       RoleGraph &FG) {
  auto C = std::make_unique<ShardingResult>();
  C->Plan = R.Plan;
  C->Plan.CP = 1;
  if (R.CPAxis) {
    C->Plan.TP = R.InnerTP;
    C->Plan.SP = R.InnerSP;
  } else {
    C->Plan.TP = R.OuterCP;
    C->Plan.SP = false;
    C->CPAxis = true;
    C->CPRing = R.Plan.CPA == CPAlgo::Ring;
    C->InputSeqAxis = R.InputSeqAxis;
  }
  C->CommFloatType = R.CommFloatType;
  C->ExpectedShapes = R.ExpectedShapes;
  C->InputBatchAxis = R.InputBatchAxis;
  C->OutputBatchAxis = R.OutputBatchAxis;
  C->GlobalInputTypes = R.GlobalInputTypes;
  C->GlobalOutputTypes = R.GlobalOutputTypes;
  C->NumChunks = R.NumChunks;
  C->ChunkLayers = R.ChunkLayers;
  C->ChunksFromStages = true;
  C->M = std::move(FG.M);
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
  // 2. Each graph of the first axis, whole: one pipeline device holds
  // every chunk.
  unsigned PP = R.Plan.PP;
  R.Plan.PP = 1;
  Expected<std::vector<RoleGraph>> First = buildRoleGraphs(R);
  R.Plan.PP = PP;
  if (!First)
    return First.takeError();
  // 3. Each along the other axis.
  bool CPFirst = R.CPAxis;
  StringRef FirstAxis = CPFirst ? "cp" : "tp",
            SecondAxis = CPFirst ? "tp" : "cp";
  std::vector<RoleGraph> Out;
  std::string Name = R.M->getGraph().getName().str();
  R.SecondStage.reset();
  for (RoleGraph &FG : *First) {
    unsigned I = FG.TP;
    std::unique_ptr<ShardingResult> C = makeSecondStage(R, FG);
    auto Fail = [&](Error E) {
      return createStringError(inconvertibleErrorCode(), "%s rank %u, %s: %s",
                               FirstAxis.str().c_str(), I,
                               SecondAxis.str().c_str(),
                               toString(std::move(E)).c_str());
    };
    if (Error E = propagateSharding(*C))
      return Fail(std::move(E));
    Expected<std::vector<RoleGraph>> Roles = buildRoleGraphs(*C);
    if (!Roles)
      return Fail(Roles.takeError());
    for (RoleGraph &RG : *Roles) {
      unsigned T = CPFirst ? RG.TP : I, CPIdx = CPFirst ? I : RG.TP;
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
    if (!R.SecondStage)
      R.SecondStage = std::move(C);
  }
  llvm::stable_sort(Out, [](const RoleGraph &A, const RoleGraph &B) {
    return std::make_pair(A.PP, A.TP) < std::make_pair(B.PP, B.TP);
  });
  // The output's rank arithmetic: one inner axis of tp x cp ranks.
  R.Plan.TP = R.InnerTP * R.OuterCP;
  return std::move(Out);
}

} // namespace loom
