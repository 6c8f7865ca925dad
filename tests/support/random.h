// Seeded test inputs shared by the kernel and linear tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace nanoinfer::test {

// n floats uniform in [-1, 1), the same for the same seed on every machine's libstdc++.
inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

}  // namespace nanoinfer::test
