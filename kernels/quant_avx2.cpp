// The quantized products of the avx2 tier (AVX2 + FMA + F16C; the avx512 tier uses them too,
// kernels/dispatch.cpp): Q8_0 / Q4_0 by kernels/quant_simd.h and the packed K and Q4_1 / Q5_0 /
// Q5_1 products by kernels/quant_k_simd.h, both with vpmaddubsw + vpmaddwd on 256 bits (the
// packed ones two slices per 16-row group). Also the quantizer's search steps.
#include <immintrin.h>

#include <cstring>

#include "kernels/quant_k_simd.h"
#include "kernels/quant_simd.h"

namespace nanoinfer::kernels::avx2 {

constinit const ByType<MatmulQuantizedFn> matmul_quantized = quantized_products<Ymm<false>>();
// Q4_0 and Q8_0 packed too, on the 32-block kernel (kernels/quant_k_simd.h).
constinit const ByType<MatmulPackedFn> matmul_packed = [] {
  ByType<MatmulPackedFn> products = packed_k_products<PackedYmm<false>>();
  products.q4_0 = matmul_packed_k<PackedYmm<false>, WeightType::Q4_0>;
  products.q8_0 = matmul_packed_k<PackedYmm<false>, WeightType::Q8_0>;
  return products;
}();

// Shared by every tier from avx2 up: quantize_block needs nothing beyond AVX2.
void quantize_activations(const float* x, size_t cols, size_t n, QuantizedActivations& out) {
  quantize_all(x, cols, n, out);
}

// kernels/scalar_quant.cpp's score_block, eight weights per vector: the same operations in
// the same order per lane, so bitwise the same q and loss.
float score_block(const float* w, const float* a, float d, float id, int lo, int hi, int8_t* q) {
  const __m256 vid = _mm256_set1_ps(id), vd = _mm256_set1_ps(d);
  const __m256 vlo = _mm256_set1_ps(static_cast<float>(lo)), vhi = _mm256_set1_ps(static_cast<float>(hi));
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f), mhalf = _mm256_set1_ps(-0.5f);
  const __m256 big = _mm256_set1_ps(1e9f), mbig = _mm256_set1_ps(-1e9f);
  __m256 s = _mm256_setzero_ps();
  __m256i qi[4];
  for (size_t b = 0; b < 4; ++b) {
    const __m256 wv = _mm256_loadu_ps(w + 8 * b);
    __m256 x = _mm256_mul_ps(wv, vid);
    x = _mm256_max_ps(x, mbig);  // a NaN x gives the second operand, -1e9, as the scalar code
    x = _mm256_min_ps(x, big);
    const __m256 tr = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(x));
    const __m256 frac = _mm256_sub_ps(x, tr);
    __m256 t = _mm256_add_ps(tr, _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ), one));
    t = _mm256_sub_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, mhalf, _CMP_LE_OQ), one));
    t = _mm256_min_ps(_mm256_max_ps(t, vlo), vhi);
    qi[b] = _mm256_cvttps_epi32(t);
    const __m256 e = _mm256_sub_ps(wv, _mm256_mul_ps(vd, t));
    s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(a + 8 * b), e), e));
  }
  // 32 int32 -> 32 int8 in order: the packs work within 128-bit lanes, the permute undoes that.
  const __m256i p16a = _mm256_packs_epi32(qi[0], qi[1]), p16b = _mm256_packs_epi32(qi[2], qi[3]);
  const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  alignas(32) float l[8];
  _mm256_store_ps(l, s);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// kernels/scalar_quant.cpp's refit_block, four doubles per vector: lanes 0-3 and 4-7 of the
// eight partial sums in two vectors each, the same operations in the same order per lane.
void refit_block(const float* w, const float* a, const int8_t* q, double* sums) {
  __m256d n[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()}, d[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
  for (size_t i = 0; i < 32; i += 8) {
    for (size_t h = 0; h < 2; ++h) {
      const size_t at = i + 4 * h;
      const __m256d av = _mm256_cvtps_pd(_mm_loadu_ps(a + at));
      const __m256d wv = _mm256_cvtps_pd(_mm_loadu_ps(w + at));
      int32_t q4;
      std::memcpy(&q4, q + at, sizeof q4);
      const __m256d qv = _mm256_cvtepi32_pd(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(q4)));
      n[h] = _mm256_add_pd(n[h], _mm256_mul_pd(_mm256_mul_pd(av, wv), qv));
      d[h] = _mm256_add_pd(d[h], _mm256_mul_pd(_mm256_mul_pd(av, qv), qv));
    }
  }
  alignas(32) double ln[8], ld[8];
  _mm256_store_pd(ln, n[0]);
  _mm256_store_pd(ln + 4, n[1]);
  _mm256_store_pd(ld, d[0]);
  _mm256_store_pd(ld + 4, d[1]);
  sums[0] = ((ln[0] + ln[1]) + (ln[2] + ln[3])) + ((ln[4] + ln[5]) + (ln[6] + ln[7]));
  sums[1] = ((ld[0] + ld[1]) + (ld[2] + ld[3])) + ((ld[4] + ld[5]) + (ld[6] + ld[7]));
}

}  // namespace nanoinfer::kernels::avx2
