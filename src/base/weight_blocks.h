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
// A row of `cols` weights is cols / 32 consecutive blocks. The scale is stored as raw f16
// bits; packed structs keep the 2-byte alignment GGUF's layout implies (rows are not padded),
// and every function here reads and writes rows at any alignment.
#pragma once

#include <cstddef>
#include <cstdint>

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
#pragma pack(pop)
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);

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
bool finite_row_q8_0(const std::byte* row, size_t cols);
void unpack_block_q8_0(const std::byte* block, ScaledBlock& out);
void pack_block_q8_0(const ScaledBlock& in, std::byte* block);

void dequantize_row_q4_0(const std::byte* row, float* out, size_t cols);
void quantize_row_q4_0(const float* in, std::byte* row, size_t cols);
bool finite_row_q4_0(const std::byte* row, size_t cols);
void unpack_block_q4_0(const std::byte* block, ScaledBlock& out);
void pack_block_q4_0(const ScaledBlock& in, std::byte* block);

}  // namespace nanoinfer
