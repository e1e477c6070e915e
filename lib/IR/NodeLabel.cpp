//===- NodeLabel.cpp - How messages name a node ---------------------------===//
#include "loom/IR/NodeLabel.h"

using namespace llvm;

namespace loom {

std::string getNodeLabel(const Node &N) {
  if (!N.getName().empty())
    return N.getName().str();
  for (const Value *V : N.getOutputs())
    if (V)
      return "%" + V->getName().str();
  return "<unnamed " + N.getQualifiedOpType() + ">";
}

std::string describeNode(const Node &N) {
  return "node '" + getNodeLabel(N) + "' (" + N.getQualifiedOpType() + ")";
}

bool namesNode(StringRef Message) {
  return Message.startswith("node '") || Message.contains(": node '");
}

} // namespace loom
