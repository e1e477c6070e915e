//===- Experts.cpp - Find the experts of mixture-of-experts layers --------===//
//
// Stacked experts: a MatMul whose weight (a parameter, possibly behind a
// Transpose/Cast/Identity) has rank 3 and a static dim 0 of at least 2 is
// an expert projection; those of one layer with the same dim 0 form a group.
// The group's expert nodes are those on a path from the first projection's
// activation input (the dispatched tokens) to the last projection's output.
//
// Unrolled experts: per layer, chains of Adds where each link's result has
// exactly one user, the next link (out = out + expert_e(x) * w_e). Every
// operand of a chain is a candidate branch: its ancestors within the layer.
// A node that is an ancestor of exactly one operand belongs to that
// operand's branch. Branches that multiply a weight of their own, read one
// common token tensor and are isomorphic (the same multiset of op types and
// parameter types) are the experts; at least two are needed. A residual
// chain (x + attention + mlp) fails the isomorphism, a chain whose links
// have other users (pre-norm residuals feed the next norm) is no chain.
//
// Cost: one backward walk per chain operand within its layer, O(E * n) for
// a layer of n nodes.
//
//===----------------------------------------------------------------------===//
#include "loom/Analysis/Experts.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include <algorithm>
#include <map>

using namespace llvm;

namespace loom {

bool ExpertGroup::contains(const Node *N) const {
  return BranchOf.count(N) || is_contained(StackedNodes, N);
}

namespace {

bool isMatmulLike(const Node &N) {
  StringRef Op = N.getOpType();
  return Op == "MatMul" || Op == "Gemm" || Op == "Einsum";
}

/// FNV-1a, stable across runs (as detect-layers').
uint64_t hashString(StringRef S, uint64_t H = 14695981039346656037ull) {
  for (char C : S) {
    H ^= (unsigned char)C;
    H *= 1099511628211ull;
  }
  H ^= 0xff;
  return H * 1099511628211ull;
}

/// Op type and the types of the parameters a node reads.
uint64_t nodeSignature(const Node &N) {
  uint64_t H = hashString(N.getQualifiedOpType());
  for (const Value *V : N.getInputs())
    if (V && V->isParameter())
      H = hashString(V->Type.str(), H);
  return H;
}

/// The expert number a parameter name spells ("experts.3.w1", "expert_3"),
/// or -1.
int getExpertNumber(StringRef Name) {
  for (StringRef Key : {"experts.", "experts_", "expert.", "expert_"}) {
    size_t Pos = Name.find(Key);
    if (Pos == StringRef::npos)
      continue;
    StringRef Rest = Name.drop_front(Pos + Key.size());
    size_t Len = 0;
    while (Len < Rest.size() && isDigit(Rest[Len]))
      ++Len;
    unsigned N;
    if (Len && !Rest.take_front(Len).getAsInteger(10, N))
      return (int)N;
  }
  return -1;
}

class ExpertFinder {
public:
  ExpertFinder(const Graph &G, ArrayRef<LayerInfo> Layers)
      : G(G), Layers(Layers), Users(buildUseMap(G)) {
    for (const auto &NP : G.getNodes())
      Order[NP.get()] = Order.size();
  }

  std::vector<ExpertGroup> run() {
    std::vector<ExpertGroup> Out;
    findStacked(Out);
    findUnrolled(Out);
    std::stable_sort(Out.begin(), Out.end(),
                     [](const ExpertGroup &A, const ExpertGroup &B) {
                       return A.Layer < B.Layer;
                     });
    return Out;
  }

  /// A candidate expert branch of a combine chain: the nodes only one of
  /// the chain's operands reaches.
  struct Branch {
    unsigned Operand;
    std::vector<const Node *> Nodes; // topological order
    std::vector<const Value *> Params;
    /// Activations read by the branch's weight matmuls from outside it.
    std::vector<const Value *> Inputs;
    std::vector<uint64_t> Sig;
  };

private:
  unsigned layerOf(const Node &N) const {
    return N.Layer < 0 ? 0 : (unsigned)N.Layer;
  }
  void findStacked(std::vector<ExpertGroup> &Out);
  void findUnrolled(std::vector<ExpertGroup> &Out);
  void tryChain(ArrayRef<const Node *> Chain, std::vector<ExpertGroup> &Out);
  Optional<Branch>
  getBranch(unsigned Operand, ArrayRef<const Node *> Anc,
            const DenseMap<const Node *, unsigned> &Count) const;

  const Graph &G;
  ArrayRef<LayerInfo> Layers;
  DenseMap<const Node *, unsigned> Order;
  UseMap Users;
};

void ExpertFinder::findStacked(std::vector<ExpertGroup> &Out) {
  // (layer, experts) -> group, in order of the first projection.
  std::map<std::pair<unsigned, unsigned>, unsigned> Index;
  std::vector<ExpertGroup> Groups;
  std::vector<std::vector<const Node *>> Projections;
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    if (N.getOpType() != "MatMul" || N.getNumInputs() != 2)
      continue;
    const Value *W =
        N.getInput(1) ? getWeightParameter(N.getInput(1)) : nullptr;
    const Value *A = N.getInput(0);
    if (!W || !A || isConstantLike(A) || N.getInput(1)->Type.getRank() != 3 ||
        !N.getInput(1)->Type.Dims[0].isStatic() ||
        N.getInput(1)->Type.Dims[0].Size < 2)
      continue;
    unsigned E = N.getInput(1)->Type.Dims[0].Size;
    auto Key = std::make_pair(layerOf(N), E);
    auto It = Index.find(Key);
    if (It == Index.end()) {
      It = Index.emplace(Key, Groups.size()).first;
      ExpertGroup EG;
      EG.Layer = Key.first;
      EG.NumExperts = E;
      EG.Tokens = A;
      Groups.push_back(std::move(EG));
      Projections.emplace_back();
    }
    ExpertGroup &EG = Groups[It->second];
    if (!is_contained(EG.StackedParams, W))
      EG.StackedParams.push_back(W);
    EG.Output = N.getOutput(0);
    Projections[It->second].push_back(&N);
  }
  for (unsigned I = 0; I < Groups.size(); ++I) {
    ExpertGroup &EG = Groups[I];
    // Forward from the tokens, backward from the output, within the layer.
    DenseSet<const Node *> Fwd, Bwd;
    DenseSet<const Value *> Reached = {EG.Tokens};
    unsigned First = Order.lookup(Projections[I].front()),
             Last = Order.lookup(Projections[I].back());
    for (unsigned K = First; K <= Last; ++K) {
      const Node &N = *G.getNodes()[K];
      if (layerOf(N) != EG.Layer)
        continue;
      if (any_of(N.getInputs(),
                 [&](const Value *V) { return V && Reached.count(V); })) {
        Fwd.insert(&N);
        for (const Value *V : N.getOutputs())
          if (V)
            Reached.insert(V);
      }
    }
    SmallVector<const Node *, 16> Work = {Projections[I].back()};
    while (!Work.empty()) {
      const Node *N = Work.pop_back_val();
      if (!Bwd.insert(N).second)
        continue;
      for (const Value *V : N->getInputs())
        if (const Node *D = V ? V->getDefiningNode() : nullptr)
          if (Fwd.count(D))
            Work.push_back(D);
    }
    for (unsigned K = First; K <= Last; ++K) {
      const Node *N = G.getNodes()[K].get();
      if (Fwd.count(N) && Bwd.count(N))
        EG.StackedNodes.push_back(N);
    }
    Out.push_back(std::move(EG));
  }
}

void ExpertFinder::findUnrolled(std::vector<ExpertGroup> &Out) {
  auto IsAdd = [](const Node *N) {
    return N && N->getOpType() == "Add" && N->getDomain().empty() &&
           N->getNumInputs() == 2 && N->getNumOutputs() == 1;
  };
  // Next[A] = B when A's only user is the Add B in the same layer.
  DenseMap<const Node *, const Node *> Next;
  DenseSet<const Node *> HasPrev;
  for (const auto &NP : G.getNodes()) {
    const Node *A = NP.get();
    if (!IsAdd(A) || !A->getOutput(0))
      continue;
    const auto &U = Users.lookup(A->getOutput(0));
    if (U.size() != 1 || !IsAdd(U[0]) ||
        is_contained(G.getOutputs(), A->getOutput(0)))
      continue;
    Next[A] = U[0];
    HasPrev.insert(U[0]);
  }
  for (const auto &NP : G.getNodes()) {
    const Node *A = NP.get();
    if (!Next.count(A) || HasPrev.count(A))
      continue;
    SmallVector<const Node *, 16> Chain;
    for (const Node *N = A; N; N = Next.lookup(N))
      Chain.push_back(N);
    tryChain(Chain, Out);
  }
}

/// The nodes only operand \p Operand of a chain reaches (its ancestors
/// \p Anc that no other operand's reach, per \p Count) as a candidate
/// expert branch: None unless a weight matmul in it reads an activation
/// from outside.
Optional<ExpertFinder::Branch>
ExpertFinder::getBranch(unsigned Operand, ArrayRef<const Node *> Anc,
                        const DenseMap<const Node *, unsigned> &Count) const {
  Branch B;
  B.Operand = Operand;
  for (const Node *N : Anc)
    if (Count.lookup(N) == 1)
      B.Nodes.push_back(N);
  llvm::sort(B.Nodes, [&](const Node *X, const Node *Y) {
    return Order.lookup(X) < Order.lookup(Y);
  });
  DenseSet<const Node *> In(B.Nodes.begin(), B.Nodes.end());
  bool HasWeightMatmul = false;
  for (const Node *N : B.Nodes) {
    B.Sig.push_back(nodeSignature(*N));
    for (const Value *V : N->getInputs())
      if (V && V->isParameter() && !is_contained(B.Params, V))
        B.Params.push_back(V);
    if (!isMatmulLike(*N))
      continue;
    bool Weight = false;
    const Value *Act = nullptr;
    for (const Value *V : N->getInputs()) {
      if (!V)
        continue;
      if (getWeightParameter(V))
        Weight = true;
      else if (!isConstantLike(V) &&
               !(V->getDefiningNode() && In.count(V->getDefiningNode())))
        Act = V;
    }
    HasWeightMatmul |= Weight;
    if (Weight && Act && !is_contained(B.Inputs, Act))
      B.Inputs.push_back(Act);
  }
  if (!HasWeightMatmul || B.Inputs.empty())
    return None;
  llvm::sort(B.Sig);
  return B;
}

/// The largest class of isomorphic \p Branches (equal signatures; the
/// earliest on a tie) of at least two, as indices; empty when none.
static std::vector<unsigned>
findIsomorphicBranches(ArrayRef<ExpertFinder::Branch> Branches) {
  std::map<std::vector<uint64_t>, std::vector<unsigned>> Classes;
  for (unsigned I = 0; I < Branches.size(); ++I)
    Classes[Branches[I].Sig].push_back(I);
  const std::vector<unsigned> *Best = nullptr;
  for (const auto &KV : Classes)
    if (KV.second.size() >= 2 && (!Best || KV.second.size() > Best->size() ||
                                  (KV.second.size() == Best->size() &&
                                   KV.second.front() < Best->front())))
      Best = &KV.second;
  return Best ? *Best : std::vector<unsigned>();
}

/// Numbers the experts \p Best of \p Branches into \p EG (BranchOf,
/// BranchParams): the names' when every branch spells a distinct one in
/// range, else the order along the chain.
static void numberExperts(ArrayRef<ExpertFinder::Branch> Branches,
                          ArrayRef<unsigned> Best, ExpertGroup &EG) {
  std::vector<int> Numbers;
  for (unsigned I : Best) {
    int N = -1;
    for (const Value *P : Branches[I].Params) {
      int K = getExpertNumber(P->getName());
      if (K >= 0 && (N < 0 || K == N))
        N = K;
      else if (K >= 0) {
        N = -1;
        break;
      }
    }
    Numbers.push_back(N);
  }
  std::vector<int> Sorted = Numbers;
  llvm::sort(Sorted);
  bool ByName = true;
  for (unsigned I = 0; I < Sorted.size(); ++I)
    ByName &= Sorted[I] == (int)I;
  EG.BranchParams.resize(EG.NumExperts);
  for (unsigned K = 0; K < Best.size(); ++K) {
    const ExpertFinder::Branch &B = Branches[Best[K]];
    unsigned E = ByName ? (unsigned)Numbers[K] : K;
    for (const Node *N : B.Nodes)
      EG.BranchOf[N] = E;
    EG.BranchParams[E] = B.Params;
  }
}

void ExpertFinder::tryChain(ArrayRef<const Node *> Chain,
                            std::vector<ExpertGroup> &Out) {
  // The chain may cross layers that detect-layers cut between experts (a
  // run of identical expert branches looks like repeated blocks); the
  // walks below stay within the chain's layers and the one before them,
  // where the router and the first experts are.
  unsigned LoLayer = layerOf(*Chain.front()), HiLayer = LoLayer;
  for (const Node *L : Chain) {
    LoLayer = std::min(LoLayer, layerOf(*L));
    HiLayer = std::max(HiLayer, layerOf(*L));
  }
  LoLayer = LoLayer ? LoLayer - 1 : 0;
  // The chain's operands other than its own links.
  SmallVector<const Value *, 16> Operands;
  SmallVector<unsigned, 16> LinkOf; // the chain link adding each operand
  for (unsigned I = 0; I < Chain.size(); ++I)
    for (const Value *V : Chain[I]->getInputs())
      if (V && !(I > 0 && V == Chain[I - 1]->getOutput(0)) &&
          !isConstantLike(V) && V->getDefiningNode()) {
        Operands.push_back(V);
        LinkOf.push_back(I);
      }
  if (Operands.size() < 2)
    return;
  // Ancestors of each operand within the layer; how many operands reach
  // each node.
  std::vector<std::vector<const Node *>> Anc(Operands.size());
  DenseMap<const Node *, unsigned> Count;
  for (unsigned I = 0; I < Operands.size(); ++I) {
    DenseSet<const Node *> Seen;
    SmallVector<const Node *, 32> Work = {Operands[I]->getDefiningNode()};
    while (!Work.empty()) {
      const Node *N = Work.pop_back_val();
      if (layerOf(*N) < LoLayer || layerOf(*N) > HiLayer ||
          !Seen.insert(N).second)
        continue;
      Anc[I].push_back(N);
      ++Count[N];
      for (const Value *V : N->getInputs())
        if (const Node *D = V ? V->getDefiningNode() : nullptr)
          Work.push_back(D);
    }
  }
  std::vector<Branch> Branches;
  for (unsigned I = 0; I < Operands.size(); ++I)
    if (Optional<Branch> B = getBranch(I, Anc[I], Count))
      Branches.push_back(std::move(*B));
  std::vector<unsigned> Best = findIsomorphicBranches(Branches);
  if (Best.empty())
    return;
  // One token tensor read by every expert; parameters of their own.
  const Value *Tokens = nullptr;
  for (const Value *V : Branches[Best.front()].Inputs)
    if (all_of(Best, [&](unsigned I) {
          return is_contained(Branches[I].Inputs, V);
        })) {
      Tokens = V;
      break;
    }
  if (!Tokens)
    return;
  DenseSet<const Value *> Params;
  for (unsigned I : Best)
    for (const Value *P : Branches[I].Params)
      if (!Params.insert(P).second)
        return;

  ExpertGroup EG;
  EG.NumExperts = Best.size();
  EG.Tokens = Tokens;
  // The links that add experts: a residual add may continue the chain.
  unsigned FirstLink = Chain.size(), LastLink = 0;
  for (unsigned I : Best) {
    FirstLink = std::min(FirstLink, LinkOf[Branches[I].Operand]);
    LastLink = std::max(LastLink, LinkOf[Branches[I].Operand]);
  }
  EG.Output = Chain[LastLink]->getOutput(0);
  EG.Combine = Chain[FirstLink];
  EG.Layer = layerOf(*Chain[LastLink]);
  numberExperts(Branches, Best, EG);
  Out.push_back(std::move(EG));
}

} // namespace

unsigned getRoutingMaskClasses(const Value *V) {
  for (unsigned Hops = 0; V && Hops < 16; ++Hops) {
    const Node *D = V->getDefiningNode();
    if (!D || !D->getDomain().empty())
      return 0;
    StringRef Op = D->getOpType();
    if (Op == "Transpose" || Op == "Gather" || Op == "Slice" ||
        Op == "Squeeze" || Op == "Unsqueeze" || Op == "Reshape" ||
        Op == "Cast" || Op == "Identity" || Op == "Flatten") {
      V = D->getInput(0);
      continue;
    }
    if (Op == "OneHot") {
      Optional<std::vector<int64_t>> Depth = getConstantInts(D->getInput(1));
      return Depth && Depth->size() == 1 && (*Depth)[0] > 0
                 ? (unsigned)(*Depth)[0]
                 : 0;
    }
    if (Op != "Equal")
      return 0;
    for (unsigned I = 0; I < 2; ++I) {
      const Value *Idx = D->getInput(I);
      const Node *T = Idx ? Idx->getDefiningNode() : nullptr;
      if (!T || T->getOpType() != "TopK" || T->getOutput(1) != Idx ||
          !getConstantInts(D->getInput(1 - I)) || !T->getInput(0) ||
          !T->getInput(0)->Type.isStatic())
        continue;
      const TensorType &In = T->getInput(0)->Type;
      int64_t Axis = T->getAttrInt("axis", -1);
      if (Axis < 0)
        Axis += In.getRank();
      if (Axis >= 0 && Axis < (int64_t)In.getRank() && In.Dims[Axis].Size > 0)
        return (unsigned)In.Dims[Axis].Size;
    }
    return 0;
  }
  return 0;
}

/// Whether \p D scatters the router's top-k into a tensor of every expert
/// (`zeros.scatter(-1, topi, topw)`: the chosen experts' weights, 0 for
/// the others), the gate of a stacked dense writing (CanonicalizeStacks).
static bool isScatteredTopK(const Node &D) {
  if (D.getOpType() != "ScatterElements" || D.getNumInputs() != 3 ||
      !D.getInput(1))
    return false;
  const Node *T = D.getInput(1)->getDefiningNode();
  return T && T->getOpType() == "TopK" && T->getDomain().empty() &&
         T->getOutput(1) == D.getInput(1);
}

/// Whether \p V is computed, within a few element-wise or layout steps,
/// from a routing mask (getRoutingMaskClasses) or scattered top-k weights.
static bool derivesFromRoutingMask(const Value *V, unsigned Depth = 0) {
  if (!V || Depth > 4)
    return false;
  if (getRoutingMaskClasses(V))
    return true;
  const Node *D = V->getDefiningNode();
  if (!D)
    return false;
  if (D->getDomain().empty() && isScatteredTopK(*D))
    return true;
  return any_of(D->getInputs(), [&](const Value *In) {
    return In && !isConstantLike(In) && derivesFromRoutingMask(In, Depth + 1);
  });
}

std::string getExpertPattern(const ExpertGroup &EG) {
  if (EG.isStacked()) {
    // The dispatched tokens come from an Einsum (`nec,nh->ech`) within a
    // few layout steps.
    const Value *V = EG.Tokens;
    for (unsigned Depth = 0; V && Depth < 4; ++Depth) {
      const Node *D = V->getDefiningNode();
      if (!D)
        break;
      if (D->getOpType() == "Einsum")
        return "stacked, Einsum dispatch";
      V = D->getNumInputs() ? D->getInput(0) : nullptr;
    }
    return "stacked, batched MatMul";
  }
  for (const auto &KV : EG.BranchOf)
    for (const Value *In : KV.first->getInputs())
      if (In && !isConstantLike(In) && derivesFromRoutingMask(In))
        return "unrolled, dense-gated";
  return "unrolled";
}

std::vector<const Node *> findIndexRoutedExperts(const Graph &G) {
  std::vector<const Node *> Out;
  for (const auto &NP : G.getNodes())
    if (NP->getOpType() == "NonZero" && NP->getDomain().empty() &&
        getRoutingMaskClasses(NP->getInput(0)))
      Out.push_back(NP.get());
  return Out;
}

unsigned getRouterTopK(const Graph &G, const ExpertGroup &EG) {
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    if (N.getOpType() != "TopK" || !N.getDomain().empty() ||
        std::max(0, N.Layer) != (int)EG.Layer || !N.getInput(0) ||
        N.getNumInputs() < 2)
      continue;
    const TensorType &In = N.getInput(0)->Type;
    int64_t Axis = N.getAttrInt("axis", -1);
    if (Axis < 0)
      Axis += In.getRank();
    if (Axis < 0 || Axis >= (int64_t)In.getRank() ||
        In.Dims[Axis].Size != (int64_t)EG.NumExperts)
      continue;
    Optional<std::vector<int64_t>> K = getConstantInts(N.getInput(1));
    if (K && K->size() == 1 && (*K)[0] > 0 && (*K)[0] < EG.NumExperts)
      return (unsigned)(*K)[0];
  }
  return 0;
}

double getEPRankCopies(unsigned E, unsigned K, unsigned EP) {
  if (EP <= 1 || K == 0 || E == 0 || E % EP != 0)
    return std::max(1u, K);
  // P(a rank holds none of the K) = prod_{i<K} (E - E/EP - i) / (E - i).
  double None = 1;
  unsigned Off = E - E / EP;
  for (unsigned I = 0; I < K; ++I)
    None *= I < Off && I < E ? double(Off - I) / double(E - I) : 0.0;
  return EP * (1 - None);
}

std::string describeIndexRoutedExperts(ArrayRef<const Node *> Indexed) {
  std::string Out = std::to_string(Indexed.size()) + " index-routed expert(s)";
  unsigned E = 0;
  for (const Node *N : Indexed) {
    unsigned C = getRoutingMaskClasses(N->getInput(0));
    if (E && C != E)
      return Out;
    E = C;
  }
  if (E && Indexed.size() % E == 0)
    Out += " in " + std::to_string(Indexed.size() / E) + " MoE layer(s) of " +
           std::to_string(E);
  return Out;
}

std::vector<ExpertGroup> findExperts(const Graph &G,
                                     ArrayRef<LayerInfo> Layers) {
  return ExpertFinder(G, Layers).run();
}

} // namespace loom
