//===- RoleCloneNode.cpp - A source node copied into a role graph ---------===//
//
// The RoleBuilder parts that copy a source node into the rank's graph:
// its output names, its shape and split-size inputs and attributes made
// local (cloneLocal), and control-flow nodes, copied replicated on whole
// inputs (ControlFlow.h).
//
//===----------------------------------------------------------------------===//
#include "ControlFlow.h"
#include "RoleBuilder.h"
#include "ShardAttrs.h"
#include "loom/IR/NodeLabel.h"
#include "llvm/ADT/STLExtras.h"

using namespace llvm;

namespace loom {

SmallVector<std::string, 2> RoleBuilder::getOutputNames(const Node &N,
                                                        const NodeSharding &NS,
                                                        bool InExpertWork) {
  SmallVector<std::string, 2> OutNames;
  for (unsigned O = 0; O < N.getNumOutputs(); ++O) {
    const Value *V = N.getOutput(O);
    if (!V) {
      OutNames.push_back("");
      continue;
    }
    bool IsModelOut = is_contained(Src.getOutputs(), V);
    std::string Name = V->getName().str();
    if (IsModelOut && (NS.OutputSpecs[O] != AxisSpec() || InExpertWork))
      Name += ".local";
    OutNames.push_back(fresh(Name));
  }
  return OutNames;
}

Error RoleBuilder::cloneLocal(const Node &N, const NodeSharding &NS,
                              MutableArrayRef<Value *> In,
                              ArrayRef<std::string> OutNames, bool IsBranch) {
  StringRef Op = N.getOpType();
  const Value *Y = N.getOutput(0);
  // Token values of the expert region hold the ep group's tokens.
  bool YGathered = (IsBranch || EPPartial.count(Y)) && DD.count(Y);
  localizeShapeInput(N, NS, In, YGathered);
  std::vector<Attribute> Attrs;
  for (const Attribute &A : N.getAttributes())
    Attrs.push_back(copyAttributeValues(A));
  localizeSplitSizes(N, NS, In, Attrs);
  localizeHeadAttributes(N, NS, TP, Attrs);
  // A transfer of another axis (the cp ring's under tp,
  // ComposeContextParallel.cpp) receives this rank's part of the block.
  if (N.getDomain() == "hccl" && Op == "HcomReceive" && Y) {
    TensorType LT = localType(Y, NS.OutputSpecs[0], false);
    for (Attribute &A : Attrs)
      if (A.Name == "shape" && LT.isStatic())
        A = intsAttr("shape", LT.getStaticShape());
  }
  // Another axis' all-to-all on this rank's part (Ulysses' under tp, cp
  // first: ComposeContextParallel.cpp) exchanges that part's elements.
  if (N.getDomain() == "hccl" && Op == "HcomAllToAllV" && In.size() == 5 &&
      In[0] && NS.InputSpecs.size() && NS.InputSpecs[0].isSplit()) {
    std::array<Value *, 4> Counts = allToAllCounts(
        In[0], N.getAttrInt("rank_size", 1), N.getOutput(0)->getName());
    std::copy(Counts.begin(), Counts.end(), In.begin() + 1);
  }
  Expected<Node *> C = G->addNode(Op, N.getDomain(), N.getName(), In, OutNames);
  if (!C)
    return C.takeError();
  (*C)->setAttributes(std::move(Attrs));
  for (unsigned O = 0; O < N.getNumOutputs(); ++O)
    if (const Value *V = N.getOutput(O)) {
      TensorType LT = localType(V, NS.OutputSpecs[O], YGathered && DD.count(V));
      if (NS.Stacked && EP > 1 && DD.count(V) && LT.getRank() >= 2) {
        // This rank's experts, the group's tokens.
        if (LT.Dims[0].Size == (int64_t)R.NumExperts)
          LT.Dims[0] = Dim(LT.Dims[0].Size / EP);
        LT.Dims[1] = Dim(LT.Dims[1].Size * EP);
        StackedRegion.insert(V);
      }
      (*C)->getOutput(O)->Type = LT;
      Produced[V] = (*C)->getOutput(O);
    }
  return Error::success();
}

void RoleBuilder::localizeShapeInput(const Node &N, const NodeSharding &NS,
                                     MutableArrayRef<Value *> In,
                                     bool YGathered) {
  StringRef Op = N.getOpType();
  const Value *Y = N.getOutput(0);
  if ((Op == "Reshape" || Op == "Expand") && Y &&
      (!NS.OutputSpecs[0].isReplicated() || YGathered) &&
      !NS.OutputSpecs[0].isPartial()) {
    TensorType LT = localType(Y, NS.OutputSpecs[0], YGathered);
    int D = NS.OutputSpecs[0].Dim;
    if (LT.isStatic()) {
      In[1] = constInt64(N.getName().str() + ".local_shape",
                         {(int64_t)LT.getRank()}, LT.getStaticShape());
    } else if (Optional<std::vector<int64_t>> Target =
                   getConstantInts(N.getInput(1));
               Target && !YGathered && D >= 0 && (unsigned)D < LT.getRank() &&
               LT.Dims[D].isStatic()) {
      // A data-dependent count beside the split (an index-routed expert's
      // tokens, ruleReshape): the model's own target shape, the split dim
      // at its local size (Expand's shape aligns from the right).
      int64_t At = D - ((int64_t)LT.getRank() - (int64_t)Target->size());
      if (At >= 0 && At < (int64_t)Target->size()) {
        (*Target)[At] = LT.Dims[D].Size;
        In[1] = constInt64(N.getName().str() + ".local_shape",
                           {(int64_t)Target->size()}, *Target);
      }
    }
  }
  if (Op == "Reshape" && Y && NS.OutputSpecs[0].isPartial() && YGathered) {
    TensorType LT = localType(Y, AxisSpec(), true);
    In[1] = constInt64(N.getName().str() + ".local_shape",
                       {(int64_t)LT.getRank()}, LT.getStaticShape());
  }
}

void RoleBuilder::localizeSplitSizes(const Node &N, const NodeSharding &NS,
                                     MutableArrayRef<Value *> In,
                                     std::vector<Attribute> &Attrs) {
  if (N.getOpType() != "Split" || NS.InputSpecs.empty() ||
      NS.InputSpecs[0].Blocks.empty())
    return;
  std::vector<int64_t> Local;
  for (int64_t B : NS.InputSpecs[0].Blocks)
    Local.push_back(B / TP);
  bool InAttr = false;
  for (Attribute &A : Attrs)
    if (A.Name == "split") {
      A.Is = Local;
      InAttr = true;
    }
  if (!InAttr && N.getNumInputs() > 1 && N.getInput(1))
    In[1] = constInt64(N.getName().str() + ".local_split",
                       {(int64_t)Local.size()}, Local);
}

Error RoleBuilder::buildControlFlow(const Node &N, const NodeSharding &NS) {
  // Loop/If/Scan run replicated: every rank runs the whole body on whole
  // tensors. Its inputs and the outer values its bodies read are gathered
  // first (materialize inserts the Hcom op); expert-parallel values, which
  // no rank holds whole, are refused.
  auto Refuse = [&](const Twine &Why) {
    return err(describeNode(N) + ": " + Why);
  };
  if (NS.Expert >= 0 || NS.Stacked || NS.ExpertCombine)
    return Refuse("control flow inside an expert region cannot be emitted");
  for (const AxisSpec &S : NS.OutputSpecs)
    if (!S.isReplicated())
      return Refuse("its outputs are sharded (" + S.str() +
                    "); control flow is emitted replicated only");
  auto IsEP = [&](const Value *V) {
    return Absent.count(V) || EPPartial.count(V) || InEPRegion.count(V);
  };
  SmallVector<Value *, 4> In;
  for (const Value *V : N.getInputs()) {
    if (V && IsEP(V))
      return Refuse("input '" + V->getName() +
                    "' is expert-parallel; no rank holds it whole");
    Expected<Value *> X = materialize(V, AxisSpec());
    if (!X)
      return X.takeError();
    In.push_back(*X);
  }
  DenseMap<const Value *, Value *> Outer;
  for (const Value *V : getCapturedValues(N)) {
    if (IsEP(V))
      return Refuse("its body reads '" + V->getName() +
                    "', which is expert-parallel; no rank holds it whole");
    Expected<Value *> X = materialize(V, AxisSpec());
    if (!X)
      return X.takeError();
    if (!*X)
      return Refuse("its body reads '" + V->getName() +
                    "', which this rank does not have");
    Outer[V] = *X;
  }
  SmallVector<std::string, 2> OutNames;
  for (const Value *V : N.getOutputs())
    OutNames.push_back(V ? fresh(V->getName()) : std::string());
  Expected<Node *> C = emitControlFlowNode(*G, N, In, OutNames, Outer);
  if (!C)
    return C.takeError();
  for (unsigned O = 0; O < N.getNumOutputs(); ++O)
    if (const Value *V = N.getOutput(O)) {
      (*C)->getOutput(O)->Type = V->Type;
      Produced[V] = (*C)->getOutput(O);
    }
  return finishNode(N);
}

} // namespace loom
