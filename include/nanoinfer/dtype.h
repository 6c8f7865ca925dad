// Element types of stored tensors and the exact conversions between them.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace nanoinfer {

enum class DType : uint8_t { F32, F16, BF16, I8, U8, I32 };

// The safetensors spelling: "F32", "BF16", ...
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
size_t dtype_size(DType t);  // bytes per element

// bf16 is the top half of an f32, so widening is a shift and exact for every bit pattern.
inline float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(uint32_t{h} << 16);
}

// Narrowing rounds to nearest, ties to even; NaN stays NaN (quietened), infinities stay.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE half precision; exact (every f16 is representable in f32).
float f16_to_f32(uint16_t h);
// Narrowing to half precision rounds to nearest, ties to even; overflow gives infinity,
// tiny values become subnormals or zero, NaN stays NaN.
uint16_t f32_to_f16(float f);
// out[i] = f32_to_f16(in[i]) for i < n, bitwise, several at a time; with `saturate`, a finite
// value that rounds past the largest half (65504) gives +-65504 instead of infinity.
void f32_to_f16_n(const float* in, uint16_t* out, size_t n, bool saturate = false);

}  // namespace nanoinfer
