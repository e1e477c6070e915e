//===- ControlFlowOps.cpp - Cost rules for control flow and shape ops -----===//
//
// Loop, If and Scan cost what their bodies cost: every body node is costed
// with computeOpCost itself (so nested control flow recurses) and the sums
// are multiplied by the number of body executions:
//   Loop: the max-trip-count input M when it is a constant (a Constant
//         node's output or a parameter with data) and a plausible bound;
//         otherwise 1 iteration, said in OpCost::Note. M is an upper bound:
//         a loop may exit early through its condition.
//   If:   the element-wise maximum of the two branches (an upper bound for
//         whichever runs).
//   Scan: the body times the scan length (the first scan input's size
//         along its scan axis; batch x sequence for opset 8).
// A body node without a rule makes the whole op ruleless, with the inner
// reason. Parameters the bodies read count once, however many iterations.
// SavedValues lists one iteration's saved values (the body's own values);
// the unit is Control: AICPU work (DESIGN §5).
//
// Shape bookkeeping is tiny control work (Shape, Size, Range) or free
// (Constant: its bytes are part of the graph). ConstantOfShape fills its
// output (memory unit). NonZero and Unique have data-dependent output
// shapes: only their inputs must be static, and when the output is not,
// its size is bounded by the input (every element selected / unique).
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

/// A max-trip-count above this is a while-loop's "no bound" (exporters
/// write INT64_MAX), not a count.
constexpr int64_t MaxPlausibleTrips = int64_t(1) << 31;

/// The summed cost of one execution of a graph's nodes.
struct BodyCost {
  OpCost Sum;
  /// Distinct parameters read anywhere inside (recursively).
  SmallPtrSet<const Value *, 8> Params;
};

void collectParams(const Graph &G, SmallPtrSetImpl<const Value *> &Params) {
  for (const auto &Nd : G.getNodes()) {
    for (const Value *V : Nd->getInputs())
      if (V && V->isParameter())
        Params.insert(V);
    for (const Attribute &A : Nd->getAttributes())
      for (const auto &Sub : A.Gs)
        collectParams(*Sub, Params);
  }
}

/// Rank of floating-point widths (see selectElemType).
unsigned floatWidth(DataType T) {
  return isFloatingPoint(T) ? getDataTypeSize(T) : 0;
}

/// Costs every node of \p G; false (with C.NoRuleReason) if one has no rule.
bool costBody(const Graph &G, int64_t Opset, StringRef What, BodyCost &B) {
  OpCost &S = B.Sum;
  S.HasRule = true;
  for (const auto &Nd : G.getNodes()) {
    OpCost NC = computeOpCost(*Nd, Opset);
    if (!NC.HasRule) {
      setNoRule(S, What.str() + ": " + NC.NoRuleReason);
      return false;
    }
    S.Flops += NC.Flops;
    S.BackwardFlops += NC.BackwardFlops;
    S.BytesRead += NC.BytesRead;
    S.BytesWritten += NC.BytesWritten;
    for (const Value *V : NC.SavedValues)
      if (!is_contained(S.SavedValues, V))
        S.SavedValues.push_back(V);
    // The widest float type sets the rate, as for a single node.
    if (S.Elem == DataType::Undefined ||
        floatWidth(NC.Elem) > floatWidth(S.Elem))
      S.Elem = NC.Elem;
    if (!NC.Note.empty())
      S.Note += (S.Note.empty() ? "" : "; ") + NC.Note;
  }
  collectParams(G, B.Params);
  return true;
}

/// The subgraph in attribute \p Name, or null.
const Graph *getSubgraph(const Node &N, StringRef Name) {
  const Attribute *A = N.getAttribute(Name);
  if (!A || A->K != Attribute::Kind::Graph || A->Gs.size() != 1)
    return nullptr;
  return A->Gs.front().get();
}

/// Fills \p C from a body cost executed \p Trips times.
void applyBody(const Node &N, const BodyCost &B, double Trips, OpCost &C) {
  const OpCost &S = B.Sum;
  C.Unit = ComputeUnit::Control;
  C.TripCount = Trips;
  C.Flops = S.Flops * Trips;
  C.BackwardFlops = S.BackwardFlops * Trips;
  C.BytesRead = S.BytesRead * Trips;
  C.BytesWritten = S.BytesWritten * Trips;
  C.SavedValues = S.SavedValues;
  if (S.Elem != DataType::Undefined)
    C.Elem = S.Elem;
  SmallPtrSet<const Value *, 8> Params(B.Params.begin(), B.Params.end());
  for (const Value *V : N.getInputs())
    if (V && V->isParameter())
      Params.insert(V);
  // Sum in a fixed order: a SmallPtrSet iterates by address, and double
  // sums depend on the order.
  SmallVector<const Value *, 8> Sorted(Params.begin(), Params.end());
  llvm::sort(Sorted, [](const Value *A, const Value *B) {
    return A->getName() < B->getName();
  });
  C.ParamCount = C.ParamBytes = 0;
  for (const Value *V : Sorted) {
    C.ParamCount += numElements(V);
    C.ParamBytes += sizeInBytes(V);
  }
  if (!S.Note.empty())
    C.Note += (C.Note.empty() ? "" : "; ") + S.Note;
}

std::string describe(const Node &N) {
  return N.getOpType().str() +
         (N.getName().empty() ? "" : " '" + N.getName().str() + "'");
}

void costLoop(const Node &N, int64_t Opset, OpCost &C) {
  const Graph *Body = getSubgraph(N, "body");
  if (!Body) {
    setNoRule(C, describe(N) + " has no body");
    return;
  }
  double Trips = 1;
  const Value *M = N.getInput(0);
  Optional<std::vector<int64_t>> MV = getConstantInts(M);
  if (MV && MV->size() == 1 && (*MV)[0] >= 0 && (*MV)[0] < MaxPlausibleTrips) {
    Trips = double((*MV)[0]);
  } else {
    C.Note =
        "trip count of " + describe(N) + " is not a constant" +
        (MV && MV->size() == 1 ? " bound (max " + std::to_string((*MV)[0]) + ")"
                               : std::string()) +
        "; costed as 1 iteration";
  }
  BodyCost B;
  if (!costBody(*Body, Opset, describe(N) + " body", B)) {
    setNoRule(C, B.Sum.NoRuleReason);
    return;
  }
  applyBody(N, B, Trips, C);
}

void costIf(const Node &N, int64_t Opset, OpCost &C) {
  const Graph *Then = getSubgraph(N, "then_branch");
  const Graph *Else = getSubgraph(N, "else_branch");
  if (!Then || !Else) {
    setNoRule(C, describe(N) + " lacks a branch");
    return;
  }
  BodyCost T, E;
  if (!costBody(*Then, Opset, describe(N) + " then_branch", T)) {
    setNoRule(C, T.Sum.NoRuleReason);
    return;
  }
  if (!costBody(*Else, Opset, describe(N) + " else_branch", E)) {
    setNoRule(C, E.Sum.NoRuleReason);
    return;
  }
  // Element-wise maximum, then the union of what either branch reads.
  OpCost &S = T.Sum;
  const OpCost &O = E.Sum;
  S.Flops = std::max(S.Flops, O.Flops);
  S.BackwardFlops = std::max(S.BackwardFlops, O.BackwardFlops);
  S.BytesRead = std::max(S.BytesRead, O.BytesRead);
  S.BytesWritten = std::max(S.BytesWritten, O.BytesWritten);
  for (const Value *V : O.SavedValues)
    if (!is_contained(S.SavedValues, V))
      S.SavedValues.push_back(V);
  if (S.Elem == DataType::Undefined || floatWidth(O.Elem) > floatWidth(S.Elem))
    S.Elem = O.Elem;
  if (!O.Note.empty())
    S.Note += (S.Note.empty() ? "" : "; ") + O.Note;
  T.Params.insert(E.Params.begin(), E.Params.end());
  applyBody(N, T, 1, C);
}

void costScan(const Node &N, int64_t Opset, OpCost &C) {
  const Graph *Body = getSubgraph(N, "body");
  int64_t NumScan = N.getAttrInt("num_scan_inputs", 0);
  if (!Body || NumScan <= 0 || NumScan > (int64_t)N.getNumInputs()) {
    setNoRule(C, describe(N) + " has no body or no scan inputs");
    return;
  }
  const Value *First = N.getInput(N.getNumInputs() - NumScan);
  SmallVector<int64_t, 4> S = staticShape(First);
  if (S.empty()) {
    setNoRule(C, "shape of '" + (First ? First->getName().str() : "") +
                     "' is not static at " + describe(N));
    return;
  }
  double Trips;
  if (Opset < 9) {
    // Opset 8: [batch, sequence, ...], the body runs per batch element
    // and step.
    Trips = S.size() >= 2 ? double(S[0]) * double(S[1]) : double(S[0]);
  } else {
    int64_t Axis = 0;
    if (Optional<std::vector<int64_t>> Axes = N.getAttrInts("scan_input_axes"))
      if (!Axes->empty())
        Axis = Axes->front();
    Trips = double(S[normalizeAxis(Axis, S.size())]);
  }
  BodyCost B;
  if (!costBody(*Body, Opset, describe(N) + " body", B)) {
    setNoRule(C, B.Sum.NoRuleReason);
    return;
  }
  applyBody(N, B, Trips, C);
}

/// Shape, Size: read only the input's metadata; write a few int64s.
void costShape(const Node &N, int64_t, OpCost &C) {
  C.Unit = ComputeUnit::Control;
  C.BytesRead = 0;
  if (const Value *Out = N.getOutput(0))
    C.Elem = Out->Type.Elem;
}

/// Constant: its value is part of the graph; nothing runs.
void costConstant(const Node &, int64_t, OpCost &C) {
  C.Unit = ComputeUnit::None;
  C.BytesRead = C.BytesWritten = 0;
}

/// ConstantOfShape: fills the output with one value (memory unit); the
/// output's type sets Elem.
void costConstantOfShape(const Node &N, int64_t, OpCost &C) {
  C.Unit = ComputeUnit::Memory;
  C.BytesRead = 0;
  if (const Value *Out = N.getOutput(0))
    C.Elem = Out->Type.Elem;
}

/// Range: one add per output element, scalar-ish control work.
void costRange(const Node &N, int64_t, OpCost &C) {
  C.Unit = ComputeUnit::Control;
  C.Flops = numElements(N.getOutput(0));
  if (const Value *Out = N.getOutput(0))
    C.Elem = Out->Type.Elem;
}

/// NonZero: a compare per input element; writes [rank, count] int64
/// indices, at most rank * numel.
void costNonZero(const Node &N, int64_t, OpCost &C) {
  const Value *X = N.getInput(0), *Out = N.getOutput(0);
  C.Unit = ComputeUnit::Control;
  C.Flops = numElements(X);
  if (!Out || !Out->Type.isStatic()) {
    C.BytesWritten =
        double(std::max(1u, X->Type.getRank())) * numElements(X) * 8;
    C.Note = "NonZero output bounded by every element being non-zero";
  }
}

/// Unique: a sort, n log2 n compares; outputs bounded by n elements (Y)
/// and n int64s each (indices, inverse_indices, counts).
void costUnique(const Node &N, int64_t, OpCost &C) {
  const Value *X = N.getInput(0);
  double Elems = numElements(X);
  C.Unit = ComputeUnit::Control;
  C.Flops = Elems * std::max(1.0, std::log2(std::max(Elems, 1.0)));
  bool AllStatic = all_of(
      N.getOutputs(), [](const Value *V) { return !V || V->Type.isStatic(); });
  if (AllStatic)
    return;
  C.BytesWritten = 0;
  for (unsigned I = 0; I < N.getNumOutputs(); ++I)
    if (N.getOutput(I))
      C.BytesWritten += I == 0 ? sizeInBytes(X) : Elems * 8;
  C.Note = "Unique outputs bounded by every element being unique";
}

} // namespace

void addControlFlowRules(RuleTable &T) {
  T["Loop"] = {costLoop, ShapePolicy::Subgraphs};
  T["If"] = {costIf, ShapePolicy::Subgraphs};
  T["Scan"] = {costScan, ShapePolicy::Subgraphs};
  T["Shape"] = {costShape, ShapePolicy::OutputsStatic};
  T["Size"] = {costShape, ShapePolicy::OutputsStatic};
  T["Constant"] = {costConstant};
  T["ConstantOfShape"] = {costConstantOfShape};
  T["Range"] = {costRange};
  T["NonZero"] = {costNonZero, ShapePolicy::InputsStatic};
  T["Unique"] = {costUnique, ShapePolicy::InputsStatic};
}

} // namespace opcost
} // namespace loom
