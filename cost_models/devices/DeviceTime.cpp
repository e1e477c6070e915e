//===- DeviceTime.cpp - Time of an op on each device class ----------------===//
//
// The per-class time models of DESIGN §5, from an OpCost and the hardware
// YAML only.
//
// Which class may run a node (all must hold):
//   - the class exists and its `ops` list (minus `exclude_ops`) has the op;
//   - its `dtypes` list has the node's Elem (not asked of free ops: a
//     Reshape runs nowhere);
//   - the unit fits the class:
//       aicore  Cube, Vector, Memory and None ops; not Control ops (Loop,
//               If, Scan, Shape, Range, NonZero, Unique: control flow,
//               shape arithmetic and dynamic shapes are AICPU work, §5),
//               and not Cube/Vector arithmetic on 64-bit integers ("int64
//               index work" is AICPU work, §5; the Da Vinci cube and vector
//               units compute in fp16/fp32/(u)int8/int32 per Huawei's
//               AI Core "Compute Units" table,
//               support.huawei.com/enterprise/en/doc/EDOC1100164852,
//               plus bf16 on the 910B: no int64). Moving
//               int64 data (Gather of an int64 table) is not arithmetic
//               and stays allowed where `dtypes` allows it.
//       aicpu   anything its lists allow: the fallback.
//       hbm_pim only plain element-wise maps (isElementwiseOp): no
//               reductions, norms, matmuls or data movement.
//       ssd     only Gather whose table (input 0) is a parameter: the
//               rows a lookup touches are read straight from the drive.
//
// Forward time of one execution:
//   aicore Cube    max(F / (peak[e] * efficiency * cubeShapeEfficiency),
//                      (R + W) / HBM bw) + launch
//   aicore Vector  max(F / vector_peak[e], (R + W) / HBM bw) + launch;
//                  without a vector peak for e, cube peak[e] / 16 (see
//                  VectorFallbackRatio)
//   aicore Memory  (R + W) / HBM bw + launch
//   None           0: no kernel, no launch (any class that may run it)
//   aicpu          max(F / (peak[e] * efficiency), (R + W) / HBM bw)
//                  + launch per executed op; peak[e] falls back to the
//                  slowest listed rate, so the fallback class never refuses
//                  an op for want of a number
//   hbm_pim        (R + W) / bandwidth (+ a compute bound when the class
//                  lists a peak for e) + launch
//   ssd            gathered bytes (= W) / bandwidth + latency + launch: one
//                  latency for the whole lookup, because the rows are
//                  independent reads issued together and an NVMe queue
//                  keeps many in flight, so latencies overlap
// Fused kernels (OpCost::KernelEfficiency > 0, aicore): on the Cube
// (attention) the kernel's own efficiency from the YAML's fused_kernels
// replaces efficiency x cubeShapeEfficiency, forward and backward, and the
// backward also does the RecomputeFlops; on the Vector unit (rmsnorm,
// layernorm, swiglu, rotary) it scales the vector peak and the HBM
// bandwidth: max(F / (vector_peak x e), (R + W) / (HBM bw x e)) + launch.
// GEMM roofline (YAML `matmul_roofline`, MatmulRoofline): where the aicore
// class gives a norm p, a plain GEMM (a Cube op that is not a fused kernel)
// takes (c^p + m^p)^(1/p) for max(c, m), c and m being its compute and
// memory times above; the other ops keep the max.
// Matmul tiles (YAML `matmul_tiles`, MatmulTiles): where the aicore class
// gives its GEMM tiling, matmulTileEfficiency (tiles, waves, serial store)
// replaces cubeShapeEfficiency, per product: the forward's (M, N, K), and
// for the backward the harmonic mean of dX's (M, K, N) and dW's (K, N, M).
// Efficiency (YAML `efficiency`) scales the cube's and the AICPU's peak,
// as the example YAML describes it ("large well-shaped matmuls", "scalar-
// heavy code"); the vector peak is taken as given.
//
// Efficiency curves: where an aicore or aicpu class has a curve for the
// op's family (OpCost::Family; `efficiency_curves` in the YAML, fitted by
// loom-calibrate), the flat efficiency is left out of the peak and the
// roofline time w becomes w / eff(w) = (w + half_time) / max
// (EfficiencyCurve in HardwareModel.h); launch overheads stay as they are.
//
// Backward time: the same model with BackwardFlops and twice the forward
// traffic (read dY and the saved values, write dX and dW: ~2x), for ops
// with a gradient (floating-point Elem, and BackwardFlops > 0 or a memory
// op whose gradient is the inverse movement); 0 otherwise.
//
//===----------------------------------------------------------------------===//

#include "loom/Cost/DeviceTime.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>

using namespace llvm;

namespace loom {
namespace {

/// Output tile edge, in multiples of the alignment, below which the cube
/// runs partly idle: a tile of M (or N) rows under 4 x 16 = 64 cannot keep
/// the cube fed, because the operand loads (MTE1/MTE2) per multiply grow as
/// 1/M and the per-tile fixed costs stop amortizing. [assume] 4: the Ascend
/// C matmul tiling (matmul_tiling::MatmulApiTiling) picks base blocks of a
/// few fractals per side and its minimum M/N/K is one 16-element fractal
/// (MIN_MNK_SIZE = 16 in asc-devkit matmul_tiling_base.cpp); calibrate with
/// a matmul-versus-shape micro-benchmark.
constexpr unsigned CubeTileFractals = 4;

/// Cube peak / vector peak when the YAML gives no vector peak. Per Da Vinci
/// core the cube does 16 x 16 x 16 fp16 MACs per cycle (8192 FLOPs; [3rd]
/// Hot Chips 2019 Da Vinci presentation) and the 910B pairs each cube with
/// two vector units of 128 fp16 lanes with FMA (2 x 128 x 2 = 512 FLOPs)
/// [3rd: 910B2 platform config "24 cube, 48 vector"]: 8192 / 512 = 16.
constexpr double VectorFallbackRatio = 16;

/// Backward traffic relative to forward.
constexpr double BackwardTrafficFactor = 2;

double roundUp(double D, double A) { return std::ceil(D / A) * A; }

ClassTime unsupported(std::string Reason) {
  ClassTime T;
  T.Supported = false;
  T.Reason = std::move(Reason);
  return T;
}

bool hasGradient(const OpCost &C) {
  return isFloatingPoint(C.Elem) &&
         (C.BackwardFlops > 0 || C.Unit == ComputeUnit::Memory);
}

/// A rate usable as a divisor, or 0.
double rateOf(Optional<FlopsPerSecond> R) {
  return R && R->value() > 0 ? R->value() : 0;
}

/// The slowest rate a class lists (0 if none): the AICPU's fallback.
double slowestRate(const DeviceClass &DC) {
  double Slowest = 0;
  for (const auto &KV : DC.Throughput)
    if (KV.second.value() > 0 && (Slowest == 0 || KV.second.value() < Slowest))
      Slowest = KV.second.value();
  return Slowest;
}

/// Subgraph nodes an op runs per execution of itself (the largest body or
/// branch); 0 for ops without subgraphs.
unsigned countBodyNodes(const Node &N) {
  unsigned Most = 0;
  for (const Attribute &A : N.getAttributes())
    for (const auto &G : A.Gs)
      Most = std::max(Most, G->countNodesRecursively());
  return Most;
}

/// The class's efficiency curve for \p Family, or null.
const EfficiencyCurve *findCurve(const DeviceClass &DC, StringRef Family) {
  auto It = DC.EfficiencyCurves.find(Family.str());
  return It == DC.EfficiencyCurves.end() ? nullptr : &It->second;
}

/// Roofline time \p Ideal stretched by \p Curve's efficiency at that size.
double applyCurve(double Ideal, const EfficiencyCurve *Curve) {
  if (!Curve)
    return Ideal;
  return (Ideal + Curve->HalfTime.value()) / Curve->Max;
}

/// max(Flops / Rate, Bytes / Bandwidth), or with \p Norm p >= 1 (a GEMM
/// under `matmul_roofline`) ((Flops / Rate)^p + (Bytes / Bandwidth)^p)^(1/p);
/// Rate 0 is only allowed with no Flops.
double roofline(double Flops, double Rate, double Bytes, double Bandwidth,
                double Norm = 0) {
  double Compute = Flops > 0 && Rate > 0 ? Flops / Rate : 0;
  double Memory = Bandwidth > 0 ? Bytes / Bandwidth : 0;
  double Larger = std::max(Compute, Memory);
  if (Norm < 1 || Compute <= 0 || Memory <= 0)
    return Larger;
  // Scaled by the larger term so that no power overflows at a large p.
  return Larger * std::pow(std::pow(Compute / Larger, Norm) +
                               std::pow(Memory / Larger, Norm),
                           1 / Norm);
}

} // namespace

// Padding: the cube multiplies 16 x 16 fractals, so operands are laid out
// with M and N padded to 16 and K to C0 = 32 bytes / element size (16 for
// fp16/bf16, 8 for fp32, 32 for int8): CANN "TCubeTiling" reference,
// hiascend.com atlasascendc_api_07_0673 (NZ-format alignment). The YAML
// gives one `alignment` for all three dims: the fp16 case.
double cubeShapeEfficiency(const MatmulShape &MM, unsigned Alignment) {
  double A = std::max(1u, Alignment);
  if (MM.M <= 0 || MM.N <= 0 || MM.K <= 0)
    return 1.0; // Nothing to compute: no waste to speak of.
  // Padding: the cube computes roundUp(d, A) where d is asked for.
  auto Pad = [&](int64_t D) { return double(D) / roundUp(double(D), A); };
  // Fill: padded M or N below one tile leaves the pipelines partly idle.
  double Tile = A * CubeTileFractals;
  auto Fill = [&](int64_t D) {
    return std::min(1.0, roundUp(double(D), A) / Tile);
  };
  return Pad(MM.M) * Pad(MM.N) * Pad(MM.K) * Fill(MM.M) * Fill(MM.N);
}

double matmulStoreK(double ElemBytes, double Rate, double Bandwidth) {
  return Bandwidth > 0 ? ElemBytes * Rate / (2 * Bandwidth) : 0;
}

// Tiles and waves: a GEMM launches Batch x ceil(M / m) x ceil(N / n) output
// tiles, one per core at a time, so it takes ceil(tiles / cores) waves;
// what it computes usefully is M x N x Batch outputs of the waves x cores
// x m x n it pays for (tile padding and the last wave's idle cores both
// count). Serial store: per tile, the multiply loop takes 2 m n K / r and
// the store m n b / w (r, w: the rate and HBM bandwidth per core), so the
// tile runs at K / (K + b r / (2 w)) of the rate. Stream-K (Osama, Merrill,
// Cecka, Garland and Owens, "Stream-K: Work-centric Parallel Decomposition
// for Dense Matrix-Matrix Multiplication on the GPU", PPoPP 2023) deals the
// multiply-add iterations, not the tiles, to the cores.
double matmulTileEfficiency(const MatmulShape &MM, const MatmulTiles &Tiles,
                            unsigned Cores, unsigned Alignment, double StoreK) {
  if (MM.M <= 0 || MM.N <= 0 || MM.K <= 0 || Tiles.M <= 0 || Tiles.N <= 0 ||
      Cores == 0)
    return 1.0;
  double A = std::max(1u, Alignment);
  double K = double(MM.K);
  double PadK = K / roundUp(K, A);
  double B = double(std::max<int64_t>(1, MM.Batch));
  // A GEMM of fewer rows than the tile's m runs a tile whose row extent is
  // the rows rounded up to min_m (swapping A and B so that the rows take
  // the MMA's narrow side), not m rows of which most are padding.
  double TileM = double(Tiles.M);
  if (Tiles.MinM > 0 && MM.M < Tiles.M)
    TileM = std::min(TileM, roundUp(double(MM.M), double(Tiles.MinM)));
  double TilesM = std::ceil(double(MM.M) / TileM);
  double TilesN = std::ceil(double(MM.N) / double(Tiles.N));
  double Waves = std::ceil(B * TilesM * TilesN / double(Cores));
  double Wave = B * double(MM.M) * double(MM.N) /
                (Waves * Cores * TileM * double(Tiles.N));
  if (Tiles.StreamK && Tiles.K > 0) {
    // Stream-K: the tiles' ceil(K / k) iterations each, I in all, dealt
    // evenly to the cores, ceil(I / cores) per core; useful are M x N x
    // Batch outputs times the K iterations of the cores x ceil(I / cores)
    // x m x n paid for. Never below the whole-tile waves (ceil(I / c) <=
    // iterations x ceil(tiles / c)); the libraries' heuristics pick the
    // better decomposition. The partial tiles' fix-up (an fp32 tile
    // through L2 per split) is not costed [assume: small beside the
    // mainloop, as the paper's measurements show for K >= 1024].
    double KIters = std::ceil(K / double(Tiles.K));
    double Iters = B * TilesM * TilesN * KIters;
    double Slots = std::ceil(Iters / double(Cores)) * Cores;
    Wave = std::max(Wave, B * double(MM.M) * double(MM.N) * KIters /
                              (Slots * TileM * double(Tiles.N)));
  }
  double Store = Tiles.SerialStore && StoreK > 0 ? K / (K + StoreK) : 1.0;
  return PadK * Wave * Store;
}

/// Why \p N (costed \p C) cannot run on class \p ClassName (\p DC): the
/// unit or data type the class lacks, or a class without a time model; None
/// when it can.
static Optional<ClassTime> refuseOnClass(const Node &N, const OpCost &C,
                                         StringRef ClassName,
                                         const DeviceClass &DC) {
  std::string Op = N.getQualifiedOpType();
  std::string Cls = ClassName.str();
  if (!DC.supportsOp(N.getOpType()))
    return unsupported(Cls + " does not support op " + Op);

  bool IsAICore = ClassName == "aicore", IsAICPU = ClassName == "aicpu";
  bool IsPIM = ClassName == "hbm_pim", IsSSD = ClassName == "ssd";
  bool Arithmetic =
      C.Unit == ComputeUnit::Cube || C.Unit == ComputeUnit::Vector;
  StringRef DT = getDataTypeName(C.Elem);

  if (IsAICore) {
    if (C.Unit == ComputeUnit::Control)
      return unsupported("aicore has no kernel for control op " + Op +
                         " (control flow and shape work run on the aicpu)");
    if (Arithmetic && (C.Elem == DataType::Int64 || C.Elem == DataType::UInt64))
      return unsupported("aicore does no " + DT.str() + " arithmetic (" + Op +
                         " is int64 index work for the aicpu)");
  } else if (IsPIM) {
    if (!isElementwiseOp(N))
      return unsupported("hbm_pim runs only element-wise ops, not " + Op +
                         " (" + getComputeUnitName(C.Unit).str() + ")");
  } else if (IsSSD) {
    if (N.getDomain() != "" || N.getOpType() != "Gather")
      return unsupported("ssd serves only Gather from a parameter table, not " +
                         Op);
    const Value *Table = N.getInput(0);
    if (!Table || !Table->isParameter())
      return unsupported("ssd serves only Gather from a parameter table; '" +
                         (Table ? Table->getName().str() : std::string()) +
                         "' is not a parameter");
  } else if (!IsAICPU) {
    return unsupported("no time model for device class '" + Cls + "'");
  }

  if (C.Unit != ComputeUnit::None && !DC.supportsDataType(DT))
    return unsupported(Cls + " does not support data type " + DT.str() + " (" +
                       Op + ")");
  return None;
}

/// A time the class can give (filled in by the caller).
static ClassTime supportedTime() {
  ClassTime T;
  T.Supported = true;
  return T;
}

namespace {

/// What a kernel's time is built from: its launch overhead, the bytes it
/// moves forward and backward, and whether it has a backward.
struct KernelTraffic {
  double Launch, Bytes, BackBytes;
  bool Grad;
};

} // namespace

static KernelTraffic getKernelTraffic(const OpCost &C, const DeviceClass &DC) {
  double Bytes = C.BytesRead + C.BytesWritten;
  double Back =
      C.BackwardBytes > 0 ? C.BackwardBytes : BackwardTrafficFactor * Bytes;
  // A recurrent op launches once per time step (OpCost::Steps).
  return {DC.LaunchOverhead.value() * C.Steps, Bytes, Back, hasGradient(C)};
}

/// ssd: the gathered rows at its bandwidth and latency.
static ClassTime timeOnSSD(const OpCost &C, const DeviceClass &DC) {
  ClassTime T = supportedTime();
  double Launch = DC.LaunchOverhead.value();
  bool Grad = hasGradient(C);
  // Only the gathered rows come from the drive: the bytes the Gather
  // writes (taken from the cost, so callers that rescale it for a
  // micro-batch get a rescaled time).
  double Rows = C.BytesWritten;
  double BW = DC.Bandwidth ? DC.Bandwidth->value() : 0;
  if (BW <= 0)
    return unsupported("ssd has no bandwidth");
  double Latency = DC.Latency ? DC.Latency->value() : 0;
  T.Seconds = Rows / BW + Latency + Launch;
  T.BackwardSeconds =
      Grad ? BackwardTrafficFactor * Rows / BW + Latency + Launch : 0;
  return T;
}

/// hbm_pim: the roofline of its own throughput and bandwidth.
static ClassTime timeOnPIM(const OpCost &C, const DeviceClass &DC,
                           StringRef DT) {
  ClassTime T = supportedTime();
  auto [Launch, Bytes, BackBytes, Grad] = getKernelTraffic(C, DC);
  double BW = DC.Bandwidth ? DC.Bandwidth->value() : 0;
  if (BW <= 0)
    return unsupported("hbm_pim has no bandwidth");
  double Rate = rateOf(DC.getThroughput(DT)) * DC.Efficiency;
  T.Seconds = roofline(C.Flops, Rate, Bytes, BW) + Launch;
  T.BackwardSeconds =
      Grad ? roofline(C.BackwardFlops, Rate, BackBytes, BW) + Launch : 0;
  return T;
}

/// aicpu: the roofline over HBM (\p HBMBW), at its throughput or the slowest
/// it lists, one launch per op its control flow runs.
static ClassTime timeOnAICPU(const Node &N, const OpCost &C,
                             const DeviceClass &DC, StringRef DT,
                             double HBMBW) {
  ClassTime T = supportedTime();
  auto [Launch, Bytes, BackBytes, Grad] = getKernelTraffic(C, DC);
  double Rate = rateOf(DC.getThroughput(DT));
  if (Rate == 0)
    Rate = slowestRate(DC);
  const EfficiencyCurve *Curve = findCurve(DC, C.Family);
  Rate *= Curve ? 1.0 : DC.Efficiency;
  if (Rate <= 0 && (C.Flops > 0 || C.BackwardFlops > 0))
    return unsupported("aicpu lists no throughput");
  // Control flow launches its body's ops on every iteration.
  double Launches = 1 + C.TripCount * countBodyNodes(N);
  T.Seconds = applyCurve(roofline(C.Flops, Rate, Bytes, HBMBW), Curve) +
              Launch * Launches;
  T.BackwardSeconds =
      Grad ? applyCurve(roofline(C.BackwardFlops, Rate, BackBytes, HBMBW),
                        Curve) +
                 Launch * Launches
           : 0;
  return T;
}

/// aicore: cube work at the cube throughput scaled by shape efficiency,
/// vector work at the vector throughput, fused kernels at their own
/// efficiency, memory ops by bytes over HBM (\p HBMBW).
static ClassTime timeOnAICore(const Node &N, const OpCost &C,
                              const DeviceClass &DC, StringRef DT,
                              double HBMBW) {
  std::string Op = N.getQualifiedOpType();
  ClassTime T = supportedTime();
  auto [Launch, Bytes, BackBytes, Grad] = getKernelTraffic(C, DC);
  const EfficiencyCurve *Curve = findCurve(DC, C.Family);
  double Rate = 0;
  // The GEMM roofline's norm (matmul_roofline; 0: max), for plain GEMMs:
  // fused kernels keep their own efficiency and the roofline's max.
  double Norm = 0;
  if (C.Unit == ComputeUnit::Cube) {
    if (!C.CubeFormat.empty())
      DT = C.CubeFormat;
    Rate = rateOf(DC.getThroughput(DT));
    if (Rate == 0 && C.Flops > 0)
      return unsupported("aicore lists no cube throughput for " + DT.str() +
                         " (" + Op + ")");
    if (C.KernelEfficiency > 0) {
      double Peak = Rate;
      double Fwd = C.Flops, Bwd = C.BackwardFlops + C.RecomputeFlops;
      T.Seconds =
          roofline(Fwd, Peak * C.KernelEfficiency, Bytes, HBMBW) + Launch;
      T.BackwardSeconds = Grad
                              ? roofline(Bwd, Peak * C.BackwardKernelEfficiency,
                                         BackBytes, HBMBW) +
                                    Launch
                              : 0;
      return T;
    }
    Rate *= Curve ? 1.0 : DC.Efficiency;
    Norm = DC.Roofline ? DC.Roofline->Norm : 0;
    if (DC.Tiles) {
      // Forward (M, N, K); backward dX = dY W^T (M, K, N) and dW = X^T dY
      // (K, N, M; over Batch x M when W is shared), each one product.
      const MatmulShape &F = C.MM;
      MatmulShape DX{F.Batch, F.M, F.K, F.N, F.SharedB};
      MatmulShape DW = F.SharedB ? MatmulShape{1, F.K, F.N, F.Batch * F.M}
                                 : MatmulShape{F.Batch, F.K, F.N, F.M};
      double StoreK = matmulStoreK(getDataTypeBits(C.Elem) / 8.0, Rate, HBMBW);
      auto Eff = [&](const MatmulShape &S) {
        return matmulTileEfficiency(S, *DC.Tiles, DC.Cores, DC.Alignment,
                                    StoreK);
      };
      // The backward's two products at one rate: their harmonic mean.
      double BackEff = 2 / (1 / Eff(DX) + 1 / Eff(DW));
      double Flops = C.Flops, BackFlops = C.BackwardFlops;
      T.Seconds = applyCurve(roofline(Flops, Rate * Eff(F), Bytes, HBMBW, Norm),
                             Curve) +
                  Launch;
      T.BackwardSeconds = Grad ? applyCurve(roofline(BackFlops, Rate * BackEff,
                                                     BackBytes, HBMBW, Norm),
                                            Curve) +
                                     Launch
                               : 0;
      return T;
    }
    Rate *= cubeShapeEfficiency(C.MM, DC.Alignment);
  } else if (C.Unit == ComputeUnit::Vector) {
    Rate = rateOf(DC.getVectorThroughput(DT));
    if (Rate == 0)
      Rate = rateOf(DC.getThroughput(DT)) / VectorFallbackRatio;
    if (Rate == 0 && C.Flops > 0)
      return unsupported("aicore lists no vector or cube throughput for " +
                         DT.str() + " (" + Op + ")");
    if (C.KernelEfficiency > 0) {
      // A fused element-wise kernel: its efficiency scales the vector peak
      // and the HBM bandwidth it streams at.
      double E = C.KernelEfficiency, BE = C.BackwardKernelEfficiency;
      T.Seconds = roofline(C.Flops, Rate * E, Bytes, HBMBW * E) + Launch;
      T.BackwardSeconds =
          Grad ? roofline(C.BackwardFlops, Rate * BE, BackBytes, HBMBW * BE) +
                     Launch
               : 0;
      return T;
    }
  }
  // Memory ops: bytes only (Flops is 0, or a scatter's few adds, which
  // hide under the traffic).
  double Flops = C.Unit == ComputeUnit::Memory ? 0 : C.Flops;
  double BackFlops = C.Unit == ComputeUnit::Memory ? 0 : C.BackwardFlops;
  T.Seconds =
      applyCurve(roofline(Flops, Rate, Bytes, HBMBW, Norm), Curve) + Launch;
  T.BackwardSeconds =
      Grad ? applyCurve(roofline(BackFlops, Rate, BackBytes, HBMBW, Norm),
                        Curve) +
                 Launch
           : 0;
  return T;
}

ClassTime estimateClassTime(const Node &N, const OpCost &C, StringRef ClassName,
                            const HardwareModel &HW) {
  std::string Op = N.getQualifiedOpType();
  if (!C.HasRule)
    return unsupported(C.NoRuleReason.empty()
                           ? "no cost rule for op '" + Op + "'"
                           : C.NoRuleReason);
  const DeviceClass *DC = HW.getClass(ClassName);
  if (!DC)
    return unsupported("no device class '" + ClassName.str() +
                       "' in hardware '" + HW.Name + "'");
  if (Optional<ClassTime> No = refuseOnClass(N, C, ClassName, *DC))
    return *No;
  if (C.Unit == ComputeUnit::None)
    return supportedTime(); // No kernel, no launch.
  StringRef DT = getDataTypeName(C.Elem);
  if (ClassName == "ssd")
    return timeOnSSD(C, *DC);
  if (ClassName == "hbm_pim")
    return timeOnPIM(C, *DC, DT);
  const MemoryLevel *HBM = HW.getMemory("hbm");
  double HBMBW = HBM ? HBM->Bandwidth.value() : 0;
  if (HBMBW <= 0)
    return unsupported("no hbm bandwidth in hardware '" + HW.Name + "'");
  if (ClassName == "aicpu")
    return timeOnAICPU(N, C, *DC, DT, HBMBW);
  return timeOnAICore(N, C, *DC, DT, HBMBW);
}

} // namespace loom
