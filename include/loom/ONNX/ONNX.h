//===- ONNX.h - ONNX import, export, checker and shape inference -*- C++
//-*-===//
//
// The only door between Loom and ONNX's protobuf classes: everything else
// works on loom::Model. ONNX's checker and shape inference throw; the
// functions here catch and return llvm::Error.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_ONNX_ONNX_H
#define LOOM_ONNX_ONNX_H

#include "loom/IR/Graph.h"
#include "llvm/Support/Error.h"
#include <memory>
#include <string>

namespace loom {

/// Counters the importer fills so tools can say what they read.
struct ImportStats {
  unsigned ShapeOnlyParameters = 0; ///< No data: declared only, or absent file.
  unsigned ExternalParameters = 0;  ///< Data in external files (not read).
  unsigned InlineParameters = 0;
  uint64_t MissingExternalBytes = 0;
};

/// Limits the importer enforces before it builds anything, so that a small
/// hostile file can exhaust neither the stack nor memory: a 2 MB protobuf
/// can declare a million empty nodes, and ONNX's text parser recurses once
/// per nesting level. Real models stay far below them (the largest exported
/// LLMs have ~10^5 nodes and at most 3-4 levels of If/Loop/Scan). Breaking
/// one is an error naming the limit, not an out-of-memory kill.
struct ImportLimits {
  /// Graphs below the main graph (If/Loop/Scan bodies inside bodies ...).
  static constexpr unsigned MaxSubgraphDepth = 16;
  /// Nodes in all graphs together.
  static constexpr uint64_t MaxNodes = 1000000;
  /// Inputs, outputs, initializers and value_info entries in all graphs.
  static constexpr uint64_t MaxValues = 4000000;
  /// Brackets `(`, `[`, `{` open at once in ONNX text syntax.
  static constexpr unsigned MaxTextNesting = 128;
};

/// Reads a model from a file: ONNX text syntax for `.onnxtxt`/`.onnxtext`/
/// `.txt` (or content starting with '<' after comments), binary protobuf
/// otherwise. External data is resolved relative to the file's directory
/// but not read. Default-domain opsets 7-23 are taken as they are (the
/// schemas of 18-23, which ONNX 1.12 lacks, are Loom's own); opset 1-6
/// models are upgraded to opset 7 with ONNX's version converter; newer ones
/// are rejected, as are IR versions above 11 and ai.onnx.ml above 5. Every
/// default-domain node is checked against its schema at the model's opset
/// (include/loom/ONNX/SupportedOps.md). Errors name the file (and line:col for
/// text syntax). External data locations must be relative paths inside the
/// model's directory (no `..`, no absolute or drive paths); symbolic links
/// inside it are followed, so a cache that links weights to a blob store works.
llvm::Expected<std::unique_ptr<Model>>
importModelFile(llvm::StringRef Path, ImportStats *Stats = nullptr);

/// Parses ONNX text syntax. \p BufferName is used in messages; external
/// data is resolved relative to \p BaseDir.
llvm::Expected<std::unique_ptr<Model>>
importModelFromText(llvm::StringRef Text, llvm::StringRef BufferName,
                    llvm::StringRef BaseDir = ".",
                    ImportStats *Stats = nullptr);

/// Parses a serialized ModelProto.
llvm::Expected<std::unique_ptr<Model>>
importModelFromBinary(llvm::StringRef Bytes, llvm::StringRef BufferName,
                      llvm::StringRef BaseDir = ".",
                      ImportStats *Stats = nullptr);

struct ExportOptions {
  /// When false, parameters larger than SmallParameterBytes are written as
  /// typed graph inputs without data (enough for shape inference).
  bool IncludeParameterData = true;
  uint64_t SmallParameterBytes = 1024;
  /// Write value_info for every typed intermediate value.
  bool IncludeValueInfo = true;
  /// When ExternalDataLocation is set, every parameter with data is
  /// referenced as external data at that location (relative to the model
  /// file), at 4 KiB-aligned offsets, and listed in *ExternalLayout for the
  /// caller to write (writeExternalData): the model itself holds only the
  /// bytes of parameters under ExternalMinBytes. Shape-only parameters stay
  /// shape-only.
  std::string ExternalDataLocation;
  /// Parameters smaller than this stay inline even with an external data
  /// location: shape operands (Reshape's shape, Slice's starts, Split's
  /// sizes, ...) must, because ONNX Runtime's shape inference cannot read
  /// external data ("Cannot parse data from external tensors"). 1 KiB is
  /// onnx.external_data_helper's size_threshold default.
  uint64_t ExternalMinBytes = 1024;
  struct ExternalEntry {
    std::shared_ptr<const TensorData> Data;
    uint64_t Offset = 0, Size = 0;
  };
  std::vector<ExternalEntry> *ExternalLayout = nullptr;
};

/// Writes the data file of \p Layout (what exportModel listed) to \p Path,
/// one tensor at a time (TensorData::writeTo): a slice's runs go from the
/// mapped source straight into the file with gathered writes, and resident
/// memory stays within about one source tensor.
llvm::Error
writeExternalData(llvm::ArrayRef<ExportOptions::ExternalEntry> Layout,
                  llvm::StringRef Path);

/// Serializes the model as a binary ModelProto.
llvm::Expected<std::string> exportModel(const Model &M,
                                        const ExportOptions &Opts = {});
/// Writes the model to \p Path (binary protobuf).
llvm::Error writeModelFile(const Model &M, llvm::StringRef Path,
                           const ExportOptions &Opts = {});

/// Registers the schemas of the `hccl` domain (DESIGN §7) with ONNX so that
/// the checker and shape inference accept emitted graphs. Idempotent.
void registerHcclSchemas();

/// Runs onnx::checker on the exported model. Without \p ParameterData,
/// parameters above 1 KiB are checked as typed graph inputs, as an emitted
/// graph references them (external data), instead of being copied into the
/// checked proto: checking a role graph then needs no second copy of the
/// model's weights (issue 35: -o peaked at twice the model file).
llvm::Error checkModel(const Model &M, bool ParameterData = true);

/// Runs ONNX shape inference (strict, with data propagation) and merges the
/// inferred types into the IR: unknown element types, unknown ranks and
/// unknown or symbolic dims are refined; a static dim that disagrees with an
/// inferred static dim is an error naming the value. Returns the number of
/// values whose type changed.
llvm::Expected<unsigned> inferShapes(Model &M);

} // namespace loom

#endif // LOOM_ONNX_ONNX_H
