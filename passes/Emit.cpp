//===- Emit.cpp - Write the output directory (DESIGN §8) ------------------===//
//
// DESIGN §2 pass 12. Everything is written into a fresh sibling directory
// (OUTDIR.tmp-XXXXXX) and renamed to OUTDIR only when every file is
// complete, so a failure leaves no partial output; an existing OUTDIR is
// replaced only with --force, and only when Loom wrote it (checkOutputDir),
// by an atomic exchange (installOutputDir). The program's invariants
// (lib/Shard/Verify.cpp) are checked before anything is written, unless
// --no-verify-output: Loom does not write graphs it knows to be invalid.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Planner/Search.h"
#include "loom/Planner/Serving.h"
#include "loom/Report/CostReport.h"
#include "loom/Report/Export.h"
#include "loom/Report/HtmlReport.h"
#include "loom/Report/SearchReport.h"
#include "loom/Report/ServingReport.h"
#include "loom/Shard/OutputDir.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <map>

using namespace llvm;

namespace loom {
namespace {

/// Nodes of the planning graph per device class.
std::map<std::string, unsigned> getPlacementCounts(const CompilationUnit &CU) {
  std::map<std::string, unsigned> PerClass;
  for (const auto &NP : CU.M->getGraph().getNodes())
    ++PerClass[NP->DeviceClass.empty() ? std::string("(unplaced)")
                                       : NP->DeviceClass];
  return PerClass;
}

Error writeTextFile(StringRef Path, function_ref<void(raw_ostream &)> Write) {
  std::error_code EC;
  raw_fd_ostream OS(Path, EC, sys::fs::OF_None);
  if (EC)
    return createStringError(EC, "cannot write '%s'", Path.str().c_str());
  Write(OS);
  OS.close();
  if (OS.has_error()) {
    std::error_code E = OS.error();
    OS.clear_error();
    return createStringError(E, "cannot write '%s'", Path.str().c_str());
  }
  return Error::success();
}

Error writeReport(const CompilationUnit &CU, StringRef Path) {
  std::error_code EC;
  raw_fd_ostream OS(Path, EC, sys::fs::OF_None);
  if (EC)
    return createStringError(EC, "cannot write '%s'", Path.str().c_str());
  const SearchResult &S = *CU.Search;
  const ShardedProgram &SP = *CU.Sharded;
  OS << "Loom plan for " << sys::path::filename(CU.M->SourcePath) << " on "
     << CU.HW->Name << " ("
     << (CU.Serving                       ? "serve"
         : CU.Opts.Mode == RunMode::Train ? "train"
                                          : "infer")
     << ")\n";
  for (const std::string &O : CU.Opts.HardwareOverrides)
    OS << "what-if: " << O << "\n";
  if (CU.Opts.Precision)
    OS << "precision: " << CU.Opts.Precision->describe() << " ["
       << CU.Opts.Precision->Why << "]\n";
  OS << "\n";
  if (CU.Serving) {
    // The serving plan, then one replica of it as emitted below.
    const ServingResult &SR = *CU.Serving;
    printServingSummary(SR, OS);
    OS << "\n";
    printServingTop(SR, std::max(5u, CU.Opts.TopPlans), OS);
    OS << "\n";
    printServingExplanation(SR, OS);
    OS << "\n";
    printServingSweep(SR, OS);
    if (!SR.Compared.empty()) {
      OS << "\n";
      printServingComparison(SR, OS);
    }
    OS << "\nOne replica, as emitted:\n";
  }
  printChosenPlan(S, OS);
  OS << "\n";
  printTopPlans(S, std::max(5u, CU.Opts.TopPlans), OS);
  OS << "\n";
  printExplanation(S, OS);
  OS << "\n";
  printStageCosts(CU.M->getGraph(), CU.NodeCosts, S.Top.front(),
                  ReportFormat::Text, OS);
  OS << "\nRoles (one graph each):\n";
  for (const RoleGraph &R : SP.Roles) {
    unsigned Coll = 0, P2P = 0, Nodes = 0;
    double Bytes = 0;
    for (const auto &NP : R.M->getGraph().getNodes()) {
      ++Nodes;
      if (NP->getDomain() == "hccl")
        (NP->getOpType() == "HcomSend" || NP->getOpType() == "HcomReceive"
             ? P2P
             : Coll)++;
    }
    for (const Value *V : R.M->getGraph().getParameters())
      Bytes += (double)V->Type.getSizeInBytes().getValueOr(0);
    OS << format("  %-24s %6u nodes %5u collectives %4u send/recv %12.0f "
                 "weight bytes\n",
                 R.FileName.c_str(), Nodes, Coll, P2P, Bytes);
  }
  // Under cp beside tp, what the first tp rank's cp stage found (every tp
  // rank's is alike).
  if (const ShardingResult *Sh = getCPSharding(SP.Sharding)) {
    unsigned CP = getCPSize(SP.Sharding);
    if (Sh->CPRing)
      OS << format("\nContext parallelism: cp=%u emitted as cp_algo=ring: %zu "
                   "attention(s) pass their K/V blocks around group cp "
                   "(HcomSend/HcomReceive, %u step(s) each) and merge the "
                   "softmax online; %u read K and V all-gathered (Notes)",
                   CP, Sh->RingSites.size(), CP - 1, Sh->RingFallbacks);
    else
      OS << format("\nContext parallelism: cp=%u emitted as cp_algo=a2a: Q, "
                   "K, V and the context move between tokens and heads by "
                   "HcomAllToAllV over group cp",
                   CP);
    OS << format("; %u K or V operand(s) move with their K/V heads, before "
                 "the model's GQA repeat\n",
                 Sh->CPMovedBeforeRepeat);
  }
  // Device-class placement of the planning graph.
  std::map<std::string, unsigned> PerClass = getPlacementCounts(CU);
  OS << "\nDevice-class placement (nodes):";
  for (const auto &KV : PerClass)
    OS << " " << KV.first << "=" << KV.second;
  OS << "\n";
  if (!SP.Sharding.Notes.empty()) {
    OS << "\nNotes:\n";
    for (const std::string &N : SP.Sharding.Notes)
      OS << "  " << N << "\n";
  }
  OS << format("\nSchedule: predicted step %.6g s (cost model: %.6g s)\n",
               SP.ScheduleStepS, S.Top.front().StepTimeS);
  OS.close();
  if (OS.has_error()) {
    std::error_code E = OS.error();
    OS.clear_error();
    return createStringError(E, "cannot write '%s'", Path.str().c_str());
  }
  return Error::success();
}

/// --test-corrupt-output: renames the last collective of the last role
/// graph that has one (its group's members then disagree), else retags its
/// last HcomReceive (the send then has no match).
void corruptForTest(ShardedProgram &SP) {
  for (auto R = SP.Roles.rbegin(); R != SP.Roles.rend(); ++R)
    for (bool P2P : {false, true}) {
      Node *Last = nullptr;
      for (const auto &NP : R->M->getGraph().getNodes())
        if (NP->getDomain() == "hccl" &&
            (NP->getOpType() == "HcomReceive") == P2P &&
            NP->getOpType() != "HcomSend")
          Last = NP.get();
      if (!Last)
        continue;
      if (P2P) {
        std::vector<Attribute> A = Last->takeAttributes();
        for (Attribute &X : A)
          if (X.Name == "sr_tag")
            X.I += 1000;
        Last->setAttributes(std::move(A));
      } else
        Last->setName((Last->getName() + ".corrupt").str());
      return;
    }
}

class EmitPass : public Pass {
public:
  // Its errors are about the output directory, which they name.
  bool errorsNameModel() const override { return false; }
  Error run(CompilationUnit &CU) override {
    if (!CU.Sharded || CU.Sharded->Programs.empty())
      return createStringError(inconvertibleErrorCode(),
                               "emit needs the schedule pass before it");
    StringRef Out = CU.Opts.OutputDir;
    if (Out.empty())
      return createStringError(inconvertibleErrorCode(),
                               "emit needs an output directory (-o DIR)");
    // The tool checked before any work; the directory may have changed
    // since.
    if (Error E = checkOutputDir(Out, CU.Opts.Force))
      return E;
    const PlanCost &Best = CU.Search->Top.front();
    if (CU.Opts.TestCorruptOutput)
      corruptForTest(*CU.Sharded);
    if (CU.Opts.VerifyOutput) {
      const MemoryLevel *HBM = CU.HW->getMemory("hbm");
      std::vector<std::string> Problems = verifyShardedProgram(
          *CU.Sharded, Best, HBM ? HBM->getUsableCapacity().value() : 0);
      if (!Problems.empty()) {
        // About the model's program: named by the model file, as pass
        // errors are (the other errors of emit name the output directory).
        std::string Msg =
            (CU.M->SourcePath.empty() ? "" : CU.M->SourcePath + ": error: ") +
            "the emitted program fails verification (" +
            std::to_string(Problems.size()) +
            " problem(s); nothing was written; --no-verify-output skips "
            "the check):";
        for (const std::string &P : Problems)
          Msg += "\n  " + P;
        return createStringError(inconvertibleErrorCode(), Msg.c_str());
      }
    }
    // A fresh sibling, renamed at the end.
    SmallString<256> Abs(Out);
    sys::fs::make_absolute(Abs);
    sys::path::remove_dots(Abs, true);
    SmallString<256> Parent = sys::path::parent_path(Abs);
    if (Parent.empty())
      Parent = ".";
    if (std::error_code EC = sys::fs::create_directories(Parent))
      return createStringError(EC, "cannot create '%s': %s", Parent.c_str(),
                               EC.message().c_str());
    SmallString<256> Tmp;
    if (std::error_code EC =
            sys::fs::createUniqueDirectory(Abs.str() + ".tmp", Tmp))
      return createStringError(EC, "cannot create a directory next to '%s': %s",
                               Out.str().c_str(), EC.message().c_str());
    Error E = writeAll(CU, Tmp);
    for (const std::string &W : ExportWarnings)
      CU.warn(W);
    if (!E)
      E = checkOutputDir(Out, CU.Opts.Force);
    if (!E)
      E = installOutputDir(Tmp, Abs);
    if (E) {
      sys::fs::remove_directories(Tmp);
      return E;
    }
    return Error::success();
  }

private:
  Error writeAll(const CompilationUnit &CU, StringRef Dir) {
    const ShardedProgram &SP = *CU.Sharded;
    auto PathOf = [&](StringRef F) {
      SmallString<256> P(Dir);
      sys::path::append(P, F);
      return std::string(P);
    };
    StringRef Mode = CU.Opts.Mode == RunMode::Train ? "train" : "infer";
    if (Error E = writeGraphs(SP, Dir, CU.Opts.EmitPerRank, CU.Opts.Progress))
      return E;
    ManifestInfo MI;
    MI.Model = sys::path::filename(CU.M->SourcePath).str();
    MI.Hardware = CU.HW->Name;
    MI.Mode = Mode.str();
    MI.Batch = CU.Search->Space.Batch;
    MI.Predicted = CU.Search->Top.front();
    MI.PerRank = CU.Opts.EmitPerRank;
    MI.Precision = CU.Opts.Precision;
    if (CU.Serving) {
      MI.Mode = "serve";
      ManifestServing MS;
      auto Add = [&](StringRef Key, json::Value V) {
        MS.Predicted.emplace_back(Key.str(), std::move(V));
      };
      // Disaggregated: the graphs are one decode instance.
      const ServingPlanCost &S = CU.Serving->DisaggChosen
                                     ? CU.Serving->Disagg->Decode
                                     : CU.Serving->Plans.front();
      if (CU.Serving->DisaggChosen)
        forEachDisaggPredicted(*CU.Serving->Disagg, /*Detail=*/false, Add);
      else
        forEachServingPredicted(S, /*Detail=*/false, Add);
      MS.Replicas = S.DP;
      MS.BatchPerReplica = S.Batch;
      MI.Serving = std::move(MS);
    }
    auto Tell = [&](const char *File) {
      if (CU.Opts.Progress)
        CU.Opts.Progress(std::string("emit: ") + File);
    };
    Tell("manifest.json");
    if (Error E = writeManifest(SP, MI, PathOf("manifest.json")))
      return E;
    Tell("schedule.json");
    if (Error E = writeSchedule(SP, Mode, PathOf("schedule.json")))
      return E;
    Tell("trace.json");
    TraceOptions TO;
    TO.Full = CU.Opts.TraceFull;
    if (Error E = writeTrace(SP, TO, PathOf("trace.json")))
      return E;
    Tell("report.txt");
    if (Error E = writeReport(CU, PathOf("report.txt")))
      return E;
    Tell("report.html");
    HtmlReportInput HI;
    HI.ModelName = MI.Model;
    HI.HardwareName = CU.HW->Name;
    HI.Mode = CU.Serving ? "serve" : Mode.str();
    HI.Search = CU.Search.get();
    HI.Program = &SP;
    HI.Placement = getPlacementCounts(CU);
    HI.TopK = std::max(5u, CU.Opts.TopPlans);
    HI.Serving = CU.Serving.get();
    if (Error E = writeTextFile(PathOf("report.html"), [&](raw_ostream &OS) {
          writeHtmlReport(HI, OS);
        }))
      return E;
    // --export: the launch arguments of the chosen plan.
    Expected<std::vector<ExportTarget>> Targets =
        parseExportTargets(CU.Opts.Export);
    if (!Targets)
      return Targets.takeError();
    for (ExportTarget T : *Targets) {
      ExportResult R =
          exportLaunchArgs(T, makeExportInput(CU, CU.Search->Top.front()));
      if (Error E = writeTextFile(PathOf(R.FileName),
                                  [&](raw_ostream &OS) { OS << R.Text; }))
        return E;
      ExportWarnings.insert(ExportWarnings.end(), R.Warnings.begin(),
                            R.Warnings.end());
    }
    return Error::success();
  }
  std::vector<std::string> ExportWarnings;
};

} // namespace

ExportInput makeExportInput(const CompilationUnit &CU, const PlanCost &Chosen) {
  ExportInput In = makeExportInput(CU.M->getGraph(), CU.Layers, Chosen);
  In.ModelName = sys::path::filename(CU.M->SourcePath).str();
  In.HardwareName = CU.HW->Name;
  In.ClusterDevices = CU.HW->getNumDevices();
  In.DDPBucketParams = CU.Opts.DDPBucketParams.getValueOr(0);
  if (CU.Opts.Precision)
    In.Precision = CU.Opts.Precision->Kind;
  if (CU.VocabPad && CU.VocabPad->padded()) {
    In.VocabFrom = CU.VocabPad->From;
    In.VocabTo = CU.VocabPad->To;
    In.VocabDivisibleBy = CU.VocabPad->DivisibleBy;
    In.VocabTP = CU.VocabPad->TP;
  }
  for (const auto &KV : CU.NodeCosts)
    if (KV.second.Cost.FusedKernel == "attention")
      In.FusedAttention = true;
    else if (!KV.second.Cost.FusedKernel.empty() &&
             !StringRef(KV.second.Cost.FusedKernel).startswith("fusion.") &&
             !is_contained(In.FusedElementwise, KV.second.Cost.FusedKernel))
      In.FusedElementwise.push_back(KV.second.Cost.FusedKernel);
  llvm::sort(In.FusedElementwise);
  // The plan's batch by construction (dp x mb x nmb = --batch).
  const ParallelPlan &P = Chosen.Plan;
  In.GlobalBatch = (int64_t)P.DP * P.MicroBatchSize * P.NumMicroBatches;
  // --seq, else (static shapes) dim 1 of the first input of rank >= 2, as
  // search-parallelism reads it.
  In.Seq = CU.Opts.Seq.getValueOr(0);
  for (const Value *V : CU.M->getGraph().getInputs()) {
    if (In.Seq || !V->Type.HasShape || V->Type.getRank() < 2)
      continue;
    In.Seq = V->Type.Dims[1].isStatic() && V->Type.Dims[1].Size > 0
                 ? V->Type.Dims[1].Size
                 : 1;
  }
  if (!In.Seq)
    In.Seq = 1;
  return In;
}

std::unique_ptr<Pass> createEmitPass() { return std::make_unique<EmitPass>(); }

} // namespace loom
