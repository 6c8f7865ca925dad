// AVX2 + FMA kernels (this file gets -mavx2 -mfma from CMake by its name). xsimd 8.1's
// fma3<avx2> batch supplies loads, a fused multiply-add and the lane reduction; intrinsics
// fill the gaps: the masked tail load and widening eight bf16 lanes into a float batch.
#include <immintrin.h>

#include "kernels/attention_tile.h"
#include "kernels/kernels.h"
#include "kernels/simd_kernels.h"

namespace nanoinfer::kernels {
namespace {

struct Avx2Ops {
  using arch = xsimd::fma3<xsimd::avx2>;
  using batch = xsimd::batch<float, arch>;
  static constexpr size_t width = 8;
  // 3 x 4 accumulators + 4 activation rows = 16 ymm registers; the weight row is a memory
  // operand of the FMAs (or spills one register briefly).
  static constexpr size_t row_tile = 3;
  static constexpr size_t token_tile = 4;
  static constexpr size_t decode_rows = 8;

  static batch load(const float* p) { return batch::load_unaligned(p); }
  // bf16 is the high half of an f32: zero-extend each 16-bit lane to 32 bits, shift up.
  static batch load(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return batch(_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
  }
  static __m256i tail_mask(size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static batch load_tail(const float* p, size_t n) { return batch(_mm256_maskload_ps(p, tail_mask(n))); }
  // AVX2 has no 16-bit masked load; stage the few tail elements through a zeroed buffer.
  static batch load_tail(const uint16_t* p, size_t n) {
    alignas(16) uint16_t buf[width] = {};
    for (size_t i = 0; i < n; ++i) buf[i] = p[i];
    return load(buf);
  }
  static batch fma(batch a, batch b, batch c) { return xsimd::fma(a, b, c); }
  static float reduce(batch v) { return xsimd::hadd(v); }
};

// Eight lanes for the attention kernel and its exp (kernels/attention_tile.h), in intrinsics.
struct Avx2AttnOps {
  using vec = __m256;
  static constexpr size_t width = 8;
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

// A head_dim that is not a whole number of vectors runs the one-lane body (compiled here, with
// this file's flags but no contraction: the scalar reference's arithmetic).
template <class KvT>
uint64_t attention_avx2(const AttentionTile& a) {
  if (a.head_dim % Avx2AttnOps::width != 0) return attention_tile<ScalarOps, KvT>(a);
  return attention_tile<Avx2AttnOps, KvT>(a);
}

}  // namespace

namespace avx2 {

uint64_t attention_f32(const AttentionTile& a) { return attention_avx2<float>(a); }
uint64_t attention_bf16(const AttentionTile& a) { return attention_avx2<Bf16>(a); }
uint64_t attention_f16(const AttentionTile& a) { return attention_avx2<F16>(a); }
void exp_f32(const float* x, float* y, size_t n) { exp_rows<Avx2AttnOps>(x, y, n); }


void matmul_f32(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                size_t n_tokens, size_t row_begin, size_t row_end) {
  matmul<Avx2Ops>(reinterpret_cast<const float*>(w), bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

void matmul_bf16(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                 size_t n_tokens, size_t row_begin, size_t row_end) {
  matmul<Avx2Ops>(reinterpret_cast<const uint16_t*>(w), bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

void dot_rows_f32(const float* q, const float* rows, size_t stride, size_t count, size_t n, float scale, float* out) {
  dot_rows<Avx2Ops>(q, rows, stride, count, n, scale, out);
}

void axpy_rows_f32(const float* alphas, float mult, const float* rows, size_t stride, size_t count, size_t n,
                   float* y) {
  axpy_rows<Avx2Ops>(alphas, mult, rows, stride, count, n, y);
}

}  // namespace avx2

}  // namespace nanoinfer::kernels
