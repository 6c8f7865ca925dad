// splitmix64 (Steele, Lea & Flood): one 64-bit add, multiply and xorshift per value, a fixed
// integer recipe, so every machine produces the same stream. The one generator behind
// synthetic weights, the sampler's seeding, benchmark prompts and test corpora.
#pragma once

#include <cstdint>

namespace nanoinfer {

struct SplitMix64 {
  uint64_t state = 0;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

}  // namespace nanoinfer
