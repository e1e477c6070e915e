//===- Embedding.cpp - Embedding tables sharded across devices ------------===//
//
// Recognition, the per-table sharding choice and its cost (Embedding.h).
// The sharding types and the idea of choosing them per table by a cost
// model over storage tiers are TorchRec's (torchrec/distributed/planner,
// ShardingType TABLE_WISE / ROW_WISE / COLUMN_WISE, EmbeddingStorage per
// compute kernel); the model and the numbers are Loom's own.
//
//===----------------------------------------------------------------------===//
#include "loom/Planner/Embedding.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/IR/Graph.h"
#include "loom/Support/DataType.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>
#include <numeric>

using namespace llvm;

namespace loom {

/// Whether \p N reads \p W only as a row lookup's table.
static bool isLookupOf(const Node &N, const Value *W) {
  StringRef Op = N.getOpType();
  if (!N.getDomain().empty() && N.getDomain() != "ai.onnx")
    return false;
  if (Op != "Gather" && Op != "GatherElements")
    return false;
  if (N.getAttrInt("axis", 0) != 0 || N.getInput(0) != W)
    return false;
  for (unsigned I = 1; I < N.getNumInputs(); ++I)
    if (N.getInput(I) == W)
      return false;
  const Value *Ids = N.getInput(1);
  return Ids && Ids->Type.getNumElements().hasValue();
}

std::vector<EmbeddingTable> findEmbeddingTables(const Graph &G, int64_t Batch) {
  std::vector<EmbeddingTable> R;
  UseMap Uses = buildUseMap(G);
  double B = Batch > 0 ? (double)Batch : 1.0;
  for (const Value *W : G.getParameters()) {
    const TensorType &T = W->Type;
    if (T.getRank() != 2 || !T.isStatic() || !isFloatingPoint(T.Elem))
      continue;
    auto It = Uses.find(W);
    if (It == Uses.end() || It->second.empty())
      continue;
    if (!all_of(It->second, [&](const Node *N) { return isLookupOf(*N, W); }))
      continue;
    EmbeddingTable E;
    E.Weight = W;
    E.Name = W->getName().str();
    E.Rows = T.Dims[0].Size;
    E.Dim = T.Dims[1].Size;
    E.ElemBytes = getDataTypeSize(T.Elem);
    for (const Node *N : It->second) {
      if (is_contained(E.Lookups, N))
        continue;
      E.Lookups.push_back(N);
      double Ids = (double)*N->getInput(1)->Type.getNumElements();
      // GatherElements reads one element per index: a row is Dim of them.
      if (N->getOpType() == "GatherElements")
        Ids /= (double)E.Dim;
      E.LookupsPerSample += Ids / B;
      if (E.Layer < 0)
        E.Layer = N->Layer;
    }
    if (E.Rows < 2 || E.Dim < 1)
      continue;
    R.push_back(std::move(E));
  }
  return R;
}

double getTableBytesPerParam(const EmbeddingTable &T, bool Train) {
  // As assign-device-classes and the memory model count training state.
  return Train ? 16.0 : T.ElemBytes;
}

bool mustShardTable(const EmbeddingTable &T, const HardwareModel &HW,
                    bool Train) {
  double Bytes = T.getParams() * getTableBytesPerParam(T, Train);
  for (const char *Tier : {"hbm", "host", "ssd"})
    if (const MemoryLevel *L = HW.getMemory(Tier))
      if (Bytes <= L->getUsableCapacity().value())
        return false;
  return true;
}

bool isShardedTable(const EmbeddingTable &T, EmbeddingMode Mode,
                    const HardwareModel &HW, bool Train) {
  return Mode != EmbeddingMode::Auto || mustShardTable(T, HW, Train);
}

double getTierGranule(MemoryTier T) {
  switch (T) {
  case MemoryTier::HBM:
    // [assume] a 64 B HBM burst (two 32 B sectors) per random row access.
    return 64;
  case MemoryTier::Host:
    // [assume] reads of host DRAM over PCIe in 64 B cache lines.
    return 64;
  case MemoryTier::SSD:
    // [assume] NVMe reads whole 4 KiB logical blocks.
    return 4096;
  }
  return 64;
}

namespace {
struct Tier {
  MemoryTier T;
  bool Present = false;
  double Bandwidth = 0, Latency = 0, Free = 0;
  /// Seconds to access \p N rows of \p RowBytes each, once per micro-batch.
  double access(double N, double RowBytes) const {
    if (N <= 0)
      return 0;
    double G = getTierGranule(T);
    double Read = std::ceil(RowBytes / G) * G;
    return Latency + N * Read / Bandwidth;
  }
};

struct Option {
  EmbeddingShard S;
  /// Ranks (group indices) that hold the shard.
  std::vector<unsigned> Ranks;
  double Score = 0;
};

/// planEmbeddings' state: the tiers and, per tier and group rank, what the
/// tables placed so far use and take.
class TablePlacer {
public:
  TablePlacer(const EmbeddingInputs &In, const HardwareModel &HW, unsigned N)
      : In(In), HW(HW), N(N), Used(3, std::vector<double>(N, 0.0)), Fwd(N, 0.0),
        Upd(N, 0.0) {
    readTiers();
  }

  /// Places \p T by the cheapest of the sharding kinds In.Mode allows;
  /// false (with \p Out holding the reasons) when none fits.
  bool place(const EmbeddingTable &T, EmbeddingShard &Out);
  /// The group's totals over the tables placed (\p Placed).
  void finish(EmbeddingCost &E, ArrayRef<EmbeddingShard> Chosen,
              const std::vector<bool> &Placed) const;

private:
  void readTiers();
  /// The kinds In.Mode allows, in the order they are tried.
  SmallVector<EmbShardKind, 3> getKinds() const;
  /// \p T sharded as \p K: its shard, tier, lookup, update and exchange
  /// times; None (a reason added to \p Rejected) when it fits no tier.
  Optional<Option> cost(const EmbeddingTable &T, EmbShardKind K,
                        std::vector<std::string> &Rejected) const;
  double coll(CollectiveKind K, double Bytes) const {
    return N > 1 && Bytes > 0 ? collectiveTime(K, Bytes, In.Shape, HW).Seconds
                              : 0.0;
  }

  static constexpr const char *Names[3] = {"hbm", "host", "ssd"};
  const EmbeddingInputs &In;
  const HardwareModel &HW;
  unsigned N;
  Tier Tiers[3];
  std::vector<std::vector<double>> Used;
  std::vector<double> Fwd, Upd;
};

constexpr const char *TablePlacer::Names[3];

void TablePlacer::readTiers() {
  const MemoryTier Ts[3] = {MemoryTier::HBM, MemoryTier::Host, MemoryTier::SSD};
  const double Free[3] = {In.HBMFree, In.HostFree, In.SSDFree};
  for (unsigned I = 0; I < 3; ++I) {
    Tiers[I].T = Ts[I];
    if (const MemoryLevel *L = HW.getMemory(Names[I])) {
      Tiers[I].Present = L->Bandwidth.value() > 0;
      Tiers[I].Bandwidth = L->Bandwidth.value();
      Tiers[I].Latency = L->Latency ? L->Latency->value() : 0.0;
      Tiers[I].Free = std::max(0.0, Free[I]);
    }
  }
}

SmallVector<EmbShardKind, 3> TablePlacer::getKinds() const {
  switch (In.Mode) {
  case EmbeddingMode::Auto:
    return {EmbShardKind::Row, EmbShardKind::Col, EmbShardKind::Table};
  case EmbeddingMode::Table:
    return {EmbShardKind::Table};
  case EmbeddingMode::Row:
    return {EmbShardKind::Row};
  case EmbeddingMode::Col:
    return {EmbShardKind::Col};
  }
  return {};
}

Optional<Option> TablePlacer::cost(const EmbeddingTable &T, EmbShardKind K,
                                   std::vector<std::string> &Rejected) const {
  double BPP = getTableBytesPerParam(T, In.Train);
  double L = T.LookupsPerSample * In.MicroBatch; // per rank
  Option O;
  EmbeddingShard &S = O.S;
  S.Table = T.Name;
  S.Rows = T.Rows;
  S.Dim = T.Dim;
  S.Kind = K;
  std::string KN = getEmbShardKindName(K).str();
  if (K == EmbShardKind::Col && T.Dim % N) {
    Rejected.push_back(KN + ": dim " + std::to_string(T.Dim) +
                       " is not divisible by " + std::to_string(N));
    return None;
  }
  S.Shards = K == EmbShardKind::Table ? 1 : N;
  S.ShardRows = K == EmbShardKind::Row ? (T.Rows + N - 1) / N : T.Rows;
  S.ShardCols = K == EmbShardKind::Col ? T.Dim / N : T.Dim;
  S.ShardBytes = (double)S.ShardRows * S.ShardCols * BPP;
  if (K == EmbShardKind::Table) {
    // The rank with the fewest table bytes so far, lowest first.
    unsigned Best = 0;
    double BestBytes = INFINITY;
    for (unsigned R = 0; R < N; ++R) {
      double B = Used[0][R] + Used[1][R] + Used[2][R];
      if (B < BestBytes) {
        BestBytes = B;
        Best = R;
      }
    }
    S.Owner = Best;
    O.Ranks = {Best};
  } else {
    O.Ranks.resize(N);
    std::iota(O.Ranks.begin(), O.Ranks.end(), 0);
  }
  int Chosen = -1;
  for (unsigned I = 0; I < 3 && Chosen < 0; ++I) {
    if (!Tiers[I].Present)
      continue;
    if (all_of(O.Ranks, [&](unsigned R) {
          return Used[I][R] + S.ShardBytes <= Tiers[I].Free;
        }))
      Chosen = I;
  }
  if (Chosen < 0) {
    std::string Why = KN + ": a shard of " + formatBytes(Bytes(S.ShardBytes)) +
                      " fits no tier";
    for (unsigned I = 0; I < 3; ++I)
      if (Tiers[I].Present)
        Why += std::string(I ? "," : " (free") + " " + Names[I] + " " +
               formatBytes(Bytes(std::max(
                   0.0, Tiers[I].Free - *std::max_element(Used[I].begin(),
                                                          Used[I].end()))));
    Rejected.push_back(Why + ")");
    return None;
  }
  const Tier &Ti = Tiers[Chosen];
  S.Tier = Ti.T;
  // Row-wise: each rank sees its 1/N of the group's N * L ids; table-
  // and column-wise: the holder looks up all of them.
  S.Lookups = K == EmbShardKind::Row ? L : L * N;
  S.LookupS = Ti.access(S.Lookups, S.ShardCols * T.ElemBytes);
  // The sparse update reads and writes the rows' training state.
  S.UpdateS = In.Train ? 2 * Ti.access(S.Lookups, S.ShardCols * BPP) : 0.0;
  // Exchange: ids all-gathered (the per-rank output: the group's ids),
  // then the embeddings of the group's micro-batch reduce-scattered
  // (row, table: per-rank input N * L rows of Dim) or all-to-all'ed
  // back (col: per-rank input N * L rows of Dim / N).
  S.IdBytes = N > 1 ? N * L * 8.0 : 0.0;
  S.EmbBytes = N > 1 ? N * L * S.ShardCols * T.ElemBytes : 0.0;
  CollectiveKind EK = K == EmbShardKind::Col ? CollectiveKind::AllToAll
                                             : CollectiveKind::ReduceScatter;
  S.ExchangeFwdS =
      coll(CollectiveKind::AllGather, S.IdBytes) + coll(EK, S.EmbBytes);
  // Backward: the gradient of a reduce-scatter is an all-gather whose
  // per-rank output is the same N * L rows; an all-to-all's is one.
  if (In.Train)
    S.ExchangeBwdS = coll(K == EmbShardKind::Col ? CollectiveKind::AllToAll
                                                 : CollectiveKind::AllGather,
                          S.EmbBytes);
  double Busy = 0;
  for (unsigned R : O.Ranks)
    Busy = std::max(Busy, Fwd[R] + Upd[R] + S.LookupS + S.UpdateS);
  O.Score = Busy + S.ExchangeFwdS + S.ExchangeBwdS;
  S.Score = O.Score;
  // Nearer tiers first on equal time (an SSD shard is never better).
  O.Score += 1e-15 * Chosen;
  return O;
}

bool TablePlacer::place(const EmbeddingTable &T, EmbeddingShard &Out) {
  std::vector<Option> Opts;
  std::vector<std::string> Rejected;
  for (EmbShardKind K : getKinds())
    if (Optional<Option> O = cost(T, K, Rejected))
      Opts.push_back(std::move(*O));
  if (Opts.empty()) {
    Out = EmbeddingShard();
    Out.Table = T.Name;
    Out.Rows = T.Rows;
    Out.Dim = T.Dim;
    Out.Rejected = Rejected;
    return false;
  }
  unsigned Best = 0;
  for (unsigned I = 1; I < Opts.size(); ++I)
    if (Opts[I].Score < Opts[Best].Score)
      Best = I;
  for (unsigned I = 0; I < Opts.size(); ++I)
    if (I != Best)
      Rejected.push_back(getEmbShardKindName(Opts[I].S.Kind).str() + " " +
                         getMemoryTierName(Opts[I].S.Tier).str() + " " +
                         formatDuration(Seconds(Opts[I].S.Score)));
  Option &O = Opts[Best];
  unsigned TierIdx = O.S.Tier == MemoryTier::HBM    ? 0
                     : O.S.Tier == MemoryTier::Host ? 1
                                                    : 2;
  for (unsigned R : O.Ranks) {
    Used[TierIdx][R] += O.S.ShardBytes;
    Fwd[R] += O.S.LookupS;
    Upd[R] += O.S.UpdateS;
  }
  O.S.Rejected = std::move(Rejected);
  Out = std::move(O.S);
  return true;
}

void TablePlacer::finish(EmbeddingCost &E, ArrayRef<EmbeddingShard> Chosen,
                         const std::vector<bool> &Placed) const {
  double ExF = 0, ExB = 0;
  for (unsigned I = 0; I < Chosen.size(); ++I)
    if (Placed[I]) {
      ExF += Chosen[I].ExchangeFwdS;
      ExB += Chosen[I].ExchangeBwdS;
    }
  E.HBMBytes = *std::max_element(Used[0].begin(), Used[0].end());
  E.HostBytes = *std::max_element(Used[1].begin(), Used[1].end());
  E.SSDBytes = *std::max_element(Used[2].begin(), Used[2].end());
  E.ForwardS = *std::max_element(Fwd.begin(), Fwd.end()) + ExF;
  E.BackwardS = *std::max_element(Upd.begin(), Upd.end()) + ExB;
  E.ExchangeS = ExF + ExB;
  E.ExchangeFwdS = ExF;
  E.ExchangeBwdS = ExB;
  E.LookupS = E.ForwardS - ExF;
  E.UpdateS = E.BackwardS - ExB;
}
} // namespace

EmbeddingCost planEmbeddings(ArrayRef<EmbeddingTable> Tables,
                             const EmbeddingInputs &In,
                             const HardwareModel &HW) {
  EmbeddingCost E;
  E.Group = std::max(1u, In.Group);
  E.Mode = In.Mode;
  if (Tables.empty())
    return E;
  TablePlacer TP(In, HW, E.Group);

  // Hottest per byte first, so the nearest tier holds the most lookups.
  std::vector<unsigned> Order(Tables.size());
  std::iota(Order.begin(), Order.end(), 0);
  llvm::stable_sort(Order, [&](unsigned A, unsigned B) {
    double HA = Tables[A].LookupsPerSample / Tables[A].getParams(),
           HB = Tables[B].LookupsPerSample / Tables[B].getParams();
    if (HA != HB)
      return HA > HB;
    return Tables[A].Name < Tables[B].Name;
  });
  std::vector<EmbeddingShard> Chosen(Tables.size());
  std::vector<bool> Placed(Tables.size(), false);
  for (unsigned TI : Order) {
    Placed[TI] = TP.place(Tables[TI], Chosen[TI]);
    if (!Placed[TI]) {
      E.Fits = false;
      if (E.Why.empty()) {
        E.Why = "table '" + Tables[TI].Name + "': ";
        for (unsigned I = 0; I < Chosen[TI].Rejected.size(); ++I)
          E.Why += (I ? "; " : "") + Chosen[TI].Rejected[I];
      }
    }
  }
  TP.finish(E, Chosen, Placed);
  for (EmbeddingShard &S : Chosen)
    E.Tables.push_back(std::move(S));
  return E;
}

void mergeEmbeddingCost(EmbeddingCost &Into, EmbeddingCost From) {
  if (Into.empty()) {
    Into = std::move(From);
    return;
  }
  for (EmbeddingShard &S : From.Tables)
    Into.Tables.push_back(std::move(S));
  Into.HBMBytes = std::max(Into.HBMBytes, From.HBMBytes);
  Into.HostBytes = std::max(Into.HostBytes, From.HostBytes);
  Into.SSDBytes = std::max(Into.SSDBytes, From.SSDBytes);
  Into.ForwardS += From.ForwardS;
  Into.BackwardS += From.BackwardS;
  Into.ExchangeS += From.ExchangeS;
  Into.ExchangeFwdS += From.ExchangeFwdS;
  Into.ExchangeBwdS += From.ExchangeBwdS;
  Into.LookupS += From.LookupS;
  Into.UpdateS += From.UpdateS;
  if (!From.Fits && Into.Fits) {
    Into.Fits = false;
    Into.Why = From.Why;
  }
}

} // namespace loom
