//===- RingAttention.cpp - Context parallelism's K/V ring -----------------===//
//
// cp_algo=ring (issue 34): the propagation keeps every activation split on
// its tokens and reads K and V whole at the attention's two matmuls
// (MatmulRules.cpp, RuleContext::isSequenceRing); here, instead of gathering
// them, each cp rank passes its K/V block to the next rank of group "cp"
// and receives the previous rank's, cp - 1 times (Liu et al. 2023, "Ring
// Attention with Blockwise Transformers", §3; Megatron-Core's p2p context
// parallelism). Step i scores the local queries against the block of rank
// (r - i) mod cp, through the model's own chain of ops between the scores
// and the softmax (scale, mask, ...; a side operand that spans the queries
// or the keys is cut to the rows of this rank's positions and the columns of
// the block's), and merges the step into the running softmax:
//   m' = max(m, rowmax S_i), a = exp(m - m'), P_i = exp(S_i - m'),
//   l' = l a + rowsum P_i, O' = O a + P_i V_i; the output is O / l.
// This is exactly softmax(S) V over all keys (Milakov & Gimelshein 2018,
// "Online normalizer calculation for softmax"; the rescaling of
// FlashAttention-2, Dao 2023, Algorithm 1): every exponent is taken against
// the running max, which step 0 (this rank's own keys, where a causal row
// always sees its diagonal) makes finite, so a block masked out entirely
// (-inf or -1e9) contributes exp(-inf) = 0 and never a NaN.
//
//===----------------------------------------------------------------------===//
#include "RingAttention.h"
#include "ShardAttrs.h"
#include "loom/IR/NodeLabel.h"
#include "loom/Shard/Propagate.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include <tuple>

using namespace llvm;

namespace loom {
namespace {

/// Ops that may sit between the scores and the softmax: elementwise, the
/// scores flowing through one input.
bool isChainOp(StringRef Op) {
  return StringSwitch<bool>(Op)
      .Cases("Add", "Sub", "Mul", "Div", "Where", true)
      .Cases("Cast", "Identity", "Neg", "Tanh", "Max", "Min", true)
      .Default(false);
}

/// Ops between the softmax and the context matmul.
bool isPostOp(StringRef Op) { return Op == "Cast" || Op == "Identity"; }

bool sameShape(const TensorType &A, const TensorType &B) {
  return A.HasShape && B.HasShape && A.Dims == B.Dims;
}

/// The input slot of chain node \p D that carries the scores: a non-constant
/// of D's output shape made by a MatMul or another chain op, read only by D.
int findChainSlot(const Node &D, const UseMap &Users) {
  int Found = -1;
  for (unsigned I = 0; I < D.getNumInputs(); ++I) {
    const Value *X = D.getInput(I);
    if (!X || !X->getDefiningNode() || isConstantLike(X) ||
        !sameShape(X->Type, D.getOutput(0)->Type))
      continue;
    auto It = Users.find(X);
    if (It == Users.end() || It->second.size() != 1)
      continue;
    StringRef P = X->getDefiningNode()->getOpType();
    if (P == "MatMul")
      return I;
    if (isChainOp(P) && Found < 0)
      Found = I;
  }
  return Found;
}

bool isSplitOn(const AxisSpec &S, int Dim) {
  return S.isSplit() && S.Dim == Dim && S.Blocks.empty();
}

/// Matches the ring site ending at Softmax \p SM; empty on success, else
/// why it is not one.
std::string matchSite(const ShardingResult &R, const UseMap &Users,
                      const Node &SM, RingSite &Site) {
  const Value *Y = SM.getOutput(0);
  // Casts between the softmax and the context matmul (HF's softmax in fp32,
  // cast back to the query type) apply to each step's probabilities.
  const Value *PV = Y;
  const Node *C = nullptr;
  while (true) {
    auto U = Users.find(PV);
    if (U == Users.end() || U->second.size() != 1)
      return "the softmax is read more than once";
    C = U->second.front();
    if (!isPostOp(C->getOpType()))
      break;
    Site.Post.push_back(C);
    PV = C->getOutput(0);
  }
  if (C->getOpType() != "MatMul" || C->getInput(0) != PV)
    return "the softmax does not feed a MatMul's first operand";
  unsigned Rank = Y->Type.getRank();
  if (Rank < 2 || !Y->Type.isStatic())
    return "the scores have no static shape";
  int64_t Opset = R.M->getOpsetVersion("");
  int64_t Axis = SM.getAttrInt("axis", Opset >= 13 ? -1 : 1);
  if (Axis < 0)
    Axis += Rank;
  if (Axis != (int64_t)Rank - 1)
    return "the softmax is not over the keys (the last axis)";
  int64_t Sq = Y->Type.Dims[Rank - 2].Size, Sk = Y->Type.Dims[Rank - 1].Size;
  unsigned CP = R.Plan.TP;
  if (Sq != Sk || Sq % (2 * CP))
    return "the queries and keys are not one sequence divisible by 2 cp";
  // Back from the softmax to the scores MatMul.
  std::vector<const Node *> Chain{&SM};
  std::vector<unsigned> Slots{0};
  const Value *X = SM.getInput(0);
  while (true) {
    const Node *D = X->getDefiningNode();
    auto XU = Users.find(X);
    if (!D || XU == Users.end() || XU->second.size() != 1)
      return "a value between the scores and the softmax is read elsewhere";
    if (D->getOpType() == "MatMul") {
      Site.Scores = D;
      break;
    }
    int Slot = isChainOp(D->getOpType()) ? findChainSlot(*D, Users) : -1;
    if (Slot < 0 || Chain.size() > 16)
      return describeNode(*D) +
             " between the scores and the softmax has no ring rule";
    Chain.push_back(D);
    Slots.push_back(Slot);
    X = D->getInput(Slot);
  }
  std::reverse(Chain.begin(), Chain.end());
  std::reverse(Slots.begin(), Slots.end());
  // The propagation's specs: queries and scores split on their rows, K^T
  // and V read whole (MatmulRules.cpp under isSequenceRing).
  auto SI = R.Nodes.find(Site.Scores), CI = R.Nodes.find(C);
  if (SI == R.Nodes.end() || CI == R.Nodes.end())
    return "the attention has no sharding";
  const NodeSharding &SS = SI->second, &CS = CI->second;
  const Value *Q = Site.Scores->getInput(0), *KT = Site.Scores->getInput(1),
              *V = C->getInput(1);
  unsigned RC = C->getOutput(0)->Type.getRank();
  if (!isSplitOn(SS.InputSpecs[0], (int)Q->Type.getRank() - 2) ||
      !SS.InputSpecs[1].isReplicated() ||
      !isSplitOn(CS.InputSpecs[0], Rank - 2) ||
      !CS.InputSpecs[1].isReplicated() || !isSplitOn(CS.OutputSpecs[0], RC - 2))
    return "the queries are not split on their tokens with K and V whole";
  if (KT->Type.getRank() < 2 || V->Type.getRank() < 2 || !KT->Type.isStatic() ||
      !V->Type.isStatic() || KT->Type.Dims[KT->Type.getRank() - 1].Size != Sk ||
      V->Type.Dims[V->Type.getRank() - 2].Size != Sk)
    return "K and V do not hold the keys on their sequence dim";
  for (size_t J = 0; J < Chain.size(); ++J)
    for (unsigned I = 0; I < Chain[J]->getNumInputs(); ++I)
      if (I != Slots[J] && Chain[J]->getInput(I) &&
          !Chain[J]->getInput(I)->Type.isStatic())
        return "a mask or scale beside the scores has no static shape";
  Site.Chain = std::move(Chain);
  Site.ChainSlot = std::move(Slots);
  Site.Context = C;
  return "";
}

std::vector<Attribute> copyAttrs(const Node &N) {
  std::vector<Attribute> Attrs;
  for (const Attribute &A : N.getAttributes())
    Attrs.push_back(copyAttributeValues(A));
  return Attrs;
}

/// \p T with its last two dims (rows, keys) at \p Rows and \p Cols.
TensorType withBlock(TensorType T, int64_t Rows, int64_t Cols) {
  unsigned N = T.getRank();
  if (N >= 2 && Rows)
    T.Dims[N - 2] = Dim(Rows);
  if (N >= 1 && Cols)
    T.Dims[N - 1] = Dim(Cols);
  return T;
}

/// Runs the ring's steps for one site (lowerRingAttention).
class RingLowering {
public:
  RingLowering(const ShardingResult &R, const RingSite &Site, unsigned CP,
               unsigned Rank, RingGraphBuilder &B)
      : R(R), Site(Site), CP(CP), Rank(Rank), B(B),
        Opset(R.M->getOpsetVersion("")),
        Base(("ring." + Site.Context->getOutput(0)->getName()).str()) {
    const TensorType &YG = Site.Scores->getOutput(0)->Type;
    S = YG.Dims[YG.getRank() - 1].Size;
    Chunk = S / CP;
  }
  Expected<Value *> run(StringRef OutName);

private:
  /// \p X gathered at \p Pos on dim \p Axis.
  Expected<Value *> gatherAt(Value *X, unsigned Axis, ArrayRef<int64_t> Pos) {
    TensorType T = X->Type;
    T.Dims[Axis] = Dim((int64_t)Pos.size());
    Value *Idx = B.constInt64(Base + ".pos", {(int64_t)Pos.size()}, Pos);
    return B.op("Gather", Base + ".block", {X, Idx}, T,
                makeAttrs(intAttr("axis", Axis)));
  }
  /// \p X, a block of Chain.back()'s input, through \p Chain (a KChain or
  /// VChain) as this rank's own block went: each node at the local type
  /// the role graph gave it, a Reshape's or Expand's shape that type's.
  Expected<Value *> moveBlock(Value *X, ArrayRef<const Node *> Chain);
  /// K and V in one buffer, each flattened after the leading dims they
  /// share (getCommonPrefix) and concatenated (what goes around, as
  /// Megatron-Core's p2p context parallelism sends one KV buffer per
  /// step: one transfer, the one the cost model prices).
  Expected<Value *> pack(Value *K, Value *V);
  /// The part of packed buffer \p KV from element \p Start of its last dim
  /// holding a value of type \p T (\p Name: "k" or "v").
  Expected<Value *> unpack(Value *KV, int64_t Start, const TensorType &T,
                           StringRef Name);
  /// The side operands of the chain, whole, their query rows cut to this
  /// rank's positions; null at the scores' slots.
  Error loadSides();
  /// One step: the chain on the scores of the local queries against key
  /// block \p K of rank \p Src.
  Expected<Value *> scoreBlock(Value *K, unsigned Src);
  Expected<Value *> reduceLast(StringRef Op, StringRef Name, Value *X);
  Expected<Value *> bin(StringRef Op, StringRef Name, Value *A, Value *C) {
    TensorType T = A->Type.getRank() >= C->Type.getRank() ? A->Type : C->Type;
    return B.op(Op, (Base + "." + Name).str(), {A, C}, T, {});
  }
  Expected<Value *> un(StringRef Op, StringRef Name, Value *A) {
    return B.op(Op, (Base + "." + Name).str(), {A}, A->Type, {});
  }
  static std::vector<Attribute> makeAttrs(Attribute A) {
    std::vector<Attribute> V;
    V.push_back(std::move(A));
    return V;
  }

  const ShardingResult &R;
  const RingSite &Site;
  unsigned CP, Rank;
  RingGraphBuilder &B;
  int64_t Opset;
  std::string Base;
  int64_t S = 0, Chunk = 0;
  Value *Q = nullptr;
  /// Per chain node, per input: the side operand (rows cut) or null.
  std::vector<SmallVector<Value *, 3>> Sides;
  /// Per side operand: whether its last dim spans the keys.
  std::vector<SmallVector<bool, 3>> SideCols;
};

Expected<Value *> RingLowering::moveBlock(Value *X,
                                          ArrayRef<const Node *> Chain) {
  for (const Node *N : llvm::reverse(Chain)) {
    const Value *Y = N->getOutput(0);
    Expected<Value *> Own = B.get(Y, R.Values.lookup(Y));
    if (!Own)
      return Own.takeError();
    const TensorType &T = (*Own)->Type;
    SmallVector<Value *, 2> In{X};
    StringRef Op = N->getOpType();
    for (unsigned I = 1; I < N->getNumInputs(); ++I) {
      if ((Op == "Reshape" || Op == "Expand") && I == 1) {
        In.push_back(B.constInt64(Base + ".shape", {(int64_t)T.getRank()},
                                  T.getStaticShape()));
        continue;
      }
      Expected<Value *> C = B.get(N->getInput(I), AxisSpec());
      if (!C)
        return C.takeError();
      In.push_back(*C);
    }
    Expected<Value *> Z =
        B.op(Op, Base + ".block." + Op.lower(), In, T, copyAttrs(*N));
    if (!Z)
      return Z.takeError();
    X = *Z;
  }
  return X;
}

/// The leading dims \p A and \p C share (batch and heads, usually): the
/// buffer keeps them, so a later split of the heads (tp over a cp rank's
/// graph, ComposeContextParallel.cpp) passes through the packing.
static unsigned getCommonPrefix(const TensorType &A, const TensorType &C) {
  unsigned P = 0;
  while (P + 1 < A.getRank() && P + 1 < C.getRank() && A.Dims[P] == C.Dims[P])
    ++P;
  return P;
}

/// \p T's first \p P dims, then the product of the rest.
static SmallVector<int64_t, 4> getPackedShape(const TensorType &T, unsigned P) {
  SmallVector<int64_t, 4> D(T.getStaticShape());
  int64_t Rest = 1;
  for (unsigned I = P; I < D.size(); ++I)
    Rest *= D[I];
  D.resize(P);
  D.push_back(Rest);
  return D;
}

Expected<Value *> RingLowering::pack(Value *K, Value *V) {
  unsigned P = getCommonPrefix(K->Type, V->Type);
  SmallVector<Value *, 2> Flat;
  SmallVector<int64_t, 4> Out;
  for (auto X : {std::make_pair(K, ".k.flat"), std::make_pair(V, ".v.flat")}) {
    std::string Name = Base + X.second;
    SmallVector<int64_t, 4> D = getPackedShape(X.first->Type, P);
    Value *Shape = B.constInt64(Name + ".shape", {(int64_t)D.size()}, D);
    Expected<Value *> F = B.op("Reshape", Name, {X.first, Shape},
                               TensorType(X.first->Type.Elem, D), {});
    if (!F)
      return F.takeError();
    Flat.push_back(*F);
    if (Out.empty())
      Out = D;
    else
      Out.back() += D.back();
  }
  return B.op("Concat", Base + ".kv", Flat, TensorType(K->Type.Elem, Out),
              makeAttrs(intAttr("axis", (int64_t)P)));
}

Expected<Value *> RingLowering::unpack(Value *KV, int64_t Start,
                                       const TensorType &T, StringRef Name) {
  unsigned P = KV->Type.getRank() - 1;
  SmallVector<int64_t, 4> D = getPackedShape(T, P);
  int64_t N = D.back();
  std::string Part = (Base + "." + Name).str();
  Value *Starts = B.constInt64(Part + ".starts", {1}, {Start});
  Value *Ends = B.constInt64(Part + ".ends", {1}, {Start + N});
  Value *Axes = B.constInt64(Part + ".axes", {1}, {(int64_t)P});
  Expected<Value *> Piece =
      B.op("Slice", Part + ".flat", {KV, Starts, Ends, Axes},
           TensorType(T.Elem, D), {});
  if (!Piece)
    return Piece.takeError();
  SmallVector<int64_t, 4> Dims = T.getStaticShape();
  Value *Shape = B.constInt64(Part + ".shape", {(int64_t)Dims.size()}, Dims);
  return B.op("Reshape", Part, {*Piece, Shape}, T, {});
}

Error RingLowering::loadSides() {
  std::vector<int64_t> Rows = getRingPositions(CP, Rank, S);
  for (size_t J = 0; J < Site.Chain.size(); ++J) {
    const Node &N = *Site.Chain[J];
    Sides.emplace_back();
    SideCols.emplace_back();
    for (unsigned I = 0; I < N.getNumInputs(); ++I) {
      const Value *W = N.getInput(I);
      Sides.back().push_back(nullptr);
      SideCols.back().push_back(false);
      if (I == Site.ChainSlot[J] || !W)
        continue;
      Expected<Value *> X = B.get(W, AxisSpec());
      if (!X)
        return X.takeError();
      unsigned RW = W->Type.getRank();
      // Right-aligned with the scores [..., queries, keys].
      if (RW >= 2 && W->Type.Dims[RW - 2].Size == S && S > 1) {
        X = gatherAt(*X, RW - 2, Rows);
        if (!X)
          return X.takeError();
      }
      SideCols.back().back() = RW >= 1 && W->Type.Dims[RW - 1].Size == S;
      Sides.back().back() = *X;
    }
  }
  return Error::success();
}

Expected<Value *> RingLowering::scoreBlock(Value *K, unsigned Src) {
  const Node &SN = *Site.Scores;
  TensorType YT = withBlock(SN.getOutput(0)->Type, Chunk, Chunk);
  Expected<Value *> X = B.op("MatMul", Base + ".scores", {Q, K}, YT, {});
  if (!X)
    return X.takeError();
  std::vector<int64_t> Cols = getRingPositions(CP, Src, S);
  // The chain but its softmax.
  for (size_t J = 0; J + 1 < Site.Chain.size(); ++J) {
    const Node &N = *Site.Chain[J];
    SmallVector<Value *, 3> In;
    for (unsigned I = 0; I < N.getNumInputs(); ++I) {
      if (I == Site.ChainSlot[J]) {
        In.push_back(*X);
        continue;
      }
      Value *W = Sides[J][I];
      if (W && SideCols[J][I]) {
        Expected<Value *> C = gatherAt(W, W->Type.getRank() - 1, Cols);
        if (!C)
          return C.takeError();
        W = *C;
      }
      In.push_back(W);
    }
    X = B.op(N.getOpType(), Base + "." + N.getOpType().lower(), In,
             withBlock(N.getOutput(0)->Type, Chunk, Chunk), copyAttrs(N));
    if (!X)
      return X.takeError();
  }
  return X;
}

Expected<Value *> RingLowering::reduceLast(StringRef Op, StringRef Name,
                                           Value *X) {
  TensorType T = withBlock(X->Type, 0, 1);
  std::vector<Attribute> Attrs = makeAttrs(intAttr("keepdims", 1));
  // Axes became an input: ReduceSum at opset 13, ReduceMax at 18.
  bool AxesInput = Opset >= 18 || (Op == "ReduceSum" && Opset >= 13);
  if (!AxesInput)
    Attrs.push_back(intsAttr("axes", {-1}));
  SmallVector<Value *, 2> In{X};
  if (AxesInput)
    In.push_back(B.constInt64(Base + ".axes", {1}, {-1}));
  return B.op(Op, (Base + "." + Name).str(), In, T, std::move(Attrs));
}

#define RING_TRY(Var, Expr)                                                    \
  Expected<Value *> Var##OrErr = (Expr);                                       \
  if (!Var##OrErr)                                                             \
    return Var##OrErr.takeError();                                             \
  Value *Var = *Var##OrErr;

Expected<Value *> RingLowering::run(StringRef OutName) {
  const Node &SN = *Site.Scores, &CN = *Site.Context;
  const NodeSharding &SS = R.Nodes.find(&SN)->second;
  RING_TRY(QL, B.get(SN.getInput(0), SS.InputSpecs[0]));
  Q = QL;
  const Value *KTV = SN.getInput(1), *VV = CN.getInput(1);
  RING_TRY(K0, B.get(KTV, AxisSpec::split(KTV->Type.getRank() - 1)));
  RING_TRY(V0, B.get(VV, AxisSpec::split(VV->Type.getRank() - 2)));
  // What goes around: K^T and V, or the smaller values they were moved
  // from (this rank's block of each).
  auto Source = [&](ArrayRef<const Node *> Chain, Value *Own) {
    if (Chain.empty())
      return Expected<Value *>(Own);
    const Value *U = Chain.back()->getInput(0);
    return B.get(U, R.Values.lookup(U));
  };
  RING_TRY(KS0, Source(Site.KChain, K0));
  RING_TRY(VS0, Source(Site.VChain, V0));
  if (Error E = loadSides())
    return std::move(E);
  TensorType OT = withBlock(CN.getOutput(0)->Type, Chunk, 0);
  Value *K = K0, *V = V0, *M = nullptr, *L = nullptr, *O = nullptr;
  Value *KS = KS0, *VS = VS0, *KV = nullptr;
  // K and V go around in one buffer where they can share one (static
  // shapes, one element type), else one transfer each.
  if (KS0->Type.isStatic() && VS0->Type.isStatic() &&
      KS0->Type.Elem == VS0->Type.Elem) {
    RING_TRY(P, pack(KS0, VS0));
    KV = P;
  }
  unsigned Next = (Rank + 1) % CP, Prev = (Rank + CP - 1) % CP;
  for (unsigned I = 0; I < CP; ++I) {
    Value *KNext = nullptr, *VNext = nullptr;
    if (I + 1 < CP) {
      // Pass the block on before computing with it (the transfer overlaps
      // the step); tags: two per step and site.
      int Tag = 2 * (int)(Site.Index * (CP - 1) + I);
      if (KV) {
        B.send(KV, Next, Tag, Base + ".kv");
        RING_TRY(KVR, B.recv(KV->Type, Prev, Tag, Base + ".kv"));
        KV = KVR;
        RING_TRY(KU, unpack(KVR, 0, KS0->Type, "k"));
        RING_TRY(
            VU,
            unpack(KVR,
                   getPackedShape(KS0->Type, KVR->Type.getRank() - 1).back(),
                   VS0->Type, "v"));
        KS = KU;
        VS = VU;
      } else {
        B.send(KS, Next, Tag, Base + ".k");
        B.send(VS, Next, Tag + 1, Base + ".v");
        RING_TRY(KR, B.recv(KS->Type, Prev, Tag, Base + ".k"));
        RING_TRY(VR, B.recv(VS->Type, Prev, Tag + 1, Base + ".v"));
        KS = KR;
        VS = VR;
      }
      RING_TRY(KM, moveBlock(KS, Site.KChain));
      RING_TRY(VM, moveBlock(VS, Site.VChain));
      KNext = KM;
      VNext = VM;
    }
    RING_TRY(X, scoreBlock(K, (Rank + CP - I) % CP));
    RING_TRY(MI, reduceLast("ReduceMax", "rowmax", X));
    Value *MN = MI, *Alpha = nullptr;
    if (M) {
      RING_TRY(Mx, bin("Max", "max", M, MI));
      RING_TRY(D, bin("Sub", "maxdiff", M, Mx));
      RING_TRY(A, un("Exp", "alpha", D));
      MN = Mx;
      Alpha = A;
    }
    RING_TRY(XS, bin("Sub", "shifted", X, MN));
    RING_TRY(P, un("Exp", "p", XS));
    RING_TRY(LI, reduceLast("ReduceSum", "rowsum", P));
    Value *PC = P;
    for (const Node *N : Site.Post) {
      RING_TRY(Y, B.op(N->getOpType(), Base + ".p", {PC},
                       withBlock(N->getOutput(0)->Type, Chunk, Chunk),
                       copyAttrs(*N)));
      PC = Y;
    }
    RING_TRY(OI, B.op("MatMul", Base + ".context", {PC, V}, OT, {}));
    if (Alpha) {
      RING_TRY(LA, bin("Mul", "l_scaled", L, Alpha));
      RING_TRY(LS, bin("Add", "l", LA, LI));
      RING_TRY(OA, bin("Mul", "o_scaled", O, Alpha));
      RING_TRY(OS, bin("Add", "o", OA, OI));
      L = LS;
      O = OS;
    } else {
      L = LI;
      O = OI;
    }
    M = MN;
    K = KNext;
    V = VNext;
  }
  return B.op("Div", Base + ".normalize", {O, L}, OT, {}, OutName);
}

#undef RING_TRY

bool feedsMatMul(const Value *V, const UseMap &Users) {
  for (const Node *U : Users.lookup(V))
    if (U->getOpType() == "MatMul" ||
        (isPostOp(U->getOpType()) && feedsMatMul(U->getOutput(0), Users)))
      return true;
  return false;
}

} // namespace

std::vector<int64_t> getRingPositions(unsigned CP, unsigned Rank, int64_t S) {
  // Megatron-Core's load balancing for the causal ring: 2 cp chunks, rank r
  // holding chunks r and 2 cp - 1 - r, so every rank's queries see as many
  // earlier keys (megatron/core/utils.py, get_batch_on_this_cp_rank).
  int64_t C = S / (2 * CP);
  std::vector<int64_t> P;
  for (int64_t Chunk : {(int64_t)Rank, (int64_t)(2 * CP - 1 - Rank)})
    for (int64_t I = 0; I < C; ++I)
      P.push_back(Chunk * C + I);
  return P;
}

void findRingSites(ShardingResult &R, const UseMap &Users) {
  for (const auto &NP : R.M->getGraph().getNodes()) {
    // ONNX's Attention op (opset 23) left whole by expandAttentionOps
    // (which noted why): its rule reads Q, K and V whole.
    if (NP->getOpType() == "Attention" &&
        (NP->getDomain().empty() || NP->getDomain() == "ai.onnx")) {
      ++R.RingFallbacks;
      continue;
    }
    // An attention: a softmax read by a MatMul (through casts).
    if (NP->getOpType() != "Softmax" || !feedsMatMul(NP->getOutput(0), Users))
      continue;
    RingSite Site;
    std::string Why = matchSite(R, Users, *NP, Site);
    if (!Why.empty()) {
      ++R.RingFallbacks;
      // Still exact: K and V are gathered whole where the softmax is read.
      R.Notes.push_back(describeNode(*NP) +
                        ": cp_algo=ring all-gathers K and V over cp here (" +
                        Why + ")");
      continue;
    }
    // K and V go around as the smaller values data movement made them
    // from, each rank's block split on its tokens.
    auto Tokens = [&](const Value *X) {
      AxisSpec S = R.Values.lookup(X);
      return S.isSplit() && S.Blocks.empty();
    };
    for (auto KV : {std::make_pair(Site.Scores->getInput(1), &Site.KChain),
                    std::make_pair(Site.Context->getInput(1), &Site.VChain)}) {
      SmallVector<const Node *, 4> C =
          findSmallerMovementSource(KV.first, Users, Tokens);
      KV.second->assign(C.begin(), C.end());
      R.CPMovedBeforeRepeat += !C.empty();
    }
    Site.Index = R.RingSites.size();
    R.RingNodes[Site.Scores] = Site.Index;
    for (const Node *N : Site.Chain)
      R.RingNodes[N] = Site.Index;
    for (const Node *N : Site.Post)
      R.RingNodes[N] = Site.Index;
    R.RingNodes[Site.Context] = Site.Index;
    R.RingSites.push_back(std::move(Site));
  }
}

Expected<Value *> lowerRingAttention(const ShardingResult &R,
                                     const RingSite &Site, unsigned CP,
                                     unsigned Rank, RingGraphBuilder &B,
                                     StringRef OutName) {
  RingLowering L(R, Site, CP, Rank, B);
  return L.run(OutName);
}

} // namespace loom
