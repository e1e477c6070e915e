//===- SearchReport.cpp - The search's text and JSON reports --------------===//
//
// What plan-parallel prints about a search: the chosen plan, --top,
// --explain and --format json, from SearchResult (lib/Planner/Search.cpp).
// planJSON is the one writer of a plan's JSON: the search report and
// manifest.json (lib/Shard/OutputDir.cpp) both take the plan block from
// writePlanJSON (ParallelPlan.h).
//
//===----------------------------------------------------------------------===//
#include "loom/Report/SearchReport.h"
#include "loom/Plan/IdleDevices.h"
#include "loom/Plan/Offload.h"
#include "loom/Planner/Goodput.h"
#include "loom/Report/CostReport.h"
#include "loom/Report/EmbeddingReport.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>

using namespace llvm;

namespace loom {

std::string describeIdleDevices(const ParallelPlan &P, uint64_t Devices,
                                int64_t Batch, const PlanCost *BestAll,
                                bool TriedAll, bool StaticBatch) {
  uint64_t Used = P.getNumDevices();
  if (Used >= Devices)
    return "";
  uint64_t TPPP = (uint64_t)P.TP * P.CP * P.PP, Max = Devices / TPPP;
  std::string S = (Twine(Devices - Used) + " of " + Twine(Devices) +
                   " devices idle (plan on " + Twine(Used) + "): ")
                      .str();
  std::vector<std::string> Why;
  if (Devices % TPPP)
    Why.push_back((Twine(P.CP > 1 ? "tp*cp*pp = " : "tp*pp = ") + Twine(TPPP) +
                   " does not divide " + Twine(Devices) + ", so at most " +
                   Twine(Max) + " replicas (" + Twine(Max * TPPP) + " devices)")
                      .str());
  if (P.DP < Max && StaticBatch)
    Why.push_back("dp=1 of the " + std::to_string(Max) +
                  " replicas that fit: the model's batch dim is static "
                  "(graphs for several micro-batches need a symbolic one)");
  else if (P.DP < Max)
    Why.push_back((Twine("the global batch ") + Twine(Batch) +
                   " divides into at most dp=" + Twine(P.DP) + " of the " +
                   Twine(Max) + " replicas that fit (dp*mb must divide it)")
                      .str());
  if (BestAll)
    Why.push_back((Twine("faster than the best plan on all ") + Twine(Devices) +
                   ", " + BestAll->Plan.str() + ": step " +
                   formatDuration(Seconds(BestAll->StepTimeS)))
                      .str());
  else if (TriedAll)
    Why.push_back(
        (Twine("no plan on all ") + Twine(Devices) + " devices fits").str());
  for (unsigned I = 0; I < Why.size(); ++I)
    S += (I ? "; " : "") + Why[I];
  return S;
}

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

static std::string fmtSeconds(double S) { return formatDuration(Seconds(S)); }

static std::string fmtPercent(double Fraction) {
  char Buf[32];
  snprintf(Buf, sizeof(Buf), "%.1f%%", Fraction * 100);
  return Buf;
}

static std::string getDegrees(const ParallelPlan &P) {
  std::string S =
      (Twine("tp=") + Twine(P.TP) + ",pp=" + Twine(P.PP) + ",dp=" + Twine(P.DP))
          .str();
  if (P.EP > 1)
    S += ",ep=" + std::to_string(P.EP);
  if (P.CP > 1)
    S += ",cp=" + std::to_string(P.CP);
  return S;
}

static std::string getStageList(const PlanCost &PC) {
  std::string S;
  for (unsigned I = 0; I < PC.Stages.size(); ++I)
    S += (I ? ":" : "") + std::to_string(PC.Stages[I].NumLayers);
  return S;
}

static void printSpaceLine(const SearchSpace &Sp, raw_ostream &OS) {
  OS << "tp <= " << Sp.TPLimit << " (" << Sp.TPLimitWhy << ")";
  // A tp not dividing the gcd replicates what it cannot split
  // (TPDivisibility); one dividing no split dim is not a tp degree.
  if (Sp.TPDiv.Divisor)
    OS << ", tp divides " << Sp.TPDiv.Divisor << " (" << Sp.TPDiv.Why
       << ") or replicates the layers it cannot split";
  OS << ", pp <= " << Sp.NumLayers << " (layers)";
  if (Sp.CPs.size() > 1)
    OS << ", cp in {" <<
        [&] {
          std::string L;
          for (unsigned C : Sp.CPs)
            L += (L.empty() ? "" : ",") + std::to_string(C);
          return L;
        }()
       << "} (" << Sp.CPWhy
       << "; ring: seq divisible by 2*cp, a2a: heads by tp*cp"
       << (Sp.HybridCP ? ", hybrid: both, cp_ulysses dividing cp and the "
                         "heads by tp*cp_ulysses"
                       : "")
       << (Sp.CPEmitOnly ? "; Loom's runtime, as -o emits: cp beside tp at ep=1"
                         : "")
       << (Sp.CPEmitOnly && Sp.ShardedTables
               ? " and not beside tp with sharded tables"
               : "")
       << ")";
  OS << ", dp*tp*" << (Sp.CPs.size() > 1 ? "cp*" : "") << "pp <= " << Sp.Devices
     << ", global batch " << Sp.Batch << " divisible by dp*mb";
  if (Sp.Experts.NumExperts)
    OS << ", ep divides dp and " << Sp.Experts.NumExperts
       << " (experts per MoE layer)";
}

void printChosenPlan(const SearchResult &R, raw_ostream &OS) {
  if (R.Top.empty()) {
    OS << "plan: none fits\n";
    return;
  }
  const PlanCost &PC = R.Top.front();
  OS << (R.RestPlain ? "plan (given, rest plain): " : "plan (searched): ")
     << PC.Plan.str() << "\n";
  std::string Idle =
      describeIdleDevices(PC.Plan, R.Space.Devices, R.Space.Batch,
                          R.BestAllDevices ? &*R.BestAllDevices : nullptr,
                          R.TriedAllDevices, R.Space.StaticBatch);
  if (!Idle.empty())
    OS << "idle: " << Idle << "\n";
  if (!R.VocabPadded.empty())
    OS << R.VocabPadded << "\n";
  auto Rep = R.Space.TPDiv.Replicated.find(PC.Plan.TP);
  if (Rep != R.Space.TPDiv.Replicated.end() && !Rep->second.empty())
    OS << "replicated over tp (tp=" << PC.Plan.TP
       << " does not divide their split dim; full compute and memory on "
          "every tp rank): "
       << describeUnsplitWeights(Rep->second) << "\n";
  if (R.FailedDevices) {
    uint64_t Total = R.Space.Devices + R.FailedDevices;
    OS << "failure: " << R.FailureWhat << " lost; re-planned on "
       << R.Space.Devices << " of " << Total << " devices: ";
    if (R.BeforeFailure)
      OS << format("%.0f", PC.Throughput) << " " << PC.getThroughputUnit()
         << " vs " << format("%.0f", R.BeforeFailure->Throughput) << " on all "
         << Total << " (" << R.BeforeFailure->Plan.str()
         << "): " << fmtPercent(PC.Throughput / R.BeforeFailure->Throughput)
         << " of the throughput kept\n";
    else
      OS << "no plan fits the intact cluster to compare with\n";
  }
  OS << "stages: " << getStageList(PC) << " layers ("
     << (R.StagesGiven                 ? "as --plan gave them"
         : PC.Plan.StageLayers.empty() ? "even split"
                                       : "balanced by the min-max partition")
     << (PC.Plan.VirtualStages > 1
             ? ", " + std::to_string(PC.Plan.VirtualStages) +
                   " virtual stages per device"
             : std::string())
     << ")\n";
  OS << "predicted: step " << fmtSeconds(PC.StepTimeS) << ", "
     << format("%.0f", PC.Throughput) << " " << PC.getThroughputUnit()
     << ", MFU " << format("%.3f", PC.MFU) << ", memory "
     << formatBytes(Bytes(PC.MaxMemoryBytes)) << " of "
     << formatBytes(Bytes(PC.HBMBytes)) << " per device\n";
  if (R.Reliab)
    OS << "goodput: " << describeGoodput(estimateGoodput(*R.Reliab, PC))
       << (R.RankedByGoodput ? "; plans ranked by goodput" : "") << "\n";
  if (R.Uncosted.Nodes)
    OS << "uncosted: " << describeUncosted(R.Uncosted)
       << " have no cost rule and are not in these numbers\n";
  StepBreakdown B = getStepBreakdown(PC);
  OS << "breakdown: compute " << fmtSeconds(B.ComputeS) << ", tp comm "
     << fmtSeconds(B.TPCommS)
     << (B.EPCommS > 0 ? ", ep comm " + fmtSeconds(B.EPCommS) : std::string())
     << (PC.Plan.CP > 1 ? ", cp comm " + fmtSeconds(B.CPCommS) : std::string())
     << ", bubble " << fmtSeconds(B.BubbleS) << ", dp comm "
     << fmtSeconds(B.DPCommS) << ", optimizer " << fmtSeconds(B.OptimizerS)
     << (PC.Plan.Offload.any() ? ", offload " + fmtSeconds(B.OffloadS)
                               : std::string())
     << " (dominant: " << getCostTermName(B.getDominant()) << ")\n";
  const SearchStats &St = R.Stats;
  OS << "search: " << St.Candidates << " candidates; " << St.Simulated
     << " simulated, " << St.StagesEvaluated << " costed without simulation ("
     << St.OverMemory << " over HBM), " << St.MemoryBoundPruned
     << " cut by the memory bound, " << St.TimeBoundPruned
     << " by the step-time bound";
  if (St.Dominated)
    OS << ", " << St.Dominated
       << " act:host placements skipped (no swap with one micro-batch in "
          "flight: they cost what act:hbm costs)";
  if (St.SameMemoryOver)
    OS << ", " << St.SameMemoryOver
       << " over HBM at the memory of another mesh order of the plan";
  OS << "\n";
  OS << "space: ";
  printSpaceLine(R.Space, OS);
  OS << "\n";
  const ExpertInfo &X = R.Space.Experts;
  if (X.NumExperts)
    OS << "experts: " << X.NumGroups << " MoE layer(s) (" << X.Patterns << "), "
       << X.NumExperts << " experts each (gcd) (e.g. '" << X.Parameter
       << "'); ep=" << PC.Plan.EP << ": " << X.NumExperts / PC.Plan.EP
       << " per device; load imbalance " << format("%.3g", PC.MoEImbalance)
       << (PC.Plan.EP > 1 && X.NumStacked
               ? " (the most loaded ep rank's routed tokens over the mean: "
                 "its expert compute and all-to-all)"
               : " (not applied: ep=1 or no routed experts)")
       << "\n";
  if (!X.NotSplit.empty())
    OS << "experts: " << X.NotSplit << "\n";
  if (!R.Space.EPNotSearched.empty())
    OS << "experts: " << R.Space.EPNotSearched << "\n";
  printEmbeddingCost(PC.Embeddings, OS);
}

void printTopPlans(const SearchResult &R, unsigned K, raw_ostream &OS) {
  unsigned N = std::min<size_t>(K, R.Top.size());
  OS << "top " << N << " plan" << (N == 1 ? "" : "s") << ":\n";
  OS << format("  rank step        %-12s MFU    memory     dominant   %s"
               "plan\n",
               N ? R.Top[0].getThroughputUnit().str().c_str() : "tokens/s",
               R.Reliab ? "goodput " : "");
  for (unsigned I = 0; I < N; ++I) {
    const PlanCost &PC = R.Top[I];
    std::string Goodput;
    if (R.Reliab)
      Goodput =
          formatv("{0,-7:f3} ", estimateGoodput(*R.Reliab, PC).Fraction).str();
    OS << format(
        "  %-4u %-11s %-12.0f %-6.3f %-10s %-10s %s%s\n", I + 1,
        fmtSeconds(PC.StepTimeS).c_str(), PC.Throughput, PC.MFU,
        formatBytes(Bytes(PC.MaxMemoryBytes)).c_str(),
        getCostTermName(getStepBreakdown(PC).getDominant()).str().c_str(),
        Goodput.c_str(), PC.Plan.str().c_str());
  }
}

/// "bubble 900.00 ms vs 2.10 s, tp comm ...": terms by how much they
/// differ, largest first.
static std::string compareTerms(const PlanCost &A, const PlanCost &B) {
  StepBreakdown BA = getStepBreakdown(A), BB = getStepBreakdown(B);
  std::vector<CostTerm> Terms = {CostTerm::Compute, CostTerm::TPComm,
                                 CostTerm::EPComm,  CostTerm::Bubble,
                                 CostTerm::DPComm,  CostTerm::Optimizer,
                                 CostTerm::Offload};
  std::stable_sort(Terms.begin(), Terms.end(), [&](CostTerm X, CostTerm Y) {
    return std::fabs(BA.get(X) - BB.get(X)) > std::fabs(BA.get(Y) - BB.get(Y));
  });
  std::vector<std::string> Parts;
  for (CostTerm T : Terms)
    if (BA.get(T) != 0 || BB.get(T) != 0)
      Parts.push_back((getCostTermName(T) + " " + fmtSeconds(BA.get(T)) +
                       " vs " + fmtSeconds(BB.get(T)))
                          .str());
  Parts.push_back("memory " + formatBytes(Bytes(A.MaxMemoryBytes)) + " vs " +
                  formatBytes(Bytes(B.MaxMemoryBytes)));
  return join(Parts, ", ");
}

/// Why \p A ranks before \p B, in words.
static std::string compareTo(const PlanCost &A, const PlanCost &B) {
  if (A.StepTimeS != B.StepTimeS)
    return (Twine("by ") + fmtPercent(B.StepTimeS / A.StepTimeS - 1) +
            ": step " + fmtSeconds(A.StepTimeS) + " vs " +
            fmtSeconds(B.StepTimeS) + "; " + compareTerms(A, B))
        .str();
  if (A.Plan.Grad != B.Plan.Grad)
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): fp32 gradients, the numerically safer")
        .str();
  if (A.Plan.Order != B.Plan.Order)
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): the axis order " + getAxisOrderName(A.Plan.Order) +
            ", nearer the default, vs " + getAxisOrderName(B.Plan.Order))
        .str();
  if (A.Plan.ZeroStage != B.Plan.ZeroStage)
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): the lower ZeRO stage, " + Twine(A.Plan.ZeroStage) + " vs " +
            Twine(B.Plan.ZeroStage))
        .str();
  if (getOffloadDistance(A.Plan.Offload) != getOffloadDistance(B.Plan.Offload))
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): less offloaded, offload=" + A.Plan.Offload.str() + " vs " +
            B.Plan.Offload.str())
        .str();
  if (A.Plan.TPOverlap != B.Plan.TPOverlap ||
      A.Plan.DPOverlap != B.Plan.DPOverlap ||
      A.Plan.PPOverlap != B.Plan.PPOverlap)
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): the overlaps nearer the defaults (tp off, dp and pp on)")
        .str();
  if (A.MaxMemoryBytes != B.MaxMemoryBytes)
    return (Twine("on a tie in step time (") + fmtSeconds(A.StepTimeS) +
            "): less memory, " + formatBytes(Bytes(A.MaxMemoryBytes)) + " vs " +
            formatBytes(Bytes(B.MaxMemoryBytes)))
        .str();
  return "on a tie in step time and memory: by the plan string";
}

/// What the HBM that offload frees lets plan \p W do that \p NoOff, the
/// best plan without offload, does not: the choices that differ.
static std::string describeOffloadGain(const PlanCost &W,
                                       const PlanCost &NoOff) {
  const ParallelPlan &A = W.Plan, &B = NoOff.Plan;
  std::vector<std::string> Parts;
  auto Differ = [&](StringRef Name, const Twine &X, const Twine &Y) {
    std::string SX = X.str(), SY = Y.str();
    if (SX != SY)
      Parts.push_back((Name + " " + SX + " (not " + SY + ")").str());
  };
  Differ("micro-batch", Twine(A.MicroBatchSize), Twine(B.MicroBatchSize));
  Differ("pp", Twine(A.PP), Twine(B.PP));
  Differ("tp", Twine(A.TP), Twine(B.TP));
  Differ("recompute", getRecomputeName(A.RC), getRecomputeName(B.RC));
  Differ("zero", Twine(A.ZeroStage), Twine(B.ZeroStage));
  Differ("vpp", Twine(A.VirtualStages), Twine(B.VirtualStages));
  if (Parts.empty())
    return "the same degrees";
  std::string S;
  for (size_t I = 0; I < Parts.size(); ++I)
    S += (I ? ", " : "") + Parts[I];
  return S;
}

/// What the winner's offload costs or buys, the transfer that binds, and
/// the memory per tier.
static void printOffloadExplanation(const SearchResult &R, raw_ostream &OS) {
  const PlanCost &W = R.Top.front();
  std::string Off = W.Plan.Offload.str();
  if (!R.NoOffloadSearched)
    ; // not searched (SearchOptions::FindNoOffload): nothing to compare
  else if (R.OffloadNeeded)
    OS << "explain: offload=" << Off << " is needed: no plan "
       << (R.Constrained ? "under the --plan constraints " : "")
       << "fits with all training state in HBM\n";
  else if (R.NoOffload && W.StepTimeS < R.NoOffload->StepTimeS)
    // Offload as a speed choice: what the HBM it frees buys.
    OS << "explain: offload=" << Off << " saves "
       << fmtSeconds(R.NoOffload->StepTimeS - W.StepTimeS)
       << " per step against the best plan without offload, "
       << R.NoOffload->Plan.str() << " (" << fmtSeconds(W.StepTimeS) << " vs "
       << fmtSeconds(R.NoOffload->StepTimeS) << "): it frees "
       << formatBytes(Bytes(std::max(0.0, W.MaxHostBytes + W.MaxSSDBytes)))
       << " of state per device for " << describeOffloadGain(W, *R.NoOffload)
       << "\n";
  else if (R.NoOffload)
    OS << "explain: offload=" << Off << " costs "
       << fmtSeconds(W.StepTimeS - R.NoOffload->StepTimeS)
       << " per step against the best plan without offload, "
       << R.NoOffload->Plan.str() << " (" << fmtSeconds(R.NoOffload->StepTimeS)
       << " vs " << fmtSeconds(W.StepTimeS) << ")\n";
  else
    OS << "explain: offload=" << Off << ": no plan without offload fits "
       << "under the --plan constraints\n";
  // The stage whose offload adds the most: its largest term binds.
  unsigned Worst = 0;
  double WorstS = -1;
  double M = W.Plan.NumMicroBatches;
  for (unsigned S = 0; S < W.Stages.size(); ++S) {
    const StageCost &SC = W.Stages[S];
    double Added = M * SC.Offload.ExposedPerMicroBatchS + SC.OptimizerS;
    if (Added > WorstS) {
      WorstS = Added;
      Worst = S;
    }
  }
  const StageCost &SC = W.Stages[Worst];
  SmallVector<OffloadTerm, 8> Terms =
      getOffloadTerms(SC.OffloadIn, W.Plan.Offload);
  if (!Terms.empty()) {
    const OffloadTerm &T = Terms.front();
    OS << "explain: binding transfer: " << T.Name << " on stage " << Worst
       << ", " << formatBytes(Bytes(T.Bytes)) << " per step in "
       << fmtSeconds(T.Seconds) << "; offload exposes "
       << fmtSeconds(M * SC.Offload.ExposedPerMicroBatchS) << " of streaming ("
       << fmtSeconds(SC.Offload.StreamS) << " per micro-batch against "
       << fmtSeconds(SC.ForwardS + SC.BackwardS)
       << " of compute) and an optimizer phase of " << fmtSeconds(SC.OptimizerS)
       << "\n";
  }
  OS << "explain: memory per device at the fullest stage: hbm "
     << formatBytes(Bytes(W.MaxMemoryBytes)) << " of "
     << formatBytes(Bytes(W.HBMBytes)) << ", host "
     << formatBytes(Bytes(W.MaxHostBytes)) << " of "
     << formatBytes(Bytes(W.HostCapacity)) << ", ssd "
     << formatBytes(Bytes(W.MaxSSDBytes)) << " of "
     << formatBytes(Bytes(W.SSDCapacity)) << "\n";
}

/// What the winner's context parallelism buys against the best plan
/// without it (searched again at cp=1).
static void printCPExplanation(const SearchResult &R, raw_ostream &OS) {
  const PlanCost &W = R.Top.front();
  if (W.Plan.CP <= 1 || !R.NoCPSearched)
    return;
  OS << "explain: cp=" << W.Plan.CP << " (" << getCPAlgoName(W.Plan.CPA)
     << (W.Plan.CPA == CPAlgo::Hybrid
             ? " of a2a over " + std::to_string(W.Plan.CPUlysses) +
                   " and the ring over " +
                   std::to_string(W.Plan.getCPRingSize())
             : std::string())
     << ": " << fmtSeconds(getStepBreakdown(W).CPCommS)
     << " of its attention traffic exposed per step) ";
  if (!R.NoCP)
    OS << "is needed: no plan without cp fits"
       << (R.Constrained ? " under the --plan constraints" : "") << "\n";
  else
    OS << "beats the best plan without cp, " << R.NoCP->Plan.str() << ", "
       << compareTo(W, *R.NoCP) << "\n";
}

void printExplanation(const SearchResult &R, raw_ostream &OS) {
  if (R.Top.empty())
    return;
  const PlanCost &W = R.Top.front();
  printCPExplanation(R, OS);
  if (R.OtherDegrees)
    OS << "explain: " << getDegrees(W.Plan) << " beats "
       << getDegrees(R.OtherDegrees->Plan)
       << " (the best with other degrees: " << R.OtherDegrees->Plan.str()
       << ") " << compareTo(W, *R.OtherDegrees) << "\n";
  else if (!(R.Constrained && R.Unconstrained))
    OS << "explain: " << getDegrees(W.Plan)
       << " is the only (tp, pp) with a plan that fits\n";
  // A --plan is measured against the best plan without its constraints.
  if (R.Constrained && R.Unconstrained) {
    const PlanCost &U = *R.Unconstrained;
    if (U.Plan.str() == W.Plan.str())
      OS << "explain: the --plan request's best, " << W.Plan.str()
         << ", is also the best plan without the --plan constraints\n";
    else
      OS << "explain: the best plan without the --plan constraints, "
         << U.Plan.str() << ", beats the --plan request's best, "
         << W.Plan.str() << ", " << compareTo(U, W) << "\n";
  }
  // The next plan overall, unless a line below already compares with it.
  auto IsNext = [&](const Optional<PlanCost> &PC) {
    return PC && R.Top.size() > 1 && R.Top[1].Plan.str() == PC->Plan.str();
  };
  bool SameAsOther =
      IsNext(R.OtherDegrees) || IsNext(R.DefaultOrder) || IsNext(R.FP32Grad) ||
      any_of(R.OverlapFlips,
             [&](const PlanCost &F) { return IsNext(Optional<PlanCost>(F)); });
  if (R.Top.size() > 1 && !SameAsOther)
    OS << "explain: next overall, " << R.Top[1].Plan.str() << ", loses "
       << compareTo(W, R.Top[1]) << "\n";
  if (R.DefaultOrder)
    OS << "explain: axis order " << getAxisOrderName(W.Plan.Order) << " ("
       << R.WinnerGroups << ") beats the default "
       << getAxisOrderName(R.DefaultOrder->Plan.Order) << " ("
       << R.DefaultOrderGroups << ") on the same plan "
       << compareTo(W, *R.DefaultOrder) << "\n";
  for (const PlanCost &F : R.OverlapFlips) {
    // Which overlap this flip changed, and the winner's setting of it.
    const ParallelPlan &A = W.Plan, &B = F.Plan;
    StringRef Key = A.TPOverlap != B.TPOverlap   ? "tp_overlap"
                    : A.DPOverlap != B.DPOverlap ? "dp_overlap"
                                                 : "pp_overlap";
    bool On = Key == "tp_overlap"   ? A.TPOverlap
              : Key == "dp_overlap" ? A.DPOverlap
                                    : A.PPOverlap;
    OS << "explain: " << Key << "=" << (On ? "on" : "off")
       << (On ? " (communication beside compute, which it holds a share of)"
              : " (communication waited for)")
       << ": the same plan with " << Key << "=" << (On ? "off" : "on") << " ";
    if (isBetterPlan(W, F))
      OS << "loses " << compareTo(W, F) << "\n";
    else
      OS << "wins " << compareTo(F, W) << " (--plan fixed it)\n";
  }
  if (R.FP32Grad) {
    OS << "explain: grad=bf16 halves the DP gradient traffic and buffer; "
       << "the same plan with fp32 gradients ";
    if (!R.FP32Grad->FitsMemory)
      OS << "needs " << formatBytes(Bytes(R.FP32Grad->MaxMemoryBytes)) << " > "
         << formatBytes(Bytes(R.FP32Grad->HBMBytes)) << " HBM\n";
    else
      OS << "loses " << compareTo(W, *R.FP32Grad) << "\n";
  }
  if (Optional<int64_t> B =
          suggestGlobalBatch(W.Plan, R.Space.Devices, R.Space.Batch)) {
    uint64_t TPPP = (uint64_t)W.Plan.TP * W.Plan.CP * W.Plan.PP,
             Max = R.Space.Devices / TPPP;
    OS << "explain: a global batch of " << *B
       << " (a multiple of dp*mb = " << Max * W.Plan.MicroBatchSize
       << ") would let " << Max << " replicas of tp=" << W.Plan.TP
       << ",pp=" << W.Plan.PP
       << (W.Plan.CP > 1 ? ",cp=" + std::to_string(W.Plan.CP) : "") << " use "
       << Max * TPPP << " of the " << R.Space.Devices << " devices instead of "
       << W.Plan.getNumDevices() << " (batch " << R.Space.Batch << ")\n";
  }
  if (W.Plan.Offload.any())
    printOffloadExplanation(R, OS);
  explainEmbeddingCost(W.Embeddings, OS);
  if (R.Precision)
    OS << "explain: precision " << R.Precision->describe() << " ["
       << R.Precision->Why << "]\n";
  OS << "explain: memory " << formatBytes(Bytes(W.MaxMemoryBytes)) << " of "
     << formatBytes(Bytes(W.HBMBytes)) << " HBM at the fullest stage; the "
     << "space: ";
  printSpaceLine(R.Space, OS);
  OS << "\n";
}

/// The goodput of \p PC under \p Rel (keys fraction, goodput, cluster_mtbf_s
/// (null when no failure rate is given), checkpoint_s, interval_s).
static json::Object goodputJSON(const Reliability &Rel, const PlanCost &PC) {
  GoodputEstimate G = estimateGoodput(Rel, PC);
  json::Value MTBF = nullptr;
  if (std::isfinite(G.ClusterMTBFS))
    MTBF = G.ClusterMTBFS;
  return json::Object{{"fraction", G.Fraction},
                      {"goodput", G.Goodput},
                      {"cluster_mtbf_s", std::move(MTBF)},
                      {"checkpoint_s", G.CheckpointS},
                      {"interval_s", G.IntervalS},
                      {"method", "Young/Daly"}};
}

static json::Object planJSON(const PlanCost &PC,
                             const Reliability *Rel = nullptr) {
  const ParallelPlan &P = PC.Plan;
  std::vector<unsigned> Stages;
  for (const StageCost &SC : PC.Stages)
    Stages.push_back(SC.NumLayers);
  StepBreakdown B = getStepBreakdown(PC);
  json::Object O{
      {"plan", getPlanJSON(P, Stages)},
      {"plan_string", P.str()},
      {"step_time_s", PC.StepTimeS},
      {PC.getThroughputKey(), PC.Throughput},
      {"mfu", PC.MFU},
      {"max_memory_bytes", PC.MaxMemoryBytes},
      {"hbm_bytes", PC.HBMBytes},
      {"breakdown",
       json::Object{{"compute_s", B.ComputeS},
                    {"tp_comm_s", B.TPCommS},
                    {"ep_comm_s", B.EPCommS},
                    {"bubble_s", B.BubbleS},
                    {"dp_comm_s", B.DPCommS},
                    {"optimizer_s", B.OptimizerS},
                    {"dominant", getCostTermName(B.getDominant())}}}};
  if (P.CP > 1)
    (*O.getObject("breakdown"))["cp_comm_s"] = B.CPCommS;
  if (Rel)
    O["goodput"] = goodputJSON(*Rel, PC);
  if (!PC.Embeddings.empty())
    O["embedding_tables"] = embeddingCostToJSON(PC.Embeddings);
  return O;
}

void printSearchJSON(const SearchResult &R, unsigned K, bool Explain,
                     raw_ostream &OS) {
  json::Object Root;
  if (!R.Top.empty())
    Root = planJSON(R.Top.front(), R.Reliab ? &*R.Reliab : nullptr);
  Root["fits"] = !R.Top.empty();
  if (R.Precision)
    Root["precision"] = R.Precision->toJSON();
  Root["devices"] = (int64_t)R.Space.Devices;
  if (!R.Top.empty()) {
    Root["devices_used"] = (int64_t)R.Top.front().Plan.getNumDevices();
    Root["idle"] =
        describeIdleDevices(R.Top.front().Plan, R.Space.Devices, R.Space.Batch,
                            R.BestAllDevices ? &*R.BestAllDevices : nullptr,
                            R.TriedAllDevices, R.Space.StaticBatch);
  }
  if (R.Reliab)
    Root["objective"] = R.RankedByGoodput ? "goodput" : "step";
  Root["stages_from"] = R.StagesGiven                            ? "--plan"
                        : R.Top.empty()                          ? ""
                        : R.Top.front().Plan.StageLayers.empty() ? "even split"
                                                                 : "balanced";
  const SearchStats &St = R.Stats;
  Root["search"] =
      json::Object{{"candidates", (int64_t)St.Candidates},
                   {"simulated", (int64_t)St.Simulated},
                   {"costed_without_simulation", (int64_t)St.StagesEvaluated},
                   {"over_hbm", (int64_t)St.OverMemory},
                   {"memory_bound_pruned", (int64_t)St.MemoryBoundPruned},
                   {"time_bound_pruned", (int64_t)St.TimeBoundPruned},
                   {"partitions", (int64_t)St.Partitions}};
  if (St.SameMemoryOver)
    Root["search"].getAsObject()->try_emplace("same_memory_over_hbm",
                                              (int64_t)St.SameMemoryOver);
  std::string Space;
  raw_string_ostream SOS(Space);
  printSpaceLine(R.Space, SOS);
  Root["space"] = SOS.str();
  Root["uncosted"] = uncostedJSON(R.Uncosted);
  const ExpertInfo &X = R.Space.Experts;
  Root["experts"] = json::Object{{"moe_layers", (int64_t)X.NumGroups},
                                 {"stacked_layers", (int64_t)X.NumStacked},
                                 {"patterns", X.Patterns},
                                 {"experts_per_layer", (int64_t)X.NumExperts},
                                 {"example_parameter", X.Parameter},
                                 {"not_split_by_ep", X.NotSplit},
                                 {"ep_not_searched", R.Space.EPNotSearched}};
  json::Array Top;
  for (unsigned I = 0; I < std::min<size_t>(K, R.Top.size()); ++I) {
    json::Object O = planJSON(R.Top[I], R.Reliab ? &*R.Reliab : nullptr);
    O["rank"] = (int64_t)I + 1;
    O["memory_bytes"] = R.Top[I].MaxMemoryBytes;
    Top.push_back(std::move(O));
  }
  Root["top"] = std::move(Top);
  if (Explain) {
    std::string Text;
    raw_string_ostream EOS(Text);
    printExplanation(R, EOS);
    SmallVector<StringRef, 4> Lines;
    StringRef(EOS.str()).split(Lines, '\n', -1, false);
    json::Array Sentences;
    for (StringRef L : Lines) {
      L.consume_front("explain: ");
      Sentences.push_back(L.str());
    }
    Root["explain"] = std::move(Sentences);
  }
  OS << formatv("{0:2}", json::Value(std::move(Root))) << "\n";
}

} // namespace loom
