//===- loom-roundtrip.cpp - Import/export/re-import test driver -----------===//
//
//   loom-roundtrip MODEL [--print-dump] [--checker] [-o EXPORTED.onnx]
//   loom-roundtrip --batch MODEL... [--checker]
//
// Imports MODEL, verifies it, dumps it, exports it, re-imports the exported
// bytes and dumps again; the two dumps must be identical. Used by the
// libonnx-testdata sweep (test/sweep). Exit status:
//   0  the round trip is identical;
//   1  the model is rejected: one line `MODEL: error: ...` on stderr;
//   3  the round trip failed (dumps differ, or the exported model does not
//      export or re-import): a bug in lib/ONNX, described on stderr.
// With --checker, the verdict of ONNX's checker on the imported model is
// printed on stdout as `checker: ok` or `checker: failed: ...`; it does not
// change the exit status.
//
// --batch saves the process start (mostly libLLVM's static constructors)
// per model: every model gets a record on stdout, flushed when complete,
//
//   === MODEL
//   checker: ...          (with --checker)
//   MODEL: error: ...     (the messages the single-model mode prints)
//   exit: N               (the status the single-model mode returns)
//
// and the tool exits 0. A caller that sees the process die reruns the
// models without a complete record one at a time.
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

static cl::list<std::string> ModelPaths(cl::Positional, cl::OneOrMore,
                                        cl::desc("<model.onnx|model.onnxtxt>"),
                                        cl::cat(RoundTripCategory));
static cl::opt<bool> Batch("batch",
                           cl::desc("Round-trip every MODEL, printing one "
                                    "record per model on stdout"),
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

static std::string dump(const Model &M) {
  std::string S;
  raw_string_ostream OS(S);
  printModel(M, OS);
  return OS.str();
}

namespace {

/// One model's round trip; results go to \p Out, messages to \p Err.
class RoundTrip {
public:
  RoundTrip(StringRef Path, raw_ostream &Out, raw_ostream &Err)
      : Path(Path), Out(Out), Err(Err) {}
  int run();

private:
  /// Prints an error as `MODEL: error: ...` (importer messages already
  /// carry the file name) and returns \p Code.
  int report(Error E, int Code, StringRef What = "");
  void printFirstDifference(StringRef A, StringRef B);

  StringRef Path;
  raw_ostream &Out, &Err;
};

} // namespace

int RoundTrip::report(Error E, int Code, StringRef What) {
  std::string Msg = oneLine(toString(std::move(E)));
  if (StringRef(Msg).contains(": error: ") && What.empty())
    Err << Msg << '\n';
  else
    Err << Path << ": error: " << What << Msg << '\n';
  return Code;
}

/// Prints the first differing line of two dumps, diff style.
void RoundTrip::printFirstDifference(StringRef A, StringRef B) {
  SmallVector<StringRef, 0> LA, LB;
  A.split(LA, '\n');
  B.split(LB, '\n');
  size_t N = std::min(LA.size(), LB.size());
  size_t I = 0;
  while (I < N && LA[I] == LB[I])
    ++I;
  Err << Path << ": error: round trip changed the dump at line " << I + 1
      << '\n';
  Err << "--- imported\n+++ re-imported\n";
  if (I > 0)
    Err << "  " << LA[I - 1] << '\n';
  Err << "- " << (I < LA.size() ? LA[I] : "<end>") << '\n';
  Err << "+ " << (I < LB.size() ? LB[I] : "<end>") << '\n';
}

int RoundTrip::run() {
  Expected<std::unique_ptr<Model>> M = importModelFile(Path);
  if (!M)
    return report(M.takeError(), Rejected);
  if (Error E = verifyModel(**M))
    return report(std::move(E), Rejected, "verifier: ");
  std::string First = dump(**M);
  if (PrintDump)
    Out << First;

  if (RunChecker) {
    if (Error E = checkModel(**M))
      Out << "checker: failed: " << oneLine(toString(std::move(E))) << '\n';
    else
      Out << "checker: ok\n";
  }

  Expected<std::string> Bytes = exportModel(**M);
  if (!Bytes)
    return report(Bytes.takeError(), RoundTripFailed, "export: ");
  if (!OutputPath.empty())
    if (Error E = writeModelFile(**M, OutputPath))
      return report(std::move(E), RoundTripFailed, "export: ");
  Expected<std::unique_ptr<Model>> M2 = importModelFromBinary(
      *Bytes, (Path + " (exported)").str(), (*M)->BaseDir);
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

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  cl::HideUnrelatedOptions(RoundTripCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Loom: check that an ONNX model survives import, export "
      "and re-import unchanged\n");

  if (!Batch) {
    if (ModelPaths.size() != 1) {
      errs() << "loom-roundtrip: error: one MODEL expected (or --batch)\n";
      return 2;
    }
    return RoundTrip(ModelPaths[0], outs(), errs()).run();
  }
  if (PrintDump || !OutputPath.empty()) {
    errs() << "loom-roundtrip: error: --batch takes neither --print-dump "
              "nor -o\n";
    return 2;
  }
  for (const std::string &Path : ModelPaths) {
    outs() << "=== " << Path << '\n';
    int Status = RoundTrip(Path, outs(), outs()).run();
    outs() << "exit: " << Status << '\n';
    outs().flush();
  }
  return 0;
}
