//===- PassManager.cpp - Running pipelines of passes ----------------------===//
#include "loom/Pass/Pass.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>

using namespace llvm;

namespace loom {

Pass::~Pass() = default;

StringRef Pass::getArgument() const { return Info ? Info->Argument : ""; }
StringRef Pass::getDescription() const { return Info ? Info->Description : ""; }

void PassManager::addPass(const PassInfo &PI) {
  std::unique_ptr<Pass> P = PI.Create();
  P->Info = &PI;
  Passes.push_back(std::move(P));
}

bool PassManager::isTransformPass(StringRef Argument) const {
  const PassInfo *PI = lookupPass(Argument);
  return PI && PI->Kind != PassKind::Planning;
}

const PassInfo *PassManager::lookupPass(StringRef Argument) const {
  for (const PassInfo &PI : Registry)
    if (Argument == PI.Argument)
      return &PI;
  return nullptr;
}

std::string PassManager::registeredNames() const {
  std::string S;
  for (const PassInfo &PI : Registry) {
    if (!S.empty())
      S += ", ";
    S += PI.Argument;
  }
  return S;
}

Error PassManager::parsePipeline(StringRef Pipeline) {
  SmallVector<StringRef, 8> Names;
  Pipeline.split(Names, ',', -1, /*KeepEmpty=*/false);
  if (Names.empty())
    return createStringError(inconvertibleErrorCode(),
                             "--pass-pipeline: empty pipeline");
  for (StringRef Name : Names) {
    Name = Name.trim();
    const PassInfo *PI = lookupPass(Name);
    if (!PI)
      return createStringError(
          inconvertibleErrorCode(),
          "--pass-pipeline: unknown pass '%s'; registered passes: %s",
          Name.str().c_str(), registeredNames().c_str());
    addPass(*PI);
  }
  return Error::success();
}

void PassManager::addDefaultPipeline(const DefaultPipelineOptions &O) {
  for (const PassInfo &PI : Registry) {
    if ((PI.Kind == PassKind::Transform && !O.Transforms) ||
        (PI.Kind == PassKind::Emit && !(O.Transforms && O.Emit)))
      continue;
    addPass(PI);
  }
}

std::vector<std::string> PassManager::getPipelineNames() const {
  std::vector<std::string> Names;
  for (const auto &P : Passes)
    Names.push_back(P->getArgument().str());
  return Names;
}

Error PassManager::validate(const PassInstrumentation &PI) const {
  auto InPipeline = [&](StringRef N) {
    return any_of(Passes, [&](const std::unique_ptr<Pass> &P) {
      return P->getArgument() == N;
    });
  };
  auto Check = [&](StringRef Flag, StringRef N) -> Error {
    if (N.empty() || N == "all" || InPipeline(N))
      return Error::success();
    if (!lookupPass(N))
      return createStringError(inconvertibleErrorCode(),
                               "%s: unknown pass '%s'; registered passes: %s",
                               Flag.str().c_str(), N.str().c_str(),
                               registeredNames().c_str());
    return createStringError(inconvertibleErrorCode(),
                             "%s: pass '%s' is not in the pipeline",
                             Flag.str().c_str(), N.str().c_str());
  };
  for (const std::string &N : PI.PrintAfter)
    if (Error E = Check("--print-after", N))
      return E;
  return Check("--stop-after", PI.StopAfter);
}

void Pass::print(const CompilationUnit &CU, raw_ostream &OS) const {
  printModel(*CU.M, OS);
}

/// "MODEL: error: MESSAGE", as import errors read. Messages that already
/// name a file ("FILE: error: ...", "FILE:L:C: error: ...") and errors of
/// other types (no feasible plan, which has its own exit status) pass
/// through unchanged.
static Error nameModelFile(const CompilationUnit &CU, Error E) {
  if (!CU.M || CU.M->SourcePath.empty())
    return E;
  return handleErrors(std::move(E), [&](const StringError &SE) -> Error {
    std::string Msg = SE.getMessage();
    if (!StringRef(Msg).contains(": error: "))
      Msg = CU.M->SourcePath + ": error: " + Msg;
    return make_error<StringError>(Msg, SE.convertToErrorCode());
  });
}

Error PassManager::run(CompilationUnit &CU, const PassInstrumentation &PI,
                       raw_ostream &Out, raw_ostream &Report) {
  if (Error E = validate(PI))
    return E;
  if (!CU.Imported && CU.M &&
      any_of(Passes, [](const std::unique_ptr<Pass> &P) {
        return P->needsImportedModel();
      }))
    CU.Imported = cloneModel(*CU.M);
  std::vector<std::pair<std::string, double>> Times;
  for (const auto &P : Passes) {
    if (CU.Opts.Progress)
      CU.Opts.Progress(P->getArgument().str() + " (" +
                       std::to_string(Times.size() + 1) + "/" +
                       std::to_string(Passes.size()) + ")");
    auto Start = std::chrono::steady_clock::now();
    Error E = P->run(CU);
    double Secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
            .count();
    Times.emplace_back(P->getArgument().str(), Secs);
    if (E)
      return P->errorsNameModel() ? nameModelFile(CU, std::move(E))
                                  : std::move(E);
    CU.PassesRun.push_back(P->getArgument().str());
    if (PI.VerifyEach)
      if (Error VE = verifyModel(*CU.M))
        return nameModelFile(
            CU, createStringError(inconvertibleErrorCode(),
                                  "IR verification failed after %s: %s",
                                  P->getArgument().str().c_str(),
                                  toString(std::move(VE)).c_str()));
    if (is_contained(PI.PrintAfter, P->getArgument().str()) ||
        is_contained(PI.PrintAfter, "all")) {
      Out << "# *** IR Dump After " << P->getArgument() << " ***\n";
      P->print(CU, Out);
    }
    if (P->getArgument() == PI.StopAfter)
      break;
  }
  if (PI.TimePasses) {
    double Total = 0;
    for (auto &T : Times)
      Total += T.second;
    Report << "===" << std::string(70, '-') << "===\n"
           << "                      ... Pass execution timing report ...\n"
           << "===" << std::string(70, '-') << "===\n";
    Report << format("  Total Execution Time: %.4f seconds\n\n", Total);
    Report << "   ---Wall Time---  --- Name ---\n";
    for (auto &T : Times)
      Report << format("   %.4f (%5.1f%%)  %s\n", T.second,
                       Total > 0 ? 100.0 * T.second / Total : 0.0,
                       T.first.c_str());
    Report << format("   %.4f (100.0%%)  Total\n", Total);
  }
  return Error::success();
}

} // namespace loom
