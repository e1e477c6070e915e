//===- ExpertModels.h - Expert graphs shared by the MoE unit tests -*- C++ -*-//
//
// Graphs that ExpertsTest (findExperts, the evaluator's ep) and
// ExpertRulesTest (the ep rules) both take apart.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TEST_UNIT_EXPERTMODELS_H
#define LOOM_TEST_UNIT_EXPERTMODELS_H

namespace loom {

/// Eight stacked experts: dispatched tokens xe [E=8, C=4, d=16] through w1
/// [8,16,32], a Relu and w2 [8,32,16]; z is dense work beside them.
inline const char *StackedModel = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[8,4,16] xe, float[32,16] x) => (float[8,4,16] y, float[32,16] z)
<float[16,16] wd, float[8,16,32] w1, float[8,32,16] w2> {
  z = MatMul (x, wd)
  h = MatMul (xe, w1)
  r = Relu (h)
  y = MatMul (r, w2)
}
)";

} // namespace loom

#endif // LOOM_TEST_UNIT_EXPERTMODELS_H
