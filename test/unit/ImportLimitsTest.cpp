//===- ImportLimitsTest.cpp - Tests for the importer's resource limits ----===//
//
// loom::ImportLimits: subgraph nesting, bracket nesting in text syntax
// (brackets in comments and strings do not count), and the value-size
// overflow check on declared types.
//
//===----------------------------------------------------------------------===//

#include "loom/ONNX/ONNX.h"

#include "gtest/gtest.h"

#include <string>

using namespace loom;
using namespace llvm;

namespace {

std::string importError(const std::string &Text) {
  Expected<std::unique_ptr<Model>> M =
      importModelFromText(Text, "m.onnxtxt", "/nonexistent");
  if (M)
    return "<ok>";
  return toString(M.takeError());
}

const char *Header = "<ir_version: 8, opset_import: [\"\" : 17]>\n";

/// A model whose output comes from If nodes nested \p Depth graphs deep.
std::string nestedIf(unsigned Depth) {
  std::string Body = "{ o = Neg(x) }";
  for (unsigned I = 0; I < Depth; ++I)
    Body = "{ o = If(c) <then_branch = t" + std::to_string(I) +
           " () => (float[4] o) " + Body + ", else_branch = e" +
           std::to_string(I) + " () => (float[4] o) { o = Abs(x) }> }";
  return std::string(Header) + "g (bool c, float[4] x) => (float[4] o) " +
         Body + "\n";
}

TEST(ImportLimitsTest, SubgraphDepth) {
  EXPECT_EQ(importError(nestedIf(ImportLimits::MaxSubgraphDepth)), "<ok>");
  // The 17th level is inside graph t1 (the graphs count down to t0, the
  // innermost).
  EXPECT_EQ(importError(nestedIf(ImportLimits::MaxSubgraphDepth + 1)),
            "m.onnxtxt: error: graph 't1': node '' (If) nests subgraphs "
            "deeper than 16 levels");
}

TEST(ImportLimitsTest, TextNesting) {
  // 129 open brackets on line 2: 128 are allowed.
  std::string Deep = std::string(Header) + "g (float[4] x) => (float[4] y) " +
                     std::string(129, '(');
  EXPECT_EQ(importError(Deep),
            "m.onnxtxt:2:160: error: brackets nested deeper than 128 levels");
  // Brackets in comments and string literals are not nesting.
  std::string Quoted = std::string(Header) + "# " + std::string(200, '(') +
                       "\ng (float[4] x) => (float[4] y) { y = "
                       "Identity <doc = \"" +
                       std::string(200, '[') + "\"> (x) }\n";
  EXPECT_EQ(importError(Quoted).find("brackets nested"), std::string::npos);
}

TEST(ImportLimitsTest, SizeOverflow) {
  // 2^62 f32 elements fit int64 as a count but not as 2^64 bytes.
  EXPECT_EQ(importError(std::string(Header) +
                        "g (float[4611686018427387904] x) => (float[4] y) "
                        "{ y = Neg(x) }\n"),
            "m.onnxtxt: error: value 'x' of type f32[4611686018427387904] "
            "has a size in bytes that overflows int64");
  // Symbolic dims count as 1: the static ones alone fit.
  EXPECT_EQ(importError(std::string(Header) +
                        "g (float[batch, 1073741824] x) => (float[batch, "
                        "1073741824] y) { y = Neg(x) }\n"),
            "<ok>");
}

} // namespace
