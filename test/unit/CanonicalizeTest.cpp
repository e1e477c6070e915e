//===- CanonicalizeTest.cpp - Writings of one block reach one form --------===//
//
// The property canonicalize exists for: different writings of the same
// computation (what exporters and hand-written modules produce) reach the
// same canonical form, as StructuralHash sees it; and before canonicalize
// they do not (so the property is the pass's doing).
//
//===----------------------------------------------------------------------===//

#include "RunPipeline.h"
#include "loom/IR/StructuralHash.h"
#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

/// A one-head attention scoring block over x : f32[2, 8, 16]:
/// softmax((x Wq) (x Wk)^T / 4) (x Wv). \p Writing picks how it is spelled.
std::string makeBlock(unsigned Writing) {
  std::string Decls = "<float[16,16] wq, float[16,16] wk, float[16,16] wv";
  std::string Body;
  // Weights: read directly, or (1) deduplicated by the exporter into
  // Identity reads of equal parameters.
  std::string Wk = "wk", Wv = "wv";
  if (Writing == 1) {
    Body += "  wk2 = Identity (wk)\n  wv2 = Identity (wv)\n";
    Wk = "wk2";
    Wv = "wv2";
  }
  // The input: as it is, (2) through an Identity, (3) through a Reshape
  // chain that ends where it began.
  std::string X = "x";
  if (Writing == 2) {
    Body += "  xi = Identity (x)\n";
    X = "xi";
  } else if (Writing == 3) {
    Body += "  s1 = Constant <value = int64[2] {16, 16}> ()\n"
            "  x1 = Reshape (x, s1)\n"
            "  s2 = Constant <value = int64[3] {2, 8, 16}> ()\n"
            "  x2 = Reshape (x1, s2)\n";
    X = "x2";
  }
  Body += "  q = MatMul (" + X + ", wq)\n";
  Body += "  k = MatMul (" + X + ", " + Wk + ")\n";
  Body += "  v = MatMul (" + X + ", " + Wv + ")\n";
  // k^T: one Transpose, or (4) two that compose to it.
  if (Writing == 4)
    Body += "  ka = Transpose <perm = [1, 0, 2]> (k)\n"
            "  kt = Transpose <perm = [1, 2, 0]> (ka)\n";
  else
    Body += "  kt = Transpose <perm = [0, 2, 1]> (k)\n";
  Body += "  s = MatMul (q, kt)\n";
  // The scale: Mul by 0.25, or (5) Div by 4.
  if (Writing == 5)
    Body += "  c = Constant <value = float {4.0}> ()\n  z = Div (s, c)\n";
  else
    Body += "  c = Constant <value = float {0.25}> ()\n  z = Mul (s, c)\n";
  Body += "  p = Softmax <axis = -1> (z)\n  y = MatMul (p, v)\n";
  return "<ir_version: 8, opset_import: [\"\" : 17]>\n"
         "g (float[2,8,16] x) => (float[2,8,16] y)\n" +
         Decls + ">\n{\n" + Body + "}\n";
}

uint64_t hashAfter(const std::string &Text, StringRef Pipeline) {
  CompilationUnit CU;
  auto M = importModelFromText(Text, "model.onnxtxt");
  EXPECT_TRUE(!!M) << (M ? "" : toString(M.takeError()));
  if (!M)
    return 0;
  CU.M = std::move(*M);
  runPipeline(CU, Pipeline);
  std::vector<const Node *> Nodes;
  for (const auto &N : CU.M->getGraph().getNodes())
    Nodes.push_back(N.get());
  return hashStructure(Nodes).Hash;
}

TEST(CanonicalizeTest, WritingsOfOneBlockReachOneForm) {
  constexpr unsigned Writings = 6;
  uint64_t Canon0 = hashAfter(makeBlock(0), "infer-shapes,canonicalize");
  for (unsigned W = 1; W < Writings; ++W) {
    SCOPED_TRACE("writing " + std::to_string(W));
    // Each writing differs from writing 0 as written ...
    EXPECT_NE(hashAfter(makeBlock(0), "infer-shapes"),
              hashAfter(makeBlock(W), "infer-shapes"));
    // ... and not once canonical.
    EXPECT_EQ(Canon0, hashAfter(makeBlock(W), "infer-shapes,canonicalize"));
  }
}

TEST(CanonicalizeTest, StructureIgnoresNamesAndWeightIdentity) {
  // The same block under other value names, with all three projections
  // reading one shared weight: the structure is the same (weights count
  // by their type, not by which initializer they are).
  std::string Renamed = makeBlock(0);
  for (auto [From, To] : {std::pair<std::string, std::string>{" q ", " query "},
                          {"(q,", "(query,"},
                          {"wk)", "wq)"},
                          {"wv)", "wq)"}}) {
    size_t Pos;
    while ((Pos = Renamed.find(From)) != std::string::npos)
      Renamed.replace(Pos, From.size(), To);
  }
  EXPECT_EQ(hashAfter(makeBlock(0), "infer-shapes,canonicalize"),
            hashAfter(Renamed, "infer-shapes,canonicalize"));
}

TEST(CanonicalizeTest, DifferentComputationsDiffer) {
  // A different op (Relu instead of Softmax) is a different structure.
  std::string Relu = makeBlock(0);
  Relu.replace(Relu.find("Softmax <axis = -1>"), 19, "Relu");
  EXPECT_NE(hashAfter(makeBlock(0), "infer-shapes,canonicalize"),
            hashAfter(Relu, "infer-shapes,canonicalize"));
}

TEST(StructuralHashTest, DifferenceNamesOps) {
  StructureSummary A, B;
  A.OpCounts = {{"MatMul", 4}, {"Relu", 1}};
  B.OpCounts = {{"MatMul", 4}, {"Slice", 8}, {"Concat", 4}};
  // Slice +8 first (largest), then Concat +4, then Relu -1.
  EXPECT_EQ("+Slice x8, +Concat x4, -Relu x1",
            describeStructureDifference(A, B));
  EXPECT_EQ("", describeStructureDifference(A, A));
}

} // namespace
