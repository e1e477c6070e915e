//===- KVCacheTest.cpp - KV cache tensors found by structure --------------===//
//
// findKVCache (include/loom/Analysis/KVCache.h) on torch exports of a decoder
// with and without a past (two namings), and on hand-written graphs: a
// cache read through a Cast and repeated by Tile (MQA-style), and things
// that look like a cache but are not (a graph input concatenated with
// another input, or with a projection nothing attends over).
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/KVCache.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"

#include "LoadModel.h"
#include "llvm/Support/FormatVariadic.h"
#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

CompilationUnit loadE2EModel(const char *Name, int64_t Past) {
  CompilationUnit CU;
  auto M = importModelFile(std::string(LOOM_SOURCE_DIR) + "/test/e2e/models/" +
                           Name);
  EXPECT_TRUE(!!M) << (M ? "" : toString(M.takeError()));
  CU.M = std::move(*M);
  CU.Opts.Batch = 2;
  CU.Opts.Seq = Past ? 1 : 4;
  if (Past) {
    CU.Opts.Dims.push_back({"past_sequence_length", Past});
    CU.Opts.Dims.push_back({"p", Past});
  }
  runPipeline(CU, "bind-symbols,infer-shapes,fold-shape-arith,detect-layers");
  return CU;
}

CompilationUnit loadText(const std::string &Text) {
  return loadTextModel(Text, "infer-shapes");
}

std::string name(const Value *V) { return V ? V->getName().str() : "-"; }

TEST(KVCacheTest, TorchExportWithPastTwoNamings) {
  struct Naming {
    const char *File, *PastK, *PastV, *PresK, *PresV;
  };
  for (const Naming &N :
       {Naming{"kvdecoder-optimum.onnx", "past_key_values.{0}.key",
               "past_key_values.{0}.value", "present.{0}.key",
               "present.{0}.value"},
        Naming{"kvdecoder-plain.onnx", "cache_a_{0}", "cache_b_{0}", "kc_{0}",
               "vc_{0}"}}) {
    SCOPED_TRACE(N.File);
    CompilationUnit CU = loadE2EModel(N.File, 5);
    std::vector<KVCacheTensor> C = findKVCache(CU.M->getGraph());
    // 2 layers x (key, value), layer then key before value.
    ASSERT_EQ(C.size(), 4u);
    for (unsigned I = 0; I < 4; ++I) {
      unsigned L = I / 2;
      bool Key = I % 2 == 0;
      EXPECT_EQ(C[I].Layer, L);
      EXPECT_EQ(C[I].K, Key ? KVCacheTensor::Key : KVCacheTensor::Val);
      EXPECT_EQ(name(C[I].Past), formatv(Key ? N.PastK : N.PastV, L).str());
      EXPECT_EQ(name(C[I].Present), formatv(Key ? N.PresK : N.PresV, L).str());
      // [batch, kv_heads, seq, head_dim]: appended along axis 2.
      EXPECT_EQ(C[I].SeqAxis, 2);
      ASSERT_TRUE(C[I].Append);
      EXPECT_EQ(C[I].Append->getOpType(), "Concat");
      EXPECT_EQ(C[I].PastOperand, 0u);
      EXPECT_EQ(C[I].Cache, C[I].Append->getOutput(0));
      ASSERT_TRUE(C[I].Attention);
      EXPECT_EQ(C[I].Attention->getOpType(), "MatMul");
    }
    // The layer's key and value feed different attention MatMuls.
    EXPECT_NE(C[0].Attention, C[1].Attention);
  }
}

TEST(KVCacheTest, TorchExportWithoutPast) {
  CompilationUnit CU = loadE2EModel("kvdecoder-optimum-prefill.onnx", 0);
  std::vector<KVCacheTensor> C = findKVCache(CU.M->getGraph());
  ASSERT_EQ(C.size(), 4u);
  const char *Want[] = {"present.0.key", "present.0.value", "present.1.key",
                        "present.1.value"};
  for (unsigned I = 0; I < 4; ++I) {
    EXPECT_EQ(name(C[I].Present), Want[I]);
    EXPECT_EQ(C[I].Past, nullptr);
    EXPECT_EQ(C[I].Append, nullptr);
    EXPECT_EQ(C[I].SeqAxis, -1);
  }
}

// One attention layer, cache [b, h, t, d]: the key cache arrives in fp16
// and is cast; MQA-style, its one KV head is repeated by Tile for the two
// query heads. KEY_STEP is what the key Concat appends to the past.
std::string layer(StringRef KeyStep) {
  return (R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 1, 8] x, float16[2, 1, 3, 8] pk16, float[2, 1, 3, 8] pv, float[2, 1, 1, 8] other)
  => (float[2, 1, 16] y, float[2, 1, 4, 8] kout, float[2, 1, 4, 8] vout)
<float[8, 8] wq, float[8, 8] wk, float[8, 8] wv>
{
  hs = Constant <value = int64[4] {2, 1, 1, 8}> ()
  hq = Constant <value = int64[4] {2, 2, 1, 8}> ()
  rep = Constant <value = int64[4] {1, 2, 1, 1}> ()
  fl = Constant <value = int64[3] {2, 1, 16}> ()
  pk = Cast <to = 1> (pk16)
  q0 = MatMul(x, wq)
  q1 = Concat <axis = 2> (q0, q0)
  q = Reshape(q1, hq)
  k0 = MatMul(x, wk)
  kf = Reshape(k0, hs)
  kout = Concat <axis = 2> (pk, )" +
          KeyStep + R"()
  kr = Tile(kout, rep)
  kt = Transpose <perm = [0, 1, 3, 2]> (kr)
  s = MatMul(q, kt)
  p = Softmax <axis = -1> (s)
  v0 = MatMul(x, wv)
  vf = Reshape(v0, hs)
  vout = Concat <axis = 2> (pv, vf)
  vr = Tile(vout, rep)
  a = MatMul(p, vr)
  y = Reshape(a, fl)
}
)")
      .str();
}

TEST(KVCacheTest, HandWrittenCastAndTileRepeat) {
  CompilationUnit CU = loadText(layer("kf"));
  std::vector<KVCacheTensor> C = findKVCache(CU.M->getGraph());
  ASSERT_EQ(C.size(), 2u);
  EXPECT_EQ(name(C[0].Past), "pk16");
  EXPECT_EQ(name(C[0].Present), "kout");
  EXPECT_EQ(C[0].K, KVCacheTensor::Key);
  EXPECT_EQ(name(C[1].Past), "pv");
  EXPECT_EQ(name(C[1].Present), "vout");
  EXPECT_EQ(C[1].K, KVCacheTensor::Val);
  EXPECT_EQ(C[1].SeqAxis, 2);
}

TEST(KVCacheTest, NotACache) {
  // The key Concat appends another graph input, not a projection of the
  // step's activations: no key cache; the value still is one.
  CompilationUnit CU = loadText(layer("other"));
  std::vector<KVCacheTensor> C = findKVCache(CU.M->getGraph());
  ASSERT_EQ(C.size(), 1u);
  EXPECT_EQ(name(C[0].Past), "pv");
  EXPECT_EQ(C[0].K, KVCacheTensor::Val);

  // A graph input appended to by a projection that nothing attends over.
  CompilationUnit CU2 = loadText(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 1, 8] x, float[2, 3, 8] mem) => (float[2, 8] y, float[2, 4, 8] m2)
<float[8, 8] w>
{
  p = MatMul(x, w)
  m2 = Concat <axis = 1> (mem, p)
  y = ReduceMean <axes = [1], keepdims = 0> (m2)
}
)");
  EXPECT_TRUE(findKVCache(CU2.M->getGraph()).empty());
}

} // namespace
