//===- Offload.h - The offload= plan key and its search space ---*- C++ -*-===//
//
// `--plan offload=opt:host,param:ssd,act:host` places the kinds of training
// state in HBM, host DRAM or SSD (cost_models/memory/Offload.cpp costs
// it). Kinds: opt (fp32 master weights + Adam moments), grad, param, act;
// tiers: hbm, host, ssd (grad and act: hbm or host). "none" keeps all in
// HBM.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_OFFLOAD_H
#define LOOM_PLAN_OFFLOAD_H

#include "loom/Cost/Offload.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <vector>

namespace loom {

struct HardwareModel;

/// Parses the value of offload= ("none" or KIND:TIER joined by ','). Errors
/// name the item and say what is allowed.
llvm::Expected<OffloadTiers> parseOffloadTiers(llvm::StringRef Text);

/// The placements the search tries, "none" first, then in a fixed order:
/// opt in hbm/host/ssd x grad in hbm/host x param in hbm/host/ssd x act in
/// hbm/host, skipping tiers \p HW has no memory level for and opt off HBM
/// when the host has no update_bandwidth. Training only.
std::vector<OffloadTiers> getSearchedOffloads(const HardwareModel &HW);

/// Why \p HW cannot hold what \p T offloads, or success: the tier's memory
/// level is missing, or opt off HBM without a host update_bandwidth.
/// \p Train false: only param may leave HBM.
llvm::Error checkOffloadHardware(const OffloadTiers &T, const HardwareModel &HW,
                                 bool Train);

/// How far from HBM \p T puts the state: the sum over the kinds of 0 (hbm),
/// 1 (host), 2 (ssd). Between plans equal in cost, the nearer wins.
unsigned getOffloadDistance(const OffloadTiers &T);

} // namespace loom

#endif // LOOM_PLAN_OFFLOAD_H
