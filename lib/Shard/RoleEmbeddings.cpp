//===- RoleEmbeddings.cpp - Embedding lookups of dp-sharded tables --------===//
//
// The RoleBuilder part that lowers a lookup in an embedding table sharded
// over dp (EmbeddingShards.h): the group's ids gathered, this rank's
// shard looked up, the result returned to each rank's samples.
//
//===----------------------------------------------------------------------===//
#include "RoleBuilder.h"
#include "ShardAttrs.h"
#include "loom/Shard/EmbeddingShards.h"

using namespace llvm;

namespace loom {

Error RoleBuilder::lowerEmbeddingLookup(const Node &N,
                                        const EmbeddingShard &S) {
  unsigned NG = R.Plan.DP;
  const Value *W = N.getInput(0), *IdsV = N.getInput(1);
  const Value *OutV = N.getOutput(0);
  if (DPR < 0 || !OutV || !OutV->Type.isStatic() || !IdsV->Type.isStatic() ||
      !IdsV->Type.getRank())
    return err("embedding lookup '" + N.getName() +
               "': needs static, batched ids and a dp role");
  Expected<Value *> Ids = materialize(IdsV, AxisSpec());
  if (!Ids)
    return Ids.takeError();
  EmbLookups.insert(OutV);
  std::string Base = OutV->getName().str();
  // Names are fresh, so adding a node cannot fail.
  auto Op = [&](StringRef OpT, StringRef Suffix, ArrayRef<Value *> In,
                TensorType T) {
    std::string Name = fresh(Base + "." + Suffix.str());
    Node *X = cantFail(add(OpT, Name, In, {Name}));
    X->getOutput(0)->Type = std::move(T);
    return X->getOutput(0);
  };
  Value *I64 = *Ids;
  if (I64->Type.Elem != DataType::Int64) {
    I64 = Op("Cast", "ids64", {I64},
             TensorType(DataType::Int64, I64->Type.getStaticShape()));
    I64->getDefiningNode()->addAttribute(
        intAttr("to", (int64_t)DataType::Int64));
  }
  // The group's ids, in dp order (sample i of the group is rank i / b's).
  Shape IdShape = I64->Type.getStaticShape();
  IdShape[0] *= NG;
  Expected<Value *> GId = collective(
      "HcomAllGather", "dp", I64, (IdsV->getName() + ".dpgather").str(),
      TensorType(DataType::Int64, IdShape), {{"rank_size", NG}, {"axis", 0}});
  if (!GId)
    return GId.takeError();
  DataType ET = W->Type.Elem;
  int64_t D = W->Type.Dims[1].Size;
  Shape PShape = OutV->Type.getStaticShape();
  PShape[0] *= NG;
  Shape MShape = IdShape;
  MShape.push_back(1);
  TensorType IT(DataType::Int64, IdShape), BT(DataType::Bool, IdShape),
      PT(ET, PShape);
  // A 0/1 mask of the group's ids, [N*b, ..., 1] in the table's type.
  auto MaskOf = [&](Value *Bool) {
    Value *U;
    if (R.M->getOpsetVersion("") >= 13) {
      U = Op("Unsqueeze", "mask1",
             {Bool, constInt64(Base + ".last", {1}, {-1})},
             TensorType(DataType::Bool, MShape));
    } else {
      U = Op("Unsqueeze", "mask1", {Bool}, TensorType(DataType::Bool, MShape));
      U->getDefiningNode()->addAttribute(intsAttr("axes", {-1}));
    }
    Value *C = Op("Cast", "maskf", {U}, TensorType(ET, MShape));
    C->getDefiningNode()->addAttribute(intAttr("to", (int64_t)ET));
    return C;
  };
  auto I64Const = [&](StringRef Suffix, int64_t V) {
    return constScalar(Base + "." + Suffix.str(), DataType::Int64, (double)V);
  };
  Value *Partial = nullptr;
  if (S.Kind == EmbShardKind::Col || S.Kind == EmbShardKind::Row ||
      (int)S.Owner == DPR) {
    Expected<EmbeddingShardData> SD =
        getEmbeddingShardData(*W, S.Kind, NG, (unsigned)DPR);
    if (!SD)
      return SD.takeError();
    Expected<Value *> Shard =
        G->addParameter(fresh(W->getName()), SD->Type, SD->Data);
    if (!Shard)
      return Shard.takeError();
    if (S.Kind == EmbShardKind::Col) {
      // This rank's D/N columns of the group's rows, [N*b, ..., D/N]; an
      // all-to-all over dp sends rank j its samples' block and concatenates
      // the column slices in rank order: [b, ..., D].
      Shape LShape = PShape;
      LShape.back() = SD->Type.Dims[1].Size;
      Value *L = Op("Gather", "lookup", {*Shard, *GId}, TensorType(ET, LShape));
      return finishNode(N, OutV,
                        allToAllDP(L, Base + ".dpa2a", 0,
                                   (int)LShape.size() - 1, OutV->Type));
    }
    if (S.Kind == EmbShardKind::Table) {
      Partial = Op("Gather", "lookup", {*Shard, *GId}, PT);
    } else {
      // Rows [FirstRow, FirstRow + Rows) are here; other ids read row 0
      // and are masked to zero.
      int64_t Rows = SD->Rows;
      Value *Rel =
          Op("Sub", "rel", {*GId, I64Const("start", SD->FirstRow)}, IT);
      Value *Lo = Op("Less", "below", {Rel, I64Const("zero", 0)}, BT);
      Value *Hi = Op("Less", "inrange", {Rel, I64Const("rows", Rows)}, BT);
      Value *NotLo = Op("Not", "notbelow", {Lo}, BT);
      Value *Mine = Op("And", "mine", {NotLo, Hi}, BT);
      Value *Safe = Op("Where", "safe", {Mine, Rel, I64Const("row0", 0)}, IT);
      Value *L = Op("Gather", "lookup", {*Shard, Safe}, PT);
      Partial = Op("Mul", "partial", {L, MaskOf(Mine)}, PT);
    }
  } else {
    // Not the owner of a table-wise table: zeros, shaped by the ids so the
    // all-gather stays in the graph.
    Value *Neg = Op("Less", "none", {*GId, I64Const("neg", 0)}, BT);
    std::string ZN = fresh(Base + ".zeros");
    Tensor Z = Tensor::makeFromDoubles(ET, {D}, std::vector<double>(D, 0.0));
    Z.Name = ZN;
    Node *C = cantFail(G->addNode("Constant", "", ZN, {}, {ZN}));
    C->getOutput(0)->Type = Z.Type;
    C->addAttribute(tensorAttr("value", std::move(Z)));
    Partial = Op("Mul", "partial", {MaskOf(Neg), C->getOutput(0)}, PT);
  }
  return finishNode(
      N, OutV,
      collective("HcomReduceScatter", "dp", Partial, Base + ".dpscatter",
                 OutV->Type,
                 {{"reduction", 0, "sum"}, {"rank_size", NG}, {"axis", 0}}));
}

} // namespace loom
