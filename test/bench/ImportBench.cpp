//===- ImportBench.cpp - Front of the pipeline and annotate-costs ---------===//
//
// Measures the front of the pipeline on an exporter graph:
//   loom-bench MODEL.onnx [--hw HW.yaml] [--batch B] [--seq S] [flags]
// and reports peak RSS, which must not grow with the external-data weight
// size (weights are referenced, never read). test/bench/import-bench.sh
// generates the models and runs this.
//
//===----------------------------------------------------------------------===//
#include "loom/Hardware/HardwareModel.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"
#include <benchmark/benchmark.h>
#include <cstring>
#include <sys/resource.h>

using namespace loom;

static std::string ModelPath, HWPath;
static int64_t BatchSize = 2, SeqLen = 64;

static double peakRSSMiB() {
  struct rusage RU;
  getrusage(RUSAGE_SELF, &RU);
  return RU.ru_maxrss / 1024.0;
}

static std::unique_ptr<Model> importOrDie() {
  auto M = importModelFile(ModelPath);
  if (!M) {
    llvm::errs() << llvm::toString(M.takeError()) << '\n';
    std::exit(1);
  }
  return std::move(*M);
}

static void BM_Import(benchmark::State &S) {
  unsigned Nodes = 0;
  for (auto _ : S) {
    auto M = importOrDie();
    Nodes = M->getGraph().getNumNodes();
    benchmark::DoNotOptimize(M);
  }
  S.counters["nodes"] = Nodes;
  S.counters["peak_rss_MiB"] = peakRSSMiB();
}

static void BM_ImportInferFold(benchmark::State &S) {
  unsigned Before = 0, After = 0;
  for (auto _ : S) {
    CompilationUnit CU;
    CU.M = importOrDie();
    CU.Opts.Batch = BatchSize;
    CU.Opts.Seq = SeqLen;
    Before = CU.M->getGraph().getNumNodes();
    PassManager PM(getRegisteredPasses());
    if (llvm::Error E =
            PM.parsePipeline("bind-symbols,infer-shapes,fold-shape-arith")) {
      llvm::errs() << llvm::toString(std::move(E)) << '\n';
      std::exit(1);
    }
    std::string Sink;
    llvm::raw_string_ostream OS(Sink);
    if (llvm::Error E = PM.run(CU, PassInstrumentation(), OS, OS)) {
      llvm::errs() << llvm::toString(std::move(E)) << '\n';
      std::exit(1);
    }
    After = CU.M->getGraph().getNumNodes();
  }
  S.counters["nodes_in"] = Before;
  S.counters["nodes_out"] = After;
  S.counters["peak_rss_MiB"] = peakRSSMiB();
}

/// annotate-costs alone, on the folded graph (needs --hw).
static void BM_AnnotateCosts(benchmark::State &S) {
  if (HWPath.empty()) {
    S.SkipWithError("no --hw given");
    return;
  }
  auto HW = loadHardwareModel(HWPath);
  if (!HW) {
    llvm::errs() << llvm::toString(HW.takeError()) << '\n';
    std::exit(1);
  }
  CompilationUnit CU;
  CU.M = importOrDie();
  CU.HW = &*HW;
  CU.Opts.Batch = BatchSize;
  CU.Opts.Seq = SeqLen;
  PassManager PM(getRegisteredPasses());
  std::string Sink;
  llvm::raw_string_ostream OS(Sink);
  if (llvm::Error E = PM.parsePipeline(
          "bind-symbols,infer-shapes,fold-shape-arith,detect-layers"))
    std::exit(1);
  if (llvm::Error E = PM.run(CU, PassInstrumentation(), OS, OS)) {
    llvm::errs() << llvm::toString(std::move(E)) << '\n';
    std::exit(1);
  }
  const Graph &G = CU.M->getGraph();
  for (auto _ : S) {
    NodeCostMap Costs = annotateNodeCosts(G, CU.M->getOpsetVersion(""), *HW);
    benchmark::DoNotOptimize(Costs);
  }
  S.counters["nodes"] = G.getNumNodes();
}

BENCHMARK(BM_Import)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AnnotateCosts)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ImportInferFold)->Unit(benchmark::kMillisecond);

int main(int argc, char **argv) {
  // Our own arguments first: MODEL [--batch B] [--seq S].
  std::vector<char *> Rest = {argv[0]};
  for (int I = 1; I < argc; ++I) {
    if (!std::strcmp(argv[I], "--batch") && I + 1 < argc)
      BatchSize = std::atoll(argv[++I]);
    else if (!std::strcmp(argv[I], "--hw") && I + 1 < argc)
      HWPath = argv[++I];
    else if (!std::strcmp(argv[I], "--seq") && I + 1 < argc)
      SeqLen = std::atoll(argv[++I]);
    else if (argv[I][0] != '-' && ModelPath.empty())
      ModelPath = argv[I];
    else
      Rest.push_back(argv[I]);
  }
  if (ModelPath.empty()) {
    llvm::errs()
        << "usage: loom-bench MODEL.onnx [--hw HW.yaml] [--batch B] [--seq S] "
           "[benchmark flags]\n";
    return 1;
  }
  int N = Rest.size();
  benchmark::Initialize(&N, Rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
