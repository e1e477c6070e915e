//===- StructuralHash.cpp - Name-free hashes of subgraphs -----------------===//
#include "loom/IR/StructuralHash.h"
#include "loom/Support/DataType.h"
#include "llvm/ADT/DenseMap.h"
#include <algorithm>
#include <cstring>

using namespace llvm;

namespace loom {

namespace {

/// FNV-1a, stable across runs and platforms.
struct Fnv {
  uint64_t H = 14695981039346656037ull;
  void add(StringRef S) {
    for (char C : S)
      byte((unsigned char)C);
    byte(0xff);
  }
  void add(uint64_t V) {
    for (int I = 0; I < 8; ++I)
      byte((V >> (8 * I)) & 0xff);
  }
  void byte(unsigned char C) {
    H ^= C;
    H *= 1099511628211ull;
  }
};

/// Constants with at most this many integer elements are hashed by value:
/// they set shapes, axes and slice bounds.
constexpr size_t MaxHashedInts = 16;

void addAttribute(Fnv &H, const Attribute &A) {
  H.add(A.Name);
  H.add((uint64_t)A.K);
  H.add((uint64_t)A.I);
  uint32_t FBits;
  static_assert(sizeof(FBits) == sizeof(A.F), "float is 32 bits");
  std::memcpy(&FBits, &A.F, sizeof(FBits));
  H.add((uint64_t)FBits);
  H.add(A.S);
  for (int64_t I : A.Is)
    H.add((uint64_t)I);
  for (float F : A.Fs) {
    std::memcpy(&FBits, &F, sizeof(FBits));
    H.add((uint64_t)FBits);
  }
  for (const std::string &S : A.Ss)
    H.add(S);
  for (const Tensor &T : A.Ts)
    H.add(T.Type.str());
  for (const auto &G : A.Gs)
    H.add((uint64_t)G->countNodesRecursively());
}

/// How an operand from outside the set (or a constant) enters it.
void addOutsideOperand(Fnv &H, const Value *V) {
  if (V->isParameter()) {
    H.add("param");
  } else if (isConstantNodeOutput(V)) {
    H.add("const");
    if (isInteger(V->Type.Elem) || V->Type.Elem == DataType::Bool)
      if (auto Ints = getConstantInts(V))
        if (Ints->size() <= MaxHashedInts)
          for (int64_t I : *Ints)
            H.add((uint64_t)I);
  } else {
    H.add("in");
  }
  H.add(V->Type.str());
}

} // namespace

StructureSummary hashStructure(ArrayRef<const Node *> Nodes) {
  StructureSummary S;
  DenseMap<const Node *, uint64_t> NodeHash;
  for (const Node *N : Nodes)
    NodeHash[N] = 0;
  std::vector<uint64_t> All;
  All.reserve(Nodes.size());
  for (const Node *N : Nodes) {
    if (N->getOpType() == "Constant" && N->getDomain().empty())
      continue;
    Fnv H;
    H.add(N->getQualifiedOpType());
    for (const Attribute &A : N->getAttributes())
      addAttribute(H, A);
    for (const Value *O : N->getOutputs())
      H.add(O ? O->Type.str() : "-");
    for (unsigned I = 0; I < N->getNumInputs(); ++I) {
      const Value *V = N->getInput(I);
      H.add((uint64_t)I);
      if (!V) {
        H.add("none");
        continue;
      }
      const Node *D = V->getDefiningNode();
      auto It = D ? NodeHash.find(D) : NodeHash.end();
      if (It != NodeHash.end() && !isConstantNodeOutput(V)) {
        H.add(It->second);
        H.add((uint64_t)V->getResultNumber());
      } else {
        addOutsideOperand(H, V);
      }
    }
    NodeHash[N] = H.H;
    All.push_back(H.H);
    ++S.NumNodes;
    ++S.OpCounts[N->getQualifiedOpType()];
  }
  llvm::sort(All);
  Fnv Set;
  for (uint64_t X : All)
    Set.add(X);
  S.Hash = Set.H;
  return S;
}

std::string describeStructureDifference(const StructureSummary &A,
                                        const StructureSummary &B) {
  std::vector<std::pair<int, std::string>> Diffs;
  for (const auto &KV : B.OpCounts) {
    auto It = A.OpCounts.find(KV.first);
    int D = (int)KV.second - (It == A.OpCounts.end() ? 0 : (int)It->second);
    if (D)
      Diffs.emplace_back(D, KV.first);
  }
  for (const auto &KV : A.OpCounts)
    if (!B.OpCounts.count(KV.first))
      Diffs.emplace_back(-(int)KV.second, KV.first);
  std::stable_sort(
      Diffs.begin(), Diffs.end(), [](const auto &X, const auto &Y) {
        return std::abs(X.first) > std::abs(Y.first) ||
               (std::abs(X.first) == std::abs(Y.first) && X.second < Y.second);
      });
  std::string Out;
  for (const auto &D : Diffs) {
    if (!Out.empty())
      Out += ", ";
    Out += (D.first > 0 ? "+" : "-") + D.second + " x" +
           std::to_string(std::abs(D.first));
  }
  return Out;
}

} // namespace loom
