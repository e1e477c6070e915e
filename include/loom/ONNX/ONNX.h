//===- ONNX.h - ONNX import, export, checker and shape inference -*- C++ -*-===//
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

/// Reads a model from a file: ONNX text syntax for `.onnxtxt`/`.onnxtext`/
/// `.txt` (or content starting with '<' after comments), binary protobuf
/// otherwise. External data is resolved relative to the file's directory
/// but not read. Default-domain opsets 7-17 are taken as they are; opset
/// 1-6 models are upgraded to opset 7 with ONNX's version converter; newer
/// ones are rejected. Errors name the file (and line:col for text syntax).
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
};

/// Serializes the model as a binary ModelProto.
llvm::Expected<std::string> exportModel(const Model &M,
                                        const ExportOptions &Opts = {});
/// Writes the model to \p Path (binary protobuf).
llvm::Error writeModelFile(const Model &M, llvm::StringRef Path);

/// Runs onnx::checker on the exported model.
llvm::Error checkModel(const Model &M);

/// Runs ONNX shape inference (strict, with data propagation) and merges the
/// inferred types into the IR: unknown element types, unknown ranks and
/// unknown or symbolic dims are refined; a static dim that disagrees with an
/// inferred static dim is an error naming the value. Returns the number of
/// values whose type changed.
llvm::Expected<unsigned> inferShapes(Model &M);

} // namespace loom

#endif // LOOM_ONNX_ONNX_H
