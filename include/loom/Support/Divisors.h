//===- Divisors.h - The divisors of an integer ------------------*- C++ -*-===//
#ifndef LOOM_SUPPORT_DIVISORS_H
#define LOOM_SUPPORT_DIVISORS_H

#include <cstdint>
#include <vector>

namespace loom {

/// The divisors of \p N in increasing order (the degrees a mesh axis of N
/// devices can take).
std::vector<uint64_t> getDivisors(uint64_t N);

} // namespace loom

#endif
