//===- ExpertLayers.cpp - One layer per MoE layer, whatever the cut -------===//
//
// detect-layers cuts where anchor signatures repeat. Unrolled experts are
// exactly such a repeat (E identical branches of w1, w3, w2), so when the
// MoE layers themselves do not repeat (two MoE layers of different widths)
// the experts' run wins and the cuts fall between experts: a layer of two
// experts, the next of two more, and pipeline stages, per-layer costs and
// expert parallelism would all work on fractions of one MoE layer.
//
// Experts are found by dataflow (findExperts: branches reading the same
// tokens, summed by one chain), which does not care where the cuts are.
// Each group that spans several layers becomes one region of the node
// order: from the first reader of its tokens (the router) to the end of
// its combine chain. Nodes of the spanned layers inside the region form
// one new layer; what those layers hold before or after it stays a layer
// of its own when it multiplies or looks up a weight (the embedding, the
// head, attention), and otherwise joins the nearest region before it (the
// residual add after the experts), or after it. Region layers with equal
// structure (the same anchors in the same order) form a run of repeated
// blocks. Nothing changes when no group spans layers.
//
//===----------------------------------------------------------------------===//
#include "loom/Analysis/Experts.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <climits>
#include <map>

using namespace llvm;

namespace loom {
namespace {

/// FNV-1a, stable across runs.
uint64_t hashMix(uint64_t H, StringRef S) {
  for (char C : S) {
    H ^= (unsigned char)C;
    H *= 1099511628211ull;
  }
  H ^= 0xff;
  return H * 1099511628211ull;
}

/// Whether \p N multiplies or looks up a weight (what makes a layer).
bool readsWeight(const Node &N) {
  StringRef Op = N.getOpType();
  if (Op != "MatMul" && Op != "Gemm" && Op != "Conv" && Op != "Einsum" &&
      Op != "Gather" && Op != "ConvTranspose")
    return false;
  return any_of(N.getInputs(),
                [](const Value *V) { return V && getWeightParameter(V); });
}

struct Region {
  unsigned Start, End; // node positions, inclusive
  int Lo, Hi;          // the detect-layers layers it spans
};

/// The regions of the groups that span more than one layer, by position.
std::vector<Region>
findSpanningRegions(const Graph &G, ArrayRef<ExpertGroup> Groups,
                    const DenseMap<const Node *, unsigned> &Pos) {
  UseMap Users = buildUseMap(G);
  std::vector<Region> Out;
  for (const ExpertGroup &EG : Groups) {
    if (EG.BranchOf.empty() || !EG.Tokens || !EG.Output ||
        !EG.Output->getDefiningNode())
      continue;
    Region R{~0u, Pos.lookup(EG.Output->getDefiningNode()), INT_MAX, -1};
    auto Take = [&](const Node *N) {
      R.Start = std::min(R.Start, Pos.lookup(N));
      R.Lo = std::min(R.Lo, N->Layer);
      R.Hi = std::max(R.Hi, N->Layer);
    };
    for (const auto &KV : EG.BranchOf)
      Take(KV.first);
    for (const Node *U : Users.lookup(EG.Tokens))
      Take(U);
    Take(EG.Output->getDefiningNode());
    if (R.Lo < R.Hi && R.Lo >= 0)
      Out.push_back(R);
  }
  llvm::sort(
      Out, [](const Region &A, const Region &B) { return A.Start < B.Start; });
  // Overlapping regions (one group's chain inside another's span) merge.
  std::vector<Region> Merged;
  for (const Region &R : Out) {
    if (!Merged.empty() && R.Start <= Merged.back().End) {
      Region &M = Merged.back();
      M.End = std::max(M.End, R.End);
      M.Lo = std::min(M.Lo, R.Lo);
      M.Hi = std::max(M.Hi, R.Hi);
      continue;
    }
    Merged.push_back(R);
  }
  return Merged;
}

/// A node's new layer before numbering: a region, or a piece of an old
/// layer (Gap: 1 + how many regions start at or before it, for layers a
/// region cuts; 0 otherwise).
struct Key {
  int Region = -1;
  int Old = 0;
  unsigned Gap = 0;
  bool operator<(const Key &O) const {
    return std::tie(Region, Old, Gap) < std::tie(O.Region, O.Old, O.Gap);
  }
};

/// Sets \p N's layer, and its subgraphs' nodes'.
void setLayer(Node &N, int L) {
  N.Layer = L;
  for (const Attribute &A : N.getAttributes())
    for (const auto &Sub : A.Gs)
      for (const auto &SN : Sub->getNodes())
        setLayer(*SN, L);
}

/// Each node's key: its region, its piece of a cut layer, or its old
/// layer. A piece without weights joins the layer of the node before it (a
/// region, a piece with weights or an untouched layer; not data-independent
/// work detect-layers gave an earlier layer), else the region after it:
/// values still flow from earlier layers to later ones.
std::vector<Key> assignKeys(ArrayRef<std::unique_ptr<Node>> Nodes,
                            ArrayRef<Region> Regions) {
  // Keys per node; pieces of cut layers with their weight reads.
  std::vector<Key> Keys(Nodes.size());
  std::map<Key, bool> PieceHasWeight;
  for (unsigned I = 0; I < Nodes.size(); ++I) {
    const Node &N = *Nodes[I];
    Key K;
    K.Old = N.Layer;
    for (unsigned R = 0; R < Regions.size(); ++R) {
      const Region &Rg = Regions[R];
      if (N.Layer < Rg.Lo || N.Layer > Rg.Hi)
        continue;
      if (I >= Rg.Start && I <= Rg.End) {
        K = Key{(int)R, 0, 0};
        break;
      }
      K.Gap = 1;
    }
    if (K.Region < 0 && K.Gap) {
      // 1 + the regions that start at or before I.
      K.Gap = 1 + (unsigned)count_if(
                      Regions, [&](const Region &Rg) { return Rg.Start <= I; });
      PieceHasWeight[K] |= readsWeight(N);
    }
    Keys[I] = K;
  }
  Optional<Key> Last;
  int MaxOld = INT_MIN;
  for (unsigned I = 0; I < Nodes.size(); ++I) {
    Key &K = Keys[I];
    int Old = Nodes[I]->Layer;
    bool Side = Old < MaxOld;
    MaxOld = std::max(MaxOld, Old);
    if (K.Region >= 0 || !K.Gap || PieceHasWeight[K]) {
      if (!Side || K.Region >= 0)
        Last = K;
      continue;
    }
    K = Last ? *Last
             : Key{(int)std::min<size_t>(K.Gap - 1, Regions.size() - 1), 0, 0};
  }
  return Keys;
}

/// Runs of \p Out: the surviving old runs, then one per repeated region
/// structure (\p BySignature), numbered in order of their first layer; a
/// run left with one layer is none.
void renumberRuns(
    std::vector<LayerInfo> &Out,
    const std::map<uint64_t, std::vector<unsigned>> &BySignature) {
  std::map<int, std::vector<unsigned>> OldRuns;
  for (unsigned L = 0; L < Out.size(); ++L)
    if (Out[L].Run >= 0)
      OldRuns[Out[L].Run].push_back(L);
  std::vector<std::vector<unsigned>> Runs;
  for (auto &KV : OldRuns)
    Runs.push_back(KV.second);
  for (const auto &KV : BySignature)
    Runs.push_back(KV.second);
  llvm::sort(Runs, [](const std::vector<unsigned> &A,
                      const std::vector<unsigned> &B) { return A[0] < B[0]; });
  int Next = 0;
  for (const std::vector<unsigned> &Run : Runs) {
    bool Repeats = Run.size() >= 2;
    for (unsigned L : Run) {
      Out[L].Run = Repeats ? Next : -1;
      if (Repeats)
        Out[L].K = LayerInfo::Kind::Block;
      else if (Out[L].K == LayerInfo::Kind::Block)
        Out[L].K = LayerInfo::Kind::Other;
    }
    Next += Repeats;
  }
}

} // namespace

bool keepExpertGroupsWhole(Graph &G, std::vector<LayerInfo> &Layers) {
  const auto &Nodes = G.getNodes();
  DenseMap<const Node *, unsigned> Pos;
  for (unsigned I = 0; I < Nodes.size(); ++I)
    Pos[Nodes[I].get()] = I;
  std::vector<Region> Regions =
      findSpanningRegions(G, findExperts(G, Layers), Pos);
  if (Regions.empty())
    return false;

  std::vector<Key> Keys = assignKeys(Nodes, Regions);

  // Number the new layers in order of their first node.
  std::map<Key, unsigned> Id;
  std::vector<Key> Order;
  for (const Key &K : Keys)
    if (Id.emplace(K, Order.size()).second)
      Order.push_back(K);
  std::vector<LayerInfo> Out(Order.size());
  std::map<uint64_t, std::vector<unsigned>> BySignature;
  for (unsigned L = 0; L < Order.size(); ++L) {
    const Key &K = Order[L];
    LayerInfo &Info = Out[L];
    Info.Id = L;
    if (K.Region < 0 && !K.Gap && K.Old >= 0 &&
        (unsigned)K.Old < Layers.size()) {
      Info = Layers[K.Old];
      Info.Id = L;
    } else if (K.Region < 0 && K.Old >= 0 && (unsigned)K.Old < Layers.size()) {
      LayerInfo::Kind Old = Layers[K.Old].K;
      Info.K =
          (Old == LayerInfo::Kind::Prologue && L == 0) ||
                  (Old == LayerInfo::Kind::Epilogue && L + 1 == Order.size())
              ? Old
              : LayerInfo::Kind::Other;
    }
    Info.NumNodes = 0;
    Info.ParamCount = 0;
  }
  // Region layers: signatures over their weight reads, in order.
  std::vector<uint64_t> Sig(Order.size(), 14695981039346656037ull);
  DenseSet<const Value *> SeenParams;
  for (unsigned I = 0; I < Nodes.size(); ++I) {
    Node &N = *Nodes[I];
    unsigned L = Id[Keys[I]];
    setLayer(N, (int)L);
    ++Out[L].NumNodes;
    for (const Value *V : N.getInputs())
      if (V && V->isParameter()) {
        Sig[L] =
            hashMix(hashMix(Sig[L], N.getQualifiedOpType()), V->Type.str());
        if (SeenParams.insert(V).second)
          Out[L].ParamCount += V->Type.getNumElements().getValueOr(0);
      }
  }
  for (unsigned L = 0; L < Order.size(); ++L)
    if (Order[L].Region >= 0 || Order[L].Gap) {
      Out[L].Signature = Sig[L];
      Out[L].Run = -1;
      if (Order[L].Region >= 0)
        BySignature[Sig[L]].push_back(L);
    }
  renumberRuns(Out, BySignature);
  Layers = std::move(Out);
  return true;
}

} // namespace loom
