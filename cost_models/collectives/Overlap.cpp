//===- Overlap.cpp - Communication overlapped with compute ----------------===//
//
// loom/Cost/Overlap.h states the model.
//
//===----------------------------------------------------------------------===//
#include "loom/Cost/Overlap.h"
#include <algorithm>

namespace loom {

double overlapWindow(double ComputeS, double CommS, double Share, bool On,
                     OverlapHold Hold) {
  ComputeS = std::max(0.0, ComputeS);
  CommS = std::max(0.0, CommS);
  if (!On)
    return ComputeS + CommS;
  // Nothing to hide: the communication kernels are never launched, so they
  // hold nothing.
  if (CommS == 0)
    return ComputeS;
  double S = std::min(std::max(Share, 0.0), 0.999);
  if (Hold == OverlapHold::WhileRunning)
    // Compute runs at 1 - s for the C seconds the collective runs: W + s*C,
    // unless the collective outlasts it.
    return std::max(CommS, ComputeS + S * CommS);
  return std::max(CommS, ComputeS / (1 - S));
}

} // namespace loom
