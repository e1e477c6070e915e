//===- Goodput.cpp - Expected goodput under failures and checkpoints ------===//

#include "loom/Planner/Goodput.h"
#include "loom/Planner/PlanCost.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace llvm;
using namespace loom;

GoodputEstimate loom::estimateGoodput(const Reliability &R, uint64_t Devices,
                                      double StateBytes, double Throughput) {
  GoodputEstimate G;
  // FIT: failures per 1e9 hours.
  double LambdaPerS = double(Devices) * R.getFITPerDevice() / 1e9 / 3600.0;
  G.CheckpointS = StateBytes / R.CheckpointBandwidth.value();
  if (!(LambdaPerS > 0)) {
    G.ClusterMTBFS = std::numeric_limits<double>::infinity();
    G.Fraction = 1;
  } else {
    G.ClusterMTBFS = 1 / LambdaPerS;
    double M = G.ClusterMTBFS, D = G.CheckpointS;
    G.IntervalS = std::sqrt(2 * D * M);
    double Lost = (G.IntervalS / 2 + R.RestartTime.value()) / M;
    double F = 1 - Lost - (G.IntervalS > 0 ? D / G.IntervalS : 0);
    G.Fraction = std::min(1.0, std::max(0.0, F));
  }
  G.Goodput = Throughput * G.Fraction;
  return G;
}

GoodputEstimate loom::estimateGoodput(const Reliability &R,
                                      const PlanCost &PC) {
  double State = 0;
  for (const StageCost &S : PC.Stages)
    State = std::max(State, S.Memory.Weights + S.Memory.Gradients +
                                S.Memory.OptimizerStates);
  return estimateGoodput(R, PC.Plan.getNumDevices(), State, PC.Throughput);
}

/// Seconds as "41.0 s", "30.3 min" or "11.2 h".
static std::string fmtLong(double S) {
  if (S >= 3600)
    return formatv("{0:f1} h", S / 3600).str();
  if (S >= 60)
    return formatv("{0:f1} min", S / 60).str();
  return formatv("{0:f1} s", S).str();
}

std::string loom::describeGoodput(const GoodputEstimate &G) {
  std::string Out;
  raw_string_ostream OS(Out);
  OS << format("%.3f", G.Fraction) << " of throughput (cluster MTBF ";
  if (std::isinf(G.ClusterMTBFS)) {
    OS << "infinite: no failure rate given)";
    return OS.str();
  }
  OS << fmtLong(G.ClusterMTBFS) << ", checkpoint " << fmtLong(G.CheckpointS)
     << " every " << fmtLong(G.IntervalS) << ", Young/Daly)";
  return OS.str();
}
