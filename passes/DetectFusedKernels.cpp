//===- DetectFusedKernels.cpp - Regions the hardware runs as one kernel ---===//
//
// Finds, in the exported graph, the regions a fused kernel of the hardware
// (device.classes.aicore.fused_kernels) computes in one launch, and costs
// each as that kernel (loom/Cost/FusedKernels.h): the region's anchor node
// carries the kernel's cost, its other members cost nothing. The graph is
// not changed: emitted graphs keep the original ops, which a runtime's
// fusion (torch_npu's npu_fusion_attention under MindSpeed-LLM's
// --use-flash-attn, FlashAttention under Megatron) replaces.
//
// Attention, as exporters write it (torch.onnx.export of
// nn.MultiheadAttention / TransformerEncoderLayer, HF-LLaMA eager attention
// with grouped-query KV, hand-built graphs):
//
//   Q --[layout]--> MatMul(Q, K^T) <--[layout, GQA repeat]-- K
//                     |
//     [scale: Mul/Div by a scalar constant] [mask: Add, or Where]
//     [Cast]  (in any order; a pre-scaled Q or K is a layout step)
//                     |
//                  Softmax (last axis)
//                     |
//               [Cast, Dropout, Identity]
//                     |
//                  MatMul(P, V) <--[layout, GQA repeat]-- V
//                     |
//               [Transpose/Reshape back to tokens x hidden]
//
// Layout steps: Transpose, Reshape, Flatten, Unsqueeze, Squeeze, Identity,
// a Mul/Div by a scalar constant, and the repeats of grouped-query
// attention (Expand, Tile, a Concat of one tensor with itself; HF's
// repeat_kv exports Unsqueeze+Expand+Reshape). Every value inside the
// region has all its users inside it and is no graph output; a region that
// does not match fully is left alone, op by op. A mask proven causal
// (FusedKernelPatterns.h, getCausalOffset) makes the kernel skip the
// blocks above the diagonal: the region is costed at the fraction of the
// scores kept.
//
// The fused element-wise kernels (rmsnorm, layernorm, swiglu, rotary) are
// matched by FusedKernelPatterns.cpp, after attention, and costed by
// fusedElementwiseCost on the node computing their output.
//
//===----------------------------------------------------------------------===//
#include "FusedKernelPatterns.h"
#include "Passes.h"
#include "loom/Cost/DeviceTime.h"
#include "loom/Cost/FusedKernels.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/IR/AttentionOp.h"
#include "loom/IR/NodeLabel.h"
#include "loom/Pass/Pass.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>

using namespace llvm;

namespace loom {
namespace {

/// One attention region.
struct AttentionRegion {
  const Node *Score = nullptr, *Softmax = nullptr, *Context = nullptr;
  const Value *Q = nullptr, *K = nullptr, *V = nullptr, *Out = nullptr;
  /// The additive mask or the Where condition; null without a mask.
  const Value *Mask = nullptr;
  MaskUse Use = MaskUse::Additive;
  /// The fraction of the scores a causal mask keeps (1: not causal).
  double Causal = 1.0;
  /// K and V repeated per query head (grouped-query attention).
  bool GQA = false;
  /// In graph order.
  std::vector<const Node *> Members;
};

class Matcher {
public:
  Matcher(const Graph &G, int64_t Opset) : G(G), Opset(Opset) {
    for (const auto &NP : G.getNodes())
      for (const Value *V : NP->getInputs())
        if (V)
          Users[V].push_back(NP.get());
    for (const Value *V : G.getOutputs())
      GraphOutputs.insert(V);
    unsigned I = 0;
    for (const auto &NP : G.getNodes())
      Order[NP.get()] = I++;
  }

  std::vector<AttentionRegion> findAttention() {
    std::vector<AttentionRegion> Regions;
    for (const auto &NP : G.getNodes()) {
      const Node &N = *NP;
      if (N.getDomain() != "" || N.getOpType() != "Softmax" || Taken.count(&N))
        continue;
      AttentionRegion R;
      if (!matchAt(N, R))
        continue;
      for (const Node *M : R.Members)
        Taken.insert(M);
      Regions.push_back(std::move(R));
    }
    return Regions;
  }

private:
  const Graph &G;
  int64_t Opset;
  DenseMap<const Value *, SmallVector<const Node *, 2>> Users;
  DenseSet<const Value *> GraphOutputs;
  DenseMap<const Node *, unsigned> Order;
  DenseSet<const Node *> Taken;

  /// \p V is used by exactly one node and is no graph output: a value the
  /// region may keep to itself.
  bool internal(const Value *V) const {
    if (!V || GraphOutputs.count(V))
      return false;
    auto It = Users.find(V);
    return It != Users.end() && It->second.size() == 1;
  }

  static bool isScalarConstant(const Value *V) {
    if (!V || !isConstantLike(V))
      return false;
    auto N = V->Type.getNumElements();
    return N && *N == 1;
  }

  static bool isActivation(const Value *V) {
    return V && !isConstantLike(V) && !isWeightLike(V);
  }

  /// Walks back from an operand of a product through layout steps while
  /// the value stays the region's own; returns the region's input.
  const Value *walkLayout(const Value *V, std::vector<const Node *> &Members,
                          bool &Repeat) const {
    for (unsigned Steps = 0; Steps < 16; ++Steps) {
      const Node *D = V->getDefiningNode();
      if (!D || D->getDomain() != "" || !internal(V) || Taken.count(D))
        return V;
      StringRef Op = D->getOpType();
      const Value *In = D->getInput(0);
      if (Op == "Transpose" || Op == "Reshape" || Op == "Flatten" ||
          Op == "Unsqueeze" || Op == "Squeeze" || Op == "Identity") {
        // Reshape's and (opset 13) Unsqueeze's shape/axes are constants.
        for (unsigned I = 1; I < D->getNumInputs(); ++I)
          if (D->getInput(I) && !isConstantLike(D->getInput(I)))
            return V;
      } else if (Op == "Expand" || Op == "Tile") {
        if (D->getNumInputs() < 2 || !isConstantLike(D->getInput(1)))
          return V;
        Repeat = true;
      } else if (Op == "Concat") {
        if (!all_of(D->getInputs(),
                    [&](const Value *X) { return X && X == In; }) ||
            D->getNumInputs() < 2)
          return V;
        Repeat = true;
      } else if (Op == "Mul" || Op == "Div") {
        // A pre-scaled Q (nn.MultiheadAttention) or K.
        if (D->getNumInputs() != 2)
          return V;
        if (isScalarConstant(D->getInput(1)))
          In = D->getInput(0);
        else if (Op == "Mul" && isScalarConstant(D->getInput(0)))
          In = D->getInput(1);
        else
          return V;
      } else {
        return V;
      }
      if (!In || !isActivation(In))
        return V;
      Members.push_back(D);
      V = In;
    }
    return V;
  }

  /// Walks back from the Softmax's input through scale, mask and Cast to
  /// the score product.
  const Node *walkScores(const Value *V, AttentionRegion &R,
                         unsigned Depth) const {
    if (Depth > 8 || !internal(V))
      return nullptr;
    const Node *D = V->getDefiningNode();
    if (!D || D->getDomain() != "" || Taken.count(D))
      return nullptr;
    StringRef Op = D->getOpType();
    if (Op == "MatMul") {
      if (!isActivation(D->getInput(0)) || !isActivation(D->getInput(1)))
        return nullptr;
      return D;
    }
    auto Through = [&](const Value *Next) -> const Node * {
      size_t Mark = R.Members.size();
      if (const Node *S = walkScores(Next, R, Depth + 1)) {
        R.Members.push_back(D);
        return S;
      }
      R.Members.resize(Mark);
      return nullptr;
    };
    if (Op == "Cast" || Op == "Identity")
      return Through(D->getInput(0));
    if ((Op == "Mul" || Op == "Div") && D->getNumInputs() == 2) {
      if (isScalarConstant(D->getInput(1)))
        return Through(D->getInput(0));
      if (Op == "Mul" && isScalarConstant(D->getInput(0)))
        return Through(D->getInput(1));
      return nullptr;
    }
    if (Op == "Add" && D->getNumInputs() == 2 && !R.Mask) {
      // The scores are the operand of the output's shape; the mask
      // broadcasts into it.
      for (unsigned I = 0; I < 2; ++I) {
        const Value *S = D->getInput(I), *M = D->getInput(1 - I);
        if (!S || !M || S->Type != V->Type)
          continue;
        R.Mask = M;
        R.Use = MaskUse::Additive;
        if (const Node *Found = Through(S))
          return Found;
        R.Mask = nullptr;
      }
      return nullptr;
    }
    if (Op == "Where" && D->getNumInputs() == 3 && !R.Mask) {
      // Where(mask, fill, scores) or Where(mask, scores, fill).
      for (unsigned I = 1; I < 3; ++I) {
        const Value *S = D->getInput(I), *Fill = D->getInput(3 - I);
        if (!S || !Fill || S->Type != V->Type || !isScalarConstant(Fill))
          continue;
        R.Mask = D->getInput(0);
        R.Use = I == 1 ? MaskUse::KeptWhenTrue : MaskUse::MaskedWhenTrue;
        if (const Node *Found = Through(S))
          return Found;
        R.Mask = nullptr;
      }
      return nullptr;
    }
    return nullptr;
  }

  bool matchAt(const Node &SM, AttentionRegion &R) {
    const Value *In = SM.getInput(0), *P = SM.getOutput(0);
    if (!In || !P || !In->Type.isStatic() || In->Type.getRank() < 2)
      return false;
    int64_t Rank = In->Type.getRank();
    int64_t Axis = SM.getAttrInt("axis", Opset >= 13 ? -1 : 1);
    if (Axis < 0)
      Axis += Rank;
    if (Axis != Rank - 1)
      return false;
    R.Softmax = &SM;
    R.Score = walkScores(In, R, 0);
    if (!R.Score)
      return false;
    // Forward to the context product.
    const Value *Cur = P;
    std::vector<const Node *> After;
    for (unsigned Steps = 0;; ++Steps) {
      if (Steps > 4 || !internal(Cur))
        return false;
      const Node *U = Users.find(Cur)->second.front();
      if (U->getDomain() != "" || Taken.count(U))
        return false;
      StringRef Op = U->getOpType();
      if (Op == "MatMul") {
        if (U->getInput(0) != Cur || !isActivation(U->getInput(1)))
          return false;
        R.Context = U;
        break;
      }
      if (!(Op == "Cast" || Op == "Identity" || Op == "Dropout") ||
          U->getInput(0) != Cur)
        return false;
      // Dropout's mask output, if any, must be unused.
      for (unsigned I = 1; I < U->getNumOutputs(); ++I)
        if (U->getOutput(I) && Users.count(U->getOutput(I)))
          return false;
      After.push_back(U);
      Cur = U->getOutput(0);
    }
    // Shapes: scores [.., Sq, Sk] = A [.., Sq, D] x B [.., D, Sk];
    // context [.., Sq, Dv] = P [.., Sq, Sk] x V [.., Sk, Dv].
    const Value *A = R.Score->getInput(0), *B = R.Score->getInput(1);
    const Value *Vv = R.Context->getInput(1), *O = R.Context->getOutput(0);
    for (const Value *X : {A, B, Vv, O})
      if (!X || !X->Type.isStatic() || X->Type.getRank() < 2)
        return false;
    auto Dim = [](const Value *X, int FromEnd) {
      return X->Type.Dims[X->Type.getRank() - FromEnd].Size;
    };
    int64_t Sq = Dim(In, 2), Sk = Dim(In, 1);
    if (Dim(A, 2) != Sq || Dim(B, 1) != Sk || Dim(A, 1) != Dim(B, 2) ||
        Dim(Vv, 2) != Sk)
      return false;

    bool Repeat = false;
    std::vector<const Node *> Layout;
    R.Q = walkLayout(A, Layout, Repeat);
    bool QRepeat = Repeat;
    Repeat = false;
    R.K = walkLayout(B, Layout, Repeat);
    R.V = walkLayout(Vv, Layout, Repeat);
    if (QRepeat || R.Q == R.K || R.K == R.V || R.Q == R.V)
      return false;
    R.GQA = Repeat;
    // The output back to tokens x hidden.
    const Value *Out = O;
    for (unsigned Steps = 0; Steps < 4 && internal(Out); ++Steps) {
      const Node *U = Users.find(Out)->second.front();
      StringRef Op = U->getOpType();
      if (U->getDomain() != "" || Taken.count(U) || U->getInput(0) != Out ||
          !(Op == "Transpose" || Op == "Reshape"))
        break;
      if (Op == "Reshape" && !isConstantLike(U->getInput(1)))
        break;
      After.push_back(U);
      Out = U->getOutput(0);
    }
    R.Out = Out;
    if (R.Mask)
      if (Optional<int64_t> Off = getCausalOffset(R.Mask, R.Use))
        R.Causal = getCausalKeptFraction(Sq, Sk, *Off);
    R.Members.push_back(R.Score);
    R.Members.push_back(&SM);
    R.Members.push_back(R.Context);
    R.Members.insert(R.Members.end(), Layout.begin(), Layout.end());
    R.Members.insert(R.Members.end(), After.begin(), After.end());
    llvm::sort(R.Members, [&](const Node *X, const Node *Y) {
      return Order.lookup(X) < Order.lookup(Y);
    });
    R.Members.erase(std::unique(R.Members.begin(), R.Members.end()),
                    R.Members.end());
    return true;
  }
};

std::string label(const Node &N) { return getNodeLabel(N); }

class DetectFusedKernelsPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    Regions.clear();
    AttentionOps.clear();
    ElementwiseRegions.clear();
    Skipped.clear();
    if (!CU.HW)
      return createStringError(inconvertibleErrorCode(),
                               "detect-fused-kernels needs a hardware model");
    if (CU.NodeCosts.empty() && CU.M->getGraph().getNumNodes())
      return createStringError(
          inconvertibleErrorCode(),
          "detect-fused-kernels needs annotate-costs to run first");
    // Which kernels: --fused-kernels (names, or "all"), or every one the
    // hardware offers. The last class listing a kernel runs it.
    std::map<std::string, std::pair<std::string, const FusedKernel *>> Offered;
    for (const auto &KV : CU.HW->Device.Classes)
      for (const auto &K : KV.second.FusedKernels)
        Offered[K.first] = {KV.first, &K.second};
    std::vector<std::string> Wanted;
    for (const auto &KV : Offered)
      Wanted.push_back(KV.first);
    if (CU.Opts.FusedKernels) {
      std::string Listed = Wanted.empty() ? "none" : join(Wanted, ", ");
      bool All = is_contained(*CU.Opts.FusedKernels, "all");
      if (!All) {
        for (const std::string &Name : *CU.Opts.FusedKernels)
          if (!Offered.count(Name))
            return createStringError(
                inconvertibleErrorCode(),
                "--fused-kernels: hardware '%s' offers no fused kernel '%s' "
                "(device.classes.aicore.fused_kernels lists %s)",
                CU.HW->Name.c_str(), Name.c_str(), Listed.c_str());
        Wanted = *CU.Opts.FusedKernels;
      }
    }
    const FusedKernel *Attention = nullptr;
    std::string Class;
    if (is_contained(Wanted, "attention")) {
      Class = Offered["attention"].first;
      Attention = Offered["attention"].second;
    }
    std::vector<std::string> Elementwise;
    for (const std::string &Name : Wanted)
      if (Name != "attention" && !is_contained(Elementwise, Name))
        Elementwise.push_back(Name);
    KernelClass = Class;
    if (!Attention && Elementwise.empty())
      return Error::success();

    const Graph &G = CU.M->getGraph();
    Matcher Mt(G, CU.M->getOpsetVersion(""));
    for (AttentionRegion &R :
         Attention ? Mt.findAttention() : std::vector<AttentionRegion>()) {
      if (R.Mask && !Attention->Masked) {
        Skipped.push_back(label(*R.Context) +
                          ": masked, and the kernel takes no mask");
        continue;
      }
      if (R.GQA && !Attention->GQA) {
        Skipped.push_back(label(*R.Context) +
                          ": grouped-query, and the kernel is not");
        continue;
      }
      auto SI = CU.NodeCosts.find(R.Score), CI = CU.NodeCosts.find(R.Context);
      if (SI == CU.NodeCosts.end() || CI == CU.NodeCosts.end() ||
          !SI->second.Cost.HasRule || !CI->second.Cost.HasRule)
        continue;
      StringRef DT = getDataTypeName(SI->second.Cost.Elem);
      if (!Attention->supportsDataType(DT)) {
        Skipped.push_back(label(*R.Context) + ": " + DT.str() +
                          ", and the kernel takes " +
                          join(Attention->DataTypes, ", "));
        continue;
      }
      OpCost Fused =
          fusedAttentionCost(SI->second.Cost, CI->second.Cost, R.Q, R.K, R.V,
                             R.Out, *Attention, R.Members, R.Causal);
      ClassTime T = estimateClassTime(*R.Context, Fused, Class, *CU.HW);
      if (!T.Supported) {
        Skipped.push_back(label(*R.Context) + ": " + T.Reason);
        continue;
      }
      assignRegion(CU, R.Members, R.Context, Fused, T, Class, "attention");
      Regions.push_back(std::move(R));
    }
    if (Attention)
      fuseAttentionOps(CU, *Attention, Class);
    // The element-wise kernels, on nodes attention did not take.
    DenseSet<const Node *> Taken;
    for (const AttentionRegion &R : Regions)
      Taken.insert(R.Members.begin(), R.Members.end());
    for (ElementwiseRegion &R : findElementwiseRegions(
             G, CU.M->getOpsetVersion(""), Elementwise, Taken)) {
      const auto &[KClass, Kernel] = Offered[R.Kernel];
      std::vector<const OpCost *> MemberCosts;
      bool Costed = true;
      for (const Node *M : R.Members) {
        auto It = CU.NodeCosts.find(M);
        if (It == CU.NodeCosts.end() || !It->second.Cost.HasRule) {
          Costed = false;
          break;
        }
        MemberCosts.push_back(&It->second.Cost);
      }
      if (!Costed)
        continue;
      StringRef DT = getDataTypeName(R.Out->Type.Elem);
      if (!Kernel->supportsDataType(DT)) {
        Skipped.push_back(R.Kernel + " '" + label(*R.Anchor) +
                          "': " + DT.str() + ", and the kernel takes " +
                          join(Kernel->DataTypes, ", "));
        continue;
      }
      OpCost Fused = fusedElementwiseCost(MemberCosts, R.Inputs, R.Out, R.Saved,
                                          *Kernel, R.Members);
      ClassTime T = estimateClassTime(*R.Anchor, Fused, KClass, *CU.HW);
      if (!T.Supported) {
        Skipped.push_back(R.Kernel + " '" + label(*R.Anchor) +
                          "': " + T.Reason);
        continue;
      }
      assignRegion(CU, R.Members, R.Anchor, Fused, T, KClass, R.Kernel);
      ElementwiseRegions.push_back(std::move(R));
    }
    return Error::success();
  }

  /// Opset 23's Attention is the fused kernel it names: a region of one
  /// node, costed from its two products as the spelled-out region is.
  void fuseAttentionOps(CompilationUnit &CU, const FusedKernel &Kernel,
                        const std::string &Class) {
    for (const auto &NP : CU.M->getGraph().getNodes()) {
      const Node &N = *NP;
      Optional<AttentionDims> D = getAttentionDims(N);
      auto It = CU.NodeCosts.find(&N);
      if (!D || It == CU.NodeCosts.end() || !It->second.Cost.HasRule)
        continue;
      if (((N.getNumInputs() > 3 && N.getInput(3)) || D->Causal) &&
          !Kernel.Masked) {
        Skipped.push_back(label(N) + ": masked, and the kernel takes no mask");
        continue;
      }
      if (D->QHeads != D->KVHeads && !Kernel.GQA) {
        Skipped.push_back(label(N) + ": grouped-query, and the kernel is not");
        continue;
      }
      const OpCost &Own = It->second.Cost;
      StringRef DT = getDataTypeName(Own.Elem);
      if (!Kernel.supportsDataType(DT)) {
        Skipped.push_back(label(N) + ": " + DT.str() +
                          ", and the kernel takes " +
                          join(Kernel.DataTypes, ", "));
        continue;
      }
      // The two products as MatMul's rule costs them (2 FLOPs per
      // multiply-add, a gradient for both operands).
      OpCost Score, Context;
      double Rows = (double)D->Batch * D->QHeads * D->QSeq * D->KVSeq;
      Score.Elem = Context.Elem = Own.Elem;
      Score.Flops = 2 * Rows * D->HeadSize;
      Context.Flops = 2 * Rows * D->VHeadSize;
      Score.BackwardFlops = 2 * Score.Flops;
      Context.BackwardFlops = 2 * Context.Flops;
      Context.MM = Own.MM;
      // Q and the unrepeated K and V: the kernel indexes kv heads itself.
      OpCost Fused = fusedAttentionCost(
          Score, Context, N.getInput(0), N.getInput(1), N.getInput(2),
          N.getOutput(0), Kernel, {&N}, D->causalFraction());
      ClassTime T = estimateClassTime(N, Fused, Class, *CU.HW);
      if (!T.Supported) {
        Skipped.push_back(label(N) + ": " + T.Reason);
        continue;
      }
      assignRegion(CU, {&N}, &N, Fused, T, Class, "attention");
      AttentionOps.push_back(&N);
    }
  }

  /// The anchor carries \p Fused and its time on \p Class; the other
  /// members cost nothing; no other class runs any of them.
  static void assignRegion(CompilationUnit &CU, ArrayRef<const Node *> Members,
                           const Node *Anchor, const OpCost &Fused,
                           const ClassTime &T, const std::string &Class,
                           const std::string &Name) {
    std::string Elsewhere = "the fused " + Name + " kernel runs on " + Class;
    for (const Node *M : Members) {
      NodeCostInfo &Info = CU.NodeCosts[M];
      bool IsAnchor = M == Anchor;
      Info.Cost = IsAnchor ? Fused : fusedMemberCost(Info.Cost, Anchor, Name);
      for (auto &KV : Info.Times) {
        if (KV.first == Class) {
          KV.second = IsAnchor ? T : ClassTime();
          KV.second.Supported = true;
        } else {
          KV.second = ClassTime();
          KV.second.Reason = Elsewhere;
        }
      }
      Info.Class = Class;
    }
  }

  /// One line per region: anchor, inputs, mask, GQA, members.
  void print(const CompilationUnit &CU, raw_ostream &OS) const override {
    OS << "# fused kernels: " << Regions.size() + AttentionOps.size()
       << " attention region(s)";
    if (!KernelClass.empty())
      OS << " on " << KernelClass;
    OS << "\n";
    for (const Node *N : AttentionOps) {
      OS << "attention '" << label(*N) << "'";
      if (N->Layer >= 0)
        OS << " layer=" << N->Layer;
      OS << " op=Attention q=" << N->getInput(0)->Type.str()
         << " k=" << N->getInput(1)->Type.str()
         << " v=" << N->getInput(2)->Type.str();
      Optional<AttentionDims> D = getAttentionDims(*N);
      if (D && D->Causal)
        OS << " causal=" << format("%.6f", D->causalFraction());
      OS << "\n";
    }
    for (const AttentionRegion &R : Regions) {
      OS << "attention '" << label(*R.Context) << "'";
      if (R.Context->Layer >= 0)
        OS << " layer=" << R.Context->Layer;
      OS << " q=" << R.Q->getName() << ":" << R.Q->Type.str()
         << " k=" << R.K->getName() << ":" << R.K->Type.str()
         << " v=" << R.V->getName() << ":" << R.V->Type.str()
         << " out=" << R.Out->getName() << ":" << R.Out->Type.str()
         << " mask=" << (R.Mask ? R.Mask->getName() : StringRef("none"))
         << " gqa=" << (R.GQA ? "yes" : "no");
      if (R.Causal < 1)
        OS << " causal=" << format("%.6f", R.Causal);
      OS << " members=";
      ListSeparator LS(",");
      for (const Node *M : R.Members)
        OS << LS << label(*M);
      OS << "\n";
    }
    if (!ElementwiseRegions.empty())
      OS << "# fused kernels: " << ElementwiseRegions.size()
         << " element-wise region(s)\n";
    for (const ElementwiseRegion &R : ElementwiseRegions) {
      OS << R.Kernel << " '" << label(*R.Anchor) << "'";
      if (R.Anchor->Layer >= 0)
        OS << " layer=" << R.Anchor->Layer;
      OS << " in=";
      ListSeparator LI(",");
      for (const Value *V : R.Inputs)
        OS << LI << V->getName() << ":" << V->Type.str();
      OS << " out=" << R.Out->getName() << ":" << R.Out->Type.str()
         << " form=" << R.Form << " members=";
      ListSeparator LS(",");
      for (const Node *M : R.Members)
        OS << LS << label(*M);
      OS << "\n";
    }
    for (const std::string &S : Skipped)
      OS << "not fused: " << S << "\n";
  }

private:
  std::vector<AttentionRegion> Regions;
  /// Attention ops (opset 23) costed as the kernel.
  std::vector<const Node *> AttentionOps;
  std::vector<ElementwiseRegion> ElementwiseRegions;
  std::vector<std::string> Skipped;
  std::string KernelClass;
};

} // namespace

std::unique_ptr<Pass> createDetectFusedKernelsPass() {
  return std::make_unique<DetectFusedKernelsPass>();
}

} // namespace loom
