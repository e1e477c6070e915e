//===- FrameworkTest.cpp - Tests for framework profiles -------------------===//
//
// The shipped profiles load and say what their sources say; the YAML
// conventions of the hardware files (unknown keys and bad values are errors
// with file:line:col); each rule of checkSpec fires on the choices it reads
// and only when they are fixed.
//
//===----------------------------------------------------------------------===//

#include "loom/Plan/Framework.h"

#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

FrameworkProfile load(StringRef Name) {
  Expected<FrameworkProfile> F = loadFrameworkProfile(Name);
  if (!F) {
    ADD_FAILURE() << toString(F.takeError());
    return FrameworkProfile();
  }
  return *F;
}

PlanSpec spec(StringRef Text) { return cantFail(parsePlanSpec(Text)); }

std::string why(const FrameworkProfile &F, StringRef Plan, unsigned Blocks = 0,
                int64_t KVHeads = 0) {
  Error E = checkSpec(F, spec(Plan), {Blocks, KVHeads});
  return E ? toString(std::move(E)) : "";
}

TEST(FrameworkTest, ShippedProfilesLoad) {
  std::vector<std::string> Names = getShippedFrameworkNames();
  EXPECT_EQ((std::vector<std::string>{"deepspeed", "megatron-core",
                                      "mindspeed-llm", "none"}),
            Names);
  for (const std::string &N : Names)
    EXPECT_EQ(N, load(N).Name);
  // The --export names are aliases.
  EXPECT_EQ("megatron-core", load("megatron").Name);
  EXPECT_EQ("mindspeed-llm", load("mindspeed").Name);
  EXPECT_EQ("megatron", load("megatron-core").Export);
  EXPECT_TRUE(load("none").AnyPlan);
  Expected<FrameworkProfile> Bad = loadFrameworkProfile("torch");
  ASSERT_FALSE(Bad);
  EXPECT_EQ("--framework: unknown framework 'torch' (known: deepspeed, "
            "megatron-core, mindspeed-llm, none; or a profile .yaml)",
            toString(Bad.takeError()));
}

TEST(FrameworkTest, ProfilesCarryTheirFacts) {
  FrameworkProfile M = load("megatron-core");
  // DDP, the distributed optimizer, Megatron-FSDP's two strategies at pp 1.
  ASSERT_EQ(4u, M.Zero.size());
  EXPECT_EQ(1u, M.getZeroMode(2)->MaxPP);
  EXPECT_EQ(12, M.OptimizerBytesPerParam);
  EXPECT_EQ(0, M.DDPBucketParams); // max(40M, 1M x dp)
  FrameworkProfile D = load("deepspeed");
  EXPECT_EQ(5e8, D.DDPBucketParams); // reduce_bucket_size
  EXPECT_FALSE(D.SequenceParallel);
  EXPECT_FALSE(D.VirtualPipeline);
  FrameworkProfile S = load("mindspeed-llm");
  EXPECT_TRUE(S.EvenChunks);
  ASSERT_TRUE(S.TPOverlapShare.hasValue());
  EXPECT_EQ(0.05, *S.TPOverlapShare);
  // Eager runtimes: no generic fusion; the none profile leaves --fusion's
  // default.
  EXPECT_EQ(llvm::Optional<bool>(false), M.GenericFusion);
  EXPECT_EQ(llvm::Optional<bool>(false), S.GenericFusion);
  EXPECT_EQ(llvm::Optional<bool>(false), D.GenericFusion);
  EXPECT_FALSE(getNoneFramework().GenericFusion.hasValue());
}

TEST(FrameworkTest, RulesNameTheFrameworkAndTheirSource) {
  FrameworkProfile D = load("deepspeed");
  EXPECT_EQ("", why(D, "tp=2,zero=2"));
  EXPECT_EQ("framework 'deepspeed' cannot run zero=3 with tp=2: zero_"
            "optimization.stage 3 runs at tp <= 1 (deepspeed/runtime/pipe/"
            "engine.py; deepspeed/runtime/engine.py (AutoTP with zero_stage 3 "
            "not validated, asserted))",
            why(D, "tp=2,zero=3"));
  EXPECT_NE("", why(D, "pp=2,zero=2"));
  EXPECT_NE("", why(D, "vpp=2"));
  EXPECT_NE("", why(D, "tp=2,sp=1"));
  // Offload: param only under ZeRO-3; opt moves the gradients with it.
  EXPECT_NE("", why(D, "zero=2,offload=param:host"));
  EXPECT_EQ("", why(D, "zero=3,offload=param:host"));
  EXPECT_NE("", why(D, "zero=1,offload=opt:host"));
  EXPECT_EQ("", why(D, "zero=1,offload=opt:host,grad:host"));
  EXPECT_NE("", why(D, "zero=2,offload=opt:ssd,grad:host"));
  // Activations to the host are recompute's checkpoints.
  EXPECT_NE("", why(D, "recompute=none,offload=act:host"));
  EXPECT_EQ("", why(D, "recompute=full,offload=act:host"));
  // A rule whose choices are not all fixed does not fire.
  EXPECT_EQ("", why(D, "offload=param:host"));

  FrameworkProfile M = load("megatron-core");
  EXPECT_EQ("", why(M, "pp=1,zero=2"));
  EXPECT_NE("", why(M, "pp=4,zero=2"));
  EXPECT_EQ("", why(M, "zero=1,offload=opt:host"));
  EXPECT_NE("", why(M, "zero=0,offload=opt:host"));
  EXPECT_NE("", why(M, "zero=1,offload=act:host"));
  EXPECT_NE("", why(M, "tp=2,sp=0,tp_overlap=on"));
  EXPECT_NE("", why(M, "tp=2,ep=2,sp=0"));
  EXPECT_EQ("", why(M, "tp=2,ep=2,sp=1"));
  // Mesh orders: tp-pp-dp is Megatron's --use-tp-pp-dp-mapping.
  EXPECT_EQ("", why(M, "dp=4,ep=1,pp=2,order=tp-pp-dp"));
  EXPECT_NE("", why(M, "dp=4,ep=2,pp=2,order=tp-dp-ep-pp"));

  // MindSpeed: equal chunks; 8 blocks split into pp 2 x vpp 2 but not 3 x 2.
  FrameworkProfile S = load("mindspeed-llm");
  EXPECT_EQ("", why(S, "pp=2,vpp=2", 8));
  EXPECT_NE("", why(S, "pp=3,vpp=2", 8));
  EXPECT_NE("", why(S, "zero=2"));

  // Ulysses with 8 K/V heads: tp 2 x cp 4 divides them everywhere; tp 4 x
  // cp 4 only where K/V are repeated to the query heads first (MindSpeed's
  // --kv-head-repeat-before-uly-alltoall), not in Transformer Engine's
  // all-to-all under Megatron-Core nor in DeepSpeed's.
  for (const FrameworkProfile *F : {&M, &S, &D})
    EXPECT_EQ("", why(*F, "tp=2,cp=4,cp_algo=a2a", 0, 8)) << F->Name;
  EXPECT_EQ("", why(S, "tp=4,cp=4,cp_algo=a2a", 0, 8));
  EXPECT_EQ("framework 'megatron-core' cannot run cp=4,cp_algo=a2a with "
            "tp=4: its all-to-all over heads needs the 8 K/V heads divisible "
            "by tp*cp = 16 (it does not repeat them to the query heads first) "
            "(TransformerEngine AttnFuncWithCPAndQKVOA2A ('The number of "
            "attention heads needs to be divisible by CP size!'))",
            why(M, "tp=4,cp=4,cp_algo=a2a", 0, 8));
  EXPECT_NE("", why(D, "tp=4,cp=4,cp_algo=a2a", 0, 8));
  // The ring moves K/V blocks, whatever the heads.
  EXPECT_EQ("", why(M, "tp=4,cp=4,cp_algo=ring", 0, 8));

  // none runs everything.
  EXPECT_EQ("", why(load("none"), "tp=8,zero=3,pp=4,offload=param:ssd"));
}

TEST(FrameworkTest, YAMLErrorsPointAtTheLine) {
  StringRef Unknown = "name: x\nversion: v\nsource: s\nany_plan: true\n"
                      "colour: red\n";
  Expected<FrameworkProfile> F = parseFrameworkProfile(Unknown, "x.yaml");
  ASSERT_FALSE(F);
  EXPECT_EQ("x.yaml:5:1: error: unknown key 'colour'", toString(F.takeError()));
  StringRef BadTier = "name: x\nversion: v\nsource: s\nruns:\n"
                      "  zero: [{stage: 0, name: ddp, source: s}]\n"
                      "  offload:\n"
                      "    - {kind: opt, tiers: [disk], name: n, source: s}\n";
  F = parseFrameworkProfile(BadTier, "y.yaml");
  ASSERT_FALSE(F);
  EXPECT_EQ("y.yaml:7:27: error: unknown value 'disk' (known: host, ssd)",
            toString(F.takeError()));
  StringRef Neither = "name: x\nversion: v\nsource: s\n";
  F = parseFrameworkProfile(Neither, "z.yaml");
  ASSERT_FALSE(F);
  EXPECT_EQ("z.yaml:1:1: error: a profile has either 'any_plan: true' or a "
            "'runs' section",
            toString(F.takeError()));
}

} // namespace
