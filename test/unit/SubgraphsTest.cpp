//===- SubgraphsTest.cpp - Outer-scope reads of control-flow bodies -------===//
#include "loom/IR/Subgraphs.h"
#include "loom/ONNX/ONNX.h"
#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

// An If whose then-branch holds a nested If: the nested body reads 'a' (two
// graphs up) and 't' (its parent branch's value); the else-branch reads 'b'
// and 'a' again. The node's captured values are a, b (each once, in order
// of first use), not t.
const char *Text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, bool c) => (float[2] y)
<float[2] w = {1.0, 2.0}>
{
  a = Relu (x)
  b = Mul (x, w)
  y = If (c) <then_branch = tb () => (float[2] o1) {
      t = Neg (x)
      o1 = If (c) <then_branch = inner () => (float[2] o2) {
          o2 = Add (a, t)
        }, else_branch = inner2 () => (float[2] o3) {
          o3 = Identity (t)
        }>
    }, else_branch = eb () => (float[2] o4) {
      o4 = Sub (b, a)
    }>
}
)";

TEST(SubgraphsTest, CapturedValuesAtAnyDepthInFirstUseOrder) {
  Expected<std::unique_ptr<Model>> M = importModelFromText(Text, "t");
  ASSERT_TRUE(!!M) << toString(M.takeError());
  const Graph &G = (*M)->getGraph();
  const Node &If = *G.getNodes().back();
  ASSERT_TRUE(hasSubgraphs(If));
  EXPECT_FALSE(hasSubgraphs(*G.getNodes().front()));
  std::vector<const Value *> C = getCapturedValues(If);
  std::vector<std::string> Names;
  for (const Value *V : C)
    Names.push_back(V->getName().str());
  // x is read first (by Neg in the then-branch), then a (nested body),
  // then b (else-branch); t is defined inside and c is an explicit input
  // of the nested If only, which also reads it from outside.
  EXPECT_EQ(Names, (std::vector<std::string>{"x", "c", "a", "b"}));
  StringSet<> Inner;
  collectSubgraphValueNames(G, Inner);
  for (const char *N : {"t", "o1", "o2", "o3", "o4"})
    EXPECT_TRUE(Inner.count(N)) << N;
  EXPECT_FALSE(Inner.count("a"));
}

TEST(SubgraphsTest, CloneReadsThroughTheOuterMap) {
  Expected<std::unique_ptr<Model>> M = importModelFromText(Text, "t");
  ASSERT_TRUE(!!M) << toString(M.takeError());
  const Node &If = *(*M)->getGraph().getNodes().back();
  const Graph &Else = *If.getAttribute("else_branch")->Gs[0];
  // A new enclosing graph where 'b' and 'a' are other values.
  Graph NG("ng");
  Value *A2 =
      cantFail(NG.addInput("a_gathered", TensorType(DataType::Float, {2})));
  Value *B2 =
      cantFail(NG.addInput("b_received", TensorType(DataType::Float, {2})));
  DenseMap<const Value *, Value *> Outer;
  Outer[(*M)->getGraph().lookup("a")] = A2;
  Outer[(*M)->getGraph().lookup("b")] = B2;
  std::unique_ptr<Graph> C = cloneSubgraph(Else, NG, Outer);
  EXPECT_EQ(C->getParent(), &NG);
  ASSERT_EQ(C->getNumNodes(), 1u);
  const Node &Sub = *C->getNodes()[0];
  EXPECT_EQ(Sub.getInput(0), B2);
  EXPECT_EQ(Sub.getInput(1), A2);
  EXPECT_EQ(C->getOutputs()[0]->getName(), "o4");
  EXPECT_EQ(C->getOutputs()[0]->getGraph(), C.get());
}

} // namespace
