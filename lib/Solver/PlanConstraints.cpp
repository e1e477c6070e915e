//===- PlanConstraints.cpp - The search's decision space in Z3 ------------===//
//
// Encoding. Every variable is one-hot over a finite domain: tp, pp, dp and
// ep over the divisors of the device count, the micro-batch size and count
// over the divisors of the global batch, vpp over 1..blocks, ZeRO over
// 0..3, recompute over none/selective/full; sp and the stage-boundary kind
// are booleans. The non-linear relations of DESIGN §6 (dp*tp*pp =
// devices, batch divisible by dp*mb, nmb = batch / (dp*mb), nmb a multiple
// of pp, ep dividing dp) become one implication per pair of values, and the
// whole model is propositional. Expert parallelism is Megatron's
// expert-data-parallel (ParallelPlan.h): ep ranks are carved out of dp, so
// ep divides dp, and each holds experts / ep experts, so ep divides the
// experts of every MoE layer (ep = 1 without experts). The axis order is
// one-hot over the six permutations of (ep, dp / ep, pp) above tp; orders
// that differ only in where axes of size 1 sit are one mesh, and only its
// representative (the default where it is among them) is admitted -- one
// implication per (order, ep, dp, pp). Gradients in bf16 need a DP sync
// (training, dp > 1). Every constraint is one tracked assertion whose name says
// it in plain words; an unsat core is therefore a list of sentences.
//
// Certificates. Each row of the table is a selector implying its values;
// exactly one row is chosen; a row over HBM is excluded (memory is
// measured, as in explanations); z3::optimize minimizes the rank of the
// chosen row's step time among the table's distinct times (ranks order
// rows exactly as times do). A real-valued objective over the same table
// made Z3's optimizer tens of times slower.
//
// Explanations. The search measures what Z3 cannot compute (memory); it
// hands over, per (tp, pp), the least per-device memory over all other
// choices. A floor above HBM becomes the tracked fact "not (tp = t and
// pp = p)". With Z3's core minimization the core names the structural
// constraints that remove the other (tp, pp) pairs and the memory facts
// of the ones they leave.
//
//===----------------------------------------------------------------------===//
#include "loom/Solver/PlanConstraints.h"
#include "loom/Support/Divisors.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>
#include <z3++.h>

#include <limits>

using namespace llvm;

namespace loom {

std::string InfeasibilityExplanation::str() const {
  std::string S = Summary;
  if (!Core.empty()) {
    S += "\nbinding constraints (Z3 unsat core):";
    for (const std::string &C : Core)
      S += "\n  " + C;
  }
  return S;
}

namespace {

/// The permutations of CandidateRow::Order: axis 0 ep, 1 dp (outside ep),
/// 2 pp, innermost first.
const unsigned OrderAxes[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                  {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

std::string getOrderName(unsigned O) {
  static const char *Names[] = {"ep", "dp", "pp"};
  std::string S = "tp";
  for (unsigned A : OrderAxes[O])
    S += std::string("-") + Names[A];
  return S;
}

/// Orders \p A and \p B put the axes of size > 1 (\p Sizes: ep, dp / ep,
/// pp) in the same sequence: the same mesh.
bool sameMesh(unsigned A, unsigned B, const uint64_t Sizes[3]) {
  SmallVector<unsigned, 3> KA, KB;
  for (unsigned I = 0; I < 3; ++I) {
    if (Sizes[OrderAxes[A][I]] > 1)
      KA.push_back(OrderAxes[A][I]);
    if (Sizes[OrderAxes[B][I]] > 1)
      KB.push_back(OrderAxes[B][I]);
  }
  return KA == KB;
}

/// The representative of order \p O's mesh at \p Sizes: the default (0)
/// when the axes of size > 1 come in its sequence, else those axes in O's
/// sequence followed by the others in the default order.
unsigned canonicalOrder(unsigned O, const uint64_t Sizes[3]) {
  if (sameMesh(O, 0, Sizes))
    return 0;
  SmallVector<unsigned, 3> Seq;
  for (unsigned A : OrderAxes[O])
    if (Sizes[A] > 1)
      Seq.push_back(A);
  for (unsigned A = 0; A < 3; ++A)
    if (Sizes[A] <= 1)
      Seq.push_back(A);
  for (unsigned Q = 0; Q < 6; ++Q)
    if (std::equal(Seq.begin(), Seq.end(), OrderAxes[Q]))
      return Q;
  return O;
}

/// What a constraint is about, for the one-line summary.
enum class Topic { TP, PP, Other, Structural, Memory };

struct Tracked {
  z3::expr E;
  std::string Name;
  /// Phrase for "for every ..." in the summary (TP and PP topics).
  std::string Phrase;
  Topic T;
  /// Memory facts: the floor and its stage.
  double Bytes = 0;
  unsigned Stage = 0;
};

/// The variables and constraints of one PlanSpaceDesc. Every variable is
/// one-hot over a finite domain, so the model is propositional.
class ConstraintModel {
public:
  ConstraintModel(z3::context &C, const PlanSpaceDesc &S);

  z3::context &C;
  const PlanSpaceDesc &S;
  /// Domains: divisors of the devices (tp, pp, dp) and of the batch (mb,
  /// nmb), 1..max(blocks, 1) (vpp), 0..3 (zero), 0..2 (recompute).
  std::vector<uint64_t> DevDivs, BatchDivs, VPPs, Zeros, RCs, Orders;
  z3::expr_vector TP, PP, DP, EP, MB, NMB, VPP, Zero, RC, Order;
  z3::expr SP, Balanced, BF16;
  /// Exactly-one constraints: never part of an explanation.
  std::vector<z3::expr> Domains;
  std::vector<Tracked> Constraints;

  /// The one-hot literal for value \p V of \p Vars over \p Values, or
  /// false when \p V is outside the domain.
  z3::expr lit(const z3::expr_vector &Vars, const std::vector<uint64_t> &Values,
               uint64_t V) const {
    auto It = std::lower_bound(Values.begin(), Values.end(), V);
    if (It == Values.end() || *It != V)
      return C.bool_val(false);
    return Vars[(unsigned)(It - Values.begin())];
  }

private:
  // The constraints, in the order they are named in explanations.
  void addDeviceConstraints(uint64_t N);
  void addExpertConstraints();
  void addBatchConstraints(uint64_t B);
  void addOptionConstraints();
  std::vector<z3::expr> addOrderConstraints();
  void addFixedChoices(uint64_t N, uint64_t B,
                       const std::vector<z3::expr> &FixedOrder);

  z3::expr_vector oneHot(const char *Prefix,
                         const std::vector<uint64_t> &Values) {
    z3::expr_vector V(C);
    for (uint64_t X : Values)
      V.push_back(C.bool_const((Twine(Prefix) + "_" + Twine(X)).str().c_str()));
    Domains.push_back(z3::atleast(V, 1));
    Domains.push_back(z3::atmost(V, 1));
    return V;
  }
  void add(z3::expr E, const Twine &Name, Topic T, const Twine &Phrase = "") {
    Constraints.push_back({E, Name.str(), Phrase.str(), T});
  }
  z3::expr conj(const std::vector<z3::expr> &Es) {
    z3::expr_vector V(C);
    for (const z3::expr &E : Es)
      V.push_back(E);
    return z3::mk_and(V);
  }
  static std::vector<uint64_t> range(uint64_t From, uint64_t To) {
    std::vector<uint64_t> R;
    for (uint64_t I = From; I <= To; ++I)
      R.push_back(I);
    return R;
  }
};

/// Divisors of the global batch that a plan can hold as mb or nmb (32 bits,
/// as completePlan and the search require).
static std::vector<uint64_t> getBatchDivisors(uint64_t Batch) {
  std::vector<uint64_t> D = getDivisors(std::max<uint64_t>(1, Batch));
  llvm::erase_if(
      D, [](uint64_t V) { return V > std::numeric_limits<unsigned>::max(); });
  return D;
}

ConstraintModel::ConstraintModel(z3::context &C, const PlanSpaceDesc &S)
    : C(C), S(S), DevDivs(getDivisors(std::max<uint64_t>(1, S.Devices))),
      BatchDivs(getBatchDivisors(S.Batch)),
      VPPs(range(1, std::max(1u, S.NumBlocks))), Zeros(range(0, 3)),
      RCs(range(0, 2)), Orders(range(0, 5)), TP(C), PP(C), DP(C), EP(C), MB(C),
      NMB(C), VPP(C), Zero(C), RC(C), Order(C), SP(C.bool_const("sp")),
      Balanced(C.bool_const("balanced")), BF16(C.bool_const("grad_bf16")) {
  TP = oneHot("tp", DevDivs);
  PP = oneHot("pp", DevDivs);
  DP = oneHot("dp", DevDivs);
  EP = oneHot("ep", DevDivs);
  MB = oneHot("mb", BatchDivs);
  NMB = oneHot("nmb", BatchDivs);
  VPP = oneHot("vpp", VPPs);
  Zero = oneHot("zero", Zeros);
  RC = oneHot("recompute", RCs);
  Order = oneHot("order", Orders);
  uint64_t N = std::max<uint64_t>(1, S.Devices),
           B = std::max<uint64_t>(1, S.Batch);
  addDeviceConstraints(N);
  addExpertConstraints();
  addBatchConstraints(B);
  addOptionConstraints();
  std::vector<z3::expr> FixedOrder = addOrderConstraints();
  addFixedChoices(N, B, FixedOrder);
}

/// dp * tp * pp = the \p N devices; tp within the fast domain and dividing
/// the split dims; pp within the layers.
void ConstraintModel::addDeviceConstraints(uint64_t N) {
  std::vector<z3::expr> Product;
  for (unsigned I = 0; I < DevDivs.size(); ++I)
    for (unsigned J = 0; J < DevDivs.size(); ++J) {
      uint64_t TPP = DevDivs[I] * DevDivs[J];
      Product.push_back(
          z3::implies(TP[I] && PP[J],
                      N % TPP ? C.bool_val(false) : lit(DP, DevDivs, N / TPP)));
    }
  add(conj(Product), "dp*tp*pp = " + Twine(N) + " devices", Topic::Structural,
      "dp*tp*pp = " + Twine(N) + " devices");

  // TP inside the fast domain, dividing the split dims; pp within layers.
  std::vector<z3::expr> Limit, Divides, Layers;
  for (unsigned I = 0; I < DevDivs.size(); ++I) {
    uint64_t T = DevDivs[I];
    if (T > S.TPLimit)
      Limit.push_back(!TP[I]);
    if (!dividesOneOf(S.TPSplitSizes, T))
      Divides.push_back(!TP[I]);
    if (T > S.NumLayers)
      Layers.push_back(!PP[I]);
  }
  std::string LimitWhy = S.TPLimitWhy.empty() ? "" : " (" + S.TPLimitWhy + ")";
  if (!Limit.empty())
    add(conj(Limit), "tp <= " + Twine(S.TPLimit) + LimitWhy, Topic::TP,
        "tp <= " + Twine(S.TPLimit) + LimitWhy);
  // Loom pads nothing (README): the refusal says so.
  std::string Sizes =
      listSizes(S.TPSplitSizes) + " (no padding: neither vocabulary nor heads)";
  if (!Divides.empty())
    add(conj(Divides), "tp divides one of the split dims " + Twine(Sizes),
        Topic::TP, "tp dividing one of the split dims " + Twine(Sizes));
  if (!Layers.empty())
    add(conj(Layers), "pp <= " + Twine(S.NumLayers) + " (layers)", Topic::PP,
        "pp <= " + Twine(S.NumLayers) + " (layers)");
}

/// ep divides dp and the experts.
void ConstraintModel::addExpertConstraints() {
  std::vector<z3::expr> EPInDP, EPExperts;
  for (unsigned I = 0; I < DevDivs.size(); ++I) {
    uint64_t E = DevDivs[I];
    for (unsigned J = 0; J < DevDivs.size(); ++J)
      if (DevDivs[J] % E)
        EPInDP.push_back(!(EP[I] && DP[J]));
    if (E > 1 && (!S.NumExperts || S.NumExperts % E))
      EPExperts.push_back(!EP[I]);
  }
  if (!EPInDP.empty())
    add(conj(EPInDP),
        "ep divides dp (expert-parallel ranks are carved out of the "
        "data-parallel ones)",
        Topic::Structural);
  if (!EPExperts.empty())
    add(conj(EPExperts),
        S.NumExperts
            ? "ep divides the " + Twine(S.NumExperts) + " experts per MoE layer"
            : Twine("ep = 1 (the model has no experts)"),
        Topic::Other);
}

/// Global batch \p B = dp * mb * nmb.
void ConstraintModel::addBatchConstraints(uint64_t B) {
  std::vector<z3::expr> Divisible, Count;
  for (unsigned I = 0; I < DevDivs.size(); ++I)
    for (unsigned J = 0; J < BatchDivs.size(); ++J) {
      uint64_t PerStep = DevDivs[I] * BatchDivs[J];
      if (B % PerStep)
        Divisible.push_back(!(DP[I] && MB[J]));
      else
        Count.push_back(
            z3::implies(DP[I] && MB[J], lit(NMB, BatchDivs, B / PerStep)));
    }
  if (!Divisible.empty())
    add(conj(Divisible), "global batch " + Twine(B) + " divisible by dp*mb",
        Topic::Structural);
  add(conj(Count), "nmb = global batch / (dp*mb), at most 2^32 - 1",
      Topic::Structural);
  if (!S.SingleBatchSplit.empty())
    add(lit(DP, DevDivs, 1) && lit(NMB, BatchDivs, 1), S.SingleBatchSplit,
        Topic::Structural);
}

/// What sp, vpp, ZeRO, balanced stages and bf16 gradients need; no
/// training options for inference.
void ConstraintModel::addOptionConstraints() {
  add(z3::implies(SP, !lit(TP, DevDivs, 1)), "sp needs tp > 1", Topic::Other);

  // Interleaving (Megatron-LM): pp > 1, nmb a multiple of pp, the blocks
  // split evenly over the stages and vpp dividing each stage's blocks, on
  // the even split.
  std::vector<z3::expr> Interleave;
  for (unsigned J = 0; J < DevDivs.size(); ++J) {
    uint64_t P = DevDivs[J];
    z3::expr_vector NMBOk(C);
    for (unsigned K = 0; K < BatchDivs.size(); ++K)
      if (BatchDivs[K] % P == 0)
        NMBOk.push_back(NMB[K]);
    for (unsigned K = 1; K < VPPs.size(); ++K) {
      uint64_t V = VPPs[K];
      bool Ok = P > 1 && S.NumBlocks % P == 0 && (S.NumBlocks / P) % V == 0;
      Interleave.push_back(
          z3::implies(PP[J] && VPP[K],
                      Ok ? z3::mk_or(NMBOk) && !Balanced : C.bool_val(false)));
    }
  }
  if (!Interleave.empty())
    add(conj(Interleave),
        "vpp > 1 needs pp > 1, nmb divisible by pp, the even split and vpp "
        "dividing the blocks per stage",
        Topic::Other);
  add(z3::implies(lit(DP, DevDivs, 1), lit(Zero, Zeros, 0)),
      "zero > 0 needs dp > 1", Topic::Other);
  add(z3::implies(Balanced, !lit(PP, DevDivs, 1)),
      "balanced stage boundaries need pp > 1", Topic::Other);
  add(z3::implies(BF16, !lit(DP, DevDivs, 1)),
      "grad = bf16 needs dp > 1 (a DP gradient sync)", Topic::Other);
  if (!S.Train)
    add(lit(RC, RCs, 0) && lit(Zero, Zeros, 0) && !BF16,
        "inference: no recompute, no ZeRO, no gradients", Topic::Other);
}

/// One order per mesh: of the orders that put the axes of size > 1 in the
/// same sequence, the representative (canonicalOrder). Returns the
/// exclusions of the orders that are not --plan's mesh (empty without a
/// fixed order), for addFixedChoices.
std::vector<z3::expr> ConstraintModel::addOrderConstraints() {
  std::vector<z3::expr> Canonical, FixedOrder;
  for (unsigned I = 0; I < DevDivs.size(); ++I)
    for (unsigned J = 0; J < DevDivs.size(); ++J) {
      uint64_t E = DevDivs[I], D = DevDivs[J];
      if (D % E)
        continue; // excluded by "ep divides dp"
      for (unsigned K = 0; K < DevDivs.size(); ++K) {
        uint64_t Sizes[3] = {E, D / E, DevDivs[K]};
        z3::expr At = EP[I] && DP[J] && PP[K];
        for (unsigned O = 0; O < Orders.size(); ++O) {
          if (canonicalOrder(O, Sizes) != O)
            Canonical.push_back(!(Order[O] && At));
          if (S.FixedOrder >= 0 &&
              !sameMesh(O, (unsigned)S.FixedOrder % 6, Sizes))
            FixedOrder.push_back(!(Order[O] && At));
        }
      }
    }
  if (!Canonical.empty())
    add(conj(Canonical),
        "one axis order per mesh (orders that differ only where axes of "
        "size 1 sit are the same mesh)",
        Topic::Other);
  return FixedOrder;
}

/// What --plan fixed, each named for the explanation (with why a value is
/// impossible: not a divisor of the \p N devices or the global batch
/// \p B); \p FixedOrder from addOrderConstraints.
void ConstraintModel::addFixedChoices(uint64_t N, uint64_t B,
                                      const std::vector<z3::expr> &FixedOrder) {
  auto Fix = [&](const char *Key, unsigned V, const z3::expr_vector &Vs,
                 const std::vector<uint64_t> &Values, const Twine &Of,
                 Topic T) {
    z3::expr L = lit(Vs, Values, V);
    std::string Name = (Twine(Key) + " = " + Twine(V) + " (--plan)").str();
    if (L.is_false() && !Of.isTriviallyEmpty())
      Name += (", " + Of).str();
    add(L, Name, T, Name);
  };
  std::string NotDevices =
      (Twine("not a divisor of the ") + Twine(N) + " devices").str();
  std::string NotBatch =
      (Twine("not a divisor of the global batch ") + Twine(B)).str();
  if (S.FixedTP)
    Fix("tp", S.FixedTP, TP, DevDivs, NotDevices, Topic::TP);
  if (S.FixedPP)
    Fix("pp", S.FixedPP, PP, DevDivs, NotDevices, Topic::PP);
  if (S.FixedDP)
    Fix("dp", S.FixedDP, DP, DevDivs, NotDevices, Topic::Other);
  if (S.FixedEP)
    Fix("ep", S.FixedEP, EP, DevDivs, NotDevices, Topic::Other);
  if (S.FixedMB)
    Fix("mb", S.FixedMB, MB, BatchDivs, NotBatch, Topic::Other);
  if (S.FixedNMB)
    Fix("nmb", S.FixedNMB, NMB, BatchDivs, NotBatch, Topic::Other);
  if (S.FixedVPP)
    Fix("vpp", S.FixedVPP, VPP, VPPs,
        "more than the " + Twine(S.NumBlocks) + " blocks", Topic::Other);
  if (S.FixedZero >= 0)
    Fix("zero", S.FixedZero, Zero, Zeros, "", Topic::Other);
  if (S.FixedRecompute >= 0) {
    static const char *Names[] = {"none", "selective", "full"};
    add(lit(RC, RCs, S.FixedRecompute),
        Twine("recompute = ") + Names[std::min(2, S.FixedRecompute)] +
            " (--plan)",
        Topic::Other);
  }
  if (S.FixedSP >= 0)
    add(S.FixedSP ? SP : !SP,
        Twine("sp = ") + (S.FixedSP ? "on" : "off") + " (--plan)",
        Topic::Other);
  if (S.FixedStages)
    add(!Balanced, "stage boundaries fixed by --plan", Topic::Other);
  if (S.FixedGrad >= 0)
    add(S.FixedGrad ? BF16 : !BF16,
        Twine("grad = ") + (S.FixedGrad ? "bf16" : "fp32") + " (--plan)",
        Topic::Other);
  if (S.FixedOrder >= 0)
    add(FixedOrder.empty() ? C.bool_val(true) : conj(FixedOrder),
        "order = " + getOrderName((unsigned)S.FixedOrder % 6) + " (--plan)",
        Topic::Other);
}

} // namespace

Expected<InfeasibilityExplanation>
explainInfeasibility(const PlanSpaceDesc &Space,
                     ArrayRef<MemoryFloorFact> Floors, double HBMBytes) {
  try {
    z3::context C;
    ConstraintModel M(C, Space);
    std::string HBM = formatBytes(Bytes(HBMBytes));
    for (const MemoryFloorFact &F : Floors) {
      if (F.Bytes <= HBMBytes)
        continue;
      z3::expr Pair =
          M.lit(M.TP, M.DevDivs, F.TP) && M.lit(M.PP, M.DevDivs, F.PP);
      std::string Name = ("memory(tp=" + Twine(F.TP) + ",pp=" + Twine(F.PP) +
                          ") >= " + formatBytes(Bytes(F.Bytes)) + " > " + HBM +
                          " HBM (stage " + Twine(F.Stage) +
                          (F.Choices.empty() ? "" : " at " + F.Choices) + ")")
                             .str();
      Tracked T{!Pair, Name, "", Topic::Memory, F.Bytes, F.Stage};
      M.Constraints.push_back(T);
    }

    z3::solver S(C);
    z3::params P(C);
    P.set("core.minimize", true);
    S.set(P);
    for (const z3::expr &E : M.Domains)
      S.add(E);
    std::vector<z3::expr> Tags;
    for (unsigned I = 0; I < M.Constraints.size(); ++I) {
      Tags.push_back(C.bool_const(("c" + Twine(I)).str().c_str()));
      S.add(M.Constraints[I].E, Tags.back());
    }
    z3::check_result R = S.check();
    if (R == z3::unknown)
      return createStringError(inconvertibleErrorCode(),
                               "Z3 gave up on the plan constraints: %s",
                               S.reason_unknown().c_str());
    if (R == z3::sat) {
      z3::model Mdl = S.get_model();
      std::string At;
      for (unsigned I = 0; I < M.DevDivs.size(); ++I)
        if (Mdl.eval(M.TP[I], true).is_true())
          At += "tp=" + std::to_string(M.DevDivs[I]) + " ";
      for (unsigned I = 0; I < M.DevDivs.size(); ++I)
        if (Mdl.eval(M.PP[I], true).is_true())
          At += "pp=" + std::to_string(M.DevDivs[I]) + " ";
      return createStringError(
          inconvertibleErrorCode(),
          "internal error: the search found no plan but the constraint model "
          "admits %s(a memory floor is missing)",
          At.c_str());
    }
    z3::expr_vector Core = S.unsat_core();
    std::vector<bool> InCore(M.Constraints.size(), false);
    for (unsigned I = 0; I < Core.size(); ++I)
      for (unsigned J = 0; J < Tags.size(); ++J)
        if (z3::eq(Core[I], Tags[J]))
          InCore[J] = true;

    InfeasibilityExplanation X;
    const Tracked *Least = nullptr;
    std::vector<std::string> TPPhrases, PPPhrases, Conditions, Others;
    for (unsigned I = 0; I < M.Constraints.size(); ++I) {
      if (!InCore[I])
        continue;
      const Tracked &T = M.Constraints[I];
      X.Core.push_back(T.Name);
      switch (T.T) {
      case Topic::Memory:
        if (!Least || T.Bytes < Least->Bytes)
          Least = &T;
        break;
      case Topic::TP:
        TPPhrases.push_back(T.Phrase);
        break;
      case Topic::PP:
        PPPhrases.push_back(T.Phrase);
        break;
      case Topic::Other:
        Others.push_back(T.Name);
        break;
      case Topic::Structural:
        if (T.Phrase.size())
          Conditions.push_back(T.Phrase);
        break;
      }
    }
    if (!Least) {
      X.Summary = "no plan satisfies the constraints: " + join(X.Core, "; ");
      return X;
    }
    std::vector<std::string> Scope = TPPhrases;
    Scope.insert(Scope.end(), PPPhrases.begin(), PPPhrases.end());
    Scope.insert(Scope.end(), Conditions.begin(), Conditions.end());
    X.Summary = ("no plan fits: stage " + Twine(Least->Stage) + " needs " +
                 formatBytes(Bytes(Least->Bytes)) + " > " + HBM +
                 " HBM for every tp and pp" +
                 (Scope.empty() ? "" : " with " + join(Scope, " and ")))
                    .str();
    if (!Others.empty())
      X.Summary += "; given " + join(Others, ", ");
    return X;
  } catch (const z3::exception &E) {
    return createStringError(inconvertibleErrorCode(), "Z3: %s", E.msg());
  }
}

Expected<OptimumCertificate> certifyMinimumStepTime(const PlanSpaceDesc &Space,
                                                    ArrayRef<CandidateRow> Rows,
                                                    double HBMBytes) {
  OptimumCertificate Cert;
  if (Rows.empty())
    return Cert;
  try {
    z3::context C;
    ConstraintModel M(C, Space);
    z3::optimize O(C);
    for (const z3::expr &E : M.Domains)
      O.add(E);
    for (const Tracked &T : M.Constraints)
      O.add(T.E);
    // Memory is a measured fact per row (as in explanations); the step
    // time enters as the rank of the row's time among the table's distinct
    // times, which orders rows exactly as the times do and keeps the
    // problem propositional.
    std::vector<double> Times;
    for (const CandidateRow &R : Rows)
      Times.push_back(R.StepTimeS);
    std::sort(Times.begin(), Times.end());
    Times.erase(std::unique(Times.begin(), Times.end()), Times.end());
    z3::expr_vector Sel(C), Rank(C);
    for (unsigned I = 0; I < Rows.size(); ++I) {
      const CandidateRow &R = Rows[I];
      z3::expr B = C.bool_const(("row" + Twine(I)).str().c_str());
      Sel.push_back(B);
      z3::expr Is =
          M.lit(M.TP, M.DevDivs, R.TP) && M.lit(M.PP, M.DevDivs, R.PP) &&
          M.lit(M.DP, M.DevDivs, R.DP) && M.lit(M.EP, M.DevDivs, R.EP) &&
          M.lit(M.MB, M.BatchDivs, R.MB) && M.lit(M.NMB, M.BatchDivs, R.NMB) &&
          M.lit(M.VPP, M.VPPs, R.VPP) && M.lit(M.Zero, M.Zeros, R.Zero) &&
          M.lit(M.RC, M.RCs, R.Recompute) && (R.SP ? M.SP : !M.SP) &&
          (R.Balanced ? M.Balanced : !M.Balanced) &&
          (R.BF16Grad ? M.BF16 : !M.BF16) && M.lit(M.Order, M.Orders, R.Order);
      O.add(z3::implies(B, Is));
      if (R.MemoryBytes > HBMBytes)
        O.add(!B);
      int64_t Pos = std::lower_bound(Times.begin(), Times.end(), R.StepTimeS) -
                    Times.begin();
      Rank.push_back(z3::ite(B, C.int_val(Pos), C.int_val(0)));
    }
    O.add(z3::atleast(Sel, 1));
    O.add(z3::atmost(Sel, 1));
    O.minimize(z3::sum(Rank));
    z3::check_result R = O.check();
    if (R == z3::unknown)
      return createStringError(inconvertibleErrorCode(),
                               "Z3 gave up on the optimum certificate");
    if (R == z3::unsat)
      return Cert;
    z3::model Mdl = O.get_model();
    for (unsigned I = 0; I < Rows.size(); ++I)
      if (Mdl.eval(Sel[I], true).is_true()) {
        Cert.Feasible = true;
        Cert.Row = I;
        Cert.StepTimeS = Rows[I].StepTimeS;
        break;
      }
    return Cert;
  } catch (const z3::exception &E) {
    return createStringError(inconvertibleErrorCode(), "Z3: %s", E.msg());
  }
}

} // namespace loom
