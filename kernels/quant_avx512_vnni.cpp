// Q8_0 / Q4_0 products for the avx512-vnni tier (avx512 + AVX512-VNNI): vpdpbusd on zmm.
//
// Prefill: a group is one zmm of 16 slots, 4 rows by 4 tokens. One zmm of int8 products
// covers two slots (a 256-bit half each: two rows' blocks side by side against one token's
// block broadcast to both halves), so 8 vectors of partial sums feed the reduction tree,
// pairing slots j and j + 4 (j = 0-3, 8-11) in the halves of one vector; the tree then leaves
// slot j in lane j.
//
// Decode: 8 rows, two blocks per step (8 row pointers fit the general registers; 16 did not).
// Each 128-bit quarter of a product vector is one (row, block) pair, so the tree leaves
// [rows 0-7 of block b | rows 0-7 of block b + 1]; the float steps then run on the 16 lanes
// and the two halves are added to the 8 accumulators in block order, as the reference does.
// GCC 12's unmasked AVX-512 intrinsics start from _mm512_undefined_*(), which it then flags
// with a false -Wmaybe-uninitialized once inlined (GCC bug 105593, fixed in GCC 13). Clang has
// no such warning group and would reject the pragma under -Werror (the fuzz preset).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/packed_driver.h"
#include "kernels/quant_k_simd.h"
#include "kernels/quant_simd.h"

namespace nanoinfer::kernels {
namespace {

struct ZmmVnni {
  static constexpr size_t lanes = 16, decode_rows = 8;

  // Slots of vector k: pa(k) in its low half, pa(k) + 4 in its high half.
  static constexpr size_t pa(size_t k) { return k < 4 ? k : k + 4; }

  // Two rows' blocks [a | b] as unsigned bytes (Q8_0: q + 128; Q4_0: the nibbles, element
  // order: low nibbles are elements 0-15, high nibbles 16-31).
  template <WeightType kType>
  static __m512i pair(const uint8_t* a, const uint8_t* b) {
    if constexpr (kType == WeightType::Q8_0) {
      const __m512i q =
          _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 2))),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)), 1);
      return _mm512_xor_si512(q, _mm512_set1_epi8(-128));
    } else {
      const __m256i q =
          _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2))),
                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2)), 1);
      // [qa | qb | qa >> 4 | qb >> 4] -> [qa | qa >> 4 | qb | qb >> 4], then the low nibbles.
      const __m512i n = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
      return _mm512_and_si512(_mm512_shuffle_i32x4(n, n, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(0x0f));
    }
  }

  // v[k]: partial sums of slots pa(k) (low half) and pa(k) + 4 (high half) -> lane j = slot j.
  static __m512i reduce(const __m512i* v) {
    __m512i u[4];
#pragma GCC unroll 16
    for (int i = 0; i < 4; ++i)
      u[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                              _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    // 128-bit lane L of w0 holds, for vectors 0-3, the sum of their partials in lane L.
    const __m512i w0 = _mm512_add_epi32(_mm512_unpacklo_epi64(u[0], u[1]), _mm512_unpackhi_epi64(u[0], u[1]));
    const __m512i w1 = _mm512_add_epi32(_mm512_unpacklo_epi64(u[2], u[3]), _mm512_unpackhi_epi64(u[2], u[3]));
    // Lanes 0+1 are the low halves (slots 0-3, 8-11), lanes 2+3 the high ones (4-7, 12-15).
    return _mm512_add_epi32(_mm512_shuffle_i32x4(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)));
  }

  template <size_t TG>
  static __m512 per_token(const float* p) {
    if constexpr (TG == 1)
      return _mm512_set1_ps(*p);
    else
      return _mm512_broadcast_f32x4(_mm_loadu_ps(p));
  }
  template <size_t TG>
  static __m512i per_token(const int32_t* p) {
    if constexpr (TG == 1)
      return _mm512_set1_epi32(*p);
    else
      return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  template <size_t TG>
  static __m512 per_row(const uint16_t* h) {
    const auto H = [h](size_t j) { return static_cast<short>(h[j / TG]); };
    return _mm512_cvtph_ps(_mm256_setr_epi16(H(0), H(1), H(2), H(3), H(4), H(5), H(6), H(7), H(8), H(9), H(10), H(11),
                                             H(12), H(13), H(14), H(15)));
  }

  template <WeightType kType, size_t TG>
  static void group(const std::byte* const* wr, size_t nb, const int8_t* const* xq, const float* d, const int32_t* s,
                    size_t stride, float* out) {
    static_assert(TG == 4, "slots j and j + 4 must share their token; decode has its own layout");
    constexpr size_t R = lanes / TG;
    constexpr int offset_shift = kType == WeightType::Q4_0 ? 3 : 7;  // 8 or 128
    __m512 acc = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; ++b) {
      __m512i x[TG];
#pragma GCC unroll 16
      for (size_t t = 0; t < TG; ++t)
        x[t] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + b * kQuantBlock)));
      const uint8_t* blk[R];
      uint16_t h[R];
#pragma GCC unroll 16
      for (size_t r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const uint8_t*>(wr[r]) + b * kBlockBytes<kType>;
        std::memcpy(&h[r], blk[r], sizeof(uint16_t));
      }
      __m512i v[8];
      __m512i u = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (size_t k = 0; k < 8; ++k) {
        // Consecutive k share their pair of rows when TG > 1.
        if (k % TG == 0) u = pair<kType>(blk[pa(k) / TG], blk[(pa(k) + 4) / TG]);
        v[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x[pa(k) % TG]);
      }
      __m512i isum = reduce(v);
      isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(per_token<TG>(s + b * stride), offset_shift));
      const __m512 scale = _mm512_mul_ps(per_row<TG>(h), per_token<TG>(d + b * stride));
      acc = _mm512_add_ps(acc, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(isum)));
    }
    _mm512_storeu_ps(out, acc);
  }

  // ---- decode ----

  // Quarters [row a block b | row c block b | row a block b1 | row c block b1] of elements
  // 0-15 (lo) and 16-31 (hi), unsigned. pa, pc: the two rows' block b; b1 is `step` blocks on
  // (0 repeats block b).
  template <WeightType kType>
  static void quarters(const uint8_t* pa, const uint8_t* pc, size_t step, __m512i& lo, __m512i& hi) {
    const size_t s1 = step * kBlockBytes<kType>;
    if constexpr (kType == WeightType::Q8_0) {
      const auto two_rows = [](const uint8_t* a, const uint8_t* c) {  // [a 0-15, a 16-31, c 0-15, c 16-31]
        return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
                                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)), 1);
      };
      const __m512i q0 = two_rows(pa + 2, pc + 2), q1 = two_rows(pa + s1 + 2, pc + s1 + 2);
      lo = _mm512_xor_si512(_mm512_shuffle_i32x4(q0, q1, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_set1_epi8(-128));
      hi = _mm512_xor_si512(_mm512_shuffle_i32x4(q0, q1, _MM_SHUFFLE(3, 1, 3, 1)), _mm512_set1_epi8(-128));
    } else {
      const auto two_rows = [](const uint8_t* a, const uint8_t* c) {
        return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(c)), 1);
      };
      const __m512i n =
          _mm512_inserti64x4(_mm512_castsi256_si512(two_rows(pa + 2, pc + 2)), two_rows(pa + s1 + 2, pc + s1 + 2), 1);
      lo = _mm512_and_si512(n, _mm512_set1_epi8(0x0f));
      hi = _mm512_and_si512(_mm512_srli_epi16(n, 4), _mm512_set1_epi8(0x0f));
    }
  }

  // One decode step over blocks b and b + 1 (kTwo) or block b alone, into acc (8 rows).
  template <WeightType kType, bool kTwo>
  static void decode_step(const uint8_t* const* p, size_t b, const int8_t* xq, const float* d, const int32_t* s,
                          __m256& acc) {
    constexpr size_t BB = kBlockBytes<kType>;
    constexpr int offset_shift = kType == WeightType::Q4_0 ? 3 : 7;
    const size_t b1 = kTwo ? b + 1 : b;
    // [x_b 0-15, x_b 16-31, x_b1 0-15, x_b1 16-31] -> each quarter's token elements.
    const __m512i xx =
        kTwo ? _mm512_loadu_si512(xq + b * kQuantBlock)
             : _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * kQuantBlock)));
    const __m512i xlo = _mm512_shuffle_i32x4(xx, xx, _MM_SHUFFLE(2, 2, 0, 0));
    const __m512i xhi = _mm512_shuffle_i32x4(xx, xx, _MM_SHUFFLE(3, 3, 1, 1));
    __m512i v[4];
#pragma GCC unroll 16
    for (size_t k = 0; k < 4; ++k) {
      __m512i lo, hi;
      quarters<kType>(p[k] + b * BB, p[k + 4] + b * BB, b1 - b, lo, hi);
      v[k] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xlo), hi, xhi);
    }
    // Quarter L of the sum: vectors 0-3 (rows k, k + 4) in that quarter -> lanes j = row j of
    // block b, then 8 + j = row j of block b1.
    const __m512i u0 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
    const __m512i u1 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
    __m512i isum = _mm512_add_epi32(_mm512_unpacklo_epi64(u0, u1), _mm512_unpackhi_epi64(u0, u1));
    const __m512i sx = _mm512_inserti64x4(_mm512_set1_epi32(s[b]), _mm256_set1_epi32(s[b1]), 1);
    isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(sx, offset_shift));
    const auto H = [&](size_t j) {
      uint16_t h;
      std::memcpy(&h, p[j % 8] + (j < 8 ? b : b1) * BB, sizeof h);
      return static_cast<short>(h);
    };
    const __m512 dw = _mm512_cvtph_ps(_mm256_setr_epi16(H(0), H(1), H(2), H(3), H(4), H(5), H(6), H(7), H(8), H(9),
                                                        H(10), H(11), H(12), H(13), H(14), H(15)));
    const __m512 dx = _mm512_insertf32x8(_mm512_set1_ps(d[b]), _mm256_set1_ps(d[b1]), 1);
    const __m512 t = _mm512_mul_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(isum));
    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(t));
    if constexpr (kTwo) acc = _mm256_add_ps(acc, _mm512_extractf32x8_ps(t, 1));
  }

  template <WeightType kType>
  static void decode(const std::byte* const* wr, size_t nb, const int8_t* xq, const float* d, const int32_t* s,
                     float* out) {
    const uint8_t* p[8];
#pragma GCC unroll 16
    for (size_t r = 0; r < 8; ++r) p[r] = reinterpret_cast<const uint8_t*>(wr[r]);
    __m256 acc = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 2 <= nb; b += 2) decode_step<kType, true>(p, b, xq, d, s, acc);
    if (b < nb) decode_step<kType, false>(p, b, xq, d, s, acc);
    _mm256_storeu_ps(out, acc);
  }
};

// ---- the packed layout (kernels/quant_blocks.h) ----------------------------------------------
//
// Lane j is row j of a 16-row group; per block, each word k of weights (one load: 4 weights of
// all 16 rows) meets the token's activation word k broadcast to every lane, so vpdpbusd leaves
// the 16 rows' partial sums in their own lanes. Two chains of partial sums per token keep two
// vpdpbusd in flight; their integer sum is exact in any order. Then the reference's float steps.

// Acc[t] += the 16 rows' sums for token t of every block. g: the group's first byte; xq, d, s:
// as in ZmmVnni::group. kAhead: ask for the weights kPrefetchAhead bytes on (a small batch:
// its products run long enough per byte that the hardware prefetcher alone left the loads
// waiting on memory).
template <WeightType kType, size_t TG, bool kAhead = false>
void packed_group(const uint8_t* g, size_t nb, const int8_t* const* xq, const float* d, const int32_t* s, size_t stride,
                  __m512* acc_out) {
  constexpr size_t group_block = kPackRows * kBlockBytes<kType>;
  // The sums in local vectors, stored once (as in kernels/quant_k_simd.h): `bench generate -m
  // synth-0.5b --dtype int8 -p 64 -n 1 -r 3 -t 2` on Zen 5, three alternated rounds, 892-933 ->
  // 1019-1063 tokens/s (int4: 915-963 -> 961-1053).
  __m512 acc[TG];
#pragma GCC unroll 16
  for (size_t t = 0; t < TG; ++t) acc[t] = acc_out[t];
  constexpr int offset_shift = kType == WeightType::Q4_0 ? 3 : 7;  // 8 or 128
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk = g + b * group_block;
    if constexpr (kAhead)
      for (size_t line = 0; line < group_block; line += 64) prefetch(blk + line + kPrefetchAhead);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const uint8_t* words = blk + 2 * kPackRows;
    __m512i w[8];  // w[k]: weights of elements 4k .. 4k + 3 of every row, unsigned
    if constexpr (kType == WeightType::Q8_0) {
#pragma GCC unroll 16
      for (size_t k = 0; k < 8; ++k) w[k] = _mm512_loadu_si512(words + 64 * k);
    } else {
      const __m512i low = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 16
      for (size_t k = 0; k < 4; ++k) {
        const __m512i v = _mm512_loadu_si512(words + 64 * k);
        w[k] = _mm512_and_si512(v, low);
        w[k + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      }
    }
#pragma GCC unroll 16
    for (size_t t = 0; t < TG; ++t) {
      const int8_t* x = xq[t] + b * kQuantBlock;
      const auto word = [x](size_t k) {
        int32_t v;
        std::memcpy(&v, x + 4 * k, sizeof v);
        return _mm512_set1_epi32(v);
      };
      __m512i i0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], word(0));
      __m512i i1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], word(1));
#pragma GCC unroll 16
      for (size_t k = 2; k < 8; k += 2) {
        i0 = _mm512_dpbusd_epi32(i0, w[k], word(k));
        i1 = _mm512_dpbusd_epi32(i1, w[k + 1], word(k + 1));
      }
      const __m512i isum =
          _mm512_sub_epi32(_mm512_add_epi32(i0, i1), _mm512_set1_epi32(s[b * stride + t] << offset_shift));
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(d[b * stride + t]));
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(scale, _mm512_cvtepi32_ps(isum)));
    }
  }
#pragma GCC unroll 16
  for (size_t t = 0; t < TG; ++t) acc_out[t] = acc[t];
}

// The packed product (MatmulPackedFn): whole groups here (kernels/packed_driver.h), rows of a
// partial last group by the ordinary kernel.
template <WeightType kType>
void matmul_packed_scaled(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& a, float* y,
                          size_t stride, size_t row_begin, size_t row_end) {
  const auto group = [&](auto tg, const uint8_t* g, size_t, size_t t0, __m512* acc) {
    constexpr size_t TG = decltype(tg)::value;
    const int8_t* xq[TG];
#pragma GCC unroll 16
    for (size_t t = 0; t < TG; ++t) xq[t] = a.q.data() + (t0 + t) * a.cols;
    if (a.n > 1 && a.n <= kPackedSmallBatch)
      packed_group<kType, TG, true>(g, a.nb, xq, a.d.data() + t0, a.s.data() + t0, a.tokens, acc);
    else
      packed_group<kType, TG>(g, a.nb, xq, a.d.data() + t0, a.s.data() + t0, a.tokens, acc);
  };
  const auto rest = [&](size_t begin, size_t end) {
    matmul_quantized<ZmmVnni, kType>(w, bias, a, y, stride, begin, end);
  };
  packed_product<PackedZmm>(w, a.nb * kBlockBytes<kType>, w_rows, bias, a, y, stride, row_begin, row_end, group, rest);
}

}  // namespace

// Q8_0 / Q4_0 on this file's family, and every other quantized type's packed product by
// kernels/quant_k_simd.h on 16 lanes (a whole 16-row group per vector).
namespace avx512_vnni {

constinit const ByType<MatmulQuantizedFn> matmul_quantized = quantized_products<ZmmVnni>();
// Set member by member rather than through ByType::with: with's test of a function's address
// against nullptr is not a constant expression under the sanitizers, and this list must be
// constant-initialized (no code of this file may run before the CPU is checked).
constinit const ByType<MatmulPackedFn> matmul_packed = [] {
  ByType<MatmulPackedFn> products = packed_k_products<PackedZmm>();
  products.q8_0 = matmul_packed_scaled<WeightType::Q8_0>;
  products.q4_0 = matmul_packed_scaled<WeightType::Q4_0>;
  return products;
}();

}  // namespace avx512_vnni
}  // namespace nanoinfer::kernels
