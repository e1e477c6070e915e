//===- Calibration.cpp - Fit the hardware model to measured profiles ------===//
//
// Each profile row becomes a one-node ONNX model (op, input shapes and
// types), imported and shape-inferred by lib/ONNX like any model, so the
// row is costed by the same rule (cost_models/ops) and time model
// (cost_models/devices) plan-parallel uses; identical rows share one
// model. The fits and the overlay's format are described in
// Calibration.h.
//
//===----------------------------------------------------------------------===//
#include "loom/Calibrate/Calibration.h"

#include "loom/Cost/DeviceTime.h"
#include "loom/Cost/OpCost.h"
#include "loom/Hardware/HardwareOverlay.h"
#include "loom/ONNX/ONNX.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

using namespace llvm;

namespace loom {
namespace {

/// A costed profile row: the one-node model stays alive with its cost.
struct CostedOp {
  std::unique_ptr<Model> M;
  const Node *N = nullptr;
  OpCost Cost;
  std::string Error;
};

class OpCoster {
public:
  /// The node and its cost for \p S, or why it has none.
  const CostedOp &get(const OpSample &S) {
    std::string Text = modelText(S);
    auto It = Cache.find(Text);
    if (It != Cache.end())
      return It->second;
    CostedOp &C = Cache[Text];
    Expected<std::unique_ptr<Model>> M =
        importModelFromText(Text, "(" + S.ProfileOp + ")");
    if (!M) {
      C.Error = toString(M.takeError());
      return C;
    }
    if (Expected<unsigned> Changed = inferShapes(**M); !Changed) {
      C.Error = toString(Changed.takeError());
      return C;
    }
    C.M = std::move(*M);
    C.N = C.M->getGraph().getNodes().front().get();
    C.Cost = computeOpCost(*C.N, C.M->getOpsetVersion(""));
    if (!C.Cost.HasRule)
      C.Error = C.Cost.NoRuleReason;
    return C;
  }

private:
  std::map<std::string, CostedOp> Cache;

  static std::string modelText(const OpSample &S) {
    std::string Text;
    raw_string_ostream OS(Text);
    OS << "<ir_version: 8, opset_import: [\"\" : 17]>\ncalib (";
    for (size_t I = 0; I < S.InputShapes.size(); ++I) {
      if (I)
        OS << ", ";
      // A scalar is written [1]: ONNX text gives "T[]" no rank, and one
      // element more or less changes no cost.
      OS << getONNXTypeName(S.InputTypes[I]) << '[';
      if (S.InputShapes[I].empty())
        OS << '1';
      interleave(S.InputShapes[I], OS, ",");
      OS << "] x" << I;
    }
    OS << ") => (y0) {\n  y0 = " << S.OpType;
    if (!S.Attributes.empty())
      OS << " <" << join(S.Attributes, ", ") << ">";
    OS << " (";
    for (size_t I = 0; I < S.InputShapes.size(); ++I)
      OS << (I ? ", x" : "x") << I;
    OS << ")\n}\n";
    return OS.str();
  }
};

/// \p HW with class \p Class's curve for \p Family at {max 1, half 0} and
/// no launch overhead: its time is the op's roofline time w.
HardwareModel idealModel(const HardwareModel &HW, StringRef Class,
                         StringRef Family) {
  HardwareModel Ideal = HW;
  auto It = Ideal.Device.Classes.find(Class.str());
  if (It != Ideal.Device.Classes.end()) {
    It->second.LaunchOverhead = Seconds(0);
    EfficiencyCurve &C = It->second.EfficiencyCurves[Family.str()];
    C.Max = 1;
    C.HalfTime = Seconds(0);
  }
  return Ideal;
}

double median(std::vector<double> V) {
  if (V.empty())
    return 0;
  llvm::sort(V);
  size_t N = V.size();
  return N % 2 ? V[N / 2] : (V[N / 2 - 1] + V[N / 2]) / 2;
}

double relError(double Predicted, double Measured) {
  return std::fabs(Predicted - Measured) / Measured;
}

/// "3.25us": microseconds, at most 3 decimals (ns), trailing zeros dropped.
std::string formatMicros(double Seconds) {
  std::string S;
  raw_string_ostream(S) << format("%.3f", Seconds * 1e6);
  while (S.find('.') != std::string::npos && (S.back() == '0'))
    S.pop_back();
  if (!S.empty() && S.back() == '.')
    S.pop_back();
  if (S == "-0")
    S = "0";
  return S + "us";
}

std::string formatFixed(double V, int Decimals) {
  std::string S;
  raw_string_ostream(S) << format("%.*f", Decimals, V);
  return S;
}

std::string formatPercent(double V) { return formatFixed(V * 100, 1) + "%"; }

/// The group a table's collective runs on: \p Ranks members on level
/// \p Index, one on every other level.
GroupShape groupOn(const HardwareModel &HW, unsigned Index, unsigned Ranks) {
  GroupShape G;
  G.PerLevel.assign(HW.Topology.size(), 1);
  G.PerLevel[Index] = Ranks;
  return G;
}

int levelIndex(const HardwareModel &HW, StringRef Level) {
  for (size_t I = 0; I < HW.Topology.size(); ++I)
    if (HW.Topology[I].Name == Level)
      return int(I);
  return -1;
}

std::string joinFiles(const std::set<std::string> &Files) {
  return join(Files.begin(), Files.end(), ", ");
}

} // namespace

//===----------------------------------------------------------------------===//
// Fits
//===----------------------------------------------------------------------===//

Expected<LinearFit> fitTwoParameters(ArrayRef<double> U, ArrayRef<double> V,
                                     ArrayRef<double> Y) {
  assert(U.size() == V.size() && V.size() == Y.size());
  // Weighted normal equations, weights 1 / y^2 (relative error).
  double Suu = 0, Suv = 0, Svv = 0, Suy = 0, Svy = 0;
  for (size_t I = 0; I < Y.size(); ++I) {
    if (!(std::fabs(Y[I]) > 0))
      continue;
    double W = 1 / (Y[I] * Y[I]);
    Suu += W * U[I] * U[I];
    Suv += W * U[I] * V[I];
    Svv += W * V[I] * V[I];
    Suy += W * U[I] * Y[I];
    Svy += W * V[I] * Y[I];
  }
  double Det = Suu * Svv - Suv * Suv;
  if (!(Det > 1e-9 * Suu * Svv) || !std::isfinite(Det))
    return createStringError(inconvertibleErrorCode(),
                             "the rows do not determine both parameters "
                             "(need at least two different sizes)");
  LinearFit F;
  F.P = (Suy * Svv - Svy * Suv) / Det;
  F.Q = (Svy * Suu - Suy * Suv) / Det;
  return F;
}

/// Least squares of y = Q * V alone (weights 1 / y^2).
static double fitSlope(ArrayRef<double> V, ArrayRef<double> Y) {
  double Svv = 0, Svy = 0;
  for (size_t I = 0; I < Y.size(); ++I) {
    if (!(std::fabs(Y[I]) > 0))
      continue;
    double W = 1 / (Y[I] * Y[I]);
    Svv += W * V[I] * V[I];
    Svy += W * V[I] * Y[I];
  }
  return Svv > 0 ? Svy / Svv : 0;
}

Expected<CurveFit> fitEfficiencyCurve(ArrayRef<double> Ideal,
                                      ArrayRef<double> Measured,
                                      double Launch) {
  // t - launch = (half / max) * 1 + (1 / max) * w.
  std::vector<double> One(Ideal.size(), 1.0), Y;
  for (double T : Measured)
    Y.push_back(T - Launch);
  Expected<LinearFit> F = fitTwoParameters(One, Ideal, Y);
  if (!F)
    return F.takeError();
  if (!(F->Q > 0))
    return createStringError(inconvertibleErrorCode(),
                             "measured time does not grow with the op's "
                             "work (slope " +
                                 formatFixed(F->Q, 4) + ")");
  CurveFit C;
  double Max = 1 / F->Q, Half = F->P * Max;
  auto ResidualOne = [&](double Q) {
    // Intercept alone with the slope fixed: y - Q w = P.
    std::vector<double> R;
    for (size_t I = 0; I < Y.size(); ++I)
      R.push_back(Y[I] - Q * Ideal[I]);
    return fitSlope(One, R);
  };
  if (Max > 1) {
    C.Notes.push_back("fitted max " + formatFixed(Max, 3) +
                      " > 1 (faster than the listed peak); clamped to 1");
    Max = 1;
    Half = ResidualOne(1.0) * Max;
  }
  if (Half < 0) {
    C.Notes.push_back("fitted half_time " + formatMicros(Half) +
                      " < 0 (launch overhead overstated?); set to 0");
    Half = 0;
    double Q = fitSlope(Ideal, Y);
    Max = Q > 0 ? std::min(1.0, 1 / Q) : 1.0;
  }
  C.Curve.Max = Max;
  C.Curve.HalfTime = Seconds(Half);
  return C;
}

Expected<LevelFit> fitTopologyLevel(const HardwareModel &HW, StringRef Level,
                                    ArrayRef<CollectiveTable> Tables) {
  int Index = levelIndex(HW, Level);
  if (Index < 0)
    return createStringError(inconvertibleErrorCode(), "no topology level '" +
                                                           Level + "' in '" +
                                                           HW.Name + "'");
  HardwareModel H0 = HW, H1 = HW;
  H0.Topology[Index].Latency = Seconds(0);
  H0.Topology[Index].Efficiency = 1;
  H1.Topology[Index].Latency = Seconds(1);
  H1.Topology[Index].Efficiency = 1;
  std::vector<double> K, B, Y;
  for (const CollectiveTable &T : Tables) {
    GroupShape G = groupOn(HW, Index, T.Ranks);
    for (const CollectiveSample &S : T.Samples) {
      double T0 = collectiveTime(T.Kind, S.Bytes, G, H0).Seconds;
      double T1 = collectiveTime(T.Kind, S.Bytes, G, H1).Seconds;
      K.push_back(T1 - T0);
      B.push_back(T0);
      Y.push_back(S.Seconds);
    }
  }
  Expected<LinearFit> F = fitTwoParameters(K, B, Y);
  if (!F)
    return F.takeError();
  if (!(F->Q > 0))
    return createStringError(inconvertibleErrorCode(),
                             "measured time does not grow with the size");
  LevelFit L;
  L.Latency = F->P;
  L.Efficiency = 1 / F->Q;
  auto RefitLatency = [&](double Q) {
    std::vector<double> R;
    for (size_t I = 0; I < Y.size(); ++I)
      R.push_back(Y[I] - Q * B[I]);
    // R = alpha * K, weighted by the measured time.
    double Skk = 0, Skr = 0;
    for (size_t I = 0; I < Y.size(); ++I) {
      double W = 1 / (Y[I] * Y[I]);
      Skk += W * K[I] * K[I];
      Skr += W * K[I] * R[I];
    }
    return Skk > 0 ? Skr / Skk : 0;
  };
  if (L.Efficiency > 1) {
    L.Notes.push_back("fitted efficiency " + formatFixed(L.Efficiency, 3) +
                      " > 1 (faster than the listed bandwidth); clamped to 1");
    L.Efficiency = 1;
    L.Latency = RefitLatency(1.0);
  }
  if (L.Latency < 0) {
    L.Notes.push_back("fitted latency " + formatMicros(L.Latency) +
                      " < 0; set to 0");
    L.Latency = 0;
    double Q = fitSlope(B, Y);
    L.Efficiency = Q > 0 ? std::min(1.0, 1 / Q) : 1.0;
  }
  return L;
}

//===----------------------------------------------------------------------===//
// The whole calibration
//===----------------------------------------------------------------------===//

namespace {

/// A profiled op's row: the sample, its costed node, the time w it takes
/// at ideal efficiency, and the time the base hardware predicts.
struct Row {
  const OpSample *S;
  const CostedOp *C;
  double Ideal, Before;
};
/// Rows and the profile files they came from, by (class, op family).
using FamilyKey = std::pair<std::string, std::string>;
using RowGroups = std::map<FamilyKey, std::vector<Row>>;
using GroupFiles = std::map<FamilyKey, std::set<std::string>>;
/// Collective benchmarks by topology level.
using LevelTables = std::map<std::string, std::vector<CollectiveTable>>;

} // namespace

/// The profiles' rows costed on \p Base, grouped by (class, family) into
/// \p Groups (their files into \p Files); rows that cannot be costed are
/// left out with a warning in \p R.
static void groupSamples(const HardwareModel &Base, const CalibrationInput &In,
                         OpCoster &Coster, CalibrationResult &R,
                         RowGroups &Groups, GroupFiles &Files) {
  for (const auto &[File, Read] : In.Profiles) {
    for (const std::string &W : Read.Warnings)
      R.Warnings.push_back(W);
    for (const OpSample &S : Read.Samples) {
      const CostedOp &C = Coster.get(S);
      if (!C.Error.empty()) {
        R.Warnings.push_back(S.Where + ": warning: " + S.ProfileOp +
                             " as ONNX " + S.OpType + ": " + C.Error +
                             "; row left out");
        continue;
      }
      ClassTime Before = estimateClassTime(*C.N, C.Cost, S.Class, Base);
      if (!Before.Supported) {
        R.Warnings.push_back(S.Where + ": warning: " + Before.Reason +
                             "; row left out");
        continue;
      }
      HardwareModel Ideal = idealModel(Base, S.Class, C.Cost.Family);
      double W = estimateClassTime(*C.N, C.Cost, S.Class, Ideal).Seconds;
      auto Key = std::make_pair(S.Class, C.Cost.Family.str());
      Groups[Key].push_back({&S, &C, W, Before.Seconds});
      Files[Key].insert(File);
    }
  }
}

/// Fits each group with at least MinRows rows to an efficiency curve (into
/// R.Families, with the error before); warns about the rest.
static void fitFamilies(const HardwareModel &Base, const CalibrationInput &In,
                        const RowGroups &Groups, const GroupFiles &Files,
                        CalibrationResult &R) {
  for (const auto &[Key, Rows] : Groups) {
    const auto &[Class, Family] = Key;
    std::string What = Class + " " + Family;
    if (Rows.size() < In.MinRows) {
      R.Warnings.push_back(What + ": warning: " + Twine(Rows.size()).str() +
                           " rows, fewer than " + Twine(In.MinRows).str() +
                           "; not fitted");
      continue;
    }
    std::vector<double> Ideal, Measured;
    for (const Row &X : Rows) {
      Ideal.push_back(X.Ideal);
      Measured.push_back(X.S->Seconds);
    }
    double Launch = Base.getClass(Class)->LaunchOverhead.value();
    Expected<CurveFit> F = fitEfficiencyCurve(Ideal, Measured, Launch);
    if (!F) {
      R.Warnings.push_back(What +
                           ": warning: not fitted: " + toString(F.takeError()));
      continue;
    }
    FamilyReport Rep;
    Rep.Class = Class;
    Rep.Family = Family;
    Rep.Rows = Rows.size();
    Rep.Curve = F->Curve;
    Rep.Curve.Source = "loom-calibrate: " + joinFiles(Files.at(Key));
    Rep.Notes = F->Notes;
    std::vector<double> Errs;
    for (const Row &X : Rows)
      Errs.push_back(relError(X.Before, X.S->Seconds));
    Rep.MedianErrorBefore = median(Errs);
    R.Families.push_back(Rep);
  }
}

/// Fits each topology level's latency and efficiency to its collective
/// benchmarks (into R.Levels, with the error before); a level the hardware
/// lacks or a rank count it cannot hold is an error.
static Error fitLevels(const HardwareModel &Base, const CalibrationInput &In,
                       const LevelTables &ByLevel, CalibrationResult &R) {
  for (const auto &[Level, Tables] : ByLevel) {
    int Index = levelIndex(Base, Level);
    if (Index < 0)
      return createStringError(inconvertibleErrorCode(),
                               Tables.front().File +
                                   ": error: no topology "
                                   "level '" +
                                   Level + "' in hardware '" + Base.Name + "'");
    LevelReport Rep;
    Rep.Level = Level;
    std::vector<double> Errs;
    for (const CollectiveTable &T : Tables) {
      const TopologyLevel &L = Base.Topology[Index];
      if (T.Ranks < 2 || T.Ranks > L.Size)
        return createStringError(
            inconvertibleErrorCode(),
            T.File + ": error: " + Twine(T.Ranks) + " ranks on level '" +
                Level + "' of size " + Twine(L.Size) +
                " (a collective benchmark needs 2 to " + Twine(L.Size) +
                " ranks that differ only at that level)");
      GroupShape G = groupOn(Base, Index, T.Ranks);
      for (const CollectiveSample &S : T.Samples) {
        Errs.push_back(relError(
            collectiveTime(T.Kind, S.Bytes, G, Base).Seconds, S.Seconds));
        ++Rep.Rows;
      }
    }
    if (Rep.Rows < In.MinRows) {
      R.Warnings.push_back(Level + ": warning: " + Twine(Rep.Rows).str() +
                           " rows, fewer than " + Twine(In.MinRows).str() +
                           "; not fitted");
      continue;
    }
    Expected<LevelFit> F = fitTopologyLevel(Base, Level, Tables);
    if (!F) {
      R.Warnings.push_back(Level +
                           ": warning: not fitted: " + toString(F.takeError()));
      continue;
    }
    Rep.MedianErrorBefore = median(Errs);
    Rep.Latency = F->Latency;
    Rep.Efficiency = F->Efficiency;
    Rep.Notes = F->Notes;
    R.Levels.push_back(Rep);
  }
  return Error::success();
}

/// The overlay's YAML: the fitted curves and levels, each with the files
/// it was fitted to.
static std::string writeOverlay(const CalibrationResult &R, StringRef BaseName,
                                const GroupFiles &Files,
                                const LevelTables &ByLevel) {
  std::string Overlay;
  raw_string_ostream OS(Overlay);
  OS << "# Hardware overlay written by loom-calibrate. Layer it over the "
        "base:\n"
     << "#   plan-parallel --hw " << BaseName << " --hw <this file>\n"
     << "# Every number below was fitted to the measurements named beside "
        "it.\n";
  if (!R.Families.empty()) {
    OS << "device:\n  classes:\n";
    std::string Cls;
    for (const FamilyReport &F : R.Families) {
      if (F.Class != Cls) {
        Cls = F.Class;
        OS << "    " << Cls << ":\n      efficiency_curves:\n";
      }
      auto Key = std::make_pair(F.Class, F.Family);
      OS << "        # calibrated from " << joinFiles(Files.at(Key)) << ": "
         << F.Rows << " rows; eff(w) = max * w / (w + half_time)\n"
         << "        " << F.Family << ": {max: " << formatFixed(F.Curve.Max, 4)
         << ", half_time: " << formatMicros(F.Curve.HalfTime.value())
         << ", source: \"" << F.Curve.Source << "\"}\n";
    }
  }
  if (!R.Levels.empty()) {
    OS << "topology:\n";
    for (const LevelReport &L : R.Levels) {
      std::set<std::string> Fs;
      for (const CollectiveTable &T : ByLevel.at(L.Level))
        Fs.insert(T.File);
      OS << "  # latency and efficiency calibrated from " << joinFiles(Fs)
         << ": " << L.Rows << " rows\n"
         << "  - {name: " << L.Level << ", latency: " << formatMicros(L.Latency)
         << ", efficiency: " << formatFixed(L.Efficiency, 4) << "}\n";
    }
  }
  OS.flush();
  return Overlay;
}

/// The errors after calibration (MedianErrorAfter): the rows costed again
/// on the base layered with the overlay, as plan-parallel reads it.
static Error measureAfter(StringRef BaseText, StringRef BaseName,
                          const RowGroups &Groups, const LevelTables &ByLevel,
                          CalibrationResult &R) {
  std::vector<HardwareOverride> Overrides;
  Expected<HardwareModel> After = parseLayeredHardware(
      {BaseText.str(), R.Overlay}, {BaseName.str(), "(calibrated overlay)"}, {},
      Overrides);
  if (!After)
    return createStringError(inconvertibleErrorCode(),
                             "the written overlay does not load: " +
                                 toString(After.takeError()));
  for (FamilyReport &F : R.Families) {
    std::vector<double> Errs;
    for (const Row &X : Groups.at({F.Class, F.Family})) {
      ClassTime T = estimateClassTime(*X.C->N, X.C->Cost, F.Class, *After);
      Errs.push_back(relError(T.Seconds, X.S->Seconds));
    }
    F.MedianErrorAfter = median(Errs);
  }
  for (LevelReport &L : R.Levels) {
    std::vector<double> Errs;
    int Index = levelIndex(*After, L.Level);
    for (const CollectiveTable &T : ByLevel.at(L.Level)) {
      GroupShape G = groupOn(*After, Index, T.Ranks);
      for (const CollectiveSample &S : T.Samples)
        Errs.push_back(relError(
            collectiveTime(T.Kind, S.Bytes, G, *After).Seconds, S.Seconds));
    }
    L.MedianErrorAfter = median(Errs);
  }
  return Error::success();
}

Expected<CalibrationResult> calibrate(const HardwareModel &Base,
                                      StringRef BaseText, StringRef BaseName,
                                      const CalibrationInput &In) {
  CalibrationResult R;
  OpCoster Coster; // owns the costed nodes the rows point to
  RowGroups Groups;
  GroupFiles Files;
  groupSamples(Base, In, Coster, R, Groups, Files);
  fitFamilies(Base, In, Groups, Files, R);
  LevelTables ByLevel;
  for (const CollectiveTable &T : In.Collectives)
    ByLevel[T.Level].push_back(T);
  if (Error E = fitLevels(Base, In, ByLevel, R))
    return std::move(E);
  R.Overlay = writeOverlay(R, BaseName, Files, ByLevel);
  if (R.Families.empty() && R.Levels.empty())
    return R;
  if (Error E = measureAfter(BaseText, BaseName, Groups, ByLevel, R))
    return std::move(E);
  return R;
}

void printCalibrationReport(const CalibrationResult &R, raw_ostream &OS) {
  if (!R.Families.empty()) {
    OS << "op families: predicted vs measured, median |error|\n";
    OS << format("  %-8s %-12s %5s %8s %11s %8s %8s\n", (const char *)"class",
                 (const char *)"family", (const char *)"rows",
                 (const char *)"max", (const char *)"half_time",
                 (const char *)"before", (const char *)"after");
    for (const FamilyReport &F : R.Families) {
      OS << format("  %-8s %-12s %5u %8s %11s %8s %8s\n", F.Class.c_str(),
                   F.Family.c_str(), F.Rows,
                   formatFixed(F.Curve.Max, 4).c_str(),
                   formatMicros(F.Curve.HalfTime.value()).c_str(),
                   formatPercent(F.MedianErrorBefore).c_str(),
                   formatPercent(F.MedianErrorAfter).c_str());
      for (const std::string &N : F.Notes)
        OS << "    note: " << N << '\n';
    }
  }
  if (!R.Levels.empty()) {
    OS << "topology levels: predicted vs measured, median |error|\n";
    OS << format("  %-12s %5s %11s %10s %8s %8s\n", (const char *)"level",
                 (const char *)"rows", (const char *)"latency",
                 (const char *)"efficiency", (const char *)"before",
                 (const char *)"after");
    for (const LevelReport &L : R.Levels) {
      OS << format("  %-12s %5u %11s %10s %8s %8s\n", L.Level.c_str(), L.Rows,
                   formatMicros(L.Latency).c_str(),
                   formatFixed(L.Efficiency, 4).c_str(),
                   formatPercent(L.MedianErrorBefore).c_str(),
                   formatPercent(L.MedianErrorAfter).c_str());
      for (const std::string &N : L.Notes)
        OS << "    note: " << N << '\n';
    }
  }
}

} // namespace loom
