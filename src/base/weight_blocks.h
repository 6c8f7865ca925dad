// Block layouts of the quantized weight types, and the scalar references that read and write
// rows of every weight type. These are the functions each row of the weight-type table
// (src/base/weight_type.cpp) carries; the layouts are shared by the quantizer, the loader,
// the GGUF reader and writer, and the kernels, so each is written down exactly once.
//
// Both block types are byte-for-byte GGUF's Q8_0 and Q4_0, so llama.cpp's files load without
// requantizing and ours load in llama.cpp:
//
//   Q8_0 ("int8"): 32 weights in 34 bytes: f16 scale d, then 32 int8 q;  w[i] = d * q[i]
//   Q4_0 ("int4"): 32 weights in 18 bytes: f16 scale d, then 16 bytes of nibbles;
//                  byte j holds element j in its low nibble and element j + 16 in its high one;
//                  w[i] = d * (nibble[i] - 8)
//
// and the K-quant types llama.cpp's Q3_K_M / Q4_K_M / Q5_K_M / Q6_K files are made of, byte-for-byte
// GGUF's super-blocks of 256 weights (layouts below, BlockQ3_K, BlockQ4_K, BlockQ5_K and BlockQ6_K).
//
// A row of `cols` weights is cols / 32 consecutive blocks (cols / 256 for the K types). The scale is stored as raw f16
// bits; packed structs keep the 2-byte alignment GGUF's layout implies (rows are not padded),
// and every function here reads and writes rows at any alignment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nanoinfer {

inline constexpr size_t kQuantBlock = 32;

#pragma pack(push, 1)
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQuantBlock];
};
struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQuantBlock / 2];
};
// The other 32-blocks of llama.cpp's files. The 4 low bits of each quant are nibbles as in
// Q4_0 (byte j: element j low, j + 16 high); Q5's bit 4 of element i is bit i of qh, read as
// a little-endian 32-bit value.
//   Q4_1 ("q4_1"): 20 bytes; w[i] = d * q[i] + m, q unsigned 4-bit
//   Q5_0 ("q5_0"): 22 bytes; w[i] = d * (q[i] - 16), q unsigned 5-bit
//   Q5_1 ("q5_1"): 24 bytes; w[i] = d * q[i] + m, q unsigned 5-bit
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQuantBlock / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQuantBlock / 2];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQuantBlock / 2];
};
#pragma pack(pop)
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);

// Quant i (0..31) of a Q4_1 / Q5_0 / Q5_1 block, unsigned: its nibble, and for the Q5 types
// bit i of qh as bit 4.
template <class Block>
int block_quant(const Block& b, size_t i) {
  const int low = i < 16 ? b.qs[i] & 0x0F : b.qs[i - 16] >> 4;
  if constexpr (requires { b.qh; })
    return low | ((b.qh[i / 8] >> (i % 8)) & 1) << 4;
  else
    return low;
}

// ---- the K-quants: super-blocks of 256 weights -----------------------------------------------
inline constexpr size_t kSuperBlock = 256;

// Q4_K ("q4_k"): 256 weights in 144 bytes, 8 sub-blocks of 32. Sub-block j has a 6-bit scale
// sc[j] and a 6-bit min m[j] packed into `scales` (see k_scale_min); weight = (d * sc[j]) * q -
// (dmin * m[j]), q unsigned 4-bit. The quants come in 4 chunks of 32 bytes: chunk c holds
// sub-block 2c in its low nibbles and sub-block 2c + 1 in its high nibbles (byte l of the chunk
// -> element l of each).
struct BlockQ4_K {
  uint16_t d;     // f16 scale of the scales
  uint16_t dmin;  // f16 scale of the mins
  uint8_t scales[12];
  uint8_t qs[kSuperBlock / 2];
};
// Q5_K ("q5_k"): 256 weights in 176 bytes, Q4_K with a fifth bit per weight: d, dmin and the
// scales as Q4_K's, then qh[32] and the low 4 bits in qs as Q4_K's nibbles. Element l of
// sub-block j (l < 32) is q = nibble | (bit j of qh[l]) << 4, unsigned 5-bit; weight =
// (d * sc[j]) * q - (dmin * m[j]).
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 2];
};
// Q6_K ("q6_k"): 256 weights in 210 bytes, 16 sub-blocks of 16 with signed 8-bit scales;
// weight = (d * sc) * (q - 32), q unsigned 6-bit. Two halves of 128 elements; half h uses
// ql[64h..], qh[32h..]. Within a half, for l in [0, 32):
//   element l      = low nibble of ql[l]       | qh[l] bits 0-1 << 4,
//   element l + 32 = low nibble of ql[l + 32]  | qh[l] bits 2-3 << 4,
//   element l + 64 = high nibble of ql[l]      | qh[l] bits 4-5 << 4,
//   element l + 96 = high nibble of ql[l + 32] | qh[l] bits 6-7 << 4.
// Element e of the block uses scale scales[e / 16].
struct BlockQ6_K {
  uint8_t ql[kSuperBlock / 2];
  uint8_t qh[kSuperBlock / 4];
  int8_t scales[kSuperBlock / 16];
  uint16_t d;
};
// Q3_K ("q3_k"): 256 weights in 110 bytes, 16 sub-blocks of 16 with 6-bit scales; weight =
// (d * (sc - 32)) * (q - 4), q unsigned 3-bit. Two halves of 128 elements; half n uses
// qs[32n..]. Within a half, for j in [0, 4) and l in [0, 32), element 32j + l (sub-block
// 8n + 2j + l / 16) is
//   q = (qs[32n + l] >> 2j) & 3  |  ((hmask[l] >> (4n + j)) & 1) << 2.
// The 16 scales are packed into 12 bytes: scale s has its low 4 bits in the low (s < 8) or high
// (s >= 8) nibble of scales[s % 8], its top 2 bits in bits 2 (s / 4) .. 2 (s / 4) + 1 of
// scales[8 + s % 4] (q3_k_scale, q3_k_pack_scales).
struct BlockQ3_K {
  uint8_t hmask[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block. Bytes 0-3 hold the
// scales of sub-blocks 0-3 in their low 6 bits, bytes 4-7 the mins of sub-blocks 0-3; for
// sub-blocks 4-7 byte 8 + (j - 4) holds the low 4 bits of the scale (low nibble) and of the
// min (high nibble), and the top 2 bits come from bits 6-7 of bytes j - 4 (scale) and j (min).
struct ScaleMin {
  uint8_t scale;
  uint8_t min;
};
ScaleMin k_scale_min(const uint8_t (&scales)[12], int j);

// Super-block i of a row of K-quant blocks, copied out (a row's bytes need no alignment).
template <class Block>
Block load_k_block(const std::byte* row, size_t i) {
  Block b;
  std::memcpy(&b, row + i * sizeof(Block), sizeof b);
  return b;
}
// Its inverse: sc and m (each < 64) of the 8 sub-blocks -> the 12 bytes.
void k_pack_scale_min(const uint8_t* sc, const uint8_t* m, uint8_t (&scales)[12]);

// The 6-bit scale sc (0..63; the factor is sc - 32) of sub-block s (0..15) of a Q3_K block,
// and the inverse: 16 scales (each < 64) -> the 12 bytes.
int q3_k_scale(const uint8_t (&scales)[12], int s);
void q3_k_pack_scales(const uint8_t* sc, uint8_t (&scales)[12]);
// A Q3_K super-block as numbers: d (f16 bits), the 16 signed scale factors sc - 32 in
// [-32, 31], and the 256 quants q - 4 in [-4, 3]: what the quantizer chooses and the tests
// decode. Exact both ways.
struct Q3kCode {
  uint16_t d = 0;
  int8_t scale[16] = {};
  int8_t q[kSuperBlock] = {};
};
Q3kCode unpack_q3_k(const BlockQ3_K& b);
BlockQ3_K pack_q3_k(const Q3kCode& code);

// A block of a scaled-integer type (one f16 scale, 32 integers; weight i = d * q[i]) as its
// scale bits and its integers, whatever their packing: what the quantizer chooses and what
// the scalar product reads.
struct ScaledBlock {
  uint16_t d = 0;
  int8_t q[kQuantBlock] = {};
};

// ---- the scalar references, one set per type ----------------------------------------------
// dequantize: row (the type's layout) -> out: [cols] floats, exact.
// quantize:   in: [cols] floats -> row, round to nearest (the reference quantizer); throws
//             nanoinfer::Error for a non-finite weight or a scale beyond f16's range.
// finite:     every weight (float types) or every block scale (block types) is finite.
// unpack / pack (block types): one block <-> ScaledBlock, exactly.
void dequantize_row_f32(const std::byte* row, float* out, size_t cols);
void quantize_row_f32(const float* in, std::byte* row, size_t cols);
bool finite_row_f32(const std::byte* row, size_t cols);

void dequantize_row_bf16(const std::byte* row, float* out, size_t cols);
void quantize_row_bf16(const float* in, std::byte* row, size_t cols);
bool finite_row_bf16(const std::byte* row, size_t cols);

void dequantize_row_q8_0(const std::byte* row, float* out, size_t cols);
void quantize_row_q8_0(const float* in, std::byte* row, size_t cols);
// Round-to-nearest with one scale per `group` weights (a multiple of the block, the last group
// may be shorter): the rule picks the scale over the whole group and every block of the group
// carries it, so group 32 is the format itself (quantize_row_q8_0 / _q4_0 are that). Groups
// beyond 32 simulate a coarser format (bench quant's :group=G axis).
void quantize_row_q8_0_grouped(const float* in, std::byte* row, size_t cols, size_t group);
bool finite_row_q8_0(const std::byte* row, size_t cols);
void unpack_block_q8_0(const std::byte* block, ScaledBlock& out);
void pack_block_q8_0(const ScaledBlock& in, std::byte* block);

void dequantize_row_q4_0(const std::byte* row, float* out, size_t cols);
void quantize_row_q4_0(const float* in, std::byte* row, size_t cols);
void quantize_row_q4_0_grouped(const float* in, std::byte* row, size_t cols, size_t group);
bool finite_row_q4_0(const std::byte* row, size_t cols);
void unpack_block_q4_0(const std::byte* block, ScaledBlock& out);
void pack_block_q4_0(const ScaledBlock& in, std::byte* block);

// Q4_1, Q5_0, Q5_1 have no ScaledBlock codec either (a min; quants the search does not make):
// plain round-to-nearest references (Q4_1 / Q5_1: the block's range; Q5_0: as Q4_0, the
// extreme mapped to -16).
void dequantize_row_q4_1(const std::byte* row, float* out, size_t cols);
void quantize_row_q4_1(const float* in, std::byte* row, size_t cols);
bool finite_row_q4_1(const std::byte* row, size_t cols);

void dequantize_row_q5_0(const std::byte* row, float* out, size_t cols);
void quantize_row_q5_0(const float* in, std::byte* row, size_t cols);
bool finite_row_q5_0(const std::byte* row, size_t cols);

void dequantize_row_q5_1(const std::byte* row, float* out, size_t cols);
void quantize_row_q5_1(const float* in, std::byte* row, size_t cols);
bool finite_row_q5_1(const std::byte* row, size_t cols);

// The K types (src/base/weight_blocks_k.cpp) have no ScaledBlock codec (a super-block has
// sub-block scales, and Q4_K mins): their rows carry no unpack / pack, and the quantizer's
// block search and GPTQ do not produce them. quantize is a plain round-to-nearest reference
// (sub-block scale and min from the range, super-block scales from the largest of those).
void dequantize_row_q4_k(const std::byte* row, float* out, size_t cols);
void quantize_row_q4_k(const float* in, std::byte* row, size_t cols);
bool finite_row_q4_k(const std::byte* row, size_t cols);

void dequantize_row_q5_k(const std::byte* row, float* out, size_t cols);
void quantize_row_q5_k(const float* in, std::byte* row, size_t cols);
bool finite_row_q5_k(const std::byte* row, size_t cols);

void dequantize_row_q6_k(const std::byte* row, float* out, size_t cols);
void quantize_row_q6_k(const float* in, std::byte* row, size_t cols);
bool finite_row_q6_k(const std::byte* row, size_t cols);

// Q3_K (src/base/weight_blocks_q3k.cpp): quantize is round-to-nearest (each sub-block's extreme
// to -4, the largest sub-block scale to -32); `quantize --type q3_k` has the searched and GPTQ
// quantizers (src/quant/quantize_q3k.cpp).
void dequantize_row_q3_k(const std::byte* row, float* out, size_t cols);
void quantize_row_q3_k(const float* in, std::byte* row, size_t cols);
bool finite_row_q3_k(const std::byte* row, size_t cols);

}  // namespace nanoinfer
