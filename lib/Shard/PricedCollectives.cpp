//===- PricedCollectives.cpp - Priced collectives against emitted ones ----===//
//
// Both sides as multisets of (kind, bytes rounded to an integer) per
// pipeline device: the role graph's hccl collectives of group "tp" in node
// order (getHcomWireBytes, the schedule's convention) and the priced ones
// of the layers its chunks hold (ShardingResult::ChunkLayers; chunk c runs
// on device c % pp).
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/PricedCollectives.h"
#include "loom/Shard/Rules.h"
#include "loom/Shard/Schedule.h"
#include "loom/Shard/Sharding.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <map>

using namespace llvm;

namespace loom {

namespace {

using CommCounts = std::map<std::pair<CollectiveKind, int64_t>, unsigned>;

void addComm(CommCounts &C, CollectiveKind K, double Bytes) {
  ++C[{K, (int64_t)std::llround(Bytes)}];
}

/// What \p A has beyond \p B, as "2 x allreduce of 512 B, ...".
std::string describeExcess(const CommCounts &A, const CommCounts &B) {
  std::string S;
  raw_string_ostream OS(S);
  for (const auto &KV : A) {
    auto It = B.find(KV.first);
    unsigned Extra =
        KV.second - (It == B.end() ? 0 : std::min(KV.second, It->second));
    if (!Extra)
      continue;
    OS << (S.empty() ? "" : ", ") << Extra << " x "
       << getScheduleEventKind(KV.first.first) << " of " << KV.first.second
       << " B";
  }
  OS.flush();
  return S.empty() ? "none" : S;
}

} // namespace

std::vector<std::string> comparePricedCollectives(
    const ShardedProgram &SP,
    function_ref<std::vector<PricedCollective>(unsigned Layer)> PricedOfLayer) {
  const ShardingResult &R = SP.Sharding;
  unsigned PP = std::max(1u, R.Plan.PP);
  std::vector<unsigned> Start(R.ChunkLayers.size() + 1, 0);
  for (unsigned C = 0; C < R.ChunkLayers.size(); ++C)
    Start[C + 1] = Start[C] + R.ChunkLayers[C];
  std::vector<std::string> Problems;
  for (const RoleGraph &RG : SP.Roles) {
    // One role per pipeline device: the dp ranks of embedding shards
    // (RG.DP > 0) communicate as dp rank 0 does over tp.
    if (RG.TP || RG.EP || RG.DP > 0)
      continue;
    CommCounts Priced, Emitted;
    for (unsigned C = RG.PP; C < R.ChunkLayers.size(); C += PP)
      for (unsigned L = Start[C]; L < Start[C + 1]; ++L)
        for (const PricedCollective &X : PricedOfLayer(L))
          addComm(Priced, X.Kind, X.Bytes);
    for (const auto &NP : RG.M->getGraph().getNodes()) {
      const Node &N = *NP;
      if (N.getDomain() != "hccl" || N.getAttrString("group", "") != "tp")
        continue;
      CollectiveKind K = getHcomCollectiveKind(N.getOpType());
      if (K == CollectiveKind::SendRecv)
        continue;
      addComm(Emitted, K, getHcomWireBytes(N, R.CommFloatType));
    }
    if (Priced == Emitted)
      continue;
    Problems.push_back(
        "pipeline device " + std::to_string(RG.PP) + " (" + RG.FileName +
        "): priced, not emitted: " + describeExcess(Priced, Emitted) +
        "; emitted, not priced: " + describeExcess(Emitted, Priced));
  }
  return Problems;
}

} // namespace loom
