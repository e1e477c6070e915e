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
//  - hybrid (MindSpeed's hybrid_cp_algo; Megatron-Core's a2a+p2p): both,
//    nested. Q, K, V and the output move by all-to-all inside a group of
//    u = --ulysses-degree-in-cp consecutive cp ranks (each rank then holds
//    the u ranks' tokens, cp / u of the sequence, with 1/u of the heads:
//    the same bytes as before it); the ring then runs over the cp / u such
//    groups, passing those K/V blocks. A ring step overlaps 1 / (cp / u) of
//    the rank's attention. The a2a stays on the inner (faster) links, the
//    ring crosses the outer ones.
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

/// The cp communication of one attention layer under \p P's cp: the
/// all-to-alls over \p UlyssesG (P.getCPUlyssesSize() ranks) and the ring
/// over \p RingG (P.getCPRingSize() ranks), whichever P has.
CPLayerCost costContextParallelLayer(const ParallelPlan &P,
                                     const CPLayerInputs &In,
                                     const GroupShape &UlyssesG,
                                     const GroupShape &RingG,
                                     const HardwareModel &HW);

/// The K/V bytes Ulysses' all-to-alls move over \p Ulysses ranks, given
/// \p KVBytes before any GQA repeat: those, or, when tp x Ulysses does not
/// divide the \p KVHeads, K and V repeated to the \p QHeads first (MindSpeed's
/// --kv-head-repeat-before-uly-alltoall, repeat_interleave of each group's
/// heads; the role graphs move a model's own repeat's output then).
double getUlyssesKVBytes(unsigned Ulysses, unsigned TP, int64_t QHeads,
                         int64_t KVHeads, double KVBytes);

/// Why \p P's cp cannot split a model with sequence length \p Seq and
/// \p QHeads / \p KVHeads attention heads (0: unknown); empty when it can.
/// The ring's causal load balancing cuts the sequence into 2 * cp chunks
/// (Megatron-Core asserts seq % (2 * cp) == 0; the hybrid's ring cuts
/// 2 * cp / u chunks, each split u ways); the all-to-all gives each rank
/// heads / (tp * u) of the heads (u = cp for a2a), K/V heads included.
std::string getCPIllegalReason(const ParallelPlan &P, int64_t Seq,
                               int64_t QHeads, int64_t KVHeads);

} // namespace loom

#endif // LOOM_PLANNER_CONTEXTPARALLEL_H
