// ggml tensor types as stored in GGUF files: the type ids, their block geometry, the packed
// block layouts, and a scalar dequantize-to-f32 reference for each type we read. The types the
// engine computes with (F32, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q3_K, Q4_K, Q5_K, Q6_K) are rows of the
// weight-type table (nanoinfer/weight_type.h): their ids, geometry, block layouts and dequantizers
// are taken from there, and only the file-only type (F16) is described here.
//
// Every quantized type stores a row as consecutive blocks; a block covers `block_elems`
// consecutive elements of one row (a row is always a whole number of blocks) and takes
// `block_bytes` bytes. All multi-byte fields are little-endian; scales are IEEE f16.
//
// The layouts below were written from the public description of the formats (ggml's docs and
// its reference dequantizers, read for facts). The references here are the ground truth for
// our kernels: a fast path must produce bitwise the same floats, so each reference spells out
// its exact operation order (e.g. Q4_K is `(d * sc) * q - (dmin * m)`, rounded per step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/weight_blocks.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

// A ggml type id as a GGUF tensor info holds it (the numbers are part of the file format). The
// weight types' ids are a column of the weight-type table (WeightTypeInfo::gguf_type, named by
// ggml_type_of); the one type only files bring, F16 (widened to f32 on load), is named here.
enum class GgmlType : uint32_t {
  F16 = 1,
};
GgmlType ggml_type_of(WeightType type);

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // ggml's spelling: "Q4_K", "BF16", ...
  uint32_t block_elems;   // elements per block (1 for the float types)
  uint32_t block_bytes;   // bytes per block
};

// The supported type with this id, or nullopt (unknown ids and ggml types we do not read).
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
GgmlTypeInfo ggml_type_info(GgmlType type);
// ggml's name for any id it has ever assigned ("Q2_K", "IQ4_XS", ...), "?" for others; used
// to say which type a file needs when we do not support it.
std::string_view ggml_type_name(uint32_t id);
// "F32, F16, Q4_0, ...": the supported types in ggml's id order, for error messages.
std::string ggml_supported_type_names();

// ---- block layouts ------------------------------------------------------------------------
// f16 fields are raw bits (uint16_t). Structs contain no padding (checked by static_assert),
// so a row of blocks can be read as an array of them when the base is 2-byte aligned.

inline constexpr int kQK = 32;                               // elements per block of the 32-element types (kQuantBlock)
inline constexpr int kQK_K = static_cast<int>(kSuperBlock);  // elements per super-block of the K types

// Q8_0 and Q4_0: BlockQ8_0, BlockQ4_0 in src/base/weight_blocks.h.

// Q4_1, Q5_0, Q5_1: BlockQ4_1, BlockQ5_0, BlockQ5_1 in src/base/weight_blocks.h.

// Q3_K, Q4_K, Q5_K, Q6_K: BlockQ3_K, BlockQ4_K, BlockQ5_K, BlockQ6_K in src/base/weight_blocks.h (weight types).

// ---- scalar references ---------------------------------------------------------------------
// Each converts `n` consecutive elements (a multiple of the type's block_elems) starting at
// `src` to f32. `src` may have any alignment. n = 0 writes nothing. (The weight types' own are
// their rows' dequantize_row, src/base/weight_blocks.h.)
void dequantize_row_f16(const std::byte* src, float* dst, size_t n);

// Dispatches on the type; throws nanoinfer::Error if n is not a whole number of blocks.
void dequantize_row(GgmlType type, const std::byte* src, float* dst, size_t n);

// Bytes that n elements of `type` occupy; throws if n is not a whole number of blocks.
size_t ggml_row_bytes(GgmlType type, uint64_t n);

}  // namespace nanoinfer
