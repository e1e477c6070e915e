//===- Offload.cpp - The offload= plan key and its search space -----------===//
#include "loom/Plan/Offload.h"
#include "loom/Hardware/HardwareModel.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>

using namespace llvm;

namespace loom {

static Error offloadError(const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), "--plan: offload=" + Msg);
}

Expected<OffloadTiers> parseOffloadTiers(StringRef Text) {
  OffloadTiers T;
  if (Text.trim() == "none")
    return T;
  SmallVector<StringRef, 4> Items;
  Text.split(Items, ',', -1, /*KeepEmpty=*/false);
  if (Items.empty())
    return offloadError(Text + ": expected none or KIND:TIER items joined by "
                               "',' (e.g. opt:host,param:ssd)");
  bool Seen[4] = {false, false, false, false};
  for (StringRef Item : Items) {
    auto KV = Item.split(':');
    StringRef Kind = KV.first.trim(), Tier = KV.second.trim();
    int K = StringSwitch<int>(Kind)
                .Case("opt", 0)
                .Case("grad", 1)
                .Case("param", 2)
                .Case("act", 3)
                .Default(-1);
    if (K < 0)
      return offloadError(Text + ": unknown kind '" + Kind + "' in '" + Item +
                          "'; expected opt, grad, param or act");
    if (Seen[K])
      return offloadError(Text + ": kind '" + Kind + "' is given twice");
    Seen[K] = true;
    Optional<MemoryTier> M = StringSwitch<Optional<MemoryTier>>(Tier)
                                 .Case("hbm", MemoryTier::HBM)
                                 .Case("host", MemoryTier::Host)
                                 .Case("ssd", MemoryTier::SSD)
                                 .Default(None);
    if (!M)
      return offloadError(Text + ": '" + Item +
                          "': expected KIND:TIER with TIER hbm, host or ssd");
    if ((K == 1 || K == 3) && *M == MemoryTier::SSD)
      return offloadError(Text + ": '" + Item + "': " + Kind +
                          " is written every micro-batch and may live in hbm "
                          "or host only");
    MemoryTier *Slot[] = {&T.Opt, &T.Grad, &T.Param, &T.Act};
    *Slot[K] = *M;
  }
  return T;
}

Error checkOffloadHardware(const OffloadTiers &T, const HardwareModel &HW,
                           bool Train) {
  if (!T.any())
    return Error::success();
  if (!Train && (T.Opt != MemoryTier::HBM || T.Grad != MemoryTier::HBM ||
                 T.Act != MemoryTier::HBM))
    return createStringError(inconvertibleErrorCode(),
                             "offload=%s: only param can be offloaded in "
                             "inference (there is no optimizer, gradient or "
                             "saved activation)",
                             T.str().c_str());
  for (MemoryTier M : {MemoryTier::Host, MemoryTier::SSD})
    if (T.uses(M) && !HW.getMemory(getMemoryTierName(M)))
      return createStringError(
          inconvertibleErrorCode(),
          "offload=%s: the hardware '%s' has no device.memory.%s level",
          T.str().c_str(), HW.Name.c_str(), getMemoryTierName(M).str().c_str());
  if (T.Opt != MemoryTier::HBM) {
    const MemoryLevel *Host = HW.getMemory("host");
    if (!Host || !Host->UpdateBandwidth)
      return createStringError(
          inconvertibleErrorCode(),
          "offload=%s: the optimizer off HBM runs on the host CPU, and the "
          "hardware '%s' gives no device.memory.host.update_bandwidth",
          T.str().c_str(), HW.Name.c_str());
  }
  return Error::success();
}

std::vector<OffloadTiers> getSearchedOffloads(const HardwareModel &HW) {
  std::vector<OffloadTiers> R;
  const MemoryTier All[] = {MemoryTier::HBM, MemoryTier::Host, MemoryTier::SSD};
  const MemoryTier Near[] = {MemoryTier::HBM, MemoryTier::Host};
  for (MemoryTier O : All)
    for (MemoryTier G : Near)
      for (MemoryTier P : All)
        for (MemoryTier A : Near) {
          OffloadTiers T;
          T.Opt = O;
          T.Grad = G;
          T.Param = P;
          T.Act = A;
          if (Error E = checkOffloadHardware(T, HW, /*Train=*/true)) {
            consumeError(std::move(E));
            continue;
          }
          R.push_back(T);
        }
  return R;
}

/// How far from HBM \p T puts the state: the sum over the kinds of 0 (hbm),
/// 1 (host), 2 (ssd).
unsigned getOffloadDistance(const OffloadTiers &T) {
  unsigned N = 0;
  for (MemoryTier M : {T.Opt, T.Grad, T.Param, T.Act})
    N += (unsigned)M;
  return N;
}

} // namespace loom
