//===- AnnotateCosts.cpp - Cost every node on every device class ----------===//
//
// Computes per node FLOPs, bytes, parameters, saved activations and the
// time on each device class of the hardware (cost_models/), at the model's
// bound (global-batch) shapes. Plans rescale these per micro-batch and TP
// degree (lib/Planner/PlanCost.cpp). Nodes without a rule are kept and
// reported by name, never silently zero.
//
//===----------------------------------------------------------------------===//
#include "loom/Hardware/HardwareModel.h"
#include "loom/Pass/Pass.h"

using namespace llvm;

namespace loom {
namespace {

class AnnotateCostsPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    if (!CU.HW)
      return createStringError(inconvertibleErrorCode(),
                               "annotate-costs needs a hardware model");
    const Optional<PrecisionRecipe> &R = CU.Opts.Precision;
    CU.NodeCosts =
        annotateNodeCosts(CU.M->getGraph(), CU.M->getOpsetVersion(""), *CU.HW,
                          R ? R.getPointer() : nullptr);
    return Error::success();
  }
};

} // namespace

std::unique_ptr<Pass> createAnnotateCostsPass() {
  return std::make_unique<AnnotateCostsPass>();
}

} // namespace loom
