//===- Profiles.cpp - Readers of measured op and collective timings ------===//
//
// msprof op_summary CSV, PyTorch Chrome traces, nccl-tests and HCCL Test
// tables (formats in Calibration.h). Each profile op is mapped here to the
// ONNX op whose Loom cost rule describes the same kernel; ops with no such
// op are left out with a warning.
//
//===----------------------------------------------------------------------===//
#include "loom/Calibrate/Calibration.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <map>
#include <tuple>

using namespace llvm;

namespace loom {
namespace {

Error fileError(const Twine &Where, const Twine &Msg) {
  return createStringError(inconvertibleErrorCode(), Where + ": error: " + Msg);
}

std::string warning(const Twine &Where, const Twine &Msg) {
  return (Where + ": warning: " + Msg).str();
}

/// A strict decimal number (no trailing junk, finite).
Optional<double> parseNumber(StringRef S) {
  S = S.trim();
  if (S.empty())
    return None;
  double V;
  if (S.getAsDouble(V) || !std::isfinite(V))
    return None;
  return V;
}

/// A duration in us from a profile cell: a finite number > 0, else the
/// reason it is not one.
Expected<double> parseMicroseconds(StringRef Cell) {
  Optional<double> V = parseNumber(Cell);
  if (!V)
    return createStringError(inconvertibleErrorCode(),
                             "malformed duration '" + Cell.trim() + "'");
  if (*V <= 0)
    return createStringError(inconvertibleErrorCode(),
                             (*V == 0 ? "zero" : "negative") +
                                 Twine(" duration ") + Cell.trim() + " us");
  return *V * 1e-6;
}

//===----------------------------------------------------------------------===//
// Op names -> ONNX ops
//===----------------------------------------------------------------------===//

/// The ONNX op a profile's op type stands for, or "" if none.
StringRef onnxOpForAscend(StringRef Op) {
  return StringSwitch<StringRef>(Op)
      .Cases("MatMul", "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2",
             "BatchMatMulV3", "MatMul")
      .Cases("Add", "AddV2", "Add")
      .Case("Sub", "Sub")
      .Case("Mul", "Mul")
      .Cases("RealDiv", "Div", "Div")
      .Cases("Softmax", "SoftmaxV2", "Softmax")
      .Cases("LayerNorm", "LayerNormV3", "LayerNormV4", "LayerNormalization")
      .Case("Cast", "Cast")
      .Cases("Transpose", "TransposeD", "Transpose")
      .Case("Relu", "Relu")
      .Case("Sigmoid", "Sigmoid")
      .Case("Tanh", "Tanh")
      .Case("Exp", "Exp")
      .Case("Sqrt", "Sqrt")
      .Cases("Gather", "GatherV2", "Gather")
      .Default("");
}

StringRef onnxOpForAten(StringRef Op) {
  return StringSwitch<StringRef>(Op)
      .Cases("aten::mm", "aten::bmm", "aten::matmul", "aten::linear", "MatMul")
      .Case("aten::addmm", "Gemm")
      .Cases("aten::add", "aten::add_", "Add")
      .Cases("aten::sub", "aten::sub_", "Sub")
      .Cases("aten::mul", "aten::mul_", "Mul")
      .Cases("aten::div", "aten::div_", "Div")
      .Cases("aten::softmax", "aten::_softmax", "Softmax")
      .Cases("aten::layer_norm", "aten::native_layer_norm",
             "LayerNormalization")
      .Cases("aten::relu", "aten::relu_", "Relu")
      .Case("aten::sigmoid", "Sigmoid")
      .Case("aten::tanh", "Tanh")
      .Case("aten::exp", "Exp")
      .Case("aten::sqrt", "Sqrt")
      .Default("");
}

/// A profile's data type name ("DT_FLOAT16", "FLOAT16", "float",
/// "c10::Half", "c10::BFloat16", "long int", ...), or None.
Optional<DataType> parseProfileType(StringRef T) {
  std::string S = T.trim().lower();
  StringRef R(S);
  R.consume_front("dt_");
  R.consume_front("c10::");
  return StringSwitch<Optional<DataType>>(R)
      .Cases("float16", "half", "fp16", DataType::Float16)
      .Cases("bf16", "bfloat16", DataType::BFloat16)
      .Cases("float", "float32", "fp32", DataType::Float)
      .Cases("double", "float64", DataType::Double)
      .Cases("int8", "signed char", DataType::Int8)
      .Cases("uint8", "unsigned char", DataType::UInt8)
      .Cases("int16", "short int", DataType::Int16)
      .Cases("int32", "int", DataType::Int32)
      .Cases("int64", "long int", "long", DataType::Int64)
      .Case("bool", DataType::Bool)
      .Default(None);
}

/// Fills A's matmul operands so that the inner dims agree: kernels take
/// either operand transposed (MatMulV2's transpose_x1/x2, aten::linear's
/// [out, in] weight), which the profile does not record. Costs depend on
/// M, N, K only, so swapping the last two dims is exact. False if no
/// orientation agrees.
bool orientMatmul(std::vector<int64_t> &A, std::vector<int64_t> &B) {
  if (A.size() < 2 || B.size() < 2)
    return A.size() >= 1 && B.size() >= 1 && A.back() == B.front();
  auto K = [](const std::vector<int64_t> &X, bool Last) {
    return Last ? X[X.size() - 1] : X[X.size() - 2];
  };
  auto Swap = [](std::vector<int64_t> &X) {
    std::swap(X[X.size() - 1], X[X.size() - 2]);
  };
  if (K(A, true) == K(B, false))
    return true;
  if (K(A, true) == K(B, true)) {
    Swap(B);
    return true;
  }
  if (K(A, false) == K(B, false)) {
    Swap(A);
    return true;
  }
  if (K(A, false) == K(B, true)) {
    Swap(A);
    Swap(B);
    return true;
  }
  return false;
}

/// Turns the raw inputs of a profile op into the ONNX op's inputs and
/// attributes; an error message when they do not fit.
Expected<bool> shapeOperands(OpSample &S) {
  auto Fail = [&](const Twine &Msg) -> Expected<bool> {
    return createStringError(inconvertibleErrorCode(), Msg);
  };
  auto Need = [&](size_t N) { return S.InputShapes.size() >= N; };
  auto Keep = [&](size_t N) {
    S.InputShapes.resize(std::min(N, S.InputShapes.size()));
    S.InputTypes.resize(S.InputShapes.size());
  };
  const std::string &Op = S.OpType;
  if (Op == "MatMul" || Op == "Gemm") {
    // aten::addmm(bias, a, b): Gemm(a, b, bias).
    if (S.ProfileOp == "aten::addmm") {
      if (!Need(3))
        return Fail("addmm needs 3 inputs");
      std::rotate(S.InputShapes.begin(), S.InputShapes.begin() + 1,
                  S.InputShapes.begin() + 3);
      std::rotate(S.InputTypes.begin(), S.InputTypes.begin() + 1,
                  S.InputTypes.begin() + 3);
      Keep(3);
      if (S.InputShapes[0].size() != 2 || S.InputShapes[1].size() != 2)
        return Fail("addmm needs 2-D operands");
      if (!orientMatmul(S.InputShapes[0], S.InputShapes[1]))
        return Fail("operand shapes do not agree on the inner dimension");
      return true;
    }
    if (!Need(2))
      return Fail("a matmul needs 2 inputs");
    Keep(2); // A bias input, if any, is a small add hidden in the kernel.
    if (!orientMatmul(S.InputShapes[0], S.InputShapes[1]))
      return Fail("operand shapes do not agree on the inner dimension");
    return true;
  }
  if (Op == "Add" || Op == "Sub" || Op == "Mul" || Op == "Div") {
    if (!Need(2))
      return Fail("a binary op needs 2 inputs");
    Keep(2);
    // A Python scalar operand: a 0-d tensor of the other's type.
    if (S.InputTypes[1] == DataType::Undefined)
      S.InputTypes[1] = S.InputTypes[0];
    return true;
  }
  if (Op == "LayerNormalization") {
    // aten::layer_norm(x, normalized_shape, w, b, eps): drop the list.
    if (S.ProfileOp.rfind("aten::", 0) == 0 && S.InputShapes.size() >= 3) {
      S.InputShapes.erase(S.InputShapes.begin() + 1);
      S.InputTypes.erase(S.InputTypes.begin() + 1);
    }
    if (!Need(2))
      return Fail("a layer norm needs the input and a scale");
    Keep(3);
    if (S.InputShapes.size() == 3 && S.InputTypes[2] == DataType::Undefined)
      Keep(2);
    size_t Axes = S.InputShapes[1].size();
    if (Axes == 0 || Axes > S.InputShapes[0].size())
      return Fail("the scale's rank does not fit the input's");
    S.Attributes.push_back("axis = " + std::to_string(-int64_t(Axes)));
    return true;
  }
  if (Op == "Gather") {
    if (!Need(2))
      return Fail("a gather needs the table and the indices");
    Keep(2); // GatherV2's axis input is the attribute's default, 0.
    return true;
  }
  if (Op == "Cast")
    return true; // The caller sets `to`.
  Keep(1);
  if (S.InputShapes.empty())
    return Fail("no input");
  return true;
}

/// Splits "a;b;c" and each part on ','.
Expected<std::vector<std::vector<int64_t>>> parseShapeList(StringRef Cell) {
  std::vector<std::vector<int64_t>> Out;
  SmallVector<StringRef, 4> Parts;
  Cell.trim().trim('"').split(Parts, ';');
  for (StringRef P : Parts) {
    std::vector<int64_t> Dims;
    P = P.trim().trim("[]").trim();
    if (!P.empty()) {
      SmallVector<StringRef, 4> Ds;
      P.split(Ds, ',');
      for (StringRef D : Ds) {
        int64_t V;
        if (D.trim().getAsInteger(10, V) || V < 0)
          return createStringError(inconvertibleErrorCode(),
                                   "malformed shape '" + P + "'");
        Dims.push_back(V);
      }
    }
    Out.push_back(std::move(Dims));
  }
  return Out;
}

//===----------------------------------------------------------------------===//
// CSV
//===----------------------------------------------------------------------===//

struct CsvRow {
  unsigned Line = 0;
  std::vector<std::string> Cells;
};

/// RFC 4180 fields: quotes around cells with commas, "" for a quote.
Expected<std::vector<CsvRow>> splitCsv(StringRef Text, StringRef Name) {
  std::vector<CsvRow> Rows;
  CsvRow Row;
  std::string Cell;
  bool Quoted = false, Any = false;
  unsigned Line = 1, RowLine = 1;
  for (size_t I = 0; I < Text.size(); ++I) {
    char C = Text[I];
    if (Quoted) {
      if (C == '"' && I + 1 < Text.size() && Text[I + 1] == '"') {
        Cell += '"';
        ++I;
      } else if (C == '"') {
        Quoted = false;
      } else {
        if (C == '\n')
          ++Line;
        Cell += C;
      }
      continue;
    }
    if (C == '"') {
      Quoted = true;
      Any = true;
    } else if (C == ',') {
      Row.Cells.push_back(Cell);
      Cell.clear();
      Any = true;
    } else if (C == '\n' || C == '\r') {
      if (C == '\r' && I + 1 < Text.size() && Text[I + 1] == '\n')
        ++I;
      if (Any || !Cell.empty()) {
        Row.Cells.push_back(Cell);
        Row.Line = RowLine;
        Rows.push_back(std::move(Row));
      }
      Row = CsvRow();
      Cell.clear();
      Any = false;
      RowLine = ++Line;
    } else {
      Cell += C;
      Any = true;
    }
  }
  if (Quoted)
    return fileError(Name + ":" + Twine(RowLine), "unterminated quote");
  if (Any || !Cell.empty()) {
    Row.Cells.push_back(Cell);
    Row.Line = RowLine;
    Rows.push_back(std::move(Row));
  }
  return Rows;
}

} // namespace

Expected<ProfileRead> readMsprofOpSummary(StringRef Text, StringRef Name) {
  Expected<std::vector<CsvRow>> Rows = splitCsv(Text, Name);
  if (!Rows)
    return Rows.takeError();
  if (Rows->empty())
    return fileError(Name, "empty profile (expected an msprof op_summary "
                           "CSV header)");
  const CsvRow &Header = Rows->front();
  auto Find = [&](std::initializer_list<StringRef> Names) -> int {
    for (size_t I = 0; I < Header.Cells.size(); ++I)
      for (StringRef N : Names)
        if (StringRef(Header.Cells[I]).trim().equals_insensitive(N))
          return int(I);
    return -1;
  };
  int OpType = Find({"OP Type"}), TaskType = Find({"Task Type"}),
      Duration = Find({"Task Duration(us)", "Task Duration"}),
      Shapes = Find({"Input Shapes"}), Types = Find({"Input Data Types"}),
      Formats = Find({"Input Formats"}), OutTypes = Find({"Output Data Types"});
  std::pair<int, StringRef> Required[] = {{OpType, "OP Type"},
                                          {TaskType, "Task Type"},
                                          {Duration, "Task Duration(us)"},
                                          {Shapes, "Input Shapes"},
                                          {Types, "Input Data Types"}};
  for (const auto &[Index, ColName] : Required)
    if (Index < 0)
      return fileError(Name + ":" + Twine(Header.Line),
                       "missing column '" + ColName +
                           "' (an msprof op_summary CSV has OP Type, Task "
                           "Type, Task Duration(us), Input Shapes, Input "
                           "Data Types)");

  ProfileRead Out;
  for (size_t R = 1; R < Rows->size(); ++R) {
    const CsvRow &Row = (*Rows)[R];
    std::string Where = (Name + ":" + Twine(Row.Line)).str();
    auto Cell = [&](int I) -> StringRef {
      return I >= 0 && size_t(I) < Row.Cells.size()
                 ? StringRef(Row.Cells[I]).trim()
                 : StringRef();
    };
    if (Row.Cells.size() < Header.Cells.size()) {
      Out.Warnings.push_back(warning(
          Where, "row has " + Twine(Row.Cells.size()) + " cells, header has " +
                     Twine(Header.Cells.size()) + "; row left out"));
      continue;
    }
    StringRef Task = Cell(TaskType);
    std::string Class;
    if (Task == "AI_CORE" || Task == "AI_VECTOR_CORE" || Task == "MIX_AIC" ||
        Task == "MIX_AIV")
      Class = "aicore";
    else if (Task == "AI_CPU")
      Class = "aicpu";
    else {
      Out.Warnings.push_back(
          warning(Where, "task type '" + Task +
                             "' is not a compute kernel (AI_CORE, "
                             "AI_VECTOR_CORE, MIX_AIC, MIX_AIV, AI_CPU); "
                             "row left out"));
      continue;
    }
    OpSample S;
    S.Where = Where;
    S.ProfileOp = Cell(OpType).str();
    S.Class = Class;
    Expected<double> Sec = parseMicroseconds(Cell(Duration));
    if (!Sec) {
      Out.Warnings.push_back(
          warning(Where, toString(Sec.takeError()) + "; row left out"));
      continue;
    }
    S.Seconds = *Sec;
    S.OpType = onnxOpForAscend(S.ProfileOp).str();
    if (S.OpType.empty()) {
      Out.Warnings.push_back(warning(
          Where, "unknown op '" + S.ProfileOp +
                     "' (no Loom cost rule is mapped to it); row left out"));
      continue;
    }
    // FRACTAL_NZ and other private layouts report the cube's tiled shape,
    // not the tensor's.
    StringRef Fmt = Cell(Formats);
    if (Fmt.contains("FRACTAL") || Fmt.contains("NC1HWC0")) {
      Out.Warnings.push_back(
          warning(Where, "input format '" + Fmt +
                             "' gives tiled shapes, not tensor shapes; row "
                             "left out"));
      continue;
    }
    Expected<std::vector<std::vector<int64_t>>> Sh =
        parseShapeList(Cell(Shapes));
    if (!Sh) {
      Out.Warnings.push_back(
          warning(Where, toString(Sh.takeError()) + "; row left out"));
      continue;
    }
    S.InputShapes = std::move(*Sh);
    SmallVector<StringRef, 4> Ts;
    Cell(Types).trim('"').split(Ts, ';');
    bool BadType = false;
    for (StringRef T : Ts) {
      Optional<DataType> D = parseProfileType(T);
      if (!D) {
        Out.Warnings.push_back(warning(Where, "unknown data type '" + T.trim() +
                                                  "'; row left out"));
        BadType = true;
        break;
      }
      S.InputTypes.push_back(*D);
    }
    if (BadType)
      continue;
    if (S.InputTypes.size() != S.InputShapes.size()) {
      Out.Warnings.push_back(warning(
          Where, Twine(S.InputShapes.size()) + " input shapes but " +
                     Twine(S.InputTypes.size()) + " data types; row left out"));
      continue;
    }
    if (S.OpType == "Cast") {
      SmallVector<StringRef, 2> Os;
      Cell(OutTypes).split(Os, ';');
      Optional<DataType> To = Os.empty() ? None : parseProfileType(Os.front());
      if (!To) {
        Out.Warnings.push_back(
            warning(Where, "Cast without an output data type; row left out"));
        continue;
      }
      S.Attributes.push_back("to = " + std::to_string(int(*To)));
    }
    Expected<bool> Ok = shapeOperands(S);
    if (!Ok) {
      Out.Warnings.push_back(warning(Where, S.ProfileOp + ": " +
                                                toString(Ok.takeError()) +
                                                "; row left out"));
      continue;
    }
    Out.Samples.push_back(std::move(S));
  }
  return Out;
}

//===----------------------------------------------------------------------===//
// PyTorch Chrome trace
//===----------------------------------------------------------------------===//

/// Deepest nesting of JSON brackets outside strings: llvm::json::parse
/// recurses once per level, so a hostile file must not reach it deep.
static unsigned jsonDepth(StringRef Text) {
  unsigned Depth = 0, Max = 0;
  bool InString = false;
  for (size_t I = 0; I < Text.size(); ++I) {
    char C = Text[I];
    if (InString) {
      if (C == '\\')
        ++I;
      else if (C == '"')
        InString = false;
    } else if (C == '"') {
      InString = true;
    } else if (C == '[' || C == '{') {
      Max = std::max(Max, ++Depth);
    } else if ((C == ']' || C == '}') && Depth > 0) {
      --Depth;
    }
  }
  return Max;
}

namespace {

/// A cpu_op (or operator) event of a PyTorch profiler trace.
struct TraceOp {
  size_t Index;
  const json::Object *E;
  std::string Name;
  int64_t Pid = 0, Tid = 0;
  double Ts = 0, Dur = 0;
  Optional<int64_t> Ext;
};

/// The complete ("X") events of a trace that Loom reads.
struct TraceEvents {
  std::vector<TraceOp> Ops;
  /// External id -> summed kernel time (us).
  std::map<int64_t, double> KernelUs;
  /// Whether the trace has device kernels at all.
  bool AnyKernel = false;
};

} // namespace

/// The trace's host ops, and the device time of the kernels each launched
/// (matched by External id).
static TraceEvents collectTraceEvents(const json::Array &Events) {
  TraceEvents T;
  auto IntOf = [](const json::Object &O, StringRef K) -> int64_t {
    if (Optional<int64_t> I = O.getInteger(K))
      return *I;
    return 0;
  };
  for (size_t I = 0; I < Events.size(); ++I) {
    const json::Object *E = Events[I].getAsObject();
    if (!E)
      continue;
    Optional<StringRef> Ph = E->getString("ph");
    if (!Ph || *Ph != "X")
      continue;
    StringRef Cat = E->getString("cat").getValueOr("");
    const json::Object *Args = E->getObject("args");
    Optional<int64_t> Ext =
        Args ? Args->getInteger("External id") : Optional<int64_t>();
    if (Cat.equals_insensitive("kernel") || Cat == "gpu_op") {
      T.AnyKernel = true;
      if (Ext)
        T.KernelUs[*Ext] += E->getNumber("dur").getValueOr(0);
      continue;
    }
    if (Cat != "cpu_op" && Cat != "operator")
      continue;
    TraceOp O;
    O.Index = I;
    O.E = E;
    O.Name = E->getString("name").getValueOr("").str();
    O.Pid = IntOf(*E, "pid");
    O.Tid = IntOf(*E, "tid");
    O.Ts = E->getNumber("ts").getValueOr(0);
    O.Dur = E->getNumber("dur").getValueOr(-1);
    O.Ext = Ext;
    T.Ops.push_back(std::move(O));
  }
  return T;
}

/// Host-only traces: an op that encloses a mapped op on the same thread
/// (aten::matmul around aten::mm) is not a kernel. Events nest, so the
/// enclosed ones follow it in (pid, tid, ts, longest first) order. Returns,
/// per op, whether it encloses one.
static std::vector<bool> findEnclosingOps(ArrayRef<TraceOp> Ops) {
  std::vector<size_t> Order(Ops.size());
  for (size_t I = 0; I < Order.size(); ++I)
    Order[I] = I;
  llvm::sort(Order, [&](size_t A, size_t B) {
    const TraceOp &X = Ops[A], &Y = Ops[B];
    return std::make_tuple(X.Pid, X.Tid, X.Ts, -X.Dur, X.Index) <
           std::make_tuple(Y.Pid, Y.Tid, Y.Ts, -Y.Dur, Y.Index);
  });
  std::vector<bool> Encloses(Ops.size(), false);
  for (size_t I = 0; I < Order.size(); ++I) {
    const TraceOp &O = Ops[Order[I]];
    for (size_t J = I + 1; J < Order.size(); ++J) {
      const TraceOp &P = Ops[Order[J]];
      if (P.Pid != O.Pid || P.Tid != O.Tid || P.Ts >= O.Ts + O.Dur)
        break;
      if (!onnxOpForAten(P.Name).empty()) {
        Encloses[Order[I]] = true;
        break;
      }
    }
  }
  return Encloses;
}

/// The input shapes and types of \p O's "Input Dims"/"Input type" args
/// into \p S; false (with a warning for \p Where in \p Out) when they are
/// missing or malformed: the row is left out.
static bool readInputShapes(const TraceOp &O, StringRef Where, OpSample &S,
                            ProfileRead &Out) {
  const json::Object *Args = O.E->getObject("args");
  const json::Array *Dims = Args ? Args->getArray("Input Dims") : nullptr;
  const json::Array *Types = Args ? Args->getArray("Input type") : nullptr;
  if (!Dims || !Types || Dims->size() != Types->size()) {
    Out.Warnings.push_back(warning(
        Where, "no 'Input Dims'/'Input type' args of equal length (record "
               "with profile(record_shapes=True)); row left out"));
    return false;
  }
  bool Bad = false;
  for (size_t I = 0; I < Dims->size() && !Bad; ++I) {
    const json::Array *D = (*Dims)[I].getAsArray();
    StringRef T = (*Types)[I].getAsString().getValueOr("");
    std::vector<int64_t> Shape;
    if (!D) {
      Bad = true;
      break;
    }
    for (const json::Value &V : *D) {
      Optional<int64_t> X = V.getAsInteger();
      if (!X || *X < 0) {
        Bad = true;
        break;
      }
      Shape.push_back(*X);
    }
    // Scalars and lists of ints (normalized_shape, dims) have no tensor
    // type; they stay as placeholders shapeOperands drops or fills.
    Optional<DataType> DT = parseProfileType(T);
    if (T == "Scalar" || T == "ScalarList" || T.empty())
      DT = DataType::Undefined;
    else if (!DT) {
      Out.Warnings.push_back(
          warning(Where, "unknown data type '" + T + "'; row left out"));
      Bad = true;
      break;
    }
    S.InputShapes.push_back(std::move(Shape));
    S.InputTypes.push_back(*DT);
  }
  if (Bad) {
    if (Out.Warnings.empty() ||
        StringRef(Out.Warnings.back()).find(Where) == StringRef::npos)
      Out.Warnings.push_back(
          warning(Where, "malformed 'Input Dims'; row left out"));
    return false;
  }
  return true;
}

Expected<ProfileRead> readTorchTrace(StringRef Text, StringRef Name) {
  // A trace nests 5 deep (traceEvents, event, args, Input Dims, a shape).
  constexpr unsigned MaxDepth = 64;
  if (jsonDepth(Text) > MaxDepth)
    return fileError(Name, "JSON nested deeper than " + Twine(MaxDepth) +
                               " levels (not a PyTorch profiler trace)");
  Expected<json::Value> Root = json::parse(Text);
  if (!Root)
    return fileError(Name, "malformed JSON: " + toString(Root.takeError()));
  const json::Array *Events = Root->getAsArray();
  if (const json::Object *O = Root->getAsObject())
    Events = O->getArray("traceEvents");
  if (!Events)
    return fileError(Name, "no 'traceEvents' array (expected a PyTorch "
                           "profiler Chrome trace)");
  TraceEvents T = collectTraceEvents(*Events);
  const std::vector<TraceOp> &Ops = T.Ops;
  std::vector<bool> Encloses = findEnclosingOps(Ops);

  ProfileRead Out;
  for (size_t K = 0; K < Ops.size(); ++K) {
    const TraceOp &O = Ops[K];
    std::string Where =
        (Name + ": event " + Twine(O.Index) + " (" + O.Name + ")").str();
    OpSample S;
    S.Where = Where;
    S.ProfileOp = O.Name;
    S.Class = "aicore";
    S.OpType = onnxOpForAten(O.Name).str();
    double Us;
    if (T.AnyKernel) {
      // The device time of the kernels this op launched; ops that
      // launched none (wrappers such as aten::matmul, views) are not
      // kernels.
      auto It = O.Ext ? T.KernelUs.find(*O.Ext) : T.KernelUs.end();
      if (It == T.KernelUs.end())
        continue;
      Us = It->second;
    } else {
      if (Encloses[K])
        continue;
      Us = O.Dur;
    }
    if (S.OpType.empty()) {
      Out.Warnings.push_back(warning(
          Where, "unknown op '" + O.Name +
                     "' (no Loom cost rule is mapped to it); row left out"));
      continue;
    }
    if (!(Us > 0) || !std::isfinite(Us)) {
      Out.Warnings.push_back(
          warning(Where, (Us == 0             ? "zero"
                          : std::isfinite(Us) ? "negative"
                                              : "malformed") +
                             Twine(" duration; row left out")));
      continue;
    }
    S.Seconds = Us * 1e-6;
    if (!readInputShapes(O, Where, S, Out))
      continue;
    Expected<bool> Ok = shapeOperands(S);
    if (Ok && !S.InputTypes.empty() && S.InputTypes[0] == DataType::Undefined)
      Ok = createStringError(inconvertibleErrorCode(),
                             "first input is not a tensor");
    if (!Ok) {
      Out.Warnings.push_back(
          warning(Where, toString(Ok.takeError()) + "; row left out"));
      continue;
    }
    Out.Samples.push_back(std::move(S));
  }
  return Out;
}

Expected<ProfileRead> readProfileFile(StringRef Path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> File =
      MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!File)
    return fileError(Path, "cannot read profile: " + File.getError().message());
  StringRef Text = (*File)->getBuffer();
  StringRef Start = Text.ltrim();
  if (Start.startswith("{") || Start.startswith("["))
    return readTorchTrace(Text, Path);
  return readMsprofOpSummary(Text, Path);
}

//===----------------------------------------------------------------------===//
// Collective tables
//===----------------------------------------------------------------------===//

Expected<CollectiveRead> readBusBandwidthTable(StringRef Text, StringRef Name) {
  SmallVector<StringRef, 64> Lines;
  Text.split(Lines, '\n');
  CollectiveRead Out;
  // nccl-tests: the column names come on a '#' line with "size" and
  // "time"; HCCL Test: a line with "data_size" and "aveg_time".
  int SizeCol = -1, TimeCol = -1;
  bool Hccl = false;
  for (size_t L = 0; L < Lines.size(); ++L) {
    StringRef Line = Lines[L].trim();
    std::string Where = (Name + ":" + Twine(L + 1)).str();
    if (Line.empty())
      continue;
    if (Line.contains("data_size") && Line.contains("time")) {
      Hccl = true;
      SmallVector<StringRef, 8> Cols;
      Line.split(Cols, '|');
      SizeCol = TimeCol = -1;
      for (size_t I = 0; I < Cols.size(); ++I) {
        StringRef C = Cols[I].trim();
        if (C.startswith("data_size"))
          SizeCol = int(I);
        else if (C.startswith("aveg_time") || C.startswith("avg_time"))
          TimeCol = int(I);
      }
      continue;
    }
    if (Line.startswith("#")) {
      SmallVector<StringRef, 16> Cols;
      Line.drop_front().split(Cols, ' ', -1, /*KeepEmpty=*/false);
      if (is_contained(Cols, "size") && is_contained(Cols, "time")) {
        SizeCol = TimeCol = -1;
        for (size_t I = 0; I < Cols.size(); ++I) {
          if (Cols[I] == "size" && SizeCol < 0)
            SizeCol = int(I);
          if (Cols[I] == "time" && TimeCol < 0)
            TimeCol = int(I);
        }
        Hccl = false;
      }
      continue;
    }
    if (SizeCol < 0 || TimeCol < 0) {
      if (isDigit(Line.front()))
        return fileError(Where, "data row before a header naming the size "
                                "and time columns (nccl-tests '# size ... "
                                "time' or HCCL Test 'data_size(Bytes): | "
                                "aveg_time(us):')");
      continue; // Banner text.
    }
    SmallVector<StringRef, 16> Cells;
    if (Hccl)
      Line.split(Cells, '|');
    else
      Line.split(Cells, ' ', -1, /*KeepEmpty=*/false);
    if (!isDigit(Line.front()))
      continue; // "Avg bus bandwidth", "Out of bounds values", ...
    if (Cells.size() <= size_t(std::max(SizeCol, TimeCol))) {
      Out.Warnings.push_back(warning(Where, "row has too few columns; row "
                                            "left out"));
      continue;
    }
    Optional<double> Bytes = parseNumber(Cells[SizeCol]);
    if (!Bytes || *Bytes <= 0) {
      Out.Warnings.push_back(warning(Where, "malformed size '" +
                                                Cells[SizeCol].trim() +
                                                "'; row left out"));
      continue;
    }
    Expected<double> Sec = parseMicroseconds(Cells[TimeCol]);
    if (!Sec) {
      Out.Warnings.push_back(
          warning(Where, toString(Sec.takeError()) + "; row left out"));
      continue;
    }
    Out.Samples.push_back({Where, *Bytes, *Sec});
  }
  if (SizeCol < 0 || TimeCol < 0)
    return fileError(Name, "no header naming the size and time columns "
                           "(expected nccl-tests or HCCL Test output)");
  return Out;
}

Optional<CollectiveKind> parseCollectiveKind(StringRef Name) {
  std::string S;
  for (char C : Name.lower())
    if (C != '_' && C != '-')
      S += C;
  return StringSwitch<Optional<CollectiveKind>>(S)
      .Case("allreduce", CollectiveKind::AllReduce)
      .Case("allgather", CollectiveKind::AllGather)
      .Case("reducescatter", CollectiveKind::ReduceScatter)
      .Cases("alltoall", "alltoallv", CollectiveKind::AllToAll)
      .Case("broadcast", CollectiveKind::Broadcast)
      .Cases("sendrecv", "p2p", CollectiveKind::SendRecv)
      .Default(None);
}

} // namespace loom
