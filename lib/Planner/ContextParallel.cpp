//===- ContextParallel.cpp - What context parallelism costs per layer -----===//
#include "loom/Planner/ContextParallel.h"

#include <algorithm>
#include <string>

namespace loom {

CPLayerCost costContextParallelLayer(CPAlgo Algo, unsigned CP,
                                     const CPLayerInputs &In,
                                     const GroupShape &CPG,
                                     const HardwareModel &HW) {
  CPLayerCost R;
  if (CP <= 1)
    return R;
  if (Algo == CPAlgo::Ring) {
    // cp - 1 steps; in each, the held chunk's attention (1/cp of the
    // rank's: the causal 2*cp chunking balances it) runs beside the send
    // of the next chunk, over the slowest link the ring crosses.
    double Steps = CP - 1;
    double Send =
        collectiveTime(CollectiveKind::SendRecv, In.KVBytes, CPG, HW).Seconds;
    R.FwdS = Steps * Send;
    R.FwdExposedS = Steps * std::max(0.0, Send - In.AttnFwdS / CP);
    if (In.Train) {
      double BwdSend =
          collectiveTime(CollectiveKind::SendRecv, 2 * In.KVBytes, CPG, HW)
              .Seconds;
      R.BwdS = Steps * BwdSend;
      R.BwdExposedS = Steps * std::max(0.0, BwdSend - In.AttnBwdS / CP);
    }
    return R;
  }
  // Ulysses: Q, K and V scattered over heads and gathered over the
  // sequence, the output back the other way; each its own all-to-all of the
  // rank's share (DeepSpeed's DistributedAttention, one _SeqAllToAll per
  // tensor), K and V before any GQA repeat (the role graphs move them there,
  // lib/Shard/Propagation.cpp).
  auto A2A = [&](double Bytes) {
    return collectiveTime(CollectiveKind::AllToAll, Bytes, CPG, HW).Seconds;
  };
  R.FwdS = R.FwdExposedS = 2 * A2A(In.QOBytes) + 2 * A2A(In.KVBytes / 2);
  if (In.Train)
    R.BwdS = R.BwdExposedS = R.FwdS;
  return R;
}

std::string getCPIllegalReason(CPAlgo Algo, unsigned CP, unsigned TP,
                               int64_t Seq, int64_t QHeads, int64_t KVHeads) {
  if (CP <= 1)
    return "";
  std::string C = "cp=" + std::to_string(CP);
  if (Seq <= 0)
    return C + " splits the sequence, and no sequence dim is bound (--seq)";
  int64_t Chunks = Algo == CPAlgo::Ring ? 2 * (int64_t)CP : CP;
  if (Seq % Chunks)
    return C + " with cp_algo=" + getCPAlgoName(Algo).str() + ": sequence " +
           std::to_string(Seq) + " is not divisible by " +
           std::to_string(Chunks) +
           (Algo == CPAlgo::Ring ? " (2*cp chunks balance the causal ring)"
                                 : "");
  if (Algo == CPAlgo::A2A) {
    int64_t Need = (int64_t)TP * CP;
    if (QHeads <= 0 || KVHeads <= 0)
      return C + " with cp_algo=a2a splits the heads, and the model's "
                 "attention heads were not found";
    // K/V heads that tp*cp does not divide are repeated to the query heads
    // first (getUlyssesKVBytes); tp alone must still divide them, as
    // MindSpeed asks (validate_args: num_query_groups divisible by tp).
    if (QHeads % Need || KVHeads % TP)
      return C + " with cp_algo=a2a: " + std::to_string(QHeads) +
             " heads are not divisible by tp*cp = " + std::to_string(Need) +
             (KVHeads % TP ? " or " + std::to_string(KVHeads) +
                                 " K/V heads by tp = " + std::to_string(TP)
                           : std::string());
  }
  return "";
}

double getUlyssesKVBytes(unsigned CP, unsigned TP, int64_t QHeads,
                         int64_t KVHeads, double KVBytes) {
  if (KVHeads <= 0 || QHeads <= KVHeads || KVHeads % ((int64_t)TP * CP) == 0)
    return KVBytes;
  return KVBytes * (double)QHeads / (double)KVHeads;
}

} // namespace loom
