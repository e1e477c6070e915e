//===- StagePartition.cpp - Stage boundaries balanced on compute ----------===//
//
// partitionStages: the contiguous split of the layers into pipeline stages
// with the least bottleneck (an exact dynamic program, Search.h), and what
// it is judged by (getLayerWork, getBottleneck). The search's balanced
// stage layouts (SearchEnumeration.cpp) and the tests use it; it needs
// nothing of the Searcher, so it stands alone.
//
//===----------------------------------------------------------------------===//
#include "loom/Planner/Search.h"
#include "llvm/ADT/ArrayRef.h"
#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

using namespace llvm;

namespace loom {

//===----------------------------------------------------------------------===//
// Stage boundaries
//===----------------------------------------------------------------------===//

namespace {
struct StageCosts {
  std::vector<double> Prefix;
  double First, Last;
  unsigned L;
  StageCosts(ArrayRef<double> C, double First, double Last)
      : Prefix(C.size() + 1, 0.0), First(First), Last(Last), L(C.size()) {
    for (unsigned I = 0; I < C.size(); ++I)
      Prefix[I + 1] = Prefix[I] + C[I];
  }
  /// Layers [I, J) as one stage.
  double operator()(unsigned I, unsigned J) const {
    return Prefix[J] - Prefix[I] + (I == 0 ? First : 0.0) +
           (J == L ? Last : 0.0);
  }
};
} // namespace

double getBottleneck(ArrayRef<double> LayerCost, ArrayRef<unsigned> Counts,
                     double FirstExtra, double LastExtra) {
  StageCosts Cost(LayerCost, FirstExtra, LastExtra);
  double Max = 0;
  unsigned I = 0;
  for (unsigned C : Counts) {
    Max = std::max(Max, Cost(I, I + C));
    I += C;
  }
  return Max;
}

double getLayerWork(const PlanEvaluator::LayerTime &T, Recompute RC,
                    bool Train) {
  if (!Train)
    return T.ForwardS;
  double Extra = RC == Recompute::Full        ? T.ForwardS
                 : RC == Recompute::Selective ? T.AttentionForwardS
                                              : 0.0;
  return T.ForwardS + T.BackwardS + Extra;
}

std::vector<unsigned> partitionStages(ArrayRef<double> LayerCost,
                                      unsigned NumStages, double FirstExtra,
                                      double LastExtra) {
  unsigned L = LayerCost.size(), P = NumStages;
  assert(P >= 1 && P <= L && "need 1 <= stages <= layers");
  StageCosts Cost(LayerCost, FirstExtra, LastExtra);
  // Best(S, I): the least bottleneck of layers [I, L) in stages S..P-1;
  // defined for S <= I <= L - (P - S). One block, rows of L + 1.
  std::vector<double> Table(P * (L + 1), 0.0);
  auto Best = [&](unsigned S) {
    return MutableArrayRef<double>(Table).slice(S * (L + 1), L + 1);
  };
  for (unsigned I = P - 1; I < L; ++I)
    Best(P - 1)[I] = Cost(I, L);
  for (unsigned S = P - 1; S-- > 0;) {
    ArrayRef<double> Next = Best(S + 1);
    for (unsigned I = S; I + (P - S) <= L; ++I) {
      // Stage S takes [I, K): Cost(I, K) grows with K, Next[K] does not;
      // the optimum is at the first K where Cost >= Next, or just before.
      unsigned Lo = I + 1, Hi = L - (P - S - 1);
      unsigned A = Lo, B = Hi + 1;
      while (A < B) {
        unsigned Mid = A + (B - A) / 2;
        if (Cost(I, Mid) >= Next[Mid])
          B = Mid;
        else
          A = Mid + 1;
      }
      double V = INFINITY;
      if (A <= Hi)
        V = std::max(Cost(I, A), Next[A]);
      if (A > Lo)
        V = std::min(V, std::max(Cost(I, A - 1), Next[A - 1]));
      Best(S)[I] = V;
    }
  }
  // The lexicographically smallest counts reaching the optimum: each stage
  // ends at the first K from which the rest can still meet it.
  double Target = Best(0)[0];
  std::vector<unsigned> Counts;
  unsigned I = 0;
  for (unsigned S = 0; S < P; ++S) {
    unsigned K = L;
    if (S + 1 < P)
      for (K = I + 1; K < L - (P - S - 2); ++K)
        if (Cost(I, K) <= Target && Best(S + 1)[K] <= Target)
          break;
    Counts.push_back(K - I);
    I = K;
  }
  return Counts;
}

} // namespace loom
