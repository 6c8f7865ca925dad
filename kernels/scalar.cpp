// The scalar reference: the plainest correct code, one sequential float accumulator per
// output. Every fast kernel has the same signature and is tested against these. This file is
// compiled with the baseline x86-64 flags (no FMA), so `acc += a * b` is a rounded multiply
// then a rounded add everywhere, never contracted differently in different places.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/attention_tile.h"
#include "kernels/kernels.h"
#include "nanoinfer/dtype.h"

namespace nanoinfer::kernels {
namespace {

template <class W, class Widen>
void matmul_scalar(const W* w, const float* bias, const float* x, float* y, size_t rows, size_t cols, size_t n_tokens,
                   size_t row_begin, size_t row_end, Widen widen) {
  for (size_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * cols;
    for (size_t r = row_begin; r < row_end; ++r) {
      const W* wr = w + r * cols;
      float acc = 0.0f;
      for (size_t c = 0; c < cols; ++c) acc += widen(wr[c]) * xt[c];
      y[t * rows + r] = bias ? bias[r] + acc : acc;
    }
  }
}

float dot(const float* a, const float* b, size_t n) {
  float acc = 0.0f;
  for (size_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void axpy(float alpha, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace

namespace scalar {

void matmul_f32(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                size_t n_tokens, size_t row_begin, size_t row_end) {
  matmul_scalar(reinterpret_cast<const float*>(w), bias, x, y, rows, cols, n_tokens, row_begin, row_end,
                [](float v) { return v; });
}

void matmul_bf16(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                 size_t n_tokens, size_t row_begin, size_t row_end) {
  matmul_scalar(reinterpret_cast<const uint16_t*>(w), bias, x, y, rows, cols, n_tokens, row_begin, row_end,
                bf16_to_f32);
}

void dot_rows_f32(const float* q, const float* rows, size_t stride, size_t count, size_t n, float scale, float* out) {
  for (size_t j = 0; j < count; ++j) out[j] = dot(q, rows + j * stride, n) * scale;
}

void axpy_rows_f32(const float* alphas, float mult, const float* rows, size_t stride, size_t count, size_t n,
                   float* y) {
  for (size_t j = 0; j < count; ++j) axpy(alphas[j] * mult, rows + j * stride, y, n);
}

uint64_t attention_f32(const AttentionTile& a) {
  return attention_tile<ScalarOps, float>(a);
}
uint64_t attention_bf16(const AttentionTile& a) {
  return attention_tile<ScalarOps, Bf16>(a);
}
uint64_t attention_f16(const AttentionTile& a) {
  return attention_tile<ScalarOps, F16>(a);
}
void exp_f32(const float* x, float* y, size_t n) {
  exp_rows<ScalarOps>(x, y, n);
}
void silu_mul_f32(const float* gate, const float* up, float* out, size_t n) {
  silu_mul_rows<ScalarOps>(gate, up, out, n);
}

}  // namespace scalar

void pack_float(std::byte* w, size_t rows, size_t row_bytes) {
  std::vector<std::byte> group(kFloatPackRows * row_bytes);
  for (size_t g = 0; g < rows; g += kFloatPackRows) {
    std::byte* dst = w + g * row_bytes;
    std::memcpy(group.data(), dst, group.size());
    for (size_t c = 0; c < row_bytes; c += kPackLine)
      for (size_t r = 0; r < kFloatPackRows; ++r)
        std::memcpy(dst + c * kFloatPackRows + r * kPackLine, group.data() + r * row_bytes + c, kPackLine);
  }
}

void packed_row_float(const std::byte* w, size_t row_bytes, size_t r, std::byte* out) {
  const std::byte* group = w + r / kFloatPackRows * kFloatPackRows * row_bytes + r % kFloatPackRows * kPackLine;
  for (size_t c = 0; c < row_bytes; c += kPackLine) std::memcpy(out + c, group + c * kFloatPackRows, kPackLine);
}

}  // namespace nanoinfer::kernels
