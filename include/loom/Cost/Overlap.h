//===- Overlap.h - Communication overlapped with compute --------*- C++ -*-===//
//
// What running a collective alongside compute costs, for the plan's three
// overlap choices (ParallelPlan: tp, dp and pp overlap):
//
//   * tp: the TP collectives of a micro-batch run beside the stage's
//     TP-sharded GEMMs, as Megatron-Core's --tp-comm-overlap (Transformer
//     Engine userbuffers: the GEMM runs on the SMs the communication
//     kernels leave it) and MindSpeed's --use-mc2 (Ascend's fused
//     AllGather+MatMul / MatMul+ReduceScatter kernels) do;
//   * dp: the DP gradient reduce-scatter/all-reduce (and, with ZeRO, the
//     parameter all-gather) beside the last micro-batch's backward, as
//     Megatron's distributed optimizer with --overlap-grad-reduce and
//     --overlap-param-gather does;
//   * pp: pipeline sends beside the next compute (--overlap-p2p-
//     communication) instead of waited for.
//
// While overlapped, the collective's kernels hold a share s of the compute
// units (the YAML's comm_overlap, per kind), so compute W beside
// communication C takes
//
//   off:                 W + C                (the collective waited for)
//   on, held for the window (tp):
//                        max(C, W / (1 - s))
//   on, held while the collective runs (dp, pp):
//                        max(C, W + s * C)
//
// Transformer Engine's userbuffers reserve their SMs for the whole GEMM
// (initialize_ub's set_sm_margin: the GEMM is launched on the SMs left),
// and MC2 is one fused kernel: tp overlap holds its share for the window,
// so it wins only when C > W * s / (1 - s): a collective much shorter than
// its GEMMs costs more in held compute than it hides. NCCL's and HCCL's
// reduce-scatters and sends hold their SMs/cores only while they run, so
// dp and pp overlap never cost more compute than they hide; pp overlap
// can still lose in the pipeline (the receiver waits for the send either
// way, and with few micro-batches there is little compute to hide it
// behind). Each is a plan choice, searched.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COST_OVERLAP_H
#define LOOM_COST_OVERLAP_H

namespace loom {

/// How long an overlapped collective holds its share of compute.
enum class OverlapHold { Window, WhileRunning };

/// Time of a window of compute \p ComputeS beside communication \p CommS,
/// overlapped (\p On) with share \p Share of the compute held as \p Hold
/// says, or not.
double overlapWindow(double ComputeS, double CommS, double Share, bool On,
                     OverlapHold Hold = OverlapHold::Window);

/// What overlapping changes against running the compute alone:
/// overlapWindow(...) - ComputeS (the exposed communication plus the held
/// compute; CommS when off).
inline double overlapExposed(double ComputeS, double CommS, double Share,
                             bool On, OverlapHold Hold = OverlapHold::Window) {
  return overlapWindow(ComputeS, CommS, Share, On, Hold) - ComputeS;
}

} // namespace loom

#endif // LOOM_COST_OVERLAP_H
