//===- ClassicalMLCostTest.cpp - Cost rules of the ai.onnx.ml ops ---------===//
//
// The tree-ensemble walk bound (cost_models/ops/ClassicalMLOps.cpp) on
// forests written both ways, TreeEnsemble-5 (nodes by position, leaves
// apart) and TreeEnsembleRegressor-3 (nodes by tree and node id, LEAF
// mode), by hand; and a version-3 forest with a cycle, which ONNX does not
// check, costed in finite time.
//
//===----------------------------------------------------------------------===//

#include "LoadModel.h"
#include "loom/Cost/OpCost.h"

using namespace loom;

namespace {

OpCost costOfOutput(const CompilationUnit &CU, llvm::StringRef Out) {
  const Value *V = CU.M->getGraph().lookup(Out);
  EXPECT_TRUE(V && V->getDefiningNode()) << Out.str();
  if (!V || !V->getDefiningNode())
    return OpCost();
  return computeOpCost(*V->getDefiningNode(), CU.M->getOpsetVersion(""));
}

// One tree of depth 3 (root, node 1, node 2 in a chain, each with a leaf on
// its true side) and one stump (a single interior node): per row 3 + 1
// compares + 2 leaf adds = 6; 10 rows: 60 FLOPs, AICPU (control) work.
TEST(ClassicalMLCostTest, TreeEnsembleWalkBound) {
  CompilationUnit CU = loadTextModel(R"(
<ir_version: 10, opset_import: ["" : 21, "ai.onnx.ml" : 5]>
g (float[10,2] x) => (float[a,b] y) {
  y = ai.onnx.ml.TreeEnsemble <nodes_featureids = [0, 1, 0, 1], nodes_splits = float[4] {0.5, 0.1, 0.2, 0.3}, nodes_modes = uint8[4] {0, 0, 0, 0}, nodes_truenodeids = [0, 1, 2, 4], nodes_falsenodeids = [1, 2, 3, 5], nodes_trueleafs = [1, 1, 1, 1], nodes_falseleafs = [0, 0, 1, 1], tree_roots = [0, 3], leaf_targetids = [0, 0, 0, 0, 0, 0], leaf_weights = float[6] {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, n_targets = 1>(x)
})",
                                     "infer-shapes");
  OpCost C = costOfOutput(CU, "y");
  ASSERT_TRUE(C.HasRule) << C.NoRuleReason;
  EXPECT_EQ(C.Unit, ComputeUnit::Control);
  EXPECT_EQ(C.Flops, 60);
  EXPECT_EQ(C.BackwardFlops, 0);
}

// The same depth-3 chain as TreeEnsembleRegressor-3 (node ids 0, 2, 4
// interior; 1, 3, 5, 6 leaves): 3 compares + 1 leaf add per row; 10 rows:
// 40.
TEST(ClassicalMLCostTest, TreeEnsembleRegressorV3WalkBound) {
  CompilationUnit CU = loadTextModel(R"(
<ir_version: 10, opset_import: ["" : 21, "ai.onnx.ml" : 4]>
g (float[10,2] x) => (float[a,b] y) {
  y = ai.onnx.ml.TreeEnsembleRegressor <nodes_treeids = [0, 0, 0, 0, 0, 0, 0], nodes_nodeids = [0, 1, 2, 3, 4, 5, 6], nodes_modes = ["BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF"], nodes_featureids = [0, 0, 1, 0, 0, 0, 0], nodes_values = [0.5, 0.0, 0.1, 0.0, 0.2, 0.0, 0.0], nodes_truenodeids = [1, 0, 3, 0, 5, 0, 0], nodes_falsenodeids = [2, 0, 4, 0, 6, 0, 0], target_treeids = [0, 0, 0, 0], target_nodeids = [1, 3, 5, 6], target_ids = [0, 0, 0, 0], target_weights = [1.0, 2.0, 3.0, 4.0], n_targets = 1>(x)
})",
                                     "infer-shapes");
  OpCost C = costOfOutput(CU, "y");
  ASSERT_TRUE(C.HasRule) << C.NoRuleReason;
  EXPECT_EQ(C.Flops, 40);
}

// Nodes 0 and 1 of a version-3 tree branch to each other and node 2 (a
// leaf); no node is a root then (every interior node is some branch's
// target), so the walk bound is 0 compares + 1 leaf add per row: 10. What
// matters is that it returns.
TEST(ClassicalMLCostTest, CyclicVersion3ForestTerminates) {
  CompilationUnit CU = loadTextModel(R"(
<ir_version: 10, opset_import: ["" : 21, "ai.onnx.ml" : 4]>
g (float[10,2] x) => (float[a,b] y) {
  y = ai.onnx.ml.TreeEnsembleRegressor <nodes_treeids = [0, 0, 0], nodes_nodeids = [0, 1, 2], nodes_modes = ["BRANCH_LEQ", "BRANCH_LEQ", "LEAF"], nodes_featureids = [0, 1, 0], nodes_values = [0.5, 0.1, 0.0], nodes_truenodeids = [1, 0, 0], nodes_falsenodeids = [2, 2, 0], target_treeids = [0], target_nodeids = [2], target_ids = [0], target_weights = [1.0], n_targets = 1>(x)
})",
                                     "infer-shapes");
  OpCost C = costOfOutput(CU, "y");
  ASSERT_TRUE(C.HasRule) << C.NoRuleReason;
  EXPECT_EQ(C.Flops, 10);
}

} // namespace
