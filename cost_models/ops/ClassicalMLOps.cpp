//===- ClassicalMLOps.cpp - Cost rules for the ai.onnx.ml operators -------===//
//
// The ai.onnx.ml ops (scikit-learn pipelines as skl2onnx and onnxmltools
// write them: scalers, encoders, linear models, SVMs, tree ensembles) have
// no AI-core kernel: they are table lookups, branches and scalar loops,
// the "ops with no AI-core kernel, small scalar work" that DESIGN §5 puts
// on the AICPU. Their unit is Control, so placement keeps them off the AI
// cores (cost_models/devices/DeviceTime.cpp) and they run where the
// hardware file's general-purpose class is (aicpu).
//
// FLOPs, one per scalar operation, per the operator definitions
// (onnx/defs/traditionalml/defs.cc):
//   Binarizer           1 compare per element
//   Imputer             2 per element (compare with the replaced value,
//                       select)
//   Scaler              2 per element ((x - offset) * scale)
//   Normalizer          MAX 2 per element (running max, divide); L1 3
//                       (abs, sum, divide); L2 4 (square, sum, divide,
//                       sqrt: Y = sqrt(X^2 / sum(X^2)))
//   LabelEncoder,       1 hashed lookup per element
//   CategoryMapper
//   OneHotEncoder       1 lookup per input element (the writes are the
//                       output bytes)
//   ArrayFeatureExtractor, FeatureVectorizer
//                       0: data movement; ArrayFeatureExtractor reads only
//                       the columns it selects
//   LinearRegressor     2 F T per row (T targets) + T intercepts
//   LinearClassifier    2 F E per row (E classes) + E (intercepts) + E
//                       (the top class)
//   SVMRegressor        (2 F + 2) per support vector per row (kernel dot
//                       product, coefficient multiply-add); 2 F per row
//                       without support vectors (the linear form)
//   SVMClassifier       the same over all classes' support vectors
//   TreeEnsemble, TreeEnsembleRegressor, TreeEnsembleClassifier
//                       per row, one compare per interior node on the
//                       longest root-to-leaf path of every tree (a row
//                       walks at most that far) + one add per tree (its
//                       leaf weight); an upper bound: shallower leaves end
//                       the walk early.
// Nothing to differentiate: these ops carry no trained parameters in the
// graph (their model lives in attributes), so backward is empty.
//
//===----------------------------------------------------------------------===//

#include "OpCostRules.h"

#include <algorithm>
#include <functional>
#include <map>

using namespace llvm;

namespace loom {
namespace opcost {
namespace {

/// Rows of a [N, C] input (1 for [C]) and its width.
std::pair<double, double> rowsAndWidth(const Value *X) {
  SmallVector<int64_t, 4> S = staticShape(X);
  if (S.empty())
    return {1, 1};
  if (S.size() == 1)
    return {1, double(S[0])};
  double Width = 1;
  for (size_t I = 1; I < S.size(); ++I)
    Width *= double(S[I]);
  return {double(S[0]), Width};
}

void scalarOp(OpCost &C, double Flops) {
  C.Unit = ComputeUnit::Control;
  C.Flops = Flops;
  C.BackwardFlops = 0;
}

void costBinarizer(const Node &N, int64_t, OpCost &C) {
  scalarOp(C, numElements(N.getOutput(0)));
}
void costTwoPerElement(const Node &N, int64_t, OpCost &C) {
  scalarOp(C, 2 * numElements(N.getOutput(0)));
}
void costLookup(const Node &N, int64_t, OpCost &C) {
  scalarOp(C, numElements(N.getInput(0)));
}
void costMovement(const Node &N, int64_t, OpCost &C) { scalarOp(C, 0); }

void costNormalizer(const Node &N, int64_t, OpCost &C) {
  StringRef Norm = N.getAttrString("norm", "MAX");
  double PerElement = Norm == "L2" ? 4 : Norm == "L1" ? 3 : 2;
  scalarOp(C, PerElement * numElements(N.getOutput(0)));
}

/// Reads only the selected columns (and the indices).
void costArrayFeatureExtractor(const Node &N, int64_t, OpCost &C) {
  scalarOp(C, 0);
  C.BytesRead = sizeInBytes(N.getOutput(0)) + sizeInBytes(N.getInput(1));
}

void costLinearRegressor(const Node &N, int64_t, OpCost &C) {
  auto [Rows, F] = rowsAndWidth(N.getInput(0));
  double T = double(N.getAttrInt("targets", 1));
  scalarOp(C, Rows * (2 * F * T + T));
}

void costLinearClassifier(const Node &N, int64_t, OpCost &C) {
  auto [Rows, F] = rowsAndWidth(N.getInput(0));
  auto [ZRows, E] = rowsAndWidth(N.getOutput(1));
  (void)ZRows;
  scalarOp(C, Rows * (2 * F * E + 2 * E));
}

/// Support vectors: n_supports (SVMRegressor) or the sum of
/// vectors_per_class (SVMClassifier).
void costSVM(const Node &N, int64_t, OpCost &C) {
  auto [Rows, F] = rowsAndWidth(N.getInput(0));
  double SV = double(N.getAttrInt("n_supports", 0));
  if (Optional<std::vector<int64_t>> PerClass =
          N.getAttrInts("vectors_per_class"))
    for (int64_t V : *PerClass)
      SV += double(V);
  scalarOp(C, Rows * (SV > 0 ? SV * (2 * F + 2) : 2 * F));
}

/// The compares on the longest root-to-leaf path of each tree, summed
/// over the trees. \p Child(I, Branch) is the interior node a branch of
/// interior node I leads to, or -1 for a leaf. A malformed forest (a cycle,
/// an index out of range) counts each interior node at most once.
double sumOfDepths(ArrayRef<int64_t> Roots, size_t NumNodes,
                   const std::function<int64_t(size_t, bool)> &Child) {
  std::vector<int64_t> Depth(NumNodes, -1); // -2: on the current path
  std::function<int64_t(int64_t)> Walk = [&](int64_t I) -> int64_t {
    if (I < 0 || size_t(I) >= NumNodes || Depth[I] == -2)
      return 0;
    if (Depth[I] >= 0)
      return Depth[I];
    Depth[I] = -2;
    int64_t D = 1 + std::max(Walk(Child(I, true)), Walk(Child(I, false)));
    Depth[I] = D;
    return D;
  };
  double Sum = 0;
  for (int64_t R : Roots)
    Sum += double(Walk(R));
  return Sum;
}

/// TreeEnsemble-5: tree_roots index nodes_*; a branch is a leaf where
/// nodes_trueleafs / nodes_falseleafs say so.
void costTreeEnsemble(const Node &N, int64_t, OpCost &C) {
  auto Get = [&](StringRef Name) {
    return N.getAttrInts(Name).getValueOr(std::vector<int64_t>());
  };
  std::vector<int64_t> Roots = Get("tree_roots"),
                       True = Get("nodes_truenodeids"),
                       False = Get("nodes_falsenodeids"),
                       TrueLeaf = Get("nodes_trueleafs"),
                       FalseLeaf = Get("nodes_falseleafs");
  size_t Num =
      std::min({True.size(), False.size(), TrueLeaf.size(), FalseLeaf.size()});
  double Depths = sumOfDepths(Roots, Num, [&](size_t I, bool Branch) {
    if (Branch ? TrueLeaf[I] : FalseLeaf[I])
      return int64_t(-1);
    return Branch ? True[I] : False[I];
  });
  auto [Rows, F] = rowsAndWidth(N.getInput(0));
  (void)F;
  scalarOp(C, Rows * (Depths + double(Roots.size())));
}

/// TreeEnsembleRegressor/Classifier 1 and 3: nodes named by (tree id, node
/// id), leaves by mode LEAF; a tree's root is its node no branch leads to.
void costTreeEnsembleV3(const Node &N, int64_t, OpCost &C) {
  auto Get = [&](StringRef Name) {
    return N.getAttrInts(Name).getValueOr(std::vector<int64_t>());
  };
  std::vector<int64_t> Trees = Get("nodes_treeids"), Ids = Get("nodes_nodeids"),
                       True = Get("nodes_truenodeids"),
                       False = Get("nodes_falsenodeids");
  std::vector<std::string> Modes;
  if (const Attribute *A = N.getAttribute("nodes_modes"))
    Modes = A->Ss;
  size_t Num = std::min(
      {Trees.size(), Ids.size(), True.size(), False.size(), Modes.size()});
  std::map<std::pair<int64_t, int64_t>, int64_t> Index;
  for (size_t I = 0; I < Num; ++I)
    Index[{Trees[I], Ids[I]}] = int64_t(I);
  auto Lookup = [&](size_t I, int64_t Id) -> int64_t {
    auto It = Index.find({Trees[I], Id});
    if (It == Index.end() || Modes[It->second] == "LEAF")
      return -1;
    return It->second;
  };
  std::vector<bool> IsChild(Num, false);
  for (size_t I = 0; I < Num; ++I)
    if (Modes[I] != "LEAF")
      for (int64_t Id : {True[I], False[I]}) {
        auto It = Index.find({Trees[I], Id});
        if (It != Index.end())
          IsChild[It->second] = true;
      }
  std::vector<int64_t> Roots;
  std::map<int64_t, bool> TreeSeen;
  for (size_t I = 0; I < Num; ++I) {
    TreeSeen[Trees[I]] = true;
    if (!IsChild[I] && Modes[I] != "LEAF")
      Roots.push_back(int64_t(I));
  }
  double Depths = sumOfDepths(Roots, Num, [&](size_t I, bool Branch) {
    return Lookup(I, Branch ? True[I] : False[I]);
  });
  auto [Rows, F] = rowsAndWidth(N.getInput(0));
  (void)F;
  scalarOp(C, Rows * (Depths + double(TreeSeen.size())));
}

} // namespace

void addClassicalMLRules(RuleTable &T) {
  const std::pair<const char *, RuleFn> Rules[] = {
      {"Binarizer", costBinarizer},
      {"Imputer", costTwoPerElement},
      {"Scaler", costTwoPerElement},
      {"Normalizer", costNormalizer},
      {"LabelEncoder", costLookup},
      {"CategoryMapper", costLookup},
      {"OneHotEncoder", costLookup},
      {"ArrayFeatureExtractor", costArrayFeatureExtractor},
      {"FeatureVectorizer", costMovement},
      {"LinearRegressor", costLinearRegressor},
      {"LinearClassifier", costLinearClassifier},
      {"SVMRegressor", costSVM},
      {"SVMClassifier", costSVM},
      {"TreeEnsemble", costTreeEnsemble},
      {"TreeEnsembleRegressor", costTreeEnsembleV3},
      {"TreeEnsembleClassifier", costTreeEnsembleV3},
  };
  for (const auto &[Op, Fn] : Rules)
    T[std::string("ai.onnx.ml.") + Op] = {Fn};
}

} // namespace opcost
} // namespace loom
