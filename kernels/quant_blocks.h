// The packed layout of the quantized weight types' matrices. The blocks themselves (Q8_0,
// Q4_0: byte-for-byte GGUF's) are laid out once, in src/base/weight_blocks.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/weight_blocks.h"

namespace nanoinfer::kernels {

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
