//===- OpCostTest.cpp - Tests for the per-op cost rules -------------------===//
//
// Each test imports a small model in ONNX text syntax, infers shapes and
// checks computeOpCost for one node against numbers worked out by hand in
// the comment beside it. The last test is a self-check on a whole
// LLaMA-7B layer: its matmul FLOPs must be exactly 2 x params x tokens plus
// the attention products.
//
//===----------------------------------------------------------------------===//

#include "loom/Cost/OpCost.h"
#include "loom/ONNX/ONNX.h"

#include "llvm/ADT/StringExtras.h"

#include "RunPipeline.h"
#include "gtest/gtest.h"

#include <cmath>

using namespace loom;
using namespace llvm;

namespace {

/// The node of the main graph that defines \p Out.
const Node *producer(const Model &M, StringRef Out) {
  const Value *V = M.getGraph().lookup(Out);
  return V ? V->getDefiningNode() : nullptr;
}

/// The cost of the node that defines \p Out.
OpCost costOf(const Model *M, StringRef Out) {
  if (!M)
    return OpCost();
  const Node *N = producer(*M, Out);
  if (!N) {
    ADD_FAILURE() << "no node defines '" << Out.str() << "'";
    return OpCost();
  }
  return computeOpCost(*N, M->getOpsetVersion(""));
}

/// The names of C.SavedValues, comma-separated, in order.
std::string saved(const OpCost &C) {
  std::string S;
  for (const Value *V : C.SavedValues)
    S += (S.empty() ? "" : ",") + V->getName().str();
  return S;
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

TEST(OpCostTest, BatchedMatMulWithWeight) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,64,64] a) => (float[2,64,64] c) <float[64,64] w> {
  c = MatMul(a, w)
})");
  OpCost C = costOf(M.get(), "c");
  ASSERT_TRUE(C.HasRule) << C.NoRuleReason;
  EXPECT_EQ(C.Unit, ComputeUnit::Cube);
  EXPECT_EQ(C.Elem, DataType::Float);
  // 2 * Batch * M * N * K = 2 * 2 * 64 * 64 * 64 = 1,048,576.
  EXPECT_DOUBLE_EQ(C.Flops, 1048576);
  // dA and dW: two products of the same size.
  EXPECT_DOUBLE_EQ(C.BackwardFlops, 2097152);
  // a: 2*64*64*4 = 32768 B, w: 64*64*4 = 16384 B; c: 32768 B.
  EXPECT_DOUBLE_EQ(C.BytesRead, 49152);
  EXPECT_DOUBLE_EQ(C.BytesWritten, 32768);
  EXPECT_DOUBLE_EQ(C.ParamCount, 4096);
  EXPECT_DOUBLE_EQ(C.ParamBytes, 16384);
  EXPECT_EQ(C.MM.Batch, 2);
  EXPECT_EQ(C.MM.M, 64);
  EXPECT_EQ(C.MM.N, 64);
  EXPECT_EQ(C.MM.K, 64);
  // The weight is a parameter, kept anyway: only a is saved.
  EXPECT_EQ(saved(C), "a");
}

TEST(OpCostTest, MatMulVectorsAndBroadcast) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[64] v, float[64,32] w, float[8,1,16,32] a, float[4,32,8] b,
   float[64] u) => (float[32] r, float[8,4,16,8] p, float d) {
  r = MatMul(v, w)
  p = MatMul(a, b)
  d = MatMul(v, u)
})");
  // [64] x [64,32]: a row vector, M = 1: 2 * 1 * 32 * 64 = 4096.
  OpCost R = costOf(M.get(), "r");
  EXPECT_DOUBLE_EQ(R.Flops, 4096);
  EXPECT_EQ(R.MM.M, 1);
  EXPECT_EQ(R.MM.N, 32);
  EXPECT_EQ(R.MM.K, 64);
  // Batch dims [8,1] and [4] broadcast to [8,4]: 2 * 32 * 16 * 8 * 32 =
  // 262,144.
  OpCost P = costOf(M.get(), "p");
  EXPECT_DOUBLE_EQ(P.Flops, 262144);
  EXPECT_EQ(P.MM.Batch, 32);
  EXPECT_EQ(P.MM.M, 16);
  EXPECT_EQ(P.MM.N, 8);
  EXPECT_EQ(P.MM.K, 32);
  EXPECT_EQ(saved(P), "a,b");
  // A dot product: 2 * 64 = 128.
  OpCost D = costOf(M.get(), "d");
  EXPECT_DOUBLE_EQ(D.Flops, 128);
  EXPECT_EQ(D.MM.M, 1);
  EXPECT_EQ(D.MM.N, 1);
}

TEST(OpCostTest, Gemm) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[32,128] a, float[128,32] at) => (float[32,256] y, float[32,256] z)
  <float[256,128] w, float[256] bias> {
  y = Gemm <transB = 1> (a, w, bias)
  z = Gemm <transA = 1, transB = 1> (at, w)
})");
  // M = 32, K = 128, N = 256 (B is [N, K] with transB).
  // 2 * 32 * 256 * 128 = 2,097,152, plus C: 32 * 256 = 8192 -> 2,105,344.
  OpCost Y = costOf(M.get(), "y");
  EXPECT_DOUBLE_EQ(Y.Flops, 2105344);
  // dA + dW (2 x 2,097,152) + dC (8192) = 4,202,496.
  EXPECT_DOUBLE_EQ(Y.BackwardFlops, 4202496);
  EXPECT_EQ(Y.MM.M, 32);
  EXPECT_EQ(Y.MM.N, 256);
  EXPECT_EQ(Y.MM.K, 128);
  // w: 32768 elements, bias: 256.
  EXPECT_DOUBLE_EQ(Y.ParamCount, 33024);
  // transA: A is [K, M] = [128, 32]; same product, no C.
  OpCost Z = costOf(M.get(), "z");
  EXPECT_DOUBLE_EQ(Z.Flops, 2097152);
  EXPECT_EQ(Z.MM.M, 32);
  EXPECT_EQ(Z.MM.K, 128);
}

TEST(OpCostTest, Conv) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,32,32] x, float[2,8,17,17] x2, float[1,4,5,5] x3)
  => (float[1,16,32,32] y, float[2,8,7,7] y2, float[1,2,11,11] y3)
  <float[16,3,3,3] w, float[8,2,3,3] w2, float[8] b2, float[4,2,3,3] w3> {
  y = Conv <pads = [1, 1, 1, 1]> (x, w)
  y2 = Conv <group = 4, strides = [2, 2], dilations = [2, 2]> (x2, w2, b2)
  y3 = ConvTranspose <strides = [2, 2]> (x3, w3)
})");
  // 2 * N * Cout * OH * OW * (Cin/groups) * KH * KW
  //   = 2 * 1 * 16 * 32 * 32 * 3 * 3 * 3 = 884,736.
  OpCost Y = costOf(M.get(), "y");
  EXPECT_EQ(Y.Unit, ComputeUnit::Cube);
  EXPECT_DOUBLE_EQ(Y.Flops, 884736);
  EXPECT_DOUBLE_EQ(Y.BackwardFlops, 2 * 884736.0);
  // Implicit GEMM: [N*OH*OW, Cin*KH*KW] x [.., Cout] = [1024, 27] x [27, 16].
  EXPECT_EQ(Y.MM.Batch, 1);
  EXPECT_EQ(Y.MM.M, 1024);
  EXPECT_EQ(Y.MM.N, 16);
  EXPECT_EQ(Y.MM.K, 27);
  EXPECT_EQ(saved(Y), "x");
  // Dilation 2 makes the 3x3 kernel span 5: OH = (17 - 5) / 2 + 1 = 7.
  // 2 * 2 * 8 * 7 * 7 * (8/4) * 3 * 3 = 28,224, plus the bias
  // 2 * 8 * 7 * 7 = 784 -> 29,008. Per group: [2*49, 2*9] x [18, 8/4].
  OpCost Y2 = costOf(M.get(), "y2");
  EXPECT_DOUBLE_EQ(Y2.Flops, 29008);
  EXPECT_EQ(Y2.MM.Batch, 4);
  EXPECT_EQ(Y2.MM.M, 98);
  EXPECT_EQ(Y2.MM.N, 2);
  EXPECT_EQ(Y2.MM.K, 18);
  // ConvTranspose: out = (5 - 1) * 2 + 3 = 11; every input pixel scatters
  // a kernel: 2 * N * Cin * 5 * 5 * (Cout/g) * 3 * 3 = 2*4*25*2*9 = 3600.
  OpCost Y3 = costOf(M.get(), "y3");
  EXPECT_DOUBLE_EQ(Y3.Flops, 3600);
  EXPECT_EQ(Y3.MM.M, 25);
  EXPECT_EQ(Y3.MM.N, 18);
  EXPECT_EQ(Y3.MM.K, 4);
}

TEST(OpCostTest, Einsum) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,16,8] q, float[1,4,16,8] k, float[2,3] a, float[3,4] b,
   float[4,5] c, float[3,2,4] e, float[3,4,5] f)
  => (float[1,4,16,16] s, float[2,5] chain, float[3,2,5] ell, float[3,2] tr,
      float[2] rs, float[2,4] imp) {
  s = Einsum <equation = "bhqd,bhkd->bhqk"> (q, k)
  chain = Einsum <equation = "ab,bc,cd->ad"> (a, b, c)
  ell = Einsum <equation = "...ij,...jk->...ik"> (e, f)
  tr = Einsum <equation = "ij->ji"> (a)
  rs = Einsum <equation = "ij->i"> (a)
  imp = Einsum <equation = "ij,jk"> (a, b)
})");
  // QK^T per head: Batch b*h = 4, M = q = 16, N = k = 16, K = d = 8:
  // 2 * 4 * 16 * 16 * 8 = 16,384 on the cube.
  OpCost S = costOf(M.get(), "s");
  EXPECT_EQ(S.Unit, ComputeUnit::Cube);
  EXPECT_DOUBLE_EQ(S.Flops, 16384);
  EXPECT_EQ(S.MM.Batch, 4);
  EXPECT_EQ(S.MM.M, 16);
  EXPECT_EQ(S.MM.N, 16);
  EXPECT_EQ(S.MM.K, 8);
  // Left to right: ab,bc -> ac: 2*2*4*3 = 48; ac,cd -> ad: 2*2*5*4 = 80.
  // The cube view is the larger pair, [2,4] x [4,5].
  OpCost Ch = costOf(M.get(), "chain");
  EXPECT_DOUBLE_EQ(Ch.Flops, 128);
  EXPECT_EQ(Ch.MM.M, 2);
  EXPECT_EQ(Ch.MM.N, 5);
  EXPECT_EQ(Ch.MM.K, 4);
  // The ellipsis is a batch dim of 3: 2 * 3 * 2 * 5 * 4 = 240.
  OpCost E = costOf(M.get(), "ell");
  EXPECT_DOUBLE_EQ(E.Flops, 240);
  EXPECT_EQ(E.MM.Batch, 3);
  // A transpose moves bytes; a row sum adds 2 * 3 = 6 elements.
  OpCost Tr = costOf(M.get(), "tr");
  EXPECT_EQ(Tr.Unit, ComputeUnit::Memory);
  EXPECT_DOUBLE_EQ(Tr.Flops, 0);
  OpCost Rs = costOf(M.get(), "rs");
  EXPECT_EQ(Rs.Unit, ComputeUnit::Vector);
  EXPECT_DOUBLE_EQ(Rs.Flops, 6);
  // Implicit output "ik": 2 * 2 * 4 * 3 = 48.
  OpCost Imp = costOf(M.get(), "imp");
  EXPECT_DOUBLE_EQ(Imp.Flops, 48);
}

//===----------------------------------------------------------------------===//
// Attention, norms, element-wise
//===----------------------------------------------------------------------===//

TEST(OpCostTest, TransposeOfUnitDimsIsAView) {
  // A multi-query attention's one kv head ([b, s, 1, d] -> [b, 1, s, d])
  // and a decode step's one token ([b, 1, h, d] -> [b, h, 1, d]) keep
  // their other dims in order: the bytes are already the result's. The
  // same permutation on 2 heads moves them.
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,16,1,8] k1, float[2,1,4,8] q1, float[2,16,2,8] k2)
  => (float[2,1,16,8] a, float[2,4,1,8] b, float[2,2,16,8] c) {
  a = Transpose <perm = [0, 2, 1, 3]> (k1)
  b = Transpose <perm = [0, 2, 1, 3]> (q1)
  c = Transpose <perm = [0, 2, 1, 3]> (k2)
})");
  for (const char *V : {"a", "b"}) {
    OpCost T = costOf(M.get(), V);
    EXPECT_EQ(T.Unit, ComputeUnit::None) << V;
    EXPECT_DOUBLE_EQ(T.BytesRead + T.BytesWritten, 0) << V;
  }
  // 2 * 16 * 2 * 8 = 512 floats = 2048 B in and out.
  OpCost C = costOf(M.get(), "c");
  EXPECT_EQ(C.Unit, ComputeUnit::Memory);
  EXPECT_DOUBLE_EQ(C.BytesRead, 2048);
  EXPECT_DOUBLE_EQ(C.BytesWritten, 2048);
}

TEST(OpCostTest, AttentionPieces) {
  // One attention block of b = 1, 4 heads, s = 16, d = 8.
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,16,4,8] q4, float[1,4,8,16] kt, float[1,4,16,8] v)
  => (float[1,16,32] out) {
  q = Transpose <perm = [0, 2, 1, 3]> (q4)
  s = MatMul(q, kt)
  scale = Constant <value = float {2.828427}> ()
  ss = Div(s, scale)
  p = Softmax <axis = -1> (ss)
  o = MatMul(p, v)
  ot = Transpose <perm = [0, 2, 1, 3]> (o)
  shape = Constant <value = int64[3] {1, 16, 32}> ()
  out = Reshape(ot, shape)
})");
  // Transpose moves 16*4*8 = 512 floats = 2048 B in and out.
  OpCost T = costOf(M.get(), "q");
  EXPECT_EQ(T.Unit, ComputeUnit::Memory);
  EXPECT_DOUBLE_EQ(T.Flops, 0);
  EXPECT_DOUBLE_EQ(T.BytesRead, 2048);
  EXPECT_DOUBLE_EQ(T.BytesWritten, 2048);
  EXPECT_EQ(saved(T), "");
  // QK^T: 2 * 4 heads * 16 * 16 * 8 = 16,384; both operands are
  // activations, both saved, both get gradients.
  OpCost S = costOf(M.get(), "s");
  EXPECT_DOUBLE_EQ(S.Flops, 16384);
  EXPECT_DOUBLE_EQ(S.BackwardFlops, 32768);
  EXPECT_EQ(saved(S), "q,kt");
  // Scale: one divide per score, 4*16*16 = 1024; backward 3 per element.
  // dS = g / c needs only the constant divisor, so nothing is saved.
  OpCost D = costOf(M.get(), "ss");
  EXPECT_EQ(D.Unit, ComputeUnit::Vector);
  EXPECT_DOUBLE_EQ(D.Flops, 1024);
  EXPECT_DOUBLE_EQ(D.BackwardFlops, 3072);
  EXPECT_EQ(saved(D), "");
  // Softmax: 5 per element = 5120; backward 4 per element; saves its
  // output.
  OpCost P = costOf(M.get(), "p");
  EXPECT_DOUBLE_EQ(P.Flops, 5120);
  EXPECT_DOUBLE_EQ(P.BackwardFlops, 4096);
  EXPECT_EQ(saved(P), "p");
  // AV: 2 * 4 * 16 * 8 * 16 = 16,384.
  OpCost O = costOf(M.get(), "o");
  EXPECT_DOUBLE_EQ(O.Flops, 16384);
  EXPECT_EQ(O.MM.K, 16);
  // Reshape is a view: free.
  OpCost R = costOf(M.get(), "out");
  EXPECT_EQ(R.Unit, ComputeUnit::None);
  EXPECT_DOUBLE_EQ(R.BytesRead + R.BytesWritten, 0);
  // Constants are free too.
  EXPECT_EQ(costOf(M.get(), "scale").Unit, ComputeUnit::None);
}

TEST(OpCostTest, LayerNormalization) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,16,64] x, float16[4,64] h) => (float[4,16,64] y, float16[4,64] z)
  <float[64] gamma, float[64] beta, float16[64] g16> {
  y = LayerNormalization <axis = -1> (x, gamma, beta)
  z = LayerNormalization <axis = -1> (h, g16)
})");
  // 4*16*64 = 4096 elements; 7 per element (ReduceMean, Sub, square,
  // ReduceMean, Mul by 1/std, Mul by gamma, Add beta) = 28,672.
  OpCost Y = costOf(M.get(), "y");
  EXPECT_EQ(Y.Unit, ComputeUnit::Vector);
  EXPECT_DOUBLE_EQ(Y.Flops, 28672);
  EXPECT_DOUBLE_EQ(Y.BackwardFlops, 13 * 4096.0);
  EXPECT_DOUBLE_EQ(Y.ParamCount, 128);
  EXPECT_EQ(saved(Y), "x");
  // f16 without bias: 6 steps + a cast in and out of the f32 stash type:
  // 8 * 256 = 2048.
  EXPECT_DOUBLE_EQ(costOf(M.get(), "z").Flops, 2048);
}

TEST(OpCostTest, RMSNormPiecesMatchFusedRule) {
  // The decomposed RMSNorm exporters emit, and the fused op, on [2,8,64]
  // (1024 elements, 16 rows).
  auto M = loadShapedModel(
      R"(<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g (float[2,8,64] x) => (float[2,8,64] y, float[2,8,64] f) <float[64] w> {
  two = Constant <value = float {2.0}> ()
  sq = Pow(x, two)
  ms = ReduceMean <axes = [-1]> (sq)
  eps = Constant <value = float {0.000001}> ()
  mse = Add(ms, eps)
  rms = Sqrt(mse)
  one = Constant <value = float {1.0}> ()
  inv = Div(one, rms)
  xn = Mul(x, inv)
  y = Mul(w, xn)
  f = com.microsoft.SimplifiedLayerNormalization <axis = -1,
                                                  epsilon = 0.000001> (x, w)
})");
  // Pow by the constant 2 is one mul per element: 1024; saves x only.
  OpCost Sq = costOf(M.get(), "sq");
  EXPECT_DOUBLE_EQ(Sq.Flops, 1024);
  EXPECT_EQ(saved(Sq), "x");
  // ReduceMean: 1024 adds + 16 divides.
  EXPECT_DOUBLE_EQ(costOf(M.get(), "ms").Flops, 1040);
  // Per-row pieces: 16 each; Div saves its non-constant input.
  EXPECT_DOUBLE_EQ(costOf(M.get(), "mse").Flops, 16);
  EXPECT_EQ(saved(costOf(M.get(), "mse")), "");
  EXPECT_DOUBLE_EQ(costOf(M.get(), "rms").Flops, 16);
  EXPECT_EQ(saved(costOf(M.get(), "rms")), "rms");
  EXPECT_EQ(saved(costOf(M.get(), "inv")), "rms");
  // Mul saves both non-constant inputs; the weight is a parameter.
  OpCost Xn = costOf(M.get(), "xn");
  EXPECT_DOUBLE_EQ(Xn.Flops, 1024);
  EXPECT_EQ(saved(Xn), "x,inv");
  EXPECT_EQ(saved(costOf(M.get(), "y")), "xn");
  // Sum: 1024 + 1040 + 16 + 16 + 16 + 1024 + 1024 = 4160, within 2 % of
  // the fused rule's 4 per element = 4096.
  double Pieces = 0;
  for (StringRef V : {"sq", "ms", "mse", "rms", "inv", "xn", "y"})
    Pieces += costOf(M.get(), V).Flops;
  EXPECT_DOUBLE_EQ(Pieces, 4160);
  OpCost F = costOf(M.get(), "f");
  ASSERT_TRUE(F.HasRule) << F.NoRuleReason;
  EXPECT_DOUBLE_EQ(F.Flops, 4096);
  EXPECT_EQ(saved(F), "x");
}

TEST(OpCostTest, ElementwiseFamily) {
  // Opset 20: Gelu is a default-domain op from there on.
  auto M = loadShapedModel(R"(<ir_version: 9, opset_import: ["" : 20]>
g (float[4,8] a, float[8] b, int64[4,8] i, bool[4,8] m)
  => (float[4,8] add, float[4,8] sq, float[4,8] sg, float[4,8] re,
      bool[4,8] eq, float[4,8] ci, float[4,8] wh, int64[4,8] ii,
      float[4,8] gl, float[4,8] er) {
  add = Add(a, b)
  sq = Mul(a, a)
  sg = Sigmoid(a)
  re = Relu(a)
  eq = Equal(a, b)
  ci = Cast <to = 1> (i)
  wh = Where(m, a, b)
  ii = Add(i, i)
  er = Erf(a)
  gl = Gelu <approximate = "tanh"> (a)
})");
  // Broadcast [4,8] + [8]: 32 adds; reads 32*4 + 8*4 = 160 B, writes 128.
  OpCost Add = costOf(M.get(), "add");
  EXPECT_EQ(Add.Unit, ComputeUnit::Vector);
  EXPECT_DOUBLE_EQ(Add.Flops, 32);
  EXPECT_DOUBLE_EQ(Add.BackwardFlops, 32);
  EXPECT_DOUBLE_EQ(Add.BytesRead, 160);
  EXPECT_DOUBLE_EQ(Add.BytesWritten, 128);
  EXPECT_EQ(saved(Add), "");
  EXPECT_TRUE(isElementwiseOp(*producer(*M, "add")));
  // Mul(a, a) streams a once: 128 B; backward 2 per element.
  OpCost Sq = costOf(M.get(), "sq");
  EXPECT_DOUBLE_EQ(Sq.BytesRead, 128);
  EXPECT_DOUBLE_EQ(Sq.BackwardFlops, 64);
  EXPECT_EQ(saved(Sq), "a");
  // Sigmoid: 4 per element, saves its input; Relu saves its output.
  EXPECT_DOUBLE_EQ(costOf(M.get(), "sg").Flops, 128);
  EXPECT_EQ(saved(costOf(M.get(), "sg")), "a");
  EXPECT_EQ(saved(costOf(M.get(), "re")), "re");
  // Compares have no gradient; the rate is set by the float inputs.
  OpCost Eq = costOf(M.get(), "eq");
  EXPECT_EQ(Eq.Elem, DataType::Float);
  EXPECT_DOUBLE_EQ(Eq.BackwardFlops, 0);
  // A cast from int64 has no gradient; Elem is the float result.
  OpCost Ci = costOf(M.get(), "ci");
  EXPECT_EQ(Ci.Elem, DataType::Float);
  EXPECT_DOUBLE_EQ(Ci.BackwardFlops, 0);
  // Where saves its condition.
  EXPECT_EQ(saved(costOf(M.get(), "wh")), "m");
  // Integer arithmetic: Elem i64, nothing to differentiate.
  OpCost Ii = costOf(M.get(), "ii");
  EXPECT_EQ(Ii.Elem, DataType::Int64);
  EXPECT_DOUBLE_EQ(Ii.BackwardFlops, 0);
  EXPECT_EQ(saved(Ii), "");
  // Erf: 20 per element (A&S 7.1.26); Gelu tanh form: 13.
  EXPECT_DOUBLE_EQ(costOf(M.get(), "er").Flops, 640);
  EXPECT_DOUBLE_EQ(costOf(M.get(), "gl").Flops, 416);
}

TEST(OpCostTest, Dropout) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,8] a) => (float[4,8] inf, float[4,8] tr, bool[4,8] mask) {
  inf = Dropout(a)
  ratio = Constant <value = float {0.1}> ()
  on = Constant <value = bool {1}> ()
  tr, mask = Dropout(a, ratio, on)
})");
  // Inference: the identity, free.
  OpCost I = costOf(M.get(), "inf");
  EXPECT_EQ(I.Unit, ComputeUnit::None);
  EXPECT_DOUBLE_EQ(I.BytesRead, 0);
  // Training: 4 per element, saves the mask.
  OpCost T = costOf(M.get(), "tr");
  EXPECT_EQ(T.Unit, ComputeUnit::Vector);
  EXPECT_DOUBLE_EQ(T.Flops, 128);
  EXPECT_EQ(saved(T), "mask");
}

//===----------------------------------------------------------------------===//
// Reductions, indexing, movement, pools
//===----------------------------------------------------------------------===//

TEST(OpCostTest, ReductionsAndTopK) {
  auto M2 = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,16] a, float[8,1000] x) => (float[4] s, int64[4] am,
   float[8,5] vals, int64[8,5] idx) {
  axes = Constant <value = int64[1] {1}> ()
  s = ReduceSum <keepdims = 0> (a, axes)
  am = ArgMax <axis = 1, keepdims = 0> (a)
  k = Constant <value = int64[1] {5}> ()
  vals, idx = TopK <axis = -1> (x, k)
})");
  // One add per input element: 64; backward broadcasts: 64.
  OpCost S = costOf(M2.get(), "s");
  EXPECT_DOUBLE_EQ(S.Flops, 64);
  EXPECT_DOUBLE_EQ(S.BackwardFlops, 64);
  // ArgMax: 64 compares, no gradient.
  OpCost Am = costOf(M2.get(), "am");
  EXPECT_DOUBLE_EQ(Am.Flops, 64);
  EXPECT_DOUBLE_EQ(Am.BackwardFlops, 0);
  // TopK, k = 5 of n = 1000 in 8 rows: 8 * 1000 * log2(5) = 18,575.4
  // compares; backward scatters 8 * 5 = 40 gradients at the saved indices.
  OpCost T = costOf(M2.get(), "vals");
  EXPECT_NEAR(T.Flops, 8000 * std::log2(5.0), 1e-6);
  EXPECT_NEAR(T.Flops, 18575.425, 1e-3);
  EXPECT_DOUBLE_EQ(T.BackwardFlops, 40);
  EXPECT_EQ(saved(T), "idx");
}

TEST(OpCostTest, GatherReadsOnlyTouchedRows) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64[4,128] ids, float[100,64] data, int64[10,1] at, float[10,64] upd)
  => (float[4,128,1024] e, float[100,64] sc) <float[50000,1024] table> {
  e = Gather(table, ids)
  sc = ScatterND(data, at, upd)
})");
  // 4*128 = 512 rows of 1024 floats: 512 * 1024 * 4 = 2,097,152 B, plus
  // the indices 512 * 8 = 4096 B -- not the 204,800,000 B table.
  OpCost E = costOf(M.get(), "e");
  EXPECT_EQ(E.Unit, ComputeUnit::Memory);
  EXPECT_DOUBLE_EQ(E.Flops, 0);
  EXPECT_DOUBLE_EQ(E.BytesRead, 2101248);
  EXPECT_DOUBLE_EQ(E.BytesWritten, 2097152);
  // The whole table is the node's parameter: 50000 * 1024 elements.
  EXPECT_DOUBLE_EQ(E.ParamCount, 51200000);
  EXPECT_DOUBLE_EQ(E.ParamBytes, 204800000);
  // Backward scatter-adds 512 * 1024 gradients; the indices are saved.
  EXPECT_DOUBLE_EQ(E.BackwardFlops, 524288);
  EXPECT_EQ(saved(E), "ids");
  // ScatterND in place: reads the updates (10*64*4 = 2560 B) and indices
  // (80 B), writes 2560 B, not the whole 25,600 B data.
  OpCost Sc = costOf(M.get(), "sc");
  EXPECT_DOUBLE_EQ(Sc.BytesRead, 2640);
  EXPECT_DOUBLE_EQ(Sc.BytesWritten, 2560);
  EXPECT_EQ(saved(Sc), "at");
}

TEST(OpCostTest, MovementPoolsAndResize) {
  auto M2 = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,8,8] x, float[1,1,4,4] im, float[4,8] a, float[4,8] b)
  => (float[1,4,4,4] mp, float[1,4,1,1] gap, float[1,4,8,8] bn,
      float[1,1,8,8] rz, float[4,2] sl, float[8,8] cc, float[1,256] fl)
  <float[4] sc, float[4] bi, float[4] mu, float[4] va> {
  mp = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
  gap = GlobalAveragePool(x)
  bn = BatchNormalization(x, sc, bi, mu, va)
  sz = Constant <value = int64[4] {1, 1, 8, 8}> ()
  rz = Resize <mode = "linear"> (im, , , sz)
  st = Constant <value = int64[1] {0}> ()
  en = Constant <value = int64[1] {2}> ()
  ax = Constant <value = int64[1] {1}> ()
  sl = Slice(a, st, en, ax)
  cc = Concat <axis = 0> (a, b)
  fl = Flatten(x)
})");
  // MaxPool 2x2: 4 compares per output, 1*4*4*4 = 64 outputs -> 256.
  EXPECT_DOUBLE_EQ(costOf(M2.get(), "mp").Flops, 256);
  // GlobalAveragePool: 256 adds + 4 divides.
  EXPECT_DOUBLE_EQ(costOf(M2.get(), "gap").Flops, 260);
  // Inference BatchNormalization folds to x * a + b: 2 * 256 = 512.
  EXPECT_DOUBLE_EQ(costOf(M2.get(), "bn").Flops, 512);
  // Bilinear 4x4 -> 8x8: 2 dims resized, 2^2 taps, mul + add each:
  // 2 * 4 * 64 = 512.
  OpCost Rz = costOf(M2.get(), "rz");
  EXPECT_EQ(Rz.Unit, ComputeUnit::Vector);
  EXPECT_DOUBLE_EQ(Rz.Flops, 512);
  // Slice reads only the 4x2 slice: 32 B.
  OpCost Sl = costOf(M2.get(), "sl");
  EXPECT_EQ(Sl.Unit, ComputeUnit::Memory);
  EXPECT_DOUBLE_EQ(Sl.BytesRead, 32);
  // Concat reads both inputs (2 * 128 B) and writes 256 B.
  OpCost Cc = costOf(M2.get(), "cc");
  EXPECT_DOUBLE_EQ(Cc.BytesRead, 256);
  EXPECT_DOUBLE_EQ(Cc.BytesWritten, 256);
  // Flatten is a view.
  EXPECT_EQ(costOf(M2.get(), "fl").Unit, ComputeUnit::None);
}

//===----------------------------------------------------------------------===//
// Control flow and shape ops
//===----------------------------------------------------------------------===//

TEST(OpCostTest, LoopWithKnownTripCount) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,4] x0, int64 n) => (float[4,4] x10, float[4,4] xn) <float[4,4] w> {
  trips = Constant <value = int64 {10}> ()
  cond = Constant <value = bool {1}> ()
  x10 = Loop(trips, cond, x0) <body = body1 (int64 it, bool c, float[4,4] xi)
      => (bool co, float[4,4] xo) {
    co = Identity(c)
    xo = MatMul(xi, w)
  }>
  xn = Loop(n, cond, x0) <body = body2 (int64 it, bool c, float[4,4] xi)
      => (bool co, float[4,4] xo) {
    co = Identity(c)
    xo = MatMul(xi, w)
  }>
})");
  // Body: MatMul 2 * 4 * 4 * 4 = 128 FLOPs, reads xi and w (64 + 64 B),
  // writes 64 B; Identity is free. Ten iterations: 1280 FLOPs, 1280 B
  // read, 640 B written; w counts once as the loop's parameter.
  OpCost L = costOf(M.get(), "x10");
  ASSERT_TRUE(L.HasRule) << L.NoRuleReason;
  EXPECT_EQ(L.Unit, ComputeUnit::Control);
  EXPECT_DOUBLE_EQ(L.TripCount, 10);
  EXPECT_DOUBLE_EQ(L.Flops, 1280);
  EXPECT_DOUBLE_EQ(L.BackwardFlops, 2560);
  EXPECT_DOUBLE_EQ(L.BytesRead, 1280);
  EXPECT_DOUBLE_EQ(L.BytesWritten, 640);
  EXPECT_DOUBLE_EQ(L.ParamCount, 16);
  EXPECT_EQ(L.Elem, DataType::Float);
  EXPECT_EQ(L.Note, "");
  // A trip count from a graph input is unknown: one iteration, noted.
  OpCost U = costOf(M.get(), "xn");
  ASSERT_TRUE(U.HasRule) << U.NoRuleReason;
  EXPECT_DOUBLE_EQ(U.TripCount, 1);
  EXPECT_DOUBLE_EQ(U.Flops, 128);
  EXPECT_EQ(U.Note, "trip count of Loop is not a constant; costed as 1 "
                    "iteration");
}

TEST(OpCostTest, IfTakesTheDearerBranch) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (bool c, float[4,4] x) => (float[4,4] y) {
  y = If(c) <then_branch = t () => (float[4,4] a) { a = Relu(x) },
             else_branch = e () => (float[4,4] b) { b = Sigmoid(x) }>
})");
  // Relu: 16 FLOPs; Sigmoid: 4 * 16 = 64. Bytes: 64 in, 64 out each.
  OpCost C = costOf(M.get(), "y");
  ASSERT_TRUE(C.HasRule) << C.NoRuleReason;
  EXPECT_EQ(C.Unit, ComputeUnit::Control);
  EXPECT_DOUBLE_EQ(C.Flops, 64);
  EXPECT_DOUBLE_EQ(C.BytesRead, 64);
}

TEST(OpCostTest, ShapeOps) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,4] x) => (int64[2] s, int64[2,K] nz) {
  s = Shape(x)
  nz = NonZero(x)
})");
  OpCost S = costOf(M.get(), "s");
  EXPECT_EQ(S.Unit, ComputeUnit::Control);
  EXPECT_DOUBLE_EQ(S.BytesRead, 0);
  EXPECT_DOUBLE_EQ(S.BytesWritten, 16);
  // NonZero's output size depends on the data: bounded by all 16
  // elements being non-zero, 2 x 16 int64 = 256 B.
  OpCost N = costOf(M.get(), "nz");
  ASSERT_TRUE(N.HasRule) << N.NoRuleReason;
  EXPECT_EQ(N.Unit, ComputeUnit::Control);
  EXPECT_DOUBLE_EQ(N.Flops, 16);
  EXPECT_DOUBLE_EQ(N.BytesWritten, 256);
}

TEST(OpCostTest, NoRule) {
  auto M =
      loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17, "com.foo" : 1]>
g (float[4,4] x, float[N,4] d) => (float[4,4] y, float[N,4] r) {
  y = com.foo.Bar(x)
  r = Relu(d)
})");
  OpCost Y = costOf(M.get(), "y");
  EXPECT_FALSE(Y.HasRule);
  EXPECT_EQ(Y.NoRuleReason, "no cost rule for op 'com.foo.Bar'");
  EXPECT_DOUBLE_EQ(Y.Flops, 0);
  OpCost R = costOf(M.get(), "r");
  EXPECT_FALSE(R.HasRule);
  EXPECT_EQ(R.NoRuleReason, "shape of 'd' is not static (f32[N,4]) at Relu");
}

TEST(OpCostTest, ScanMultipliesItsBody) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4] h0, float[6,4] xs) => (float[4] hn, float[6,4] ys) {
  hn, ys = Scan(h0, xs) <num_scan_inputs = 1,
      body = step (float[4] h, float[4] x) => (float[4] ho, float[4] y) {
    ho = Add(h, x)
    y = Tanh(ho)
  }>
})");
  // One step: Add 4 + Tanh 5 * 4 = 24 FLOPs; 6 steps along axis 0: 144.
  // Bytes per step: Add reads 32 and writes 16, Tanh reads 16 and writes
  // 16: 80 B; 6 steps: 480 B.
  OpCost C = costOf(M.get(), "hn");
  ASSERT_TRUE(C.HasRule) << C.NoRuleReason;
  EXPECT_EQ(C.Unit, ComputeUnit::Control);
  EXPECT_DOUBLE_EQ(C.TripCount, 6);
  EXPECT_DOUBLE_EQ(C.Flops, 144);
  EXPECT_DOUBLE_EQ(C.BytesRead + C.BytesWritten, 480);
}

TEST(OpCostTest, BatchNormalizationTraining) {
  auto M = loadShapedModel(R"(<ir_version: 8, opset_import: ["" : 15]>
g (float[2,4,8,8] x) => (float[2,4,8,8] y, float[4] rm, float[4] rv)
  <float[4] sc, float[4] bi, float[4] mu, float[4] va> {
  y, rm, rv = BatchNormalization <training_mode = 1> (x, sc, bi, mu, va)
})");
  // Batch statistics as LayerNorm: 7 per element, 512 elements = 3584;
  // backward 13 per element; the input is saved.
  OpCost C = costOf(M.get(), "y");
  ASSERT_TRUE(C.HasRule) << C.NoRuleReason;
  EXPECT_DOUBLE_EQ(C.Flops, 3584);
  EXPECT_DOUBLE_EQ(C.BackwardFlops, 6656);
  EXPECT_EQ(saved(C), "x");
}

/// Every op the PyTorch exporter wrote into the example models has a rule:
/// after binding batch = 2 and seq = 16 and inferring shapes, a node may
/// lack a rule only because a shape is still not static (shape arithmetic
/// that fold-shape-arith resolves), never because its op is unknown.
TEST(OpCostTest, ExampleModelsHaveRules) {
  for (const char *Name : {"gpt2-tiny", "llama-tiny", "mlp-tiny"}) {
    std::string Path =
        std::string(LOOM_SOURCE_DIR) + "/examples/models/" + Name + ".onnx";
    Expected<std::unique_ptr<Model>> M = importModelFile(Path);
    ASSERT_TRUE(bool(M)) << toString(M.takeError());
    for (Value *In : (*M)->getGraph().getInputs())
      for (Dim &D : In->Type.Dims)
        if (!D.isStatic())
          D = Dim(D.Symbol == "batch" ? 2 : 16);
    Expected<unsigned> Changed = inferShapes(**M);
    ASSERT_TRUE(bool(Changed)) << toString(Changed.takeError());
    unsigned Costed = 0;
    for (const auto &N : (*M)->getGraph().getNodes()) {
      OpCost C = computeOpCost(*N, (*M)->getOpsetVersion(""));
      Costed += C.HasRule;
      EXPECT_TRUE(C.HasRule || StringRef(C.NoRuleReason).startswith("shape of"))
          << Name << ": " << C.NoRuleReason;
    }
    EXPECT_GT(Costed, 0u) << Name;
  }
}

//===----------------------------------------------------------------------===//
// Self-check: a LLaMA-7B layer
//===----------------------------------------------------------------------===//

// One decoder layer of LLaMA-7B (h = 4096, ffn = 11008, 32 heads of 128,
// s = 2048, b = 1) as exporters write it: decomposed RMSNorm, rotary
// embedding with rotate-half, causal mask added to the scores, SwiGLU.
// Weights are shape-only parameters. The text syntax has no float16
// literals, so the scalar constants are f32 and cast (Pow takes an f32
// exponent as it is).
const char *const LlamaLayer = R"(<ir_version: 8, opset_import: ["" : 17]>
llama_layer (float16[1,2048,4096] x, float16[1,1,2048,2048] mask)
  => (float16[1,2048,4096] y)
  <float16[4096] g1, float16[4096] g2,
   float16[4096,4096] wq, float16[4096,4096] wk, float16[4096,4096] wv,
   float16[4096,4096] wo, float16[4096,11008] wg, float16[4096,11008] wu,
   float16[11008,4096] wd, float16[1,1,2048,128] cos, float16[1,1,2048,128] sin>
{
  two = Constant <value = float {2.0}> ()
  eps32 = Constant <value = float {0.000001}> ()
  eps = Cast <to = 10> (eps32)
  one32 = Constant <value = float {1.0}> ()
  one = Cast <to = 10> (one32)
  bshd = Constant <value = int64[4] {1, 2048, 32, 128}> ()
  bsh = Constant <value = int64[3] {1, 2048, 4096}> ()
  lo = Constant <value = int64[1] {0}> ()
  mid = Constant <value = int64[1] {64}> ()
  hi = Constant <value = int64[1] {128}> ()
  last = Constant <value = int64[1] {-1}> ()
  sqrtd32 = Constant <value = float {11.3137}> ()
  sqrtd = Cast <to = 10> (sqrtd32)

  sq1 = Pow(x, two)
  ms1 = ReduceMean <axes = [-1]> (sq1)
  mse1 = Add(ms1, eps)
  rms1 = Sqrt(mse1)
  inv1 = Div(one, rms1)
  xn1 = Mul(x, inv1)
  h1 = Mul(g1, xn1)

  q = MatMul(h1, wq)
  k = MatMul(h1, wk)
  v = MatMul(h1, wv)
  q4 = Reshape(q, bshd)
  k4 = Reshape(k, bshd)
  v4 = Reshape(v, bshd)
  qt = Transpose <perm = [0, 2, 1, 3]> (q4)
  kt = Transpose <perm = [0, 2, 1, 3]> (k4)
  vt = Transpose <perm = [0, 2, 1, 3]> (v4)

  q1 = Slice(qt, lo, mid, last)
  q2 = Slice(qt, mid, hi, last)
  nq2 = Neg(q2)
  qrot = Concat <axis = -1> (nq2, q1)
  qc = Mul(qt, cos)
  qs = Mul(qrot, sin)
  qr = Add(qc, qs)
  k1 = Slice(kt, lo, mid, last)
  k2 = Slice(kt, mid, hi, last)
  nk2 = Neg(k2)
  krot = Concat <axis = -1> (nk2, k1)
  kc = Mul(kt, cos)
  ks = Mul(krot, sin)
  kr = Add(kc, ks)

  ktt = Transpose <perm = [0, 1, 3, 2]> (kr)
  s = MatMul(qr, ktt)
  ss = Div(s, sqrtd)
  sm = Add(ss, mask)
  p = Softmax <axis = -1> (sm)
  o = MatMul(p, vt)
  ot = Transpose <perm = [0, 2, 1, 3]> (o)
  o3 = Reshape(ot, bsh)
  a = MatMul(o3, wo)
  r1 = Add(x, a)

  sq2 = Pow(r1, two)
  ms2 = ReduceMean <axes = [-1]> (sq2)
  mse2 = Add(ms2, eps)
  rms2 = Sqrt(mse2)
  inv2 = Div(one, rms2)
  xn2 = Mul(r1, inv2)
  h2 = Mul(g2, xn2)

  gate = MatMul(h2, wg)
  sig = Sigmoid(gate)
  silu = Mul(gate, sig)
  up = MatMul(h2, wu)
  gu = Mul(silu, up)
  down = MatMul(gu, wd)
  y = Add(r1, down)
})";

TEST(OpCostTest, LlamaLayerSelfCheck) {
  auto M = loadShapedModel(LlamaLayer);
  ASSERT_TRUE(M);
  int64_t Opset = M->getOpsetVersion("");
  double CubeFlops = 0, AllFlops = 0, CubeParams = 0;
  for (const auto &N : M->getGraph().getNodes()) {
    OpCost C = computeOpCost(*N, Opset);
    ASSERT_TRUE(C.HasRule) << N->getOpType().str() << ": " << C.NoRuleReason;
    AllFlops += C.Flops;
    if (C.Unit == ComputeUnit::Cube) {
      CubeFlops += C.Flops;
      CubeParams += C.ParamCount;
    }
  }
  // Matmul parameters: 4 h^2 + 3 h ffn = 4 * 16,777,216 + 3 * 45,088,768
  // = 67,108,864 + 135,266,304 = 202,375,168.
  const double H = 4096, Ffn = 11008, S = 2048, B = 1;
  const double Params = 4 * H * H + 3 * H * Ffn;
  EXPECT_DOUBLE_EQ(Params, 202375168);
  EXPECT_DOUBLE_EQ(CubeParams, Params);
  // 2 * params * tokens = 2 * 202,375,168 * 2048 = 828,928,688,128, plus
  // QK^T and AV: 2 * 2 * b * s^2 * h = 68,719,476,736. Exact: every
  // matmul FLOP is accounted for, and nothing else runs on the cube.
  const double Expected = 2 * Params * B * S + 2 * 2 * B * S * S * H;
  EXPECT_DOUBLE_EQ(Expected, 897648164864.0);
  EXPECT_DOUBLE_EQ(CubeFlops, Expected);
  // The element-wise work (norms, rotary, mask, softmax, SwiGLU,
  // residuals) is O(s*h + heads*s^2 + s*ffn) at a few FLOPs per element
  // against the matmuls' O(s*h^2 + s^2*h): per token at most ~10 * (h +
  // ffn + heads * s) = 806,400 against 2 * params + 4 * s * h =
  // 438,304,768, i.e. < 0.2 %. Allow 0.5 %.
  EXPECT_GT(AllFlops, Expected);
  EXPECT_LT(AllFlops, Expected * 1.005);
  // Exactly, by hand: two RMSNorms 2 * (4 s h + 4 s) = 67,125,248 (Pow,
  // ReduceMean, two Muls per element; ReduceMean's divide, Add, Sqrt, Div
  // per row); rotary 2 * 3.5 s h = 58,720,256 (Neg on half, two Muls, an
  // Add); scale, mask and softmax (1 + 1 + 5) * 32 * s^2 = 939,524,096;
  // residuals 2 s h = 16,777,216; SwiGLU (4 + 1 + 1) s ffn = 135,266,304;
  // the three scalar Casts: 3. Sum: 1,217,413,123, 0.136 % of the
  // matmuls.
  EXPECT_DOUBLE_EQ(AllFlops - Expected, 1217413123.0);
}

} // namespace
