//===- MatmulRules.cpp - Sharding rules of MatMul and Gemm ---------------===//
//
// Weight matmuls follow Megatron-LM (Shoeybi et al. 2019, §3): with the
// activation X replicated, Y = X W with W split by columns gives Y split on
// its last dim (column parallel); with X split on its last dim (k), W split
// by rows gives Y as partial sums, Y = sum_r X_r W_r (row parallel). A
// column-parallel output that a Split along the last axis consumes (a fused
// QKV projection) splits each block of W's columns, so each rank holds the
// same heads of Q, K and V.
// Activation x activation (attention scores and context): batch dims and
// the free dims keep their split; a split on the contracted dim k of both
// operands gives partial sums.
// On context parallelism's axis (RuleContext::isSequenceAxis) weights stay
// whole: a weight matmul keeps its activation's token split (rows are
// independent), and one whose activation arrives split on k (the heads of
// an attention's output) asks for it on the tokens instead, which the
// transition makes an all-to-all. An activation x activation matmul with a
// batch dim (the heads of [B, H, S, D]) splits that dim: Q, K and V move
// from tokens to heads by all-to-all and each rank attends over the whole
// sequence with its heads (DeepSpeed-Ulysses, Jacobs et al. 2023, §3).
// Under the ring (RuleContext::isSequenceRing) the usual rule stands: the
// queries keep their token split and K and V are read whole, which the role
// graphs lower to the K/V ring (lib/Shard/RingAttention.cpp).
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"
#include "llvm/ADT/STLExtras.h"

using namespace llvm;

namespace loom {
namespace shardrules {

namespace {

/// Column-parallel output blocks: the sizes of a Split along the last axis
/// that consumes \p Out (directly or after a bias Add), each divisible, or
/// the packed parts a Reshape unpacks it into.
std::vector<int64_t> findBlocks(const Value *Out, const RuleContext &Ctx) {
  const Value *V = Out;
  for (unsigned Depth = 0; Depth < 2; ++Depth) {
    ArrayRef<const Node *> Us = Ctx.getUsers(V);
    if (Us.size() != 1)
      return {};
    const Node *U = Us.front();
    unsigned Rank = V->Type.getRank();
    if (U->getOpType() == "Split" && U->getInput(0) == V &&
        normAxis(U->getAttrInt("axis", 0), Rank) == (int)Rank - 1) {
      std::vector<int64_t> Sizes;
      if (Optional<std::vector<int64_t>> A = U->getAttrInts("split"))
        Sizes = *A;
      else if (Optional<std::vector<int64_t>> A =
                   getConstantInts(U->getInput(1)))
        Sizes = *A;
      else {
        int64_t Last = shapeOf(V).empty() ? 0 : shapeOf(V).back();
        unsigned K = U->getNumOutputs();
        if (K == 0 || Last % K)
          return {};
        Sizes.assign(K, Last / K);
      }
      if (Sizes.size() < 2 ||
          !all_of(Sizes, [&](int64_t S) { return Ctx.isDivisible(S); }))
        return {};
      return Sizes;
    }
    // A Reshape unpacking the last dim into [K, heads, ...] (timm's
    // qkv.reshape(B, N, 3, heads, head_dim)): K blocks, each split on its
    // heads, where the axis does not divide K itself (then the plain split
    // already lands on K).
    if (U->getOpType() == "Reshape" && U->getInput(0) == V) {
      Shape SV = shapeOf(V), SY = shapeOf(U->getOutput(0));
      if (SV.empty() || SY.empty())
        return {};
      int64_t Pre = product(makeArrayRef(SV).drop_back()), L = SV.back();
      int64_t Acc = 1;
      unsigned J = 0;
      while (J < SY.size() && Acc < Pre)
        Acc *= SY[J++];
      if (Acc != Pre || J + 1 >= SY.size())
        return {};
      int64_t K = SY[J];
      if (K <= 1 || Ctx.isDivisible(K) || L % K || !Ctx.isDivisible(L / K) ||
          !Ctx.isDivisible(SY[J + 1]))
        return {};
      return std::vector<int64_t>(K, L / K);
    }
    // A bias Add between the projection and the Split.
    if (U->getOpType() == "Add" && U->getNumOutputs() == 1) {
      V = U->getOutput(0);
      continue;
    }
    return {};
  }
  return {};
}

/// The weight matmul Y = A B on the sequence axis: A's token split kept.
void weightMatMulOnSequence(const AxisSpec &CA, unsigned RA, unsigned RY,
                            const Shape &SA, RuleContext &Ctx, OpSharding &NS) {
  if (!CA.isSplit() || (!CA.Blocks.empty() && CA.Dim != (int)RA - 1))
    return;
  int D = CA.Dim;
  if (D == (int)RA - 1) {
    // Split on k: back to the tokens, the matmul's rows ([B, S, d]).
    D = RA - 2;
    if (SA[D] <= 1 || !Ctx.isDivisible(SA[D]))
      return;
  }
  int OutDim = D + (int)RY - (int)RA;
  if (OutDim < 0)
    return;
  NS.InputSpecs[0] = AxisSpec::split(D);
  NS.OutputSpecs[0] = AxisSpec::split(OutDim);
}

/// The batch dim an activation x activation matmul splits on the sequence
/// axis: the innermost batch dim of Y (the heads) both operands have
/// whole, or -1.
int getSequenceAxisBatchDim(const Shape &SA, const Shape &SB, const Shape &SY,
                            const RuleContext &Ctx) {
  unsigned RY = SY.size();
  if (RY < 3)
    return -1;
  int D = RY - 3;
  auto Has = [&](const Shape &S) {
    int L = D - (int)(RY - S.size());
    return L >= 0 && S[L] == SY[D];
  };
  if (SY[D] <= 1 || !Ctx.isDivisible(SY[D]) || !Has(SA) || !Has(SB))
    return -1;
  return D;
}

} // namespace

void ruleMatMul(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  const Value *A = N.getInput(0), *B = N.getInput(1), *Y = N.getOutput(0);
  // A weight's split never falls on the activation's rows: those may be a
  // data-dependent count (the tokens an index-routed expert gathered,
  // NonZero's), -1 here; the other splits need static shapes.
  Shape SA = rankedShapeOf(A), SB = shapeOf(B), SY = rankedShapeOf(Y);
  replicateAll(N, NS);
  if (SA.size() < 2 || SB.size() < 2 || SY.size() < 2)
    return;
  bool Static = none_of(SA, [](int64_t D) { return D < 0; }) &&
                none_of(SY, [](int64_t D) { return D < 0; });
  int Dummy = 0;
  bool BWeight = traceWeight(B, Dummy) != nullptr;
  Dummy = 0;
  bool AWeight = traceWeight(A, Dummy) != nullptr;
  AxisSpec CA = Ctx.getSpec(A), CB = Ctx.getSpec(B);
  unsigned RY = SY.size(), RA = SA.size(), RB = SB.size();
  if (BWeight && !AWeight && Ctx.isSequenceAxis()) {
    if (Static)
      weightMatMulOnSequence(CA, RA, RY, SA, Ctx, NS);
    return;
  }
  if (BWeight && !AWeight) {
    int K = RB - 2, NDim = RB - 1;
    if (CA.isPartial())
      CA = AxisSpec();
    if (CA.isSplit() && CA.Dim == (int)RA - 1 && CA.Blocks.empty() &&
        Ctx.isDivisible(SB[K]) && Ctx.splitWeight(B, K, {})) {
      // Row parallel: partial sums.
      NS.InputSpecs = {CA, Ctx.getStoredSpec(B)};
      NS.OutputSpecs = {AxisSpec::partial()};
      return;
    }
    // Column parallel (weights [d, f], or stacked experts [E, d, f]: f is
    // split): the activation is gathered first.
    if ((RB == 2 || RB == 3) && Ctx.isDivisible(SB[NDim])) {
      std::vector<int64_t> Blocks = findBlocks(Y, Ctx);
      if (Ctx.splitWeight(B, NDim, Blocks)) {
        AxisSpec Out = AxisSpec::split(RY - 1);
        Out.Blocks = Blocks;
        NS.InputSpecs = {AxisSpec(), Ctx.getStoredSpec(B)};
        NS.OutputSpecs = {Out};
        return;
      }
    }
    return;
  }
  if (!Static)
    return;
  // Activation x activation (attention scores and context). Where a split
  // of an operand lands in Y: -1 on the contracted k, -100 unsplit.
  // A blocked split (Reshape's: the heads of each sample of a [B x heads,
  // S, D] batch) only on a batch dim, where the blocks are whole matrices.
  auto ToOut = [&](const AxisSpec &S, unsigned Rank, bool IsA) -> int {
    if (!S.isSplit() || (!S.Blocks.empty() && S.Dim + 2 >= (int)Rank))
      return -100;
    int D = S.Dim;
    if (IsA && D == (int)Rank - 1)
      return -1; // k
    if (!IsA && D == (int)Rank - 2)
      return -1; // k
    if (IsA && D == (int)Rank - 2)
      return RY - 2;
    if (!IsA && D == (int)Rank - 1)
      return RY - 1;
    return D + (int)(RY - Rank);
  };
  // Linear in each operand: a partial times a replicated one is partial.
  if (CA.isPartial() && !CB.isPartial() && !CB.isSplit()) {
    NS.InputSpecs = {CA, AxisSpec()};
    NS.OutputSpecs = {AxisSpec::partial()};
    return;
  }
  if (CB.isPartial() && !CA.isPartial() && !CA.isSplit()) {
    NS.InputSpecs = {AxisSpec(), CB};
    NS.OutputSpecs = {AxisSpec::partial()};
    return;
  }
  if (CA.isPartial())
    CA = AxisSpec();
  if (CB.isPartial())
    CB = AxisSpec();
  int OA = ToOut(CA, RA, true), OB = ToOut(CB, RB, false);
  const int OA0 = OA, OB0 = OB;
  int Heads = -1;
  if (Ctx.isSequenceAxis() && !Ctx.isSequenceRing() &&
      (CA.isSplit() || CB.isSplit())) {
    Heads = getSequenceAxisBatchDim(SA, SB, SY, Ctx);
    if (Heads >= 0)
      OA = OB = Heads;
  }
  if (OA == -1 && OB == -1) {
    NS.InputSpecs = {CA, CB};
    NS.OutputSpecs = {AxisSpec::partial()};
    return;
  }
  int OutDim = OA >= 0 ? OA : (OB >= 0 ? OB : -1);
  if (OutDim < 0)
    return;
  std::vector<int64_t> Blocks = OutDim == OA0   ? CA.Blocks
                                : OutDim == OB0 ? CB.Blocks
                                                : std::vector<int64_t>();
  // Heads folded into the batch ([B x H, S, D]) move as each sequence's
  // heads: B blocks of H, as the rank's heads of each sample that the
  // context's reshape back to [S, B, H x D] keeps on the H x D dim. With
  // tp inside cp (RuleContext::getHeadGroups), each block of H is tp's
  // groups of H / tp.
  unsigned NB = (Heads == 0 ? Ctx.getSequences() : 1) * Ctx.getHeadGroups();
  if (OutDim == Heads && Blocks.empty() && NB > 1 && SY[Heads] % NB == 0)
    Blocks.assign(NB, SY[Heads] / NB);
  // The other operand follows: split on the same output dim, or broadcast.
  auto Need = [&](unsigned Rank, const Shape &S, bool IsA) -> AxisSpec {
    int Local;
    if (OutDim == (int)RY - 2)
      Local = IsA ? (int)Rank - 2 : -1;
    else if (OutDim == (int)RY - 1)
      Local = IsA ? -1 : (int)Rank - 1;
    else
      Local = OutDim - (int)(RY - Rank);
    if (Local < 0 || S[Local] == 1)
      return AxisSpec();
    AxisSpec Want = AxisSpec::split(Local);
    Want.Blocks = Blocks;
    return Want;
  };
  if (!Ctx.isDivisible(SY[OutDim]) ||
      !all_of(Blocks, [&](int64_t B) { return Ctx.isDivisible(B); }))
    return;
  NS.InputSpecs = {Need(RA, SA, true), Need(RB, SB, false)};
  NS.OutputSpecs = {AxisSpec::split(OutDim)};
  NS.OutputSpecs[0].Blocks = Blocks;
}

void ruleGemm(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  const Value *A = N.getInput(0), *B = N.getInput(1), *C = N.getInput(2);
  Shape SA = shapeOf(A), SB = shapeOf(B);
  replicateAll(N, NS);
  int Dummy = 0;
  if (SA.size() != 2 || SB.size() != 2 || !traceWeight(B, Dummy))
    return;
  if (Ctx.isSequenceAxis()) {
    // Rows are tokens: a row split passes through; the bias is whole.
    // One arriving split on k (the heads of an attention's output, torch's
    // MultiheadAttention's [S x B, E] out-projection) goes back to the
    // rows, which the transition makes an all-to-all.
    AxisSpec CA = Ctx.getSpec(A);
    if (N.getAttrInt("transA", 0) || !CA.isSplit())
      return;
    if (CA.Dim == 1 && SA[0] > 1 && Ctx.isDivisible(SA[0]))
      CA = AxisSpec::split(0);
    if (CA.Dim == 0 && CA.Blocks.empty()) {
      NS.InputSpecs[0] = CA;
      NS.OutputSpecs[0] = CA;
    }
    return;
  }
  bool TransA = N.getAttrInt("transA", 0), TransB = N.getAttrInt("transB", 0);
  int KDimB = TransB ? 1 : 0, NDimB = TransB ? 0 : 1;
  int KDimA = TransA ? 0 : 1;
  AxisSpec CA = Ctx.getSpec(A);
  if (CA.isPartial())
    CA = AxisSpec();
  if (CA.isSplit() && CA.Dim == KDimA && Ctx.isDivisible(SB[KDimB]) &&
      Ctx.splitWeight(B, KDimB, {})) {
    // Row parallel. A bias is added once, after the reduction.
    setRowParallel(N, CA, Ctx.getStoredSpec(B), C != nullptr, NS);
    return;
  }
  if (!Ctx.isDivisible(SB[NDimB]) || !Ctx.splitWeight(B, NDimB, {}))
    return;
  // Column parallel; a bias over the columns is split with them.
  NS.InputSpecs = {AxisSpec(), Ctx.getStoredSpec(B)};
  if (C) {
    Shape SC = shapeOf(C);
    AxisSpec CS;
    if (!SC.empty() && SC.back() == SB[NDimB]) {
      CS = AxisSpec::split(SC.size() - 1);
      if (C->isParameter())
        Ctx.splitWeight(C, SC.size() - 1, {});
    }
    NS.InputSpecs.push_back(CS);
  }
  NS.OutputSpecs = {AxisSpec::split(1)};
}

} // namespace shardrules
} // namespace loom
