//===- AttentionOp.cpp - The dims of ONNX's Attention-23 op ---------------===//
#include "loom/IR/AttentionOp.h"

using namespace llvm;

namespace loom {

double AttentionDims::causalFraction() const {
  if (!Causal || QSeq <= 0 || KVSeq <= 0)
    return 1.0;
  // Row i keeps min(i + 1, KVSeq) keys.
  double Kept = 0;
  int64_t Full = std::min(QSeq, KVSeq);
  Kept += (double)Full * (double)(Full + 1) / 2;
  Kept += (double)(QSeq - Full) * (double)KVSeq;
  return Kept / ((double)QSeq * (double)KVSeq);
}

Optional<AttentionDims> getAttentionDims(const Node &N) {
  if (N.getOpType() != "Attention" ||
      !(N.getDomain().empty() || N.getDomain() == "ai.onnx") ||
      N.getNumInputs() < 3)
    return None;
  const Value *Q = N.getInput(0), *K = N.getInput(1), *V = N.getInput(2);
  if (!Q || !K || !V || !Q->Type.isStatic() || !K->Type.isStatic() ||
      !V->Type.isStatic())
    return None;
  auto QS = Q->Type.getStaticShape(), KS = K->Type.getStaticShape(),
       VS = V->Type.getStaticShape();
  AttentionDims D;
  D.Rank = QS.size();
  if ((D.Rank != 3 && D.Rank != 4) || KS.size() != D.Rank ||
      VS.size() != D.Rank)
    return None;
  D.Batch = QS[0];
  if (D.Rank == 4) {
    D.QHeads = QS[1];
    D.KVHeads = KS[1];
    D.QSeq = QS[2];
    D.KVSeq = KS[2];
    D.HeadSize = QS[3];
    D.VHeadSize = VS[3];
  } else {
    D.QHeads = N.getAttrInt("q_num_heads", 0);
    D.KVHeads = N.getAttrInt("kv_num_heads", 0);
    if (D.QHeads <= 0 || D.KVHeads <= 0 || QS[2] % D.QHeads ||
        KS[2] % D.KVHeads || VS[2] % D.KVHeads)
      return None;
    D.QSeq = QS[1];
    D.KVSeq = KS[1];
    D.HeadSize = QS[2] / D.QHeads;
    D.VHeadSize = VS[2] / D.KVHeads;
  }
  if (D.KVHeads <= 0 || D.QHeads % D.KVHeads)
    return None;
  if (N.getNumInputs() > 4)
    if (const Value *Past = N.getInput(4)) {
      if (!Past->Type.isStatic() || Past->Type.getRank() != 4)
        return None;
      D.KVSeq += Past->Type.getStaticShape()[2];
    }
  D.Causal = N.getAttrInt("is_causal", 0) != 0;
  return D;
}

} // namespace loom
