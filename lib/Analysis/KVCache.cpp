//===- KVCache.cpp - Find the KV cache a decoder graph carries ------------===//
//
// Structural detection (include/loom/Analysis/KVCache.h): graph inputs appended
// to by a freshly projected K/V that attention reads, and graph outputs
// that are such tensors.
//
//===----------------------------------------------------------------------===//
#include "loom/Analysis/KVCache.h"
#include "loom/Support/DataType.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"
#include <algorithm>

using namespace llvm;

namespace loom {
namespace {

/// Ops that move or repeat a cache tensor on its way to attention (layout,
/// the GQA repeat, a dtype change).
bool isViewOp(StringRef Op) {
  return StringSwitch<bool>(Op)
      .Cases("Reshape", "Transpose", "Expand", "Unsqueeze", "Squeeze", true)
      .Cases("Tile", "Identity", "Cast", "Concat", "Slice", true)
      .Default(false);
}

class Finder {
public:
  explicit Finder(const Graph &G) : G(G), DD(findDataDependent(G)) {
    unsigned I = 0;
    for (const auto &NP : G.getNodes()) {
      Pos[NP.get()] = I++;
      for (const Value *V : NP->getInputs())
        if (V)
          Users[V].push_back(NP.get());
    }
    for (const Value *V : G.getOutputs())
      Outputs.insert(V);
  }
  std::vector<KVCacheTensor> run();

private:
  bool isActivation(const Value *V) const {
    return V && DD.count(V) && !isWeightLike(V);
  }
  bool isAttentionMatMul(const Node *N) const {
    return N->getOpType() == "MatMul" && N->getNumInputs() == 2 &&
           isActivation(N->getInput(0)) && isActivation(N->getInput(1));
  }
  /// \p V is computed from a projection (MatMul/Gemm with a weight) of the
  /// step's activations, without passing attention or a graph input.
  bool isFreshProjection(const Value *V) const;
  /// The attention MatMul \p V reaches through view ops (and scaling by a
  /// constant), and whether it is read as a key or a value.
  bool findAttention(const Value *V, const Node *&Att,
                     KVCacheTensor::Kind &K) const;
  /// The graph output \p V is, directly or through Identity/Cast.
  const Value *asOutput(const Value *V) const;

  const Graph &G;
  DenseSet<const Value *> DD;
  DenseMap<const Node *, unsigned> Pos;
  DenseMap<const Value *, SmallVector<const Node *, 2>> Users;
  DenseSet<const Value *> Outputs;
};

bool Finder::isFreshProjection(const Value *V) const {
  SmallVector<std::pair<const Value *, unsigned>, 16> Work{{V, 0}};
  DenseSet<const Value *> Seen{V};
  while (!Work.empty() && Seen.size() < 256) {
    auto [W, Depth] = Work.pop_back_val();
    const Node *D = W->getDefiningNode();
    if (!D || W->isInput())
      continue;
    StringRef Op = D->getOpType();
    if ((Op == "MatMul" || Op == "Gemm") &&
        any_of(D->getInputs(),
               [](const Value *I) { return I && isWeightLike(I); }))
      return true;
    if (Op == "Softmax" || isAttentionMatMul(D) || Depth >= 12)
      continue;
    for (const Value *I : D->getInputs())
      if (I && isActivation(I) && Seen.insert(I).second)
        Work.push_back({I, Depth + 1});
  }
  return false;
}

bool Finder::findAttention(const Value *V, const Node *&Att,
                           KVCacheTensor::Kind &K) const {
  // Breadth first, so the nearest attention MatMul wins.
  SmallVector<std::pair<const Value *, unsigned>, 16> Work{{V, 0}};
  DenseSet<const Value *> Seen{V};
  for (size_t I = 0; I < Work.size() && Seen.size() < 256; ++I) {
    auto [W, Depth] = Work[I];
    for (const Node *U : Users.lookup(W)) {
      StringRef Op = U->getOpType();
      if (isAttentionMatMul(U)) {
        // Key: the product flows into a Softmax (scaled, masked, biased).
        const Value *S = U->getOutput(0);
        for (unsigned Hop = 0; S && Hop < 6; ++Hop) {
          const Node *Next = nullptr;
          for (const Node *SU : Users.lookup(S))
            if (SU->getOpType() == "Softmax" ||
                SU->getOpType() == "LogSoftmax") {
              Att = U;
              K = KVCacheTensor::Key;
              return true;
            } else if (!Next && SU->getNumOutputs() == 1 &&
                       StringSwitch<bool>(SU->getOpType())
                           .Cases("Div", "Mul", "Add", "Sub", "Where", true)
                           .Cases("Cast", "Reshape", "Transpose", "Tanh", true)
                           .Default(false)) {
              Next = SU;
            }
          S = Next ? Next->getOutput(0) : nullptr;
        }
        // Value: multiplied by the attention probabilities.
        const Value *P = U->getInput(U->getInput(0) == W ? 1 : 0);
        for (unsigned Hop = 0; P && Hop < 4; ++Hop) {
          const Node *D = P->getDefiningNode();
          if (!D)
            break;
          if (D->getOpType() == "Softmax") {
            Att = U;
            K = KVCacheTensor::Val;
            return true;
          }
          if (!StringSwitch<bool>(D->getOpType())
                   .Cases("Cast", "Reshape", "Transpose", "Dropout", true)
                   .Cases("Identity", "Where", "Expand", true)
                   .Default(false))
            break;
          P = D->getInput(0);
        }
        continue;
      }
      bool Scale = (Op == "Mul" || Op == "Div") && U->getNumInputs() == 2 &&
                   U->getInput(0) == W && !DD.count(U->getInput(1));
      if ((!isViewOp(Op) && !Scale) || Depth >= 8 || U->getNumOutputs() == 0)
        continue;
      // Only the data operand of a view op carries the tensor.
      if (U->getInput(0) != W && Op != "Concat")
        continue;
      for (const Value *O : U->getOutputs())
        if (O && Seen.insert(O).second)
          Work.push_back({O, Depth + 1});
    }
  }
  return false;
}

const Value *Finder::asOutput(const Value *V) const {
  for (unsigned Hop = 0; V && Hop < 3; ++Hop) {
    if (Outputs.count(V))
      return V;
    const Value *Next = nullptr;
    for (const Node *U : Users.lookup(V))
      if (U->getOpType() == "Identity" || U->getOpType() == "Cast")
        Next = U->getOutput(0);
    V = Next;
  }
  return nullptr;
}

std::vector<KVCacheTensor> Finder::run() {
  std::vector<KVCacheTensor> Found;
  DenseSet<const Value *> Claimed;
  auto IsCacheType = [](const Value *V) {
    return V && V->Type.getRank() >= 3 && isFloatingPoint(V->Type.Elem);
  };
  // Past caches: a graph input appended to by the step's K/V.
  for (const Value *In : G.getInputs()) {
    if (!IsCacheType(In))
      continue;
    SmallVector<const Value *, 3> Chain{In};
    for (unsigned Hop = 0; Hop < 2; ++Hop) {
      const auto &Us = Users.lookup(Chain.back());
      if (Us.size() != 1 ||
          (Us[0]->getOpType() != "Cast" && Us[0]->getOpType() != "Identity"))
        break;
      Chain.push_back(Us[0]->getOutput(0));
    }
    for (const Value *P : Chain)
      for (const Node *C : Users.lookup(P)) {
        if (C->getOpType() != "Concat" || C->getNumInputs() < 2 ||
            Claimed.count(C->getOutput(0)))
          continue;
        unsigned PastIdx = 0, Fresh = 0;
        for (unsigned I = 0; I < C->getNumInputs(); ++I) {
          const Value *X = C->getInput(I);
          if (X == P)
            PastIdx = I;
          else if (X && isActivation(X) && isFreshProjection(X))
            ++Fresh;
        }
        if (Fresh != 1 || C->getNumInputs() != 2)
          continue;
        KVCacheTensor T;
        if (!findAttention(C->getOutput(0), T.Attention, T.K))
          continue;
        unsigned Rank = C->getOutput(0)->Type.getRank();
        int64_t Axis = C->getAttrInt("axis", 0);
        T.Past = In;
        T.Append = C;
        T.PastOperand = PastIdx;
        T.SeqAxis = Axis < 0 ? (int)(Axis + Rank) : (int)Axis;
        T.Cache = C->getOutput(0);
        T.Present = asOutput(T.Cache);
        Claimed.insert(T.Cache);
        if (T.Present)
          Claimed.insert(T.Present);
        Found.push_back(T);
      }
  }
  // Presents without a past (the prompt's export).
  for (const Value *O : G.getOutputs()) {
    if (!IsCacheType(O) || Claimed.count(O) || O->isInput() ||
        !isActivation(O) || !isFreshProjection(O))
      continue;
    // Through the Identity/Cast that renamed it, if any.
    const Value *C = O;
    const Node *D = O->getDefiningNode();
    if (D && (D->getOpType() == "Identity" || D->getOpType() == "Cast"))
      C = D->getInput(0);
    KVCacheTensor T;
    if (!findAttention(C, T.Attention, T.K))
      continue;
    T.Present = O;
    T.Cache = C;
    Claimed.insert(O);
    Found.push_back(T);
  }
  // Numbered per kind in the order attention reads them.
  std::stable_sort(Found.begin(), Found.end(),
                   [&](const KVCacheTensor &A, const KVCacheTensor &B) {
                     return Pos.lookup(A.Attention) < Pos.lookup(B.Attention);
                   });
  unsigned NK = 0, NV = 0;
  for (KVCacheTensor &T : Found)
    T.Layer = T.K == KVCacheTensor::Key ? NK++ : NV++;
  std::stable_sort(Found.begin(), Found.end(),
                   [](const KVCacheTensor &A, const KVCacheTensor &B) {
                     return std::make_pair(A.Layer, (int)A.K) <
                            std::make_pair(B.Layer, (int)B.K);
                   });
  return Found;
}

} // namespace

std::vector<KVCacheTensor> findKVCache(const Graph &G) {
  return Finder(G).run();
}

} // namespace loom
