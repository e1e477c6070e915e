//===- Tensor.cpp - Tensor data: reading, converting, making --------------===//
//
// Tensor and TensorData of the IR (loom/IR/Graph.h): strided reads and
// writes of parameter bytes, the element conversions (fp16, bf16) behind
// getIntValues/getFloatValues, and the small constant tensors passes make.
//
//===----------------------------------------------------------------------===//
#include "loom/IR/Graph.h"
#include "loom/Support/RunWriter.h"
#include "llvm/Support/MathExtras.h"
#include <cstring>

using namespace llvm;

namespace loom {

TensorData::~TensorData() = default;

Error TensorData::readStrided(uint64_t First, uint64_t Stride, uint64_t Length,
                              uint64_t Count, char *Out) const {
  Expected<ArrayRef<char>> B = getBytes();
  if (!B)
    return B.takeError();
  if (Count && First + (Count - 1) * Stride + Length > B->size())
    return createStringError(inconvertibleErrorCode(),
                             "strided read past the end of %zu bytes of "
                             "tensor data",
                             B->size());
  for (uint64_t I = 0; I < Count; ++I)
    std::memcpy(Out + I * Length, B->data() + First + I * Stride, Length);
  return Error::success();
}

Error TensorData::withBytes(function_ref<Error(ArrayRef<char>)> Fn) const {
  Expected<ArrayRef<char>> B = getBytes();
  if (!B)
    return B.takeError();
  return Fn(*B);
}

Error TensorData::writeStrided(uint64_t First, uint64_t Stride, uint64_t Length,
                               uint64_t Count, sys::fs::file_t FD,
                               uint64_t Offset, uint64_t DestStride) const {
  return withBytes([&](ArrayRef<char> B) -> Error {
    if (Count &&
        (First > B.size() || (Count - 1) * Stride + Length > B.size() - First))
      return createStringError(inconvertibleErrorCode(),
                               "strided write past the end of %zu bytes of "
                               "tensor data",
                               B.size());
    RunWriter W(FD, Offset);
    for (uint64_t I = 0; I < Count; ++I)
      if (Error E = W.addAt(Offset + I * DestStride,
                            B.slice(First + I * Stride, Length)))
        return E;
    return W.flush();
  });
}

Expected<std::vector<char>> TensorData::readRange(uint64_t Offset,
                                                  uint64_t Length) const {
  Expected<ArrayRef<char>> B = getBytes();
  if (!B)
    return B.takeError();
  if (Offset > B->size() || Length > B->size() - Offset)
    return createStringError(inconvertibleErrorCode(),
                             "read of %llu bytes at offset %llu is past the "
                             "end of %zu bytes of tensor data",
                             (unsigned long long)Length,
                             (unsigned long long)Offset, B->size());
  return std::vector<char>(B->begin() + Offset, B->begin() + Offset + Length);
}

static float halfToFloat(uint16_t H) {
  uint32_t Sign = (H & 0x8000u) << 16, Exp = (H >> 10) & 0x1f, Man = H & 0x3ffu,
           Bits;
  if (Exp == 0) {
    if (Man == 0) {
      Bits = Sign;
    } else { // Subnormal: normalize.
      Exp = 127 - 15 + 1;
      while (!(Man & 0x400u)) {
        Man <<= 1;
        --Exp;
      }
      Man &= 0x3ffu;
      Bits = Sign | (Exp << 23) | (Man << 13);
    }
  } else if (Exp == 31) {
    Bits = Sign | 0x7f800000u | (Man << 13);
  } else {
    Bits = Sign | ((Exp + 127 - 15) << 23) | (Man << 13);
  }
  float F;
  std::memcpy(&F, &Bits, 4);
  return F;
}

template <typename T> static T load(const char *P) {
  T V;
  std::memcpy(&V, P, sizeof(T));
  return V;
}

static Error checkDataSize(const Tensor &T, size_t Have, int64_t &N) {
  Optional<int64_t> NE = T.Type.getNumElements();
  if (!NE)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' has no static shape", T.Name.c_str());
  N = *NE;
  unsigned ES = getDataTypeSize(T.Type.Elem);
  if (ES == 0 || (uint64_t)Have != (uint64_t)N * ES)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' has %zu bytes of data but its type "
                             "%s needs %lld",
                             T.Name.c_str(), Have, T.Type.str().c_str(),
                             (long long)(N * ES));
  return Error::success();
}

/// \p T's bytes, checked against its type; its element count in \p N.
static Expected<ArrayRef<char>> getCheckedBytes(const Tensor &T, int64_t &N) {
  if (!T.Data)
    return createStringError(inconvertibleErrorCode(),
                             "tensor '%s' has no data", T.Name.c_str());
  Expected<ArrayRef<char>> B = T.Data->getBytes();
  if (!B)
    return B.takeError();
  if (Error E = checkDataSize(T, B->size(), N))
    return std::move(E);
  return *B;
}

Expected<std::vector<int64_t>> Tensor::getIntValues() const {
  int64_t N;
  Expected<ArrayRef<char>> B = getCheckedBytes(*this, N);
  if (!B)
    return B.takeError();
  std::vector<int64_t> Out;
  Out.reserve(N);
  const char *P = B->data();
  for (int64_t I = 0; I < N; ++I) {
    switch (Type.Elem) {
    case DataType::Int64:
      Out.push_back(load<int64_t>(P + 8 * I));
      break;
    case DataType::Int32:
      Out.push_back(load<int32_t>(P + 4 * I));
      break;
    case DataType::Int16:
      Out.push_back(load<int16_t>(P + 2 * I));
      break;
    case DataType::Int8:
      Out.push_back(load<int8_t>(P + I));
      break;
    case DataType::UInt8:
      Out.push_back(load<uint8_t>(P + I));
      break;
    case DataType::Bool:
      Out.push_back(load<uint8_t>(P + I) != 0);
      break;
    case DataType::UInt16:
      Out.push_back(load<uint16_t>(P + 2 * I));
      break;
    case DataType::UInt32:
      Out.push_back(load<uint32_t>(P + 4 * I));
      break;
    case DataType::UInt64:
      Out.push_back((int64_t)load<uint64_t>(P + 8 * I));
      break;
    default:
      return createStringError(inconvertibleErrorCode(),
                               "tensor '%s' of type %s is not an integer "
                               "tensor",
                               Name.c_str(), Type.str().c_str());
    }
  }
  return Out;
}

Expected<std::vector<double>> Tensor::getFloatValues() const {
  if (!isFloatingPoint(Type.Elem)) {
    Expected<std::vector<int64_t>> Ints = getIntValues();
    if (!Ints)
      return Ints.takeError();
    return std::vector<double>(Ints->begin(), Ints->end());
  }
  int64_t N;
  Expected<ArrayRef<char>> B = getCheckedBytes(*this, N);
  if (!B)
    return B.takeError();
  std::vector<double> Out;
  Out.reserve(N);
  const char *P = B->data();
  for (int64_t I = 0; I < N; ++I) {
    switch (Type.Elem) {
    case DataType::Float:
      Out.push_back(load<float>(P + 4 * I));
      break;
    case DataType::Double:
      Out.push_back(load<double>(P + 8 * I));
      break;
    case DataType::Float16:
      Out.push_back(halfToFloat(load<uint16_t>(P + 2 * I)));
      break;
    default: { // BFloat16: the top half of an f32.
      uint32_t Bits = (uint32_t)load<uint16_t>(P + 2 * I) << 16;
      float F;
      std::memcpy(&F, &Bits, 4);
      Out.push_back(F);
    }
    }
  }
  return Out;
}

Tensor Tensor::makeInt64(ArrayRef<int64_t> Shape, ArrayRef<int64_t> Values) {
  return makeFromInts(DataType::Int64, Shape, Values);
}

template <typename T> static void append(std::vector<char> &B, T V) {
  char Tmp[sizeof(T)];
  std::memcpy(Tmp, &V, sizeof(T));
  B.insert(B.end(), Tmp, Tmp + sizeof(T));
}

static uint16_t floatToHalf(float F) {
  uint32_t X;
  std::memcpy(&X, &F, 4);
  uint32_t Sign = (X >> 16) & 0x8000u;
  int32_t Exp = (int32_t)((X >> 23) & 0xff) - 127 + 15;
  uint32_t Man = X & 0x7fffffu;
  if (((X >> 23) & 0xff) == 0xff) // Inf / NaN.
    return Sign | 0x7c00u | (Man ? 0x200u : 0);
  if (Exp >= 31)
    return Sign | 0x7c00u;
  if (Exp <= 0) {
    if (Exp < -10)
      return Sign;
    Man |= 0x800000u;
    uint32_t Shift = 14 - Exp;
    uint32_t H = Man >> Shift;
    // Round to nearest, ties to even, as IEEE casts (and ONNX Runtime) do.
    uint32_t Rem = Man & ((1u << Shift) - 1), Half = 1u << (Shift - 1);
    if (Rem > Half || (Rem == Half && (H & 1)))
      ++H;
    return Sign | H;
  }
  uint32_t H = Sign | ((uint32_t)Exp << 10) | (Man >> 13);
  // Ties to even; a carry into the exponent (up to infinity) is correct.
  uint32_t Rem = Man & 0x1fffu;
  if (Rem > 0x1000u || (Rem == 0x1000u && (H & 1)))
    ++H;
  return H;
}

static uint16_t floatToBFloat16(float F) {
  uint32_t X;
  std::memcpy(&X, &F, 4);
  if ((X & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a (quiet) NaN.
    return (uint16_t)((X >> 16) | 0x40u);
  // Round to nearest, ties to even (truncating would bias every value
  // towards zero and differ from what frameworks store).
  X += 0x7fffu + ((X >> 16) & 1);
  return (uint16_t)(X >> 16);
}

static void appendElement(std::vector<char> &B, DataType Elem, int64_t IV,
                          double DV, bool IsInt) {
  switch (Elem) {
  case DataType::Int64:
    append<int64_t>(B, IsInt ? IV : (int64_t)DV);
    break;
  case DataType::Int32:
    append<int32_t>(B, IsInt ? IV : (int32_t)DV);
    break;
  case DataType::Int16:
    append<int16_t>(B, IsInt ? IV : (int16_t)DV);
    break;
  case DataType::Int8:
    append<int8_t>(B, IsInt ? IV : (int8_t)DV);
    break;
  case DataType::UInt8:
    append<uint8_t>(B, IsInt ? IV : (uint8_t)DV);
    break;
  case DataType::UInt16:
    append<uint16_t>(B, IsInt ? IV : (uint16_t)DV);
    break;
  case DataType::UInt32:
    append<uint32_t>(B, IsInt ? IV : (uint32_t)DV);
    break;
  case DataType::UInt64:
    append<uint64_t>(B, IsInt ? IV : (uint64_t)DV);
    break;
  case DataType::Bool:
    append<uint8_t>(B, (IsInt ? IV : DV) != 0);
    break;
  case DataType::Float:
    append<float>(B, IsInt ? (float)IV : (float)DV);
    break;
  case DataType::Double:
    append<double>(B, IsInt ? (double)IV : DV);
    break;
  case DataType::Float16:
    append<uint16_t>(B, floatToHalf(IsInt ? (float)IV : (float)DV));
    break;
  case DataType::BFloat16:
    append<uint16_t>(B, floatToBFloat16(IsInt ? (float)IV : (float)DV));
    break;
  default:
    break;
  }
}

Tensor Tensor::makeFromInts(DataType Elem, ArrayRef<int64_t> Shape,
                            ArrayRef<int64_t> Values) {
  Tensor T;
  T.Type = TensorType(Elem, Shape);
  std::vector<char> B;
  B.reserve(Values.size() * getDataTypeSize(Elem));
  for (int64_t V : Values)
    appendElement(B, Elem, V, 0, /*IsInt=*/true);
  T.Data = std::make_shared<BufferTensorData>(std::move(B));
  return T;
}

Tensor Tensor::makeFromDoubles(DataType Elem, ArrayRef<int64_t> Shape,
                               ArrayRef<double> Values) {
  Tensor T;
  T.Type = TensorType(Elem, Shape);
  std::vector<char> B;
  B.reserve(Values.size() * getDataTypeSize(Elem));
  for (double V : Values)
    appendElement(B, Elem, 0, V, /*IsInt=*/false);
  T.Data = std::make_shared<BufferTensorData>(std::move(B));
  return T;
}

} // namespace loom
