//===- DataType.cpp - Element type names and sizes ------------------------===//
#include "loom/Support/DataType.h"
#include "llvm/ADT/StringSwitch.h"

using namespace llvm;

namespace loom {

StringRef getDataTypeName(DataType T) {
  switch (T) {
  case DataType::Undefined: return "?";
  case DataType::Float: return "f32";
  case DataType::UInt8: return "u8";
  case DataType::Int8: return "i8";
  case DataType::UInt16: return "u16";
  case DataType::Int16: return "i16";
  case DataType::Int32: return "i32";
  case DataType::Int64: return "i64";
  case DataType::String: return "str";
  case DataType::Bool: return "bool";
  case DataType::Float16: return "f16";
  case DataType::Double: return "f64";
  case DataType::UInt32: return "u32";
  case DataType::UInt64: return "u64";
  case DataType::Complex64: return "c64";
  case DataType::Complex128: return "c128";
  case DataType::BFloat16: return "bf16";
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
               .Default(None);
  return R;
}

unsigned getDataTypeSize(DataType T) {
  switch (T) {
  case DataType::Undefined:
  case DataType::String:
    return 0;
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

bool isFloatingPoint(DataType T) {
  return T == DataType::Float || T == DataType::Float16 ||
         T == DataType::Double || T == DataType::BFloat16;
}

bool isInteger(DataType T) {
  switch (T) {
  case DataType::UInt8: case DataType::Int8: case DataType::UInt16:
  case DataType::Int16: case DataType::Int32: case DataType::Int64:
  case DataType::UInt32: case DataType::UInt64:
    return true;
  default:
    return false;
  }
}

bool isKnownDataTypeCode(int32_t Code) { return Code >= 1 && Code <= 16; }

} // namespace loom
