//===- ExportTest.cpp - Launch arguments of a plan (lib/Report/Export) ----===//
#include "loom/Report/Export.h"
#include "llvm/Support/JSON.h"
#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

using K = LayerInfo::Kind;

/// A GPT-like model: embedding, \p Blocks transformer blocks, head; fp16.
ExportInput makeInput(unsigned Blocks, ParallelPlan P,
                      std::vector<unsigned> StageLayers = {}) {
  ExportInput In;
  In.ModelName = "m.onnx";
  In.HardwareName = "hw";
  In.ClusterDevices = P.getNumDevices();
  In.LayerKinds.push_back(K::Prologue);
  In.LayerKinds.insert(In.LayerKinds.end(), Blocks, K::Block);
  In.LayerKinds.push_back(K::Epilogue);
  In.ParamType = DataType::Float16;
  In.Seq = 2048;
  In.GlobalBatch = (int64_t)P.DP * P.MicroBatchSize * P.NumMicroBatches;
  In.Cost.Plan = P;
  unsigned First = 0;
  for (unsigned N : StageLayers) {
    StageCost S;
    S.FirstLayer = First;
    S.NumLayers = N;
    First += N;
    In.Cost.Stages.push_back(S);
  }
  return In;
}

/// The flag line: the last line of the text.
std::string flags(const ExportResult &R) {
  StringRef T = StringRef(R.Text).rtrim('\n');
  return T.rsplit('\n').second.str();
}

TEST(ExportTest, ParseTargets) {
  auto T = parseExportTargets({"megatron,DeepSpeed", "megatron", "mindspeed"});
  ASSERT_TRUE((bool)T);
  EXPECT_EQ((std::vector<ExportTarget>{ExportTarget::Megatron,
                                       ExportTarget::DeepSpeed,
                                       ExportTarget::MindSpeed}),
            *T);
  auto Bad = parseExportTargets({"megatron,jax"});
  ASSERT_FALSE((bool)Bad);
  EXPECT_EQ("--export: unknown framework 'jax' (known: megatron, mindspeed, "
            "deepspeed)",
            toString(Bad.takeError()));
}

TEST(ExportTest, ChunkLayoutsFollowStagesOrTheEvenChunkSplit) {
  ParallelPlan P;
  P.PP = 2;
  // 12 layers (E + 10 blocks + L) in stages 7:5 -> E t*6 | t*4 L.
  ExportInput In = makeInput(10, P, {7, 5});
  EXPECT_EQ((std::vector<std::string>{"Etttttt", "ttttL"}),
            getChunkLayouts(In));
  // vpp 2 (loom/Plan/StageSplit.h): the stages keep 7:5, each stage's
  // blocks split over its 2 chunks (chunk c on stage c % 2): stage 0's 6
  // blocks 3 + 3 after E, stage 1's 4 blocks 2 + 2 before L:
  // E t t t | t t | t t t | t t L. (It was 12 / 4 = 3 layers per chunk,
  // E t t | t t t | t t t | t t L: stages 6:6, not the 7:5 costed.)
  In.Cost.Plan.VirtualStages = 2;
  EXPECT_EQ((std::vector<std::string>{"Ettt", "tt", "ttt", "ttL"}),
            getChunkLayouts(In));
}

TEST(ExportTest, MegatronEvenSplitNeedsNoLayout) {
  ParallelPlan P;
  P.TP = 8;
  P.PP = 4;
  P.DP = 2;
  P.MicroBatchSize = 1;
  P.NumMicroBatches = 64;
  P.VirtualStages = 1;
  // 24 blocks over pp 4: E t*6 | t*6 | t*6 | t*6 L = Megatron's default.
  ExportInput In = makeInput(24, P, {7, 6, 6, 7});
  ExportResult R = exportLaunchArgs(ExportTarget::Megatron, In);
  EXPECT_TRUE(R.Warnings.empty());
  // Global batch 2 x 1 x 64 = 128.
  EXPECT_EQ("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
            "--micro-batch-size 1 --global-batch-size 128 --num-layers 24 "
            "--seq-length 2048 --fp16 --accumulate-allreduce-grads-in-fp32 "
            // dp_overlap=on, the default: the DP sync beside the backward.
            "--overlap-grad-reduce",
            flags(R));
  EXPECT_EQ("megatron-args.txt", R.FileName);
}

TEST(ExportTest, InterleavedChunks) {
  ParallelPlan P;
  P.PP = 2;
  P.DP = 4;
  P.NumMicroBatches = 8;
  P.VirtualStages = 3;
  // 16 blocks + E + L = 18 layers, stages E + 8 blocks | 8 blocks + L
  // (loom/Plan/StageSplit.h), each stage's 8 blocks over its 3 chunks 2, 3,
  // 3 (the extra ones on its later chunks; chunk c on stage c % 2):
  // E t t | t t | t t t | t t t | t t t | t t t L. Not 16 / 6 -> the
  // layout, in the "(S|)*n," shorthand for the run of 4 equal chunks.
  ExportInput In = makeInput(16, P);
  ExportResult R = exportLaunchArgs(ExportTarget::Megatron, In);
  EXPECT_NE(std::string::npos, flags(R).find("--pipeline-model-parallel-layout "
                                             "\"Et*2|t*2|(t*3|)*3,t*3L\""));
  // 24 blocks over 6 chunks: 4 each, E on the first and L on the last,
  // MindSpeed's even split (it was a warning while Loom's chunks counted
  // the embedding and the head as layers): no warning, 4 per chunk.
  In = makeInput(24, P);
  R = exportLaunchArgs(ExportTarget::MindSpeed, In);
  EXPECT_NE(std::string::npos,
            flags(R).find("--num-layers-per-virtual-pipeline-stage 4"));
  EXPECT_TRUE(R.Warnings.empty());
}

TEST(ExportTest, MegatronFlagsOfEveryChoice) {
  ParallelPlan P;
  P.TP = 4;
  P.PP = 1;
  P.DP = 4;
  P.EP = 2;
  P.SP = true;
  P.MicroBatchSize = 2;
  P.NumMicroBatches = 4;
  P.RC = Recompute::Full;
  P.ZeroStage = 1;
  P.Grad = GradPrecision::BF16;
  ExportInput In = makeInput(4, P, {6});
  In.NumExperts = 8;
  In.ParamType = DataType::BFloat16;
  ExportResult R = exportLaunchArgs(ExportTarget::Megatron, In);
  EXPECT_TRUE(R.Warnings.empty());
  // Global batch 4 x 2 x 4 = 32.
  EXPECT_EQ("--tensor-model-parallel-size 4 --pipeline-model-parallel-size 1 "
            "--expert-model-parallel-size 2 --num-experts 8 "
            "--sequence-parallel --recompute-granularity full "
            "--recompute-method uniform --recompute-num-layers 1 "
            "--micro-batch-size 2 --global-batch-size 32 "
            "--use-distributed-optimizer --num-layers 4 --seq-length 2048 "
            "--bf16 --grad-reduce-in-bf16 "
            "--overlap-grad-reduce --overlap-param-gather",
            flags(R));
  // Unrolled experts (every expert sees every token) are not Megatron's
  // routed MoE: a warning, in the file too.
  In.StackedExperts = false;
  R = exportLaunchArgs(ExportTarget::Megatron, In);
  ASSERT_EQ(1u, R.Warnings.size());
  EXPECT_NE(std::string::npos, R.Warnings[0].find("unrolled"));
  EXPECT_NE(std::string::npos, R.Text.find("# warning: megatron: ep=2"));
}

TEST(ExportTest, DeepSpeedJSON) {
  ParallelPlan P;
  P.TP = 2;
  P.PP = 1;
  P.DP = 8;
  P.MicroBatchSize = 4;
  P.NumMicroBatches = 2;
  // ZeRO-2: DeepSpeed asserts AutoTP with stage <= 2.
  P.ZeroStage = 2;
  ExportInput In = makeInput(4, P, {6});
  In.ParamType = DataType::BFloat16;
  ExportResult R = exportLaunchArgs(ExportTarget::DeepSpeed, In);
  // The one warning: train_batch_size counts the AutoTP ranks.
  ASSERT_EQ(1u, R.Warnings.size());
  EXPECT_NE(std::string::npos, R.Warnings[0].find("counts the 2 AutoTP ranks"));
  Expected<json::Value> V = json::parse(R.Text);
  ASSERT_TRUE((bool)V) << toString(V.takeError());
  const json::Object &O = *V->getAsObject();
  // DeepSpeed's batch check without a model-parallel unit counts every
  // rank: 4 (micro-batch) x 2 (accumulation) x 16 (8 dp x 2 tp) = 128; a
  // step trains 8 x 4 x 2 = 64 samples (the tp ranks read the same ones).
  EXPECT_EQ(128, *O.getInteger("train_batch_size"));
  EXPECT_EQ(4, *O.getInteger("train_micro_batch_size_per_gpu"));
  EXPECT_EQ(2, *O.getInteger("gradient_accumulation_steps"));
  EXPECT_EQ(true, *O.getObject("bf16")->getBoolean("enabled"));
  EXPECT_EQ(nullptr, O.get("fp16"));
  EXPECT_EQ(2, *O.getObject("zero_optimization")->getInteger("stage"));
  EXPECT_EQ(true,
            *O.getObject("zero_optimization")->getBoolean("overlap_comm"));
  EXPECT_EQ("fp32", *O.getString("communication_data_type"));
  EXPECT_EQ(2, *O.getObject("tensor_parallel")->getInteger("autotp_size"));
  EXPECT_EQ(nullptr, O.get("pipeline"));
}

} // namespace
