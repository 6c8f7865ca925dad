// AVX-512 kernels (F/BW/VL; this file gets the AVX-512 flags from CMake by its name).
// xsimd 8.1 supplies the batches, loads and the lane reduction; intrinsics fill three gaps:
// its avx512f fma() is a separate multiply and add, it has no masked load, and it cannot
// widen 16-bit lanes into a 32-bit batch of twice the width.
#include <immintrin.h>

#include "kernels/kernels.h"
#include "kernels/simd_kernels.h"

namespace nanoinfer::kernels {
namespace {

struct Avx512Ops {
  using batch = xsimd::batch<float, xsimd::avx512f>;
  static constexpr size_t width = 16;
  // 4 x 6 accumulators + 6 activation rows + 1 weight row = 31 of the 32 zmm registers.
  static constexpr size_t row_tile = 4;
  static constexpr size_t token_tile = 6;
  static constexpr size_t decode_rows = 8;

  static batch load(const float* p) { return batch::load_unaligned(p); }
  // bf16 is the high half of an f32: zero-extend each 16-bit lane to 32 bits, shift up.
  // (The all-lanes maskz forms compile to the same instructions as the unmasked ones, which
  // GCC 12 flags with a false -Wmaybe-uninitialized.)
  static batch widen_bf16(__m256i h) {
    const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xffff, h);
    return batch(_mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, wide, 16)));
  }
  static batch load(const uint16_t* p) { return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __mmask16 tail_mask(size_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static batch load_tail(const float* p, size_t n) { return batch(_mm512_maskz_loadu_ps(tail_mask(n), p)); }
  static batch load_tail(const uint16_t* p, size_t n) { return widen_bf16(_mm256_maskz_loadu_epi16(tail_mask(n), p)); }
  static batch fma(batch a, batch b, batch c) { return batch(_mm512_fmadd_ps(a, b, c)); }
  static float reduce(batch v) { return xsimd::hadd(v); }
};

}  // namespace

namespace avx512 {

void matmul_f32(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                size_t n_tokens, size_t row_begin, size_t row_end) {
  matmul<Avx512Ops>(reinterpret_cast<const float*>(w), bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

void matmul_bf16(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                 size_t n_tokens, size_t row_begin, size_t row_end) {
  matmul<Avx512Ops>(reinterpret_cast<const uint16_t*>(w), bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

void dot_rows_f32(const float* q, const float* rows, size_t stride, size_t count, size_t n, float scale, float* out) {
  dot_rows<Avx512Ops>(q, rows, stride, count, n, scale, out);
}

void axpy_rows_f32(const float* alphas, float mult, const float* rows, size_t stride, size_t count, size_t n,
                   float* y) {
  axpy_rows<Avx512Ops>(alphas, mult, rows, stride, count, n, y);
}

}  // namespace avx512

}  // namespace nanoinfer::kernels
