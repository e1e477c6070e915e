//===- Precision.h - The training precision recipe --------------*- C++ -*-===//
//
// One recipe decides every precision of a prediction (issue 39 item 6): the
// type each kernel computes and stores in, the bytes of weights, gradients,
// optimizer states and saved activations, and the type of every collective.
// The graph's own float types do not: torch.onnx.export writes fp32 unless
// the module was cast, and almost every large run trains in bf16 or fp16
// mixed precision. What the recipe leaves alone: integer ids, boolean
// masks, quantized (int8, fp8, 4-bit) storage, and fp32 islands a 16-bit
// model insists on (passes/ApplyPrecision.cpp says how one is recognized).
//
// Recipes (Micikevicius et al. 2018, "Mixed Precision Training", §3:
// 16-bit weights, activations and gradients, an fp32 master copy of the
// weights, fp32 accumulation; Kalamkar et al. 2019 for bf16):
//   bf16  bf16 matmuls and activations; fp32 master weights and Adam moments
//         (12 bytes per parameter); gradients reduced as the plan's grad=
//         says (fp32 by default, bf16 where the framework offers it).
//   fp16  the same in fp16 (loss scaling costs nothing Loom models);
//         grad=bf16 is a 16-bit reduction here too (Megatron's --fp16
//         reduces fp16 gradients unless --accumulate-allreduce-grads-in-fp32).
//   fp32  everything fp32: 4-byte weights that are their own master copy,
//         Adam moments 8 bytes per parameter, fp32 gradients; matmuls at
//         the cube's IEEE fp32 rate.
//   tf32  fp32 storage as fp32, matmuls on the tensor cores' TF32 format
//         (NVIDIA Ampere whitepaper): the cube's `tf32` throughput.
//   fp8   training: Transformer Engine's delayed-scaling recipe
//         (transformer_engine.common.recipe.DelayedScaling: fp8_format
//         HYBRID -- e4m3 forward, e5m2 gradients -- amax_history_len 1024,
//         amax_compute_algo max, one fp32 scale per tensor; TE docs,
//         "Common API" and "FP8 Delayed Scaling"). The GEMMs of TE's
//         Linear layers (a weight operand) run at the cube's `fp8`
//         throughput; everything else is the bf16 recipe: bf16 weights
//         the fp8 copies are cast from, fp32 master weights and Adam
//         states in the optimizer, bf16 activations saved for backward,
//         attention in bf16 (TE's fp8_dpa is off by default). Scaling
//         traffic, per fp8 GEMM: each operand is quantized by one read of
//         its bf16 tensor and one write of its fp8 copy, which the GEMM
//         reads (2 + 1 + 1 bytes per element instead of 2), and each
//         quantized tensor reads its amax history and scale ((1024 + 2)
//         x 4 bytes).
//         serving (--mode serve): fp8 weights, GEMM activations and KV
//         cache, 1 byte per element (TensorRT-LLM's and vLLM's fp8
//         checkpoints: per-tensor scales, e4m3), GEMMs at `fp8`; norms,
//         softmax and the attention core in bf16 (vLLM dequantizes an fp8
//         KV cache as attention reads it).
// A recipe whose matmul format has no storage type (tf32, fp8) names it
// in CubeFormat: the throughput key the cube is costed at, while storage
// follows Storage.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_PRECISION_H
#define LOOM_PLAN_PRECISION_H

#include "loom/Support/DataType.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include <string>
#include <vector>

namespace loom {

struct HardwareModel;
struct FrameworkProfile;
struct OpCost;

enum class PrecisionKind : uint8_t { BF16, FP16, FP32, TF32, FP8 };

llvm::StringRef getPrecisionName(PrecisionKind K);
llvm::Optional<PrecisionKind> parsePrecisionName(llvm::StringRef S);
/// "bf16, fp16, fp32, tf32, fp8".
llvm::StringRef getPrecisionNames();

struct PrecisionRecipe {
  PrecisionKind Kind = PrecisionKind::BF16;
  /// The type of every float tensor the recipe owns: activations (and what
  /// backward keeps of them), weights as the kernels read them, and every
  /// collective's payload.
  DataType Storage = DataType::BFloat16;
  /// The cube's throughput key for MatMul/Gemm/Conv when it is not
  /// Storage's name ("tf32"; an fp8 recipe would put its format here);
  /// empty: Storage's.
  std::string CubeFormat;
  /// Bytes per parameter of the weights the kernels read.
  double WeightBytes = 2;
  /// Bytes per parameter of the fp32 master copy (0: the weights are
  /// their own master, fp32 and tf32).
  double MasterBytes = 4;
  /// True when gradients may be reduced in 16 bits (grad=bf16): the 16-bit
  /// recipes; fp32 and tf32 reduce fp32 gradients.
  bool Allows16BitGrads = true;
  /// fp8 only: the recipe is serving's (fp8 weights, GEMM activations and
  /// KV cache) rather than Transformer Engine's training recipe.
  bool Serving = false;
  /// fp8 training: the amax history each quantized tensor keeps
  /// (DelayedScaling.amax_history_len); 0: no scaling state.
  unsigned AmaxHistory = 0;
  /// Where the choice came from, for reports ("--precision",
  /// "megatron-core's default (source)", ...).
  std::string Why;

  /// "bf16 mixed precision (bf16 matmuls, activations and collectives;
  /// fp32 master weights and Adam states)".
  std::string describe() const;
  /// The cube's throughput key: CubeFormat, else Storage's name.
  std::string getCubeFormat() const;
  /// True when the recipe computes weight GEMMs in fp8.
  bool isFP8() const { return Kind == PrecisionKind::FP8; }
  /// Bytes of one quantized tensor's scaling state: amax history, scale
  /// and its inverse, fp32 each ((AmaxHistory + 2) x 4).
  double getScalingStateBytes() const {
    return AmaxHistory ? (AmaxHistory + 2) * 4.0 : 0;
  }
  /// Retypes the cost of one matrix op computing in Storage: the cube
  /// format it runs at and, for fp8, the bytes it moves (Precision.h's
  /// recipes). \p WeightGemm: the op multiplies by a weight (fp8 applies
  /// to those only: TE's Linear layers, serving's fp8 weights).
  void applyToCube(OpCost &C, bool WeightGemm) const;
  /// The recipe as the manifest and the plan JSON write it: name,
  /// compute (matmul format), storage, weight/master/optimizer bytes,
  /// gradient reduction types allowed, why.
  llvm::json::Value toJSON() const;
};

/// The recipe \p K; \p Serving selects fp8's serving recipe (the other
/// recipes are the same in both modes).
PrecisionRecipe makePrecisionRecipe(PrecisionKind K, bool Serving = false);

/// What a framework profile says of precision: the recipes it runs and the
/// one it runs by default, with their source.
struct FrameworkPrecision {
  std::vector<PrecisionKind> Values;
  PrecisionKind Default = PrecisionKind::BF16;
  std::string Source;
};

/// Loom's default where no profile names one (--framework none): bf16
/// where \p HW's aicore lists a bf16 cube throughput, else fp16 where it
/// lists fp16, else fp32: the 16-bit mixed precision large runs use, so a
/// model exported in fp32 and in fp16 predicts the same.
PrecisionKind getHardwareDefaultPrecision(const HardwareModel &HW);

/// The recipe for \p Flag (--precision; None: not given) under framework
/// \p F (null: none) on \p HW (read from \p HWFile, named in errors),
/// with Why filled; \p Serving: --mode serve. Errors name the rule: a
/// recipe the hardware's cube has no throughput for (tf32 on Ascend, fp8
/// on A100 or 910B, fp16 on hardware without it), a data type the compute
/// class does not list, a recipe the framework cannot run.
llvm::Expected<PrecisionRecipe>
resolvePrecision(llvm::Optional<llvm::StringRef> Flag,
                 const FrameworkProfile *F, const HardwareModel &HW,
                 bool Serving = false, llvm::StringRef HWFile = "");

} // namespace loom

#endif // LOOM_PLAN_PRECISION_H
