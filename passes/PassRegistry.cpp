//===- PassRegistry.cpp - The one table of Loom's passes ------------------===//
//
// In DESIGN §2's order; the default pipeline is this table. A pass appears
// here once it exists: nothing pretends. Each pass's name and description
// are written here only (Pass::getArgument reads them).
//
//===----------------------------------------------------------------------===//
#include "Passes.h"

namespace loom {

static const PassInfo Registry[] = {
    {"bind-symbols", "Bind symbolic dims (--batch, --seq, --dim NAME=V)",
     createBindSymbolsPass, PassKind::Planning},
    {"infer-shapes", "Infer the element type and shape of every value",
     createInferShapesPass, PassKind::Planning},
    {"fold-shape-arith",
     "Fold shape arithmetic on static shapes into constants",
     createFoldShapeArithPass, PassKind::Planning},
    {"lower-embedding-bags",
     "Rewrite pooled lookups exported as a Loop (torch EmbeddingBag) into "
     "Gather + Reduce, so their tables can be sharded",
     createLowerEmbeddingBagsPass, PassKind::Planning},
    {"canonicalize",
     "Rewrite exporter spellings into one form (deduplicated weights given "
     "back, Identity, Div by 2^k, Transpose and Reshape chains), shapes "
     "re-inferred",
     createCanonicalizePass, PassKind::Planning},
    {"detect-layers", "Number repeated blocks (layers) by structural hashing",
     createDetectLayersPass, PassKind::Planning},
    {"annotate-costs",
     "Annotate every node with FLOPs, bytes, memory and per-class time",
     createAnnotateCostsPass, PassKind::Planning},
    {"detect-fused-kernels",
     "Cost regions the hardware runs as one fused kernel (attention) as one "
     "kernel",
     createDetectFusedKernelsPass, PassKind::Planning},
    {"fuse-kernels",
     "Group the remaining ops into the kernels the backend's compiler "
     "runs (the hardware's fusion rules: loops, reductions, epilogues), "
     "each costed once",
     createFuseKernelsPass, PassKind::Planning},
    {"assign-device-classes",
     "Place every node on a device class (aicore, aicpu, hbm_pim, ssd)",
     createAssignDeviceClassesPass, PassKind::Planning},
    {"search-parallelism",
     "Choose dp/tp/pp, sp, micro-batching, recompute, ZeRO and stage "
     "boundaries for the least predicted step time",
     createSearchParallelismPass, PassKind::Planning},
    {"shard",
     "Re-bind the model at micro-batch shapes and propagate sharding specs "
     "for the chosen plan",
     createShardPass, PassKind::Transform},
    {"insert-collectives",
     "Build one graph per role with Hcom* collectives and pipeline "
     "send/receive",
     createInsertCollectivesPass, PassKind::Transform},
    {"schedule",
     "Order each rank's micro-batches, collectives, transfers and optimizer "
     "for one step, with predicted times",
     createSchedulePass, PassKind::Transform},
    {"emit",
     "Write manifest.json, graphs/, schedule.json, trace.json, report.txt, "
     "report.html and the --export files to the output directory",
     createEmitPass, PassKind::Emit},
};

llvm::ArrayRef<PassInfo> getRegisteredPasses() { return Registry; }

} // namespace loom
