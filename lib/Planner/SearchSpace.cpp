//===- SearchSpace.cpp - What the model lets the search split -------------===//
//
// The parts of the search space read from the model and the hardware
// before any candidate exists: the tp degrees the sharding rules can split
// (computeTPDivisibility), the experts ep can split (summarizeExperts), and
// the space's structural part as the reports and the Z3 model see it
// (describeSearchSpace). Public (Search.h) and independent of the Searcher
// (SearchInternal.h), so apart from it.
//
//===----------------------------------------------------------------------===//
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/StageSplit.h"
#include "loom/Planner/Search.h"
#include "loom/Shard/ExpertRules.h"
#include "loom/Shard/Rules.h"
#include "loom/Support/Divisors.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

using namespace llvm;

namespace loom {

//===----------------------------------------------------------------------===//
// TP divisibility
//===----------------------------------------------------------------------===//

bool TPDivisibility::allows(uint64_t TP) const {
  return dividesOneOf(Sizes, TP);
}

std::string describeUnsplitWeights(ArrayRef<UnsplitWeight> W, unsigned Max) {
  std::string S;
  for (unsigned I = 0; I < W.size() && I < Max; ++I)
    S += (I ? ", '" : "'") + W[I].Weight + "' (dim " +
         std::to_string(W[I].Dim) + " of " + std::to_string(W[I].Size) +
         ", read by '" + W[I].Reader + "')";
  if (W.size() > Max)
    S += " and " + std::to_string(W.size() - Max) + " more";
  return S;
}

TPDivisibility computeTPDivisibility(const Graph &G, int64_t Opset,
                                     ArrayRef<uint64_t> Degrees) {
  // The dims the sharding rules split (Rules.h), not a second analysis.
  SplitDimSizes Dims = collectSplitDims(G, Opset);
  TPDivisibility R;
  R.NumSplitDims = Dims.size();
  uint64_t GCD = 0;
  for (const auto &KV : Dims) {
    GCD = std::gcd(GCD, KV.first);
    R.Sizes.push_back(KV.first);
  }
  R.Divisor = GCD;
  if (!GCD)
    return R;
  for (uint64_t T : Degrees)
    if (T > 1 && GCD % T && R.allows(T) && !R.Replicated.count(T))
      R.Replicated[T] = collectUnsplitWeights(G, Opset, T);
  // The fewest sizes, smallest first, whose gcd is the divisor.
  std::vector<std::string> Why;
  uint64_t Run = 0;
  for (const auto &KV : Dims) {
    if (Run && std::gcd(Run, KV.first) == Run)
      continue;
    Run = std::gcd(Run, KV.first);
    Why.push_back(std::to_string(KV.first) + " = " + KV.second);
    if (Run == GCD)
      break;
  }
  R.Why = Why.size() == 1 ? Why.front() : "gcd of " + join(Why, ", ");
  return R;
}

ExpertInfo summarizeExperts(ArrayRef<ExpertGroup> Groups) {
  ExpertInfo E;
  std::vector<std::pair<std::string, unsigned>> Patterns;
  for (const ExpertGroup &EG : Groups) {
    std::string P = getExpertPattern(EG);
    auto It = find_if(Patterns, [&](const auto &KV) { return KV.first == P; });
    if (It == Patterns.end())
      Patterns.push_back({P, 1});
    else
      ++It->second;
    E.NumExperts = std::gcd(E.NumExperts, EG.NumExperts);
    ++E.NumGroups;
    E.NumStacked += EG.isStacked();
    if (E.Parameter.empty()) {
      if (EG.isStacked())
        E.Parameter = EG.StackedParams.front()->getName().str();
      else if (!EG.BranchParams.empty() && !EG.BranchParams[0].empty())
        E.Parameter = EG.BranchParams[0].front()->getName().str();
    }
  }
  for (const auto &KV : Patterns)
    E.Patterns +=
        (E.Patterns.empty() ? "" : ", ") + KV.first +
        (Patterns.size() > 1 ? " (" + std::to_string(KV.second) + ")" : "");
  return E;
}

//===----------------------------------------------------------------------===//
// The space
//===----------------------------------------------------------------------===//

/// Layers between the leading prologue and trailing epilogue layers: what
/// the stage split (loom/Plan/StageSplit.h) splits evenly.
static unsigned getNumMiddleLayers(ArrayRef<LayerInfo> Layers) {
  LayerEnds E = getLayerEnds(Layers);
  return E.NumLayers - E.Prologue - E.Epilogue;
}

SearchSpace describeSearchSpace(const Graph &G, ArrayRef<LayerInfo> Layers,
                                const HardwareModel &HW,
                                const EvaluatorOptions &EO, uint64_t Devices) {
  SearchSpace S;
  S.Devices = Devices ? Devices : HW.getNumDevices();
  S.Batch = std::max<int64_t>(1, EO.Batch);
  S.NumLayers = std::max<size_t>(1, Layers.size());
  S.NumBlocks = Layers.empty() ? 1 : getNumMiddleLayers(Layers);
  S.Train = EO.Train;
  S.TPLimit = 1;
  for (const TopologyLevel &L : HW.Topology) {
    if (!L.AllowTP)
      break;
    S.TPLimit *= L.Size;
    S.TPLimitWhy = L.Name + " domain";
  }
  if (S.TPLimitWhy.empty())
    S.TPLimitWhy = "no topology level allows TP";
  // cp: divisors of the devices that leave every cp rank at least
  // MinCPTokens of the sequence (none without a bound sequence).
  if (EO.Seq > 0) {
    for (uint64_t C : getDivisors(S.Devices))
      if (C > 1 && C <= (uint64_t)EO.Seq / MinCPTokens && EO.Seq % C == 0)
        S.CPs.push_back(C);
    S.CPWhy = "seq " + std::to_string(EO.Seq) +
              " / cp >= " + std::to_string(MinCPTokens) + " tokens per rank";
  } else {
    S.CPWhy = "no sequence dim bound";
  }
  // The degrees the space holds: divisors of the devices (full plans) and
  // of the tp limit (plans leaving devices idle).
  std::vector<uint64_t> Degrees = getDivisors(S.Devices);
  for (uint64_t T : getDivisors(std::max<uint64_t>(1, S.TPLimit)))
    Degrees.push_back(T);
  llvm::erase_if(Degrees, [&](uint64_t T) { return T > S.TPLimit; });
  S.TPDiv = computeTPDivisibility(G, EO.Opset, Degrees);
  std::vector<ExpertGroup> Groups = findExperts(G, Layers);
  S.Experts = summarizeExperts(Groups);
  // The ep rules the sharder runs are the judge of what ep can split: a
  // writing they refuse at every degree (MoE layers with different expert
  // counts) is not searched at ep > 1, so that no plan is ranked that -o
  // then rejects.
  if (S.Experts.NumExperts > 1) {
    unsigned Smallest = 2;
    while (S.Experts.NumExperts % Smallest)
      ++Smallest;
    Expected<ExpertAxisRules> R = applyExpertRules(G, Groups, Smallest);
    if (!R)
      S.EPNotSearched = "ep > 1 is not searched: the ep rules refuse it (" +
                        toString(R.takeError()) + ")";
  }
  std::vector<const Node *> Indexed = findIndexRoutedExperts(G);
  if (!Indexed.empty())
    S.Experts.NotSplit =
        (describeIndexRoutedExperts(Indexed) +
         " (NonZero over the routing mask, e.g. '" +
         Indexed.front()->getName() +
         "'), planned at the expected tokens per expert; ep does not split "
         "them (each expert's token count is data: the rows NonZero picks), "
         "so they stay whole on every ep rank, and without other experts "
         "ep > 1 is not searched")
            .str();
  return S;
}

} // namespace loom
