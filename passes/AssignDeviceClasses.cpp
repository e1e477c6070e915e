//===- AssignDeviceClasses.cpp - Place every node on a device class -------===//
//
// DESIGN §2 pass 7 and §5: every node of the main graph goes to aicore,
// aicpu, hbm_pim or ssd (whichever of them the hardware has) so that the
// step time -- node times on their classes plus transfers on every edge
// whose ends sit on different classes -- is minimal, subject to HBM (and
// SSD) capacity: the parameters of nodes placed on ssd do not occupy HBM.
//
// The model handed to the solver (loom/Solver/Placement.h):
//
//  * Candidates: the classes annotate-costs found able to run the node
//    (the YAML's op lists and dtypes; control flow, shape arithmetic,
//    dynamic shapes and int64 arithmetic are not aicore work; hbm_pim runs
//    element-wise maps; ssd serves Gathers from parameter tables), minus
//    classes whose YAML dtypes omit a string tensor the node touches. A
//    node without a cost rule may run on aicore and aicpu where their op
//    lists allow it, at the class's launch overhead (its time is unknown;
//    the cost report lists it). No candidate at all is an error naming the
//    node and every class's reason.
//  * Time of a node on a class: forward, plus backward when training.
//  * Edges: every (producer, consumer) pair of main-graph nodes, carrying
//    the value's bytes. Crossing classes costs bytes / bandwidth + latency
//    of the YAML's transfer link (either direction), else the cheaper route
//    through one intermediate class, else bytes / HBM bandwidth (the two
//    classes share HBM). Training pays it twice for floating-point values
//    (the gradient comes back the same way). A value read by several
//    consumers pays per consumer (a slight overestimate when two consumers
//    share a class). Values of Constant nodes are data at rest in HBM, like
//    parameters: no edge. Edges between nodes of different pipeline stages
//    (Node::Stage, once the search sets it) carry no cost either: the value
//    is sent between devices and lands in HBM whatever class consumes it,
//    which is why a residual Add at a stage boundary may go to hbm_pim.
//  * Storage: each parameter is held by HBM if any reader runs on a class
//    other than ssd, by the SSD if any reader runs on ssd. Training keeps
//    gradients and mixed-precision Adam states next to floating-point
//    weights: 16 bytes per parameter (DESIGN §10); inference the weights'
//    own bytes. Parameters with the same readers form one storage.
//  * Repeated layers (detect-layers): every block is aligned with the
//    first block of its signature (longest common subsequence of op type
//    and candidate classes, so a node the first copy has and the others
//    lack does not spoil the rest), and aligned nodes are placed alike: one
//    item per position stands for all copies (multiplicity = copies, time
//    = their mean), their edges and storages merged. The solver is exact
//    for this model: it optimizes over placements that treat copies alike,
//    which is also what lets one stage graph serve every copy. Nodes that
//    could move their parameters to the SSD are never merged: which tables
//    leave HBM is a knapsack over individual tables.
//  * Chains and other narrow structures are contracted by the solver's
//    exact variable elimination, not here.
//
// Capacity: placeForPlan() / DeviceClassPlacer take the HBM left for
// parameters and their training state and the factor parameters are split
// by, so the search can evaluate placement per candidate plan (the problem
// is built once; each evaluation only re-solves) and re-run it for the
// chosen one. Before a plan exists, the pass (placeForPipeline) uses the
// usable HBM and the split of --plan, else the fewest power-of-two split
// that fits what only HBM can hold.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "loom/Hardware/HardwareModel.h"
#include "loom/IR/NodeLabel.h"
#include "loom/Plan/BatchSplit.h"
#include "loom/Plan/Offload.h"
#include "loom/Planner/Embedding.h"
#include "loom/Solver/Placement.h"
#include "loom/Support/Units.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <map>

using namespace llvm;

namespace loom {

namespace {

constexpr double Inf = std::numeric_limits<double>::infinity();

/// Training state per floating-point parameter: bf16 weight and gradient
/// plus fp32 master weight and Adam m and v (DESIGN §10).
constexpr double TrainBytesPerParam = 16;

Error makeError(const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), Msg);
}

std::string nodeLabel(const Node &N) { return getNodeLabel(N); }

bool isConstantNode(const Node &N) {
  return N.getOpType() == "Constant" && N.getDomain().empty();
}

/// Bytes of one route between two classes: Bytes * InvBW + Latency.
struct Route {
  double InvBW = 0, Latency = 0;
};

} // namespace

struct DeviceClassPlacer::Impl {
  const CompilationUnit &CU;
  bool Train = true;
  std::vector<std::string> Classes;
  std::vector<const DeviceClass *> ClassDefs;
  int SSDClass = -1;
  /// Per class pair: the routes data may take (empty on the diagonal).
  std::vector<std::vector<Route>> Routes;

  /// Per node (graph order): time per class (Inf where it cannot run) and
  /// why not.
  std::vector<const Node *> Nodes;
  DenseMap<const Node *, unsigned> NodeIndex;
  std::vector<std::vector<double>> Seconds;
  std::vector<std::vector<std::string>> WhyNot;
  std::vector<unsigned> ItemOf;
  /// Per item: its nodes.
  std::vector<std::vector<unsigned>> ItemNodes;

  /// The request at full parameter bytes and no capacity.
  PlacementRequest Base;
  /// Per storage, the parameters in it (for reasons).
  std::vector<std::vector<const Value *>> StorageParams;
  /// Node-level edges for the whole-graph accounting.
  struct NodeEdge {
    unsigned From, To;
    double Bytes, Factor;
  };
  std::vector<NodeEdge> Edges;

  explicit Impl(const CompilationUnit &CU) : CU(CU) {}

  double transfer(double Bytes, unsigned A, unsigned B) const {
    Route R = bestRoute(Bytes, A, B);
    return A == B ? 0 : Bytes * R.InvBW + R.Latency;
  }
  /// The cheapest route for \p Bytes from class A to B.
  Route bestRoute(double Bytes, unsigned A, unsigned B) const {
    Route Best{0, 0};
    double BestS = Inf;
    if (A == B)
      return Best;
    for (const Route &R : Routes[A * Classes.size() + B])
      if (Bytes * R.InvBW + R.Latency < BestS) {
        BestS = Bytes * R.InvBW + R.Latency;
        Best = R;
      }
    return Best;
  }
  std::vector<double> transferMatrix(double Bytes, double Factor) const {
    size_t K = Classes.size();
    std::vector<double> M(K * K);
    for (unsigned A = 0; A < K; ++A)
      for (unsigned B = 0; B < K; ++B)
        M[A * K + B] = Factor * transfer(Bytes, A, B);
    return M;
  }

  Error build();
  void buildRoutes();
  void computeCandidates();
  Error checkEveryNodeRuns() const;
  void groupItems();
  void buildEdgesAndStorages();
  std::string explain(const PlacementRequest &R,
                      const std::vector<unsigned> &ItemClass,
                      const std::vector<ItemCosts> &IC,
                      const PlacementEvaluation &Ev, unsigned Node) const;
};

void DeviceClassPlacer::Impl::buildRoutes() {
  const HardwareModel &HW = *CU.HW;
  size_t K = Classes.size();
  Routes.assign(K * K, {});
  auto Direct = [&](unsigned A, unsigned B) -> Optional<Route> {
    const TransferLink *L = HW.getTransfer(Classes[A], Classes[B]);
    if (!L || L->Bandwidth.value() <= 0)
      return None;
    return Route{1 / L->Bandwidth.value(), L->Latency.value()};
  };
  const MemoryLevel *HBM = HW.getMemory("hbm");
  for (unsigned A = 0; A < K; ++A)
    for (unsigned B = 0; B < K; ++B) {
      if (A == B)
        continue;
      std::vector<Route> &Rs = Routes[A * K + B];
      if (Optional<Route> D = Direct(A, B))
        Rs.push_back(*D);
      for (unsigned M = 0; M < K; ++M) {
        if (M == A || M == B)
          continue;
        Optional<Route> R1 = Direct(A, M), R2 = Direct(M, B);
        if (R1 && R2)
          Rs.push_back({R1->InvBW + R2->InvBW, R1->Latency + R2->Latency});
      }
      if (Rs.empty()) {
        double BW = HBM ? HBM->Bandwidth.value() : 0;
        Rs.push_back({BW > 0 ? 1 / BW : 0, 0});
      }
    }
}

void DeviceClassPlacer::Impl::computeCandidates() {
  size_t K = Classes.size();
  const Graph &G = CU.M->getGraph();
  for (const auto &NP : G.getNodes()) {
    const Node &N = *NP;
    NodeIndex[&N] = Nodes.size();
    Nodes.push_back(&N);
    std::vector<double> &S = Seconds.emplace_back(K, Inf);
    std::vector<std::string> &Why = WhyNot.emplace_back(K);
    const NodeCostInfo &Info = CU.NodeCosts.find(&N)->second;
    bool TouchesString = false;
    for (ArrayRef<Value *> Vs : {N.getInputs(), N.getOutputs()})
      for (const Value *V : Vs)
        TouchesString |= V && V->Type.Elem == DataType::String;
    for (unsigned C = 0; C < K; ++C) {
      const DeviceClass &DC = *ClassDefs[C];
      if (TouchesString && !DC.supportsDataType("string")) {
        Why[C] = Classes[C] + " does not support data type string";
        continue;
      }
      if (!Info.Cost.HasRule) {
        // Unknown cost: the op lists decide, on the classes that run
        // arbitrary kernels; the time is the launch overhead.
        bool General = Classes[C] == "aicore" || Classes[C] == "aicpu";
        if (General && DC.supportsOp(N.getOpType()))
          S[C] = DC.LaunchOverhead.value() * (Train ? 2 : 1);
        else
          Why[C] = General ? Classes[C] + " does not support op " +
                                 N.getQualifiedOpType()
                           : Classes[C] + " needs a cost rule (" +
                                 Info.Cost.NoRuleReason + ")";
        continue;
      }
      auto It = Info.Times.find(Classes[C]);
      if (It == Info.Times.end()) {
        Why[C] = "no time for " + Classes[C];
        continue;
      }
      const ClassTime &T = It->second;
      if (!T.Supported) {
        Why[C] = T.Reason.empty()
                     ? Classes[C] + " cannot run " + N.getQualifiedOpType()
                     : T.Reason;
        continue;
      }
      S[C] = T.Seconds + (Train ? T.BackwardSeconds : 0);
    }
    // A Constant is data at rest in HBM, not work: it needs no class that
    // lists it, and placing it anywhere costs nothing.
    if (isConstantNode(N) &&
        llvm::none_of(S, [](double V) { return std::isfinite(V); }))
      std::fill(S.begin(), S.end(), 0.0);
  }
}

Error DeviceClassPlacer::Impl::checkEveryNodeRuns() const {
  std::vector<unsigned> Stuck;
  for (unsigned I = 0; I < Nodes.size(); ++I)
    if (llvm::none_of(Seconds[I], [](double S) { return std::isfinite(S); }))
      Stuck.push_back(I);
  if (Stuck.empty())
    return Error::success();
  const Node &N = *Nodes[Stuck.front()];
  std::string Msg;
  raw_string_ostream OS(Msg);
  OS << "assign-device-classes: node '" << nodeLabel(N) << "' ("
     << N.getQualifiedOpType() << ") runs on no device class of hardware '"
     << CU.HW->Name << "': ";
  for (unsigned C = 0; C < Classes.size(); ++C)
    OS << (C ? "; " : "") << WhyNot[Stuck.front()][C];
  if (Stuck.size() > 1)
    OS << " (and " << Stuck.size() - 1 << " more node(s): '"
       << nodeLabel(*Nodes[Stuck[1]]) << "'"
       << (Stuck.size() > 2 ? ", ..." : "") << ")";
  return makeError(OS.str());
}

/// Matches the nodes of \p Copy to those of \p Rep with equal keys, in
/// order (longest common subsequence); -1 where a node has no match.
/// Returns nothing when the alignment table would be too large.
static Optional<std::vector<int>> alignLayers(ArrayRef<uint64_t> Copy,
                                              ArrayRef<uint64_t> Rep) {
  size_t N = Copy.size(), M = Rep.size();
  std::vector<int> Match(N, -1);
  if (N == M && Copy == Rep) {
    for (unsigned I = 0; I < N; ++I)
      Match[I] = I;
    return Match;
  }
  if ((N + 1) * (M + 1) > (1u << 22))
    return None;
  // L[i][j]: LCS of Copy[i..] and Rep[j..].
  std::vector<uint32_t> L((N + 1) * (M + 1), 0);
  auto At = [&](size_t I, size_t J) -> uint32_t & {
    return L[I * (M + 1) + J];
  };
  for (size_t I = N; I-- > 0;)
    for (size_t J = M; J-- > 0;)
      At(I, J) = Copy[I] == Rep[J] ? At(I + 1, J + 1) + 1
                                   : std::max(At(I + 1, J), At(I, J + 1));
  for (size_t I = 0, J = 0; I < N && J < M;) {
    if (Copy[I] == Rep[J] && At(I, J) == At(I + 1, J + 1) + 1)
      Match[I++] = J++;
    else if (At(I + 1, J) >= At(I, J + 1))
      ++I;
    else
      ++J;
  }
  return Match;
}

void DeviceClassPlacer::Impl::groupItems() {
  size_t NumLayers = CU.Layers.size();
  std::vector<std::vector<unsigned>> LayerNodes(NumLayers);
  for (unsigned I = 0; I < Nodes.size(); ++I) {
    int L = Nodes[I]->Layer;
    if (L >= 0 && (size_t)L < NumLayers)
      LayerNodes[L].push_back(I);
  }
  // A node's key: op type and which classes may run it. Copies are placed
  // alike only where these agree. A node that could take its parameters
  // out of HBM (an ssd candidate) is never merged: which tables leave HBM
  // is a knapsack over individual tables (two equal tables read at
  // different rates should not be forced to the same side), and such nodes
  // are few.
  auto KeyOf = [&](unsigned I) -> uint64_t {
    uint64_t H = 14695981039346656037ull;
    if (SSDClass >= 0 && std::isfinite(Seconds[I][SSDClass]))
      return H ^ (0x9e3779b97f4a7c15ull * (I + 1));
    auto Mix = [&](StringRef S) {
      for (char C : S)
        H = (H ^ (unsigned char)C) * 1099511628211ull;
      H = (H ^ 0xff) * 1099511628211ull;
    };
    Mix(Nodes[I]->getDomain());
    Mix(Nodes[I]->getOpType());
    for (double S : Seconds[I])
      H = (H ^ (std::isfinite(S) ? 1 : 2)) * 1099511628211ull;
    return H;
  };
  // Every block is aligned with the first block of its signature.
  std::vector<int> MatchOf(Nodes.size(), -1); // Representative node.
  std::map<uint64_t, unsigned> FirstOf;
  for (unsigned L = 0; L < NumLayers; ++L) {
    if (CU.Layers[L].K != LayerInfo::Kind::Block || LayerNodes[L].empty())
      continue;
    auto [It, New] = FirstOf.try_emplace(CU.Layers[L].Signature, L);
    if (New)
      continue;
    const std::vector<unsigned> &Rep = LayerNodes[It->second];
    std::vector<uint64_t> KC, KR;
    for (unsigned I : LayerNodes[L])
      KC.push_back(KeyOf(I));
    for (unsigned I : Rep)
      KR.push_back(KeyOf(I));
    Optional<std::vector<int>> Match = alignLayers(KC, KR);
    if (!Match)
      continue;
    for (unsigned P = 0; P < LayerNodes[L].size(); ++P)
      if ((*Match)[P] >= 0)
        MatchOf[LayerNodes[L][P]] = Rep[(*Match)[P]];
  }
  ItemOf.assign(Nodes.size(), ~0u);
  for (unsigned I = 0; I < Nodes.size(); ++I)
    if (MatchOf[I] < 0) {
      ItemOf[I] = ItemNodes.size();
      ItemNodes.push_back({I});
    }
  for (unsigned I = 0; I < Nodes.size(); ++I)
    if (MatchOf[I] >= 0) {
      ItemOf[I] = ItemOf[MatchOf[I]];
      ItemNodes[ItemOf[I]].push_back(I);
    }
  size_t K = Classes.size();
  for (const std::vector<unsigned> &Members : ItemNodes) {
    PlacementItem It;
    It.Name = "node '" + nodeLabel(*Nodes[Members[0]]) + "'";
    if (Members.size() > 1)
      It.Name += " (and its " + std::to_string(Members.size() - 1) +
                 " copies in repeated layers)";
    It.Multiplicity = Members.size();
    for (unsigned C = 0; C < K; ++C) {
      if (!std::isfinite(Seconds[Members[0]][C]))
        continue;
      double Sum = 0;
      for (unsigned M : Members)
        Sum += Seconds[M][C];
      It.Options.push_back({C, Sum / Members.size()});
    }
    Base.Items.push_back(std::move(It));
  }
}

void DeviceClassPlacer::Impl::buildEdgesAndStorages() {
  size_t K = Classes.size();
  DenseMap<std::pair<unsigned, unsigned>, unsigned> EdgeOf;
  std::map<std::vector<unsigned>, unsigned> StorageOf;
  DenseMap<const Value *, std::vector<unsigned>> Readers;
  std::vector<const Value *> ParamOrder;
  for (unsigned V = 0; V < Nodes.size(); ++V) {
    const Node &N = *Nodes[V];
    SmallVector<const Value *, 4> Seen;
    for (const Value *In : N.getInputs()) {
      if (!In || is_contained(Seen, In))
        continue;
      Seen.push_back(In);
      if (In->isParameter()) {
        auto [It, New] = Readers.try_emplace(In);
        if (New)
          ParamOrder.push_back(In);
        if (!is_contained(It->second, ItemOf[V]))
          It->second.push_back(ItemOf[V]);
        continue;
      }
      const Node *D = In->getDefiningNode();
      if (!D || isConstantNode(*D))
        continue;
      auto DI = NodeIndex.find(D);
      if (DI == NodeIndex.end())
        continue; // Defined in an enclosing graph: not ours.
      if (D->Stage >= 0 && N.Stage >= 0 && D->Stage != N.Stage)
        continue; // Crosses a pipeline stage: lands in HBM anyway.
      double Bytes = (double)In->Type.getSizeInBytes().getValueOr(0);
      double Factor = Train && isFloatingPoint(In->Type.Elem) ? 2 : 1;
      Edges.push_back({DI->second, V, Bytes, Factor});
      std::vector<double> M = transferMatrix(Bytes, Factor);
      auto Key = std::make_pair(ItemOf[DI->second], ItemOf[V]);
      auto [EI, New] = EdgeOf.try_emplace(Key, Base.Edges.size());
      if (New) {
        Base.Edges.push_back({Key.first, Key.second, 1, std::move(M), Bytes});
        continue;
      }
      PlacementEdge &E = Base.Edges[EI->second];
      for (unsigned C = 0; C < K * K; ++C)
        E.Cost[C] += M[C];
      E.Bytes += Bytes;
    }
  }
  // Embedding tables no card holds whole are sharded over the devices by
  // the plan (lib/Planner/Embedding.cpp): no storage of one device here.
  DenseSet<const Value *> Sharded;
  for (const EmbeddingTable &T : findEmbeddingTables(CU.M->getGraph(), 1))
    if (mustShardTable(T, *CU.HW, Train))
      Sharded.insert(T.Weight);
  for (const Value *P : ParamOrder) {
    if (Sharded.count(P))
      continue;
    std::vector<unsigned> R = Readers[P];
    llvm::sort(R);
    auto [It, New] = StorageOf.try_emplace(R, Base.Storages.size());
    if (New) {
      Base.Storages.push_back({"", 0, R});
      StorageParams.emplace_back();
    }
    double Elems = (double)P->Type.getNumElements().getValueOr(0);
    double Bytes = (double)P->Type.getSizeInBytes().getValueOr(0);
    if (Train && isFloatingPoint(P->Type.Elem))
      Bytes = Elems * TrainBytesPerParam;
    Base.Storages[It->second].Bytes += Bytes;
    StorageParams[It->second].push_back(P);
  }
  for (unsigned S = 0; S < Base.Storages.size(); ++S) {
    const std::vector<const Value *> &Ps = StorageParams[S];
    std::string Name = Ps.front()->getName().str();
    if (Ps.size() > 1)
      Name += " (+" + std::to_string(Ps.size() - 1) + " more)";
    Base.Storages[S].Name = Name;
  }
}

Error DeviceClassPlacer::Impl::build() {
  if (!CU.HW)
    return makeError("assign-device-classes needs a hardware model");
  if (CU.NodeCosts.empty() && CU.M->getGraph().getNumNodes())
    return makeError(
        "assign-device-classes needs node costs (run annotate-costs first)");
  for (const auto &NP : CU.M->getGraph().getNodes())
    if (!CU.NodeCosts.count(NP.get()))
      return makeError("assign-device-classes: node '" + nodeLabel(*NP) +
                       "' has no cost (run annotate-costs after the last "
                       "pass that changes the graph)");
  Train = CU.Opts.Mode == RunMode::Train;
  for (const auto &KV : CU.HW->Device.Classes) {
    if (KV.first == "ssd")
      SSDClass = Classes.size();
    Classes.push_back(KV.first);
    ClassDefs.push_back(&KV.second);
  }
  Base.Classes = Classes;
  buildRoutes();
  computeCandidates();
  if (Error E = checkEveryNodeRuns())
    return E;
  groupItems();
  buildEdgesAndStorages();
  return Error::success();
}

DeviceClassPlacer::DeviceClassPlacer() = default;
DeviceClassPlacer::~DeviceClassPlacer() = default;

Expected<std::unique_ptr<DeviceClassPlacer>>
DeviceClassPlacer::create(const CompilationUnit &CU) {
  std::unique_ptr<DeviceClassPlacer> P(new DeviceClassPlacer());
  P->I = std::make_unique<Impl>(CU);
  if (Error E = P->I->build())
    return E;
  return P;
}

double DeviceClassPlacer::getUsableHBMBytes(const CompilationUnit &CU) {
  const MemoryLevel *HBM = CU.HW ? CU.HW->getMemory("hbm") : nullptr;
  return HBM ? HBM->getUsableCapacity().value() : 0;
}

Expected<GraphPlacement> DeviceClassPlacer::place(double HBMFreeBytes,
                                                  double ParamShardFactor,
                                                  bool Explain) const {
  const Impl &M = *I;
  size_t K = M.Classes.size();
  if (!(ParamShardFactor >= 1))
    return makeError("placement: parameter shard factor must be >= 1");
  PlacementRequest R = M.Base;
  for (PlacementStorage &S : R.Storages)
    S.Bytes /= ParamShardFactor;
  PlacementResource HBM{"HBM", HBMFreeBytes, std::vector<bool>(K, true)};
  if (M.SSDClass >= 0)
    HBM.Holds[M.SSDClass] = false;
  R.Resources.push_back(HBM);
  double SSDCap = Inf;
  if (M.SSDClass >= 0) {
    if (const MemoryLevel *SSD = M.CU.HW->getMemory("ssd"))
      SSDCap = SSD->getUsableCapacity().value();
    PlacementResource SSDRes{"SSD", SSDCap, std::vector<bool>(K, false)};
    SSDRes.Holds[M.SSDClass] = true;
    R.Resources.push_back(SSDRes);
  }
  Expected<PlacementResult> Res = solvePlacement(R);
  if (!Res)
    return makeError("assign-device-classes: " + toString(Res.takeError()));

  GraphPlacement GP;
  GP.Classes = M.Classes;
  GP.Stats = Res->Stats;
  GP.HBMFreeBytes = HBMFreeBytes;
  GP.ParamShardFactor = ParamShardFactor;
  GP.SSDCapacityBytes = SSDCap;
  GP.NodeClass.resize(M.Nodes.size());
  for (unsigned N = 0; N < M.Nodes.size(); ++N)
    GP.NodeClass[N] = Res->Class[M.ItemOf[N]];
  PlacementEvaluation Ev = evaluatePlacement(R, Res->Class);
  GP.HBMParamBytes = Ev.ResourceBytes[0];
  if (M.SSDClass >= 0)
    GP.SSDParamBytes = Ev.ResourceBytes[1];
  GP.ClassNodes.assign(K, 0);
  GP.ClassSeconds.assign(K, 0);
  for (unsigned N = 0; N < M.Nodes.size(); ++N) {
    unsigned C = GP.NodeClass[N];
    ++GP.ClassNodes[C];
    GP.ClassSeconds[C] += M.Seconds[N][C];
    GP.ComputeSeconds += M.Seconds[N][C];
  }
  GP.NodeTransfers.assign(M.Nodes.size(), {});
  for (const Impl::NodeEdge &E : M.Edges) {
    unsigned A = GP.NodeClass[E.From], B = GP.NodeClass[E.To];
    if (A == B)
      continue;
    ++GP.CrossingEdges;
    GP.TransferSeconds += E.Factor * M.transfer(E.Bytes, A, B);
    // Charged to the consumer, once forward and (Factor 2: a gradient)
    // once backward.
    Route R = M.bestRoute(E.Bytes, A, B);
    GraphPlacement::InTransfer &T = GP.NodeTransfers[E.To];
    T.BytesS += E.Bytes * R.InvBW;
    T.LatencyS += R.Latency;
    if (E.Factor > 1) {
      T.BackwardBytesS += E.Bytes * R.InvBW;
      T.BackwardLatencyS += R.Latency;
    }
  }
  if (!Explain)
    return GP;
  std::vector<ItemCosts> IC = computeItemCosts(R, Res->Class);
  for (unsigned N = 0; N < M.Nodes.size(); ++N) {
    NodePlacement NP;
    NP.N = M.Nodes[N];
    NP.Class = GP.NodeClass[N];
    NP.Seconds = M.Seconds[N];
    NP.Reason = M.explain(R, Res->Class, IC, Ev, N);
    if (!M.CU.NodeCosts.find(NP.N)->second.Cost.HasRule)
      NP.Reason += "; no cost rule: placed by the op lists, timed at the "
                   "launch overhead";
    GP.Nodes.push_back(std::move(NP));
  }
  return GP;
}

std::string DeviceClassPlacer::Impl::explain(
    const PlacementRequest &R, const std::vector<unsigned> &ItemClass,
    const std::vector<ItemCosts> &IC, const PlacementEvaluation &Ev,
    unsigned N) const {
  size_t K = Classes.size();
  unsigned Item = ItemOf[N];
  unsigned Ch = ItemClass[Item];
  const PlacementItem &It = R.Items[Item];
  double Mult = std::max(1.0, It.Multiplicity);
  std::string S;
  raw_string_ostream OS(S);
  if (It.Options.size() == 1) {
    OS << "only " << Classes[Ch] << " runs it (";
    bool First = true;
    for (unsigned C = 0; C < K; ++C)
      if (C != Ch) {
        OS << (First ? "" : "; ") << WhyNot[N][C];
        First = false;
      }
    OS << ")";
    return OS.str();
  }
  // Parameters the item reads and whether any would stay in HBM anyway.
  double ItemBytes = 0;
  for (const PlacementStorage &St : R.Storages)
    if (is_contained(St.Readers, Item))
      ItemBytes += St.Bytes;
  if ((int)Ch == SSDClass) {
    double Free = R.Resources[0].Capacity - Ev.ResourceBytes[0];
    const Node &Nd = *Nodes[N];
    double Rows = 0;
    for (const Value *V : Nd.getOutputs())
      if (V)
        Rows += (double)V->Type.getSizeInBytes().getValueOr(0);
    const DeviceClass &DC = *ClassDefs[Ch];
    OS << (StringRef(Nd.getOpType()) == "Gather" ? "table " : "parameters ")
       << formatBytes(Bytes(ItemBytes));
    if (Mult > 1)
      OS << " (" << (unsigned)Mult << " copies)";
    if (ItemBytes > Free)
      OS << " > free HBM " << formatBytes(Bytes(std::max(0.0, Free)));
    else
      OS << " fits in free HBM " << formatBytes(Bytes(Free))
         << " but ssd is faster";
    OS << "; reads " << formatBytes(Bytes(Rows)) << "/step";
    if (DC.Bandwidth)
      OS << " at " << formatBandwidth(*DC.Bandwidth);
    return OS.str();
  }
  // The fastest candidate by its own time.
  const ItemCosts &C = IC[Item];
  unsigned Fastest = Ch;
  for (unsigned X = 0; X < K; ++X)
    if (C.Compute[X] < C.Compute[Fastest])
      Fastest = X;
  auto PerCopy = [&](double V) {
    return formatDuration(loom::Seconds(V / Mult));
  };
  // The cheapest other class by own time, and by time plus transfers.
  unsigned Next = K;
  double Lo = C.Compute[Ch], Hi = C.Compute[Ch];
  for (unsigned X = 0; X < K; ++X) {
    if (X == Ch || !std::isfinite(C.Compute[X]))
      continue;
    Lo = std::min(Lo, C.Compute[X]);
    Hi = std::max(Hi, C.Compute[X]);
    if (Next == K || C.Compute[X] < C.Compute[Next])
      Next = X;
  }
  if (Hi - Lo <= 1e-12 * std::max(Hi, 1e-9)) {
    OS << (Hi == 0 ? "no kernel: free on any class"
                   : "same time on every class it can run on");
    double Extra = Inf;
    for (unsigned X = 0; X < K; ++X)
      if (X != Ch && std::isfinite(C.Compute[X]))
        Extra = std::min(Extra, C.Transfer[X] - C.Transfer[Ch]);
    if (Extra / Mult >= 5e-12 && std::isfinite(Extra))
      OS << "; elsewhere transfers would cost " << PerCopy(Extra) << " more";
    return OS.str();
  }
  if (Fastest == Ch) {
    OS << "fastest (" << Classes[Next] << ": +"
       << PerCopy(C.Compute[Next] - C.Compute[Ch]) << ")";
    double Adds = C.Transfer[Ch] - C.Transfer[Next];
    if (Adds / Mult >= 5e-12) // Prints as at least 0.01 ns.
      OS << "; transfers cost " << PerCopy(Adds) << " more than there";
    if (SSDClass >= 0 && std::isfinite(C.Compute[SSDClass]) && ItemBytes > 0)
      OS << "; table " << formatBytes(Bytes(ItemBytes)) << " fits in HBM";
    return OS.str();
  }
  double Saves = C.Compute[Ch] - C.Compute[Fastest];
  double Adds = C.Transfer[Fastest] - C.Transfer[Ch];
  if (Adds >= Saves) {
    OS << Classes[Fastest] << " would save " << PerCopy(Saves) << " but add "
       << PerCopy(Adds) << " of transfers";
    return OS.str();
  }
  OS << Classes[Fastest] << " would save " << PerCopy(Saves - Adds)
     << " but its parameters would not fit";
  if ((int)Fastest == SSDClass)
    OS << " on the SSD";
  else
    OS << " in HBM";
  return OS.str();
}

double
DeviceClassPlacer::getUnavoidableHBMBytes(double ParamShardFactor) const {
  PlacementRequest R;
  R.Classes = I->Base.Classes;
  R.Items = I->Base.Items;
  R.Storages = I->Base.Storages;
  std::vector<bool> Holds(R.Classes.size(), true);
  if (I->SSDClass >= 0)
    Holds[I->SSDClass] = false;
  R.Resources.push_back({"HBM", Inf, Holds});
  return computeUnavoidableLoads(R)[0] / ParamShardFactor;
}

Expected<GraphPlacement> placeForPipeline(const CompilationUnit &CU,
                                          bool Explain, CompilationUnit *Warn) {
  Expected<std::unique_ptr<DeviceClassPlacer>> P =
      DeviceClassPlacer::create(CU);
  if (!P)
    return P.takeError();
  double Free = DeviceClassPlacer::getUsableHBMBytes(CU);
  double Factor = 1;
  if (CU.PlanRequest && (CU.PlanRequest->TP || CU.PlanRequest->PP)) {
    const PlanSpec &S = *CU.PlanRequest;
    Factor = S.TP.getValueOr(1) * S.PP.getValueOr(1);
    if (S.ZeroStage.getValueOr(0) >= 3 && S.DP)
      Factor *= *S.DP;
  } else {
    double Devices = std::max<double>(1, CU.HW->getNumDevices());
    while (Factor * 2 <= Devices && (*P)->getUnavoidableHBMBytes(Factor) > Free)
      Factor *= 2;
  }
  double Must = (*P)->getUnavoidableHBMBytes(Factor);
  if (Must > Free) {
    // The warning must hold for every plan the search may still pick: in
    // training, ZeRO and offload also split or move the state over dp, so
    // unless --plan pins zero=0 and no offload, it is only true if the
    // state does not fit split over every device a plan can use (without
    // --plan, Factor already is that split).
    double Widest = Factor;
    if (CU.Opts.Mode == RunMode::Train && CU.PlanRequest &&
        (CU.PlanRequest->TP || CU.PlanRequest->PP)) {
      const PlanSpec &S = *CU.PlanRequest;
      double Model = S.TP.getValueOr(1) * S.PP.getValueOr(1);
      // dp > 1 only where shard can emit it (loom/Plan/BatchSplit.h).
      bool Symbolic =
          CU.Imported && !findBatchSymbol(CU.Imported->getGraph()).empty();
      double DP =
          S.DP ? *S.DP
          : !isBatchSplitEmittable(Symbolic, 2, 1)
              ? 1.0
              : std::max(1.0, std::floor(CU.HW->getNumDevices() / Model));
      bool Sharded =
          S.ZeroStage.getValueOr(1) > 0 || !S.Offload || S.Offload->any();
      if (Sharded)
        Widest = std::max(Factor, Model * DP);
    }
    // Offload may move the state off HBM too (issue 35: searched
    // wherever the hardware has a tier, Plan/Offload.h): then what stays
    // in HBM is the plan's to say (the evaluator's memory, which fails
    // the search when nothing fits), not this 16 B per parameter.
    bool MayOffload = false;
    if (CU.Opts.Mode == RunMode::Train) {
      if (CU.PlanRequest && CU.PlanRequest->Offload)
        MayOffload = CU.PlanRequest->Offload->any();
      else
        MayOffload = getSearchedOffloads(*CU.HW).size() > 1;
    }
    double MustWidest = (*P)->getUnavoidableHBMBytes(Widest);
    if (Warn && MustWidest > Free && !MayOffload)
      Warn->warn("assign-device-classes: parameters that only HBM can hold "
                 "need " +
                 formatBytes(Bytes(MustWidest)) + " per device split " +
                 Twine((uint64_t)Widest) + " ways, more than the " +
                 formatBytes(Bytes(Free)) +
                 " of usable HBM; placement keeps as little as it can in HBM");
    Free = Must * (1 + 1e-12);
  }
  return (*P)->place(Free, Factor, Explain);
}

Expected<GraphPlacement> placeForPlan(const CompilationUnit &CU,
                                      double HBMFreeBytes,
                                      double ParamShardFactor, bool Explain) {
  Expected<std::unique_ptr<DeviceClassPlacer>> P =
      DeviceClassPlacer::create(CU);
  if (!P)
    return P.takeError();
  if (HBMFreeBytes < 0)
    HBMFreeBytes = DeviceClassPlacer::getUsableHBMBytes(CU);
  return (*P)->place(HBMFreeBytes, ParamShardFactor, Explain);
}

namespace {

class AssignDeviceClassesPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    Expected<GraphPlacement> P = placeForPipeline(CU, /*Explain=*/false, &CU);
    if (!P)
      return P.takeError();
    // The placement is what the evaluator costs (DESIGN §3): each node at
    // its class's time plus its inputs' transfers between classes.
    const Graph &G = CU.M->getGraph();
    for (unsigned N = 0; N < G.getNumNodes(); ++N) {
      Node &Nd = *G.getNodes()[N];
      Nd.DeviceClass = P->Classes[P->NodeClass[N]];
      auto It = CU.NodeCosts.find(&Nd);
      if (It == CU.NodeCosts.end())
        continue;
      NodeCostInfo &Info = It->second;
      Info.Class = Nd.DeviceClass;
      const GraphPlacement::InTransfer &T = P->NodeTransfers[N];
      Info.TransferS = T.BytesS;
      Info.TransferLatencyS = T.LatencyS;
      Info.BackwardTransferS = T.BackwardBytesS;
      Info.BackwardTransferLatencyS = T.BackwardLatencyS;
    }
    return Error::success();
  }
};

std::string fmtTime(double S) {
  return std::isfinite(S) ? formatDuration(Seconds(S)) : "-";
}

} // namespace

std::unique_ptr<Pass> createAssignDeviceClassesPass() {
  return std::make_unique<AssignDeviceClassesPass>();
}

Error printPlacement(const CompilationUnit &CU, ReportFormat F,
                     raw_ostream &OS) {
  const Graph &G = CU.M->getGraph();
  for (const auto &NP : G.getNodes())
    if (NP->DeviceClass.empty())
      return makeError("--print-placement needs the assign-device-classes "
                       "pass in the pipeline");
  // Placement is deterministic: recomputing it with the pass's inputs
  // gives the pass's answer, now with the reasons.
  Expected<GraphPlacement> P = placeForPipeline(CU, /*Explain=*/true);
  if (!P)
    return P.takeError();
  size_t K = P->Classes.size();
  bool Train = CU.Opts.Mode == RunMode::Train;
  if (F == ReportFormat::JSON) {
    json::Array Nodes;
    for (const NodePlacement &NP : P->Nodes) {
      json::Object Times;
      for (unsigned C = 0; C < K; ++C)
        Times[P->Classes[C]] = std::isfinite(NP.Seconds[C])
                                   ? json::Value(NP.Seconds[C])
                                   : json::Value(nullptr);
      json::Object O{
          {"node", nodeLabel(*NP.N)},   {"op", NP.N->getQualifiedOpType()},
          {"layer", NP.N->Layer},       {"class", P->Classes[NP.Class]},
          {"time_s", std::move(Times)}, {"reason", NP.Reason}};
      Nodes.push_back(std::move(O));
    }
    json::Object PerClass;
    for (unsigned C = 0; C < K; ++C)
      PerClass[P->Classes[C]] = json::Object{
          {"nodes", (int64_t)P->ClassNodes[C]}, {"time_s", P->ClassSeconds[C]}};
    json::Object Summary{
        {"nodes", (int64_t)P->Nodes.size()},
        {"mode", Train ? "train" : "infer"},
        {"step_s", P->getStepSeconds()},
        {"compute_s", P->ComputeSeconds},
        {"transfer_s", P->TransferSeconds},
        {"crossing_edges", (int64_t)P->CrossingEdges},
        {"classes", std::move(PerClass)},
        {"hbm_free_bytes", P->HBMFreeBytes},
        {"hbm_param_bytes", P->HBMParamBytes},
        {"param_shard_factor", P->ParamShardFactor},
        {"solver",
         json::Object{{"items", (int64_t)P->Stats.Items},
                      {"fixed", (int64_t)P->Stats.Fixed},
                      {"eliminated", (int64_t)P->Stats.Eliminated},
                      {"core_items", (int64_t)P->Stats.CoreItems},
                      {"core_method", getCoreMethodName(P->Stats.CoreMethod)},
                      {"core_edges", (int64_t)P->Stats.CoreEdges}}}};
    if (std::isfinite(P->SSDCapacityBytes))
      Summary["ssd_capacity_bytes"] = P->SSDCapacityBytes;
    Summary["ssd_param_bytes"] = P->SSDParamBytes;
    json::Object Root{{"nodes", std::move(Nodes)},
                      {"summary", std::move(Summary)}};
    OS << formatv("{0:2}", json::Value(std::move(Root))) << "\n";
    return Error::success();
  }
  OS << "# placement: node, op, class; time on every class ("
     << (Train ? "forward + backward" : "forward")
     << ", '-': cannot run there); reason\n";
  for (const NodePlacement &NP : P->Nodes) {
    OS << "node '" << nodeLabel(*NP.N) << "' " << NP.N->getQualifiedOpType();
    if (NP.N->Layer >= 0)
      OS << " layer=" << NP.N->Layer;
    OS << " -> " << P->Classes[NP.Class] << " |";
    for (unsigned C = 0; C < K; ++C)
      OS << ' ' << P->Classes[C] << '=' << fmtTime(NP.Seconds[C]);
    OS << " | " << NP.Reason << "\n";
  }
  OS << "summary: " << P->Nodes.size() << " nodes, step "
     << formatDuration(Seconds(P->getStepSeconds())) << " = compute "
     << formatDuration(Seconds(P->ComputeSeconds)) << " + transfers "
     << formatDuration(Seconds(P->TransferSeconds)) << " (" << P->CrossingEdges
     << " crossing edge(s))\n";
  for (unsigned C = 0; C < K; ++C)
    OS << "  " << P->Classes[C] << ": " << P->ClassNodes[C] << " node(s), "
       << formatDuration(Seconds(P->ClassSeconds[C])) << "\n";
  OS << "memory: parameters in HBM " << formatBytes(Bytes(P->HBMParamBytes))
     << " of " << formatBytes(Bytes(P->HBMFreeBytes)) << " free";
  if (P->SSDParamBytes > 0 || std::isfinite(P->SSDCapacityBytes)) {
    OS << "; on SSD " << formatBytes(Bytes(P->SSDParamBytes));
    if (std::isfinite(P->SSDCapacityBytes))
      OS << " of " << formatBytes(Bytes(P->SSDCapacityBytes));
  }
  OS << (Train ? " (training: 16 B per parameter)" : "");
  if (P->ParamShardFactor != 1)
    OS << "; parameters split " << (uint64_t)P->ParamShardFactor << " ways";
  OS << "\n";
  OS << "solver: " << P->Stats.Items << " items for " << P->Nodes.size()
     << " nodes (" << P->Stats.Fixed << " fixed, " << P->Stats.Eliminated
     << " eliminated, " << P->Stats.CoreItems << " in the core";
  if (P->Stats.CoreItems)
    OS << ", solved by " << getCoreMethodName(P->Stats.CoreMethod);
  OS << ")\n";
  return Error::success();
}

} // namespace loom
