//===- PassManagerTest.cpp - Tests for pipelines and instrumentation ------===//
//
// A registry of small test passes exercises parsing, validation, the
// order of execution, --print-after, --stop-after, --verify-each and
// --time-passes without depending on what the real passes do; the real
// registry is checked for consistency.
//
//===----------------------------------------------------------------------===//

#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

std::string errorOf(Error E) {
  if (!E)
    return "<ok>";
  return toString(std::move(E));
}

/// What the test passes did, in order.
std::vector<std::string> &log() {
  static std::vector<std::string> L;
  return L;
}

/// Appends its name to the log.
template <const char *Name> class LogPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    log().push_back(Name);
    return Error::success();
  }
};

const char First[] = "first";
const char Second[] = "second";
const char Third[] = "third";

/// Fails with a message naming the node it blames.
class FailPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    log().push_back("fail");
    return createStringError(inconvertibleErrorCode(),
                             "node 'n' (Neg): cannot do this");
  }
};

/// Breaks SSA: makes the first node read the last node's result.
class BreakPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    log().push_back("break");
    Graph &G = CU.M->getGraph();
    G.getNodes().front()->setInput(0, G.getNodes().back()->getOutput(0));
    return Error::success();
  }
};

/// Renames the graph so dumps show which passes ran.
class RenamePass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    log().push_back("rename");
    CU.M->getGraph().setName("renamed");
    return Error::success();
  }
};

template <typename P> std::unique_ptr<Pass> create() {
  return std::make_unique<P>();
}

const PassInfo TestRegistry[] = {
    {"first", "logs", create<LogPass<First>>, PassKind::Planning},
    {"second", "logs", create<LogPass<Second>>, PassKind::Planning},
    {"rename", "renames", create<RenamePass>, PassKind::Planning},
    {"fail", "fails", create<FailPass>, PassKind::Planning},
    {"break", "breaks", create<BreakPass>, PassKind::Transform},
    {"third", "logs", create<LogPass<Third>>, PassKind::Emit},
};

/// x -> Neg -> a -> Abs -> y.
CompilationUnit makeUnit() {
  CompilationUnit CU;
  Expected<std::unique_ptr<Model>> M = importModelFromText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
{
  a = Neg(x)
  y = Abs(a)
}
)",
                                                           "pm.onnxtxt");
  EXPECT_TRUE(bool(M));
  if (M)
    CU.M = std::move(*M);
  return CU;
}

struct Outcome {
  std::string Error, Out, Report;
  std::vector<std::string> Log;
};

Outcome runPipeline(StringRef Pipeline, const PassInstrumentation &PI = {}) {
  log().clear();
  Outcome R;
  PassManager PM(TestRegistry);
  if (Error E = PM.parsePipeline(Pipeline)) {
    R.Error = toString(std::move(E));
    return R;
  }
  CompilationUnit CU = makeUnit();
  raw_string_ostream Out(R.Out), Report(R.Report);
  R.Error = errorOf(PM.run(CU, PI, Out, Report));
  Out.flush();
  Report.flush();
  R.Log = log();
  return R;
}

TEST(PassManagerTest, RunsPassesInPipelineOrder) {
  Outcome R = runPipeline("third,first,second,first");
  EXPECT_EQ(R.Error, "<ok>");
  EXPECT_EQ(R.Log,
            (std::vector<std::string>{"third", "first", "second", "first"}));
  EXPECT_EQ(R.Out, "");
  EXPECT_EQ(R.Report, "");
}

TEST(PassManagerTest, ParsesPipelines) {
  PassManager PM(TestRegistry);
  // Blanks around names are ignored; empty entries are skipped.
  EXPECT_EQ(errorOf(PM.parsePipeline(" first , second,,third ")), "<ok>");
  EXPECT_EQ(PM.getPipelineNames(),
            (std::vector<std::string>{"first", "second", "third"}));
  PassManager Unknown(TestRegistry);
  EXPECT_EQ(errorOf(Unknown.parsePipeline("first,frist")),
            "--pass-pipeline: unknown pass 'frist'; registered passes: "
            "first, second, rename, fail, break, third");
  PassManager Empty(TestRegistry);
  EXPECT_EQ(errorOf(Empty.parsePipeline(",")),
            "--pass-pipeline: empty pipeline");
  PassManager Default(TestRegistry);
  Default.addDefaultPipeline();
  EXPECT_EQ(Default.getPipelineNames(),
            (std::vector<std::string>{"first", "second", "rename", "fail",
                                      "break", "third"}));
  EXPECT_EQ(Default.lookupPass("rename")->Description, StringRef("renames"));
  EXPECT_EQ(Default.lookupPass("nope"), nullptr);
  // The pass manager, not the tool, decides which passes a run needs.
  PassManager Planning(TestRegistry);
  Planning.addDefaultPipeline({/*Transforms=*/false, /*Emit=*/false});
  EXPECT_EQ(Planning.getPipelineNames(),
            (std::vector<std::string>{"first", "second", "rename", "fail"}));
  PassManager NoEmit(TestRegistry);
  NoEmit.addDefaultPipeline({/*Transforms=*/true, /*Emit=*/false});
  EXPECT_EQ(
      NoEmit.getPipelineNames(),
      (std::vector<std::string>{"first", "second", "rename", "fail", "break"}));
  EXPECT_TRUE(Default.isTransformPass("break"));
  EXPECT_TRUE(Default.isTransformPass("third"));
  EXPECT_FALSE(Default.isTransformPass("first"));
  EXPECT_FALSE(Default.isTransformPass("nope"));
}

TEST(PassManagerTest, FailureStopsThePipeline) {
  Outcome R = runPipeline("first,fail,second");
  // The pass manager names the model file in front, as import errors do.
  EXPECT_EQ(R.Error, "pm.onnxtxt: error: node 'n' (Neg): cannot do this");
  EXPECT_EQ(R.Log, (std::vector<std::string>{"first", "fail"}));
}

TEST(PassManagerTest, PrintAfter) {
  PassInstrumentation PI;
  PI.PrintAfter = {"rename"};
  Outcome R = runPipeline("first,rename,second", PI);
  EXPECT_EQ(R.Error, "<ok>");
  EXPECT_EQ(R.Out, "# *** IR Dump After rename ***\n"
                   "model ir_version=8 opsets=[\"\"=17]\n"
                   "graph renamed {\n"
                   "  input %x : f32[2]\n"
                   "  %a : ?[*] = Neg(%x)\n"
                   "  %y : f32[2] = Abs(%a)\n"
                   "  output %y : f32[2]\n"
                   "}\n");
}

TEST(PassManagerTest, PrintAfterAllAndRepeatedPasses) {
  PassInstrumentation PI;
  PI.PrintAfter = {"all"};
  Outcome R = runPipeline("first,rename", PI);
  // One dump per pass run: the first still shows the old name.
  EXPECT_EQ(R.Out.find("# *** IR Dump After first ***\nmodel ir_version=8 "
                       "opsets=[\"\"=17]\ngraph g {"),
            0u);
  EXPECT_NE(R.Out.find("# *** IR Dump After rename ***\nmodel ir_version=8 "
                       "opsets=[\"\"=17]\ngraph renamed {"),
            std::string::npos);
  // A pass that appears twice is dumped after each run.
  PI.PrintAfter = {"first"};
  R = runPipeline("first,second,first", PI);
  SmallVector<StringRef, 4> Dumps;
  StringRef(R.Out).split(Dumps, "# *** IR Dump After first ***\n", -1, false);
  EXPECT_EQ(Dumps.size(), 2u);
}

TEST(PassManagerTest, StopAfter) {
  PassInstrumentation PI;
  PI.StopAfter = "second";
  PI.PrintAfter = {"all"};
  Outcome R = runPipeline("first,second,rename,third", PI);
  EXPECT_EQ(R.Error, "<ok>");
  EXPECT_EQ(R.Log, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(R.Out.find("IR Dump After rename"), std::string::npos);
}

TEST(PassManagerTest, ValidatesInstrumentationBeforeRunning) {
  PassInstrumentation PI;
  PI.PrintAfter = {"third"};
  Outcome R = runPipeline("first,second", PI);
  EXPECT_EQ(R.Error, "--print-after: pass 'third' is not in the pipeline");
  EXPECT_TRUE(R.Log.empty());

  PI.PrintAfter = {"first", "thrid"};
  R = runPipeline("first,second", PI);
  EXPECT_EQ(R.Error, "--print-after: unknown pass 'thrid'; registered "
                     "passes: first, second, rename, fail, break, third");
  EXPECT_TRUE(R.Log.empty());

  PassInstrumentation Stop;
  Stop.StopAfter = "rename";
  R = runPipeline("first", Stop);
  EXPECT_EQ(R.Error, "--stop-after: pass 'rename' is not in the pipeline");
  EXPECT_TRUE(R.Log.empty());
}

TEST(PassManagerTest, VerifyEachCatchesTheBreakingPass) {
  PassInstrumentation PI;
  PI.VerifyEach = true;
  Outcome R = runPipeline("first,break,second", PI);
  EXPECT_EQ(R.Error,
            "pm.onnxtxt: error: IR verification failed after break: node "
            "'%a' (Neg): input 'y' is "
            "used before it is defined (graph is not in topological order)");
  EXPECT_EQ(R.Log, (std::vector<std::string>{"first", "break"}));
  // Without --verify-each the pipeline goes on.
  R = runPipeline("first,break,second");
  EXPECT_EQ(R.Error, "<ok>");
  EXPECT_EQ(R.Log.size(), 3u);
}

TEST(PassManagerTest, TimePassesReport) {
  PassInstrumentation PI;
  PI.TimePasses = true;
  Outcome R = runPipeline("first,second", PI);
  EXPECT_EQ(R.Error, "<ok>");
  SmallVector<StringRef, 12> Lines;
  StringRef(R.Report).split(Lines, '\n');
  ASSERT_EQ(Lines.size(), 10u) << R.Report; // 9 lines and the final "".
  std::string Rule = "===" + std::string(70, '-') + "===";
  EXPECT_EQ(Lines[0], Rule);
  EXPECT_EQ(Lines[1].trim(), "... Pass execution timing report ...");
  EXPECT_EQ(Lines[2], Rule);
  EXPECT_TRUE(Regex("^  Total Execution Time: [0-9]+\\.[0-9]{4} seconds$")
                  .match(Lines[3]))
      << Lines[3].str();
  EXPECT_EQ(Lines[4], "");
  EXPECT_EQ(Lines[5], "   ---Wall Time---  --- Name ---");
  Regex Row("^   [0-9]+\\.[0-9]{4} \\( *[0-9]+\\.[0-9]%\\)  ([a-z-]+)$");
  SmallVector<StringRef, 2> M;
  ASSERT_TRUE(Row.match(Lines[6], &M)) << Lines[6].str();
  EXPECT_EQ(M[1], "first");
  ASSERT_TRUE(Row.match(Lines[7], &M)) << Lines[7].str();
  EXPECT_EQ(M[1], "second");
  EXPECT_TRUE(
      Regex("^   [0-9]+\\.[0-9]{4} \\(100\\.0%\\)  Total$").match(Lines[8]))
      << Lines[8].str();
  EXPECT_EQ(Lines[9], "");
}

TEST(PassManagerTest, WarningsAreCollected) {
  CompilationUnit CU;
  CU.warn("first " + Twine(1));
  CU.warn("second");
  EXPECT_EQ(CU.getWarnings().size(), 2u);
  EXPECT_EQ(CU.getWarnings()[0], "first 1");
}

TEST(PassManagerTest, RealRegistryIsConsistent) {
  ArrayRef<PassInfo> Passes = getRegisteredPasses();
  // DESIGN §2's order starts with these three.
  ASSERT_GE(Passes.size(), 3u);
  EXPECT_EQ(StringRef(Passes[0].Argument), "bind-symbols");
  EXPECT_EQ(StringRef(Passes[1].Argument), "infer-shapes");
  EXPECT_EQ(StringRef(Passes[2].Argument), "fold-shape-arith");
  PassManager PM(Passes);
  PM.addDefaultPipeline();
  // The pipeline's passes carry the table's names and descriptions, the
  // only place they are written; names are kebab-case.
  EXPECT_EQ(PM.getPipelineNames().size(), Passes.size());
  for (const PassInfo &PI : Passes) {
    EXPECT_TRUE(Regex("^[a-z]+(-[a-z]+)*$").match(PI.Argument)) << PI.Argument;
    EXPECT_FALSE(StringRef(PI.Description).empty()) << PI.Argument;
  }
}

} // namespace
