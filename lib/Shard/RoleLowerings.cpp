//===- RoleLowerings.cpp - Special lowerings of a node in a role graph ----===//
//
// The RoleBuilder parts that lower a node other than by copying it: a
// global Size/Shape, vocab-parallel Gather and cross entropy, mean losses
// over shards, a row-parallel product's bias after the reduce, and the cp
// ring's attention (through RingAdapter, RingAttention.h).
//
//===----------------------------------------------------------------------===//
#include "RingAttention.h"
#include "RoleBuilder.h"
#include "ShardAttrs.h"

using namespace llvm;

namespace loom {

/// The role builder's graph operations for the ring (RingAttention.h).
class RingAdapter : public RingGraphBuilder {
public:
  explicit RingAdapter(RoleBuilder &RB) : RB(RB) {}
  Expected<Value *> get(const Value *V, const AxisSpec &S) override {
    return RB.materialize(V, S);
  }
  Expected<Value *> op(StringRef Op, StringRef Base, ArrayRef<Value *> In,
                       const TensorType &T, std::vector<Attribute> Attrs,
                       StringRef OutName) override {
    std::string Name = RB.fresh(Base);
    std::string Out = OutName.empty() ? Name : OutName.str();
    Expected<Node *> N = RB.add(Op, Name, In, {Out});
    if (!N)
      return N.takeError();
    (*N)->setAttributes(std::move(Attrs));
    (*N)->getOutput(0)->Type = T;
    return (*N)->getOutput(0);
  }
  Value *constInt64(StringRef Name, ArrayRef<int64_t> Shape,
                    ArrayRef<int64_t> Vals) override {
    return RB.constInt64(Name, Shape, Vals);
  }
  void send(Value *X, unsigned Dest, int Tag, StringRef Base) override {
    Node *S = cantFail(RB.G->addNode(
        "HcomSend", "hccl", RB.fresh("hcom.cp.send." + Base.str()), {X}, {}));
    S->addAttribute(strAttr("group", "cp"));
    S->addAttribute(intAttr("sr_tag", Tag));
    S->addAttribute(intAttr("dest_rank", Dest));
  }
  Expected<Value *> recv(const TensorType &T, unsigned Src, int Tag,
                         StringRef Base) override {
    std::string Name = RB.fresh("hcom.cp.recv." + Base.str());
    Expected<Node *> N = RB.G->addNode("HcomReceive", "hccl", Name, {}, {Name});
    if (!N)
      return N.takeError();
    (*N)->addAttribute(strAttr("group", "cp"));
    (*N)->addAttribute(intAttr("sr_tag", Tag));
    (*N)->addAttribute(intAttr("src_rank", Src));
    (*N)->addAttribute(intsAttr("shape", T.getStaticShape()));
    (*N)->addAttribute(intAttr("dtype", (int64_t)T.Elem));
    (*N)->getOutput(0)->Type = T;
    return (*N)->getOutput(0);
  }

private:
  RoleBuilder &RB;
};

Error RoleBuilder::buildRing(const Node &N, const RingSite &Site,
                             StringRef OutName) {
  RingAdapter A(*this);
  Expected<Value *> Y = lowerRingAttention(R, Site, TP, TPR, A, OutName);
  if (!Y)
    return Y.takeError();
  Produced[N.getOutput(0)] = *Y;
  return Error::success();
}

Error RoleBuilder::lowerSpecial(const Node &N, const NodeSharding &NS,
                                ArrayRef<Value *> In,
                                ArrayRef<std::string> OutNames) {
  switch (NS.Lower) {
  case NodeSharding::Lowering::GlobalShape:
    return lowerGlobalShape(N, OutNames);
  case NodeSharding::Lowering::VocabParallelGather:
    return lowerVocabParallelGather(N, In, OutNames);
  case NodeSharding::Lowering::BiasAfterReduce:
    return lowerBiasAfterReduce(N, NS, In, OutNames);
  case NodeSharding::Lowering::VocabParallelCrossEntropy:
    return lowerVocabParallelCrossEntropy(N, NS, In, OutNames);
  case NodeSharding::Lowering::MeanOfShards: {
    // The mean over this rank's rows, scaled by 1 / axis size: an addend
    // of the mean over all rows (LossRules.cpp).
    SmallVector<std::string, 2> Names(OutNames.begin(), OutNames.end());
    Names[0] = fresh(OutNames[0] + ".local_mean");
    SmallVector<Value *, 4> Ins(In.begin(), In.end());
    if (Error E = cloneLocal(N, NS, Ins, Names, false))
      return E;
    const Value *Y = N.getOutput(0);
    Value *Local = Produced[Y];
    Value *Scale =
        constScalar(fresh(OutNames[0] + ".share"), Local->Type.Elem, 1.0 / TP);
    Expected<Node *> M = add("Mul", fresh("share." + OutNames[0]),
                             {Local, Scale}, {OutNames[0]});
    if (!M)
      return M.takeError();
    (*M)->getOutput(0)->Type = Local->Type;
    Produced[Y] = (*M)->getOutput(0);
    return Error::success();
  }
  case NodeSharding::Lowering::MeanOverCount:
    return lowerMeanOverCount(N, In, OutNames);
  case NodeSharding::Lowering::None:
    break;
  }
  return Error::success();
}

Error RoleBuilder::lowerMeanOverCount(const Node &N, ArrayRef<Value *> In,
                                      ArrayRef<std::string> OutNames) {
  const std::string &Y = OutNames[0];
  TensorType T = N.getOutput(0)->Type;
  // The local sum over the counted rows: the node with reduction "sum".
  std::vector<Attribute> Attrs;
  for (const Attribute &A : N.getAttributes())
    if (A.Name != "reduction")
      Attrs.push_back(copyAttributeValues(A));
  Attrs.push_back(strAttr("reduction", "sum"));
  // Named in sequence: two fresh() calls among one call's arguments would
  // be numbered in the compiler's order of evaluation.
  std::string SumOut = fresh(Y + ".local_sum");
  std::string SumName = fresh(Y + ".local_sum");
  Expected<Node *> Sum = G->addNode(N.getOpType(), N.getDomain(), SumName,
                                    In.take_front(2), {SumOut});
  if (!Sum)
    return Sum.takeError();
  (*Sum)->setAttributes(std::move(Attrs));
  (*Sum)->getOutput(0)->Type = T;
  // The local count: labels other than ignore_index.
  Value *Labels = In[1];
  Tensor Ign = Tensor::makeFromInts(Labels->Type.Elem, {},
                                    {N.getAttrInt("ignore_index", 0)});
  Ign.Name = fresh(Y + ".ignore_index");
  Node *IC = cantFail(G->addNode("Constant", "", Ign.Name, {}, {Ign.Name}));
  IC->getOutput(0)->Type = Ign.Type;
  IC->addAttribute(tensorAttr("value", std::move(Ign)));
  TensorType BoolT = Labels->Type;
  BoolT.Elem = DataType::Bool;
  Value *X = nullptr;
  auto Step = [&](StringRef Op, ArrayRef<Value *> Ins, TensorType OT,
                  std::vector<Attribute> As = {}) -> Error {
    std::string Name = fresh(Y + ".count." + Op.lower());
    Expected<Node *> S = add(Op, Name, Ins, {Name});
    if (!S)
      return S.takeError();
    (*S)->setAttributes(std::move(As));
    (*S)->getOutput(0)->Type = std::move(OT);
    X = (*S)->getOutput(0);
    return Error::success();
  };
  TensorType FloatT = Labels->Type;
  FloatT.Elem = T.Elem;
  std::vector<Attribute> CastTo;
  CastTo.push_back(intAttr("to", (int64_t)T.Elem));
  std::vector<Attribute> KeepDims;
  KeepDims.push_back(intAttr("keepdims", 0));
  if (Error E = Step("Equal", {Labels, IC->getOutput(0)}, BoolT))
    return E;
  if (Error E = Step("Not", {X}, BoolT))
    return E;
  if (Error E = Step("Cast", {X}, FloatT, std::move(CastTo)))
    return E;
  if (Error E = Step("ReduceSum", {X}, T, std::move(KeepDims)))
    return E;
  // Both summed over the group, then divided.
  StringRef Group = getAxisGroupName(R);
  Attr Sum_{"reduction", 0, "sum"};
  Expected<Value *> S = collective("HcomAllReduce", Group, (*Sum)->getOutput(0),
                                   Y + ".sum", T, {Sum_});
  if (!S)
    return S.takeError();
  Expected<Value *> C =
      collective("HcomAllReduce", Group, X, Y + ".count", T, {Sum_});
  if (!C)
    return C.takeError();
  Expected<Node *> D = add("Div", fresh("mean." + Y), {*S, *C}, {Y});
  if (!D)
    return D.takeError();
  (*D)->getOutput(0)->Type = T;
  Produced[N.getOutput(0)] = (*D)->getOutput(0);
  return Error::success();
}

Error RoleBuilder::lowerGlobalShape(const Node &N,
                                    ArrayRef<std::string> OutNames) {
  const Value *Y = N.getOutput(0);
  Shape S = N.getInput(0)->Type.getStaticShape();
  std::vector<int64_t> Vals;
  if (N.getOpType() == "Size") {
    int64_t P = 1;
    for (int64_t D : S)
      P *= D;
    Vals.push_back(P);
  } else {
    int64_t Start = N.getAttrInt("start", 0),
            End = N.getAttrInt("end", S.size());
    if (Start < 0)
      Start += S.size();
    if (End < 0)
      End += S.size();
    Start = std::max<int64_t>(0, std::min<int64_t>(Start, S.size()));
    End = std::max<int64_t>(Start, std::min<int64_t>(End, S.size()));
    Vals.assign(S.begin() + Start, S.begin() + End);
  }
  Tensor T = Tensor::makeInt64(N.getOpType() == "Size"
                                   ? ArrayRef<int64_t>()
                                   : ArrayRef<int64_t>((int64_t)Vals.size()),
                               Vals);
  T.Name = OutNames[0];
  Expected<Node *> C = add("Constant", N.getName(), {}, {OutNames[0]});
  if (!C)
    return C.takeError();
  (*C)->getOutput(0)->Type = T.Type;
  (*C)->addAttribute(tensorAttr("value", std::move(T)));
  Produced[Y] = (*C)->getOutput(0);
  return Error::success();
}

Error RoleBuilder::lowerVocabParallelGather(const Node &N, ArrayRef<Value *> In,
                                            ArrayRef<std::string> OutNames) {
  const Value *Y = N.getOutput(0);
  Value *Table = In[0], *Ids = In[1];
  int64_t Rows = Table->Type.Dims[0].Size;
  DataType IT = Ids->Type.Elem;
  std::string B = N.getName().empty() ? OutNames[0] : N.getName().str();
  Value *Start = constScalar(B + ".vocab_start", IT, (double)(TPR * Rows));
  Value *Count = constScalar(B + ".vocab_rows", IT, (double)Rows);
  Value *Zero = constScalar(B + ".zero_index", IT, 0);
  TensorType IdT = Ids->Type;
  TensorType BoolT = IdT;
  BoolT.Elem = DataType::Bool;
  auto Op = [&](StringRef Op, ArrayRef<Value *> Ins, StringRef Suffix,
                TensorType T) -> Expected<Value *> {
    std::string ON = fresh(B + "." + Suffix.str());
    Expected<Node *> Nd = add(Op, fresh(B + "/" + Suffix.str()), Ins, {ON});
    if (!Nd)
      return Nd.takeError();
    (*Nd)->getOutput(0)->Type = std::move(T);
    return (*Nd)->getOutput(0);
  };
  Expected<Value *> Local = Op("Sub", {Ids, Start}, "local_ids", IdT);
  if (!Local)
    return Local.takeError();
  Expected<Value *> Below = Op("Less", {*Local, Zero}, "below", BoolT);
  if (!Below)
    return Below.takeError();
  Expected<Value *> NotBelow = Op("Not", {*Below}, "not_below", BoolT);
  if (!NotBelow)
    return NotBelow.takeError();
  Expected<Value *> InRange = Op("Less", {*Local, Count}, "in_range", BoolT);
  if (!InRange)
    return InRange.takeError();
  Expected<Value *> Valid = Op("And", {*NotBelow, *InRange}, "valid", BoolT);
  if (!Valid)
    return Valid.takeError();
  Expected<Value *> Safe = Op("Where", {*Valid, *Local, Zero}, "safe_ids", IdT);
  if (!Safe)
    return Safe.takeError();
  TensorType GTy = localType(Y, AxisSpec(), false);
  Expected<Value *> Rows2 = Op("Gather", {Table, *Safe}, "rows", GTy);
  if (!Rows2)
    return Rows2.takeError();
  TensorType MaskT = BoolT;
  MaskT.Dims.push_back(Dim(1));
  Value *Mask;
  if (R.M->getOpsetVersion("") >= 13) {
    Value *Ax = constInt64(B + ".mask_axis", {1}, {-1});
    Expected<Value *> U = Op("Unsqueeze", {*Valid, Ax}, "mask", MaskT);
    if (!U)
      return U.takeError();
    Mask = *U;
  } else {
    std::string ON = fresh(B + ".mask");
    Expected<Node *> Nd = add("Unsqueeze", fresh(B + "/mask"), {*Valid}, {ON});
    if (!Nd)
      return Nd.takeError();
    (*Nd)->addAttribute(intsAttr("axes", {(int64_t)IdT.getRank()}));
    (*Nd)->getOutput(0)->Type = MaskT;
    Mask = (*Nd)->getOutput(0);
  }
  Value *ZeroF = constScalar(B + ".zero", Y->Type.Elem, 0);
  Expected<Node *> W =
      add("Where", N.getName(), {Mask, *Rows2, ZeroF}, {OutNames[0]});
  if (!W)
    return W.takeError();
  (*W)->getOutput(0)->Type = GTy;
  Produced[Y] = (*W)->getOutput(0);
  return Error::success();
}

/// Megatron-LM's vocab-parallel cross entropy (megatron/core/
/// tensor_parallel/cross_entropy.py), on scores X [N, C/tp, d...] and whole
/// labels [N, d...]: m = allreduce_max(ReduceMax(X)); Xs = X - m;
/// s = allreduce_sum(ReduceSum(Exp(Xs))); t = allreduce_sum(Xs at the label
/// where this rank holds its class, else 0); loss = Log(s) - t per row,
/// zero at ignore_index, then the node's reduction (mean: over the rows not
/// ignored).
Error RoleBuilder::lowerVocabParallelCrossEntropy(
    const Node &N, const NodeSharding &NS, ArrayRef<Value *> In,
    ArrayRef<std::string> OutNames) {
  const Value *Y = N.getOutput(0);
  // The rule declares the three all-reduces, in order: the row max, the
  // sum of exps, the target score (LossRules.cpp).
  if (NS.Collectives.size() != 3)
    return err("vocab-parallel cross entropy '" + N.getName() + "' declares " +
               Twine(NS.Collectives.size()) + " collectives, not 3");
  Value *X = In[0], *Labels = In[1];
  DataType FT = X->Type.Elem, IT = Labels->Type.Elem;
  int64_t Classes = X->Type.Dims[1].Size; // this rank's
  std::string B = N.getName().empty() ? OutNames[0] : N.getName().str();
  TensorType XT = X->Type, RowT = XT, LT = Labels->Type;
  RowT.Dims[1] = Dim(1);
  TensorType IdT = RowT, BoolT = RowT, LBoolT = LT;
  IdT.Elem = IT;
  BoolT.Elem = DataType::Bool;
  LBoolT.Elem = DataType::Bool;
  auto Op = [&](StringRef Op, ArrayRef<Value *> Ins, StringRef Suffix,
                TensorType T, ArrayRef<Attribute> Attrs = {},
                StringRef OutName = "") -> Expected<Value *> {
    std::string ON =
        OutName.empty() ? fresh(B + "." + Suffix.str()) : OutName.str();
    Expected<Node *> Nd = add(Op, fresh(B + "/" + Suffix.str()), Ins, {ON});
    if (!Nd)
      return Nd.takeError();
    for (const Attribute &A : Attrs)
      (*Nd)->addAttribute(copyAttributeValues(A));
    (*Nd)->getOutput(0)->Type = std::move(T);
    return (*Nd)->getOutput(0);
  };
  auto AllReduce = [&](Value *V, unsigned I) -> Expected<Value *> {
    return tpCollective(NS.Collectives[I], V, B, V->Type);
  };
  Value *Axis1 = constInt64(B + ".class_axis", {1}, {1});
#define LOOM_TRY(Var, Expr)                                                    \
  Expected<Value *> Var = Expr;                                                \
  if (!Var)                                                                    \
    return Var.takeError();
  // The row max over all classes.
  LOOM_TRY(MaxL, Op("ReduceMax", {X}, "local_max", RowT,
                    {intsAttr("axes", {1}), intAttr("keepdims", 1)}));
  LOOM_TRY(Max, AllReduce(*MaxL, 0));
  LOOM_TRY(Xs, Op("Sub", {X, *Max}, "shifted", XT));
  // The sum of exps over all classes.
  LOOM_TRY(Ex, Op("Exp", {*Xs}, "exp", XT));
  LOOM_TRY(SumL, Op("ReduceSum", {*Ex, Axis1}, "local_sum", RowT,
                    {intAttr("keepdims", 1)}));
  LOOM_TRY(Sum, AllReduce(*SumL, 1));
  // The target's shifted score, from the rank holding its class.
  TensorType LUT = LT;
  LUT.Dims.insert(LUT.Dims.begin() + 1, Dim(1));
  LOOM_TRY(Lbl, Op("Unsqueeze", {Labels, Axis1}, "labels", LUT));
  Value *Start = constScalar(B + ".class_start", IT, (double)(TPR * Classes));
  Value *Count = constScalar(B + ".class_count", IT, (double)Classes);
  Value *Zero = constScalar(B + ".zero_index", IT, 0);
  LOOM_TRY(Local, Op("Sub", {*Lbl, Start}, "local_labels", IdT));
  LOOM_TRY(Below, Op("Less", {*Local, Zero}, "below", BoolT));
  LOOM_TRY(NotBelow, Op("Not", {*Below}, "not_below", BoolT));
  LOOM_TRY(InRange, Op("Less", {*Local, Count}, "in_range", BoolT));
  LOOM_TRY(Valid, Op("And", {*NotBelow, *InRange}, "valid", BoolT));
  LOOM_TRY(Safe, Op("Where", {*Valid, *Local, Zero}, "safe_labels", IdT));
  LOOM_TRY(Picked, Op("GatherElements", {*Xs, *Safe}, "target_local", RowT,
                      {intAttr("axis", 1)}));
  Value *ZeroF = constScalar(B + ".zero", FT, 0);
  LOOM_TRY(Masked,
           Op("Where", {*Valid, *Picked, ZeroF}, "target_masked", RowT));
  LOOM_TRY(Target, AllReduce(*Masked, 2));
  // Per row: log(sum) - target, zero where the label is ignore_index.
  LOOM_TRY(Log, Op("Log", {*Sum}, "log_sum", RowT));
  LOOM_TRY(Diff, Op("Sub", {*Log, *Target}, "row_loss", RowT));
  TensorType PerRowT = LT;
  PerRowT.Elem = FT;
  std::string Red = N.getAttrString("reduction", "mean").str();
  bool Ignore = N.getAttribute("ignore_index") != nullptr;
  StringRef RowName =
      Red == "none" && !Ignore ? StringRef(OutNames[0]) : StringRef();
  LOOM_TRY(Row, Op("Squeeze", {*Diff, Axis1}, "rows", PerRowT, {}, RowName));
  Value *Rows = *Row;
  Value *Kept = nullptr;
  if (Ignore) {
    Value *II = constScalar(B + ".ignore_index", IT,
                            (double)N.getAttrInt("ignore_index", 0));
    LOOM_TRY(Ign, Op("Equal", {Labels, II}, "ignored", LBoolT));
    StringRef Name = Red == "none" ? StringRef(OutNames[0]) : StringRef();
    LOOM_TRY(R0,
             Op("Where", {*Ign, ZeroF, Rows}, "rows_kept", PerRowT, {}, Name));
    Rows = *R0;
    if (Red == "mean") {
      LOOM_TRY(NotIgn, Op("Not", {*Ign}, "counted", LBoolT));
      LOOM_TRY(Cnt, Op("Cast", {*NotIgn}, "counted_f", PerRowT,
                       {intAttr("to", (int64_t)FT)}));
      Kept = *Cnt;
    }
  }
  TensorType ScalarT;
  ScalarT.Elem = FT;
  ScalarT.HasShape = true;
  Value *Result = Rows;
  if (Red == "sum" || (Red == "mean" && !Kept)) {
    LOOM_TRY(Tot,
             Op(Red == "sum" ? "ReduceSum" : "ReduceMean", {Rows}, "reduced",
                ScalarT, {intAttr("keepdims", 0)}, OutNames[0]));
    Result = *Tot;
  } else if (Red == "mean") {
    LOOM_TRY(Tot, Op("ReduceSum", {Rows}, "total", ScalarT,
                     {intAttr("keepdims", 0)}));
    LOOM_TRY(Cnt, Op("ReduceSum", {Kept}, "count", ScalarT,
                     {intAttr("keepdims", 0)}));
    LOOM_TRY(Mean, Op("Div", {*Tot, *Cnt}, "mean", ScalarT, {}, OutNames[0]));
    Result = *Mean;
  }
#undef LOOM_TRY
  Produced[Y] = Result;
  return Error::success();
}

Error RoleBuilder::lowerBiasAfterReduce(const Node &N, const NodeSharding &NS,
                                        ArrayRef<Value *> In,
                                        ArrayRef<std::string> OutNames) {
  const Value *Y = N.getOutput(0);
  // Row-parallel Gemm/Conv: partial products, reduced, then the bias once.
  std::string B = N.getName().empty() ? OutNames[0] : N.getName().str();
  std::string PN = fresh(OutNames[0] + ".partial");
  SmallVector<Value *, 2> Ins = {In[0], In[1]};
  Expected<Node *> Mm = add(N.getOpType(), N.getName(), Ins, {PN});
  if (!Mm)
    return Mm.takeError();
  for (const Attribute &A : N.getAttributes())
    if (A.Name != "beta")
      (*Mm)->addAttribute(copyAttributeValues(A));
  TensorType T = localType(Y, AxisSpec(), false);
  (*Mm)->getOutput(0)->Type = T;
  // The one all-reduce the rule declares (Rules.cpp, setRowParallel).
  if (NS.Collectives.size() != 1)
    return err("bias after reduce of '" + N.getName() + "' declares " +
               Twine(NS.Collectives.size()) + " collectives, not 1");
  Expected<Value *> Red =
      tpCollective(NS.Collectives[0], (*Mm)->getOutput(0), OutNames[0], T);
  if (!Red)
    return Red.takeError();
  Value *Bias = In[2];
  if (N.getOpType() == "Conv") {
    // [Co] -> [Co, 1, ..., 1] to broadcast over the spatial dims.
    unsigned Spatial = T.getRank() - 2;
    std::vector<int64_t> S = {Bias->Type.Dims[0].Size};
    S.insert(S.end(), Spatial, 1);
    Value *SV = constInt64(B + ".bias_shape", {(int64_t)S.size()}, S);
    std::string RN = fresh(B + ".bias");
    Expected<Node *> Rs =
        add("Reshape", fresh(B + "/bias_reshape"), {Bias, SV}, {RN});
    if (!Rs)
      return Rs.takeError();
    TensorType BT = Bias->Type;
    BT.Dims.clear();
    for (int64_t D : S)
      BT.Dims.push_back(Dim(D));
    (*Rs)->getOutput(0)->Type = BT;
    Bias = (*Rs)->getOutput(0);
  } else if (N.getAttrFloat("beta", 1.0f) != 1.0f) {
    Value *Beta =
        constScalar(B + ".beta", Bias->Type.Elem, N.getAttrFloat("beta", 1.0f));
    std::string MN = fresh(B + ".scaled_bias");
    Expected<Node *> Mu = add("Mul", fresh(B + "/beta"), {Bias, Beta}, {MN});
    if (!Mu)
      return Mu.takeError();
    (*Mu)->getOutput(0)->Type = Bias->Type;
    Bias = (*Mu)->getOutput(0);
  }
  Expected<Node *> Ad =
      add("Add", fresh(B + "/bias"), {*Red, Bias}, {OutNames[0]});
  if (!Ad)
    return Ad.takeError();
  (*Ad)->getOutput(0)->Type = T;
  Produced[Y] = (*Ad)->getOutput(0);
  return Error::success();
}

} // namespace loom
