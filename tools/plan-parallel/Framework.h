//===- Framework.h - --framework and what --export implies ------*- C++ -*-===//
//
// plan-parallel's side of framework profiles (loom/Plan/Framework.h): which
// profiles the search runs with, and the profile's "how" facts applied where
// the command line and the hardware file say nothing more specific.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TOOLS_PLAN_PARALLEL_FRAMEWORK_H
#define LOOM_TOOLS_PLAN_PARALLEL_FRAMEWORK_H

#include "loom/Hardware/HardwareModel.h"
#include "loom/Pass/Pass.h"
#include "loom/Report/Export.h"
#include "llvm/ADT/Optional.h"

namespace loom {

/// --framework \p Flag (None: not given) with the --export targets
/// \p Exports: the flag's profile, which each target must be the hand-off
/// of; without the flag, each target's profile (--export F implies
/// --framework F). Errors name the flags that disagree.
llvm::Expected<std::vector<std::shared_ptr<const FrameworkProfile>>>
resolveFrameworks(llvm::Optional<llvm::StringRef> Flag,
                  llvm::ArrayRef<ExportTarget> Exports);

/// The first profile's "how" facts: its fused kernels (those \p HW offers)
/// unless --fused-kernels was given, its DP bucket unless --set
/// ddp.bucket_size was, its optimizer bytes per parameter, its overlap
/// shares where \p HW's compute class gives none.
void applyFrameworkHow(const FrameworkProfile &F, HardwareModel &HW,
                       CompileOptions &O);

/// The precision recipe (--precision \p Flag, else the first framework's
/// default, else Loom's for \p HW) into CU.Opts.Precision; every
/// framework of CU.Opts.Frameworks must run it, and --plan grad=bf16 needs
/// a recipe that reduces gradients in 16 bits. Errors name the rule (and
/// \p HWFile, the --hw files, where the hardware breaks it).
llvm::Error resolveRecipe(CompilationUnit &CU,
                          llvm::Optional<llvm::StringRef> Flag,
                          const HardwareModel &HW, llvm::StringRef HWFile);

} // namespace loom

#endif // LOOM_TOOLS_PLAN_PARALLEL_FRAMEWORK_H
