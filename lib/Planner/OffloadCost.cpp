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

namespace {
/// The bandwidths of the tiers offload moves state to (\p HW's memory
/// levels; unset where the file gives none), looked up once per plan.
struct TierBandwidths {
  Optional<double> Host, HostUpdate, SSD;
  explicit TierBandwidths(const HardwareModel &HW) {
    if (const MemoryLevel *H = HW.getMemory("host")) {
      Host = H->Bandwidth.value();
      if (H->UpdateBandwidth)
        HostUpdate = H->UpdateBandwidth->value();
    }
    if (const MemoryLevel *S = HW.getMemory("ssd"))
      SSD = S->Bandwidth.value();
  }
};
} // namespace

/// \p In completed from stage \p SC as it stands before placement: its
/// memory, all in HBM, and its optimizer step in HBM.
static void fillFromStage(OffloadInputs &In, const StageCost &SC) {
  In.InHBM = SC.Memory;
  In.HBMOptimizerS = SC.OptimizerS;
}

/// Places stage \p SC's state as \p T says (\p In: its figures; InHBM,
/// bandwidths and HBMOptimizerS are filled here from \p SC and \p BW).
/// SC.OffloadIn keeps the inputs as placed, from which the reports take
/// the step's terms (getOffloadTerms).
static void placeStageInPlace(StageCost &SC, OffloadInputs In,
                              const OffloadTiers &T, const TierBandwidths &BW) {
  fillFromStage(In, SC);
  if (BW.Host)
    In.HostBandwidth = *BW.Host;
  if (BW.HostUpdate)
    In.HostUpdateBandwidth = *BW.HostUpdate;
  if (BW.SSD)
    In.SSDBandwidth = *BW.SSD;
  SC.OffloadIn = std::move(In);
  SC.Offload = estimateOffload(SC.OffloadIn, T);
  SC.Memory = SC.Offload.HBM;
  SC.MemoryBytes = SC.Memory.total();
  if (SC.OffloadIn.Train)
    SC.OptimizerS = SC.Offload.TailS;
}

void applyOffload(StageCost &SC, OffloadInputs In, const OffloadTiers &T,
                  const HardwareModel &HW) {
  placeStageInPlace(SC, std::move(In), T, TierBandwidths(HW));
}

/// Whether \p PC's capacities hold the largest use of each tier.
static bool fitsTiers(const PlanCost &PC, double HBM, double Host, double SSD) {
  return HBM <= PC.HBMBytes && Host <= PC.HostCapacity &&
         SSD <= PC.SSDCapacity && PC.Embeddings.Fits;
}

void setMemoryMaxima(PlanCost &PC) {
  PC.MaxMemoryBytes = PC.MaxHostBytes = PC.MaxSSDBytes = 0;
  for (const StageCost &SC : PC.Stages) {
    PC.MaxMemoryBytes = std::max(PC.MaxMemoryBytes, SC.MemoryBytes);
    // Sharded embedding tables keep their tiers (Embedding.h).
    PC.MaxHostBytes =
        std::max(PC.MaxHostBytes, SC.Offload.HostBytes + SC.EmbHostBytes);
    PC.MaxSSDBytes =
        std::max(PC.MaxSSDBytes, SC.Offload.SSDBytes + SC.EmbSSDBytes);
  }
  PC.FitsMemory =
      fitsTiers(PC, PC.MaxMemoryBytes, PC.MaxHostBytes, PC.MaxSSDBytes);
}

void applyOffloadToPlan(PlanCost &PC, const OffloadTiers &T,
                        const HardwareModel &HW) {
  PC.Plan.Offload = T;
  if (T.any()) {
    TierBandwidths BW(HW);
    for (StageCost &SC : PC.Stages)
      placeStageInPlace(SC, SC.OffloadIn, T, BW);
  }
  setMemoryMaxima(PC);
}

bool fitsWithOffload(const PlanCost &PC, const OffloadTiers &T) {
  if (!T.any())
    return PC.FitsMemory;
  double HBM = 0, Host = 0, SSD = 0;
  OffloadInputs In;
  for (const StageCost &SC : PC.Stages) {
    In = SC.OffloadIn;
    fillFromStage(In, SC);
    OffloadMemory O = placeOffloadedState(In, T);
    HBM = std::max(HBM, O.HBM.total());
    Host = std::max(Host, O.HostBytes + SC.EmbHostBytes);
    SSD = std::max(SSD, O.SSDBytes + SC.EmbSSDBytes);
  }
  return fitsTiers(PC, HBM, Host, SSD);
}

} // namespace loom
