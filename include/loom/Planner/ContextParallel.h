//===- ContextParallel.h - What context parallelism costs per layer -*- C++
//-*-===//
//
// Context parallelism (cp > 1; ParallelPlan.h) splits each sequence of a
// micro-batch over the cp ranks. Everything that scales with the tokens
// (compute, activations, TP/EP/PP traffic) is the evaluator's at 1/cp of
// the micro-batch; what cp adds is the attention's communication, costed
// here per attention layer and micro-batch:
//
//  - ring (Megatron-Core's p2p, MindSpeed's megatron_cp_algo; Liu et al.,
//    "Ring Attention with Blockwise Transformers", arXiv 2310.01889): cp - 1
//    steps, each passing the K/V chunk a rank holds (KV bytes per rank) to
//    its neighbour while the chunk it received is attended; a step takes
//    max(send, attention / cp). The backward passes K/V and their
//    gradients (twice the bytes) beside attention backward / cp per step.
//  - a2a (DeepSpeed-Ulysses, Jacobs et al., arXiv 2309.14509): an
//    all-to-all over the cp group of each of Q, K and V before attention
//    and of the output after it; the backward the same for the gradients.
//    Nothing runs beside them: all exposed.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_CONTEXTPARALLEL_H
#define LOOM_PLANNER_CONTEXTPARALLEL_H

#include "loom/Cost/Collectives.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/ParallelPlan.h"

namespace loom {

/// One attention layer, one micro-batch, one rank (after the tp and cp
/// splits).
struct CPLayerInputs {
  /// K and V (before any GQA repeat), and the attention's output (the
  /// size of Q for equal head sizes), bytes per rank.
  double KVBytes = 0, QOBytes = 0;
  /// The attention core's forward and backward time per rank.
  double AttnFwdS = 0, AttnBwdS = 0;
  bool Train = true;
};

struct CPLayerCost {
  /// Communication time, and the part not hidden behind attention.
  double FwdS = 0, BwdS = 0, FwdExposedS = 0, BwdExposedS = 0;
  /// Sums layers' costs (a stage's).
  CPLayerCost &operator+=(const CPLayerCost &O) {
    FwdS += O.FwdS;
    BwdS += O.BwdS;
    FwdExposedS += O.FwdExposedS;
    BwdExposedS += O.BwdExposedS;
    return *this;
  }
};

/// The cp communication of one attention layer over the cp group \p CPG.
CPLayerCost costContextParallelLayer(CPAlgo Algo, unsigned CP,
                                     const CPLayerInputs &In,
                                     const GroupShape &CPG,
                                     const HardwareModel &HW);

/// The K/V bytes Ulysses' all-to-alls move, given \p KVBytes before any
/// GQA repeat: those, or, when tp x cp does not divide the \p KVHeads, K
/// and V repeated to the \p QHeads first (MindSpeed's
/// --kv-head-repeat-before-uly-alltoall, repeat_interleave of each group's
/// heads; the role graphs move a model's own repeat's output then).
double getUlyssesKVBytes(unsigned CP, unsigned TP, int64_t QHeads,
                         int64_t KVHeads, double KVBytes);

/// Why \p CP with \p Algo cannot split a model with sequence length \p Seq
/// and \p QHeads / \p KVHeads attention heads (0: unknown) at \p TP; empty
/// when it can. The ring's causal load balancing cuts the sequence into
/// 2 * cp chunks (Megatron-Core asserts seq % (2 * cp) == 0); a2a gives
/// each rank heads / (tp * cp) of the heads, K/V heads included.
std::string getCPIllegalReason(CPAlgo Algo, unsigned CP, unsigned TP,
                               int64_t Seq, int64_t QHeads, int64_t KVHeads);

} // namespace loom

#endif // LOOM_PLANNER_CONTEXTPARALLEL_H
