//===- Offload.cpp - Training state in HBM, host DRAM or SSD --------------===//
//
// The traffic of each offloaded kind, per step of M micro-batches (W, G, O:
// the stage's weight, gradient and optimizer bytes per device after ZeRO;
// A: one micro-batch's saved activations):
//
//  - param:T  every micro-batch fetches the weights from T layer by layer
//             for its forward and again for its backward (ZeRO-Infinity
//             §5.1, ZeRO-3 with gradient accumulation): 2 M W over T's
//             link; HBM keeps two layers' worth (in use + prefetched).
//             After the update, W goes back to T.
//  - grad:host every micro-batch's backward drains its gradients to the
//             host, which accumulates them (ZeRO-Offload §4.1): M G over
//             PCIe; HBM keeps two layers' worth.
//  - act:host  each micro-batch's saved activations go to the host in
//             forward and come back before its backward (MindSpeed's swap):
//             2 M A over PCIe when more than one micro-batch is in flight;
//             HBM keeps the micro-batch being computed.
//  - opt:host  the fp32 master weights and moments live on the host and the
//             host CPU updates them (ZeRO-Offload §4.2): gradients that are
//             still in HBM go down (G), the CPU streams ~28 bytes per
//             parameter (the evaluator's AdamW figure) at the YAML's
//             update_bandwidth, and the new bf16 weights come back (W).
//  - opt:ssd   as opt:host, with the states read from and written back to
//             NVMe (2 O), overlapped chunk by chunk with the CPU update
//             (ZeRO-Infinity §6.3, overlap-centric design): that phase
//             takes the longer of the two.
//
// The per-micro-batch transfers run while the micro-batch computes, on the
// PCIe and NVMe links side by side; what exceeds the compute is exposed.
// The optimizer phase follows the last backward and is exposed whole. SSD
// data reaches the device through the host's PCIe too; at the NVMe's few
// GB/s against PCIe's tens, the NVMe link is the one that binds, and only
// it is charged.
//
//===----------------------------------------------------------------------===//

#include "loom/Cost/Offload.h"

#include <algorithm>

namespace loom {

llvm::StringRef getMemoryTierName(MemoryTier T) {
  switch (T) {
  case MemoryTier::HBM:
    return "hbm";
  case MemoryTier::Host:
    return "host";
  case MemoryTier::SSD:
    return "ssd";
  }
  return "hbm";
}

std::string OffloadTiers::str() const {
  std::string S;
  auto Add = [&](const char *Kind, MemoryTier T) {
    if (T == MemoryTier::HBM)
      return;
    if (!S.empty())
      S += ",";
    S += Kind;
    S += ":";
    S += getMemoryTierName(T).str();
  };
  Add("opt", Opt);
  Add("grad", Grad);
  Add("param", Param);
  Add("act", Act);
  return S.empty() ? "none" : S;
}

OffloadMemory placeOffloadedState(const OffloadInputs &In,
                                  const OffloadTiers &T) {
  OffloadMemory R;
  R.HBM = In.InHBM;
  const double W = In.InHBM.Weights, G = In.InHBM.Gradients,
               O = In.InHBM.OptimizerStates,
               A = In.ActivationBytesPerMicroBatch;
  const double L = std::max(1u, In.NumLayers);
  auto Hold = [&](MemoryTier Tier, double Bytes) {
    (Tier == MemoryTier::SSD ? R.SSDBytes : R.HostBytes) += Bytes;
  };
  if (T.Param != MemoryTier::HBM) {
    R.HBM.Weights = std::min(W, 2 * W / L);
    Hold(T.Param, W);
  }
  if (In.Train && T.Grad != MemoryTier::HBM) {
    R.HBM.Gradients = std::min(G, 2 * G / L);
    Hold(T.Grad, G);
  }
  if (In.Train && T.Act != MemoryTier::HBM) {
    double Resident = A * In.InFlightMicroBatches;
    double Keep = std::min(Resident, A);
    R.HBM.Activations = Keep + In.ActivationWorkspaceBytes;
    Hold(T.Act, Resident - Keep);
  }
  if (In.Train && T.Opt != MemoryTier::HBM) {
    R.HBM.OptimizerStates = 0;
    Hold(T.Opt, O);
  }
  return R;
}

OffloadCost estimateOffload(const OffloadInputs &In, const OffloadTiers &T,
                            llvm::SmallVectorImpl<OffloadTerm> *Terms) {
  OffloadCost R;
  // Where the state lives.
  OffloadMemory Mem = placeOffloadedState(In, T);
  R.HBM = Mem.HBM;
  R.HostBytes = Mem.HostBytes;
  R.SSDBytes = Mem.SSDBytes;
  const double W = In.InHBM.Weights, G = In.InHBM.Gradients,
               O = In.InHBM.OptimizerStates,
               A = In.ActivationBytesPerMicroBatch;
  const double M = In.NumMicroBatches;
  const double Passes = In.Train ? 2 : 1;
  auto BW = [&](MemoryTier Tier) {
    return Tier == MemoryTier::SSD ? In.SSDBandwidth : In.HostBandwidth;
  };
  auto Secs = [&](double Bytes, MemoryTier Tier) {
    double B = BW(Tier);
    return Bytes > 0 && B > 0 ? Bytes / B : 0.0;
  };
  auto Stream = [&](MemoryTier Tier, double Bytes) {
    (Tier == MemoryTier::SSD ? R.StreamSSDBytes : R.StreamHostBytes) += Bytes;
  };
  auto Term = [&](llvm::StringRef Name, MemoryTier Tier, double Bytes) {
    if (Terms && Bytes > 0)
      Terms->push_back({Name, Tier, Bytes, Secs(Bytes, Tier)});
  };
  // A term's name at an offload tier (host or ssd): one literal each.
  auto Kind = [](MemoryTier Tier, const char *Host, const char *SSD) {
    return llvm::StringRef(Tier == MemoryTier::SSD ? SSD : Host);
  };

  // What streams per micro-batch.
  if (T.Param != MemoryTier::HBM) {
    Stream(T.Param, Passes * W);
    Term(Kind(T.Param, "param:host fetch", "param:ssd fetch"), T.Param,
         M * Passes * W);
  }
  if (In.Train && T.Grad != MemoryTier::HBM) {
    Stream(T.Grad, G);
    Term(Kind(T.Grad, "grad:host drain", "grad:ssd drain"), T.Grad, M * G);
  }
  if (In.Train && T.Act != MemoryTier::HBM && In.InFlightMicroBatches * A > A) {
    Stream(T.Act, 2 * A);
    Term(Kind(T.Act, "act:host swap", "act:ssd swap"), T.Act, M * 2 * A);
  }
  double HostS = Secs(R.StreamHostBytes, MemoryTier::Host),
         SSDS = Secs(R.StreamSSDBytes, MemoryTier::SSD);
  R.StreamS = std::max(HostS, SSDS);
  R.ExposedPerMicroBatchS = std::max(0.0, R.StreamS - In.ComputePerMicroBatchS);

  if (!In.Train)
    return R;

  // The optimizer phase after the last backward.
  double Pre = 0, Update = 0, Post = 0;
  if (T.Opt == MemoryTier::HBM) {
    if (T.Grad != MemoryTier::HBM) { // accumulated gradients come back
      R.TailHostBytes += G;
      Pre = Secs(G, T.Grad);
      Term(Kind(T.Grad, "grad:host to hbm for the update",
                "grad:ssd to hbm for the update"),
           T.Grad, G);
    }
    Update = In.HBMOptimizerS;
    if (T.Param != MemoryTier::HBM) { // the updated weights go back out
      (T.Param == MemoryTier::SSD ? R.TailSSDBytes : R.TailHostBytes) += W;
      Post = Secs(W, T.Param);
      Term(Kind(T.Param, "param:host write-back", "param:ssd write-back"),
           T.Param, W);
    }
  } else {
    // This rank's partition only (ZeRO-Offload §4.1): at ZeRO-1 the
    // gradients in HBM are whole but the partition is 1/dp of them.
    const double GPart = std::min(G, In.UpdatedParams * In.GradBytesPerParam),
                 WPart = std::min(W, In.UpdatedParams * In.WeightBytesPerParam);
    if (T.Grad == MemoryTier::HBM) { // gradients down for the CPU
      R.TailHostBytes += GPart;
      Pre = Secs(GPart, MemoryTier::Host);
      Term("grad to host for the update", MemoryTier::Host, GPart);
    }
    double StateBytes = In.UpdatedParams * 28;
    R.HostOptimizerS =
        In.HostUpdateBandwidth > 0 ? StateBytes / In.HostUpdateBandwidth : 0;
    if (Terms)
      Terms->push_back(
          {"host optimizer", MemoryTier::Host, StateBytes, R.HostOptimizerS});
    double NVMe = 0;
    if (T.Opt == MemoryTier::SSD) {
      R.TailSSDBytes += 2 * O;
      NVMe = Secs(2 * O, MemoryTier::SSD);
      Term("opt:ssd read+write", MemoryTier::SSD, 2 * O);
    }
    Update = std::max(R.HostOptimizerS, NVMe);
    // The new bf16 weights go where the weights live.
    if (T.Param == MemoryTier::HBM) {
      R.TailHostBytes += WPart;
      Post = Secs(WPart, MemoryTier::Host);
      Term("param to hbm after the update", MemoryTier::Host, WPart);
    } else if (T.Param == MemoryTier::SSD) {
      R.TailSSDBytes += W;
      Post = Secs(W, MemoryTier::SSD);
      Term("param:ssd write-back", MemoryTier::SSD, W);
    }
  }
  R.TailS = Pre + Update + Post;
  return R;
}

llvm::SmallVector<OffloadTerm, 8> getOffloadTerms(const OffloadInputs &In,
                                                  const OffloadTiers &T) {
  llvm::SmallVector<OffloadTerm, 8> Terms;
  estimateOffload(In, T, &Terms);
  // Largest first, ties in the step's order.
  std::stable_sort(Terms.begin(), Terms.end(),
                   [](const OffloadTerm &A, const OffloadTerm &B) {
                     return A.Seconds > B.Seconds;
                   });
  return Terms;
}

} // namespace loom
