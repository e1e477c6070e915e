//===- Print.cpp - Dumps of the sharded program for FileCheck -------------===//
#include "loom/Shard/Sharding.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom {

void printShardingResult(const ShardingResult &R, raw_ostream &OS) {
  OS << "sharding " << getPlanAsPlanned(R).str() << "\n";
  OS << "chunks " << R.NumChunks << ":";
  for (unsigned C : R.ChunkLayers)
    OS << " " << C;
  OS << " layers\n";
  const Graph &G = R.M->getGraph();
  for (const Value *P : G.getParameters()) {
    auto It = R.Params.find(P);
    if (It == R.Params.end() || It->second.Dim < 0)
      continue;
    AxisSpec S = AxisSpec::split(It->second.Dim);
    S.Blocks = It->second.Blocks;
    OS << "param " << P->getName() << " " << P->Type.str() << " " << S.str()
       << "\n";
  }
  for (const KVCacheShard &C : R.KVCache) {
    OS << "kv-cache " << (C.IsPast ? "past" : "present") << " '" << C.Name
       << "' layer=" << C.Layer << " " << (C.IsKey ? "key" : "value")
       << " seq-axis=" << C.SeqAxis << " pair='" << C.Pair << "' "
       << C.V->Type.str() << " " << C.Spec.str();
    if (!C.Reason.empty())
      OS << " (replicated: " << C.Reason << ")";
    OS << "\n";
  }
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    auto It = R.Nodes.find(&N);
    if (It == R.Nodes.end())
      continue;
    const NodeSharding &NS = It->second;
    OS << "node '" << N.getName() << "' " << N.getQualifiedOpType()
       << " chunk=" << NS.Chunk;
    if (NS.Expert >= 0)
      OS << " expert=" << NS.Expert;
    if (NS.ExpertCombine)
      OS << " expert-combine";
    OS << " in(";
    for (unsigned I = 0; I < NS.InputSpecs.size(); ++I)
      OS << (I ? "," : "") << (N.getInput(I) ? NS.InputSpecs[I].str() : "-");
    OS << ") out(";
    for (unsigned I = 0; I < NS.OutputSpecs.size(); ++I)
      OS << (I ? "," : "") << NS.OutputSpecs[I].str();
    OS << ")";
    switch (NS.Lower) {
    case NodeSharding::Lowering::VocabParallelGather:
      OS << " vocab-parallel";
      break;
    case NodeSharding::Lowering::BiasAfterReduce:
      OS << " bias-after-reduce";
      break;
    case NodeSharding::Lowering::GlobalShape:
      OS << " global-shape";
      break;
    case NodeSharding::Lowering::VocabParallelCrossEntropy:
      OS << " vocab-parallel-ce";
      break;
    case NodeSharding::Lowering::MeanOfShards:
      OS << " mean-of-shards";
      break;
    case NodeSharding::Lowering::MeanOverCount:
      OS << " mean-over-count";
      break;
    case NodeSharding::Lowering::None:
      break;
    }
    OS << "\n";
  }
}

void printRoleGraphs(const ShardedProgram &SP, raw_ostream &OS) {
  // The index on the mesh's inner axis as tp and cp (splitInnerIndex):
  // under cp alone, cp only.
  const ShardingResult &Sh = SP.Sharding;
  for (const RoleGraph &R : SP.Roles) {
    auto TC = splitInnerIndex(Sh, R.TP);
    OS << "role " << R.FileName << " pp=" << R.PP;
    if (getTPSize(Sh) > 1 || getCPSize(Sh) == 1)
      OS << " tp=" << TC.first;
    if (getCPSize(Sh) > 1)
      OS << " cp=" << TC.second;
    OS << " ep=" << R.EP << "\n";
    printModel(*R.M, OS);
  }
}

} // namespace loom
