//===- Export.cpp - A plan as a training framework's launch flags ---------===//
//
// Flag names, checked against each framework's own source (read, not
// copied):
//  * Megatron-LM (NVIDIA/Megatron-LM at d98e8a64ddf3, main of 2026-08-22,
//    as examples/frameworks/megatron-core.yaml pins it): the parallelism,
//    recompute and precision flags are the fields of ModelParallelConfig
//    (megatron/core/model_parallel_config.py: tensor_model_parallel_size,
//    pipeline_model_parallel_size, sequence_parallel,
//    expert_model_parallel_size, fp16, bf16) and TransformerConfig
//    (megatron/core/transformer/transformer_config.py: num_layers,
//    recompute_granularity full|selective, recompute_method uniform|block,
//    recompute_num_layers), turned into "--" + name with '_' -> '-' by
//    ArgumentGroupFactory (megatron/training/argument_utils.py);
//    micro_batch_size and global_batch_size are TrainingConfig fields
//    (megatron/training/config/training_config.py). Written out in
//    megatron/training/arguments.py: --seq-length, --use-distributed-optimizer
//    (sharded optimizer states, i.e. ZeRO-1), --grad-reduce-in-bf16,
//    --accumulate-allreduce-grads-in-fp32,
//    --num-layers-per-virtual-pipeline-stage, and
//    --pipeline-model-parallel-layout (stages split by '|', E embedding,
//    t transformer layer, L loss, "t*3" repeats; parsed by
//    PipelineParallelLayerLayout.parse_str_to_list in
//    megatron/core/transformer/pipeline_parallel_layer_layout.py; segment i
//    runs on pipeline rank i % pp, as Loom's chunks do). Gradient and
//    parameter sharding (ZeRO-2/3) is Megatron-FSDP there
//    (--use-megatron-fsdp, --data-parallel-sharding-strategy). Ranks are
//    ordered tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with --use-tp-pp-dp-mapping
//    (megatron/training/initialize.py; DistributedInitConfig in
//    megatron/training/config/common_config.py).
//  * MindSpeed-LLM (Ascend/MindSpeed-LLM at c77308a14bfc, master of
//    2026-08-21, on Megatron core_v0.12.1 per its README, and
//    Ascend/MindSpeed at 028de58ca629): Megatron's flags (not the
//    deprecated --use-mcore-models), --num-layer-list for uneven stages
//    (mindspeed_llm/features_manager/pipeline_parallel/num_layer_list.py:
//    transformer layers per stage, one per pp rank, not with virtual
//    stages), recompute as docs/en/pytorch/features/mcore/
//    recompute_relative.md names it.
//  * DeepSpeed (microsoft/DeepSpeed at 38327e07f6cd, master of
//    2025-02-21): the JSON keys of
//    docs/_pages/config-json.md (train_batch_size,
//    train_micro_batch_size_per_gpu, gradient_accumulation_steps,
//    bf16.enabled, fp16.enabled, zero_optimization.stage,
//    communication_data_type fp16|bf16|fp32), tensor_parallel.autotp_size
//    (deepspeed/runtime/tensor_parallel/config.py, AutoTP training) and
//    pipeline.activation_checkpoint_interval (get_pipeline_config in
//    deepspeed/runtime/config.py). The pipeline degree and MoE's ep_size are
//    constructor arguments in the model code (PipelineModule(num_stages=),
//    deepspeed.moe.layer.MoE(ep_size=)), and the pipeline engine refuses
//    ZeRO-2/3 (deepspeed/runtime/pipe/engine.py). Its pipeline topology
//    (PipeModelDataParallelTopology in deepspeed/runtime/pipe/topology.py)
//    orders ranks model (tp) innermost, then data, then pipe.
//
//===----------------------------------------------------------------------===//
#include "loom/Report/Export.h"
#include "loom/Analysis/Experts.h"
#include "loom/Plan/StageSplit.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <map>

using namespace llvm;

namespace loom {

StringRef getExportTargetName(ExportTarget T) {
  switch (T) {
  case ExportTarget::Megatron:
    return "megatron";
  case ExportTarget::MindSpeed:
    return "mindspeed";
  case ExportTarget::DeepSpeed:
    return "deepspeed";
  }
  llvm_unreachable("bad export target");
}

StringRef getExportFileName(ExportTarget T) {
  switch (T) {
  case ExportTarget::Megatron:
    return "megatron-args.txt";
  case ExportTarget::MindSpeed:
    return "mindspeed-args.txt";
  case ExportTarget::DeepSpeed:
    return "deepspeed.json";
  }
  llvm_unreachable("bad export target");
}

Expected<std::vector<ExportTarget>>
parseExportTargets(ArrayRef<std::string> Values) {
  std::vector<ExportTarget> Out;
  for (StringRef V : Values) {
    SmallVector<StringRef, 4> Parts;
    V.split(Parts, ',', -1, /*KeepEmpty=*/false);
    if (Parts.empty())
      return createStringError(inconvertibleErrorCode(),
                               "--export: expected megatron, mindspeed or "
                               "deepspeed");
    for (StringRef P : Parts) {
      P = P.trim();
      Optional<ExportTarget> T;
      for (ExportTarget C : {ExportTarget::Megatron, ExportTarget::MindSpeed,
                             ExportTarget::DeepSpeed})
        if (P.equals_insensitive(getExportTargetName(C)))
          T = C;
      if (!T)
        return createStringError(inconvertibleErrorCode(),
                                 "--export: unknown framework '%s' (known: "
                                 "megatron, mindspeed, deepspeed)",
                                 P.str().c_str());
      if (!is_contained(Out, *T))
        Out.push_back(*T);
    }
  }
  return Out;
}

DataType ExportInput::getRunType() const {
  if (!Precision)
    return ParamType;
  switch (*Precision) {
  case PrecisionKind::BF16:
  case PrecisionKind::FP8: // bf16 around Transformer Engine's fp8 GEMMs
    return DataType::BFloat16;
  case PrecisionKind::FP16:
    return DataType::Float16;
  case PrecisionKind::FP32:
  case PrecisionKind::TF32:
    return DataType::Float;
  }
  return ParamType;
}

ExportInput makeExportInput(const Graph &G, ArrayRef<LayerInfo> Layers,
                            const PlanCost &Chosen) {
  ExportInput In;
  In.Cost = Chosen;
  for (const LayerInfo &L : Layers)
    In.LayerKinds.push_back(L.K);
  std::map<DataType, double> BytesOf;
  for (const Value *V : G.getParameters()) {
    DataType T = V->Type.Elem;
    if (T == DataType::Float || T == DataType::Float16 ||
        T == DataType::BFloat16 || T == DataType::Double)
      BytesOf[T] += (double)V->Type.getSizeInBytes().getValueOr(0);
  }
  double Best = -1;
  for (const auto &KV : BytesOf)
    if (KV.second > Best) {
      Best = KV.second;
      In.ParamType = KV.first;
    }
  for (const ExpertGroup &EG : findExperts(G, Layers)) {
    In.NumExperts = std::max(In.NumExperts, EG.NumExperts);
    In.StackedExperts &= EG.isStacked();
  }
  return In;
}

std::vector<std::string> getChunkLayouts(const ExportInput &In) {
  const ParallelPlan &P = In.Cost.Plan;
  unsigned NL = In.LayerKinds.size();
  // The split the evaluator costs and shard emits (loom/Plan/StageSplit.h),
  // at the stages the chosen plan was costed with.
  ParallelPlan Q = P;
  if (Q.StageLayers.empty() && In.Cost.Stages.size() == P.PP)
    for (const StageCost &S : In.Cost.Stages)
      Q.StageLayers.push_back(S.NumLayers);
  std::vector<unsigned> Counts;
  if (Expected<std::vector<unsigned>> C =
          getChunkLayers(Q, getLayerEnds(In.LayerKinds)))
    Counts = std::move(*C);
  else
    consumeError(C.takeError()); // A plan the evaluator costed splits.
  int FirstPro = -1, LastEpi = -1;
  for (unsigned L = 0; L < NL; ++L) {
    if (In.LayerKinds[L] == LayerInfo::Kind::Prologue && FirstPro < 0)
      FirstPro = L;
    if (In.LayerKinds[L] == LayerInfo::Kind::Epilogue)
      LastEpi = L;
  }
  std::vector<std::string> Out;
  unsigned L = 0;
  for (unsigned C : Counts) {
    std::string S;
    for (unsigned I = 0; I < C && L < NL; ++I, ++L) {
      if ((int)L == FirstPro)
        S += 'E';
      else if ((int)L == LastEpi)
        S += 'L';
      else if (In.LayerKinds[L] == LayerInfo::Kind::Block)
        S += 't';
    }
    Out.push_back(std::move(S));
  }
  return Out;
}

namespace {

unsigned countBlocks(StringRef Chunk) { return Chunk.count('t'); }

/// "Et*12" for "Etttttttttttt".
std::string compressChunk(StringRef Chunk) {
  std::string Out;
  for (size_t I = 0; I < Chunk.size();) {
    size_t J = I;
    while (J < Chunk.size() && Chunk[J] == Chunk[I])
      ++J;
    Out += Chunk[I];
    if (J - I > 1)
      Out += "*" + std::to_string(J - I);
    I = J;
  }
  return Out;
}

/// Megatron's layout string: chunks joined by '|', runs of equal chunks as
/// "(S|)*n," (the last chunk of a run at the end written out, so that no
/// empty stage trails; commas are cosmetic to Megatron's parser).
std::string getLayoutString(ArrayRef<std::string> Chunks) {
  std::string Out;
  for (size_t I = 0; I < Chunks.size();) {
    size_t J = I;
    while (J < Chunks.size() && Chunks[J] == Chunks[I])
      ++J;
    std::string C = compressChunk(Chunks[I]);
    size_t N = J - I;
    bool Last = J == Chunks.size();
    if (N >= 3) // A comma after the group: cosmetic, for the reader.
      Out += "(" + C + "|)*" + std::to_string(Last ? N - 1 : N) + "," +
             (Last ? C : "");
    else
      for (size_t K = 0; K < N; ++K)
        Out += C + (Last && K + 1 == N ? "" : "|");
    I = J;
  }
  return Out;
}

struct Facts {
  unsigned Blocks = 0;
  std::vector<std::string> Chunks;
  /// The chunks are Megatron's default split: T / chunks blocks each, the
  /// embedding on the first chunk, the head on the last.
  bool DefaultSplit = true;
  /// The embedding on the first device and the head on the last (what
  /// MindSpeed's --num-layer-list assumes).
  bool EndsInPlace = true;
  unsigned OtherLayers = 0;
};

Facts getFacts(const ExportInput &In) {
  Facts F;
  F.Chunks = getChunkLayouts(In);
  bool HasE = false, HasL = false;
  for (const std::string &C : F.Chunks) {
    F.Blocks += countBlocks(C);
    HasE |= StringRef(C).contains('E');
    HasL |= StringRef(C).contains('L');
  }
  unsigned NC = F.Chunks.size();
  for (unsigned C = 0; C < NC; ++C) {
    StringRef S = F.Chunks[C];
    bool WantE = HasE && C == 0, WantL = HasL && C == NC - 1;
    if (S.contains('E') != WantE || S.contains('L') != WantL)
      F.EndsInPlace = false;
    if (!NC || F.Blocks % NC || countBlocks(S) != F.Blocks / NC)
      F.DefaultSplit = false;
  }
  F.DefaultSplit &= F.EndsInPlace;
  for (LayerInfo::Kind K : In.LayerKinds)
    F.OtherLayers += K != LayerInfo::Kind::Block;
  return F;
}

/// Whether the plan's mesh (its axes of size > 1, innermost first) is
/// \p Order's with the axes of size 1 dropped.
bool meshIs(const ParallelPlan &P, const AxisOrder &Order) {
  auto Mine = getNonTrivialAxes(P.Order, P.EP, P.DP / P.EP, P.PP);
  auto Theirs = getNonTrivialAxes(Order, P.EP, P.DP / P.EP, P.PP);
  return Mine == Theirs;
}

std::string getStageCounts(const PlanCost &PC) {
  std::string S;
  for (const StageCost &SC : PC.Stages)
    S += (S.empty() ? "" : ":") + std::to_string(SC.NumLayers);
  return S;
}

/// The comment header of the args files (and of stdout).
void printHeader(StringRef Framework, const ExportInput &In, const Facts &F,
                 raw_ostream &OS) {
  const PlanCost &PC = In.Cost;
  const ParallelPlan &P = PC.Plan;
  OS << "# " << Framework << " launch arguments written by Loom (plan-parallel "
     << "--export)\n";
  OS << "# plan: " << P.str() << "\n";
  OS << "# model: " << In.ModelName << " (" << F.Blocks
     << " transformer layers, "
     << (In.Precision ? "precision " + getPrecisionName(*In.Precision).str()
                      : getDataTypeName(In.ParamType).str() + " weights")
     << "); hardware: " << In.HardwareName << "; global batch "
     << In.GlobalBatch << " x seq " << In.Seq << "\n";
  OS << "# world size: " << P.getNumDevices() << " ranks (tp " << P.TP
     << " x pp " << P.PP << " x dp " << P.DP << ")";
  if (In.ClusterDevices && In.ClusterDevices != P.getNumDevices())
    OS << " of the cluster's " << In.ClusterDevices;
  OS << "\n";
  OS << "# predicted: step " << formatDuration(Seconds(PC.StepTimeS)) << ", "
     << format("%.0f", PC.Throughput) << " " << PC.getThroughputUnit()
     << ", MFU " << format("%.3f", PC.MFU) << ", memory "
     << formatBytes(Bytes(PC.MaxMemoryBytes)) << " of "
     << formatBytes(Bytes(PC.HBMBytes)) << " per device\n";
  OS << "# Loom's layers per pipeline stage (embedding and head included): "
     << getStageCounts(PC) << "\n";
}

/// The launch flags of a Megatron-like export (Megatron-LM or
/// MindSpeed-LLM) of one plan, built step by step in the order they are
/// written, with the warnings of what the flags cannot say.
class MegatronFlags {
public:
  MegatronFlags(ExportTarget T, const ExportInput &In, const Facts &F,
                std::vector<std::string> &Warnings)
      : T(T), Mind(T == ExportTarget::MindSpeed),
        Name(Mind ? "MindSpeed-LLM" : "Megatron-LM"), In(In), P(In.Cost.Plan),
        F(F), Warnings(Warnings) {}

  /// tp, pp and the rank order.
  void addMesh();
  /// Uneven stages and interleaving.
  void addStages();
  /// ep and the number of experts.
  void addExperts();
  /// sp and the fused kernels the prediction assumed.
  void addKernels();
  void addRecompute();
  /// Batch sizes, ZeRO (the distributed optimizer) and the model's shape.
  void addBatchAndShape();
  /// --make-vocab-size-divisible-by for pad-vocab's padding.
  void addVocabPadding();
  /// Weight and gradient precision.
  void addPrecision();
  /// Training state off HBM.
  void addOffload();
  /// tp, dp and pp communication overlap.
  void addOverlaps();
  /// Warns where the model is not the transformer the framework builds.
  void checkModelShape();

  StringRef getName() const { return Name; }
  bool isMindSpeed() const { return Mind; }
  const std::vector<std::string> &getFlags() const { return Flags; }

private:
  void add(const Twine &Flag) { Flags.push_back(Flag.str()); }
  void warn(const Twine &W) {
    Warnings.push_back((getExportTargetName(T) + ": " + W).str());
  }

  ExportTarget T;
  bool Mind;
  StringRef Name;
  const ExportInput &In;
  const ParallelPlan &P;
  const Facts &F;
  std::vector<std::string> Flags;
  std::vector<std::string> &Warnings;
};

void MegatronFlags::addMesh() {
  // No --use-mcore-models: Megatron core_v0.12.1 marks it deprecated and
  // ignored (mcore models are the default; MindSpeed-LLM sets
  // use_mcore_models = not use_legacy_models,
  // mindspeed_llm/features_manager/megatron_basic/training_basic.py).
  add("--tensor-model-parallel-size " + Twine(P.TP));
  add("--pipeline-model-parallel-size " + Twine(P.PP));
  // Context parallelism: the degree, and the algorithm by the framework's
  // name for it -- Megatron-LM's --cp-comm-type p2p|a2a
  // (megatron/training/arguments.py; the ring is p2p), MindSpeed-LLM's
  // --context-parallel-algo megatron_cp_algo|ulysses_cp_algo
  // (mindspeed/arguments.py). Hybrid: MindSpeed's hybrid_cp_algo with
  // --ulysses-degree-in-cp u; Megatron-Core's a2a+p2p with
  // --hierarchical-context-parallel-sizes u cp/u (its first level the u
  // adjacent cp ranks, transformer_config.py). cp sits right outside tp in
  // both meshes, as in Loom's.
  if (P.CP > 1) {
    add("--context-parallel-size " + Twine(P.CP));
    bool Ring = P.CPA == CPAlgo::Ring, Hybrid = P.CPA == CPAlgo::Hybrid;
    if (Mind)
      add(Twine("--context-parallel-algo ") +
          (Ring ? "megatron_cp_algo"
           : Hybrid
               ? "hybrid_cp_algo --ulysses-degree-in-cp " + Twine(P.CPUlysses)
               : "ulysses_cp_algo"));
    else
      add(Twine("--cp-comm-type ") +
          (Ring     ? "p2p"
           : Hybrid ? "a2a+p2p --hierarchical-context-parallel-sizes " +
                          Twine(P.CPUlysses) + " " + Twine(P.getCPRingSize())
                    : "a2a"));
  }
  // Rank order: Megatron's default is tp-cp-ep-dp-pp, --use-tp-pp-dp-mapping
  // makes it tp-cp-ep-pp-dp (megatron/training/initialize.py).
  if (!meshIs(P, DefaultAxisOrder)) {
    if (meshIs(P, {MeshAxis::EP, MeshAxis::PP, MeshAxis::DP}))
      add("--use-tp-pp-dp-mapping");
    else
      warn("order=" + getAxisOrderName(P.Order) + ": " + Name +
           " orders ranks tp-ep-dp-pp, or tp-ep-pp-dp with "
           "--use-tp-pp-dp-mapping; this mesh is lost, so groups land on "
           "other links than Loom costed");
  }
}

void MegatronFlags::addStages() {
  // Stages: Megatron's default when Loom's split is it; otherwise the
  // framework's flag for uneven stages.
  if (!F.DefaultSplit) {
    if (!Mind) {
      add("--pipeline-model-parallel-layout \"" + getLayoutString(F.Chunks) +
          "\"");
    } else if (P.VirtualStages == 1 && F.EndsInPlace && P.PP > 1) {
      std::string List;
      for (const std::string &C : F.Chunks)
        List += (List.empty() ? "" : ",") + std::to_string(countBlocks(C));
      add("--num-layer-list " + List);
    } else {
      if (P.VirtualStages > 1)
        warn("Loom's virtual stages (" + getLayoutString(F.Chunks) +
             ") are uneven and MindSpeed-LLM has no flag for that "
             "(--num-layer-list excludes virtual stages); it splits the " +
             Twine(F.Blocks) + " layers evenly");
      else
        warn("Loom's stages (" + getLayoutString(F.Chunks) +
             ") move the embedding or the head, which MindSpeed-LLM has "
             "no flag for; it splits the " +
             Twine(F.Blocks) + " layers evenly");
    }
  }
  // Interleaving: with a layout Megatron reads it from there; otherwise an
  // even number of layers per virtual stage.
  if (P.VirtualStages > 1 && (Mind || F.DefaultSplit)) {
    unsigned Chunks = P.PP * P.VirtualStages;
    if (F.Blocks % Chunks == 0)
      add("--num-layers-per-virtual-pipeline-stage " +
          Twine(F.Blocks / Chunks));
    else
      warn("vpp=" + Twine(P.VirtualStages) + ": " + Twine(F.Blocks) +
           " layers do not split evenly into " + Twine(Chunks) +
           " virtual stages, as " + Name +
           " needs; no interleaving flag, so the bubble will be larger "
           "than predicted");
  }
}

void MegatronFlags::addExperts() {
  if (P.EP <= 1)
    return;
  add("--expert-model-parallel-size " + Twine(P.EP));
  add("--num-experts " + Twine(In.NumExperts));
  if (!In.StackedExperts)
    warn("ep=" + Twine(P.EP) +
         ": the model's experts are unrolled "
         "branches that every token visits; " +
         Name +
         "'s MoE routes each token to its top-k experts, so the flags "
         "shard the experts but the computation differs from what Loom "
         "costed");
}

void MegatronFlags::addKernels() {
  if (P.SP && P.TP > 1)
    add("--sequence-parallel");
  // The prediction assumed fused attention. Megatron-Core picks the kernel
  // with --attention-backend (megatron/core/transformer/enums.py
  // AttnBackend; --use-flash-attn no longer decides it); MindSpeed-LLM's
  // flag is --use-flash-attn (torch_npu's npu_fusion_attention).
  if (In.FusedAttention)
    add(Mind ? "--use-flash-attn" : "--attention-backend flash");
  // Fused norm, SwiGLU and rotary kernels: MindSpeed-LLM's own flags (its
  // example scripts, e.g. examples/mcore/llama2/pretrain_llama2_7b_ptd.sh);
  // Megatron-LM fuses them by default (Transformer Engine's norms,
  // bias-swiglu and rope fusion on unless --no-... is given).
  if (Mind)
    for (const std::string &K : In.FusedElementwise) {
      if (K == "rmsnorm")
        add("--use-fused-rmsnorm");
      else if (K == "swiglu")
        add("--use-fused-swiglu");
      else if (K == "rotary")
        add("--use-fused-rotary-pos-emb");
    }
}

void MegatronFlags::addRecompute() {
  switch (P.RC) {
  case Recompute::None:
    break;
  case Recompute::Selective:
    // Megatron's selective recompute repeats the attention core
    // (core_attn), as Loom's does.
    add("--recompute-granularity selective");
    break;
  case Recompute::Full:
    // Loom's full recompute keeps each layer's input and recomputes the
    // layer: uniform units of one layer.
    add("--recompute-granularity full");
    add("--recompute-method uniform");
    add("--recompute-num-layers 1");
    break;
  }
}

void MegatronFlags::addBatchAndShape() {
  add("--micro-batch-size " + Twine(P.MicroBatchSize));
  add("--global-batch-size " + Twine(In.GlobalBatch));
  if (P.ZeroStage >= 1)
    add("--use-distributed-optimizer");
  // ZeRO-2/3: Megatron-FSDP's sharding strategies, which need the
  // fsdp_dtensor checkpoint format (arguments.py validate_args; Megatron-FSDP
  // v1 runs with the distributed optimizer).
  if (P.ZeroStage >= 2 && !Mind) {
    add("--use-megatron-fsdp");
    add(Twine("--data-parallel-sharding-strategy ") +
        (P.ZeroStage == 2 ? "optim_grads" : "optim_grads_params"));
    add("--ckpt-format fsdp_dtensor");
  } else if (P.ZeroStage >= 2)
    warn("zero=" + Twine(P.ZeroStage) +
         ": --use-distributed-optimizer shards only the optimizer states "
         "(ZeRO-1); the " +
         (P.ZeroStage == 2 ? "gradient" : "gradient and parameter") +
         " sharding Loom costed is lost, so each device needs more memory "
         "than predicted");
  add("--num-layers " + Twine(F.Blocks));
  add("--seq-length " + Twine(In.Seq));
  addVocabPadding();
}

void MegatronFlags::addVocabPadding() {
  if (In.VocabTo <= In.VocabFrom)
    return;
  // Megatron pads the tokenizer's vocabulary to a multiple of
  // --make-vocab-size-divisible-by x tp (tokenizer.py,
  // _vocab_size_with_padding). Loom padded to a multiple of N x T (T the
  // tp it padded for, which the plan's tp divides when the search chose
  // it): N x T / tp gives the same size at the plan's tp.
  uint64_t Multiple = (uint64_t)In.VocabDivisibleBy * In.VocabTP;
  if (P.TP && Multiple % P.TP == 0) {
    add("--make-vocab-size-divisible-by " + Twine(Multiple / P.TP));
    return;
  }
  warn("the vocabulary was padded " + Twine(In.VocabFrom) + " -> " +
       Twine(In.VocabTo) + " (a multiple of " + Twine(Multiple) +
       "), which no --make-vocab-size-divisible-by gives at tp=" + Twine(P.TP) +
       "; " + Name + " pads to its own size");
}

void MegatronFlags::addPrecision() {
  // The recipe Loom costed (loom/Plan/Precision.h), whatever type the
  // model was exported in.
  DataType T = In.getRunType();
  if (T == DataType::BFloat16)
    add("--bf16");
  else if (T == DataType::Float16)
    add("--fp16");
  else if (!In.Precision)
    warn("the model's weights are " + getDataTypeName(In.ParamType) +
         ": no --bf16/--fp16, but Loom costed mixed-precision training "
         "(2-byte weights and gradients); add --bf16 for that memory");
  else if (*In.Precision == PrecisionKind::TF32)
    warn("precision tf32: " + Name +
         " has no flag for it; Loom costed fp32 training with TF32 "
         "matmuls: set torch.backends.cuda.matmul.allow_tf32 = True");
  // fp8: Transformer Engine's delayed scaling as Loom costed it
  // (loom/Plan/Precision.h). Megatron's own defaults differ
  // (--fp8-amax-history-len 1, --fp8-amax-compute-algo most_recent;
  // megatron/training/arguments.py), so all three are written. MindSpeed
  // (torch_npu on Ascend) has no fp8 training recipe for the 910B.
  if (In.Precision == PrecisionKind::FP8) {
    if (Mind) {
      warn("precision fp8: " + Name +
           " has no fp8 training flags for this hardware; Loom costed "
           "Transformer Engine's fp8 recipe, which the launch arguments "
           "below (--bf16) do not run");
    } else {
      add("--fp8-format hybrid");
      add("--fp8-amax-history-len 1024");
      add("--fp8-amax-compute-algo max");
      add("--transformer-impl transformer_engine");
    }
  }
  // Gradient width: with --bf16 Megatron accumulates and reduces in fp32
  // unless --grad-reduce-in-bf16; with --fp16 it reduces fp16 gradients
  // unless --accumulate-allreduce-grads-in-fp32 (arguments.py,
  // validate_args).
  if (T == DataType::BFloat16 && P.Grad == GradPrecision::BF16)
    add("--grad-reduce-in-bf16");
  if (T == DataType::Float16) {
    if (P.Grad == GradPrecision::FP32)
      add("--accumulate-allreduce-grads-in-fp32");
    else
      warn("grad=bf16 with fp16 weights: " + Name +
           " reduces fp16 gradients (the same width, another format)");
  }
}

void MegatronFlags::addOffload() {
  const OffloadTiers &Off = P.Offload;
  if (Off.Opt == MemoryTier::Host) {
    if (Mind) {
      // MindSpeed's swap optimizer: with the distributed optimizer and the
      // fused AdamW (Ascend/MindSpeed docs/zh/features/swap-optimizer.md).
      add("--swap-optimizer");
      add("--optimizer-selection fused_adamw");
    } else {
      // Megatron's hybrid-device optimizer: all of the states on the host
      // (--optimizer-offload-fraction 1.0), which asserts the
      // precision-aware optimizer (arguments.py validate_args).
      add("--optimizer-cpu-offload");
      add("--optimizer-offload-fraction 1.0");
      add("--use-precision-aware-optimizer");
    }
  }
  OffloadTiers Rest = Off;
  if (Rest.Opt == MemoryTier::Host)
    Rest.Opt = MemoryTier::HBM;
  if (Rest.any())
    warn("offload=" + Off.str() + ": " + Name + " has no flag for " +
         Rest.str() + "; the memory Loom costed off HBM stays in HBM");
}

void MegatronFlags::addOverlaps() {
  // Communication overlap (Cost/Overlap.h). TP: Megatron-Core's
  // --tp-comm-overlap (Transformer Engine userbuffers) and MindSpeed-LLM's
  // --use-ascend-mc2 (Ascend's fused AllGather+MatMul /
  // MatMul+ReduceScatter; --use-mc2 is deprecated,
  // mindspeed_llm/features_manager/arguments/deprecated_args.py);
  // both chunk the sequence-parallel all-gather and reduce-scatter, so
  // Megatron refuses --tp-comm-overlap without --sequence-parallel.
  if (P.TPOverlap && P.TP > 1) {
    add(Mind ? "--use-ascend-mc2" : "--tp-comm-overlap");
    if (!P.SP)
      warn("tp_overlap=on without sp: " + Name + "'s " +
           (Mind ? "--use-ascend-mc2" : "--tp-comm-overlap") +
           " overlaps the sequence-parallel all-gather and reduce-scatter; "
           "add sp=on to the plan, or the TP all-reduces stay exposed");
  }
  // DP: the distributed optimizer's bucketed reduce-scatter beside the
  // backward (--overlap-grad-reduce) and, with sharded optimizer states,
  // the parameter all-gather beside the next forward
  // (--overlap-param-gather, which needs the distributed optimizer).
  if (P.DP > 1 && P.DPOverlap) {
    add("--overlap-grad-reduce");
    if (P.ZeroStage >= 1)
      add("--overlap-param-gather");
  }
  // The bucket Loom costed when it is not Megatron's default (--set
  // ddp.bucket_size, or the profile's): --ddp-bucket-size, in parameters.
  if (P.DP > 1 && In.DDPBucketParams > 0)
    add("--ddp-bucket-size " + Twine((uint64_t)In.DDPBucketParams));
  // PP: Megatron's overlap_p2p_comm is on by default and off with
  // --no-overlap-p2p-communication; its non-interleaved 1F1B turns it off
  // anyway (arguments.py, validate_args), which pp_overlap=off predicts.
  if (P.PP > 1 && !P.PPOverlap && P.VirtualStages > 1)
    add("--no-overlap-p2p-communication");
}

void MegatronFlags::checkModelShape() {
  if (F.Blocks == 0)
    warn("the model has no repeated transformer blocks (--num-layers 0); " +
         Name +
         " builds transformer models, so only the parallelism and "
         "batch flags carry over");
  else if (F.OtherLayers > 2 || (F.OtherLayers && !F.Chunks.empty() &&
                                 !StringRef(F.Chunks.front()).contains('E') &&
                                 !StringRef(F.Chunks.back()).contains('L')))
    warn(Twine(F.OtherLayers) +
         " of the model's layers are not repeated blocks; " + Name +
         " builds an embedding, --num-layers transformer layers and a head");
}

/// Megatron-LM and MindSpeed-LLM share most flags (MindSpeed-LLM patches
/// Megatron's argument parser).
ExportResult exportMegatronLike(ExportTarget T, const ExportInput &In) {
  ExportResult R;
  R.Target = T;
  R.FileName = getExportFileName(T).str();
  Facts F = getFacts(In);
  MegatronFlags MF(T, In, F, R.Warnings);
  MF.addMesh();
  MF.addStages();
  MF.addExperts();
  MF.addKernels();
  MF.addRecompute();
  MF.addBatchAndShape();
  MF.addPrecision();
  MF.addOffload();
  MF.addOverlaps();
  MF.checkModelShape();

  raw_string_ostream OS(R.Text);
  printHeader(MF.getName(), In, F, OS);
  OS << "# Flag names: "
     << (MF.isMindSpeed()
             ? "Ascend/MindSpeed-LLM@c77308a1 on NVIDIA/Megatron-LM "
               "core_v0.12.1"
             : "NVIDIA/Megatron-LM@d98e8a64")
     << " (examples/frameworks); add the model's shape, data and optimizer "
        "flags.\n";
  OS << "# Use: torchrun ... pretrain_gpt.py $(grep -v '^#' " << R.FileName
     << ") ...\n";
  for (const std::string &W : R.Warnings)
    OS << "# warning: " << W << "\n";
  OS << join(MF.getFlags(), " ") << "\n";
  OS.flush();
  return R;
}

/// DeepSpeed's batch check (deepspeed/runtime/config.py _batch_assertion):
/// train_batch_size == micro x accumulation x world_size, where world_size
/// is the data-parallel size of the model-parallel unit when there is one
/// (a PipelineModule brings its own) and every rank otherwise
/// (DeepSpeedConfig.__init__; deepspeed.initialize passes no mpu with
/// AutoTP), so at pp = 1 the tp ranks count too.
int64_t getDeepSpeedWorld(const ParallelPlan &P) {
  return P.PP > 1 ? (int64_t)P.DP : (int64_t)P.DP * P.TP;
}

/// Warnings for what deepspeed.json cannot hold (the model code's part).
void warnDeepSpeed(const ExportInput &In, const Facts &F,
                   std::vector<std::string> &Warnings) {
  const ParallelPlan &P = In.Cost.Plan;
  auto Warn = [&](const Twine &W) {
    Warnings.push_back(("deepspeed: " + W).str());
  };
  if (!meshIs(P, DefaultAxisOrder))
    Warn("order=" + getAxisOrderName(P.Order) +
         ": DeepSpeed's pipeline topology orders ranks tp-dp-pp; this mesh "
         "is lost, so groups land on other links than Loom costed");
  if (P.PP > 1) {
    Warn("pp=" + Twine(P.PP) +
         ": deepspeed.json cannot hold the stage "
         "count; pass it in the model code, PipelineModule(num_stages=" +
         Twine(P.PP) + ")");
    if (!F.DefaultSplit)
      Warn("Loom's stages (" + getStageCounts(In.Cost) +
           " layers, embedding and head included) are not an even split "
           "of the transformer layers; set PipelineModule's "
           "partition_method in the model code, the JSON has no key for "
           "them");
    if (P.TP > 1)
      Warn("tp=" + Twine(P.TP) + " with pp=" + Twine(P.PP) +
           ": AutoTP does not combine with the pipeline engine; the model "
           "code splits its layers (PipeModelDataParallelTopology(num_mp=" +
           Twine(P.TP) + "))");
  }
  // Outside DeepSpeed's profile (the search never ranks them); kept for
  // plans built by hand.
  if (P.PP > 1 && P.ZeroStage >= 2)
    Warn("zero=" + Twine(P.ZeroStage) + " with pp=" + Twine(P.PP) +
         ": DeepSpeed's pipeline engine refuses ZeRO-2/3; the stage is "
         "written as planned but will not start");
  if (P.VirtualStages > 1)
    Warn("vpp=" + Twine(P.VirtualStages) +
         ": DeepSpeed's pipeline engine has no interleaved schedule; the "
         "bubble will be larger than predicted");
  if (P.SP && P.TP > 1)
    Warn("sp=1: DeepSpeed has no Megatron-style sequence parallelism "
         "(DeepSpeed-Ulysses splits attention heads, another scheme); the "
         "activation memory saving Loom costed is lost");
  if (P.PP == 1 && P.TP > 1 && In.GlobalBatch)
    Warn("tp=" + Twine(P.TP) + ": train_batch_size " +
         Twine(getDeepSpeedWorld(P) * P.MicroBatchSize * P.NumMicroBatches) +
         " counts the " + Twine(P.TP) +
         " AutoTP ranks that read the same samples, as DeepSpeed's batch "
         "check does without a model-parallel unit; a step trains " +
         Twine(In.GlobalBatch) + " samples");
  if (P.EP > 1)
    Warn("ep=" + Twine(P.EP) +
         ": the expert-parallel degree is an argument "
         "of the model code, deepspeed.moe.layer.MoE(ep_size=" +
         Twine(P.EP) + ")");
  // DeepSpeed-Ulysses is model code: DistributedAttention wraps the local
  // attention over a sequence-parallel group (deepspeed/sequence/layer.py);
  // Megatron-DeepSpeed sizes that group with --ds-sequence-parallel-size.
  // The ring has no DeepSpeed form (its profile lists ulysses only).
  if (P.CP > 1)
    Warn("cp=" + Twine(P.CP) + ",cp_algo=" + getCPAlgoName(P.CPA) +
         ": the sequence-parallel (Ulysses) degree is not a deepspeed.json "
         "key; wrap the attention in deepspeed.sequence.layer."
         "DistributedAttention over groups of " +
         Twine(P.CP) +
         " consecutive-after-tp ranks (Megatron-DeepSpeed: "
         "--ds-sequence-parallel-size " +
         Twine(P.CP) + ")" +
         (P.CPA != CPAlgo::A2A
              ? "; DeepSpeed has no ring attention, so this plan's ring is "
                "not what it runs"
              : ""));
  if (P.RC == Recompute::Selective)
    Warn("recompute=selective: DeepSpeed recomputes the modules the model "
         "code wraps in deepspeed.checkpointing.checkpoint(); wrap only the "
         "attention core");
  if (P.RC == Recompute::Full && P.PP == 1)
    Warn("recompute=full: wrap every transformer layer in "
         "deepspeed.checkpointing.checkpoint() in the model code");
  if (P.Offload.uses(MemoryTier::SSD))
    Warn("offload=" + P.Offload.str() +
         ": set nvme_path to the NVMe mount of each server (written as "
         "DeepSpeed's documented example, /local_nvme)");
  if (In.Precision == PrecisionKind::TF32)
    Warn("precision tf32: DeepSpeed has no section for it; Loom costed fp32 "
         "training with TF32 matmuls: set "
         "torch.backends.cuda.matmul.allow_tf32 = True");

  if (!In.Precision && In.ParamType != DataType::BFloat16 &&
      In.ParamType != DataType::Float16)
    Warn("the model's weights are " + getDataTypeName(In.ParamType) +
         ": no bf16/fp16 section, but Loom costed mixed-precision training "
         "(2-byte weights and gradients)");
}

/// One offload section: {"device": "cpu"|"nvme"[, "nvme_path": ...]}.
void writeOffloadDevice(json::OStream &J, StringRef Key, MemoryTier T) {
  J.attributeObject(Key, [&] {
    J.attribute("device", T == MemoryTier::SSD ? "nvme" : "cpu");
    if (T == MemoryTier::SSD)
      J.attribute("nvme_path", "/local_nvme");
    J.attribute("pin_memory", true);
  });
}

/// zero_optimization (deepspeed/runtime/zero/config.py): the stage, the
/// overlap of the gradient reduction with backward, the bucket Loom costed,
/// and ZeRO-Offload's sections (offload_config.py).
void writeZero(json::OStream &J, const ExportInput &In) {
  const ParallelPlan &P = In.Cost.Plan;
  J.attributeObject("zero_optimization", [&] {
    J.attribute("stage", (int64_t)P.ZeroStage);
    if (P.DP > 1)
      J.attribute("overlap_comm", P.DPOverlap);
    if (P.DP > 1 && In.DDPBucketParams > 0 && P.ZeroStage >= 1)
      J.attribute("reduce_bucket_size", (int64_t)In.DDPBucketParams);
    if (P.Offload.Opt != MemoryTier::HBM)
      writeOffloadDevice(J, "offload_optimizer", P.Offload.Opt);
    if (P.Offload.Param != MemoryTier::HBM)
      writeOffloadDevice(J, "offload_param", P.Offload.Param);
  });
}

ExportResult exportDeepSpeed(const ExportInput &In) {
  ExportResult R;
  R.Target = ExportTarget::DeepSpeed;
  R.FileName = getExportFileName(R.Target).str();
  const ParallelPlan &P = In.Cost.Plan;
  Facts F = getFacts(In);
  warnDeepSpeed(In, F, R.Warnings);
  raw_string_ostream OS(R.Text);
  {
    json::OStream J(OS, 2);
    J.object([&] {
      J.attribute("train_batch_size",
                  getDeepSpeedWorld(P) * P.MicroBatchSize * P.NumMicroBatches);
      J.attribute("train_micro_batch_size_per_gpu", (int64_t)P.MicroBatchSize);
      J.attribute("gradient_accumulation_steps", (int64_t)P.NumMicroBatches);
      // The recipe Loom costed, not the export's type.
      if (In.getRunType() == DataType::BFloat16)
        J.attributeObject("bf16", [&] { J.attribute("enabled", true); });
      else if (In.getRunType() == DataType::Float16)
        J.attributeObject("fp16", [&] { J.attribute("enabled", true); });
      writeZero(J, In);
      J.attribute("communication_data_type",
                  P.Grad == GradPrecision::BF16 ? "bf16" : "fp32");
      if (P.TP > 1 && P.PP == 1)
        J.attributeObject("tensor_parallel",
                          [&] { J.attribute("autotp_size", (int64_t)P.TP); });
      if (P.PP > 1 && P.RC == Recompute::Full)
        J.attributeObject("pipeline", [&] {
          J.attribute("activation_checkpoint_interval", (int64_t)1);
        });
      // Activations kept for recompute on the host
      // (activation_checkpointing/config.py).
      if (P.Offload.Act == MemoryTier::Host)
        J.attributeObject("activation_checkpointing",
                          [&] { J.attribute("cpu_checkpointing", true); });
    });
  }
  OS << "\n";
  OS.flush();
  return R;
}

} // namespace

ExportResult exportLaunchArgs(ExportTarget T, const ExportInput &In) {
  if (T == ExportTarget::DeepSpeed)
    return exportDeepSpeed(In);
  return exportMegatronLike(T, In);
}

} // namespace loom
