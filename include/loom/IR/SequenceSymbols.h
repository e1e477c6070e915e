//===- SequenceSymbols.h - The names of a model's sequence dim --*- C++ -*-===//
//
// The symbols bind-symbols binds for --seq, and the dims context
// parallelism splits (the shard pass): one list for both.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_IR_SEQUENCESYMBOLS_H
#define LOOM_IR_SEQUENCESYMBOLS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace loom {

/// "seq", "seq_len", "sequence", "sequence_length".
inline llvm::ArrayRef<llvm::StringRef> getSequenceSymbols() {
  static const llvm::StringRef Names[] = {"seq", "seq_len", "sequence",
                                          "sequence_length"};
  return Names;
}

} // namespace loom

#endif // LOOM_IR_SEQUENCESYMBOLS_H
