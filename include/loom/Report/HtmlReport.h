//===- HtmlReport.h - report.html: the plan with its charts -----*- C++ -*-===//
//
// A self-contained page (inline CSS and SVG, no script, no URL) beside
// report.txt: the plan and its predictions, the step-time breakdown, the
// pipeline timeline of one step as the schedule pass computed it (one lane
// per pipeline stage), memory per stage against HBM, the top plans and the
// device-class placement. Numbers are formatted as report.txt formats them.
// Its size is bounded: with many micro-batches the timeline shows the
// first and the last few, and communication boxes narrower than a pixel
// are merged.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_REPORT_HTMLREPORT_H
#define LOOM_REPORT_HTMLREPORT_H

#include "loom/Planner/Search.h"
#include "loom/Planner/Serving.h"
#include "loom/Shard/Sharding.h"
#include <map>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace loom {

struct HtmlReportInput {
  std::string ModelName, HardwareName, Mode;
  /// Top.front() is the chosen plan.
  const SearchResult *Search = nullptr;
  /// The schedule of one step (the schedule pass's in-memory result).
  const ShardedProgram *Program = nullptr;
  /// Nodes of the planning graph per device class.
  std::map<std::string, unsigned> Placement;
  /// --mode serve: the serving plan, whose batch sweep is plotted.
  const ServingResult *Serving = nullptr;
  /// Rows of the top-plans table.
  unsigned TopK = 5;
  /// Micro-batches shown at each end of the timeline when there are more
  /// than twice as many.
  unsigned WindowMicroBatches = 4;
};

void writeHtmlReport(const HtmlReportInput &In, llvm::raw_ostream &OS);

} // namespace loom

#endif // LOOM_REPORT_HTMLREPORT_H
