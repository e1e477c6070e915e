//===- PassRegistry.cpp - The one table of Loom's passes ------------------===//
//
// In DESIGN §2's order; the default pipeline is this table. A pass appears
// here once it exists: nothing pretends.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"

namespace loom {

static const PassInfo Registry[] = {
    {"bind-symbols", "Bind symbolic dims (--batch, --seq, --dim NAME=V)",
     createBindSymbolsPass},
    {"infer-shapes", "Infer the element type and shape of every value",
     createInferShapesPass},
    {"fold-shape-arith",
     "Fold shape arithmetic on static shapes into constants",
     createFoldShapeArithPass},
    {"detect-layers", "Number repeated blocks (layers) by structural hashing",
     createDetectLayersPass},
    {"annotate-costs",
     "Annotate every node with FLOPs, bytes, memory and per-class time",
     createAnnotateCostsPass},
    {"detect-fused-kernels",
     "Cost regions the hardware runs as one fused kernel (attention) as one "
     "kernel",
     createDetectFusedKernelsPass},
    {"assign-device-classes",
     "Place every node on a device class (aicore, aicpu, hbm_pim, ssd)",
     createAssignDeviceClassesPass},
    {"search-parallelism",
     "Choose dp/tp/pp, sp, micro-batching, recompute, ZeRO and stage "
     "boundaries for the least predicted step time",
     createSearchParallelismPass},
    {"shard",
     "Re-bind the model at micro-batch shapes and propagate sharding specs "
     "for the chosen plan",
     createShardPass},
    {"insert-collectives",
     "Build one graph per role with Hcom* collectives and pipeline "
     "send/receive",
     createInsertCollectivesPass},
    {"schedule",
     "Order each rank's micro-batches, collectives, transfers and optimizer "
     "for one step, with predicted times",
     createSchedulePass},
    {"emit",
     "Write manifest.json, graphs/, schedule.json, trace.json, report.txt, "
     "report.html and the --export files to the output directory",
     createEmitPass},
};

llvm::ArrayRef<PassInfo> getRegisteredPasses() { return Registry; }

} // namespace loom
