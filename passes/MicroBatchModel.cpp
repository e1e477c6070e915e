//===- MicroBatchModel.cpp - The model bound at a micro-batch size -------===//
//
// The planning graph is bound at the global batch and its shape arithmetic
// folded, so the constants that carry shapes encode that batch. The
// micro-batch graph is a clone of the model as imported
// (CompilationUnit::Imported, never a second import from disk) bound at
// the micro-batch size, the sequence and other dims as planned, put
// through the front-end passes that ran on the planning graph. shard
// emits it; search-parallelism sizes activations with it
// (PlanEvaluator::setMicroBatchShapes).
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "loom/ONNX/ONNX.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom {
namespace {

/// The passes that rewrite the graph before planning; the micro-batch
/// graph replays those of them that ran on the planning graph, in order.
/// apply-precision only for planning (\p Planning): the evaluator sizes
/// activations in the recipe's types, as on the planning graph, while the
/// emitted graphs keep the model's own types (ApplyPrecision.cpp).
bool isFrontEndPass(StringRef Name, bool Planning) {
  if (Name == "apply-precision")
    return Planning;
  return Name == "bind-symbols" || Name == "infer-shapes" ||
         Name == "fold-shape-arith" || Name == "lower-embedding-bags" ||
         Name == "canonicalize" || Name == "pad-vocab" ||
         Name == "detect-layers";
}

/// The message of an error of the replayed passes without the "MODEL:
/// error: " the pass manager put in front (the outer one names the model).
std::string stripModelFile(const Model &M, Error E) {
  std::string Msg = toString(std::move(E));
  std::string Prefix = M.SourcePath + ": error: ";
  if (!M.SourcePath.empty() && StringRef(Msg).startswith(Prefix))
    Msg.erase(0, Prefix.size());
  return Msg;
}

} // namespace

Expected<MicroBatchModel> buildMicroBatchModel(const CompilationUnit &CU,
                                               unsigned MB,
                                               bool PlanExpectedCounts) {
  if (!CU.Imported)
    return createStringError(inconvertibleErrorCode(),
                             "the micro-batch graph needs the model as "
                             "imported (run it through a PassManager)");
  MicroBatchModel R;
  std::unique_ptr<Model> Clone = cloneModel(*CU.Imported);
  R.BatchSymbol = findBatchSymbol(Clone->getGraph());
  CompilationUnit Sub;
  Sub.M = std::move(Clone);
  Sub.HW = CU.HW;
  Sub.Opts = CU.Opts;
  // pad-vocab's replay pads for the tp the planning graph was padded for.
  Sub.VocabPad = CU.VocabPad;
  Sub.Opts.OutputDir.clear();
  Sub.Opts.PlanExpectedCounts = PlanExpectedCounts;
  if (!R.BatchSymbol.empty()) {
    // The batch symbol takes the micro-batch size however the user bound
    // it (--batch, or --dim of its name, as scripts for exporters whose
    // batch symbol is not called "batch" do).
    Sub.Opts.Batch = (int64_t)MB;
    llvm::erase_if(Sub.Opts.Dims,
                   [&](const auto &KV) { return KV.first == R.BatchSymbol; });
  }
  PassManager PM(getRegisteredPasses());
  for (const std::string &Name : CU.PassesRun)
    if (isFrontEndPass(Name, PlanExpectedCounts))
      PM.addPass(*PM.lookupPass(Name));
  PassInstrumentation PI;
  std::string Ignored;
  raw_string_ostream Null(Ignored);
  if (Error E = PM.run(Sub, PI, Null, Null))
    return createStringError(inconvertibleErrorCode(),
                             "at micro-batch size %u: %s", MB,
                             stripModelFile(*Sub.M, std::move(E)).c_str());
  if (Sub.Layers.size() != CU.Layers.size())
    return createStringError(
        inconvertibleErrorCode(),
        "at micro-batch size %u the model has %zu layers, at the planned "
        "batch %zu: layer detection depends on the batch",
        MB, Sub.Layers.size(), CU.Layers.size());
  R.M = std::move(Sub.M);
  R.Layers = std::move(Sub.Layers);
  return R;
}

} // namespace loom
