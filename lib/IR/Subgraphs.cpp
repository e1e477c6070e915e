//===- Subgraphs.cpp - What control-flow bodies read from outside ---------===//
//
// Loop, If and Scan bodies may read values of enclosing graphs by name
// (ONNX's outer-scope references). Whoever moves such a node into another
// graph (the role builder) must supply those values there first; these
// helpers list them.
//
//===----------------------------------------------------------------------===//
#include "loom/IR/Subgraphs.h"
#include "llvm/ADT/DenseSet.h"

using namespace llvm;

namespace loom {

bool hasSubgraphs(const Node &N) {
  for (const Attribute &A : N.getAttributes())
    if (A.K == Attribute::Kind::Graph || A.K == Attribute::Kind::Graphs)
      return true;
  return false;
}

/// Walks \p G, adding to \p Out (once each, in order) the values read by its
/// nodes, or returned, that are not defined inside the subgraph tree rooted
/// at \p Root's owner.
static void collectCaptures(const Graph &G, const Graph *Outer,
                            DenseSet<const Value *> &Seen,
                            std::vector<const Value *> &Out) {
  // A value belongs to the captured set when its owning graph is Outer or
  // one of Outer's ancestors (defined outside the node's subgraphs).
  auto IsOutside = [&](const Value *V) {
    for (const Graph *P = Outer; P; P = P->getParent())
      if (V->getGraph() == P)
        return true;
    return false;
  };
  auto Note = [&](const Value *V) {
    if (V && IsOutside(V) && Seen.insert(V).second)
      Out.push_back(V);
  };
  for (const auto &NP : G.getNodes()) {
    for (const Value *V : NP->getInputs())
      Note(V);
    for (const Attribute &A : NP->getAttributes())
      for (const auto &Sub : A.Gs)
        collectCaptures(*Sub, Outer, Seen, Out);
  }
  for (const Value *V : G.getOutputs())
    Note(V);
}

std::vector<const Value *> getCapturedValues(const Node &N) {
  std::vector<const Value *> Out;
  DenseSet<const Value *> Seen;
  for (const Attribute &A : N.getAttributes())
    for (const auto &Sub : A.Gs)
      collectCaptures(*Sub, N.getGraph(), Seen, Out);
  return Out;
}

static void collectNames(const Graph &G, StringSet<> &Names) {
  for (const Value *V : G.getInputs())
    Names.insert(V->getName());
  for (const Value *V : G.getParameters())
    Names.insert(V->getName());
  for (const auto &NP : G.getNodes()) {
    for (const Value *V : NP->getOutputs())
      if (V)
        Names.insert(V->getName());
    for (const Attribute &A : NP->getAttributes())
      for (const auto &Sub : A.Gs)
        collectNames(*Sub, Names);
  }
}

void collectSubgraphValueNames(const Graph &G, StringSet<> &Names) {
  for (const auto &NP : G.getNodes())
    for (const Attribute &A : NP->getAttributes())
      for (const auto &Sub : A.Gs)
        collectNames(*Sub, Names);
}

} // namespace loom
