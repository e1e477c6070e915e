//===- Divisors.h - The divisors of an integer ------------------*- C++ -*-===//
#ifndef LOOM_SUPPORT_DIVISORS_H
#define LOOM_SUPPORT_DIVISORS_H

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

/// The divisors of \p N in increasing order (the degrees a mesh axis of N
/// devices can take).
std::vector<uint64_t> getDivisors(uint64_t N);

/// \p D divides one of \p Sizes, or \p Sizes is empty (no bound): the tp
/// degrees that split something (loom/Planner/Search.h, TPDivisibility).
bool dividesOneOf(const std::vector<uint64_t> &Sizes, uint64_t D);

/// "64, 128 and 3 more" (at most \p Max sizes).
std::string listSizes(const std::vector<uint64_t> &Sizes, unsigned Max = 6);

} // namespace loom

#endif
