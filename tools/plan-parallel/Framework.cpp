//===- Framework.cpp - --framework and what --export implies --------------===//
#include "Framework.h"

#include "llvm/ADT/STLExtras.h"

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

void applyFrameworkHow(const FrameworkProfile &F, HardwareModel &HW,
                       CompileOptions &O) {
  if (F.FusedKernels && !O.FusedKernels) {
    std::vector<std::string> Use;
    for (const std::string &K : *F.FusedKernels)
      if (any_of(HW.Device.Classes, [&](const auto &KV) {
            return KV.second.getFusedKernel(K) != nullptr;
          }))
        Use.push_back(K);
    O.FusedKernels = Use;
  }
  if (!O.DDPBucketParams && F.DDPBucketParams > 0)
    O.DDPBucketParams = F.DDPBucketParams;
  if (!F.AnyPlan)
    O.OptimizerBytesPerParam = F.OptimizerBytesPerParam;
  if (!F.TPOverlapShare && !F.DPOverlapShare && !F.PPOverlapShare)
    return;
  auto It = HW.Device.Classes.find("aicore");
  if (It == HW.Device.Classes.end() || It->second.Overlap)
    return;
  CommOverlap Ov;
  Ov.TP = F.TPOverlapShare;
  Ov.DP = F.DPOverlapShare;
  Ov.PP = F.PPOverlapShare;
  Ov.Source = "framework " + F.Name + " (examples/frameworks)";
  It->second.Overlap = Ov;
}

} // namespace loom
