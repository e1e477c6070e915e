//===- SearchInternal.h - The Searcher the search files share ---*- C++ -*-===//
//
// Private to lib/Planner: the parallelism search's candidates (LayerPrefix,
// Candidate) and the Searcher that enumerates, bounds and ranks them
// (include/loom/Planner/Search.h is the public side). The Searcher's parts
// live in separate files, each implementing some of its members:
// SearchEnumeration.cpp the candidates, SearchBounds.cpp their bounds,
// SearchRanking.cpp the visit in bound order and the ranking, Search.cpp the
// entry points that run it. What only one of them uses stays local to it:
// Ranking and BaseStageCache are only declared here, for the members that
// take them, and defined in SearchRanking.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_LIB_PLANNER_SEARCHINTERNAL_H
#define LOOM_LIB_PLANNER_SEARCHINTERNAL_H

#include "loom/Plan/IdleDevices.h"
#include "loom/Planner/CandidateOrder.h"
#include "loom/Planner/Search.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace loom {
namespace search_detail {

/// Per-layer compute prefix sums at one (tp, mb, sp).
struct LayerPrefix {
  std::vector<PlanEvaluator::LayerTime> Layers;
  std::vector<double> F, B, A; // forward, backward, attention forward
  /// The ep communication's lower bound (LayerTime::EPCommS): the step
  /// bound's, not the stage balance's.
  std::vector<double> E;
};

struct Candidate {
  ParallelPlan Plan;
  /// Layers per stage (the even split or the balanced one).
  const std::vector<unsigned> *Counts = nullptr;
  const LayerPrefix *Prefix = nullptr;
  /// Of a base: the step bound before the tail (the pipeline's part), and
  /// its placements' tail and memory bounds (a candidate's bounds are
  /// read from there, CandidateOrder.h).
  double PipeBound = 0;
  const PlacementTable *Places = nullptr;
  /// The candidates that differ only in offload share a base (its index
  /// among the enumerated plans): consecutive in enumeration.
  unsigned Base = 0;
  /// The bases that differ only in the mesh order share a family (the
  /// index of the first, so below the number of bases): the order changes
  /// communication, not memory.
  unsigned Family = 0;
};
// Two cache lines: the search holds one per plan (557k for the 10T MoE at
// a training batch) and walks them in order several times.
static_assert(sizeof(Candidate) <= 128, "a base is two cache lines");

/// The plans ranked so far, and the stage costs a plan's offload
/// placements share (both SearchRanking.cpp).
struct Ranking;
class BaseStageCache;

class Searcher {
public:
  /// Reads the memory tiers and counts the parameters the bounds use
  /// (SearchBounds.cpp).
  Searcher(const PlanEvaluator &Eval, const Graph &G, const SearchSpace &Space,
           const HardwareModel &HW, const EvaluatorOptions &EO,
           const SearchOptions &Opts);

  /// Every candidate, in enumeration order (each base's placements in a
  /// row).
  void enumerate(std::vector<Candidate> &Out);
  /// One candidate per base (the plan without offload); its placements are
  /// Offs.
  void enumerateBases(std::vector<Candidate> &Bases);
  /// The candidates at one (tp, pp, dp) and cp.
  void enumerateAtDegrees(const MeshDegrees &MD, unsigned CP,
                          const llvm::Optional<CommOverlap> &Ov,
                          std::vector<Candidate> &Out);
  /// Searches; when nothing fits, finds the memory floors unless
  /// \p Floors is false (addFloors then can, later).
  llvm::Expected<SearchResult> run(bool Floors = true);
  llvm::Error addFloors(SearchResult &R) const;
  /// Takes the plans \p Other enumerated (the same space and options but
  /// for the offload placements, which this searcher's Offloads give):
  /// moved, not copied (at a training batch the 10T MoE has hundreds of
  /// thousands); returnBases hands them back, bound to \p Other's
  /// placements again.
  void reuseBases(Searcher &Other);
  void returnBases(Searcher &Other);
  /// The offload placements enumerated (when --plan fixes none).
  std::vector<OffloadTiers> Offloads = {OffloadTiers()};

private:
  const LayerPrefix &getPrefix(unsigned TP, unsigned MB, bool SP, unsigned EP,
                               unsigned CP);
  const std::vector<unsigned> &getEvenCounts(unsigned PP);
  const std::vector<unsigned> *getBalancedCounts(const LayerPrefix &LP,
                                                 unsigned PP, Recompute RC);
  double pipelineBound(const Candidate &C) const;
  double tailBound(const ParallelPlan &P) const;
  double memoryBound(const ParallelPlan &P) const;
  double stageBound(const PlanCost &PC) const;
  std::string describeGroups(const ParallelPlan &P) const;
  llvm::Expected<llvm::Optional<PlanCost>>
  bestOnAllDevices(const std::vector<Candidate> &Bases) const;
  /// How a candidate's layers are split into stages: vpp, the layers per
  /// stage, and whether they are balanced on compute (not the even split).
  struct StageLayout {
    unsigned VPP;
    const std::vector<unsigned> *Counts;
    bool Balanced;
  };
  // The steps of enumerate().
  /// The stage layouts to try at \p PP stages and \p NMB micro-batches:
  /// --plan's stages, or the even split, the split balanced on \p LP's
  /// compute (at recompute \p RC), and each vpp Megatron-LM allows.
  llvm::SmallVector<StageLayout, 8>
  getStageLayouts(const LayerPrefix &LP,
                  const std::vector<unsigned> &EvenCounts, unsigned PP,
                  uint64_t NMB, Recompute RC);
  /// The bases of \p Proto (degrees, batch split, recompute, ZeRO and
  /// gradient precision set) on layout \p Lay: one per mesh order in
  /// \p Orders and overlap setting (each stands for its plan at every
  /// offload placement).
  void addCandidates(const ParallelPlan &Proto, const StageLayout &Lay,
                     const LayerPrefix &LP, llvm::ArrayRef<AxisOrder> Orders,
                     const llvm::Optional<CommOverlap> &Ov,
                     std::vector<Candidate> &Out) const;
  // The steps of run().
  void boundCandidates(std::vector<Candidate> &Bases);
  const PlacementTable &getPlacements(const ParallelPlan &P);
  /// Base \p B at its placement \p E.
  Candidate getCandidate(const std::vector<Candidate> &Bases, unsigned B,
                         const PlacementTable::Entry &E) const;
  /// Visits the candidates of \p Bases (those \p Take accepts) whose
  /// memory bound fits, in increasing (step bound, enumeration index)
  /// while \p Visit returns true; returns the item it stopped at, if any.
  template <typename TakeFn, typename VisitFn>
  llvm::Expected<llvm::Optional<CandidateQueue::Item>>
  visitInOrder(const std::vector<Candidate> &Bases, TakeFn Take,
               VisitFn Visit) const;
  /// Candidates over the memory bound that the visit reached before it
  /// stopped (all, without \p Stop): those before \p Last, the last
  /// candidate visited, and those after it up to Stop whose step bound
  /// does not exceed \p Thr, the threshold the visit stopped at.
  uint64_t
  countOverMemoryBefore(const std::vector<Candidate> &Bases,
                        const llvm::Optional<CandidateQueue::Item> &Stop,
                        const llvm::Optional<CandidateQueue::Item> &Last,
                        double Thr) const;
  /// A candidate visited: its base and placement.
  struct VisitedPlacement {
    unsigned Base;
    OffloadTiers Off;
  };
  llvm::Expected<bool> isDominatedTwin(const Candidate &C,
                                       const VisitedPlacement *Prev,
                                       bool PrevSimulated, unsigned LastRank,
                                       unsigned K, BaseStageCache &Cache) const;
  llvm::Expected<const PlanCost *> costStagesIfFits(const Candidate &C,
                                                    BaseStageCache &Cache,
                                                    PlanCost &Scratch) const;
  llvm::Error rankCandidates(const std::vector<Candidate> &Bases, Ranking &Rank,
                             SearchResult &R) const;
  llvm::Error rankAll(const std::vector<Candidate> &Bases, Ranking &Rank,
                      SearchResult &R) const;
  llvm::Error explainWinner(const std::vector<Candidate> &Bases,
                            const Ranking &Rank, SearchResult &R) const;
  llvm::Error findMemoryFloors(const std::vector<Candidate> &Bases,
                               SearchResult &R) const;

  const PlanEvaluator &Eval;
  const SearchSpace &Space;
  const HardwareModel &HW;
  const EvaluatorOptions &EO;
  const SearchOptions &Opts;
  /// Non-expert and expert parameters.
  double HBMUsable = 0, Reserved = 0, TotalParams = 0, ExpertParams = 0;
  /// Usable host DRAM and SSD per device (offload).
  double HostCap = 0, SSDCap = 0;
  /// Per device: HBM, PCIe to the host and NVMe bandwidth, and the host
  /// CPU's optimizer throughput (0 where the YAML gives none).
  double HBMBandwidth = 0, HostBandwidth = 0, SSDBandwidth = 0,
         HostUpdateBandwidth = 0;
  std::map<std::tuple<unsigned, unsigned, bool, unsigned, unsigned>,
           LayerPrefix>
      Prefixes;
  std::map<unsigned, std::vector<unsigned>> Even;
  std::map<std::tuple<const LayerPrefix *, unsigned, int>,
           std::unique_ptr<std::vector<unsigned>>>
      Balanced;
  /// The placements enumerated, and their bounds per (tp, pp, dp, ep,
  /// ZeRO stage, gradient precision).
  void setPlacements();
  std::vector<OffloadTiers> Offs;
  /// The bases of the last run (or those reuseBases took).
  std::vector<Candidate> Bases;
  bool HaveBases = false, Reused = false;
  /// Set while enumerate's first pass counts the bases instead of adding
  /// them.
  uint64_t *CountOnly = nullptr;
  std::map<
      std::tuple<unsigned, unsigned, unsigned, unsigned, unsigned, int, int>,
      PlacementTable>
      Tables;

public:
  uint64_t Partitions = 0;
  /// Offload placements per plan in the last enumeration.
  size_t NumPlacements = 1;
  /// The candidates of the bases bound last: their placements the
  /// framework can run.
  uint64_t NumCandidates = 0;
  /// Whether a plan's memory is the same at every mesh order: no plan
  /// shards an embedding table (their shards are placed by cost, which
  /// the order changes).
  bool OrderKeepsMemory = true;
};

} // namespace search_detail
} // namespace loom

#endif // LOOM_LIB_PLANNER_SEARCHINTERNAL_H
