//===- DetectLayers.cpp - Find repeated blocks by structural hashing ------===//
//
// Exporters emit a model layer after layer, so the nodes that read
// parameters ("anchors"), taken in topological order, spell the model's
// structure: embedding, then the same pattern of weight shapes once per
// transformer layer (or ResNet block), then the head. Each anchor gets a
// signature (op type and its parameters' types); the longest run of
// consecutive identical windows of signatures is the repeated block, found
// for every period with rolling hashes in O(n^2) over n anchors. The parts
// before and after a run are searched again. Among runs covering as many
// anchors, the one whose boundaries are the thinnest cuts (fewest live
// activations) wins: residual joins, not Conv -> BatchNorm; and a run
// whose repeats share a data-dependent input read differently by each
// (the two [Conv, BatchNorm] halves of one ResNet block) is no run at all.
// What repeats nowhere is cut into residual blocks after each residual
// join (a downsampling block, a stage of one block); the rest of it is one
// layer (the prologue before the first block, the epilogue after the
// last). A network with neither repeats nor residual joins (a UNet of
// distinct stages, a VGG) is cut as a sequential one, before every weight
// product that all earlier products feed. A node belongs to the layer of the
// most recent anchor before it, except between two layers' anchors, where the
// layers part at the thinnest cut (so block 0's leading norm is block 0's, and
// a view that starts the next layer, like Swin's patch merging, is the next
// layer's); and except data-independent work feeding several layers (rotary
// tables, masks), which goes to the first layer.
//
// Names play no part, so anonymous weights ("onnx::MatMul_123") work.
//
//===----------------------------------------------------------------------===//
#include "loom/Analysis/Experts.h"
#include "loom/IR/StructuralHash.h"
#include "loom/Pass/Pass.h"
#include "loom/Support/DataType.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"
#include <climits>
#include <functional>
#include <map>

using namespace llvm;

namespace loom {
namespace {

/// FNV-1a; stable across runs and platforms (llvm::hash_value is not
/// guaranteed to be).
struct Hasher {
  uint64_t H = 14695981039346656037ull;
  void add(StringRef S) {
    for (char C : S) {
      H ^= (unsigned char)C;
      H *= 1099511628211ull;
    }
    H ^= 0xff;
    H *= 1099511628211ull;
  }
  void add(uint64_t V) {
    for (int I = 0; I < 8; ++I) {
      H ^= (V >> (8 * I)) & 0xff;
      H *= 1099511628211ull;
    }
  }
};

struct Run {
  unsigned Start = 0, Period = 0, Repeats = 0;
};

/// Whether the Repeats units of Period anchors from Start have the same
/// slot signatures (the op types after each anchor up to the next).
static bool haveAlikeSlots(ArrayRef<uint64_t> SlotSig, unsigned Start,
                           unsigned Period, unsigned Repeats) {
  for (unsigned K = 1; K < Repeats; ++K)
    for (unsigned J = 0; J < Period; ++J)
      if (SlotSig[Start + K * Period + J] != SlotSig[Start + J])
        return false;
  return true;
}

/// The best run of >= 2 identical consecutive windows in Sig[Lo, Hi): most
/// anchors covered; then the cleanest cuts, i.e. the least maximum of
/// Cut[b] over the run's boundaries b (Cut[b]: the fewest activations live
/// across any cut between anchors b-1 and b), so a ResNet stage splits at
/// its residual joins (one value crosses) rather than at Conv -> BatchNorm
/// (the branch and the skip cross), and a transformer at its residual
/// stream rather than after its norm; then the shortest period; then the
/// earliest start. A
/// repeated unit must hold a matmul-like op: a layer has weights to
/// multiply, while a pair of equal-shaped table reads (rotary cos/sin) is
/// not a layer. A unit of one anchor (an MLP whose blocks hold one Linear
/// each, issue 30) must be a chain: a single activation crosses each
/// boundary, so that q/k/v projections side by side are not layers; and
/// the nodes after each anchor (SlotSig: up to the next anchor) must be
/// alike, so that two Megatron blocks [column, Relu, row] are not taken
/// for four one-weight layers [column, Relu], [row]; the last unit's may
/// go on past the others' (SlotExt: the last of three nn.LSTM layers is
/// followed by the head's layout change), as long as what they share is
/// not empty. A unit of one matmul-like anchor and others (its bias Add)
/// must chain its products (Follows: each reads the previous one's, other
/// values may cross too) with alike slots.
/// \p IsLayered has the last word (see RepeatChecker).
template <typename LayeredFn>
static Optional<Run>
findBestRun(ArrayRef<uint64_t> Sig, ArrayRef<uint64_t> SlotSig,
            ArrayRef<bool> SlotExt, ArrayRef<bool> IsMatmul,
            ArrayRef<bool> Follows, ArrayRef<unsigned> Cut, unsigned Lo,
            unsigned Hi, LayeredFn IsLayered) {
  unsigned N = Hi - Lo;
  if (N < 2)
    return None;
  // Prefix hashes: P[i] = sum Sig[Lo+j] * B^(i-1-j), mod 2^64.
  const uint64_t B = 0x100000001b3ull;
  std::vector<uint64_t> P(N + 1, 0), Pow(N + 1, 1);
  for (unsigned I = 0; I < N; ++I) {
    P[I + 1] = P[I] * B + Sig[Lo + I];
    Pow[I + 1] = Pow[I] * B;
  }
  Optional<Run> Best;
  uint64_t BestCover = 0;
  unsigned BestCut = 0;
  std::vector<uint64_t> H;
  std::vector<unsigned> CutMax;
  std::vector<unsigned> Len;
  // Matmul-like anchors before each position, to test a window in O(1).
  std::vector<unsigned> MM(N + 1, 0), FM(N + 1, 0);
  for (unsigned I = 0; I < N; ++I) {
    MM[I + 1] = MM[I] + IsMatmul[Lo + I];
    FM[I + 1] = FM[I] + (IsMatmul[Lo + I] && Follows[Lo + I]);
  }
  // SameSlot[i]: anchors from i on whose slots are alike (one-anchor units).
  std::vector<unsigned> SameSlot(N + 1, 0);
  for (int I = (int)N - 1; I >= 0; --I)
    SameSlot[I] = I + 1 < (int)N && SlotSig[Lo + I] == SlotSig[Lo + I + 1]
                      ? SameSlot[I + 1] + 1
                      : 1;
  for (unsigned Pd = 1; Pd <= N / 2; ++Pd) {
    unsigned W = N - Pd + 1;
    H.assign(W, 0);
    for (unsigned I = 0; I < W; ++I)
      H[I] = P[I + Pd] - P[I] * Pow[Pd];
    Len.assign(W, 1);
    for (int I = (int)W - 1 - (int)Pd; I >= 0; --I)
      if (H[I] == H[I + Pd])
        Len[I] = Len[I + Pd] + 1;
    // CutMax[i]: the worst cut among the boundaries i, i + Pd, ...,
    // i + Len[i] * Pd of the run starting at i (relative to Lo).
    CutMax.assign(W, 0);
    for (int I = (int)W - 1; I >= 0; --I)
      CutMax[I] = std::max(Cut[Lo + I],
                           Len[I] >= 2 ? CutMax[I + Pd] : Cut[Lo + I + Pd]);
    for (unsigned I = 0; I < W; ++I) {
      if (Len[I] < 2 || MM[I + Pd] == MM[I])
        continue;
      // A unit of one anchor is a layer only in a chain: one activation
      // crosses every boundary (an MLP of Linear + ReLU blocks), unlike
      // q/k/v projections side by side, which all read the same input.
      if (Pd == 1 && (CutMax[I] != 1 || (SameSlot[I] < Len[I] &&
                                         !(SameSlot[I] + 1 == Len[I] &&
                                           SlotExt[Lo + I + Len[I] - 2]))))
        continue;
      // A unit of one product and its bias (MatMul + Add, as canonicalize
      // writes a Gemm) must be a chain of products, each unit's reading
      // the previous one's, with alike work after each anchor: q, k and v
      // projections with biases side by side repeat as [MatMul, Add] too,
      // and so do an attention's v and output projections.
      if (Pd > 1 && MM[I + Pd] - MM[I] == 1 &&
          (FM[I + Len[I] * Pd] - FM[I + Pd] != Len[I] - 1 ||
           !haveAlikeSlots(SlotSig, Lo + I, Pd, Len[I])))
        continue;
      uint64_t Cover = (uint64_t)Len[I] * Pd;
      if (!(Cover > BestCover || (Cover == BestCover && CutMax[I] < BestCut)))
        continue;
      // A unit is cut where it is thinnest: a cut inside the first window
      // thinner than the run's boundaries means the boundaries split
      // blocks (a ResNet's [BatchNorm, Conv] pairs across a residual join).
      bool Thinner = false;
      for (unsigned K = I + 1; K < I + Pd && !Thinner; ++K)
        Thinner = Cut[Lo + K] < CutMax[I];
      if (!Thinner && IsLayered(Lo + I, Pd, Len[I])) {
        BestCover = Cover;
        BestCut = CutMax[I];
        Best = Run{Lo + I, Pd, Len[I]};
      }
    }
  }
  return Best;
}

/// Where a layer starts: its first anchor, its run (-1 if none), and
/// whether it is a residual block cut out of a segment that repeats nowhere.
struct LayerStart {
  unsigned Anchor;
  int Run;
  bool Residual;
  /// A product that starts a layer of a sequential network (see
  /// splitSequential): the layer before ends right before it, keeping the
  /// previous product's norm and activation.
  bool Sequential = false;
};

/// Whether the repeats of a candidate run are layers of their own: a
/// data-dependent activation that reaches past the next repeat (the
/// attention mask of a BERT, the skip input of a ResNet block) must be read
/// by every later repeat, and the same way (by the same op and operand, at
/// the same anchor offset). Two [Conv, BatchNorm] pairs of one residual
/// block repeat in their anchors, but the block's input is read by the
/// first pair's Conv and by the second pair's residual Add: they are halves
/// of one layer, not two layers.
class RepeatChecker {
public:
  struct Read {
    int Slot;     ///< Anchor at or before the reader.
    uint64_t Key; ///< Reader's op type and operand index.
  };
  struct Far {
    int DefSlot; ///< Anchor at or before the definition; -1: before all.
    int MaxSlot;
    std::vector<Read> Reads; ///< By slot.
  };
  std::vector<Far> Values;

  bool operator()(unsigned Start, unsigned Period, unsigned Repeats) const {
    int S = Start, P = Period, End = Start + Period * Repeats;
    std::vector<std::vector<std::pair<int, uint64_t>>> Per(Repeats);
    for (const Far &F : Values) {
      if (F.MaxSlot < S || F.DefSlot >= End)
        continue;
      int Own = F.DefSlot < S ? -1 : (F.DefSlot - S) / P;
      for (auto &V : Per)
        V.clear();
      int Last = -1;
      for (const Read &R : F.Reads)
        if (R.Slot >= S && R.Slot < End) {
          int Rep = (R.Slot - S) / P;
          if (Rep > Own) {
            Per[Rep].emplace_back((R.Slot - S) % P, R.Key);
            Last = Rep;
          }
        }
      if (Last < Own + 2)
        continue; // Read by its own repeat and the next one at most.
      for (auto &V : Per)
        llvm::sort(V);
      for (int Rep = Own + 2; Rep < (int)Repeats; ++Rep)
        if (Per[Rep] != Per[Own + 1])
          return false;
    }
    return true;
  }
};

/// Splits anchors into layers: runs of repeated blocks, and between them
/// segments that repeat nowhere, which are cut at residual joins.
struct Segmenter {
  ArrayRef<uint64_t> Sig;
  ArrayRef<uint64_t> SlotSig;
  ArrayRef<bool> SlotExt;
  ArrayRef<bool> IsMatmul;
  /// Follows[b]: matmul-like anchor b's product reads the previous one's.
  ArrayRef<bool> Follows;
  ArrayRef<unsigned> Cut;
  /// JoinCut[b]: between anchors b-1 and b there is a cut where the only
  /// live data-dependent activation is the output of a residual join.
  ArrayRef<bool> JoinCut;
  const RepeatChecker &Checker;
  int NextRun = 0;
  std::vector<LayerStart> Starts = {};
  /// Residual joins per repeated block (1 in a ResNet, 2 in a transformer:
  /// attention and MLP), the fewest over the runs.
  unsigned JoinsPerBlock = ~0u;

  void run() {
    split(0, Sig.size());
    if (JoinsPerBlock == ~0u || JoinsPerBlock == 0)
      JoinsPerBlock = 1;
    std::vector<LayerStart> Found;
    std::swap(Found, Starts);
    for (unsigned L = 0; L < Found.size(); ++L) {
      if (Found[L].Run >= 0) {
        Starts.push_back(Found[L]);
        continue;
      }
      unsigned Hi = L + 1 < Found.size() ? Found[L + 1].Anchor : Sig.size();
      splitAtJoins(Found[L].Anchor, Hi);
    }
  }

private:
  void split(unsigned Lo, unsigned Hi) {
    if (Lo >= Hi)
      return;
    Optional<Run> R = findBestRun(Sig, SlotSig, SlotExt, IsMatmul, Follows, Cut,
                                  Lo, Hi, Checker);
    if (!R) {
      Starts.push_back({Lo, -1, false});
      return;
    }
    split(Lo, R->Start);
    int RunId = NextRun++;
    for (unsigned K = 0; K < R->Repeats; ++K)
      Starts.push_back({R->Start + K * R->Period, RunId, false});
    unsigned Joins = 0;
    for (unsigned B = R->Start + 1; B <= R->Start + R->Period; ++B)
      Joins += JoinCut[B];
    JoinsPerBlock = std::min(JoinsPerBlock, Joins);
    split(R->Start + R->Repeats * R->Period, Hi);
  }

  /// What repeats nowhere (a ResNet stage's downsampling block, a stage of
  /// one block) is still made of residual blocks as deep as the repeated
  /// ones: cut after every JoinsPerBlock-th residual join where nothing
  /// else data-dependent is live, as long as both sides multiply weights.
  /// A segment without such joins (embedding, norm and head, patch
  /// merging), or with fewer than a block's (an embedding with a dense
  /// first transformer layer), stays one layer.
  void splitAtJoins(unsigned Lo, unsigned Hi) {
    auto HasMatmul = [&](unsigned A, unsigned B) {
      return std::any_of(IsMatmul.begin() + A, IsMatmul.begin() + B,
                         [](bool M) { return M; });
    };
    unsigned Prev = Lo, Joins = 0;
    for (unsigned B = Lo + 1; B < Hi; ++B)
      if (JoinCut[B] && ++Joins >= JoinsPerBlock && HasMatmul(Prev, B) &&
          HasMatmul(B, Hi)) {
        Starts.push_back({Prev, -1, true});
        Prev = B;
        Joins = 0;
      }
    Starts.push_back({Prev, -1, false});
  }
};

static bool isMatmulLike(const Node &N) {
  StringRef Op = N.getOpType();
  // The recurrent ops multiply their W and R every step: an nn.LSTM layer
  // is one LSTM node.
  return Op == "MatMul" || Op == "Gemm" || Op == "Conv" ||
         Op == "ConvTranspose" || Op == "Einsum" || Op == "LSTM" ||
         Op == "GRU" || Op == "RNN";
}

/// A weight: a parameter that is not integer. Integer initializers (a Swin's
/// relative position index, any index buffer) are constants that train
/// nothing; fold-shape-arith already folds the copies the exporter reads
/// through Identity into Constant nodes, so counting them as weights would
/// make the first of equal blocks differ from the rest.
static bool isWeight(const Value *V) {
  return V && V->isParameter() && !isInteger(V->Type.Elem);
}

/// Whether a body of \p N (If, Loop, Scan) reads a weight of an outer
/// graph by name: the node applies that weight as an op reading it would.
static bool bodyReadsWeight(const Node &N) {
  for (const Attribute &A : N.getAttributes())
    for (const auto &Sub : A.Gs)
      for (const auto &M : Sub->getNodes()) {
        if (any_of(M->getInputs(), [&](const Value *V) {
              return isWeight(V) && V->getGraph() != Sub.get();
            }))
          return true;
        if (bodyReadsWeight(*M))
          return true;
      }
  return false;
}

static uint64_t anchorSignature(const Node &N) {
  Hasher H;
  H.add(N.getQualifiedOpType());
  for (unsigned I = 0; I < N.getNumInputs(); ++I) {
    const Value *V = N.getInput(I);
    if (!isWeight(V))
      continue;
    H.add(I);
    H.add(V->Type.str());
  }
  return H.H;
}

static void setLayerRecursively(Graph &G, int Layer) {
  for (const auto &N : G.getNodes()) {
    N->Layer = Layer;
    for (const Attribute &A : N->getAttributes())
      for (const auto &Sub : A.Gs)
        setLayerRecursively(*Sub, Layer);
  }
}

/// Ops that only re-index their input's elements (a torch view).
static bool isView(const Node &N) {
  StringRef Op = N.getOpType();
  return Op == "Reshape" || Op == "Flatten" || Op == "Squeeze" ||
         Op == "Unsqueeze" || Op == "Identity";
}

/// Whether \p V is the output of a residual join (an Add or Sum of two
/// data-dependent activations: a block's branch and its skip or
/// downsample), possibly through element-wise unary ops and views (a
/// ResNet block's final ReLU).
static bool isJoinOutput(const Value *V, const DenseSet<const Value *> &DD) {
  for (unsigned Depth = 0; Depth < 4 && V; ++Depth) {
    const Node *D = V->getDefiningNode();
    if (!D)
      return false;
    StringRef Op = D->getOpType();
    unsigned DataIn = 0;
    const Value *In = nullptr;
    for (const Value *I : D->getInputs())
      if (I && DD.count(I) && I->getDefiningNode()) {
        ++DataIn;
        In = I;
      }
    if ((Op == "Add" || Op == "Sum") && DataIn >= 2)
      return true;
    bool Unary = isView(*D) || Op == "Relu" || Op == "Gelu" ||
                 Op == "Sigmoid" || Op == "Tanh" || Op == "LeakyRelu" ||
                 Op == "Clip";
    if (!Unary || DataIn != 1)
      return false;
    V = In;
  }
  return false;
}

/// The state the steps of DetectLayersPass share, in the order they fill it.
class LayerDetector {
public:
  explicit LayerDetector(Graph &G)
      : G(G), Users(buildUseMap(G)), NumNodes(G.getNumNodes()),
        DataDep(findDataDependent(G)), ConstOnly(findConstantOnly(G)) {
    for (unsigned I = 0; I < NumNodes; ++I)
      Index[G.getNodes()[I].get()] = I;
  }

  /// Fills \p Layers and sets every node's layer.
  void run(std::vector<LayerInfo> &Layers) {
    findAnchors();
    computeLiveSpans();
    computeAnchorCuts();
    collectFarReads();
    Layers.clear();
    chooseLayerStarts();
    buildLayerInfos(Layers);
    assignNodesToLayers();
    assignSharedIndependentWork();
    annotateNodes(Layers);
  }

private:
  Graph &G;
  UseMap Users;
  unsigned NumNodes;
  DenseMap<const Node *, unsigned> Index;
  DenseSet<const Value *> DataDep;
  DenseSet<const Value *> ConstOnly;

  /// Anchors: the nodes that read parameters, with their signatures.
  std::vector<unsigned> AnchorNode;
  std::vector<uint64_t> Sig;
  /// Per anchor: the op types of the nodes after it, up to the next.
  std::vector<uint64_t> SlotSig;
  /// SlotExt[b]: anchor b's slot is not empty and anchor b + 1's begins
  /// with it and goes on.
  SmallVector<bool, 64> SlotExt;
  SmallVector<bool, 64> IsMatmul;
  /// Follows[b]: matmul-like anchor b's product depends on the previous
  /// matmul-like anchor's (a chain, not products side by side).
  SmallVector<bool, 64> Follows;
  /// Slot[i]: the most recent anchor at or before node i (-1: none).
  std::vector<int> Slot;

  /// Live[c]: activations defined before node c and read at or after it
  /// (constants, parameters and graph inputs do not count: they cross
  /// every cut alike; so do values computed from them alone amid the work
  /// on the inputs).
  std::vector<unsigned> Live;
  /// Activations as (defining node, last reader), for the gaps below.
  std::vector<std::pair<unsigned, unsigned>> Spans;
  std::vector<const Value *> SpanValue;
  /// The same for data-dependent activations only: how many are live
  /// before node c, and the sum of their span numbers (which names the
  /// value where only one is live).
  std::vector<unsigned> DLive;
  std::vector<uint64_t> DSum;

  /// Cut[b]: the fewest live values at a cut between anchor b-1 and
  /// anchor b (node positions after the one, up to the other).
  std::vector<unsigned> Cut;
  /// JoinCut[b]: a cut between anchors b-1 and b where the one live
  /// data-dependent activation is a residual join's output.
  SmallVector<bool, 64> JoinCut;
  RepeatChecker Checker;

  /// Layer l covers anchors [Starts[l], Starts[l+1]).
  std::vector<LayerStart> Starts;

  /// Gap L (before layer L >= 1): cut positions [From[L], To[L]]; Next[L]
  /// is the first anchor node of layer L + 1. Local[c]: the activations
  /// live at c that are read no later than the gap's layer.
  std::vector<unsigned> From, To, Next;
  std::vector<int> Local;

  /// Layer[i]: the layer of node i.
  std::vector<int> Layer;

  /// A node other than a Constant whose results depend on no graph input.
  bool isIndependentWork(const Node &N) const {
    return N.getOpType() != "Constant" &&
           none_of(N.getOutputs(),
                   [&](const Value *O) { return O && DataDep.count(O); });
  }

  void findAnchors() {
    for (unsigned I = 0; I < NumNodes; ++I) {
      const Node &N = *G.getNodes()[I];
      // Table work (a rotary table computed from a weight-held inv_freq)
      // starts no layer: like a mask, it goes to the first layer that
      // reads it.
      if ((any_of(N.getInputs(), isWeight) &&
           !isTableWork(N, DataDep, ConstOnly)) ||
          bodyReadsWeight(N)) {
        AnchorNode.push_back(I);
        Sig.push_back(anchorSignature(N));
        // A weight read through a layout change (torch's Linear on 3-D
        // inputs exports Transpose(weight) -> MatMul) counts too.
        bool MM = isMatmulLike(N);
        for (const Value *O : N.getOutputs())
          if (O && !MM)
            for (const Node *U : Users.lookup(O))
              MM |= isMatmulLike(*U);
        IsMatmul.push_back(MM);
      }
    }
    Slot.assign(NumNodes, -1);
    for (unsigned I = 0, A = 0; I < NumNodes; ++I) {
      while (A < AnchorNode.size() && AnchorNode[A] <= I)
        ++A;
      Slot[I] = (int)A - 1;
    }
    // The op types after each anchor, up to the next one. Work computed
    // from constants alone (a rotary table computed in the graph, made
    // once where the first block needs it) is not part of the block it
    // happens to sit in: assignSharedIndependentWork gives it to the
    // first layer reading it. Nor is a Constant: data, not work (the
    // zero initial state of the next nn.LSTM layer, folded, sits after
    // this one's output).
    std::vector<std::vector<std::string>> Slots(AnchorNode.size());
    for (unsigned I = 0; I < NumNodes; ++I) {
      const Node &N = *G.getNodes()[I];
      if (Slot[I] >= 0 && AnchorNode[Slot[I]] != I &&
          N.getOpType() != "Constant" && !isIndependentWork(N))
        Slots[Slot[I]].push_back(N.getQualifiedOpType());
    }
    for (unsigned B = 0; B < Slots.size(); ++B) {
      Hasher H;
      for (const std::string &Op : Slots[B])
        H.add(Op);
      SlotSig.push_back(H.H);
      const auto &Next = B + 1 < Slots.size() ? Slots[B + 1] : Slots[B];
      SlotExt.push_back(
          !Slots[B].empty() && Next.size() > Slots[B].size() &&
          std::equal(Slots[B].begin(), Slots[B].end(), Next.begin()));
    }
    findFollows();
  }

  /// Calls \p F(i, d) for every node i, in order, and each node d of this
  /// graph making one of i's inputs.
  template <typename Fn> void forEachProducer(Fn F) const {
    for (unsigned I = 0; I < NumNodes; ++I)
      for (const Value *V : G.getNodes()[I]->getInputs()) {
        const Node *D = V ? V->getDefiningNode() : nullptr;
        auto It = D ? Index.find(D) : Index.end();
        if (It != Index.end())
          F(I, It->second);
      }
  }

  /// Fills Follows: a matmul-like anchor follows when the latest
  /// matmul-like node its product depends on (Reach) comes at or after the
  /// previous matmul-like anchor.
  void findFollows() {
    std::vector<int> Reach(NumNodes, -1);
    forEachProducer([&](unsigned I, unsigned D) {
      Reach[I] = std::max(Reach[I],
                          isMatmulLike(*G.getNodes()[D]) ? (int)D : Reach[D]);
    });
    Follows.assign(AnchorNode.size(), false);
    int Prev = -1;
    for (unsigned B = 0; B < AnchorNode.size(); ++B) {
      if (!IsMatmul[B])
        continue;
      Follows[B] = Prev >= 0 &&
                   Reach[getProduct(AnchorNode[B])] >= (int)AnchorNode[Prev];
      Prev = B;
    }
  }

  /// Fills Spans, SpanValue, Live, DLive and DSum, by prefix sums over
  /// each activation's span.
  void computeLiveSpans() {
    std::vector<int> Delta(NumNodes + 2, 0), DDelta(NumNodes + 2, 0);
    std::vector<int64_t> SDelta(NumNodes + 2, 0);
    unsigned FirstDependent = 0;
    while (FirstDependent < NumNodes &&
           none_of(G.getNodes()[FirstDependent]->getOutputs(),
                   [&](const Value *O) { return O && DataDep.count(O); }))
      ++FirstDependent;
    for (unsigned I = 0; I < NumNodes; ++I)
      for (const Value *V : G.getNodes()[I]->getOutputs()) {
        // Work computed from constants alone amid the work on the inputs
        // (a rotary table computed where the first block needs it) could
        // be made before it all, and then crosses every cut alike, as a
        // constant does: it does not count.
        if (!V || G.getNodes()[I]->getOpType() == "Constant" ||
            (I > FirstDependent && !DataDep.count(V)))
          continue;
        unsigned Last = I;
        for (const Node *U : Users.lookup(V))
          Last = std::max(Last, Index.lookup(U));
        // A graph output no later node reads (a decoder's present key
        // and value, made in every block) leaves the graph where it is
        // made: it crosses no cut between blocks.
        if (Last > I) {
          Spans.emplace_back(I, Last);
          SpanValue.push_back(V);
          ++Delta[I + 1];
          --Delta[Last + 1];
          if (DataDep.count(V)) {
            ++DDelta[I + 1];
            --DDelta[Last + 1];
            SDelta[I + 1] += Spans.size();
            SDelta[Last + 1] -= Spans.size();
          }
        }
      }
    Live.assign(NumNodes + 1, 0);
    DLive.assign(NumNodes + 1, 0);
    DSum.assign(NumNodes + 1, 0);
    int Acc = 0, DAcc = 0;
    int64_t SAcc = 0;
    for (unsigned C = 0; C <= NumNodes; ++C) {
      Live[C] = Acc += Delta[C];
      DLive[C] = DAcc += DDelta[C];
      DSum[C] = SAcc += SDelta[C];
    }
  }

  /// Fills Cut and JoinCut.
  void computeAnchorCuts() {
    Cut.assign(AnchorNode.size() + 1, 0);
    for (unsigned B = 0; B <= AnchorNode.size(); ++B) {
      unsigned From = B ? AnchorNode[B - 1] + 1 : 0;
      unsigned To = B < AnchorNode.size() ? AnchorNode[B] : NumNodes;
      unsigned Min = ~0u;
      for (unsigned C = From; C <= To; ++C)
        Min = std::min(Min, Live[C]);
      Cut[B] = Min;
    }
    JoinCut.assign(AnchorNode.size() + 1, false);
    for (unsigned B = 1; B < AnchorNode.size(); ++B)
      for (unsigned C = AnchorNode[B - 1] + 1;
           C <= AnchorNode[B] && !JoinCut[B]; ++C)
        JoinCut[B] =
            DLive[C] == 1 && isJoinOutput(SpanValue[DSum[C] - 1], DataDep);
  }

  /// Data-dependent activations read more than one anchor after they are
  /// made, with their readers, for RepeatChecker.
  void collectFarReads() {
    for (unsigned S = 0; S < Spans.size(); ++S) {
      const Value *V = SpanValue[S];
      int Def = Slot[Spans[S].first];
      if (!DataDep.count(V) || Spans[S].second >= NumNodes ||
          Slot[Spans[S].second] < Def + 2)
        continue;
      RepeatChecker::Far F{Def, Slot[Spans[S].second], {}};
      for (const Node *U : Users.lookup(V)) {
        unsigned UI = Index.lookup(U);
        for (unsigned K = 0; K < U->getNumInputs(); ++K)
          if (U->getInput(K) == V) {
            Hasher H;
            H.add(U->getQualifiedOpType());
            H.add(K);
            F.Reads.push_back({Slot[UI], H.H});
          }
      }
      llvm::sort(F.Reads, [](const RepeatChecker::Read &A,
                             const RepeatChecker::Read &B) {
        return A.Slot < B.Slot || (A.Slot == B.Slot && A.Key < B.Key);
      });
      Checker.Values.push_back(std::move(F));
    }
  }

  /// The repeated-block and residual-block layer boundaries, in anchors.
  /// A network in which nothing repeats and nothing joins a residual (a
  /// UNet of distinct stages, a VGG, an MLP of varying widths) would be one
  /// layer, which no pipeline can cut: it is cut as a sequential network
  /// (GPipe and torch's Pipe partition an nn.Sequential by its children).
  void chooseLayerStarts() {
    Segmenter Seg{Sig,     SlotSig, SlotExt, IsMatmul,
                  Follows, Cut,     JoinCut, Checker};
    Seg.run();
    Starts = std::move(Seg.Starts);
    if (Starts.empty())
      Starts.push_back({0, -1, false});
    if (Seg.NextRun == 0 && Starts.size() == 1)
      splitSequential();
  }

  /// The matmul-like node of anchor node \p I: itself, or the first
  /// matmul-like reader of its result (torch's Linear on 3-D inputs
  /// multiplies by Transpose(weight)).
  unsigned getProduct(unsigned I) const {
    const Node &A = *G.getNodes()[I];
    if (!isMatmulLike(A))
      for (const Value *O : A.getOutputs())
        if (O)
          for (const Node *U : Users.lookup(O))
            if (isMatmulLike(*U))
              return Index.lookup(U);
    return I;
  }

  /// Starts a layer at every matmul-like anchor b where the network is
  /// sequential: every weight product before b feeds, through any ops,
  /// every product from b on. Products side by side stay in one layer (q,
  /// k and v reading one input; gate and up; the experts of an MoE), and
  /// the values live at a cut (a UNet's skips) are what the stages send.
  void splitSequential() {
    std::vector<unsigned> Anchors;
    DenseMap<unsigned, unsigned> ProductOf; // node -> product number
    for (unsigned B = 0; B < AnchorNode.size(); ++B)
      if (IsMatmul[B] &&
          ProductOf.try_emplace(getProduct(AnchorNode[B]), Anchors.size())
              .second)
        Anchors.push_back(B);
    unsigned K = Anchors.size();
    if (K < 2)
      return;
    // Feeds[i]: the products node i's inputs depend on.
    std::vector<BitVector> Feeds(NumNodes, BitVector(K));
    forEachProducer([&](unsigned I, unsigned D) {
      Feeds[I] |= Feeds[D];
      auto P = ProductOf.find(D);
      if (P != ProductOf.end())
        Feeds[I].set(P->second);
    });
    // First[c]: the first product before product c that does not feed it;
    // a cut before product b is sequential when no product from b on
    // misses one before b.
    std::vector<unsigned> First(K);
    for (const auto &P : ProductOf) {
      const BitVector &F = Feeds[P.first];
      unsigned C = P.second, A = 0;
      while (A < C && F.test(A))
        ++A;
      First[C] = A;
    }
    unsigned Min = K;
    std::vector<bool> Sequential(K, false);
    for (unsigned C = K; C-- > 1;) {
      Min = std::min(Min, First[C]);
      Sequential[C] = Min >= C;
    }
    // Stacked experts multiply in sequence too (up, then down, on the
    // dispatched tokens): an expert region stays whole, as ep splits it.
    std::vector<std::pair<unsigned, unsigned>> Regions;
    for (const ExpertGroup &EG : findExperts(G, {})) {
      unsigned Lo = NumNodes, Hi = 0;
      for (unsigned I = 0; I < NumNodes; ++I)
        if (EG.contains(G.getNodes()[I].get())) {
          Lo = std::min(Lo, I);
          Hi = std::max(Hi, I);
        }
      Regions.emplace_back(Lo, Hi);
    }
    for (unsigned C = 1; C < K; ++C) {
      unsigned At = AnchorNode[Anchors[C]];
      if (Sequential[C] && none_of(Regions, [&](const auto &R) {
            return R.first < At && At <= R.second;
          }))
        Starts.push_back({Anchors[C], -1, false, true});
    }
  }

  /// Before the first block (repeated or residual) is the prologue, after
  /// the last the epilogue.
  void buildLayerInfos(std::vector<LayerInfo> &Layers) const {
    int FirstBlock = -1, LastBlock = -1;
    for (unsigned L = 0; L < Starts.size(); ++L)
      if (Starts[L].Run >= 0 || Starts[L].Residual) {
        if (FirstBlock < 0)
          FirstBlock = L;
        LastBlock = L;
      }
    for (unsigned L = 0; L < Starts.size(); ++L) {
      LayerInfo Info;
      Info.Id = L;
      Info.Run = Starts[L].Run;
      if (Info.Run >= 0)
        Info.K = LayerInfo::Kind::Block;
      else if (FirstBlock >= 0 && (int)L < FirstBlock)
        Info.K = LayerInfo::Kind::Prologue;
      else if (FirstBlock >= 0 && (int)L > LastBlock)
        Info.K = LayerInfo::Kind::Epilogue;
      unsigned Begin = Starts[L].Anchor;
      unsigned End = L + 1 < Starts.size() ? Starts[L + 1].Anchor : Sig.size();
      Hasher H;
      for (unsigned A = Begin; A < End; ++A)
        H.add(Sig[A]);
      Info.Signature = H.H;
      Layers.push_back(Info);
    }
  }

  /// Nodes: the layer of the most recent anchor (the first layer for the
  /// nodes before any anchor), except in the gap between a layer's last
  /// anchor and the next layer's first: there the layers part where the
  /// fewest activations are live (the residual stream after the residual
  /// add and, in a ResNet, its ReLU; before the first block, the
  /// embedding's output, so block 0's leading norm is block 0's), the
  /// latest such place on a tie (a residual join's ReLU stays with its
  /// block), but never right after a view: a layer hands on values as it
  /// made them, and a view of the handed value (the reshape that starts
  /// Swin's patch merging) is its reader's.
  void assignNodesToLayers() {
    findGaps();
    countGapLocalLive();
    // CutPos[L]: the first node of layer L >= 1.
    std::vector<unsigned> CutPos(Starts.size(), 0);
    for (unsigned L = 1; L < Starts.size(); ++L)
      CutPos[L] = chooseGapCut(L);
    Layer.assign(NumNodes, 0);
    unsigned L = 0;
    for (unsigned I = 0; I < NumNodes; ++I) {
      while (L + 1 < Starts.size() && CutPos[L + 1] <= I)
        ++L;
      Layer[I] = L;
    }
  }

  /// Fills From, To and Next.
  void findGaps() {
    unsigned NL = Starts.size();
    From.assign(NL, 0);
    To.assign(NL, 0);
    Next.assign(NL, NumNodes + 1);
    for (unsigned L = 1; L < NL; ++L) {
      unsigned A = Starts[L].Anchor;
      From[L] = AnchorNode[A - 1] + 1;
      To[L] = AnchorNode[A];
      if (L + 1 < NL)
        Next[L] = AnchorNode[Starts[L + 1].Anchor];
    }
  }

  /// Fills Local. Only activations read no later than layer L count in
  /// gap L: what every later layer reads too (rotary tables, masks)
  /// crosses every block boundary alike and belongs with whoever made it.
  void countGapLocalLive() {
    std::vector<int> Delta(NumNodes + 2, 0);
    for (const auto &S : Spans) {
      // The gap whose region [From, Next) holds the last reader.
      auto It = std::upper_bound(From.begin() + 1, From.end(), S.second);
      unsigned L = It - From.begin() - 1;
      if (L < 1 || S.second >= Next[L] || S.first >= To[L])
        continue;
      unsigned Lo = std::max(From[L], S.first + 1),
               Hi = std::min(To[L], S.second);
      if (Lo > Hi)
        continue;
      ++Delta[Lo];
      --Delta[Hi + 1];
    }
    Local.assign(NumNodes + 1, 0);
    int Acc = 0;
    for (unsigned C = 0; C <= NumNodes; ++C)
      Local[C] = Acc += Delta[C];
  }

  /// The readers of \p V, where a view counts as its own readers.
  unsigned countViewReaders(const Value *V) const {
    unsigned N = 0;
    for (const Node *U : Users.lookup(V))
      N += isView(*U) && U->getNumOutputs() == 1
               ? std::max(1u, countViewReaders(U->getOutput(0)))
               : 1;
    return N;
  }

  /// Reads, by the nodes in [C, Next[L]), of activations made before C:
  /// among equally thin cuts the one whose values are read most is the
  /// residual stream (read by the next norm and the next residual add; in
  /// a ResNet by the next Conv and the skip add), not the residual add's
  /// output before its ReLU or a norm's inner value. A read by a view
  /// counts as the view's own readers: a layer hands on values as it made
  /// them, and a view of the handed value (Swin's patch merging starts
  /// with one) belongs to the layer that reads it.
  unsigned countReadsAcross(unsigned L, unsigned C) const {
    unsigned N = 0;
    for (unsigned I = C; I < std::min(Next[L], NumNodes); ++I) {
      const Node &U = *G.getNodes()[I];
      unsigned Weight = isView(U) && U.getNumOutputs() == 1
                            ? std::max(1u, countViewReaders(U.getOutput(0)))
                            : 1;
      for (const Value *V : U.getInputs()) {
        const Node *D = V ? V->getDefiningNode() : nullptr;
        if (D && D->getOpType() != "Constant" && Index.lookup(D) < C)
          N += Weight;
      }
    }
    return N;
  }

  /// Whether the last non-Constant node before C is a view with an
  /// equally thin cut before it (the cut to take instead).
  bool isRightAfterView(unsigned L, unsigned C, unsigned Min) const {
    unsigned I = C;
    while (I > From[L] && G.getNodes()[I - 1]->getOpType() == "Constant")
      --I;
    return I > From[L] && isView(*G.getNodes()[I - 1]) &&
           (unsigned)Local[I - 1] == Min;
  }

  /// The first node of layer L >= 1: the thinnest cut in its gap, the
  /// most read among those, the latest on a tie (in a sequential network
  /// the latest: a layer is its product and what follows it).
  unsigned chooseGapCut(unsigned L) const {
    unsigned Min = ~0u;
    for (unsigned C = From[L]; C <= To[L]; ++C)
      Min = std::min<unsigned>(Min, Local[C]);
    unsigned Best = To[L], BestReads = 0;
    bool Found = false;
    for (unsigned C = To[L] + 1; C-- > From[L];) {
      if ((unsigned)Local[C] != Min || isRightAfterView(L, C, Min))
        continue;
      if (Starts[L].Sequential)
        return C;
      unsigned R = countReadsAcross(L, C);
      if (!Found || R > BestReads) {
        Best = C;
        BestReads = R;
        Found = true;
      }
    }
    return Best;
  }

  /// Work that does not depend on the data (rotary tables, masks) and
  /// feeds several layers is nobody's block: it goes to the first layer,
  /// so that repeated blocks stay alike (each pipeline device recomputes
  /// such values rather than receiving them). What feeds one layer only
  /// goes with it.
  void assignSharedIndependentWork() {
    for (unsigned I = NumNodes; I-- > 0;) {
      const Node &N = *G.getNodes()[I];
      bool Independent = true, Output = false;
      int Lo = INT_MAX, Hi = -1;
      for (const Value *O : N.getOutputs()) {
        if (!O)
          continue;
        Independent &= !DataDep.count(O);
        Output |= is_contained(G.getOutputs(), O);
        for (const Node *U : Users.lookup(O)) {
          int UL = Layer[Index.lookup(U)];
          Lo = std::min(Lo, UL);
          Hi = std::max(Hi, UL);
        }
      }
      if (!Independent || Output || Hi < 0)
        continue;
      Layer[I] = Lo == Hi ? Lo : 0;
    }
  }

  /// Writes each node's layer (into subgraphs too) and counts each layer's
  /// nodes and parameter elements.
  void annotateNodes(std::vector<LayerInfo> &Layers) {
    DenseSet<const Value *> SeenParams;
    for (unsigned I = 0; I < NumNodes; ++I) {
      Node &N = *G.getNodes()[I];
      int Current = Layer[I];
      N.Layer = Current;
      for (const Attribute &A : N.getAttributes())
        for (const auto &Sub : A.Gs)
          setLayerRecursively(*Sub, Current);
      LayerInfo &Info = Layers[Current];
      ++Info.NumNodes;
      for (const Value *V : N.getInputs())
        if (V && V->isParameter() && SeenParams.insert(V).second)
          Info.ParamCount += V->Type.getNumElements().getValueOr(0);
    }
  }
};

/// Per run of repeated blocks, the blocks' structures (StructuralHash.h:
/// every node, not only the weight readers the run was found by) as
/// letters in order, A the first block's: "AAAA" blocks alike, "ABAB" a
/// period of 2 (Swin's window and shifted-window blocks), and what sets
/// each other structure apart from A (a first block without a bias, a
/// different mask). Blocks that differ were grouped by their weight
/// shapes (the run's signature); this names how.
static void printRunStructures(const Graph &G, ArrayRef<LayerInfo> Layers,
                               raw_ostream &OS) {
  // Side values (masks, rotary tables, Shape chains: made from inputs and
  // constants only) are each block's broadcast inputs, not its structure.
  DenseSet<const Value *> DataDep = findDataDependent(G);
  std::vector<std::vector<const Node *>> Members(Layers.size());
  for (const auto &N : G.getNodes())
    if (N->Layer >= 0 && N->Layer < (int)Layers.size() &&
        any_of(N->getOutputs(),
               [&](const Value *V) { return V && DataDep.count(V); }))
      Members[N->Layer].push_back(N.get());
  std::map<int, std::vector<unsigned>> Runs;
  for (const LayerInfo &L : Layers)
    if (L.Run >= 0)
      Runs[L.Run].push_back(L.Id);
  if (Runs.empty()) {
    OS << "# runs: none (no repeated structure)\n";
    return;
  }
  OS << "# runs:\n";
  for (const auto &R : Runs) {
    std::vector<StructureSummary> Classes;
    std::string Pattern;
    for (unsigned L : R.second) {
      StructureSummary S = hashStructure(Members[L]);
      unsigned C = 0;
      while (C < Classes.size() && Classes[C].Hash != S.Hash)
        ++C;
      if (C == Classes.size())
        Classes.push_back(S);
      Pattern += char('A' + std::min(C, 25u));
    }
    unsigned Period = 1;
    while (Period < Pattern.size()) {
      bool Fits = true;
      for (unsigned I = Period; I < Pattern.size() && Fits; ++I)
        Fits = Pattern[I] == Pattern[I - Period];
      if (Fits)
        break;
      ++Period;
    }
    OS << "#   run " << R.first << ": layers " << R.second.front() << "-"
       << R.second.back() << ", " << R.second.size() << " blocks, "
       << "structures " << Pattern;
    if (Classes.size() == 1)
      OS << " (alike, " << Classes[0].NumNodes << " nodes each)";
    else if (Period < Pattern.size() && Pattern.size() >= 2 * Period)
      OS << " (period " << Period << ")";
    OS << "\n";
    for (unsigned C = 1; C < Classes.size(); ++C)
      OS << "#     " << char('A' + std::min(C, 25u)) << " ("
         << Classes[C].NumNodes << " nodes) vs A (" << Classes[0].NumNodes
         << " nodes): " << describeStructureDifference(Classes[0], Classes[C])
         << "\n";
  }
}

class DetectLayersPass : public Pass {
public:
  /// The model, then the expert regions the layers hold and how each was
  /// written (what expert parallelism will split, and what it will not).
  void print(const CompilationUnit &CU, raw_ostream &OS) const override {
    Pass::print(CU, OS);
    const Graph &G = CU.M->getGraph();
    printRunStructures(G, CU.Layers, OS);
    std::vector<ExpertGroup> Groups = findExperts(G, CU.Layers);
    std::vector<const Node *> Indexed = findIndexRoutedExperts(G);
    if (Groups.empty() && Indexed.empty())
      return;
    OS << "# expert regions:\n";
    for (const ExpertGroup &EG : Groups) {
      OS << "#   layer " << EG.Layer << ": " << getExpertPattern(EG) << ", "
         << EG.NumExperts << " experts";
      if (EG.Tokens)
        OS << ", tokens '" << EG.Tokens->getName() << "'";
      if (EG.Output)
        OS << ", output '" << EG.Output->getName() << "'";
      OS << "\n";
    }
    if (!Indexed.empty())
      OS << "#   " << describeIndexRoutedExperts(Indexed)
         << " (NonZero over the routing mask, e.g. '"
         << Indexed.front()->getName()
         << "'): planned at the expected tokens per expert, not split by "
            "ep\n";
  }

  Error run(CompilationUnit &CU) override {
    LayerDetector(CU.M->getGraph()).run(CU.Layers);
    keepExpertGroupsWhole(CU.M->getGraph(), CU.Layers);
    return Error::success();
  }
};

} // namespace

std::unique_ptr<Pass> createDetectLayersPass() {
  return std::make_unique<DetectLayersPass>();
}

} // namespace loom
