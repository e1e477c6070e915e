//===- Goodput.h - Expected goodput under failures and checkpoints -*- C++
//-*-===//
//
// The fraction of a plan's throughput left after failures: the cluster's
// failure rate is the sum of its devices' (each with its share of optical
// modules and switch ports, HardwareModel.h's reliability section, in FIT =
// failures per 1e9 hours); each device writes its training state (weights,
// gradients, optimizer states of its largest stage) at the checkpoint
// bandwidth, every tau = sqrt(2 * delta * MTBF) (Young 1974; Daly 2006 to
// first order). Useful fraction = 1 - delta/tau - (tau/2 + restart)/MTBF,
// clamped to [0, 1].
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_GOODPUT_H
#define LOOM_PLAN_GOODPUT_H

#include "loom/Hardware/HardwareModel.h"

#include <cstdint>
#include <string>

namespace loom {

struct PlanCost;

struct GoodputEstimate {
  /// Mean time between failures of the devices the plan uses (infinite
  /// when the rates are all 0).
  double ClusterMTBFS = 0;
  /// Time to write one checkpoint (delta) and the interval between
  /// checkpoints (tau; 0 when there is nothing to write or no failures).
  double CheckpointS = 0, IntervalS = 0;
  /// Expected useful fraction of the time, in [0, 1].
  double Fraction = 1;
  /// Throughput * Fraction.
  double Goodput = 0;
};

/// The formula: \p Devices devices, \p StateBytes of training state per
/// device, \p Throughput without failures.
GoodputEstimate estimateGoodput(const Reliability &R, uint64_t Devices,
                                double StateBytes, double Throughput);

/// For a costed plan: its devices, the largest stage's weights + gradients
/// + optimizer states per device, its throughput.
GoodputEstimate estimateGoodput(const Reliability &R, const PlanCost &PC);

/// "0.962 of throughput (cluster MTBF 11.2 h, checkpoint 41.0 s every
/// 30.3 min, Young/Daly)".
std::string describeGoodput(const GoodputEstimate &G);

} // namespace loom

#endif // LOOM_PLAN_GOODPUT_H
