//===- EmbeddingShardsTest.cpp - One dp rank's embedding table shard ------===//
//
// getEmbeddingShardData (lib/Shard/EmbeddingShards.cpp): the bytes and
// shape each dp rank's role graph holds for a table sharded row-, column-
// or table-wise, on a 5 x 4 float table whose element (r, c) is 10r + c.
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/EmbeddingShards.h"
#include "gtest/gtest.h"
#include <cstring>
#include <vector>

using namespace loom;
using namespace llvm;

namespace {

struct Table {
  Graph G{"t"};
  Value *W = nullptr;
  Table(int64_t Rows, int64_t Dim) {
    std::vector<char> Bytes(Rows * Dim * 4);
    for (int64_t R = 0; R < Rows; ++R)
      for (int64_t C = 0; C < Dim; ++C) {
        float F = (float)(10 * R + C);
        std::memcpy(&Bytes[(R * Dim + C) * 4], &F, 4);
      }
    W = cantFail(G.addParameter("emb", TensorType(DataType::Float, {Rows, Dim}),
                                std::make_shared<BufferTensorData>(Bytes)));
  }
};

std::vector<float> floatsOf(const EmbeddingShardData &S) {
  std::vector<char> B(S.Data->getSize());
  cantFail(S.Data->readAll(B.data()));
  std::vector<float> F(B.size() / 4);
  std::memcpy(F.data(), B.data(), B.size());
  return F;
}

TEST(EmbeddingShards, ColumnSliceHoldsEveryRow) {
  Table T(5, 4);
  EmbeddingShardData S =
      cantFail(getEmbeddingShardData(*T.W, EmbShardKind::Col, 2, 1));
  EXPECT_EQ(S.Type.Dims[0].Size, 5);
  EXPECT_EQ(S.Type.Dims[1].Size, 2);
  // Columns 2 and 3 of rows 0..4.
  EXPECT_EQ(floatsOf(S),
            (std::vector<float>{2, 3, 12, 13, 22, 23, 32, 33, 42, 43}));
}

TEST(EmbeddingShards, ColumnsMustDivide) {
  Table T(5, 4);
  Expected<EmbeddingShardData> S =
      getEmbeddingShardData(*T.W, EmbShardKind::Col, 3, 0);
  ASSERT_FALSE((bool)S);
  EXPECT_EQ(toString(S.takeError()),
            "embedding table 'emb': dim 4 is not divisible by dp=3 "
            "(column-wise)");
}

TEST(EmbeddingShards, UnevenRowsArePaddedWithZeros) {
  // ceil(5 / 2) = 3 rows each: rank 0 rows 0-2, rank 1 rows 3-4 + a zero
  // row.
  Table T(5, 4);
  EmbeddingShardData S0 =
      cantFail(getEmbeddingShardData(*T.W, EmbShardKind::Row, 2, 0));
  EmbeddingShardData S1 =
      cantFail(getEmbeddingShardData(*T.W, EmbShardKind::Row, 2, 1));
  EXPECT_EQ(S0.FirstRow, 0);
  EXPECT_EQ(S1.FirstRow, 3);
  EXPECT_EQ(S1.Rows, 3);
  EXPECT_EQ(S1.Type.Dims[0].Size, 3);
  EXPECT_EQ(floatsOf(S0)[8], 20.0f);
  EXPECT_EQ(floatsOf(S1),
            (std::vector<float>{30, 31, 32, 33, 40, 41, 42, 43, 0, 0, 0, 0}));
  // More ranks than rows: the last ranks hold one zero row.
  EmbeddingShardData S7 =
      cantFail(getEmbeddingShardData(*T.W, EmbShardKind::Row, 8, 7));
  EXPECT_EQ(S7.FirstRow, 7);
  EXPECT_EQ(floatsOf(S7), (std::vector<float>{0, 0, 0, 0}));
}

TEST(EmbeddingShards, EvenRowsAndWholeTable) {
  Table T(6, 2);
  EmbeddingShardData S =
      cantFail(getEmbeddingShardData(*T.W, EmbShardKind::Row, 3, 2));
  EXPECT_EQ(S.FirstRow, 4);
  EXPECT_EQ(floatsOf(S), (std::vector<float>{40, 41, 50, 51}));
  EmbeddingShardData W =
      cantFail(getEmbeddingShardData(*T.W, EmbShardKind::Table, 3, 1));
  EXPECT_EQ(W.Type.Dims[0].Size, 6);
  EXPECT_EQ(W.Data, T.W->Data);
}

TEST(EmbeddingShards, ShapeOnlyTableHasNoData) {
  Graph G{"t"};
  Value *W = cantFail(G.addParameter(
      "big", TensorType(DataType::Float16, {1000000000, 128}), nullptr));
  EmbeddingShardData S =
      cantFail(getEmbeddingShardData(*W, EmbShardKind::Col, 128, 5));
  EXPECT_EQ(S.Type.Dims[1].Size, 1);
  EXPECT_EQ(S.Data, nullptr);
}

} // namespace
