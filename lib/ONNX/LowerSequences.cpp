//===- LowerSequences.cpp - Dense forms of exporters' sequence loops ------===//
//
// Loom's IR holds dense tensors only. torch.onnx up to 1.13 writes
// repeat_interleave (symbolic_opset13; GPT-J's and CodeGen's rotary tables,
// `torch.repeat_interleave(sin, 2, -1)`) as a loop over sequences:
//
//   SX = SplitToSequence(X, ones, axis = a)     # X's slices along a
//   SR = SplitToSequence(R, ones, axis = 0)     # the repeats, one each
//   S  = Loop(n, true, SequenceEmpty())         # body, for slice i:
//          SequenceInsert(S, Reshape(Expand(Unsqueeze(SX[i], a + 1),
//                                           [.., SR[i], ..]), [.., -1, ..]))
//   Y  = ConcatFromSequence(S, axis = a)
//
// Where every repeat is one constant r (the `repeats` of an int argument),
// Y is each element of X repeated r times along a: Unsqueeze(X, a + 1),
// Expand by r there, Reshape merging the two axes. Newer exporters write
// that dense form themselves (torch >= 2's single-value repeat helper).
// The rewrite runs on the ModelProto before import; a loop that is not
// this form keeps its sequences and import names the value it cannot
// hold.
//
//===----------------------------------------------------------------------===//
#include "ProtoTensorData.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include <string>
#include <vector>

using namespace llvm;

namespace loom {
namespace {

using NodeMap = StringMap<const onnx::NodeProto *>;

/// \p N's attribute \p Name, if it has one.
const onnx::AttributeProto *findAttr(const onnx::NodeProto &N, StringRef Name) {
  for (const onnx::AttributeProto &A : N.attribute())
    if (A.name() == Name)
      return &A;
  return nullptr;
}

int64_t getIntAttr(const onnx::NodeProto &N, StringRef Name, int64_t Def) {
  const onnx::AttributeProto *A = findAttr(N, Name);
  return A && A->type() == onnx::AttributeProto::INT ? A->i() : Def;
}

const onnx::GraphProto *getBody(const onnx::NodeProto &N) {
  const onnx::AttributeProto *A = findAttr(N, "body");
  return A && A->has_g() ? &A->g() : nullptr;
}

/// The single value every element of an int64 tensor holds.
Optional<int64_t> getSplat(const onnx::TensorProto &T) {
  if (T.data_type() != onnx::TensorProto::INT64)
    return None;
  std::vector<int64_t> V;
  if (T.has_raw_data()) {
    const std::string &R = T.raw_data();
    for (size_t I = 0; I + 8 <= R.size(); I += 8) {
      int64_t X;
      memcpy(&X, R.data() + I, 8);
      V.push_back(X);
    }
  } else {
    V.assign(T.int64_data().begin(), T.int64_data().end());
  }
  if (V.empty() || any_of(V, [&](int64_t X) { return X != V[0]; }))
    return None;
  return V[0];
}

/// The tensor of \p N's `value` attribute (Constant, ConstantOfShape).
const onnx::TensorProto *getValueTensor(const onnx::NodeProto &N) {
  const onnx::AttributeProto *A = findAttr(N, "value");
  return A && A->has_t() ? &A->t() : nullptr;
}

/// The single value every element of a Constant node's tensor holds.
Optional<int64_t> getConstantSplat(const onnx::NodeProto &N) {
  const onnx::TensorProto *T =
      N.op_type() == "Constant" ? getValueTensor(N) : nullptr;
  return T ? getSplat(*T) : None;
}

/// An int64 tensor `value` attribute holding \p V (a scalar when
/// \p Scalar).
onnx::AttributeProto makeInt64Value(ArrayRef<int64_t> V, bool Scalar) {
  onnx::AttributeProto A;
  A.set_name("value");
  A.set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto *T = A.mutable_t();
  T->set_data_type(onnx::TensorProto::INT64);
  if (!Scalar)
    T->add_dims((int64_t)V.size());
  for (int64_t X : V)
    T->add_int64_data(X);
  return A;
}

/// The one repeat count of the repeats value \p R: a Constant splat, or a
/// splat Expanded (torch expands an int `repeats` to the dim's size).
Optional<int64_t> getRepeat(StringRef R, const NodeMap &Def) {
  const onnx::NodeProto *N = Def.lookup(R);
  for (unsigned Depth = 0; N && Depth < 4; ++Depth) {
    if (N->op_type() == "Constant")
      return getConstantSplat(*N);
    if ((N->op_type() != "Expand" && N->op_type() != "Identity" &&
         N->op_type() != "Reshape") ||
        N->input_size() < 1)
      return None;
    N = Def.lookup(N->input(0));
  }
  return None;
}

/// Whether \p Body is repeat_interleave's along \p Axis: it reads the
/// outer sequences only through SequenceAt, and inserts into its carried
/// sequence one value computed from them by the ops of the per-slice
/// repeat, the slice unsqueezed right after the axis.
bool isRepeatBody(const onnx::GraphProto &Body, int64_t Axis) {
  static const StringSet<> Allowed = {
      "SequenceAt", "SequenceInsert", "Unsqueeze", "Expand",          "Reshape",
      "Concat",     "Shape",          "Constant",  "ConstantOfShape", "Mul",
      "Equal",      "Where",          "Cast",      "Identity"};
  NodeMap Def;
  for (const onnx::NodeProto &N : Body.node())
    for (const std::string &O : N.output())
      Def[O] = &N;
  unsigned Inserts = 0, Ats = 0, Expands = 0, Unsqueezes = 0;
  for (const onnx::NodeProto &N : Body.node()) {
    if (!N.domain().empty() && N.domain() != "ai.onnx")
      return false;
    if (!Allowed.count(N.op_type()))
      return false;
    Inserts += N.op_type() == "SequenceInsert";
    Ats += N.op_type() == "SequenceAt";
    Expands += N.op_type() == "Expand";
    if (N.op_type() == "Unsqueeze") {
      const onnx::NodeProto *A =
          N.input_size() == 2 ? Def.lookup(N.input(1)) : nullptr;
      Optional<int64_t> At = A ? getConstantSplat(*A) : None;
      if (!At || *At != Axis + 1)
        return false;
      ++Unsqueezes;
    }
  }
  return Inserts == 1 && Ats == 2 && Expands == 1 && Unsqueezes == 1 &&
         Body.input_size() == 3 && Body.output_size() == 2;
}

/// Whether \p S splits into slices of one along its axis (torch passes
/// ConstantOfShape(n) of 1 as the split).
bool splitsByOne(const onnx::NodeProto &S, const NodeMap &Def) {
  if (S.input_size() < 2 || S.input(1).empty())
    return false;
  // (ConstantOfShape's default value is a float 0.)
  const onnx::NodeProto *P = Def.lookup(S.input(1));
  const onnx::TensorProto *T =
      P && (P->op_type() == "Constant" || P->op_type() == "ConstantOfShape")
          ? getValueTensor(*P)
          : nullptr;
  return T && getSplat(*T) == Optional<int64_t>(1);
}

class Lowering {
public:
  explicit Lowering(onnx::ModelProto &MP) : G(*MP.mutable_graph()) {
    for (const onnx::OperatorSetIdProto &O : MP.opset_import())
      if (O.domain().empty() || O.domain() == "ai.onnx")
        Opset = O.version();
  }

  void run() {
    bool Changed = false;
    // Opset 13 on: Unsqueeze takes its axes as an input (torch's loop form
    // is opset 13's anyway).
    if (Opset < 13)
      return;
    for (int I = 0; I < G.node_size(); ++I)
      if (G.node(I).op_type() == "ConcatFromSequence")
        Changed |= lower(I, defs());
    if (Changed)
      removeDeadSequences();
  }

private:
  NodeMap defs() const {
    NodeMap Def;
    for (const onnx::NodeProto &N : G.node())
      for (const std::string &O : N.output())
        Def[O] = &N;
    return Def;
  }

  /// Rewrites the ConcatFromSequence at \p I when it is repeat_interleave.
  bool lower(int I, const NodeMap &Def) {
    const onnx::NodeProto &C = G.node(I);
    if (C.input_size() != 1 || getIntAttr(C, "new_axis", 0) != 0)
      return false;
    const onnx::NodeProto *L = Def.lookup(C.input(0));
    if (!L || L->op_type() != "Loop" || L->input_size() != 3 ||
        L->output_size() != 1)
      return false;
    // torch writes the axis non-negative.
    int64_t Axis = getIntAttr(C, "axis", 0);
    const onnx::NodeProto *Empty = Def.lookup(L->input(2));
    const onnx::GraphProto *Body = getBody(*L);
    if (Axis < 0 || !Empty || Empty->op_type() != "SequenceEmpty" || !Body ||
        !isRepeatBody(*Body, Axis))
      return false;
    // The two outer sequences the body reads: the data's slices along the
    // concatenation axis, and the repeats.
    const onnx::NodeProto *SX = nullptr, *SR = nullptr;
    for (const onnx::NodeProto &N : Body->node()) {
      if (N.op_type() != "SequenceAt")
        continue;
      const onnx::NodeProto *S = Def.lookup(N.input(0));
      if (!S || S->op_type() != "SplitToSequence" || S->input_size() < 1)
        return false;
      (getIntAttr(*S, "axis", 0) == Axis && !SX ? SX : SR) = S;
    }
    if (!SX || !SR || SX == SR || !splitsByOne(*SX, Def))
      return false;
    Optional<int64_t> R = getRepeat(SR->input(0), Def);
    if (!R || *R < 1)
      return false;
    replace(I, SX->input(0), Axis, *R, C.output(0));
    return true;
  }

  std::string constant(StringRef Base, ArrayRef<int64_t> V, bool Scalar,
                       std::vector<onnx::NodeProto> &Out) {
    onnx::NodeProto N;
    std::string Name = (Base + "_c" + Twine(Out.size())).str();
    N.set_op_type("Constant");
    N.set_name(Name);
    N.add_output(Name);
    *N.add_attribute() = makeInt64Value(V, Scalar);
    Out.push_back(std::move(N));
    return Name;
  }

  std::string node(StringRef Op, StringRef Base, ArrayRef<std::string> Ins,
                   std::vector<onnx::NodeProto> &Out, StringRef Result = "") {
    onnx::NodeProto N;
    std::string Name = (Base + "_" + Op + Twine(Out.size())).str();
    N.set_op_type(Op.str());
    N.set_name(Name);
    for (const std::string &In : Ins)
      N.add_input(In);
    std::string Output = Result.empty() ? Name : Result.str();
    N.add_output(Output);
    Out.push_back(std::move(N));
    return Output;
  }

  /// Y = Reshape(Expand(Unsqueeze(X, a + 1), r at a + 1), X's dims with
  /// dim a times r), built from X's shape at run time (the batch may be
  /// symbolic; fold-shape-arith folds it once it is bound).
  void replace(int I, const std::string &X, int64_t Axis, int64_t R,
               const std::string &Y) {
    std::string Base = G.node(I).name().empty() ? Y : G.node(I).name();
    std::vector<onnx::NodeProto> Out;
    std::string Shape = node("Shape", Base, {X}, Out);
    std::string Rank = node("Size", Base, {Shape}, Out);
    // a may be negative: a' = a mod rank, computed in the graph.
    std::string A = constant(Base, {Axis}, /*Scalar=*/true, Out);
    std::string APos = node("Mod", Base, {A, Rank}, Out);
    std::string One = constant(Base, {1}, true, Out);
    std::string A1 = node("Add", Base, {APos, One}, Out);
    std::string A1v =
        node("Unsqueeze", Base, {A1, constant(Base, {0}, false, Out)}, Out);
    std::string U = node("Unsqueeze", Base, {X, A1v}, Out);
    // Expand's shape: ones, with r at a + 1.
    std::string Ones =
        node("ConstantOfShape", Base,
             {node("Add", Base,
                   {node("Unsqueeze", Base,
                         {Rank, constant(Base, {0}, false, Out)}, Out),
                    constant(Base, {1}, false, Out)},
                   Out)},
             Out);
    *Out.back().add_attribute() = makeInt64Value({1}, /*Scalar=*/false);
    std::string Ranks1 = node("Range", Base,
                              {constant(Base, {0}, true, Out),
                               node("Add", Base, {Rank, One}, Out), One},
                              Out);
    std::string At = node("Equal", Base, {Ranks1, A1}, Out);
    std::string Rv = constant(Base, {R}, false, Out);
    std::string EShape = node("Where", Base, {At, Rv, Ones}, Out);
    std::string E = node("Expand", Base, {U, EShape}, Out);
    // Reshape: X's dims, dim a times r.
    std::string Ranks =
        node("Range", Base, {constant(Base, {0}, true, Out), Rank, One}, Out);
    std::string AtX = node("Equal", Base, {Ranks, APos}, Out);
    std::string Scaled = node("Mul", Base, {Shape, Rv}, Out);
    std::string RShape = node("Where", Base, {AtX, Scaled, Shape}, Out);
    node("Reshape", Base, {E, RShape}, Out, Y);
    google::protobuf::RepeatedPtrField<onnx::NodeProto> Nodes;
    for (int J = 0; J < G.node_size(); ++J) {
      if (J == I)
        for (onnx::NodeProto &N : Out)
          *Nodes.Add() = std::move(N);
      else
        *Nodes.Add() = G.node(J);
    }
    G.mutable_node()->Swap(&Nodes);
  }

  /// Drops the nodes whose results nobody reads any more and that make or
  /// read sequences (the Loop, its SequenceEmpty and SplitToSequences),
  /// and the value_info entries of their results.
  void removeDeadSequences() {
    StringSet<> Read, Removed;
    auto Mark = [&](const onnx::GraphProto &Sub, auto &Self) -> void {
      for (const onnx::NodeProto &N : Sub.node()) {
        for (const std::string &In : N.input())
          Read.insert(In);
        for (const onnx::AttributeProto &A : N.attribute())
          if (A.has_g())
            Self(A.g(), Self);
      }
    };
    static const StringSet<> Sequence = {"Loop", "SequenceEmpty",
                                         "SplitToSequence"};
    for (bool Again = true; Again;) {
      Again = false;
      Read.clear();
      for (const onnx::ValueInfoProto &O : G.output())
        Read.insert(O.name());
      Mark(G, Mark);
      for (int I = G.node_size(); I-- > 0;) {
        const onnx::NodeProto &N = G.node(I);
        if (Sequence.count(N.op_type()) &&
            none_of(N.output(),
                    [&](const std::string &O) { return Read.count(O); })) {
          for (const std::string &O : N.output())
            Removed.insert(O);
          G.mutable_node()->DeleteSubrange(I, 1);
          Again = true;
        }
      }
    }
    for (int I = G.value_info_size(); I-- > 0;)
      if (Removed.count(G.value_info(I).name()))
        G.mutable_value_info()->DeleteSubrange(I, 1);
  }

  onnx::GraphProto &G;
  int64_t Opset = 0;
};

} // namespace

void lowerSequenceLoops(onnx::ModelProto &MP) {
  if (MP.has_graph())
    Lowering(MP).run();
}

} // namespace loom
