//===- Framework.cpp - --framework and what --export implies --------------===//
#include "Framework.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace llvm;

namespace loom {

Expected<std::vector<std::shared_ptr<const FrameworkProfile>>>
resolveFrameworks(Optional<StringRef> Flag, ArrayRef<ExportTarget> Exports) {
  std::vector<std::shared_ptr<const FrameworkProfile>> Out;
  if (Flag) {
    Expected<FrameworkProfile> F = loadFrameworkProfile(*Flag);
    if (!F)
      return F.takeError();
    for (ExportTarget T : Exports)
      if (F->Export != getExportTargetName(T))
        return createStringError(
            inconvertibleErrorCode(),
            "--export %s disagrees with --framework %s (%s)",
            getExportTargetName(T).str().c_str(), Flag->str().c_str(),
            F->Export.empty()
                ? "which has no launch arguments to write"
                : ("whose launch arguments are --export " + F->Export).c_str());
    Out.push_back(std::make_shared<const FrameworkProfile>(std::move(*F)));
    return Out;
  }
  // --export F implies --framework F; several targets: plans all of them
  // can run.
  for (ExportTarget T : Exports) {
    Expected<FrameworkProfile> F = loadFrameworkProfile(getExportTargetName(T));
    if (!F)
      return F.takeError();
    Out.push_back(std::make_shared<const FrameworkProfile>(std::move(*F)));
  }
  return Out;
}

/// The fused element-wise kernels (detect-fused-kernels' names) a
/// framework's profile may name where the hardware file does not list
/// them: one launch reading its inputs and writing its output once, at
/// efficiency 1.0, the roofline Loom charges every unfused element-wise op
/// (include/loom/Cost/FusedKernels.h), so the framework's fusion changes
/// the traffic and the launches, not the rate. Fused attention is not
/// here: its efficiency is the hardware's (fused_kernels.attention).
static bool isElementwiseFusedKernel(StringRef K) {
  return K == "rmsnorm" || K == "layernorm" || K == "swiglu" || K == "rotary";
}

void applyFrameworkHow(const FrameworkProfile &F, HardwareModel &HW,
                       CompileOptions &O) {
  auto It = HW.Device.Classes.find("aicore");
  if (F.FusedKernels && !O.FusedKernels) {
    std::vector<std::string> Use;
    for (const std::string &K : *F.FusedKernels) {
      if (It != HW.Device.Classes.end() && isElementwiseFusedKernel(K) &&
          !It->second.getFusedKernel(K)) {
        FusedKernel FK;
        FK.Name = K;
        It->second.FusedKernels[K] = FK;
      }
      if (any_of(HW.Device.Classes, [&](const auto &KV) {
            return KV.second.getFusedKernel(K) != nullptr;
          }))
        Use.push_back(K);
    }
    O.FusedKernels = Use;
  }
  if (!O.DDPBucketParams && F.DDPBucketParams > 0)
    O.DDPBucketParams = F.DDPBucketParams;
  if (!F.AnyPlan)
    O.OptimizerBytesPerParam = F.OptimizerBytesPerParam;
  if (!F.TPOverlapShare && !F.DPOverlapShare && !F.PPOverlapShare)
    return;
  if (It == HW.Device.Classes.end() || It->second.Overlap)
    return;
  if (!StringRef(HW.Device.Name).startswith(F.OverlapDevices))
    return;
  // Counts of SMs / AI cores become shares of the class; a class that
  // gives no core count gets none.
  double Per = 1;
  if (F.OverlapInCores) {
    if (!It->second.Cores)
      return;
    Per = 1.0 / It->second.Cores;
  }
  auto Share = [&](Optional<double> V) -> Optional<double> {
    if (!V)
      return None;
    return std::min(*V * Per, 0.99);
  };
  CommOverlap Ov;
  Ov.TP = Share(F.TPOverlapShare);
  Ov.DP = Share(F.DPOverlapShare);
  Ov.PP = Share(F.PPOverlapShare);
  Ov.Source = "framework " + F.Name + " (examples/frameworks)";
  It->second.Overlap = Ov;
}

Error resolveRecipe(CompilationUnit &CU, Optional<StringRef> Flag,
                    const HardwareModel &HW, StringRef HWFile) {
  const auto &Fs = CU.Opts.Frameworks;
  Expected<PrecisionRecipe> R =
      resolvePrecision(Flag, Fs.empty() ? nullptr : Fs.front().get(), HW,
                       CU.Opts.Serve != nullptr, HWFile);
  if (!R)
    return R.takeError();
  // Every framework the plan is for must run it (--export A,B).
  for (size_t I = 1; I < Fs.size(); ++I)
    if (Fs[I]->Precision && !is_contained(Fs[I]->Precision->Values, R->Kind))
      return createStringError(
          inconvertibleErrorCode(),
          "precision %s (%s): --framework %s does not run it (%s): the rule "
          "is that Loom costs only recipes the framework can run",
          getPrecisionName(R->Kind).str().c_str(), R->Why.c_str(),
          Fs[I]->Name.c_str(), Fs[I]->Precision->Source.c_str());
  if (CU.PlanRequest && CU.PlanRequest->Grad &&
      *CU.PlanRequest->Grad == GradPrecision::BF16 && !R->Allows16BitGrads)
    return createStringError(
        inconvertibleErrorCode(),
        "--plan grad=bf16 with precision %s: the rule is that only a 16-bit "
        "recipe reduces gradients in 16 bits (fp32 and tf32 reduce fp32 "
        "gradients); use grad=fp32 or --precision bf16",
        getPrecisionName(R->Kind).str().c_str());
  CU.Opts.Precision = std::move(*R);
  return Error::success();
}

} // namespace loom
