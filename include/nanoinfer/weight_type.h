// The one seam for weight types. Every way a matrix can be held — plain floats or blocks of
// quantized integers with a scale — is one WeightType with one traits entry here. Loading,
// the matrix products, the embedding lookup, `inspect`, `synth`, `quantize` and the GGUF
// reader all ask these traits instead of branching on the type themselves; the kernels for a
// type sit in the kernel table (kernels/kernels.h), indexed by the same enum.
//
// Adding a type: a value here, its traits entry (src/model/weight_type.cpp), its scalar
// reference (kernels/scalar*.cpp: dequantize a row, quantize a row, matmul) and, optionally,
// faster kernels per ISA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace nanoinfer {

enum class WeightType : uint8_t {
  F32,   // 4 bytes per weight
  BF16,  // 2 bytes per weight, the top half of an f32
  Q8_0,  // "int8": blocks of 32, one f16 scale d, value = d * q, q in [-127, 127] (GGUF Q8_0)
  Q4_0,  // "int4": blocks of 32, one f16 scale d, value = d * (q - 8), q in [0, 15] (GGUF Q4_0)
};
inline constexpr size_t kWeightTypeCount = 4;

struct WeightTypeInfo {
  WeightType type;
  std::string_view name;       // user-facing: "f32", "bf16", "int8", "int4"
  std::string_view gguf_name;  // "F32", "BF16", "Q8_0", "Q4_0"
  size_t block_elems;          // weights per block (1 for plain floats)
  size_t block_bytes;          // bytes per block
  bool quantized;              // blocks of integers with scales
  double bits_per_weight() const { return 8.0 * static_cast<double>(block_bytes) / static_cast<double>(block_elems); }
};

const WeightTypeInfo& weight_type_info(WeightType type);
inline std::string_view weight_type_name(WeightType type) { return weight_type_info(type).name; }
// "f32", "bf16", "int8", "int4" (also the GGUF spellings "F32", "BF16", "Q8_0", "Q4_0").
std::optional<WeightType> weight_type_from_name(std::string_view name);
// Bytes of one row of `cols` weights; throws Error when cols is not a whole number of blocks.
size_t weight_row_bytes(WeightType type, size_t cols);

}  // namespace nanoinfer
