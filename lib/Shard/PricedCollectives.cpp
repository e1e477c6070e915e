//===- PricedCollectives.cpp - Priced collectives against emitted ones ----===//
//
// Both sides as multisets of (group, kind, bytes rounded to an integer) per
// pipeline device: the role graph's hccl collectives of groups "tp", "ep",
// "cp" (Ulysses' all-to-alls, the ring's sends) and "dp" (the exchanges of
// embedding tables sharded over dp) in node
// order (getHcomWireBytes, the schedule's convention) and the priced ones
// of the layers its chunks hold (ShardingResult::ChunkLayers; chunk c runs
// on device c % pp).
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/PricedCollectives.h"
#include "loom/Shard/Rules.h"
#include "loom/Shard/Schedule.h"
#include "loom/Shard/Sharding.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

using namespace llvm;

namespace loom {

namespace {

/// Per (group, kind, bytes): how many, and the values they act on in
/// order.
using CommKey = std::tuple<std::string, CollectiveKind, int64_t>;
using CommCounts = std::map<CommKey, std::vector<std::string>>;

void addComm(CommCounts &C, StringRef Group, CollectiveKind K, double Bytes,
             StringRef On) {
  C[{Group.str(), K, (int64_t)std::llround(Bytes)}].push_back(On.str());
}

/// What \p A has beyond \p B, as "2 x allreduce of 512 B (on 'x', 'y'),
/// ...": the values named (at most three) are those A's collectives of
/// that kind and size act on and B's do not, else all of A's.
std::string describeExcess(const CommCounts &A, const CommCounts &B) {
  std::string S;
  raw_string_ostream OS(S);
  for (const auto &KV : A) {
    auto It = B.find(KV.first);
    size_t Have = KV.second.size();
    size_t Extra =
        Have - (It == B.end() ? 0 : std::min(Have, It->second.size()));
    if (!Extra)
      continue;
    OS << (S.empty() ? "" : ", ") << Extra << " x " << std::get<0>(KV.first)
       << " " << getScheduleEventKind(std::get<1>(KV.first)) << " of "
       << std::get<2>(KV.first) << " B (on ";
    // Those B does not act on first (role graphs keep the model's names).
    std::vector<std::string> Names;
    std::vector<std::string> Rest =
        It == B.end() ? std::vector<std::string>() : It->second;
    for (const std::string &N : KV.second) {
      auto R = llvm::find(Rest, N);
      if (R == Rest.end())
        Names.push_back(N);
      else
        Rest.erase(R);
    }
    if (Names.empty())
      Names = KV.second;
    for (size_t I = 0; I < Names.size() && I < 3; ++I)
      OS << (I ? ", '" : "'") << Names[I] << "'";
    OS << (Names.size() > 3 ? ", ...)" : ")");
  }
  OS.flush();
  return S.empty() ? "none" : S;
}

/// Whether \p A and \p B hold as many collectives of each kind and size.
bool sameCounts(const CommCounts &A, const CommCounts &B) {
  return A.size() == B.size() &&
         std::equal(
             A.begin(), A.end(), B.begin(), [](const auto &X, const auto &Y) {
               return X.first == Y.first && X.second.size() == Y.second.size();
             });
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
    std::set<std::string> Once;
    for (unsigned C = RG.PP; C < R.ChunkLayers.size(); C += PP)
      for (unsigned L = Start[C]; L < Start[C + 1]; ++L)
        for (const PricedCollective &X : PricedOfLayer(L))
          if (X.Once.empty() || Once.insert(X.Once).second)
            addComm(Priced, X.Group, X.Kind, X.Bytes, X.On);
    for (const auto &NP : RG.M->getGraph().getNodes()) {
      const Node &N = *NP;
      // A group of one rank moves nothing and is priced nothing (a table
      // sharded over dp = 1 keeps its exchange ops in the graph).
      StringRef Group = N.getAttrString("group", "");
      unsigned Size = Group == "tp"   ? getTPSize(R)
                      : Group == "ep" ? R.Plan.EP
                      : Group == "dp" ? R.Plan.DP
                      : Group == "cp" ? getCPSize(R)
                                      : 0;
      if (N.getDomain() != "hccl" || Size <= 1)
        continue;
      CollectiveKind K = getHcomCollectiveKind(N.getOpType());
      // Under cp the layers price Ulysses' all-to-alls and the ring's
      // sends (each transfer once: its HcomSend); the outputs made whole
      // for the caller (the logits gathered over the sequence) and the
      // loss's scalar sums are priced by no layer. Pipeline transfers are
      // the schedule's, not a layer's.
      bool CPSend = Group == "cp" && N.getOpType() == "HcomSend";
      if (Group == "cp" && K != CollectiveKind::AllToAll && !CPSend)
        continue;
      if (K == CollectiveKind::SendRecv && !CPSend)
        continue;
      addComm(Emitted, Group, K,
              getHcomWireBytes(N, R.CommFloatType, R.ExpectedShapes),
              N.getInput(0) ? N.getInput(0)->getName() : N.getName());
    }
    if (sameCounts(Priced, Emitted))
      continue;
    Problems.push_back(
        "pipeline device " + std::to_string(RG.PP) + " (" + RG.FileName +
        "): priced, not emitted: " + describeExcess(Priced, Emitted) +
        "; emitted, not priced: " + describeExcess(Emitted, Priced));
  }
  return Problems;
}

} // namespace loom
