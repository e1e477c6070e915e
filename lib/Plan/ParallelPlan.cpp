//===- ParallelPlan.cpp - Plans and --plan parsing ------------------------===//
#include "loom/Plan/ParallelPlan.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom {

StringRef getRecomputeName(Recompute R) {
  switch (R) {
  case Recompute::None: return "none";
  case Recompute::Selective: return "selective";
  case Recompute::Full: return "full";
  }
  return "none";
}

std::string ParallelPlan::str() const {
  std::string S;
  raw_string_ostream OS(S);
  OS << "tp=" << TP << ",pp=" << PP << ",dp=" << DP << ",ep=" << EP
     << ",sp=" << (SP ? 1 : 0) << ",mb=" << MicroBatchSize
     << ",nmb=" << NumMicroBatches << ",vpp=" << VirtualStages
     << ",recompute=" << getRecomputeName(RC) << ",zero=" << ZeroStage;
  if (!StageLayers.empty()) {
    OS << ",stages=";
    for (unsigned I = 0; I < StageLayers.size(); ++I)
      OS << (I ? ":" : "") << StageLayers[I];
  }
  return OS.str();
}

static Error planError(const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), "--plan: " + Msg);
}

Expected<PlanSpec> parsePlanSpec(StringRef Text) {
  PlanSpec Spec;
  SmallVector<StringRef, 12> Items;
  Text.split(Items, ',', -1, /*KeepEmpty=*/false);
  StringSet<> Seen;
  for (StringRef Item : Items) {
    auto KV = Item.split('=');
    StringRef Key = KV.first.trim(), Val = KV.second.trim();
    if (Val.empty())
      return planError("'" + Item + "': expected KEY=VALUE");
    if (!Seen.insert(Key).second)
      return planError("key '" + Key + "' is given twice");
    auto Positive = [&](Optional<unsigned> &Out) -> Error {
      unsigned V;
      if (Val.getAsInteger(10, V) || V == 0 || V > (1u << 24))
        return planError(Key + "=" + Val +
                         ": expected a positive integer");
      Out = V;
      return Error::success();
    };
    Error E = Error::success();
    if (Key == "tp") E = Positive(Spec.TP);
    else if (Key == "pp") E = Positive(Spec.PP);
    else if (Key == "dp") E = Positive(Spec.DP);
    else if (Key == "ep") E = Positive(Spec.EP);
    else if (Key == "mb") E = Positive(Spec.MicroBatchSize);
    else if (Key == "nmb") E = Positive(Spec.NumMicroBatches);
    else if (Key == "vpp") E = Positive(Spec.VirtualStages);
    else if (Key == "zero") {
      unsigned V;
      if (Val.getAsInteger(10, V) || V > 3)
        return planError("zero=" + Val + ": expected 0, 1, 2 or 3");
      Spec.ZeroStage = V;
    } else if (Key == "sp") {
      Optional<bool> B = StringSwitch<Optional<bool>>(Val)
                             .Cases("1", "on", "true", true)
                             .Cases("0", "off", "false", false)
                             .Default(None);
      if (!B)
        return planError("sp=" + Val + ": expected on or off");
      Spec.SP = *B;
    } else if (Key == "recompute") {
      Optional<Recompute> R = StringSwitch<Optional<Recompute>>(Val)
                                  .Case("none", Recompute::None)
                                  .Case("selective", Recompute::Selective)
                                  .Case("full", Recompute::Full)
                                  .Default(None);
      if (!R)
        return planError("recompute=" + Val +
                         ": expected none, selective or full");
      Spec.RC = *R;
    } else if (Key == "stages") {
      SmallVector<StringRef, 16> Parts;
      Val.split(Parts, ':');
      for (StringRef P : Parts) {
        unsigned V;
        if (P.getAsInteger(10, V) || V == 0)
          return planError("stages=" + Val +
                           ": expected positive layer counts joined by ':'");
        Spec.StageLayers.push_back(V);
      }
    } else {
      return planError("unknown key '" + Key +
                       "'; expected tp, pp, dp, ep, sp, mb, nmb, vpp, "
                       "recompute, zero or stages");
    }
    if (E)
      return std::move(E);
  }
  if (!Spec.StageLayers.empty() && Spec.PP &&
      *Spec.PP != Spec.StageLayers.size())
    return planError("stages lists " + Twine(Spec.StageLayers.size()) +
                     " stages but pp=" + Twine(*Spec.PP));
  return Spec;
}

Expected<ParallelPlan> completePlan(const PlanSpec &Spec, uint64_t Devices,
                                    int64_t Batch) {
  ParallelPlan P;
  P.TP = Spec.TP.getValueOr(1);
  P.PP = Spec.PP.getValueOr(Spec.StageLayers.empty()
                                ? 1
                                : (unsigned)Spec.StageLayers.size());
  uint64_t TPPP = (uint64_t)P.TP * P.PP;
  if (Spec.DP) {
    P.DP = *Spec.DP;
  } else {
    if (Devices % TPPP)
      return planError("tp*pp = " + Twine(TPPP) + " does not divide the " +
                       Twine(Devices) + " devices");
    P.DP = Devices / TPPP;
  }
  if ((uint64_t)P.DP * TPPP != Devices)
    return planError("dp*tp*pp = " + Twine((uint64_t)P.DP * TPPP) +
                     " but the cluster has " + Twine(Devices) + " devices");
  P.EP = Spec.EP.getValueOr(1);
  if (P.DP % P.EP)
    return planError("ep=" + Twine(P.EP) + " does not divide dp = " +
                     Twine(P.DP) + " (expert-parallel ranks are carved out of "
                     "the data-parallel ones)");
  P.SP = Spec.SP.getValueOr(false);
  if (P.SP && P.TP == 1)
    return planError("sp=on needs tp > 1");
  P.MicroBatchSize = Spec.MicroBatchSize.getValueOr(1);
  if (Batch <= 0)
    return planError("a global batch (--batch) is needed");
  uint64_t PerStep = (uint64_t)P.DP * P.MicroBatchSize;
  if (Batch % PerStep)
    return planError("global batch " + Twine(Batch) +
                     " is not divisible by dp*mb = " + Twine(PerStep));
  unsigned NMB = Batch / PerStep;
  if (Spec.NumMicroBatches && *Spec.NumMicroBatches != NMB)
    return planError("nmb=" + Twine(*Spec.NumMicroBatches) +
                     " but batch / (dp*mb) = " + Twine(NMB));
  P.NumMicroBatches = NMB;
  P.VirtualStages = Spec.VirtualStages.getValueOr(1);
  P.RC = Spec.RC.getValueOr(Recompute::None);
  P.ZeroStage = Spec.ZeroStage.getValueOr(0);
  P.StageLayers = Spec.StageLayers;
  return P;
}

} // namespace loom
