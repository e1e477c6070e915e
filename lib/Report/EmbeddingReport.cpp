//===- EmbeddingReport.cpp - Sharded embedding tables' reports ------------===//
//
// See EmbeddingReport.h.
//
//===----------------------------------------------------------------------===//
#include "loom/Report/EmbeddingReport.h"
#include "loom/Support/Units.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>

using namespace llvm;

namespace loom {

static std::string fmtS(double S) { return formatDuration(Seconds(S)); }

void printEmbeddingCost(const EmbeddingCost &E, raw_ostream &OS) {
  if (E.empty())
    return;
  OS << "  embedding tables over dp=" << E.Group
     << " (emb=" << getEmbeddingModeName(E.Mode) << "): " << E.Tables.size()
     << " sharded; per rank hbm " << formatBytes(Bytes(E.HBMBytes)) << ", host "
     << formatBytes(Bytes(E.HostBytes)) << ", ssd "
     << formatBytes(Bytes(E.SSDBytes)) << "; per micro-batch forward "
     << fmtS(E.ForwardS) << ", backward " << fmtS(E.BackwardS) << " (exchange "
     << fmtS(E.ExchangeS) << ")\n";
  if (!E.Fits)
    OS << "  embedding tables do not fit: " << E.Why << "\n";
  for (const EmbeddingShard &S : E.Tables) {
    OS << "    table '" << S.Table << "' " << S.Rows << " x " << S.Dim << ": ";
    if (S.ShardBytes <= 0) {
      OS << "no sharding fits\n";
      continue;
    }
    OS << getEmbShardKindName(S.Kind) << "-wise";
    if (S.Kind == EmbShardKind::Table)
      OS << " on group rank " << S.Owner;
    else
      OS << ", " << S.Shards << " shards of " << S.ShardRows << " x "
         << S.ShardCols;
    OS << ", " << formatBytes(Bytes(S.ShardBytes)) << " each in "
       << getMemoryTierName(S.Tier) << "; " << (int64_t)std::llround(S.Lookups)
       << " lookups " << fmtS(S.LookupS);
    if (S.UpdateS > 0)
      OS << ", update " << fmtS(S.UpdateS);
    OS << "; exchange ids " << formatBytes(Bytes(S.IdBytes)) << " + rows "
       << formatBytes(Bytes(S.EmbBytes)) << " " << fmtS(S.ExchangeFwdS);
    if (S.ExchangeBwdS > 0)
      OS << ", backward " << fmtS(S.ExchangeBwdS);
    if (!S.Rejected.empty()) {
      OS << " (not";
      for (unsigned I = 0; I < S.Rejected.size(); ++I)
        OS << (I ? "; " : " ") << S.Rejected[I];
      OS << ")";
    }
    OS << "\n";
  }
}

void explainEmbeddingCost(const EmbeddingCost &E, raw_ostream &OS) {
  if (E.empty())
    return;
  OS << "explain: embedding tables are sharded over the dp group (" << E.Group
     << " ranks), each choice by its busiest rank's lookups and "
     << "update plus the exchange per micro-batch\n";
  for (const EmbeddingShard &S : E.Tables) {
    OS << "explain: table '" << S.Table << "': ";
    if (S.ShardBytes <= 0)
      OS << "nothing fits";
    else
      OS << getEmbShardKindName(S.Kind) << "-wise in "
         << getMemoryTierName(S.Tier) << " " << fmtS(S.Score);
    for (const std::string &R : S.Rejected)
      OS << "; " << R;
    OS << "\n";
  }
}

json::Value embeddingCostToJSON(const EmbeddingCost &E) {
  json::Array Tables;
  for (const EmbeddingShard &S : E.Tables) {
    json::Object O{{"name", S.Table}, {"rows", S.Rows}, {"dim", S.Dim}};
    if (S.ShardBytes > 0) {
      O["sharding"] = getEmbShardKindName(S.Kind).str();
      O["tier"] = getMemoryTierName(S.Tier).str();
      O["shards"] = (int64_t)S.Shards;
      if (S.Kind == EmbShardKind::Table)
        O["owner"] = (int64_t)S.Owner;
      O["shard_rows"] = S.ShardRows;
      O["shard_cols"] = S.ShardCols;
      O["shard_bytes"] = S.ShardBytes;
      O["lookups_per_microbatch"] = S.Lookups;
      O["lookup_s"] = S.LookupS;
      O["update_s"] = S.UpdateS;
      O["id_bytes"] = S.IdBytes;
      O["embedding_bytes"] = S.EmbBytes;
      O["exchange_forward_s"] = S.ExchangeFwdS;
      O["exchange_backward_s"] = S.ExchangeBwdS;
    }
    json::Array Rej;
    for (const std::string &R : S.Rejected)
      Rej.push_back(R);
    O["not_chosen"] = std::move(Rej);
    Tables.push_back(std::move(O));
  }
  json::Object R{{"group", (int64_t)E.Group},
                 {"mode", getEmbeddingModeName(E.Mode).str()},
                 {"hbm_bytes", E.HBMBytes},
                 {"host_bytes", E.HostBytes},
                 {"ssd_bytes", E.SSDBytes},
                 {"forward_s", E.ForwardS},
                 {"backward_s", E.BackwardS},
                 {"exchange_s", E.ExchangeS},
                 {"fits", E.Fits},
                 {"tables", std::move(Tables)}};
  if (!E.Fits)
    R["why"] = E.Why;
  return std::move(R);
}

} // namespace loom
