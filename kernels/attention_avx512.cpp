// The attention kernel (kernels/attention_tile.h) and its exp on sixteen lanes: AVX-512F
// (this file gets the avx512 tier's flags from CMake by its name). Key blocks are widened and
// transposed with the eight-lane code of the AVX2 tier (the [head_dim][kKeyBlock] layout does
// not depend on the width); scores, the online softmax and the weighted sums of values run on
// zmm registers, eight query rows x two vectors per register tile (16 of the 32 registers
// accumulate).
// GCC 12's unmasked AVX-512 intrinsics start from _mm512_undefined_*(), which it flags with a
// false -Wmaybe-uninitialized once inlined (GCC bug 105593, fixed in GCC 13); clang would
// reject the pragma under -Werror.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include "kernels/attention_avx2_ops.h"
#include "kernels/attention_tile.h"
#include "kernels/kernels.h"

namespace nanoinfer::kernels {
namespace {

struct Avx512AttnOps {
  using vec = __m512;
  using mask = __mmask16;
  static constexpr size_t width = 16;
  // 8 query rows x 2 vectors: a decode step's 7 rows of one KV head (Qwen2.5's group) are one
  // tile, so each key block's kt row (and each widened V row) is loaded once for all of them,
  // beside 7 broadcasts, for 14 FMAs; 4 x 4 loaded it twice (a 4-row and a 3-row tile).
  static constexpr size_t row_tile = 8;
  static constexpr size_t vec_tile = 2;
  static vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static vec set1(float v) { return _mm512_set1_ps(v); }
  static vec zero() { return _mm512_setzero_ps(); }
  static float first(vec v) { return _mm512_cvtss_f32(v); }
  static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static vec fnma(vec a, vec b, vec c) { return _mm512_fnmadd_ps(a, b, c); }
  static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  static vec div(vec a, vec b) { return _mm512_div_ps(a, b); }
  static vec max(vec a, vec b) { return _mm512_max_ps(a, b); }
  static vec min(vec a, vec b) { return _mm512_min_ps(a, b); }
  static mask lt(vec a, vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static mask isnan(vec x) { return _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); }
  static vec select(mask m, vec t, vec f) { return _mm512_mask_blend_ps(m, f, t); }
  static vec pow2(vec fn) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(fn), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  static __m256 low(vec v) { return _mm512_castps512_ps256(v); }
  static __m256 high(vec v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }
  static float hmax(vec v) { return Avx2AttnOps::hmax(_mm256_max_ps(low(v), high(v))); }
  // Fixed order: the two 256-bit halves, then the AVX2 tier's order.
  static float hsum(vec v) { return Avx2AttnOps::hsum(_mm256_add_ps(low(v), high(v))); }
  static vec widen16(const float* p) { return _mm512_loadu_ps(p); }
  static vec widen16(const Bf16* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static vec widen16(const F16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  template <class KvT>
  static vec load_kv(const KvT* p) {
    return widen16(p);
  }
  template <class KvT>
  static void to_f32(const KvT* src, float* dst, size_t n) {  // n is a multiple of 16
    for (size_t i = 0; i < n; i += 16) _mm512_storeu_ps(dst + i, widen16(src + i));
  }
  template <class KvT>
  static void transpose_block(const KvT* k, size_t stride, size_t n_rows, size_t hd, float* kt) {
    Avx2AttnOps::transpose_block(k, stride, n_rows, hd, kt);
  }
};

// A head_dim that is not a whole number of 16 lanes runs the eight-lane body (bitwise the
// AVX2 tier's), or the one-lane body if it is not a whole number of 8 either.
template <class KvT>
uint64_t attention_avx512(const AttentionTile& a) {
  if (a.head_dim % Avx512AttnOps::width == 0) return attention_tile<Avx512AttnOps, KvT>(a);
  if (a.head_dim % Avx2AttnOps::width == 0) return attention_tile<Avx2AttnOps, KvT>(a);
  return attention_tile<ScalarOps, KvT>(a);
}

}  // namespace

namespace avx512 {

constinit const ByKvType attention{
    .f32 = attention_avx512<float>, .bf16 = attention_avx512<Bf16>, .f16 = attention_avx512<F16>};
constinit const ExpRowsFn exp_f32 = exp_rows<Avx512AttnOps>;
constinit const SiluMulFn silu_mul_f32 = silu_mul_rows<Avx512AttnOps>;

}  // namespace avx512
}  // namespace nanoinfer::kernels
