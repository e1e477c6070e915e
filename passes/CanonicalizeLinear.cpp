//===- CanonicalizeLinear.cpp - Gemm and MatMul + Add as one form ---------===//
//
// torch.onnx writes nn.Linear as `Gemm(x, W, b, transB=1)` when x is 2-D
// and as `MatMul(x, W^T) + Add(b)` when it is not (the transposed weight
// stored as an initializer of its own); onnx.helper code writes either.
// The canonical form is MatMul + Add: it is the only one that exists for
// inputs of rank > 2, the sharding rules split MatMul and a bias on its
// last axis with the element-wise rule, and the costs then charge the
// bias Add the same whatever the writing.
//
//  - `Gemm(A, B[, C])` with transA = 0, alpha = 1 and beta = 1 (what
//    Linear exports) becomes `MatMul(A, B)` and, with a bias,
//    `Add(MatMul(A, B), C)`: Gemm broadcasts C to [M, N] exactly as Add
//    does. With transB = 1, a weight B read by this Gemm only becomes its
//    transpose (data and type: the parameter torch writes for rank > 2);
//    any other B is read through a `Transpose(perm=[1, 0])`. Scaled Gemms
//    (alpha or beta not 1) and transA = 1 stay: no exporter of a Linear
//    writes them, and their rewrite would add Mul nodes.
//  - `Add(bias, MatMul(..))` becomes `Add(MatMul(..), bias)`: addition is
//    commutative elementwise and the broadcast result is the same, so the
//    product comes first whichever order the exporter wrote.
//
//===----------------------------------------------------------------------===//
#include "CanonicalizeRewrites.h"

#include "loom/IR/TransposedTensorData.h"
#include "loom/Support/DataType.h"
#include "llvm/Support/Error.h"

using namespace llvm;

namespace loom {
namespace {

/// The data of a 2-D [R, C] parameter seen as [C, R] (a view: nothing is
/// copied until read), or None when its element size is not whole bytes or
/// its size does not match (then the caller reads the weight through a
/// Transpose).
Optional<std::shared_ptr<const TensorData>>
transposeData(const Value &W, int64_t R, int64_t C) {
  if (!W.Data)
    return std::shared_ptr<const TensorData>(); // Shape-only: dims only.
  unsigned Bits = getDataTypeBits(W.Type.Elem);
  if (Bits % 8 != 0)
    return None;
  unsigned Size = Bits / 8;
  if (W.Data->getSize() != uint64_t(R) * uint64_t(C) * Size)
    return None;
  return std::shared_ptr<const TensorData>(
      std::make_shared<TransposedTensorData>(W.Data, R, C, Size));
}

/// B read as its transpose, for a Gemm at \p Pos; advances \p Pos past a
/// Transpose it inserts. Null if that fails.
Value *transposedWeight(CanonContext &Ctx, Value *B, unsigned &Pos) {
  Graph &G = Ctx.G;
  SmallVector<int64_t, 4> S = B->Type.getStaticShape();
  if (B->isParameter() && B->getGraph() == &G && Ctx.hasOneUse(B) &&
      B->Type.isStatic())
    if (auto D = transposeData(*B, S[0], S[1])) {
      std::swap(B->Type.Dims[0], B->Type.Dims[1]);
      B->Data = std::move(*D);
      return B;
    }
  Expected<Node *> T =
      G.insertNode(Pos, "Transpose", "", "", {B},
                   {G.getFreshName((B->getName() + "_T").str())});
  if (!T) {
    consumeError(T.takeError());
    return nullptr;
  }
  ++Pos;
  Attribute Perm;
  Perm.Name = "perm";
  Perm.K = Attribute::Kind::Ints;
  Perm.Is = {1, 0};
  (*T)->addAttribute(std::move(Perm));
  Value *Out = (*T)->getOutput(0);
  Out->Type = B->Type;
  if (Out->Type.getRank() == 2)
    std::swap(Out->Type.Dims[0], Out->Type.Dims[1]);
  return Out;
}

} // namespace

bool rewriteGemm(CanonContext &Ctx, unsigned &Pos, unsigned &Gemms) {
  Graph &G = Ctx.G;
  Node &N = *G.getNodes()[Pos];
  Value *Out = N.getNumOutputs() == 1 ? N.getOutput(0) : nullptr;
  if (!Out || N.getNumInputs() < 2 || N.getNumInputs() > 3 || !N.getInput(0) ||
      !N.getInput(1))
    return false;
  if (N.getAttrInt("transA", 0) != 0 || N.getAttrFloat("alpha", 1) != 1 ||
      N.getAttrFloat("beta", 1) != 1)
    return false;
  Value *A = N.getInput(0), *B = N.getInput(1);
  Value *C = N.getNumInputs() == 3 ? N.getInput(2) : nullptr;
  if (A->Type.getRank() != 2 || B->Type.getRank() != 2 || !Out->Type.HasShape)
    return false;
  if (N.getAttrInt("transB", 0) != 0) {
    // A weight the exporter deduplicated is read through Identity nodes
    // that this sweep gives their own parameters: wait for the next
    // round, when this Gemm is its only reader and it transposes in place
    // as the other layers' weights do.
    if (B->isParameter() && any_of(Ctx.usersOf(B), [](const Node *U) {
          return U->getOpType() == "Identity";
        }))
      return false;
    B = transposedWeight(Ctx, B, Pos);
    if (!B)
      return false;
  }
  N.setAttributes({});
  if (!C) {
    N.setOpType("MatMul");
    N.setInputs({A, B});
    ++Gemms;
    return true;
  }
  // Named after the Gemm (unnamed nodes stay unnamed: the other writing
  // of the model names nothing either).
  std::string NodeName =
      N.getName().empty() ? "" : (N.getName() + "_matmul").str();
  Expected<Node *> MM =
      G.insertNode(Pos, "MatMul", "", NodeName, {A, B},
                   {G.getFreshName((Out->getName() + "_matmul").str())});
  if (!MM) {
    consumeError(MM.takeError());
    return false;
  }
  ++Pos;
  (*MM)->getOutput(0)->Type = Out->Type;
  // The Gemm node (now at Pos) becomes the bias Add, keeping its result.
  Node &Add = *G.getNodes()[Pos];
  Add.setOpType("Add");
  Add.setInputs({(*MM)->getOutput(0), C});
  ++Gemms;
  return true;
}

bool rewriteBiasOrder(CanonContext &Ctx, unsigned Pos, unsigned &Swapped) {
  Node &N = *Ctx.G.getNodes()[Pos];
  if (N.getNumInputs() != 2 || !N.getInput(0) || !N.getInput(1))
    return false;
  const Node *D = N.getInput(1)->getDefiningNode();
  if (!D || (D->getOpType() != "MatMul" && D->getOpType() != "Gemm") ||
      !isConstantLike(N.getInput(0)))
    return false;
  Value *Bias = N.getInput(0);
  N.setInputs({N.getInput(1), Bias});
  ++Swapped;
  return true;
}

} // namespace loom
