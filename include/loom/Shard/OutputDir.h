//===- OutputDir.h - Writing and checking the output directory -*- C++ -*-===//
//
// The files of DESIGN §8 (format: include/loom/Shard/OutputFormat.md) and the
// invariant checker -o runs before writing (unless --no-verify-output).
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SHARD_OUTPUTDIR_H
#define LOOM_SHARD_OUTPUTDIR_H

#include "loom/Plan/PlanCost.h"
#include "loom/Shard/Sharding.h"

namespace loom {

struct ManifestInfo {
  std::string Model, Hardware, Mode;
  int64_t Batch = 0;
  PlanCost Predicted;
  bool PerRank = false;
};

/// What trace.json shows.
struct TraceOptions {
  /// Every rank and micro-batch (--trace=full); otherwise DP replica 0 and
  /// the first and last EdgeMicroBatches micro-batches.
  bool Full = false;
  unsigned EdgeMicroBatches = 4;
};

std::string getRoleGraphPath(const RoleGraph &R);
const RoleGraph *findRole(llvm::ArrayRef<RoleGraph> Roles,
                          const RankCoords &C);

/// graphs/ROLE.onnx + graphs/ROLE.bin per role; with \p PerRank also
/// graphs/rankN.onnx sharing the role's data file.
llvm::Error writeGraphs(const ShardedProgram &SP, llvm::StringRef Dir,
                        bool PerRank);
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
std::vector<std::string> verifyShardedProgram(ShardedProgram &SP,
                                              const PlanCost &Cost,
                                              double HBMBytes);

} // namespace loom

#endif
