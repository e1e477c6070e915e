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

/// Fraction of the cube's well-shaped rate a GEMM of shape \p MM reaches
/// under \p Tiles on \p Cores cores, in (0, 1]: K padded to \p Alignment,
/// times the wave fill (useful outputs / the tiles' outputs over all the
/// waves' slots), times, with a serial store, K / (K + \p StoreK) where
/// StoreK is the contraction length whose multiply takes as long as
/// storing the output tile (matmulStoreK).
double matmulTileEfficiency(const MatmulShape &MM, const MatmulTiles &Tiles,
                            unsigned Cores, unsigned Alignment, double StoreK);

/// The contraction length whose multiply-adds, at \p Rate FLOP/s for the
/// whole device, take as long as writing the same outputs' \p ElemBytes
/// each at \p Bandwidth bytes/s: ElemBytes x Rate / (2 x Bandwidth). Per
/// core both sides divide by the core count, so it holds per tile.
double matmulStoreK(double ElemBytes, double Rate, double Bandwidth);

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
                            llvm::StringRef ClassName, const HardwareModel &HW);

} // namespace loom

#endif // LOOM_COST_DEVICETIME_H
