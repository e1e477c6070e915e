//===- NormRules.cpp - Sharding rules of the normalizations --------------===//
//
// BatchNormalization normalizes each channel (dim 1) over the batch and
// spatial dims with per-channel scale, bias, mean and variance ([C]):
// a channel split (after a column-parallel convolution) is exact with the
// per-channel inputs split on their dim 0; a split of any other dim keeps
// the statistics whole (inference statistics are constants; the rule does
// not split a training batch's statistics).
// InstanceNormalization normalizes each (sample, channel) over the spatial
// dims: only the channel split is taken.
// LayerNormalization normalizes over the dims from its axis on: a split of
// a dim below the axis (batch, tokens) is exact; the hidden dim stays whole
// (Korthikanti et al. 2022: under sequence parallelism the norms run on the
// token split).
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"

using namespace llvm;

namespace loom {
namespace shardrules {

void ruleBatchNorm(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  AxisSpec CX = Ctx.getSpec(N.getInput(0));
  replicateAll(N, NS);
  if (N.getOpType() == "InstanceNormalization" && CX.Dim != 1)
    return;
  if (CX.isPartial() || !CX.isSplit() || !CX.Blocks.empty())
    return;
  NS.InputSpecs[0] = CX;
  NS.OutputSpecs[0] = CX;
  if (CX.Dim == 1)
    for (unsigned I = 1; I < N.getNumInputs(); ++I)
      if (N.getInput(I))
        NS.InputSpecs[I] = AxisSpec::split(0);
}

void ruleLayerNorm(const Node &N, RuleContext &Ctx, OpSharding &NS) {
  unsigned Rank = N.getInput(0)->Type.getRank();
  ruleAxisOp(N, Ctx, NS, normAxis(N.getAttrInt("axis", -1), Rank),
             /*Below=*/true);
}

} // namespace shardrules
} // namespace loom
