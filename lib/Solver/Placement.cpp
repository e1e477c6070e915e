//===- Placement.cpp - Exact device-class placement ----------------------===//
//
// The algorithm, and why its answer is optimal:
//
// 1. Capacity bookkeeping. For every (storage, resource) pair: if some
//    reader has only candidates whose data the resource holds, the storage
//    is held whatever the placement: its bytes are a constant load. If no
//    reader can make the resource hold it, it never counts. Otherwise the
//    pair is "open" and the readers that could make it held are tied to
//    the capacity ("coupled"), unless the capacity would hold every open
//    storage anyway (it cannot bind). Only coupled items appear in a
//    capacity constraint.
//
// 2. Fixing. An item with one candidate is fixed; it drops out of every
//    cost term it appears in. (Substitution: exact.)
//
// 3. Variable elimination (min-sum bucket elimination; Dechter 1999). The
//    costs are factors: one per item (its time per candidate), one per
//    pair of items joined by edges (their summed transfer matrices). An
//    item that is not coupled appears in no constraint, only in the
//    factors that mention it, so replacing those factors by
//      f'(neighbours) = min over the item's candidates of their sum
//    leaves a problem over the other items with the same optimum, and the
//    argmin table recovers the item's optimal class from its neighbours'
//    (back-substitution in reverse order). Items go greedily by the size of
//    the table they would create (min-degree order), up to
//    MaxEliminationTable entries. Chains and trees vanish with tables of
//    one neighbour, the fork/join blocks of a transformer layer with tables
//    of two or three; what remains is the "core": coupled items (tables
//    that may go to SSD) and joints too wide to eliminate.
//
// 4. The core is solved exactly by Z3's MaxSAT engine (z3::optimize with
//    soft constraints, maxres): one Boolean per (item, candidate), exactly
//    one per item; a factor's entry f(a, b, ...) above the factor's
//    minimum as the soft clause "not (x_a and x_b and ...)" with that
//    weight; for every open (storage, resource) pair a Boolean "held"
//    implied by every reader candidate the resource holds, and per
//    resource sum(bytes * held) <= capacity - constant load. Weights are
//    scaled to integers (total ~1e15, below the 53 bits a double holds
//    exactly, so rounding stays under 1e-15 of the objective); bytes are
//    rounded up and capacities down, so whatever Z3 accepts fits.
//
// Problem size: the pass reduces repeated layers to one representative, so
// a 4,000-node graph is a few hundred items; elimination costs about
// items x table size x candidates, and the core is typically empty or a
// handful of coupled items. Tests check the result against brute force,
// with and without elimination.
//
//===----------------------------------------------------------------------===//
#include "PlacementReducer.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <z3++.h>

using namespace llvm;

namespace loom {

using namespace placement;

namespace {

Error makeError(const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), Msg);
}

Error validate(const PlacementRequest &R) {
  size_t K = R.Classes.size();
  if (K == 0 || K > 64)
    return makeError("placement request: " + Twine(K) +
                     " classes, expected 1 to 64");
  for (size_t I = 0; I < R.Items.size(); ++I) {
    const PlacementItem &It = R.Items[I];
    if (!std::isfinite(It.Multiplicity) || It.Multiplicity < 0)
      return makeError("placement request: item '" + It.Name +
                       "': multiplicity must be finite and >= 0");
    std::vector<bool> Seen(K);
    for (const PlacementOption &O : It.Options) {
      if (O.Class >= K)
        return makeError("placement request: item '" + It.Name +
                         "': class index " + Twine(O.Class) + " out of range");
      if (Seen[O.Class])
        return makeError("placement request: item '" + It.Name + "': class '" +
                         R.Classes[O.Class] + "' listed twice");
      Seen[O.Class] = true;
      if (!std::isfinite(O.Seconds) || O.Seconds < 0)
        return makeError("placement request: item '" + It.Name + "' on '" +
                         R.Classes[O.Class] +
                         "': time must be finite and >= 0");
    }
  }
  for (size_t E = 0; E < R.Edges.size(); ++E) {
    const PlacementEdge &Ed = R.Edges[E];
    if (Ed.From >= R.Items.size() || Ed.To >= R.Items.size())
      return makeError("placement request: edge " + Twine(E) +
                       ": item index out of range");
    if (Ed.Cost.size() != K * K)
      return makeError("placement request: edge " + Twine(E) + ": cost has " +
                       Twine(Ed.Cost.size()) + " entries, expected " +
                       Twine(K * K));
    if (!std::isfinite(Ed.Multiplicity) || Ed.Multiplicity < 0)
      return makeError("placement request: edge " + Twine(E) +
                       ": multiplicity must be finite and >= 0");
    for (double C : Ed.Cost)
      if (!std::isfinite(C) || C < 0)
        return makeError("placement request: edge " + Twine(E) +
                         ": costs must be finite and >= 0");
  }
  for (const PlacementStorage &S : R.Storages) {
    if (!std::isfinite(S.Bytes) || S.Bytes < 0)
      return makeError("placement request: storage '" + S.Name +
                       "': bytes must be finite and >= 0");
    for (unsigned Rd : S.Readers)
      if (Rd >= R.Items.size())
        return makeError("placement request: storage '" + S.Name +
                         "': reader index out of range");
  }
  for (const PlacementResource &Res : R.Resources) {
    if (Res.Holds.size() != K)
      return makeError("placement request: resource '" + Res.Name +
                       "': holds has " + Twine(Res.Holds.size()) +
                       " entries, expected " + Twine(K));
    if (std::isnan(Res.Capacity))
      return makeError("placement request: resource '" + Res.Name +
                       "': capacity is NaN");
  }
  return Error::success();
}

CapacityModel analyzeCapacity(const PlacementRequest &R) {
  CapacityModel CM;
  CM.ConstantLoad.assign(R.Resources.size(), 0);
  CM.AlwaysHeld.resize(R.Resources.size());
  CM.Coupled.assign(R.Items.size(), false);
  for (unsigned S = 0; S < R.Storages.size(); ++S) {
    const PlacementStorage &St = R.Storages[S];
    SmallVector<unsigned, 4> Readers(St.Readers.begin(), St.Readers.end());
    llvm::sort(Readers);
    Readers.erase(std::unique(Readers.begin(), Readers.end()), Readers.end());
    for (unsigned Res = 0; Res < R.Resources.size(); ++Res) {
      const PlacementResource &RS = R.Resources[Res];
      bool Always = false;
      OpenPair P{S, Res, {}};
      for (unsigned Rd : Readers) {
        unsigned Holding = 0;
        for (const PlacementOption &O : R.Items[Rd].Options)
          Holding += RS.Holds[O.Class];
        if (Holding && Holding == R.Items[Rd].Options.size())
          Always = true;
        else if (Holding)
          P.Readers.push_back(Rd);
      }
      if (Always) {
        CM.ConstantLoad[Res] += St.Bytes;
        CM.AlwaysHeld[Res].push_back(S);
      } else if (!P.Readers.empty() && St.Bytes > 0 &&
                 std::isfinite(RS.Capacity)) {
        CM.Open.push_back(std::move(P));
      }
    }
  }
  // A capacity that holds even if every open storage lands in it never
  // binds: drop its pairs, so they tie no item (and, in Pareto
  // elimination, add no dimension to the frontier).
  std::vector<double> Worst = CM.ConstantLoad;
  for (const OpenPair &P : CM.Open)
    Worst[P.Resource] += R.Storages[P.Storage].Bytes;
  llvm::erase_if(CM.Open, [&](const OpenPair &P) {
    return Worst[P.Resource] <= R.Resources[P.Resource].Capacity;
  });
  for (const OpenPair &P : CM.Open)
    for (unsigned Rd : P.Readers)
      CM.Coupled[Rd] = true;
  return CM;
}

std::string storageList(const PlacementRequest &R,
                        std::vector<unsigned> Storages) {
  llvm::stable_sort(Storages, [&](unsigned A, unsigned B) {
    return R.Storages[A].Bytes > R.Storages[B].Bytes;
  });
  std::string S;
  raw_string_ostream OS(S);
  unsigned Shown = std::min<size_t>(Storages.size(), 3);
  for (unsigned I = 0; I < Shown; ++I)
    OS << (I ? ", " : "") << "'" << R.Storages[Storages[I]].Name << "' "
       << formatBytes(Bytes(R.Storages[Storages[I]].Bytes));
  if (Storages.size() > Shown)
    OS << ", and " << Storages.size() - Shown << " more";
  return OS.str();
}

/// The infeasibility message when constant loads alone overflow.
Error explainConstantOverflow(const PlacementRequest &R,
                              const CapacityModel &CM, unsigned Res) {
  const PlacementResource &RS = R.Resources[Res];
  return makeError(
      RS.Name + " capacity binds: " + formatBytes(Bytes(CM.ConstantLoad[Res])) +
      " must stay in " + RS.Name +
      " (largest: " + storageList(R, CM.AlwaysHeld[Res]) + ") but " +
      formatBytes(Bytes(std::max(0.0, RS.Capacity))) + " is free");
}

/// Integer bytes for Z3: loads round up, capacities down, so a placement
/// Z3 accepts fits in real numbers too.
int64_t ceilBytes(double B) { return (int64_t)std::ceil(B); }
int64_t floorBytes(double B) {
  return B >= 9.0e18 ? INT64_MAX / 4 : (int64_t)std::floor(B);
}

} // namespace

namespace placement {

unsigned Reducer::addFactor(SmallVector<unsigned, 4> Scope,
                            std::vector<double> T) {
  unsigned F = Factors.size();
  for (unsigned I : Scope)
    FactorsOf[I].push_back(F);
  Factors.push_back({std::move(Scope), std::move(T)});
  return F;
}

SmallVector<unsigned, 8> Reducer::liveFactors(unsigned I) {
  std::vector<unsigned> &L = FactorsOf[I];
  llvm::erase_if(L, [&](unsigned F) { return !Factors[F].Alive; });
  return SmallVector<unsigned, 8>(L.begin(), L.end());
}

SmallVector<unsigned, 8> Reducer::neighbours(unsigned I, double &TableSize) {
  SmallVector<unsigned, 8> N;
  for (unsigned F : liveFactors(I))
    for (unsigned J : Factors[F].Scope)
      if (J != I)
        N.push_back(J);
  llvm::sort(N);
  N.erase(std::unique(N.begin(), N.end()), N.end());
  TableSize = 1;
  for (unsigned J : N)
    TableSize *= Dom[J].size();
  return N;
}

void Reducer::eliminate(unsigned I, ArrayRef<unsigned> Scope) {
  SmallVector<unsigned, 8> Fs = liveFactors(I);
  // For every factor, the stride of each scope item in its table, keyed by
  // the item's slot in the joint (Scope + I) assignment.
  unsigned NS = Scope.size();
  struct Access {
    const Factor *F;
    SmallVector<std::pair<unsigned, size_t>, 4> SlotStride;
  };
  SmallVector<Access, 8> Acc;
  for (unsigned F : Fs) {
    Access A{&Factors[F], {}};
    size_t Stride = 1;
    for (unsigned P = Factors[F].Scope.size(); P-- > 0;) {
      unsigned J = Factors[F].Scope[P];
      unsigned Slot = J == I ? NS
                             : std::lower_bound(Scope.begin(), Scope.end(), J) -
                                   Scope.begin();
      A.SlotStride.push_back({Slot, Stride});
      Stride *= Dom[J].size();
    }
    Acc.push_back(std::move(A));
  }
  size_t Size = 1;
  for (unsigned J : Scope)
    Size *= Dom[J].size();
  std::vector<double> T(Size);
  Step S{I, SmallVector<unsigned, 4>(Scope.begin(), Scope.end()),
         std::vector<uint8_t>(Size)};
  SmallVector<unsigned, 8> Pos(NS + 1, 0);
  for (size_t Idx = 0; Idx < Size; ++Idx) {
    double Best = Inf;
    unsigned Arg = 0;
    for (unsigned V = 0; V < Dom[I].size(); ++V) {
      Pos[NS] = V;
      double Sum = 0;
      for (const Access &A : Acc) {
        size_t FI = 0;
        for (auto [Slot, Stride] : A.SlotStride)
          FI += Pos[Slot] * Stride;
        Sum += A.F->T[FI];
      }
      if (Sum < Best) {
        Best = Sum;
        Arg = V;
      }
    }
    T[Idx] = Best;
    S.Best[Idx] = Arg;
    // Odometer over Scope, last item fastest (row-major).
    for (unsigned P = NS; P-- > 0;) {
      if (++Pos[P] < Dom[Scope[P]].size())
        break;
      Pos[P] = 0;
    }
  }
  for (unsigned F : Fs)
    Factors[F].Alive = false;
  if (!Scope.empty())
    addFactor(SmallVector<unsigned, 4>(Scope.begin(), Scope.end()),
              std::move(T));
  Alive[I] = false;
  Steps.push_back(std::move(S));
}

void Reducer::run(PlacementStats &Stats) {
  size_t N = R.Items.size();
  Dom.resize(N);
  FactorsOf.resize(N);
  Alive.assign(N, true);
  // Domain position of every class, per item.
  std::vector<SmallVector<int, 4>> PosOf(N, SmallVector<int, 4>(K, -1));
  std::vector<std::vector<double>> Unary(N);
  for (unsigned I = 0; I < N; ++I) {
    for (const PlacementOption &O : R.Items[I].Options) {
      PosOf[I][O.Class] = Dom[I].size();
      Dom[I].push_back(O.Class);
      Unary[I].push_back(R.Items[I].Multiplicity * O.Seconds);
    }
  }
  DenseMap<std::pair<unsigned, unsigned>, unsigned> Pair;
  for (const PlacementEdge &Ed : R.Edges) {
    if (Ed.Multiplicity == 0)
      continue;
    if (Ed.From == Ed.To) {
      for (unsigned P = 0; P < Dom[Ed.From].size(); ++P) {
        unsigned C = Dom[Ed.From][P];
        Unary[Ed.From][P] += Ed.Multiplicity * Ed.Cost[C * K + C];
      }
      continue;
    }
    unsigned A = std::min(Ed.From, Ed.To), B = std::max(Ed.From, Ed.To);
    auto [It, New] = Pair.try_emplace({A, B}, Factors.size());
    if (New)
      addFactor({A, B},
                std::vector<double>(Dom[A].size() * Dom[B].size(), 0.0));
    Factor &F = Factors[It->second];
    for (unsigned PA = 0; PA < Dom[A].size(); ++PA)
      for (unsigned PB = 0; PB < Dom[B].size(); ++PB) {
        unsigned CA = Dom[A][PA], CB = Dom[B][PB];
        double V = Ed.From == A ? Ed.Cost[CA * K + CB] : Ed.Cost[CB * K + CA];
        F.T[PA * Dom[B].size() + PB] += Ed.Multiplicity * V;
      }
  }
  for (unsigned I = 0; I < N; ++I)
    addFactor({I}, std::move(Unary[I]));

  // Fixing: an item with one candidate drops out of every scope (with a
  // one-element domain its stride is irrelevant, so tables stay as they
  // are); its unary factor is a constant.
  for (unsigned I = 0; I < N; ++I) {
    if (Dom[I].size() != 1)
      continue;
    for (unsigned F : liveFactors(I)) {
      Factor &Fa = Factors[F];
      llvm::erase_value(Fa.Scope, I);
      if (Fa.Scope.empty())
        Fa.Alive = false;
    }
    FactorsOf[I].clear();
    Alive[I] = false;
    Steps.push_back({I, {}, {0}});
    ++Stats.Fixed;
  }
  if (!Opts.Eliminate)
    return;

  // Greedy min-table-size elimination with a lazy priority queue.
  using Entry = std::pair<double, unsigned>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> Q;
  for (unsigned I = 0; I < N; ++I)
    if (Alive[I] && !CM.Coupled[I]) {
      double Size;
      neighbours(I, Size);
      Q.push({Size, I});
    }
  while (!Q.empty()) {
    auto [Key, I] = Q.top();
    Q.pop();
    if (!Alive[I])
      continue;
    double Size;
    SmallVector<unsigned, 8> Scope = neighbours(I, Size);
    if (Size != Key) {
      Q.push({Size, I});
      continue;
    }
    if (Size > Opts.MaxEliminationTable)
      break; // Every other entry is at least as large.
    eliminate(I, Scope);
    ++Stats.Eliminated;
    for (unsigned J : Scope)
      if (!CM.Coupled[J]) {
        double SJ;
        neighbours(J, SJ);
        Q.push({SJ, J});
      }
  }
}

Expected<bool> Reducer::solveCore(std::vector<unsigned> &Class,
                                  PlacementStats &Stats) {
  size_t N = R.Items.size();
  std::vector<unsigned> Pos(N, ~0u); // Domain position per item.
  std::vector<unsigned> Core;
  for (unsigned I = 0; I < N; ++I)
    if (Alive[I])
      Core.push_back(I);
  Stats.CoreItems = Core.size();
  for (const Factor &F : Factors)
    Stats.CoreEdges += F.Alive && F.Scope.size() > 1;

  if (!Core.empty()) {
    double Space = 1;
    for (unsigned I : Core)
      Space *= Dom[I].size();
    Optional<bool> Feasible;
    if (Space <= Opts.MaxEnumeration) {
      Stats.CoreMethod = PlacementStats::Enumeration;
      Feasible = enumerateCore(Core, Pos);
    } else if (Opts.MaxParetoPoints > 0) {
      Stats.CoreMethod = PlacementStats::Pareto;
      Feasible = solveCoreByPareto(Core, Pos);
    }
    if (!Feasible) {
      Stats.CoreMethod = PlacementStats::Z3;
      Expected<bool> F = solveCoreWithZ3(Core, Pos);
      if (!F)
        return F.takeError();
      Feasible = *F;
    }
    if (!*Feasible)
      return false;
  }
  // Back-substitution, last eliminated first.
  for (auto It = Steps.rbegin(); It != Steps.rend(); ++It) {
    size_t Idx = 0;
    for (unsigned J : It->Scope)
      Idx = Idx * Dom[J].size() + Pos[J];
    Pos[It->Item] = It->Best[Idx];
  }
  Class.assign(N, 0);
  for (unsigned I = 0; I < N; ++I)
    Class[I] = Dom[I][Pos[I]];
  return true;
}

Expected<bool> Reducer::solveCoreWithZ3(ArrayRef<unsigned> Core,
                                        std::vector<unsigned> &Pos) {
  size_t N = R.Items.size();
  try {
    z3::context Ctx;
    z3::optimize Opt(Ctx);
    // X[I][P]: item I on its P-th candidate.
    std::vector<std::vector<z3::expr>> X(N);
    for (unsigned I : Core) {
      z3::expr_vector OneHot(Ctx);
      for (unsigned P = 0; P < Dom[I].size(); ++P) {
        X[I].push_back(Ctx.bool_const(
            ("x_" + Twine(I) + "_" + Twine(Dom[I][P])).str().c_str()));
        OneHot.push_back(X[I].back());
      }
      Opt.add(z3::atleast(OneHot, 1));
      Opt.add(z3::atmost(OneHot, 1));
    }
    // Costs relative to each factor's minimum, scaled to integers.
    double Total = 0;
    for (const Factor &F : Factors)
      if (F.Alive) {
        double Min = *std::min_element(F.T.begin(), F.T.end());
        for (double V : F.T)
          Total += V - Min;
      }
    double Scale = Total > 0 ? 1e15 / Total : 1;
    for (const Factor &F : Factors) {
      if (!F.Alive)
        continue;
      double Min = *std::min_element(F.T.begin(), F.T.end());
      SmallVector<unsigned, 4> P(F.Scope.size(), 0);
      for (size_t Idx = 0; Idx < F.T.size(); ++Idx) {
        int64_t W = std::llround((F.T[Idx] - Min) * Scale);
        if (W > 0) {
          z3::expr_vector Conj(Ctx);
          for (unsigned S = 0; S < F.Scope.size(); ++S)
            Conj.push_back(X[F.Scope[S]][P[S]]);
          Opt.add_soft(!z3::mk_and(Conj), std::to_string(W).c_str());
        }
        for (unsigned S = F.Scope.size(); S-- > 0;) {
          if (++P[S] < Dom[F.Scope[S]].size())
            break;
          P[S] = 0;
        }
      }
    }
    // Capacities over the open pairs: Held is implied by every reader
    // candidate the resource holds.
    std::vector<z3::expr_vector> Loads;
    for (unsigned Res = 0; Res < R.Resources.size(); ++Res)
      Loads.emplace_back(Ctx);
    for (unsigned OP = 0; OP < CM.Open.size(); ++OP) {
      const OpenPair &Pr = CM.Open[OP];
      const PlacementResource &RS = R.Resources[Pr.Resource];
      if (!std::isfinite(RS.Capacity))
        continue;
      z3::expr Held = Ctx.bool_const(("held_" + Twine(OP)).str().c_str());
      // Coupled readers are never fixed or eliminated.
      for (unsigned Rd : Pr.Readers)
        for (unsigned P = 0; P < Dom[Rd].size(); ++P)
          if (RS.Holds[Dom[Rd][P]])
            Opt.add(z3::implies(X[Rd][P], Held));
      Loads[Pr.Resource].push_back(
          z3::ite(Held, Ctx.int_val(ceilBytes(R.Storages[Pr.Storage].Bytes)),
                  Ctx.int_val(0)));
    }
    for (unsigned Res = 0; Res < R.Resources.size(); ++Res) {
      const PlacementResource &RS = R.Resources[Res];
      if (Loads[Res].empty() || !std::isfinite(RS.Capacity))
        continue;
      Opt.add(z3::sum(Loads[Res]) <=
              Ctx.int_val(floorBytes(RS.Capacity - CM.ConstantLoad[Res])));
    }
    z3::check_result Res = Opt.check();
    if (Res == z3::unknown)
      return makeError("placement: Z3 gave up on the core problem (" +
                       Twine(Core.size()) + " items)");
    if (Res == z3::unsat)
      return false;
    z3::model Mdl = Opt.get_model();
    for (unsigned I : Core) {
      Pos[I] = 0;
      for (unsigned P = 0; P < Dom[I].size(); ++P)
        if (Mdl.eval(X[I][P], true).is_true())
          Pos[I] = P;
    }
  } catch (const z3::exception &E) {
    return makeError(Twine("placement: Z3 error: ") + E.msg());
  }
  return true;
}

bool Reducer::enumerateCore(ArrayRef<unsigned> Core,
                            std::vector<unsigned> &Pos) {
  // Every live factor counts, above its minimum, once the last item of its
  // scope (in core order) has a class; so the partial sum never decreases
  // and bounds every completion from below.
  DenseMap<unsigned, unsigned> Order;
  for (unsigned D = 0; D < Core.size(); ++D)
    Order[Core[D]] = D;
  std::vector<std::vector<unsigned>> Closes(Core.size());
  std::vector<double> FMin(Factors.size(), 0.0);
  for (unsigned F = 0; F < Factors.size(); ++F) {
    if (!Factors[F].Alive)
      continue;
    unsigned Last = 0;
    for (unsigned I : Factors[F].Scope)
      Last = std::max(Last, Order.lookup(I));
    Closes[Last].push_back(F);
    FMin[F] = *std::min_element(Factors[F].T.begin(), Factors[F].T.end());
  }
  // Capacity: per open pair, how many assigned readers make it held.
  std::vector<double> Load(R.Resources.size());
  for (unsigned Res = 0; Res < R.Resources.size(); ++Res)
    Load[Res] = CM.ConstantLoad[Res];
  std::vector<unsigned> HeldBy(CM.Open.size(), 0);
  std::vector<std::vector<unsigned>> PairsOf(R.Items.size());
  for (unsigned OP = 0; OP < CM.Open.size(); ++OP)
    for (unsigned Rd : CM.Open[OP].Readers)
      PairsOf[Rd].push_back(OP);

  double Best = Inf;
  std::vector<unsigned> Cur(R.Items.size(), 0), BestPos;
  auto Eval = [&](unsigned F) {
    const Factor &Fa = Factors[F];
    size_t Idx = 0;
    for (unsigned I : Fa.Scope)
      Idx = Idx * Dom[I].size() + Cur[I];
    return Fa.T[Idx];
  };
  std::function<void(unsigned, double)> Visit = [&](unsigned D, double Cost) {
    if (D == Core.size()) {
      if (Cost < Best) {
        Best = Cost;
        BestPos = Cur;
      }
      return;
    }
    unsigned I = Core[D];
    for (unsigned P = 0; P < Dom[I].size(); ++P) {
      Cur[I] = P;
      // Storages this choice newly holds.
      SmallVector<unsigned, 4> Took;
      bool Fits = true;
      for (unsigned OP : PairsOf[I]) {
        const OpenPair &Pr = CM.Open[OP];
        if (!R.Resources[Pr.Resource].Holds[Dom[I][P]])
          continue;
        if (HeldBy[OP]++ == 0) {
          Load[Pr.Resource] += R.Storages[Pr.Storage].Bytes;
          Fits &= Load[Pr.Resource] <= R.Resources[Pr.Resource].Capacity;
        }
        Took.push_back(OP);
      }
      if (Fits) {
        double C = Cost;
        for (unsigned F : Closes[D])
          C += Eval(F) - FMin[F];
        if (C < Best)
          Visit(D + 1, C);
      }
      for (unsigned OP : Took)
        if (--HeldBy[OP] == 0)
          Load[CM.Open[OP].Resource] -= R.Storages[CM.Open[OP].Storage].Bytes;
    }
  };
  Visit(0, 0.0);
  if (!std::isfinite(Best))
    return false;
  for (unsigned I : Core)
    Pos[I] = BestPos[I];
  return true;
}

} // namespace placement

namespace {

/// Names the capacities that bind together, from an unsat core over the
/// capacity constraints alone (the costs do not matter for feasibility).
Error explainJointOverflow(const PlacementRequest &R, const CapacityModel &CM) {
  std::vector<unsigned> Binding;
  try {
    z3::context Ctx;
    z3::solver S(Ctx);
    size_t K = R.Classes.size();
    std::vector<std::vector<Optional<z3::expr>>> X(R.Items.size());
    auto Var = [&](unsigned I, unsigned C) -> z3::expr {
      std::vector<Optional<z3::expr>> &XI = X[I];
      if (XI.empty()) {
        XI.resize(K);
        z3::expr_vector OneHot(Ctx);
        for (const PlacementOption &O : R.Items[I].Options) {
          XI[O.Class] = Ctx.bool_const(
              ("x_" + Twine(I) + "_" + Twine(O.Class)).str().c_str());
          OneHot.push_back(*XI[O.Class]);
        }
        S.add(z3::atleast(OneHot, 1));
        S.add(z3::atmost(OneHot, 1));
      }
      return *XI[C];
    };
    std::vector<z3::expr_vector> Loads;
    for (unsigned Res = 0; Res < R.Resources.size(); ++Res)
      Loads.emplace_back(Ctx);
    for (unsigned P = 0; P < CM.Open.size(); ++P) {
      const OpenPair &OP = CM.Open[P];
      const PlacementResource &RS = R.Resources[OP.Resource];
      z3::expr Held = Ctx.bool_const(("held_" + Twine(P)).str().c_str());
      for (unsigned Rd : OP.Readers)
        for (const PlacementOption &O : R.Items[Rd].Options)
          if (RS.Holds[O.Class])
            S.add(z3::implies(Var(Rd, O.Class), Held));
      Loads[OP.Resource].push_back(
          z3::ite(Held, Ctx.int_val(ceilBytes(R.Storages[OP.Storage].Bytes)),
                  Ctx.int_val(0)));
    }
    for (unsigned Res = 0; Res < R.Resources.size(); ++Res) {
      const PlacementResource &RS = R.Resources[Res];
      if (Loads[Res].empty() || !std::isfinite(RS.Capacity))
        continue;
      S.add(z3::sum(Loads[Res]) <=
                Ctx.int_val(floorBytes(RS.Capacity - CM.ConstantLoad[Res])),
            Ctx.bool_const(("cap_" + Twine(Res)).str().c_str()));
    }
    if (S.check() == z3::unsat) {
      z3::expr_vector Core = S.unsat_core();
      for (unsigned I = 0; I < Core.size(); ++I) {
        unsigned Res;
        if (!StringRef(Core[I].to_string()).drop_front(4).getAsInteger(10, Res))
          Binding.push_back(Res);
      }
      llvm::sort(Binding);
    }
  } catch (const z3::exception &E) {
    return makeError(Twine("placement: Z3 error: ") + E.msg());
  }
  if (Binding.empty())
    for (unsigned Res = 0; Res < R.Resources.size(); ++Res)
      Binding.push_back(Res);
  std::string Msg;
  raw_string_ostream OS(Msg);
  for (unsigned I = 0; I < Binding.size(); ++I)
    OS << (I == 0                    ? ""
           : I + 1 == Binding.size() ? " and "
                                     : ", ")
       << R.Resources[Binding[I]].Name;
  OS << (Binding.size() > 1 ? " capacities bind together: "
                            : " capacity binds: ");
  std::vector<unsigned> Movable;
  for (const OpenPair &OP : CM.Open)
    if (is_contained(Binding, OP.Resource) &&
        !is_contained(Movable, OP.Storage))
      Movable.push_back(OP.Storage);
  OS << "no placement of " << storageList(R, Movable) << " fits";
  for (unsigned I = 0; I < Binding.size(); ++I) {
    const PlacementResource &RS = R.Resources[Binding[I]];
    OS << (I ? "; " : " (") << RS.Name << ": "
       << formatBytes(Bytes(std::max(0.0, RS.Capacity))) << " free, "
       << formatBytes(Bytes(CM.ConstantLoad[Binding[I]])) << " already held";
  }
  OS << ")";
  return makeError(OS.str());
}

} // namespace

Expected<PlacementResult> solvePlacement(const PlacementRequest &R,
                                         const PlacementSolverOptions &Opts) {
  if (Error E = validate(R))
    return E;
  for (const PlacementItem &It : R.Items)
    if (It.Options.empty())
      return makeError("'" + It.Name + "' runs on no device class");
  CapacityModel CM = analyzeCapacity(R);
  for (unsigned Res = 0; Res < R.Resources.size(); ++Res)
    if (CM.ConstantLoad[Res] > R.Resources[Res].Capacity)
      return explainConstantOverflow(R, CM, Res);

  PlacementResult Result;
  Result.Stats.Items = R.Items.size();
  Reducer Red(R, CM, Opts);
  Red.run(Result.Stats);
  Expected<bool> Feasible = Red.solveCore(Result.Class, Result.Stats);
  if (!Feasible)
    return Feasible.takeError();
  if (!*Feasible)
    return explainJointOverflow(R, CM);
  PlacementEvaluation Ev = evaluatePlacement(R, Result.Class);
  if (!Ev.Violations.empty())
    return makeError("placement: internal error: the solution violates " +
                     Ev.Violations.front());
  Result.Objective = Ev.Objective;
  return Result;
}

std::vector<double> computeUnavoidableLoads(const PlacementRequest &R) {
  if (Error E = validate(R)) {
    consumeError(std::move(E));
    return std::vector<double>(R.Resources.size(), 0.0);
  }
  return analyzeCapacity(R).ConstantLoad;
}

const char *getCoreMethodName(PlacementStats::Method M) {
  switch (M) {
  case PlacementStats::None:
    return "none";
  case PlacementStats::Enumeration:
    return "branch and bound";
  case PlacementStats::Pareto:
    return "Pareto elimination";
  case PlacementStats::Z3:
    return "Z3";
  }
  return "none";
}

PlacementEvaluation evaluatePlacement(const PlacementRequest &R,
                                      const std::vector<unsigned> &Class) {
  PlacementEvaluation Ev;
  size_t K = R.Classes.size();
  Ev.ResourceBytes.assign(R.Resources.size(), 0);
  if (Class.size() != R.Items.size()) {
    Ev.Violations.push_back("assignment has " + std::to_string(Class.size()) +
                            " classes for " + std::to_string(R.Items.size()) +
                            " items");
    return Ev;
  }
  bool Valid = true;
  for (unsigned I = 0; I < R.Items.size(); ++I) {
    const PlacementItem &It = R.Items[I];
    const PlacementOption *O = nullptr;
    for (const PlacementOption &Opt : It.Options)
      if (Opt.Class == Class[I])
        O = &Opt;
    if (!O) {
      Ev.Violations.push_back("item '" + It.Name + "' on " +
                              (Class[I] < K
                                   ? "'" + R.Classes[Class[I]] + "'"
                                   : "class " + std::to_string(Class[I])) +
                              ", not one of its candidates");
      Valid = false;
      continue;
    }
    Ev.ComputeSeconds += It.Multiplicity * O->Seconds;
  }
  if (!Valid)
    return Ev;
  for (const PlacementEdge &E : R.Edges)
    if (E.Cost.size() == K * K)
      Ev.TransferSeconds +=
          E.Multiplicity * E.Cost[Class[E.From] * K + Class[E.To]];
  Ev.Objective = Ev.ComputeSeconds + Ev.TransferSeconds;
  for (unsigned Res = 0; Res < R.Resources.size(); ++Res) {
    const PlacementResource &RS = R.Resources[Res];
    for (const PlacementStorage &S : R.Storages)
      for (unsigned Rd : S.Readers)
        if (RS.Holds[Class[Rd]]) {
          Ev.ResourceBytes[Res] += S.Bytes;
          break;
        }
    if (Ev.ResourceBytes[Res] > RS.Capacity)
      Ev.Violations.push_back(
          RS.Name + " holds " + formatBytes(Bytes(Ev.ResourceBytes[Res])) +
          ", more than its capacity " + formatBytes(Bytes(RS.Capacity)));
  }
  return Ev;
}

std::vector<ItemCosts> computeItemCosts(const PlacementRequest &R,
                                        const std::vector<unsigned> &Class) {
  size_t K = R.Classes.size();
  std::vector<ItemCosts> Out(R.Items.size());
  for (unsigned I = 0; I < R.Items.size(); ++I) {
    Out[I].Compute.assign(K, Inf);
    Out[I].Transfer.assign(K, 0.0);
    for (const PlacementOption &O : R.Items[I].Options)
      Out[I].Compute[O.Class] = R.Items[I].Multiplicity * O.Seconds;
  }
  if (Class.size() != R.Items.size())
    return Out;
  for (const PlacementEdge &E : R.Edges) {
    if (E.Cost.size() != K * K)
      continue;
    for (unsigned C = 0; C < K; ++C) {
      if (E.From == E.To) {
        Out[E.From].Transfer[C] += E.Multiplicity * E.Cost[C * K + C];
        continue;
      }
      if (Class[E.To] < K)
        Out[E.From].Transfer[C] += E.Multiplicity * E.Cost[C * K + Class[E.To]];
      if (Class[E.From] < K)
        Out[E.To].Transfer[C] += E.Multiplicity * E.Cost[Class[E.From] * K + C];
    }
  }
  return Out;
}

} // namespace loom
