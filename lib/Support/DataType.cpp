//===- DataType.cpp - Element type names and sizes ------------------------===//
#include "loom/Support/DataType.h"
#include "llvm/ADT/StringSwitch.h"

using namespace llvm;

namespace loom {

StringRef getONNXTypeName(DataType T) {
  switch (T) {
  case DataType::Float16:
    return "float16";
  case DataType::BFloat16:
    return "bfloat16";
  case DataType::Float:
    return "float";
  case DataType::Double:
    return "double";
  case DataType::Int8:
    return "int8";
  case DataType::UInt8:
    return "uint8";
  case DataType::Int16:
    return "int16";
  case DataType::Int32:
    return "int32";
  case DataType::Int64:
    return "int64";
  case DataType::UInt16:
    return "uint16";
  case DataType::UInt32:
    return "uint32";
  case DataType::UInt64:
    return "uint64";
  case DataType::Bool:
    return "bool";
  default:
    return "";
  }
}

StringRef getDataTypeName(DataType T) {
  switch (T) {
  case DataType::Undefined:
    return "?";
  case DataType::Float:
    return "f32";
  case DataType::UInt8:
    return "u8";
  case DataType::Int8:
    return "i8";
  case DataType::UInt16:
    return "u16";
  case DataType::Int16:
    return "i16";
  case DataType::Int32:
    return "i32";
  case DataType::Int64:
    return "i64";
  case DataType::String:
    return "str";
  case DataType::Bool:
    return "bool";
  case DataType::Float16:
    return "f16";
  case DataType::Double:
    return "f64";
  case DataType::UInt32:
    return "u32";
  case DataType::UInt64:
    return "u64";
  case DataType::Complex64:
    return "c64";
  case DataType::Complex128:
    return "c128";
  case DataType::BFloat16:
    return "bf16";
  case DataType::Float8E4M3FN:
    return "f8e4m3fn";
  case DataType::Float8E4M3FNUZ:
    return "f8e4m3fnuz";
  case DataType::Float8E5M2:
    return "f8e5m2";
  case DataType::Float8E5M2FNUZ:
    return "f8e5m2fnuz";
  case DataType::UInt4:
    return "u4";
  case DataType::Int4:
    return "i4";
  case DataType::Float4E2M1:
    return "f4e2m1";
  }
  return "?";
}

Optional<DataType> parseDataTypeName(StringRef Name) {
  auto R = StringSwitch<Optional<DataType>>(Name.lower())
               .Cases("f32", "fp32", "float", "float32", DataType::Float)
               .Cases("u8", "uint8", DataType::UInt8)
               .Cases("i8", "int8", DataType::Int8)
               .Cases("u16", "uint16", DataType::UInt16)
               .Cases("i16", "int16", DataType::Int16)
               .Cases("i32", "int32", DataType::Int32)
               .Cases("i64", "int64", DataType::Int64)
               .Cases("str", "string", DataType::String)
               .Case("bool", DataType::Bool)
               .Cases("f16", "fp16", "float16", "half", DataType::Float16)
               .Cases("f64", "fp64", "double", "float64", DataType::Double)
               .Cases("u32", "uint32", DataType::UInt32)
               .Cases("u64", "uint64", DataType::UInt64)
               .Cases("c64", "complex64", DataType::Complex64)
               .Cases("c128", "complex128", DataType::Complex128)
               .Cases("bf16", "bfloat16", DataType::BFloat16)
               .Cases("f8e4m3fn", "float8e4m3fn", DataType::Float8E4M3FN)
               .Cases("f8e4m3fnuz", "float8e4m3fnuz", DataType::Float8E4M3FNUZ)
               .Cases("f8e5m2", "float8e5m2", DataType::Float8E5M2)
               .Cases("f8e5m2fnuz", "float8e5m2fnuz", DataType::Float8E5M2FNUZ)
               .Cases("u4", "uint4", DataType::UInt4)
               .Cases("i4", "int4", DataType::Int4)
               .Cases("f4e2m1", "float4e2m1", DataType::Float4E2M1)
               .Default(None);
  return R;
}

unsigned getDataTypeSize(DataType T) {
  switch (T) {
  case DataType::Undefined:
  case DataType::String:
  case DataType::UInt4:
  case DataType::Int4:
  case DataType::Float4E2M1:
    return 0;
  case DataType::Float8E4M3FN:
  case DataType::Float8E4M3FNUZ:
  case DataType::Float8E5M2:
  case DataType::Float8E5M2FNUZ:
  case DataType::UInt8:
  case DataType::Int8:
  case DataType::Bool:
    return 1;
  case DataType::UInt16:
  case DataType::Int16:
  case DataType::Float16:
  case DataType::BFloat16:
    return 2;
  case DataType::Float:
  case DataType::Int32:
  case DataType::UInt32:
    return 4;
  case DataType::Int64:
  case DataType::Double:
  case DataType::UInt64:
  case DataType::Complex64:
    return 8;
  case DataType::Complex128:
    return 16;
  }
  return 0;
}

unsigned getDataTypeBits(DataType T) {
  switch (T) {
  case DataType::UInt4:
  case DataType::Int4:
  case DataType::Float4E2M1:
    return 4;
  default:
    return 8 * getDataTypeSize(T);
  }
}

Optional<int64_t> getStorageBytes(DataType T, int64_t Count) {
  int64_t Bits = getDataTypeBits(T);
  if (Bits == 0 || Count < 0)
    return None;
  // Whole groups of 8 elements are Bits bytes each; the rest rounds up.
  int64_t Whole = Count / 8, Rest = (Count % 8 * Bits + 7) / 8;
  if (Whole > (INT64_MAX - Rest) / Bits)
    return None;
  return Whole * Bits + Rest;
}

bool isPostONNX112Type(DataType T) {
  return (int32_t)T > (int32_t)DataType::BFloat16;
}

// The float8 and 4-bit types are neither: these two say which element
// types Loom decodes as numbers (constant folding, printing, gradients);
// float8 and int4 values are carried and costed by their bytes only.
bool isFloatingPoint(DataType T) {
  return T == DataType::Float || T == DataType::Float16 ||
         T == DataType::Double || T == DataType::BFloat16;
}

bool isInteger(DataType T) {
  switch (T) {
  case DataType::UInt8:
  case DataType::Int8:
  case DataType::UInt16:
  case DataType::Int16:
  case DataType::Int32:
  case DataType::Int64:
  case DataType::UInt32:
  case DataType::UInt64:
    return true;
  default:
    return false;
  }
}

bool isKnownDataTypeCode(int32_t Code) {
  return Code >= 1 && Code <= MaxDataTypeCode;
}

} // namespace loom
