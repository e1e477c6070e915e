//===- ProtoTensorData.h - TensorData backed by ONNX protobufs --*- C++ -*-===//
//
// Private to lib/ONNX. Inline data keeps the TensorProto inside the shared
// ModelProto (no copy); external data is mapped from its file on first use.
// Also the few helpers the importer and exporter share.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_ONNX_PROTOTENSORDATA_H
#define LOOM_LIB_ONNX_PROTOTENSORDATA_H

#include "loom/IR/Graph.h"
#include "onnx/onnx_pb.h"
#include "llvm/Support/MemoryBuffer.h"
#include <memory>
#include <mutex>

namespace loom {

/// Puts rank and attribute-length checks ahead of ONNX's convolution and
/// pooling shape inference, whose legacy versions read out of bounds on
/// inconsistent nodes (SchemaGuards.cpp). Idempotent; called before any
/// ONNX shape inference runs.
void guardConvPoolShapeInference();

/// Registers the default-domain schemas of opsets 18-23 that ONNX 1.12
/// lacks (OpsetSchemas.cpp) and widens the registry's version ranges to
/// opset 23 (ai.onnx.ml 5). Idempotent; called before any schema lookup.
void registerOpsetSchemas();

/// Every node of the default and ai.onnx.ml domains (in subgraphs too) has
/// a schema at the model's opset and satisfies it (inputs, outputs,
/// attribute names and types, as onnx::checker's node check): else an
/// error naming the node, op, domain and version.
llvm::Error checkKnownOps(const onnx::ModelProto &P);

/// Does the model carry an element type ONNX 1.12 cannot name (float8,
/// int4, uint4, float4)? ONNX's type checks must then be skipped.
bool usesPostONNX112Types(const onnx::ModelProto &P);

/// The exporter's ModelProto, before serialization (Exporter.cpp); the
/// importer hands it to ONNX's version converter.
llvm::Error exportModelToProto(const Model &M, onnx::ModelProto &P);

/// ONNX has no raw layout for string tensors. Loom's bytes for one are its
/// elements in order, each a little-endian uint64 length and the bytes
/// themselves: dumps hash the contents, and the exporter turns such bytes
/// back into string_data.
std::vector<char> encodeStrings(llvm::ArrayRef<std::string> Strings);
llvm::Expected<std::vector<std::string>>
decodeStrings(llvm::ArrayRef<char> Bytes, uint64_t NumElements);
/// Size of encodeStrings' result for the string_data of \p TP.
uint64_t getEncodedStringsSize(const onnx::TensorProto &TP);

struct ImportStats;
/// Rewrites the sequence loops of \p MP that have a dense form (torch's
/// repeat_interleave; LowerSequences.cpp) before import.
void lowerSequenceLoops(onnx::ModelProto &MP);
/// Imports the parsed \p MP (Importer.cpp); anything ONNX or protobuf
/// throws becomes an error naming \p BufferName.
llvm::Expected<std::unique_ptr<Model>>
runImporter(std::shared_ptr<onnx::ModelProto> MP, llvm::StringRef BufferName,
            llvm::StringRef BaseDir, bool IsText, ImportStats *Stats);

/// Data stored in a TensorProto of a ModelProto that this object keeps alive.
class ProtoTensorData : public TensorData {
public:
  ProtoTensorData(std::shared_ptr<const onnx::ModelProto> Owner,
                  const onnx::TensorProto *TP, uint64_t Size)
      : Owner(std::move(Owner)), TP(TP), Size(Size) {}
  Kind getKind() const override { return Kind::Inline; }
  llvm::Expected<llvm::ArrayRef<char>> getBytes() const override;
  uint64_t getSize() const override { return Size; }
  const onnx::TensorProto &getProto() const { return *TP; }

private:
  std::shared_ptr<const onnx::ModelProto> Owner;
  const onnx::TensorProto *TP;
  uint64_t Size;
  /// Typed fields (float_data, int64_data, ...) converted to raw bytes on
  /// first use.
  mutable std::mutex ConvertedLock; ///< Emission writes from several threads.
  mutable std::vector<char> Converted;
  mutable bool HaveConverted = false;
};

/// Data in an external file, mapped lazily.
class ExternalTensorData : public TensorData {
public:
  ExternalTensorData(std::string Path, std::string Location, uint64_t Offset,
                     uint64_t Length)
      : Path(std::move(Path)), Location(std::move(Location)), Offset(Offset),
        Length(Length) {}
  Kind getKind() const override { return Kind::External; }
  llvm::Expected<llvm::ArrayRef<char>> getBytes() const override;
  llvm::Expected<std::vector<char>> readRange(uint64_t Off,
                                              uint64_t Len) const override;
  llvm::Error readStrided(uint64_t First, uint64_t Stride, uint64_t Length,
                          uint64_t Count, char *Out) const override;
  llvm::Error withBytes(
      llvm::function_ref<llvm::Error(llvm::ArrayRef<char>)> Fn) const override;
  llvm::Error writeStrided(uint64_t First, uint64_t Stride, uint64_t Length,
                           uint64_t Count, llvm::sys::fs::file_t FD,
                           uint64_t Offset, uint64_t DestStride) const override;
  uint64_t getSize() const override { return Length; }
  llvm::StringRef getLocation() const override { return Location; }
  uint64_t getOffset() const override { return Offset; }
  llvm::StringRef getPath() const { return Path; }

private:
  /// Maps [Offset, Offset + Length) of the file.
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> map() const;
  std::string Path, Location;
  uint64_t Offset, Length;
  mutable std::mutex MappedLock;
  mutable std::unique_ptr<llvm::MemoryBuffer> Mapped;
};

} // namespace loom

#endif
