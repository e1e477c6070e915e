//===- DataType.h - Element types of tensors --------------------*- C++ -*-===//
//
// Element types, numbered as ONNX's TensorProto::DataType so import and
// export are a cast, with names and sizes for the dump and cost models.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_DATATYPE_H
#define LOOM_IR_DATATYPE_H

#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>

namespace loom {

enum class DataType : int32_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
};

/// Short name used in dumps and YAML: f32, f16, bf16, i64, ...
llvm::StringRef getDataTypeName(DataType T);
/// Inverse of getDataTypeName; also accepts fp32/fp16/int8/... spellings.
llvm::Optional<DataType> parseDataTypeName(llvm::StringRef Name);
/// Size of one element in bytes; 0 for String and Undefined.
unsigned getDataTypeSize(DataType T);
bool isFloatingPoint(DataType T);
bool isInteger(DataType T);
/// True if \p Code is a valid ONNX TensorProto::DataType number Loom knows.
bool isKnownDataTypeCode(int32_t Code);

} // namespace loom

#endif // LOOM_IR_DATATYPE_H
