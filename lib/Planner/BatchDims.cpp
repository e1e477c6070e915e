//===- BatchDims.cpp - Which dim of each value carries the batch ----------===//
//
// The planning graph is bound at the whole batch; the sharder emits graphs
// bound at one micro-batch. Where a rule's choice depends on a dim's size
// (sequence parallelism's token dim: the first dim tp divides), the
// evaluator takes the micro-batch's dims: the dim of each value that
// carries the batch, found here by following the graph inputs' batch dims
// through the nodes' static shapes, scaled by micro-batch / batch
// (RuleSplit.cpp, SplitContext::getTokenShape).
//
// Per node, from its first input whose batch dim is known (for MatMul the
// left operand first, for Gather the indices first):
//   Transpose      where perm puts it;
//   Reshape, Flatten, Squeeze, Unsqueeze: the output dim that starts at the
//                  same element offset (the product of the dims before it)
//                  and holds the batch whole: a merge ([b, s, h] ->
//                  [b*s, h]), or a split back to [b, s, h];
//   Gather         by indices carrying it: axis + its dim; data carrying
//                  it below the axis: the same dim, above: shifted by the
//                  indices' rank - 1;
//   MatMul         a dim other than the contracted one, right-aligned (the
//                  left operand's rows or batch dims, the right operand's
//                  columns or batch dims);
//   Gemm           the rows of A (its dim 1 when transA);
//   otherwise      the same dim right-aligned (broadcasting ops), else
//                  left-aligned (Conv, pools, norms, reductions that drop
//                  later axes), where the output dim has the same size.
// A dim holds the batch only where its size is a multiple of it. A value
// none of these reach has none: the bound graph's dims stand.
//
//===----------------------------------------------------------------------===//
#include "RuleSplit.h"

using namespace llvm;

namespace loom {
namespace rulesplit {

namespace {

SmallVector<int64_t, 4> dimsOf(const Value *V) {
  if (!V || !V->Type.isStatic())
    return {};
  return V->Type.getStaticShape();
}

/// The product of \p S's dims before \p D.
int64_t offsetOf(ArrayRef<int64_t> S, unsigned D) {
  int64_t P = 1;
  for (unsigned I = 0; I < D && I < S.size(); ++I)
    P *= S[I];
  return P;
}

/// The output dim of \p N's output \p O carrying the batch, given input
/// \p In carries it at \p D; -1 for none.
int mapDim(const Node &N, unsigned In, int D, const Value *O) {
  StringRef Op = N.getOpType();
  SmallVector<int64_t, 4> X = dimsOf(N.getInput(In)), Y = dimsOf(O);
  int RX = X.size(), RY = Y.size();
  if (D < 0 || D >= RX || RY == 0)
    return -1;
  if (Op == "Transpose") {
    Optional<std::vector<int64_t>> Perm = N.getAttrInts("perm");
    for (int I = 0; I < RY; ++I)
      if ((Perm && I < (int)Perm->size() ? (*Perm)[I] : RY - 1 - I) == D)
        return I;
    return -1;
  }
  if (Op == "Reshape" || Op == "Flatten" || Op == "Squeeze" ||
      Op == "Unsqueeze") {
    int64_t Off = offsetOf(X, D);
    for (int I = 0; I < RY; ++I)
      if (offsetOf(Y, I) == Off && Y[I] > 1)
        return I;
    return -1;
  }
  if (Op == "Gather") {
    int64_t Axis = N.getAttrInt("axis", 0);
    int RData = N.getInput(0) ? (int)N.getInput(0)->Type.getRank() : 0;
    int RIdx = N.getInput(1) ? (int)N.getInput(1)->Type.getRank() : 0;
    if (Axis < 0)
      Axis += RData;
    if (In == 1)
      return (int)Axis + D;
    if (D == Axis)
      return -1;
    return D < Axis ? D : D + RIdx - 1;
  }
  if (Op == "MatMul") {
    // The contracted dim: the left operand's last, the right's second
    // last (a vector's only one).
    if ((In == 0 && D == RX - 1) || (In == 1 && RX >= 2 && D == RX - 2) ||
        RX == 1)
      return -1;
    int I = D + RY - RX;
    return I >= 0 && I < RY ? I : -1;
  }
  if (Op == "Gemm") {
    if (In != 0)
      return -1;
    return D == (N.getAttrInt("transA", 0) ? 1 : 0) ? 0 : -1;
  }
  int Right = D + RY - RX;
  if (Right >= 0 && Right < RY && Y[Right] == X[D])
    return Right;
  if (D < RY && Y[D] == X[D])
    return D;
  return -1;
}

} // namespace

DenseMap<const Value *, int>
findBatchDims(const Graph &G, const std::map<std::string, int> &Inputs,
              int64_t Batch) {
  DenseMap<const Value *, int> Dims;
  if (Batch <= 1)
    return Dims;
  for (const Value *V : G.getInputs()) {
    auto It = Inputs.find(V->getName().str());
    SmallVector<int64_t, 4> S = dimsOf(V);
    if (It != Inputs.end() && It->second >= 0 && It->second < (int)S.size() &&
        S[It->second] == Batch)
      Dims[V] = It->second;
  }
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    // The input a batch flows from: Gather's indices first.
    SmallVector<unsigned, 4> Order;
    for (unsigned I = 0; I < N.getNumInputs(); ++I)
      Order.push_back(I);
    if (N.getOpType() == "Gather" && Order.size() == 2)
      std::swap(Order[0], Order[1]);
    for (unsigned In : Order) {
      auto It = N.getInput(In) ? Dims.find(N.getInput(In)) : Dims.end();
      if (It == Dims.end())
        continue;
      // By value: inserting the outputs' dims may grow the map.
      int From = It->second;
      for (const Value *O : N.getOutputs()) {
        int D = O ? mapDim(N, In, From, O) : -1;
        SmallVector<int64_t, 4> S = dimsOf(O);
        if (D >= 0 && D < (int)S.size() && S[D] % Batch == 0)
          Dims[O] = D;
      }
      break;
    }
  }
  return Dims;
}

} // namespace rulesplit
} // namespace loom
