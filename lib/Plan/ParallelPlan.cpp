//===- ParallelPlan.cpp - Plans and --plan parsing ------------------------===//
#include "loom/Plan/ParallelPlan.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/Offload.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>

#include <limits>

using namespace llvm;

namespace loom {

StringRef getRecomputeName(Recompute R) {
  switch (R) {
  case Recompute::None:
    return "none";
  case Recompute::Selective:
    return "selective";
  case Recompute::Full:
    return "full";
  }
  return "none";
}

StringRef getCPAlgoName(CPAlgo A) {
  return A == CPAlgo::A2A ? "a2a" : A == CPAlgo::Hybrid ? "hybrid" : "ring";
}

StringRef getMeshAxisName(MeshAxis A) {
  switch (A) {
  case MeshAxis::EP:
    return "ep";
  case MeshAxis::DP:
    return "dp";
  case MeshAxis::PP:
    return "pp";
  }
  return "dp";
}

ArrayRef<AxisOrder> getAllAxisOrders() {
  using A = MeshAxis;
  static const AxisOrder Orders[] = {
      {A::EP, A::DP, A::PP}, {A::EP, A::PP, A::DP}, {A::DP, A::EP, A::PP},
      {A::DP, A::PP, A::EP}, {A::PP, A::EP, A::DP}, {A::PP, A::DP, A::EP}};
  return Orders;
}

unsigned getAxisOrderIndex(const AxisOrder &O) {
  ArrayRef<AxisOrder> All = getAllAxisOrders();
  return std::find(All.begin(), All.end(), O) - All.begin();
}

std::string getAxisOrderName(const AxisOrder &O) {
  std::string S = "tp";
  for (MeshAxis A : O)
    S += "-" + getMeshAxisName(A).str();
  return S;
}

StringRef getGradPrecisionName(GradPrecision G) {
  return G == GradPrecision::BF16 ? "bf16" : "fp32";
}

SmallVector<MeshAxis, 3> getNonTrivialAxes(const AxisOrder &O, unsigned EP,
                                           unsigned DPOuter, unsigned PP) {
  SmallVector<MeshAxis, 3> R;
  for (MeshAxis A : O)
    if ((A == MeshAxis::EP ? EP : A == MeshAxis::DP ? DPOuter : PP) > 1)
      R.push_back(A);
  return R;
}

AxisOrder canonicalAxisOrder(const AxisOrder &O, unsigned EP, unsigned DPOuter,
                             unsigned PP) {
  SmallVector<MeshAxis, 3> Key = getNonTrivialAxes(O, EP, DPOuter, PP);
  if (getNonTrivialAxes(DefaultAxisOrder, EP, DPOuter, PP) == Key)
    return DefaultAxisOrder;
  // The axes of size > 1 innermost, as O has them; the others outside, in
  // the default order (the order --plan completes a partial one with).
  for (MeshAxis A : DefaultAxisOrder)
    if (!is_contained(Key, A))
      Key.push_back(A);
  return {Key[0], Key[1], Key[2]};
}

SmallVector<AxisOrder, 6> getDistinctAxisOrders(unsigned EP, unsigned DPOuter,
                                                unsigned PP) {
  SmallVector<AxisOrder, 6> R;
  for (const AxisOrder &O : getAllAxisOrders())
    if (canonicalAxisOrder(O, EP, DPOuter, PP) == O)
      R.push_back(O);
  return R;
}

unsigned ParallelPlan::getAxisSize(MeshAxis A) const {
  switch (A) {
  case MeshAxis::EP:
    return EP;
  case MeshAxis::DP:
    return DP / std::max(1u, EP);
  case MeshAxis::PP:
    return PP;
  }
  return 1;
}

unsigned ParallelPlan::getAxisStride(MeshAxis A) const {
  unsigned Stride = TP * CP; // cp sits right outside tp
  for (MeshAxis B : Order) {
    if (B == A)
      break;
    Stride *= getAxisSize(B);
  }
  return Stride;
}

std::string ParallelPlan::str() const {
  std::string S;
  raw_string_ostream OS(S);
  OS << "tp=" << TP << ",pp=" << PP << ",dp=" << DP << ",ep=" << EP
     << ",sp=" << (SP ? 1 : 0) << ",mb=" << MicroBatchSize
     << ",nmb=" << NumMicroBatches << ",vpp=" << VirtualStages
     << ",recompute=" << getRecomputeName(RC) << ",zero=" << ZeroStage;
  if (Grad != GradPrecision::FP32)
    OS << ",grad=" << getGradPrecisionName(Grad);
  if (Order != DefaultAxisOrder)
    OS << ",order=" << getAxisOrderName(Order);
  if (Offload.any())
    OS << ",offload=" << Offload.str();
  if (Emb != EmbeddingMode::Auto)
    OS << ",emb=" << getEmbeddingModeName(Emb);
  if (TPOverlap)
    OS << ",tp_overlap=on";
  if (!DPOverlap)
    OS << ",dp_overlap=off";
  if (!PPOverlap)
    OS << ",pp_overlap=off";
  if (CP > 1)
    OS << ",cp=" << CP << ",cp_algo=" << getCPAlgoName(CPA);
  if (CP > 1 && CPA == CPAlgo::Hybrid)
    OS << ",cp_ulysses=" << CPUlysses;
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
  SmallVector<StringRef, 12> Parts;
  Text.split(Parts, ',', -1, /*KeepEmpty=*/false);
  // offload=opt:host,param:ssd: the KIND:TIER items after offload= are
  // its value, not keys.
  SmallVector<std::string, 12> Items;
  for (StringRef Part : Parts) {
    if (!Part.contains('=') && Part.contains(':') && !Items.empty() &&
        StringRef(Items.back()).trim().startswith("offload=")) {
      Items.back() += "," + Part.str();
      continue;
    }
    Items.push_back(Part.str());
  }
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
        return planError(Key + "=" + Val + ": expected a positive integer");
      Out = V;
      return Error::success();
    };
    Error E = Error::success();
    if (Key == "tp")
      E = Positive(Spec.TP);
    else if (Key == "pp")
      E = Positive(Spec.PP);
    else if (Key == "dp")
      E = Positive(Spec.DP);
    else if (Key == "ep")
      E = Positive(Spec.EP);
    else if (Key == "cp")
      E = Positive(Spec.CP);
    else if (Key == "cp_ulysses") {
      E = Positive(Spec.CPUlysses);
      if (!E && *Spec.CPUlysses > UINT16_MAX)
        return planError("cp_ulysses=" + Val + ": at most 65535");
    } else if (Key == "mb")
      E = Positive(Spec.MicroBatchSize);
    else if (Key == "nmb")
      E = Positive(Spec.NumMicroBatches);
    else if (Key == "vpp")
      E = Positive(Spec.VirtualStages);
    else if (Key == "zero") {
      unsigned V;
      if (Val.getAsInteger(10, V) || V > 3)
        return planError("zero=" + Val + ": expected 0, 1, 2 or 3");
      Spec.ZeroStage = V;
    } else if (Key == "sp" || Key == "tp_overlap" || Key == "dp_overlap" ||
               Key == "pp_overlap") {
      Optional<bool> B = StringSwitch<Optional<bool>>(Val)
                             .Cases("1", "on", "true", true)
                             .Cases("0", "off", "false", false)
                             .Default(None);
      if (!B)
        return planError(Key + "=" + Val + ": expected on or off");
      (Key == "sp"           ? Spec.SP
       : Key == "tp_overlap" ? Spec.TPOverlap
       : Key == "dp_overlap" ? Spec.DPOverlap
                             : Spec.PPOverlap) = *B;
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
    } else if (Key == "cp_algo") {
      Optional<CPAlgo> A = StringSwitch<Optional<CPAlgo>>(Val)
                               .Case("ring", CPAlgo::Ring)
                               .Case("a2a", CPAlgo::A2A)
                               .Case("hybrid", CPAlgo::Hybrid)
                               .Default(None);
      if (!A)
        return planError("cp_algo=" + Val +
                         ": expected ring (K/V passed around the cp group), "
                         "a2a (all-to-all over heads) or hybrid (a2a inside "
                         "groups of cp_ulysses ranks, the ring over them)");
      Spec.CPA = *A;
    } else if (Key == "grad") {
      Optional<GradPrecision> G = StringSwitch<Optional<GradPrecision>>(Val)
                                      .Case("fp32", GradPrecision::FP32)
                                      .Case("bf16", GradPrecision::BF16)
                                      .Default(None);
      if (!G)
        return planError("grad=" + Val + ": expected fp32 or bf16");
      Spec.Grad = *G;
    } else if (Key == "order") {
      SmallVector<StringRef, 4> Parts;
      Val.split(Parts, '-');
      if (!Parts.empty() && Parts.front() == "tp")
        Parts.erase(Parts.begin());
      // cp's one place: right outside tp (ParallelPlan.h).
      if (!Parts.empty() && Parts.front() == "cp")
        Parts.erase(Parts.begin());
      if (is_contained(Parts, "cp"))
        return planError("order=" + Val +
                         ": cp sits right after tp (tp-cp-...), as in "
                         "Megatron-Core's order tp-cp-ep-dp-pp");
      SmallVector<MeshAxis, 3> Listed;
      bool Ok = !Parts.empty() && Parts.size() <= 3;
      for (unsigned I = 0; Ok && I < Parts.size(); ++I) {
        Optional<MeshAxis> A = StringSwitch<Optional<MeshAxis>>(Parts[I])
                                   .Case("ep", MeshAxis::EP)
                                   .Case("dp", MeshAxis::DP)
                                   .Case("pp", MeshAxis::PP)
                                   .Default(None);
        Ok = A && !is_contained(Listed, *A);
        if (Ok)
          Listed.push_back(*A);
      }
      if (!Ok)
        return planError("order=" + Val +
                         ": expected tp (and cp) then ep, dp and pp in some "
                         "order, innermost first, joined by '-' (e.g. "
                         "tp-cp-ep-dp-pp; tp is always innermost)");
      // Axes left out go outside the listed ones, in the default order.
      for (MeshAxis A : DefaultAxisOrder)
        if (!is_contained(Listed, A))
          Listed.push_back(A);
      Spec.Order = AxisOrder{Listed[0], Listed[1], Listed[2]};
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
    } else if (Key == "offload") {
      Expected<OffloadTiers> T = parseOffloadTiers(Val);
      if (!T)
        return T.takeError();
      Spec.Offload = *T;
    } else if (Key == "emb") {
      Expected<EmbeddingMode> M = parseEmbeddingMode(Val);
      if (!M)
        return M.takeError();
      Spec.Emb = *M;
    } else if (Key == "rest") {
      if (Val != "plain" && Val != "search")
        return planError("rest=" + Val +
                         ": expected plain (keys not given take their "
                         "plain values) or search (the default)");
      Spec.RestPlain = Val == "plain";
    } else {
      return planError(
          "unknown key '" + Key +
          "'; expected tp, pp, dp, ep, sp, mb, nmb, vpp, "
          "cp, cp_algo, cp_ulysses, recompute, zero, grad, order, offload, "
          "emb, tp_overlap, dp_overlap, pp_overlap, stages or "
          "rest");
    }
    if (E)
      return std::move(E);
  }
  if (Spec.CPUlysses && Spec.CPA != CPAlgo::Hybrid)
    return planError("cp_ulysses=" + Twine(*Spec.CPUlysses) +
                     " needs cp_algo=hybrid (it is the all-to-all's degree "
                     "inside cp)");
  if (Spec.CPUlysses && Spec.CP &&
      (*Spec.CPUlysses <= 1 || *Spec.CPUlysses >= *Spec.CP ||
       *Spec.CP % *Spec.CPUlysses))
    return planError("cp_ulysses=" + Twine(*Spec.CPUlysses) +
                     ": expected a divisor of cp = " + Twine(*Spec.CP) +
                     " above 1 and below cp (the ring runs over cp / "
                     "cp_ulysses groups of cp_ulysses ranks)");
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
  P.PP = Spec.PP.getValueOr(
      Spec.StageLayers.empty() ? 1 : (unsigned)Spec.StageLayers.size());
  P.CP = Spec.CP.getValueOr(1);
  P.CPA = Spec.CPA.getValueOr(CPAlgo::Ring);
  if (Spec.CPA && P.CP == 1)
    return planError("cp_algo=" + getCPAlgoName(P.CPA) + " needs cp > 1");
  if (P.CPA == CPAlgo::Hybrid) {
    if (!Spec.CPUlysses)
      return planError("cp_algo=hybrid needs cp_ulysses=N, the all-to-all's "
                       "degree inside cp (MindSpeed's --ulysses-degree-in-cp)");
    P.CPUlysses = *Spec.CPUlysses;
  }
  uint64_t TPPP = (uint64_t)P.TP * P.CP * P.PP;
  if (TPPP > Devices)
    return planError((P.CP > 1 ? "tp*cp*pp = " : "tp*pp = ") + Twine(TPPP) +
                     " needs more than the " + Twine(Devices) + " devices");
  if (Spec.DP) {
    P.DP = *Spec.DP;
  } else {
    // As many replicas as fit and divide the batch; the rest stay idle
    // (DESIGN §6: a plan may leave devices idle when the batch cannot
    // fill them).
    uint64_t MB = Spec.MicroBatchSize.getValueOr(1);
    uint64_t Max = Devices / TPPP;
    P.DP = 1;
    if (Batch > 0)
      for (uint64_t D = Max; D >= 1; --D)
        if ((uint64_t)Batch % (D * MB) == 0) {
          P.DP = D;
          break;
        }
  }
  if ((uint64_t)P.DP * TPPP > Devices)
    return planError((P.CP > 1 ? "dp*tp*cp*pp = " : "dp*tp*pp = ") +
                     Twine((uint64_t)P.DP * TPPP) + " but the cluster has " +
                     Twine(Devices) + " devices");
  P.EP = Spec.EP.getValueOr(1);
  if (P.DP % P.EP)
    return planError("ep=" + Twine(P.EP) +
                     " does not divide dp = " + Twine(P.DP) +
                     " (expert-parallel ranks are carved out of "
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
  uint64_t NMB = Batch / PerStep;
  if (NMB > std::numeric_limits<unsigned>::max())
    return planError("batch / (dp*mb) = " + Twine(NMB) +
                     " micro-batches per step; at most " +
                     Twine(std::numeric_limits<unsigned>::max()) +
                     " are supported");
  if (Spec.NumMicroBatches && *Spec.NumMicroBatches != NMB)
    return planError("nmb=" + Twine(*Spec.NumMicroBatches) +
                     " but batch / (dp*mb) = " + Twine(NMB));
  P.NumMicroBatches = NMB;
  P.VirtualStages = Spec.VirtualStages.getValueOr(1);
  P.RC = Spec.RC.getValueOr(Recompute::None);
  P.ZeroStage = Spec.ZeroStage.getValueOr(0);
  P.StageLayers = Spec.StageLayers;
  P.Grad = Spec.Grad.getValueOr(GradPrecision::FP32);
  P.Offload = Spec.Offload.getValueOr(OffloadTiers());
  P.Emb = Spec.Emb.getValueOr(EmbeddingMode::Auto);
  P.TPOverlap = Spec.TPOverlap.getValueOr(false);
  P.DPOverlap = Spec.DPOverlap.getValueOr(true);
  P.PPOverlap = Spec.PPOverlap.getValueOr(true);
  if (P.TPOverlap && P.TP == 1)
    return planError("tp_overlap=on needs tp > 1 (there is no TP "
                     "communication to overlap)");
  P.Order = canonicalAxisOrder(Spec.Order.getValueOr(DefaultAxisOrder), P.EP,
                               P.DP / P.EP, P.PP);
  return P;
}

PlanSpec getFixedSpec(const ParallelPlan &P) {
  PlanSpec S;
  S.DP = P.DP;
  S.TP = P.TP;
  S.PP = P.PP;
  S.EP = P.EP;
  S.CP = P.CP;
  if (P.CP > 1) // cp_algo means nothing at cp = 1 (completePlan refuses it)
    S.CPA = P.CPA;
  if (P.CP > 1 && P.CPA == CPAlgo::Hybrid)
    S.CPUlysses = P.CPUlysses;
  S.SP = P.SP;
  S.MicroBatchSize = P.MicroBatchSize;
  S.NumMicroBatches = P.NumMicroBatches;
  S.VirtualStages = P.VirtualStages;
  S.RC = P.RC;
  S.ZeroStage = P.ZeroStage;
  S.Order = P.Order;
  S.Grad = P.Grad;
  S.Offload = P.Offload;
  S.Emb = P.Emb;
  S.TPOverlap = P.TPOverlap;
  S.DPOverlap = P.DPOverlap;
  S.PPOverlap = P.PPOverlap;
  S.StageLayers = P.StageLayers;
  return S;
}

StringRef getEmbeddingModeName(EmbeddingMode M) {
  switch (M) {
  case EmbeddingMode::Auto:
    return "auto";
  case EmbeddingMode::Table:
    return "table";
  case EmbeddingMode::Row:
    return "row";
  case EmbeddingMode::Col:
    return "col";
  }
  return "auto";
}

Expected<EmbeddingMode> parseEmbeddingMode(StringRef Text) {
  Optional<EmbeddingMode> M = StringSwitch<Optional<EmbeddingMode>>(Text)
                                  .Case("auto", EmbeddingMode::Auto)
                                  .Case("table", EmbeddingMode::Table)
                                  .Case("row", EmbeddingMode::Row)
                                  .Case("col", EmbeddingMode::Col)
                                  .Default(None);
  if (!M)
    return createStringError(inconvertibleErrorCode(),
                             "--plan: emb=%s: expected auto, table, row or "
                             "col",
                             Text.str().c_str());
  return *M;
}

Error checkOverlapHardware(bool TPOverlap, const HardwareModel &HW) {
  if (!TPOverlap)
    return Error::success();
  const DeviceClass *Core = HW.getClass("aicore");
  if (Core && Core->Overlap && Core->Overlap->TP)
    return Error::success();
  return createStringError(
      inconvertibleErrorCode(),
      "tp_overlap=on: hardware '%s' gives no TP overlap share "
      "(device.classes.aicore.comm_overlap.tp: the share of the compute "
      "units the TP collectives hold beside the GEMMs), so the overlap "
      "cannot be costed; add it (examples/hw/overlap/*.yaml, another --hw) "
      "or give a --framework whose profile states it",
      HW.Name.c_str());
}

void writePlanJSON(json::OStream &J, const ParallelPlan &P,
                   ArrayRef<unsigned> StageLayers) {
  J.attribute("dp", P.DP);
  J.attribute("tp", P.TP);
  J.attribute("pp", P.PP);
  J.attribute("ep", P.EP);
  J.attribute("sp", P.SP);
  J.attribute("micro_batch_size", P.MicroBatchSize);
  J.attribute("num_micro_batches", P.NumMicroBatches);
  J.attribute("virtual_stages", P.VirtualStages);
  J.attribute("cp", P.CP);
  J.attribute("cp_algo", getCPAlgoName(P.CPA));
  // The all-to-all's degree inside cp (ring 1, a2a cp, hybrid between).
  J.attribute("cp_ulysses", P.getCPUlyssesSize());
  J.attribute("recompute", getRecomputeName(P.RC));
  J.attribute("zero_stage", P.ZeroStage);
  J.attribute("grad_dtype", getGradPrecisionName(P.Grad));
  J.attribute("tp_overlap", P.TPOverlap);
  J.attribute("dp_overlap", P.DPOverlap);
  J.attribute("pp_overlap", P.PPOverlap);
  // Where training state lives ("none": all in HBM), as offload= writes it.
  J.attribute("offload", P.Offload.str());
  J.attributeArray("axis_order", [&] {
    J.value("tp");
    if (P.CP > 1) // cp sits right outside tp (Shard/OutputFormat.md)
      J.value("cp");
    for (MeshAxis A : P.Order)
      J.value(getMeshAxisName(A));
  });
  J.attributeArray("stage_layers", [&] {
    for (unsigned L : StageLayers)
      J.value(L);
  });
}

json::Value getPlanJSON(const ParallelPlan &P, ArrayRef<unsigned> StageLayers) {
  std::string Text;
  raw_string_ostream OS(Text);
  {
    json::OStream J(OS);
    J.object([&] { writePlanJSON(J, P, StageLayers); });
  }
  return cantFail(json::parse(OS.str()));
}

} // namespace loom
