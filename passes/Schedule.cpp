//===- Schedule.cpp - Per-rank program of one training or inference step -===//
//
// DESIGN §2 pass 11: orders every role's forward and backward micro-batches
// (1F1B, interleaved with virtual stages), the collectives inside them, the
// pipeline transfers, DP gradient buckets and the optimizer, with predicted
// times (lib/Shard/Schedule.cpp). --mode infer: forward only.
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/Schedule.h"
#include "Passes.h"
#include "loom/Planner/Search.h"
#include "loom/Shard/PricedCollectives.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom {
namespace {

/// --check-priced-collectives: the tp and ep collectives of \p Best's
/// plan as the evaluator prices them, and the dp exchanges of the tables
/// it shards as it priced them (in the layer of their lookup), against
/// the role graphs'.
Error checkPricedCollectives(const ShardedProgram &SP,
                             const PlanEvaluator &Eval, const PlanCost &Best,
                             const ParallelPlan &Plan) {
  std::vector<std::string> Problems =
      comparePricedCollectives(SP, [&](unsigned Layer) {
        std::vector<PricedCollective> R;
        for (const PlanEvaluator::LayerCollective &X :
             Eval.getPricedForwardCollectives(Plan, Layer)) {
          R.push_back(
              {X.Kind, X.Bytes,
               X.V ? X.V->getName().str() : "layer " + std::to_string(Layer),
               X.Group.str()});
          if (X.Shared)
            R.back().Once = X.Group.str() + " " + std::to_string((int)X.Kind) +
                            " " + std::to_string(std::llround(X.Bytes)) + " " +
                            X.Shared->getName().str();
        }
        for (const EmbeddingShard &S : Best.Embeddings.Tables) {
          const EmbeddingTable *T = nullptr;
          for (const EmbeddingTable &X : Eval.getEmbeddingTables())
            if (X.Name == S.Table)
              T = &X;
          if (!T || (unsigned)std::max(0, T->Layer) !=
                        std::min(Layer, Eval.getNumLayers() - 1))
            continue;
          // The group's ids gathered; the rows (row-, table-wise) reduce-
          // scattered or the columns (column-wise) sent back.
          if (S.IdBytes > 0)
            R.push_back({CollectiveKind::AllGather, S.IdBytes, S.Table, "dp"});
          if (S.EmbBytes > 0)
            R.push_back({S.Kind == EmbShardKind::Col
                             ? CollectiveKind::AllToAll
                             : CollectiveKind::ReduceScatter,
                         S.EmbBytes, S.Table, "dp"});
        }
        return R;
      });
  if (Problems.empty())
    return Error::success();
  std::string Msg = "the collectives the cost model priced differ from "
                    "the emitted graphs' (--check-priced-collectives):";
  for (const std::string &P : Problems)
    Msg += "\n  " + P;
  return createStringError(inconvertibleErrorCode(), Msg.c_str());
}

class SchedulePass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    if (!CU.Sharded || CU.Sharded->Roles.empty())
      return createStringError(inconvertibleErrorCode(),
                               "schedule needs insert-collectives before it");
    const PlanCost &Best = CU.Search->Top.front();
    EvaluatorOptions EO = getEvaluatorOptions(CU);
    PlanEvaluator Eval(CU.M->getGraph(), CU.Layers, CU.NodeCosts, *CU.HW, EO);
    ScheduleContext Ctx;
    Ctx.HW = CU.HW;
    // The groups as planned: under context parallelism the propagated axis
    // is cp's and the gradients reduce over dp x cp (Sharding.h).
    const ShardingResult &R = CU.Sharded->Sharding;
    ParallelPlan P = getPlanAsPlanned(R);
    Ctx.TPGroup = Eval.getGroupShape(P, "tp");
    Ctx.CPGroup = Eval.getGroupShape(P, "cp");
    Ctx.EPGroup = Eval.getGroupShape(P, "ep");
    Ctx.DPGroup = Eval.getGroupShape(P, "dp");
    Ctx.PPGroup = Eval.getGroupShape(P, "pp");
    Ctx.Train = EO.Train;
    Ctx.BucketBytes = EO.CommBufferBytes;
    if (CU.Opts.CheckPricedCollectives)
      if (Error E = checkPricedCollectives(*CU.Sharded, Eval, Best, Best.Plan))
        return E;
    return buildSchedule(*CU.Sharded, Best, Ctx);
  }
  void print(const CompilationUnit &CU, raw_ostream &OS) const override {
    if (!CU.Sharded)
      return;
    OS << "schedule: predicted step "
       << format("%.6g", CU.Sharded->ScheduleStepS) << " s\n";
    const ShardedProgram &SP = *CU.Sharded;
    for (size_t R = 0; R < SP.Roles.size() && R < SP.RoleProgram.size(); ++R)
      OS << "role " << SP.Roles[R].FileName << ": program " << SP.RoleProgram[R]
         << "\n";
    for (size_t I = 0; I < SP.Programs.size(); ++I) {
      OS << "program " << I << " (pipeline device " << SP.Programs[I].PP
         << "):";
      for (const ScheduleEvent &E : SP.Programs[I].Events) {
        OS << " " << E.Kind;
        if (E.MicroBatch >= 0)
          OS << "(mb" << E.MicroBatch << ",c" << E.Chunk << ")";
        if (E.Kind == "send" || E.Kind == "recv")
          OS << "[peer " << E.Peer << ",tag " << E.Tag << "]";
        if (E.FusionId >= 0)
          OS << "[bucket " << E.FusionId << "]";
      }
      OS << "\n";
    }
  }
};

} // namespace

std::unique_ptr<Pass> createSchedulePass() {
  return std::make_unique<SchedulePass>();
}

} // namespace loom
