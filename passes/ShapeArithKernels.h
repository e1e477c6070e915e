//===- ShapeArithKernels.h - Constant evaluation of shape ops ---*- C++ -*-===//
//
// The constant-evaluation kernels of fold-shape-arith (FoldShapeArith.cpp),
// defined in ShapeArithKernels.cpp: the small constant tensor they work on
// (Const), the index helpers the pass shares, and one function per op or
// family of ops that computes a node's result from its constant operands.
// The pass finds the constants, dispatches by FoldFamily and stores the
// results; the kernels read the node and never change the graph.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PASSES_SHAPEARITHKERNELS_H
#define LOOM_PASSES_SHAPEARITHKERNELS_H

#include "loom/IR/Graph.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <vector>

namespace loom {
namespace shapearith {

/// The most elements a folded constant may have: larger tensors (masks of
/// long sequences) stay as computations.
constexpr int64_t FoldLimit = 1 << 16;

/// A small constant tensor; integers (and bool) in I, floats in F.
struct Const {
  DataType Elem = DataType::Undefined;
  llvm::SmallVector<int64_t, 4> Shape;
  std::vector<int64_t> I;
  std::vector<double> F;

  bool isFloat() const { return isFloatingPoint(Elem); }
  int64_t size() const { return isFloat() ? F.size() : I.size(); }
  double getF(int64_t K) const { return isFloat() ? F[K] : (double)I[K]; }
  int64_t getI(int64_t K) const { return isFloat() ? (int64_t)F[K] : I[K]; }
  Tensor toTensor() const {
    return isFloat() ? Tensor::makeFromDoubles(Elem, Shape, F)
                     : Tensor::makeFromInts(Elem, Shape, I);
  }
};

/// The number of elements of shape \p S.
int64_t product(llvm::ArrayRef<int64_t> S);

/// The values of \p T, if it holds data of at most FoldLimit elements of a
/// decoded type (not strings or complex numbers).
llvm::Optional<Const> fromTensor(const Tensor &T);

/// Normalizes an axis against a rank; None if out of range.
llvm::Optional<int64_t> normAxis(int64_t A, int64_t Rank);

/// The row-major strides of \p Shape, in elements.
llvm::SmallVector<int64_t, 4> stridesOf(llvm::ArrayRef<int64_t> Shape);

/// The element type Cast \p N converts to; None for the types whose values
/// are not folded (strings, complex, Float8 and 4-bit types).
llvm::Optional<DataType> castTarget(const Node &N);

/// \p X converted element by element to \p To.
Const convertTo(const Const &X, DataType To);

/// The groups of fold() rules; an op in none of them is not folded.
enum class FoldFamily {
  ShapeOf,
  Constant,
  ConstantOfShape,
  Cast,
  Layout,
  DataMovement,
  Generator,
  Reduction,
  UnaryMath,
  Arithmetic,
  Comparison,
  Selection,
  None
};

/// The family of fold() rules of op type \p Op (default domain).
FoldFamily getFoldFamily(llvm::StringRef Op);

/// Whether operand \p I exists and is a constant.
bool has(llvm::ArrayRef<llvm::Optional<Const>> In, unsigned I);

// The kernels of the families. Each returns the constant node N computes,
// or None where it is not folded. \p In holds the operands' constants (None
// for an operand that is absent or not constant); fold() has checked that
// In[0] is a constant, and for the element-wise families that every
// operand is one (\p Ptrs).

/// Shape and Size: the input needs a static type, not data.
llvm::Optional<Const> foldShapeOf(const Node &N);
/// ConstantOfShape: the shape input filled with the value attribute (a
/// float 0 without one).
llvm::Optional<Const>
foldConstantOfShape(const Node &N, llvm::ArrayRef<llvm::Optional<Const>> In);
/// Reshape; a 0 copies the input's dim (unless allowzero), one -1 is
/// inferred.
llvm::Optional<Const> foldReshape(const Node &N,
                                  llvm::ArrayRef<llvm::Optional<Const>> In);
/// Concat of constants of one element type and rank.
llvm::Optional<Const> foldConcat(const Node &N,
                                 llvm::ArrayRef<llvm::Optional<Const>> In);
/// Gather along axis; negative indices count from the end.
llvm::Optional<Const> foldGather(const Node &N,
                                 llvm::ArrayRef<llvm::Optional<Const>> In);
/// Expand: X broadcast against the shape input.
llvm::Optional<Const> foldExpand(llvm::ArrayRef<llvm::Optional<Const>> In);
/// Tile: X repeated along each dim by the repeats input.
llvm::Optional<Const> foldTile(llvm::ArrayRef<llvm::Optional<Const>> In);
/// Transpose by perm (the dims reversed without it).
llvm::Optional<Const> foldTranspose(const Node &N, const Const &X);
/// The ops whose result is computed from positions: Range, NonZero, Trilu.
llvm::Optional<Const> foldGenerator(const Node &N,
                                    llvm::ArrayRef<llvm::Optional<Const>> In);
/// Neg, Abs, Sqrt, Reciprocal, Floor, Ceil and Not.
llvm::Optional<Const> foldUnaryMath(llvm::StringRef Op,
                                    llvm::ArrayRef<const Const *> Ptrs);
/// Add, Sub, Mul, Div, Mod and Pow, of the first operand's element type.
llvm::Optional<Const> foldArithmetic(const Node &N,
                                     llvm::ArrayRef<const Const *> Ptrs);
/// Comparisons and logic ops, all to Bool.
llvm::Optional<Const> foldComparison(llvm::StringRef Op,
                                     llvm::ArrayRef<const Const *> Ptrs);
/// Where, Max and Min: each element picks one of its operands'.
llvm::Optional<Const> foldSelection(llvm::StringRef Op,
                                    llvm::ArrayRef<const Const *> Ptrs);

} // namespace shapearith
} // namespace loom

#endif // LOOM_PASSES_SHAPEARITHKERNELS_H
