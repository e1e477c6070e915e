//===- RoleGraphs.cpp - One graph per role, with collectives --------------===//
//
// Lowers the sharding decided by Propagation.cpp into one ONNX graph per
// role (pipeline device x tp rank x ep rank). Every node of the device's
// chunks is rebuilt with local shapes; where an input arrives in another
// spec than the node needs, the reshard becomes an Hcom* node (DESIGN §7)
// or a local Slice; values made on another pipeline device arrive through
// HcomReceive (sent by HcomSend right after they are made), except values
// that do not depend on the data (masks, rotary tables), which each device
// recomputes. Expert branches owned by another ep rank are left out; their
// tokens are gathered over the ep group before and the weighted sum is
// reduce-scattered after.
//
// This file holds the driver: buildRoleGraphs and RoleBuilder::build, and
// the node-by-node walk (buildNode, the pipeline sends). The builder's other
// parts are in the Role*.cpp files beside it (RoleBuilder.h).
//
//===----------------------------------------------------------------------===//
#include "RoleBuilder.h"
#include "ShardAttrs.h"
#include "loom/IR/NodeLabel.h"
#include "loom/IR/Subgraphs.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"

using namespace llvm;

namespace loom {

Error err(const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), Msg.str().c_str());
}

/// The dp-sharded table \p N looks up (a Gather on axis 0 of it), if any.
static const EmbeddingShard *getEmbeddingShard(const ShardingResult &R,
                                               const Node &N) {
  if (R.EmbShards.empty() || N.getOpType() != "Gather" ||
      !N.getDomain().empty() || N.getAttrInt("axis", 0) != 0 ||
      N.getNumInputs() < 2 || !N.getInput(0) || !N.getInput(0)->isParameter())
    return nullptr;
  return R.findEmbShard(N.getInput(0));
}

void RoleBuilder::emitSends(const Node &N) {
  for (const Value *O : N.getOutputs()) {
    if (!O)
      continue;
    auto D = E.Dests.find(O);
    if (D == E.Dests.end() || deviceOf(&N) != Dev)
      continue;
    Value *X = Produced.lookup(O);
    if (!X)
      continue;
    for (unsigned Dst : D->second) {
      int Tag = E.Tag.at({O->getName().str(), Dst});
      Node *S = cantFail(G->addNode(
          "HcomSend", "hccl",
          fresh(("hcom.pp.send." + O->getName() + ".to" + Twine(Dst)).str()),
          {X}, {}));
      S->addAttribute(strAttr("group", "pp"));
      S->addAttribute(intAttr("sr_tag", Tag));
      S->addAttribute(intAttr("dest_rank", Dst));
    }
  }
}

Error RoleBuilder::buildNode(const Node &N) {
  Error E = buildNodeUnnamed(N);
  if (!E)
    return E;
  std::string Msg = toString(std::move(E));
  return err(namesNode(Msg) ? Msg : describeNode(N) + ": " + Msg);
}

Error RoleBuilder::buildNodeUnnamed(const Node &N) {
  // Built already (a producer recomputed for an earlier consumer).
  if (N.getNumOutputs() && Produced.count(N.getOutput(0)))
    return Error::success();
  if (!Building.insert(&N).second)
    return err(describeNode(N) + ": depends on itself across devices");
  // Every node made for N (its reshards, receives and sends included) runs
  // in N's pipeline chunk; nodes of recursively built producers keep their
  // own.
  unsigned FirstNew = G->getNumNodes();
  auto TagChunk = make_scope_exit([&, FirstNew] {
    unsigned Chunk = R.Nodes.lookup(&N).Chunk;
    for (unsigned I = FirstNew; I < G->getNumNodes(); ++I)
      if (G->getNodes()[I]->Stage < 0)
        G->getNodes()[I]->Stage = Chunk;
  });
  auto NI = R.Nodes.find(&N);
  if (NI == R.Nodes.end())
    return err(describeNode(N) + ": has no sharding");
  const NodeSharding &NS = NI->second;
  if (const RingSite *RS = R.findRingSite(&N)) {
    // The scores and the chain after them are computed inside the ring,
    // block by block, at the context node.
    Building.erase(&N);
    if (RS->Context != &N)
      return Error::success();
    if (Error Er = buildRing(N, *RS, getOutputNames(N, NS, false)[0]))
      return Er;
    emitSends(N);
    return Error::success();
  }
  if (hasSubgraphs(N))
    return buildControlFlow(N, NS);
  if (const EmbeddingShard *S = getEmbeddingShard(R, N))
    return lowerEmbeddingLookup(N, *S);

  // Expert parallelism: a branch of an expert another ep rank owns is left
  // out; the combine chain skips what is absent.
  bool IsBranch = NS.Expert >= 0;
  if (IsBranch && !ownsExpert(NS.Expert)) {
    for (const Value *O : N.getOutputs())
      if (O)
        Absent.insert(O);
    Produced[N.getOutput(0)] = nullptr;
    return Error::success();
  }
  bool AnyEPIn = false;
  for (const Value *V : N.getInputs())
    if (V && (Absent.count(V) || EPPartial.count(V) || InEPRegion.count(V)))
      AnyEPIn = true;
  if (NS.ExpertCombine) {
    Expected<bool> Done = buildExpertCombine(N, NS);
    if (!Done)
      return Done.takeError();
    if (*Done)
      return Error::success();
  }

  SmallVector<Value *, 4> In;
  for (unsigned I = 0; I < N.getNumInputs(); ++I) {
    Expected<Value *> X = buildInput(N, NS, I, IsBranch);
    if (!X)
      return X.takeError();
    In.push_back(*X);
  }
  SmallVector<std::string, 2> OutNames =
      getOutputNames(N, NS, IsBranch || AnyEPIn);
  if (NS.Lower != NodeSharding::Lowering::None) {
    if (Error Er = lowerSpecial(N, NS, In, OutNames))
      return Er;
  } else if (Error Er = cloneLocal(N, NS, In, OutNames, IsBranch)) {
    return Er;
  }
  for (const Value *O : N.getOutputs())
    if (O && DD.count(O) &&
        (IsBranch || (AnyEPIn && EPPartial.count(N.getOutput(0)))))
      InEPRegion.insert(O);
  return finishNode(N);
}

Expected<RoleGraph> RoleBuilder::build() {
  M = std::make_unique<Model>();
  const Model &SM = *R.M;
  M->IRVersion = std::max<int64_t>(SM.IRVersion, 8);
  M->Opsets = SM.Opsets;
  // A tp rank's graph under cp beside tp has it already.
  if (none_of(M->Opsets,
              [](const OpsetImport &O) { return O.Domain == "hccl"; }))
    M->Opsets.push_back({"hccl", 1});
  M->ProducerName = "loom";
  M->BaseDir = SM.BaseDir;
  Out.PP = Dev;
  Out.TP = TPR;
  Out.EP = EPR;
  Out.DP = DPR;
  Out.FileName = ("pp" + Twine(Dev) + "_" + getAxisGroupName(R) + Twine(TPR) +
                  (EP > 1 ? "_ep" + Twine(EPR) : Twine()) +
                  (DPR >= 0 ? "_dp" + Twine(DPR) : Twine()) + ".onnx")
                     .str();
  G = &M->getGraph();
  G->setName(
      (Src.getName() + "_" + StringRef(Out.FileName).drop_back(5)).str());
  // Names inside copied control-flow bodies stay taken.
  collectSubgraphValueNames(Src, UsedNames);
  if (EP > 1) {
    // Token count of the expert region (rows of the tokens every expert
    // reads), to refuse per-token constants we cannot widen.
    for (const auto &NP : Src.getNodes())
      if (R.Nodes.lookup(NP.get()).Expert >= 0)
        for (const Value *V : NP->getInputs())
          if (V && DD.count(V) &&
              R.Nodes.lookup(V->getDefiningNode()).Expert < 0 &&
              V->Type.getRank() && V->Type.Dims[0].isStatic()) {
            EPTokens = V->Type.Dims[0].Size;
            break;
          }
  }
  for (const auto &NP : Src.getNodes())
    if (deviceOf(NP.get()) == Dev)
      if (Error Er = buildNode(*NP))
        return std::move(Er);
  // Model outputs made on this device, replicated over tp; a split KV
  // cache output leaves as this rank's slice (KVCache.cpp).
  for (const Value *V : Src.getOutputs()) {
    const Node *D = V->getDefiningNode();
    if (!D || deviceOf(D) != Dev)
      continue;
    const KVCacheShard *KV = R.findKVCache(V);
    Expected<Value *> X = materialize(V, KV ? KV->Spec : AxisSpec());
    if (!X)
      return err(describeNode(*D) + ": model output '" + V->getName() +
                 "': " + toString(X.takeError()));
    Value *Y = *X;
    if (EPPartial.count(V))
      return err(describeNode(*D) + ": model output '" + V->getName() +
                 "' is an expert sum");
    if (Y->getName() != V->getName()) {
      Expected<Node *> Id =
          G->addNode("Identity", "", fresh(("output." + V->getName()).str()),
                     {Y}, {V->getName().str()});
      if (!Id)
        return Id.takeError();
      (*Id)->getOutput(0)->Type = Y->Type;
      Y = (*Id)->getOutput(0);
    }
    G->addOutput(Y);
    Out.Outputs.push_back(V->getName().str());
    for (const auto &NP : G->getNodes())
      if (NP->Stage < 0)
        NP->Stage = R.Nodes.lookup(D).Chunk;
  }
  eraseUnreadParts();
  Out.M = std::move(M);
  return std::move(Out);
}

Expected<std::vector<RoleGraph>> buildRoleGraphs(const ShardingResult &R) {
  const Graph &G = R.M->getGraph();
  DenseSet<const Value *> DD = findDataDependent(G);
  // Cross-device edges, tagged in the order their producers appear.
  Edges E;
  int NextTag = 0;
  auto DevOf = [&](const Node *N) {
    return R.Nodes.lookup(N).Chunk % R.Plan.PP;
  };
  for (const auto &NP : G.getNodes()) {
    unsigned Dst = DevOf(NP.get());
    // A control-flow body's outer-scope reads cross devices like inputs.
    std::vector<const Value *> Reads(NP->getInputs().begin(),
                                     NP->getInputs().end());
    if (hasSubgraphs(*NP))
      for (const Value *V : getCapturedValues(*NP))
        Reads.push_back(V);
    for (const Value *V : Reads) {
      if (!V || !DD.count(V) || V->isInput())
        continue;
      const Node *D = V->getDefiningNode();
      if (!D || DevOf(D) == Dst)
        continue;
      auto Key = std::make_pair(V->getName().str(), Dst);
      if (E.Tag.count(Key))
        continue;
      E.Tag[Key] = NextTag++;
      E.Dests[V].push_back(Dst);
    }
  }
  // Pipeline devices holding embedding table shards get one role per dp
  // rank (each holds its own shard).
  // Then every device does, so that each dp rank's pipeline is its own
  // chain of roles (a send from pp0_dp1 goes to pp1_dp1).
  bool AnyShard = any_of(G.getNodes(), [&](const auto &NP) {
    return getEmbeddingShard(R, *NP) != nullptr;
  });
  std::vector<bool> PerDP(R.Plan.PP, AnyShard);
  std::vector<RoleGraph> Roles;
  for (unsigned P = 0; P < R.Plan.PP; ++P)
    for (unsigned T = 0; T < R.Plan.TP; ++T)
      for (unsigned X = 0; X < R.Plan.EP; ++X)
        for (int D = PerDP[P] ? 0 : -1; D < (PerDP[P] ? (int)R.Plan.DP : 0);
             ++D) {
          RoleBuilder B(R, E, DD, P, T, X, D);
          Expected<RoleGraph> RG = B.build();
          if (!RG)
            return createStringError(inconvertibleErrorCode(),
                                     "role pp%u/tp%u/ep%u: %s", P, T, X,
                                     toString(RG.takeError()).c_str());
          Roles.push_back(std::move(*RG));
        }
  return std::move(Roles);
}

} // namespace loom
