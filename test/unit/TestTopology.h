//===- TestTopology.h - The Atlas 900 topology unit tests cost on -*- C++
//-*-===//
//
// 16 servers of 8 NPUs: HCCS inside (196 GB/s, 1.2 us, 80 % bus
// efficiency; tp allowed), RoCE across (25 GB/s, 4 us, 65 %), as
// examples/hw/atlas900.yaml gives them. Shared by the collective and
// context-parallel tests.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TEST_UNIT_TESTTOPOLOGY_H
#define LOOM_TEST_UNIT_TESTTOPOLOGY_H

#include "loom/Hardware/HardwareModel.h"

namespace loom {

inline HardwareModel atlas900Topology(double RoceOversubscription = 1.0) {
  HardwareModel HW;
  HW.Name = "atlas900";
  TopologyLevel Hccs;
  Hccs.Name = "hccs";
  Hccs.Size = 8;
  Hccs.Bandwidth = BytesPerSecond(196e9);
  Hccs.Latency = Seconds(1.2e-6);
  Hccs.Efficiency = 0.8;
  Hccs.AllowTP = true;
  TopologyLevel Roce;
  Roce.Name = "roce";
  Roce.Size = 16;
  Roce.Bandwidth = BytesPerSecond(25e9);
  Roce.Latency = Seconds(4e-6);
  Roce.Efficiency = 0.65;
  Roce.Oversubscription = RoceOversubscription;
  HW.Topology = {Hccs, Roce};
  return HW;
}

} // namespace loom

#endif
