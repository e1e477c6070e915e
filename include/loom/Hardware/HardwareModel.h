//===- HardwareModel.h - Accelerator cluster description --------*- C++ -*-===//
//
// The hardware a plan targets, as plain data loaded from a YAML file: what one
// device (NPU) contains -- its processing-unit classes, memories and the links
// between them -- and how devices are connected, level by level, innermost
// first. The cost model reads it; nothing here computes costs.
//
// File format (every number takes a unit; a bare number where a unit belongs
// is an error, see loom/Support/Units.h):
//
//   name: atlas900                    # required
//   description: "16 x Atlas 800T A2" # optional
//   device:
//     name: Ascend 910B2              # required
//     classes:                        # aicore or aicpu required; also
//       aicore:                       #   hbm_pim and ssd; nothing else
//         throughput: {fp16: 313TFLOPS, int8: 626TOPS}  # peak per dtype
//         vector_throughput: {fp16: 20TFLOPS}           # optional
//         launch_overhead: 5us        # required: fixed cost per op
//         efficiency: 0.7             # optional, (0, 1], default 1
//         alignment: 16               # optional, default 1
//         cores: 24                   # optional, informational
//         ops: ["*"]                  # required; "*" = every op type
//         exclude_ops: [Loop]         # optional
//         dtypes: [fp16, bf16, fp32]  # optional; absent = any
//         bandwidth: 1.6TB/s          # required for hbm_pim and ssd
//         latency: 80us               # required for ssd: per read
//         efficiency_curves:          # optional, aicore and aicpu: per
//           matmul: {max: 0.82, half_time: 4us, source: "prof.csv"}
//                                     #   op family (see EfficiencyCurve)
//         fused_kernels:              # optional (aicore only): kernels
//           attention:                #   the class runs as one launch
//             efficiency: 0.6         # required, (0, 1]: of the cube peak
//             backward_efficiency: 0.5  # optional, default = efficiency
//             masked: true            # optional, default true: takes an
//                                     #   additive/boolean (causal or
//                                     #   padding) mask
//             gqa: true               # optional, default true: K/V with
//                                     #   fewer heads than Q
//             dtypes: [fp16, bf16]    # optional; absent = any
//           rmsnorm: {efficiency: 1.0}  # also layernorm, swiglu, rotary:
//                                     #   vector kernels, efficiency of
//                                     #   the vector peak and HBM bandwidth
//         fusion:                     # optional (aicore only): the generic
//           loop: {source: "..."}     #   fusion rules the backend applies
//           reduction: {source: "..."}  #   (FusionRule; passes/FuseKernels)
//           epilogue: {into: [MatMul, Gemm], source: "..."}
//           movement: [Expand, Slice] #   optional: memory ops a loop
//                                     #   kernel computes by indexing
//         comm_overlap:               # optional (aicore only): share of the
//           tp: 0.10                  #   class's compute a collective's
//           dp: 0.05                  #   kernels hold while overlapped
//           pp: 0.02                  #   with compute, per kind, in [0, 1)
//           source: "..."             #   (CommOverlap; Cost/Overlap.h)
//         matmul_tiles:               # optional (aicore only, needs
//           {m: 128, n: 256,          #   cores): GEMM output tile per
//            serial_store: true,      #   core, waves, exposed tile store
//            source: "..."}           #   (MatmulTiles)
//         matmul_roofline:            # optional (aicore only): how a
//           {norm: 1.75,              #   GEMM's compute and memory time
//            source: "..."}           #   combine (MatmulRoofline)
//     memory:                         # hbm required; host, ssd optional
//       hbm: {capacity: 64GiB, bandwidth: 1.6TB/s, reserved: 2GiB}
//       host: {capacity: 1TiB, bandwidth: 64GB/s}
//       ssd: {capacity: 3.84TB, bandwidth: 7GB/s, latency: 80us}
//     transfers:                      # optional links between classes
//       - {from: aicore, to: aicpu, bandwidth: 32GB/s, latency: 10us}
//   topology:                         # required, innermost level first
//     - {name: hccs, size: 8, bandwidth: 196GB/s, latency: 1.2us,
//        efficiency: 0.8, oversubscription: 1.0, allow_tp: true,
//        half_bandwidth_size: 1MiB}  # n_1/2 of its collectives, >= 0
//     - {name: roce, size: 16, bandwidth: 200Gbps, latency: 4us}
//   devices: 128                      # optional; must equal the product
//                                     #   of the level sizes
//   reliability:                      # optional; goodput (Plan/Goodput.h)
//     device_fit: 2000                # required: failures per 1e9 device-
//                                     #   hours (FIT); >= 0
//     optical_module_fit: 300         # optional, default 0, FIT each
//     optical_modules_per_device: 1   # optional, default 0
//     switch_port_fit: 100            # optional, default 0, FIT each
//     ports_per_device: 1             # optional, default 0
//     checkpoint_bandwidth: 2GB/s     # required: per device, > 0
//     restart_time: 600s              # optional, default 0
//     source: "..."                   # optional: where the rates are from
//
// Failure rates are in FIT (failures per 1e9 hours) because durations take
// ns/us/ms/s only: an MTBF of M hours is 1e9 / M FIT.
//
// Data type names are case-insensitive and normalized to the IR's short
// names (fp16/float16/half -> f16, fp32/float -> f32, int8 -> i8, ...), so
// a model's DataType finds its peak with getDataTypeName().
//
// Memories and link bandwidths are per device: a resource the devices of a
// server share (host DDR, NVMe drives) is given as each device's share.
//
// Errors name the file, line and column: YamlIO reports syntax errors,
// unknown keys and bad unit strings; the loader adds missing and duplicate
// keys, and traces validate()'s cross-field checks back to the offending
// key's position.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_HARDWARE_HARDWAREMODEL_H
#define LOOM_HARDWARE_HARDWAREMODEL_H

#include "loom/Support/Units.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
class MemoryBufferRef;
} // namespace llvm

namespace loom {

/// A size-dependent efficiency for one op family on one class, as
/// loom-calibrate fits it from measured kernels: a roofline with a
/// saturating efficiency
///
///   eff(w) = max * w / (w + half_time)
///
/// where w is the op's ideal time, max(FLOPs / peak, bytes / HBM bw) at
/// 100 % of peak (cube padding included): one unit, a duration, serves
/// FLOP-bound and byte-bound families alike, and w is proportional to the
/// op's work within a family. The op then takes
///
///   launch + w / eff(w) = launch + (w + half_time) / max,
///
/// so small kernels pay a fixed half_time / max on top of the launch
/// overhead and large ones approach max of the roofline. A curve replaces
/// the class's flat `efficiency` for its family.
struct EfficiencyCurve {
  /// Asymptotic fraction of the roofline, in (0, 1].
  double Max = 1.0;
  /// Ideal time at which half of Max is reached, >= 0.
  Seconds HalfTime;
  /// Where the numbers come from (e.g. "loom-calibrate: prof.csv").
  std::string Source;

  /// eff(w) for ideal time \p Ideal (seconds).
  double at(double Ideal) const {
    return Ideal <= 0 ? Max : Max * Ideal / (Ideal + HalfTime.value());
  }
};

/// Op families an efficiency curve may name: the rule files of
/// cost_models/ops (OpCost::Family).
llvm::ArrayRef<llvm::StringRef> getOpFamilyNames();

/// A fused kernel a device class offers: a region of exported ops
/// (detect-fused-kernels recognises it) that runs as one kernel, costed in
/// loom/Cost/FusedKernels.h. Known: "attention" (fused scaled-dot-product
/// attention: FlashAttention, Ascend's FlashAttentionScore; efficiency of
/// the cube peak), and the vector kernels "rmsnorm", "layernorm", "swiglu"
/// and "rotary" (MindSpeed's --use-fused-rmsnorm, --use-fused-swiglu,
/// --use-fused-rotary-pos-emb; Apex/TE fused norms; efficiency of the
/// vector peak and of the HBM bandwidth). Masked and GQA concern attention
/// only.
struct FusedKernel {
  std::string Name;
  /// Fraction of the class's cube peak the forward kernel reaches.
  double Efficiency = 1.0;
  /// The same for the backward kernel; None: Efficiency.
  llvm::Optional<double> BackwardEfficiency;
  /// Takes an additive or boolean mask (causal or padding).
  bool Masked = true;
  /// Takes K and V with fewer heads than Q (grouped-query attention).
  bool GQA = true;
  /// Data types it computes in (normalized short names); empty: any.
  std::vector<std::string> DataTypes;
  bool supportsDataType(llvm::StringRef DType) const;
  double getBackwardEfficiency() const {
    return BackwardEfficiency.getValueOr(Efficiency);
  }
};

/// One generic fusion rule of a device class's backend (fusion:), each
/// with the documentation it is taken from (fuse-kernels applies them;
/// loom/Cost/FusedKernels.h costs the kernels). Known rules:
///   loop       producer-consumer chains of element-wise and broadcast ops
///              (and the `movement` ops) into one loop kernel;
///   reduction  a reduction over the last axis (ReduceMean/Sum/Max,
///              Softmax, the norm ops) with its element-wise prologue and
///              epilogue, several over the same rows in one kernel (norms
///              spelled out; softmax with its scale and mask);
///   epilogue   element-wise consumers (bias, activation, residual add,
///              cast) of a product of the ops in `Into` into it.
struct FusionRule {
  std::string Name;
  /// Where the rule is documented (required).
  std::string Source;
  /// epilogue: the op types it fuses into (MatMul, Gemm, Conv, ...).
  std::vector<std::string> Into;
};

/// The generic fusion a class's backend does (fusion:).
struct FusionRules {
  std::map<std::string, FusionRule> Rules;
  /// Memory ops (Expand, Slice, Concat, Transpose, ...) a loop kernel
  /// computes by indexing its inputs rather than as a copy of their own.
  std::vector<std::string> Movement;
  const FusionRule *get(llvm::StringRef Name) const {
    auto It = Rules.find(Name.str());
    return It == Rules.end() ? nullptr : &It->second;
  }
};

/// What overlapping communication with compute costs a class: the share
/// of its compute units (SMs, AI cores) the collective's kernels hold while
/// they run alongside compute, per kind of overlap (loom/Cost/Overlap.h
/// has the model). A kind left out is not offered to the search: tp
/// overlap stays off, dp and pp overlap on at no cost (the model before
/// this key); `--plan` may still set dp and pp overlap, at share 0, but
/// not tp_overlap=on (checkOverlapHardware: a free TP overlap is no
/// runtime's).
struct CommOverlap {
  /// TP collectives beside the sharded GEMMs, DP gradient reduction beside
  /// the last backward, pipeline sends beside compute; each in [0, 1).
  llvm::Optional<double> TP, DP, PP;
  /// Where the numbers come from.
  std::string Source;
};

/// How the matrix unit's GEMM kernels tile their output (matmul_tiles:):
/// each core computes one M x N output tile at a time and the tiles run
/// in waves of `cores`, so a GEMM whose tile count is not a multiple of the
/// cores leaves some idle in its last wave; where SerialStore, a core
/// writes its tile to HBM after the tile's multiply loop instead of under
/// it (a cooperative rather than a ping-pong kernel), so small contraction
/// dims pay the store. DeviceTime.cpp's matmulTileEfficiency turns it into
/// a shape-dependent efficiency; the class's `efficiency` stays the
/// well-shaped figure.
struct MatmulTiles {
  int64_t M = 0, N = 0;
  bool SerialStore = false;
  /// Where the numbers come from (required).
  std::string Source;
  /// Stream-K (YAML `stream_k`, with `k`, the tile's step along K): the
  /// library splits the GEMM's multiply-add iterations (tiles x ceil(K /
  /// k)) evenly over the cores instead of whole tiles, so a GEMM of fewer
  /// tiles than cores does not leave the last wave's cores idle (Osama et
  /// al., PPoPP'23; cuBLAS and CUTLASS's stream-K / split-K kernels).
  int64_t K = 0;
  bool StreamK = false;
  /// Smallest row extent of a tile (YAML `min_m`; 0: always m): a GEMM of
  /// M < m rows runs tiles of M rounded up to min_m rows, the libraries'
  /// small-M kernels swapping A and B so that the rows take the MMA's
  /// narrow N side (Hopper's wgmma is m64nNk16 with N = 8 to 256).
  int64_t MinM = 0;
};

/// How a GEMM kernel's compute time c and memory time m combine
/// (matmul_roofline:): (c^p + m^p)^(1/p) with p = Norm. Without it the
/// roofline's max(c, m) (Williams, Waterman and Patterson, CACM 2009): the
/// kernel streams its operands entirely under its multiply-adds. p = 1 is
/// their sum, no overlap at all (Calculon's "no_overlap" processing mode,
/// Isaev et al. SC'23); between, a GEMM near the ridge point (c ~ m) runs
/// slower than either bound, as measured kernels do, while one far from it
/// stays at its bound.
struct MatmulRoofline {
  double Norm = 0;
  /// Where the exponent comes from (required).
  std::string Source;
};

/// One kind of processing unit inside a device: Ascend's Da Vinci AI cores,
/// its AICPU cores, compute next to HBM, or the SSD read path (DESIGN.md §5).
struct DeviceClass {
  /// aicore, aicpu, hbm_pim or ssd (the key in device.classes).
  std::string Name;
  /// Peak rate per data type (matrix/cube unit on aicore), keyed by the IR's
  /// short dtype name. Required, non-empty, for aicore and aicpu.
  std::map<std::string, FlopsPerSecond> Throughput;
  /// Peak of the vector unit per data type, for element-wise work; empty if
  /// the class has no separate vector unit.
  std::map<std::string, FlopsPerSecond> VectorThroughput;
  /// Fixed cost of launching one op on this class.
  Seconds LaunchOverhead;
  /// Fraction of peak reached by well-shaped kernels, in (0, 1].
  double Efficiency = 1.0;
  /// Dimension multiple the matrix unit is built for (16 on the Da Vinci
  /// cube); other sizes are padded, so they waste throughput.
  unsigned Alignment = 1;
  /// Number of cores (informational; 0 = not given).
  unsigned Cores = 0;
  /// Op types this class can run; "*" means all.
  std::vector<std::string> Ops;
  /// Op types it cannot run even if Ops has "*".
  std::vector<std::string> ExcludeOps;
  /// Data types it supports (normalized short names); empty means any.
  std::vector<std::string> DataTypes;
  /// hbm_pim: internal HBM bandwidth it computes at; ssd: read bandwidth.
  llvm::Optional<BytesPerSecond> Bandwidth;
  /// ssd: latency of one read.
  llvm::Optional<Seconds> Latency;
  /// Per op family (getOpFamilyNames), a size-dependent efficiency that
  /// replaces Efficiency for that family (aicore and aicpu only).
  std::map<std::string, EfficiencyCurve> EfficiencyCurves;
  /// Fused kernels by name (fused_kernels:); empty if none.
  std::map<std::string, FusedKernel> FusedKernels;
  /// Generic fusion rules (fusion:); None if not given (ops costed one
  /// kernel each, the named fused kernels aside).
  llvm::Optional<FusionRules> Fusion;
  /// Communication overlap shares (comm_overlap:); None if not given.
  llvm::Optional<CommOverlap> Overlap;
  /// GEMM output tiling (matmul_tiles:); None: no tile or wave model.
  llvm::Optional<MatmulTiles> Tiles;
  /// How GEMMs combine compute and memory time (matmul_roofline:); None:
  /// the roofline's max.
  llvm::Optional<MatmulRoofline> Roofline;
  /// The fused kernel named \p Name, or null.
  const FusedKernel *getFusedKernel(llvm::StringRef Name) const {
    auto It = FusedKernels.find(Name.str());
    return It == FusedKernels.end() ? nullptr : &It->second;
  }

  /// True if \p OpType is listed (or "*" is) and not excluded.
  bool supportsOp(llvm::StringRef OpType) const;
  /// True if DataTypes is empty or lists \p DType (any accepted spelling).
  bool supportsDataType(llvm::StringRef DType) const;
  /// Peak for \p DType (any accepted spelling), or None if not given.
  llvm::Optional<FlopsPerSecond> getThroughput(llvm::StringRef DType) const;
  /// Vector-unit peak for \p DType, or None if not given.
  llvm::Optional<FlopsPerSecond>
  getVectorThroughput(llvm::StringRef DType) const;
};

/// One memory of a device: hbm (required), host (DDR over PCIe) or ssd.
/// Shared memories are given as one device's share.
struct MemoryLevel {
  /// hbm, host or ssd (the key in device.memory).
  std::string Name;
  Bytes Capacity;
  BytesPerSecond Bandwidth;
  /// Access latency; None if not given (HBM's is negligible at op scale).
  llvm::Optional<Seconds> Latency;
  /// Capacity the runtime keeps for itself (driver, HCCL buffers).
  Bytes Reserved;
  /// Host only: bytes of optimizer state the host CPU streams through an
  /// AdamW update per second, this device's share (the `opt:host` offload,
  /// cost_models/memory/Offload.cpp); None: the host runs no optimizer.
  llvm::Optional<BytesPerSecond> UpdateBandwidth;

  /// Capacity - Reserved: what a plan may fill.
  Bytes getUsableCapacity() const { return Capacity - Reserved; }
};

/// A data path between two device classes, e.g. AI core <-> AICPU. It serves
/// both directions unless the reverse direction is listed separately.
struct TransferLink {
  std::string From;
  std::string To;
  BytesPerSecond Bandwidth;
  Seconds Latency;
};

/// What one device is made of.
struct DeviceDescription {
  /// Product name, e.g. "Ascend 910B2".
  std::string Name;
  /// Processing-unit classes by name.
  std::map<std::string, DeviceClass> Classes;
  /// Memories by name.
  std::map<std::string, MemoryLevel> Memory;
  std::vector<TransferLink> Transfers;
};

/// One level of the interconnect: Size groups of the level below (devices,
/// for the innermost level) joined by one kind of link.
struct TopologyLevel {
  /// e.g. hccs, roce; unique.
  std::string Name;
  /// Number of units of the level below in one unit of this level.
  unsigned Size = 1;
  /// Nominal bandwidth per device per direction on this level's links.
  BytesPerSecond Bandwidth;
  /// Latency of one message across this level.
  Seconds Latency;
  /// Fraction of Bandwidth collectives reach under load, in (0, 1].
  double Efficiency = 1.0;
  /// Uplink oversubscription, >= 1 (1 = non-blocking); divides bandwidth.
  double Oversubscription = 1.0;
  /// The buffer at which a collective's ring on this level reaches half its
  /// asymptotic bus bandwidth (Hockney's n_1/2; busEfficiency in
  /// Collectives.cpp). YAML `half_bandwidth_size`, default 1 MiB: read it off
  /// an nccl-tests / HCCL Test bus-bandwidth curve of the level; 0 turns
  /// the size curve off (latency and bandwidth alone).
  static constexpr double DefaultHalfBandwidthBytes = 1024.0 * 1024.0;
  Bytes HalfBandwidthSize = Bytes(DefaultHalfBandwidthBytes);
  /// The level's units are joined by point-to-point links, one to each of
  /// the other Size - 1 (a full mesh, e.g. the 910B server's HCCS), not by
  /// a switch: Bandwidth is the sum over those links, and a group of N of
  /// them reaches only the N - 1 links to its peers, a send one link
  /// (Collectives.cpp). YAML `full_mesh`, default false (switched).
  bool FullMesh = false;
  /// Whether tensor-parallel groups may span this level. In YAML it
  /// defaults to true for the innermost level and false for the others.
  bool AllowTP = false;

  /// Bandwidth * Efficiency / Oversubscription.
  BytesPerSecond getEffectiveBandwidth() const {
    return Bandwidth * (Efficiency / Oversubscription);
  }
};

/// Failure rates and checkpoint costs, for the expected goodput of a plan.
/// Rates are in FIT: failures per 1e9 hours of one component.
struct Reliability {
  /// One device (NPU and what fails with it).
  double DeviceFIT = 0;
  /// One optical module, and how many each device accounts for.
  double OpticalModuleFIT = 0, OpticalModulesPerDevice = 0;
  /// One switch port, and how many each device accounts for.
  double SwitchPortFIT = 0, PortsPerDevice = 0;
  /// Per device: how fast its share of a checkpoint is written.
  BytesPerSecond CheckpointBandwidth;
  /// From a failure until training runs again (detect, reload, warm up).
  Seconds RestartTime;
  /// Where the numbers come from (informational).
  std::string Source;

  /// FIT of the components one device accounts for.
  double getFITPerDevice() const {
    return DeviceFIT + OpticalModuleFIT * OpticalModulesPerDevice +
           SwitchPortFIT * PortsPerDevice;
  }
};

/// A cluster: identical devices joined by a hierarchy of interconnects.
struct HardwareModel {
  std::string Name;
  std::string Description;
  DeviceDescription Device;
  /// Innermost level first.
  std::vector<TopologyLevel> Topology;
  /// The device count the YAML states, if any (checked against Topology).
  llvm::Optional<uint64_t> Devices;
  /// Failure rates and checkpointing (the reliability section), if given.
  llvm::Optional<Reliability> Reliab;

  /// Product of the level sizes.
  uint64_t getNumDevices() const;
  /// The topology level named \p Name, or null.
  const TopologyLevel *getLevel(llvm::StringRef Name) const;
  /// The device class named \p Name, or null.
  const DeviceClass *getClass(llvm::StringRef Name) const;
  /// The memory level named \p Name, or null.
  const MemoryLevel *getMemory(llvm::StringRef Name) const;
  /// The link from \p From to \p To, else the one from \p To to \p From
  /// (links are symmetric unless both directions are listed), or null.
  const TransferLink *getTransfer(llvm::StringRef From,
                                  llvm::StringRef To) const;

  /// Checks the cross-field rules (positive bandwidths, efficiencies in
  /// (0, 1], known class and level names, sizes multiplying to Devices, ...).
  /// The message starts with the offending key's path, e.g.
  /// "topology[1].bandwidth: must be positive, got 0 B/s".
  llvm::Error validate() const;

  /// A deterministic human-readable summary, one item per line.
  void print(llvm::raw_ostream &OS) const;
};

/// Parses and validates a hardware description. \p BufferName is used as the
/// file name in messages, which read "<BufferName>:<line>:<col>: error: ...".
llvm::Expected<HardwareModel> parseHardwareModel(llvm::StringRef Text,
                                                 llvm::StringRef BufferName);

/// Reads, parses and validates the hardware description in \p Path.
llvm::Expected<HardwareModel> loadHardwareModel(llvm::StringRef Path);

/// The nesting and run-length bounds parseHardwareModel enforces before
/// LLVM's recursive YAML parser sees \p Buffer (for readers of partial
/// files, HardwareOverlay.h).
llvm::Error checkHardwareYAMLBounds(llvm::MemoryBufferRef Buffer);

} // namespace loom

#endif // LOOM_HARDWARE_HARDWAREMODEL_H
