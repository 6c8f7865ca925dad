// The scalar references of the weight types (src/base/weight_blocks.h). The kernels, the
// quantizer and the GGUF reader all convert rows through these, so a row means the same
// floats everywhere.
#include "base/weight_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

// Rows may sit at any alignment (file data, fuzz inputs, test buffers): values are copied in
// and out, never read through a cast pointer.
template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// The f16 bits of a block scale; a scale beyond f16's range (65504) cannot be stored.
uint16_t block_scale(float d, float extreme) {
  const uint16_t h = f32_to_f16(d);
  if ((h & 0x7c00u) == 0x7c00u)
    fail("quantize: a block of weights reaching {} needs a scale beyond f16's range", extreme);
  return h;
}

void require_finite(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) fail("quantize: weight {} of the row is {}", i, x[i]);
}

// Every `step` bytes a 16-bit value whose exponent bits (`mask`) are not all set.
bool finite_u16(const std::byte* row, size_t count, size_t step, uint16_t mask) {
  for (size_t i = 0; i < count; ++i)
    if ((load<uint16_t>(row + i * step) & mask) == mask) return false;
  return true;
}

// A scaled-integer type's row, block by block through its unpack: w[i] = d * q[i].
template <class Block, void (*Unpack)(const std::byte*, ScaledBlock&)>
void dequantize_scaled(const std::byte* row, float* out, size_t cols) {
  ScaledBlock b;
  for (size_t k = 0; k < cols / kQuantBlock; ++k) {
    Unpack(row + k * sizeof(Block), b);
    const float d = f16_to_f32(b.d);
    for (size_t i = 0; i < kQuantBlock; ++i) out[k * kQuantBlock + i] = d * static_cast<float>(b.q[i]);
  }
}

}  // namespace

// ---- F32 ------------------------------------------------------------------------------------

void dequantize_row_f32(const std::byte* row, float* out, size_t cols) {
  if (cols > 0) std::memcpy(out, row, cols * sizeof(float));
}
void quantize_row_f32(const float* in, std::byte* row, size_t cols) {
  if (cols > 0) std::memcpy(row, in, cols * sizeof(float));
}
bool finite_row_f32(const std::byte* row, size_t cols) {
  for (size_t i = 0; i < cols; ++i)
    if ((load<uint32_t>(row + 4 * i) & 0x7f800000u) == 0x7f800000u) return false;
  return true;
}

// ---- BF16 -----------------------------------------------------------------------------------

void dequantize_row_bf16(const std::byte* row, float* out, size_t cols) {
  for (size_t i = 0; i < cols; ++i) out[i] = bf16_to_f32(load<uint16_t>(row + 2 * i));
}
void quantize_row_bf16(const float* in, std::byte* row, size_t cols) {
  for (size_t i = 0; i < cols; ++i) store(row + 2 * i, f32_to_bf16(in[i]));
}
bool finite_row_bf16(const std::byte* row, size_t cols) {
  return finite_u16(row, cols, 2, 0x7f80u);
}

// ---- Q8_0 -----------------------------------------------------------------------------------

void unpack_block_q8_0(const std::byte* block, ScaledBlock& out) {
  const auto b = load<BlockQ8_0>(block);
  out.d = b.d;
  std::memcpy(out.q, b.qs, kQuantBlock);
}
void pack_block_q8_0(const ScaledBlock& in, std::byte* block) {
  BlockQ8_0 b;
  b.d = in.d;
  std::memcpy(b.qs, in.q, kQuantBlock);
  store(block, b);
}
void dequantize_row_q8_0(const std::byte* row, float* out, size_t cols) {
  dequantize_scaled<BlockQ8_0, unpack_block_q8_0>(row, out, cols);
}
void quantize_row_q8_0(const float* in, std::byte* row, size_t cols) {
  quantize_row_q8_0_grouped(in, row, cols, kQuantBlock);
}
void quantize_row_q8_0_grouped(const float* in, std::byte* row, size_t cols, size_t group) {
  require_finite(in, cols);
  for (size_t g0 = 0; g0 < cols; g0 += group) {
    const size_t g1 = std::min(cols, g0 + group);
    float amax = 0.0f;
    for (size_t i = g0; i < g1; ++i) amax = std::fmax(amax, std::fabs(in[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b;
    b.d = block_scale(d, amax);
    for (size_t k = g0; k < g1; k += kQuantBlock) {
      for (size_t i = 0; i < kQuantBlock; ++i) b.qs[i] = static_cast<int8_t>(std::lround(in[k + i] * id));
      store(row + (k / kQuantBlock) * sizeof(BlockQ8_0), b);
    }
  }
}
bool finite_row_q8_0(const std::byte* row, size_t cols) {
  return finite_u16(row, cols / kQuantBlock, sizeof(BlockQ8_0), 0x7c00u);
}

// ---- Q4_0 -----------------------------------------------------------------------------------

void unpack_block_q4_0(const std::byte* block, ScaledBlock& out) {
  const auto b = load<BlockQ4_0>(block);
  out.d = b.d;
  for (size_t j = 0; j < kQuantBlock / 2; ++j) {
    out.q[j] = static_cast<int8_t>((b.qs[j] & 0x0f) - 8);
    out.q[j + kQuantBlock / 2] = static_cast<int8_t>((b.qs[j] >> 4) - 8);
  }
}
void pack_block_q4_0(const ScaledBlock& in, std::byte* block) {
  BlockQ4_0 b;
  b.d = in.d;
  for (size_t j = 0; j < kQuantBlock / 2; ++j)
    b.qs[j] = static_cast<uint8_t>((in.q[j] + 8) | ((in.q[j + kQuantBlock / 2] + 8) << 4));
  store(block, b);
}
void dequantize_row_q4_0(const std::byte* row, float* out, size_t cols) {
  dequantize_scaled<BlockQ4_0, unpack_block_q4_0>(row, out, cols);
}
void quantize_row_q4_0(const float* in, std::byte* row, size_t cols) {
  quantize_row_q4_0_grouped(in, row, cols, kQuantBlock);
}
void quantize_row_q4_0_grouped(const float* in, std::byte* row, size_t cols, size_t group) {
  require_finite(in, cols);
  // The signed value of largest magnitude maps to -8, so the full range [-8, 7] is used on
  // the side that needs it.
  for (size_t g0 = 0; g0 < cols; g0 += group) {
    const size_t g1 = std::min(cols, g0 + group);
    float max = 0.0f;
    for (size_t i = g0; i < g1; ++i)
      if (std::fabs(in[i]) > std::fabs(max)) max = in[i];
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const auto nib = [&](float v) {
      const long q = std::lround(v * id) + 8;
      return static_cast<uint8_t>(q < 0 ? 0 : (q > 15 ? 15 : q));
    };
    BlockQ4_0 b;
    b.d = block_scale(d, max);
    for (size_t k = g0; k < g1; k += kQuantBlock) {
      const float* xb = in + k;
      for (size_t j = 0; j < kQuantBlock / 2; ++j)
        b.qs[j] = static_cast<uint8_t>(nib(xb[j]) | (nib(xb[j + kQuantBlock / 2]) << 4));
      store(row + (k / kQuantBlock) * sizeof(BlockQ4_0), b);
    }
  }
}
bool finite_row_q4_0(const std::byte* row, size_t cols) {
  return finite_u16(row, cols / kQuantBlock, sizeof(BlockQ4_0), 0x7c00u);
}

// ---- Q4_1, Q5_0, Q5_1 --------------------------------------------------------------------

namespace {

template <class Block>
void set_block_quant(Block& b, size_t i, int q) {
  if (i < 16)
    b.qs[i] = static_cast<uint8_t>((b.qs[i] & 0xF0) | (q & 15));
  else
    b.qs[i - 16] = static_cast<uint8_t>((b.qs[i - 16] & 0x0F) | (q & 15) << 4);
  if constexpr (!std::is_same_v<Block, BlockQ4_1>)
    b.qh[i / 8] = static_cast<uint8_t>(b.qh[i / 8] | ((q >> 4) & 1) << (i % 8));
}

// The order of each weight's steps is llama.cpp's (q * d + m; (q - 16) * d), so a row
// dequantizes to the floats its own reference gives.
template <class Block>
void dequantize_row_32(const std::byte* row, float* out, size_t cols) {
  for (size_t k = 0; k < cols / kQuantBlock; ++k) {
    const auto b = load<Block>(row + k * sizeof(Block));
    const float d = f16_to_f32(b.d);
    for (size_t i = 0; i < kQuantBlock; ++i) {
      if constexpr (std::is_same_v<Block, BlockQ5_0>) {
        out[k * kQuantBlock + i] = static_cast<float>(block_quant(b, i) - 16) * d;
      } else {
        out[k * kQuantBlock + i] = static_cast<float>(block_quant(b, i)) * d + f16_to_f32(b.m);
      }
    }
  }
}

template <class Block>
void quantize_row_32(const float* in, std::byte* row, size_t cols) {
  require_finite(in, cols);
  constexpr int kLevels = std::is_same_v<Block, BlockQ4_1> ? 15 : 31;
  for (size_t k = 0; k < cols / kQuantBlock; ++k) {
    const float* xb = in + k * kQuantBlock;
    Block b{};
    float lo = 0.0f, d = 0.0f;
    if constexpr (std::is_same_v<Block, BlockQ5_0>) {
      float max = 0.0f;  // the extreme maps to -16, as Q4_0's to -8
      for (size_t i = 0; i < kQuantBlock; ++i)
        if (std::fabs(xb[i]) > std::fabs(max)) max = xb[i];
      b.d = block_scale(max / -16.0f, max);
      d = f16_to_f32(b.d);
      lo = -16.0f * d;
    } else {
      float mn = xb[0], mx = xb[0];
      for (size_t i = 0; i < kQuantBlock; ++i) mn = std::fmin(mn, xb[i]), mx = std::fmax(mx, xb[i]);
      b.d = block_scale((mx - mn) / static_cast<float>(kLevels), mx - mn);
      b.m = block_scale(mn, mn);
      d = f16_to_f32(b.d);
      lo = f16_to_f32(b.m);
    }
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (size_t i = 0; i < kQuantBlock; ++i) {
      const long q = std::lround((xb[i] - lo) * id);
      set_block_quant(b, i, static_cast<int>(q < 0 ? 0 : (q > kLevels ? kLevels : q)));
    }
    store(row + k * sizeof(Block), b);
  }
}

template <class Block>
bool finite_row_32(const std::byte* row, size_t cols) {
  for (size_t k = 0; k < cols / kQuantBlock; ++k) {
    const auto b = load<Block>(row + k * sizeof(Block));
    if ((b.d & 0x7c00u) == 0x7c00u) return false;
    if constexpr (!std::is_same_v<Block, BlockQ5_0>)
      if ((b.m & 0x7c00u) == 0x7c00u) return false;
  }
  return true;
}

}  // namespace

void dequantize_row_q4_1(const std::byte* row, float* out, size_t cols) {
  dequantize_row_32<BlockQ4_1>(row, out, cols);
}
void quantize_row_q4_1(const float* in, std::byte* row, size_t cols) {
  quantize_row_32<BlockQ4_1>(in, row, cols);
}
bool finite_row_q4_1(const std::byte* row, size_t cols) {
  return finite_row_32<BlockQ4_1>(row, cols);
}

void dequantize_row_q5_0(const std::byte* row, float* out, size_t cols) {
  dequantize_row_32<BlockQ5_0>(row, out, cols);
}
void quantize_row_q5_0(const float* in, std::byte* row, size_t cols) {
  quantize_row_32<BlockQ5_0>(in, row, cols);
}
bool finite_row_q5_0(const std::byte* row, size_t cols) {
  return finite_row_32<BlockQ5_0>(row, cols);
}

void dequantize_row_q5_1(const std::byte* row, float* out, size_t cols) {
  dequantize_row_32<BlockQ5_1>(row, out, cols);
}
void quantize_row_q5_1(const float* in, std::byte* row, size_t cols) {
  quantize_row_32<BlockQ5_1>(in, row, cols);
}
bool finite_row_q5_1(const std::byte* row, size_t cols) {
  return finite_row_32<BlockQ5_1>(row, cols);
}

}  // namespace nanoinfer
