// Scalar references for the quantized weight types: round-to-nearest quantization,
// exact dequantization, and the matrix product every faster kernel is held to.
//
// The product quantizes each activation row to int8 blocks of 32 (scale dx = max|x| / 127,
// kept in f32), so that a block's dot product is exact integer arithmetic:
//   y[t][r] = bias[r] + sum over blocks b, in order, of (dw[r][b] * dx[t][b]) * isum(r, t, b)
// with isum the int32 sum of the 32 products of quantized weights and activations. The float
// accumulation runs over the blocks in ascending order, one rounding per step.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"

namespace nanoinfer::kernels {
namespace {

// Activation row quantized to int8 blocks: qx [cols], dx [cols / 32].
struct QuantizedActivation {
  std::vector<int8_t> q;
  std::vector<float> d;
};

void quantize_activation(const float* x, size_t cols, QuantizedActivation& out) {
  const size_t nb = cols / kQuantBlock;
  out.q.resize(cols);
  out.d.resize(nb);
  for (size_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.0f;
    for (size_t i = 0; i < kQuantBlock; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out.d[b] = d;
    for (size_t i = 0; i < kQuantBlock; ++i) out.q[b * kQuantBlock + i] = static_cast<int8_t>(std::lround(xb[i] * id));
  }
}

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

void matmul_quant(WeightType type, const std::byte* w, const float* bias, const float* x, float* y, size_t rows,
                  size_t cols, size_t n_tokens, size_t row_begin, size_t row_end) {
  const size_t nb = cols / kQuantBlock;
  const size_t row_bytes = weight_row_bytes(type, cols);
  QuantizedActivation xq;
  int8_t qw[kQuantBlock];
  for (size_t t = 0; t < n_tokens; ++t) {
    quantize_activation(x + t * cols, cols, xq);
    for (size_t r = row_begin; r < row_end; ++r) {
      const std::byte* row = w + r * row_bytes;
      float acc = 0.0f;
      for (size_t b = 0; b < nb; ++b) {
        const float dw = weight_block(type, row, b, qw);
        int32_t isum = 0;
        for (size_t i = 0; i < kQuantBlock; ++i) isum += int32_t{qw[i]} * int32_t{xq.q[b * kQuantBlock + i]};
        acc += (dw * xq.d[b]) * static_cast<float>(isum);
      }
      y[t * rows + r] = bias ? bias[r] + acc : acc;
    }
  }
}

}  // namespace

void matmul_q8_0(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                 size_t n_tokens, size_t row_begin, size_t row_end) {
  matmul_quant(WeightType::Q8_0, w, bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

void matmul_q4_0(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                 size_t n_tokens, size_t row_begin, size_t row_end) {
  matmul_quant(WeightType::Q4_0, w, bias, x, y, rows, cols, n_tokens, row_begin, row_end);
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

void quantize_row(WeightType type, const float* in, std::byte* row, size_t cols) {
  switch (type) {
    case WeightType::F32: std::memcpy(row, in, cols * sizeof(float)); return;
    case WeightType::BF16: {
      auto* h = reinterpret_cast<uint16_t*>(row);
      for (size_t i = 0; i < cols; ++i) h[i] = f32_to_bf16(in[i]);
      return;
    }
    case WeightType::Q8_0: {
      auto* blocks = reinterpret_cast<BlockQ8_0*>(row);
      for (size_t b = 0; b < cols / kQuantBlock; ++b) {
        const float* xb = in + b * kQuantBlock;
        float amax = 0.0f;
        for (size_t i = 0; i < kQuantBlock; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = f32_to_f16(d);
        for (size_t i = 0; i < kQuantBlock; ++i) blocks[b].q[i] = static_cast<int8_t>(std::lround(xb[i] * id));
      }
      return;
    }
    case WeightType::Q4_0: {
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
        blocks[b].d = f32_to_f16(d);
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
