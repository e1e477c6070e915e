//===- DeviceTime.h - Time of an op on each device class --------*- C++ -*-===//
//
// Per-class time models (DESIGN §5), parameterized only by the hardware
// YAML: aicore is a roofline with a cube efficiency that falls for small or
// unaligned matmul dims, plus a launch overhead; aicpu is scalar-ish with a
// high per-op overhead; hbm_pim streams element-wise operands at the HBM's
// internal bandwidth; ssd reads only the rows a Gather touches.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COST_DEVICETIME_H
#define LOOM_COST_DEVICETIME_H

#include "loom/Cost/OpCost.h"
#include "loom/Hardware/HardwareModel.h"
#include "llvm/ADT/Optional.h"

namespace loom {

/// Fraction of the cube's peak a matmul of this shape reaches relative to
/// a large aligned one, in (0, 1]: padding waste for dims not a multiple of
/// \p Alignment times a fill factor for small dims.
double cubeShapeEfficiency(const MatmulShape &MM, unsigned Alignment);

struct ClassTime {
  /// False if the class cannot run the op (op type, dtype, or unit).
  bool Supported = false;
  /// Why not, when unsupported ("aicore does not support op Loop").
  std::string Reason;
  /// Forward time of one execution.
  double Seconds = 0;
  /// Backward time (BackwardFlops and its traffic), for training.
  double BackwardSeconds = 0;
};

/// Time of \p N with cost \p C on the class named \p ClassName of \p HW.
ClassTime estimateClassTime(const Node &N, const OpCost &C,
                            llvm::StringRef ClassName,
                            const HardwareModel &HW);

} // namespace loom

#endif // LOOM_COST_DEVICETIME_H
