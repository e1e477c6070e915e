//===- PlanComparison.cpp - Plans side by side, term by term --------------===//
#include "loom/Report/PlanComparison.h"
#include "loom/Planner/Search.h"
#include "loom/Support/Units.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <functional>

using namespace llvm;

namespace loom {

void printComparison(ArrayRef<ComparisonColumn> Columns, raw_ostream &OS) {
  if (Columns.empty())
    return;
  for (const ComparisonColumn &C : Columns) {
    OS << "compare: " << C.Label << " = ";
    if (C.Cost)
      OS << C.Cost->Plan.str();
    else
      OS << "no plan fits";
    OS << " (" << C.What << ")\n";
  }
  struct Row {
    const char *Name;
    std::function<double(const PlanCost &)> Get;
    std::function<std::string(double)> Show;
  };
  auto Time = [](double S) { return formatDuration(Seconds(S)); };
  auto Num = [](double V) {
    std::string S;
    raw_string_ostream(S) << format("%.0f", V);
    return S;
  };
  auto Frac = [](double V) {
    std::string S;
    raw_string_ostream(S) << format("%.3f", V);
    return S;
  };
  auto Mem = [](double B) { return formatBytes(Bytes(B)); };
  auto Term = [](CostTerm T) {
    return [T](const PlanCost &PC) { return getStepBreakdown(PC).get(T); };
  };
  std::vector<Row> Rows = {
      {"step", [](const PlanCost &PC) { return PC.StepTimeS; }, Time},
      {"throughput", [](const PlanCost &PC) { return PC.Throughput; }, Num},
      {"MFU", [](const PlanCost &PC) { return PC.MFU; }, Frac},
      {"compute", Term(CostTerm::Compute), Time},
      {"tp comm", Term(CostTerm::TPComm), Time},
      {"ep comm", Term(CostTerm::EPComm), Time},
      {"bubble", Term(CostTerm::Bubble), Time},
      {"dp comm", Term(CostTerm::DPComm), Time},
      {"optimizer", Term(CostTerm::Optimizer), Time},
      {"memory", [](const PlanCost &PC) { return PC.MaxMemoryBytes; }, Mem},
      {"devices",
       [](const PlanCost &PC) { return (double)PC.Plan.getNumDevices(); },
       Num}};
  auto Cell = [](std::string &Line, const std::string &Text, size_t Width) {
    Line += ' ';
    Line += Text;
    if (Text.size() < Width)
      Line.append(Width - Text.size(), ' ');
  };
  auto Emit = [&](std::string Line) { OS << StringRef(Line).rtrim() << "\n"; };
  std::string Head = "  term      ";
  for (unsigned I = 0; I < Columns.size(); ++I) {
    Cell(Head, Columns[I].Label, 12);
    if (I)
      Cell(Head, Columns[I].Label + "/" + Columns[0].Label, 9);
  }
  Emit(Head);
  for (const Row &R : Rows) {
    std::string Line = "  " + std::string(R.Name);
    Line.append(10 - std::min<size_t>(10, Line.size() - 2), ' ');
    const PlanCost *Ref = Columns[0].Cost;
    for (unsigned I = 0; I < Columns.size(); ++I) {
      const PlanCost *C = Columns[I].Cost;
      Cell(Line, C ? R.Show(R.Get(*C)) : "-", 12);
      if (!I)
        continue;
      std::string Ratio = "-";
      if (C && Ref && R.Get(*Ref) != 0) {
        Ratio.clear();
        raw_string_ostream(Ratio) << format("%.2fx", R.Get(*C) / R.Get(*Ref));
      }
      Cell(Line, Ratio, 9);
    }
    Emit(Line);
  }
}

} // namespace loom
