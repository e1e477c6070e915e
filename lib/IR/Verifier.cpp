//===- Verifier.cpp - Structural checks on the IR -------------------------===//
//
// Run after import and, with --verify-each, after every pass: a pass that
// breaks SSA or the topological order is caught where it happened.
//
//===----------------------------------------------------------------------===//
#include "loom/IR/Graph.h"
#include "loom/IR/NodeLabel.h"
#include "llvm/ADT/DenseSet.h"

using namespace llvm;

namespace loom {

static Error fail(const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), Msg.str());
}

static std::string describe(const Node &N) { return describeNode(N); }

static bool isAncestorOrSelf(const Graph *Anc, const Graph *G) {
  for (; G; G = G->getParent())
    if (G == Anc)
      return true;
  return false;
}

static Error verifyParameter(const Value &P) {
  if (!P.Type.isStatic())
    return fail("parameter '" + P.getName() + "' has non-static type " +
                P.Type.str());
  if (!P.Data)
    return Error::success();
  Optional<int64_t> Bytes = P.Type.getSizeInBytes();
  if (P.Type.Elem == DataType::String)
    return Error::success();
  if (!Bytes)
    return fail("parameter '" + P.getName() + "' of type " + P.Type.str() +
                " has a size that overflows int64");
  if ((uint64_t)*Bytes != P.Data->getSize())
    return fail("parameter '" + P.getName() + "' declares type " +
                P.Type.str() + " (" + Twine(*Bytes) + " bytes) but has " +
                Twine(P.Data->getSize()) + " bytes of data");
  return Error::success();
}

static Error verifyGraphImpl(const Graph &G, DenseSet<const Value *> &Defined) {
  for (const Value *V : G.getInputs())
    Defined.insert(V);
  for (const Value *P : G.getParameters()) {
    if (Error E = verifyParameter(*P))
      return E;
    Defined.insert(P);
  }
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    if (N.getGraph() != &G)
      return fail(describe(N) + " is listed in graph '" + G.getName() +
                  "' but owned by another graph");
    for (const Value *V : N.getInputs()) {
      if (!V)
        continue;
      if (!isAncestorOrSelf(V->getGraph(), &G))
        return fail(describe(N) + ": input '" + V->getName() +
                    "' belongs to a graph that does not enclose it");
      if (!Defined.count(V))
        return fail(describe(N) + ": input '" + V->getName() +
                    "' is used before it is defined (graph is not in "
                    "topological order)");
    }
    for (const Attribute &A : N.getAttributes())
      for (const auto &Sub : A.Gs) {
        if (Sub->getParent() != &G)
          return fail(describe(N) + ": subgraph '" + Sub->getName() +
                      "' has the wrong parent");
        // Subgraphs see everything defined so far; their own values are
        // scoped to them.
        DenseSet<const Value *> Inner = Defined;
        if (Error E = verifyGraphImpl(*Sub, Inner))
          return E;
      }
    for (unsigned I = 0; I < N.getNumOutputs(); ++I) {
      const Value *V = N.getOutput(I);
      if (!V)
        continue;
      if (V->getDefiningNode() != &N || V->getResultNumber() != I)
        return fail(describe(N) + ": result " + Twine(I) + " ('" +
                    V->getName() + "') does not point back to its node");
      if (!Defined.insert(V).second)
        return fail(describe(N) + ": value '" + V->getName() +
                    "' is defined twice");
    }
  }
  for (const Value *V : G.getOutputs()) {
    if (!V)
      return fail("graph '" + G.getName() + "' has a null output");
    if (!Defined.count(V))
      return fail("graph '" + G.getName() + "': output '" + V->getName() +
                  "' is not defined");
  }
  return Error::success();
}

Error verifyGraph(const Graph &G) {
  DenseSet<const Value *> Defined;
  return verifyGraphImpl(G, Defined);
}

Error verifyModel(const Model &M) { return verifyGraph(M.getGraph()); }

} // namespace loom
