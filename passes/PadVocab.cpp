//===- PadVocab.cpp - Pad a vocabulary tp does not divide -----------------===//
//
// Megatron-LM pads the vocabulary to a multiple of
// --make-vocab-size-divisible-by x tp (default 128;
// megatron/training/tokenizer/tokenizer.py, _vocab_size_with_padding;
// MindSpeed-LLM takes the same argument from Megatron's parser), so a
// GPT-2 vocabulary of 50,257 is split at any tp: 50,304 at tp = 1, 51,200
// at tp = 8. Without padding the vocab-parallel embedding, the LM head and
// the vocab-parallel cross entropy would stay whole on every tp rank.
//
// This pass does the same on the graph, before layers are found and costs
// annotated, so that every later pass (costs, search, shard, emit) sees
// and prices the padded vocabulary with the rules it already has:
//
// - The vocabulary is an embedding table: a 2-D floating-point parameter
//   (or a Transpose/Cast/Identity of one) looked up by Gather along axis 0
//   whose row count V is also the output dim of a weight matmul (the LM
//   head, tied or not). Tables no head reads (positions, token types) are
//   not a vocabulary and are left alone, as Megatron pads only the word
//   embedding.
// - V is padded only when tp does not divide it: V' = V rounded up to a
//   multiple of N x tp (N = --make-vocab-size-divisible-by). tp is the
//   --plan's, else the largest the search considers (the product of the
//   topology levels that allow tp), which every smaller power-of-two
//   degree divides; the export writes the N that reproduces V' at the
//   plan's tp (Export.cpp).
// - The table gains zero rows, the head zero columns (and its bias zero
//   entries): the real vocabulary's lookups and scores are unchanged.
// - The padded scores are masked where an op reads them (a graph output
//   alone is sliced, below): an Add of a constant that is 0 on the
//   real vocabulary and the type's lowest finite value on the padding, so
//   softmax, log-softmax, the cross entropy (row max, sum of exps) and
//   argmax over the padded scores equal the original's on the real
//   vocabulary (exp of the padding underflows to exactly 0; a finite value
//   keeps a one-hot product free of inf x 0). Megatron leaves the padding
//   unmasked and learns it away; masking makes the emitted graphs compute
//   exactly what the model computes.
// - Reshapes downstream of the scores whose constant shape names V
//   (logits.view(-1, V)) name V' instead; a graph output that carries the
//   padded dim is sliced back to V under its own name.
//
// Shapes downstream of the head are re-inferred. shard replays this pass
// on its micro-batch clone with the same tp (CompilationUnit::VocabPad).
//
//===----------------------------------------------------------------------===//
#include "loom/Hardware/HardwareModel.h"
#include "loom/IR/PaddedTensorData.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Pass/Pass.h"
#include "loom/Shard/Rules.h"
#include "loom/Support/DataType.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"
#include <limits>

using namespace llvm;

namespace loom {
namespace {

/// The tp degree to pad for: the --plan's, else the largest the search
/// considers (SearchSpace.cpp, describeSearchSpace's TPLimit).
unsigned getPaddingTP(const CompilationUnit &CU) {
  if (CU.PlanRequest && CU.PlanRequest->TP)
    return *CU.PlanRequest->TP;
  if (!CU.HW)
    return 1;
  unsigned T = 1;
  for (const TopologyLevel &L : CU.HW->Topology) {
    if (!L.AllowTP)
      break;
    T *= L.Size;
  }
  return T;
}

/// The lowest finite value of a floating-point type.
double getLowest(DataType T) {
  switch (T) {
  case DataType::Float16:
    return -65504.0;
  case DataType::BFloat16:
    return -3.3895313892515355e38;
  case DataType::Double:
    return std::numeric_limits<double>::lowest();
  default:
    return std::numeric_limits<float>::lowest();
  }
}

/// A head: a weight matmul whose output dim is the vocabulary.
struct Head {
  Node *N = nullptr;
  const Value *Param = nullptr;
  int PDim = -1;
};

class Padder {
public:
  Padder(CompilationUnit &CU, VocabPadding &P)
      : CU(CU), G(CU.M->getGraph()), P(P) {}
  Error run();

private:
  /// The head matmuls whose output dim is \p V.
  std::vector<Head> findHeads(int64_t V) const;
  void padParam(const Value *Param, int Dim);
  /// The value the head's scores end in (after a bias Add it pads).
  Value *padBias(Node *H);
  Error maskScores(Value *Scores);
  Error rewriteReshapes(const SetVector<Value *> &Down);
  Error sliceOutputs(const SetVector<Value *> &Down,
                     const DenseMap<const Value *, TensorType> &Before);
  SetVector<Value *> downstream(Value *From) const;
  Expected<Value *> addConstant(const Twine &Name, Tensor T);

  CompilationUnit &CU;
  Graph &G;
  VocabPadding &P;
  DenseSet<const Value *> Padded;
};

std::vector<Head> Padder::findHeads(int64_t V) const {
  std::vector<Head> Out;
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    bool Gemm = N.getOpType() == "Gemm";
    if ((N.getOpType() != "MatMul" && !Gemm) || N.getNumInputs() < 2)
      continue;
    const Value *B = N.getInput(1);
    if (!B || B->Type.getRank() != 2 || !B->Type.isStatic())
      continue;
    int Dim = Gemm && N.getAttrInt("transB", 0) ? 0 : 1;
    if (B->Type.getStaticShape()[Dim] != V)
      continue;
    int PDim = Dim;
    const Value *Param = traceWeight(B, PDim);
    if (Param && isFloatingPoint(Param->Type.Elem))
      Out.push_back({const_cast<Node *>(&N), Param, PDim});
  }
  return Out;
}

void Padder::padParam(const Value *CP, int Dim) {
  if (!Padded.insert(CP).second)
    return;
  Value *Param = const_cast<Value *>(CP);
  SmallVector<int64_t, 4> Shape = Param->Type.getStaticShape();
  if (Param->Data)
    Param->Data = std::make_shared<PaddedTensorData>(
        Param->Data, Shape, getDataTypeSize(Param->Type.Elem), Dim, P.To);
  Shape[Dim] = P.To;
  Param->Type = TensorType(Param->Type.Elem, Shape);
  P.Params.push_back(Param->getName().str());
}

Value *Padder::padBias(Node *H) {
  Value *Y = H->getOutput(0);
  auto IsBias = [&](const Value *B) {
    int D = 0;
    const Value *Par = B ? traceWeight(B, D) : nullptr;
    return Par && B->Type.isStatic() && B->Type.getRank() >= 1 &&
                   B->Type.getStaticShape().back() == P.From &&
                   B->Type.getNumElements() == P.From
               ? Par
               : nullptr;
  };
  // Gemm's C; a MatMul's one reader an Add of a [V] parameter.
  if (H->getOpType() == "Gemm") {
    if (const Value *Par = IsBias(H->getInput(2)))
      padParam(Par, Par->Type.getRank() - 1);
    return Y;
  }
  UseMap Users = buildUseMap(G);
  auto It = Users.find(Y);
  if (It == Users.end() || It->second.size() != 1 ||
      is_contained(G.getOutputs(), Y))
    return Y;
  Node *A = const_cast<Node *>(It->second.front());
  if (A->getOpType() != "Add" || A->getNumInputs() != 2)
    return Y;
  const Value *Other = A->getInput(A->getInput(0) == Y ? 1 : 0);
  const Value *Par = IsBias(Other);
  if (!Par)
    return Y;
  padParam(Par, Par->Type.getRank() - 1);
  return A->getOutput(0);
}

Expected<Value *> Padder::addConstant(const Twine &Name, Tensor T) {
  std::string N = Name.str();
  for (unsigned I = 1; G.lookup(N); ++I)
    N = (Name + "." + Twine(I)).str();
  return G.addParameter(N, T.Type, T.Data);
}

SetVector<Value *> Padder::downstream(Value *From) const {
  SetVector<Value *> Down;
  Down.insert(From);
  for (const auto &NP : G.getNodes())
    if (any_of(NP->getInputs(), [&](Value *V) { return V && Down.count(V); }))
      for (Value *O : NP->getOutputs())
        if (O)
          Down.insert(O);
  return Down;
}

Error Padder::maskScores(Value *Scores) {
  // Scores only a graph output reads are sliced back to the real
  // vocabulary (sliceOutputs): nothing reduces over the padding, so no
  // mask (and no cost for one).
  if (none_of(G.getNodes(), [&](const std::unique_ptr<Node> &N) {
        return is_contained(N->getInputs(), Scores);
      }))
    return Error::success();
  DataType T = Scores->Type.Elem;
  std::vector<double> M(P.To, 0.0);
  for (int64_t I = P.From; I < P.To; ++I)
    M[I] = getLowest(T);
  Expected<Value *> Mask = addConstant(Scores->getName() + "/vocab_mask",
                                       Tensor::makeFromDoubles(T, {P.To}, M));
  if (!Mask)
    return Mask.takeError();
  std::string Name = (Scores->getName() + "/vocab_masked").str();
  Expected<Node *> Add = G.addNode("Add", "", Name, {Scores, *Mask}, {Name});
  if (!Add)
    return Add.takeError();
  Value *Masked = (*Add)->getOutput(0);
  for (const auto &NP : G.getNodes())
    if (NP.get() != *Add)
      for (unsigned I = 0; I < NP->getNumInputs(); ++I)
        if (NP->getInput(I) == Scores)
          NP->setInput(I, Masked);
  // A graph output stays the unmasked scores: sliced back to the real
  // vocabulary (sliceOutputs), they are the model's.
  // Right after the scores' producer.
  const Node *Def = Scores->getDefiningNode();
  unsigned Pos = 0;
  for (unsigned I = 0; I < G.getNumNodes(); ++I)
    if (G.getNodes()[I].get() == Def)
      Pos = I + 1;
  G.moveNode(*Add, Pos);
  return Error::success();
}

Error Padder::rewriteReshapes(const SetVector<Value *> &Down) {
  for (const auto &NP : G.getNodes()) {
    Node &N = *NP;
    if (N.getOpType() != "Reshape" || N.getNumInputs() < 2 ||
        !Down.count(N.getInput(0)))
      continue;
    Optional<std::vector<int64_t>> S = getConstantInts(N.getInput(1));
    if (!S)
      continue;
    auto It = std::find(S->rbegin(), S->rend(), P.From);
    if (It == S->rend())
      continue;
    *It = P.To;
    Expected<Value *> C =
        addConstant(N.getInput(1)->getName() + "/vocab_padded",
                    Tensor::makeInt64({(int64_t)S->size()}, *S));
    if (!C)
      return C.takeError();
    N.setInput(1, *C);
  }
  return Error::success();
}

Error Padder::sliceOutputs(const SetVector<Value *> &Down,
                           const DenseMap<const Value *, TensorType> &Before) {
  std::vector<Value *> Outs(G.getOutputs().begin(), G.getOutputs().end());
  for (Value *&O : Outs) {
    auto It = Before.find(O);
    if (!Down.count(O) || It == Before.end() || O->Type == It->second ||
        O->Type.getRank() != It->second.getRank())
      continue;
    int Axis = -1;
    for (unsigned I = 0; I < O->Type.getRank(); ++I)
      if (O->Type.Dims[I] != It->second.Dims[I])
        Axis = I;
    std::string Name = O->getName().str();
    if (Error E = G.renameValue(O, Name + "/vocab_padded"))
      return E;
    SmallVector<Value *, 4> In = {O};
    for (int64_t X : {(int64_t)0, P.From, (int64_t)Axis}) {
      Expected<Value *> C =
          addConstant(Name + "/vocab_slice", Tensor::makeInt64({1}, {X}));
      if (!C)
        return C.takeError();
      In.push_back(*C);
    }
    Expected<Node *> S =
        G.addNode("Slice", "", Name + "/vocab_slice", In, {Name});
    if (!S)
      return S.takeError();
    (*S)->getOutput(0)->Type = It->second;
    O = (*S)->getOutput(0);
  }
  G.setOutputs(Outs);
  return Error::success();
}

Error Padder::run() {
  // Slice with input bounds (opset 10).
  if (P.TP <= 1 || CU.M->getOpsetVersion("") < 10)
    return Error::success();
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    if (N.getOpType() != "Gather" || N.getNumInputs() != 2 ||
        N.getAttrInt("axis", 0) != 0)
      continue;
    int Dim = 0;
    const Value *Table = traceWeight(N.getInput(0), Dim);
    const Value *Ids = N.getInput(1);
    if (!Table || Dim != 0 || !Ids || isFloatingPoint(Ids->Type.Elem) ||
        Table->Type.getRank() != 2 || !Table->Type.isStatic() ||
        !isFloatingPoint(Table->Type.Elem))
      continue;
    int64_t V = Table->Type.getStaticShape()[0];
    if (V % P.TP == 0)
      continue;
    std::vector<Head> Heads = findHeads(V);
    if (Heads.empty())
      continue;
    int64_t Multiple = (int64_t)P.DivisibleBy * P.TP;
    P.Table = Table->getName().str();
    P.From = V;
    P.To = (V + Multiple - 1) / Multiple * Multiple;
    padParam(Table, 0);
    DenseMap<const Value *, TensorType> Before;
    for (const auto &M : G.getNodes())
      for (const Value *O : M->getOutputs())
        if (O)
          Before[O] = O->Type;
    for (const Head &H : Heads) {
      padParam(H.Param, H.PDim);
      if (Error E = maskScores(padBias(H.N)))
        return E;
    }
    // Re-infer what the padded weights reach: the head's scores on.
    SetVector<Value *> Down;
    for (const Head &H : Heads)
      Down.set_union(downstream(H.N->getOutput(0)));
    // And the layout chains from a padded weight to its readers (a tied
    // head's Transpose of the table).
    for (const auto &M : G.getNodes())
      if ((M->getOpType() == "Transpose" || M->getOpType() == "Cast" ||
           M->getOpType() == "Identity") &&
          M->getNumInputs() == 1 && M->getInput(0) &&
          (Padded.count(M->getInput(0)) || Down.count(M->getInput(0))) &&
          M->getOutput(0))
        Down.insert(M->getOutput(0));
    if (Error E = rewriteReshapes(Down))
      return E;
    for (Value *D : Down)
      D->Type = TensorType(D->Type.Elem, {}), D->Type.HasShape = false;
    Expected<unsigned> Inferred = inferShapes(*CU.M);
    if (!Inferred)
      return Inferred.takeError();
    if (Error E = sliceOutputs(Down, Before))
      return E;
    G.eraseUnusedParameters();
    return Error::success(); // One vocabulary per model.
  }
  return Error::success();
}

class PadVocabPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    VocabPadding P;
    // shard's replay pads for the tp the planning graph was padded for.
    P.DivisibleBy = CU.VocabPad ? CU.VocabPad->DivisibleBy
                                : std::max(1u, CU.Opts.VocabDivisibleBy);
    P.TP = CU.VocabPad ? CU.VocabPad->TP : getPaddingTP(CU);
    Padder Pad(CU, P);
    if (Error E = Pad.run())
      return E;
    CU.VocabPad = P;
    return Error::success();
  }
  void print(const CompilationUnit &CU, raw_ostream &OS) const override {
    Pass::print(CU, OS);
    if (!CU.VocabPad || !CU.VocabPad->padded()) {
      OS << "# pad-vocab: nothing padded\n";
      return;
    }
    const VocabPadding &P = *CU.VocabPad;
    OS << "# pad-vocab: vocab padded " << P.From << " -> " << P.To << " ('"
       << P.Table << "', a multiple of " << P.DivisibleBy << " x tp " << P.TP
       << "):";
    for (const std::string &N : P.Params)
      OS << " '" << N << "'";
    OS << "\n";
  }
};

} // namespace

std::unique_ptr<Pass> createPadVocabPass() {
  return std::make_unique<PadVocabPass>();
}

} // namespace loom
