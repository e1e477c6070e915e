//===- AttentionOps.cpp - Cost rules for ONNX's LLM and signal ops --------===//
//
// Attention (opset 23) computes softmax(scale * Q K^T + mask) V per head,
// as its ONNX function body spells it: two products on the cube, Q K^T
// ([Sq x d] by [d x Skv] per query head) and P V ([Sq x Skv] by
// [Skv x dv]); grouped-query K and V are read once per kv head. Unfused,
// the Sq x Skv scores go through HBM: written by the first product, read
// and written by the scale, by the mask (or causal bias) and by the
// softmax, read by the second. The backward differentiates both products
// (2x their FLOPs, as MatMul's rule counts). detect-fused-kernels replaces
// this cost with the fused attention kernel's (loom/Cost/FusedKernels.h)
// when the hardware offers one for the element type: the op is the fused
// kernel it names, as the spelled-out region of an opset-17 export is.
// The scores the unfused form would keep for its backward are not counted
// as saved (they are no value of the graph): an unfused Attention's memory
// is that of the fused kernel.
//
// RotaryEmbedding (23) rotates pairs of X's last dim (rotary_embedding_dim
// of them, all by default): x1 cos - x2 sin, x2 cos + x1 sin = 6 FLOPs per
// rotated pair, 3 per element, the same as the Mul/Neg/Concat/Mul/Add
// spelling counts for the rotated part (2 muls, a neg, an add per
// element); untouched elements are copied. Backward: the inverse rotation
// (3 per element); saved: nothing but the tables.
//
// DFT (20): a radix-2 FFT's 5 n log2 n real FLOPs per transform of length
// n (Cooley-Tukey as counted by FFTW's benchmark convention). AffineGrid
// (20): a [2x3] or [3x4] affine map per output point (2 FLOPs per
// multiply-add). GridSample (20): bilinear (trilinear) interpolation, 4
// (8) taps of a multiply-add per output element plus the weights.
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"
#include "loom/IR/AttentionOp.h"

#include <cmath>

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

void costAttention(const Node &N, int64_t, OpCost &C) {
  Optional<AttentionDims> D = getAttentionDims(N);
  if (!D) {
    setNoRule(C, "Attention needs 3-D or 4-D Q, K, V with whole heads and "
                 "q heads a multiple of kv heads");
    return;
  }
  double B = (double)D->Batch, H = (double)D->QHeads, Sq = (double)D->QSeq,
         Skv = (double)D->KVSeq;
  double Score = 2 * B * H * Sq * Skv * (double)D->HeadSize;
  double Context = 2 * B * H * Sq * Skv * (double)D->VHeadSize;
  C.Unit = ComputeUnit::Cube;
  C.MM.Batch = D->Batch * D->QHeads;
  C.MM.M = D->QSeq;
  C.MM.N = D->VHeadSize;
  C.MM.K = D->KVSeq;
  C.Flops = Score + Context;
  C.BackwardFlops = 2 * (Score + Context);
  // The scores' trips through HBM: written, then read and written by the
  // scale, the mask (is_causal or attn_mask) and the softmax, then read.
  bool Masked = D->Causal || (N.getNumInputs() > 3 && N.getInput(3));
  double Passes = 2 + (Masked ? 1 : 0);
  double ScoreBytes = B * H * Sq * Skv * (double)getDataTypeBits(C.Elem) / 8;
  C.BytesRead += ScoreBytes * (1 + Passes);
  C.BytesWritten += ScoreBytes * (1 + Passes);
  for (unsigned I : {0u, 1u, 2u})
    saveValue(C, N.getInput(I));
  saveValue(C, N.getOutput(0));
  C.Note = "unfused Attention (its function body); the fused attention "
           "kernel replaces this cost where the hardware offers one";
}

void costRotary(const Node &N, int64_t, OpCost &C) {
  const Value *X = N.getInput(0);
  SmallVector<int64_t, 4> S = staticShape(X);
  double Elems = numElements(X);
  int64_t Rot = N.getAttrInt("rotary_embedding_dim", 0);
  double Frac = 1;
  if (Rot > 0 && !S.empty()) {
    // 3-D X packs the heads in its last dim: the rotated share is
    // rotary_embedding_dim of each head's size.
    int64_t Heads = S.size() == 3 ? N.getAttrInt("num_heads", 0) : 1;
    int64_t Head = Heads > 0 ? S.back() / Heads : S.back();
    if (Head > 0)
      Frac = std::min(1.0, (double)Rot / (double)Head);
  }
  C.Unit = ComputeUnit::Vector;
  C.Flops = 3 * Elems * Frac;
  C.BackwardFlops = 3 * Elems * Frac;
}

void costDFT(const Node &N, int64_t, OpCost &C) {
  SmallVector<int64_t, 4> Out = staticShape(N.getOutput(0));
  SmallVector<int64_t, 4> In = staticShape(N.getInput(0));
  if (Out.size() < 2 || In.size() != Out.size()) {
    setNoRule(C, "DFT needs static input and output of rank >= 2");
    return;
  }
  int64_t Axis = -2;
  if (N.getNumInputs() > 2 && N.getInput(2)) {
    Optional<std::vector<int64_t>> A = getConstantInts(N.getInput(2));
    if (!A || A->empty()) {
      setNoRule(C, "DFT's axis is not a constant");
      return;
    }
    Axis = (*A)[0];
  }
  unsigned Ax = normalizeAxis(Axis, Out.size());
  double Len = (double)std::max(In[Ax], Out[Ax]);
  double Transforms = numElements(N.getOutput(0)) / 2 / (double)Out[Ax];
  C.Unit = ComputeUnit::Vector;
  C.Flops = Len > 1 ? 5 * Len * std::log2(Len) * Transforms : 0;
  C.BackwardFlops = C.Flops;
}

void costAffineGrid(const Node &N, int64_t, OpCost &C) {
  SmallVector<int64_t, 4> Out = staticShape(N.getOutput(0));
  double Coords = Out.empty() ? 0 : (double)Out.back();
  // Each output coordinate: Coords + 1 multiply-adds over the point.
  C.Unit = ComputeUnit::Vector;
  C.Flops = 2 * (Coords + 1) * numElements(N.getOutput(0));
  C.BackwardFlops = C.Flops;
}

void costGridSample(const Node &N, int64_t, OpCost &C) {
  unsigned Spatial = N.getInput(0) ? N.getInput(0)->Type.getRank() - 2 : 2;
  double Taps = std::pow(2.0, (double)Spatial);
  StringRef Mode = N.getAttrString("mode", "linear");
  if (Mode == "nearest")
    Taps = 1;
  else if (Mode == "cubic" || Mode == "bicubic")
    Taps = std::pow(4.0, (double)Spatial);
  C.Unit = ComputeUnit::Vector;
  // A multiply-add per tap, and the tap weights (2 per tap).
  C.Flops = 4 * Taps * numElements(N.getOutput(0));
  C.BackwardFlops = C.Flops;
  saveValue(C, N.getInput(1));
}

} // namespace

void addAttentionRules(RuleTable &T) { T["Attention"] = {costAttention}; }

void addSignalRules(RuleTable &T) {
  T["RotaryEmbedding"] = {costRotary};
  T["DFT"] = {costDFT};
  T["AffineGrid"] = {costAffineGrid};
  T["GridSample"] = {costGridSample};
}

} // namespace opcost
} // namespace loom
