//===- ExpandAttention.cpp - ONNX's Attention op as the ops it computes ---===//
//
// cp_algo=ring lowers an attention from its own ops (RingAttention.cpp: the
// scores MatMul, the chain of scale and mask up to the Softmax, the
// context MatMul), so ONNX's Attention op (opset 23) is written as those
// ops first, in the micro-batch graph only (the planner costs the fused
// op). So is an op whose K/V heads Ulysses' all-to-alls cannot split
// (tp x cp does not divide them): its K and V then move repeated to the
// query heads, as the cost model prices (getUlyssesKVBytes) and as
// MindSpeed's --kv-head-repeat-before-uly-alltoall does, through the
// explicit repeat (Propagation.cpp hoistAllToAlls). Per the operator's
// definition (onnx/defs/nn/defs.cc, Attention-23),
//
//   K', V' = K, V with each K/V head repeated to its q_num_heads /
//            kv_num_heads query heads (Unsqueeze, Expand, Reshape: query
//            head h reads K/V head h / (q_num_heads / kv_num_heads))
//   S = MatMul(Q, Transpose(K')) * scale   (scale: 1 / sqrt(head size)
//                                           unless given)
//   S = S + causal     (is_causal: -inf above the diagonal)
//   S = S + attn_mask  (float), Where(attn_mask, S, -inf) (bool)
//   Y = MatMul(Softmax(S, axis -1), V')
//
// 3-D inputs [B, S, H*D] are cut into heads first (Reshape [0, 0, H, D],
// Transpose to [B, H, S, D]) and the output put back. Exact: the same
// arithmetic, the softmax in the input type (softmax_precision is a
// hint). Left as it is (the ring then reads K and V gathered, with a
// warning): past key/value inputs, the present or qk_matmul outputs in use,
// softcap, queries and keys of different lengths, dynamic shapes.
//
//===----------------------------------------------------------------------===//
#include "ShardAttrs.h"
#include "loom/IR/AttentionOp.h"
#include "loom/IR/NodeLabel.h"
#include "loom/Shard/Sharding.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <limits>

using namespace llvm;

namespace loom {
namespace {

/// Inserts the ops of one Attention node before it.
class AttentionExpander {
public:
  AttentionExpander(Graph &G, Node &A, unsigned Pos, const AttentionDims &D)
      : G(G), A(A), Pos(Pos), D(D), Elem(A.getInput(0)->Type.Elem),
        Base(A.getOutput(0)->getName().str()) {}

  void run() {
    Value *Q = toHeads(A.getInput(0), D.QHeads, D.HeadSize);
    Value *K =
        repeat(toHeads(A.getInput(1), D.KVHeads, D.HeadSize), D.HeadSize);
    Value *V =
        repeat(toHeads(A.getInput(2), D.KVHeads, D.VHeadSize), D.VHeadSize);
    TensorType ST = typeOf({D.Batch, D.QHeads, D.QSeq, D.KVSeq});
    Value *KT =
        add("Transpose", {K}, typeOf({D.Batch, D.QHeads, D.HeadSize, D.KVSeq}),
            intsAttr("perm", {0, 1, 3, 2}));
    Value *S = add("MatMul", {Q, KT}, ST);
    double Scale = A.getAttrFloat("scale", 0);
    if (Scale == 0)
      Scale = 1.0 / std::sqrt((double)D.HeadSize);
    S = add("Mul", {S, constant(Tensor::makeFromDoubles(Elem, {}, {Scale}))},
            ST);
    double NegInf = -std::numeric_limits<double>::infinity();
    if (A.getAttrInt("is_causal", 0)) {
      std::vector<double> M((size_t)(D.QSeq * D.KVSeq), 0.0);
      for (int64_t I = 0; I < D.QSeq; ++I)
        for (int64_t J = I + 1; J < D.KVSeq; ++J)
          M[I * D.KVSeq + J] = NegInf;
      S = add(
          "Add",
          {S, constant(Tensor::makeFromDoubles(Elem, {D.QSeq, D.KVSeq}, M))},
          ST);
    }
    if (Value *Mask = getMask()) {
      if (Mask->Type.Elem == DataType::Bool)
        S = add(
            "Where",
            {Mask, S, constant(Tensor::makeFromDoubles(Elem, {}, {NegInf}))},
            ST);
      else
        S = add("Add", {S, Mask}, ST);
    }
    Value *P = add("Softmax", {S}, ST, intAttr("axis", -1));
    TensorType YT = typeOf({D.Batch, D.QHeads, D.QSeq, D.VHeadSize});
    if (D.Rank == 4) {
      finish("MatMul", {P, V});
      return;
    }
    Value *Y = add("MatMul", {P, V}, YT);
    Y = add("Transpose", {Y}, typeOf({D.Batch, D.QSeq, D.QHeads, D.VHeadSize}),
            intsAttr("perm", {0, 2, 1, 3}));
    finish("Reshape", {Y, shape({0, 0, D.QHeads * D.VHeadSize})});
  }

private:
  TensorType typeOf(ArrayRef<int64_t> Dims) const {
    TensorType T;
    T.Elem = Elem;
    T.HasShape = true;
    for (int64_t X : Dims)
      T.Dims.push_back(Dim(X));
    return T;
  }

  Node *insert(StringRef Op, ArrayRef<Value *> In, StringRef Out,
               Optional<Attribute> Attr) {
    std::string Name =
        A.getName().empty()
            ? std::string()
            : (A.getName() + "." + Op + "." + Twine(NumInserted)).str();
    ++NumInserted;
    Node *N = cantFail(G.insertNode(Pos++, Op, "", Name, In, {Out.str()}));
    if (Attr)
      N->addAttribute(std::move(*Attr));
    N->Layer = A.Layer;
    N->Stage = A.Stage;
    N->DeviceClass = A.DeviceClass;
    return N;
  }

  Value *add(StringRef Op, ArrayRef<Value *> In, TensorType T,
             Optional<Attribute> Attr = None) {
    std::string Out = G.getFreshName(Base + ".attn." + Op.lower());
    Value *V = insert(Op, In, Out, std::move(Attr))->getOutput(0);
    V->Type = std::move(T);
    return V;
  }

  /// The last op takes over the Attention's output.
  void finish(StringRef Op, ArrayRef<Value *> In) {
    Node *N = insert(Op, In, "", None);
    G.moveResult(A.getOutput(0), N, 0);
  }

  Value *constant(Tensor T) {
    TensorType Ty = T.Type;
    return add("Constant", {}, Ty, tensorAttr("value", std::move(T)));
  }

  Value *shape(ArrayRef<int64_t> Dims) {
    return constant(Tensor::makeInt64({(int64_t)Dims.size()}, Dims));
  }

  /// \p X as [B, H, S, Dh]: 4-D inputs as they are, 3-D ones cut.
  Value *toHeads(Value *X, int64_t H, int64_t Dh) {
    if (D.Rank == 4)
      return X;
    int64_t S = X->Type.Dims[1].Size;
    X = add("Reshape", {X, shape({0, 0, H, Dh})}, typeOf({D.Batch, S, H, Dh}));
    return add("Transpose", {X}, typeOf({D.Batch, H, S, Dh}),
               intsAttr("perm", {0, 2, 1, 3}));
  }

  /// K or V's heads repeated to the query heads (HF's repeat_kv).
  Value *repeat(Value *X, int64_t Dh) {
    int64_t Rep = D.QHeads / D.KVHeads;
    if (Rep == 1)
      return X;
    X = add("Unsqueeze", {X, shape({2})},
            typeOf({D.Batch, D.KVHeads, 1, D.KVSeq, Dh}));
    X = add("Expand", {X, shape({D.Batch, D.KVHeads, Rep, D.KVSeq, Dh})},
            typeOf({D.Batch, D.KVHeads, Rep, D.KVSeq, Dh}));
    return add("Reshape", {X, shape({D.Batch, D.QHeads, D.KVSeq, Dh})},
               typeOf({D.Batch, D.QHeads, D.KVSeq, Dh}));
  }

  Value *getMask() const {
    return A.getNumInputs() > 3 ? A.getInput(3) : nullptr;
  }

  Graph &G;
  Node &A;
  unsigned Pos;
  const AttentionDims &D;
  DataType Elem;
  std::string Base;
  /// Node names: the Attention's, the op and a count (ONNX Runtime wants
  /// them unique).
  unsigned NumInserted = 0;
};

/// Why \p A is left as it is; empty when it is expanded.
std::string getUnexpandedReason(const Node &A, const AttentionDims &D,
                                const DenseMap<const Value *, unsigned> &Uses) {
  for (unsigned I = 4; I < A.getNumInputs(); ++I)
    if (A.getInput(I))
      return "it reads a past key/value";
  for (unsigned I = 1; I < A.getNumOutputs(); ++I)
    if (A.getOutput(I) && Uses.lookup(A.getOutput(I)))
      return "its present key/value or qk_matmul output is read";
  if (A.getAttrFloat("softcap", 0) != 0)
    return "it has a softcap";
  if (D.QSeq != D.KVSeq)
    return "its queries and keys differ in length";
  if (A.getNumInputs() > 3)
    if (const Value *M = A.getInput(3)) {
      unsigned R = M->Type.getRank();
      if (!M->Type.isStatic() || R < 1 || R > 4 ||
          M->Type.Dims[R - 1].Size != D.KVSeq)
        return "its mask does not span the keys with a static shape";
    }
  return "";
}

} // namespace

unsigned expandAttentionOps(Graph &G, unsigned KVHeadSplit,
                            std::vector<std::string> &Notes) {
  DenseMap<const Value *, unsigned> Uses = G.computeUseCounts();
  std::vector<Node *> Done;
  for (unsigned Pos = 0; Pos < G.getNumNodes(); ++Pos) {
    Node &A = *G.getNodes()[Pos];
    if (A.getOpType() != "Attention" ||
        !(A.getDomain().empty() || A.getDomain() == "ai.onnx"))
      continue;
    Optional<AttentionDims> D = getAttentionDims(A);
    // Ulysses moves the op's K/V heads as they are where they divide.
    if (KVHeadSplit && D && D->KVHeads % KVHeadSplit == 0)
      continue;
    std::string Why = !D || !A.getOutput(0)
                          ? "its Q, K and V have no static 3-D or 4-D shapes"
                          : getUnexpandedReason(A, *D, Uses);
    if (!Why.empty()) {
      Notes.push_back(
          describeNode(A) +
          (KVHeadSplit
               ? ": cp_algo=a2a gathers its K and V heads here (the "
                 "Attention op's K/V heads move repeated to its query heads "
                 "as the ops it computes, and "
               : ": cp_algo=ring all-gathers Q, K and V over cp here (the "
                 "Attention op is lowered to the ring as the ops it "
                 "computes, and ") +
          Why + (KVHeadSplit ? ")" : "; cp_algo=a2a moves it over heads)"));
      continue;
    }
    AttentionExpander E(G, A, Pos, *D);
    E.run();
    Done.push_back(&A);
    // Past the ops just inserted, to the Attention node.
    while (G.getNodes()[Pos].get() != &A)
      ++Pos;
  }
  G.eraseNodes([&](const Node &N) { return is_contained(Done, &N); });
  return Done.size();
}

} // namespace loom
