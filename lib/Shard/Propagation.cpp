//===- Propagation.cpp - Sharding specs along the TP axis -----------------===//
//
// One forward walk over the micro-batch graph in topological order. Every
// node rule looks at the specs its inputs arrive in, picks the specs it
// needs (each choice exact: a rule never produces a layout whose local
// computation differs from the global one), and says what its outputs are.
// Where the producer's spec differs from what a rule needs, the role builder
// inserts the reshard (RoleGraphs.cpp). The rules follow Megatron-LM
// (Shoeybi et al. 2019) for weight matmuls and embeddings and Korthikanti et
// al. 2022 for sequence parallelism; everything else is propagation in the
// style of GSPMD (Xu et al. 2021): split dims move through reshapes,
// transposes and broadcasts, partial sums through linear ops.
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/Sharding.h"
#include "loom/Plan/Experts.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/DenseSet.h"
#include <algorithm>
#include <numeric>

using namespace llvm;

namespace loom {

std::string AxisSpec::str() const {
  switch (K) {
  case Replicated:
    return "R";
  case Partial:
    return "P";
  case Split: {
    std::string S = "S(" + std::to_string(Dim);
    if (!Blocks.empty()) {
      S += ";blocks=";
      for (size_t I = 0; I < Blocks.size(); ++I)
        S += (I ? "," : "") + std::to_string(Blocks[I]);
    }
    return S + ")";
  }
  }
  return "?";
}

// The mesh follows P.Order above tp (ParallelPlan.h): rank = tp_idx +
// sum over the axes of idx * stride.
RankCoords getRankCoords(const ParallelPlan &P, unsigned Rank) {
  RankCoords C;
  C.TP = Rank % P.TP;
  unsigned Rest = Rank / P.TP;
  for (MeshAxis A : P.Order) {
    unsigned Size = std::max(1u, P.getAxisSize(A));
    unsigned Idx = Rest % Size;
    Rest /= Size;
    (A == MeshAxis::EP ? C.EP : A == MeshAxis::DP ? C.DPOuter : C.PP) = Idx;
  }
  C.DP = C.DPOuter * P.EP + C.EP;
  return C;
}

unsigned getRank(const ParallelPlan &P, unsigned PPIdx, unsigned DPIdx,
                 unsigned TPIdx) {
  unsigned EP = std::max(1u, P.EP);
  return TPIdx + (DPIdx % EP) * P.getAxisStride(MeshAxis::EP) +
         (DPIdx / EP) * P.getAxisStride(MeshAxis::DP) +
         PPIdx * P.getAxisStride(MeshAxis::PP);
}

std::vector<unsigned> getGroupRanks(const ParallelPlan &P, StringRef Name,
                                    unsigned Rank) {
  RankCoords C = getRankCoords(P, Rank);
  std::vector<unsigned> R;
  if (Name == "tp") {
    for (unsigned T = 0; T < P.TP; ++T)
      R.push_back(getRank(P, C.PP, C.DP, T));
  } else if (Name == "pp") {
    for (unsigned S = 0; S < P.PP; ++S)
      R.push_back(getRank(P, S, C.DP, C.TP));
  } else if (Name == "dp") {
    for (unsigned D = 0; D < P.DP; ++D)
      R.push_back(getRank(P, C.PP, D, C.TP));
  } else if (Name == "ep") {
    for (unsigned E = 0; E < P.EP; ++E)
      R.push_back(getRank(P, C.PP, C.DPOuter * P.EP + E, C.TP));
  } else if (Name == "dp_ep") {
    for (unsigned O = 0; O < P.DP / P.EP; ++O)
      R.push_back(getRank(P, C.PP, O * P.EP + C.EP, C.TP));
  }
  return R;
}

namespace {

using Shape = SmallVector<int64_t, 4>;

Shape shapeOf(const Value *V) {
  if (!V || !V->Type.isStatic())
    return {};
  return V->Type.getStaticShape();
}

int64_t product(ArrayRef<int64_t> S) {
  int64_t P = 1;
  for (int64_t D : S)
    P *= D;
  return P;
}

bool isConstantNode(const Node *D) {
  return D && D->getDomain().empty() &&
         (D->getOpType() == "Constant" ||
          (D->getOpType() == "ConstantOfShape" && D->getNumInputs() &&
           getConstantInts(D->getInput(0))));
}

/// A constant whose every element is zero (torch's zeros_like accumulator):
/// a ConstantOfShape (default fill 0) or a Constant, both of the default
/// domain.
bool isZeroConstant(const Value *V) {
  const Node *D = V ? V->getDefiningNode() : nullptr;
  if (!D || !D->getDomain().empty() ||
      (D->getOpType() != "ConstantOfShape" && D->getOpType() != "Constant"))
    return false;
  const Attribute *A = D->getAttribute("value");
  if (!A)
    return D->getOpType() == "ConstantOfShape";
  if (A->K != Attribute::Kind::Tensor || A->Ts.empty())
    return false;
  Expected<std::vector<double>> F = A->Ts[0].getFloatValues();
  if (!F) {
    consumeError(F.takeError());
    return false;
  }
  return all_of(*F, [](double X) { return X == 0; });
}

int normAxis(int64_t A, unsigned Rank) {
  return A < 0 ? (int)(A + Rank) : (int)A;
}

class Propagator {
public:
  Propagator(ShardingResult &R)
      : R(R), G(R.M->getGraph()), TP(R.Plan.TP),
        Opset(R.M->getOpsetVersion("")) {}
  Error run();

private:
  AxisSpec cur(const Value *V) const {
    if (!V || SeenReplicated.count(V))
      return AxisSpec();
    auto It = R.Values.find(V);
    return It == R.Values.end() ? AxisSpec() : It->second;
  }
  /// Dim of \p V a sequence-parallel ReduceScatter splits: the outermost
  /// non-feature dim divisible by tp (the tokens), or -1.
  int tokenDim(const Value *V) const {
    Shape S = shapeOf(V);
    for (unsigned D = 0; D + 1 < S.size(); ++D)
      if (S[D] > 1 && S[D] % TP == 0)
        return D;
    return -1;
  }
  /// The spec a Partial input takes for a non-linear consumer.
  AxisSpec resolvePartial(const Value *V) const {
    // Stacked expert work reshapes its leading dims over ep; a tp split
    // there would not survive the all-to-all.
    const Node *D = V ? V->getDefiningNode() : nullptr;
    if (D && R.Nodes.lookup(D).Stacked)
      return AxisSpec::replicated();
    if (R.Plan.SP) {
      int T = tokenDim(V);
      if (T >= 0)
        return AxisSpec::split(T);
    }
    return AxisSpec::replicated();
  }
  bool divisible(int64_t Size) const { return Size > 0 && Size % TP == 0; }

  void replicateAll(const Node &N, NodeSharding &NS) {
    NS.InputSpecs.assign(N.getNumInputs(), AxisSpec());
    NS.OutputSpecs.assign(N.getNumOutputs(), AxisSpec());
  }
  /// Keeps every input as it is and gives all outputs \p Out.
  void keepInputs(const Node &N, NodeSharding &NS, const AxisSpec &Out) {
    NS.InputSpecs.clear();
    for (const Value *V : N.getInputs())
      NS.InputSpecs.push_back(cur(V));
    NS.OutputSpecs.assign(N.getNumOutputs(), Out);
  }

  /// Traces a weight-like value (parameter, or Transpose/Cast/Identity of
  /// one) back to its parameter; maps \p Dim of \p V to the parameter's dim.
  const Value *traceWeight(const Value *V, int &Dim) const;
  /// Splits the weight-like \p V along \p Dim (with \p Blocks): records the
  /// parameter slicing and the specs of the chain in between. False when
  /// the parameter is already sliced differently.
  bool splitWeight(const Value *V, int Dim, ArrayRef<int64_t> Blocks);

  void ruleElementwise(const Node &N, NodeSharding &NS);
  void ruleMatMul(const Node &N, NodeSharding &NS);
  void ruleGemm(const Node &N, NodeSharding &NS);
  void ruleConv(const Node &N, NodeSharding &NS);
  void ruleGather(const Node &N, NodeSharding &NS);
  void ruleReshape(const Node &N, NodeSharding &NS, bool Flatten);
  void ruleTranspose(const Node &N, NodeSharding &NS);
  void ruleUnsqueezeSqueeze(const Node &N, NodeSharding &NS, bool Unsqueeze);
  void ruleSplit(const Node &N, NodeSharding &NS);
  void ruleConcat(const Node &N, NodeSharding &NS);
  void ruleSlice(const Node &N, NodeSharding &NS);
  void ruleAxisOp(const Node &N, NodeSharding &NS, int Axis, bool Below);
  void ruleReduce(const Node &N, NodeSharding &NS);
  void ruleExpand(const Node &N, NodeSharding &NS);
  void ruleBatchNorm(const Node &N, NodeSharding &NS);
  void rulePool(const Node &N, NodeSharding &NS);
  std::vector<int64_t> readAxes(const Node &N, unsigned InputIdx) const;
  /// Column-parallel output blocks: the sizes of a Split along the last
  /// axis that consumes \p Out (directly or after a bias Add).
  std::vector<int64_t> findBlocks(const Value *Out) const;
  void record(const Node &N, NodeSharding NS);

  ShardingResult &R;
  Graph &G;
  unsigned TP;
  int64_t Opset;
  UseMap Users;
  /// Inputs the current node's rule must see replicated (tokens entering
  /// expert work, which ep gathers along a dim tp must not split).
  DenseSet<const Value *> SeenReplicated;
};

const Value *Propagator::traceWeight(const Value *V, int &Dim) const {
  for (unsigned Depth = 0; V && Depth < 4; ++Depth) {
    if (V->isParameter())
      return V;
    const Node *D = V->getDefiningNode();
    if (!D || D->getNumInputs() != 1 || D->getNumOutputs() != 1)
      return nullptr;
    if (D->getOpType() == "Transpose") {
      Optional<std::vector<int64_t>> Perm = D->getAttrInts("perm");
      unsigned Rank = V->Type.getRank();
      if (Perm) {
        if ((unsigned)Dim >= Perm->size())
          return nullptr;
        Dim = (*Perm)[Dim];
      } else {
        Dim = Rank - 1 - Dim;
      }
    } else if (D->getOpType() != "Cast" && D->getOpType() != "Identity") {
      return nullptr;
    }
    V = D->getInput(0);
  }
  return nullptr;
}

bool Propagator::splitWeight(const Value *V, int Dim,
                             ArrayRef<int64_t> Blocks) {
  int PDim = Dim;
  const Value *Param = traceWeight(V, PDim);
  if (!Param)
    return false;
  ParamSlice Want;
  Want.Dim = PDim;
  Want.Blocks.assign(Blocks.begin(), Blocks.end());
  auto It = R.Params.find(Param);
  if (It != R.Params.end() &&
      (It->second.Dim != Want.Dim || It->second.Blocks != Want.Blocks))
    return false;
  // Every user of the chain must be this consumer (a tied weight read by
  // another op keeps its own view through that op's rule).
  R.Params[Param] = Want;
  AxisSpec PS = AxisSpec::split(PDim);
  PS.Blocks = Want.Blocks;
  R.Values[Param] = PS;
  // The chain: re-derive each value's spec going forward.
  SmallVector<const Value *, 4> Chain;
  for (const Value *W = V; W != Param; W = W->getDefiningNode()->getInput(0))
    Chain.push_back(W);
  int D = PDim;
  for (auto It2 = Chain.rbegin(); It2 != Chain.rend(); ++It2) {
    const Node *Def = (*It2)->getDefiningNode();
    if (Def->getOpType() == "Transpose") {
      Optional<std::vector<int64_t>> Perm = Def->getAttrInts("perm");
      unsigned Rank = (*It2)->Type.getRank();
      int Out = -1;
      for (unsigned J = 0; J < Rank; ++J)
        if ((Perm ? (*Perm)[J] : (int64_t)(Rank - 1 - J)) == D)
          Out = J;
      D = Out;
    }
    AxisSpec S = AxisSpec::split(D);
    S.Blocks = Want.Blocks;
    R.Values[*It2] = S;
    NodeSharding &NS = R.Nodes[Def];
    NS.InputSpecs.assign(1, R.Values[Def->getInput(0)]);
    NS.OutputSpecs.assign(1, S);
  }
  return true;
}

std::vector<int64_t> Propagator::readAxes(const Node &N,
                                          unsigned InputIdx) const {
  if (Optional<std::vector<int64_t>> A = N.getAttrInts("axes"))
    return *A;
  if (const Attribute *A = N.getAttribute("axis"))
    return {A->I};
  if (Optional<std::vector<int64_t>> A = getConstantInts(N.getInput(InputIdx)))
    return *A;
  return {};
}

std::vector<int64_t> Propagator::findBlocks(const Value *Out) const {
  const Value *V = Out;
  for (unsigned Depth = 0; Depth < 2; ++Depth) {
    auto It = Users.find(V);
    if (It == Users.end() || It->second.size() != 1)
      return {};
    const Node *U = It->second.front();
    unsigned Rank = V->Type.getRank();
    if (U->getOpType() == "Split" && U->getInput(0) == V &&
        normAxis(U->getAttrInt("axis", 0), Rank) == (int)Rank - 1) {
      std::vector<int64_t> Sizes;
      if (Optional<std::vector<int64_t>> A = U->getAttrInts("split"))
        Sizes = *A;
      else if (Optional<std::vector<int64_t>> A = getConstantInts(U->getInput(1)))
        Sizes = *A;
      else {
        int64_t Last = shapeOf(V).empty() ? 0 : shapeOf(V).back();
        unsigned K = U->getNumOutputs();
        if (K == 0 || Last % K)
          return {};
        Sizes.assign(K, Last / K);
      }
      if (Sizes.size() < 2 || !all_of(Sizes, [&](int64_t S) {
            return divisible(S);
          }))
        return {};
      return Sizes;
    }
    // A bias Add between the projection and the Split.
    if (U->getOpType() == "Add" && U->getNumOutputs() == 1) {
      V = U->getOutput(0);
      continue;
    }
    return {};
  }
  return {};
}

void Propagator::ruleElementwise(const Node &N, NodeSharding &NS) {
  StringRef Op = N.getOpType();
  const Value *OutV = N.getOutput(0);
  unsigned OutRank = OutV ? OutV->Type.getRank() : 0;
  Shape OutShape = shapeOf(OutV);
  unsigned NIn = N.getNumInputs();
  SmallVector<AxisSpec, 4> In;
  for (const Value *V : N.getInputs())
    In.push_back(cur(V));
  bool AnyP = any_of(In, [](const AxisSpec &S) { return S.isPartial(); });
  if (AnyP) {
    // Linear in the partial operands: the local results sum to the global
    // one. Sums of partials; a partial scaled by a replicated factor;
    // unary linear maps.
    bool Linear = false;
    if (Op == "Add" || Op == "Sub") {
      Linear = true;
      for (unsigned I = 0; I < NIn; ++I)
        Linear &= In[I].isPartial() || isZeroConstant(N.getInput(I));
    } else if (Op == "Mul") {
      unsigned NP = count_if(In, [](const AxisSpec &S) { return S.isPartial(); });
      Linear = NP == 1 && all_of(In, [](const AxisSpec &S) {
                 return !S.isSplit();
               });
    } else if (Op == "Div") {
      Linear = In[0].isPartial() && NIn > 1 && !In[1].isPartial() &&
               !In[1].isSplit();
    } else if (Op == "Neg" || Op == "Identity" || Op == "Dropout") {
      Linear = true;
    } else if (Op == "Cast") {
      Linear = OutV && isFloatingPoint(OutV->Type.Elem);
    }
    if (Linear) {
      NS.InputSpecs.assign(In.begin(), In.end());
      NS.OutputSpecs.assign(N.getNumOutputs(), AxisSpec());
      NS.OutputSpecs[0] = AxisSpec::partial();
      return;
    }
    for (unsigned I = 0; I < NIn; ++I)
      if (In[I].isPartial())
        In[I] = resolvePartial(N.getInput(I));
  }
  // The output dim a split lands on: the first split input decides.
  int OutDim = -1;
  std::vector<int64_t> Blocks;
  for (unsigned I = 0; I < NIn; ++I) {
    const Value *V = N.getInput(I);
    if (!V || !In[I].isSplit())
      continue;
    OutDim = In[I].Dim + (int)(OutRank - V->Type.getRank());
    Blocks = In[I].Blocks;
    break;
  }
  NS.InputSpecs.assign(NIn, AxisSpec());
  NS.OutputSpecs.assign(N.getNumOutputs(), AxisSpec());
  if (OutDim < 0 || OutShape.empty()) {
    // Nothing split (or shapes unknown): replicated.
    return;
  }
  for (unsigned I = 0; I < NIn; ++I) {
    const Value *V = N.getInput(I);
    if (!V)
      continue;
    int Local = OutDim - (int)(OutRank - V->Type.getRank());
    Shape S = shapeOf(V);
    bool Broadcast = Local < 0 || (unsigned)Local >= S.size() || S[Local] == 1;
    if (Broadcast) {
      NS.InputSpecs[I] = AxisSpec(); // Replicated, broadcast along the split.
      continue;
    }
    AxisSpec Want = AxisSpec::split(Local);
    Want.Blocks = Blocks;
    NS.InputSpecs[I] = Want;
  }
  AxisSpec Out = AxisSpec::split(OutDim);
  Out.Blocks = Blocks;
  for (unsigned O = 0; O < N.getNumOutputs(); ++O)
    if (N.getOutput(O) && N.getOutput(O)->Type.getRank() == OutRank)
      NS.OutputSpecs[O] = Out;
}

void Propagator::ruleMatMul(const Node &N, NodeSharding &NS) {
  const Value *A = N.getInput(0), *B = N.getInput(1), *Y = N.getOutput(0);
  Shape SA = shapeOf(A), SB = shapeOf(B), SY = shapeOf(Y);
  replicateAll(N, NS);
  if (SA.size() < 2 || SB.size() < 2 || SY.size() < 2)
    return;
  int Dummy = 0;
  bool BWeight = traceWeight(B, Dummy) != nullptr;
  Dummy = 0;
  bool AWeight = traceWeight(A, Dummy) != nullptr;
  AxisSpec CA = cur(A), CB = cur(B);
  unsigned RY = SY.size(), RA = SA.size(), RB = SB.size();
  if (BWeight && !AWeight) {
    int K = RB - 2, NDim = RB - 1;
    if (CA.isPartial())
      CA = AxisSpec();
    if (CA.isSplit() && CA.Dim == (int)RA - 1 && CA.Blocks.empty() &&
        divisible(SB[K]) && splitWeight(B, K, {})) {
      // Row parallel: partial sums.
      NS.InputSpecs = {CA, R.Values[B]};
      NS.OutputSpecs = {AxisSpec::partial()};
      return;
    }
    // Column parallel (weights [d, f], or stacked experts [E, d, f]: f is
    // split): the activation is gathered first.
    if ((RB == 2 || RB == 3) && divisible(SB[NDim])) {
      std::vector<int64_t> Blocks = findBlocks(Y);
      if (splitWeight(B, NDim, Blocks)) {
        AxisSpec Out = AxisSpec::split(RY - 1);
        Out.Blocks = Blocks;
        NS.InputSpecs = {AxisSpec(), R.Values[B]};
        NS.OutputSpecs = {Out};
        return;
      }
    }
    return;
  }
  // Activation x activation (attention scores and context).
  auto ToOut = [&](const AxisSpec &S, unsigned Rank, bool IsA) -> int {
    if (!S.isSplit() || !S.Blocks.empty())
      return -100;
    int D = S.Dim;
    if (IsA && D == (int)Rank - 1)
      return -1; // k
    if (!IsA && D == (int)Rank - 2)
      return -1; // k
    if (IsA && D == (int)Rank - 2)
      return RY - 2;
    if (!IsA && D == (int)Rank - 1)
      return RY - 1;
    return D + (int)(RY - Rank);
  };
  if (CA.isPartial() && !CB.isPartial() && !CB.isSplit()) {
    NS.InputSpecs = {CA, AxisSpec()};
    NS.OutputSpecs = {AxisSpec::partial()};
    return;
  }
  if (CB.isPartial() && !CA.isPartial() && !CA.isSplit()) {
    NS.InputSpecs = {AxisSpec(), CB};
    NS.OutputSpecs = {AxisSpec::partial()};
    return;
  }
  if (CA.isPartial())
    CA = AxisSpec();
  if (CB.isPartial())
    CB = AxisSpec();
  int OA = ToOut(CA, RA, true), OB = ToOut(CB, RB, false);
  if (OA == -1 && OB == -1) {
    NS.InputSpecs = {CA, CB};
    NS.OutputSpecs = {AxisSpec::partial()};
    return;
  }
  int OutDim = OA >= 0 ? OA : (OB >= 0 ? OB : -1);
  if (OutDim < 0)
    return;
  // The other operand follows: split on the same output dim, or broadcast.
  auto Need = [&](unsigned Rank, const Shape &S, bool IsA) -> AxisSpec {
    int Local;
    if (OutDim == (int)RY - 2)
      Local = IsA ? (int)Rank - 2 : -1;
    else if (OutDim == (int)RY - 1)
      Local = IsA ? -1 : (int)Rank - 1;
    else
      Local = OutDim - (int)(RY - Rank);
    if (Local < 0 || S[Local] == 1)
      return AxisSpec();
    return AxisSpec::split(Local);
  };
  if (!divisible(SY[OutDim]))
    return;
  NS.InputSpecs = {Need(RA, SA, true), Need(RB, SB, false)};
  NS.OutputSpecs = {AxisSpec::split(OutDim)};
}

void Propagator::ruleGemm(const Node &N, NodeSharding &NS) {
  const Value *A = N.getInput(0), *B = N.getInput(1), *C = N.getInput(2);
  Shape SA = shapeOf(A), SB = shapeOf(B);
  replicateAll(N, NS);
  int Dummy = 0;
  if (SA.size() != 2 || SB.size() != 2 || !traceWeight(B, Dummy))
    return;
  bool TransA = N.getAttrInt("transA", 0), TransB = N.getAttrInt("transB", 0);
  int KDimB = TransB ? 1 : 0, NDimB = TransB ? 0 : 1;
  int KDimA = TransA ? 0 : 1;
  AxisSpec CA = cur(A);
  if (CA.isPartial())
    CA = AxisSpec();
  if (CA.isSplit() && CA.Dim == KDimA && divisible(SB[KDimB]) &&
      splitWeight(B, KDimB, {})) {
    NS.InputSpecs = {CA, R.Values[B]};
    if (C)
      NS.InputSpecs.push_back(AxisSpec());
    if (C) {
      NS.Lower = NodeSharding::Lowering::BiasAfterReduce;
      NS.OutputSpecs = {AxisSpec()};
    } else {
      NS.OutputSpecs = {AxisSpec::partial()};
    }
    return;
  }
  if (!divisible(SB[NDimB]) || !splitWeight(B, NDimB, {}))
    return;
  NS.InputSpecs = {AxisSpec(), R.Values[B]};
  if (C) {
    Shape SC = shapeOf(C);
    AxisSpec CS;
    if (!SC.empty() && SC.back() == SB[NDimB]) {
      CS = AxisSpec::split(SC.size() - 1);
      if (C->isParameter())
        splitWeight(C, SC.size() - 1, {});
    }
    NS.InputSpecs.push_back(CS);
  }
  NS.OutputSpecs = {AxisSpec::split(1)};
}

void Propagator::ruleConv(const Node &N, NodeSharding &NS) {
  const Value *X = N.getInput(0), *W = N.getInput(1), *B = N.getInput(2);
  Shape SW = shapeOf(W);
  replicateAll(N, NS);
  int Dummy = 0;
  if (SW.size() < 3 || N.getAttrInt("group", 1) != 1 || !traceWeight(W, Dummy))
    return;
  AxisSpec CX = cur(X);
  if (CX.isPartial())
    CX = AxisSpec();
  if (CX.isSplit() && CX.Dim == 1 && CX.Blocks.empty() && divisible(SW[1]) &&
      splitWeight(W, 1, {})) {
    NS.InputSpecs = {CX, R.Values[W]};
    if (B) {
      NS.InputSpecs.push_back(AxisSpec());
      NS.Lower = NodeSharding::Lowering::BiasAfterReduce;
      NS.OutputSpecs = {AxisSpec()};
    } else {
      NS.OutputSpecs = {AxisSpec::partial()};
    }
    return;
  }
  if (!divisible(SW[0]) || !splitWeight(W, 0, {}))
    return;
  NS.InputSpecs = {AxisSpec(), R.Values[W]};
  if (B) {
    if (B->isParameter())
      splitWeight(B, 0, {});
    NS.InputSpecs.push_back(AxisSpec::split(0));
  }
  NS.OutputSpecs = {AxisSpec::split(1)};
}

void Propagator::ruleBatchNorm(const Node &N, NodeSharding &NS) {
  AxisSpec CX = cur(N.getInput(0));
  replicateAll(N, NS);
  if (CX.isPartial() || !CX.isSplit() || !CX.Blocks.empty())
    return;
  NS.InputSpecs[0] = CX;
  NS.OutputSpecs[0] = CX;
  if (CX.Dim == 1)
    for (unsigned I = 1; I < N.getNumInputs(); ++I)
      if (N.getInput(I))
        NS.InputSpecs[I] = AxisSpec::split(0);
}

void Propagator::rulePool(const Node &N, NodeSharding &NS) {
  AxisSpec CX = cur(N.getInput(0));
  replicateAll(N, NS);
  if (CX.isSplit() && CX.Dim <= 1 && CX.Blocks.empty()) {
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs[0] = CX;
  }
}

void Propagator::ruleGather(const Node &N, NodeSharding &NS) {
  const Value *Data = N.getInput(0), *Idx = N.getInput(1);
  Shape SD = shapeOf(Data);
  replicateAll(N, NS);
  if (SD.empty() || !Idx)
    return;
  int Axis = normAxis(N.getAttrInt("axis", 0), SD.size());
  int Dummy = 0;
  AxisSpec CI = cur(Idx);
  if (traceWeight(Data, Dummy) && Axis == 0 && !CI.isSplit() &&
      !CI.isPartial() && SD.size() == 2 && divisible(SD[0]) &&
      splitWeight(Data, 0, {})) {
    // Vocab-parallel embedding (Megatron): each rank looks up the rows it
    // holds and zeroes the rest; the partial rows are summed.
    NS.InputSpecs = {R.Values[Data], AxisSpec()};
    NS.OutputSpecs = {AxisSpec::partial()};
    NS.Lower = NodeSharding::Lowering::VocabParallelGather;
    return;
  }
  AxisSpec CD = cur(Data);
  unsigned RI = Idx->Type.getRank();
  if (CD.isSplit() && CD.Dim != Axis && CD.Blocks.empty() && !CI.isPartial() &&
      !CI.isSplit()) {
    NS.InputSpecs = {CD, AxisSpec()};
    NS.OutputSpecs = {AxisSpec::split(CD.Dim < Axis ? CD.Dim
                                                    : CD.Dim + RI - 1)};
    return;
  }
  if (CI.isSplit() && !CD.isSplit() && !CD.isPartial()) {
    NS.InputSpecs = {AxisSpec(), CI};
    NS.OutputSpecs = {AxisSpec::split(Axis + CI.Dim)};
    return;
  }
}

void Propagator::ruleReshape(const Node &N, NodeSharding &NS, bool Flatten) {
  const Value *X = N.getInput(0), *Y = N.getOutput(0);
  Shape SX = shapeOf(X), SY = shapeOf(Y);
  AxisSpec CX = cur(X);
  replicateAll(N, NS);
  if (CX.isPartial()) {
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs[0] = CX;
    return;
  }
  if (!CX.isSplit() || !CX.Blocks.empty() || SX.empty() || SY.empty())
    return;
  if (!Flatten && !getConstantInts(N.getInput(1)))
    return;
  // The split dim's chunks are contiguous blocks of prod(SX[d:])/tp
  // elements after a prefix of prod(SX[:d]); the output dim j with the same
  // prefix and a size divisible by tp has the same blocks.
  int64_t Pre = product(makeArrayRef(SX).take_front(CX.Dim));
  int64_t Acc = 1;
  for (unsigned J = 0; J < SY.size(); ++J) {
    if (Acc == Pre && divisible(SY[J])) {
      NS.InputSpecs[0] = CX;
      NS.OutputSpecs[0] = AxisSpec::split(J);
      return;
    }
    Acc *= SY[J];
    if (Acc > Pre)
      break;
  }
}

void Propagator::ruleTranspose(const Node &N, NodeSharding &NS) {
  AxisSpec CX = cur(N.getInput(0));
  unsigned Rank = N.getInput(0)->Type.getRank();
  keepInputs(N, NS, CX);
  if (!CX.isSplit())
    return;
  Optional<std::vector<int64_t>> Perm = N.getAttrInts("perm");
  for (unsigned J = 0; J < Rank; ++J)
    if ((Perm ? (*Perm)[J] : (int64_t)(Rank - 1 - J)) == CX.Dim) {
      AxisSpec Out = CX;
      Out.Dim = J;
      NS.OutputSpecs[0] = Out;
    }
}

void Propagator::ruleUnsqueezeSqueeze(const Node &N, NodeSharding &NS,
                                      bool Unsqueeze) {
  const Value *X = N.getInput(0), *Y = N.getOutput(0);
  AxisSpec CX = cur(X);
  replicateAll(N, NS);
  if (CX.isPartial()) {
    keepInputs(N, NS, CX);
    return;
  }
  if (!CX.isSplit())
    return;
  std::vector<int64_t> Axes = readAxes(N, 1);
  unsigned RX = X->Type.getRank(), RY = Y->Type.getRank();
  std::vector<bool> Marked(Unsqueeze ? RY : RX, false);
  for (int64_t A : Axes) {
    int I = normAxis(A, Unsqueeze ? RY : RX);
    if (I >= 0 && (unsigned)I < Marked.size())
      Marked[I] = true;
  }
  if (!Unsqueeze && Axes.empty()) {
    Shape SX = shapeOf(X);
    for (unsigned I = 0; I < SX.size(); ++I)
      Marked[I] = SX[I] == 1;
  }
  int Out = -1;
  if (Unsqueeze) {
    int Seen = 0;
    for (unsigned J = 0; J < RY; ++J)
      if (!Marked[J] && Seen++ == CX.Dim)
        Out = J;
  } else {
    if (Marked[CX.Dim])
      return;
    Out = CX.Dim;
    for (int I = 0; I < CX.Dim; ++I)
      Out -= Marked[I] ? 1 : 0;
  }
  if (Out < 0)
    return;
  NS.InputSpecs[0] = CX;
  AxisSpec O = CX;
  O.Dim = Out;
  NS.OutputSpecs[0] = O;
}

void Propagator::ruleSplit(const Node &N, NodeSharding &NS) {
  const Value *X = N.getInput(0);
  AxisSpec CX = cur(X);
  unsigned Rank = X->Type.getRank();
  replicateAll(N, NS);
  if (!CX.isSplit())
    return;
  int Axis = normAxis(N.getAttrInt("axis", 0), Rank);
  if (CX.Dim != Axis && CX.Blocks.empty()) {
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs.assign(N.getNumOutputs(), CX);
    return;
  }
  if (CX.Dim == Axis && !CX.Blocks.empty() &&
      CX.Blocks.size() == N.getNumOutputs()) {
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs.assign(N.getNumOutputs(), AxisSpec::split(Axis));
  }
}

void Propagator::ruleConcat(const Node &N, NodeSharding &NS) {
  const Value *Y = N.getOutput(0);
  unsigned Rank = Y->Type.getRank();
  int Axis = normAxis(N.getAttrInt("axis", 0), Rank);
  int Dim = -1;
  for (const Value *V : N.getInputs()) {
    AxisSpec C = cur(V);
    if (C.isSplit() && C.Blocks.empty()) {
      Dim = C.Dim;
      break;
    }
  }
  replicateAll(N, NS);
  if (Dim < 0 || Dim == Axis)
    return;
  for (unsigned I = 0; I < N.getNumInputs(); ++I)
    if (N.getInput(I))
      NS.InputSpecs[I] = AxisSpec::split(Dim);
  NS.OutputSpecs[0] = AxisSpec::split(Dim);
}

void Propagator::ruleSlice(const Node &N, NodeSharding &NS) {
  const Value *X = N.getInput(0);
  AxisSpec CX = cur(X);
  replicateAll(N, NS);
  if (CX.isPartial()) {
    keepInputs(N, NS, AxisSpec());
    NS.InputSpecs[0] = CX;
    NS.OutputSpecs[0] = CX;
    return;
  }
  if (!CX.isSplit() || !CX.Blocks.empty())
    return;
  unsigned Rank = X->Type.getRank();
  std::vector<int64_t> Axes;
  if (Opset < 10) {
    if (Optional<std::vector<int64_t>> A = N.getAttrInts("axes"))
      Axes = *A;
    else if (Optional<std::vector<int64_t>> S = N.getAttrInts("starts"))
      for (unsigned I = 0; I < S->size(); ++I)
        Axes.push_back(I);
  } else if (N.getInput(3)) {
    Optional<std::vector<int64_t>> A = getConstantInts(N.getInput(3));
    if (!A)
      return;
    Axes = *A;
  } else if (Optional<std::vector<int64_t>> S = getConstantInts(N.getInput(1))) {
    for (unsigned I = 0; I < S->size(); ++I)
      Axes.push_back(I);
  } else {
    return;
  }
  for (int64_t A : Axes)
    if (normAxis(A, Rank) == CX.Dim)
      return;
  NS.InputSpecs[0] = CX;
  NS.OutputSpecs[0] = CX;
}

/// Ops that work independently along every dim but \p Axis (Softmax,
/// LayerNormalization from axis on when \p Below, ArgMax, TopK, CumSum).
void Propagator::ruleAxisOp(const Node &N, NodeSharding &NS, int Axis,
                            bool Below) {
  AxisSpec CX = cur(N.getInput(0));
  replicateAll(N, NS);
  if (!CX.isSplit() || !CX.Blocks.empty())
    return;
  bool OK = Below ? CX.Dim < Axis : CX.Dim != Axis;
  if (!OK)
    return;
  NS.InputSpecs[0] = CX;
  for (unsigned O = 0; O < N.getNumOutputs(); ++O)
    if (N.getOutput(O) &&
        N.getOutput(O)->Type.getRank() == N.getInput(0)->Type.getRank())
      NS.OutputSpecs[O] = CX;
}

void Propagator::ruleReduce(const Node &N, NodeSharding &NS) {
  StringRef Op = N.getOpType();
  const Value *X = N.getInput(0);
  unsigned Rank = X->Type.getRank();
  AxisSpec CX = cur(X);
  bool Linear = Op == "ReduceSum" || Op == "ReduceMean";
  replicateAll(N, NS);
  if (CX.isPartial()) {
    if (Linear) {
      NS.InputSpecs[0] = CX;
      NS.OutputSpecs[0] = CX;
    }
    return;
  }
  if (!CX.isSplit() || !CX.Blocks.empty())
    return;
  std::vector<int64_t> Axes = readAxes(N, 1);
  bool AxesFromInput = !N.getAttrInts("axes") && N.getNumInputs() > 1 &&
                       N.getInput(1);
  if (!AxesFromInput && !N.getAttrInts("axes") && N.getNumInputs() > 1 &&
      N.getInput(1))
    return;
  bool Keep = N.getAttrInt("keepdims", 1);
  if (Axes.empty()) {
    if (N.getAttrInt("noop_with_empty_axes", 0))
      return;
    for (unsigned I = 0; I < Rank; ++I)
      Axes.push_back(I);
  }
  bool Reduced = false;
  int Below = 0;
  for (int64_t A : Axes) {
    int I = normAxis(A, Rank);
    if (I == CX.Dim)
      Reduced = true;
    else if (I < CX.Dim)
      ++Below;
  }
  NS.InputSpecs[0] = CX;
  if (Reduced) {
    if (Op == "ReduceSum") {
      NS.OutputSpecs[0] = AxisSpec::partial();
      return;
    }
    NS.InputSpecs[0] = AxisSpec();
    return;
  }
  NS.OutputSpecs[0] = AxisSpec::split(Keep ? CX.Dim : CX.Dim - Below);
}

void Propagator::ruleExpand(const Node &N, NodeSharding &NS) {
  const Value *X = N.getInput(0), *Y = N.getOutput(0);
  AxisSpec CX = cur(X);
  replicateAll(N, NS);
  if (CX.isPartial()) {
    keepInputs(N, NS, CX);
    return;
  }
  if (!CX.isSplit() || !CX.Blocks.empty() || !getConstantInts(N.getInput(1)))
    return;
  NS.InputSpecs[0] = CX;
  NS.OutputSpecs[0] =
      AxisSpec::split(CX.Dim + (int)(Y->Type.getRank() - X->Type.getRank()));
}

void Propagator::record(const Node &N, NodeSharding NS) {
  NS.InputSpecs.resize(N.getNumInputs());
  NS.OutputSpecs.resize(N.getNumOutputs());
  for (unsigned O = 0; O < N.getNumOutputs(); ++O)
    if (const Value *V = N.getOutput(O))
      R.Values[V] = NS.OutputSpecs[O];
  // Keep what the plan decided before propagation (chunk, EP roles).
  NodeSharding &Slot = R.Nodes[&N];
  NS.Chunk = Slot.Chunk;
  NS.Expert = Slot.Expert;
  NS.ExpertCombine = Slot.ExpertCombine;
  NS.Stacked = Slot.Stacked;
  Slot = std::move(NS);
}

static bool isElementwise(StringRef Op) {
  return StringSwitch<bool>(Op)
      .Cases("Add", "Sub", "Mul", "Div", "Pow", "Where", true)
      .Cases("Relu", "Gelu", "Sigmoid", "Tanh", "Erf", "Sqrt", true)
      .Cases("Neg", "Cast", "Exp", "Log", "Equal", "Less", "Greater", true)
      .Cases("LessOrEqual", "GreaterOrEqual", "And", "Or", "Not", "Xor", true)
      .Cases("Max", "Min", "Abs", "Reciprocal", "Clip", "Dropout", true)
      .Cases("Softplus", "HardSigmoid", "LeakyRelu", "Identity", "Mish", true)
      .Cases("Sin", "Cos", "Floor", "Ceil", "Round", "Sign", "IsNaN", true)
      .Cases("Elu", "Selu", "Celu", "HardSwish", "Softsign", "ThresholdedRelu",
             true)
      .Cases("Mod", "Sum", "Mean", "IsInf", "BitShift", "CastLike", true)
      .Default(false);
}

Error Propagator::run() {
  Users = buildUseMap(G);
  StringSet<> NoRule;
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    NodeSharding NS;
    StringRef Op = N.getOpType();
    SeenReplicated.clear();
    const NodeSharding &Marks = R.Nodes[&N];
    if (Marks.Expert >= 0 || Marks.Stacked)
      for (const Value *V : N.getInputs()) {
        AxisSpec C = cur(V);
        if (C.isSplit() && C.Dim <= (Marks.Stacked ? 1 : 0))
          SeenReplicated.insert(V);
      }
    if (!N.getDomain().empty() && N.getDomain() != "ai.onnx") {
      replicateAll(N, NS);
    } else if (TP == 1) {
      replicateAll(N, NS);
    } else if (R.Nodes.count(&N) && !R.Nodes[&N].OutputSpecs.empty()) {
      // A weight chain already decided by its consumer (splitWeight) is
      // revisited: keep it.
      continue;
    } else if (Op == "Constant" || Op == "ConstantOfShape" || Op == "Range") {
      replicateAll(N, NS);
    } else if (Op == "Shape" || Op == "Size") {
      keepInputs(N, NS, AxisSpec());
      if (cur(N.getInput(0)).K != AxisSpec::Replicated)
        NS.Lower = NodeSharding::Lowering::GlobalShape;
    } else if (Op == "MatMul") {
      ruleMatMul(N, NS);
    } else if (Op == "Gemm") {
      ruleGemm(N, NS);
    } else if (Op == "Conv") {
      ruleConv(N, NS);
    } else if (Op == "BatchNormalization" || Op == "InstanceNormalization") {
      if (Op == "InstanceNormalization" && cur(N.getInput(0)).Dim != 1)
        replicateAll(N, NS);
      else
        ruleBatchNorm(N, NS);
    } else if (Op == "MaxPool" || Op == "AveragePool" ||
               Op == "GlobalAveragePool" || Op == "GlobalMaxPool") {
      rulePool(N, NS);
    } else if (Op == "Gather") {
      ruleGather(N, NS);
    } else if (Op == "Reshape") {
      ruleReshape(N, NS, false);
    } else if (Op == "Flatten") {
      ruleReshape(N, NS, true);
    } else if (Op == "Transpose") {
      ruleTranspose(N, NS);
    } else if (Op == "Unsqueeze" || Op == "Squeeze") {
      ruleUnsqueezeSqueeze(N, NS, Op == "Unsqueeze");
    } else if (Op == "Split") {
      ruleSplit(N, NS);
    } else if (Op == "Concat") {
      ruleConcat(N, NS);
    } else if (Op == "Slice") {
      ruleSlice(N, NS);
    } else if (Op == "Softmax" || Op == "LogSoftmax" || Op == "Hardmax") {
      unsigned Rank = N.getInput(0)->Type.getRank();
      if (Opset >= 13)
        ruleAxisOp(N, NS, normAxis(N.getAttrInt("axis", -1), Rank), false);
      else
        ruleAxisOp(N, NS, normAxis(N.getAttrInt("axis", 1), Rank), true);
    } else if (Op == "LayerNormalization") {
      unsigned Rank = N.getInput(0)->Type.getRank();
      ruleAxisOp(N, NS, normAxis(N.getAttrInt("axis", -1), Rank), true);
    } else if (Op == "ArgMax" || Op == "ArgMin") {
      unsigned Rank = N.getInput(0)->Type.getRank();
      if (N.getAttrInt("keepdims", 1))
        ruleAxisOp(N, NS, normAxis(N.getAttrInt("axis", 0), Rank), false);
      else
        replicateAll(N, NS);
    } else if (Op == "TopK") {
      unsigned Rank = N.getInput(0)->Type.getRank();
      ruleAxisOp(N, NS, normAxis(N.getAttrInt("axis", -1), Rank), false);
    } else if (Op.startswith("Reduce")) {
      ruleReduce(N, NS);
    } else if (Op == "Expand") {
      ruleExpand(N, NS);
    } else if (isElementwise(Op) && N.getNumOutputs() >= 1) {
      ruleElementwise(N, NS);
    } else {
      replicateAll(N, NS);
      if (any_of(N.getInputs(),
                 [&](const Value *V) { return !cur(V).isReplicated(); }))
        NoRule.insert(N.getQualifiedOpType());
    }
    record(N, std::move(NS));
  }
  for (const auto &E : NoRule)
    R.Notes.push_back(("op " + E.getKey() +
                       " has no sharding rule: its inputs are gathered and "
                       "it runs replicated")
                          .str());
  std::sort(R.Notes.begin(), R.Notes.end());
  // Graph outputs are replicated: the role builder gathers them.
  return Error::success();
}

/// Marks the Add chain that sums \p EG's unrolled experts, from its first
/// expert-adding link to the one producing EG.Output; the links are the
/// single-use Adds findExperts chained.
void markCombineChain(const Graph &G, const ExpertGroup &EG,
                      ShardingResult &R) {
  if (!EG.Combine || !EG.Output)
    return;
  DenseMap<const Value *, const Node *> OnlyUser;
  DenseSet<const Value *> Shared;
  for (const auto &NP : G.getNodes())
    for (const Value *V : NP->getInputs())
      if (V && !Shared.count(V) && !OnlyUser.insert({V, NP.get()}).second) {
        OnlyUser.erase(V);
        Shared.insert(V);
      }
  for (const Node *N = EG.Combine; N; N = OnlyUser.lookup(N->getOutput(0))) {
    if (N->getOpType() != "Add")
      break;
    R.Nodes[N].ExpertCombine = true;
    if (N->getOutput(0) == EG.Output)
      break;
  }
}

} // namespace

Error propagateSharding(ShardingResult &R) {
  const ParallelPlan &P = R.Plan;
  Graph &G = R.M->getGraph();
  // Pipeline chunks: pp * vpp contiguous runs of layers, chunk c on device
  // c % pp (interleaved 1F1B, Narayanan et al. 2021). With vpp == 1 the
  // chunks are the plan's stages.
  unsigned NL = std::max<size_t>(R.Layers.size(), 1);
  R.NumChunks = P.PP * P.VirtualStages;
  if (P.VirtualStages == 1 && P.StageLayers.size() == P.PP) {
    R.ChunkLayers = P.StageLayers;
  } else {
    if (R.NumChunks > NL)
      return createStringError(inconvertibleErrorCode(),
                               "pp=%u x vpp=%u chunks exceed the model's %u "
                               "layers",
                               P.PP, P.VirtualStages, NL);
    R.ChunkLayers.assign(R.NumChunks, NL / R.NumChunks);
    for (unsigned C = 0; C < NL % R.NumChunks; ++C)
      ++R.ChunkLayers[R.NumChunks - 1 - C];
  }
  unsigned Sum = std::accumulate(R.ChunkLayers.begin(), R.ChunkLayers.end(),
                                 0u);
  if (Sum != NL)
    return createStringError(inconvertibleErrorCode(),
                             "the plan's stages cover %u layers but the "
                             "micro-batch graph has %u",
                             Sum, NL);
  std::vector<unsigned> ChunkOfLayer;
  for (unsigned C = 0; C < R.ChunkLayers.size(); ++C)
    ChunkOfLayer.insert(ChunkOfLayer.end(), R.ChunkLayers[C], C);
  // Nodes outside every layer follow their first consumer's chunk; walk
  // backwards so consumers are decided first.
  DenseMap<const Value *, unsigned> MinUserChunk;
  auto Nodes = G.getNodes();
  for (auto It = Nodes.rbegin(); It != Nodes.rend(); ++It) {
    const Node &N = **It;
    unsigned C;
    if (N.Layer >= 0 && (unsigned)N.Layer < ChunkOfLayer.size()) {
      C = ChunkOfLayer[N.Layer];
    } else {
      C = R.NumChunks - 1;
      bool Any = false;
      for (const Value *O : N.getOutputs()) {
        auto U = MinUserChunk.find(O);
        if (U != MinUserChunk.end()) {
          C = Any ? std::min(C, U->second) : U->second;
          Any = true;
        }
      }
    }
    R.Nodes[&N].Chunk = C;
    for (const Value *V : N.getInputs())
      if (V) {
        auto Ins = MinUserChunk.try_emplace(V, C);
        if (!Ins.second)
          Ins.first->second = std::min(Ins.first->second, C);
      }
  }
  // Expert branches (EP).
  if (P.EP > 1) {
    std::vector<ExpertGroup> Groups = findExperts(G, R.Layers);
    unsigned NE = 0;
    for (const ExpertGroup &EG : Groups)
      if (!EG.BranchOf.empty()) {
        NE = NE ? NE : EG.NumExperts;
        if (EG.NumExperts != NE)
          return createStringError(inconvertibleErrorCode(),
                                   "ep=%u: MoE layers have different expert "
                                   "counts (%u and %u)",
                                   P.EP, NE, EG.NumExperts);
        for (const auto &KV : EG.BranchOf)
          R.Nodes[KV.first].Expert = KV.second;
        markCombineChain(G, EG, R);
      }
    if (!NE)
      for (const ExpertGroup &EG : Groups)
        if (EG.isStacked() && !EG.StackedNodes.empty()) {
          NE = NE ? NE : EG.NumExperts;
          if (EG.NumExperts != NE)
            return createStringError(inconvertibleErrorCode(),
                                     "ep=%u: MoE layers have different "
                                     "expert counts (%u and %u)",
                                     P.EP, NE, EG.NumExperts);
          for (const Node *N : EG.StackedNodes) {
            R.Nodes[N].Stacked = true;
            for (const Value *V : N->getInputs())
              if (V && V->isParameter() && V->Type.getRank() &&
                  V->Type.Dims[0].Size == (int64_t)NE)
                R.ExpertParams.insert(V);
          }
        }
    if (!NE)
      return createStringError(
          inconvertibleErrorCode(),
          "ep=%u: the model has no experts to split", P.EP);
    if (NE % P.EP)
      return createStringError(inconvertibleErrorCode(),
                               "ep=%u does not divide the %u experts", P.EP,
                               NE);
    R.NumExperts = NE;
    // An expert region (branches, the Add chain merging them, and the ops
    // that consume the merged sum) runs in one pipeline chunk: its values
    // hold the ep group's tokens, which only it may see.
    DenseSet<const Node *> Region;
    DenseMap<const Value *, unsigned> RegionChunk;
    for (const auto &NP : G.getNodes()) {
      NodeSharding &NS = R.Nodes[NP.get()];
      bool FromRegion = false;
      unsigned C = NS.Chunk;
      for (const Value *V : NP->getInputs()) {
        auto It = V ? RegionChunk.find(V) : RegionChunk.end();
        if (It != RegionChunk.end()) {
          FromRegion = true;
          C = std::min(C, It->second);
        }
      }
      bool InRegion = NS.Expert >= 0 || NS.Stacked || NS.ExpertCombine;
      if (FromRegion)
        NS.Chunk = C;
      if (InRegion)
        for (const Value *O : NP->getOutputs())
          if (O)
            RegionChunk[O] = NS.Chunk;
    }
  }
  Propagator Prop(R);
  return Prop.run();
}

} // namespace loom
