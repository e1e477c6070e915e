//===- Rules.cpp - The rule table's dispatcher and shared helpers --------===//
//
// applyShardingRule maps an op to its family's rule (one file per family
// beside this one). The rules follow Megatron-LM (Shoeybi et al. 2019) for
// weight matmuls and embeddings and Korthikanti et al. 2022 for sequence
// parallelism; everything else is propagation in the style of GSPMD (Xu et
// al. 2021): split dims move through reshapes, transposes and broadcasts,
// partial sums through linear ops.
//
//===----------------------------------------------------------------------===//
#include "RuleFamilies.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

using namespace llvm;

namespace loom {

std::string AxisSpec::str() const {
  switch (K) {
  case Replicated:
    return "R";
  case Partial:
    return "P";
  case Split: {
    std::string S = "S(" + std::to_string(Dim);
    if (!Blocks.empty()) {
      S += ";blocks=";
      for (size_t I = 0; I < Blocks.size(); ++I)
        S += (I ? "," : "") + std::to_string(Blocks[I]);
    }
    return S + ")";
  }
  }
  return "?";
}

Transition getTransition(const AxisSpec &From, const AxisSpec &To) {
  if (From == To)
    return Transition::None;
  if (From.isPartial()) {
    if (To.isReplicated())
      return Transition::AllReduce;
    if (To.isSplit() && To.Blocks.empty())
      return Transition::ReduceScatter;
    return Transition::Unsupported;
  }
  // A blocked split gathers like any other (the role graph puts the
  // pieces back in the blocks' order).
  if (From.isSplit() && To.isReplicated())
    return Transition::AllGather;
  if (From.isReplicated() && To.isSplit())
    return Transition::LocalSlice;
  if (From.isSplit() && To.isSplit())
    return Transition::GatherSlice;
  if (To.isPartial())
    return From.isReplicated() ? Transition::Zeros : Transition::Unsupported;
  return Transition::Unsupported;
}

StringRef getTransitionName(Transition T) {
  switch (T) {
  case Transition::None:
    return "none";
  case Transition::AllReduce:
    return "all-reduce";
  case Transition::ReduceScatter:
    return "reduce-scatter";
  case Transition::AllGather:
    return "all-gather";
  case Transition::LocalSlice:
    return "local slice";
  case Transition::GatherSlice:
    return "all-gather + slice";
  case Transition::Zeros:
    return "zeros";
  case Transition::Unsupported:
    return "unsupported";
  }
  return "?";
}

static double bytesOf(const TensorType &T) {
  return (double)T.getSizeInBytes().getValueOr(0);
}

bool hasEqualBlocks(const AxisSpec &S) {
  return llvm::all_of(S.Blocks,
                      [&](int64_t B) { return B == S.Blocks.front(); });
}

Optional<ShardCollective> getTransitionCollective(const AxisSpec &From,
                                                  const AxisSpec &To,
                                                  const TensorType &Whole,
                                                  unsigned AxisSize,
                                                  bool SeqAxis) {
  ShardCollective C;
  C.Result = Whole;
  // Every kind moves the value's bytes replicated per rank, as
  // collectiveTime counts them: the buffer reduced, the gathered output,
  // the input scattered.
  C.Bytes = bytesOf(Whole);
  switch (getTransition(From, To)) {
  case Transition::AllReduce:
    C.Kind = CollectiveKind::AllReduce;
    C.Suffix = "allreduce";
    return C;
  case Transition::ReduceScatter:
    C.Kind = CollectiveKind::ReduceScatter;
    C.Axis = To.Dim;
    C.Suffix = "reducescatter";
    if ((unsigned)To.Dim < C.Result.getRank() &&
        C.Result.Dims[To.Dim].isStatic() && AxisSize)
      C.Result.Dims[To.Dim] = Dim(C.Result.Dims[To.Dim].Size / AxisSize);
    return C;
  case Transition::GatherSlice:
    // One side may be split in equal blocks (heads folded into the batch):
    // the role builder moves it with its blocks as a dim of their own.
    if (SeqAxis && (From.Blocks.empty() || To.Blocks.empty()) &&
        hasEqualBlocks(From) && hasEqualBlocks(To) && AxisSize &&
        (unsigned)To.Dim < C.Result.getRank() &&
        C.Result.Dims[To.Dim].isStatic()) {
      // Each rank sends peer j its piece j of dim To.Dim and concatenates
      // what it receives on From.Dim: the rank's share crosses the links.
      C.Kind = CollectiveKind::AllToAll;
      C.Axis = To.Dim;
      C.ConcatAxis = From.Dim;
      C.Suffix = "alltoall";
      C.Result.Dims[To.Dim] = Dim(C.Result.Dims[To.Dim].Size / AxisSize);
      C.Bytes = bytesOf(Whole) / AxisSize;
      return C;
    }
    LLVM_FALLTHROUGH;
  case Transition::AllGather:
    // Gather-then-slice gathers the whole value; the slice is local.
    C.Kind = CollectiveKind::AllGather;
    C.Axis = From.Dim;
    C.Suffix = "allgather";
    return C;
  case Transition::None:
  case Transition::LocalSlice:
  case Transition::Zeros:
  case Transition::Unsupported:
    break;
  }
  return None;
}

namespace {
/// One row per collective kind an hccl op performs (DESIGN §7).
struct HcomKind {
  CollectiveKind Kind;
  const char *Op, *Event;
};
const HcomKind HcomKinds[] = {
    {CollectiveKind::AllReduce, "HcomAllReduce", "allreduce"},
    {CollectiveKind::AllGather, "HcomAllGather", "allgather"},
    {CollectiveKind::ReduceScatter, "HcomReduceScatter", "reducescatter"},
    {CollectiveKind::AllToAll, "HcomAllToAllV", "alltoall"},
    {CollectiveKind::Broadcast, "HcomBroadcast", "broadcast"},
    {CollectiveKind::SendRecv, "HcomSend", "send"},
};
} // namespace

StringRef getHcomOpName(CollectiveKind K) {
  for (const HcomKind &H : HcomKinds)
    if (H.Kind == K)
      return H.Op;
  return "HcomAllReduce";
}

AxisSpec getKVCacheSpec(const AxisSpec &S, int SeqAxis) {
  if (S.isSplit() && S.Blocks.empty() && S.Dim >= 0 && S.Dim != SeqAxis)
    return S;
  return AxisSpec::replicated();
}

CollectiveKind getHcomCollectiveKind(StringRef Op) {
  if (Op == "HcomReceive")
    return CollectiveKind::SendRecv;
  for (const HcomKind &H : HcomKinds)
    if (Op == H.Op && H.Kind != CollectiveKind::Broadcast)
      return H.Kind;
  // The schedule prices a broadcast as an all-reduce of its buffer.
  return CollectiveKind::AllReduce;
}

StringRef getScheduleEventKind(CollectiveKind K) {
  for (const HcomKind &H : HcomKinds)
    if (H.Kind == K && K != CollectiveKind::Broadcast)
      return H.Event;
  return "allreduce";
}

CollectiveKind parseScheduleEventKind(StringRef Kind) {
  for (const HcomKind &H : HcomKinds)
    if (Kind == H.Event && H.Kind != CollectiveKind::Broadcast &&
        H.Kind != CollectiveKind::SendRecv)
      return H.Kind;
  return CollectiveKind::AllReduce;
}

SmallVector<int64_t, 4> getLocalShape(ArrayRef<int64_t> Global,
                                      const AxisSpec &S, unsigned AxisSize) {
  SmallVector<int64_t, 4> L(Global.begin(), Global.end());
  if (!S.isSplit())
    return L;
  if (S.Dim < 0 || (size_t)S.Dim >= L.size() || !AxisSize)
    return {};
  if (S.Blocks.empty()) {
    if (L[S.Dim] % AxisSize)
      return {};
    L[S.Dim] /= AxisSize;
    return L;
  }
  // Each block divided: the rank holds 1/AxisSize of every block.
  int64_t Sum = 0;
  for (int64_t B : S.Blocks) {
    if (B % AxisSize)
      return {};
    Sum += B;
  }
  if (Sum != L[S.Dim])
    return {};
  L[S.Dim] /= AxisSize;
  return L;
}

RuleContext::~RuleContext() = default;

SmallVector<int64_t, 4> RuleContext::getTokenShape(const Value *V) const {
  return shardrules::shapeOf(V);
}

int RuleContext::getTokenDim(const Value *V) const {
  shardrules::Shape S = getTokenShape(V);
  for (unsigned D = 0; D + 1 < S.size(); ++D)
    if (S[D] > 1 && isDivisible(S[D]))
      return D;
  return -1;
}

AxisSpec RuleContext::resolvePartial(const Value *V) const {
  const Node *D = V ? V->getDefiningNode() : nullptr;
  if (D && isStackedExpertWork(D))
    return AxisSpec::replicated();
  if (SP) {
    int T = getTokenDim(V);
    if (T >= 0)
      return AxisSpec::split(T);
  }
  return AxisSpec::replicated();
}

bool RuleContext::mayStayPartial(const Value *V) const {
  static const StringSet<> TakesPartial = {
      "Add",     "Sub",    "Mul",     "Div",       "Neg",     "Identity",
      "Dropout", "Cast",   "Reshape", "Transpose", "Squeeze", "Unsqueeze",
      "Flatten", "MatMul", "Gemm",    "Gather"};
  if (!V)
    return false;
  ArrayRef<const Node *> Users = getUsers(V);
  if (Users.empty())
    return false; // a graph output, or read by nothing: reduce it
  return all_of(Users, [&](const Node *U) {
    if (!U->getDomain().empty() || !TakesPartial.count(U->getOpType()))
      return false;
    // Linear in V only where V is one operand: x * x (an RMSNorm's square
    // as some exporters write it) and a partial divisor are not, and
    // ruleElementwise reduces them, so the other readers read the reduced
    // value too (as they do when the square is a Pow).
    StringRef Op = U->getOpType();
    if (Op == "Div" && U->getNumInputs() > 1 && U->getInput(1) == V)
      return false;
    // Gather is linear in its data, not in its indices.
    if (Op == "Gather" && U->getInput(0) != V)
      return false;
    bool Product = Op == "Mul" || Op == "MatMul" || Op == "Gemm";
    return !Product || count(U->getInputs(), V) == 1;
  });
}

SmallVector<std::pair<const Value *, AxisSpec>, 4>
getWeightChainSpecs(const Value *V, const Value *Param, int PDim,
                    ArrayRef<int64_t> Blocks) {
  SmallVector<const Value *, 4> Chain;
  for (const Value *W = V; W != Param; W = W->getDefiningNode()->getInput(0))
    Chain.push_back(W);
  SmallVector<std::pair<const Value *, AxisSpec>, 4> Out;
  int D = PDim;
  for (auto It = Chain.rbegin(); It != Chain.rend(); ++It) {
    const Node *Def = (*It)->getDefiningNode();
    if (Def->getOpType() == "Transpose") {
      Optional<std::vector<int64_t>> Perm = Def->getAttrInts("perm");
      unsigned Rank = (*It)->Type.getRank();
      int To = -1;
      for (unsigned J = 0; J < Rank; ++J)
        if ((Perm ? (*Perm)[J] : (int64_t)(Rank - 1 - J)) == D)
          To = J;
      D = To;
    }
    AxisSpec S = AxisSpec::split(D);
    S.Blocks.assign(Blocks.begin(), Blocks.end());
    Out.push_back({*It, S});
  }
  return Out;
}

const Value *traceWeight(const Value *V, int &Dim) {
  for (unsigned Depth = 0; V && Depth < 4; ++Depth) {
    // 4-bit weights pack two elements to a byte: a slice of a row may
    // start mid-byte, so they are stored whole (the rule reads them whole).
    if (V->isParameter())
      return getDataTypeSize(V->Type.Elem) ? V : nullptr;
    const Node *D = V->getDefiningNode();
    if (!D || D->getNumInputs() != 1 || D->getNumOutputs() != 1)
      return nullptr;
    if (D->getOpType() == "Transpose") {
      Optional<std::vector<int64_t>> Perm = D->getAttrInts("perm");
      unsigned Rank = V->Type.getRank();
      if (Perm) {
        if ((unsigned)Dim >= Perm->size())
          return nullptr;
        Dim = (*Perm)[Dim];
      } else {
        Dim = Rank - 1 - Dim;
      }
    } else if (D->getOpType() != "Cast" && D->getOpType() != "Identity") {
      return nullptr;
    }
    V = D->getInput(0);
  }
  return nullptr;
}

bool isShardableElementwise(StringRef Op) {
  return StringSwitch<bool>(Op)
      .Cases("Add", "Sub", "Mul", "Div", "Pow", "Where", true)
      .Cases("Relu", "Gelu", "Sigmoid", "Tanh", "Erf", "Sqrt", true)
      .Cases("Neg", "Cast", "Exp", "Log", "Equal", "Less", "Greater", true)
      .Cases("LessOrEqual", "GreaterOrEqual", "And", "Or", "Not", "Xor", true)
      .Cases("Max", "Min", "Abs", "Reciprocal", "Clip", "Dropout", true)
      .Cases("Softplus", "HardSigmoid", "LeakyRelu", "Identity", "Mish", true)
      .Cases("Sin", "Cos", "Floor", "Ceil", "Round", "Sign", "IsNaN", true)
      .Cases("Elu", "Selu", "Celu", "HardSwish", "Softsign", "ThresholdedRelu",
             true)
      .Cases("Mod", "Sum", "Mean", "IsInf", "BitShift", "CastLike", true)
      .Cases("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", true)
      .Default(false);
}

OpSharding applyShardingRule(const Node &N, RuleContext &Ctx, bool &HasRule) {
  using namespace shardrules;
  OpSharding S;
  HasRule = true;
  StringRef Op = N.getOpType();
  if (N.getDomain() == "hccl") {
    ruleHcomCollective(N, Ctx, S);
  } else if (!N.getDomain().empty() && N.getDomain() != "ai.onnx") {
    HasRule = false;
    replicateAll(N, S);
  } else if (Op == "Constant" || Op == "ConstantOfShape" || Op == "Range") {
    replicateAll(N, S);
  } else if (Op == "Shape" || Op == "Size") {
    ruleShape(N, Ctx, S);
  } else if (Op == "MatMul") {
    ruleMatMul(N, Ctx, S);
  } else if (Op == "Gemm") {
    ruleGemm(N, Ctx, S);
  } else if (Op == "Conv") {
    ruleConv(N, Ctx, S);
  } else if (Op == "BatchNormalization" || Op == "InstanceNormalization") {
    ruleBatchNorm(N, Ctx, S);
  } else if (Op == "MaxPool" || Op == "AveragePool" ||
             Op == "GlobalAveragePool" || Op == "GlobalMaxPool") {
    rulePool(N, Ctx, S);
  } else if (Op == "Gather") {
    ruleGather(N, Ctx, S);
  } else if (Op == "ScatterElements" || Op == "ScatterND") {
    ruleScatter(N, Ctx, S);
  } else if (Op == "Reshape" || Op == "Flatten") {
    ruleReshape(N, Ctx, S, Op == "Flatten");
  } else if (Op == "Transpose") {
    ruleTranspose(N, Ctx, S);
  } else if (Op == "Unsqueeze" || Op == "Squeeze") {
    ruleUnsqueezeSqueeze(N, Ctx, S, Op == "Unsqueeze");
  } else if (Op == "Split") {
    ruleSplit(N, Ctx, S);
  } else if (Op == "Concat") {
    ruleConcat(N, Ctx, S);
  } else if (Op == "Slice") {
    ruleSlice(N, Ctx, S);
  } else if (Op == "Softmax" || Op == "LogSoftmax" || Op == "Hardmax") {
    ruleSoftmax(N, Ctx, S);
  } else if (Op == "SoftmaxCrossEntropyLoss" ||
             Op == "NegativeLogLikelihoodLoss") {
    ruleLoss(N, Ctx, S);
  } else if (Op == "LayerNormalization" || Op == "RMSNormalization") {
    ruleLayerNorm(N, Ctx, S);
  } else if (Op == "Attention") {
    ruleAttention(N, Ctx, S);
  } else if (Op == "RotaryEmbedding") {
    ruleRotaryEmbedding(N, Ctx, S);
  } else if (Op == "ArgMax" || Op == "ArgMin") {
    ruleArgMax(N, Ctx, S);
  } else if (Op == "TopK") {
    ruleTopK(N, Ctx, S);
  } else if (Op.startswith("Reduce")) {
    ruleReduce(N, Ctx, S);
  } else if (Op == "Expand") {
    ruleExpand(N, Ctx, S);
  } else if (isShardableElementwise(Op) && N.getNumOutputs() >= 1) {
    ruleElementwise(N, Ctx, S);
  } else {
    HasRule = false;
    replicateAll(N, S);
  }
  S.InputSpecs.resize(N.getNumInputs());
  S.OutputSpecs.resize(N.getNumOutputs());
  return S;
}

namespace shardrules {

Shape shapeOf(const Value *V) {
  if (!V || !V->Type.isStatic())
    return {};
  return V->Type.getStaticShape();
}

Shape rankedShapeOf(const Value *V) {
  Shape S;
  if (!V || !V->Type.HasShape)
    return S;
  for (const Dim &D : V->Type.Dims)
    S.push_back(D.isStatic() ? D.Size : -1);
  return S;
}

int64_t product(ArrayRef<int64_t> S) {
  int64_t P = 1;
  for (int64_t D : S)
    P *= D;
  return P;
}

int normAxis(int64_t A, unsigned Rank) {
  return A < 0 ? (int)(A + Rank) : (int)A;
}

bool isZeroConstant(const Value *V) {
  const Node *D = V ? V->getDefiningNode() : nullptr;
  if (!D || !D->getDomain().empty() ||
      (D->getOpType() != "ConstantOfShape" && D->getOpType() != "Constant"))
    return false;
  const Attribute *A = D->getAttribute("value");
  if (!A)
    return D->getOpType() == "ConstantOfShape";
  if (A->K != Attribute::Kind::Tensor || A->Ts.empty())
    return false;
  Expected<std::vector<double>> F = A->Ts[0].getFloatValues();
  if (!F) {
    consumeError(F.takeError());
    return false;
  }
  return all_of(*F, [](double X) { return X == 0; });
}

std::vector<int64_t> readAxes(const Node &N, unsigned InputIdx) {
  if (Optional<std::vector<int64_t>> A = N.getAttrInts("axes"))
    return *A;
  if (const Attribute *A = N.getAttribute("axis"))
    return {A->I};
  if (Optional<std::vector<int64_t>> A = getConstantInts(N.getInput(InputIdx)))
    return *A;
  return {};
}

void replicateAll(const Node &N, OpSharding &S) {
  S.InputSpecs.assign(N.getNumInputs(), AxisSpec());
  S.OutputSpecs.assign(N.getNumOutputs(), AxisSpec());
  S.Collectives.clear();
}

ShardCollective getLoweringAllReduce(const Node &N, const TensorType &T,
                                     StringRef Reduction, StringRef Suffix) {
  ShardCollective C;
  C.Reduction = Reduction.str();
  C.Result = T;
  C.Bytes = bytesOf(T);
  C.On = N.getNumOutputs() ? N.getOutput(0) : nullptr;
  C.Suffix = Suffix.str();
  return C;
}

void setRowParallel(const Node &N, const AxisSpec &In, const AxisSpec &Weight,
                    bool HasBias, OpSharding &S) {
  S.InputSpecs = {In, Weight};
  if (HasBias) {
    S.InputSpecs.push_back(AxisSpec());
    S.Lower = ShardLowering::BiasAfterReduce;
    S.OutputSpecs = {AxisSpec()};
    // The partial products, whole, all-reduced before the bias is added.
    if (const Value *Y = N.getOutput(0))
      S.Collectives = {getLoweringAllReduce(N, Y->Type, "sum", "allreduce")};
  } else {
    S.OutputSpecs = {AxisSpec::partial()};
  }
}

void keepInputs(const Node &N, const RuleContext &Ctx, OpSharding &S,
                const AxisSpec &Out) {
  S.InputSpecs.clear();
  for (const Value *V : N.getInputs())
    S.InputSpecs.push_back(Ctx.getSpec(V));
  S.OutputSpecs.assign(N.getNumOutputs(), Out);
}

Optional<AxisSpec> getSplitLinearInput(const Node &N, const RuleContext &Ctx,
                                       OpSharding &S) {
  AxisSpec CX = Ctx.getSpec(N.getInput(0));
  replicateAll(N, S);
  if (CX.isPartial())
    keepInputs(N, Ctx, S, CX);
  if (!CX.isSplit())
    return None;
  return CX;
}

} // namespace shardrules
} // namespace loom
