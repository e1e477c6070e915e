//===- ImportModel.cpp - The import entry points: files and buffers -------===//
//
// importModelFile, importModelFromText and importModelFromBinary
// (loom/ONNX/ONNX.h): what kind of file it is, parsing it (text through
// ONNX's parser with its nesting bounded, binary streamed in chunks), and
// parse errors turned into file:line:column messages; the ModelProto then
// goes to the importer (Importer.cpp).
//
//===----------------------------------------------------------------------===//
#include "ProtoTensorData.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "loom/ONNX/ONNX.h"
#include "onnx/defs/parser.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include <climits>
#include <cstring>

using namespace llvm;

namespace loom {

/// Turns ONNX's "[ParseError at position (line: L column: C)]\nError
/// context: ...\nmessage" into "buffer:L:C: error: message".
static Error parseErrorToLLVM(StringRef Buffer, StringRef Msg) {
  Regex Pos("\\(line: ([0-9]+) column: ([0-9]+)\\)");
  SmallVector<StringRef, 3> M;
  std::string Line = "1", Col = "1";
  if (Pos.match(Msg, &M)) {
    Line = M[1].str();
    Col = M[2].str();
  }
  StringRef Context, Detail = Msg;
  size_t CtxPos = Msg.find("Error context:");
  if (CtxPos != StringRef::npos) {
    StringRef Rest = Msg.substr(CtxPos + strlen("Error context:"));
    auto Split = Rest.split('\n');
    Context = Split.first.trim();
    Detail = Split.second.trim();
  }
  if (Detail.empty())
    Detail = "syntax error";
  std::string Out =
      (Buffer + ":" + Line + ":" + Col + ": error: " + Detail).str();
  if (!Context.empty())
    Out += "\n  " + Context.str();
  return createStringError(inconvertibleErrorCode(), Out);
}

/// ONNX's text parser recurses once per bracket level and would overflow
/// the stack on a small file of nested `seq(seq(...))` types or subgraphs:
/// refuse nesting deeper than ImportLimits::MaxTextNesting before parsing.
/// Brackets inside '#' comments and string literals do not count.
static Error checkTextNesting(StringRef Text, StringRef BufferName) {
  unsigned Depth = 0, Line = 1, Col = 0;
  bool InString = false, InComment = false;
  for (size_t I = 0; I < Text.size(); ++I) {
    char C = Text[I];
    ++Col;
    if (C == '\n') {
      ++Line;
      Col = 0;
      InComment = false;
      continue;
    }
    if (InComment)
      continue;
    if (InString) {
      if (C == '\\')
        ++I, ++Col;
      else if (C == '"')
        InString = false;
      continue;
    }
    if (C == '#') {
      InComment = true;
    } else if (C == '"') {
      InString = true;
    } else if (C == '(' || C == '[' || C == '{') {
      if (++Depth > ImportLimits::MaxTextNesting)
        return createStringError(
            inconvertibleErrorCode(),
            "%s:%u:%u: error: brackets nested deeper than %u levels",
            BufferName.str().c_str(), Line, Col, ImportLimits::MaxTextNesting);
    } else if ((C == ')' || C == ']' || C == '}') && Depth) {
      --Depth;
    }
  }
  return Error::success();
}

Expected<std::unique_ptr<Model>> importModelFromText(StringRef Text,
                                                     StringRef BufferName,
                                                     StringRef BaseDir,
                                                     ImportStats *Stats) {
  if (Error E = checkTextNesting(Text, BufferName))
    return std::move(E);
  auto MP = std::make_shared<onnx::ModelProto>();
  std::string Copy = Text.str(); // The parser needs a NUL-terminated string.
  try {
    onnx::Status S = onnx::OnnxParser::Parse(*MP, Copy.c_str());
    if (!S.IsOK())
      return parseErrorToLLVM(BufferName, S.ErrorMessage());
  } catch (const std::exception &E) {
    return createStringError(inconvertibleErrorCode(), "%s: error: %s",
                             BufferName.str().c_str(), E.what());
  }
  return runImporter(MP, BufferName, BaseDir, /*IsText=*/true, Stats);
}

Expected<std::unique_ptr<Model>> importModelFromBinary(StringRef Bytes,
                                                       StringRef BufferName,
                                                       StringRef BaseDir,
                                                       ImportStats *Stats) {
  auto MP = std::make_shared<onnx::ModelProto>();
  if (Bytes.size() > (size_t)INT_MAX)
    return createStringError(inconvertibleErrorCode(),
                             "%s: error: file is larger than 2 GiB; store "
                             "weights as external data",
                             BufferName.str().c_str());
  if (!MP->ParseFromArray(Bytes.data(), (int)Bytes.size()))
    return createStringError(inconvertibleErrorCode(),
                             "%s: error: not a valid ONNX model (malformed "
                             "or truncated protobuf)",
                             BufferName.str().c_str());
  return runImporter(MP, BufferName, BaseDir, /*IsText=*/false, Stats);
}

/// Text or binary, from the extension, else from the content: whitespace
/// and '#' comment lines, then '<' for text. None when \p Content (the
/// start of the file) is all comments, so that more must be read.
static Optional<bool> looksLikeText(StringRef Path, StringRef Content,
                                    bool Complete = true) {
  StringRef Ext = sys::path::extension(Path);
  if (Ext == ".onnxtxt" || Ext == ".onnxtext" || Ext == ".txt" ||
      Ext == ".test")
    return true;
  if (Ext == ".onnx" || Ext == ".pb")
    return false;
  // Skip whitespace and '#' comment lines, then expect '<'.
  StringRef S = Content;
  while (true) {
    S = S.ltrim();
    if (S.startswith("#")) {
      S = S.drop_until([](char C) { return C == '\n'; });
      continue;
    }
    break;
  }
  if (S.empty() && !Complete)
    return None;
  return S.startswith("<");
}

/// Parses the binary ModelProto in \p FD straight from the descriptor, in
/// chunks: reading or mapping the whole file first would hold every inline
/// weight twice at the peak (the file's bytes and the parsed protobuf's
/// copy of them; issue 21: a 346 MB torch export took 733 MB of RSS).
static Expected<std::unique_ptr<Model>>
importBinaryFile(sys::fs::file_t FD, uint64_t Size, StringRef Path,
                 StringRef BaseDir, ImportStats *Stats) {
  if (Size > (uint64_t)INT_MAX)
    return createStringError(inconvertibleErrorCode(),
                             "%s: error: file is larger than 2 GiB; store "
                             "weights as external data",
                             Path.str().c_str());
  auto MP = std::make_shared<onnx::ModelProto>();
  bool Parsed = false;
  {
    google::protobuf::io::FileInputStream In(FD, /*block_size=*/1 << 20);
    google::protobuf::io::CodedInputStream Coded(&In);
    Coded.SetTotalBytesLimit(INT_MAX);
    Parsed = MP->ParseFromCodedStream(&Coded) &&
             Coded.ConsumedEntireMessage() && In.GetErrno() == 0;
  }
  if (!Parsed)
    return createStringError(inconvertibleErrorCode(),
                             "%s: error: not a valid ONNX model (malformed "
                             "or truncated protobuf)",
                             Path.str().c_str());
  return runImporter(MP, Path, BaseDir, /*IsText=*/false, Stats);
}

Expected<std::unique_ptr<Model>> importModelFile(StringRef Path,
                                                 ImportStats *Stats) {
  if (sys::fs::is_directory(Path))
    return createStringError(inconvertibleErrorCode(),
                             "%s: error: is a directory, not a model file",
                             Path.str().c_str());
  auto CannotRead = [&](std::error_code EC) {
    return createStringError(EC, "%s: error: cannot read: %s",
                             Path.str().c_str(), EC.message().c_str());
  };
  Expected<sys::fs::file_t> FD = sys::fs::openNativeFileForRead(Path);
  if (!FD)
    return CannotRead(errorToErrorCode(FD.takeError()));
  auto Close = make_scope_exit([&] { sys::fs::closeFile(*FD); });
  sys::fs::file_status St;
  if (std::error_code EC = sys::fs::status(*FD, St))
    return CannotRead(EC);
  SmallString<256> Dir(Path);
  sys::path::remove_filename(Dir);
  if (Dir.empty())
    Dir = ".";
  // Text or binary: the extension, else the first bytes (comment lines,
  // then '<').
  std::vector<char> Head(65536);
  Expected<size_t> Got = sys::fs::readNativeFileSlice(*FD, Head, 0);
  if (!Got)
    return CannotRead(errorToErrorCode(Got.takeError()));
  Optional<bool> Text = looksLikeText(Path, StringRef(Head.data(), *Got),
                                      /*Complete=*/*Got < Head.size());
  if (Text && !*Text && St.type() == sys::fs::file_type::regular_file)
    return importBinaryFile(*FD, St.getSize(), Path, Dir, Stats);
  ErrorOr<std::unique_ptr<MemoryBuffer>> MB =
      MemoryBuffer::getFile(Path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!MB)
    return CannotRead(MB.getError());
  StringRef Content = (*MB)->getBuffer();
  if (looksLikeText(Path, Content).getValueOr(false))
    return importModelFromText(Content, Path, Dir, Stats);
  return importModelFromBinary(Content, Path, Dir, Stats);
}

} // namespace loom
