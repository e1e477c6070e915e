//===- CandidateOrder.h - The search's candidates, visited lazily -*- C++
//-*-===//
//
// The search (Search.cpp) visits its candidates in increasing step bound,
// ties in enumeration order. With offload searched (issue 17) every plan
// comes in up to 35 placements, and at a training batch the 10T MoE on 512
// NPUs has 18 million candidates: materialising and sorting them took most
// of the search's time and 4 GB. The placements of one plan (its base)
// differ only in the bounds' tail and memory terms, and those read only
// the degrees, the ZeRO stage and the gradient precision; so:
//  - the placements' tail and memory bounds are computed once per such
//    key (PlacementTable), split into those whose memory bound fits HBM,
//    in increasing tail bound, and those that do not;
//  - a base's candidates then come in increasing step bound (its pipeline
//    bound plus each tail), and CandidateQueue merges the bases' streams
//    into the global order (a heap of one entry per base), so only the
//    candidates visited before the bound passes the threshold are ever
//    built.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_CANDIDATEORDER_H
#define LOOM_PLANNER_CANDIDATEORDER_H

#include <algorithm>
#include <cstdint>
#include <vector>

namespace loom {

/// A candidate's step bound from its pipeline part and its tail (the
/// optimizer phase), with the margin that keeps rounding on the safe side.
/// One expression for every caller, so equal inputs give equal bounds.
inline double combineStepBound(double Pipeline, double Tail) {
  return (Pipeline + Tail) * (1 - 1e-9);
}

/// The offload placements of the plans sharing one (degrees, ZeRO stage,
/// gradient precision): each one's tail and memory bounds.
struct PlacementTable {
  struct Entry {
    /// Index into the searched placements (their enumeration order).
    unsigned Off;
    double Tail, Memory;
  };
  /// The placements whose memory bound fits HBM, then those that do not
  /// (only when pruning), each part in increasing (Tail, Off) when
  /// pruning, else in Off order. Fit counts the first.
  std::vector<Entry> Entries;
  unsigned Fit = 0;

  /// Builds the table from the placements' bounds, \p Tails[i] and
  /// \p Memories[i] for placement i; \p Prune: sort by tail and split off
  /// the placements over \p HBM (else every placement, in order).
  static PlacementTable build(const std::vector<double> &Tails,
                              const std::vector<double> &Memories, double HBM,
                              bool Prune);
};

/// Candidates of many bases in increasing (step bound, enumeration index):
/// each base pushes its next candidate when the previous one is popped.
class CandidateQueue {
public:
  struct Item {
    double Bound;
    /// Enumeration index: base * placements + placement.
    uint64_t Index;
    unsigned Base;
    /// Position in the base's PlacementTable.
    unsigned Pos;
  };

  void push(const Item &I) {
    Heap.push_back(I);
    std::push_heap(Heap.begin(), Heap.end(), later);
  }
  bool empty() const { return Heap.empty(); }
  const Item &top() const { return Heap.front(); }
  Item pop() {
    std::pop_heap(Heap.begin(), Heap.end(), later);
    Item I = Heap.back();
    Heap.pop_back();
    return I;
  }
  void reserve(size_t N) { Heap.reserve(N); }
  /// Pushes every item of \p Items at once (a heap built in linear time;
  /// the pops come in the same order as after pushing them one by one:
  /// later() is a total order, the indices being distinct).
  void assign(std::vector<Item> Items) {
    Heap = std::move(Items);
    std::make_heap(Heap.begin(), Heap.end(), later);
  }

  /// Pops the first item and pushes \p I, in one sift down the heap (the
  /// search visits the first item, then pushes its base's next one).
  void replaceTop(const Item &I) {
    size_t N = Heap.size(), Pos = 0;
    for (;;) {
      size_t C = 2 * Pos + 1;
      if (C >= N)
        break;
      if (C + 1 < N && later(Heap[C], Heap[C + 1]))
        ++C;
      if (!later(I, Heap[C]))
        break;
      Heap[Pos] = Heap[C];
      Pos = C;
    }
    Heap[Pos] = I;
  }

  /// Whether \p A comes after \p B in the visiting order.
  static bool later(const Item &A, const Item &B) {
    if (A.Bound != B.Bound)
      return A.Bound > B.Bound;
    return A.Index > B.Index;
  }

private:
  std::vector<Item> Heap;
};

} // namespace loom

#endif // LOOM_PLANNER_CANDIDATEORDER_H
