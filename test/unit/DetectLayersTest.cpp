//===- DetectLayersTest.cpp - Repeated blocks by structural hashing -------===//
//
// An N-layer model must yield N blocks with one signature, the embedding and
// the head as layers of their own, and node layers that follow the blocks.
//
//===----------------------------------------------------------------------===//

#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"

#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

/// A pre-norm MLP "transformer" of \p N layers in ONNX text syntax:
/// embedding Gather, per layer LayerNorm -> MatMul -> Relu -> MatMul -> Add
/// (residual), then a final LayerNorm and a head MatMul.
std::string makeModel(unsigned N) {
  std::string Decls = "<float[100,16] emb, float[16] lnf_g, float[16] lnf_b, "
                      "float[16,100] head";
  std::string Body = "  h0 = Gather (emb, ids)\n";
  for (unsigned L = 0; L < N; ++L) {
    std::string I = std::to_string(L), Next = std::to_string(L + 1);
    Decls += ", float[16] g" + I + ", float[16] b" + I + ", float[16,64] w1_" +
             I + ", float[64,16] w2_" + I;
    Body += "  n" + I + " = LayerNormalization (h" + I + ", g" + I + ", b" + I +
            ")\n";
    Body += "  u" + I + " = MatMul (n" + I + ", w1_" + I + ")\n";
    Body += "  r" + I + " = Relu (u" + I + ")\n";
    Body += "  d" + I + " = MatMul (r" + I + ", w2_" + I + ")\n";
    Body += "  h" + Next + " = Add (h" + I + ", d" + I + ")\n";
  }
  std::string Last = std::to_string(N);
  Body += "  f = LayerNormalization (h" + Last + ", lnf_g, lnf_b)\n";
  Body += "  y = MatMul (f, head)\n";
  return "<ir_version: 8, opset_import: [\"\" : 17]>\n"
         "g (int64[2,8] ids) => (float[2,8,100] y)\n" +
         Decls + ">\n{\n" + Body + "}\n";
}

CompilationUnit runDetect(const std::string &Text) {
  CompilationUnit CU;
  auto M = importModelFromText(Text, "model.onnxtxt");
  EXPECT_TRUE(!!M) << (M ? "" : toString(M.takeError()));
  CU.M = std::move(*M);
  PassManager PM(getRegisteredPasses());
  EXPECT_FALSE(!!PM.parsePipeline("infer-shapes,detect-layers"));
  std::string Sink;
  raw_string_ostream OS(Sink);
  Error E = PM.run(CU, PassInstrumentation(), OS, OS);
  EXPECT_FALSE(!!E) << toString(std::move(E));
  return CU;
}

TEST(DetectLayersTest, NLayersGiveNIdenticalSignatures) {
  for (unsigned N : {2u, 5u, 12u}) {
    CompilationUnit CU = runDetect(makeModel(N));
    // Embedding + N blocks + head.
    ASSERT_EQ(CU.Layers.size(), N + 2) << "N = " << N;
    EXPECT_EQ(CU.Layers.front().K, LayerInfo::Kind::Prologue);
    EXPECT_EQ(CU.Layers.back().K, LayerInfo::Kind::Epilogue);
    for (unsigned L = 1; L <= N; ++L) {
      EXPECT_EQ(CU.Layers[L].K, LayerInfo::Kind::Block);
      EXPECT_EQ(CU.Layers[L].Signature, CU.Layers[1].Signature);
      // 2*16 (LayerNorm) + 16*64 + 64*16 parameters per block.
      EXPECT_EQ(CU.Layers[L].ParamCount, 32u + 1024u + 1024u);
      // LayerNorm, MatMul, Relu, MatMul, Add.
      EXPECT_EQ(CU.Layers[L].NumNodes, 5u);
    }
    EXPECT_NE(CU.Layers.front().Signature, CU.Layers[1].Signature);
  }
}

TEST(DetectLayersTest, NodesFollowTheirBlock) {
  CompilationUnit CU = runDetect(makeModel(3));
  // Node order: Gather, then 5 nodes per block, then LayerNorm and head.
  const auto &Nodes = CU.M->getGraph().getNodes();
  ASSERT_EQ(Nodes.size(), 1u + 15u + 2u);
  EXPECT_EQ(Nodes[0]->Layer, 0);
  for (unsigned I = 0; I < 15; ++I)
    EXPECT_EQ(Nodes[1 + I]->Layer, (int)(1 + I / 5)) << "node " << I;
  EXPECT_EQ(Nodes[16]->Layer, 4);
  EXPECT_EQ(Nodes[17]->Layer, 4);
}

TEST(DetectLayersTest, ExportedModelsHaveTheirLayers) {
  for (const char *Name : {"gpt2-tiny", "llama-tiny"}) {
    std::string Path =
        std::string(LOOM_SOURCE_DIR) + "/examples/models/" + Name + ".onnx";
    CompilationUnit CU;
    auto M = importModelFile(Path);
    ASSERT_TRUE(!!M) << toString(M.takeError());
    CU.M = std::move(*M);
    CU.Opts.Batch = 2;
    CU.Opts.Seq = 16;
    PassManager PM(getRegisteredPasses());
    ASSERT_FALSE(!!PM.parsePipeline(
        "bind-symbols,infer-shapes,fold-shape-arith,detect-layers"));
    std::string Sink;
    raw_string_ostream OS(Sink);
    Error E = PM.run(CU, PassInstrumentation(), OS, OS);
    ASSERT_FALSE(!!E) << toString(std::move(E));
    // Both exports have 2 decoder layers.
    ASSERT_EQ(CU.Layers.size(), 4u) << Name;
    EXPECT_EQ(CU.Layers[1].Signature, CU.Layers[2].Signature) << Name;
    EXPECT_EQ(CU.Layers[1].ParamCount, CU.Layers[2].ParamCount) << Name;
    // Shared work that does not depend on the data (LLaMA's rotary
    // tables, GPT-2's causal mask) is the embedding layer's, so both
    // blocks hold the same nodes.
    EXPECT_EQ(CU.Layers[1].NumNodes, CU.Layers[2].NumNodes) << Name;
  }
}

TEST(DetectLayersTest, ResidualBlocksThatRepeatNowhere) {
  // cnn-tiny in small: a stem Conv; two 8-channel residual blocks (Conv ->
  // Relu -> Conv -> Add(skip) -> Relu), the repeated run; a block to 16
  // channels with a 1x1 projection on its skip; a 16-channel block; pool
  // and head. The last two repeat nowhere and are cut at their residual
  // joins. Inside the last block the two 16-channel Convs repeat in their
  // anchors, but the block's input is read by the first Conv and by the
  // residual Add: one layer, not two.
  std::string Text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                     "g (float[1,3,8,8] x) => (float[1,4] y)\n"
                     "<float[8,3,3,3] ws, float[8,8,3,3] a1, float[8,8,3,3] a2,"
                     " float[8,8,3,3] a3, float[8,8,3,3] a4,"
                     " float[16,8,3,3] b1, float[16,16,3,3] b2,"
                     " float[16,8,1,1] bp, float[16,16,3,3] c1,"
                     " float[16,16,3,3] c2, float[4,16] wf> {\n"
                     "  s = Conv <pads = [1, 1, 1, 1]> (x, ws)\n"
                     "  s1 = Relu (s)\n";
  auto Block = [&](const std::string &In, const std::string &P,
                   const std::string &W1, const std::string &W2,
                   const std::string &Skip) {
    Text += "  " + P + "c = Conv <pads = [1, 1, 1, 1]> (" + In + ", " + W1 +
            ")\n  " + P + "r = Relu (" + P + "c)\n  " + P +
            "d = Conv <pads = [1, 1, 1, 1]> (" + P + "r, " + W2 + ")\n  " + P +
            "j = Add (" + P + "d, " + Skip + ")\n  " + P + "o = Relu (" + P +
            "j)\n";
  };
  Block("s1", "a", "a1", "a2", "s1");
  Block("ao", "e", "a3", "a4", "ao");
  Text += "  q = Conv (eo, bp)\n";
  Block("eo", "b", "b1", "b2", "q");
  Block("bo", "c", "c1", "c2", "bo");
  Text += "  p = GlobalAveragePool (co)\n  f = Flatten (p)\n"
          "  y = Gemm <transB = 1> (f, wf)\n}\n";
  CompilationUnit CU = runDetect(Text);
  ASSERT_EQ(CU.Layers.size(), 6u);
  using K = LayerInfo::Kind;
  std::vector<K> Kinds = {K::Prologue, K::Block, K::Block,
                          K::Other,    K::Other, K::Epilogue};
  for (unsigned L = 0; L < 6; ++L)
    EXPECT_EQ(CU.Layers[L].K, Kinds[L]) << "layer " << L;
  const auto &Nodes = CU.M->getGraph().getNodes();
  // stem 2 nodes, 5 per block (6 with the projection), then the pool (it
  // shrinks what crosses, so it ends the block), Flatten and Gemm.
  std::vector<int> Want = {0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3,
                           3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 5, 5};
  ASSERT_EQ(Nodes.size(), Want.size());
  for (unsigned I = 0; I < Want.size(); ++I)
    EXPECT_EQ(Nodes[I]->Layer, Want[I]) << Nodes[I]->getName().str();
}

TEST(DetectLayersTest, EqualTablesAreNotLayers) {
  // Two same-shaped tables read side by side (rotary cos/sin) repeat, but
  // hold no matmul: one layer, not a run of two.
  CompilationUnit CU = runDetect(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n"
      "g (int64[4] i) => (float[4,8] y) <float[16,8] c, float[16,8] s> {\n"
      "  a = Gather (c, i)\n  b = Gather (s, i)\n  y = Add (a, b)\n}\n");
  ASSERT_EQ(CU.Layers.size(), 1u);
  EXPECT_EQ(CU.Layers[0].K, LayerInfo::Kind::Other);
}

} // namespace
