//===- Uncosted.cpp - The work the cost model cannot see ------------------===//
#include "loom/Planner/Uncosted.h"
#include "loom/IR/NodeLabel.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <set>

using namespace llvm;

namespace loom {

/// Product of the known dims of \p V (unknown ones count as 1).
static double knownElements(const Value *V) {
  if (!V || !V->Type.HasShape)
    return 1;
  double E = 1;
  for (const Dim &D : V->Type.Dims)
    if (D.isStatic())
      E *= (double)D.Size;
  return E;
}

/// A lower bound on a node's forward FLOPs from the known part of its
/// shapes: 2 x output x K for matmuls (K, the reduced dim, when known), one
/// per output element otherwise.
static double estimateFlops(const Node &N) {
  const Value *Out = N.getNumOutputs() ? N.getOutput(0) : nullptr;
  double E = knownElements(Out);
  StringRef Op = N.getOpType();
  if ((Op == "MatMul" || Op == "Gemm") && N.getNumInputs() >= 2 &&
      N.getInput(0) && N.getInput(0)->Type.HasShape &&
      N.getInput(0)->Type.getRank() >= 1) {
    const TensorType &A = N.getInput(0)->Type;
    const Dim &K = Op == "Gemm" && N.getAttrInt("transA", 0) ? A.Dims.front()
                                                             : A.Dims.back();
    return 2 * E * (K.isStatic() ? (double)K.Size : 1.0);
  }
  return E;
}

UncostedWork summarizeUncosted(const Graph &G, const NodeCostMap &Costs) {
  UncostedWork U;
  U.TotalNodes = G.getNumNodes();
  U.Params = getTotalParameterCount(G);
  std::set<const Value *> Counted;
  const Value *Unnamed = nullptr;
  unsigned UnnamedDim = 0;
  const Node *UnnamedNode = nullptr;
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    auto It = Costs.find(&N);
    if (It == Costs.end())
      continue;
    const OpCost &C = It->second.Cost;
    if (C.HasRule) {
      U.CostedFlops += C.Flops;
      continue;
    }
    ++U.Nodes;
    U.NoRule.push_back(&N);
    U.UncostedFlops += estimateFlops(N);
    for (const Value *V : N.getInputs())
      if (V && V->isParameter() && Counted.insert(V).second)
        U.UncostedParams += (double)V->Type.getNumElements().getValueOr(0);
    auto Scan = [&](const Value *V) {
      if (!V || !V->Type.HasShape || U.SymbolicValue)
        return;
      for (unsigned D = 0; D < V->Type.getRank(); ++D) {
        const Dim &X = V->Type.Dims[D];
        // ONNX shape inference names the dims it cannot know "unk__N": no
        // flag binds those, so a symbol a user named comes first.
        if (X.isSymbolic() && !StringRef(X.Symbol).startswith("unk__")) {
          U.Symbol = X.Symbol;
          U.SymbolicValue = V;
          U.SymbolicDim = D;
          U.SymbolicNode = &N;
          return;
        }
        if (!X.isStatic() && !Unnamed) {
          Unnamed = V;
          UnnamedDim = D;
          UnnamedNode = &N;
        }
      }
    };
    for (const Value *V : N.getInputs())
      Scan(V);
    for (const Value *V : N.getOutputs())
      Scan(V);
  }
  if (!U.SymbolicValue && Unnamed) {
    U.SymbolicValue = Unnamed;
    U.SymbolicDim = UnnamedDim;
    U.SymbolicNode = UnnamedNode;
  }
  return U;
}

static std::string fmtShare(double F) {
  std::string S;
  raw_string_ostream(S) << format("%.1f%%", F * 100);
  return S;
}

std::string describeUncosted(const UncostedWork &U) {
  return (Twine(U.Nodes) + " of " + Twine(U.TotalNodes) +
          " nodes, >= " + fmtShare(U.getFlopShare()) + " of forward FLOPs, " +
          fmtShare(U.getParamShare()) + " of parameters")
      .str();
}

char UncostedWorkError::ID = 0;
void UncostedWorkError::log(raw_ostream &OS) const { OS << Msg; }
std::error_code UncostedWorkError::convertToErrorCode() const {
  return inconvertibleErrorCode();
}

Error checkUncosted(const UncostedWork &U, double Threshold) {
  if (!U.Nodes ||
      (U.getFlopShare() <= Threshold && U.getParamShare() <= Threshold))
    return Error::success();
  std::string Msg;
  raw_string_ostream OS(Msg);
  OS << "no plan: " << describeUncosted(U) << " have no cost rule (more than "
     << fmtShare(Threshold)
     << "), so a predicted step time would leave them out; first:";
  for (unsigned I = 0; I < std::min<size_t>(3, U.NoRule.size()); ++I)
    OS << (I ? "," : "") << " '" << getNodeLabel(*U.NoRule[I]) << "' ("
       << U.NoRule[I]->getQualifiedOpType() << ")";
  if (U.SymbolicValue) {
    OS << "; dim " << U.SymbolicDim << " of '" << U.SymbolicValue->getName()
       << "' (" << U.SymbolicValue->Type.str() << ", at '"
       << getNodeLabel(*U.SymbolicNode) << "') ";
    // Where the shapes stop being static: the first value on the way back
    // whose producer had static inputs.
    const Value *Origin = U.SymbolicValue;
    for (unsigned Steps = 0; Steps < 10000; ++Steps) {
      const Node *D = Origin->getDefiningNode();
      const Value *Next = nullptr;
      if (D)
        for (const Value *In : D->getInputs())
          if (In && !In->Type.isStatic()) {
            Next = In;
            break;
          }
      if (!Next)
        break;
      Origin = Next;
    }
    // ONNX shape inference names the dims it cannot know "unk__N": no flag
    // can bind those.
    bool Bindable =
        !U.Symbol.empty() && !StringRef(U.Symbol).startswith("unk__");
    if (Bindable)
      OS << "stayed symbolic: bind it with --dim " << U.Symbol << "=V";
    else
      OS << "is not static";
    const Node *OD = Origin->getDefiningNode();
    if (Origin != U.SymbolicValue || !Bindable) {
      OS << " (it starts at '" << Origin->getName() << "' "
         << Origin->Type.str();
      if (OD)
        OS << ", the output of " << OD->getQualifiedOpType() << " '"
           << getNodeLabel(*OD) << "'";
      OS << ")";
    }
    if (!Bindable)
      OS << ": a data-dependent size needs a static shape in the model (or "
            "a named symbol to bind with --dim NAME=V)";
  } else {
    OS << "; their ops have no cost rule";
  }
  OS << ", or pass --allow-uncosted to plan without them";
  return make_error<UncostedWorkError>(OS.str());
}

} // namespace loom
