//===- Experts.h - Find the experts of mixture-of-experts layers -*- C++
//-*-===//
//
// Expert parallelism (DESIGN §6) needs to know, per MoE layer, how many
// experts there are, which parameters and nodes belong to which expert, and
// where the tokens enter and the expert outputs are merged. Exporters write
// experts in two forms:
//
//  - stacked: one weight per projection holding every expert, [E, d, f],
//    read by a batched MatMul on dispatched tokens [E, C, d] (GShard/Switch
//    capacity-based dispatch; the zoo's MoE models, make_zoo.py);
//  - unrolled: torch.onnx unrolls a Python loop over an nn.ModuleList of
//    experts into one branch per expert, each with its own weights
//    (`experts.N.*`), all reading the same token tensor and summed by a
//    chain of Adds (examples/models/moe-tiny.onnx).
//
// Detection is structural; parameter names only order the experts of an
// unrolled group when they spell a consistent numbering.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_EXPERTS_H
#define LOOM_PLAN_EXPERTS_H

#include "loom/IR/Graph.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include <vector>

namespace loom {

struct ExpertGroup {
  /// The detect-layers layer of the group's nodes.
  unsigned Layer = 0;
  unsigned NumExperts = 0;
  /// Unrolled experts: every node that belongs to exactly one expert's
  /// branch (its projections, activation, and the routing weight it is
  /// scaled by) -> expert index (0-based; the `experts.N` numbering when the
  /// parameter names give one, else the order of the Add chain).
  llvm::DenseMap<const Node *, unsigned> BranchOf;
  /// Stacked experts: the weights [E, d, f] whose dim 0 is the expert dim,
  /// in topological order of their first reader.
  std::vector<const Value *> StackedParams;
  /// Unrolled: the first node after the branches that merges them (the
  /// start of the Add chain), if identifiable.
  const Node *Combine = nullptr;

  //--- Added for the cost model and the emitter -------------------------===//
  /// Unrolled: the token tensor every expert reads ([T, d]); stacked: the
  /// dispatched tokens entering the first expert MatMul ([E, C, d]).
  const Value *Tokens = nullptr;
  /// Unrolled: the end of the Add chain (the experts' weighted sum, [T, d]);
  /// stacked: the last expert MatMul's output ([E, C, d]).
  const Value *Output = nullptr;
  /// Stacked: the nodes between Tokens and Output whose leading dim is the
  /// expert dim (the batched MatMuls and the element-wise work between
  /// them), in topological order. Empty for unrolled groups.
  std::vector<const Node *> StackedNodes;
  /// Unrolled: the parameters of each expert's branch, per expert.
  std::vector<std::vector<const Value *>> BranchParams;

  bool isStacked() const { return !StackedParams.empty(); }
  /// Whether \p N is expert work (split across the EP group).
  bool contains(const Node *N) const;
};

/// The number of experts D of an MoE routing mask \p Mask: a OneHot over D
/// classes (of the chosen expert ids), or Equal(TopK indices over D
/// candidates, a constant expert id), seen through the layout ops that
/// select or move its elements (HF Mixtral's
/// `one_hot(selected, E).permute(2, 1, 0)[e]`). Each element is 1 with
/// probability 1/D when every expert gets its even share. 0: not a mask.
unsigned getRoutingMaskClasses(const Value *Mask);

/// Index-routed experts (HF Mixtral's eager path: per expert, NonZero over
/// the routing mask, Gather of the routed tokens, the expert, and an
/// index_add back): the NonZero nodes, in graph order. Their token counts
/// are data-dependent; Loom plans them at the expected count and does not
/// split them by ep.
std::vector<const Node *> findIndexRoutedExperts(const Graph &G);

/// "16 index-routed expert(s) in 2 MoE layer(s) of 8": the count of
/// \p Indexed (findIndexRoutedExperts), with the layers and experts per
/// layer when every routing mask has the same class count E and the count
/// is a multiple of it (one NonZero per expert per layer, as HF writes).
std::string describeIndexRoutedExperts(llvm::ArrayRef<const Node *> Indexed);

/// The expert groups of \p G, one per MoE layer (a layer with both forms,
/// or with stacked weights of different expert counts, yields one group
/// per form/count), in layer order. \p Layers is detect-layers' numbering;
/// nodes carry it in Node::Layer (an empty list treats the graph as one
/// layer). Deterministic.
std::vector<ExpertGroup> findExperts(const Graph &G,
                                     llvm::ArrayRef<LayerInfo> Layers);

/// Makes every unrolled expert group that spans several of detect-layers'
/// layers (cuts between experts, where expert branches looked like
/// repeated blocks) one layer, from its router to the end of its combine
/// chain, renumbering \p Layers and every node's Node::Layer
/// (lib/Analysis/ExpertLayers.cpp says how). Returns whether anything
/// changed; nothing does when every group lies in one layer.
bool keepExpertGroupsWhole(Graph &G, std::vector<LayerInfo> &Layers);

/// How the exporter wrote \p EG, in words for reports and dumps:
/// "stacked, batched MatMul", "stacked, Einsum dispatch" (GShard/Switch
/// capacity dispatch), "unrolled, dense-gated" (every expert runs on every
/// token, scaled by a gate that is 0 for unrouted tokens) or "unrolled".
std::string getExpertPattern(const ExpertGroup &EG);

/// The router's top-k of \p EG: K of the TopK in its layer that picks
/// among its NumExperts scores (the last dim of its input); 0 when none is
/// found (an unrolled or hand-gated writing).
unsigned getRouterTopK(const Graph &G, const ExpertGroup &EG);

/// The expected number of distinct ep ranks a token's \p K experts live
/// on, with \p E experts split evenly over \p EP ranks and routing uniform
/// over the C(E, K) choices: EP (1 - C(E - E/EP, K) / C(E, K)), the chance
/// that a rank holds none of the token's experts being the hypergeometric
/// C(E - E/EP, K) / C(E, K). 1 at K = 1; EP when every rank must be hit.
/// What a dispatcher that sends one copy per destination rank moves
/// (DeepEP: deep_ep Buffer.get_dispatch_layout's is_token_in_rank,
/// [tokens, ranks]), against K copies per token otherwise.
double getEPRankCopies(unsigned E, unsigned K, unsigned EP);

} // namespace loom

#endif // LOOM_PLAN_EXPERTS_H
