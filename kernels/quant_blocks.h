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

// The packed layout (kernels/kernels.h: pack_quantized). A matrix's rows are taken in groups
// of kPackRows (= 16, kernels/kernels.h); each whole group is rewritten, in the same bytes, as its blocks in column
// order, block b of the group being
//
//   d[16]:  the 16 rows' f16 scales of block b                                  (32 bytes)
//   word k (k = 0 .. W - 1), 64 bytes each: row r's 4-byte word k at bytes 4r .. 4r + 3
//     Q8_0: W = 8; word k = the row's q[4k .. 4k + 3] + 128, as unsigned bytes
//     Q4_0: W = 4; word k = the row's nibble bytes 4k .. 4k + 3 unchanged: low nibbles are
//           elements 4k .. 4k + 3, high nibbles elements 16 + 4k .. 16 + 4k + 3
//
// so one 512-bit load holds 4 weights of each of 16 rows, ready for vpdpbusd against one
// broadcast word of activations, and the 16 row sums land in 16 lanes: no horizontal sums.
// A group is 16 rows' bytes (group g starts where row 16g starts), so the rows of a last,
// partial group stay as they were.

}  // namespace nanoinfer::kernels
