//===- KVCache.cpp - How the role graphs take and return the KV cache -----===//
//
// A decoder's cache inputs (past) and outputs (present), found by structure
// (include/loom/Analysis/KVCache.h), are held by each tp rank as the attention
// that reads them wants them: the step's K/V is column-split by heads
// (Megatron), the Concat that appends it to the past wants the past split
// the same way, so a past input arrives as this rank's heads and a present
// output leaves as them, with no gather (a serving runtime keeps each
// rank's slice where it is, step after step). With grouped-query attention
// the split is by KV heads, which the search makes tp divide; a cache whose
// attention runs replicated is replicated (the reason is recorded). Under
// pp the cache of a layer is an input and output of the stage owning the
// layer, which the role builder gives it as it does every model input.
//
//===----------------------------------------------------------------------===//
#include "loom/Analysis/KVCache.h"
#include "loom/Shard/Sharding.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/JSON.h"

using namespace llvm;

namespace loom {

void shardKVCache(ShardingResult &R) {
  R.KVCache.clear();
  const Graph &G = R.M->getGraph();
  std::vector<KVCacheTensor> Found = findKVCache(G);
  for (const KVCacheTensor &T : Found) {
    std::string Reason;
    if (R.Plan.TP > 1) {
      const NodeSharding &NS = R.Nodes.lookup(T.Attention);
      if (all_of(NS.InputSpecs,
                 [](const AxisSpec &S) { return S.isReplicated(); }))
        Reason = ("the attention reading it ('" + T.Attention->getName() +
                  "') runs replicated over tp")
                     .str();
      else
        Reason = "its attention is not split by heads";
    }
    // One entry per cache tensor: the past (input) or present (output)
    // \p V, paired with the other.
    auto makeShard = [&](const Value *V, const Value *Other, bool IsPast) {
      KVCacheShard C;
      C.Name = V->getName().str();
      C.IsPast = IsPast;
      C.Layer = T.Layer;
      C.IsKey = T.K == KVCacheTensor::Key;
      C.Pair = Other ? Other->getName().str() : "";
      C.SeqAxis = T.SeqAxis;
      C.V = V;
      return C;
    };
    if (T.Past) {
      KVCacheShard C = makeShard(T.Past, T.Present, /*IsPast=*/true);
      const NodeSharding &NS = R.Nodes.lookup(T.Append);
      if (T.PastOperand < NS.InputSpecs.size())
        C.Spec = getKVCacheSpec(NS.InputSpecs[T.PastOperand], T.SeqAxis);
      if (C.Spec.isReplicated())
        C.Reason = Reason;
      // The role graph takes the input as this rank holds it, and the
      // Cast/Identity between it and the Concat, if any, keeps that split.
      if (!C.Spec.isReplicated()) {
        R.Values[T.Past] = C.Spec;
        for (const Value *W = T.Append->getInput(T.PastOperand);
             W && W != T.Past;) {
          const Node *D = W->getDefiningNode();
          if (!D || D->getNumInputs() != 1)
            break;
          NodeSharding &DS = R.Nodes[D];
          DS.InputSpecs.assign(1, C.Spec);
          DS.OutputSpecs.assign(1, C.Spec);
          R.Values[W] = C.Spec;
          W = D->getInput(0);
        }
      }
      R.KVCache.push_back(std::move(C));
    }
    if (T.Present) {
      KVCacheShard C = makeShard(T.Present, T.Past, /*IsPast=*/false);
      auto It = R.Values.find(T.Present);
      if (It != R.Values.end())
        C.Spec = getKVCacheSpec(It->second, T.SeqAxis);
      if (C.Spec.isReplicated())
        C.Reason = Reason;
      R.KVCache.push_back(std::move(C));
    }
  }
}

void writeRoleKVCache(json::OStream &J, const ShardingResult &R,
                      const RoleGraph &RG) {
  J.attributeArray("kv_cache", [&] {
    for (const KVCacheShard &C : R.KVCache) {
      const std::vector<std::string> &Names = C.IsPast ? RG.Inputs : RG.Outputs;
      if (!is_contained(Names, C.Name))
        continue;
      J.object([&] {
        J.attribute("name", C.Name);
        J.attribute("io", C.IsPast ? "past" : "present");
        J.attribute("layer", C.Layer);
        J.attribute("kind", C.IsKey ? "key" : "value");
        J.attribute("pair", C.Pair.empty() ? json::Value(nullptr)
                                           : json::Value(C.Pair));
        J.attribute("seq_axis", C.SeqAxis >= 0 ? json::Value(C.SeqAxis)
                                               : json::Value(nullptr));
        const TensorType &T = C.V->Type;
        int64_t Full = C.Spec.isSplit() && (unsigned)C.Spec.Dim < T.getRank()
                           ? T.Dims[C.Spec.Dim].Size
                           : 0;
        J.attributeArray("shape", [&] {
          for (unsigned D = 0; D < T.getRank(); ++D) {
            int64_t S = T.Dims[D].isStatic() ? T.Dims[D].Size : -1;
            if (C.Spec.isSplit() && (int)D == C.Spec.Dim && S > 0)
              S /= R.Plan.TP;
            J.value(S >= 0 ? json::Value(S) : json::Value(nullptr));
          }
        });
        if (C.Spec.isSplit()) {
          int64_t Per = Full / R.Plan.TP;
          J.attributeObject("split", [&] {
            J.attribute("axis", C.Spec.Dim);
            J.attribute("parts", R.Plan.TP);
            J.attribute("index", RG.TP);
            J.attribute("start", Per * RG.TP);
            J.attribute("end", Per * (RG.TP + 1));
          });
        } else {
          J.attribute("split", nullptr);
          if (!C.Reason.empty())
            J.attribute("replicated_because", C.Reason);
        }
      });
    }
  });
}

} // namespace loom
