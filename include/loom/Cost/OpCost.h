//===- OpCost.h - Per-operator cost rules ------------------------*- C++
//-*-===//
//
// What one node costs, independent of where it runs: FLOPs, HBM traffic,
// parameters, and the activations it keeps for backward. Rules live in
// cost_models/ops/, one family per file; a node without a rule has
// HasRule == false and is reported by name, never silently zero.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_COST_OPCOST_H
#define LOOM_COST_OPCOST_H

#include "loom/IR/Graph.h"
#include "llvm/ADT/SmallVector.h"

namespace loom {

/// Which engine of a device the op's arithmetic needs.
enum class ComputeUnit {
  Cube,    ///< Matrix unit: MatMul, Gemm, Conv, Einsum-as-matmul.
  Vector,  ///< Element-wise, norms, softmax, reductions.
  Memory,  ///< Pure data movement: Transpose, Concat, Gather, Slice, ...
  Control, ///< Control flow and shape bookkeeping (Loop, If, Shape, ...).
  None,    ///< Free: Constant, Identity, Reshape of contiguous data.
};
llvm::StringRef getComputeUnitName(ComputeUnit U);

/// The matrix-unit view of a matmul-like op: Batch x [M,K] * [K,N].
struct MatmulShape {
  int64_t Batch = 1, M = 0, N = 0, K = 0;
  /// The second operand is one matrix broadcast over Batch (activations
  /// times a weight): its gradient contracts over Batch x M.
  bool SharedB = false;
};

struct OpCost {
  /// False when no rule knows this op (or its shapes are not static).
  bool HasRule = false;
  /// Why there is no rule, for reports ("no cost rule for com.x.Foo").
  std::string NoRuleReason;
  ComputeUnit Unit = ComputeUnit::None;
  /// The rule's op family: the cost_models/ops file it lives in
  /// ("matmul", "elementwise", "norm", ...; getOpFamilyNames in
  /// HardwareModel.h), which keys a class's efficiency curves.
  llvm::StringRef Family;
  /// Element type that sets the throughput (the widest float input).
  DataType Elem = DataType::Undefined;
  /// Cube ops: the matrix unit's format when the precision recipe computes
  /// matmuls in one with no storage type (tf32; an fp8 recipe's format);
  /// empty: Elem's name. The throughput key the cube is costed at.
  std::string CubeFormat;
  /// Forward FLOPs (multiply-add = 2 FLOPs).
  double Flops = 0;
  /// Backward FLOPs: 2x forward for matmuls (grad wrt input and weight),
  /// per-op rules otherwise; 0 for ops with nothing to differentiate.
  double BackwardFlops = 0;
  /// HBM bytes read and written by one forward execution (parameters
  /// included in BytesRead).
  double BytesRead = 0, BytesWritten = 0;
  /// HBM bytes of one backward execution where the rule counts them
  /// (the losses, cost_models/ops/LossOps.cpp); 0: twice the forward's.
  double BackwardBytes = 0;
  /// Parameters this node reads directly: elements and bytes.
  double ParamCount = 0, ParamBytes = 0;
  /// Values this op must keep for its backward pass (inputs or outputs);
  /// the memory model deduplicates them across nodes.
  llvm::SmallVector<const Value *, 2> SavedValues;
  /// Set for Cube ops.
  MatmulShape MM;
  /// Control flow: body executions folded into the numbers above.
  double TripCount = 1;
  /// Recurrent ops (RNN, GRU, LSTM): the time steps run one after another,
  /// each its own kernel launch; MM is one step's product. 1 otherwise.
  double Steps = 1;
  /// A fused kernel's cost (loom/Cost/FusedKernels.h) sits on one node of
  /// its region, the anchor: the fraction of the cube peak its forward and
  /// backward kernels reach, which replaces the class efficiency and the
  /// shape efficiency (0: an ordinary op); the FLOPs its backward
  /// recomputes (timed, not model FLOPs); its kernel name and the region's
  /// nodes in graph order. The other members cost nothing and name the
  /// anchor in FusedInto.
  double KernelEfficiency = 0, BackwardKernelEfficiency = 0;
  double RecomputeFlops = 0;
  std::string FusedKernel;
  std::vector<const Node *> FusedMembers;
  const Node *FusedInto = nullptr;
  /// What the rule assumed where the graph did not say (a Loop whose trip
  /// count is not a constant is costed as one iteration, ...); empty when
  /// nothing was assumed. For reports.
  std::string Note;
};

/// Computes the cost of \p N; \p Opset is the model's default-domain opset
/// (some operands moved from attributes to inputs across versions).
OpCost computeOpCost(const Node &N, int64_t Opset);

/// True if \p N is a plain element-wise map (Add, Mul, Where, Relu, ...):
/// no reduction along an axis and no data movement, the only kind of op
/// compute next to HBM (hbm_pim) can run.
bool isElementwiseOp(const Node &N);

} // namespace loom

#endif // LOOM_COST_OPCOST_H
