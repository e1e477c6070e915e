//===- IRTest.cpp - Tests for the graph IR, its verifier and printer ------===//

#include "loom/IR/Graph.h"
#include "loom/IR/TransposedTensorData.h"

#include "gtest/gtest.h"

#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace loom;
using namespace llvm;

namespace {

/// "<ok>" for success, else the message.
std::string errorOf(Error E) {
  if (!E)
    return "<ok>";
  return toString(std::move(E));
}

TensorType typeOf(DataType Elem, ArrayRef<Dim> Dims) {
  TensorType T;
  T.Elem = Elem;
  T.HasShape = true;
  T.Dims.assign(Dims.begin(), Dims.end());
  return T;
}

std::vector<uint16_t> halves(const Tensor &T) {
  Expected<ArrayRef<char>> B = T.Data->getBytes();
  EXPECT_TRUE(bool(B));
  if (!B)
    return {};
  std::vector<uint16_t> Out(B->size() / 2);
  std::memcpy(Out.data(), B->data(), B->size());
  return Out;
}

//===----------------------------------------------------------------------===//
// TensorType
//===----------------------------------------------------------------------===//

TEST(IRTest, NumElementsAndBytes) {
  // 2 * 3 * 4 = 24 elements; 24 * 4 B (f32) = 96 B.
  TensorType T(DataType::Float, {2, 3, 4});
  EXPECT_TRUE(T.isStatic());
  EXPECT_EQ(T.getNumElements(), Optional<int64_t>(24));
  EXPECT_EQ(T.getSizeInBytes(), Optional<int64_t>(96));
  // A scalar has one element; f16 is 2 B.
  TensorType S(DataType::Float16, {});
  EXPECT_EQ(S.getNumElements(), Optional<int64_t>(1));
  EXPECT_EQ(S.getSizeInBytes(), Optional<int64_t>(2));
  // A zero dim makes an empty tensor: 0 * 5 = 0.
  TensorType E(DataType::Int64, {0, 5});
  EXPECT_EQ(E.getNumElements(), Optional<int64_t>(0));
  EXPECT_EQ(E.getSizeInBytes(), Optional<int64_t>(0));
  // bf16 [4096, 4096]: 16777216 elements * 2 B = 33554432 B.
  TensorType W(DataType::BFloat16, {4096, 4096});
  EXPECT_EQ(W.getSizeInBytes(), Optional<int64_t>(33554432));
}

TEST(IRTest, NonStaticTypesHaveNoSize) {
  TensorType Sym = typeOf(DataType::Float, {Dim::symbol("batch"), Dim(64)});
  EXPECT_FALSE(Sym.isStatic());
  EXPECT_FALSE(Sym.getNumElements().hasValue());
  TensorType Unknown = typeOf(DataType::Float, {Dim(), Dim(64)});
  EXPECT_FALSE(Unknown.getNumElements().hasValue());
  TensorType NoRank;
  NoRank.Elem = DataType::Float;
  EXPECT_FALSE(NoRank.isStatic());
  EXPECT_FALSE(NoRank.getNumElements().hasValue());
  // Strings have a static element count but no byte size.
  TensorType Str(DataType::String, {3});
  EXPECT_EQ(Str.getNumElements(), Optional<int64_t>(3));
  EXPECT_FALSE(Str.getSizeInBytes().hasValue());
}

TEST(IRTest, SizeOverflow) {
  // 2^31 * 2^31 = 2^62 elements fits in int64 (max 2^63 - 1) ...
  TensorType Big(DataType::Float, {int64_t(1) << 31, int64_t(1) << 31});
  EXPECT_EQ(Big.getNumElements(), Optional<int64_t>(int64_t(1) << 62));
  // ... but 2^62 * 4 B = 2^64 B does not.
  EXPECT_FALSE(Big.getSizeInBytes().hasValue());
  // 2^32 * 2^32 = 2^64 elements overflows already.
  TensorType Huge(DataType::Int8, {int64_t(1) << 32, int64_t(1) << 32});
  EXPECT_FALSE(Huge.getNumElements().hasValue());
  EXPECT_FALSE(Huge.getSizeInBytes().hasValue());
  // 2^62 * 1 B (i8) = 2^62 B is fine.
  TensorType I8(DataType::Int8, {int64_t(1) << 31, int64_t(1) << 31});
  EXPECT_EQ(I8.getSizeInBytes(), Optional<int64_t>(int64_t(1) << 62));
}

TEST(IRTest, PrintsTypes) {
  EXPECT_EQ(TensorType(DataType::Float, {2, 3}).str(), "f32[2,3]");
  EXPECT_EQ(TensorType(DataType::Int64, {}).str(), "i64[]");
  EXPECT_EQ(
      typeOf(DataType::BFloat16, {Dim::symbol("batch"), Dim(), Dim(8)}).str(),
      "bf16[batch,?,8]");
  TensorType NoRank;
  NoRank.Elem = DataType::Float16;
  EXPECT_EQ(NoRank.str(), "f16[*]");
  EXPECT_EQ(TensorType().str(), "?[*]");
}

//===----------------------------------------------------------------------===//
// Tensor values
//===----------------------------------------------------------------------===//

TEST(IRTest, Int64TensorValues) {
  Tensor T = Tensor::makeInt64({2, 2}, {1, -2, 3, int64_t(1) << 40});
  EXPECT_EQ(T.Type.str(), "i64[2,2]");
  EXPECT_EQ(T.Data->getSize(), 32u); // 4 * 8 B.
  Expected<std::vector<int64_t>> V = T.getIntValues();
  ASSERT_TRUE(bool(V));
  EXPECT_EQ(*V, (std::vector<int64_t>{1, -2, 3, int64_t(1) << 40}));
  // Integers read as floats are widened.
  Expected<std::vector<double>> F = T.getFloatValues();
  ASSERT_TRUE(bool(F));
  EXPECT_EQ((*F)[1], -2.0);
}

TEST(IRTest, NarrowIntegerTensorValues) {
  Tensor I8 = Tensor::makeFromInts(DataType::Int8, {3}, {-128, 0, 127});
  EXPECT_EQ(I8.Data->getSize(), 3u);
  EXPECT_EQ(cantFail(I8.getIntValues()), (std::vector<int64_t>{-128, 0, 127}));
  // uint8 255 stays 255, not -1.
  Tensor U8 = Tensor::makeFromInts(DataType::UInt8, {2}, {255, 1});
  EXPECT_EQ(cantFail(U8.getIntValues()), (std::vector<int64_t>{255, 1}));
  // bool stores 0/1 whatever the input.
  Tensor B = Tensor::makeFromInts(DataType::Bool, {3}, {0, 5, -1});
  EXPECT_EQ(cantFail(B.getIntValues()), (std::vector<int64_t>{0, 1, 1}));
  Tensor I32 = Tensor::makeFromInts(DataType::Int32, {2}, {-7, 1 << 30});
  EXPECT_EQ(I32.Data->getSize(), 8u);
  EXPECT_EQ(cantFail(I32.getIntValues()), (std::vector<int64_t>{-7, 1 << 30}));
}

TEST(IRTest, FloatTensorValues) {
  Tensor F = Tensor::makeFromDoubles(DataType::Float, {3}, {0.5, -1.25, 3});
  EXPECT_EQ(F.Data->getSize(), 12u);
  EXPECT_EQ(cantFail(F.getFloatValues()),
            (std::vector<double>{0.5, -1.25, 3.0}));
  // 0.1 is stored as the f32 nearest to it, 0.100000001490116...
  Tensor Tenth = Tensor::makeFromDoubles(DataType::Float, {}, {0.1});
  EXPECT_EQ(cantFail(Tenth.getFloatValues())[0], (double)0.1f);
  Tensor D = Tensor::makeFromDoubles(DataType::Double, {1}, {0.1});
  EXPECT_EQ(cantFail(D.getFloatValues())[0], 0.1);
  // Float tensors are not integer tensors.
  EXPECT_NE(errorOf(F.getIntValues().takeError()), "<ok>");
}

TEST(IRTest, Float16Values) {
  // Bit patterns: 1.0 = 0x3C00; -2.5 = -1.25 * 2^1 = 0xC100 (sign, exp 16,
  // mantissa 0x100); 65504 = largest finite = 0x7BFF; 2^-24 = smallest
  // subnormal = 0x0001; 2^-14 = smallest normal = 0x0400.
  Tensor T = Tensor::makeFromDoubles(
      DataType::Float16, {5},
      {1.0, -2.5, 65504, std::ldexp(1.0, -24), std::ldexp(1.0, -14)});
  EXPECT_EQ(T.Data->getSize(), 10u);
  EXPECT_EQ(halves(T),
            (std::vector<uint16_t>{0x3C00, 0xC100, 0x7BFF, 0x0001, 0x0400}));
  EXPECT_EQ(cantFail(T.getFloatValues()),
            (std::vector<double>{1.0, -2.5, 65504, std::ldexp(1.0, -24),
                                 std::ldexp(1.0, -14)}));
}

TEST(IRTest, Float16Rounding) {
  // Round to nearest, ties to even (what IEEE casts and ONNX Runtime do).
  // f16 spacing at 1.0 is 2^-10. 1 + 2^-11 is half way between 1.0 (0x3C00,
  // even) and 1 + 2^-10 (0x3C01): ties to 0x3C00. 1 + 3 * 2^-11 is half way
  // between 0x3C01 and 0x3C02 (even): ties to 0x3C02. 1 + 2^-11 + 2^-20 is
  // past the half: 0x3C01.
  Tensor T = Tensor::makeFromDoubles(
      DataType::Float16, {3},
      {1 + std::ldexp(1.0, -11), 1 + 3 * std::ldexp(1.0, -11),
       1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -20)});
  EXPECT_EQ(halves(T), (std::vector<uint16_t>{0x3C00, 0x3C02, 0x3C01}));
  // Subnormals: 2^-25 is half the smallest subnormal: ties to even, 0.
  // 3 * 2^-25 is half way between 2^-24 (0x0001) and 2^-23 (0x0002): 0x0002.
  // 65520 is half way between 65504 and 65536 (not representable): ties
  // to even, which carries into the exponent: infinity, 0x7C00. 1e6
  // overflows: 0x7C00. -0.0 keeps its sign: 0x8000.
  Tensor S = Tensor::makeFromDoubles(
      DataType::Float16, {5},
      {std::ldexp(1.0, -25), 3 * std::ldexp(1.0, -25), 65520, 1e6, -0.0});
  EXPECT_EQ(halves(S),
            (std::vector<uint16_t>{0x0000, 0x0002, 0x7C00, 0x7C00, 0x8000}));
  std::vector<double> V = cantFail(S.getFloatValues());
  EXPECT_TRUE(std::isinf(V[2]) && V[2] > 0);
}

TEST(IRTest, Float16InfAndNaN) {
  Tensor T =
      Tensor::makeFromDoubles(DataType::Float16, {3},
                              {std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::quiet_NaN()});
  std::vector<uint16_t> H = halves(T);
  EXPECT_EQ(H[0], 0x7C00);
  EXPECT_EQ(H[1], 0xFC00);
  EXPECT_EQ(H[2] & 0x7C00, 0x7C00); // NaN: all-ones exponent ...
  EXPECT_NE(H[2] & 0x03FF, 0);      // ... and a non-zero mantissa.
  std::vector<double> V = cantFail(T.getFloatValues());
  EXPECT_TRUE(std::isinf(V[0]) && V[0] > 0);
  EXPECT_TRUE(std::isinf(V[1]) && V[1] < 0);
  EXPECT_TRUE(std::isnan(V[2]));
}

TEST(IRTest, BFloat16Values) {
  // bf16 is the top half of an f32: 1.0f = 0x3F800000 -> 0x3F80; -2.0f =
  // 0xC0000000 -> 0xC000. Rounding to nearest even: 1 + 3 * 2^-9 lies
  // between 1.0 (0x3F80) and 1 + 2^-7 (0x3F81) closer to the latter: 0x3F81
  // (truncation would give 0x3F80). 1 + 2^-8 is the tie: even, 0x3F80.
  // 1 + 3 * 2^-8 is the tie between 0x3F81 and 0x3F82: even, 0x3F82.
  Tensor T = Tensor::makeFromDoubles(DataType::BFloat16, {5},
                                     {1.0, -2.0, 1 + 3 * std::ldexp(1.0, -9),
                                      1 + std::ldexp(1.0, -8),
                                      1 + 3 * std::ldexp(1.0, -8)});
  EXPECT_EQ(halves(T),
            (std::vector<uint16_t>{0x3F80, 0xC000, 0x3F81, 0x3F80, 0x3F82}));
  std::vector<double> V = cantFail(T.getFloatValues());
  EXPECT_EQ(V[0], 1.0);
  EXPECT_EQ(V[1], -2.0);
  EXPECT_EQ(V[2], 1 + std::ldexp(1.0, -7));
  // A NaN stays a NaN (truncating 0x7F800001 would make it infinity).
  uint32_t Bits = 0x7F800001u;
  float NaN;
  std::memcpy(&NaN, &Bits, 4);
  Tensor N = Tensor::makeFromDoubles(DataType::BFloat16, {1}, {NaN});
  EXPECT_TRUE(std::isnan(cantFail(N.getFloatValues())[0]));
}

TEST(IRTest, TensorDataSizeMismatch) {
  Tensor T;
  T.Name = "t";
  T.Type = TensorType(DataType::Int64, {3});
  T.Data = std::make_shared<BufferTensorData>(std::vector<char>(16));
  // i64[3] needs 3 * 8 = 24 bytes; 16 are there.
  EXPECT_EQ(errorOf(T.getIntValues().takeError()),
            "tensor 't' has 16 bytes of data but its type i64[3] needs 24");
  Tensor NoData;
  NoData.Name = "w";
  NoData.Type = TensorType(DataType::Float, {2});
  EXPECT_EQ(errorOf(NoData.getFloatValues().takeError()),
            "tensor 'w' has no data");
}

TEST(IRTest, ReadRange) {
  Tensor T = Tensor::makeFromInts(DataType::UInt8, {4}, {10, 20, 30, 40});
  Expected<std::vector<char>> R = T.Data->readRange(1, 2);
  ASSERT_TRUE(bool(R));
  EXPECT_EQ(*R, (std::vector<char>{20, 30}));
  // Offset 3 + length 2 = 5 > 4 bytes.
  EXPECT_EQ(errorOf(T.Data->readRange(3, 2).takeError()),
            "read of 2 bytes at offset 3 is past the end of 4 bytes of "
            "tensor data");
}

TEST(IRTest, TransposedViewReadsWithoutCopying) {
  // Source [2, 3] = {1, 2, 3; 4, 5, 6} (uint8): its transpose [3, 2] is
  // {1, 4; 2, 5; 3, 6}.
  Tensor T = Tensor::makeFromInts(DataType::UInt8, {2, 3}, {1, 2, 3, 4, 5, 6});
  TransposedTensorData V(T.Data, 2, 3, 1);
  EXPECT_EQ(V.getSize(), 6u);
  // Rows 1 and 2 of the transpose: bytes 2..3 and 4..5.
  std::vector<char> Runs(4);
  ASSERT_FALSE(bool(V.readStrided(2, 2, 2, 2, Runs.data())));
  EXPECT_EQ(Runs, (std::vector<char>{2, 5, 3, 6}));
  std::vector<char> All;
  ASSERT_FALSE(bool(V.withBytes([&](ArrayRef<char> B) {
    All.assign(B.begin(), B.end());
    return Error::success();
  })));
  EXPECT_EQ(All, (std::vector<char>{1, 4, 2, 5, 3, 6}));
  Expected<ArrayRef<char>> B = V.getBytes();
  ASSERT_TRUE(bool(B));
  EXPECT_EQ(std::vector<char>(B->begin(), B->end()), All);
  // Offset 4 + 1 * stride 2 + length 2 = 8 > 6 bytes.
  EXPECT_EQ(errorOf(V.readStrided(4, 2, 2, 2, Runs.data())),
            "strided read past the end of 6 bytes of tensor data");
  // A source of the wrong size is named when read.
  TransposedTensorData Bad(T.Data, 2, 2, 1);
  EXPECT_EQ(errorOf(Bad.readAll(Runs.data())),
            "transposed tensor: source has 6 bytes, expected 4");
}

//===----------------------------------------------------------------------===//
// Building, printing and verifying graphs
//===----------------------------------------------------------------------===//

/// x : f32[batch,4], w : f32[4,5] (20 zero floats: more than the 16 the
/// printer shows as values), two nodes, one output.
std::unique_ptr<Model> makeSmallModel() {
  auto M = std::make_unique<Model>();
  M->Opsets.push_back({"", 17});
  M->ProducerName = "unit";
  Graph &G = M->getGraph();
  G.setName("small");
  Value *X = cantFail(
      G.addInput("x", typeOf(DataType::Float, {Dim::symbol("batch"), 4})));
  Value *W = cantFail(G.addParameter(
      "w", TensorType(DataType::Float, {4, 5}),
      std::make_shared<BufferTensorData>(std::vector<char>(80))));
  Node *MM = cantFail(G.addNode("MatMul", "", "mm", {X, W}, {"h"}));
  MM->getOutput(0)->Type = typeOf(DataType::Float, {Dim::symbol("batch"), 5});
  Attribute A;
  A.Name = "alpha";
  A.K = Attribute::Kind::Float;
  A.F = 0.5f;
  Node *R =
      cantFail(G.addNode("Scale", "com.acme", "", {MM->getOutput(0)}, {"y"}));
  R->addAttribute(std::move(A));
  R->Layer = 3;
  G.addOutput(R->getOutput(0));
  return M;
}

TEST(IRTest, PrintsModel) {
  std::unique_ptr<Model> M = makeSmallModel();
  std::string S;
  raw_string_ostream OS(S);
  printModel(*M, OS);
  EXPECT_EQ(OS.str(),
            "model ir_version=8 opsets=[\"\"=17] producer=\"unit\"\n"
            "graph small {\n"
            "  input %x : f32[batch,4]\n"
            // 4 * 5 * 4 B = 80 B. FNV-1a of 80 zero bytes: offset basis
            // 0xcbf29ce484222325, then 80 times h = (h ^ 0) * 0x100000001b3
            // mod 2^64.
            "  param %w : f32[4,5] <80 bytes, fnv=0xf14b84b8290b8965>\n"
            "  %h : f32[batch,5] = MatMul(%x, %w) name=\"mm\"\n"
            "  %y : ?[*] = com.acme.Scale(%h) {alpha = 0.5} layer=3\n"
            "  output %y : ?[*]\n"
            "}\n");
}

TEST(IRTest, PrintsQuotedNamesAndOmittedInputs) {
  Model M;
  Graph &G = M.getGraph();
  Value *X = cantFail(G.addInput("in put", TensorType(DataType::Float, {1})));
  // An omitted optional input prints as '_'.
  Node *N = cantFail(G.addNode("Clip", "", "", {X, nullptr}, {"out"}));
  G.addOutput(N->getOutput(0));
  std::string S;
  raw_string_ostream OS(S);
  printGraph(G, OS);
  EXPECT_EQ(OS.str(), "graph main {\n"
                      "  input %\"in put\" : f32[1]\n"
                      "  %out : ?[*] = Clip(%\"in put\", _)\n"
                      "  output %out : ?[*]\n"
                      "}\n");
}

TEST(IRTest, VerifierAcceptsWellFormedGraph) {
  std::unique_ptr<Model> M = makeSmallModel();
  EXPECT_EQ(errorOf(verifyModel(*M)), "<ok>");
}

TEST(IRTest, VerifierCatchesUseBeforeDef) {
  std::unique_ptr<Model> M = makeSmallModel();
  Graph &G = M->getGraph();
  // Make "mm" read "y", which the later node "Scale" defines.
  Node *MM = G.getNodes()[0].get();
  MM->setInput(1, G.lookup("y"));
  EXPECT_EQ(errorOf(verifyModel(*M)),
            "node 'mm' (MatMul): input 'y' is used before it is defined "
            "(graph is not in topological order)");
}

TEST(IRTest, DoubleDefinitionIsRejected) {
  // The builder refuses a second definition of a name, whichever kind
  // defines it first, so a graph built through it cannot hold one.
  std::unique_ptr<Model> M = makeSmallModel();
  Graph &G = M->getGraph();
  Value *X = G.lookup("x");
  EXPECT_EQ(errorOf(G.addNode("Neg", "", "neg", {X}, {"h"}).takeError()),
            "node 'neg' (Neg): duplicate definition of value 'h'");
  EXPECT_EQ(errorOf(G.addNode("Neg", "", "neg", {X}, {"x"}).takeError()),
            "node 'neg' (Neg): duplicate definition of value 'x'");
  EXPECT_EQ(
      errorOf(G.addInput("w", TensorType(DataType::Float, {1})).takeError()),
      "duplicate definition of value 'w' in graph 'small'");
  EXPECT_EQ(
      errorOf(G.addParameter("y", TensorType(DataType::Float, {1}), nullptr)
                  .takeError()),
      "duplicate definition of value 'y' in graph 'small'");
  // One node naming the same result twice.
  EXPECT_EQ(
      errorOf(G.addNode("Split", "", "split", {X}, {"a", "a"}).takeError()),
      "node 'split' (Split): duplicate definition of value 'a'");
  EXPECT_EQ(errorOf(verifyModel(*M)), "<ok>");
}

TEST(IRTest, VerifierCatchesUndefinedOutput) {
  std::unique_ptr<Model> M = makeSmallModel();
  Graph &G = M->getGraph();
  // Erasing the node that defines the graph output leaves it undefined.
  G.eraseNodes([](const Node &N) { return N.getOpType() == "Scale"; });
  EXPECT_EQ(errorOf(verifyModel(*M)),
            "graph 'small': output 'y' is not defined");
}

TEST(IRTest, VerifierCatchesParameterSizeMismatch) {
  Model M;
  Graph &G = M.getGraph();
  // f32[2,2] needs 4 * 4 = 16 bytes; 12 are given.
  cantFail(G.addParameter(
      "w", TensorType(DataType::Float, {2, 2}),
      std::make_shared<BufferTensorData>(std::vector<char>(12))));
  EXPECT_EQ(errorOf(verifyModel(M)),
            "parameter 'w' declares type f32[2,2] (16 bytes) but has 12 "
            "bytes of data");
}

TEST(IRTest, VerifierCatchesNonStaticParameter) {
  Model M;
  Graph &G = M.getGraph();
  cantFail(G.addParameter(
      "w", typeOf(DataType::Float, {Dim::symbol("n"), Dim(2)}), nullptr));
  EXPECT_EQ(errorOf(verifyModel(M)),
            "parameter 'w' has non-static type f32[n,2]");
}

TEST(IRTest, VerifierChecksSubgraphScopes) {
  // An If whose branch reads %x of the enclosing graph is fine; a node of
  // the outer graph reading a value of the branch is not.
  Model M;
  Graph &G = M.getGraph();
  Value *C = cantFail(G.addInput("c", TensorType(DataType::Bool, {})));
  Value *X = cantFail(G.addInput("x", TensorType(DataType::Float, {2})));
  Node *If = cantFail(G.addNode("If", "", "if", {C}, {"y"}));
  Attribute A;
  A.Name = "then_branch";
  A.K = Attribute::Kind::Graph;
  A.Gs.push_back(std::make_unique<Graph>("then", &G));
  Graph &Then = *A.Gs[0];
  Node *Neg = cantFail(Then.addNode("Neg", "", "neg", {X}, {"inner"}));
  Then.addOutput(Neg->getOutput(0));
  If->addAttribute(std::move(A));
  Node *Use = cantFail(G.addNode("Abs", "", "abs", {If->getOutput(0)}, {"z"}));
  G.addOutput(Use->getOutput(0));
  EXPECT_EQ(errorOf(verifyModel(M)), "<ok>");
  EXPECT_EQ(G.countNodesRecursively(), 3u); // If, Abs, and Neg inside.

  Use->setInput(0, Then.lookup("inner"));
  EXPECT_EQ(errorOf(verifyModel(M)),
            "node 'abs' (Abs): input 'inner' belongs to a graph that does "
            "not enclose it");
}

TEST(IRTest, ReplaceWithConstantAndEraseUnused) {
  std::unique_ptr<Model> M = makeSmallModel();
  Graph &G = M->getGraph();
  Node *MM = G.getNodes()[0].get();
  Value *H = MM->getOutput(0);
  Node *C = G.replaceWithConstant(
      MM, Tensor::makeFromDoubles(DataType::Float, {1, 5}, {1, 2, 3, 4, 5}));
  // The result value is kept (its users need not change) and retyped.
  EXPECT_EQ(C->getOutput(0), H);
  EXPECT_EQ(H->getDefiningNode(), C);
  EXPECT_EQ(H->Type.str(), "f32[1,5]");
  EXPECT_EQ(C->getName(), "mm");
  EXPECT_EQ(errorOf(verifyModel(*M)), "<ok>");
  // %w is no longer read: removed.
  ASSERT_EQ(G.getParameters().size(), 1u);
  G.eraseUnusedParameters();
  EXPECT_TRUE(G.getParameters().empty());
  EXPECT_EQ(G.lookup("w"), nullptr);
  std::string S;
  raw_string_ostream OS(S);
  printGraph(G, OS);
  EXPECT_EQ(OS.str(), "graph small {\n"
                      "  input %x : f32[batch,4]\n"
                      "  %h : f32[1,5] = Constant() {value = tensor<f32[1,5]> "
                      "[1, 2, 3, 4, 5]} name=\"mm\"\n"
                      "  %y : ?[*] = com.acme.Scale(%h) {alpha = 0.5} "
                      "layer=3\n"
                      "  output %y : ?[*]\n"
                      "}\n");
}

TEST(IRTest, UseCountsAndParameterBytes) {
  std::unique_ptr<Model> M = makeSmallModel();
  const Graph &G = M->getGraph();
  DenseMap<const Value *, unsigned> Uses = G.computeUseCounts();
  EXPECT_EQ(Uses.lookup(G.lookup("x")), 1u);
  EXPECT_EQ(Uses.lookup(G.lookup("h")), 1u);
  EXPECT_EQ(Uses.lookup(G.lookup("y")), 1u); // The graph output.
  // f32[4,5] = 20 * 4 = 80 B.
  EXPECT_EQ(getTotalParameterBytes(G), 80u);
}

TEST(IRTest, OpsetLookup) {
  Model M;
  M.Opsets.push_back({"ai.onnx", 13});
  M.Opsets.push_back({"com.microsoft", 1});
  // "" and "ai.onnx" name the same default domain.
  EXPECT_EQ(M.getOpsetVersion(""), 13);
  EXPECT_EQ(M.getOpsetVersion("ai.onnx"), 13);
  EXPECT_EQ(M.getOpsetVersion("com.microsoft"), 1);
  EXPECT_EQ(M.getOpsetVersion("hccl"), 0);
}

//===----------------------------------------------------------------------===//
// cloneModel
//===----------------------------------------------------------------------===//

TEST(IRTest, CloneCopiesStructureAndSharesData) {
  Model M;
  M.SourcePath = "m.onnx";
  M.Opsets.push_back({"", 17});
  Graph &G = M.getGraph();
  Value *X = cantFail(
      G.addInput("x", typeOf(DataType::Float, {Dim::symbol("batch"), 2})));
  auto Data = std::make_shared<BufferTensorData>(std::vector<char>(16, 0));
  Value *W =
      cantFail(G.addParameter("w", TensorType(DataType::Float, {2, 2}), Data));
  Node *MM = cantFail(G.addNode("MatMul", "", "mm", {X, W}, {"h"}));
  MM->getOutput(0)->Type = typeOf(DataType::Float, {Dim::symbol("batch"), 2});
  MM->DeviceClass = "aicore";
  MM->Layer = 3;
  // A subgraph that reads the outer 'h' by name.
  Node *If = cantFail(G.addNode("If", "", "if", {X}, {"y"}));
  Attribute A;
  A.Name = "then_branch";
  A.K = Attribute::Kind::Graph;
  A.Gs.push_back(std::make_unique<Graph>("then", &G));
  Graph &Sub = *A.Gs[0];
  Node *Neg =
      cantFail(Sub.addNode("Neg", "", "neg", {MM->getOutput(0)}, {"t"}));
  Sub.addOutput(Neg->getOutput(0));
  If->addAttribute(std::move(A));
  G.addOutput(If->getOutput(0));

  std::unique_ptr<Model> C = cloneModel(M);
  std::string Before, After;
  raw_string_ostream OB(Before), OA(After);
  printModel(M, OB);
  printModel(*C, OA);
  EXPECT_EQ(OA.str(), OB.str());
  EXPECT_EQ(C->SourcePath, "m.onnx");
  const Graph &CG = C->getGraph();
  // Data is shared, never copied; values and nodes are new.
  EXPECT_EQ(CG.getParameters()[0]->Data.get(), Data.get());
  EXPECT_NE(CG.getParameters()[0], W);
  const Node &CMM = *CG.getNodes()[0];
  EXPECT_EQ(CMM.DeviceClass, "aicore");
  EXPECT_EQ(CMM.Layer, 3);
  // The subgraph reads the clone's 'h', not the original's.
  const Graph &CSub = *CG.getNodes()[1]->getAttributes()[0].Gs[0];
  EXPECT_EQ(CSub.getParent(), &CG);
  EXPECT_EQ(CSub.getNodes()[0]->getInput(0), CMM.getOutput(0));
  // Binding the clone leaves the original symbolic.
  C->getGraph().getInputs()[0]->Type.Dims[0] = Dim(8);
  EXPECT_EQ(X->Type.str(), "f32[batch,2]");
  EXPECT_EQ(errorOf(verifyModel(*C)), "<ok>");
}

} // namespace

namespace {

// 4-bit types pack two elements to a byte, the first in the low nibble:
// 225 elements (i4[15,15]) take (225 * 4 + 7) / 8 = 113 bytes; float8 is a
// byte an element.
TEST(DataType, StorageBytesOfNewTypes) {
  EXPECT_EQ(getStorageBytes(DataType::Int4, 225).getValue(), 113);
  EXPECT_EQ(getStorageBytes(DataType::UInt4, 224).getValue(), 112);
  EXPECT_EQ(getStorageBytes(DataType::Float4E2M1, 1).getValue(), 1);
  EXPECT_EQ(getStorageBytes(DataType::Float8E4M3FN, 225).getValue(), 225);
  EXPECT_EQ(getStorageBytes(DataType::BFloat16, 3).getValue(), 6);
  EXPECT_FALSE(getStorageBytes(DataType::String, 3).hasValue());
  EXPECT_EQ(getDataTypeSize(DataType::Int4), 0u);
  EXPECT_EQ(getDataTypeBits(DataType::Int4), 4u);
  EXPECT_EQ(getDataTypeName(DataType::Float8E5M2FNUZ), "f8e5m2fnuz");
  EXPECT_EQ(parseDataTypeName("int4").getValue(), DataType::Int4);
  TensorType T;
  T.Elem = DataType::Int4;
  T.HasShape = true;
  T.Dims = {Dim(3), Dim(5)};
  // 15 elements: 7 full bytes and a half-used eighth.
  EXPECT_EQ(T.getSizeInBytes().getValue(), 8);
}

} // namespace

// insertNode keeps topological order; moveResult hands a value (name,
// type, readers) to another node and leaves an empty slot behind
// (canonicalize's Slices -> Split).
TEST(IRTest, InsertNodeAndMoveResult) {
  using namespace loom;
  Graph G("g");
  Value *X = cantFail(G.addInput("x", TensorType(DataType::Float, {2, 4})));
  Node *A = cantFail(G.addNode("Slice", "", "a", {X}, {"lo"}));
  Node *B = cantFail(G.addNode("Slice", "", "b", {X}, {"hi"}));
  Value *Lo = A->getOutput(0), *Hi = B->getOutput(0);
  Node *S = cantFail(G.insertNode(0, "Split", "", "s", {X}, {}));
  ASSERT_EQ(G.getNodes()[0].get(), S);
  EXPECT_EQ(G.getNodes()[1].get(), A);
  G.moveResult(Lo, S, 0);
  G.moveResult(Hi, S, 1);
  EXPECT_EQ(Lo->getDefiningNode(), S);
  EXPECT_EQ(Hi->getResultNumber(), 1u);
  EXPECT_EQ(A->getOutput(0), nullptr);
  EXPECT_EQ(S->getNumOutputs(), 2u);
  EXPECT_EQ(G.getFreshName("lo"), "lo_1");
  EXPECT_EQ(G.getFreshName("new"), "new");
}
