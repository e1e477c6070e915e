//===- LayerFacts.cpp - What each layer is, whatever the plan -------------===//
//
// PlanEvaluator::Impl::analyze and its steps: per layer the nodes' facts, the
// attention core and KV cache, the parameters and activations the rules
// classify, the live peak of the forward, the MoE and pipeline transfers, and
// the model FLOPs with the peak MFU is measured against.
//
//===----------------------------------------------------------------------===//
#include "PlanCostImpl.h"
#include "loom/IR/AttentionOp.h"
#include "loom/IR/Subgraphs.h"
#include "loom/Shard/ExpertRules.h"
#include "llvm/ADT/SmallPtrSet.h"
#include <algorithm>
#include <cmath>
#include <functional>

using namespace llvm;

namespace loom {

static double valueBytes(const Value *V) {
  return (double)V->Type.getSizeInBytes().getValueOr(0);
}

/// The tensor a KV cache holds for attention operand \p V (K^T of the
/// score matmul, V of the context matmul): walks back through what only
/// moves or repeats it -- Transpose, Reshape, Unsqueeze/Squeeze, and the
/// Expand, Tile or Concat of the same tensor with which grouped-query
/// attention repeats each KV head for its query heads (torch's repeat_kv
/// exports Unsqueeze+Expand+Reshape) -- to the un-expanded tensor, which
/// is what an inference runtime caches (Ainslie et al. 2023, GQA §2: the
/// cache shrinks by heads / kv_heads).
static const Value *kvCacheSource(const Value *V) {
  for (unsigned Steps = 0; V && Steps < 64; ++Steps) {
    const Node *D = V->getDefiningNode();
    if (!D || D->getNumInputs() == 0 || !D->getInput(0))
      return V;
    StringRef Op = D->getOpType();
    if (Op == "Concat") {
      // Only a repeat: every input the same tensor.
      const Value *In = D->getInput(0);
      if (!all_of(D->getInputs(), [&](const Value *X) { return X == In; }))
        return V;
      V = In;
      continue;
    }
    if (Op != "Transpose" && Op != "Reshape" && Op != "Unsqueeze" &&
        Op != "Squeeze" && Op != "Expand" && Op != "Tile" && Op != "Identity" &&
        Op != "Flatten")
      return V;
    if (isConstantLike(D->getInput(0)))
      return V;
    V = D->getInput(0);
  }
  return V;
}

/// A value a fused kernel keeps on chip (detect-fused-kernels): produced
/// and consumed only inside one fused region, and no graph output.
static bool fusedInternal(
    const Value *V, const NodeCostMap &Costs,
    const DenseMap<const Value *, SmallVector<const Node *, 2>> &Users,
    const DenseSet<const Value *> &GraphOutputs) {
  const Node *D = V->getDefiningNode();
  auto It = D ? Costs.find(D) : Costs.end();
  if (It == Costs.end() || It->second.Cost.FusedKernel.empty() ||
      GraphOutputs.count(V))
    return false;
  const Node *Anchor =
      It->second.Cost.FusedInto ? It->second.Cost.FusedInto : D;
  auto U = Users.find(V);
  return U != Users.end() && all_of(U->second, [&](const Node *N) {
           auto NI = Costs.find(N);
           return N == Anchor ||
                  (NI != Costs.end() && NI->second.Cost.FusedInto == Anchor);
         });
}

void PlanEvaluator::Impl::analyze() {
  LF.assign(Layers.size(), LayerFacts());
  Experts = findExperts(G, Layers);
  Tables = findEmbeddingTables(G, Opts.Batch);
  TableLayer.assign(Tables.size(), 0);
  TableParamIndex.assign(Tables.size(), 0);
  for (unsigned T = 0; T < Tables.size(); ++T) {
    TableIndex[Tables[T].Weight] = T;
    TableMustShard.push_back(mustShardTable(Tables[T], HW, Opts.Train));
    AllTableWeights.insert(Tables[T].Weight);
    if (TableMustShard.back()) {
      ShardedTableWeights.insert(Tables[T].Weight);
      ShardedLookups.insert(Tables[T].Lookups.begin(), Tables[T].Lookups.end());
    }
  }
  // Expert work and weights as the ep rules (Rules.h) see them at any
  // degree.
  ExpertAxisRules XR;
  if (Expected<ExpertAxisRules> X =
          applyExpertRules(G, Experts, RuleContext::AnyDivides))
    XR = std::move(*X);
  else
    consumeError(X.takeError()); // Unchecked at AnyDivides: cannot fail.
  DenseSet<const Value *> ExpertParams = XR.SplitParams;
  ExpertParams.insert(XR.BranchParams.begin(), XR.BranchParams.end());
  collectNodes(XR);
  UseMap Users = buildUseMap(G);
  findAttentionCore(Users);
  collectLayerValues(Users, ExpertParams);
  findPeakLive(Users);
  collectTransfers();
  computeModelFlops();

  std::vector<rulesplit::LayerValues> Values;
  for (LayerFacts &L : LF)
    Values.push_back(std::move(L.Values));
  Splitter = std::make_unique<rulesplit::RuleSplitter>(G, std::move(Values), XR,
                                                       Opts.Opset);
  Splitter->setInputBatchDims(Opts.InputBatchDims, Opts.Batch);
}

void PlanEvaluator::Impl::collectNodes(const ExpertAxisRules &XR) {
  auto LayerOf = [&](const Node &N) {
    return (unsigned)std::max(0, std::min<int>(N.Layer, LF.size() - 1));
  };

  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    LayerFacts &L = LF[LayerOf(N)];
    NodeFacts F;
    F.N = &N;
    auto CI = Costs.find(&N);
    F.C = CI == Costs.end() ? nullptr : &CI->second;
    StringRef Op = N.getOpType();
    ExpertNodeRule XN = XR.lookup(&N);
    if (XN.Role == ExpertRole::Branch || XN.Role == ExpertRole::Stacked) {
      F.Expert = true;
      F.StackedExperts = XN.Role == ExpertRole::Stacked ? XN.GroupExperts : 0;
    }
    if (Op == "MatMul" || Op == "Gemm") {
      bool Weight = false, Act = false;
      for (const Value *V : N.getInputs()) {
        if (!V)
          continue;
        if (isWeightLike(V) && V->Type.getRank() >= 2)
          Weight = true;
        else if (!isConstantLike(V))
          Act = true;
      }
      F.WeightGemm = Weight && Act;
    }
    if (F.C) {
      L.Flops += F.C->Cost.Flops;
      L.BackwardFlops += F.C->Cost.BackwardFlops;
    }
    L.Nodes.push_back(F);
    L.Values.Nodes.push_back(&N);
  }
}

void PlanEvaluator::Impl::collectLayerValues(
    const UseMap &Users, const DenseSet<const Value *> &ExpertParams) {
  DenseSet<const Value *> CountedParams;
  // Element-wise chains run as one fused kernel (GeLU exported as
  // Div/Erf/Add/Mul/Mul, the tail of a decomposed RMSNorm): its backward
  // recomputes internal values from the chain's inputs, so a saved value
  // produced inside a chain stands for the chain's external inputs.
  // Regions: union-find over element-wise nodes joined through values all
  // of whose consumers are element-wise.
  DenseMap<const Node *, const Node *> Parent;
  std::function<const Node *(const Node *)> Find = [&](const Node *N) {
    const Node *P = Parent.lookup(N);
    if (!P || P == N)
      return N;
    const Node *Root = Find(P);
    Parent[N] = Root;
    return Root;
  };
  for (const auto &NP : G.getNodes()) {
    const Node *N = NP.get();
    if (!isElementwiseOp(*N))
      continue;
    Parent.try_emplace(N, N);
    for (const Value *V : N->getInputs()) {
      const Node *D = V ? V->getDefiningNode() : nullptr;
      if (!D || !isElementwiseOp(*D) || D->Layer != N->Layer ||
          any_of(Users.lookup(V),
                 [](const Node *U) { return !isElementwiseOp(*U); }) ||
          is_contained(G.getOutputs(), V))
        continue;
      Parent.try_emplace(D, D);
      Parent[Find(D)] = Find(N);
    }
  }
  DenseMap<const Node *, SmallVector<const Value *, 2>> RegionInputs;
  for (const auto &NP : G.getNodes()) {
    const Node *N = NP.get();
    if (!Parent.count(N))
      continue;
    const Node *R = Find(N);
    for (const Value *V : N->getInputs()) {
      if (!V || isConstantLike(V))
        continue;
      const Node *D = V->getDefiningNode();
      if (D && Parent.count(D) && Find(D) == R)
        continue;
      if (!is_contained(RegionInputs[R], V))
        RegionInputs[R].push_back(V);
    }
  }
  auto SavedFor = [&](const Node *N, const Value *V,
                      SmallVectorImpl<const Value *> &Out) {
    const Node *D = V->getDefiningNode();
    if (Parent.count(N) && D && Parent.count(D) && Find(D) == Find(N)) {
      for (const Value *In : RegionInputs[Find(N)])
        Out.push_back(In);
      return;
    }
    Out.push_back(V);
  };

  // A Loop/If/Scan reads the values its bodies capture (a table an
  // EmbeddingBag Loop gathers from) as well as its inputs.
  auto ReadsOf = [](const NodeFacts &F) {
    std::vector<const Value *> Reads(F.N->getInputs().begin(),
                                     F.N->getInputs().end());
    if (hasSubgraphs(*F.N))
      for (const Value *V : getCapturedValues(*F.N))
        Reads.push_back(V);
    return Reads;
  };
  // A parameter the placement serves from SSD holds no HBM (DESIGN
  // section 5) unless a reader on another class needs it there too.
  DenseSet<const Value *> OffSSD;
  for (const LayerFacts &L : LF)
    for (const NodeFacts &F : L.Nodes)
      for (const Value *V : ReadsOf(F))
        if (V && V->isParameter())
          (F.C && F.C->Class == "ssd" ? SSDOnlyParams : OffSSD).insert(V);
  for (const Value *V : OffSSD)
    SSDOnlyParams.erase(V);

  // Parameters, saved activations, layer inputs.
  DenseSet<const Value *> Saved;
  for (unsigned LI = 0; LI < LF.size(); ++LI) {
    LayerFacts &L = LF[LI];
    Saved.clear();
    DenseSet<const Value *> Inputs;
    for (const NodeFacts &F : L.Nodes) {
      for (const Value *V : ReadsOf(F)) {
        if (!V)
          continue;
        if (V->isParameter()) {
          // Counted at its first reader off the SSD class, if any.
          if (F.C && F.C->Class == "ssd")
            continue;
          if (CountedParams.insert(V).second) {
            auto TI = TableIndex.find(V);
            if (TI != TableIndex.end()) {
              TableLayer[TI->second] = LI;
              TableParamIndex[TI->second] = L.Values.Params.size();
            }
            L.Values.Params.push_back({V, ExpertParams.count(V) != 0});
          }
          continue;
        }
        const Node *D = V->getDefiningNode();
        if (!isConstantLike(V) && (!D || (unsigned)D->Layer != LI) &&
            Inputs.insert(V).second)
          L.Values.Inputs.push_back(V);
      }
      if (!F.C)
        continue;
      SmallVector<const Value *, 4> Keep;
      for (const Value *V : F.C->Cost.SavedValues)
        if (V)
          SavedFor(F.N, V, Keep);
      for (const Value *V : Keep)
        if (!isConstantLike(V) && Saved.insert(V).second)
          L.Values.Saved.push_back({V, F.AttentionCore});
    }
  }
}

void PlanEvaluator::Impl::findPeakLive(const UseMap &Users) {
  // Inference activations: per layer, the values alive at once at the
  // peak of its forward, walking its nodes in order. Alive: the layer's
  // inputs until their last use here, each output from its node until its
  // last use here, or to the layer's end when a later layer or the graph's
  // outputs read it.
  DenseSet<const Value *> GraphOutputs(G.getOutputs().begin(),
                                       G.getOutputs().end());
  for (unsigned LI = 0; LI < LF.size(); ++LI) {
    LayerFacts &L = LF[LI];
    unsigned End = L.Nodes.size();
    DenseMap<const Value *, unsigned> Last;
    auto Live = [&](const Value *V) {
      return V && !isConstantLike(V) && !V->isParameter() &&
             !fusedInternal(V, Costs, Users, GraphOutputs);
    };
    for (unsigned I = 0; I < End; ++I)
      for (const Value *V : L.Nodes[I].N->getInputs())
        if (Live(V))
          Last[V] = I;
    for (unsigned I = 0; I < End; ++I)
      for (const Value *V : L.Nodes[I].N->getOutputs()) {
        if (!Live(V))
          continue;
        bool Later = GraphOutputs.count(V) ||
                     any_of(Users.lookup(V), [&](const Node *U) {
                       return (unsigned)std::max(0, U->Layer) != LI;
                     });
        if (Later)
          Last[V] = End;
        else if (!Last.count(V))
          Last[V] = I; // unused: freed at once
      }
    double Bytes = 0, PeakBytes = 0;
    std::vector<const Value *> Alive;
    auto Add = [&](const Value *V) {
      Alive.push_back(V);
      Bytes += valueBytes(V);
    };
    auto Free = [&](const Value *V) {
      auto It = std::find(Alive.begin(), Alive.end(), V);
      if (It != Alive.end()) {
        Alive.erase(It);
        Bytes -= valueBytes(V);
      }
    };
    DenseSet<const Value *> In;
    for (unsigned I = 0; I < End; ++I)
      for (const Value *V : L.Nodes[I].N->getInputs())
        if (Live(V) &&
            (!V->getDefiningNode() ||
             (unsigned)std::max(0, V->getDefiningNode()->Layer) != LI) &&
            In.insert(V).second)
          Add(V);
    for (unsigned I = 0; I < End; ++I) {
      const Node *N = L.Nodes[I].N;
      for (const Value *V : N->getOutputs())
        if (Live(V))
          Add(V);
      if (Bytes > PeakBytes) {
        PeakBytes = Bytes;
        L.Values.PeakLive = Alive;
      }
      SmallPtrSet<const Value *, 4> Freed;
      for (const Value *V : N->getInputs())
        if (Live(V) && Last.lookup(V) == I && Freed.insert(V).second)
          Free(V);
      for (const Value *V : N->getOutputs())
        if (Live(V) && Last.lookup(V) == I && Freed.insert(V).second)
          Free(V);
    }
  }
}

void PlanEvaluator::Impl::collectTransfers() {
  // EP traffic per MoE layer.
  for (const ExpertGroup &EG : Experts) {
    if (EG.Layer >= LF.size() || !EG.Tokens || !EG.Output)
      continue;
    EPTraffic T;
    T.Stacked = EG.isStacked();
    T.NumExperts = EG.NumExperts;
    T.TopK = T.Stacked ? getRouterTopK(G, EG) : 0;
    LF[EG.Layer].EP.push_back(T);
  }

  // Activations crossing layer boundaries (pipeline Send/Recv).
  BoundaryBytes.assign(LF.size() + 1, 0);
  DenseMap<const Value *, unsigned> LastUse;
  for (const auto &NP : G.getNodes())
    for (const Value *V : NP->getInputs())
      if (V && !isConstantLike(V) && V->getDefiningNode()) {
        unsigned &U = LastUse[V];
        U = std::max<unsigned>(U, std::max(0, NP->Layer));
      }
  for (const auto &NP : G.getNodes())
    for (const Value *V : NP->getOutputs()) {
      auto It = V ? LastUse.find(V) : LastUse.end();
      if (It == LastUse.end())
        continue;
      unsigned Def = std::max(0, NP->Layer);
      for (unsigned B = Def + 1; B <= It->second && B < BoundaryBytes.size();
           ++B)
        BoundaryBytes[B] += valueBytes(V);
    }
}

void PlanEvaluator::Impl::computeModelFlops() {
  // Model FLOPs and the peak MFU is measured against: the cube's fastest
  // rate among the element types the matmuls run in (a model with one
  // fp32 matmul among fp16 ones is measured against the fp16 peak, so
  // that no op can beat the peak and MFU stays <= 1), in the format the
  // precision recipe computes them in (tf32).
  for (const LayerFacts &L : LF) {
    ModelFlops += L.Flops + (Opts.Train ? L.BackwardFlops : 0);
    for (const NodeFacts &F : L.Nodes)
      if (F.C && F.C->Cost.Unit == ComputeUnit::Cube)
        if (const DeviceClass *AC = HW.getClass("aicore"))
          if (auto P = AC->getThroughput(F.C->Cost.CubeFormat.empty()
                                             ? getDataTypeName(F.C->Cost.Elem)
                                             : StringRef(F.C->Cost.CubeFormat)))
            Peak = std::max(Peak, P->value());
  }
  if (Peak == 0)
    for (const auto &KV : HW.Device.Classes)
      for (const auto &T : KV.second.Throughput)
        Peak = std::max(Peak, T.second.value());
}

/// The attention core (what selective recompute recomputes instead of
/// storing, and what a KV cache holds the operands of): the products of
/// two activations on either side of a Softmax -- the scores feeding it
/// and the context it weights -- and the Softmax itself, found through at
/// most a few element-wise or layout ops (scale, mask, dropout, head
/// reshapes). A product of two activations elsewhere (a gating product, a
/// bilinear layer) is ordinary work.
/// What cp's a2a needs of an attention core product \p N of layer \p L:
/// a context product's output is the attention output; a scores product
/// reads Q as [B, H, S, D] (the matmul's batch dims), whose dim 1 is the
/// heads, or as [B x H, S, D] (torch's MultiheadAttention and
/// nn.TransformerEncoder fold the heads into the batch for their bmm), the
/// graph bound at \p Batch sequences.
static void noteAttentionShape(LayerFacts &L, const Node &N, bool Context,
                               int64_t Batch) {
  if (N.getOpType() == "Softmax")
    return;
  if (Context) {
    if (N.getOutput(0))
      L.QOBytes += valueBytes(N.getOutput(0));
    return;
  }
  const Value *Q = N.getInput(0);
  if (Q && Q->Type.getRank() == 4 && Q->Type.Dims[1].isStatic())
    L.QHeads = Q->Type.Dims[1].Size;
  else if (Q && Q->Type.getRank() == 3 && Q->Type.Dims[0].isStatic() &&
           Batch > 0 && Q->Type.Dims[0].Size % Batch == 0)
    L.QHeads = Q->Type.Dims[0].Size / Batch;
}

void PlanEvaluator::Impl::findAttentionCore(const UseMap &Users) {
  DenseMap<const Node *, NodeFacts *> FactsOf;
  for (LayerFacts &L : LF)
    for (NodeFacts &F : L.Nodes)
      FactsOf[F.N] = &F;
  auto IsProduct = [&](const Node *N) {
    const NodeFacts *F = FactsOf.lookup(N);
    if (!F || !F->C)
      return false;
    // A product inside a fused kernel (detect-fused-kernels) is still one.
    bool Cube = F->C->Cost.Unit == ComputeUnit::Cube ||
                (F->C->Cost.FusedInto && N->getOpType() == "MatMul");
    return Cube && none_of(N->getInputs(), [](const Value *V) {
             return V && isWeightLike(V) && V->Type.getRank() >= 2;
           });
  };
  auto IsPassThrough = [&](const Node *N) {
    const NodeFacts *F = FactsOf.lookup(N);
    return N->getOpType() != "Softmax" && N->getNumOutputs() == 1 &&
           !(F && F->C && F->C->Cost.Unit == ComputeUnit::Cube);
  };
  constexpr unsigned MaxSteps = 6;
  DenseSet<const Node *> Core, Context;
  for (const auto &NP : G.getNodes()) {
    const Node *S = NP.get();
    if (S->getOpType() != "Softmax" || !S->getInput(0) || !S->getOutput(0))
      continue;
    bool Scores = false;
    // Back to the scores' product.
    SmallVector<std::pair<const Value *, unsigned>, 8> Work = {
        {S->getInput(0), 0}};
    DenseSet<const Value *> Seen;
    while (!Work.empty()) {
      auto [V, Steps] = Work.pop_back_val();
      const Node *D = V->getDefiningNode();
      if (!D || isConstantLike(V) || !Seen.insert(V).second)
        continue;
      if (IsProduct(D)) {
        Core.insert(D);
        Scores = true;
      } else if (Steps < MaxSteps && IsPassThrough(D)) {
        for (const Value *In : D->getInputs())
          if (In)
            Work.push_back({In, Steps + 1});
      }
    }
    if (!Scores)
      continue;
    Core.insert(S);
    // On to the context's product.
    Work = {{S->getOutput(0), 0}};
    Seen.clear();
    while (!Work.empty()) {
      auto [V, Steps] = Work.pop_back_val();
      if (!Seen.insert(V).second)
        continue;
      auto U = Users.find(V);
      if (U == Users.end())
        continue;
      for (const Node *N : U->second) {
        if (IsProduct(N)) {
          Core.insert(N);
          Context.insert(N);
        } else if (Steps < MaxSteps && IsPassThrough(N) && N->getOutput(0))
          Work.push_back({N->getOutput(0), Steps + 1});
      }
    }
  }
  DenseSet<const Value *> KVCounted;
  for (LayerFacts &L : LF)
    for (NodeFacts &F : L.Nodes) {
      if (!Core.count(F.N))
        continue;
      F.AttentionCore = true;
      F.CoreNode = true;
      noteAttentionShape(L, *F.N, Context.count(F.N), Opts.Batch);
      // K^T of the scores and V of the context: each cached once, at its
      // size before any GQA repeat.
      if (F.N->getOpType() != "Softmax" && F.N->getNumInputs() >= 2 &&
          F.N->getInput(1)) {
        const Value *Src = kvCacheSource(F.N->getInput(1));
        if (KVCounted.insert(Src).second) {
          L.KVBytes += valueBytes(Src);
          L.KVElements += Src->Type.getNumElements().getValueOr(0);
        }
      }
      // A fused attention kernel keeps no scores to recompute.
      if (F.C && F.C->Cost.FusedKernel == "attention")
        F.AttentionCore = false;
    }
  // ONNX's Attention (opset 23) is the whole core in one node, as a fused
  // attention kernel is (AttentionOps.cpp: no scores kept to recompute):
  // its heads from its attributes or shapes, K and V as it takes them
  // (before its own grouped-query broadcast), the output as Q's size.
  for (LayerFacts &L : LF)
    for (NodeFacts &F : L.Nodes) {
      const Node &N = *F.N;
      Optional<AttentionDims> D;
      if (N.getOpType() == "Attention" &&
          (N.getDomain().empty() || N.getDomain() == "ai.onnx"))
        D = getAttentionDims(N);
      if (!D)
        continue;
      F.CoreNode = true;
      L.QHeads = D->QHeads;
      L.KVHeads = D->KVHeads;
      for (unsigned I : {1u, 2u})
        if (KVCounted.insert(N.getInput(I)).second) {
          L.KVBytes += valueBytes(N.getInput(I));
          L.KVElements += N.getInput(I)->Type.getNumElements().getValueOr(0);
        }
      if (N.getOutput(0))
        L.QOBytes += valueBytes(N.getOutput(0));
    }
  // K/V heads from the sizes, whatever their layout: K and V hold
  // 2 * B * S * KVH * D elements, the output B * S * QH * D.
  for (LayerFacts &L : LF) {
    double QOElems = 0;
    for (const NodeFacts &F : L.Nodes)
      if (Context.count(F.N) && F.N->getOutput(0))
        QOElems += F.N->getOutput(0)->Type.getNumElements().getValueOr(0);
    if (L.QHeads > 0 && QOElems > 0)
      L.KVHeads = std::llround(L.QHeads * L.KVElements / (2 * QOElems));
  }
}

} // namespace loom
