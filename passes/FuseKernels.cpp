//===- FuseKernels.cpp - Group ops into the kernels the backend runs -----===//
//
// Generic fusion: groups the ops the named fused kernels (detect-fused-
// kernels) left into the kernels the target backend's compiler makes of
// them, by the rules the hardware lists (device.classes.aicore.fusion;
// FusionRule in loom/Hardware/HardwareModel.h, each with its source):
//
//   loop       producer-consumer chains of element-wise ops, the free
//              layout ops between them (Reshape, Squeeze, ...) and the
//              `movement` ops the rules list (Expand, Slice, Concat, ...)
//              computed by indexing;
//   reduction  reductions over the last axis (ReduceMean/Sum/Max/Min,
//              Softmax, LogSoftmax, the norm ops; Instance- and
//              GroupNormalization over every axis after the channel) with
//              the element-wise ops before and after them; several over
//              the same rows share a kernel (a norm or a softmax spelled
//              out);
//   epilogue   a product of an `into` op type (MatMul, Gemm, Conv) with a
//              kernel of element-wise ops that only its output starts
//              (bias, activation, residual add, cast).
//
// Grouping is greedy in graph order: a node joins the kernel(s) of its
// producers when the rules allow the union, else starts its own. A union
// must stay a kernel: one layer, at most MaxMembers nodes, and convex --
// no value leaves it and comes back through an op outside -- which holds
// when every value it reads from outside is produced at a lower level
// (longest path from the graph inputs) than its lowest member. Levels, not
// graph order, so that the grouping does not depend on how the exporter
// ordered independent nodes. Epilogues are added afterwards: a product
// takes the element-wise kernel its output alone feeds.
//
// The named element-wise kernels of detect-fused-kernels (rmsnorm,
// layernorm, swiglu, rotary) are special cases: a named region joins the
// generic kernel around it whole (a norm as a reduction, swiglu and rotary
// as loops), and a kernel holding one named region takes its name and its
// efficiency, so a norm costs the same whether the pattern matcher knew its
// spelling or not. Attention regions stay their own kernels.
//
// What the backend runs no kernel for costs nothing: a layout op of a
// weight alone (torch's Transpose and Slice of a Linear's or
// MultiheadAttention's parameter) that only GEMMs and their epilogues read
// -- the GEMM reads it through an offset, a leading dimension and a
// transpose flag -- and a node computed from Constant nodes alone, which
// the backend folds when it loads the graph (absorbWeightViews).
//
// Each kernel is costed once (fusedGroupCost in loom/Cost/FusedKernels.h)
// on its anchor, the member writing its last output (the product, for an
// epilogue); the other members cost nothing (OpCost::FusedInto), as the
// named kernels' members. The graph is not changed: emitted graphs keep
// the original ops, which the backend's compiler fuses.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "loom/Cost/DeviceTime.h"
#include "loom/Cost/FusedKernels.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/IR/NodeLabel.h"
#include "loom/Pass/Pass.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <climits>

using namespace llvm;

namespace loom {
namespace {

/// Largest kernel: a bound on the work per merge; transformer blocks'
/// fusible chains (a norm spelled out, GELU with its bias) are 5-15 ops.
constexpr unsigned MaxMembers = 64;

enum class Role { None, Loop, Movement, Reduction, Product };

/// The last axis of \p N's reduction, or false when it reduces another.
bool reducesLastAxis(const Node &N, int64_t Opset) {
  const Value *In = N.getInput(0);
  if (!In || !In->Type.isStatic() || In->Type.getRank() < 1)
    return false;
  int64_t Rank = In->Type.getRank();
  auto Last = [&](int64_t A) { return A == -1 || A == Rank - 1; };
  StringRef Op = N.getOpType();
  if (Op == "Softmax" || Op == "LogSoftmax")
    return Last(N.getAttrInt("axis", Opset >= 13 ? -1 : 1));
  if (Op == "LayerNormalization" || Op == "RMSNormalization")
    return Last(N.getAttrInt("axis", -1));
  // Their statistics run over every axis after the channel (the group's
  // channels and the spatial axes): the trailing elements of each row, as
  // a last-axis norm's (torch's GroupNorm exports as a Reshape to [N, G,
  // -1] and InstanceNormalization; the same norm spelled out reduces that
  // last axis).
  if (Op == "InstanceNormalization" || Op == "GroupNormalization")
    return Rank >= 3;
  if (Op.startswith("Reduce")) {
    std::vector<int64_t> Axes;
    if (N.getNumInputs() > 1 && N.getInput(1)) {
      Optional<std::vector<int64_t>> A = getConstantInts(N.getInput(1));
      if (!A)
        return false;
      Axes = *A;
    } else if (Optional<std::vector<int64_t>> A = N.getAttrInts("axes")) {
      Axes = *A;
    } else {
      return Rank == 1;
    }
    return Axes.size() == 1 && Last(Axes[0]);
  }
  return false;
}

struct Kernel {
  std::vector<const Node *> Members;
  /// Grouping units: plain nodes and named regions (one each).
  unsigned Units = 0;
  /// The named element-wise regions among them, by anchor.
  std::vector<const Node *> Named;
  unsigned Reductions = 0;
  unsigned Movement = 0;
  const Node *Product = nullptr;
  /// The input shape every reduction reduces (one row set per kernel).
  const Value *Rows = nullptr;
  int MinLevel = 0;
  int Layer = -1;
  bool Dead = false;
};

class FuseKernelsPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    Kernels.clear();
    if (!CU.HW || !CU.Opts.GenericFusion)
      return Error::success();
    const DeviceClass *DC = CU.HW->getClass("aicore");
    if (!DC || !DC->Fusion)
      return Error::success();
    Rules = &*DC->Fusion;
    if (CU.NodeCosts.empty() && CU.M->getGraph().getNumNodes())
      return createStringError(
          inconvertibleErrorCode(),
          "fuse-kernels needs annotate-costs to run first");
    const Graph &G = CU.M->getGraph();
    Opset = CU.M->getOpsetVersion("");
    Users = buildUseMap(G);
    GraphOutputs.clear();
    for (const Value *V : G.getOutputs())
      GraphOutputs.insert(V);
    classify(CU);
    group(G);
    if (Rules->get("epilogue"))
      addEpilogues(G);
    cost(CU);
    absorbWeightViews(CU, G);
    return Error::success();
  }

  void print(const CompilationUnit &CU, raw_ostream &OS) const override {
    OS << "# fused kernels (generic): " << Kernels.size() << "\n";
    for (const Kernel &K : Kernels) {
      OS << kernelName(K) << " '" << getNodeLabel(*anchorOf(K)) << "'";
      if (K.Layer >= 0)
        OS << " layer=" << K.Layer;
      OS << " members=";
      ListSeparator LS(",");
      for (const Node *M : K.Members)
        OS << LS << getNodeLabel(*M);
      OS << "\n";
    }
  }

private:
  const FusionRules *Rules = nullptr;
  int64_t Opset = 0;
  UseMap Users;
  DenseSet<const Value *> GraphOutputs;
  DenseMap<const Node *, Role> RoleOf;
  DenseMap<const Node *, int> Level;
  DenseMap<const Node *, unsigned> KernelOf;
  /// A named element-wise region (rmsnorm, layernorm, swiglu, rotary)
  /// joins generic kernels whole: its nodes by anchor.
  DenseMap<const Node *, std::vector<const Node *>> Parts;
  DenseMap<const Node *, std::string> NamedKernel;
  std::vector<Kernel> Work;
  std::vector<Kernel> Kernels;

  StringRef kernelName(const Kernel &K) const {
    // A kernel around one named region keeps its name (reports, and the
    // framework flags emit derives from it).
    if (K.Named.size() == 1)
      return NamedKernel.find(K.Named.front())->second;
    if (K.Product)
      return "fusion.epilogue";
    if (K.Reductions)
      return "fusion.reduction";
    return "fusion.loop";
  }

  /// The member writing the kernel's last output: its product, or the
  /// last member (graph order) with a value leaving the kernel.
  const Node *anchorOf(const Kernel &K) const {
    if (K.Product)
      return K.Product;
    return K.Members.back();
  }

  static bool isActivation(const Value *V) { return V && !isConstantLike(V); }

  /// The nodes a grouping unit brings: a named region's, or \p N.
  ArrayRef<const Node *> partsOf(const Node *const &N) const {
    auto It = Parts.find(N);
    if (It != Parts.end())
      return It->second;
    return ArrayRef<const Node *>(N);
  }

  int levelOf(const Node *N) const {
    int L = INT_MAX;
    for (const Node *P : partsOf(N))
      L = std::min(L, Level.lookup(P));
    return L;
  }

  /// The rows a reduction unit reduces: its (first) input.
  const Value *rowsOf(const Node *N) const {
    return partsOf(N).front()->getInput(0);
  }

  void classify(const CompilationUnit &CU) {
    RoleOf.clear();
    Level.clear();
    Parts.clear();
    NamedKernel.clear();
    const FusionRule *Epi = Rules->get("epilogue");
    bool Loop = Rules->get("loop") || Rules->get("reduction") || Epi;
    for (const auto &NP : CU.M->getGraph().getNodes()) {
      const Node &N = *NP;
      int L = 0;
      for (const Value *V : N.getInputs())
        if (isActivation(V))
          if (const Node *D = V->getDefiningNode())
            L = std::max(L, Level.lookup(D) + 1);
      Level[&N] = L;
      auto It = CU.NodeCosts.find(&N);
      if (It == CU.NodeCosts.end())
        continue;
      const NodeCostInfo &Info = It->second;
      const OpCost &C = Info.Cost;
      if (N.getDomain() != "" || !C.HasRule || C.FusedInto ||
          Info.Class != "aicore" || N.getNumOutputs() == 0)
        continue;
      StringRef Op = N.getOpType();
      Role R = Role::None;
      StringRef Named = C.FusedKernel;
      if (!Named.empty()) {
        // The named element-wise kernels are generic fusion's special
        // cases: a norm is a reduction, swiglu, gelu and rotary are loops.
        bool Norm = Named == "rmsnorm" || Named == "layernorm";
        if (!(Norm || Named == "swiglu" || Named == "rotary" ||
              Named == "gelu") ||
            C.FusedMembers.empty() || (Norm && !Rules->get("reduction")) ||
            (!Norm && !Loop))
          continue;
        Parts[&N] = C.FusedMembers;
        NamedKernel[&N] = Named.str();
        RoleOf[&N] = Norm ? Role::Reduction : Role::Loop;
        continue;
      }
      if (none_of(N.getInputs(), isActivation))
        continue;
      if (C.Unit == ComputeUnit::Cube) {
        if (Epi && is_contained(Epi->Into, Op))
          R = Role::Product;
      } else if (Rules->get("reduction") && C.Unit == ComputeUnit::Vector &&
                 (C.Family == "norm" || C.Family == "reduction") &&
                 N.getNumOutputs() == 1 && reducesLastAxis(N, Opset)) {
        R = Role::Reduction;
      } else if (Loop && C.Unit == ComputeUnit::Vector &&
                 (isElementwiseOp(N) || Op == "RotaryEmbedding")) {
        // Opset 23's RotaryEmbedding is element-wise over its input with
        // indexed tables: the loop its spelled-out form fuses into.
        R = Role::Loop;
      } else if (Loop && C.Unit == ComputeUnit::None) {
        R = Role::Loop;
      } else if (Rules->get("loop") && C.Unit == ComputeUnit::Memory &&
                 is_contained(Rules->Movement, Op)) {
        R = Role::Movement;
      }
      if (R != Role::None)
        RoleOf[&N] = R;
    }
  }

  /// Whether the union of the kernels \p Ids and node \p N (none when
  /// null) is a kernel the rules allow.
  bool allowed(ArrayRef<unsigned> Ids, const Node *N) const {
    unsigned Size = N ? partsOf(N).size() : 0, Red = 0, Mov = 0, Prod = 0;
    unsigned Named = N && Parts.count(N) ? 1 : 0;
    const Value *Rows = nullptr;
    int Layer = N ? N->Layer : -2, MinLevel = N ? levelOf(N) : INT_MAX;
    SmallPtrSet<const Node *, 32> In;
    auto AddRows = [&](const Value *R) {
      if (!R)
        return true;
      if (!Rows)
        Rows = R;
      return Rows->Type == R->Type;
    };
    for (unsigned Id : Ids) {
      const Kernel &K = Work[Id];
      Size += K.Members.size();
      Red += K.Reductions;
      Mov += K.Movement;
      Prod += K.Product ? 1 : 0;
      Named += K.Named.size();
      if (Layer == -2)
        Layer = K.Layer;
      if (K.Layer != Layer || !AddRows(K.Rows))
        return false;
      MinLevel = std::min(MinLevel, K.MinLevel);
      In.insert(K.Members.begin(), K.Members.end());
    }
    if (N) {
      for (const Node *P : partsOf(N))
        In.insert(P);
      Role R = RoleOf.lookup(N);
      Red += R == Role::Reduction;
      Mov += R == Role::Movement;
      Prod += R == Role::Product;
      if (R == Role::Reduction && !AddRows(rowsOf(N)))
        return false;
    }
    if (Size > MaxMembers || Prod > 1)
      return false;
    // A product's epilogue is element-wise ops, not a named kernel.
    if (Prod && (Red || Mov || Named || !Rules->get("epilogue")))
      return false;
    if (!Prod && Red && !Rules->get("reduction"))
      return false;
    if (!Prod && !Red && Size > 1 && !Rules->get("loop"))
      return false;
    // Convex: what it reads from outside comes from below its lowest
    // member.
    for (const Node *M : In)
      for (const Value *V : M->getInputs()) {
        if (!isActivation(V))
          continue;
        const Node *D = V->getDefiningNode();
        if (D && !In.count(D) && Level.lookup(D) >= MinLevel)
          return false;
      }
    return true;
  }

  unsigned merge(ArrayRef<unsigned> Ids, const Node *N) {
    unsigned Into = Ids.front();
    for (unsigned Id : Ids.drop_front()) {
      Kernel &K = Work[Id];
      for (const Node *M : K.Members)
        KernelOf[M] = Into;
      Kernel &T = Work[Into];
      T.Members.insert(T.Members.end(), K.Members.begin(), K.Members.end());
      T.Named.insert(T.Named.end(), K.Named.begin(), K.Named.end());
      T.Units += K.Units;
      T.Reductions += K.Reductions;
      T.Movement += K.Movement;
      if (!T.Product)
        T.Product = K.Product;
      if (!T.Rows)
        T.Rows = K.Rows;
      T.MinLevel = std::min(T.MinLevel, K.MinLevel);
      K = Kernel();
      K.Dead = true;
    }
    if (N)
      add(Into, N);
    return Into;
  }

  void add(unsigned Id, const Node *N) {
    Kernel &K = Work[Id];
    for (const Node *P : partsOf(N)) {
      K.Members.push_back(P);
      KernelOf[P] = Id;
    }
    ++K.Units;
    if (Parts.count(N))
      K.Named.push_back(N);
    Role R = RoleOf.lookup(N);
    if (R == Role::Reduction) {
      ++K.Reductions;
      if (!K.Rows)
        K.Rows = rowsOf(N);
    }
    K.Movement += R == Role::Movement;
    if (R == Role::Product)
      K.Product = N;
    K.MinLevel = std::min(K.MinLevel, levelOf(N));
  }

  void group(const Graph &G) {
    Work.clear();
    KernelOf.clear();
    for (const auto &NP : G.getNodes()) {
      const Node *N = NP.get();
      Role R = RoleOf.lookup(N);
      if (R == Role::None || R == Role::Product)
        continue; // products take their epilogue afterwards
      SmallVector<unsigned, 4> Producers;
      for (const Node *P : partsOf(N))
        for (const Value *V : P->getInputs())
          if (isActivation(V))
            if (const Node *D = V->getDefiningNode()) {
              auto It = KernelOf.find(D);
              if (It != KernelOf.end() && !is_contained(Producers, It->second))
                Producers.push_back(It->second);
            }
      llvm::sort(Producers);
      unsigned Joined = ~0u;
      if (!Producers.empty() && allowed(Producers, N))
        Joined = merge(Producers, N);
      for (unsigned Id : Producers)
        if (Joined == ~0u && allowed({Id}, N))
          Joined = merge({Id}, N);
      if (Joined == ~0u) {
        Work.emplace_back();
        Work.back().Layer = N->Layer;
        Work.back().MinLevel = levelOf(N);
        add(Work.size() - 1, N);
      }
    }
  }

  /// A product takes the kernel of element-wise ops its output starts:
  /// one kernel reads the output, nothing outside does.
  void addEpilogues(const Graph &G) {
    for (const auto &NP : G.getNodes()) {
      const Node *P = NP.get();
      if (RoleOf.lookup(P) != Role::Product || P->getNumOutputs() != 1)
        continue;
      const Value *Out = P->getOutput(0);
      if (GraphOutputs.count(Out))
        continue;
      auto U = Users.find(Out);
      if (U == Users.end() || U->second.empty())
        continue;
      unsigned Id = ~0u;
      bool One = true;
      for (const Node *N : U->second) {
        auto It = KernelOf.find(N);
        if (It == KernelOf.end() || (Id != ~0u && It->second != Id)) {
          One = false;
          break;
        }
        Id = It->second;
      }
      Work.emplace_back();
      unsigned PId = Work.size() - 1;
      Work[PId].Layer = P->Layer;
      Work[PId].MinLevel = Level.lookup(P);
      add(PId, P);
      if (One && Id != ~0u && allowed({PId, Id}, nullptr))
        merge({PId, Id}, nullptr);
    }
  }

  /// Costs every kernel of two or more members on its anchor.
  void cost(CompilationUnit &CU) {
    DenseMap<const Node *, unsigned> Order;
    unsigned I = 0;
    for (const auto &NP : CU.M->getGraph().getNodes())
      Order[NP.get()] = I++;
    for (Kernel &K : Work) {
      // One unit: a plain op, or a named region costed as its kernel.
      if (K.Dead || K.Units < 2)
        continue;
      llvm::sort(K.Members, [&](const Node *A, const Node *B) {
        return Order.lookup(A) < Order.lookup(B);
      });
      SmallPtrSet<const Node *, 32> In(K.Members.begin(), K.Members.end());
      std::vector<const Value *> Inputs, Outputs, Saved;
      std::vector<const OpCost *> MemberCosts;
      const OpCost *Product = nullptr;
      DenseSet<const Value *> Seen;
      const Node *Anchor = nullptr;
      for (const Node *M : K.Members) {
        const OpCost &C = CU.NodeCosts[M].Cost;
        MemberCosts.push_back(&C);
        if (M == K.Product)
          Product = &C;
        for (const Value *V : M->getInputs()) {
          if (!V || !V->Type.getSizeInBytes())
            continue;
          const Node *D = V->getDefiningNode();
          if (D && In.count(D))
            continue;
          // Scalars (eps, a scale) ride in the kernel's arguments.
          auto NE = V->Type.getNumElements();
          if (isConstantLike(V) && NE && *NE == 1)
            continue;
          if (Seen.insert(V).second)
            Inputs.push_back(V);
        }
        for (const Value *V : M->getOutputs()) {
          if (!V)
            continue;
          auto U = Users.find(V);
          bool Leaves =
              GraphOutputs.count(V) ||
              (U != Users.end() &&
               any_of(U->second, [&](const Node *X) { return !In.count(X); }));
          if (Leaves) {
            Outputs.push_back(V);
            Anchor = M;
          }
        }
      }
      if (K.Product)
        Anchor = K.Product;
      if (!Anchor)
        continue; // nothing leaves it: dead code, costed as written
      Saved = savedValues(CU, K, In, Outputs);
      OpCost Fused = fusedGroupCost(MemberCosts, K.Members, Inputs, Outputs,
                                    Saved, Product, kernelName(K));
      if (K.Named.size() == 1) {
        // The named kernel's own rate (its efficiency in the YAML).
        const OpCost &NC = CU.NodeCosts[K.Named.front()].Cost;
        Fused.KernelEfficiency = NC.KernelEfficiency;
        Fused.BackwardKernelEfficiency = NC.BackwardKernelEfficiency;
      }
      ClassTime T = estimateClassTime(*Anchor, Fused, "aicore", *CU.HW);
      if (!T.Supported)
        continue;
      assign(CU, K.Members, Anchor, Fused, T, kernelName(K));
      Kernels.push_back(K);
    }
  }

  /// Whether \p N is a layout op (Transpose, Slice, Split, Reshape, ...)
  /// of a weight alone: its data input a parameter or another such view,
  /// every other input a constant (starts, perm, shape).
  bool isWeightView(const Node &N, const DenseSet<const Node *> &Views) const {
    static const StringRef Layout[] = {"Transpose", "Slice",   "Split",
                                       "Reshape",   "Squeeze", "Unsqueeze",
                                       "Identity",  "Flatten"};
    if (!N.getDomain().empty() || !is_contained(Layout, N.getOpType()) ||
        !N.getNumInputs() || !N.getInput(0))
      return false;
    const Value *In = N.getInput(0);
    const Node *D = In->getDefiningNode();
    if (!In->isParameter() && !(D && Views.count(D)))
      return false;
    for (unsigned I = 1; I < N.getNumInputs(); ++I)
      if (N.getInput(I) && !isConstantLike(N.getInput(I)))
        return false;
    return true;
  }

  /// A node computed from Constant nodes alone (a mask cut from a stored
  /// table by a static sequence length) runs once, when the backend loads
  /// the graph (ONNX Runtime's constant folding, TensorRT's, CANN GE's),
  /// not every step: it costs what a Constant costs. (torch.onnx folds the
  /// same subgraphs at export; parameters are not constants: they train.)
  void foldConstantNodes(CompilationUnit &CU, const Graph &G) {
    DenseSet<const Value *> Folded;
    for (const auto &NP : G.getNodes()) {
      const Node &N = *NP;
      if (N.getOpType() == "Constant" && N.getDomain().empty()) {
        for (const Value *V : N.getOutputs())
          Folded.insert(V);
        continue;
      }
      bool Const = N.getNumInputs() && N.getDomain().empty() &&
                   all_of(N.getInputs(), [&](const Value *V) {
                     return !V || Folded.count(V);
                   });
      // Random ops draw anew each run: never folded.
      StringRef Op = N.getOpType();
      Const &= !Op.startswith("Random") && Op != "Bernoulli" &&
               Op != "Multinomial" && Op != "Dropout";
      for (const Attribute &A : N.getAttributes())
        Const &= A.Gs.empty();
      if (!Const)
        continue;
      for (const Value *V : N.getOutputs())
        Folded.insert(V);
      auto CI = CU.NodeCosts.find(&N);
      if (CI == CU.NodeCosts.end() || CI->second.Class != "aicore" ||
          CI->second.Cost.FusedInto)
        continue;
      OpCost C;
      C.HasRule = true;
      C.Unit = ComputeUnit::None;
      C.Elem = CI->second.Cost.Elem;
      CI->second.Cost = C;
      // The classes that could run it still can (as a Constant's).
      for (auto &KV : CI->second.Times)
        KV.second.Seconds = KV.second.BackwardSeconds = 0;
    }
  }

  /// A weight's transpose or slice read only by products (and the bias
  /// of their epilogues) is no kernel of its own: the GEMM reads its
  /// operand through an offset, a leading dimension and a transpose flag
  /// (cuBLAS cublasGemmEx transa/transb and lda; CANN MatMul's
  /// transpose_x1/transpose_x2), as torch reads nn.MultiheadAttention's
  /// in_proj_weight[0:E].t() as a view. torch.onnx writes those views as
  /// Slice and Transpose nodes of the parameter (a Linear's weight
  /// transposed, cross-attention's q and kv rows sliced); a writing that
  /// stores each projection's weight as the GEMM reads it has none. Such
  /// views cost nothing, as members of their reader's kernel.
  void absorbWeightViews(CompilationUnit &CU, const Graph &G) {
    DenseSet<const Node *> Views;
    for (const auto &NP : G.getNodes())
      if (isWeightView(*NP, Views))
        Views.insert(NP.get());
    // Readers first: a view's reader may be a view absorbed already.
    DenseMap<const Node *, const Node *> AnchorOf;
    auto KernelAnchor = [&](const Node *R) -> const Node * {
      auto It = AnchorOf.find(R);
      if (It != AnchorOf.end())
        return It->second;
      auto CI = CU.NodeCosts.find(R);
      if (CI == CU.NodeCosts.end())
        return nullptr;
      const OpCost &C = CI->second.Cost;
      StringRef Op = R->getOpType();
      if (Op == "MatMul" || Op == "Gemm" || Op == "Conv" ||
          Op == "ConvTranspose")
        return C.FusedInto ? C.FusedInto : R;
      // An epilogue's element-wise member (the bias Add) reads it too.
      if (C.FusedInto && C.FusedKernel == "fusion.epilogue")
        return C.FusedInto;
      return nullptr;
    };
    const auto &Nodes = G.getNodes();
    foldConstantNodes(CU, G);
    for (unsigned I = Nodes.size(); I-- > 0;) {
      const Node *N = Nodes[I].get();
      auto CI = CU.NodeCosts.find(N);
      if (!Views.count(N) || CI == CU.NodeCosts.end() ||
          CI->second.Class != "aicore" || CI->second.Cost.FusedInto)
        continue;
      const Node *Anchor = nullptr;
      bool All = true;
      for (const Value *V : N->getOutputs()) {
        auto U = Users.find(V);
        if (!V || GraphOutputs.count(V) || U == Users.end() ||
            U->second.empty()) {
          All = false;
          break;
        }
        for (const Node *R : U->second) {
          const Node *A = KernelAnchor(R);
          All &= A != nullptr;
          if (A && !Anchor)
            Anchor = A;
        }
      }
      if (!All || !Anchor)
        continue;
      AnchorOf[N] = Anchor;
      NodeCostInfo &Info = CI->second;
      // The weight it reads is still held, trained and reduced.
      double Params = Info.Cost.ParamCount, Bytes = Info.Cost.ParamBytes;
      Info.Cost = fusedMemberCost(Info.Cost, Anchor, "operand");
      Info.Cost.ParamCount = Params;
      Info.Cost.ParamBytes = Bytes;
      for (auto &KV : Info.Times) {
        KV.second = ClassTime();
        KV.second.Supported = KV.first == "aicore";
        if (KV.first != "aicore")
          KV.second.Reason = "the GEMM reading this weight view runs on aicore";
      }
    }
  }

  /// What the fused backward keeps: the members' saved values that cross
  /// into the kernel, that it writes out, or a product writes; an
  /// element-wise intermediate kept on chip is recomputed from the kernel
  /// inputs (and product output) it derives from.
  std::vector<const Value *>
  savedValues(const CompilationUnit &CU, const Kernel &K,
              const SmallPtrSetImpl<const Node *> &In,
              ArrayRef<const Value *> Outputs) const {
    std::vector<const Value *> Saved;
    DenseSet<const Value *> Seen;
    SmallVector<const Value *, 8> Stack;
    for (const Node *M : K.Members) {
      // Scaling by a scalar constant (attention's 1/sqrt(d), Div or Mul)
      // needs only the constant for its gradient: its input is not kept.
      StringRef Op = M->getOpType();
      if ((Op == "Mul" || Op == "Div") && M->getNumInputs() == 2 &&
          any_of(M->getInputs(), [](const Value *X) {
            auto NE = X ? X->Type.getNumElements() : None;
            return X && isConstantLike(X) && NE && *NE == 1;
          }))
        continue;
      for (const Value *V : CU.NodeCosts.find(M)->second.Cost.SavedValues)
        Stack.push_back(V);
    }
    std::reverse(Stack.begin(), Stack.end());
    while (!Stack.empty()) {
      const Value *V = Stack.pop_back_val();
      if (!V || !Seen.insert(V).second)
        continue;
      const Node *D = V->getDefiningNode();
      // Kept: what crosses into the kernel, what it writes out anyway (a
      // softmax's probabilities), a product's output.
      if (!D || !In.count(D) || D == K.Product || is_contained(Outputs, V)) {
        if (isActivation(V))
          Saved.push_back(V);
        continue;
      }
      SmallVector<const Value *, 4> Ins;
      for (const Value *X : D->getInputs())
        if (isActivation(X))
          Ins.push_back(X);
      Stack.append(Ins.rbegin(), Ins.rend());
    }
    return Saved;
  }

  static void assign(CompilationUnit &CU, ArrayRef<const Node *> Members,
                     const Node *Anchor, const OpCost &Fused,
                     const ClassTime &T, StringRef Name) {
    for (const Node *M : Members) {
      NodeCostInfo &Info = CU.NodeCosts[M];
      bool IsAnchor = M == Anchor;
      Info.Cost = IsAnchor ? Fused : fusedMemberCost(Info.Cost, Anchor, Name);
      for (auto &KV : Info.Times) {
        if (KV.first == "aicore") {
          KV.second = IsAnchor ? T : ClassTime();
          KV.second.Supported = true;
        } else {
          KV.second = ClassTime();
          KV.second.Reason =
              "the fused " + Name.str() + " kernel runs on aicore";
        }
      }
      Info.Class = "aicore";
    }
  }
};

} // namespace

std::unique_ptr<Pass> createFuseKernelsPass() {
  return std::make_unique<FuseKernelsPass>();
}

} // namespace loom
