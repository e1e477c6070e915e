//===- ProtoTensorData.cpp - TensorData backed by ONNX protobufs ----------===//
//
// The bytes of inline and external tensors (ProtoTensorData.h) and the
// string-tensor encoding the importer and exporter share.
//
//===----------------------------------------------------------------------===//
#include "ProtoTensorData.h"
#include "llvm/Support/MathExtras.h"
#include <cstring>

using namespace llvm;

namespace loom {

template <typename T> static void appendRaw(std::vector<char> &B, T V) {
  const char *P = reinterpret_cast<const char *>(&V);
  B.insert(B.end(), P, P + sizeof(T));
}

std::vector<char> encodeStrings(ArrayRef<std::string> Strings) {
  std::vector<char> B;
  for (const std::string &S : Strings) {
    appendRaw(B, (uint64_t)S.size());
    B.insert(B.end(), S.begin(), S.end());
  }
  return B;
}

Expected<std::vector<std::string>> decodeStrings(ArrayRef<char> Bytes,
                                                 uint64_t NumElements) {
  std::vector<std::string> Out;
  size_t Pos = 0;
  while (Pos < Bytes.size()) {
    uint64_t Len;
    if (Bytes.size() - Pos < sizeof(Len))
      break;
    std::memcpy(&Len, Bytes.data() + Pos, sizeof(Len));
    Pos += sizeof(Len);
    if (Len > Bytes.size() - Pos)
      break;
    Out.emplace_back(Bytes.data() + Pos, Len);
    Pos += Len;
  }
  if (Pos != Bytes.size() || Out.size() != NumElements)
    return createStringError(inconvertibleErrorCode(),
                             "string tensor data is not %llu encoded strings",
                             (unsigned long long)NumElements);
  return Out;
}

uint64_t getEncodedStringsSize(const onnx::TensorProto &TP) {
  uint64_t Size = 0;
  for (const std::string &S : TP.string_data())
    Size += sizeof(uint64_t) + S.size();
  return Size;
}

Expected<ArrayRef<char>> ProtoTensorData::getBytes() const {
  if (TP->has_raw_data())
    return ArrayRef<char>(TP->raw_data().data(), TP->raw_data().size());
  std::lock_guard<std::mutex> Lock(ConvertedLock);
  if (HaveConverted)
    return ArrayRef<char>(Converted);
  std::vector<char> &B = Converted;
  B.reserve(Size);
  switch (TP->data_type()) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::COMPLEX64:
    for (float F : TP->float_data())
      appendRaw(B, F);
    break;
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::COMPLEX128:
    for (double D : TP->double_data())
      appendRaw(B, D);
    break;
  case onnx::TensorProto::INT64:
    for (int64_t I : TP->int64_data())
      appendRaw(B, I);
    break;
  case onnx::TensorProto::UINT32:
    for (uint64_t I : TP->uint64_data())
      appendRaw(B, (uint32_t)I);
    break;
  case onnx::TensorProto::UINT64:
    for (uint64_t I : TP->uint64_data())
      appendRaw(B, I);
    break;
  case onnx::TensorProto::INT32:
    for (int32_t I : TP->int32_data())
      appendRaw(B, I);
    break;
  case onnx::TensorProto::INT16:
    for (int32_t I : TP->int32_data())
      appendRaw(B, (int16_t)I);
    break;
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    for (int32_t I : TP->int32_data())
      appendRaw(B, (uint16_t)I);
    break;
  case onnx::TensorProto::INT8:
    for (int32_t I : TP->int32_data())
      appendRaw(B, (int8_t)I);
    break;
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
  // Types newer than ONNX 1.12's enum: one byte per int32_data entry, a
  // float8 element or a packed pair of 4-bit elements.
  case (int)DataType::Float8E4M3FN:
  case (int)DataType::Float8E4M3FNUZ:
  case (int)DataType::Float8E5M2:
  case (int)DataType::Float8E5M2FNUZ:
  case (int)DataType::UInt4:
  case (int)DataType::Int4:
  case (int)DataType::Float4E2M1:
    for (int32_t I : TP->int32_data())
      appendRaw(B, (uint8_t)I);
    break;
  case onnx::TensorProto::STRING:
    B = encodeStrings(std::vector<std::string>(TP->string_data().begin(),
                                               TP->string_data().end()));
    break;
  default:
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s': data of this type cannot be read "
                             "as bytes",
                             TP->name().c_str());
  }
  HaveConverted = true;
  return ArrayRef<char>(Converted);
}

Expected<ArrayRef<char>> ExternalTensorData::getBytes() const {
  std::lock_guard<std::mutex> Lock(MappedLock);
  if (!Mapped) {
    Expected<std::unique_ptr<MemoryBuffer>> MB = map();
    if (!MB)
      return MB.takeError();
    Mapped = std::move(*MB);
  }
  return ArrayRef<char>(Mapped->getBufferStart(), Mapped->getBufferSize());
}

Expected<std::vector<char>> ExternalTensorData::readRange(uint64_t Off,
                                                          uint64_t Len) const {
  if (Off > Length || Len > Length - Off)
    return createStringError(inconvertibleErrorCode(),
                             "read past the end of external data '%s'",
                             Location.c_str());
  ErrorOr<std::unique_ptr<MemoryBuffer>> MB =
      MemoryBuffer::getFileSlice(Path, Len, Offset + Off, false);
  if (!MB)
    return createStringError(MB.getError(), "cannot read external data '%s'",
                             Path.c_str());
  return std::vector<char>((*MB)->getBufferStart(), (*MB)->getBufferEnd());
}

} // namespace loom
