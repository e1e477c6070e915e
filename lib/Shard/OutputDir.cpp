//===- OutputDir.cpp - manifest.json, graphs/, schedule.json, trace.json -===//
//
// The files of DESIGN §8 / include/loom/Shard/OutputFormat.md. JSON is streamed
// with llvm::json::OStream in a fixed key order, so the same program gives the
// same bytes. Graph weights are streamed to one external-data file per role
// (graphs/ROLE.bin), one tensor at a time, several files at once.
//
// --force never destroys what Loom did not write: checkOutputDir accepts
// only an empty directory or one holding Loom's manifest and Loom's entries
// alone (inside graphs/, only the graphs the manifest lists and their
// external data), and installOutputDir swaps the new directory in before
// the old one is removed.
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/OutputDir.h"
#include "loom/ONNX/ONNX.h"
#include "loom/Shard/Schedule.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <set>
#include <thread>

using namespace llvm;

namespace loom {

static Error openFile(StringRef Path, std::unique_ptr<raw_fd_ostream> &OS) {
  std::error_code EC;
  OS = std::make_unique<raw_fd_ostream>(Path, EC, sys::fs::OF_None);
  if (EC)
    return createStringError(EC, "cannot write '%s': %s", Path.str().c_str(),
                             EC.message().c_str());
  return Error::success();
}

static Error closeFile(StringRef Path, raw_fd_ostream &OS) {
  OS.close();
  if (OS.has_error()) {
    std::error_code EC = OS.error();
    OS.clear_error();
    return createStringError(EC, "cannot write '%s': %s", Path.str().c_str(),
                             EC.message().c_str());
  }
  return Error::success();
}

ArrayRef<StringRef> getOutputDirEntries() {
  static const StringRef Entries[] = {
      "manifest.json", "graphs",      "schedule.json",     "trace.json",
      "report.txt",    "report.html", "megatron-args.txt", "mindspeed-args.txt",
      "deepspeed.json"};
  return Entries;
}

static Error refuse(StringRef Dir, const Twine &Why) {
  return createStringError(
      inconvertibleErrorCode(),
      "refusing to replace '%s': %s (--force replaces only an empty "
      "directory or an output directory Loom wrote); nothing was changed",
      Dir.str().c_str(), Why.str().c_str());
}

/// The canonical absolute path of \p P, or "" when it cannot be resolved.
static std::string realPath(const Twine &P) {
  SmallString<256> R;
  if (sys::fs::real_path(P, R))
    return "";
  return std::string(R);
}

/// Whether \p Inner is \p Outer or lies below it (both canonical).
static bool isWithin(StringRef Inner, StringRef Outer) {
  if (Outer.empty() || Inner.empty())
    return false;
  if (Inner == Outer || Outer == "/")
    return true;
  return Inner.startswith(Outer) && Inner[Outer.size()] == '/';
}

/// The files in \p Real/graphs that \p Manifest does not account for: the
/// graphs of its roles and ranks (graph, rank_graph) and their external
/// data (STEM.bin beside
/// STEM.onnx). Anything else there (a user's notes, a folder, a link) is
/// not Loom's, and --force must not delete it.
static std::vector<std::string> findForeignGraphFiles(StringRef Real,
                                                      const json::Object &M) {
  std::set<std::string> Known;
  for (StringRef Key : {"roles", "ranks"})
    if (const json::Array *A = M.getArray(Key))
      for (const json::Value &E : *A)
        if (const json::Object *O = E.getAsObject())
          for (StringRef GraphKey : {"graph", "rank_graph"})
            if (Optional<StringRef> G = O->getString(GraphKey))
              Known.insert(G->str());
  SmallString<256> Graphs(Real);
  sys::path::append(Graphs, "graphs");
  std::vector<std::string> Foreign;
  sys::fs::file_status St;
  if (sys::fs::status(Graphs, St, /*Follow=*/false))
    return Foreign; // No graphs/: nothing to protect.
  if (St.type() != sys::fs::file_type::directory_file)
    return {"graphs"};
  std::error_code EC;
  for (sys::fs::directory_iterator It(Graphs, EC, /*FollowSymlinks=*/false),
       End;
       It != End && !EC; It.increment(EC)) {
    std::string N = sys::path::filename(It->path()).str();
    std::string Rel = "graphs/" + N;
    StringRef Stem = StringRef(N);
    bool Ours =
        It->type() == sys::fs::file_type::regular_file &&
        (Known.count(Rel) || (Stem.consume_back(".bin") &&
                              Known.count("graphs/" + Stem.str() + ".onnx")));
    if (!Ours)
      Foreign.push_back(Rel);
  }
  if (EC)
    Foreign.push_back("graphs (cannot list it: " + EC.message() + ")");
  llvm::sort(Foreign);
  return Foreign;
}

/// Why \p Dir (an existing directory, canonical \p Real) is not an output
/// directory Loom wrote; "" when it is one, or empty.
static std::string whyNotLoomOutput(StringRef Dir, StringRef Real) {
  std::error_code EC;
  std::vector<std::string> Names;
  for (sys::fs::directory_iterator It(Real, EC), End; It != End && !EC;
       It.increment(EC))
    Names.push_back(sys::path::filename(It->path()).str());
  if (EC)
    return "cannot list it: " + EC.message();
  if (Names.empty())
    return "";
  llvm::sort(Names);
  std::vector<std::string> Foreign;
  for (const std::string &N : Names)
    if (!is_contained(getOutputDirEntries(), StringRef(N)))
      Foreign.push_back("'" + N + "'");
  if (!Foreign.empty()) {
    if (Foreign.size() > 3)
      Foreign.resize(3), Foreign.push_back("...");
    return "it holds " + join(Foreign, ", ") + ", which Loom does not write";
  }
  SmallString<256> Manifest(Real);
  sys::path::append(Manifest, "manifest.json");
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buf =
      MemoryBuffer::getFile(Manifest, /*IsText=*/true);
  if (!Buf)
    return "it has no manifest.json from Loom";
  Expected<json::Value> V = json::parse((*Buf)->getBuffer());
  if (!V) {
    consumeError(V.takeError());
    return "its manifest.json is not Loom's (not JSON)";
  }
  const json::Object *O = V->getAsObject();
  Optional<int64_t> Version = O ? O->getInteger("format_version") : None;
  if (!Version || *Version != OutputFormatVersion)
    return "its manifest.json is not Loom's (no \"format_version\": " +
           std::to_string(OutputFormatVersion) + ")";
  std::vector<std::string> InGraphs = findForeignGraphFiles(Real, *O);
  if (!InGraphs.empty()) {
    for (std::string &F : InGraphs)
      F = "'" + F + "'";
    if (InGraphs.size() > 3)
      InGraphs.resize(3), InGraphs.push_back("...");
    return "it holds " + join(InGraphs, ", ") +
           ", which Loom's manifest.json does not list";
  }
  return "";
}

Error checkOutputDir(StringRef Dir, bool Force) {
  sys::fs::file_status St;
  if (std::error_code EC = sys::fs::status(Dir, St, /*Follow=*/false)) {
    // Absent, or under a non-directory (creating it fails later, by name).
    if (EC == std::errc::no_such_file_or_directory ||
        EC == std::errc::not_a_directory)
      return Error::success();
    return createStringError(EC, "cannot check the output directory '%s': %s",
                             Dir.str().c_str(), EC.message().c_str());
  }
  bool IsDir = St.type() == sys::fs::file_type::directory_file;
  if (!Force) {
    if (!IsDir)
      return createStringError(inconvertibleErrorCode(),
                               "output directory '%s' exists and is not a "
                               "directory",
                               Dir.str().c_str());
    return createStringError(inconvertibleErrorCode(),
                             "output directory '%s' exists; pass --force to "
                             "replace it",
                             Dir.str().c_str());
  }
  switch (St.type()) {
  case sys::fs::file_type::directory_file:
    break;
  case sys::fs::file_type::symlink_file:
    return refuse(Dir, "it is a symbolic link");
  case sys::fs::file_type::regular_file:
    return refuse(Dir, "it is a regular file");
  default:
    return refuse(Dir, "it is not a directory");
  }
  std::string Real = realPath(Dir);
  if (Real.empty())
    return refuse(Dir, "its real path cannot be resolved");
  if (Real == "/")
    return refuse(Dir, "it is the root directory");
  SmallString<256> CwdBuf;
  std::string Cwd =
      sys::fs::current_path(CwdBuf) ? std::string() : realPath(CwdBuf);
  if (isWithin(Cwd, Real))
    return refuse(Dir, Cwd == Real ? "it is the current directory"
                                   : "it contains the current directory");
  if (const char *Home = std::getenv("HOME")) {
    std::string H = realPath(Home);
    if (isWithin(H, Real))
      return refuse(Dir, H == Real ? "it is the home directory"
                                   : "it contains the home directory");
  }
  // A mount point's parent is on another device.
  sys::fs::file_status Self, Parent;
  if (!sys::fs::status(Real, Self) &&
      !sys::fs::status(sys::path::parent_path(Real), Parent) &&
      Self.getUniqueID().getDevice() != Parent.getUniqueID().getDevice())
    return refuse(Dir, "it is a mount point");
  std::string Why = whyNotLoomOutput(Dir, Real);
  if (!Why.empty())
    return refuse(Dir, Why);
  return Error::success();
}

Error installOutputDir(StringRef NewDir, StringRef Dir) {
  auto RenameError = [&](std::error_code EC, StringRef From, StringRef To) {
    return createStringError(EC, "cannot rename '%s' to '%s': %s",
                             From.str().c_str(), To.str().c_str(),
                             EC.message().c_str());
  };
  if (!sys::fs::exists(Dir)) {
    if (std::error_code EC = sys::fs::rename(NewDir, Dir))
      return RenameError(EC, NewDir, Dir);
    return Error::success();
  }
#ifdef __linux__
  // One atomic exchange: Dir is the old or the new output at every instant.
  // The old one, now at NewDir, is removed afterwards.
  SmallString<256> From(NewDir), To(Dir);
  if (::renameat2(AT_FDCWD, From.c_str(), AT_FDCWD, To.c_str(),
                  RENAME_EXCHANGE) == 0) {
    sys::fs::remove_directories(NewDir);
    return Error::success();
  }
  if (errno != EINVAL && errno != ENOSYS)
    return RenameError(std::error_code(errno, std::generic_category()), NewDir,
                       Dir);
#endif
  // No exchange on this file system: the old output is moved aside, the new
  // one moved in (the old one moved back if that fails), then the old one
  // removed.
  SmallString<256> Old;
  if (std::error_code EC = sys::fs::createUniqueDirectory(Dir + ".old", Old))
    return createStringError(EC, "cannot create a directory next to '%s': %s",
                             Dir.str().c_str(), EC.message().c_str());
  if (std::error_code EC = sys::fs::rename(Dir, Old)) {
    sys::fs::remove(Old);
    return RenameError(EC, Dir, Old);
  }
  if (std::error_code EC = sys::fs::rename(NewDir, Dir)) {
    sys::fs::rename(Old, Dir);
    return RenameError(EC, NewDir, Dir);
  }
  sys::fs::remove_directories(Old);
  return Error::success();
}

std::string describeOutputDir(const ShardedProgram &SP, StringRef Dir) {
  unsigned Graphs = 0;
  SmallString<256> GDir(Dir);
  sys::path::append(GDir, "graphs");
  std::error_code EC;
  for (sys::fs::directory_iterator It(GDir, EC), End; It != End && !EC;
       It.increment(EC))
    Graphs += sys::path::extension(It->path()) == ".onnx";
  double Weights = 0;
  for (const RoleGraph &R : SP.Roles)
    for (const Value *V : R.M->getGraph().getParameters())
      if (!V->isShapeOnly())
        Weights += (double)V->Type.getSizeInBytes().getValueOr(0);
  std::string S = std::to_string(Graphs) + " graph" + (Graphs == 1 ? "" : "s") +
                  " (" + formatBytes(Bytes(Weights)) + " of weights)";
  for (StringRef E : getOutputDirEntries()) {
    SmallString<256> P(Dir);
    sys::path::append(P, E);
    if (E == "graphs" || !sys::fs::exists(P))
      continue;
    S += ", ";
    S += E.endswith(".json") || E.endswith(".txt") ? sys::path::stem(E).str()
                                                   : E.str();
  }
  return S;
}

std::string getRoleGraphPath(const RoleGraph &R) {
  return "graphs/" + R.FileName;
}

const RoleGraph *findRole(ArrayRef<RoleGraph> Roles, const RankCoords &C) {
  for (const RoleGraph &R : Roles)
    if (R.PP == C.PP && R.TP == C.TP && R.EP == C.EP &&
        (R.DP < 0 || R.DP == (int)C.DP))
      return &R;
  return nullptr;
}

Error writeGraphs(const ShardedProgram &SP, StringRef Dir, bool PerRank,
                  const std::function<void(const std::string &)> &Progress) {
  auto Tell = [&](const char *What, size_t N, size_t Of) {
    if (Progress)
      Progress("emit: " + std::string(What) + " " + std::to_string(N) + "/" +
               std::to_string(Of));
  };
  SmallString<256> GDir(Dir);
  sys::path::append(GDir, "graphs");
  if (std::error_code EC = sys::fs::create_directories(GDir))
    return createStringError(EC, "cannot create '%s'", GDir.c_str());
  std::vector<std::vector<ExportOptions::ExternalEntry>> Layouts(
      SP.Roles.size());
  std::vector<std::string> Bins;
  for (const RoleGraph &R : SP.Roles) {
    Tell("graphs", Bins.size() + 1, SP.Roles.size());
    std::string Stem = StringRef(R.FileName).drop_back(5).str();
    SmallString<256> Bin(GDir), Onnx(GDir);
    sys::path::append(Bin, Stem + ".bin");
    sys::path::append(Onnx, R.FileName);
    ExportOptions EO;
    EO.ExternalDataLocation = Stem + ".bin";
    EO.ExternalLayout = &Layouts[Bins.size()];
    // Local types are re-derived by any consumer's shape inference; only
    // inputs and outputs are typed. Above opset 17 they are written too:
    // ONNX releases before 1.13 (Debian 12's, which loom-run's cutter
    // uses) have no schemas there and cannot re-derive them.
    EO.IncludeValueInfo = R.M->getOpsetVersion("") > 17;
    if (Error E = writeModelFile(*R.M, Onnx, EO))
      return E;
    Bins.push_back(std::string(Bin));
  }
  // The data files, a few at a time: copying a slice is kernel work per
  // run (a column slice is one run per row), which a fast disk outpaces on
  // one core. Each file has one writer, so the bytes do not depend on the
  // threads; the first failure in role order is reported.
  std::vector<std::string> Failures(Bins.size());
  std::atomic<size_t> Next{0}, Done{0};
  auto Work = [&] {
    for (size_t I; (I = Next++) < Bins.size();) {
      if (Error E = writeExternalData(Layouts[I], Bins[I]))
        Failures[I] = toString(std::move(E));
      Tell("weights", ++Done, Bins.size());
    }
  };
  unsigned NumThreads = std::min<size_t>(
      Bins.size(), std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  std::vector<std::thread> Threads;
  for (unsigned T = 1; T < NumThreads; ++T)
    Threads.emplace_back(Work);
  Work();
  for (std::thread &T : Threads)
    T.join();
  for (const std::string &F : Failures)
    if (!F.empty())
      return createStringError(inconvertibleErrorCode(), F.c_str());
  if (!PerRank)
    return Error::success();
  for (unsigned Rank = 0; Rank < SP.Sharding.Plan.getNumDevices(); ++Rank) {
    Tell("per-rank graphs", Rank + 1, SP.Sharding.Plan.getNumDevices());
    const RoleGraph *R =
        findRole(SP.Roles, getRankCoords(SP.Sharding.Plan, Rank));
    if (!R)
      continue;
    std::string Stem = StringRef(R->FileName).drop_back(5).str();
    SmallString<256> Onnx(GDir);
    sys::path::append(Onnx, "rank" + std::to_string(Rank) + ".onnx");
    // Same layout as the role's graph: the data file is shared.
    ExportOptions EO;
    EO.ExternalDataLocation = Stem + ".bin";
    EO.IncludeValueInfo = false;
    if (Error E = writeModelFile(*R->M, Onnx, EO))
      return E;
  }
  return Error::success();
}

/// "float32", "int64", ... (numpy's names, which the harness and most
/// runtimes use).
static std::string numpyName(DataType T) {
  StringRef ONNX = getONNXTypeName(T);
  if (ONNX == "float")
    return "float32";
  if (ONNX == "double")
    return "float64";
  return ONNX.empty() ? getDataTypeName(T).str() : ONNX.str();
}

/// "tp" (and "cp") of a role or rank whose index on the propagated axis
/// is \p Idx: under context parallelism that axis is cp and tp is 0.
static void writeAxisIndex(json::OStream &J, const ShardingResult &R,
                           unsigned Idx) {
  auto TC = splitInnerIndex(R, Idx);
  J.attribute("tp", TC.first);
  if (getCPSize(R) > 1)
    J.attribute("cp", TC.second);
}

Error writeManifest(const ShardedProgram &SP, const ManifestInfo &Info,
                    StringRef Path) {
  std::unique_ptr<raw_fd_ostream> OS;
  if (Error E = openFile(Path, OS))
    return E;
  const ParallelPlan &P = SP.Sharding.Plan;
  const ShardingResult &R = SP.Sharding;
  {
    json::OStream J(*OS, 2);
    J.object([&] {
      J.attribute("format_version", 1);
      J.attribute("model", Info.Model);
      J.attribute("hardware", Info.Hardware);
      J.attribute("mode", Info.Mode);
      J.attribute("batch", Info.Batch);
      if (Info.Precision)
        J.attribute("precision", Info.Precision->toJSON());
      J.attributeObject("plan", [&] {
        writePlanJSON(J, getPlanAsPlanned(R), P.StageLayers);
        J.attributeArray("chunk_layers", [&] {
          for (unsigned L : R.ChunkLayers)
            J.value(L);
        });
      });
      J.attributeObject("predicted", [&] {
        J.attribute("step_time_s", Info.Predicted.StepTimeS);
        J.attribute(Info.Predicted.getThroughputKey(),
                    Info.Predicted.Throughput);
        J.attribute("mfu", Info.Predicted.MFU);
        J.attribute("max_memory_bytes", Info.Predicted.MaxMemoryBytes);
        if (Info.Serving) {
          for (const auto &KV : Info.Serving->Predicted)
            J.attribute(KV.first, KV.second);
          // The graphs are one replica: how many run, and the batch of each.
          J.attribute("replicas", Info.Serving->Replicas);
          J.attribute("batch_per_replica", Info.Serving->BatchPerReplica);
        }
      });
      auto Types =
          [&](const char *Key, const std::map<std::string, TensorType> &Global,
              const std::map<std::string, int> &Axes, ArrayRef<Value *> Order) {
            J.attributeArray(Key, [&] {
              for (const Value *V : Order) {
                std::string N = V->getName().str();
                auto It = Global.find(N);
                TensorType T = It != Global.end() ? It->second : V->Type;
                auto A = Axes.find(N);
                J.object([&] {
                  J.attribute("name", N);
                  J.attribute("dtype", numpyName(T.Elem));
                  J.attributeArray("shape", [&] {
                    for (const Dim &D : T.Dims)
                      J.value(D.isStatic() ? json::Value(D.Size)
                                           : json::Value(nullptr));
                  });
                  if (A != Axes.end() && A->second >= 0)
                    J.attribute("batch_axis", A->second);
                  else
                    J.attribute("batch_axis", nullptr);
                });
              }
            });
          };
      Types("inputs", R.GlobalInputTypes, R.InputBatchAxis,
            R.M->getGraph().getInputs());
      Types("outputs", R.GlobalOutputTypes, R.OutputBatchAxis,
            R.M->getGraph().getOutputs());
      J.attributeArray("roles", [&] {
        for (const RoleGraph &RG : SP.Roles)
          J.object([&] {
            J.attribute("graph", getRoleGraphPath(RG));
            J.attribute("pp", RG.PP);
            writeAxisIndex(J, R, RG.TP);
            J.attribute("ep", RG.EP);
            if (RG.DP >= 0) // holds its own embedding table shards
              J.attribute("dp", RG.DP);
            J.attributeArray("inputs", [&] {
              for (const std::string &S : RG.Inputs)
                J.value(S);
            });
            J.attributeArray("outputs", [&] {
              for (const std::string &S : RG.Outputs)
                J.value(S);
            });
            if (!R.KVCache.empty())
              writeRoleKVCache(J, R, RG);
          });
      });
      J.attributeArray("ranks", [&] {
        for (unsigned Rank = 0; Rank < P.getNumDevices(); ++Rank) {
          RankCoords C = getRankCoords(P, Rank);
          const RoleGraph *RG = findRole(SP.Roles, C);
          J.object([&] {
            J.attribute("rank", Rank);
            J.attribute("device", Rank);
            J.attribute("graph", RG ? getRoleGraphPath(*RG) : "");
            if (Info.PerRank)
              J.attribute("rank_graph",
                          "graphs/rank" + std::to_string(Rank) + ".onnx");
            J.attributeObject("coords", [&] {
              J.attribute("dp", C.DP);
              J.attribute("pp", C.PP);
              writeAxisIndex(J, R, C.TP);
              J.attribute("ep", C.EP);
            });
            J.attributeObject("groups", [&] {
              // Under cp, the weight gradients' group is dp x cp.
              for (const char *G :
                   {"tp", "pp", "dp", "ep", "dp_ep", "cp", "dp_cp"})
                if (getCPSize(R) > 1 || !StringRef(G).contains("cp"))
                  J.attributeArray(G, [&] {
                    for (unsigned M : getOutputGroupRanks(R, G, Rank))
                      J.value(M);
                  });
            });
          });
        }
      });
    });
  }
  *OS << "\n";
  return closeFile(Path, *OS);
}

/// Times with 12 significant digits (ns up to 1,000 s): the cost model's
/// predictions carry no more, and the files stay small.
static void number(json::OStream &J, StringRef Key, double V) {
  J.attributeBegin(Key);
  J.rawValue([&](raw_ostream &OS) { OS << format("%.12g", V); });
  J.attributeEnd();
}

static void eventJSON(json::OStream &J, const ScheduleEvent &E) {
  J.object([&] {
    J.attribute("kind", E.Kind);
    if (!E.Op.empty())
      J.attribute("op", E.Op);
    if (E.MicroBatch >= 0)
      J.attribute("micro_batch", E.MicroBatch);
    if (E.Chunk >= 0)
      J.attribute("chunk", E.Chunk);
    number(J, "start_s", E.StartS);
    number(J, "end_s", E.EndS);
    J.attribute("stream", E.Stream);
    if (!E.Group.empty())
      J.attribute("group", E.Group);
    if (!E.Level.empty())
      J.attribute("level", E.Level);
    if (E.Bytes > 0)
      J.attribute("bytes", (int64_t)E.Bytes);
    if (E.Peer >= 0)
      J.attribute("peer", E.Peer);
    if (E.Tag >= 0)
      J.attribute("sr_tag", E.Tag);
    if (E.FusionId >= 0)
      J.attribute("fusion_id", E.FusionId);
  });
}

/// Index into SP.Roles of the role rank \p Rank runs, or -1.
static int roleIndexOf(const ShardedProgram &SP, unsigned Rank) {
  RankCoords C = getRankCoords(SP.Sharding.Plan, Rank);
  for (size_t I = 0; I < SP.Roles.size(); ++I)
    if (SP.Roles[I].PP == C.PP && SP.Roles[I].TP == C.TP &&
        SP.Roles[I].EP == C.EP &&
        (SP.Roles[I].DP < 0 || SP.Roles[I].DP == (int)C.DP))
      return (int)I;
  return -1;
}

/// Writes one JSON value on a line of its own (the files stay greppable and
/// diffable without the bytes of full indentation).
template <typename Fn> static void line(raw_ostream &OS, Fn F) {
  OS << "\n";
  json::OStream J(OS);
  F(J);
}

Error writeSchedule(const ShardedProgram &SP, StringRef Mode, StringRef Path) {
  std::unique_ptr<raw_fd_ostream> OS;
  if (Error E = openFile(Path, OS))
    return E;
  raw_ostream &O = *OS;
  O << "{\"format_version\": 2, \"mode\": \"" << Mode
    << "\", \"step_time_s\": " << format("%.12g", SP.ScheduleStepS)
    << ", \"micro_batches\": " << SP.NumMicroBatches << ",\n\"roles\": [";
  for (size_t I = 0; I < SP.Roles.size(); ++I) {
    const RoleGraph &RG = SP.Roles[I];
    line(O, [&](json::OStream &J) {
      J.object([&] {
        J.attribute("graph", getRoleGraphPath(RG));
        J.attribute("pp", RG.PP);
        writeAxisIndex(J, SP.Sharding, RG.TP);
        J.attribute("ep", RG.EP);
        if (RG.DP >= 0)
          J.attribute("dp", RG.DP);
        J.attribute("program",
                    I < SP.RoleProgram.size() ? SP.RoleProgram[I] : 0u);
      });
    });
    if (I + 1 < SP.Roles.size())
      O << ",";
  }
  O << "],\n\"ranks\": [";
  for (unsigned Rank = 0; Rank < SP.Sharding.Plan.getNumDevices(); ++Rank)
    O << (Rank ? "," : "") << roleIndexOf(SP, Rank);
  O << "],\n\"programs\": [";
  for (size_t I = 0; I < SP.Programs.size(); ++I) {
    const ScheduleProgram &P = SP.Programs[I];
    O << (I ? ",\n" : "\n") << "{\"pp\": " << P.PP << ", \"comms\": [";
    for (size_t K = 0; K < P.Comms.size(); ++K) {
      const ScheduleComm &C = P.Comms[K];
      line(O, [&](json::OStream &J) {
        J.object([&] {
          J.attribute("chunk", C.Chunk);
          J.attribute("kind", C.Kind);
          J.attribute("op", C.Op);
          J.attribute("group", C.Group);
          J.attribute("level", C.Level);
          J.attribute("bytes", (int64_t)C.Bytes);
          if (C.Peer >= 0)
            J.attribute("peer", C.Peer);
          if (C.Tag >= 0)
            J.attribute("sr_tag", C.Tag);
          number(J, "time_s", C.TimeS);
        });
      });
      if (K + 1 < P.Comms.size())
        O << ",";
    }
    O << "],\n\"events\": [";
    for (size_t K = 0; K < P.Events.size(); ++K) {
      line(O, [&](json::OStream &J) { eventJSON(J, P.Events[K]); });
      if (K + 1 < P.Events.size())
        O << ",";
    }
    O << "]}";
  }
  O << "]}\n";
  return closeFile(Path, *OS);
}

Error writeTrace(const ShardedProgram &SP, const TraceOptions &TO,
                 StringRef Path) {
  std::unique_ptr<raw_fd_ostream> OS;
  if (Error E = openFile(Path, OS))
    return E;
  // Streams 1-5, then 6 for the rest (offload), 7 for cp's collectives.
  static const char *const Streams[] = {"compute", "tp", "ep",
                                        "p2p",     "dp", "cp"};
  auto Tid = [](StringRef S) {
    for (unsigned I = 0; I < 5; ++I)
      if (S == Streams[I])
        return I + 1;
    return S == "cp" ? 7u : 6u;
  };
  const ParallelPlan &P = SP.Sharding.Plan;
  unsigned M = SP.NumMicroBatches;
  // The window: micro-batches [0, Edge) and [M - Edge, M) of DP replica 0
  // (the others run the same programs at the same times).
  unsigned Edge = TO.EdgeMicroBatches;
  bool Windowed = !TO.Full && 2 * (uint64_t)Edge < M;
  auto Shown = [&](int MB) {
    return !Windowed || MB < 0 || (unsigned)MB < Edge ||
           (unsigned)MB >= M - Edge;
  };
  std::vector<unsigned> Ranks;
  for (unsigned Rank = 0; Rank < P.getNumDevices(); ++Rank)
    if (TO.Full || getRankCoords(P, Rank).DP == 0)
      Ranks.push_back(Rank);
  {
    json::OStream J(*OS);
    J.object([&] {
      J.attribute("displayTimeUnit", "ms");
      J.attributeObject("otherData", [&] {
        std::string What =
            Windowed
                ? "DP replica 0; micro-batches 0-" + std::to_string(Edge - 1) +
                      " and " + std::to_string(M - Edge) + "-" +
                      std::to_string(M - 1) + " of " + std::to_string(M) +
                      " (plan-parallel --trace=full shows all)"
            : TO.Full ? "every rank, every micro-batch"
                      : "DP replica 0, every micro-batch";
        J.attribute("loom_trace", What);
      });
      J.attributeArray("traceEvents", [&] {
        for (unsigned Rank : Ranks) {
          int Role = roleIndexOf(SP, Rank);
          if (Role < 0 || (size_t)Role >= SP.RoleProgram.size())
            continue;
          const ScheduleProgram &Prog = SP.Programs[SP.RoleProgram[Role]];
          J.object([&] {
            J.attribute("name", "process_name");
            J.attribute("ph", "M");
            J.attribute("pid", Rank);
            J.attributeObject("args", [&] {
              J.attribute("name", "rank " + std::to_string(Rank) + " (" +
                                      SP.Roles[Role].FileName + ")");
            });
          });
          for (unsigned I = 0; I < (getCPSize(SP.Sharding) > 1 ? 6u : 5u); ++I)
            J.object([&] {
              J.attribute("name", "thread_name");
              J.attribute("ph", "M");
              J.attribute("pid", Rank);
              J.attribute("tid", I < 5 ? I + 1 : 7u);
              J.attributeObject("args",
                                [&] { J.attribute("name", Streams[I]); });
            });
          auto Emit = [&](const ScheduleEvent &E) {
            J.object([&] {
              std::string Name = E.Kind;
              if (E.MicroBatch >= 0)
                Name += " mb" + std::to_string(E.MicroBatch);
              J.attribute("name", Name);
              J.attribute("cat", E.Stream);
              J.attribute("ph", "X");
              J.attribute("pid", Rank);
              J.attribute("tid", Tid(E.Stream));
              // Microseconds, as the format wants.
              number(J, "ts", E.StartS * 1e6);
              number(J, "dur", (E.EndS - E.StartS) * 1e6);
              J.attributeObject("args", [&] {
                if (!E.Op.empty())
                  J.attribute("op", E.Op);
                if (E.Chunk >= 0)
                  J.attribute("chunk", E.Chunk);
                if (E.Bytes > 0)
                  J.attribute("bytes", (int64_t)E.Bytes);
                if (!E.Group.empty())
                  J.attribute("group", E.Group);
                if (!E.Level.empty())
                  J.attribute("level", E.Level);
              });
            });
          };
          bool Marked = false;
          for (const ScheduleEvent &E : Prog.Events) {
            if (!Shown(E.MicroBatch)) {
              // One marker where the hidden steady state begins.
              if (!Marked && E.Stream == "compute") {
                Marked = true;
                J.object([&] {
                  J.attribute("name", "micro-batches " + std::to_string(Edge) +
                                          "-" + std::to_string(M - Edge - 1) +
                                          " not shown (--trace=full)");
                  J.attribute("ph", "i");
                  J.attribute("s", "p");
                  J.attribute("pid", Rank);
                  J.attribute("tid", 1);
                  number(J, "ts", E.StartS * 1e6);
                });
              }
              continue;
            }
            Emit(E);
            if (E.Stream == "compute")
              expandComms(Prog, E, Emit);
          }
        }
      });
    });
  }
  *OS << "\n";
  return closeFile(Path, *OS);
}

} // namespace loom
