//===- Calibration.h - Fit the hardware model to measured profiles -*- C++
//-*-===//
//
// loom-calibrate's library: read measured kernel timings and collective
// benchmark tables, cost each kernel with Loom's own op rules
// (cost_models/ops) and time model (cost_models/devices), fit per device
// class and op family an efficiency curve, fit per topology level a
// latency and an efficiency, and write the result as a hardware overlay
// (`plan-parallel --hw base.yaml --hw overlay.yaml`, HardwareOverlay.h).
//
// Op curves (EfficiencyCurve in HardwareModel.h): with w an op's roofline
// time at 100 % of peak, the model is
//
//   t = launch + w / eff(w),  eff(w) = max * w / (w + half_time)
//     = launch + (w + half_time) / max,
//
// linear in w, so max and half_time come from a least-squares line through
// (w, t - launch) weighted by 1 / t^2 (relative error: small kernels count
// as much as large ones). w is Loom's own prediction with the family's
// curve set to {max 1, half_time 0} and no launch, so the fit inverts
// exactly the formula plan-parallel evaluates. A slope that would give
// max > 1 (the class's peak is understated) is clamped to 1, a negative
// intercept to half_time 0, each with a note.
//
// Collectives (Collectives.h): a benchmark of collective K on n ranks of
// one level gives t(S) = alpha * k(K, n) + b(S) / efficiency, with b the
// model's bandwidth term at efficiency 1 and k its count of latencies;
// both come from collectiveTime itself (at latency 0 and at latency 1 s),
// so again the fit inverts the model plan-parallel uses, bus-efficiency
// curve (n_1/2) included.
//
// Profiles read (formats as documented by their tools):
//   - Ascend msprof op_summary_*.csv: columns "OP Type", "Task Type",
//     "Task Duration(us)", "Input Shapes", "Input Data Types", optional
//     "Input Formats", "Output Data Types", "Op Name" (CANN profiling
//     guide, "op_summary (Operator Details)", hiascend.com
//     atlasprofiling_16_0067; the header names as in msprof's
//     analysis/msconfig/prof_header_mapping.json). Shapes are
//     "d0,d1;d0,d1" per input, types "DT_FLOAT16;..." or "FLOAT16;...".
//   - PyTorch profiler Chrome trace (Kineto): "X" events of cat "cpu_op"
//     with args "Input Dims" and "Input type" (profile(record_shapes=True))
//     and "External id"; device kernels (cat "kernel") are summed per
//     External id and give the op's time; without kernels, the cpu_op's
//     own duration is used for leaf ops. Durations are in us.
//   - nccl-tests output (all_reduce_perf, ...): "#" header lines naming the
//     columns "size count type redop root time algbw busbw #wrong ...";
//     the first "time" (out-of-place, us) is used (nccl-tests
//     doc/PERFORMANCE.md).
//   - HCCL Test (hccl_test) output: "data_size(Bytes): | aveg_time(us): |
//     alg_bandwidth(GB/s): | check_result:" then one "|"-separated row per
//     size (CANN "HCCL Performance Tester" guide, "Result Description").
//
// Bad input: a missing column or an unreadable file is an error naming the
// file (and line); a bad row (unknown op, zero or negative or malformed
// duration, shapes the op rejects) is a warning naming file:line, and the
// row is left out. Nothing here aborts or throws.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_CALIBRATE_CALIBRATION_H
#define LOOM_CALIBRATE_CALIBRATION_H

#include "loom/Cost/Collectives.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Support/DataType.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

/// One measured kernel, mapped to the ONNX op Loom costs it as.
struct OpSample {
  /// Where it was read: "prof.csv:12" or "trace.json: event 7".
  std::string Where;
  /// The op as the profile names it ("MatMulV2", "aten::mm").
  std::string ProfileOp;
  /// The ONNX op, its inputs and attributes (ONNX text syntax,
  /// "axis = -1").
  std::string OpType;
  std::vector<std::vector<int64_t>> InputShapes;
  std::vector<DataType> InputTypes;
  std::vector<std::string> Attributes;
  /// aicore or aicpu.
  std::string Class;
  /// Measured time of one execution.
  double Seconds = 0;
};

struct ProfileRead {
  std::vector<OpSample> Samples;
  /// One per row left out, "file:line: warning: ...".
  std::vector<std::string> Warnings;
};

/// Parses an msprof op_summary CSV; \p Name is used in messages.
llvm::Expected<ProfileRead> readMsprofOpSummary(llvm::StringRef Text,
                                                llvm::StringRef Name);
/// Parses a PyTorch profiler Chrome trace (JSON).
llvm::Expected<ProfileRead> readTorchTrace(llvm::StringRef Text,
                                           llvm::StringRef Name);
/// Reads \p Path: JSON (content starting with '{' or '[') as a trace,
/// anything else as an op_summary CSV.
llvm::Expected<ProfileRead> readProfileFile(llvm::StringRef Path);

/// One row of a collective benchmark.
struct CollectiveSample {
  std::string Where;
  /// The buffer size the table's size column gives.
  double Bytes = 0;
  double Seconds = 0;
};

struct CollectiveRead {
  std::vector<CollectiveSample> Samples;
  std::vector<std::string> Warnings;
};

/// Parses nccl-tests or HCCL Test output (detected from the header).
llvm::Expected<CollectiveRead> readBusBandwidthTable(llvm::StringRef Text,
                                                     llvm::StringRef Name);

/// y = P * U + Q * V through points weighted 1 / y^2; a plain-data helper
/// both fits share.
struct LinearFit {
  double P = 0, Q = 0;
};
/// Fails when the points do not determine both parameters.
llvm::Expected<LinearFit> fitTwoParameters(llvm::ArrayRef<double> U,
                                           llvm::ArrayRef<double> V,
                                           llvm::ArrayRef<double> Y);

/// A fitted curve and what was clamped.
struct CurveFit {
  EfficiencyCurve Curve;
  std::vector<std::string> Notes;
};
/// Fits max and half_time to (ideal time, measured time) pairs, given the
/// class's launch overhead.
llvm::Expected<CurveFit> fitEfficiencyCurve(llvm::ArrayRef<double> Ideal,
                                            llvm::ArrayRef<double> Measured,
                                            double Launch);

/// A collective benchmark: table rows of \p Kind on \p Ranks ranks that
/// differ only at topology level \p Level.
struct CollectiveTable {
  std::string File;
  std::string Level;
  CollectiveKind Kind = CollectiveKind::AllReduce;
  unsigned Ranks = 0;
  std::vector<CollectiveSample> Samples;
};

struct LevelFit {
  double Latency = 0, Efficiency = 1;
  std::vector<std::string> Notes;
};
/// Fits one level's latency and efficiency to every table of that level.
llvm::Expected<LevelFit>
fitTopologyLevel(const HardwareModel &HW, llvm::StringRef Level,
                 llvm::ArrayRef<CollectiveTable> Tables);

/// Before/after figures of one fitted group.
struct FamilyReport {
  std::string Class, Family;
  unsigned Rows = 0;
  /// Median of |predicted - measured| / measured, before and after.
  double MedianErrorBefore = 0, MedianErrorAfter = 0;
  EfficiencyCurve Curve;
  std::vector<std::string> Notes;
};

struct LevelReport {
  std::string Level;
  unsigned Rows = 0;
  double MedianErrorBefore = 0, MedianErrorAfter = 0;
  double Latency = 0, Efficiency = 1;
  std::vector<std::string> Notes;
};

struct CalibrationResult {
  std::vector<FamilyReport> Families;
  std::vector<LevelReport> Levels;
  /// Rows left out and groups not fitted, "file:line: warning: ...".
  std::vector<std::string> Warnings;
  /// The overlay, YAML text with a comment on every number.
  std::string Overlay;
};

struct CalibrationInput {
  /// Profiles by file name.
  std::vector<std::pair<std::string, ProfileRead>> Profiles;
  std::vector<CollectiveTable> Collectives;
  /// Fewest rows a family needs to be fitted.
  unsigned MinRows = 3;
};

/// Matches every sample to Loom's cost rules, fits, and writes the overlay
/// text. "After" figures come from the base layered with the overlay, read
/// back as plan-parallel reads it.
llvm::Expected<CalibrationResult> calibrate(const HardwareModel &Base,
                                            llvm::StringRef BaseText,
                                            llvm::StringRef BaseName,
                                            const CalibrationInput &In);

/// The fit tables, one line per family and level.
void printCalibrationReport(const CalibrationResult &R, llvm::raw_ostream &OS);

/// "allreduce" (any case, with or without '_'/'-') -> AllReduce.
llvm::Optional<CollectiveKind> parseCollectiveKind(llvm::StringRef Name);

} // namespace loom

#endif // LOOM_CALIBRATE_CALIBRATION_H
