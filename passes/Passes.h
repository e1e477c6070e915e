//===- Passes.h - Constructors of every registered pass ---------*- C++ -*-===//
#ifndef LOOM_PASSES_PASSES_H
#define LOOM_PASSES_PASSES_H

#include "loom/Pass/Pass.h"

namespace loom {
std::unique_ptr<Pass> createBindSymbolsPass();
std::unique_ptr<Pass> createInferShapesPass();
std::unique_ptr<Pass> createFoldShapeArithPass();
std::unique_ptr<Pass> createDetectLayersPass();
} // namespace loom

#endif
