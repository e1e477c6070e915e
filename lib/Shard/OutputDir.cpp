//===- OutputDir.cpp - manifest.json, graphs/, schedule.json, trace.json -===//
//
// The files of DESIGN §8 / include/loom/Shard/OutputFormat.md. JSON is streamed with
// llvm::json::OStream in a fixed key order, so the same program gives the
// same bytes. Graph weights are streamed to one external-data file per role
// (graphs/ROLE.bin), one tensor at a time, several files at once.
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/OutputDir.h"
#include "loom/ONNX/ONNX.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <atomic>
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

std::string getRoleGraphPath(const RoleGraph &R) {
  return "graphs/" + R.FileName;
}

const RoleGraph *findRole(ArrayRef<RoleGraph> Roles, const RankCoords &C) {
  for (const RoleGraph &R : Roles)
    if (R.PP == C.PP && R.TP == C.TP && R.EP == C.EP)
      return &R;
  return nullptr;
}

Error writeGraphs(const ShardedProgram &SP, StringRef Dir, bool PerRank) {
  SmallString<256> GDir(Dir);
  sys::path::append(GDir, "graphs");
  if (std::error_code EC = sys::fs::create_directories(GDir))
    return createStringError(EC, "cannot create '%s'", GDir.c_str());
  std::vector<std::vector<ExportOptions::ExternalEntry>> Layouts(
      SP.Roles.size());
  std::vector<std::string> Bins;
  for (const RoleGraph &R : SP.Roles) {
    std::string Stem = StringRef(R.FileName).drop_back(5).str();
    SmallString<256> Bin(GDir), Onnx(GDir);
    sys::path::append(Bin, Stem + ".bin");
    sys::path::append(Onnx, R.FileName);
    ExportOptions EO;
    EO.ExternalDataLocation = Stem + ".bin";
    EO.ExternalLayout = &Layouts[Bins.size()];
    // Local types are re-derived by any consumer's shape inference; only
    // inputs and outputs are typed.
    EO.IncludeValueInfo = false;
    if (Error E = writeModelFile(*R.M, Onnx, EO))
      return E;
    Bins.push_back(std::string(Bin));
  }
  // The data files, a few at a time: copying a slice is kernel work per
  // run (a column slice is one run per row), which a fast disk outpaces on
  // one core. Each file has one writer, so the bytes do not depend on the
  // threads; the first failure in role order is reported.
  std::vector<std::string> Failures(Bins.size());
  std::atomic<size_t> Next{0};
  auto Work = [&] {
    for (size_t I; (I = Next++) < Bins.size();)
      if (Error E = writeExternalData(Layouts[I], Bins[I]))
        Failures[I] = toString(std::move(E));
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
    const RoleGraph *R = findRole(SP.Roles, getRankCoords(SP.Sharding.Plan, Rank));
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
  switch (T) {
  case DataType::Float: return "float32";
  case DataType::Float16: return "float16";
  case DataType::BFloat16: return "bfloat16";
  case DataType::Double: return "float64";
  case DataType::Int8: return "int8";
  case DataType::Int16: return "int16";
  case DataType::Int32: return "int32";
  case DataType::Int64: return "int64";
  case DataType::UInt8: return "uint8";
  case DataType::UInt16: return "uint16";
  case DataType::UInt32: return "uint32";
  case DataType::UInt64: return "uint64";
  case DataType::Bool: return "bool";
  default: return getDataTypeName(T).str();
  }
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
      J.attributeObject("plan", [&] {
        J.attribute("dp", P.DP);
        J.attribute("tp", P.TP);
        J.attribute("pp", P.PP);
        J.attribute("ep", P.EP);
        J.attribute("sp", P.SP);
        J.attribute("micro_batch_size", P.MicroBatchSize);
        J.attribute("num_micro_batches", P.NumMicroBatches);
        J.attribute("virtual_stages", P.VirtualStages);
        J.attribute("recompute", getRecomputeName(P.RC));
        J.attribute("zero_stage", P.ZeroStage);
        J.attribute("grad_dtype", getGradPrecisionName(P.Grad));
        // The mesh, innermost first (tp always): ranks' coords and groups
        // follow it.
        J.attributeArray("axis_order", [&] {
          J.value("tp");
          for (MeshAxis A : P.Order)
            J.value(getMeshAxisName(A));
        });
        J.attributeArray("stage_layers", [&] {
          for (unsigned L : P.StageLayers)
            J.value(L);
        });
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
        J.attribute("schedule_step_time_s", SP.ScheduleStepS);
      });
      auto Types = [&](const char *Key,
                       const std::map<std::string, TensorType> &Global,
                       const std::map<std::string, int> &Axes,
                       ArrayRef<Value *> Order) {
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
            J.attribute("tp", RG.TP);
            J.attribute("ep", RG.EP);
            J.attributeArray("inputs", [&] {
              for (const std::string &S : RG.Inputs)
                J.value(S);
            });
            J.attributeArray("outputs", [&] {
              for (const std::string &S : RG.Outputs)
                J.value(S);
            });
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
              J.attribute("tp", C.TP);
              J.attribute("ep", C.EP);
            });
            J.attributeObject("groups", [&] {
              for (const char *G : {"tp", "pp", "dp", "ep", "dp_ep"})
                J.attributeArray(G, [&] {
                  for (unsigned M : getGroupRanks(P, G, Rank))
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

static void eventJSON(json::OStream &J, const ScheduleEvent &E) {
  J.object([&] {
    J.attribute("kind", E.Kind);
    if (!E.Op.empty())
      J.attribute("op", E.Op);
    if (E.MicroBatch >= 0)
      J.attribute("micro_batch", E.MicroBatch);
    if (E.Chunk >= 0)
      J.attribute("chunk", E.Chunk);
    J.attribute("start_s", E.StartS);
    J.attribute("end_s", E.EndS);
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

Error writeSchedule(const ShardedProgram &SP, StringRef Mode, StringRef Path) {
  std::unique_ptr<raw_fd_ostream> OS;
  if (Error E = openFile(Path, OS))
    return E;
  {
    json::OStream J(*OS, 1);
    J.object([&] {
      J.attribute("format_version", 1);
      J.attribute("mode", Mode);
      J.attribute("step_time_s", SP.ScheduleStepS);
      J.attributeArray("ranks", [&] {
        for (const RankSchedule &RS : SP.Schedule)
          J.object([&] {
            J.attribute("rank", RS.Rank);
            J.attributeArray("events", [&] {
              for (const ScheduleEvent &E : RS.Events)
                eventJSON(J, E);
            });
          });
      });
    });
  }
  *OS << "\n";
  return closeFile(Path, *OS);
}

Error writeTrace(const ShardedProgram &SP, StringRef Path) {
  std::unique_ptr<raw_fd_ostream> OS;
  if (Error E = openFile(Path, OS))
    return E;
  static const char *const Streams[] = {"compute", "tp", "ep", "p2p", "dp"};
  auto Tid = [](StringRef S) {
    for (unsigned I = 0; I < 5; ++I)
      if (S == Streams[I])
        return I + 1;
    return 6u;
  };
  {
    json::OStream J(*OS);
    J.object([&] {
      J.attribute("displayTimeUnit", "ms");
      J.attributeArray("traceEvents", [&] {
        for (const RankSchedule &RS : SP.Schedule) {
          J.object([&] {
            J.attribute("name", "process_name");
            J.attribute("ph", "M");
            J.attribute("pid", RS.Rank);
            J.attributeObject("args", [&] {
              J.attribute("name", "rank " + std::to_string(RS.Rank));
            });
          });
          for (unsigned I = 0; I < 5; ++I)
            J.object([&] {
              J.attribute("name", "thread_name");
              J.attribute("ph", "M");
              J.attribute("pid", RS.Rank);
              J.attribute("tid", I + 1);
              J.attributeObject("args",
                                [&] { J.attribute("name", Streams[I]); });
            });
          for (const ScheduleEvent &E : RS.Events)
            J.object([&] {
              std::string Name = E.Kind;
              if (E.MicroBatch >= 0)
                Name += " mb" + std::to_string(E.MicroBatch);
              J.attribute("name", Name);
              J.attribute("cat", E.Stream);
              J.attribute("ph", "X");
              J.attribute("pid", RS.Rank);
              J.attribute("tid", Tid(E.Stream));
              // Microseconds, as the format wants.
              J.attribute("ts", E.StartS * 1e6);
              J.attribute("dur", (E.EndS - E.StartS) * 1e6);
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
        }
      });
    });
  }
  *OS << "\n";
  return closeFile(Path, *OS);
}

} // namespace loom
