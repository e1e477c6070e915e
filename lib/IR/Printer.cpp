//===- Printer.cpp - Deterministic textual dump of the IR -----------------===//
//
// The dump is what lit tests check, so it is line-oriented and stable:
//
//   model ir_version=8 opsets=[""=17] producer="pytorch"
//   graph main_graph {
//     input %x : f32[batch,64]
//     param %w : f32[64,64] shape-only
//     %y : f32[batch,64] = MatMul(%x, %w) name="mm0" layer=0
//     output %y
//   }
//
// Attributes print in braces in their stored order; tensors with at most 16
// elements print their values, larger ones a size and an FNV-1a hash so that
// a change of data changes the dump.
//
//===----------------------------------------------------------------------===//
#include "loom/IR/Graph.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom {

static bool isPlainName(StringRef N) {
  if (N.empty())
    return false;
  for (char C : N)
    if (!isAlnum(C) && C != '_' && C != '.' && C != '/' && C != ':' && C != '-')
      return false;
  return true;
}

static void printQuoted(raw_ostream &OS, StringRef S) {
  OS << '"';
  OS.write_escaped(S);
  OS << '"';
}

static void printValueRef(raw_ostream &OS, const Value *V) {
  if (!V) {
    OS << '_';
    return;
  }
  OS << '%';
  if (isPlainName(V->getName()))
    OS << V->getName();
  else
    printQuoted(OS, V->getName());
}

static void printFloat(raw_ostream &OS, double F) {
  // %.9g round-trips every float exactly.
  OS << format("%.9g", F);
}

static void printTensorValue(raw_ostream &OS, const Tensor &T) {
  if (!T.Data) {
    OS << " <no data>";
    return;
  }
  Optional<int64_t> N = T.Type.getNumElements();
  if (N && *N <= 16 && T.Type.Elem != DataType::String) {
    if (isFloatingPoint(T.Type.Elem)) {
      Expected<std::vector<double>> Vs = T.getFloatValues();
      if (Vs) {
        OS << " [";
        interleave(
            *Vs, OS, [&](double D) { printFloat(OS, D); }, ", ");
        OS << ']';
        return;
      }
      consumeError(Vs.takeError());
    } else {
      Expected<std::vector<int64_t>> Vs = T.getIntValues();
      if (Vs) {
        OS << " [";
        interleave(*Vs, OS, ", ");
        OS << ']';
        return;
      }
      consumeError(Vs.takeError());
    }
  }
  if (T.Data->getKind() == TensorData::Kind::External) {
    OS << " external(";
    printQuoted(OS, T.Data->getLocation());
    OS << ", offset=" << T.Data->getOffset() << ", length=" << T.Data->getSize()
       << ')';
    return;
  }
  Expected<ArrayRef<char>> B = T.Data->getBytes();
  if (!B) {
    consumeError(B.takeError());
    OS << " <unreadable>";
    return;
  }
  uint64_t H = 14695981039346656037ull;
  for (char C : *B) {
    H ^= (unsigned char)C;
    H *= 1099511628211ull;
  }
  OS << " <" << B->size() << " bytes, fnv=" << format_hex(H, 18) << '>';
}

static void printAttribute(raw_ostream &OS, const Attribute &A,
                           unsigned Indent) {
  OS << A.Name << " = ";
  switch (A.K) {
  case Attribute::Kind::Int:
    OS << A.I;
    break;
  case Attribute::Kind::Float:
    printFloat(OS, A.F);
    break;
  case Attribute::Kind::String:
    printQuoted(OS, A.S);
    break;
  case Attribute::Kind::Ints:
    OS << '[';
    interleave(A.Is, OS, ", ");
    OS << ']';
    break;
  case Attribute::Kind::Floats:
    OS << '[';
    interleave(
        A.Fs, OS, [&](float F) { printFloat(OS, F); }, ", ");
    OS << ']';
    break;
  case Attribute::Kind::Strings:
    OS << '[';
    interleave(
        A.Ss, OS, [&](const std::string &S) { printQuoted(OS, S); }, ", ");
    OS << ']';
    break;
  case Attribute::Kind::Tensor:
  case Attribute::Kind::Tensors:
    if (A.K == Attribute::Kind::Tensors)
      OS << '[';
    interleave(
        A.Ts, OS,
        [&](const Tensor &T) {
          OS << "tensor<" << T.Type.str() << '>';
          printTensorValue(OS, T);
        },
        ", ");
    if (A.K == Attribute::Kind::Tensors)
      OS << ']';
    break;
  case Attribute::Kind::Graph:
  case Attribute::Kind::Graphs:
    // printGraph ends each graph with a newline; a list of graphs must not
    // get a blank line between its members.
    if (A.Gs.empty()) {
      OS << "[]";
      break;
    }
    OS << "[\n";
    for (const auto &G : A.Gs)
      printGraph(*G, OS, Indent + 4);
    OS.indent(Indent + 2) << ']';
    break;
  }
}

static void printNode(raw_ostream &OS, const Node &N, unsigned Indent) {
  OS.indent(Indent + 2);
  bool First = true;
  for (const Value *V : N.getOutputs()) {
    if (!First)
      OS << ", ";
    First = false;
    printValueRef(OS, V);
    if (V)
      OS << " : " << V->Type.str();
  }
  if (!N.getOutputs().empty())
    OS << " = ";
  OS << N.getQualifiedOpType() << '(';
  interleave(
      N.getInputs(), OS, [&](const Value *V) { printValueRef(OS, V); }, ", ");
  OS << ')';
  if (!N.getAttributes().empty()) {
    OS << " {";
    interleave(
        N.getAttributes(), OS,
        [&](const Attribute &A) { printAttribute(OS, A, Indent); }, ", ");
    OS << '}';
  }
  if (!N.getName().empty()) {
    OS << " name=";
    printQuoted(OS, N.getName());
  }
  if (N.Layer >= 0)
    OS << " layer=" << N.Layer;
  if (N.Stage >= 0)
    OS << " stage=" << N.Stage;
  if (!N.DeviceClass.empty())
    OS << " class=" << N.DeviceClass;
  OS << '\n';
}

void printGraph(const Graph &G, raw_ostream &OS, unsigned Indent) {
  OS.indent(Indent) << "graph ";
  if (isPlainName(G.getName()))
    OS << G.getName();
  else
    printQuoted(OS, G.getName());
  OS << " {\n";
  for (const Value *V : G.getInputs()) {
    OS.indent(Indent + 2) << "input ";
    printValueRef(OS, V);
    OS << " : " << V->Type.str() << '\n';
  }
  for (const Value *P : G.getParameters()) {
    OS.indent(Indent + 2) << "param ";
    printValueRef(OS, P);
    OS << " : " << P->Type.str();
    if (P->AlsoGraphInput)
      OS << " overridable";
    if (!P->Data) {
      OS << " shape-only\n";
      continue;
    }
    Tensor T;
    T.Type = P->Type;
    T.Data = P->Data;
    printTensorValue(OS, T);
    OS << '\n';
  }
  for (const auto &N : G.getNodes())
    printNode(OS, *N, Indent);
  for (const Value *V : G.getOutputs()) {
    OS.indent(Indent + 2) << "output ";
    printValueRef(OS, V);
    OS << " : " << V->Type.str() << '\n';
  }
  OS.indent(Indent) << "}\n";
}

void printModel(const Model &M, raw_ostream &OS) {
  OS << "model ir_version=" << M.IRVersion << " opsets=[";
  interleave(
      M.Opsets, OS,
      [&](const OpsetImport &O) {
        printQuoted(OS, O.Domain);
        OS << '=' << O.Version;
      },
      ", ");
  OS << ']';
  if (!M.ProducerName.empty()) {
    OS << " producer=";
    printQuoted(OS, M.ProducerName);
  }
  OS << '\n';
  printGraph(M.getGraph(), OS);
}

} // namespace loom
