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
// A node belongs to the layer of the most recent anchor before it.
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
/// anchors covered, then the shortest period, then the earliest start. A
/// repeated unit must hold at least two anchors, one of them a matmul-like
/// op: a layer has weights to multiply, while a pair of equal-shaped table
/// reads (rotary cos/sin) or q/k/v projections side by side are not layers.
static Optional<Run> findBestRun(ArrayRef<uint64_t> Sig,
                                 ArrayRef<bool> IsMatmul, unsigned Lo,
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
  std::vector<uint64_t> H;
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
    for (unsigned I = 0; I < W; ++I) {
      if (Len[I] < 2 || MM[I + Pd] == MM[I])
        continue;
      uint64_t Cover = (uint64_t)Len[I] * Pd;
      if (Cover > BestCover) {
        BestCover = Cover;
        Best = Run{Lo + I, Pd, Len[I]};
      }
    }
  }
  return Best;
}

/// Splits anchors [Lo, Hi) into layers: appends (first anchor, kind, run).
static void splitSegment(ArrayRef<uint64_t> Sig, ArrayRef<bool> IsMatmul,
                         unsigned Lo, unsigned Hi, int &NextRun,
                         std::vector<std::tuple<unsigned, int>> &Starts) {
  if (Lo >= Hi)
    return;
  Optional<Run> R = findBestRun(Sig, IsMatmul, Lo, Hi);
  if (!R) {
    Starts.emplace_back(Lo, -1);
    return;
  }
  splitSegment(Sig, IsMatmul, Lo, R->Start, NextRun, Starts);
  int RunId = NextRun++;
  for (unsigned K = 0; K < R->Repeats; ++K)
    Starts.emplace_back(R->Start + K * R->Period, RunId);
  splitSegment(Sig, IsMatmul, R->Start + R->Repeats * R->Period, Hi, NextRun,
               Starts);
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
    CU.Layers.clear();
    std::vector<std::tuple<unsigned, int>> Starts;
    int NextRun = 0;
    splitSegment(Sig, IsMatmul, 0, Sig.size(), NextRun, Starts);
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
    // nodes before any anchor). In the gap between a layer's last anchor and
    // the next layer's first, a node that reads none of the layer's own
    // results (only the gap's, like the pieces of the next layer's RMSNorm
    // before its weight multiply) starts the next layer; one that does (the
    // residual add) ends this one.
    std::vector<int> Layer(G.getNumNodes(), 0);
    std::vector<bool> InGap(G.getNumNodes(), false);
    {
      unsigned NextAnchor = 0, NextLayer = 0;
      int Current = 0;
      for (unsigned I = 0; I < G.getNumNodes(); ++I) {
        if (NextAnchor < AnchorNode.size() && AnchorNode[NextAnchor] == I) {
          while (NextLayer < Starts.size() &&
                 std::get<0>(Starts[NextLayer]) <= NextAnchor)
            Current = NextLayer++;
          ++NextAnchor;
        }
        Layer[I] = Current;
        // In a gap: some anchor seen, the next anchor starts a new layer,
        // and this node is not itself an anchor.
        InGap[I] = NextAnchor > 0 && NextLayer < Starts.size() &&
                   NextAnchor == std::get<0>(Starts[NextLayer]) &&
                   AnchorNode[NextAnchor - 1] != I;
      }
      DenseMap<const Node *, unsigned> Index;
      for (unsigned I = 0; I < G.getNumNodes(); ++I)
        Index[G.getNodes()[I].get()] = I;
      for (unsigned I = 0; I < G.getNumNodes(); ++I) {
        if (!InGap[I])
          continue;
        const Node &N = *G.getNodes()[I];
        bool ReadsBody = any_of(N.getInputs(), [&](const Value *V) {
          const Node *D = V ? V->getDefiningNode() : nullptr;
          if (!D || D->getOpType() == "Constant")
            return false;
          unsigned J = Index.lookup(D);
          return !InGap[J] && Layer[J] == Layer[I];
        });
        if (!ReadsBody)
          Layer[I] += 1;
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
