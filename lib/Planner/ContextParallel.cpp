//===- ContextParallel.cpp - What context parallelism costs per layer -----===//
#include "loom/Planner/ContextParallel.h"

#include <algorithm>
#include <string>

namespace loom {

CPLayerCost costContextParallelLayer(const ParallelPlan &P,
                                     const CPLayerInputs &In,
                                     const GroupShape &UlyssesG,
                                     const GroupShape &RingG,
                                     const HardwareModel &HW) {
  CPLayerCost R;
  if (P.CP <= 1)
    return R;
  // Ulysses (a2a, and the inner level of hybrid): Q, K and V scattered
  // over heads and gathered over the sequence, the output back the other
  // way; each its own all-to-all of the rank's share (DeepSpeed's
  // DistributedAttention, one _SeqAllToAll per tensor), K and V before any
  // GQA repeat (the role graphs move them there,
  // lib/Shard/Propagation.cpp). Nothing runs beside them.
  if (P.getCPUlyssesSize() > 1) {
    auto A2A = [&](double Bytes) {
      return collectiveTime(CollectiveKind::AllToAll, Bytes, UlyssesG, HW)
          .Seconds;
    };
    double S = 2 * A2A(In.QOBytes) + 2 * A2A(In.KVBytes / 2);
    R.FwdS = R.FwdExposedS = S;
    if (In.Train)
      R.BwdS = R.BwdExposedS = S;
  }
  // The ring (ring, and the outer level of hybrid): ring - 1 steps; in
  // each, the held chunk's attention (1/ring of the rank's: the causal
  // 2*ring chunking balances it) runs beside the send of the next chunk,
  // over the slowest link the ring crosses. After hybrid's all-to-alls a
  // rank's K/V block has the bytes it had before them (the u ranks' tokens,
  // 1/u of the heads).
  unsigned Ring = P.getCPRingSize();
  if (Ring > 1) {
    double Steps = Ring - 1;
    double Send =
        collectiveTime(CollectiveKind::SendRecv, In.KVBytes, RingG, HW).Seconds;
    R.FwdS += Steps * Send;
    R.FwdExposedS += Steps * std::max(0.0, Send - In.AttnFwdS / Ring);
    if (In.Train) {
      double BwdSend =
          collectiveTime(CollectiveKind::SendRecv, 2 * In.KVBytes, RingG, HW)
              .Seconds;
      R.BwdS += Steps * BwdSend;
      R.BwdExposedS += Steps * std::max(0.0, BwdSend - In.AttnBwdS / Ring);
    }
  }
  return R;
}

std::string getCPIllegalReason(const ParallelPlan &P, int64_t Seq,
                               int64_t QHeads, int64_t KVHeads) {
  unsigned CP = P.CP, TP = P.TP, U = P.getCPUlyssesSize();
  if (CP <= 1)
    return "";
  std::string C = "cp=" + std::to_string(CP),
              Algo = " with cp_algo=" + getCPAlgoName(P.CPA).str();
  if (P.CPA == CPAlgo::Hybrid) {
    Algo += ",cp_ulysses=" + std::to_string(U);
    if (U <= 1 || U >= CP || CP % U)
      return C + Algo +
             ": cp_ulysses must divide cp and lie strictly "
             "between 1 and cp";
  }
  if (Seq <= 0)
    return C + " splits the sequence, and no sequence dim is bound (--seq)";
  bool Ring = P.getCPRingSize() > 1;
  int64_t Chunks = Ring ? 2 * (int64_t)CP : CP;
  if (Seq % Chunks)
    return C + Algo + ": sequence " + std::to_string(Seq) +
           " is not divisible by " + std::to_string(Chunks) +
           (Ring ? " (2*cp chunks balance the causal ring)" : "");
  if (U > 1) {
    int64_t Need = (int64_t)TP * U;
    std::string By = P.CPA == CPAlgo::Hybrid ? "tp*cp_ulysses" : "tp*cp";
    if (QHeads <= 0 || KVHeads <= 0)
      return C + Algo +
             " splits the heads, and the model's attention heads "
             "were not found";
    // K/V heads that tp*u does not divide are repeated to the query heads
    // first (getUlyssesKVBytes); tp alone must still divide them, as
    // MindSpeed asks (validate_args: num_query_groups divisible by tp).
    if (QHeads % Need || KVHeads % TP)
      return C + Algo + ": " + std::to_string(QHeads) +
             " heads are not divisible by " + By + " = " +
             std::to_string(Need) +
             (KVHeads % TP ? " or " + std::to_string(KVHeads) +
                                 " K/V heads by tp = " + std::to_string(TP)
                           : std::string());
  }
  return "";
}

double getUlyssesKVBytes(unsigned Ulysses, unsigned TP, int64_t QHeads,
                         int64_t KVHeads, double KVBytes) {
  if (KVHeads <= 0 || QHeads <= KVHeads ||
      KVHeads % ((int64_t)TP * Ulysses) == 0)
    return KVBytes;
  return KVBytes * (double)QHeads / (double)KVHeads;
}

} // namespace loom
