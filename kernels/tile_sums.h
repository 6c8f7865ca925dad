// The epilogue of the AVX-512 prefill register tiles (kernels_avx512.cpp's f32 tile and
// kernels_avx512_bf16.cpp's bf16 tile): an R x T tile's accumulators summed in registers and
// stored one masked vector per token. Each tier supplies its own `Tree::reduce16`, the
// transposing tree whose additions per accumulator are exactly its reference's lane order
// (xsimd's hadd for f32, matmul_bf16_dot's for bf16), so outputs stay bitwise its reference's.
// Include only from AVX-512 translation units: everything here has internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>

namespace nanoinfer::kernels {
namespace {
namespace tile_sums {

inline __mmask16 mask16(size_t n) {
  return n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}

// A tile's N accumulators at the start of its columns: zeros on the first pass over a row,
// else the previous pass's, waiting in `carry`; and stored there for the next pass.
template <size_t N>
[[gnu::always_inline]] inline void start_acc(__m512* acc, const __m512* carry, bool first_pass) {
  if (first_pass) {
#pragma GCC unroll 32
    for (size_t e = 0; e < N; ++e) acc[e] = _mm512_setzero_ps();
  } else {
#pragma GCC unroll 32
    for (size_t e = 0; e < N; ++e) acc[e] = _mm512_load_ps(carry + e);
  }
}
template <size_t N>
[[gnu::always_inline]] inline void carry_acc(const __m512* acc, __m512* carry) {
#pragma GCC unroll 32
  for (size_t e = 0; e < N; ++e) _mm512_store_ps(carry + e, acc[e]);
}

// The first two levels of both tiers' transposing trees (they differ only after): for each of
// in[0..15] with lanes a[0..15], u[i] = a[i] + a[i+8] (i < 8), then v[i] = u[i] + u[i+4] (i < 4).
// 128-bit lane L of out[k] holds in[4k + L]'s four v[i].
[[gnu::always_inline]] inline void tree_quarters(const __m512* in, __m512* out) {
  __m512 v1[8];
  // [a | b] halves: a's u[i] in the low 256 bits, b's in the high.
#pragma GCC unroll 8
  for (int m = 0; m < 8; ++m) {
    const __m512 a = in[2 * m], b = in[2 * m + 1];
    v1[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512 c = v1[2 * k], d = v1[2 * k + 1];
    out[k] = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 1, 3, 1)));
  }
}

// Lane e < N holds the sum of accumulator acc[e], N <= 16; the unused slots are zeros that
// meet only each other. Tree::reduce16(in) puts the lane sum of in[(n % 4) * 4 + n / 4] in
// lane n, so the accumulators go in that order.
template <class Tree, size_t N>
[[gnu::always_inline]] inline __m512 reduce_acc(const __m512* acc) {
  static_assert(N >= 1 && N <= 16);
  __m512 in[16];
#pragma GCC unroll 16
  for (size_t k = 0; k < 16; ++k) {
    const size_t e = (k % 4) * 4 + k / 4;
    in[k] = e < N ? acc[e] : _mm512_setzero_ps();
  }
  return Tree::reduce16(in);
}

// The sums of an R x T tile's accumulators (e = t * R + r: each token's rows side by side)
// into y[t0 + t][r0 + r], plus bias[r0 + r] (bias + sum): per group of 16 accumulators one
// reduction, and per token a masked store of its rows (no scalar stores, no sums through memory).
template <class Tree, size_t R, size_t T>
[[gnu::always_inline]] inline void store_sums(const __m512* acc, const float* bias, float* y, size_t rows, size_t r0,
                                              size_t t0) {
  constexpr size_t n = R * T;
  const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
#pragma GCC unroll 4
  for (size_t g = 0; g < n; g += 16) {
    __m512 s;
    if (n - g >= 16) {
      s = reduce_acc<Tree, 16>(acc + g);
    } else {
      s = reduce_acc<Tree, (n % 16 == 0 ? 16 : n % 16)>(acc + g);
    }
    // Token t's rows [first, first + len) are lanes [lo - g, ...) of s.
#pragma GCC unroll 16
    for (size_t t = 0; t < T; ++t) {
      if (t * R + R <= g || t * R >= g + 16) continue;
      const size_t lo = t * R > g ? t * R : g;
      const size_t hi = t * R + R < g + 16 ? t * R + R : g + 16;
      const size_t first = lo - t * R;
      const int shift = static_cast<int>(lo - g);
      __m512 v = shift == 0 ? s : _mm512_permutexvar_ps(_mm512_add_epi32(iota, _mm512_set1_epi32(shift)), s);
      const __mmask16 m = mask16(hi - lo);
      if (bias != nullptr) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, bias + r0 + first), v);
      _mm512_mask_storeu_ps(y + (t0 + t) * rows + r0 + first, m, v);
    }
  }
}

}  // namespace tile_sums
}  // namespace
}  // namespace nanoinfer::kernels
