//===- Graph.h - Loom's dataflow graph IR -----------------------*- C++ -*-===//
//
// The in-memory form of an ONNX model that every pass reads and annotates:
// a Model owns a Graph; a Graph owns Nodes (kept in topological order) and
// Values (graph inputs, parameters and node results). Parameters refer to
// their data through TensorData, which lib/ONNX implements lazily, so weights
// are never copied into the IR.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_GRAPH_H
#define LOOM_IR_GRAPH_H

#include "loom/Support/DataType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace loom {

class Graph;
class Node;

/// One dimension: a static size, a named symbol ("batch"), or unknown.
struct Dim {
  int64_t Size = -1;  ///< >= 0 when static.
  std::string Symbol; ///< Non-empty for a symbolic dim.

  Dim() = default;
  Dim(int64_t Size) : Size(Size) {}
  static Dim symbol(llvm::StringRef S) {
    Dim D;
    D.Symbol = S.str();
    return D;
  }
  bool isStatic() const { return Size >= 0; }
  bool isSymbolic() const { return Size < 0 && !Symbol.empty(); }
  bool operator==(const Dim &O) const {
    return Size == O.Size && Symbol == O.Symbol;
  }
  bool operator!=(const Dim &O) const { return !(*this == O); }
};

/// Element type plus shape. A tensor of unknown rank has HasShape == false.
struct TensorType {
  DataType Elem = DataType::Undefined;
  bool HasShape = false;
  llvm::SmallVector<Dim, 4> Dims;

  TensorType() = default;
  TensorType(DataType Elem, llvm::ArrayRef<int64_t> Shape);

  unsigned getRank() const { return Dims.size(); }
  /// Every dim static and the rank known.
  bool isStatic() const;
  /// Number of elements, or None if not static or it overflows int64.
  llvm::Optional<int64_t> getNumElements() const;
  /// Size in bytes, or None if not static, overflowing, or of string type.
  llvm::Optional<int64_t> getSizeInBytes() const;
  /// The static dims; only valid when isStatic().
  llvm::SmallVector<int64_t, 4> getStaticShape() const;
  bool operator==(const TensorType &O) const {
    return Elem == O.Elem && HasShape == O.HasShape && Dims == O.Dims;
  }
  bool operator!=(const TensorType &O) const { return !(*this == O); }
  /// "f32[batch,64]", "f32[?]" for an unknown dim, "f32[*]" for unknown rank.
  void print(llvm::raw_ostream &OS) const;
  std::string str() const;
};

/// Bytes of a tensor, wherever they live. Implementations (lib/ONNX) read
/// inline protobuf data or map external data files on first use.
class TensorData {
public:
  enum class Kind { Inline, External };
  virtual ~TensorData();
  virtual Kind getKind() const = 0;
  /// The raw little-endian bytes (ONNX raw_data layout).
  virtual llvm::Expected<llvm::ArrayRef<char>> getBytes() const = 0;
  /// Reads [Offset, Offset+Length) without necessarily mapping the rest.
  virtual llvm::Expected<std::vector<char>> readRange(uint64_t Offset,
                                                      uint64_t Length) const;
  /// Copies \p Count runs of \p Length bytes, the i-th at offset
  /// First + i * Stride, to \p Out one after another (a slice of a weight).
  /// External data overrides this to map the span once instead of reading
  /// run by run.
  virtual llvm::Error readStrided(uint64_t First, uint64_t Stride,
                                  uint64_t Length, uint64_t Count,
                                  char *Out) const;
  /// Copies all getSize() bytes to \p Out (writers stream tensors through
  /// one reused buffer with it).
  virtual llvm::Error readAll(char *Out) const {
    return readStrided(0, getSize(), getSize(), 1, Out);
  }
  /// Calls \p Fn with all getSize() bytes in place, for the duration of the
  /// call only: external data is mapped just for it and computed data
  /// (a slice) is produced just for it, so a writer going tensor by tensor
  /// holds one tensor at a time.
  virtual llvm::Error
  withBytes(llvm::function_ref<llvm::Error(llvm::ArrayRef<char>)> Fn) const;
  /// Writes \p Count runs of \p Length bytes, the i-th read at
  /// First + i * Stride, to \p FD at Offset + i * DestStride (positioned
  /// writes; the descriptor's file position is not used). External data
  /// overrides this to copy file to file inside the kernel.
  virtual llvm::Error writeStrided(uint64_t First, uint64_t Stride,
                                   uint64_t Length, uint64_t Count,
                                   llvm::sys::fs::file_t FD, uint64_t Offset,
                                   uint64_t DestStride) const;
  /// Writes all getSize() bytes to \p FD at byte \p Offset.
  virtual llvm::Error writeTo(llvm::sys::fs::file_t FD, uint64_t Offset) const {
    return writeStrided(0, getSize(), getSize(), 1, FD, Offset, getSize());
  }
  /// Declared size in bytes.
  virtual uint64_t getSize() const = 0;
  /// External data: location relative to the model directory.
  virtual llvm::StringRef getLocation() const { return ""; }
  virtual uint64_t getOffset() const { return 0; }
};

/// Data held in memory (constants made by passes, small attribute tensors).
class BufferTensorData : public TensorData {
public:
  explicit BufferTensorData(std::vector<char> Bytes)
      : Bytes(std::move(Bytes)) {}
  Kind getKind() const override { return Kind::Inline; }
  llvm::Expected<llvm::ArrayRef<char>> getBytes() const override {
    return llvm::ArrayRef<char>(Bytes);
  }
  uint64_t getSize() const override { return Bytes.size(); }

private:
  std::vector<char> Bytes;
};

/// A typed tensor with (optional) data: initializers and tensor attributes.
struct Tensor {
  std::string Name;
  TensorType Type;
  std::shared_ptr<const TensorData> Data; ///< Null: shape-only.

  /// Reads the elements of an integer tensor (int8..int64, uint8..uint32,
  /// bool) widened to int64.
  llvm::Expected<std::vector<int64_t>> getIntValues() const;
  /// Reads the elements of a floating-point tensor widened to double.
  llvm::Expected<std::vector<double>> getFloatValues() const;
  /// Makes an int64 tensor with the given dims and values.
  static Tensor makeInt64(llvm::ArrayRef<int64_t> Shape,
                          llvm::ArrayRef<int64_t> Values);
  /// Makes a tensor of \p Elem type holding \p Values converted from int64
  /// or double (whichever the element type needs).
  static Tensor makeFromInts(DataType Elem, llvm::ArrayRef<int64_t> Shape,
                             llvm::ArrayRef<int64_t> Values);
  static Tensor makeFromDoubles(DataType Elem, llvm::ArrayRef<int64_t> Shape,
                                llvm::ArrayRef<double> Values);
};

/// A node attribute (ONNX AttributeProto, minus type protos and sparse
/// tensors, which import rejects).
struct Attribute {
  enum class Kind {
    Float,
    Int,
    String,
    Tensor,
    Graph,
    Floats,
    Ints,
    Strings,
    Tensors,
    Graphs
  };
  std::string Name;
  Kind K = Kind::Int;
  float F = 0;
  int64_t I = 0;
  std::string S;
  std::vector<float> Fs;
  std::vector<int64_t> Is;
  std::vector<std::string> Ss;
  std::vector<loom::Tensor> Ts; ///< One element for Kind::Tensor.
  std::vector<std::unique_ptr<loom::Graph>> Gs; ///< One for Kind::Graph.

  Attribute() = default;
  Attribute(Attribute &&) = default;
  Attribute &operator=(Attribute &&) = default;
  ~Attribute();
};

/// An SSA value: a graph input, a parameter (initializer), or a node result.
class Value {
public:
  enum class Kind { Input, Parameter, Result };

  llvm::StringRef getName() const { return Name; }
  Kind getKind() const { return K; }
  bool isParameter() const { return K == Kind::Parameter; }
  bool isInput() const { return K == Kind::Input; }
  Node *getDefiningNode() const { return Def; }
  unsigned getResultNumber() const { return ResultNo; }
  Graph *getGraph() const { return Owner; }

  TensorType Type;
  /// Parameter data; null for a shape-only parameter or a non-parameter.
  std::shared_ptr<const TensorData> Data;
  /// Parameter declared but no data exists (text-syntax value list, or
  /// external data whose file is absent).
  bool isShapeOnly() const { return K == Kind::Parameter && !Data; }
  /// Parameter that is also listed as a graph input (IR version < 4 style:
  /// the caller may override it).
  bool AlsoGraphInput = false;

private:
  friend class Graph;
  friend class Node;
  std::string Name;
  Kind K = Kind::Result;
  Node *Def = nullptr;
  unsigned ResultNo = 0;
  Graph *Owner = nullptr;
};

/// One operator application. Annotations are filled by later passes.
class Node {
public:
  llvm::StringRef getOpType() const { return OpType; }
  /// Changes the operator in place (canonicalize: Div by 2^k -> Mul); the
  /// caller keeps inputs and attributes valid for the new op.
  void setOpType(llvm::StringRef Op) { OpType = Op.str(); }
  llvm::StringRef getDomain() const { return Domain; }
  llvm::StringRef getName() const { return Name; }
  void setName(llvm::StringRef N) { Name = N.str(); }
  Graph *getGraph() const { return Owner; }

  /// Inputs; a null entry is an omitted optional input ("" in ONNX).
  llvm::ArrayRef<Value *> getInputs() const { return Inputs; }
  Value *getInput(unsigned I) const {
    return I < Inputs.size() ? Inputs[I] : nullptr;
  }
  unsigned getNumInputs() const { return Inputs.size(); }
  void setInput(unsigned I, Value *V) { Inputs[I] = V; }
  void setInputs(llvm::ArrayRef<Value *> Vs) {
    Inputs.assign(Vs.begin(), Vs.end());
  }
  /// Outputs; a null entry is an omitted optional output.
  llvm::ArrayRef<Value *> getOutputs() const { return Outputs; }
  Value *getOutput(unsigned I) const {
    return I < Outputs.size() ? Outputs[I] : nullptr;
  }
  unsigned getNumOutputs() const { return Outputs.size(); }

  llvm::ArrayRef<Attribute> getAttributes() const { return Attrs; }
  const Attribute *getAttribute(llvm::StringRef Name) const;
  int64_t getAttrInt(llvm::StringRef Name, int64_t Default) const;
  float getAttrFloat(llvm::StringRef Name, float Default) const;
  llvm::StringRef getAttrString(llvm::StringRef Name,
                                llvm::StringRef Default) const;
  llvm::Optional<std::vector<int64_t>> getAttrInts(llvm::StringRef Name) const;
  void addAttribute(Attribute A) { Attrs.push_back(std::move(A)); }
  void setAttributes(std::vector<Attribute> A) { Attrs = std::move(A); }
  std::vector<Attribute> takeAttributes() { return std::move(Attrs); }

  /// "domain.Op" or "Op" for the default domain.
  std::string getQualifiedOpType() const;

  // Annotations (DESIGN §4); -1 / empty when not yet computed.
  int Layer = -1;
  int Stage = -1;
  std::string DeviceClass;
  std::string DocString;

private:
  friend class Graph;
  std::string Name, OpType, Domain;
  llvm::SmallVector<Value *, 4> Inputs;
  llvm::SmallVector<Value *, 2> Outputs;
  std::vector<Attribute> Attrs;
  Graph *Owner = nullptr;
};

/// A dataflow graph: nodes in topological order. Subgraphs (Loop/If/Scan
/// bodies) are Graphs owned by attributes; their nodes may read values of
/// enclosing graphs by name.
class Graph {
public:
  explicit Graph(llvm::StringRef Name, Graph *Parent = nullptr)
      : Name(Name.str()), Parent(Parent) {}
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;
  ~Graph();

  llvm::StringRef getName() const { return Name; }
  void setName(llvm::StringRef N) { Name = N.str(); }
  Graph *getParent() const { return Parent; }
  std::string DocString;

  /// Creates a graph input / parameter. Fails on a duplicate name.
  llvm::Expected<Value *> addInput(llvm::StringRef Name, TensorType T);
  llvm::Expected<Value *> addParameter(llvm::StringRef Name, TensorType T,
                                       std::shared_ptr<const TensorData> D);
  /// Appends a node creating its result values (names must be new; an empty
  /// name makes an omitted output). Fails on a duplicate value name.
  llvm::Expected<Node *> addNode(llvm::StringRef OpType, llvm::StringRef Domain,
                                 llvm::StringRef Name,
                                 llvm::ArrayRef<Value *> Inputs,
                                 llvm::ArrayRef<std::string> OutputNames);
  /// As addNode, placing the node at position \p Pos (before the node now
  /// there) so that a rewrite keeps the nodes in topological order.
  llvm::Expected<Node *> insertNode(unsigned Pos, llvm::StringRef OpType,
                                    llvm::StringRef Domain,
                                    llvm::StringRef Name,
                                    llvm::ArrayRef<Value *> Inputs,
                                    llvm::ArrayRef<std::string> OutputNames);
  /// Makes \p V (a result of a node of this graph) result \p Slot of \p To
  /// instead; its old node keeps an empty slot there. canonicalize merges
  /// Slices into one Split whose results are the Slices' own values.
  void moveResult(Value *V, Node *To, unsigned Slot);
  /// A value name not yet defined in this graph: \p Base, else Base_1, ...
  std::string getFreshName(llvm::StringRef Base) const;
  void addOutput(Value *V) { Outputs.push_back(V); }
  void setOutputs(llvm::ArrayRef<Value *> Vs) {
    Outputs.assign(Vs.begin(), Vs.end());
  }

  /// Looks a value up in this graph only.
  Value *lookupLocal(llvm::StringRef Name) const {
    return ValuesByName.lookup(Name);
  }
  /// Looks a value up here, then in enclosing graphs.
  Value *lookup(llvm::StringRef Name) const;

  llvm::ArrayRef<Value *> getInputs() const { return Inputs; }
  llvm::ArrayRef<Value *> getOutputs() const { return Outputs; }
  llvm::ArrayRef<Value *> getParameters() const { return Parameters; }
  llvm::ArrayRef<std::unique_ptr<Node>> getNodes() const { return Nodes; }
  unsigned getNumNodes() const { return Nodes.size(); }
  /// Number of nodes including those in subgraphs.
  unsigned countNodesRecursively() const;

  /// Replaces node \p N (which must be in this graph) by a node of a new op
  /// type producing the same output values, e.g. a folded Constant.
  Node *replaceWithConstant(Node *N, Tensor Value);
  /// As above for the node at position \p Index (no search).
  Node *replaceWithConstant(unsigned Index, Tensor Value);
  /// Removes the nodes for which \p Dead is true; their outputs must be
  /// unused.
  void eraseNodes(llvm::function_ref<bool(const Node &)> Dead);
  /// Turns the result of \p N (a node with one output) into a parameter of
  /// its own holding \p Data, under the result's name; \p N is left
  /// without outputs for the caller to erase (one eraseNodes for many).
  /// canonicalize gives back its own weight to a layer whose weight the
  /// exporter deduplicated into Identity(another layer's weight). Returns
  /// the parameter.
  Value *turnResultIntoParameter(Node *N, std::shared_ptr<const TensorData> D);
  /// The converse: parameter \p P (holding data) becomes the result of a
  /// new `Constant` node placed first, under the same name and type
  /// (canonicalize: an initializer that is data, not a weight). Returns
  /// the node.
  Node *turnParameterIntoConstant(Value *P);
  /// Removes parameters not read by any node or graph output (recursively).
  void eraseUnusedParameters();
  /// Gives \p V (a value of this graph) the unused name \p NewName (a graph
  /// output that a pass re-derives keeps its name for the new value).
  llvm::Error renameValue(Value *V, llvm::StringRef NewName);
  /// Moves node \p N of this graph to position \p Index (a node a pass
  /// appended, to just after the value it reads); the caller keeps the
  /// order topological.
  void moveNode(Node *N, unsigned Index);
  /// Removes the nodes whose outputs nothing reads, transitively (control
  /// flow nodes, with their subgraphs, and nodes without outputs stay).
  void eraseDeadNodes();
  /// Counts the uses of every value (nodes of this graph and subgraphs, and
  /// graph outputs).
  llvm::DenseMap<const Value *, unsigned> computeUseCounts() const;

private:
  friend class Node;
  Value *createValue(llvm::StringRef Name, Value::Kind K);
  std::string Name;
  Graph *Parent;
  std::vector<std::unique_ptr<Node>> Nodes;
  std::vector<std::unique_ptr<Value>> Values;
  llvm::StringMap<Value *> ValuesByName;
  llvm::SmallVector<Value *, 4> Inputs, Outputs;
  std::vector<Value *> Parameters;
};

struct OpsetImport {
  std::string Domain;
  int64_t Version = 0;
};

/// A whole model: metadata plus the main graph.
class Model {
public:
  Model() : MainGraph(std::make_unique<Graph>("main")) {}
  int64_t IRVersion = 8;
  std::vector<OpsetImport> Opsets;
  std::string ProducerName, ProducerVersion, Domain, DocString;
  int64_t ModelVersion = 0;
  std::vector<std::pair<std::string, std::string>> MetadataProps;
  /// Directory external data locations are relative to.
  std::string BaseDir;
  /// The file the model came from, for messages.
  std::string SourcePath;

  Graph &getGraph() { return *MainGraph; }
  const Graph &getGraph() const { return *MainGraph; }
  /// Opset version of a domain ("" or "ai.onnx" is the default domain); 0
  /// if not imported.
  int64_t getOpsetVersion(llvm::StringRef Domain) const;

private:
  std::unique_ptr<Graph> MainGraph;
};

/// A structural copy of \p M: graphs, nodes, values, attributes (subgraphs
/// included) and annotations are copied; parameter and constant data are
/// shared (TensorData is immutable), so the copy costs the graph's structure,
/// never its weights.
std::unique_ptr<Model> cloneModel(const Model &M);

/// A layer found by detect-layers: a contiguous run of nodes. Repeated
/// blocks share a signature; the parts before the first and after the last
/// repeated block (embedding, head) are layers of their own.
struct LayerInfo {
  enum class Kind { Prologue, Block, Epilogue, Other };
  unsigned Id = 0;
  Kind K = Kind::Other;
  /// Structural hash of the layer's weight-reading nodes (op types and
  /// parameter shapes, in order): equal for repeated blocks.
  uint64_t Signature = 0;
  /// Index of the repeated run the layer belongs to (-1 if none).
  int Run = -1;
  unsigned NumNodes = 0;
  uint64_t ParamCount = 0;
};
llvm::StringRef getLayerKindName(LayerInfo::Kind K);

/// Checks SSA (each value defined once, before use, in this graph or an
/// enclosing one), topological order, that graph outputs are defined, and
/// that parameter data sizes match their types. The message names the node
/// or value at fault.
llvm::Error verifyGraph(const Graph &G);
llvm::Error verifyModel(const Model &M);

/// Deterministic textual dump for FileCheck (see lib/IR/Printer.cpp).
void printModel(const Model &M, llvm::raw_ostream &OS);
void printGraph(const Graph &G, llvm::raw_ostream &OS, unsigned Indent = 0);

/// The output of a default-domain Constant node.
bool isConstantNodeOutput(const Value *V);
/// A parameter, or the output of a default-domain Constant node.
bool isConstantLike(const Value *V);
/// Every value's users (nodes reading it), in graph order, each node once
/// per input slot that reads the value. Invalidated by graph edits.
using UseMap =
    llvm::DenseMap<const Value *, llvm::SmallVector<const Node *, 2>>;
UseMap buildUseMap(const Graph &G);
/// A copy of \p A without its subgraphs (Graph attributes have none; the
/// caller clones them into their new owner when it needs them).
Attribute copyAttributeValues(const Attribute &A);
/// The tensor behind \p V when it is a default-domain Constant node's output
/// (any of its value attributes) or a parameter with data; None otherwise.
llvm::Optional<Tensor> getConstantTensor(const Value *V);
/// The integer (or bool) elements of getConstantTensor, widened to int64.
llvm::Optional<std::vector<int64_t>> getConstantInts(const Value *V);
/// The floating-point elements of getConstantTensor.
llvm::Optional<std::vector<double>> getConstantFloats(const Value *V);
/// The parameter behind a weight-like value: the parameter itself or a
/// layout change of it (Transpose/Cast/Identity, up to 4 deep; torch's
/// Linear exports Transpose(weight) -> MatMul); null otherwise.
const Value *getWeightParameter(const Value *V);
/// The values that depend on the graph's inputs: the rest (masks, rotary
/// tables once shapes are static) each pipeline device can compute itself,
/// and layer detection gives them to the first layer that needs them. Nodes
/// with subgraphs count as dependent (a subgraph may read outer values by
/// name).
llvm::DenseSet<const Value *> findDataDependent(const Graph &G);
/// The values computed from Constant nodes alone: no parameter and no graph
/// input reaches them (positions folded from a Range, a rotary table
/// computed from them).
llvm::DenseSet<const Value *> findConstantOnly(const Graph &G);
/// Table work: a node with no data-dependent input (\p DD) that reads a
/// floating-point tensor of two or more elements computed from constants
/// alone (\p ConstOnly). Hugging Face's computed rotary tables are one
/// (`inv_freq @ positions`, the positions folded from a Range): the same
/// whatever the inputs, made once per step. A weight's own views and
/// derivations (a transpose, a weight norm: a weight with scalars beside)
/// are not.
bool isTableWork(const Node &N, const llvm::DenseSet<const Value *> &DD,
                 const llvm::DenseSet<const Value *> &ConstOnly);
inline bool isWeightLike(const Value *V) {
  return getWeightParameter(V) != nullptr;
}

/// The symbol bind-symbols binds for --batch: "batch" or "batch_size",
/// else the dim-0 symbol of the first input whose dim 0 is symbolic; ''
/// when the batch dim is static.
std::string findBatchSymbol(const Graph &G);

/// Sums the bytes of parameters with a static size.
uint64_t getTotalParameterBytes(const Graph &G);
/// Sums the element counts of parameters with a static size.
uint64_t getTotalParameterCount(const Graph &G);

} // namespace loom

#endif // LOOM_IR_GRAPH_H
