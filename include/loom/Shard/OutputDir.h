//===- OutputDir.h - Writing and checking the output directory -*- C++ -*-===//
//
// The files of DESIGN §8 (format: include/loom/Shard/OutputFormat.md) and the
// invariant checker -o runs before writing (unless --no-verify-output).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SHARD_OUTPUTDIR_H
#define LOOM_SHARD_OUTPUTDIR_H

#include "loom/Plan/Precision.h"
#include "loom/Plan/PredictedCost.h"
#include "loom/Shard/Sharding.h"
#include "llvm/Support/JSON.h"
#include <functional>
#include <utility>

namespace loom {

/// --mode serve: what the manifest says of the serving plan, priced by the
/// planner (the caller fills it: forEachServingPredicted, Serving.h).
struct ManifestServing {
  /// predicted{}'s serving keys and values, in order (TTFT, TPOT, output
  /// tokens/s, max concurrency, KV cache bytes).
  std::vector<std::pair<std::string, llvm::json::Value>> Predicted;
  /// The graphs are one replica: how many run, and the batch of each.
  unsigned Replicas = 1;
  int64_t BatchPerReplica = 0;
};

struct ManifestInfo {
  std::string Model, Hardware, Mode;
  int64_t Batch = 0;
  PlanCost Predicted;
  bool PerRank = false;
  /// --mode serve: the serving plan (the graphs are one replica of it);
  /// predicted{} gains its TTFT, TPOT, output tokens/s, max concurrency and
  /// KV cache bytes.
  llvm::Optional<ManifestServing> Serving;
  /// The precision recipe the prediction is for (loom/Plan/Precision.h).
  llvm::Optional<PrecisionRecipe> Precision;
};

/// The manifest's format_version (include/loom/Shard/OutputFormat.md).
constexpr int OutputFormatVersion = 1;

/// Every top-level entry emit writes into an output directory. --force
/// replaces only a directory holding nothing else (with Loom's manifest);
/// a writer of a new top-level file adds it here.
llvm::ArrayRef<llvm::StringRef> getOutputDirEntries();

/// Whether \p Dir may become the output directory, checked before any work
/// so that a refusal costs nothing: a path that does not exist may;
/// an existing one only with \p Force, and then only an empty directory or
/// one Loom wrote (a manifest.json with Loom's format_version and nothing
/// at the top level but getOutputDirEntries()). Anything else (a file, a
/// directory with other entries, the current directory or one above it,
/// the home directory or one above it, a mount point, /) is an error
/// naming the path and why.
llvm::Error checkOutputDir(llvm::StringRef Dir, bool Force);

/// Makes the complete directory \p NewDir (a sibling of \p Dir) the output
/// directory \p Dir. An existing \p Dir (already accepted by
/// checkOutputDir) is exchanged with the new one in one atomic rename and
/// removed only afterwards, so a crash leaves the old or the new output,
/// never neither.
llvm::Error installOutputDir(llvm::StringRef NewDir, llvm::StringRef Dir);

/// What the output directory \p Dir written for \p SP holds, for the
/// closing line: "N graphs (SIZE of weights), manifest, schedule, trace,
/// report" (the graph files and entries found in \p Dir; SIZE the weight
/// data of the role graphs, without the data files' alignment padding, 0 B
/// for shape-only weights).
std::string describeOutputDir(const ShardedProgram &SP, llvm::StringRef Dir);
/// What trace.json shows.
struct TraceOptions {
  /// Every rank and micro-batch (--trace=full); otherwise DP replica 0 and
  /// the first and last EdgeMicroBatches micro-batches.
  bool Full = false;
  unsigned EdgeMicroBatches = 4;
};

std::string getRoleGraphPath(const RoleGraph &R);
const RoleGraph *findRole(llvm::ArrayRef<RoleGraph> Roles, const RankCoords &C);

/// graphs/ROLE.onnx + graphs/ROLE.bin per role; with \p PerRank also
/// graphs/rankN.onnx sharing the role's data file. \p Progress, when set,
/// hears "graphs N/M" and "weights N/M files" (from any thread).
llvm::Error
writeGraphs(const ShardedProgram &SP, llvm::StringRef Dir, bool PerRank,
            const std::function<void(const std::string &)> &Progress = {});
llvm::Error writeManifest(const ShardedProgram &SP, const ManifestInfo &Info,
                          llvm::StringRef Path);
llvm::Error writeSchedule(const ShardedProgram &SP, llvm::StringRef Mode,
                          llvm::StringRef Path);
llvm::Error writeTrace(const ShardedProgram &SP, const TraceOptions &TO,
                       llvm::StringRef Path);

/// The invariants of an emitted program (emit checks them unless
/// --no-verify-output): every HcomSend has one matching HcomReceive (tag,
/// shape, dtype, peer); every collective appears on every member of its group
/// in the same order; the groups are consistent (each rank in its own groups,
/// members agree); predicted memory per rank fits \p HBMBytes; schedule events
/// respect their dependencies; every graph passes onnx::checker and ONNX shape
/// inference agrees with Loom's local shapes. Returns the problems found,
/// one line each (empty: all hold).
std::vector<std::string>
verifyShardedProgram(ShardedProgram &SP, const PlanCost &Cost, double HBMBytes);

} // namespace loom

#endif
