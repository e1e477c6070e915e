//===- ParallelPlan.h - A parallelization plan and --plan parsing -*- C++
//-*-===//
//
// The decisions of DESIGN §6 as plain data: degrees, micro-batching,
// recompute, ZeRO, and the stage boundaries. A PlanSpec is a partial plan
// (what `--plan` fixed); the search fills the rest, or, for cost queries, a
// spec with fixed degrees is completed by completePlan().
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_PARALLELPLAN_H
#define LOOM_PLAN_PARALLELPLAN_H

#include "loom/Cost/Offload.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <array>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace llvm {
namespace json {
class OStream;
class Value;
} // namespace json
} // namespace llvm

namespace loom {

struct HardwareModel;

enum class Recompute { None, Selective, Full };
llvm::StringRef getRecomputeName(Recompute R);

/// How context parallelism (cp > 1) splits attention over the sequence.
/// Ring: each cp rank keeps seq/cp of the queries and passes its K/V chunk
/// around the cp group by send/receive, overlapped with the attention of
/// the chunk it holds; causal masks use 2*cp chunks, rank i taking chunks
/// i and 2*cp-1-i, so every rank does the same work (Megatron-Core's
/// load-balanced ring, --cp-comm-type p2p). A2A: all-to-all over heads
/// before and after attention, each rank then attending the whole
/// sequence for heads/cp of the heads (DeepSpeed-Ulysses; MindSpeed's
/// ulysses_cp_algo; Megatron's --cp-comm-type a2a). Hybrid: both, nested:
/// all-to-all over heads inside groups of CPUlysses consecutive cp ranks,
/// the ring over the cp / CPUlysses such groups (MindSpeed's hybrid_cp_algo
/// with --ulysses-degree-in-cp, whose Ulysses groups are the consecutive cp
/// ranks, mindspeed/core/parallel_state.py
/// initialize_context_parallel_group_for_hybrid_cp; Megatron-Core's
/// --cp-comm-type a2a+p2p with --hierarchical-context-parallel-sizes).
enum class CPAlgo : uint8_t { Ring, A2A, Hybrid };
llvm::StringRef getCPAlgoName(CPAlgo A);

/// The mesh axes above tp: ep, the part of dp outside ep ("dp"), and pp.
enum class MeshAxis : uint8_t { EP, DP, PP };
llvm::StringRef getMeshAxisName(MeshAxis A);
/// The axes above tp, innermost first.
using AxisOrder = std::array<MeshAxis, 3>;
/// Megatron-LM's order and the default: ep, then dp, then pp.
constexpr AxisOrder DefaultAxisOrder = {MeshAxis::EP, MeshAxis::DP,
                                        MeshAxis::PP};
/// The six orders, the default first, then in lexicographic order of
/// (ep, dp, pp) = (0, 1, 2); PlanConstraints numbers them the same way.
llvm::ArrayRef<AxisOrder> getAllAxisOrders();
unsigned getAxisOrderIndex(const AxisOrder &O);
/// "tp-ep-dp-pp".
std::string getAxisOrderName(const AxisOrder &O);

/// Precision of the DP gradient reduction and of the gradient buffer.
/// Megatron-LM keeps fp32 main gradients and all-reduces them in fp32 by
/// default with bf16 training (arguments.py turns on
/// accumulate_allreduce_grads_in_fp32 unless --grad-reduce-in-bf16): the
/// numerically safer choice, and the default here.
enum class GradPrecision : uint8_t { FP32, BF16 };
llvm::StringRef getGradPrecisionName(GradPrecision G);

/// The `emb=` plan key: auto chooses per table by cost (and shards only the
/// tables no single card can hold whole); table, row and col shard every
/// recognised table that way.
enum class EmbeddingMode : uint8_t { Auto, Table, Row, Col };
llvm::StringRef getEmbeddingModeName(EmbeddingMode M);
llvm::Expected<EmbeddingMode> parseEmbeddingMode(llvm::StringRef Text);

/// A complete plan.
///
/// Context parallelism (cp) splits every sequence of a micro-batch into cp
/// parts; its axis sits directly outside tp (Megatron-Core's default order
/// tp-cp-ep-dp-pp, parallel_state.py), so each axis below strides tp * cp
/// where it said tp, and cp ranks share a server whenever tp * cp fits in
/// one. cp joins dp for the weight gradients: they are reduced over the
/// dp x cp ranks (Megatron-Core's data-parallel group with cp).
///
/// Mesh and rank order (the emitter and the manifest must match it). The
/// mesh has four axes: tp (size tp), ep (size ep), dp (the part of the
/// data-parallel axis outside ep, size dp / ep) and pp (size pp), with
///
///   dp_idx = dp_outer * ep + ep_idx   (ep_idx < ep, dp_outer < dp / ep).
///
/// TP is always innermost (consecutive ranks, the fast domain: the TP limit
/// of the search is the topology levels that allow TP, so a YAML that
/// allows TP across servers widens tp without reordering it); the other
/// three follow in Order, innermost first. The stride of an axis is tp
/// times the sizes of the axes before it (getAxisStride), and
///
///   rank = tp_idx + ep_idx * stride(ep) + dp_outer * stride(dp)
///          + pp_idx * stride(pp).
///
/// With the default order (ep, dp, pp) that is rank = (pp_idx * dp +
/// dp_idx) * tp + tp_idx: EP the inner part of DP, PP outermost. The groups
/// of rank r: tp = the tp ranks with the same (pp_idx, dp_idx); ep = axis
/// ep; dp = axes ep and dp (non-expert gradients); dp_ep = axis dp (expert
/// gradients: the ranks that hold the same experts); pp = axis pp.
/// Orders that differ only in where axes of size 1 sit are the same mesh;
/// plans keep one of them (canonicalAxisOrder).
///
/// Expert parallelism is Megatron's expert-data-parallel: ep ranks are
/// carved out of dp (ep divides dp), each holds NumExperts / ep experts of
/// every MoE layer, non-expert parameters are replicated over dp as usual.
struct ParallelPlan {
  unsigned DP = 1, TP = 1, PP = 1, EP = 1;
  /// Context parallelism: the sequence split over CP ranks, by CPA.
  unsigned CP = 1;
  CPAlgo CPA = CPAlgo::Ring;
  /// Sequence parallelism alongside TP (Korthikanti et al. 2022).
  bool SP = false;
  /// Hybrid only: the all-to-all's degree inside cp (1 < CPUlysses < CP,
  /// dividing it); the ring runs over CP / CPUlysses ranks. 16 bits: it
  /// fills the padding after SP (the search holds a plan per candidate).
  uint16_t CPUlysses = 1;
  /// The all-to-all's and the ring's degrees inside cp (their product is
  /// cp): ring 1 x cp, a2a cp x 1, hybrid CPUlysses x CP / CPUlysses.
  unsigned getCPUlyssesSize() const {
    return CPA == CPAlgo::A2A ? CP : CPA == CPAlgo::Hybrid ? CPUlysses : 1;
  }
  unsigned getCPRingSize() const { return CP / getCPUlyssesSize(); }
  unsigned MicroBatchSize = 1;
  unsigned NumMicroBatches = 1;
  /// Virtual pipeline stages per device (interleaved 1F1B when > 1).
  unsigned VirtualStages = 1;
  Recompute RC = Recompute::None;
  unsigned ZeroStage = 0;
  /// Number of layers (as detect-layers numbers them, embedding and head
  /// included) in each pipeline stage; empty means "split evenly".
  std::vector<unsigned> StageLayers;
  /// Mesh axes above tp, innermost first.
  AxisOrder Order = DefaultAxisOrder;
  /// DP gradient reduction and buffer precision (training only).
  GradPrecision Grad = GradPrecision::FP32;
  /// Where each kind of training state lives (all HBM by default).
  OffloadTiers Offload;
  /// How embedding tables are sharded over dp (Embedding.h; auto: per
  /// table by cost).
  EmbeddingMode Emb = EmbeddingMode::Auto;
  /// Communication overlapped with compute (loom/Cost/Overlap.h): TP
  /// collectives with the sharded GEMMs, the DP gradient sync with the
  /// last backward, pipeline sends with compute. The defaults are what
  /// Loom costed before these were choices.
  bool TPOverlap = false, DPOverlap = true, PPOverlap = true;

  unsigned getNumDevices() const { return DP * TP * CP * PP; }
  /// Size of axis \p A: ep, dp / ep, pp.
  unsigned getAxisSize(MeshAxis A) const;
  /// Rank distance between neighbours along axis \p A: tp times the sizes
  /// of the axes inside it.
  unsigned getAxisStride(MeshAxis A) const;
  /// Bytes per gradient element, in the DP sync and in the buffer.
  double getGradBytes() const { return Grad == GradPrecision::BF16 ? 2 : 4; }
  /// "tp=8,pp=4,dp=4,ep=1,sp=0,mb=1,nmb=64,vpp=1,recompute=none,zero=1",
  /// then ",grad=bf16", ",order=tp-pp-ep-dp" and ",offload=opt:host" when
  /// they are not the defaults, ",tp_overlap=on", ",dp_overlap=off",
  /// ",pp_overlap=off" likewise, ",cp=N" (and ",cp_algo=a2a") when cp >
  /// 1, then the stages.
  std::string str() const;
};

/// The axes of size > 1 of \p O, innermost first: what makes two orders
/// different meshes.
llvm::SmallVector<MeshAxis, 3> getNonTrivialAxes(const AxisOrder &O,
                                                 unsigned EP, unsigned DPOuter,
                                                 unsigned PP);
/// The representative of \p O's mesh: the default order when its axes of
/// size > 1 come in the default's sequence, else those axes innermost in
/// \p O's sequence and the axes of size 1 outside them in the default
/// order (tp-pp-dp-ep for pp inside dp at ep = 1).
AxisOrder canonicalAxisOrder(const AxisOrder &O, unsigned EP, unsigned DPOuter,
                             unsigned PP);
/// The distinct meshes for these sizes: the canonical orders, default
/// first.
llvm::SmallVector<AxisOrder, 6>
getDistinctAxisOrders(unsigned EP, unsigned DPOuter, unsigned PP);

/// What `--plan` fixed; unset fields are free.
struct PlanSpec {
  llvm::Optional<unsigned> DP, TP, PP, EP, CP, CPUlysses, MicroBatchSize,
      NumMicroBatches, VirtualStages, ZeroStage;
  llvm::Optional<CPAlgo> CPA;
  llvm::Optional<bool> SP;
  llvm::Optional<Recompute> RC;
  llvm::Optional<AxisOrder> Order;
  llvm::Optional<GradPrecision> Grad;
  llvm::Optional<OffloadTiers> Offload;
  llvm::Optional<EmbeddingMode> Emb;
  llvm::Optional<bool> TPOverlap, DPOverlap, PPOverlap;
  std::vector<unsigned> StageLayers;
  /// rest=plain: what is not given takes its plain value (completePlan)
  /// instead of being searched.
  bool RestPlain = false;
};
/// The spec that fixes every choice of \p P (stage boundaries included).
PlanSpec getFixedSpec(const ParallelPlan &P);

/// Parses "tp=8,pp=4,dp=2,ep=1,sp=1,mb=2,nmb=16,vpp=2,recompute=selective,
/// zero=1,grad=bf16,order=tp-pp-ep-dp,offload=opt:host,act:host,
/// emb=row,tp_overlap=on,dp_overlap=off,pp_overlap=on,cp=2,cp_algo=ring,
/// stages=13:13:14,rest=plain" (rest:
/// "search", the default, or "plain"). order lists the
/// mesh axes innermost first: tp (always innermost; may be left out), then
/// ep, dp and pp; axes left out go outside the listed ones in the default
/// order (order=tp-pp-dp is tp-pp-dp-ep).
/// Unknown keys, duplicate keys, non-positive degrees and bad values are
/// errors naming the key.
llvm::Expected<PlanSpec> parsePlanSpec(llvm::StringRef Text);

/// Completes \p Spec for \p Devices devices and global batch \p Batch:
/// dp defaults to the largest dp <= Devices / (tp * pp) with Batch
/// divisible by dp * mb (devices past dp*tp*pp stay idle), mb to 1, nmb to
/// Batch / (dp * mb), and the rest to their plain values (the order
/// canonical for the degrees). Checks dp*tp*pp <= Devices, ep
/// divides dp (EP ranks are carved out of DP), and Batch divisible by
/// dp*mb; errors say which. Whether ep divides the model's experts is the
/// evaluator's check (it knows the model).
llvm::Expected<ParallelPlan> completePlan(const PlanSpec &Spec,
                                          uint64_t Devices, int64_t Batch);

/// Why \p HW cannot cost tp_overlap=on (\p TPOverlap), or success: its
/// aicore class gives no TP share in comm_overlap (the compute the TP
/// collectives hold beside the GEMMs, loom/Cost/Overlap.h). At an unknown
/// share the overlap would hide the TP communication at no cost, which no
/// implementation does; the error names the missing key and where to get
/// it.
llvm::Error checkOverlapHardware(bool TPOverlap, const HardwareModel &HW);

/// The plan as a JSON object's members, written into the object \p J has
/// open: tp, pp, dp, ep, sp, micro_batch_size, num_micro_batches,
/// virtual_stages, cp, cp_algo, recompute, zero_stage, grad_dtype, tp_overlap,
/// dp_overlap, pp_overlap, offload ("none", "opt:host,grad:host"), axis_order
/// (innermost first, tp always) and stage_layers (\p StageLayers: the
/// layers of each stage). The one writer of a plan's JSON: the search's
/// --format json, --print-costs=stage --format json and manifest.json all
/// call it.
void writePlanJSON(llvm::json::OStream &J, const ParallelPlan &P,
                   llvm::ArrayRef<unsigned> StageLayers);
/// writePlanJSON's object as a json::Value, for reports built as values.
llvm::json::Value getPlanJSON(const ParallelPlan &P,
                              llvm::ArrayRef<unsigned> StageLayers);

} // namespace loom

#endif // LOOM_PLAN_PARALLELPLAN_H
