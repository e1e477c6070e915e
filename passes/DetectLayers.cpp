//===- DetectLayers.cpp - Find repeated blocks by structural hashing ------===//
//
// Exporters emit a model layer after layer, so the nodes that read
// parameters ("anchors"), taken in topological order, spell the model's
// structure: embedding, then the same pattern of weight shapes once per
// transformer layer (or ResNet block), then the head. Each anchor gets a
// signature (op type and its parameters' types); the longest run of
// consecutive identical windows of signatures is the repeated block, found
// for every period with rolling hashes in O(n^2) over n anchors. The parts
// before and after a run are searched again; what repeats nowhere is one
// layer (the prologue before the first run, the epilogue after the last).
// Among runs covering as many anchors, the one whose boundaries are the
// thinnest cuts (fewest live activations) wins: residual joins, not
// Conv -> BatchNorm. A node belongs to the layer of the most recent anchor
// before it, except between two layers' anchors, where the layers part at
// the thinnest cut (so block 0's leading norm is block 0's).
//
// Names play no part, so anonymous weights ("onnx::MatMul_123") work.
//
//===----------------------------------------------------------------------===//
#include "loom/Pass/Pass.h"
#include "llvm/ADT/DenseSet.h"

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

/// The best run of >= 2 identical consecutive windows in Sig[Lo, Hi): most
/// anchors covered; then the cleanest cuts, i.e. the least maximum of
/// Cut[b] over the run's boundaries b (Cut[b]: the fewest activations live
/// across any cut between anchors b-1 and b), so a ResNet stage splits at
/// its residual joins (one value crosses) rather than at Conv -> BatchNorm
/// (the branch and the skip cross), and a transformer at its residual
/// stream rather than after its norm; then the shortest period; then the
/// earliest start. A
/// repeated unit must hold at least two anchors, one of them a matmul-like
/// op: a layer has weights to multiply, while a pair of equal-shaped table
/// reads (rotary cos/sin) or q/k/v projections side by side are not layers.
static Optional<Run> findBestRun(ArrayRef<uint64_t> Sig,
                                 ArrayRef<bool> IsMatmul,
                                 ArrayRef<unsigned> Cut, unsigned Lo,
                                 unsigned Hi) {
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
  std::vector<unsigned> MM(N + 1, 0);
  for (unsigned I = 0; I < N; ++I)
    MM[I + 1] = MM[I] + IsMatmul[Lo + I];
  for (unsigned Pd = 2; Pd <= N / 2; ++Pd) {
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
      uint64_t Cover = (uint64_t)Len[I] * Pd;
      if (!(Cover > BestCover || (Cover == BestCover && CutMax[I] < BestCut)))
        continue;
      // A unit is cut where it is thinnest: a cut inside the first window
      // thinner than the run's boundaries means the boundaries split
      // blocks (a ResNet's [BatchNorm, Conv] pairs across a residual join).
      bool Thinner = false;
      for (unsigned K = I + 1; K < I + Pd && !Thinner; ++K)
        Thinner = Cut[Lo + K] < CutMax[I];
      if (!Thinner) {
        BestCover = Cover;
        BestCut = CutMax[I];
        Best = Run{Lo + I, Pd, Len[I]};
      }
    }
  }
  return Best;
}

/// Splits anchors [Lo, Hi) into layers: appends (first anchor, kind, run).
static void splitSegment(ArrayRef<uint64_t> Sig, ArrayRef<bool> IsMatmul,
                         ArrayRef<unsigned> Cut, unsigned Lo, unsigned Hi,
                         int &NextRun,
                         std::vector<std::tuple<unsigned, int>> &Starts) {
  if (Lo >= Hi)
    return;
  Optional<Run> R = findBestRun(Sig, IsMatmul, Cut, Lo, Hi);
  if (!R) {
    Starts.emplace_back(Lo, -1);
    return;
  }
  splitSegment(Sig, IsMatmul, Cut, Lo, R->Start, NextRun, Starts);
  int RunId = NextRun++;
  for (unsigned K = 0; K < R->Repeats; ++K)
    Starts.emplace_back(R->Start + K * R->Period, RunId);
  splitSegment(Sig, IsMatmul, Cut, R->Start + R->Repeats * R->Period, Hi,
               NextRun, Starts);
}

static bool isMatmulLike(const Node &N) {
  StringRef Op = N.getOpType();
  return Op == "MatMul" || Op == "Gemm" || Op == "Conv" ||
         Op == "ConvTranspose" || Op == "Einsum";
}

static uint64_t anchorSignature(const Node &N) {
  Hasher H;
  H.add(N.getQualifiedOpType());
  for (unsigned I = 0; I < N.getNumInputs(); ++I) {
    const Value *V = N.getInput(I);
    if (!V || !V->isParameter())
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

class DetectLayersPass : public Pass {
public:
  StringRef getArgument() const override { return "detect-layers"; }
  StringRef getDescription() const override {
    return "Number repeated blocks (layers) by structural hashing";
  }
  Error run(CompilationUnit &CU) override {
    Graph &G = CU.M->getGraph();
    DenseMap<const Value *, SmallVector<const Node *, 2>> Users;
    for (const auto &NP : G.getNodes())
      for (const Value *V : NP->getInputs())
        if (V)
          Users[V].push_back(NP.get());
    std::vector<unsigned> AnchorNode;
    std::vector<uint64_t> Sig;
    SmallVector<bool, 64> IsMatmul;
    for (unsigned I = 0; I < G.getNumNodes(); ++I) {
      const Node &N = *G.getNodes()[I];
      if (any_of(N.getInputs(),
                 [](const Value *V) { return V && V->isParameter(); })) {
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
    // Live[c]: activations defined before node c and read at or after it
    // (constants, parameters and graph inputs do not count: they cross
    // every cut alike).
    unsigned NumNodes = G.getNumNodes();
    std::vector<unsigned> Live(NumNodes + 1, 0);
    // Activations as (defining node, last reader), for the gaps below.
    std::vector<std::pair<unsigned, unsigned>> Spans;
    {
      DenseMap<const Node *, unsigned> Index;
      for (unsigned I = 0; I < NumNodes; ++I)
        Index[G.getNodes()[I].get()] = I;
      std::vector<int> Delta(NumNodes + 2, 0);
      for (unsigned I = 0; I < NumNodes; ++I)
        for (const Value *V : G.getNodes()[I]->getOutputs()) {
          if (!V || G.getNodes()[I]->getOpType() == "Constant")
            continue;
          unsigned Last = I;
          for (const Node *U : Users.lookup(V))
            Last = std::max(Last, Index.lookup(U));
          if (is_contained(G.getOutputs(), V))
            Last = NumNodes;
          if (Last > I) {
            Spans.emplace_back(I, Last);
            ++Delta[I + 1];
            --Delta[Last + 1];
          }
        }
      int Acc = 0;
      for (unsigned C = 0; C <= NumNodes; ++C)
        Live[C] = Acc += Delta[C];
    }
    // Cut[b]: the fewest live values at a cut between anchor b-1 and
    // anchor b (node positions after the one, up to the other).
    std::vector<unsigned> Cut(AnchorNode.size() + 1, 0);
    for (unsigned B = 0; B <= AnchorNode.size(); ++B) {
      unsigned From = B ? AnchorNode[B - 1] + 1 : 0;
      unsigned To = B < AnchorNode.size() ? AnchorNode[B] : NumNodes;
      unsigned Min = ~0u;
      for (unsigned C = From; C <= To; ++C)
        Min = std::min(Min, Live[C]);
      Cut[B] = Min;
    }
    CU.Layers.clear();
    std::vector<std::tuple<unsigned, int>> Starts;
    int NextRun = 0;
    splitSegment(Sig, IsMatmul, Cut, 0, Sig.size(), NextRun, Starts);
    if (Starts.empty())
      Starts.emplace_back(0, -1);

    // Layer l covers anchors [Starts[l], Starts[l+1]).
    int FirstRunLayer = -1, LastRunLayer = -1;
    for (unsigned L = 0; L < Starts.size(); ++L)
      if (std::get<1>(Starts[L]) >= 0) {
        if (FirstRunLayer < 0)
          FirstRunLayer = L;
        LastRunLayer = L;
      }
    for (unsigned L = 0; L < Starts.size(); ++L) {
      LayerInfo Info;
      Info.Id = L;
      Info.Run = std::get<1>(Starts[L]);
      if (Info.Run >= 0)
        Info.K = LayerInfo::Kind::Block;
      else if (FirstRunLayer >= 0 && (int)L < FirstRunLayer)
        Info.K = LayerInfo::Kind::Prologue;
      else if (FirstRunLayer >= 0 && (int)L > LastRunLayer)
        Info.K = LayerInfo::Kind::Epilogue;
      unsigned Begin = std::get<0>(Starts[L]);
      unsigned End =
          L + 1 < Starts.size() ? std::get<0>(Starts[L + 1]) : Sig.size();
      Hasher H;
      for (unsigned A = Begin; A < End; ++A)
        H.add(Sig[A]);
      Info.Signature = H.H;
      CU.Layers.push_back(Info);
    }

    // Nodes: the layer of the most recent anchor (the first layer for the
    // nodes before any anchor), except in the gap between a layer's last
    // anchor and the next layer's first: there the layers part where the
    // fewest activations are live (the residual stream after the residual
    // add and, in a ResNet, its ReLU; before the first block, the
    // embedding's output, so block 0's leading norm is block 0's), the
    // latest such place on a tie.
    std::vector<int> Layer(NumNodes, 0);
    {
      // Gap L (before layer L >= 1): cut positions [From, To]. Only
      // activations read no later than layer L count there: what every
      // later layer reads too (rotary tables, masks) crosses every block
      // boundary alike and belongs with whoever made it.
      unsigned NL = Starts.size();
      std::vector<unsigned> From(NL, 0), To(NL, 0), Next(NL, NumNodes + 1);
      for (unsigned L = 1; L < NL; ++L) {
        unsigned A = std::get<0>(Starts[L]);
        From[L] = AnchorNode[A - 1] + 1;
        To[L] = AnchorNode[A];
        if (L + 1 < NL)
          Next[L] = AnchorNode[std::get<0>(Starts[L + 1])];
      }
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
      std::vector<int> Local(NumNodes + 1, 0);
      int Acc = 0;
      for (unsigned C = 0; C <= NumNodes; ++C)
        Local[C] = Acc += Delta[C];
      // Reads, by the nodes in [C, Next[L]), of activations made before C:
      // among equally thin cuts the one whose values are read most is
      // the residual stream (read by the next norm and the next residual
      // add; in a ResNet by the next Conv and the skip add), not the
      // residual add's output before its ReLU or a norm's inner value.
      DenseMap<const Node *, unsigned> Index;
      for (unsigned I = 0; I < NumNodes; ++I)
        Index[G.getNodes()[I].get()] = I;
      auto Reads = [&](unsigned L, unsigned C) {
        unsigned N = 0;
        for (unsigned I = C; I < std::min(Next[L], NumNodes); ++I)
          for (const Value *V : G.getNodes()[I]->getInputs()) {
            const Node *D = V ? V->getDefiningNode() : nullptr;
            N += D && D->getOpType() != "Constant" && Index.lookup(D) < C;
          }
        return N;
      };
      // CutPos[L]: the first node of layer L >= 1.
      std::vector<unsigned> CutPos(NL, 0);
      for (unsigned L = 1; L < NL; ++L) {
        unsigned Min = ~0u;
        for (unsigned C = From[L]; C <= To[L]; ++C)
          Min = std::min<unsigned>(Min, Local[C]);
        unsigned Best = To[L], BestReads = 0;
        bool Found = false;
        for (unsigned C = To[L] + 1; C-- > From[L];) {
          if ((unsigned)Local[C] != Min)
            continue;
          unsigned R = Reads(L, C);
          if (!Found || R > BestReads) {
            Best = C;
            BestReads = R;
            Found = true;
          }
        }
        CutPos[L] = Best;
      }
      unsigned L = 0;
      for (unsigned I = 0; I < NumNodes; ++I) {
        while (L + 1 < Starts.size() && CutPos[L + 1] <= I)
          ++L;
        Layer[I] = L;
      }
    }
    DenseSet<const Value *> SeenParams;
    for (unsigned I = 0; I < G.getNumNodes(); ++I) {
      Node &N = *G.getNodes()[I];
      int Current = Layer[I];
      N.Layer = Current;
      for (const Attribute &A : N.getAttributes())
        for (const auto &Sub : A.Gs)
          setLayerRecursively(*Sub, Current);
      LayerInfo &Info = CU.Layers[Current];
      ++Info.NumNodes;
      for (const Value *V : N.getInputs())
        if (V && V->isParameter() && SeenParams.insert(V).second)
          Info.ParamCount += V->Type.getNumElements().getValueOr(0);
    }
    return Error::success();
  }
};

} // namespace

std::unique_ptr<Pass> createDetectLayersPass() {
  return std::make_unique<DetectLayersPass>();
}

} // namespace loom
