//===- MatmulOps.cpp - Cost rules for matrix products ---------------------===//
//
// MatMul (batched, broadcasting, 1-D operands), MatMulInteger, Gemm and
// Einsum: the ops the cube unit runs. A multiply-add is 2 FLOPs.
//
// Backward: one product of the forward's size per operand that needs a
// gradient (dA = dC * B^T and dB = A^T * dC), so 2x forward for the usual
// activation-times-weight case and 1x when one operand is a Constant.
// Saved for backward: the non-parameter, non-constant operands (weights
// are parameters, kept for the whole step anyway).
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <map>
#include <string>

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

/// Backward FLOPs of a product whose forward is \p Forward: one product per
/// operand that needs a gradient.
double productBackward(const Node &N, double Forward,
                       ArrayRef<unsigned> Operands) {
  double B = 0;
  for (unsigned I : Operands)
    if (needsGradient(N.getInput(I)))
      B += Forward;
  return B;
}

void saveOperands(const Node &N, OpCost &C, ArrayRef<unsigned> Operands) {
  for (unsigned I : Operands)
    saveValue(C, N.getInput(I));
}

/// MatMul and MatMulInteger: numpy matmul semantics. A 1-D first operand is
/// a row vector (M = 1), a 1-D second operand a column vector (N = 1);
/// leading dims broadcast and multiply into Batch.
void costMatMul(const Node &N, int64_t, OpCost &C) {
  SmallVector<int64_t, 4> A = staticShape(N.getInput(0));
  SmallVector<int64_t, 4> B = staticShape(N.getInput(1));
  if (A.empty() || B.empty()) {
    setNoRule(C, N.getOpType().str() + " needs operands of rank >= 1");
    return;
  }
  if (A.size() == 1)
    A.insert(A.begin(), 1);
  if (B.size() == 1)
    B.push_back(1);
  int64_t M = A[A.size() - 2], K = A.back(), NN = B.back();
  // Broadcast the batch dims, right-aligned.
  size_t BA = A.size() - 2, BB = B.size() - 2, BR = std::max(BA, BB);
  double Batch = 1;
  for (size_t I = 0; I < BR; ++I) {
    int64_t DA = I < BR - BA ? 1 : A[I - (BR - BA)];
    int64_t DB = I < BR - BB ? 1 : B[I - (BR - BB)];
    Batch *= double(std::max(DA, DB));
  }
  C.Unit = ComputeUnit::Cube;
  C.MM.Batch = (int64_t)Batch;
  C.MM.M = M;
  C.MM.N = NN;
  C.MM.K = K;
  C.MM.SharedB = BB == 0 && Batch > 1;
  C.Flops = 2 * Batch * double(M) * double(NN) * double(K);
  C.BackwardFlops = productBackward(N, C.Flops, {0, 1});
  saveOperands(N, C, {0, 1});
}

/// Gemm: Y = alpha * A' * B' + beta * C with A' = transA ? A^T : A.
/// FLOPs: 2MNK for the product plus M*N for adding C when present (alpha
/// and beta fold into the epilogue). Backward: the two products, plus M*N
/// to reduce dY into dC.
void costGemm(const Node &N, int64_t, OpCost &C) {
  SmallVector<int64_t, 4> A = staticShape(N.getInput(0));
  SmallVector<int64_t, 4> B = staticShape(N.getInput(1));
  if (A.size() != 2 || B.size() != 2) {
    setNoRule(C, "Gemm needs 2-D operands");
    return;
  }
  bool TA = N.getAttrInt("transA", 0), TB = N.getAttrInt("transB", 0);
  int64_t M = TA ? A[1] : A[0], K = TA ? A[0] : A[1];
  int64_t NN = TB ? B[0] : B[1];
  const Value *Bias = N.getInput(2);
  double Product = 2 * double(M) * double(NN) * double(K);
  double Epilogue = Bias ? double(M) * double(NN) : 0;
  C.Unit = ComputeUnit::Cube;
  C.MM = {1, M, NN, K};
  C.Flops = Product + Epilogue;
  C.BackwardFlops = productBackward(N, Product, {0, 1}) +
                    (needsGradient(Bias) ? Epilogue : 0);
  saveOperands(N, C, {0, 1});
}

//===----------------------------------------------------------------------===//
// Einsum
//===----------------------------------------------------------------------===//

/// One operand or the result of an Einsum equation: a label per dim.
using Labels = std::string;

/// Parses an equation into operand labels and output labels, expanding
/// "..." into private labels (bytes 1..) right-aligned across operands, as
/// numpy broadcasting does. Returns an error message or "".
std::string parseEinsum(StringRef Eq, ArrayRef<unsigned> Ranks,
                        SmallVectorImpl<Labels> &Ins, Labels &Out) {
  std::string S;
  for (char Ch : Eq)
    if (!isSpace(Ch))
      S.push_back(Ch);
  StringRef Str(S);
  StringRef Lhs = Str, Rhs;
  bool Explicit = false;
  size_t Arrow = Str.find("->");
  if (Arrow != StringRef::npos) {
    Lhs = Str.take_front(Arrow);
    Rhs = Str.drop_front(Arrow + 2);
    Explicit = true;
  }
  SmallVector<StringRef, 4> Terms;
  Lhs.split(Terms, ',');
  if (Terms.size() != Ranks.size())
    return "Einsum equation '" + Eq.str() + "' has " +
           std::to_string(Terms.size()) + " operands, the node " +
           std::to_string(Ranks.size());
  // Rank of the ellipsis: the most dims any operand leaves to it.
  unsigned Ell = 0;
  for (unsigned I = 0; I < Terms.size(); ++I) {
    size_t Dots = Terms[I].find("...");
    if (Dots == StringRef::npos)
      continue;
    unsigned Named = Terms[I].size() - 3;
    if (Ranks[I] < Named)
      return "Einsum operand " + std::to_string(I) + " has rank " +
             std::to_string(Ranks[I]) + " < its labels";
    Ell = std::max(Ell, Ranks[I] - Named);
  }
  auto Expand = [&](StringRef T, unsigned Rank, Labels &L) -> bool {
    size_t Dots = T.find("...");
    if (Dots == StringRef::npos) {
      L = T.str();
      return true;
    }
    unsigned Here = Rank - (T.size() - 3);
    L = T.take_front(Dots).str();
    for (unsigned J = Ell - Here; J < Ell; ++J)
      L.push_back(char(1 + J));
    L += T.drop_front(Dots + 3).str();
    return true;
  };
  Ins.resize(Terms.size());
  for (unsigned I = 0; I < Terms.size(); ++I) {
    Expand(Terms[I], Ranks[I], Ins[I]);
    if (Ins[I].size() != Ranks[I])
      return "Einsum operand " + std::to_string(I) + " has rank " +
             std::to_string(Ranks[I]) + " but labels '" + Terms[I].str() + "'";
    for (char Ch : Terms[I])
      if (Ch != '.' && !isAlpha(Ch))
        return "Einsum equation '" + Eq.str() + "' has label '" +
               std::string(1, Ch) + "'";
  }
  if (Explicit) {
    Expand(Rhs, Ell + (Rhs.size() - (Rhs.contains("...") ? 3 : 0)), Out);
    return "";
  }
  // Implicit output: the ellipsis, then labels seen once, alphabetically.
  std::map<char, unsigned> Count;
  for (const Labels &L : Ins)
    for (char Ch : L)
      ++Count[Ch];
  Out.clear();
  for (unsigned J = 0; J < Ell; ++J)
    Out.push_back(char(1 + J));
  for (const auto &KV : Count)
    if (KV.first > char(32) && KV.second == 1)
      Out.push_back(KV.first);
  return "";
}

/// Einsum, evaluated left to right one pair at a time (no contraction-order
/// search: exporters emit one- and two-operand equations). A pair with
/// contracted labels is a batched matmul on the cube: Batch = labels in both
/// operands and the result, M = labels only in the left one, N = only in the
/// right one, K = contracted; 2*B*M*N*K FLOPs. A label only in one operand and
/// not needed later is summed first (1 FLOP per element). A pair without
/// contraction is an outer or element-wise product (1 FLOP per result
/// element, vector unit). A single operand: a permutation (free of FLOPs,
/// memory unit) or a sum over its dropped labels.
void costEinsum(const Node &N, int64_t, OpCost &C) {
  const Attribute *EqA = N.getAttribute("equation");
  if (!EqA || EqA->K != Attribute::Kind::String) {
    setNoRule(C, "Einsum without an equation");
    return;
  }
  SmallVector<unsigned, 4> Ranks;
  for (const Value *V : N.getInputs())
    Ranks.push_back(V ? V->Type.getRank() : 0);
  SmallVector<Labels, 4> Ins;
  Labels Out;
  std::string Err = parseEinsum(EqA->S, Ranks, Ins, Out);
  if (!Err.empty()) {
    setNoRule(C, Err);
    return;
  }
  // Size of every label; broadcast dims of 1 take the other size.
  std::map<char, int64_t> Size;
  for (unsigned I = 0; I < Ins.size(); ++I) {
    SmallVector<int64_t, 4> S = staticShape(N.getInput(I));
    for (unsigned J = 0; J < S.size(); ++J) {
      int64_t &Z = Size[Ins[I][J]];
      Z = std::max(Z, S[J]);
    }
  }
  auto Elements = [&](const Labels &L) {
    double P = 1;
    for (char Ch : L)
      P *= double(Size[Ch]);
    return P;
  };
  auto Has = [](const Labels &L, char Ch) {
    return L.find(Ch) != std::string::npos;
  };
  // Labels still needed after operand I: in the output or a later operand.
  auto NeededAfter = [&](unsigned I, char Ch) {
    if (Has(Out, Ch))
      return true;
    for (unsigned J = I + 1; J < Ins.size(); ++J)
      if (Has(Ins[J], Ch))
        return true;
    return false;
  };
  // Sums away labels of \p L not needed later and not in \p Other.
  double Flops = 0;
  auto Reduce = [&](Labels L, const Labels &Other, unsigned After) {
    Labels Kept;
    for (char Ch : L)
      if (Has(Other, Ch) || NeededAfter(After, Ch))
        Kept.push_back(Ch);
    if (Kept.size() != L.size())
      Flops += Elements(L);
    return Kept;
  };

  bool IsMatmul = false;
  MatmulShape MM;
  C.Unit = ComputeUnit::Vector;
  Labels Acc = Ins[0];
  if (Ins.size() == 1) {
    Acc = Reduce(Acc, Labels(), 0);
    if (Acc.size() == Ins[0].size())
      C.Unit = ComputeUnit::Memory; // A pure permutation.
  }
  for (unsigned I = 1; I < Ins.size(); ++I) {
    Acc = Reduce(Acc, Ins[I], I);
    Labels R = Reduce(Ins[I], Acc, I);
    MatmulShape Pair;
    double Contracted = 1;
    bool AnyContracted = false;
    Labels Result;
    for (char Ch : Acc) {
      bool Later = NeededAfter(I, Ch);
      if (Has(R, Ch)) {
        if (Later) {
          Pair.Batch *= Size[Ch];
          Result.push_back(Ch);
        } else {
          Contracted *= double(Size[Ch]);
          AnyContracted = true;
        }
      } else {
        Pair.M = (Pair.M ? Pair.M : 1) * Size[Ch];
        Result.push_back(Ch);
      }
    }
    for (char Ch : R)
      if (!Has(Acc, Ch)) {
        Pair.N = (Pair.N ? Pair.N : 1) * Size[Ch];
        Result.push_back(Ch);
      }
    Pair.M = Pair.M ? Pair.M : 1;
    Pair.N = Pair.N ? Pair.N : 1;
    Pair.K = (int64_t)Contracted;
    if (AnyContracted) {
      Flops +=
          2 * double(Pair.Batch) * double(Pair.M) * double(Pair.N) * Contracted;
      // The cube view of the einsum: its largest contraction.
      if (!IsMatmul || double(Pair.Batch) * Pair.M * Pair.N * Pair.K >
                           double(MM.Batch) * MM.M * MM.N * MM.K)
        MM = Pair;
      IsMatmul = true;
    } else {
      Flops += Elements(Result);
    }
    Acc = Result;
  }
  if (IsMatmul) {
    C.Unit = ComputeUnit::Cube;
    C.MM = MM;
  }
  C.Flops = Flops;
  if (Ins.size() == 1) {
    // Backward of a sum or permutation broadcasts dY back: one op per
    // input element.
    C.BackwardFlops =
        needsGradient(N.getInput(0)) ? numElements(N.getInput(0)) : 0;
  } else {
    SmallVector<unsigned, 4> All;
    for (unsigned I = 0; I < Ins.size(); ++I)
      All.push_back(I);
    C.BackwardFlops = productBackward(N, Flops, All);
    saveOperands(N, C, All);
  }
}

} // namespace

void addMatmulRules(RuleTable &T) {
  T["MatMul"] = {costMatMul};
  T["MatMulInteger"] = {costMatMul};
  T["Gemm"] = {costGemm};
  T["Einsum"] = {costEinsum};
}

} // namespace opcost
} // namespace loom
