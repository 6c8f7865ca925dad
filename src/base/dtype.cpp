#include "nanoinfer/dtype.h"

#include <array>
#include <bit>
#include <cstring>

namespace nanoinfer {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 6> kDTypes{{
    {DType::F32, "F32", 4},
    {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},
    {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},
    {DType::I32, "I32", 4},
}};
}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& info : kDTypes)
    if (info.type == t) return info.name;
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.type;
  return std::nullopt;
}

size_t dtype_size(DType t) {
  for (const auto& info : kDTypes)
    if (info.type == t) return info.size;
  return 0;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {  // inf / NaN
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {  // normal
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {  // signed zero
    bits = sign;
  } else {  // subnormal: renormalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN, quiet
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (abs < 0x38800000u) {
    // Below the smallest normal half (2^-14): the result is a multiple of 2^-24. Adding 0.5
    // (exponent 2^-1, 23 mantissa bits) lines the float's mantissa up so that the hardware
    // add performs the round-to-nearest-even to that grid.
    const float scaled = std::bit_cast<float>(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(scaled) - 0x3f000000u));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to even.
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

namespace {

// One lane of the saturating form: the scalar conversion, then infinity from a finite value
// pulled back to the largest half.
uint16_t f32_to_f16_lane(float f, bool saturate) {
  const uint16_t h = f32_to_f16(f);
  if (saturate && (h & 0x7fffu) == 0x7c00u && (std::bit_cast<uint32_t>(f) & 0x7fffffffu) != 0x7f800000u)
    return static_cast<uint16_t>((h & 0x8000u) | 0x7bffu);
  return h;
}

}  // namespace

// f32_to_f16's cases as lane selects over 8 lanes in GCC's generic vectors (plain SSE2 on a
// baseline build): each lane computes every case's result with f32_to_f16's operations and keeps
// its own, so the bits are the scalar function's. The KV cache narrows every key and value it
// stores with this, which one value at a time cost ~2% of a small batch's pass.
void f32_to_f16_n(const float* in, uint16_t* out, size_t n, bool saturate) {
  using U8 = uint32_t __attribute__((vector_size(32)));
  using F8 = float __attribute__((vector_size(32)));
  using H8 = uint16_t __attribute__((vector_size(16)));
  const U8 zero = {};
  const U8 overflow = zero + (saturate ? 0x7bffu : 0x7c00u);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    U8 u;
    std::memcpy(&u, in + i, sizeof u);
    const U8 sign = (u >> 16) & 0x8000u;
    const U8 abs = u & 0x7fffffffu;
    const U8 normal = ((abs + 0xfffu + ((abs >> 13) & 1u)) - 0x38000000u) >> 13;
    F8 scaled;
    std::memcpy(&scaled, &abs, sizeof scaled);
    scaled += 0.5f;
    U8 tiny;
    std::memcpy(&tiny, &scaled, sizeof tiny);
    tiny -= 0x3f000000u;
    U8 r = abs < 0x38800000u ? tiny : normal;
    r = abs >= 0x477ff000u ? (abs == 0x7f800000u ? zero + 0x7c00u : overflow) : r;
    r = abs > 0x7f800000u ? zero + 0x7e00u : r;
    const H8 h = __builtin_convertvector(r | sign, H8);
    std::memcpy(out + i, &h, sizeof h);
  }
  for (; i < n; ++i) out[i] = f32_to_f16_lane(in[i], saturate);
}

}  // namespace nanoinfer
