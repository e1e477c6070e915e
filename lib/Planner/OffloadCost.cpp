//===- OffloadCost.cpp - A plan's stages re-placed by offload= ------------===//
//
// The evaluator's side of the offload= plan key (include/loom/Plan/Offload.h
// parses it; cost_models/memory/Offload.cpp prices the transfers).
//
//===----------------------------------------------------------------------===//
#include "loom/Planner/OffloadCost.h"
#include "loom/Hardware/HardwareModel.h"
#include <algorithm>

using namespace llvm;

namespace loom {

void applyOffload(StageCost &SC, OffloadInputs In, const OffloadTiers &T,
                  const HardwareModel &HW) {
  In.InHBM = SC.Memory;
  In.HBMOptimizerS = SC.OptimizerS;
  if (const MemoryLevel *Host = HW.getMemory("host")) {
    In.HostBandwidth = Host->Bandwidth.value();
    if (Host->UpdateBandwidth)
      In.HostUpdateBandwidth = Host->UpdateBandwidth->value();
  }
  if (const MemoryLevel *SSD = HW.getMemory("ssd"))
    In.SSDBandwidth = SSD->Bandwidth.value();
  SC.Offload = estimateOffload(In, T);
  SC.Memory = SC.Offload.HBM;
  SC.MemoryBytes = SC.Memory.total();
  if (In.Train)
    SC.OptimizerS = SC.Offload.TailS;
}

void applyOffloadToPlan(PlanCost &PC, const OffloadTiers &T,
                        const HardwareModel &HW) {
  PC.Plan.Offload = T;
  PC.MaxMemoryBytes = PC.MaxHostBytes = PC.MaxSSDBytes = 0;
  for (StageCost &SC : PC.Stages) {
    if (T.any())
      applyOffload(SC, SC.OffloadIn, T, HW);
    PC.MaxMemoryBytes = std::max(PC.MaxMemoryBytes, SC.MemoryBytes);
    // Sharded embedding tables keep their tiers (Embedding.h).
    PC.MaxHostBytes =
        std::max(PC.MaxHostBytes, SC.Offload.HostBytes + SC.EmbHostBytes);
    PC.MaxSSDBytes =
        std::max(PC.MaxSSDBytes, SC.Offload.SSDBytes + SC.EmbSSDBytes);
  }
  PC.FitsMemory = PC.MaxMemoryBytes <= PC.HBMBytes &&
                  PC.MaxHostBytes <= PC.HostCapacity &&
                  PC.MaxSSDBytes <= PC.SSDCapacity && PC.Embeddings.Fits;
}

} // namespace loom
