//===- AttentionRules.cpp - Sharding rules of opset 23's LLM ops ----------===//
//
// Attention (opset 23) computes each query head from its own Q slice and
// the K and V of its kv head (grouped-query attention: q head h reads kv
// head h / (q_heads / kv_heads)). Splitting the heads into tp contiguous
// blocks is exact when tp divides both head counts: rank r's q heads
// [r Hq/tp, (r+1) Hq/tp) read exactly the kv heads [r Hkv/tp,
// (r+1) Hkv/tp) -- Megatron's head split, the one the spelled-out form
// gets from its column-parallel Q/K/V projections and the per-head
// Reshape, with kv heads divided as for GQA today. The heads are dim 1 of
// 4-D Q, K, V, the KV cache and the outputs, and whole blocks of dim 2 of
// 3-D ones (heads x head size); a mask with a heads dim of Hq is split
// with them, one that broadcasts over heads is read whole. The heads
// attributes (q_num_heads, kv_num_heads) become per-rank counts
// (localizeHeadAttributes). On cp's sequence axis with cp_algo=a2a the
// tokens' split moves to the heads (Ulysses). Otherwise every input is
// gathered.
//
// RotaryEmbedding rotates each head's vector by its position: a heads
// split of X (dim 1 of 4-D, dim 2 of 3-D with num_heads) is exact, the
// cos/sin tables and position ids being read whole; num_heads becomes the
// per-rank count; on cp's sequence axis a split of the tokens is exact
// too, the position ids (or the per-token caches) split with them.
// RMSNormalization is a LayerNormalization without the
// mean: ruleLayerNorm's splits (dims below its axis) hold.
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"
#include "loom/IR/AttentionOp.h"

using namespace llvm;

namespace loom {
namespace shardrules {

void ruleAttention(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  replicateAll(N, NS);
  Optional<AttentionDims> D = getAttentionDims(N);
  if (!D || !Ctx.isDivisible(D->QHeads) || !Ctx.isDivisible(D->KVHeads))
    return;
  AxisSpec CQ = Ctx.getSpec(N.getInput(0));
  int HD = (int)D->headDim();
  // A query split on another dim (batch, tokens) is gathered rather than
  // moved to the heads: keep to the split the projections made. On the
  // sequence axis with cp_algo=a2a, moving the tokens' split to the heads
  // is the lowering (Ulysses: one all-to-all each for Q, K, V and back).
  int SeqDim = D->Rank == 4 ? 2 : 1;
  bool Ulysses = Ctx.isSequenceAxis() && !Ctx.isSequenceRing() &&
                 CQ.isSplit() && CQ.Blocks.empty() && CQ.Dim == SeqDim;
  if (CQ.isSplit() && (CQ.Dim != HD || !CQ.Blocks.empty()) && !Ulysses)
    return;
  // With tp inside cp (RuleContext::getHeadGroups) Ulysses moves the heads
  // in tp's groups, each divided among the cp ranks (MatmulRules.cpp).
  unsigned Groups = Ulysses ? Ctx.getHeadGroups() : 1;
  auto HeadsOf = [&](const Value *V, int Dim) {
    AxisSpec S = AxisSpec::split(Dim);
    Shape VS = shapeOf(V);
    if (Groups > 1 && (unsigned)Dim < VS.size() && VS[Dim] % Groups == 0)
      S.Blocks.assign(Groups, VS[Dim] / Groups);
    return S;
  };
  for (unsigned I : {0u, 1u, 2u})
    NS.InputSpecs[I] = HeadsOf(N.getInput(I), HD);
  if (N.getNumInputs() > 3)
    if (const Value *M = N.getInput(3)) {
      Shape S = shapeOf(M);
      if (S.size() == 4 && S[1] == D->QHeads && S[1] > 1)
        NS.InputSpecs[3] = HeadsOf(M, 1);
    }
  for (unsigned I = 4; I < N.getNumInputs() && I < 6; ++I)
    if (N.getInput(I))
      NS.InputSpecs[I] = HeadsOf(N.getInput(I), 1);
  NS.OutputSpecs[0] = HeadsOf(N.getOutput(0), HD);
  for (unsigned O = 1; O < N.getNumOutputs(); ++O)
    if (N.getOutput(O))
      NS.OutputSpecs[O] = HeadsOf(N.getOutput(O), 1);
}

void ruleRotaryEmbedding(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  replicateAll(N, NS);
  const Value *X = N.getInput(0);
  AxisSpec CX = Ctx.getSpec(X);
  if (!X || !CX.isSplit() || !CX.Blocks.empty())
    return;
  Shape S = shapeOf(X);
  // cp's tokens (the sequence axis): each rank rotates its own tokens by
  // their positions -- position_ids [B, S] split with them, or, without
  // them, the caches [B, S, D/2] cut to the rank's rows.
  int SeqDim = S.size() == 4 ? 2 : 1;
  if (Ctx.isSequenceAxis() && (S.size() == 4 || S.size() == 3) &&
      CX.Dim == SeqDim && Ctx.isDivisible(S[SeqDim])) {
    const Value *Pos = N.getNumInputs() > 3 ? N.getInput(3) : nullptr;
    if (Pos && shapeOf(Pos).size() == 2) {
      NS.InputSpecs[3] = AxisSpec::split(1);
    } else if (!Pos && shapeOf(N.getInput(1)).size() == 3 &&
               shapeOf(N.getInput(2)).size() == 3) {
      NS.InputSpecs[1] = NS.InputSpecs[2] = AxisSpec::split(1);
    } else {
      return;
    }
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs[0] = CX;
    return;
  }
  int64_t Heads = 0;
  if (S.size() == 4 && CX.Dim == 1)
    Heads = S[1];
  else if (S.size() == 3 && CX.Dim == 2)
    Heads = N.getAttrInt("num_heads", 0);
  if (Heads <= 0 || !Ctx.isDivisible(Heads))
    return;
  NS.InputSpecs[0] = CX;
  NS.OutputSpecs[0] = CX;
}

} // namespace shardrules

void localizeHeadAttributes(const Node &N, const OpSharding &S,
                            unsigned AxisSize, std::vector<Attribute> &Attrs) {
  StringRef Op = N.getOpType();
  if ((Op != "Attention" && Op != "RotaryEmbedding") || AxisSize <= 1 ||
      S.InputSpecs.empty() || !S.InputSpecs[0].isSplit() ||
      !(N.getDomain().empty() || N.getDomain() == "ai.onnx"))
    return;
  for (Attribute &A : Attrs)
    if (A.K == Attribute::Kind::Int &&
        (A.Name == "q_num_heads" || A.Name == "kv_num_heads" ||
         A.Name == "num_heads"))
      A.I /= AxisSize;
}

} // namespace loom
