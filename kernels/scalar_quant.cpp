// Scalar references for the quantized weight types: round-to-nearest quantization,
// exact dequantization, and the matrix product every faster kernel is held to, bitwise.
//
// The product quantizes each activation row to int8 blocks of 32 (quantize_activation_block
// below), so that a block's dot product is exact integer arithmetic. (quantize_activations
// does so for a whole input once; the matmul_quantized entries take its result, so the model
// quantizes an input once for every thread and matrix; the float entries quantize for
// themselves and call them.) Then, for each output,
//
//   acc = 0.0f
//   for each block b, in ascending order:
//     s    = dw[r][b] * dx[t][b]            (f32 multiply, rounded; dw is the f16 scale widened)
//     acc  = acc + s * float(isum(r, t, b))  (f32 multiply, rounded; then f32 add, rounded)
//   y[t][r] = bias[r] + acc                  (or acc when there is no bias)
//
// with isum the exact int32 sum of the 32 products of quantized weights and activations
// (|isum| <= 32 * 128 * 127, so float(isum) is exact). Nothing is fused: every SIMD kernel
// computes each (row, token) pair in one vector lane with exactly these operations, which is
// what makes the results bitwise equal on every ISA, for any split of rows across threads,
// and for a batch versus one token at a time.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"

namespace nanoinfer::kernels {

float quantize_activation_block(const float* x, int8_t* q) {
  // fmax skips NaN, like the SIMD max with the running maximum as its second operand.
  float amax = 0.0f;
  for (size_t i = 0; i < kQuantBlock; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  if (!(d >= std::numeric_limits<float>::min())) {
    std::memset(q, 0, kQuantBlock);
    return 0.0f;
  }
  const float id = 1.0f / d;
  for (size_t i = 0; i < kQuantBlock; ++i) {
    // |x * id| <= 127 * (1 + 2^-22) for finite x, so r is in range; NaN maps to -128 as
    // vcvtps2dq + saturating packs do.
    const float r = std::nearbyint(x[i] * id);
    q[i] = r >= -127.0f && r <= 127.0f ? static_cast<int8_t>(r) : int8_t{-128};
  }
  return d;
}

namespace {

// The weights of block b of a row as int8, and its scale.
inline float weight_block(WeightType type, const std::byte* row, size_t b, int8_t* q) {
  if (type == WeightType::Q8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    std::memcpy(q, blk->q, kQuantBlock);
    return f16_to_f32(blk->d);
  }
  const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
  for (size_t j = 0; j < kQuantBlock / 2; ++j) {
    q[j] = static_cast<int8_t>((blk->q[j] & 0x0f) - 8);
    q[j + kQuantBlock / 2] = static_cast<int8_t>((blk->q[j] >> 4) - 8);
  }
  return f16_to_f32(blk->d);
}

void matmul_quantized(WeightType type, const std::byte* w, const float* bias, const QuantizedActivations& x, float* y,
                      size_t rows, size_t row_begin, size_t row_end) {
  const size_t nb = x.nb;
  const size_t row_bytes = weight_row_bytes(type, x.cols);
  int8_t qw[kQuantBlock];
  for (size_t t = 0; t < x.n; ++t) {
    const int8_t* xq = x.q.data() + t * x.cols;
    for (size_t r = row_begin; r < row_end; ++r) {
      const std::byte* row = w + r * row_bytes;
      float acc = 0.0f;
      for (size_t b = 0; b < nb; ++b) {
        const float dw = weight_block(type, row, b, qw);
        int32_t isum = 0;
        for (size_t i = 0; i < kQuantBlock; ++i) isum += int32_t{qw[i]} * int32_t{xq[b * kQuantBlock + i]};
        const float s = dw * x.d[b * x.tokens + t];
        acc += s * static_cast<float>(isum);
      }
      y[t * rows + r] = bias ? bias[r] + acc : acc;
    }
  }
}

// The entries taking float activations quantize them into a buffer of their own thread; the
// model quantizes once per input instead and calls the entries above.
void matmul_quant(WeightType type, const std::byte* w, const float* bias, const float* x, float* y, size_t rows,
                  size_t cols, size_t n_tokens, size_t row_begin, size_t row_end) {
  thread_local QuantizedActivations a;
  quantize_activations(x, cols, n_tokens, a);
  matmul_quantized(type, w, bias, a, y, rows, row_begin, row_end);
}

}  // namespace

void quantize_activations(const float* x, size_t cols, size_t n, QuantizedActivations& a) {
  a.cols = cols;
  a.nb = cols / kQuantBlock;
  a.n = n;
  a.tokens = n == 1 ? 1 : (n + kQuantTokenGroup - 1) / kQuantTokenGroup * kQuantTokenGroup;
  a.q.resize(a.tokens * cols);
  a.d.resize(a.nb * a.tokens);
  a.s.resize(a.nb * a.tokens);
  for (size_t t = 0; t < a.tokens; ++t) {
    for (size_t b = 0; b < a.nb; ++b) {
      int8_t* q = a.q.data() + t * cols + b * kQuantBlock;
      float d = 0.0f;
      if (t < n) d = quantize_activation_block(x + t * cols + b * kQuantBlock, q);
      else std::memset(q, 0, kQuantBlock);
      int32_t sum = 0;
      for (size_t i = 0; i < kQuantBlock; ++i) sum += q[i];
      a.d[b * a.tokens + t] = d;
      a.s[b * a.tokens + t] = sum;
    }
  }
}

void matmul_q8_0(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                 size_t n_tokens, size_t row_begin, size_t row_end) {
  matmul_quant(WeightType::Q8_0, w, bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

void matmul_q4_0(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                 size_t n_tokens, size_t row_begin, size_t row_end) {
  matmul_quant(WeightType::Q4_0, w, bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

void matmul_quantized_q8_0(const std::byte* w, const float* bias, const QuantizedActivations& x, float* y, size_t rows,
                           size_t row_begin, size_t row_end) {
  matmul_quantized(WeightType::Q8_0, w, bias, x, y, rows, row_begin, row_end);
}

void matmul_quantized_q4_0(const std::byte* w, const float* bias, const QuantizedActivations& x, float* y, size_t rows,
                           size_t row_begin, size_t row_end) {
  matmul_quantized(WeightType::Q4_0, w, bias, x, y, rows, row_begin, row_end);
}

void dequantize_row(WeightType type, const std::byte* row, float* out, size_t cols) {
  switch (type) {
    case WeightType::F32: std::memcpy(out, row, cols * sizeof(float)); return;
    case WeightType::BF16: {
      const auto* h = reinterpret_cast<const uint16_t*>(row);
      for (size_t i = 0; i < cols; ++i) out[i] = bf16_to_f32(h[i]);
      return;
    }
    case WeightType::Q8_0:
    case WeightType::Q4_0: {
      int8_t q[kQuantBlock];
      for (size_t b = 0; b < cols / kQuantBlock; ++b) {
        const float d = weight_block(type, row, b, q);
        for (size_t i = 0; i < kQuantBlock; ++i) out[b * kQuantBlock + i] = d * static_cast<float>(q[i]);
      }
      return;
    }
  }
}

namespace {

// The f16 bits of a block scale; a scale beyond f16's range (65504) cannot be stored.
uint16_t block_scale(float d, float extreme) {
  const uint16_t h = f32_to_f16(d);
  if ((h & 0x7c00u) == 0x7c00u) fail("quantize: a block of weights reaching {} needs a scale beyond f16's range", extreme);
  return h;
}

void require_finite(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) fail("quantize: weight {} of the row is {}", i, x[i]);
}

}  // namespace

void quantize_row(WeightType type, const float* in, std::byte* row, size_t cols) {
  switch (type) {
    case WeightType::F32: std::memcpy(row, in, cols * sizeof(float)); return;
    case WeightType::BF16: {
      auto* h = reinterpret_cast<uint16_t*>(row);
      for (size_t i = 0; i < cols; ++i) h[i] = f32_to_bf16(in[i]);
      return;
    }
    case WeightType::Q8_0: {
      require_finite(in, cols);
      auto* blocks = reinterpret_cast<BlockQ8_0*>(row);
      for (size_t b = 0; b < cols / kQuantBlock; ++b) {
        const float* xb = in + b * kQuantBlock;
        float amax = 0.0f;
        for (size_t i = 0; i < kQuantBlock; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = block_scale(d, amax);
        for (size_t i = 0; i < kQuantBlock; ++i) blocks[b].q[i] = static_cast<int8_t>(std::lround(xb[i] * id));
      }
      return;
    }
    case WeightType::Q4_0: {
      require_finite(in, cols);
      // The signed value of largest magnitude maps to -8, so the full range [-8, 7] is used
      // on the side that needs it.
      auto* blocks = reinterpret_cast<BlockQ4_0*>(row);
      for (size_t b = 0; b < cols / kQuantBlock; ++b) {
        const float* xb = in + b * kQuantBlock;
        float max = 0.0f;
        for (size_t i = 0; i < kQuantBlock; ++i)
          if (std::fabs(xb[i]) > std::fabs(max)) max = xb[i];
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = block_scale(d, max);
        for (size_t j = 0; j < kQuantBlock / 2; ++j) {
          const auto nib = [&](float v) {
            const long q = std::lround(v * id) + 8;
            return static_cast<uint8_t>(q < 0 ? 0 : (q > 15 ? 15 : q));
          };
          blocks[b].q[j] = static_cast<uint8_t>(nib(xb[j]) | (nib(xb[j + kQuantBlock / 2]) << 4));
        }
      }
      return;
    }
  }
  fail("quantize_row: unknown weight type");
}

}  // namespace nanoinfer::kernels

// ---- the packed layout (kernels/quant_blocks.h) -------------------------------------------

namespace nanoinfer::kernels {
namespace {

// Bytes of the 4-byte words of a block's quants: 8 for Q8_0, 4 for Q4_0.
size_t words_per_block(WeightType type) { return type == WeightType::Q8_0 ? 8 : 4; }
// Q8_0 words are held as q + 128 (unsigned); flipping the top bit of each byte converts both ways.
uint8_t held_byte(WeightType type, uint8_t b) { return type == WeightType::Q8_0 ? b ^ 0x80u : b; }

void require_packable(WeightType type) {
  if (type != WeightType::Q8_0 && type != WeightType::Q4_0)
    fail("pack_quantized: {} has no packed layout", weight_type_name(type));
}

}  // namespace

void pack_quantized(WeightType type, std::byte* w, size_t rows, size_t cols) {
  require_packable(type);
  const size_t row_bytes = weight_row_bytes(type, cols), nb = cols / kQuantBlock;
  const size_t bb = row_bytes / nb, words = words_per_block(type);
  std::vector<std::byte> group(kPackRows * row_bytes);
  for (size_t g = 0; g + kPackRows <= rows; g += kPackRows) {
    std::byte* dst = w + g * row_bytes;
    std::memcpy(group.data(), dst, group.size());
    for (size_t b = 0; b < nb; ++b) {
      std::byte* out = dst + b * kPackRows * bb;
      for (size_t r = 0; r < kPackRows; ++r) {
        const std::byte* blk = group.data() + r * row_bytes + b * bb;
        std::memcpy(out + 2 * r, blk, 2);  // the f16 scale
        for (size_t k = 0; k < words; ++k)
          for (size_t i = 0; i < 4; ++i)
            out[2 * kPackRows + 64 * k + 4 * r + i] =
                std::byte{held_byte(type, std::to_integer<uint8_t>(blk[2 + 4 * k + i]))};
      }
    }
  }
}

const std::byte* packed_row(WeightType type, const std::byte* w, size_t rows, size_t cols, size_t r,
                            std::byte* scratch) {
  require_packable(type);
  const size_t row_bytes = weight_row_bytes(type, cols);
  if (r >= rows / kPackRows * kPackRows) return w + r * row_bytes;
  const size_t nb = cols / kQuantBlock, bb = row_bytes / nb, words = words_per_block(type);
  const std::byte* group = w + r / kPackRows * kPackRows * row_bytes;
  const size_t j = r % kPackRows;
  for (size_t b = 0; b < nb; ++b) {
    const std::byte* in = group + b * kPackRows * bb;
    std::byte* blk = scratch + b * bb;
    std::memcpy(blk, in + 2 * j, 2);
    for (size_t k = 0; k < words; ++k)
      for (size_t i = 0; i < 4; ++i)
        blk[2 + 4 * k + i] = std::byte{held_byte(type, std::to_integer<uint8_t>(in[2 * kPackRows + 64 * k + 4 * j + i]))};
  }
  return scratch;
}

}  // namespace nanoinfer::kernels
