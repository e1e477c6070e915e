//===- CandidateOrder.cpp - The search's candidates, visited lazily -------===//
#include "loom/Planner/CandidateOrder.h"

#include <algorithm>
#include <cassert>

namespace loom {

PlacementTable PlacementTable::build(const std::vector<double> &Tails,
                                     const std::vector<double> &Memories,
                                     double HBM, bool Prune) {
  assert(Tails.size() == Memories.size() && "one tail and memory each");
  PlacementTable T;
  std::vector<Entry> Over;
  for (unsigned I = 0; I < Tails.size(); ++I) {
    Entry E{I, Tails[I], Memories[I]};
    if (Prune && Memories[I] > HBM)
      Over.push_back(E);
    else
      T.Entries.push_back(E);
  }
  auto ByTail = [](const Entry &A, const Entry &B) { return A.Tail < B.Tail; };
  if (Prune) {
    std::stable_sort(T.Entries.begin(), T.Entries.end(), ByTail);
    std::stable_sort(Over.begin(), Over.end(), ByTail);
  }
  T.Fit = T.Entries.size();
  T.Entries.insert(T.Entries.end(), Over.begin(), Over.end());
  return T;
}

} // namespace loom
