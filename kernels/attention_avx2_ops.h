// The eight-lane Ops of the attention kernel (kernels/attention_tile.h) in AVX2 intrinsics,
// shared by the AVX2 tier and the AVX-512 one (whose kernel widens and transposes key blocks
// with them). Include only from translation units compiled with at least -mavx2 -mfma -mf16c
// (kernels/*_avx2.cpp, kernels/*_avx512*.cpp): everything here has internal linkage.
#pragma once

#include <immintrin.h>

#include "kernels/attention_tile.h"

namespace nanoinfer::kernels {
namespace {

// Eight lanes for the attention kernel and its exp (kernels/attention_tile.h), in intrinsics.
struct Avx2AttnOps {
  using vec = __m256;
  static constexpr size_t width = 8;
  static constexpr size_t row_tile = 2;  // query rows per register tile: 2 x 4 accumulators
  static constexpr size_t vec_tile = 4;
  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static vec set1(float v) { return _mm256_set1_ps(v); }
  static vec zero() { return _mm256_setzero_ps(); }
  static float first(vec v) { return _mm256_cvtss_f32(v); }
  static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static vec fnma(vec a, vec b, vec c) { return _mm256_fnmadd_ps(a, b, c); }
  static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
  static vec div(vec a, vec b) { return _mm256_div_ps(a, b); }
  static vec max(vec a, vec b) { return _mm256_max_ps(a, b); }
  static vec min(vec a, vec b) { return _mm256_min_ps(a, b); }
  static vec lt(vec a, vec b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static vec isnan(vec x) { return _mm256_cmp_ps(x, x, _CMP_UNORD_Q); }
  static vec select(vec m, vec t, vec f) { return _mm256_blendv_ps(f, t, m); }
  static vec pow2(vec fn) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(fn), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static float hmax(vec v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
  }
  // Fixed order: the two halves, then pairs, then the last two.
  static float hsum(vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  static vec widen8(const float* p) { return _mm256_loadu_ps(p); }
  static vec widen8(const Bf16* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static vec widen8(const F16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  template <class KvT>
  static vec load_kv(const KvT* p) {
    return widen8(p);
  }
  template <class KvT>
  static void to_f32(const KvT* src, float* dst, size_t n) {  // n is a multiple of 8
    for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(dst + i, widen8(src + i));
  }
  // kt[d][j] = k[j][d]: 8 x 8 tiles, each 8 row loads, an in-register transpose, 8 stores.
  template <class KvT>
  static void transpose_block(const KvT* k, size_t stride, size_t n_rows, size_t hd, float* kt) {
    size_t j = 0;
    for (; j + 8 <= n_rows; j += 8) {
      for (size_t d = 0; d < hd; d += 8) {
        __m256 r0 = widen8(k + (j + 0) * stride + d), r1 = widen8(k + (j + 1) * stride + d);
        __m256 r2 = widen8(k + (j + 2) * stride + d), r3 = widen8(k + (j + 3) * stride + d);
        __m256 r4 = widen8(k + (j + 4) * stride + d), r5 = widen8(k + (j + 5) * stride + d);
        __m256 r6 = widen8(k + (j + 6) * stride + d), r7 = widen8(k + (j + 7) * stride + d);
        const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
        const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
        const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
        const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
        const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
        const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
        const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
        const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
        const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
        const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
        const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
        const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
        float* o = kt + d * kKeyBlock + j;
        _mm256_storeu_ps(o + 0 * kKeyBlock, _mm256_permute2f128_ps(u0, u4, 0x20));
        _mm256_storeu_ps(o + 1 * kKeyBlock, _mm256_permute2f128_ps(u1, u5, 0x20));
        _mm256_storeu_ps(o + 2 * kKeyBlock, _mm256_permute2f128_ps(u2, u6, 0x20));
        _mm256_storeu_ps(o + 3 * kKeyBlock, _mm256_permute2f128_ps(u3, u7, 0x20));
        _mm256_storeu_ps(o + 4 * kKeyBlock, _mm256_permute2f128_ps(u0, u4, 0x31));
        _mm256_storeu_ps(o + 5 * kKeyBlock, _mm256_permute2f128_ps(u1, u5, 0x31));
        _mm256_storeu_ps(o + 6 * kKeyBlock, _mm256_permute2f128_ps(u2, u6, 0x31));
        _mm256_storeu_ps(o + 7 * kKeyBlock, _mm256_permute2f128_ps(u3, u7, 0x31));
      }
    }
    for (; j < n_rows; ++j)
      for (size_t d = 0; d < hd; ++d) kt[d * kKeyBlock + j] = widen(k[j * stride + d]);
    for (size_t d = 0; d < hd; ++d)
      for (size_t c = n_rows; c < kKeyBlock; ++c) kt[d * kKeyBlock + c] = 0.0f;
  }
};

}  // namespace
}  // namespace nanoinfer::kernels
