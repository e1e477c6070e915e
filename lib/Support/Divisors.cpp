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

bool dividesOneOf(const std::vector<uint64_t> &Sizes, uint64_t D) {
  if (D <= 1 || Sizes.empty())
    return true;
  for (uint64_t S : Sizes)
    if (S % D == 0)
      return true;
  return false;
}

std::string listSizes(const std::vector<uint64_t> &Sizes, unsigned Max) {
  std::string S;
  for (unsigned I = 0; I < Sizes.size() && I < Max; ++I)
    S += (I ? ", " : "") + std::to_string(Sizes[I]);
  if (Sizes.size() > Max)
    S += " and " + std::to_string(Sizes.size() - Max) + " more";
  return S;
}

} // namespace loom
