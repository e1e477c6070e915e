//===- Offload.h - Training state in HBM, host DRAM or SSD ------*- C++ -*-===//
//
// Where each kind of training state lives (DESIGN §6: "where each kind of
// training state lives (HBM, host DRAM, SSD)") and what that costs per
// step: the bytes each tier holds, the PCIe (host) and NVMe (SSD) traffic,
// the part of it hidden under the stage's compute, and the optimizer step
// on the host CPU.
//
// Anchors: ZeRO-Offload (Ren et al. 2021, "ZeRO-Offload: Democratizing
// Billion-Scale Model Training", §4: fp32 master weights and Adam moments
// on the host, gradients moved to the host as backward produces them, the
// update on the CPU, bf16 parameters copied back), ZeRO-Infinity
// (Rajbhandari et al. 2021, "ZeRO-Infinity: Breaking the GPU Memory Wall
// for Extreme Scale Deep Learning", §5-6: optimizer states and parameters
// on NVMe, parameters fetched layer by layer for forward and backward,
// NVMe traffic overlapped with the CPU update), and MindSpeed's
// activation swap (saved activations copied to the host in forward and
// back before backward).
//
// Capacities and bandwidths are per device: the hardware YAML gives each
// card's share of its server's host DRAM, PCIe and NVMe
// (HardwareModel.h).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COST_OFFLOAD_H
#define LOOM_COST_OFFLOAD_H

#include "loom/Cost/Memory.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <string>

namespace loom {

enum class MemoryTier : uint8_t { HBM, Host, SSD };
/// "hbm", "host", "ssd" (the memory levels of the hardware YAML).
llvm::StringRef getMemoryTierName(MemoryTier T);

/// Where each kind of training state lives. Gradients and activations go
/// to HBM or the host only (they are written every micro-batch; NVMe's
/// bandwidth and write endurance rule it out, as ZeRO-Infinity keeps them
/// off NVMe by default).
struct OffloadTiers {
  /// fp32 master weights and Adam moments (12 bytes per parameter).
  MemoryTier Opt = MemoryTier::HBM;
  MemoryTier Grad = MemoryTier::HBM;
  /// The bf16 weights (ZeRO-3's partitions when zero=3).
  MemoryTier Param = MemoryTier::HBM;
  /// Activations saved for backward.
  MemoryTier Act = MemoryTier::HBM;

  bool any() const {
    return Opt != MemoryTier::HBM || Grad != MemoryTier::HBM ||
           Param != MemoryTier::HBM || Act != MemoryTier::HBM;
  }
  bool uses(MemoryTier T) const {
    return Opt == T || Grad == T || Param == T || Act == T;
  }
  bool operator==(const OffloadTiers &O) const {
    return Opt == O.Opt && Grad == O.Grad && Param == O.Param && Act == O.Act;
  }
  bool operator!=(const OffloadTiers &O) const { return !(*this == O); }
  /// "opt:host,param:ssd" (kinds in HBM left out), "none" when nothing is
  /// offloaded.
  std::string str() const;
};

struct OffloadInputs {
  bool Train = true;
  /// The stage's memory per device with every kind in HBM
  /// (estimateStageMemory, expert states included).
  MemoryBreakdown InHBM;
  /// What one micro-batch leaves for backward, the micro-batches in
  /// flight, and the once-only workspace (as in StageMemoryInputs).
  double ActivationBytesPerMicroBatch = 0, InFlightMicroBatches = 1,
         ActivationWorkspaceBytes = 0;
  /// Parameters this device updates (after ZeRO-1 partitioning).
  double UpdatedParams = 0;
  /// Bytes of one weight and of one gradient in HBM: with the optimizer
  /// off HBM only the updated partition's gradients go down and its
  /// weights come back (ZeRO-Offload §4.1: each data-parallel rank
  /// offloads and updates its own partition; the parameter all-gather
  /// that follows is the DP sync's).
  double WeightBytesPerParam = 2, GradBytesPerParam = 2;
  /// Layers of the stage: offloaded weights and gradients keep a double
  /// buffer of two layers' worth in HBM (the layer in use and the one
  /// being prefetched or drained).
  unsigned NumLayers = 1;
  unsigned NumMicroBatches = 1;
  /// Compute of one micro-batch (forward + backward) on this stage: what
  /// the per-micro-batch transfers overlap with.
  double ComputePerMicroBatchS = 0;
  /// The optimizer step in HBM (the evaluator's AdamW time).
  double HBMOptimizerS = 0;
  /// Per device: PCIe to the host, NVMe, and the host CPU's optimizer
  /// throughput in bytes of state streamed per second (0: none given).
  double HostBandwidth = 0, SSDBandwidth = 0, HostUpdateBandwidth = 0;
};

/// One transfer (or the host optimizer step) of a step, for the report.
struct OffloadTerm {
  /// e.g. "param:ssd fetch", "host optimizer": a literal (the search
  /// costs millions of placements; their terms allocate nothing).
  llvm::StringRef Name;
  MemoryTier Tier = MemoryTier::Host;
  /// Bytes per step over the tier's link, and seconds at its bandwidth.
  double Bytes = 0, Seconds = 0;
};

struct OffloadCost {
  /// Memory per device in each tier.
  MemoryBreakdown HBM;
  double HostBytes = 0, SSDBytes = 0;
  /// Per micro-batch: bytes over PCIe and NVMe while it runs, the time the
  /// two links need (they run side by side), and the part its compute
  /// does not hide.
  double StreamHostBytes = 0, StreamSSDBytes = 0, StreamS = 0,
         ExposedPerMicroBatchS = 0;
  /// After the last backward: the optimizer phase (gradients to the host,
  /// the update on the CPU or in HBM, NVMe reads and writes of the
  /// states, weights back), all exposed.
  double TailHostBytes = 0, TailSSDBytes = 0, HostOptimizerS = 0, TailS = 0;
};

/// Where a stage's state lives under a placement: what stays in HBM, and
/// the bytes held in host DRAM and on the SSD (OffloadCost's memory).
struct OffloadMemory {
  MemoryBreakdown HBM;
  double HostBytes = 0, SSDBytes = 0;
};

/// The memory part of estimateOffload, without the transfers (the search
/// checks millions of placements for fit before it costs any).
OffloadMemory placeOffloadedState(const OffloadInputs &In,
                                  const OffloadTiers &T);

/// The cost of placing a stage's state as \p T says. Requires the
/// bandwidths of the tiers \p T uses (the caller checks the YAML). Each
/// transfer (and the host optimizer step) goes to \p Terms too, in the
/// order of the step, where given: the search costs millions of
/// placements and reads none of them.
OffloadCost
estimateOffload(const OffloadInputs &In, const OffloadTiers &T,
                llvm::SmallVectorImpl<OffloadTerm> *Terms = nullptr);

/// Every term of the step estimateOffload(\p In, \p T) costs, largest
/// first (ties in the step's order): the first is the one that binds.
llvm::SmallVector<OffloadTerm, 8> getOffloadTerms(const OffloadInputs &In,
                                                  const OffloadTiers &T);

} // namespace loom

#endif // LOOM_COST_OFFLOAD_H
