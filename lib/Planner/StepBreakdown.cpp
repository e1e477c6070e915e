//===- StepBreakdown.cpp - Cost terms of a step; the order of plans -------===//
//
// What a plan's step time is spent on (getStepBreakdown, by CostTerm: one
// table names each term and its StepBreakdown field) and the total order
// plans are ranked in (isBetterPlan). The search ranks by them and the
// reports (lib/Report) read them for any costed plan, so they are apart
// from the search's machinery.
//
//===----------------------------------------------------------------------===//
#include "loom/Plan/Offload.h"
#include "loom/Plan/ParallelPlan.h"
#include "loom/Planner/Search.h"
#include <cassert>

using namespace llvm;

namespace loom {

//===----------------------------------------------------------------------===//
// Cost terms and order
//===----------------------------------------------------------------------===//

namespace {
/// Each cost term's name and its StepBreakdown field, in CostTerm order.
struct CostTermInfo {
  CostTerm Term;
  const char *Name;
  double StepBreakdown::*Field;
};
constexpr CostTermInfo CostTerms[] = {
    {CostTerm::Compute, "compute", &StepBreakdown::ComputeS},
    {CostTerm::TPComm, "tp comm", &StepBreakdown::TPCommS},
    {CostTerm::EPComm, "ep comm", &StepBreakdown::EPCommS},
    {CostTerm::CPComm, "cp comm", &StepBreakdown::CPCommS},
    {CostTerm::Bubble, "bubble", &StepBreakdown::BubbleS},
    {CostTerm::DPComm, "dp comm", &StepBreakdown::DPCommS},
    {CostTerm::Optimizer, "optimizer", &StepBreakdown::OptimizerS},
    {CostTerm::Offload, "offload", &StepBreakdown::OffloadS},
};
const CostTermInfo &getCostTermInfo(CostTerm T) {
  const CostTermInfo &I = CostTerms[static_cast<unsigned>(T)];
  assert(I.Term == T && "CostTerms is in CostTerm order");
  return I;
}
} // namespace

StringRef getCostTermName(CostTerm T) { return getCostTermInfo(T).Name; }

double StepBreakdown::get(CostTerm T) const {
  return this->*getCostTermInfo(T).Field;
}

CostTerm StepBreakdown::getDominant() const {
  CostTerm Best = CostTerm::Compute;
  for (const CostTermInfo &I : CostTerms)
    if (get(I.Term) > get(Best))
      Best = I.Term;
  return Best;
}

StepBreakdown getStepBreakdown(const PlanCost &PC) {
  StepBreakdown B;
  if (PC.Stages.empty())
    return B;
  // Tail: the stage whose end plus DP sync and optimizer ends the step.
  unsigned Busiest = 0, Tail = 0, Last = 0;
  auto EndOf = [&](unsigned S) {
    const StageCost &A = PC.Stages[S];
    return A.PipelineEndS + A.DPExposedS + A.OptimizerS;
  };
  for (unsigned S = 1; S < PC.Stages.size(); ++S) {
    if (PC.Stages[S].BubbleS < PC.Stages[Busiest].BubbleS)
      Busiest = S;
    if (EndOf(S) > EndOf(Tail))
      Tail = S;
    if (PC.Stages[S].PipelineEndS > PC.Stages[Last].PipelineEndS)
      Last = S;
  }
  // A stage that ends the pipeline before the last one and still ends the
  // step (its tail is longer) is the one device the step is spent on.
  double Early = PC.Stages[Last].PipelineEndS - PC.Stages[Tail].PipelineEndS;
  if (Early > 0)
    Busiest = Tail;
  const StageCost &S = PC.Stages[Busiest];
  B.ComputeS = S.ComputeS;
  // tp overlap's hidden collectives and held compute (TPOverlapS).
  B.TPCommS = PC.Plan.NumMicroBatches * (S.TPCommS + S.TPOverlapS);
  B.EPCommS = PC.Plan.NumMicroBatches * S.EPCommS;
  B.CPCommS = PC.Plan.NumMicroBatches * S.CPCommS;
  B.BubbleS = S.BubbleS - (Early > 0 ? Early : 0.0);
  B.DPCommS = PC.Stages[Tail].DPExposedS;
  B.OptimizerS = PC.Stages[Tail].OptimizerS;
  B.OffloadS = PC.Plan.NumMicroBatches * S.Offload.ExposedPerMicroBatchS;
  return B;
}

bool isBetterPlan(const PlanCost &A, const PlanCost &B) {
  if (A.StepTimeS != B.StepTimeS)
    return A.StepTimeS < B.StepTimeS;
  if (A.Plan.Grad != B.Plan.Grad)
    return A.Plan.Grad == GradPrecision::FP32;
  if (A.Plan.Order != B.Plan.Order)
    return getAxisOrderIndex(A.Plan.Order) < getAxisOrderIndex(B.Plan.Order);
  if (A.Plan.ZeroStage != B.Plan.ZeroStage)
    return A.Plan.ZeroStage < B.Plan.ZeroStage;
  // On a tie, less offloaded: fewer kinds off HBM, nearer tiers.
  if (getOffloadDistance(A.Plan.Offload) != getOffloadDistance(B.Plan.Offload))
    return getOffloadDistance(A.Plan.Offload) <
           getOffloadDistance(B.Plan.Offload);
  // On a tie, the fewer overlaps changed from the defaults.
  auto Changed = [](const ParallelPlan &P) {
    return (int)P.TPOverlap + (int)!P.DPOverlap + (int)!P.PPOverlap;
  };
  if (Changed(A.Plan) != Changed(B.Plan))
    return Changed(A.Plan) < Changed(B.Plan);
  if (A.MaxMemoryBytes != B.MaxMemoryBytes)
    return A.MaxMemoryBytes < B.MaxMemoryBytes;
  return A.Plan.str() < B.Plan.str();
}

} // namespace loom
