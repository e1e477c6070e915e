//===- Emit.cpp - Write the output directory (DESIGN §8) ------------------===//
//
// DESIGN §2 pass 12. Everything is written into a fresh sibling directory
// (OUTDIR.tmp-XXXXXX) and renamed to OUTDIR only when every file is
// complete, so a failure leaves no partial output; an existing OUTDIR is
// replaced only with --force. With --verify-output the program's invariants
// (lib/Shard/Verify.cpp) are checked before anything is written.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/Plan/CostReport.h"
#include "loom/Plan/Search.h"
#include "loom/Shard/OutputDir.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <map>

using namespace llvm;

namespace loom {
namespace {

Error writeReport(const CompilationUnit &CU, StringRef Path) {
  std::error_code EC;
  raw_fd_ostream OS(Path, EC, sys::fs::OF_None);
  if (EC)
    return createStringError(EC, "cannot write '%s'", Path.str().c_str());
  const SearchResult &S = *CU.Search;
  const ShardedProgram &SP = *CU.Sharded;
  OS << "Loom plan for " << sys::path::filename(CU.M->SourcePath) << " on "
     << CU.HW->Name << " (" << (CU.Opts.Mode == RunMode::Train ? "train" : "infer")
     << ")\n";
  for (const std::string &O : CU.Opts.HardwareOverrides)
    OS << "what-if: " << O << "\n";
  OS << "\n";
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
  // Device-class placement of the planning graph.
  std::map<std::string, unsigned> PerClass;
  for (const auto &NP : CU.M->getGraph().getNodes())
    ++PerClass[NP->DeviceClass.empty() ? std::string("(unplaced)")
                                        : NP->DeviceClass];
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

class EmitPass : public Pass {
public:
  StringRef getArgument() const override { return "emit"; }
  StringRef getDescription() const override {
    return "Write manifest.json, graphs/, schedule.json, trace.json and "
           "report.txt to the output directory";
  }
  Error run(CompilationUnit &CU) override {
    if (!CU.Sharded || CU.Sharded->Schedule.empty())
      return createStringError(inconvertibleErrorCode(),
                               "emit needs the schedule pass before it");
    StringRef Out = CU.Opts.OutputDir;
    if (Out.empty())
      return createStringError(inconvertibleErrorCode(),
                               "emit needs an output directory (-o DIR)");
    if (sys::fs::exists(Out) && !CU.Opts.Force)
      return createStringError(inconvertibleErrorCode(),
                               "output directory '%s' exists; pass --force "
                               "to replace it",
                               Out.str().c_str());
    const PlanCost &Best = CU.Search->Top.front();
    if (CU.Opts.VerifyOutput) {
      const MemoryLevel *HBM = CU.HW->getMemory("hbm");
      std::vector<std::string> Problems = verifyShardedProgram(
          *CU.Sharded, Best, HBM ? HBM->getUsableCapacity().value() : 0);
      if (!Problems.empty()) {
        std::string Msg = "--verify-output found " +
                          std::to_string(Problems.size()) + " problem(s):";
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
    if (std::error_code EC = sys::fs::createUniqueDirectory(
            Abs.str() + ".tmp", Tmp))
      return createStringError(EC, "cannot create a directory next to '%s': %s",
                               Out.str().c_str(), EC.message().c_str());
    Error E = writeAll(CU, Tmp);
    if (!E) {
      if (sys::fs::exists(Abs))
        if (std::error_code EC = sys::fs::remove_directories(Abs))
          E = createStringError(EC, "cannot replace '%s': %s",
                                Out.str().c_str(), EC.message().c_str());
    }
    if (!E)
      if (std::error_code EC = sys::fs::rename(Tmp, Abs))
        E = createStringError(EC, "cannot rename '%s' to '%s': %s",
                              Tmp.c_str(), Abs.c_str(), EC.message().c_str());
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
    if (Error E = writeGraphs(SP, Dir, CU.Opts.EmitPerRank))
      return E;
    ManifestInfo MI;
    MI.Model = sys::path::filename(CU.M->SourcePath).str();
    MI.Hardware = CU.HW->Name;
    MI.Mode = Mode.str();
    MI.Batch = CU.Search->Space.Batch;
    MI.Predicted = CU.Search->Top.front();
    MI.PerRank = CU.Opts.EmitPerRank;
    if (Error E = writeManifest(SP, MI, PathOf("manifest.json")))
      return E;
    if (Error E = writeSchedule(SP, Mode, PathOf("schedule.json")))
      return E;
    if (Error E = writeTrace(SP, PathOf("trace.json")))
      return E;
    return writeReport(CU, PathOf("report.txt"));
  }
};

} // namespace

std::unique_ptr<Pass> createEmitPass() { return std::make_unique<EmitPass>(); }

} // namespace loom
