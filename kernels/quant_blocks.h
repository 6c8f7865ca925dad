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
//
// The K types are packed the same way per super-block (kernels/scalar_quant_k.cpp holds the
// byte map): super-block s of a group is 16 x block_bytes bytes,
//
//   Q4_K (2304 bytes): d[16] f16 (32 bytes), dmin[16] f16 (32), then the 12 scale bytes as 12
//     planes of 16 rows (byte p of row r at 64 + 16p + r; 192 bytes), then for chunk c = 0..3
//     and word k = 0..7, 64 bytes: row r's qs[32c + 4k .. 32c + 4k + 3] at 4r (low nibbles:
//     elements 4k.. of sub-block 2c, high nibbles: of sub-block 2c + 1)
//   Q5_K (2816 bytes): Q4_K's 2304 bytes, then for word k = 0..7, 64 bytes: row r's
//     qh[4k .. 4k + 3] at 4r (bit j of qh[l]: the fifth bit of element l of sub-block j)
//   Q6_K (3360 bytes): d[16] f16 (32 bytes), the 16 scales as 16 planes of 16 rows (256 bytes),
//     then for half h = 0..1 and word k = 0..7 three 64-byte vectors: row r's ql[64h + 4k ..],
//     ql[64h + 32 + 4k ..] and qh[32h + 4k ..] words at 4r
//   Q3_K (1760 bytes): d[16] f16 (32 bytes), the 12 scale bytes as 12 planes of 16 rows (byte p
//     of row r at 32 + 16p + r; 192 bytes), then for half h = 0..1 and word k = 0..7, 64 bytes:
//     row r's qs[32h + 4k .. 32h + 4k + 3] at 4r (1024 bytes), then for word k = 0..7, 64
//     bytes: row r's hmask[4k .. 4k + 3] at 4r (512 bytes)
//
// so one 512-bit load again holds one word of each of 16 rows, and the per-row scales of a
// sub-block are one 16-byte load.
//
// Q4_1, Q5_0, Q5_1 (kernels/scalar_quant_file.cpp) per block of 32, 16 x block_bytes bytes:
// d[16] f16 (32 bytes), m[16] f16 (32; Q4_1, Q5_1), then word k = 0..3, 64 bytes: row r's
// qs[4k .. 4k + 3] at 4r (low nibbles: elements 4k.., high: 16 + 4k..), then (Q5_0, Q5_1) 64
// bytes of fifth bits, row r's 4 at 4r, rearranged so that the kernel takes them as Q5_K's:
// byte j holds, for word k, element 4k + j's bit at bit 2k and element 16 + 4k + j's at 2k + 1.

}  // namespace nanoinfer::kernels
