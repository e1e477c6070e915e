//===- OpCostRules.h - Shared pieces of the per-op cost rules ---*- C++ -*-===//
//
// Private to cost_models/ops: the rule table computeOpCost dispatches
// through, the per-family registration functions, and the helpers the
// families share (element counts, constant operands, saved values). Each
// family file (MatmulOps.cpp, ElementwiseOps.cpp, ...) adds its rules to
// the table; OpCost.cpp owns the dispatcher and the helpers.
//
// Conventions every rule follows (see OpCost.h for the fields):
// - FLOPs count a multiply-add as 2 and one vector instruction of an
//   element-wise op as 1 (exp, ln, sqrt and reciprocal are single vector
//   instructions on the Da Vinci vector unit, as in Ascend C's Exp, Ln,
//   Sqrt and Reciprocal basic APIs).
// - Before a rule runs, the dispatcher has set HasRule, Elem, BytesRead
//   (distinct inputs, parameters included), BytesWritten (outputs),
//   ParamCount and ParamBytes from the node's static types; a rule
//   overrides the traffic only where the op touches less (Gather reads the
//   rows it gathers, Reshape aliases its input).
// - After the rule, the dispatcher zeroes BackwardFlops and SavedValues for
//   ops whose Elem is not a floating-point type: nothing to differentiate.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COST_MODELS_OPS_OPCOSTRULES_H
#define LOOM_COST_MODELS_OPS_OPCOSTRULES_H

#include "loom/Cost/OpCost.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <vector>

namespace loom {
namespace opcost {

/// Which of a node's types must be static before its rule may run.
enum class ShapePolicy {
  AllStatic,     ///< Every input and output (the common case).
  InputsStatic,  ///< Data-dependent output shapes (NonZero, Unique).
  OutputsStatic, ///< Reads only metadata of its input (Shape, Size).
  Subgraphs,     ///< Control flow: the body's nodes are checked instead.
};

/// Fills \p C for \p N; may set C.HasRule = false with a reason.
using RuleFn = void (*)(const Node &N, int64_t Opset, OpCost &C);

struct Rule {
  RuleFn Fn = nullptr;
  ShapePolicy Shapes = ShapePolicy::AllStatic;
  /// hbm_pim may run the op: a plain element-wise map (no reduction along
  /// an axis, no data movement), one output element per broadcast input
  /// element.
  bool ElementWise = false;
};

/// Keyed by Node::getQualifiedOpType(): "MatMul",
/// "com.microsoft.SimplifiedLayerNormalization".
using RuleTable = llvm::StringMap<Rule>;

/// The rule file \p QualifiedOp's rule lives in ("matmul", "elementwise",
/// ...: OpCost::Family), or "" if it has none.
llvm::StringRef getRuleFamily(llvm::StringRef QualifiedOp);

void addMatmulRules(RuleTable &T);
void addElementwiseRules(RuleTable &T);
void addNormRules(RuleTable &T);
/// LossOps.cpp; family "norm" (softmax-like vector passes).
void addLossRules(RuleTable &T);
void addReductionRules(RuleTable &T);
void addIndexingRules(RuleTable &T);
void addMovementRules(RuleTable &T);
void addConvPoolRules(RuleTable &T);
void addControlFlowRules(RuleTable &T);
/// RecurrentOps.cpp: RNN, GRU, LSTM (family "matmul").
void addRecurrentRules(RuleTable &T);
/// AttentionOps.cpp: Attention (family "matmul"), RotaryEmbedding, DFT,
/// AffineGrid, GridSample (family "elementwise").
void addAttentionRules(RuleTable &T);
void addSignalRules(RuleTable &T);
/// ClassicalMLOps.cpp: the ai.onnx.ml ops (family "control": AICPU work).
void addClassicalMLRules(RuleTable &T);

/// ElementwiseOps.cpp's table: FLOPs per output element of the element-wise
/// op \p Op (before any attribute- or operand-dependent adjustment), forward
/// and backward; false for an op not in the table.
bool getElementwiseFlops(llvm::StringRef Op, double &Forward, double &Backward);

/// The table, built once.
const RuleTable &getRuleTable();

//===----------------------------------------------------------------------===//
// Helpers (OpCost.cpp)
//===----------------------------------------------------------------------===//

/// Elements of \p V; 0 for a null (omitted) value or a non-static type.
double numElements(const Value *V);
/// Bytes of \p V; 0 for a null value or a non-static type.
double sizeInBytes(const Value *V);
/// The static dims of \p V (empty for null or non-static).
llvm::SmallVector<int64_t, 4> staticShape(const Value *V);
/// A value backward has to produce a gradient for: a floating-point value
/// that is not a constant.
bool needsGradient(const Value *V);
/// A value a node may have to save for backward: one that is not kept
/// anyway (parameters and constants live for the whole step). Any type:
/// Where saves its bool condition, Gather its int64 indices.
bool isActivation(const Value *V);
/// Adds \p V to C.SavedValues if it is an activation and not there yet.
void saveValue(OpCost &C, const Value *V);
/// \p Axis in [0, Rank) for a possibly negative ONNX axis (clamped).
unsigned normalizeAxis(int64_t Axis, unsigned Rank);
/// Marks \p C as having no rule, with \p Reason.
void setNoRule(OpCost &C, std::string Reason);
/// The widest floating-point type of the node's inputs, else of its
/// outputs, else the first input's type, else the first output's.
DataType selectElemType(const Node &N);

} // namespace opcost
} // namespace loom

#endif // LOOM_COST_MODELS_OPS_OPCOSTRULES_H
