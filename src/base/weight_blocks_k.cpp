// The scalar references of the K-quant weight types, Q4_K, Q5_K and Q6_K (layouts in
// src/base/weight_blocks.h). The dequantizers are the ground truth every kernel is tested
// against (each spells out its operation order); the quantizers are plain round-to-nearest
// references, enough to make test matrices and `--dtype q4_k|q5_k|q6_k` of a float model.
// llama.cpp's files, which are what these types are for, come with their own blocks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "base/weight_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

void require_finite_k(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) fail("quantize: weight {} of the row is {}", i, x[i]);
}

// f16 bits of a super-block scale, refused beyond f16's range like the 32-block types'.
uint16_t k_scale_bits(float d) {
  const uint16_t h = f32_to_f16(d);
  if ((h & 0x7c00u) == 0x7c00u) fail("quantize: a super-block needs a scale of {}, beyond f16's range", d);
  return h;
}

uint8_t clamp_round(float v, int lo, int hi) {
  const long r = std::lround(v);
  return static_cast<uint8_t>(std::clamp<long>(r, lo, hi));
}

bool f16_finite(uint16_t h) {
  return (h & 0x7c00u) != 0x7c00u;
}

}  // namespace

ScaleMin k_scale_min(const uint8_t (&q)[12], int j) {
  if (j < 4) return {static_cast<uint8_t>(q[j] & 63), static_cast<uint8_t>(q[j + 4] & 63)};
  return {static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4)),
          static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4))};
}

void k_pack_scale_min(const uint8_t* sc, const uint8_t* m, uint8_t (&q)[12]) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

// ---- Q4_K and Q5_K: sub-block scales and mins, 4- or 5-bit quants --------------------------

namespace {

// Element l of sub-block j of a Q4_K / Q5_K super-block, unsigned (Q5_K's fifth bit from qh).
template <class Block>
int k_min_quant(const Block& b, int j, int l) {
  const uint8_t byte = b.qs[32 * (j / 2) + l];
  const int q = j % 2 == 0 ? byte & 0x0F : byte >> 4;
  if constexpr (std::is_same_v<Block, BlockQ5_K>)
    return q | ((b.qh[l] >> j) & 1) << 4;
  else
    return q;
}

template <class Block>
void dequantize_row_k_min(const std::byte* row, float* out, size_t cols) {
  for (size_t i = 0; i < cols / kSuperBlock; ++i) {
    const auto b = load_k_block<Block>(row, i);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    for (int j = 0; j < 8; ++j) {
      const ScaleMin sm = k_scale_min(b.scales, j);
      const float ds = d * static_cast<float>(sm.scale), dm = dmin * static_cast<float>(sm.min);
      for (int l = 0; l < 32; ++l)
        out[i * kSuperBlock + 32 * j + l] = ds * static_cast<float>(k_min_quant(b, j, l)) - dm;
    }
  }
}

template <class Block>
void quantize_row_k_min(const float* in, std::byte* row, size_t cols) {
  constexpr int kLevels = std::is_same_v<Block, BlockQ5_K> ? 31 : 15;
  require_finite_k(in, cols);
  for (size_t i = 0; i < cols / kSuperBlock; ++i) {
    const float* x = in + i * kSuperBlock;
    // Per sub-block: the step over its range and the offset that brings its minimum to 0.
    float step[8], low[8], max_step = 0.0f, max_low = 0.0f;
    for (int j = 0; j < 8; ++j) {
      float mn = 0.0f, mx = 0.0f;
      for (int l = 0; l < 32; ++l) mn = std::min(mn, x[32 * j + l]), mx = std::max(mx, x[32 * j + l]);
      step[j] = (mx - mn) / static_cast<float>(kLevels);
      low[j] = -mn;
      max_step = std::max(max_step, step[j]);
      max_low = std::max(max_low, low[j]);
    }
    Block b{};
    b.d = k_scale_bits(max_step / 63.0f);
    b.dmin = k_scale_bits(max_low / 63.0f);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = d > 0.0f ? clamp_round(step[j] / d, 0, 63) : 0;
      m[j] = dmin > 0.0f ? clamp_round(low[j] / dmin, 0, 63) : 0;
    }
    k_pack_scale_min(sc, m, b.scales);
    for (int j = 0; j < 8; ++j) {
      const float ds = d * static_cast<float>(sc[j]), dm = dmin * static_cast<float>(m[j]);
      for (int l = 0; l < 32; ++l) {
        const uint8_t q = ds > 0.0f ? clamp_round((x[32 * j + l] + dm) / ds, 0, kLevels) : 0;
        b.qs[32 * (j / 2) + l] |= static_cast<uint8_t>(j % 2 == 0 ? q & 15 : (q & 15) << 4);
        if constexpr (std::is_same_v<Block, BlockQ5_K>) b.qh[l] |= static_cast<uint8_t>((q >> 4) << j);
      }
    }
    std::memcpy(row + i * sizeof b, &b, sizeof b);
  }
}

template <class Block>
bool finite_row_k_min(const std::byte* row, size_t cols) {
  for (size_t i = 0; i < cols / kSuperBlock; ++i) {
    const auto b = load_k_block<Block>(row, i);
    if (!f16_finite(b.d) || !f16_finite(b.dmin)) return false;
  }
  return true;
}

}  // namespace

void dequantize_row_q4_k(const std::byte* row, float* out, size_t cols) {
  dequantize_row_k_min<BlockQ4_K>(row, out, cols);
}
void quantize_row_q4_k(const float* in, std::byte* row, size_t cols) {
  quantize_row_k_min<BlockQ4_K>(in, row, cols);
}
bool finite_row_q4_k(const std::byte* row, size_t cols) {
  return finite_row_k_min<BlockQ4_K>(row, cols);
}

void dequantize_row_q5_k(const std::byte* row, float* out, size_t cols) {
  dequantize_row_k_min<BlockQ5_K>(row, out, cols);
}
void quantize_row_q5_k(const float* in, std::byte* row, size_t cols) {
  quantize_row_k_min<BlockQ5_K>(in, row, cols);
}
bool finite_row_q5_k(const std::byte* row, size_t cols) {
  return finite_row_k_min<BlockQ5_K>(row, cols);
}

// ---- Q6_K -----------------------------------------------------------------------------------

void dequantize_row_q6_k(const std::byte* row, float* out, size_t cols) {
  for (size_t i = 0; i < cols / kSuperBlock; ++i) {
    const auto b = load_k_block<BlockQ6_K>(row, i);
    const float d = f16_to_f32(b.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      float* y = out + i * kSuperBlock + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {
            (ql[l] & 0x0F) | ((qh[l] >> 0) & 3) << 4,
            (ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4,
            (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4,
            (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4,
        };
        for (int k = 0; k < 4; ++k) {
          const int e = 32 * k + l;  // element within the half
          const float scale = d * static_cast<float>(b.scales[8 * h + e / 16]);
          y[e] = scale * static_cast<float>(q[k] - 32);
        }
      }
    }
  }
}

void quantize_row_q6_k(const float* in, std::byte* row, size_t cols) {
  require_finite_k(in, cols);
  for (size_t i = 0; i < cols / kSuperBlock; ++i) {
    const float* x = in + i * kSuperBlock;
    // Per sub-block of 16, the signed value of largest magnitude maps to -32 (as Q4_0's -8).
    float step[16], max_step = 0.0f;
    for (int s = 0; s < 16; ++s) {
      float extreme = 0.0f;
      for (int l = 0; l < 16; ++l)
        if (std::fabs(x[16 * s + l]) > std::fabs(extreme)) extreme = x[16 * s + l];
      step[s] = extreme / -32.0f;
      max_step = std::max(max_step, std::fabs(step[s]));
    }
    BlockQ6_K b{};
    b.d = k_scale_bits(max_step / 127.0f);
    const float d = f16_to_f32(b.d);
    uint8_t q[kSuperBlock];
    for (int s = 0; s < 16; ++s) {
      const long sc = d > 0.0f ? std::clamp<long>(std::lround(step[s] / d), -127, 127) : 0;
      b.scales[s] = static_cast<int8_t>(sc);
      const float ds = d * static_cast<float>(sc);
      for (int l = 0; l < 16; ++l) q[16 * s + l] = ds != 0.0f ? clamp_round(x[16 * s + l] / ds + 32.0f, 0, 63) : 32;
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qq = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        b.ql[64 * h + l] = static_cast<uint8_t>((qq[l] & 15) | ((qq[l + 64] & 15) << 4));
        b.ql[64 * h + l + 32] = static_cast<uint8_t>((qq[l + 32] & 15) | ((qq[l + 96] & 15) << 4));
        b.qh[32 * h + l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                                                ((qq[l + 96] >> 4) << 6));
      }
    }
    std::memcpy(row + i * sizeof b, &b, sizeof b);
  }
}

bool finite_row_q6_k(const std::byte* row, size_t cols) {
  for (size_t i = 0; i < cols / kSuperBlock; ++i)
    if (!f16_finite(load_k_block<BlockQ6_K>(row, i).d)) return false;
  return true;
}

}  // namespace nanoinfer
