//===- Framework.cpp - The rules of a framework profile -------------------===//
//
// Each rule reads a few plan choices and is checked only when --plan (or a
// complete plan) fixes all of them, so one function serves the search
// (every candidate is a complete plan) and --plan's early error. Messages
// name the framework, the choices, the rule and its source.
//
//===----------------------------------------------------------------------===//
#include "loom/Plan/Framework.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace llvm;

namespace loom {

StringRef getOffloadKindName(OffloadKind K) {
  switch (K) {
  case OffloadKind::Opt:
    return "opt";
  case OffloadKind::Grad:
    return "grad";
  case OffloadKind::Param:
    return "param";
  case OffloadKind::Act:
    return "act";
  }
  llvm_unreachable("bad offload kind");
}

const FrameworkZeroMode *FrameworkProfile::getZeroMode(unsigned Stage) const {
  for (const FrameworkZeroMode &Z : Zero)
    if (Z.Stage == Stage)
      return &Z;
  return nullptr;
}

FrameworkProfile getNoneFramework() {
  FrameworkProfile F;
  F.Name = "none";
  F.AnyPlan = true;
  return F;
}

namespace {

MemoryTier getTier(const OffloadTiers &T, OffloadKind K) {
  switch (K) {
  case OffloadKind::Opt:
    return T.Opt;
  case OffloadKind::Grad:
    return T.Grad;
  case OffloadKind::Param:
    return T.Param;
  case OffloadKind::Act:
    return T.Act;
  }
  llvm_unreachable("bad offload kind");
}

/// Builds the error of one rule.
class RuleError {
public:
  explicit RuleError(const FrameworkProfile &F) : F(F) {}
  Error operator()(const Twine &Choices, const Twine &Rule,
                   StringRef Source) const {
    return createStringError(inconvertibleErrorCode(),
                             ("framework '" + F.Name + "' cannot run " +
                              Choices + ": " + Rule + " (" + Source + ")")
                                 .str());
  }

private:
  const FrameworkProfile &F;
};

Error checkZero(const FrameworkProfile &F, const PlanSpec &S,
                const RuleError &Fail) {
  if (!S.ZeroStage)
    return Error::success();
  unsigned Z = *S.ZeroStage;
  const FrameworkZeroMode *M = F.getZeroMode(Z);
  if (!M) {
    std::vector<std::string> Known;
    std::string Sources;
    for (const FrameworkZeroMode &K : F.Zero) {
      Known.push_back(std::to_string(K.Stage) + " (" + K.Name + ")");
      Sources += (Sources.empty() ? "" : "; ") + K.Source;
    }
    return Fail("zero=" + Twine(Z),
                "its sharding modes are ZeRO stages " + join(Known, ", "),
                Sources);
  }
  if (M->MaxTP && S.TP && *S.TP > M->MaxTP)
    return Fail("zero=" + Twine(Z) + " with tp=" + Twine(*S.TP),
                M->Name + " runs at tp <= " + Twine(M->MaxTP), M->Source);
  if (M->MaxPP && S.PP && *S.PP > M->MaxPP)
    return Fail("zero=" + Twine(Z) + " with pp=" + Twine(*S.PP),
                M->Name + " runs at pp <= " + Twine(M->MaxPP), M->Source);
  return Error::success();
}

/// Why \p O cannot move kind \p K to tier \p T under \p S, or "".
std::string whyNot(const FrameworkOffload &O, const OffloadTiers &Off,
                   const PlanSpec &S) {
  if (S.ZeroStage && (*S.ZeroStage < O.MinZero || *S.ZeroStage > O.MaxZero))
    return O.Name + " runs at zero " +
           (O.MinZero == O.MaxZero ? std::to_string(O.MinZero)
                                   : std::to_string(O.MinZero) + " to " +
                                         std::to_string(O.MaxZero));
  for (OffloadKind W : O.With)
    if (getTier(Off, W) == MemoryTier::HBM)
      return O.Name + " moves " + getOffloadKindName(W).str() +
             " off HBM with " + getOffloadKindName(O.Kind).str();
  if (O.NeedsRecompute && S.RC && *S.RC == Recompute::None)
    return O.Name + " offloads the activations recompute keeps (needs "
                    "recompute)";
  return "";
}

Error checkOffload(const FrameworkProfile &F, const PlanSpec &S,
                   const RuleError &Fail) {
  if (!S.Offload)
    return Error::success();
  const OffloadTiers &Off = *S.Offload;
  for (OffloadKind K : {OffloadKind::Opt, OffloadKind::Grad, OffloadKind::Param,
                        OffloadKind::Act}) {
    MemoryTier T = getTier(Off, K);
    if (T == MemoryTier::HBM)
      continue;
    std::string Item =
        (getOffloadKindName(K) + ":" + getMemoryTierName(T)).str();
    std::string Why, Source;
    bool Ok = false;
    for (const FrameworkOffload &O : F.Offload) {
      if (O.Kind != K || !is_contained(O.Tiers, T))
        continue;
      std::string W = whyNot(O, Off, S);
      if (W.empty()) {
        Ok = true;
        break;
      }
      if (Why.empty()) {
        Why = W;
        Source = O.Source;
      }
    }
    if (Ok)
      continue;
    std::string Ctx = "offload=" + Off.str();
    if (S.ZeroStage)
      Ctx += " with zero=" + std::to_string(*S.ZeroStage);
    if (!Why.empty())
      return Fail(Ctx, Why, Source);
    std::vector<std::string> Can;
    for (const FrameworkOffload &O : F.Offload)
      for (MemoryTier OT : O.Tiers)
        Can.push_back((getOffloadKindName(O.Kind) + ":" +
                       getMemoryTierName(OT) + " (" + O.Name + ")")
                          .str());
    return Fail(Ctx,
                "it has no " + Item + " offload" +
                    (Can.empty() ? std::string(" (it offloads nothing)")
                                 : "; it offloads " + join(Can, ", ")),
                F.Source);
  }
  return Error::success();
}

Error checkParallelism(const FrameworkProfile &F, const PlanSpec &S,
                       const FrameworkContext &Ctx, const RuleError &Fail) {
  if (S.RC && !is_contained(F.Recomputes, *S.RC))
    return Fail("recompute=" + getRecomputeName(*S.RC),
                "it has no such recompute granularity", F.RecomputeSource);
  bool TPGT1 = S.TP && *S.TP > 1;
  if (S.SP && *S.SP && !F.SequenceParallel)
    return Fail("sp=1", "it has no Megatron-style sequence parallelism",
                F.SequenceParallelSource);
  unsigned VPP = S.VirtualStages.getValueOr(1);
  if (VPP > 1 && !F.VirtualPipeline)
    return Fail("vpp=" + Twine(VPP), "it has no interleaved pipeline schedule",
                F.VirtualPipelineSource);
  if (VPP > 1 && F.EvenChunks && S.PP && Ctx.NumBlocks &&
      Ctx.NumBlocks % (*S.PP * VPP))
    return Fail("vpp=" + Twine(VPP) + " with pp=" + Twine(*S.PP),
                "its virtual stages hold equal numbers of transformer "
                "layers, and " +
                    Twine(Ctx.NumBlocks) + " do not split into " +
                    Twine(*S.PP * VPP) + " chunks",
                F.VirtualPipelineSource);
  if (S.EP && *S.EP > 1 && !F.ExpertParallel)
    return Fail("ep=" + Twine(*S.EP), "it has no expert parallelism",
                F.ExpertParallelSource);
  if (S.EP && *S.EP > 1 && F.EPWithTPNeedsSP && TPGT1 && S.SP && !*S.SP)
    return Fail("ep=" + Twine(*S.EP) + " with tp=" + Twine(*S.TP) + " and sp=0",
                "expert parallelism with tensor parallelism needs sequence "
                "parallelism",
                F.ExpertParallelSource);
  if (S.TPOverlap && *S.TPOverlap && !F.TPOverlap)
    return Fail("tp_overlap=on", "it has no TP communication overlap",
                F.TPOverlapSource);
  if (S.TPOverlap && *S.TPOverlap && F.TPOverlapNeedsSP && S.SP && !*S.SP)
    return Fail("tp_overlap=on with sp=0",
                "its TP overlap chunks the sequence-parallel all-gather and "
                "reduce-scatter (needs sp)",
                F.TPOverlapSource);
  unsigned CP = S.CP.getValueOr(1);
  if (CP > 1) {
    CPAlgo A = S.CPA.getValueOr(CPAlgo::Ring);
    if (F.getCPAlgoName(A).empty())
      return Fail("cp=" + Twine(CP) + ",cp_algo=" + loom::getCPAlgoName(A),
                  F.ContextParallel.empty()
                      ? "it has no context parallelism"
                      : "its context-parallel algorithms are " +
                            join(F.ContextParallel, ", "),
                  F.ContextParallelSource);
    unsigned TP = S.TP.getValueOr(1);
    unsigned U = A == CPAlgo::A2A      ? CP
                 : A == CPAlgo::Hybrid ? S.CPUlysses.getValueOr(1)
                                       : 1;
    if (U > 1 && Ctx.KVHeads > 0 && Ctx.KVHeads % (TP * U) &&
        !F.UlyssesKVRepeat)
      return Fail("cp=" + Twine(CP) + ",cp_algo=" + loom::getCPAlgoName(A) +
                      " with tp=" + Twine(TP),
                  "its all-to-all over heads needs the " + Twine(Ctx.KVHeads) +
                      " K/V heads divisible by tp*" +
                      (A == CPAlgo::Hybrid ? "cp_ulysses" : "cp") + " = " +
                      Twine(TP * U) +
                      " (it does not repeat them to the query heads first)",
                  F.UlyssesKVRepeatSource.empty() ? F.ContextParallelSource
                                                  : F.UlyssesKVRepeatSource);
  }
  if (S.Grad && !is_contained(F.Grads, *S.Grad))
    return Fail("grad=" + getGradPrecisionName(*S.Grad),
                "it reduces gradients in " +
                    getGradPrecisionName(F.Grads.front()),
                F.GradsSource);
  return Error::success();
}

/// Whether \p O is one of \p F's meshes at these sizes.
bool isFrameworkMesh(const FrameworkProfile &F, const AxisOrder &O, unsigned EP,
                     unsigned DPOuter, unsigned PP) {
  auto Mine = getNonTrivialAxes(O, EP, DPOuter, PP);
  return any_of(F.Orders, [&](const AxisOrder &A) {
    return getNonTrivialAxes(A, EP, DPOuter, PP) == Mine;
  });
}

/// An order is the same mesh as another when the axes between them have
/// size 1, so a fixed order is checked at the sizes --plan fixes; an axis
/// whose size is free is tried at 1 and at more than 1, and the order is
/// refused only when no choice makes it one the framework builds.
Error checkOrder(const FrameworkProfile &F, const PlanSpec &S,
                 const RuleError &Fail) {
  if (!S.Order || F.Orders.empty())
    return Error::success();
  auto Sizes = [](Optional<unsigned> V) {
    return V ? SmallVector<unsigned, 2>{*V} : SmallVector<unsigned, 2>{1, 2};
  };
  Optional<unsigned> DPOuter;
  if (S.DP && S.EP)
    DPOuter = *S.DP / std::max(1u, *S.EP);
  for (unsigned EP : Sizes(S.EP))
    for (unsigned DO : Sizes(DPOuter))
      for (unsigned PP : Sizes(S.PP))
        if (isFrameworkMesh(F, *S.Order, EP, DO, PP))
          return Error::success();
  std::vector<std::string> Names;
  for (const AxisOrder &O : F.Orders)
    Names.push_back(getAxisOrderName(O));
  return Fail("order=" + getAxisOrderName(*S.Order),
              "it orders ranks " + join(Names, " or "), F.OrdersSource);
}

} // namespace

std::string FrameworkProfile::getCPAlgoName(CPAlgo A) const {
  // The names each framework gives Loom's algorithms: the K/V ring
  // (Megatron-Core --cp-comm-type p2p; MindSpeed megatron_cp_algo), the
  // all-to-all over heads (Megatron-Core a2a; MindSpeed ulysses_cp_algo;
  // DeepSpeed-Ulysses) and the two nested (Megatron-Core a2a+p2p;
  // MindSpeed hybrid_cp_algo).
  static const char *Ring[] = {"p2p", "megatron_cp_algo", "ring"};
  static const char *A2A[] = {"a2a", "ulysses_cp_algo", "ulysses"};
  static const char *Hybrid[] = {"a2a+p2p", "hybrid_cp_algo"};
  for (const char *N : A == CPAlgo::Ring  ? makeArrayRef(Ring)
                       : A == CPAlgo::A2A ? makeArrayRef(A2A)
                                          : makeArrayRef(Hybrid))
    if (is_contained(ContextParallel, N))
      return N;
  return "";
}

bool runsHybridCP(ArrayRef<const FrameworkProfile *> Frameworks) {
  return !Frameworks.empty() &&
         llvm::all_of(Frameworks, [](const FrameworkProfile *F) {
           return !F->AnyPlan && !F->getCPAlgoName(CPAlgo::Hybrid).empty();
         });
}

Error checkSpec(const FrameworkProfile &F, const PlanSpec &S,
                const FrameworkContext &Ctx) {
  if (F.AnyPlan)
    return Error::success();
  RuleError Fail(F);
  if (Error E = checkZero(F, S, Fail))
    return E;
  if (Error E = checkParallelism(F, S, Ctx, Fail))
    return E;
  if (Error E = checkOrder(F, S, Fail))
    return E;
  return checkOffload(F, S, Fail);
}

bool canRun(const FrameworkProfile &F, const ParallelPlan &P,
            const FrameworkContext &Ctx) {
  if (F.AnyPlan)
    return true;
  PlanSpec S = getFixedSpec(P);
  S.StageLayers.clear(); // No rule reads them.
  if (Error E = checkSpec(F, S, Ctx)) {
    consumeError(std::move(E));
    return false;
  }
  return true;
}

} // namespace loom
