//===- Divisors.cpp - The divisors of an integer --------------------------===//
#include "loom/Support/Divisors.h"

namespace loom {

std::vector<uint64_t> getDivisors(uint64_t N) {
  std::vector<uint64_t> Small, Large;
  for (uint64_t D = 1; D * D <= N; ++D)
    if (N % D == 0) {
      Small.push_back(D);
      if (D != N / D)
        Large.push_back(N / D);
    }
  Small.insert(Small.end(), Large.rbegin(), Large.rend());
  return Small;
}

} // namespace loom
