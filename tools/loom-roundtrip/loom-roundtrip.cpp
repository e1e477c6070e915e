//===- loom-roundtrip.cpp - Import/export/re-import test driver -----------===//
//
//   loom-roundtrip MODEL [--print-dump] [--checker] [-o EXPORTED.onnx]
//
// Imports MODEL, verifies it, dumps it, exports it, re-imports the exported
// bytes and dumps again; the two dumps must be identical. Used by the
// libonnx-testdata sweep (test/sweep). Exit status:
//   0  the round trip is identical;
//   1  the model is rejected: one line `MODEL: error: ...` on stderr;
//   3  the round trip failed (dumps differ, or the exported model does not
//      export or re-import): a bug in lib/ONNX, described on stderr.
// With --checker, the result of ONNX's checker on the imported model is
// printed on stdout as `checker: ok` or `checker: failed: ...`; it does not
// change the exit status.
//
//===----------------------------------------------------------------------===//
#include "loom/ONNX/ONNX.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace loom;

static cl::OptionCategory RoundTripCategory("loom-roundtrip options");

static cl::opt<std::string> ModelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx|model.onnxtxt>"),
                                      cl::cat(RoundTripCategory));
static cl::opt<bool> PrintDump("print-dump",
                               cl::desc("Print the dump of the imported "
                                        "model on stdout"),
                               cl::cat(RoundTripCategory));
static cl::opt<bool> RunChecker("checker",
                                cl::desc("Run ONNX's checker on the imported "
                                         "model and print its verdict"),
                                cl::cat(RoundTripCategory));

static cl::opt<std::string>
    OutputPath("o", cl::value_desc("file"),
               cl::desc("Also write the exported model to this file"),
               cl::cat(RoundTripCategory));

enum ExitCode { Identical = 0, Rejected = 1, RoundTripFailed = 3 };

/// Collapses a (possibly multi-line) message into one line.
static std::string oneLine(StringRef Msg) {
  SmallVector<StringRef, 4> Lines;
  Msg.trim().split(Lines, '\n', -1, /*KeepEmpty=*/false);
  std::string Out;
  for (StringRef L : Lines) {
    if (!Out.empty())
      Out += ' ';
    Out += L.trim().str();
  }
  return Out;
}

/// Prints an error as `MODEL: error: ...` (importer messages already carry
/// the file name) and returns \p Code.
static int report(Error E, int Code, StringRef What = "") {
  std::string Msg = oneLine(toString(std::move(E)));
  if (StringRef(Msg).contains(": error: ") && What.empty())
    errs() << Msg << '\n';
  else
    errs() << ModelPath << ": error: " << What << Msg << '\n';
  return Code;
}

static std::string dump(const Model &M) {
  std::string S;
  raw_string_ostream OS(S);
  printModel(M, OS);
  return OS.str();
}

/// Prints the first differing line of two dumps, diff style.
static void printFirstDifference(StringRef A, StringRef B) {
  SmallVector<StringRef, 0> LA, LB;
  A.split(LA, '\n');
  B.split(LB, '\n');
  size_t N = std::min(LA.size(), LB.size());
  size_t I = 0;
  while (I < N && LA[I] == LB[I])
    ++I;
  errs() << ModelPath << ": error: round trip changed the dump at line "
         << I + 1 << '\n';
  errs() << "--- imported\n+++ re-imported\n";
  if (I > 0)
    errs() << "  " << LA[I - 1] << '\n';
  errs() << "- " << (I < LA.size() ? LA[I] : "<end>") << '\n';
  errs() << "+ " << (I < LB.size() ? LB[I] : "<end>") << '\n';
}

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  cl::HideUnrelatedOptions(RoundTripCategory);
  cl::ParseCommandLineOptions(
      argc, argv, "Loom: check that an ONNX model survives import, export "
                  "and re-import unchanged\n");

  Expected<std::unique_ptr<Model>> M = importModelFile(ModelPath);
  if (!M)
    return report(M.takeError(), Rejected);
  if (Error E = verifyModel(**M))
    return report(std::move(E), Rejected, "verifier: ");
  std::string First = dump(**M);
  if (PrintDump)
    outs() << First;

  if (RunChecker) {
    if (Error E = checkModel(**M))
      outs() << "checker: failed: " << oneLine(toString(std::move(E)))
             << '\n';
    else
      outs() << "checker: ok\n";
  }

  Expected<std::string> Bytes = exportModel(**M);
  if (!Bytes)
    return report(Bytes.takeError(), RoundTripFailed, "export: ");
  if (!OutputPath.empty())
    if (Error E = writeModelFile(**M, OutputPath))
      return report(std::move(E), RoundTripFailed, "export: ");
  Expected<std::unique_ptr<Model>> M2 =
      importModelFromBinary(*Bytes, ModelPath + " (exported)", (*M)->BaseDir);
  if (!M2)
    return report(M2.takeError(), RoundTripFailed, "re-import: ");
  if (Error E = verifyModel(**M2))
    return report(std::move(E), RoundTripFailed, "re-import: verifier: ");
  std::string Second = dump(**M2);
  if (First != Second) {
    printFirstDifference(First, Second);
    return RoundTripFailed;
  }
  return Identical;
}
