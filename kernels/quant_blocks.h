// Block layouts of the quantized weight types. Both are byte-for-byte GGUF's Q8_0 and Q4_0,
// so llama.cpp's files load without requantizing and ours load in llama.cpp.
//
//   Q8_0 ("int8"): 32 weights in 34 bytes: f16 scale d, then 32 int8 q;  w[i] = d * q[i]
//   Q4_0 ("int4"): 32 weights in 18 bytes: f16 scale d, then 16 bytes of nibbles;
//                  byte j holds element j in its low nibble and element j + 16 in its high one;
//                  w[i] = d * (nibble[i] - 8)
//
// A row of `cols` weights is cols / 32 consecutive blocks. The scale is stored as raw f16
// bits; packed structs keep the 2-byte alignment GGUF's layout implies (rows are not padded).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nanoinfer::kernels {

inline constexpr size_t kQuantBlock = 32;

#pragma pack(push, 1)
struct BlockQ8_0 {
  uint16_t d;          // f16 scale
  int8_t q[kQuantBlock];
};
struct BlockQ4_0 {
  uint16_t d;          // f16 scale
  uint8_t q[kQuantBlock / 2];
};
#pragma pack(pop)
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);

}  // namespace nanoinfer::kernels
