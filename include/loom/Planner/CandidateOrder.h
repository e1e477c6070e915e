//===- CandidateOrder.h - The search's candidates, visited lazily -*- C++
//-*-===//
//
// The search (SearchRanking.cpp) visits its candidates in increasing step
// bound, ties in enumeration order. With offload searched (issue 17) every plan
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
/// each base pushes its next candidate when the previous one is popped
/// (its own come in increasing (tail, placement), PlacementTable).
///
/// A 4-ary heap: at a training batch the 10T MoE's heap holds half a
/// million bases, far beyond the caches, and each visit sifts one item
/// from the top. Four children per node halve the levels a sift walks
/// (each a cache miss near the bottom) for a few more comparisons on
/// lines already loaded. The order of the pops is the same as any heap's:
/// later() is a total order on the items queued together.
class CandidateQueue {
public:
  /// 16 bytes: four siblings fill one cache line when aligned.
  struct Item {
    double Bound;
    unsigned Base;
    /// Position in the base's PlacementTable.
    unsigned Pos;
  };

  void push(const Item &I) {
    Heap.push_back(I);
    siftUp(Heap.size() - 1);
  }
  bool empty() const { return Heap.empty(); }
  const Item &top() const { return Heap.front(); }
  Item pop() {
    Item I = Heap.front();
    Item Back = Heap.back();
    Heap.pop_back();
    if (!Heap.empty())
      siftDown(0, Back);
    return I;
  }
  void reserve(size_t N) { Heap.reserve(N); }
  /// Pushes every item of \p Items at once (a heap built in linear time).
  void assign(std::vector<Item> Items) {
    Heap = std::move(Items);
    for (size_t P = Heap.size() / Arity + 1; P-- > 0;)
      if (P < Heap.size())
        siftDown(P, Heap[P]);
  }

  /// Pops the first item and pushes \p I, in one sift down the heap (the
  /// search visits the first item, then pushes its base's next one).
  void replaceTop(const Item &I) { siftDown(0, I); }

  /// Whether \p A comes after \p B in the visiting order: by bound, then
  /// by enumeration index (base * placements + placement). A base has at
  /// most one item queued, so two items queued together differ in base,
  /// which orders them as the index does.
  static bool later(const Item &A, const Item &B) {
    if (A.Bound != B.Bound)
      return A.Bound > B.Bound;
    return A.Base > B.Base;
  }

private:
  static constexpr size_t Arity = 4;

  /// Puts \p I at \p Pos or below, moving earlier children up.
  void siftDown(size_t Pos, Item I) {
    size_t N = Heap.size();
    for (;;) {
      size_t C = Arity * Pos + 1;
      if (C >= N)
        break;
      size_t End = std::min(C + Arity, N), Min = C;
      for (size_t K = C + 1; K < End; ++K)
        if (later(Heap[Min], Heap[K]))
          Min = K;
      if (!later(I, Heap[Min]))
        break;
      Heap[Pos] = Heap[Min];
      Pos = Min;
    }
    Heap[Pos] = I;
  }

  void siftUp(size_t Pos) {
    Item I = Heap[Pos];
    while (Pos > 0) {
      size_t Parent = (Pos - 1) / Arity;
      if (!later(Heap[Parent], I))
        break;
      Heap[Pos] = Heap[Parent];
      Pos = Parent;
    }
    Heap[Pos] = I;
  }

  std::vector<Item> Heap;
};

} // namespace loom

#endif // LOOM_PLANNER_CANDIDATEORDER_H
