//===- ONNXImportTest.cpp - Tests for ONNX import and export --------------===//
//
// Import from text and binary, export -> import round trips on the committed
// example models, and external data: referenced (never copied), read lazily,
// absent file -> shape-only, locations escaping the model directory
// rejected.
//
//===----------------------------------------------------------------------===//

#include "loom/ONNX/ONNX.h"
#include "loom/Shard/SlicedTensorData.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cstring>
#include <functional>

using namespace loom;
using namespace llvm;

namespace {

std::string errorOf(Error E) {
  if (!E)
    return "<ok>";
  return toString(std::move(E));
}

std::string dump(const Model &M) {
  std::string S;
  raw_string_ostream OS(S);
  printModel(M, OS);
  return OS.str();
}

std::unique_ptr<Model> importText(StringRef Text,
                                  ImportStats *Stats = nullptr) {
  Expected<std::unique_ptr<Model>> M =
      importModelFromText(Text, "test.onnxtxt", ".", Stats);
  EXPECT_TRUE(bool(M)) << (M ? "" : toString(M.takeError()));
  return M ? std::move(*M) : nullptr;
}

std::string importError(StringRef Text) {
  Expected<std::unique_ptr<Model>> M =
      importModelFromText(Text, "test.onnxtxt");
  if (M)
    return "<ok>";
  return toString(M.takeError());
}

std::string examplePath(StringRef Name) {
  SmallString<256> P(LOOM_SOURCE_DIR);
  sys::path::append(P, "examples", "models", Name);
  return std::string(P);
}

/// A fresh temporary directory, removed with its files at scope exit.
class TempDir {
public:
  TempDir() {
    std::error_code EC = sys::fs::createUniqueDirectory("loom-import", Path);
    EXPECT_FALSE(EC) << EC.message();
  }
  ~TempDir() { sys::fs::remove_directories(Path); }
  std::string file(StringRef Name) const {
    SmallString<256> P(Path);
    sys::path::append(P, Name);
    return std::string(P);
  }
  void write(StringRef Name, StringRef Bytes) const {
    std::error_code EC;
    raw_fd_ostream OS(file(Name), EC, sys::fs::OF_None);
    ASSERT_FALSE(EC) << EC.message();
    OS << Bytes;
  }

private:
  SmallString<128> Path;
};

std::string floatBytes(ArrayRef<float> Fs) {
  std::string S(Fs.size() * 4, '\0');
  std::memcpy(&S[0], Fs.data(), S.size());
  return S;
}

//===----------------------------------------------------------------------===//
// Text import
//===----------------------------------------------------------------------===//

const char *const Mlp = R"(
# A comment before the header.
<ir_version: 8, opset_import: ["" : 17], producer_name: "unit">
mlp (float[batch, 4] x, float[4] b = {1.0, 2.0, 3.0, 4.0}) => (float[batch, 4] y)
  <float[4, 4] w>
{
  h = MatMul(x, w)
  y = Add(h, b)
}
)";

TEST(ONNXImportTest, ImportsText) {
  ImportStats Stats;
  std::unique_ptr<Model> M = importText(Mlp, &Stats);
  ASSERT_TRUE(M);
  EXPECT_EQ(M->IRVersion, 8);
  EXPECT_EQ(M->getOpsetVersion(""), 17);
  EXPECT_EQ(M->ProducerName, "unit");
  EXPECT_EQ(M->SourcePath, "test.onnxtxt");
  const Graph &G = M->getGraph();
  EXPECT_EQ(G.getName(), "mlp");
  ASSERT_EQ(G.getInputs().size(), 1u);
  EXPECT_EQ(G.getInputs()[0]->Type.str(), "f32[batch,4]");
  // b (an initializer, also listed as an input) and w (declared only).
  ASSERT_EQ(G.getParameters().size(), 2u);
  const Value *B = G.getParameters()[0];
  const Value *W = G.getParameters()[1];
  EXPECT_EQ(B->getName(), "b");
  EXPECT_TRUE(B->AlsoGraphInput);
  EXPECT_FALSE(B->isShapeOnly());
  EXPECT_EQ(B->Data->getKind(), TensorData::Kind::Inline);
  EXPECT_EQ(W->getName(), "w");
  EXPECT_TRUE(W->isShapeOnly());
  EXPECT_EQ(W->Type.str(), "f32[4,4]");
  EXPECT_EQ(Stats.ShapeOnlyParameters, 1u);
  EXPECT_EQ(Stats.InlineParameters, 1u);
  EXPECT_EQ(Stats.ExternalParameters, 0u);
  // Text float_data reads back as raw little-endian bytes.
  Tensor T;
  T.Type = B->Type;
  T.Data = B->Data;
  EXPECT_EQ(cantFail(T.getFloatValues()), (std::vector<double>{1, 2, 3, 4}));
  ASSERT_EQ(G.getNumNodes(), 2u);
  const Node &MM = *G.getNodes()[0];
  EXPECT_EQ(MM.getOpType(), "MatMul");
  EXPECT_EQ(MM.getInput(1), W);
  EXPECT_EQ(G.getOutputs()[0]->getDefiningNode(), G.getNodes()[1].get());
  EXPECT_EQ(errorOf(verifyModel(*M)), "<ok>");
}

TEST(ONNXImportTest, TextSyntaxErrorHasLineAndColumn) {
  // Line 3 is the node; the parser stops at the '}' on line 4, column 1.
  std::string E = importError("<ir_version: 8, opset_import: [\"\" : 17]>\n"
                              "g (float[2] x) => (float[2] y) {\n"
                              "  y = Neg(x\n"
                              "}\n");
  EXPECT_EQ(StringRef(E).split('\n').first,
            "test.onnxtxt:4:1: error: Expected character ) not found.");
}

TEST(ONNXImportTest, StructuralErrors) {
  const char *Header = "<ir_version: 8, opset_import: [\"\" : 17]>\n";
  EXPECT_EQ(importError(std::string(Header) +
                        "g (float[2] x) => (float[2] y) {\n"
                        "  y = Add(x, nope)\n}\n"),
            "test.onnxtxt: error: node '' (Add): input 'nope' is not defined "
            "by any node, input or initializer");
  EXPECT_EQ(importError(std::string(Header) +
                        "g (float[2] x) => (float[2] y) {\n"
                        "  a = Neg(b)\n  b = Neg(a)\n  y = Neg(b)\n}\n"),
            "test.onnxtxt: error: graph 'g' has a cycle through node '' "
            "(Neg)");
  EXPECT_EQ(importError(std::string(Header) +
                        "g (float[2] x) => (float[2] y) {\n"
                        "  y = Neg(x)\n  y = Abs(x)\n}\n"),
            "test.onnxtxt: error: node '' (Abs): duplicate definition of "
            "value 'y'");
  EXPECT_EQ(importError(std::string(Header) +
                        "g (float[2] x) => (float[2] y, float[2] q) {\n"
                        "  y = Neg(x)\n}\n"),
            "test.onnxtxt: error: graph 'g': output 'q' is not defined by "
            "any node, input or initializer");
  // A shape-only parameter needs a static type: [n, 4] has no size.
  EXPECT_EQ(importError(std::string(Header) +
                        "g (float[2] x) => (float[2] y) <float[n, 4] w> {\n"
                        "  y = Neg(x)\n  z = Neg(w)\n}\n"),
            "test.onnxtxt: error: shape-only parameter 'w' needs a static "
            "type, got f32[n,4]");
}

TEST(ONNXImportTest, OpsetRange) {
  // The lower bound depends on which old opsets the importer converts;
  // 24 is past the newest it knows (23: Loom's own schemas from 18 on).
  EXPECT_TRUE(
      StringRef(importError("<ir_version: 8, opset_import: [\"\" : 24]>\n"
                            "g (float[2] x) => (float[2] y) { y = Neg(x) }\n"))
          .startswith("test.onnxtxt: error: default-domain opset 24 "
                      "is outside the supported range 1-23"));
  EXPECT_EQ(importError("<ir_version: 8>\n"
                        "g (float[2] x) => (float[2] y) { y = Neg(x) }\n"),
            "test.onnxtxt: error: model imports no opset");
}

TEST(ONNXImportTest, BinaryGarbageIsRejected) {
  Expected<std::unique_ptr<Model>> M =
      importModelFromBinary(StringRef("\x08\xff\xff garbage", 11), "g.onnx");
  ASSERT_FALSE(bool(M));
  EXPECT_EQ(toString(M.takeError()),
            "g.onnx: error: not a valid ONNX model (malformed or truncated "
            "protobuf)");
}

TEST(ONNXImportTest, MissingFile) {
  std::string Path = examplePath("no-such-model.onnx");
  Expected<std::unique_ptr<Model>> M = importModelFile(Path);
  ASSERT_FALSE(bool(M));
  EXPECT_EQ(toString(M.takeError()),
            Path + ": error: cannot read: No such file or directory");
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

/// export -> import gives the same dump.
void expectRoundTrip(const Model &M, StringRef BaseDir = ".") {
  Expected<std::string> Bytes = exportModel(M);
  ASSERT_TRUE(bool(Bytes)) << toString(Bytes.takeError());
  Expected<std::unique_ptr<Model>> Back =
      importModelFromBinary(*Bytes, "roundtrip.onnx", BaseDir);
  ASSERT_TRUE(bool(Back)) << toString(Back.takeError());
  EXPECT_EQ(dump(**Back), dump(M));
}

class ExampleRoundTrip : public ::testing::TestWithParam<const char *> {};

TEST_P(ExampleRoundTrip, DumpsAgree) {
  ImportStats Stats;
  Expected<std::unique_ptr<Model>> M =
      importModelFile(examplePath(GetParam()), &Stats);
  ASSERT_TRUE(bool(M)) << toString(M.takeError());
  EXPECT_EQ(errorOf(verifyModel(**M)), "<ok>");
  // The committed models keep every weight inline (examples/models/README).
  EXPECT_GT(Stats.InlineParameters, 0u);
  EXPECT_EQ(Stats.ExternalParameters, 0u);
  EXPECT_EQ(Stats.ShapeOnlyParameters, 0u);
  expectRoundTrip(**M);
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleRoundTrip,
                         ::testing::Values("mlp-tiny.onnx", "gpt2-tiny.onnx",
                                           "llama-tiny.onnx"));

TEST(ONNXImportTest, ExampleModelsAsDocumented) {
  // Counts from examples/models/README.md.
  struct Row {
    const char *File;
    unsigned Nodes, Params;
    uint64_t ParamBytes;
  } Rows[] = {
      // 33,088 params * 4 B = 132352 B.
      {"mlp-tiny.onnx", 10, 4, 132352},
      // 124,672 * 4 = 498688 B.
      {"gpt2-tiny.onnx", 316, 28, 498688},
      // 123,712 * 4 = 494848 B.
      {"llama-tiny.onnx", 594, 21, 494848},
  };
  for (const Row &R : Rows) {
    Expected<std::unique_ptr<Model>> M = importModelFile(examplePath(R.File));
    ASSERT_TRUE(bool(M)) << toString(M.takeError());
    const Graph &G = (*M)->getGraph();
    EXPECT_EQ(G.getNumNodes(), R.Nodes) << R.File;
    EXPECT_EQ(G.getParameters().size(), R.Params) << R.File;
    EXPECT_EQ(getTotalParameterBytes(G), R.ParamBytes) << R.File;
  }
}

TEST(ONNXImportTest, TextModelRoundTrip) {
  // Subgraphs, attributes of each kind and a shape-only parameter survive.
  // The shape-only weight is exported as external data in a file that does
  // not exist, so it comes back shape-only.
  std::unique_ptr<Model> M = importText(R"(
<ir_version: 8, opset_import: ["" : 17, "com.acme" : 1]>
rt (bool c, float[2, 3] x) => (float[2, 3] y, float[2, 3] z)
  <float[3, 3] w>
{
  t = com.acme.Op <i = -3, f = 0.25, s = "str", is = [1, 2], fs = [0.5],
                   ss = ["a", "b"], tt = int64[2] {7, 8}> (x, w)
  y = If (c) <
    then_branch = then_g () => (float[2, 3] a) { a = Neg(t) },
    else_branch = else_g () => (float[2, 3] b) { b = Identity(x) }
  >
  z = Relu(y)
}
)");
  ASSERT_TRUE(M);
  expectRoundTrip(*M);
}

//===----------------------------------------------------------------------===//
// External data
//===----------------------------------------------------------------------===//

/// One parameter w : f32[2,3] with no data. Exported, it refers to external
/// data "loom-shape-only.bin" at offset 0, length 2 * 3 * 4 = 24 bytes.
const char *const OneWeight = R"(
<ir_version: 8, opset_import: ["" : 17]>
ext (float[2, 3] x) => (float[2, 3] y)
  <float[2, 3] w>
{
  y = Add(x, w)
}
)";
const char *const ExternalFile = "loom-shape-only.bin";

/// Writes OneWeight as a binary model into \p Dir and returns its path;
/// \p Patch edits the serialized bytes first.
std::string writeExternalModel(const TempDir &Dir,
                               std::function<void(std::string &)> Patch = {},
                               const char *Text = OneWeight) {
  std::unique_ptr<Model> M = importText(Text);
  EXPECT_TRUE(M);
  std::string Bytes = cantFail(exportModel(*M));
  EXPECT_NE(Bytes.find(ExternalFile), std::string::npos);
  if (Patch)
    Patch(Bytes);
  Dir.write("model.onnx", Bytes);
  return Dir.file("model.onnx");
}

/// Replaces \p Old by \p New (same length: protobuf lengths stay valid).
void replaceSameLength(std::string &Bytes, StringRef Old, StringRef New) {
  ASSERT_EQ(Old.size(), New.size());
  size_t P = Bytes.find(Old.str());
  ASSERT_NE(P, std::string::npos);
  Bytes.replace(P, Old.size(), New.str());
}

TEST(ONNXImportTest, ExternalDataIsReferencedNotCopied) {
  TempDir Dir;
  std::string Path = writeExternalModel(Dir);
  Dir.write(ExternalFile, floatBytes({0, 0, 0, 0, 0, 0}));
  ImportStats Stats;
  Expected<std::unique_ptr<Model>> M = importModelFile(Path, &Stats);
  ASSERT_TRUE(bool(M)) << toString(M.takeError());
  EXPECT_EQ(Stats.ExternalParameters, 1u);
  EXPECT_EQ(Stats.ShapeOnlyParameters, 0u);
  const Value *W = (*M)->getGraph().lookup("w");
  ASSERT_TRUE(W && W->Data);
  EXPECT_FALSE(W->isShapeOnly());
  EXPECT_EQ(W->Data->getKind(), TensorData::Kind::External);
  EXPECT_EQ(W->Data->getLocation(), ExternalFile);
  EXPECT_EQ(W->Data->getOffset(), 0u);
  EXPECT_EQ(W->Data->getSize(), 24u);

  // Nothing was read at import: new file contents are what a first read
  // sees.
  Dir.write(ExternalFile, floatBytes({1, 2, 3, 4, 5, 6}));
  Tensor T;
  T.Type = W->Type;
  T.Data = W->Data;
  EXPECT_EQ(cantFail(T.getFloatValues()),
            (std::vector<double>{1, 2, 3, 4, 5, 6}));
  // A range read: bytes [8, 16) are floats 2 and 3, i.e. 3.0f and 4.0f.
  std::vector<char> R = cantFail(W->Data->readRange(8, 8));
  EXPECT_EQ(std::string(R.begin(), R.end()), floatBytes({3, 4}));
  EXPECT_EQ(errorOf(W->Data->readRange(20, 8).takeError()),
            "read past the end of external data 'loom-shape-only.bin'");

  // The dump of a tensor this small (6 <= 16 elements) shows its values,
  // read from the file; re-export keeps the reference (an import from the
  // same directory sees the same data).
  std::string D = dump(**M);
  EXPECT_NE(D.find("param %w : f32[2,3] [1, 2, 3, 4, 5, 6]"), std::string::npos)
      << D;
  SmallString<128> BaseDir(Path);
  sys::path::remove_filename(BaseDir);
  expectRoundTrip(**M, BaseDir);
}

TEST(ONNXImportTest, LargeExternalTensorDumpsItsReference) {
  // f32[4,5] is 20 > 16 elements: the dump names the file, offset and
  // length (4 * 5 * 4 = 80 bytes) instead of hashing bytes it would read.
  TempDir Dir;
  std::string Path = writeExternalModel(Dir, {}, R"(
<ir_version: 8, opset_import: ["" : 17]>
ext (float[4, 5] x) => (float[4, 5] y) <float[4, 5] w> { y = Add(x, w) }
)");
  Dir.write(ExternalFile, std::string(80, '\0'));
  Expected<std::unique_ptr<Model>> M = importModelFile(Path);
  ASSERT_TRUE(bool(M)) << toString(M.takeError());
  std::string D = dump(**M);
  EXPECT_NE(D.find("param %w : f32[4,5] external(\"loom-shape-only.bin\", "
                   "offset=0, length=80)\n"),
            std::string::npos)
      << D;
}

TEST(ONNXImportTest, ExternalDataAtOffset) {
  TempDir Dir;
  // Offset "0" -> "8": the tensor is bytes [8, 32) of the file.
  std::string Path = writeExternalModel(Dir, [](std::string &B) {
    replaceSameLength(B,
                      StringRef("offset\x12\x01"
                                "0",
                                9),
                      StringRef("offset\x12\x01"
                                "8",
                                9));
  });
  Dir.write(ExternalFile, floatBytes({-1, -2, 1, 2, 3, 4, 5, 6}));
  Expected<std::unique_ptr<Model>> M = importModelFile(Path);
  ASSERT_TRUE(bool(M)) << toString(M.takeError());
  const Value *W = (*M)->getGraph().lookup("w");
  EXPECT_EQ(W->Data->getOffset(), 8u);
  Tensor T;
  T.Type = W->Type;
  T.Data = W->Data;
  EXPECT_EQ(cantFail(T.getFloatValues()),
            (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(ONNXImportTest, AbsentExternalFileMeansShapeOnly) {
  TempDir Dir;
  std::string Path = writeExternalModel(Dir);
  ImportStats Stats;
  Expected<std::unique_ptr<Model>> M = importModelFile(Path, &Stats);
  ASSERT_TRUE(bool(M)) << toString(M.takeError());
  const Value *W = (*M)->getGraph().lookup("w");
  ASSERT_TRUE(W);
  EXPECT_TRUE(W->isShapeOnly());
  EXPECT_EQ(W->Type.str(), "f32[2,3]");
  EXPECT_EQ(Stats.ShapeOnlyParameters, 1u);
  EXPECT_EQ(Stats.ExternalParameters, 0u);
  EXPECT_EQ(Stats.MissingExternalBytes, 24u);
  EXPECT_EQ(errorOf(verifyModel(**M)), "<ok>");
}

TEST(ONNXImportTest, ShortExternalFileIsAnError) {
  TempDir Dir;
  std::string Path = writeExternalModel(Dir);
  Dir.write(ExternalFile, std::string(10, '\0'));
  Expected<std::unique_ptr<Model>> M = importModelFile(Path);
  ASSERT_FALSE(bool(M));
  EXPECT_EQ(toString(M.takeError()),
            Path + ": error: tensor 'w' needs 24 bytes at offset 0 of "
                   "'loom-shape-only.bin', which has 10 bytes");
}

TEST(ONNXImportTest, ExternalLocationMustStayInModelDirectory) {
  // "loom-shape-only.bin" is 19 characters; so are the replacements.
  for (StringRef Loc :
       {"../loom-shape-o.bin", "/abs/loom-shape.bin", "sub/../loom-shap.bi"}) {
    TempDir Dir;
    std::string Path = writeExternalModel(
        Dir, [&](std::string &B) { replaceSameLength(B, ExternalFile, Loc); });
    Expected<std::unique_ptr<Model>> M = importModelFile(Path);
    ASSERT_FALSE(bool(M)) << Loc.str();
    EXPECT_EQ(toString(M.takeError()),
              Path + ": error: tensor 'w': external data location '" +
                  Loc.str() +
                  "' must be a relative path inside the model's directory");
  }
}

TEST(ONNXImportTest, ExternalLengthMustMatchType) {
  TempDir Dir;
  // Length "24" -> "25": f32[2,3] is 24 bytes.
  std::string Path = writeExternalModel(Dir, [](std::string &B) {
    replaceSameLength(B,
                      StringRef("length\x12\x02"
                                "24",
                                10),
                      StringRef("length\x12\x02"
                                "25",
                                10));
  });
  Dir.write(ExternalFile, std::string(32, '\0'));
  Expected<std::unique_ptr<Model>> M = importModelFile(Path);
  ASSERT_FALSE(bool(M));
  EXPECT_EQ(toString(M.takeError()),
            Path + ": error: tensor 'w' declares type f32[2,3] (24 bytes) but "
                   "its external data length is 25");
}

/// Emitting writes a rank's slice of an external weight file to file
/// (copy_file_range, runs at their offsets); the bytes must be exactly what
/// reading the slice gives, for column, row and blocked (fused QKV) slices,
/// and for an in-memory source (gathered pwritev).
TEST(ONNXImportTest, SliceWritesMatchSliceReads) {
  TempDir Dir;
  std::string Path = writeExternalModel(Dir, {}, R"(
<ir_version: 8, opset_import: ["" : 17]>
ext (float[4, 6] x) => (float[4, 6] y)
  <float[4, 6] w>
{
  y = Add(x, w)
}
)");
  std::vector<float> Values(24);
  for (unsigned I = 0; I < 24; ++I)
    Values[I] = I;
  Dir.write(ExternalFile, floatBytes(Values));
  Expected<std::unique_ptr<Model>> M = importModelFile(Path);
  ASSERT_TRUE(bool(M)) << toString(M.takeError());
  std::shared_ptr<const TensorData> Ext = (*M)->getGraph().lookup("w")->Data;
  ASSERT_EQ(Ext->getKind(), TensorData::Kind::External);
  auto InMemory = std::make_shared<BufferTensorData>(
      cantFail(Ext->readRange(0, Ext->getSize())));

  std::string Out = Dir.file("out.bin");
  for (std::shared_ptr<const TensorData> Src :
       {Ext, std::static_pointer_cast<const TensorData>(InMemory)}) {
    // Columns in 2 parts; rows in 4; blocks {2, 4} of the columns in 2 (a
    // rank holds block 0's column 1 and block 1's columns 4-5 of each row).
    SlicedTensorData Slices[] = {
        SlicedTensorData(Src, {4, 6}, 4, 1, {}, 2, 1),
        SlicedTensorData(Src, {4, 6}, 4, 0, {}, 4, 2),
        SlicedTensorData(Src, {4, 6}, 4, 1, {2, 4}, 2, 1)};
    for (const SlicedTensorData &S : Slices) {
      std::vector<char> Want = cantFail(S.readRange(0, S.getSize()));
      Expected<sys::fs::file_t> FD = sys::fs::openNativeFileForReadWrite(
          Out, sys::fs::CD_CreateAlways, sys::fs::OF_None);
      ASSERT_TRUE(bool(FD));
      // At an offset, as in a data file holding several tensors.
      ASSERT_FALSE(bool(S.writeTo(*FD, 4096)));
      sys::fs::closeFile(*FD);
      std::unique_ptr<MemoryBuffer> Got =
          cantFail(errorOrToExpected(MemoryBuffer::getFile(Out)));
      ASSERT_EQ(Got->getBufferSize(), 4096 + Want.size());
      EXPECT_EQ(Got->getBuffer().drop_front(4096),
                StringRef(Want.data(), Want.size()));
    }
  }
  // A declared slice past the end of the file's data is an error, not a
  // short file.
  Dir.write(ExternalFile, floatBytes({1, 2, 3}));
  SlicedTensorData Rows(Ext, {4, 6}, 4, 0, {}, 4, 3);
  Expected<sys::fs::file_t> FD = sys::fs::openNativeFileForReadWrite(
      Out, sys::fs::CD_CreateAlways, sys::fs::OF_None);
  ASSERT_TRUE(bool(FD));
  EXPECT_NE(errorOf(Rows.writeTo(*FD, 0)), "<ok>");
  sys::fs::closeFile(*FD);
}

} // namespace
