//===- OpCost.cpp - Dispatcher of the per-op cost rules -------------------===//
//
// computeOpCost looks the node's qualified op type up in one table that the
// family files fill (MatmulOps.cpp, ElementwiseOps.cpp, ...), checks that
// the shapes the rule needs are static, fills the fields every rule shares
// (element type, HBM traffic, parameters) and lets the rule do the rest.
// An op without a rule, or with a shape that is not static, gets
// HasRule == false and a reason naming it: never a silent zero.
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace llvm;

namespace loom {
namespace opcost {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

double numElements(const Value *V) {
  if (!V)
    return 0;
  Optional<int64_t> N = V->Type.getNumElements();
  return N ? double(*N) : 0;
}

double sizeInBytes(const Value *V) {
  if (!V)
    return 0;
  Optional<int64_t> B = V->Type.getSizeInBytes();
  return B ? double(*B) : 0;
}

SmallVector<int64_t, 4> staticShape(const Value *V) {
  if (!V || !V->Type.isStatic())
    return {};
  return V->Type.getStaticShape();
}

bool needsGradient(const Value *V) {
  return V && isFloatingPoint(V->Type.Elem) && !isConstantNodeOutput(V);
}

bool isActivation(const Value *V) {
  return V && !V->isParameter() && !isConstantNodeOutput(V);
}

void saveValue(OpCost &C, const Value *V) {
  if (isActivation(V) && !is_contained(C.SavedValues, V))
    C.SavedValues.push_back(V);
}

unsigned normalizeAxis(int64_t Axis, unsigned Rank) {
  if (Rank == 0)
    return 0;
  if (Axis < 0)
    Axis += Rank;
  if (Axis < 0)
    return 0;
  if (Axis >= (int64_t)Rank)
    return Rank - 1;
  return (unsigned)Axis;
}

void setNoRule(OpCost &C, std::string Reason) {
  C.HasRule = false;
  C.NoRuleReason = std::move(Reason);
}

/// Rank of floating-point widths for "the widest float": f64 > f32 > the
/// 16-bit types (which tie; the first one seen wins).
static unsigned floatRank(DataType T) {
  switch (T) {
  case DataType::Double:
    return 3;
  case DataType::Float:
    return 2;
  case DataType::Float16:
  case DataType::BFloat16:
    return 1;
  default:
    return 0;
  }
}

DataType selectElemType(const Node &N) {
  auto Widest = [](ArrayRef<Value *> Vs) {
    DataType Best = DataType::Undefined;
    for (const Value *V : Vs)
      if (V && floatRank(V->Type.Elem) > floatRank(Best))
        Best = V->Type.Elem;
    return Best;
  };
  // The data operands set the rate; index and shape operands (i64) do not.
  DataType T = Widest(N.getInputs());
  if (T == DataType::Undefined)
    T = Widest(N.getOutputs());
  if (T != DataType::Undefined)
    return T;
  for (const Value *V : N.getInputs())
    if (V && V->Type.Elem != DataType::Undefined)
      return V->Type.Elem;
  for (const Value *V : N.getOutputs())
    if (V && V->Type.Elem != DataType::Undefined)
      return V->Type.Elem;
  return DataType::Undefined;
}

namespace {
/// The rules, and for each op the family file that added it.
struct Tables {
  RuleTable Rules;
  StringMap<StringRef> Families;
};

const Tables &getTables() {
  // Built once on first use (thread-safe static initialization); the
  // StringMaps are only looked up, never iterated for output, so their
  // order does not matter for determinism.
  static const Tables All = [] {
    Tables T;
    // Each family file's ops are named after it (OpCost::Family).
    auto Add = [&T](void (*AddRules)(RuleTable &), StringRef Family) {
      AddRules(T.Rules);
      for (auto &Entry : T.Rules)
        T.Families.try_emplace(Entry.first(), Family);
    };
    Add(addMatmulRules, "matmul");
    Add(addAttentionRules, "matmul");
    Add(addRecurrentRules, "matmul");
    Add(addElementwiseRules, "elementwise");
    Add(addSignalRules, "elementwise");
    Add(addNormRules, "norm");
    Add(addLossRules, "norm");
    Add(addReductionRules, "reduction");
    Add(addIndexingRules, "indexing");
    Add(addMovementRules, "movement");
    Add(addConvPoolRules, "conv");
    Add(addControlFlowRules, "control");
    Add(addClassicalMLRules, "control");
    return T;
  }();
  return All;
}
} // namespace

const RuleTable &getRuleTable() { return getTables().Rules; }

StringRef getRuleFamily(StringRef QualifiedOp) {
  return getTables().Families.lookup(QualifiedOp);
}

} // namespace opcost

using namespace opcost;

/// The first value among \p Vs whose type is not static, or null.
static const Value *findNonStatic(ArrayRef<Value *> Vs) {
  for (const Value *V : Vs)
    if (V && (!V->Type.isStatic() || !V->Type.getNumElements()))
      return V;
  return nullptr;
}

OpCost computeOpCost(const Node &N, int64_t Opset) {
  OpCost C;
  std::string Op = N.getQualifiedOpType();
  const RuleTable &Table = getRuleTable();
  auto It = Table.find(Op);
  if (It == Table.end()) {
    setNoRule(C, "no cost rule for op '" + Op + "'");
    return C;
  }
  const Rule &R = It->second;

  const Value *Bad = nullptr;
  switch (R.Shapes) {
  case ShapePolicy::AllStatic:
    Bad = findNonStatic(N.getInputs());
    if (!Bad)
      Bad = findNonStatic(N.getOutputs());
    break;
  case ShapePolicy::InputsStatic:
    Bad = findNonStatic(N.getInputs());
    break;
  case ShapePolicy::OutputsStatic:
    Bad = findNonStatic(N.getOutputs());
    break;
  case ShapePolicy::Subgraphs:
    break;
  }
  if (Bad) {
    setNoRule(C, "shape of '" + Bad->getName().str() + "' is not static (" +
                     Bad->Type.str() + ") at " + Op +
                     (N.getName().empty() ? std::string()
                                          : " '" + N.getName().str() + "'"));
    return C;
  }

  C.HasRule = true;
  C.Family = getRuleFamily(Op);
  C.Elem = selectElemType(N);
  if (R.Shapes != ShapePolicy::Subgraphs) {
    // Distinct values: Mul(x, x) streams x once.
    SmallPtrSet<const Value *, 4> Seen;
    for (const Value *V : N.getInputs()) {
      if (!V || !Seen.insert(V).second)
        continue;
      C.BytesRead += sizeInBytes(V);
      if (V->isParameter()) {
        C.ParamCount += numElements(V);
        C.ParamBytes += sizeInBytes(V);
      }
    }
    for (const Value *V : N.getOutputs())
      C.BytesWritten += sizeInBytes(V);
  }

  R.Fn(N, Opset, C);
  if (!C.HasRule) {
    OpCost Fail;
    setNoRule(Fail, C.NoRuleReason);
    return Fail;
  }
  if (!isFloatingPoint(C.Elem)) {
    C.BackwardFlops = 0;
    C.SavedValues.clear();
  }
  return C;
}

bool isElementwiseOp(const Node &N) {
  const RuleTable &Table = getRuleTable();
  auto It = Table.find(N.getQualifiedOpType());
  return It != Table.end() && It->second.ElementWise;
}

} // namespace loom
