//===- Export.h - A plan as a training framework's launch flags -*- C++ -*-===//
//
// The hand-off (issue 20): the chosen plan written as the launch arguments
// of Megatron-LM, MindSpeed-LLM or DeepSpeed. Plain data in (the plan and
// the few model facts the flags need), text out, plus one warning per part
// of the plan the framework cannot express: never silently wrong flags.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_REPORT_EXPORT_H
#define LOOM_REPORT_EXPORT_H

#include "loom/IR/Graph.h"
#include "loom/Plan/Precision.h"
#include "loom/Planner/PlanCost.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace loom {

enum class ExportTarget { Megatron, MindSpeed, DeepSpeed };

/// "megatron", "mindspeed", "deepspeed".
llvm::StringRef getExportTargetName(ExportTarget T);
/// megatron-args.txt, mindspeed-args.txt, deepspeed.json.
llvm::StringRef getExportFileName(ExportTarget T);
/// Parses the values of --export (each a name or a comma list), in the
/// order given, duplicates dropped. An unknown name is an error naming it
/// and the known ones.
llvm::Expected<std::vector<ExportTarget>>
parseExportTargets(llvm::ArrayRef<std::string> Values);

/// What the writers need to know.
struct ExportInput {
  /// The chosen plan and its predictions.
  PlanCost Cost;
  std::string ModelName, HardwareName;
  unsigned ClusterDevices = 0;
  int64_t GlobalBatch = 0, Seq = 0;
  /// detect-layers' layers, in order (embedding and head included).
  std::vector<LayerInfo::Kind> LayerKinds;
  /// The element type of most parameter bytes (Float16, BFloat16, Float).
  DataType ParamType = DataType::Float;
  /// The precision recipe Loom costed (loom/Plan/Precision.h): the flags
  /// written are its; None: ParamType's, with a warning where that is not
  /// what the cost assumed.
  llvm::Optional<PrecisionKind> Precision;
  /// The 16-bit type the run's weights are in: the recipe's, else
  /// ParamType; Float for fp32 and tf32.
  DataType getRunType() const;
  /// Experts per MoE layer (0: dense model) and whether they are stacked
  /// [E, d, f] weights (routed tokens) or unrolled branches (every expert
  /// sees every token).
  unsigned NumExperts = 0;
  bool StackedExperts = true;
  /// Attention was costed as a fused kernel (detect-fused-kernels), so the
  /// run must use one.
  bool FusedAttention = false;
  /// The fused element-wise kernels costed (rmsnorm, layernorm, swiglu,
  /// rotary), sorted.
  std::vector<std::string> FusedElementwise;
  /// The DP gradient bucket Loom costed, in parameters (--set
  /// ddp.bucket_size or the framework profile's); 0: the framework's
  /// default.
  double DDPBucketParams = 0;
  /// pad-vocab padded the vocabulary VocabFrom -> VocabTo (0, 0: not
  /// padded), to a multiple of VocabDivisibleBy x VocabTP.
  int64_t VocabFrom = 0, VocabTo = 0;
  unsigned VocabDivisibleBy = 0, VocabTP = 0;
};

/// Fills ExportInput from the planning graph and the chosen plan.
ExportInput makeExportInput(const Graph &G, llvm::ArrayRef<LayerInfo> Layers,
                            const PlanCost &Chosen);

struct ExportResult {
  ExportTarget Target;
  std::string FileName;
  /// The file's content.
  std::string Text;
  /// What the framework cannot express, one sentence each.
  std::vector<std::string> Warnings;
};

/// The launch arguments of \p In's plan for \p T.
ExportResult exportLaunchArgs(ExportTarget T, const ExportInput &In);

/// Pipeline chunks (pp x vpp, chunk c on device c % pp) as layer kinds, in
/// Megatron's --pipeline-model-parallel-layout alphabet: 'E' embedding (the
/// first prologue layer), 't' a transformer block, 'L' the head/loss (the
/// last epilogue layer); other layers contribute nothing. The layers per
/// chunk follow the plan's stages (vpp 1) or the even split the shard pass
/// uses (vpp > 1).
std::vector<std::string> getChunkLayouts(const ExportInput &In);

} // namespace loom

#endif // LOOM_REPORT_EXPORT_H
