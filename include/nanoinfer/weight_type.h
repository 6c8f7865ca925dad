// The one table of weight types. Every way a matrix can be held — plain floats or blocks of
// quantized integers with a scale — is one WeightType with one row in src/base/weight_type.cpp:
// its names, its block geometry, its GGUF type id, and its scalar references (dequantize a
// row, quantize a row, check a row is finite; for block types, the block <-> scale and
// integers codec, src/base/weight_blocks.{h,cpp}). Loading, the embedding lookup, `inspect`,
// `synth`, `quantize`, the GGUF reader and writer all go through the row instead of branching
// on the type; the kernels for a type sit in the kernel tables (kernels/kernels.h).
//
// Adding a type: a value here, its row (src/base/weight_type.cpp), its block layout and
// scalar references (src/base/weight_blocks.{h,cpp}), its member of kernels::ByType and its
// scalar product (kernels/), optionally faster kernels per ISA, each an entry in the list of
// the file that has it (the tier tables, kernels/dispatch.cpp, take them from there). The
// switches over this enum have no `default:`, so the compiler names every place that must
// decide for a new type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace nanoinfer {

enum class WeightType : uint8_t {
  F32,   // 4 bytes per weight
  BF16,  // 2 bytes per weight, the top half of an f32
  Q8_0,  // "int8": blocks of 32, one f16 scale d, value = d * q, q in [-127, 127] (GGUF Q8_0)
  Q4_0,  // "int4": blocks of 32, one f16 scale d, value = d * (q - 8), q in [0, 15] (GGUF Q4_0)
  // The other 32-blocks of llama.cpp's files (GGUF Q4_1, Q5_0, Q5_1; also what its K files use
  // for rows that are not whole super-blocks). No ScaledBlock codec (a min, or 5-bit quants
  // outside the quantizer's search), like the K types below.
  Q4_1,  // "q4_1": f16 scale d and min m, value = d * q + m, q in [0, 15]
  Q5_0,  // "q5_0": f16 scale d, value = d * (q - 16), q in [0, 31]
  Q5_1,  // "q5_1": f16 scale d and min m, value = d * q + m, q in [0, 31]
  // The K-quants of llama.cpp's files (GGUF Q4_K, Q5_K, Q6_K): super-blocks of 256 with sub-block
  // scales (src/base/weight_blocks.h). They have no ScaledBlock codec (unpack_block and
  // pack_block are nullptr), so the quantizer's search and GPTQ do not make them.
  Q4_K,  // "q4_k": 8 sub-blocks of 32, value = (d * sc) * q - (dmin * m), q in [0, 15]
  Q5_K,  // "q5_k": as Q4_K with q in [0, 31]
  Q6_K,  // "q6_k": 16 sub-blocks of 16, value = (d * sc) * (q - 32), q in [0, 63]
  // GGUF Q3_K, the one K type `quantize` also writes (its own search and GPTQ, src/quant/):
  // 16 sub-blocks of 16 with 6-bit scales, value = (d * (sc - 32)) * (q - 4), q in [0, 7].
  Q3_K,  // "q3_k"
};
inline constexpr size_t kWeightTypeCount = 11;

struct ScaledBlock;  // src/base/weight_blocks.h

struct WeightTypeInfo {
  WeightType type;
  std::string_view name;       // user-facing: "f32", "bf16", "int8", "int4"
  std::string_view gguf_name;  // "F32", "BF16", "Q8_0", "Q4_0"
  uint32_t gguf_type;          // ggml's type id in GGUF tensor infos
  uint32_t gguf_file_type;     // llama.cpp's general.file_type for a file mostly of this type
  size_t block_elems;          // weights per block (1 for plain floats)
  size_t block_bytes;          // bytes per block
  bool quantized;              // blocks of integers with scales
  // Quantized types: the integers of a block (value = d * q) lie in [q_min, q_max].
  int q_min, q_max;

  // The scalar references (rows of `cols` weights, any alignment):
  // row -> [cols] floats, exact.
  void (*dequantize_row)(const std::byte* row, float* out, size_t cols);
  // [cols] floats -> row, round to nearest; throws Error on non-finite weights.
  void (*quantize_row)(const float* in, std::byte* row, size_t cols);
  // Types with one scale per block: quantize_row with one scale per `group` weights instead
  // (a multiple of the block; every block of a group carries its scale), nullptr otherwise.
  void (*quantize_row_grouped)(const float* in, std::byte* row, size_t cols, size_t group);
  // Every weight (float types) or every block scale is finite.
  bool (*finite_row)(const std::byte* row, size_t cols);
  // The 32-block scaled-integer types (nullptr otherwise, the K types included): one block
  // <-> its scale and integers, exactly.
  void (*unpack_block)(const std::byte* block, ScaledBlock& out);
  void (*pack_block)(const ScaledBlock& in, std::byte* block);

  bool scaled_blocks() const { return unpack_block != nullptr; }
  // The types `quantize --type` makes with its search and GPTQ (src/quant/): the 32-block
  // scaled-integer ones and Q3_K, whose sub-block scales the quantizer searches itself.
  bool quantizer_type() const { return scaled_blocks() || type == WeightType::Q3_K; }
  double bits_per_weight() const { return 8.0 * static_cast<double>(block_bytes) / static_cast<double>(block_elems); }
};

const WeightTypeInfo& weight_type_info(WeightType type);
// Every type, in enum order: what the tests (and anything listing the types) iterate.
std::span<const WeightTypeInfo> all_weight_types();
inline std::string_view weight_type_name(WeightType type) {
  return weight_type_info(type).name;
}
// "f32", "bf16", "int8", "int4" (also the GGUF spellings "F32", "BF16", "Q8_0", "Q4_0").
std::optional<WeightType> weight_type_from_name(std::string_view name);
// The type with this GGUF type id, or nullopt (a GGUF type the engine does not compute with).
std::optional<WeightType> weight_type_from_gguf(uint32_t gguf_type);
// The names of the types of one kind, joined for help and error text: "f32, bf16, int8, int4,
// q4_1, ..., q6_k or q3_k" (All), "int8, int4, q4_1, ..., q3_k" (Quantized), "int8, int4 or q3_k"
// (Scaled: the types `quantize --type` makes, quantizer_type), "f32 or bf16" (Float); `gguf`:
// their GGUF spellings ("Q8_0, Q4_0 or Q3_K").
// Writable: what `quantize` can write, the float types and the quantizer's ones.
enum class WeightTypeKind : uint8_t { All, Float, Quantized, Scaled, Writable };
std::string weight_type_names(WeightTypeKind kind = WeightTypeKind::All, bool gguf = false);
// Bytes of one row of `cols` weights; throws Error when cols is not a whole number of blocks.
size_t weight_row_bytes(WeightType type, size_t cols);

// The row's scalar references by type (see WeightTypeInfo).
inline void dequantize_row(WeightType type, const std::byte* row, float* out, size_t cols) {
  weight_type_info(type).dequantize_row(row, out, cols);
}
inline void quantize_row(WeightType type, const float* in, std::byte* row, size_t cols) {
  weight_type_info(type).quantize_row(in, row, cols);
}

}  // namespace nanoinfer
