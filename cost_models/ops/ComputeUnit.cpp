//===- ComputeUnit.cpp - Names of compute units ---------------------------===//
#include "loom/Cost/OpCost.h"

namespace loom {

llvm::StringRef getComputeUnitName(ComputeUnit U) {
  switch (U) {
  case ComputeUnit::Cube:
    return "cube";
  case ComputeUnit::Vector:
    return "vector";
  case ComputeUnit::Memory:
    return "memory";
  case ComputeUnit::Control:
    return "control";
  case ComputeUnit::None:
    return "none";
  }
  return "none";
}

} // namespace loom
