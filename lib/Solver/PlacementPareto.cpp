//===- PlacementPareto.cpp - Exact elimination of the coupled core --------===//
//
// The last step of the placement solver (Placement.cpp): the items whose
// capacities couple them, eliminated exactly with Pareto lists of (cost,
// bytes per resource) instead of costs.
//
//===----------------------------------------------------------------------===//
#include "PlacementReducer.h"
#include "llvm/ADT/DenseMap.h"
#include <algorithm>
#include <cmath>
#include <queue>

using namespace llvm;

namespace loom {
namespace placement {

namespace {

/// A (cost, load per tracked resource) point of a Pareto list, with where
/// it came from.
struct ParetoPoint {
  double Cost;
  SmallVector<double, 2> Load;
  uint32_t Prov; ///< Index into the step's provenance, or ~0u.
};
using ParetoList = std::vector<ParetoPoint>;

/// Drops points over a capacity and points another point dominates (no
/// more cost and no more load anywhere); sorts by cost.
void prune(ParetoList &L, ArrayRef<double> Cap) {
  llvm::erase_if(L, [&](const ParetoPoint &P) {
    for (unsigned R = 0; R < Cap.size(); ++R)
      if (P.Load[R] > Cap[R])
        return true;
    return false;
  });
  std::stable_sort(L.begin(), L.end(),
                   [](const ParetoPoint &A, const ParetoPoint &B) {
                     if (A.Cost != B.Cost)
                       return A.Cost < B.Cost;
                     return A.Load < B.Load;
                   });
  ParetoList Kept;
  for (ParetoPoint &P : L) {
    bool Dominated = false;
    if (Cap.size() == 1) {
      Dominated = !Kept.empty() && Kept.back().Load[0] <= P.Load[0];
    } else {
      for (const ParetoPoint &Q : Kept) {
        bool All = true;
        for (unsigned R = 0; R < Cap.size() && All; ++R)
          All = Q.Load[R] <= P.Load[R];
        if (All) {
          Dominated = true;
          break;
        }
      }
    }
    if (!Dominated)
      Kept.push_back(std::move(P));
  }
  L = std::move(Kept);
}

} // namespace

/// The state of one Pareto elimination over a core (see solveCoreByPareto):
/// the variables, the factors as Pareto lists, and the elimination steps
/// with the provenance that leads back to every variable's value.
class Reducer::ParetoElimination {
public:
  ParetoElimination(const Reducer &Red, ArrayRef<unsigned> Core)
      : Red(Red), Core(Core), PFOf(Core.size() + Red.CM.Open.size()) {}

  /// Sets \p Pos for the core; None if it outgrew its limits, false if
  /// infeasible.
  Optional<bool> solve(std::vector<unsigned> &Pos) {
    createVariables();
    convertFactors();
    addOpenPairFactors();
    if (!eliminateAll())
      return None;
    return chooseCheapest(Pos);
  }

private:
  struct PFactor {
    SmallVector<unsigned, 4> Scope; ///< Sorted variables.
    std::vector<ParetoList> Lists;
    int Step = -1; ///< The elimination that made it; -1: initial.
    bool Alive = true;
  };
  /// An elimination step: the variable, its scope, the factors it consumed,
  /// and per produced point (Prov) the variable's value and the point taken
  /// from each consumed factor.
  struct PStep {
    unsigned Var;
    SmallVector<unsigned, 4> Scope;
    SmallVector<unsigned, 8> Consumed;
    std::vector<uint8_t> Value;
    std::vector<uint32_t> Taken; ///< Consumed.size() per point.
  };
  /// Partial provenance of a running sum: (parent, point taken).
  using Trail = std::vector<std::pair<uint32_t, uint32_t>>;

  const Reducer &Red;
  ArrayRef<unsigned> Core;
  /// Variables: core items, then one "held" variable per open pair.
  std::vector<unsigned> VarItem;
  DenseMap<unsigned, unsigned> VarOf;
  std::vector<unsigned> DomSize;
  /// Tracked resources: those with an open pair.
  SmallVector<unsigned, 2> Tracked;
  DenseMap<unsigned, unsigned> Slot;
  SmallVector<double, 2> Cap;
  SmallVector<double, 2> Zero;
  std::vector<PFactor> PF;
  std::vector<std::vector<unsigned>> PFOf;
  std::vector<PStep> PSteps;
  std::vector<bool> Gone;
  std::vector<unsigned> Assign;
  size_t Points = 0;

  void createVariables() {
    VarItem.assign(Core.begin(), Core.end());
    for (unsigned V = 0; V < Core.size(); ++V)
      VarOf[Core[V]] = V;
    for (unsigned I : Core)
      DomSize.push_back(Red.Dom[I].size());
    for (const OpenPair &P : Red.CM.Open)
      if (Slot.try_emplace(P.Resource, Tracked.size()).second)
        Tracked.push_back(P.Resource);
    for (unsigned Res : Tracked)
      Cap.push_back(Red.R.Resources[Res].Capacity - Red.CM.ConstantLoad[Res]);
    Zero.assign(Tracked.size(), 0.0);
  }

  void addFactor(PFactor F) {
    for (unsigned V : F.Scope)
      PFOf[V].push_back(PF.size());
    PF.push_back(std::move(F));
  }

  /// The reducer's live factors, each cost a one-point list.
  void convertFactors() {
    for (const Factor &F : Red.Factors) {
      if (!F.Alive)
        continue;
      PFactor P;
      for (unsigned I : F.Scope)
        P.Scope.push_back(VarOf.lookup(I));
      // Core order follows item order, so the scope stays sorted.
      for (double C : F.T)
        P.Lists.push_back({{C, Zero, ~0u}});
      addFactor(std::move(P));
    }
  }

  /// A "held" variable per open pair, costing the storage's bytes when
  /// held, and per reader a factor that forbids "not held" on a class the
  /// resource holds.
  void addOpenPairFactors() {
    for (unsigned OP = 0; OP < Red.CM.Open.size(); ++OP) {
      const OpenPair &Pr = Red.CM.Open[OP];
      unsigned H = VarItem.size();
      VarItem.push_back(~0u);
      DomSize.push_back(2);
      SmallVector<double, 2> Held = Zero;
      Held[Slot.lookup(Pr.Resource)] = Red.R.Storages[Pr.Storage].Bytes;
      addFactor({{H}, {{{0.0, Zero, ~0u}}, {{0.0, Held, ~0u}}}});
      for (unsigned Rd : Pr.Readers) {
        unsigned V = VarOf.lookup(Rd);
        PFactor P;
        P.Scope = {V, H}; // V < H: items come first.
        for (unsigned D = 0; D < Red.Dom[Rd].size(); ++D) {
          bool Holds = Red.R.Resources[Pr.Resource].Holds[Red.Dom[Rd][D]];
          P.Lists.push_back(Holds ? ParetoList()
                                  : ParetoList{{0.0, Zero, ~0u}});
          P.Lists.push_back({{0.0, Zero, ~0u}});
        }
        addFactor(std::move(P));
      }
    }
  }

  /// The live factors that mention \p V (drops dead ones from the list).
  const std::vector<unsigned> &liveFactors(unsigned V) {
    std::vector<unsigned> &L = PFOf[V];
    llvm::erase_if(L, [&](unsigned F) { return !PF[F].Alive; });
    return L;
  }

  /// The variables \p V shares a live factor with, sorted, and the size of
  /// their joint domain.
  SmallVector<unsigned, 8> scopeOf(unsigned V, double &Size) {
    SmallVector<unsigned, 8> S;
    for (unsigned F : liveFactors(V))
      for (unsigned W : PF[F].Scope)
        if (W != V)
          S.push_back(W);
    llvm::sort(S);
    S.erase(std::unique(S.begin(), S.end()), S.end());
    Size = 1;
    for (unsigned W : S)
      Size *= DomSize[W];
    return S;
  }

  size_t indexIn(const PFactor &F, ArrayRef<unsigned> Assign) const {
    size_t Idx = 0;
    for (unsigned W : F.Scope)
      Idx = Idx * DomSize[W] + Assign[W];
    return Idx;
  }

  /// Acc becomes the pruned Minkowski sum of Acc and \p L; each new
  /// point's Prov indexes \p T, which records the points it came from.
  void addList(ParetoList &Acc, const ParetoList &L, Trail &T) const {
    ParetoList Sum;
    for (const ParetoPoint &A : Acc)
      for (uint32_t J = 0; J < L.size(); ++J) {
        ParetoPoint P{A.Cost + L[J].Cost, A.Load, (uint32_t)T.size()};
        for (unsigned K = 0; K < P.Load.size(); ++K)
          P.Load[K] += L[J].Load[K];
        T.push_back({A.Prov, J});
        Sum.push_back(std::move(P));
      }
    prune(Sum, Cap);
    Acc = std::move(Sum);
  }

  /// Eliminates the variables smallest joint domain first; false if a
  /// table or a list outgrew its limits.
  bool eliminateAll() {
    unsigned NV = VarItem.size();
    Gone.assign(NV, false);
    using Entry = std::pair<double, unsigned>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> Q;
    for (unsigned V = 0; V < NV; ++V) {
      double Size;
      scopeOf(V, Size);
      Q.push({Size, V});
    }
    Assign.assign(NV, 0);
    while (!Q.empty()) {
      auto [Key, V] = Q.top();
      Q.pop();
      if (Gone[V])
        continue;
      double Size;
      SmallVector<unsigned, 8> S = scopeOf(V, Size);
      if (Size != Key) {
        Q.push({Size, V});
        continue;
      }
      if (Size > Red.Opts.MaxEliminationTable || !eliminate(V, S, Size))
        return false;
      for (unsigned W : S) {
        double SW;
        scopeOf(W, SW);
        Q.push({SW, W});
      }
    }
    return true;
  }

  /// Replaces the factors of \p V by one over its scope \p S whose lists
  /// are, per assignment of S, the union over V's values of the sums of
  /// the consumed factors' lists; false if it outgrew the limits.
  bool eliminate(unsigned V, ArrayRef<unsigned> S, double Size) {
    PStep St{V, SmallVector<unsigned, 4>(S.begin(), S.end()), {}, {}, {}};
    for (unsigned F : liveFactors(V))
      St.Consumed.push_back(F);
    PFactor Out;
    Out.Scope = St.Scope;
    Out.Step = PSteps.size();
    Out.Lists.resize((size_t)Size);
    std::fill(Assign.begin(), Assign.end(), 0);
    for (size_t Idx = 0; Idx < (size_t)Size; ++Idx) {
      Optional<ParetoList> Result = eliminateAt(V, St);
      if (!Result)
        return false;
      Points += Result->size();
      if (Points > 20 * Red.Opts.MaxParetoPoints)
        return false;
      Out.Lists[Idx] = std::move(*Result);
      for (unsigned P = S.size(); P-- > 0;) {
        if (++Assign[S[P]] < DomSize[S[P]])
          break;
        Assign[S[P]] = 0;
      }
    }
    for (unsigned F : St.Consumed)
      PF[F].Alive = false;
    Gone[V] = true;
    PSteps.push_back(std::move(St));
    addFactor(std::move(Out));
    return true;
  }

  /// The list of \p V's new factor at the current assignment of its
  /// scope, its points' provenance recorded in \p St; None if a list
  /// outgrew MaxParetoPoints.
  Optional<ParetoList> eliminateAt(unsigned V, PStep &St) {
    unsigned NC = St.Consumed.size();
    ParetoList Result;
    Trail T;
    std::vector<std::pair<uint8_t, uint32_t>> Ends; // (value, trail end)
    for (unsigned Val = 0; Val < DomSize[V]; ++Val) {
      Assign[V] = Val;
      ParetoList Acc{{0.0, Zero, ~0u}};
      for (unsigned C = 0; C < NC && !Acc.empty(); ++C) {
        const PFactor &F = PF[St.Consumed[C]];
        addList(Acc, F.Lists[indexIn(F, Assign)], T);
        if (Acc.size() > Red.Opts.MaxParetoPoints)
          return None;
      }
      for (ParetoPoint &P : Acc) {
        Ends.push_back({(uint8_t)Val, P.Prov});
        P.Prov = Ends.size() - 1;
        Result.push_back(std::move(P));
      }
    }
    prune(Result, Cap);
    // Unroll each surviving point's trail into the step's records.
    for (ParetoPoint &P : Result) {
      auto [Val, End] = Ends[P.Prov];
      P.Prov = St.Value.size();
      St.Value.push_back(Val);
      size_t Base = St.Taken.size();
      St.Taken.resize(Base + NC);
      uint32_t At = End;
      for (unsigned C = NC; C-- > 0;) {
        St.Taken[Base + C] = T[At].second;
        At = T[At].first;
      }
    }
    return Result;
  }

  /// Only scope-free factors remain: takes the cheapest combination and
  /// follows its provenance back to every variable's value.
  Optional<bool> chooseCheapest(std::vector<unsigned> &Pos) {
    std::vector<unsigned> Roots;
    for (unsigned F = 0; F < PF.size(); ++F)
      if (PF[F].Alive)
        Roots.push_back(F);
    ParetoList Acc{{0.0, Zero, ~0u}};
    Trail T;
    for (unsigned F : Roots) {
      addList(Acc, PF[F].Lists[0], T);
      if (Acc.size() > Red.Opts.MaxParetoPoints)
        return None;
    }
    if (Acc.empty())
      return false;
    // Top-down: (factor, point) pairs whose variables are all assigned.
    std::vector<std::pair<unsigned, uint32_t>> Work;
    uint32_t At = Acc.front().Prov;
    for (unsigned C = Roots.size(); C-- > 0;) {
      Work.push_back({Roots[C], T[At].second});
      At = T[At].first;
    }
    while (!Work.empty()) {
      auto [F, Pt] = Work.back();
      Work.pop_back();
      const PFactor &Fa = PF[F];
      if (Fa.Step < 0)
        continue;
      const PStep &St = PSteps[Fa.Step];
      uint32_t Rec = Fa.Lists[indexIn(Fa, Assign)][Pt].Prov;
      Assign[St.Var] = St.Value[Rec];
      for (unsigned C = 0; C < St.Consumed.size(); ++C)
        Work.push_back(
            {St.Consumed[C], St.Taken[Rec * St.Consumed.size() + C]});
    }
    for (unsigned V = 0; V < Core.size(); ++V)
      Pos[Core[V]] = Assign[V];
    return true;
  }
};

// Exact elimination over the core with capacities: a cost becomes a Pareto
// list of (cost, bytes per resource) -- the Nemhauser-Ullmann knapsack
// algorithm (1969) run inside bucket elimination. An open (storage,
// resource) pair gets a 0/1 item "held" whose value 1 costs the storage's
// bytes; every coupled reader on a class the resource holds forbids held =
// 0. Eliminating an item sums (Minkowski) the lists of its factors for
// each of its values, unites them and drops dominated points and points
// over a capacity: a dropped point cannot be part of an optimum, because
// loads only grow and the point that dominates it completes every way it
// does at no more cost and load. When nothing is left, the cheapest point
// of the remaining (scope-free) lists is the optimum; provenance records
// lead back to every item's class. Frontier sizes are exponential in the
// worst case but polynomial in expectation for random weights (Beier and
// Vocking 2004); beyond MaxParetoPoints the core goes to Z3.
Optional<bool> Reducer::solveCoreByPareto(ArrayRef<unsigned> Core,
                                          std::vector<unsigned> &Pos) {
  return ParetoElimination(*this, Core).solve(Pos);
}

} // namespace placement
} // namespace loom
