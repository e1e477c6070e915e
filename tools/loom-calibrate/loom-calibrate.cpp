//===- loom-calibrate.cpp - Fit a hardware overlay to measured profiles ---===//
//
//   loom-calibrate --hw base.yaml op_summary_0_1.csv trace.json
//       --collective hccs:allreduce:8:hccl_allreduce.txt -o calibrated.yaml
//       (one command)
//   plan-parallel model.onnx --hw base.yaml --hw calibrated.yaml
//
// Reads measured per-op timings (msprof op_summary CSV, PyTorch profiler
// Chrome trace) and collective benchmark tables (nccl-tests, HCCL Test),
// costs every kernel with Loom's op rules, fits an efficiency curve per
// device class and op family and a latency and efficiency per topology
// level, prints predicted against measured before and after the fit, and
// writes the fitted numbers as a hardware overlay (the method is described
// in loom/Calibrate/Calibration.h). Rows it cannot use are warnings naming
// file:line; unreadable files and missing columns are errors, and then
// nothing is written.
//
//===----------------------------------------------------------------------===//
#include "loom/Calibrate/Calibration.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace loom;

static cl::OptionCategory CalibrateCategory("loom-calibrate options");

static cl::list<std::string>
    ProfilePaths(cl::Positional, cl::ZeroOrMore,
                 cl::desc("<op_summary.csv|trace.json>..."),
                 cl::cat(CalibrateCategory));
static cl::opt<std::string>
    HardwarePath("hw", cl::value_desc("file"),
                 cl::desc("The hardware description to calibrate (the "
                          "base the overlay is layered over)"),
                 cl::cat(CalibrateCategory));
static cl::list<std::string> Collectives(
    "collective", cl::value_desc("level:op:ranks:file"),
    cl::desc("A collective benchmark table (nccl-tests or HCCL Test output) "
             "of op (allreduce, allgather, reducescatter, alltoall, "
             "broadcast, sendrecv) on ranks ranks that differ only at "
             "topology level `level`"),
    cl::cat(CalibrateCategory));
static cl::opt<std::string>
    OutputPath("o", cl::value_desc("file"),
               cl::desc("Write the fitted overlay here (nothing is written "
                        "without it)"),
               cl::cat(CalibrateCategory));
static cl::opt<unsigned>
    MinRows("min-rows", cl::init(3),
            cl::desc("Fewest rows an op family or level needs to be fitted "
                     "(default 3)"),
            cl::cat(CalibrateCategory));

static int fail(const Twine &Msg) {
  errs() << "loom-calibrate: " << Msg << '\n';
  return 1;
}

static Expected<CollectiveTable> readCollective(StringRef Spec) {
  SmallVector<StringRef, 4> Parts;
  Spec.split(Parts, ':', /*MaxSplit=*/3);
  auto Bad = [&](const Twine &Msg) {
    return createStringError(inconvertibleErrorCode(),
                             "error: --collective " + Spec + ": " + Msg);
  };
  if (Parts.size() != 4)
    return Bad("expected level:op:ranks:file (e.g. hccs:allreduce:8:t.txt)");
  CollectiveTable T;
  T.Level = Parts[0].str();
  Optional<CollectiveKind> K = parseCollectiveKind(Parts[1]);
  if (!K)
    return Bad("unknown collective '" + Parts[1] +
               "'; expected allreduce, allgather, reducescatter, alltoall, "
               "broadcast or sendrecv");
  T.Kind = *K;
  if (Parts[2].getAsInteger(10, T.Ranks) || T.Ranks < 2)
    return Bad("ranks must be an integer >= 2, got '" + Parts[2] + "'");
  T.File = Parts[3].str();
  ErrorOr<std::unique_ptr<MemoryBuffer>> File =
      MemoryBuffer::getFile(T.File, /*IsText=*/true);
  if (!File)
    return createStringError(
        inconvertibleErrorCode(),
        T.File + ": error: cannot read table: " + File.getError().message());
  Expected<CollectiveRead> Read =
      readBusBandwidthTable((*File)->getBuffer(), T.File);
  if (!Read)
    return Read.takeError();
  for (const std::string &W : Read->Warnings)
    errs() << W << '\n';
  T.Samples = std::move(Read->Samples);
  return T;
}

/// Writes \p Text to \p Path through a temporary file in the same folder,
/// so a failure leaves no partial file.
static Error writeAtomically(StringRef Path, StringRef Text) {
  SmallString<128> Temp(Path);
  Temp += ".tmp-%%%%%%";
  int FD;
  SmallString<128> TempPath;
  if (std::error_code EC = sys::fs::createUniqueFile(Temp, FD, TempPath))
    return createStringError(EC,
                             Path + ": error: cannot write: " + EC.message());
  {
    raw_fd_ostream OS(FD, /*shouldClose=*/true);
    OS << Text;
    OS.flush();
    if (OS.has_error()) {
      sys::fs::remove(TempPath);
      return createStringError(inconvertibleErrorCode(),
                               Path + ": error: cannot write");
    }
  }
  if (std::error_code EC = sys::fs::rename(TempPath, Path)) {
    sys::fs::remove(TempPath);
    return createStringError(EC,
                             Path + ": error: cannot write: " + EC.message());
  }
  return Error::success();
}

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  cl::HideUnrelatedOptions(CalibrateCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "loom-calibrate: fit Loom's hardware model to measured profiles\n\n"
      "Reads msprof op_summary CSVs and PyTorch profiler traces (per-op "
      "timings)\nand nccl-tests / HCCL Test tables (--collective), fits per "
      "device class and\nop family an efficiency curve eff(w) = max * w / "
      "(w + half_time) and per\ntopology level a latency and an efficiency, "
      "prints predicted vs measured\nbefore and after, and writes the fit "
      "as a hardware overlay for\n`plan-parallel --hw base.yaml --hw "
      "overlay.yaml`.\n",
      /*Errs=*/nullptr, /*EnvVar=*/nullptr,
      // "--hx" is an unknown flag, not -h grouped with -x (see
      // plan-parallel's spellLongOptions).
      /*LongOptionsUseDoubleDash=*/true);

  if (HardwarePath.empty())
    return fail("error: --hw: no hardware description given");
  if (ProfilePaths.empty() && Collectives.empty())
    return fail("error: nothing to calibrate: give profiles and/or "
                "--collective tables");

  ErrorOr<std::unique_ptr<MemoryBuffer>> Base =
      MemoryBuffer::getFile(HardwarePath, /*IsText=*/true);
  if (!Base)
    return fail(HardwarePath + ": error: cannot read hardware description: " +
                Base.getError().message());
  std::string BaseText = (*Base)->getBuffer().str();
  Expected<HardwareModel> HW = parseHardwareModel(BaseText, HardwarePath);
  if (!HW)
    return fail(toString(HW.takeError()));

  CalibrationInput In;
  In.MinRows = MinRows;
  for (const std::string &P : ProfilePaths) {
    Expected<ProfileRead> R = readProfileFile(P);
    if (!R)
      return fail(toString(R.takeError()));
    In.Profiles.emplace_back(P, std::move(*R));
  }
  for (const std::string &C : Collectives) {
    Expected<CollectiveTable> T = readCollective(C);
    if (!T)
      return fail(toString(T.takeError()));
    In.Collectives.push_back(std::move(*T));
  }

  Expected<CalibrationResult> R = calibrate(*HW, BaseText, HardwarePath, In);
  if (!R)
    return fail(toString(R.takeError()));
  for (const std::string &W : R->Warnings)
    errs() << W << '\n';
  if (R->Families.empty() && R->Levels.empty())
    return fail("error: nothing fitted (see the warnings above)");
  printCalibrationReport(*R, outs());
  if (!OutputPath.empty()) {
    if (Error E = writeAtomically(OutputPath, R->Overlay))
      return fail(toString(std::move(E)));
    outs() << "wrote " << OutputPath << '\n';
  }
  return 0;
}
