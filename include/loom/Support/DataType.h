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
  // Added after ONNX 1.12 (IR 9-11, opsets 19-23). ONNX 1.12's protobuf
  // stores them (elem_type and data_type are plain int32 fields) but its
  // type strings, checker and shape inference do not know them.
  Float8E4M3FN = 17,
  Float8E4M3FNUZ = 18,
  Float8E5M2 = 19,
  Float8E5M2FNUZ = 20,
  UInt4 = 21,
  Int4 = 22,
  Float4E2M1 = 23,
};

/// The highest element type code Loom reads (ONNX 1.18's FLOAT4E2M1).
constexpr int32_t MaxDataTypeCode = 23;

/// Short name used in dumps and YAML: f32, f16, bf16, i64, ...
llvm::StringRef getDataTypeName(DataType T);
/// The name ONNX's text syntax (and TensorProto) gives \p T: "float",
/// "double", "float16", "int64", ...; empty for types it has no name for
/// here (complex, string, float8, 4-bit).
llvm::StringRef getONNXTypeName(DataType T);
/// Inverse of getDataTypeName; also accepts fp32/fp16/int8/... spellings.
llvm::Optional<DataType> parseDataTypeName(llvm::StringRef Name);
/// Size of one element in bytes; 0 for String and Undefined, and 0 for the
/// 4-bit types, whose elements are not whole bytes: callers that size
/// tensors use getStorageBytes, callers that address single elements
/// (slicing, gathering rows) must handle them (or refuse them) on purpose.
unsigned getDataTypeSize(DataType T);
/// Size of one element in bits: 4 for int4/uint4/float4e2m1, 8 x
/// getDataTypeSize otherwise.
unsigned getDataTypeBits(DataType T);
/// Bytes that \p Count elements occupy as ONNX stores them: 4-bit types
/// are packed two to a byte (the first in the low nibble), so an odd count
/// ends in a half-used byte: (Count * bits + 7) / 8. 0 for String and
/// Undefined; None if it overflows.
llvm::Optional<int64_t> getStorageBytes(DataType T, int64_t Count);
/// True for the types ONNX added after 1.12 (float8, 4-bit): ONNX 1.12's
/// checker and shape inference reject them, so Loom's own rules carry them.
bool isPostONNX112Type(DataType T);
bool isFloatingPoint(DataType T);
bool isInteger(DataType T);
/// True if \p Code is a valid ONNX TensorProto::DataType number Loom knows.
bool isKnownDataTypeCode(int32_t Code);

} // namespace loom

#endif // LOOM_IR_DATATYPE_H
