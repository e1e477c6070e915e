//===- HtmlReport.cpp - report.html: the plan with its charts -------------===//
//
// Everything is inline (CSS, SVG; no script, fonts or URLs), so the page
// opens offline. Deterministic: numbers go through the same formatters as
// report.txt and the SVG coordinates through one printf format.
//
//===----------------------------------------------------------------------===//
#include "loom/Report/HtmlReport.h"
#include "loom/Plan/StageSplit.h"
#include "loom/Report/ServingReport.h"
#include "loom/Shard/OutputDir.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>

using namespace llvm;

namespace loom {
namespace {

std::string esc(StringRef S) {
  std::string O;
  for (char C : S) {
    switch (C) {
    case '&':
      O += "&amp;";
      break;
    case '<':
      O += "&lt;";
      break;
    case '>':
      O += "&gt;";
      break;
    case '"':
      O += "&quot;";
      break;
    default:
      O += C;
    }
  }
  return O;
}

std::string secs(double S) { return formatDuration(Seconds(S)); }
std::string bytes(double B) { return formatBytes(Bytes(B)); }
std::string num(double V) {
  std::string S;
  raw_string_ostream(S) << format("%.1f", V);
  return S;
}

/// Colours (Tableau 10): one per event kind or memory part.
StringRef colorOf(StringRef Kind) {
  if (Kind == "forward")
    return "#4e79a7";
  if (Kind == "backward")
    return "#59a14f";
  if (Kind == "optimizer")
    return "#9c755f";
  if (Kind == "tp")
    return "#f28e2b";
  if (Kind == "ep")
    return "#b07aa1";
  if (Kind == "p2p")
    return "#76b7b2";
  if (Kind == "dp")
    return "#e15759";
  return "#bab0ac";
}

const char *const Style = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:24px 32px;color:#222;background:#fff;max-width:1240px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#555;margin-bottom:14px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:130px;background:#fafafa}
.card .v{font-size:20px;font-weight:600}.card .k{font-size:12px;color:#666}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f3f3f3}
td.l,th.l{text-align:left}tr.chosen td{background:#eef5ff;font-weight:600}
code{font-size:13px;background:#f3f3f3;padding:1px 4px;border-radius:3px}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px;border-radius:2px}
svg text{font-family:inherit}
.note{color:#666;font-size:12px}
)";

void legend(raw_ostream &OS,
            ArrayRef<std::pair<const char *, StringRef>> Items) {
  OS << "<div class=\"legend\">";
  for (const auto &I : Items)
    OS << "<span><i style=\"background:" << I.second << "\"></i>" << I.first
       << "</span>";
  OS << "</div>\n";
}

void card(raw_ostream &OS, StringRef Key, const std::string &Value,
          StringRef Id) {
  OS << "<div class=\"card\" id=\"" << Id << "\"><div class=\"v\">"
     << esc(Value) << "</div><div class=\"k\">" << Key << "</div></div>";
}

//===-- The step-time breakdown ------------------------------------------===//

void writeBreakdown(const PlanCost &PC, raw_ostream &OS) {
  StepBreakdown B = getStepBreakdown(PC);
  struct Part {
    const char *Name;
    double S;
    StringRef Color;
  };
  Part Parts[] = {
      {"compute", B.ComputeS, "#4e79a7"},    {"tp comm", B.TPCommS, "#f28e2b"},
      {"ep comm", B.EPCommS, "#b07aa1"},     {"cp comm", B.CPCommS, "#59a14f"},
      {"bubble", B.BubbleS, "#d4d4d4"},      {"dp comm", B.DPCommS, "#e15759"},
      {"optimizer", B.OptimizerS, "#9c755f"}};
  double Total = 0;
  for (const Part &P : Parts)
    Total += P.S;
  OS << "<h2 id=\"breakdown\">Step-time breakdown</h2>\n";
  OS << "<p class=\"note\">Where the busiest stage spends the step (dominant: "
     << getCostTermName(B.getDominant()) << ").</p>\n";
  const double W = 1000, H = 34;
  OS << "<svg id=\"breakdown-chart\" width=\"" << (int)W + 20 << "\" height=\""
     << (int)H + 8 << "\" role=\"img\" aria-label=\"step-time breakdown\">";
  double X = 0;
  for (const Part &P : Parts) {
    if (P.S <= 0 || Total <= 0)
      continue;
    double Wd = W * P.S / Total;
    OS << format("<rect x=\"%.1f\" y=\"4\" width=\"%.1f\" height=\"%.0f\" "
                 "fill=\"%s\"><title>",
                 X, Wd, H, P.Color.str().c_str())
       << P.Name << " " << secs(P.S) << "</title></rect>";
    std::string Label =
        std::string(P.Name) + " " + num(100 * P.S / Total) + "%";
    if (Wd > 7.0 * Label.size() + 10) // About 7 px per character at 12 px.
      OS << format("<text x=\"%.1f\" y=\"%.0f\" font-size=\"12\" "
                   "fill=\"%s\">",
                   X + 5, H / 2 + 8,
                   StringRef(P.Name) == "bubble" ? (const char *)"#333"
                                                 : "#fff")
         << Label << "</text>";
    X += Wd;
  }
  OS << "</svg>\n<table><tr><th class=\"l\">term</th><th>time</th><th>share"
        "</th></tr>\n";
  for (const Part &P : Parts)
    OS << "<tr><td class=\"l\"><i style=\"display:inline-block;width:10px;"
          "height:10px;background:"
       << P.Color << "\"></i> " << P.Name << "</td><td>" << secs(P.S)
       << "</td><td>" << (Total > 0 ? num(100 * P.S / Total) : "0.0")
       << "%</td></tr>\n";
  OS << "<tr><td class=\"l\">step (predicted)</td><td>" << secs(PC.StepTimeS)
     << "</td><td></td></tr></table>\n";
}

//===-- The pipeline timeline --------------------------------------------===//

struct Window {
  double T0 = 0, T1 = 0;
  /// Micro-batches shown: [MB0, MB1); events of no micro-batch (DP sync,
  /// optimizer) when Tail.
  int MB0 = 0, MB1 = 0;
  bool Tail = true;
  std::string Title;
};

/// Compute and communication of one lane inside one window.
/// What rank \p Rank runs in one step: its role's program (DP replicas
/// share it), with the communication each compute event implies.
std::vector<ScheduleEvent> getRankEvents(const ShardedProgram &SP,
                                         unsigned Rank) {
  std::vector<ScheduleEvent> Out;
  const RoleGraph *R =
      findRole(SP.Roles, getRankCoords(SP.Sharding.Plan, Rank));
  if (!R || SP.RoleProgram.size() != SP.Roles.size())
    return Out;
  const ScheduleProgram &P = SP.Programs[SP.RoleProgram[R - SP.Roles.data()]];
  for (const ScheduleEvent &E : P.Events) {
    Out.push_back(E);
    if (E.Stream == "compute")
      expandComms(P, E, [&](const ScheduleEvent &C) { Out.push_back(C); });
  }
  return Out;
}

void writeLanes(const ShardedProgram &SP, ArrayRef<unsigned> LaneRanks,
                const Window &Win, StringRef Id, raw_ostream &OS) {
  const double Left = 110, Width = 1080, LaneH = 30, Top = 24;
  double Span = std::max(Win.T1 - Win.T0, 1e-12);
  auto Px = [&](double T) {
    return Left + Width * std::min(std::max((T - Win.T0) / Span, 0.0), 1.0);
  };
  double H = Top + LaneH * LaneRanks.size() + 8;
  OS << "<h3 style=\"font-size:14px;margin:12px 0 2px\">" << esc(Win.Title)
     << "</h3>\n";
  OS << "<svg class=\"timeline\" id=\"" << Id << "\" width=\""
     << (int)(Left + Width + 20) << "\" height=\"" << (int)H
     << "\" role=\"img\" aria-label=\"pipeline timeline\">\n";
  // Time axis: 6 ticks.
  for (unsigned I = 0; I <= 5; ++I) {
    double T = Win.T0 + Span * I / 5, X = Px(T);
    OS << format("<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" "
                 "stroke=\"#e3e3e3\"/>",
                 X, Top - 4, X, H - 6)
       << format("<text x=\"%.1f\" y=\"12\" font-size=\"11\" fill=\"#666\" "
                 "text-anchor=\"%s\">",
                 X,
                 I == 0   ? "start"
                 : I == 5 ? "end"
                          : "middle")
       << secs(T) << "</text>\n";
  }
  for (unsigned L = 0; L < LaneRanks.size(); ++L) {
    double Y = Top + LaneH * L;
    OS << format("<text x=\"4\" y=\"%.0f\" font-size=\"12\">", Y + 14)
       << "stage " << L << "</text>"
       << format("<text x=\"4\" y=\"%.0f\" font-size=\"10\" fill=\"#888\">",
                 Y + 25)
       << "rank " << LaneRanks[L] << "</text>\n";
    std::vector<ScheduleEvent> Events = getRankEvents(SP, LaneRanks[L]);
    if (Events.empty())
      continue;
    auto InWindow = [&](const ScheduleEvent &E) {
      if (E.EndS < Win.T0 || E.StartS > Win.T1)
        return false;
      if (E.MicroBatch < 0)
        return Win.Tail;
      return E.MicroBatch >= Win.MB0 && E.MicroBatch < Win.MB1;
    };
    // Compute: one box per forward/backward/optimizer.
    for (const ScheduleEvent &E : Events) {
      if (E.Stream != "compute" || !InWindow(E))
        continue;
      double X0 = Px(E.StartS), X1 = Px(E.EndS);
      OS << format("<rect class=\"ev %s\" x=\"%.1f\" y=\"%.0f\" "
                   "width=\"%.1f\" height=\"18\" fill=\"%s\" "
                   "stroke=\"#fff\" stroke-width=\"0.5\"><title>",
                   E.Kind.c_str(), X0, Y + 2, std::max(X1 - X0, 0.6),
                   colorOf(E.Kind).str().c_str())
         << esc(E.Kind);
      if (E.MicroBatch >= 0)
        OS << " mb" << E.MicroBatch;
      if (E.Chunk >= 0)
        OS << " chunk " << E.Chunk;
      OS << ": " << secs(E.StartS) << " - " << secs(E.EndS) << "</title>";
      OS << "</rect>";
      if (X1 - X0 > 16 && E.MicroBatch >= 0)
        OS << format("<text x=\"%.1f\" y=\"%.0f\" font-size=\"10\" "
                     "fill=\"#fff\" text-anchor=\"middle\">",
                     (X0 + X1) / 2, Y + 15)
           << (E.Kind == "forward" ? "F" : "B") << E.MicroBatch << "</text>";
      OS << "\n";
    }
    // Communication: a thin strip under the boxes; boxes of one stream
    // that touch within a pixel are merged, which bounds the page.
    std::vector<const ScheduleEvent *> Comm;
    for (const ScheduleEvent &E : Events)
      if (E.Stream != "compute" && InWindow(E))
        Comm.push_back(&E);
    for (StringRef Stream : {"tp", "ep", "p2p", "dp"}) {
      double A = -1, B = -1;
      unsigned N = 0;
      auto Flush = [&] {
        if (N)
          OS << format("<rect class=\"comm %s\" x=\"%.1f\" y=\"%.0f\" "
                       "width=\"%.1f\" height=\"6\" fill=\"%s\"><title>",
                       Stream.str().c_str(), A, Y + 21, std::max(B - A, 0.6),
                       colorOf(Stream).str().c_str())
             << Stream << ": " << N << " event(s)</title></rect>";
        N = 0;
      };
      for (const ScheduleEvent *E : Comm) {
        if (E->Stream != Stream)
          continue;
        double X0 = Px(E->StartS), X1 = Px(E->EndS);
        if (N && X0 <= B + 1) {
          B = std::max(B, X1);
          ++N;
          continue;
        }
        Flush();
        A = X0;
        B = X1;
        N = 1;
      }
      Flush();
    }
    OS << "\n";
  }
  OS << "</svg>\n";
}

void writeTimeline(const HtmlReportInput &In, const PlanCost &PC,
                   raw_ostream &OS) {
  OS << "<h2 id=\"timeline\">Pipeline timeline of one step</h2>\n";
  const ShardedProgram *SP = In.Program;
  if (!SP || SP->Programs.empty()) {
    OS << "<p class=\"note\">No schedule (the schedule pass did not run).</p>"
          "\n";
    return;
  }
  const ParallelPlan &P = SP->Sharding.Plan;
  std::vector<unsigned> Lanes;
  for (unsigned S = 0; S < P.PP; ++S)
    Lanes.push_back(getRank(P, S, 0, 0));
  OS << "<p class=\"note\">One lane per pipeline stage (its first data- and "
        "tensor-parallel rank): "
     << (In.Mode == "infer" ? "forward (F)" : "forward (F) and backward (B)")
     << " micro-batch boxes, the communication under them. Predicted step "
     << secs(SP->ScheduleStepS) << " (schedule), " << secs(PC.StepTimeS)
     << " (cost model).</p>\n";
  // Inference has no backward, DP gradient sync or optimizer.
  std::vector<std::pair<const char *, StringRef>> Items = {
      {"forward", colorOf("forward")}};
  if (In.Mode != "infer")
    Items.insert(Items.end(), {{"backward", colorOf("backward")},
                               {"optimizer", colorOf("optimizer")}});
  Items.insert(Items.end(), {{"tp collectives", colorOf("tp")},
                             {"ep all-to-all", colorOf("ep")},
                             {"pipeline send/recv", colorOf("p2p")}});
  if (In.Mode != "infer")
    Items.push_back({"dp gradient sync", colorOf("dp")});
  legend(OS, Items);
  int NMB = (int)P.NumMicroBatches;
  int W = (int)std::max(1u, In.WindowMicroBatches);
  double Start = 0, End = SP->ScheduleStepS;
  for (unsigned Rank : Lanes)
    for (const ScheduleEvent &E : getRankEvents(*SP, Rank))
      End = std::max(End, E.EndS);
  if (NMB <= 2 * W) {
    Window Whole;
    Whole.T0 = Start;
    Whole.T1 = End;
    Whole.MB0 = 0;
    Whole.MB1 = NMB;
    Whole.Title = "All " + std::to_string(NMB) + " micro-batch(es)";
    writeLanes(*SP, Lanes, Whole, "timeline-all", OS);
    return;
  }
  // The first and the last W micro-batches, each on its own time scale.
  Window Head, TailW;
  Head.MB0 = 0;
  Head.MB1 = W;
  Head.Tail = false;
  TailW.MB0 = NMB - W;
  TailW.MB1 = NMB;
  double HeadEnd = Start, TailStart = End;
  for (unsigned Rank : Lanes)
    for (const ScheduleEvent &E : getRankEvents(*SP, Rank)) {
      if (E.Stream != "compute" || E.MicroBatch < 0)
        continue;
      if (E.MicroBatch < W)
        HeadEnd = std::max(HeadEnd, E.EndS);
      if (E.MicroBatch >= NMB - W)
        TailStart = std::min(TailStart, E.StartS);
    }
  Head.T0 = Start;
  Head.T1 = HeadEnd;
  Head.Title = "First " + std::to_string(W) + " of " + std::to_string(NMB) +
               " micro-batches";
  TailW.T0 = TailStart;
  TailW.T1 = End;
  TailW.Title = "Last " + std::to_string(W) +
                " micro-batches, gradient sync "
                "and optimizer";
  writeLanes(*SP, Lanes, Head, "timeline-head", OS);
  writeLanes(*SP, Lanes, TailW, "timeline-tail", OS);
  OS << "<p class=\"note\">" << NMB - 2 * W
     << " micro-batches in between are not drawn (trace.json has the "
        "schedule for Perfetto).</p>\n";
}

//===-- Memory per stage --------------------------------------------------===//

void writeMemory(const PlanCost &PC, raw_ostream &OS) {
  OS << "<h2 id=\"memory\">Memory per stage</h2>\n";
  struct Part {
    const char *Name;
    StringRef Color;
    double MemoryBreakdown::*Field;
  };
  const Part Parts[] = {
      {"weights", "#4e79a7", &MemoryBreakdown::Weights},
      {"gradients", "#59a14f", &MemoryBreakdown::Gradients},
      {"optimizer", "#9c755f", &MemoryBreakdown::OptimizerStates},
      {"activations", "#f28e2b", &MemoryBreakdown::Activations},
      {"kv cache", "#b07aa1", &MemoryBreakdown::KVCache},
      {"buffers", "#76b7b2", &MemoryBreakdown::CommBuffers}};
  std::vector<std::pair<const char *, StringRef>> Items;
  for (const Part &P : Parts)
    Items.push_back({P.Name, P.Color});
  legend(OS, Items);
  double Max = PC.HBMBytes;
  for (const StageCost &S : PC.Stages)
    Max = std::max(Max, S.MemoryBytes);
  Max = std::max(Max * 1.04, 1.0);
  const double Left = 110, Width = 900, BarH = 20, Gap = 8, Top = 8;
  double H = Top + (BarH + Gap) * PC.Stages.size() + 24;
  OS << "<svg id=\"memory-chart\" width=\"" << (int)(Left + Width + 200)
     << "\" height=\"" << (int)H
     << "\" role=\"img\" aria-label=\"memory per stage\">\n";
  for (unsigned S = 0; S < PC.Stages.size(); ++S) {
    const StageCost &SC = PC.Stages[S];
    double Y = Top + (BarH + Gap) * S, X = Left;
    OS << format("<text x=\"4\" y=\"%.0f\" font-size=\"12\">", Y + 14)
       << "stage " << S << "</text>";
    for (const Part &P : Parts) {
      double V = SC.Memory.*P.Field;
      if (V <= 0)
        continue;
      double Wd = Width * V / Max;
      OS << format("<rect class=\"mem\" x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" "
                   "height=\"%.0f\" fill=\"%s\"><title>",
                   X, Y, Wd, BarH, P.Color.str().c_str())
         << "stage " << S << " " << P.Name << ": " << bytes(V)
         << "</title></rect>";
      X += Wd;
    }
    OS << format("<text x=\"%.1f\" y=\"%.0f\" font-size=\"12\">", X + 6, Y + 14)
       << bytes(SC.MemoryBytes) << "</text>\n";
  }
  double HX = Left + Width * PC.HBMBytes / Max;
  OS << format("<line id=\"hbm-line\" x1=\"%.1f\" y1=\"2\" x2=\"%.1f\" "
               "y2=\"%.0f\" stroke=\"#d62728\" stroke-width=\"2\" "
               "stroke-dasharray=\"5,3\"/>",
               HX, HX, H - 18)
     << format("<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" fill=\"#d62728\" "
               "text-anchor=\"middle\">",
               HX, H - 5)
     << "HBM " << bytes(PC.HBMBytes) << "</text>\n</svg>\n";
  OS << "<table id=\"memory-table\"><tr><th class=\"l\">stage</th><th>layers"
        "</th>";
  for (const Part &P : Parts)
    OS << "<th>" << P.Name << "</th>";
  OS << "<th>total</th><th>of HBM</th></tr>\n";
  for (unsigned S = 0; S < PC.Stages.size(); ++S) {
    const StageCost &SC = PC.Stages[S];
    OS << "<tr><td class=\"l\">stage " << S << "</td><td>"
       << getStageLayersText(PC, S) << "</td>";
    for (const Part &P : Parts)
      OS << "<td>" << bytes(SC.Memory.*P.Field) << "</td>";
    OS << "<td class=\"stage-memory\">" << bytes(SC.MemoryBytes) << " / "
       << bytes(PC.HBMBytes) << "</td><td>"
       << num(PC.HBMBytes > 0 ? 100 * SC.MemoryBytes / PC.HBMBytes : 0)
       << "%</td></tr>\n";
  }
  OS << "</table>\n";
}

//===-- Serving: the batch trade-off --------------------------------------===//

/// One panel of the serving chart: \p Series over the sweep's batches on
/// a log2 x axis, the plan's batch marked.
void writeSweepPanel(
    const ServingResult &R, StringRef Id, StringRef Title,
    ArrayRef<std::tuple<const char *, StringRef, double ServingPlanCost::*>>
        Series,
    double Scale, StringRef Unit, raw_ostream &OS) {
  const double Left = 70, W = 460, Top = 24, H = 200;
  // The doublings around the plan's batch; the KV cache's far limit, in
  // the table, would flatten the rest.
  std::vector<ServingPlanCost> Pts;
  for (const ServingPlanCost &P : R.Sweep)
    if (P.Batch <= 8ull * R.Plans.front().Batch)
      Pts.push_back(P);
  double MaxX = std::log2(std::max(2u, Pts.back().Batch)), MaxY = 0;
  for (const ServingPlanCost &P : Pts)
    for (const auto &S : Series)
      MaxY = std::max(MaxY, P.*std::get<2>(S) * Scale);
  MaxY = std::max(MaxY * 1.08, 1e-12);
  auto XOf = [&](unsigned B) { return Left + W * std::log2(B) / MaxX; };
  auto YOf = [&](double V) { return Top + H - H * V * Scale / MaxY; };
  OS << "<svg id=\"" << Id << "\" width=\"" << (int)(Left + W + 30)
     << "\" height=\"" << (int)(Top + H + 40) << "\" role=\"img\" "
     << "aria-label=\"" << esc(Title) << "\">\n"
     << format("<text x=\"%.0f\" y=\"14\" font-size=\"13\">", Left)
     << esc(Title) << " (" << Unit << ")</text>\n";
  OS << format("<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" "
               "stroke=\"#999\"/>",
               Left, Top + H, Left + W, Top + H)
     << format("<text x=\"4\" y=\"%.0f\" font-size=\"11\">", Top + 10)
     << num(MaxY) << "</text>\n";
  for (const ServingPlanCost &P : Pts)
    OS << format("<text x=\"%.1f\" y=\"%.0f\" font-size=\"10\" "
                 "text-anchor=\"middle\">%u</text>",
                 XOf(P.Batch), Top + H + 14, P.Batch);
  double CX = XOf(R.Plans.front().Batch);
  OS << format("\n<line class=\"chosen-batch\" x1=\"%.1f\" y1=\"%.0f\" "
               "x2=\"%.1f\" y2=\"%.0f\" stroke=\"#d62728\" "
               "stroke-dasharray=\"5,3\"/>\n",
               CX, Top, CX, Top + H);
  for (const auto &S : Series) {
    OS << "<polyline fill=\"none\" stroke-width=\"2\" stroke=\""
       << std::get<1>(S) << "\" points=\"";
    for (const ServingPlanCost &P : Pts)
      OS << format("%.1f,%.1f ", XOf(P.Batch), YOf(P.*std::get<2>(S)));
    OS << "\"><title>" << std::get<0>(S) << "</title></polyline>\n";
  }
  OS << format("<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" "
               "text-anchor=\"middle\">",
               Left + W / 2, Top + H + 32)
     << "sequences in flight per replica (log scale)</text>\n</svg>\n";
}

std::string whole(double V) {
  std::string S;
  raw_string_ostream(S) << format("%.0f", V);
  return S;
}

void writeServing(const ServingResult &R, raw_ostream &OS) {
  const ServingPlanCost &P = R.Plans.front();
  OS << "<h2 id=\"serving\">Serving</h2>\n<div class=\"cards\">";
  if (R.DisaggChosen) {
    const DisaggPlanCost &D = *R.Disagg;
    card(OS, "layout", "disaggregated", "serve-layout");
    card(OS, "TTFT", secs(D.TTFTS), "ttft");
    card(OS, "TPOT", secs(D.TPOTS), "tpot");
    card(OS, "output tokens/s", whole(D.TokensPerS), "serve-tokens");
    card(OS, "prefill / decode devices",
         std::to_string(D.PrefillDevices) + " / " +
             std::to_string(D.DecodeDevices),
         "serve-pools");
  } else {
    if (R.Disagg)
      card(OS, "layout", "pooled", "serve-layout");
    card(OS, "TTFT", secs(P.TTFTS), "ttft");
    card(OS, "TPOT", secs(P.TPOTS), "tpot");
    card(OS, "output tokens/s", whole(P.TokensPerS), "serve-tokens");
    card(OS, "sequences per replica", std::to_string(P.Batch), "serve-batch");
  }
  OS << "</div>\n";
  std::vector<std::string> Layout = describeServingLayout(R);
  if (!Layout.empty()) {
    OS << "<ul id=\"serving-layout\">";
    for (const std::string &L : Layout)
      OS << "<li>" << esc(L) << "</li>";
    OS << "</ul>\n";
  }
  if (R.Sweep.size() < 2)
    return;
  OS << "<p>Latency and throughput of <code>" << esc(P.str()) << "</code>"
     << (R.DisaggChosen ? " (the pooled layout's best)" : "")
     << " against the batch; the dashed line is the plan's.</p>\n";
  legend(OS, {{"TPOT", "#4e79a7"},
              {"TTFT", "#f28e2b"},
              {"output tokens/s", "#59a14f"}});
  writeSweepPanel(R, "serving-latency", "latency",
                  {{"TPOT", "#4e79a7", &ServingPlanCost::TPOTS},
                   {"TTFT", "#f28e2b", &ServingPlanCost::TTFTS}},
                  1e3, "ms", OS);
  writeSweepPanel(
      R, "serving-throughput", "throughput",
      {{"output tokens/s", "#59a14f", &ServingPlanCost::TokensPerS}}, 1,
      "tokens/s", OS);
  OS << "<table id=\"serving-sweep\"><tr><th>batch</th><th>TTFT</th>"
        "<th>TPOT</th><th>output tokens/s</th><th>per device</th></tr>\n";
  for (const ServingPlanCost &S : R.Sweep)
    OS << (S.Batch == P.Batch ? "<tr class=\"chosen\">" : "<tr>") << "<td>"
       << S.Batch << "</td><td>" << secs(S.TTFTS) << "</td><td>"
       << secs(S.TPOTS) << "</td><td>" << whole(S.TokensPerS) << "</td><td>"
       << whole(S.TokensPerSPerDevice) << "</td></tr>\n";
  OS << "</table>\n";
}

//===-- Tables ------------------------------------------------------------===//

void writeTopPlans(const SearchResult &S, unsigned K, raw_ostream &OS) {
  OS << "<h2 id=\"top\">Top plans</h2>\n<table id=\"top-table\"><tr><th>#"
        "</th><th class=\"l\">plan</th><th>step</th><th>tokens/s</th>"
        "<th>MFU</th><th>memory</th><th class=\"l\">dominant</th></tr>\n";
  for (unsigned I = 0; I < S.Top.size() && I < K; ++I) {
    const PlanCost &PC = S.Top[I];
    OS << "<tr" << (I == 0 ? " class=\"chosen\"" : "") << "><td>" << I + 1
       << "</td><td class=\"l\"><code>" << esc(PC.Plan.str())
       << "</code></td><td>" << secs(PC.StepTimeS) << "</td><td>"
       << format("%.0f", PC.Throughput) << "</td><td>" << format("%.3f", PC.MFU)
       << "</td><td>" << bytes(PC.MaxMemoryBytes) << "</td><td class=\"l\">"
       << getCostTermName(getStepBreakdown(PC).getDominant()) << "</td></tr>\n";
  }
  OS << "</table>\n";
}

void writePlacement(const std::map<std::string, unsigned> &Placement,
                    raw_ostream &OS) {
  OS << "<h2 id=\"placement\">Device-class placement</h2>\n<table "
        "id=\"placement-table\"><tr><th class=\"l\">class</th><th>nodes</th>"
        "</tr>\n";
  for (const auto &KV : Placement)
    OS << "<tr><td class=\"l\">" << esc(KV.first) << "</td><td>" << KV.second
       << "</td></tr>\n";
  OS << "</table>\n";
}

std::string stageList(const PlanCost &PC) {
  std::string S;
  for (const StageCost &SC : PC.Stages)
    S += (S.empty() ? "" : ":") + std::to_string(SC.NumLayers);
  return S;
}

} // namespace

void writeHtmlReport(const HtmlReportInput &In, raw_ostream &OS) {
  assert(In.Search && !In.Search->Top.empty() && "needs a chosen plan");
  const PlanCost &PC = In.Search->Top.front();
  std::string Title =
      "Loom plan for " + In.ModelName + " on " + In.HardwareName;
  OS << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<title>"
     << esc(Title) << "</title>\n<style>" << Style
     << "</style></head>\n<body>\n";
  OS << "<h1>" << esc(Title) << "</h1>\n<div class=\"sub\">" << esc(In.Mode)
     << " &middot; plan <code id=\"plan\">" << esc(PC.Plan.str())
     << "</code> &middot; layers per stage " << stageList(PC);
  if (In.Search->Precision)
    OS << " &middot; precision <code id=\"precision\" title=\""
       << esc(In.Search->Precision->describe()) << "\">"
       << getPrecisionName(In.Search->Precision->Kind) << "</code>";
  OS << "</div>\n";
  OS << "<div class=\"cards\">";
  card(OS, "predicted step", secs(PC.StepTimeS), "step");
  std::string Tok;
  raw_string_ostream(Tok) << format("%.0f", PC.Throughput);
  card(OS, PC.getThroughputUnit(), Tok, "tokens");
  std::string MFU;
  raw_string_ostream(MFU) << format("%.3f", PC.MFU);
  card(OS, "MFU", MFU, "mfu");
  card(OS, "memory per device (max)",
       bytes(PC.MaxMemoryBytes) + " of " + bytes(PC.HBMBytes), "memory");
  const ParallelPlan &P = PC.Plan;
  card(OS, "devices",
       std::to_string(P.getNumDevices()) + " = tp " + std::to_string(P.TP) +
           " x pp " + std::to_string(P.PP) + " x dp " + std::to_string(P.DP),
       "devices");
  card(OS, "micro-batches (count x size)",
       std::to_string(P.NumMicroBatches) + " x " +
           std::to_string(P.MicroBatchSize),
       "microbatches");
  OS << "</div>\n";
  if (In.Serving && !In.Serving->Plans.empty())
    writeServing(*In.Serving, OS);
  writeBreakdown(PC, OS);
  writeTimeline(In, PC, OS);
  writeMemory(PC, OS);
  writeTopPlans(*In.Search, In.TopK, OS);
  writePlacement(In.Placement, OS);
  OS << "<p class=\"note\">Written by Loom's plan-parallel; report.txt has "
        "the same numbers as text.</p>\n</body></html>\n";
}

} // namespace loom
