//===- ControlFlow.cpp - Loop/If/Scan in a role graph ---------------------===//
//
// See ControlFlow.h. The role builder (RoleCloneNode.cpp) decides what the
// node reads (its inputs and its bodies' outer-scope values, gathered to
// whole tensors); this file copies the node and its bodies.
//
//===----------------------------------------------------------------------===//
#include "ControlFlow.h"
#include "loom/IR/NodeLabel.h"

using namespace llvm;

namespace loom {

Expected<Node *>
emitControlFlowNode(Graph &G, const Node &N, ArrayRef<Value *> In,
                    ArrayRef<std::string> OutNames,
                    const DenseMap<const Value *, Value *> &Outer) {
  for (const Value *V : getCapturedValues(N))
    if (!Outer.lookup(V))
      return createStringError(inconvertibleErrorCode(),
                               "%s: its body reads '%s', which is not "
                               "available in the role graph",
                               describeNode(N).c_str(),
                               V->getName().str().c_str());
  Expected<Node *> C =
      G.addNode(N.getOpType(), N.getDomain(), N.getName(), In, OutNames);
  if (!C)
    return C.takeError();
  for (const Attribute &A : N.getAttributes()) {
    Attribute Copy = copyAttributeValues(A);
    for (const auto &Sub : A.Gs)
      Copy.Gs.push_back(cloneSubgraph(*Sub, G, Outer));
    (*C)->addAttribute(std::move(Copy));
  }
  return *C;
}

} // namespace loom
