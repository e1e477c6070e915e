//===- FoldShapeArithTest.cpp - Tests for fold-shape-arith ----------------===//
//
// Runs bind-symbols, infer-shapes and fold-shape-arith on small text models
// and checks the constants the folded nodes became, value by value.
//
//===----------------------------------------------------------------------===//

#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"

#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace loom;
using namespace llvm;

namespace {

/// Runs the three passes on \p Text; null (and a test failure) on error.
std::unique_ptr<Model> fold(StringRef Text, Optional<int64_t> Batch = None,
                            std::vector<std::string> *Warnings = nullptr) {
  Expected<std::unique_ptr<Model>> M =
      importModelFromText(Text, "fold.onnxtxt");
  EXPECT_TRUE(bool(M)) << (M ? "" : toString(M.takeError()));
  if (!M)
    return nullptr;
  CompilationUnit CU;
  CU.M = std::move(*M);
  CU.Opts.Batch = Batch;
  PassManager PM(getRegisteredPasses());
  EXPECT_FALSE(bool(PM.parsePipeline("bind-symbols,infer-shapes,"
                                     "fold-shape-arith")));
  PassInstrumentation PI;
  PI.VerifyEach = true;
  std::string Out, Report;
  raw_string_ostream OS(Out), RS(Report);
  if (Error E = PM.run(CU, PI, OS, RS)) {
    ADD_FAILURE() << toString(std::move(E));
    return nullptr;
  }
  if (Warnings)
    *Warnings = CU.getWarnings();
  return std::move(CU.M);
}

/// The tensor of the Constant node defining \p Name; fails the test if
/// \p Name is not a folded constant.
const Tensor *constantOf(const Model &M, StringRef Name) {
  const Value *V = M.getGraph().lookup(Name);
  if (!V || !V->getDefiningNode()) {
    ADD_FAILURE() << "no node result '" << Name.str() << "'";
    return nullptr;
  }
  const Node *N = V->getDefiningNode();
  const Attribute *A = N->getAttribute("value");
  if (N->getOpType() != "Constant" || !A || A->K != Attribute::Kind::Tensor) {
    ADD_FAILURE() << "'" << Name.str() << "' is computed by "
                  << N->getOpType().str() << ", not folded";
    return nullptr;
  }
  return &A->Ts[0];
}

std::vector<int64_t> ints(const Model &M, StringRef Name) {
  const Tensor *T = constantOf(M, Name);
  if (!T)
    return {};
  Expected<std::vector<int64_t>> V = T->getIntValues();
  EXPECT_TRUE(bool(V)) << (V ? "" : toString(V.takeError()));
  return V ? *V : std::vector<int64_t>();
}

std::vector<double> floats(const Model &M, StringRef Name) {
  const Tensor *T = constantOf(M, Name);
  if (!T)
    return {};
  Expected<std::vector<double>> V = T->getFloatValues();
  EXPECT_TRUE(bool(V)) << (V ? "" : toString(V.takeError()));
  return V ? *V : std::vector<double>();
}

std::string typeOf(const Model &M, StringRef Name) {
  const Value *V = M.getGraph().lookup(Name);
  return V ? V->Type.str() : "<none>";
}

bool isFolded(const Model &M, StringRef Name) {
  const Value *V = M.getGraph().lookup(Name);
  return V && V->getDefiningNode() &&
         V->getDefiningNode()->getOpType() == "Constant";
}

using I = std::vector<int64_t>;
using F = std::vector<double>;

TEST(FoldShapeArithTest, ShapeOps) {
  // x : f32[2,8,64,3].
  std::unique_ptr<Model> M = fold(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, 8, 64, 3] x)
  => (int64[?] s, int64[?] mid, int64 n, int64 last, int64[?] neg)
{
  s = Shape(x)
  mid = Shape <start = 1, end = -1> (x)
  n = Size(x)
  m1 = Constant <value = int64 {-1}> ()
  last = Gather(s, m1)
  two = Constant <value = int64[2] {0, -2}> ()
  neg = Gather(s, two)
}
)",
                                  2);
  ASSERT_TRUE(M);
  EXPECT_EQ(ints(*M, "s"), (I{2, 8, 64, 3}));
  // Shape with start 1, end -1 (= 3): dims 1 and 2.
  EXPECT_EQ(ints(*M, "mid"), (I{8, 64}));
  EXPECT_EQ(typeOf(*M, "mid"), "i64[2]");
  // 2 * 8 * 64 * 3 = 3072 elements.
  EXPECT_EQ(ints(*M, "n"), (I{3072}));
  EXPECT_EQ(typeOf(*M, "n"), "i64[]");
  // Index -1 is the last dim; indices [0, -2] pick dims 0 and 2.
  EXPECT_EQ(ints(*M, "last"), (I{3}));
  EXPECT_EQ(ints(*M, "neg"), (I{2, 64}));
}

TEST(FoldShapeArithTest, IntegerArithmetic) {
  std::unique_ptr<Model> M = fold(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (int64[?] div, int64[?] mod, int64[?] fmod, int64[?] pow,
                   int64[?] neg, int64[?] abs, int64[?] mx, int64[?] mn,
                   int64[?] sub)
{
  a = Constant <value = int64[4] {7, -7, 7, -7}> ()
  b = Constant <value = int64[4] {2, 2, -2, -2}> ()
  div = Div(a, b)
  mod = Mod(a, b)
  fmod = Mod <fmod = 1> (a, b)
  three = Constant <value = int64 {3}> ()
  pow = Pow(b, three)
  neg = Neg(a)
  abs = Abs(a)
  c = Constant <value = int64[4] {0, 0, 9, 9}> ()
  mx = Max(a, b, c)
  mn = Min(a, b, c)
  sub = Sub(a, three)
}
)");
  ASSERT_TRUE(M);
  // Integer division truncates towards zero: 7/2 = 3, -7/2 = -3,
  // 7/-2 = -3, -7/-2 = 3.
  EXPECT_EQ(ints(*M, "div"), (I{3, -3, -3, 3}));
  // Mod takes the divisor's sign: 7 mod 2 = 1, -7 mod 2 = 1, 7 mod -2 = -1,
  // -7 mod -2 = -1. fmod takes the dividend's: 1, -1, 1, -1.
  EXPECT_EQ(ints(*M, "mod"), (I{1, 1, -1, -1}));
  EXPECT_EQ(ints(*M, "fmod"), (I{1, -1, 1, -1}));
  // 2^3 = 8, (-2)^3 = -8.
  EXPECT_EQ(ints(*M, "pow"), (I{8, 8, -8, -8}));
  EXPECT_EQ(ints(*M, "neg"), (I{-7, 7, -7, 7}));
  EXPECT_EQ(ints(*M, "abs"), (I{7, 7, 7, 7}));
  // Element-wise over three inputs: max(7,2,0) = 7, max(-7,2,0) = 2,
  // max(7,-2,9) = 9, max(-7,-2,9) = 9; min: 0, -7, -2, -7.
  EXPECT_EQ(ints(*M, "mx"), (I{7, 2, 9, 9}));
  EXPECT_EQ(ints(*M, "mn"), (I{0, -7, -2, -7}));
  // Broadcast of a scalar: a - 3.
  EXPECT_EQ(ints(*M, "sub"), (I{4, -10, 4, -10}));
}

TEST(FoldShapeArithTest, ComparisonsAndLogic) {
  std::unique_ptr<Model> M = fold(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (bool[?] eq, bool[?] lt, bool[?] ge, bool[?] nt,
                   bool[?] an, bool[?] o, bool[?] xo, int64[?] w)
{
  a = Constant <value = int64[3] {1, 2, 3}> ()
  b = Constant <value = int64[3] {3, 2, 1}> ()
  eq = Equal(a, b)
  lt = Less(a, b)
  ge = GreaterOrEqual(a, b)
  nt = Not(eq)
  an = And(lt, nt)
  o = Or(lt, eq)
  xo = Xor(lt, nt)
  w = Where(lt, a, b)
}
)");
  ASSERT_TRUE(M);
  // a = [1, 2, 3], b = [3, 2, 1].
  EXPECT_EQ(ints(*M, "eq"), (I{0, 1, 0}));
  EXPECT_EQ(ints(*M, "lt"), (I{1, 0, 0}));
  EXPECT_EQ(ints(*M, "ge"), (I{0, 1, 1}));
  EXPECT_EQ(ints(*M, "nt"), (I{1, 0, 1}));
  EXPECT_EQ(ints(*M, "an"), (I{1, 0, 0}));
  EXPECT_EQ(ints(*M, "o"), (I{1, 1, 0}));
  EXPECT_EQ(ints(*M, "xo"), (I{0, 0, 1}));
  EXPECT_EQ(typeOf(*M, "xo"), "bool[3]");
  // min(a, b) through Where(a < b, a, b) = [1, 2, 1].
  EXPECT_EQ(ints(*M, "w"), (I{1, 2, 1}));
}

TEST(FoldShapeArithTest, FloatArithmetic) {
  std::unique_ptr<Model> M = fold(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[?] q, float[?] r, float[?] s, float[?] fl, float[?] ce)
{
  a = Constant <value = float[3] {1.0, 4.0, -2.5}> ()
  b = Constant <value = float[3] {4.0, 2.0, 0.5}> ()
  q = Div(a, b)
  r = Reciprocal(b)
  sb = Abs(a)
  s = Sqrt(sb)
  fl = Floor(a)
  ce = Ceil(a)
}
)");
  ASSERT_TRUE(M);
  // 1/4 = 0.25, 4/2 = 2, -2.5/0.5 = -5: all exact in f32.
  EXPECT_EQ(floats(*M, "q"), (F{0.25, 2, -5}));
  EXPECT_EQ(floats(*M, "r"), (F{0.25, 0.5, 2}));
  // sqrt(1) = 1, sqrt(4) = 2, sqrt(2.5) as an f32.
  F S = floats(*M, "s");
  ASSERT_EQ(S.size(), 3u);
  EXPECT_EQ(S[0], 1.0);
  EXPECT_EQ(S[1], 2.0);
  EXPECT_EQ(S[2], (double)std::sqrt(2.5f));
  EXPECT_EQ(floats(*M, "fl"), (F{1, 4, -3}));
  EXPECT_EQ(floats(*M, "ce"), (F{1, 4, -2}));
}

TEST(FoldShapeArithTest, CastsTakeTheTargetType) {
  std::unique_ptr<Model> M = fold(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (bool[?] b, int64[?] i, int32[?] i32, float[?] back,
                   int64[?] wrapped, float h)
{
  f = Constant <value = float[4] {0.0, 2.75, -2.75, 0.5}> ()
  b = Cast <to = 9> (f)
  i = Cast <to = 7> (f)
  i32 = Cast <to = 6> (f)
  big = Constant <value = int64[2] {300, -1}> ()
  u8 = Cast <to = 2> (big)
  wrapped = Cast <to = 7> (u8)
  tenth = Constant <value = float {0.1}> ()
  half = Cast <to = 10> (tenth)
  h = Cast <to = 1> (half)
  back = Cast <to = 1> (i)
}
)");
  ASSERT_TRUE(M);
  // Non-zero is true.
  EXPECT_EQ(ints(*M, "b"), (I{0, 1, 1, 1}));
  // Float to integer truncates towards zero.
  EXPECT_EQ(ints(*M, "i"), (I{0, 2, -2, 0}));
  EXPECT_EQ(ints(*M, "i32"), (I{0, 2, -2, 0}));
  EXPECT_EQ(typeOf(*M, "i32"), "i32[4]");
  EXPECT_EQ(floats(*M, "back"), (F{0, 2, -2, 0}));
  // Cast to uint8 wraps modulo 256: 300 -> 44, -1 -> 255; widening back
  // to int64 keeps those values.
  EXPECT_EQ(ints(*M, "wrapped"), (I{44, 255}));
  // 0.1f through f16 and back: the nearest f16 to 0.1 is
  // 1638 * 2^-14 = 0.0999755859375 (0x2E66).
  EXPECT_EQ(floats(*M, "h"), (F{0.0999755859375}));
}

TEST(FoldShapeArithTest, MovementOps) {
  std::unique_ptr<Model> M = fold(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (int64[?, ?] cat1, int64[?, ?] tp, int64[?, ?] tile,
                   int64[?, ?, ?] rs, int64[?, ?] ex, int64[?, ?] nz,
                   int64[?, ?] gat)
{
  a = Constant <value = int64[2, 2] {1, 2, 3, 4}> ()
  b = Constant <value = int64[2, 1] {5, 6}> ()
  cat1 = Concat <axis = 1> (a, b)
  tp = Transpose <perm = [1, 0]> (cat1)
  reps = Constant <value = int64[2] {1, 2}> ()
  tile = Tile(b, reps)
  shape = Constant <value = int64[3] {0, -1, 1}> ()
  rs = Reshape(cat1, shape)
  tgt = Constant <value = int64[2] {2, 3}> ()
  col = Constant <value = int64[2, 1] {7, 8}> ()
  ex = Expand(col, tgt)
  mask = Constant <value = int64[2, 3] {0, 5, 0, 1, 0, 2}> ()
  nz = NonZero(mask)
  idx = Constant <value = int64[2] {1, 0}> ()
  gat = Gather <axis = 1> (a, idx)
}
)");
  ASSERT_TRUE(M);
  // [[1, 2, 5], [3, 4, 6]].
  EXPECT_EQ(ints(*M, "cat1"), (I{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(typeOf(*M, "cat1"), "i64[2,3]");
  // Transposed: [[1, 3], [2, 4], [5, 6]].
  EXPECT_EQ(ints(*M, "tp"), (I{1, 3, 2, 4, 5, 6}));
  EXPECT_EQ(typeOf(*M, "tp"), "i64[3,2]");
  // Tile [[5], [6]] by [1, 2]: [[5, 5], [6, 6]].
  EXPECT_EQ(ints(*M, "tile"), (I{5, 5, 6, 6}));
  // Reshape [2,3] to [0, -1, 1]: 0 copies dim 0 (2), -1 = 6 / (2 * 1) = 3.
  EXPECT_EQ(typeOf(*M, "rs"), "i64[2,3,1]");
  EXPECT_EQ(ints(*M, "rs"), (I{1, 2, 5, 3, 4, 6}));
  // Expand [[7], [8]] to [2, 3]: [[7, 7, 7], [8, 8, 8]].
  EXPECT_EQ(ints(*M, "ex"), (I{7, 7, 7, 8, 8, 8}));
  // Non-zeros of [[0, 5, 0], [1, 0, 2]] at (0,1), (1,0), (1,2): rows
  // [0, 1, 1], columns [1, 0, 2].
  EXPECT_EQ(typeOf(*M, "nz"), "i64[2,3]");
  EXPECT_EQ(ints(*M, "nz"), (I{0, 1, 1, 1, 0, 2}));
  // Columns 1 and 0 of [[1, 2], [3, 4]]: [[2, 1], [4, 3]].
  EXPECT_EQ(ints(*M, "gat"), (I{2, 1, 4, 3}));
}

TEST(FoldShapeArithTest, TriluAndReductions) {
  std::unique_ptr<Model> M = fold(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (int64[?, ?] up, int64[?, ?] low, int64[?] prod,
                   int64[?, ?] sum0, int64 all, int64[?] mx)
{
  a = Constant <value = int64[3, 3] {1, 2, 3, 4, 5, 6, 7, 8, 9}> ()
  one = Constant <value = int64 {1}> ()
  up = Trilu(a, one)
  zero = Constant <value = int64 {0}> ()
  low = Trilu <upper = 0> (a, zero)
  prod = ReduceProd <keepdims = 0, axes = [1]> (a)
  ax0 = Constant <value = int64[1] {0}> ()
  sum0 = ReduceSum(a, ax0)
  all = ReduceSum <keepdims = 0> (a)
  mx = ReduceMax <keepdims = 0, axes = [-1]> (a)
}
)");
  ASSERT_TRUE(M);
  // Strictly above the diagonal (k = 1): [[0, 2, 3], [0, 0, 6], [0, 0, 0]].
  EXPECT_EQ(ints(*M, "up"), (I{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  // On and below the diagonal: [[1, 0, 0], [4, 5, 0], [7, 8, 9]].
  EXPECT_EQ(ints(*M, "low"), (I{1, 0, 0, 4, 5, 0, 7, 8, 9}));
  // Row products: 1*2*3 = 6, 4*5*6 = 120, 7*8*9 = 504.
  EXPECT_EQ(ints(*M, "prod"), (I{6, 120, 504}));
  // ReduceSum (opset 13: axes is an input) over axis 0, keepdims: [1, 3]
  // of column sums 1+4+7 = 12, 15, 18.
  EXPECT_EQ(typeOf(*M, "sum0"), "i64[1,3]");
  EXPECT_EQ(ints(*M, "sum0"), (I{12, 15, 18}));
  // No axes: everything, 45.
  EXPECT_EQ(ints(*M, "all"), (I{45}));
  EXPECT_EQ(ints(*M, "mx"), (I{3, 6, 9}));
}

TEST(FoldShapeArithTest, NeedsShapeInferenceBetweenRounds) {
  // The second Shape can only fold once the Reshape's target folded and
  // shape inference made the Reshape result static: two rounds.
  // x : f32[2,12]; target = Concat(Shape(x)[0], [3], [-1]) = [2, 3, -1];
  // r : f32[2,3,4]; Shape(r)[2] = 4.
  std::unique_ptr<Model> M = fold(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, 12] x) => (float[?, ?, ?] r, int64 d)
{
  s = Shape(x)
  b = Slice(s, z, o)
  z = Constant <value = int64[1] {0}> ()
  o = Constant <value = int64[1] {1}> ()
  three = Constant <value = int64[1] {3}> ()
  rest = Constant <value = int64[1] {-1}> ()
  t = Concat <axis = 0> (b, three, rest)
  r = Reshape(x, t)
  s2 = Shape(r)
  two = Constant <value = int64 {2}> ()
  d = Gather(s2, two)
}
)",
                                  2);
  ASSERT_TRUE(M);
  EXPECT_EQ(ints(*M, "t"), (I{2, 3, -1}));
  EXPECT_EQ(typeOf(*M, "r"), "f32[2,3,4]");
  EXPECT_EQ(ints(*M, "d"), (I{4}));
  // Dead nodes are gone: Reshape and the two constants remain.
  const Graph &G = M->getGraph();
  ASSERT_EQ(G.getNumNodes(), 3u);
  EXPECT_EQ(G.getNodes()[1]->getOpType(), "Reshape");
}

TEST(FoldShapeArithTest, LeavesNonConstantsAlone) {
  std::vector<std::string> Warnings;
  // Overridable parameters (text-syntax initializers are also graph
  // inputs) are not constants; results over 65536 elements stay
  // computations; data-dependent shapes stay dynamic, with a warning.
  std::unique_ptr<Model> M = fold(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x, int64[2] target = {4, 2})
  => (int64[?] t2, float[?, ?] big, int64[?, ?] nz)
{
  one = Constant <value = int64 {1}> ()
  t2 = Add(target, one)
  bs = Constant <value = int64[2] {257, 256}> ()
  big = ConstantOfShape(bs)
  nz = NonZero(x)
}
)",
                                  None, &Warnings);
  ASSERT_TRUE(M);
  EXPECT_FALSE(isFolded(*M, "t2"));
  // 257 * 256 = 65792 > 65536.
  EXPECT_FALSE(isFolded(*M, "big"));
  EXPECT_EQ(typeOf(*M, "big"), "f32[257,256]");
  EXPECT_FALSE(isFolded(*M, "nz"));
  ASSERT_EQ(Warnings.size(), 1u);
  EXPECT_EQ(Warnings[0], "fold-shape-arith: 1 value(s) keep a non-static "
                         "shape, first 'nz' of node '%nz' (NonZero)");
}

TEST(FoldShapeArithTest, FoldsInsideSubgraphs) {
  // The then-branch computes Shape of the outer x: it folds there.
  std::unique_ptr<Model> M = fold(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (bool c, float[batch, 5] x) => (int64[?] y)
{
  y = If (c) <
    then_branch = then_g () => (int64[2] a) { a = Shape(x) },
    else_branch = else_g () => (int64[2] b) {
      b = Constant <value = int64[2] {0, 0}> ()
    }
  >
}
)",
                                  3);
  ASSERT_TRUE(M);
  const Node &If = *M->getGraph().getNodes()[0];
  ASSERT_EQ(If.getOpType(), "If");
  const Graph &Then = *If.getAttribute("then_branch")->Gs[0];
  ASSERT_EQ(Then.getNumNodes(), 1u);
  const Node &A = *Then.getNodes()[0];
  ASSERT_EQ(A.getOpType(), "Constant");
  // Shape of x : f32[3,5].
  EXPECT_EQ(cantFail(A.getAttribute("value")->Ts[0].getIntValues()), (I{3, 5}));
}

TEST(FoldShapeArithTest, ConstantAttributeFormsAreNormalized) {
  // value_int / value_ints / value_float(s) Constants become tensor
  // Constants, so later passes see one form.
  std::unique_ptr<Model> M = fold(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (int64 a, int64[?] b, float c, float[?] d)
{
  a = Constant <value_int = 5> ()
  b = Constant <value_ints = [1, 2]> ()
  c = Constant <value_float = 0.5> ()
  d = Constant <value_floats = [0.25, 4.0]> ()
}
)");
  ASSERT_TRUE(M);
  EXPECT_EQ(ints(*M, "a"), (I{5}));
  EXPECT_EQ(typeOf(*M, "a"), "i64[]");
  EXPECT_EQ(ints(*M, "b"), (I{1, 2}));
  EXPECT_EQ(floats(*M, "c"), (F{0.5}));
  EXPECT_EQ(floats(*M, "d"), (F{0.25, 4}));
  EXPECT_EQ(typeOf(*M, "d"), "f32[2]");
}

} // namespace
