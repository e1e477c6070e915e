//===- Shard.cpp - Per-value sharding specs for the chosen plan -----------===//
//
// DESIGN §2 pass 9. The planning graph is bound at the global batch and its
// shape arithmetic folded, so the constants that carry shapes encode that
// batch; the graphs a runtime executes hold one micro-batch. The pass
// therefore clones the model as imported (CompilationUnit::Imported, kept
// by the pass manager; never a second import from disk), binds the clone at
// the micro-batch size (the sequence and other dims as planned), replays
// the front-end passes that ran on the planning graph (infer and fold
// shapes, detect layers -- the layer count must match the plan's), and
// then propagates sharding specs (lib/Shard/Propagation.cpp).
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "loom/IR/SequenceSymbols.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Plan/BatchSplit.h"
#include "loom/Plan/CPEmission.h"
#include "loom/Planner/Search.h"
#include "loom/Shard/Sharding.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom {
namespace {

int findAxis(const TensorType &Orig, StringRef Sym, const TensorType &Global,
             const TensorType &Local) {
  if (!Sym.empty())
    for (unsigned I = 0; I < Orig.Dims.size(); ++I)
      if (Orig.Dims[I].Symbol == Sym)
        return I;
  if (Global.getRank() == Local.getRank())
    for (unsigned I = 0; I < Global.Dims.size(); ++I)
      if (Global.Dims[I] != Local.Dims[I])
        return I;
  return -1;
}

std::string getSequenceSymbolList() {
  std::string S;
  for (StringRef N : getSequenceSymbols())
    S += (S.empty() ? "" : ", ") + N.str();
  return S;
}
/// The axis of \p Orig (an input as imported) named by a sequence symbol,
/// or -1.
int findSequenceAxis(const TensorType &Orig) {
  for (unsigned I = 0; I < Orig.Dims.size(); ++I)
    if (is_contained(getSequenceSymbols(), StringRef(Orig.Dims[I].Symbol)))
      return I;
  return -1;
}

/// Carries assign-device-classes' placement over to the micro-batch graph:
/// nodes match by their first result's name (node names may be empty).
void copyDeviceClasses(const Graph &From, Graph &To) {
  StringMap<StringRef> ClassOf;
  for (const auto &N : From.getNodes())
    if (!N->DeviceClass.empty() && N->getNumOutputs() && N->getOutput(0))
      ClassOf[N->getOutput(0)->getName()] = N->DeviceClass;
  for (const auto &N : To.getNodes())
    if (N->getNumOutputs() && N->getOutput(0)) {
      auto It = ClassOf.find(N->getOutput(0)->getName());
      if (It != ClassOf.end())
        N->DeviceClass = It->second.str();
    }
}

/// ShardingResult::ExpectedShapes: where the micro-batch graph keeps dims
/// that depend on the data (NonZero's counts), their sizes in the same
/// graph at the expected counts, the one the evaluator prices
/// (buildMicroBatchModel's PlanExpectedCounts). Only the schedule's bytes
/// read them: a graph that cannot be built leaves those at 0, with a
/// warning.
void recordExpectedShapes(CompilationUnit &CU, ShardingResult &R) {
  std::vector<const Value *> Dynamic;
  for (const auto &N : R.M->getGraph().getNodes())
    for (const Value *V : N->getOutputs())
      if (V && V->Type.HasShape && !V->Type.isStatic())
        Dynamic.push_back(V);
  if (Dynamic.empty())
    return;
  Expected<MicroBatchModel> Planned =
      buildMicroBatchModel(CU, R.Plan.MicroBatchSize,
                           /*PlanExpectedCounts=*/true);
  if (!Planned) {
    CU.warn("shard: the collectives over data-dependent dims are timed at "
            "0 bytes: " +
            toString(Planned.takeError()));
    return;
  }
  StringMap<const Value *> ByName;
  for (const auto &N : Planned->M->getGraph().getNodes())
    for (const Value *V : N->getOutputs())
      if (V && V->Type.isStatic())
        ByName[V->getName()] = V;
  for (const Value *V : Dynamic) {
    const Value *P = ByName.lookup(V->getName());
    if (P && P->Type.getRank() == V->Type.getRank()) {
      SmallVector<int64_t, 4> S = P->Type.getStaticShape();
      R.ExpectedShapes[V->getName().str()].assign(S.begin(), S.end());
    }
  }
}

class ShardPass : public Pass {
public:
  bool needsImportedModel() const override { return true; }
  Error run(CompilationUnit &CU) override {
    if (!CU.Search || CU.Search->Top.empty())
      return createStringError(inconvertibleErrorCode(),
                               "shard needs a plan: run search-parallelism "
                               "before it");
    const PlanCost &Best = CU.Search->Top.front();
    // Context parallelism is emitted on the propagated axis alone (tp = 1:
    // all-to-all over heads or the K/V ring, lib/Shard/RingAttention.cpp)
    // and beside tp, one axis after the other (ComposeContextParallel.cpp);
    // what the graphs do not carry is costed only (loom/Plan/CPEmission.h).
    if (CPEmitGap Gap =
            getCPEmitGap(Best.Plan, !Best.Embeddings.Tables.empty())) {
      const ParallelPlan &P = Best.Plan;
      std::string Ulysses = P.CPA == CPAlgo::Hybrid
                                ? ", cp_ulysses=" + std::to_string(P.CPUlysses)
                                : "";
      std::string Beside =
          P.CPA == CPAlgo::Hybrid ? "" : " beside tp=" + std::to_string(P.TP);
      return createStringError(
          inconvertibleErrorCode(),
          "plan %s: cp=%u (context parallelism, cp_algo=%s%s)%s is costed "
          "but its graphs cannot be emitted: %s",
          P.str().c_str(), P.CP, getCPAlgoName(P.CPA).str().c_str(),
          Ulysses.c_str(), Beside.c_str(), Gap.Why);
    }
    // Sharded embedding tables (lib/Planner/Embedding.cpp): table-, row-
    // and column-wise shards are written at ep=1 (RoleGraphs.cpp);
    // the evaluator does not fit other plans (Embedding.h), so a plan
    // refused here was fixed by hand.
    for (const EmbeddingShard &S : Best.Embeddings.Tables) {
      const char *Why = S.ShardBytes <= 0 ? "it fits nowhere"
                        : Best.Plan.EP > 1
                            ? "sharded tables are emitted at ep=1 only"
                        : S.Kind == EmbShardKind::Col && S.Dim % Best.Plan.DP
                            ? "column-wise emission needs dp to divide the dim"
                            : nullptr;
      if (Why)
        return createStringError(
            inconvertibleErrorCode(),
            "embedding table '%s' (%s-wise over dp=%u): %s (issue 17 item 2)",
            S.Table.c_str(), getEmbShardKindName(S.Kind).str().c_str(),
            Best.Plan.DP, Why);
    }
    auto Prog = std::make_shared<ShardedProgram>();
    ShardingResult &R = Prog->Sharding;
    R.Plan = Best.Plan;
    if (R.Plan.CP > 1 && R.Plan.TP > 1) {
      // One axis here, the other at insert-collectives (Sharding.h,
      // ShardingResult::OuterCP): with sp, cp first.
      R.OuterCP = R.Plan.CP;
      R.InnerTP = R.Plan.TP;
      R.InnerSP = R.Plan.SP;
      if (R.Plan.SP) {
        R.CPAxis = true;
        R.CPRing = R.Plan.CPA == CPAlgo::Ring;
        R.Plan.TP = R.Plan.CP;
        R.Plan.SP = false;
      }
      R.Plan.CP = 1;
    } else if (R.Plan.CP > 1) {
      // The one propagated axis is cp's (Sharding.h, ShardingResult).
      R.CPAxis = true;
      R.CPRing = R.Plan.CPA == CPAlgo::Ring;
      R.Plan.TP = R.Plan.CP;
      R.Plan.CP = 1;
    }
    if (CU.Opts.Precision)
      R.CommFloatType = CU.Opts.Precision->Storage;
    R.Plan.StageLayers.clear();
    for (const StageCost &S : Best.Stages)
      R.Plan.StageLayers.push_back(S.NumLayers);

    // The model as imported, at micro-batch shapes: a clone of the graph
    // before bind-symbols (folded shape constants encode the batch), put
    // through the front-end passes that ran on the planning graph
    // (MicroBatchModel.cpp). The graphs a runtime executes keep
    // data-dependent dims dynamic.
    if (!CU.Imported)
      return createStringError(inconvertibleErrorCode(),
                               "shard needs the model as imported (run it "
                               "through a PassManager)");
    std::string BatchSym = findBatchSymbol(CU.Imported->getGraph());
    // The rule the search reads too (SearchOptions::StaticBatch).
    if (Error E = checkBatchSplit(!BatchSym.empty(), R.Plan.DP,
                                  R.Plan.NumMicroBatches))
      return E;
    // Shapes as planned, element types as the model has them
    // (apply-precision retypes the planning graph, not the I/O).
    auto AsImported = [&](const Value *V, ArrayRef<Value *> Orig) {
      TensorType T = V->Type;
      for (const Value *O : Orig)
        if (O->getName() == V->getName())
          T.Elem = O->Type.Elem;
      return T;
    };
    const Graph &IG = CU.Imported->getGraph();
    Expected<MicroBatchModel> Sub =
        buildMicroBatchModel(CU, R.Plan.MicroBatchSize,
                             /*PlanExpectedCounts=*/false);
    if (!Sub)
      return Sub.takeError();
    std::map<std::string, TensorType> OrigIn, OrigOut;
    for (const Value *V : CU.Imported->getGraph().getInputs())
      OrigIn[V->getName().str()] = V->Type;
    for (const Value *V : CU.Imported->getGraph().getOutputs())
      OrigOut[V->getName().str()] = V->Type;
    copyDeviceClasses(CU.M->getGraph(), Sub->M->getGraph());
    R.M = std::move(Sub->M);
    R.Layers = std::move(Sub->Layers);
    // The ring is lowered from an attention's own ops, and Ulysses moves
    // K/V heads that do not divide repeated: ONNX's Attention op is written
    // as its ops there (the cost model keeps the fused op).
    if (Best.Plan.CP > 1)
      expandAttentionOps(R.M->getGraph(),
                         Best.Plan.CPA == CPAlgo::Ring
                             ? 0
                             : Best.Plan.TP * Best.Plan.getCPUlyssesSize(),
                         R.Notes);
    recordExpectedShapes(CU, R);
    for (const Value *V : CU.M->getGraph().getInputs())
      R.GlobalInputTypes[V->getName().str()] = AsImported(V, IG.getInputs());
    for (const Value *V : CU.M->getGraph().getOutputs())
      R.GlobalOutputTypes[V->getName().str()] = AsImported(V, IG.getOutputs());
    for (const Value *V : R.M->getGraph().getInputs()) {
      std::string N = V->getName().str();
      R.InputBatchAxis[N] =
          findAxis(OrigIn[N], BatchSym, R.GlobalInputTypes[N], V->Type);
    }
    for (const Value *V : R.M->getGraph().getOutputs()) {
      std::string N = V->getName().str();
      R.OutputBatchAxis[N] =
          findAxis(OrigOut[N], BatchSym, R.GlobalOutputTypes[N], V->Type);
    }
    if (getCPSize(R) > 1) {
      bool Any = false;
      for (const Value *V : R.M->getGraph().getInputs()) {
        int A = findSequenceAxis(OrigIn[V->getName().str()]);
        R.InputSeqAxis[V->getName().str()] = A;
        Any |= A >= 0;
      }
      if (!Any)
        return createStringError(
            inconvertibleErrorCode(),
            "plan %s: cp=%u splits the sequence, and no model input has a "
            "sequence dim (one of the symbols %s)",
            Best.Plan.str().c_str(), getCPSize(R),
            getSequenceSymbolList().c_str());
    }
    // Before propagation: it keeps dp-sharded tables' lookups whole on
    // every tp rank.
    R.EmbShards = Best.Embeddings.Tables;
    if (Error E = propagateSharding(R))
      return E;
    shardKVCache(R);
    if (R.OuterCP > 1 && !R.KVCache.empty())
      return createStringError(inconvertibleErrorCode(),
                               "plan %s: cp beside tp is emitted for graphs "
                               "without a KV cache",
                               Best.Plan.str().c_str());
    for (const std::string &N : R.Notes)
      CU.warn(N);
    CU.Sharded = std::move(Prog);
    return Error::success();
  }
  void print(const CompilationUnit &CU, raw_ostream &OS) const override {
    if (CU.Sharded)
      printShardingResult(CU.Sharded->Sharding, OS);
  }
};

} // namespace

std::unique_ptr<Pass> createShardPass() {
  return std::make_unique<ShardPass>();
}

} // namespace loom
