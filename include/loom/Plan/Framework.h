//===- Framework.h - What a training framework can run, and how -*- C++ -*-===//
//
// A framework profile (examples/frameworks/*.yaml, DESIGN §6): the plans a
// training framework can run (its ZeRO/FSDP modes, offload kinds and
// tiers, recompute granularities, sequence, expert and virtual-pipeline
// parallelism and their constraints, mesh orders, gradient reduction
// precisions; context-parallel algorithms and pipeline schedules recorded
// for the reader) and how it runs them (fused kernels, communication
// overlap shares, the DP gradient bucket, optimizer bytes per parameter).
// Every fact carries its source (repository, pinned commit or release,
// file) in the YAML.
//
// The search ranks only plans checkPlan() accepts; `--plan` asking for one
// it rejects is an error naming the rule (checkSpec). The profile "none"
// (an idealised runtime) accepts every plan and changes no cost: Loom's
// behaviour without --framework.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_FRAMEWORK_H
#define LOOM_PLAN_FRAMEWORK_H

#include "loom/Plan/ParallelPlan.h"
#include "loom/Plan/Precision.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace loom {

/// One ZeRO/FSDP sharding mode the framework runs: Loom's stage (0: plain
/// data parallel, 1: optimizer states, 2: + gradients, 3: + parameters),
/// the framework's name for it, and the degrees it is limited to.
struct FrameworkZeroMode {
  unsigned Stage = 0;
  std::string Name;
  /// 0: no limit.
  unsigned MaxTP = 0, MaxPP = 0;
  std::string Source;
};

/// Offload kinds of OffloadTiers (Cost/Offload.h).
enum class OffloadKind : uint8_t { Opt, Grad, Param, Act };
llvm::StringRef getOffloadKindName(OffloadKind K);

/// One way the framework moves a kind of training state off HBM.
struct FrameworkOffload {
  OffloadKind Kind = OffloadKind::Opt;
  std::vector<MemoryTier> Tiers;
  /// The ZeRO stages it works with.
  unsigned MinZero = 0, MaxZero = 3;
  /// Other kinds that move with it (DeepSpeed's offload_optimizer takes the
  /// gradient partitions to the host too): each must be off HBM as well.
  std::vector<OffloadKind> With;
  /// It offloads what recompute keeps (DeepSpeed's cpu_checkpointing).
  bool NeedsRecompute = false;
  /// The framework's name for it ("--optimizer-cpu-offload").
  std::string Name;
  std::string Source;
};

struct FrameworkProfile {
  /// megatron-core, mindspeed-llm, deepspeed, none.
  std::string Name;
  /// Other names --framework accepts (the --export names).
  std::vector<std::string> Aliases;
  /// The --export writer ("megatron", "mindspeed", "deepspeed"); empty for
  /// none.
  std::string Export;
  /// The pinned upstream: repository@commit or release.
  std::string Version;
  std::string Source;
  /// Accepts every plan (none).
  bool AnyPlan = false;

  // What it can run.
  std::vector<FrameworkZeroMode> Zero;
  std::vector<FrameworkOffload> Offload;
  std::vector<Recompute> Recomputes;
  std::string RecomputeSource;
  bool SequenceParallel = true;
  std::string SequenceParallelSource;
  /// Interleaved 1F1B; EvenChunks: the transformer blocks split evenly
  /// over pp x vpp chunks.
  bool VirtualPipeline = true, EvenChunks = false;
  std::string VirtualPipelineSource;
  bool ExpertParallel = true;
  /// ep > 1 with tp > 1 needs sp.
  bool EPWithTPNeedsSP = false;
  std::string ExpertParallelSource;
  bool TPOverlap = true, TPOverlapNeedsSP = false;
  std::string TPOverlapSource;
  /// The mesh orders it builds (getAxisOrderName, "tp-ep-dp-pp"); empty:
  /// any.
  std::vector<AxisOrder> Orders;
  std::string OrdersSource;
  std::vector<GradPrecision> Grads;
  std::string GradsSource;
  /// The precision recipes it runs and its default (runs.precision);
  /// None: any, Loom's hardware default (loom/Plan/Precision.h).
  llvm::Optional<FrameworkPrecision> Precision;
  /// Its context-parallel algorithms by its own names (Megatron's
  /// --cp-comm-type p2p/a2a, MindSpeed's megatron_cp_algo/ulysses_cp_algo,
  /// DeepSpeed's ulysses); empty: no cp. getFrameworkCPAlgo maps them to
  /// Loom's. Pipeline schedules are recorded, not searched (one order).
  std::vector<std::string> ContextParallel, PipelineSchedules;
  std::string ContextParallelSource;
  /// Its all-to-all over heads repeats K/V heads to the query heads when
  /// tp x cp does not divide the K/V heads (MindSpeed's
  /// --kv-head-repeat-before-uly-alltoall); false: such plans are not run.
  bool UlyssesKVRepeat = false;
  std::string UlyssesKVRepeatSource;

  // How it runs them (fed into the cost where Loom models it).
  std::string Attention;
  /// Fused kernels it runs (detect-fused-kernels names).
  llvm::Optional<std::vector<std::string>> FusedKernels;
  /// Generic fusion as it runs the graph (`how: fusion`): false for an eager
  /// runtime that launches one kernel per op outside the fused kernels it
  /// names, true for a compiling one (fuse-kernels groups by the hardware's
  /// fusion rules); unset: --fusion's default.
  llvm::Optional<bool> GenericFusion;
  /// Communication overlap shares of compute (Hardware CommOverlap), used
  /// where the hardware gives none.
  llvm::Optional<double> TPOverlapShare, DPOverlapShare, PPOverlapShare;
  /// The shares above are counts of compute units (SMs, AI cores: Transformer
  /// Engine's userbuffers hold 16 SMs), divided by the class's cores.
  bool OverlapInCores = false;
  /// The shares hold only on devices whose name starts with this (the
  /// runtime's collectives are CUDA kernels: "NVIDIA"); empty: any.
  std::string OverlapDevices;
  /// The DP gradient bucket in parameters; 0: Megatron-Core's
  /// max(40M, 1M x dp).
  double DDPBucketParams = 0;
  /// How its MoE dispatcher sends a routed token over ep (`how:
  /// ep_dispatch`): once per destination rank (DeepEP: the rank's experts
  /// share one copy; the combine sums them there) instead of once per
  /// chosen expert (Megatron's alltoall dispatcher).
  bool EPDispatchPerRank = false;
  /// The share of each link's bandwidth its all-to-all kernels reach
  /// (replacing the topology level's efficiency for them); 0: the level's.
  double EPDispatchEfficiency = 0;
  std::string EPDispatchSource;
  /// fp32 master weights and Adam moments.
  double OptimizerBytesPerParam = 12;
  GradPrecision GradReduce = GradPrecision::FP32;
  std::string HowSource;

  const FrameworkZeroMode *getZeroMode(unsigned Stage) const;
  /// Its name for \p A ("p2p", "megatron_cp_algo", ...), or "" when it
  /// does not run \p A.
  std::string getCPAlgoName(CPAlgo A) const;
};

/// The profile the search runs with when no --framework is given.
FrameworkProfile getNoneFramework();

/// Reads a profile from YAML text (\p Name for messages: the file). Unknown
/// keys, bad values and missing required keys are errors
/// "<file>:<line>:<col>: error: ...".
llvm::Expected<FrameworkProfile> parseFrameworkProfile(llvm::StringRef Text,
                                                       llvm::StringRef Name);
/// A shipped profile by name or alias (megatron-core, megatron,
/// mindspeed-llm, mindspeed, deepspeed, none), else a YAML file at \p
/// NameOrPath.
llvm::Expected<FrameworkProfile>
loadFrameworkProfile(llvm::StringRef NameOrPath);
/// The names of the shipped profiles.
std::vector<std::string> getShippedFrameworkNames();

/// What the rules need to know of the model.
struct FrameworkContext {
  /// Transformer blocks (detect-layers' repeated blocks).
  unsigned NumBlocks = 0;
  /// The attention's K/V heads (0: not found).
  int64_t KVHeads = 0;
};

/// Why \p F cannot run the choices \p S fixes (each rule checked when the
/// choices it reads are fixed), naming the rule and its source; success
/// when it can.
llvm::Error checkSpec(const FrameworkProfile &F, const PlanSpec &S,
                      const FrameworkContext &Ctx);
/// Whether \p F can run \p P.
bool canRun(const FrameworkProfile &F, const ParallelPlan &P,
            const FrameworkContext &Ctx);
/// Whether hybrid cp (cp_algo=hybrid) is searched under \p Frameworks:
/// each given and each names it. Loom emits no graphs for it, so the
/// idealised runtime (any_plan) does not run it; --plan may still ask.
bool runsHybridCP(llvm::ArrayRef<const FrameworkProfile *> Frameworks);

} // namespace loom

#endif // LOOM_PLAN_FRAMEWORK_H
