//===- BindSymbols.cpp - Bind symbolic dims to sizes ----------------------===//
//
// Exporters leave batch and sequence length symbolic; planning needs sizes.
// --dim NAME=V binds the symbol NAME. --batch binds the symbol named
// "batch" (or batch_size), else dim 0 of the first graph input whose dim 0
// is dynamic; --seq binds "seq" (or seq_len, sequence, sequence_length),
// else dim 1 of the first input whose dim 1 is dynamic. Every dynamic dim of
// a graph input must end up bound; a binding that matches nothing is only a
// warning, since scripts pass the same flags to many models; two flags that
// bind one symbol to different sizes are an error.
//
//===----------------------------------------------------------------------===//
#include "loom/IR/SequenceSymbols.h"
#include "loom/Pass/Pass.h"
#include "llvm/ADT/StringMap.h"

using namespace llvm;

namespace loom {
namespace {

class BindSymbolsPass : public Pass {
public:
  Error run(CompilationUnit &CU) override;
};

/// The positional fallback for --batch / --seq: the first input whose dim
/// \p Pos is dynamic.
static Optional<std::pair<Value *, unsigned>> findDynamicDim(const Graph &G,
                                                             unsigned Pos) {
  for (Value *V : G.getInputs())
    if (V->Type.HasShape && V->Type.getRank() > Pos &&
        !V->Type.Dims[Pos].isStatic())
      return std::make_pair(V, Pos);
  return None;
}

static bool hasSymbol(const Graph &G, StringRef S) {
  for (Value *V : G.getInputs())
    for (const Dim &D : V->Type.Dims)
      if (D.isSymbolic() && D.Symbol == S)
        return true;
  return false;
}

/// A symbol only inside the graph (a value's declared type, e.g. the
/// tokens an expert receives): --dim can bind it too.
static bool hasInnerSymbol(const Graph &G, StringRef S) {
  for (const auto &N : G.getNodes())
    for (const Value *V : N->getOutputs())
      if (V)
        for (const Dim &D : V->Type.Dims)
          if (D.isSymbolic() && D.Symbol == S)
            return true;
  return false;
}

static void substitute(TensorType &T, const StringMap<int64_t> &Binds) {
  for (Dim &D : T.Dims)
    if (D.isSymbolic()) {
      auto It = Binds.find(D.Symbol);
      if (It != Binds.end())
        D = Dim(It->second);
    }
}

static void substituteGraph(Graph &G, const StringMap<int64_t> &Binds) {
  for (Value *V : G.getInputs())
    substitute(V->Type, Binds);
  for (const auto &N : G.getNodes()) {
    for (Value *V : N->getOutputs())
      if (V)
        substitute(V->Type, Binds);
    for (const Attribute &A : N->getAttributes())
      for (const auto &Sub : A.Gs)
        substituteGraph(*Sub, Binds);
  }
}

Error BindSymbolsPass::run(CompilationUnit &CU) {
  Graph &G = CU.M->getGraph();
  StringMap<int64_t> Binds;
  // Which flag bound each symbol, to name both flags of a conflict.
  StringMap<std::string> BoundBy;
  // Unnamed dynamic dims bound by position: (input, dim) -> size.
  std::vector<std::tuple<Value *, unsigned, int64_t>> Positional;

  // Two flags binding one symbol (--batch by position and --dim of the same
  // name, say) must agree: silently keeping the last would plan a shape the
  // user did not ask for.
  auto SetBinding = [&](StringRef Symbol, int64_t Size,
                        const Twine &Flag) -> Error {
    auto It = Binds.find(Symbol);
    if (It != Binds.end() && It->second != Size)
      return createStringError(
          inconvertibleErrorCode(),
          "%s binds symbolic dim '%s' to %lld, but %s already bound it to "
          "%lld",
          Flag.str().c_str(), Symbol.str().c_str(), (long long)Size,
          BoundBy[Symbol].c_str(), (long long)It->second);
    Binds[Symbol] = Size;
    BoundBy[Symbol] = Flag.str();
    return Error::success();
  };

  // Sets Matched when the flag bound something.
  auto Bind = [&](StringRef Flag, ArrayRef<StringRef> Names, unsigned Pos,
                  int64_t Size, bool &Matched) -> Error {
    Matched = true;
    if (Size <= 0)
      return createStringError(inconvertibleErrorCode(),
                               "%s must be positive, got %lld",
                               Flag.str().c_str(), (long long)Size);
    for (StringRef N : Names)
      if (hasSymbol(G, N))
        return SetBinding(N, Size, Flag + " " + Twine(Size));
    if (auto Slot = findDynamicDim(G, Pos)) {
      const Dim &D = Slot->first->Type.Dims[Pos];
      if (D.isSymbolic())
        return SetBinding(D.Symbol, Size, Flag + " " + Twine(Size));
      Positional.emplace_back(Slot->first, Pos, Size);
      return Error::success();
    }
    Matched = false;
    CU.warn(Flag + " " + Twine(Size) + " matches no dynamic dim of the model");
    return Error::success();
  };
  ArrayRef<StringRef> SeqNames = getSequenceSymbols();
  bool Matched = false;
  if (CU.Opts.Batch)
    if (Error E = Bind("--batch", {"batch", "batch_size"}, 0, *CU.Opts.Batch,
                       Matched))
      return E;
  // The sequence length counts (tokens/s) only where it bound a dim: an
  // unmatched --seq is warned about and then used nowhere.
  CU.BoundSeq = None;
  if (CU.Opts.Seq) {
    if (Error E = Bind("--seq", SeqNames, 1, *CU.Opts.Seq, Matched))
      return E;
    if (Matched)
      CU.BoundSeq = *CU.Opts.Seq;
  }
  for (const auto &KV : CU.Opts.Dims) {
    if (KV.second <= 0)
      return createStringError(inconvertibleErrorCode(),
                               "--dim %s=%lld: size must be positive",
                               KV.first.c_str(), (long long)KV.second);
    if (!hasSymbol(G, KV.first) && !hasInnerSymbol(G, KV.first))
      CU.warn("--dim " + KV.first + "=" + Twine(KV.second) +
              " matches no symbolic dim of the model");
    else if (Error E = SetBinding(KV.first, KV.second,
                                  "--dim " + KV.first + "=" + Twine(KV.second)))
      return E;
    else if (is_contained(SeqNames, StringRef(KV.first)))
      CU.BoundSeq = KV.second;
  }

  for (auto &P : Positional)
    std::get<0>(P)->Type.Dims[std::get<1>(P)] = Dim(std::get<2>(P));
  substituteGraph(G, Binds);

  for (Value *V : G.getInputs()) {
    if (!V->Type.HasShape)
      return createStringError(inconvertibleErrorCode(),
                               "input '%s' has unknown rank; Loom needs "
                               "static shapes",
                               V->getName().str().c_str());
    for (unsigned I = 0; I < V->Type.getRank(); ++I) {
      const Dim &D = V->Type.Dims[I];
      if (D.isSymbolic())
        return createStringError(inconvertibleErrorCode(),
                                 "unbound symbolic dim '%s' of input '%s' "
                                 "(dim %u); bind it with --dim %s=N",
                                 D.Symbol.c_str(), V->getName().str().c_str(),
                                 I, D.Symbol.c_str());
      if (!D.isStatic())
        return createStringError(
            inconvertibleErrorCode(),
            "input '%s' has an unnamed dynamic dim %u; bind it with "
            "--batch (dim 0) or --seq (dim 1)",
            V->getName().str().c_str(), I);
    }
  }
  return Error::success();
}

} // namespace

std::unique_ptr<Pass> createBindSymbolsPass() {
  return std::make_unique<BindSymbolsPass>();
}

} // namespace loom
