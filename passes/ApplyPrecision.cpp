//===- ApplyPrecision.cpp - Retype the planning graph to the recipe -------===//
//
// The precision recipe (loom/Plan/Precision.h), not the exporter, decides
// the type every float tensor is computed and stored in. This pass retypes
// the planning graph's floating values -- activations, weights, graph
// inputs, in subgraphs too -- to the recipe's storage type, so that every
// cost read from value types afterwards (each kernel's bytes and the rate
// it computes at, saved activations, the payload of each collective the
// sharding rules return) follows the recipe. A Cast between two float
// types that the retyping makes a no-op costs nothing (the identity it now
// is): the exporter's upcasts around a norm or a softmax are what those
// kernels do inside (fp32 accumulation, 16-bit loads and stores), not a
// kernel of their own.
//
// What the recipe leaves: integer ids, boolean masks, quantized storage
// (int8, fp8, 4-bit), fp64, and fp32 islands. An island is recognized in a
// graph whose weights are mostly 16-bit (fp16/bf16 elements outnumber fp32
// ones) as the region an explicit Cast to float opens on a 16-bit value --
// the values computed from it in fp32, up to the Casts that leave it -- when
// that region contains a matrix op (MatMul, Gemm, Conv, Einsum): a model
// that computes a router or a rotary frequency product in fp32 insists on
// fp32 matmuls, which the recipe then costs in fp32. Regions with only
// element-wise and reduction work (norms and softmax upcast by the
// exporter) are what fused kernels accumulate in fp32 anyway: the recipe's
// type. A model written in fp32 has no islands (its Casts to float are
// no-ops), so under a 16-bit recipe it is costed as its 16-bit export is.
//
// Only the planning graph is retyped: shard binds a clone of the model as
// imported (not this pass), so emitted graphs keep the model's own types
// and the runtime's mixed precision (Megatron's --bf16, torch autocast)
// applies the recipe. Parameter data read while planning (constants read
// by pattern matching) is converted lazily with the type.
//
//===----------------------------------------------------------------------===//
#include "loom/Pass/Pass.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>

using namespace llvm;

namespace loom {
namespace {

bool isRecipeFloat(DataType T) {
  return T == DataType::Float || T == DataType::Float16 ||
         T == DataType::BFloat16;
}

bool is16Bit(DataType T) {
  return T == DataType::Float16 || T == DataType::BFloat16;
}

bool isMatrixOp(const Node &N) {
  StringRef Op = N.getOpType();
  return Op == "MatMul" || Op == "Gemm" || Op == "Conv" ||
         Op == "ConvTranspose" || Op == "Einsum";
}

/// A parameter's data seen in another element type, converted on first
/// read (planning reads only small constants; the weights are sliced from
/// the imported model's data, never from this).
class RetypedData : public TensorData {
public:
  RetypedData(std::shared_ptr<const TensorData> Src, TensorType From,
              DataType To)
      : Src(std::move(Src)), From(std::move(From)), To(To) {}
  Kind getKind() const override { return Kind::Inline; }
  Expected<ArrayRef<char>> getBytes() const override {
    std::call_once(Once, [&] {
      Tensor T{"", From, Src};
      Expected<std::vector<double>> V = T.getFloatValues();
      if (!V) {
        Failure = toString(V.takeError());
        return;
      }
      Tensor Out = Tensor::makeFromDoubles(To, {(int64_t)V->size()}, *V);
      Expected<ArrayRef<char>> B = Out.Data->getBytes();
      if (!B) {
        Failure = toString(B.takeError());
        return;
      }
      Bytes.assign(B->begin(), B->end());
    });
    if (!Failure.empty())
      return createStringError(inconvertibleErrorCode(), "%s", Failure.c_str());
    return ArrayRef<char>(Bytes);
  }
  uint64_t getSize() const override {
    return (uint64_t)From.getNumElements().getValueOr(0) * getDataTypeSize(To);
  }

private:
  std::shared_ptr<const TensorData> Src;
  TensorType From;
  DataType To;
  mutable std::once_flag Once;
  mutable std::vector<char> Bytes;
  mutable std::string Failure;
};

/// Calls \p Fn on every graph of \p G's tree (G first).
void forEachGraph(Graph &G, function_ref<void(Graph &)> Fn) {
  Fn(G);
  for (const auto &NP : G.getNodes())
    for (const Attribute &A : NP->getAttributes())
      for (const auto &Sub : A.Gs)
        forEachGraph(*Sub, Fn);
}

class ApplyPrecisionPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    Summary.clear();
    if (!CU.Opts.Precision)
      return Error::success();
    const PrecisionRecipe &R = *CU.Opts.Precision;
    Graph &G = CU.M->getGraph();
    DenseSet<const Value *> Island;
    unsigned IslandNodes = 0;
    if (is16Bit(R.Storage) || R.Storage == DataType::Float)
      findIslands(G, R.Storage, Island, IslandNodes);
    unsigned Retyped = 0, Identities = 0;
    forEachGraph(G, [&](Graph &Sub) {
      for (Value *V : Sub.getInputs())
        Retyped += retype(*V, R.Storage, Island);
      for (Value *V : Sub.getParameters())
        Retyped += retype(*V, R.Storage, Island);
      for (const auto &NP : Sub.getNodes())
        for (Value *V : NP->getOutputs())
          if (V)
            Retyped += retype(*V, R.Storage, Island);
    });
    forEachGraph(G, [&](Graph &Sub) {
      for (const auto &NP : Sub.getNodes())
        Identities += isNoOpCast(*NP);
    });
    raw_string_ostream OS(Summary);
    OS << "precision " << R.describe() << ": " << Retyped
       << " float values retyped to " << getDataTypeName(R.Storage) << ", "
       << Identities << " casts made no-ops, " << Island.size()
       << " values in fp32 islands (" << IslandNodes << " node(s))\n";
    return Error::success();
  }

  void print(const CompilationUnit &CU, raw_ostream &OS) const override {
    OS << Summary;
    Pass::print(CU, OS);
  }

private:
  std::string Summary;

  static unsigned retype(Value &V, DataType To,
                         const DenseSet<const Value *> &Island) {
    if (!isRecipeFloat(V.Type.Elem) || V.Type.Elem == To || Island.count(&V))
      return 0;
    if (V.Data)
      V.Data = std::make_shared<RetypedData>(V.Data, V.Type, To);
    V.Type.Elem = To;
    return 1;
  }

  /// A Cast between float types that the retyping made a no-op (costed
  /// as the identity it now is: cost_models/ops/ElementwiseOps.cpp). The
  /// node stays a Cast: fused-kernel patterns name it.
  static unsigned isNoOpCast(const Node &N) {
    if (N.getOpType() != "Cast" || !N.getDomain().empty() ||
        N.getNumInputs() != 1 || N.getNumOutputs() != 1)
      return 0;
    const Value *In = N.getInput(0), *Out = N.getOutput(0);
    return In && Out && In->Type.Elem == Out->Type.Elem &&
           isRecipeFloat(In->Type.Elem);
  }

  /// The fp32 islands of a mostly-16-bit graph (see the file comment),
  /// into \p Island; \p Nodes counts their nodes.
  static void findIslands(const Graph &G, DataType To,
                          DenseSet<const Value *> &Island, unsigned &Nodes) {
    double Wide = 0, Narrow = 0;
    for (const Value *P : G.getParameters()) {
      double N = (double)P->Type.getNumElements().getValueOr(0);
      if (P->Type.Elem == DataType::Float)
        Wide += N;
      else if (is16Bit(P->Type.Elem))
        Narrow += N;
    }
    if (Narrow <= Wide)
      return;
    DenseMap<const Value *, SmallVector<const Node *, 4>> Users;
    for (const auto &NP : G.getNodes())
      for (const Value *V : NP->getInputs())
        if (V)
          Users[V].push_back(NP.get());
    for (const auto &NP : G.getNodes()) {
      const Node &C = *NP;
      if (C.getOpType() != "Cast" || C.getNumInputs() != 1 || !C.getInput(0) ||
          !is16Bit(C.getInput(0)->Type.Elem) || !C.getOutput(0) ||
          C.getOutput(0)->Type.Elem != DataType::Float)
        continue;
      // The fp32 region the cast opens.
      SmallVector<const Value *, 16> Region{C.getOutput(0)},
          Work{C.getOutput(0)};
      SmallVector<const Node *, 16> RegionNodes;
      DenseSet<const Node *> Seen;
      bool HasMatrix = false;
      while (!Work.empty()) {
        const Value *V = Work.pop_back_val();
        for (const Node *U : Users.lookup(V)) {
          if (U->getOpType() == "Cast" || !Seen.insert(U).second)
            continue;
          bool AllWide = true;
          for (const Value *O : U->getOutputs())
            if (O && isRecipeFloat(O->Type.Elem) &&
                O->Type.Elem != DataType::Float)
              AllWide = false;
          if (!AllWide)
            continue;
          RegionNodes.push_back(U);
          HasMatrix |= isMatrixOp(*U);
          for (const Value *O : U->getOutputs())
            if (O && O->Type.Elem == DataType::Float) {
              Region.push_back(O);
              Work.push_back(O);
            }
        }
      }
      if (!HasMatrix)
        continue;
      Nodes += RegionNodes.size();
      Island.insert(Region.begin(), Region.end());
      // fp32 parameters only the island reads stay fp32 with it.
      DenseSet<const Node *> In(RegionNodes.begin(), RegionNodes.end());
      for (const Node *U : RegionNodes)
        for (const Value *P : U->getInputs())
          if (P && P->isParameter() && P->Type.Elem == DataType::Float &&
              all_of(Users.lookup(P),
                     [&](const Node *X) { return In.count(X) > 0; }))
            Island.insert(P);
    }
    (void)To;
  }
};

} // namespace

std::unique_ptr<Pass> createApplyPrecisionPass() {
  return std::make_unique<ApplyPrecisionPass>();
}

} // namespace loom
