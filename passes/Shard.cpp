//===- Shard.cpp - Per-value sharding specs for the chosen plan -----------===//
//
// DESIGN §2 pass 9. The planning graph is bound at the global batch and its
// shape arithmetic folded, so the constants that carry shapes encode that
// batch; the graphs a runtime executes hold one micro-batch. The pass
// therefore re-imports the model, binds it at the micro-batch size (the
// sequence and other dims as planned), infers and folds shapes and detects
// layers again -- the layer count must match the plan's -- and then
// propagates sharding specs (lib/Shard/Propagation.cpp).
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Plan/Search.h"
#include "loom/Shard/Sharding.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom {
namespace {

/// The symbol bind-symbols binds for --batch (same rules): "batch" or
/// "batch_size", else the dim-0 symbol of the first input whose dim 0 is
/// dynamic.
std::string findBatchSymbol(const Graph &G) {
  for (const Value *V : G.getInputs())
    for (const Dim &D : V->Type.Dims)
      if (D.isSymbolic() && (D.Symbol == "batch" || D.Symbol == "batch_size"))
        return D.Symbol;
  for (const Value *V : G.getInputs())
    if (V->Type.HasShape && V->Type.getRank() > 0 &&
        V->Type.Dims[0].isSymbolic())
      return V->Type.Dims[0].Symbol;
  return "";
}

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

class ShardPass : public Pass {
public:
  StringRef getArgument() const override { return "shard"; }
  StringRef getDescription() const override {
    return "Re-bind the model at micro-batch shapes and propagate sharding "
           "specs for the chosen plan";
  }
  Error run(CompilationUnit &CU) override {
    if (!CU.Search || CU.Search->Top.empty())
      return createStringError(inconvertibleErrorCode(),
                               "shard needs a plan: run search-parallelism "
                               "before it");
    const PlanCost &Best = CU.Search->Top.front();
    auto Prog = std::make_shared<ShardedProgram>();
    ShardingResult &R = Prog->Sharding;
    R.Plan = Best.Plan;
    R.Plan.StageLayers.clear();
    for (const StageCost &S : Best.Stages)
      R.Plan.StageLayers.push_back(S.NumLayers);

    // The model again, at micro-batch shapes.
    StringRef Path = CU.M->SourcePath;
    Expected<std::unique_ptr<Model>> M = importModelFile(Path);
    if (!M)
      return M.takeError();
    std::string BatchSym = findBatchSymbol((*M)->getGraph());
    std::map<std::string, TensorType> OrigIn, OrigOut;
    for (const Value *V : (*M)->getGraph().getInputs())
      OrigIn[V->getName().str()] = V->Type;
    for (const Value *V : (*M)->getGraph().getOutputs())
      OrigOut[V->getName().str()] = V->Type;

    CompilationUnit Sub;
    Sub.M = std::move(*M);
    Sub.HW = CU.HW;
    Sub.Opts = CU.Opts;
    Sub.Opts.OutputDir.clear();
    // The graphs a runtime executes keep data-dependent dims dynamic.
    Sub.Opts.PlanExpectedCounts = false;
    if (BatchSym.empty()) {
      if (R.Plan.DP * R.Plan.NumMicroBatches != 1)
        return createStringError(
            inconvertibleErrorCode(),
            "the model's batch dim is static; graphs for dp=%u x nmb=%u "
            "micro-batches need a symbolic batch dim",
            R.Plan.DP, R.Plan.NumMicroBatches);
    } else {
      Sub.Opts.Batch = (int64_t)R.Plan.MicroBatchSize;
    }
    PassManager PM(getRegisteredPasses());
    for (const char *Name :
         {"bind-symbols", "infer-shapes", "fold-shape-arith", "detect-layers"})
      PM.addPass(PM.lookupPass(Name)->Create());
    PassInstrumentation PI;
    std::string Ignored;
    raw_string_ostream Null(Ignored);
    if (Error E = PM.run(Sub, PI, Null, Null))
      return createStringError(inconvertibleErrorCode(),
                               "at micro-batch size %u: %s",
                               R.Plan.MicroBatchSize,
                               toString(std::move(E)).c_str());
    if (Sub.Layers.size() != CU.Layers.size())
      return createStringError(
          inconvertibleErrorCode(),
          "at micro-batch size %u the model has %zu layers, at the planned "
          "batch %zu: layer detection depends on the batch",
          R.Plan.MicroBatchSize, Sub.Layers.size(), CU.Layers.size());
    R.M = std::move(Sub.M);
    R.Layers = std::move(Sub.Layers);
    for (const Value *V : CU.M->getGraph().getInputs())
      R.GlobalInputTypes[V->getName().str()] = V->Type;
    for (const Value *V : CU.M->getGraph().getOutputs())
      R.GlobalOutputTypes[V->getName().str()] = V->Type;
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
    if (Error E = propagateSharding(R))
      return E;
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

std::unique_ptr<Pass> createShardPass() { return std::make_unique<ShardPass>(); }

} // namespace loom
