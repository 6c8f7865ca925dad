// Quantized matrix products (Q8_0, Q4_0) for the SIMD tiers, written once against a family
// policy: Ymm<kVnni> below (AVX2, or AVX-VNNI when kVnni) and ZmmVnni in
// kernels/quant_avx512_vnni.cpp. Include only from *_avx2*.cpp / *_avx512*.cpp files:
// everything here has internal linkage (see simd_kernels.h for why), and it uses AVX2.
//
// The arithmetic of one output is fixed by the scalar reference (kernels/scalar_quant.cpp).
// Here a (row, token) pair is a "slot", one lane of a float vector; a group is one vector of
// slots, slot j = (row j / TG, token j % TG) with TG = 1 for decode, 4 for prefill and, on the
// 256-bit family, 2 for a small batch (the avx512-vnni decode instead pairs 8 rows with two
// blocks; see quant_avx512_vnni.cpp). Per block a family computes the exact integer sums of all
// slots of a group (int8 dot products into int32 partial sums, then a transposing reduction tree
// into one int32 vector: integer addition in any order gives the same sum), then performs the
// reference's float steps on the whole vector. A slot's arithmetic never depends on the group
// it is in, so any tiling, row range or batch gives the same bits.
//
// The unsigned side of vpdpbusd / vpmaddubsw gets the weights, offset into [0, 255]:
//   Q4_0: the nibble n = q + 8 itself;   Q8_0 (VNNI): q ^ 0x80 = q + 128
// and the group subtracts offset * sum(x) per block (QuantizedActivations::s in kernels.h).
// AVX2's Q8_0 instead moves the weights' signs onto x (vpsignb), offset 0: with q + 128,
// vpmaddubsw's pairwise int16 sums could saturate (2 * 255 * 127 > 32767); with |q| <= 128
// they cannot (2 * 128 * 127 = 32512).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"

namespace nanoinfer::kernels {
namespace {

// The block types these families implement; any other type fails to compile (the K and
// Q4_1 / Q5_0 / Q5_1 types have their own kernels, kernels/quant_k_simd.h): kBlockBytes is a
// constexpr variable, so the throw below cannot be evaluated. (constexpr, not consteval: clang
// 14-16 refuse a consteval call in a variable template's initializer.)
constexpr size_t simd_block_bytes(WeightType type) {
  if (type == WeightType::Q8_0) return sizeof(BlockQ8_0);
  if (type == WeightType::Q4_0) return sizeof(BlockQ4_0);
  throw "the quantized SIMD families have no kernel for this type";
}
template <WeightType kType>
constexpr size_t kBlockBytes = simd_block_bytes(kType);

// quantize_activation_block, bitwise: the same max (max is exact in any order; NaN is
// skipped because the running maximum is vmaxps's second operand), the same divisions, and
// vcvtps2dq rounds half to even like nearbyint; out-of-range or NaN saturate to -128 in the
// packs as in the reference. Also writes the block's sum of q and its two halves' sums.
inline void quantize_block(const float* x, int8_t* q, float* d_out, int32_t* s_out, int32_t* s16_lo, int32_t* s16_hi) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 m = _mm256_setzero_ps();
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    m = _mm256_max_ps(_mm256_andnot_ps(sign, v[i]), m);
  }
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  const float d = _mm_cvtss_f32(h) / 127.0f;
  if (!(d >= FLT_MIN)) {
    std::memset(q, 0, kQuantBlock);
    *d_out = 0.0f;
    *s_out = 0;
    *s16_lo = *s16_hi = 0;
    return;
  }
  const __m256 id = _mm256_set1_ps(1.0f / d);
  __m256i r[4];
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) r[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
  // packs work within 128-bit lanes; the permutation restores element order.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
  const __m256i qv = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), qv);
  // sum(q) = sum(q + 128) - 32 * 128, the former by vpsadbw against zero (one 64-bit sum per
  // 8 bytes: elements 0-15 in the low 128 bits, 16-31 in the high).
  const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(qv, _mm256_set1_epi8(-128)), _mm256_setzero_si256());
  const __m128i lo = _mm256_castsi256_si128(sad), hi = _mm256_extracti128_si256(sad, 1);
  *s16_lo = static_cast<int32_t>(_mm_cvtsi128_si64(_mm_add_epi64(lo, _mm_unpackhi_epi64(lo, lo)))) - 16 * 128;
  *s16_hi = static_cast<int32_t>(_mm_cvtsi128_si64(_mm_add_epi64(hi, _mm_unpackhi_epi64(hi, hi)))) - 16 * 128;
  *s_out = *s16_lo + *s16_hi;
  *d_out = d;
}

// quantize_activations (kernels/kernels.h), block by block with quantize_block.
inline void quantize_all(const float* x, size_t cols, size_t n, QuantizedActivations& a) {
  a.shape(cols, n);
  for (size_t t = 0; t < a.tokens; ++t) {
    for (size_t b = 0; b < a.nb; ++b) {
      int8_t* q = a.q.data() + t * cols + b * kQuantBlock;
      float* d = a.d.data() + b * a.tokens + t;
      int32_t* s = a.s.data() + b * a.tokens + t;
      int32_t* lo = a.s16.data() + 2 * b * a.tokens + t;
      int32_t* hi = lo + a.tokens;
      if (t < n) {
        quantize_block(x + t * cols + b * kQuantBlock, q, d, s, lo, hi);
      } else {
        std::memset(q, 0, kQuantBlock);
        *d = 0.0f;
        *s = *lo = *hi = 0;
      }
    }
  }
}

// ---- the 256-bit family ---------------------------------------------------------------------

// A group is one ymm of 8 slots. One ymm of int8 products covers two slots, one per 128-bit
// half: elements 0-15 of a block in one vector and 16-31 in another, each half holding one
// row's bytes against its slot's token (broadcast to both halves). Vector k pairs slots k and
// k + 4, so four vectors of int32 partial sums reduce to slot j in lane j without crossing
// halves. Slot k and k + 4 are rows k and k + 4 in decode (TG = 1), rows k / 2 and k / 2 + 2 of
// token k % 2 in a small batch (TG = 2) and rows 0 and 1 of token k in prefill (TG = 4): the
// halves always share their token.
template <bool kVnni>
struct Ymm {
  static constexpr size_t lanes = 8, decode_rows = 8;
  // AVX2's Q8_0 moves the weights' signs onto x (vpsignb), which cannot negate -128.
  static constexpr bool signs_onto_x = !kVnni;
  // The tokens of a small batch's groups (the driver, below): 4 rows by 2 tokens.
  static constexpr size_t small_group_tokens = 2;

  // Two rows' block, split: lo = [a 0-15 | b 0-15], hi = [a 16-31 | b 16-31]. Unsigned for
  // the multiply (u) and, for AVX2's Q8_0, the signed bytes too (q) to carry the signs to x.
  struct Weights {
    __m256i ulo, uhi, qlo, qhi;
  };
  template <WeightType kType>
  static Weights weights(const uint8_t* a, const uint8_t* b) {
    const auto half = [](const uint8_t* pa, const uint8_t* pb) {
      return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pa))),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb)), 1);
    };
    Weights w;
    if constexpr (kType == WeightType::Q8_0) {
      w.qlo = half(a + 2, b + 2);
      w.qhi = half(a + 18, b + 18);
      if constexpr (kVnni) {
        w.ulo = _mm256_xor_si256(w.qlo, _mm256_set1_epi8(-128));
        w.uhi = _mm256_xor_si256(w.qhi, _mm256_set1_epi8(-128));
      } else {
        w.ulo = _mm256_abs_epi8(w.qlo);
        w.uhi = _mm256_abs_epi8(w.qhi);
      }
    } else {
      const __m256i n = half(a + 2, b + 2);  // byte i: element i (low nibble), i + 16 (high)
      w.ulo = _mm256_and_si256(n, _mm256_set1_epi8(0x0f));
      w.uhi = _mm256_and_si256(_mm256_srli_epi16(n, 4), _mm256_set1_epi8(0x0f));
    }
    return w;
  }

  // Lanes summing, per half, to that half's row . x exactly. xlo / xhi: the token's elements
  // 0-15 / 16-31 in both halves.
  template <WeightType kType>
  static __m256i dot(const Weights& w, __m256i xlo, __m256i xhi) {
    if constexpr (kVnni) {
#ifdef __AVXVNNI__
      return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w.ulo, xlo), w.uhi, xhi);
#else
      static_assert(!kVnni, "the VNNI family needs a file compiled with -mavxvnni (*_avx2_vnni.cpp)");
#endif
    } else if constexpr (kType == WeightType::Q8_0) {
      const __m256i ones = _mm256_set1_epi16(1);
      return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(w.ulo, _mm256_sign_epi8(xlo, w.qlo)), ones),
                              _mm256_madd_epi16(_mm256_maddubs_epi16(w.uhi, _mm256_sign_epi8(xhi, w.qhi)), ones));
    } else {
      // Nibble products: int16 pair sums of at most 2 * 15 * 127, two of them still fit.
      return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w.ulo, xlo), _mm256_maddubs_epi16(w.uhi, xhi)),
                               _mm256_set1_epi16(1));
    }
  }

  // v[k]: partial sums of slots k (low half) and k + 4 (high half) -> lane j holds slot j.
  static __m256i reduce(const __m256i* v) {
    const __m256i u0 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[0], v[1]), _mm256_unpackhi_epi32(v[0], v[1]));
    const __m256i u1 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2], v[3]), _mm256_unpackhi_epi32(v[2], v[3]));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(u0, u1), _mm256_unpackhi_epi64(u0, u1));
  }

  // Lane j = p[j % TG]: the per-token values of a block for the slots.
  template <size_t TG>
  static __m256 per_token(const float* p) {
    if constexpr (TG == 1)
      return _mm256_set1_ps(*p);
    else if constexpr (TG == 2)
      return _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(p)));
    else
      return _mm256_broadcast_ps(reinterpret_cast<const __m128*>(p));
  }
  template <size_t TG>
  static __m256i per_token(const int32_t* p) {
    if constexpr (TG == 1) {
      return _mm256_set1_epi32(*p);
    } else if constexpr (TG == 2) {
      int64_t pair;
      std::memcpy(&pair, p, sizeof pair);
      return _mm256_set1_epi64x(pair);
    } else {
      return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
  }
  // Lane j = the f16 scale at blk[j / TG], widened exactly.
  template <size_t TG>
  static __m256 per_row(const uint8_t* const* blk) {
    const auto H = [blk](size_t j) {
      uint16_t h;
      std::memcpy(&h, blk[j / TG], sizeof h);
      return static_cast<short>(h);
    };
    return _mm256_cvtph_ps(_mm_setr_epi16(H(0), H(1), H(2), H(3), H(4), H(5), H(6), H(7)));
  }

  // wr: [lanes / TG] row pointers, xq: [TG] quantized token rows, d and s: the per-token
  // arrays at the group's first token (`stride` tokens per block). out: [lanes] sums.
  template <WeightType kType, size_t TG>
  static void group(const std::byte* const* wr, size_t nb, const int8_t* const* xq, const float* d, const int32_t* s,
                    size_t stride, float* out) {
    static_assert(TG == 1 || TG == 2 || TG == 4, "slots k and k + 4 must share their token");
    constexpr size_t R = lanes / TG;
    constexpr int offset_shift = kType == WeightType::Q4_0 ? 3 : kVnni ? 7 : -1;  // 8, 128 or none
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* blk[R];
#pragma GCC unroll 16
      for (size_t r = 0; r < R; ++r) blk[r] = reinterpret_cast<const uint8_t*>(wr[r]) + b * kBlockBytes<kType>;
      __m256i v[4];
      if constexpr (TG == 1) {
        const auto* xb = reinterpret_cast<const __m128i*>(xq[0] + b * kQuantBlock);
        const __m256i xlo = _mm256_broadcastsi128_si256(_mm_loadu_si128(xb));
        const __m256i xhi = _mm256_broadcastsi128_si256(_mm_loadu_si128(xb + 1));
#pragma GCC unroll 16
        for (size_t k = 0; k < 4; ++k) v[k] = dot<kType>(weights<kType>(blk[k], blk[k + 4]), xlo, xhi);
      } else if constexpr (TG == 2) {
        // Vector k: rows k / 2 and k / 2 + 2 against token k % 2.
        const Weights w[2] = {weights<kType>(blk[0], blk[2]), weights<kType>(blk[1], blk[3])};
#pragma GCC unroll 16
        for (size_t k = 0; k < 4; ++k) {
          const auto* xb = reinterpret_cast<const __m128i*>(xq[k % 2] + b * kQuantBlock);
          v[k] = dot<kType>(w[k / 2], _mm256_broadcastsi128_si256(_mm_loadu_si128(xb)),
                            _mm256_broadcastsi128_si256(_mm_loadu_si128(xb + 1)));
        }
      } else {
        const Weights w = weights<kType>(blk[0], blk[1]);
#pragma GCC unroll 16
        for (size_t k = 0; k < 4; ++k) {
          const auto* xb = reinterpret_cast<const __m128i*>(xq[k] + b * kQuantBlock);
          v[k] = dot<kType>(w, _mm256_broadcastsi128_si256(_mm_loadu_si128(xb)),
                            _mm256_broadcastsi128_si256(_mm_loadu_si128(xb + 1)));
        }
      }
      __m256i isum = reduce(v);
      if constexpr (offset_shift >= 0)
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(per_token<TG>(s + b * stride), offset_shift));
      const __m256 scale = _mm256_mul_ps(per_row<TG>(blk), per_token<TG>(d + b * stride));
      acc = _mm256_add_ps(acc, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(isum)));
    }
    _mm256_storeu_ps(out, acc);
  }

  template <WeightType kType>
  static void decode(const std::byte* const* wr, size_t nb, const int8_t* xq, const float* d, const int32_t* s,
                     float* out) {
    group<kType, 1>(wr, nb, &xq, d, s, 1, out);
  }
};

// ---- the driver ----------------------------------------------------------------------------

// Token blocks bound the activations re-read for every row group, so they stay in L2 while
// the weights stream from memory once per block.
constexpr size_t kTokenBlock = 64;
// Tokens per prefill group: each weight block loaded is used for this many tokens.
constexpr size_t kPrefillGroupTokens = kQuantTokenGroup;
static_assert(kTokenBlock % kPrefillGroupTokens == 0);
// The most tokens a family with small-batch groups (Fam::small_group_tokens) gives them. On Zen 5
// (2 threads, the synthetic Qwen3-0.6B's passes of n rows, `--isa avx2` and `avx2-vnni`, two
// alternated rounds): Q8_0 at 2-4 rows 1.80-1.96 -> 1.44-1.58 decode steps; Q4_0 at 2 rows
// 1.60-1.71 -> 1.40-1.48, at 3-4 rows ~3% slower than the 4-token groups, so those keep them.
template <WeightType kType>
constexpr size_t kSmallGroupBatch = kType == WeightType::Q8_0 ? 4 : 2;

// One group: rows [r0, r0 + lanes / TG) (clamped to the range: repeated rows are computed and
// dropped) by tokens [t0, t0 + TG) (padding tokens are computed and dropped).
template <class Fam, WeightType kType, size_t TG>
inline void run_group(const std::byte* w, size_t row_bytes, const float* bias, float* y, size_t rows, size_t r0,
                      size_t row_end, const QuantizedActivations& a, size_t t0) {
  constexpr size_t L = Fam::lanes, R = L / TG;
  const std::byte* wr[R];
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) wr[r] = w + std::min(r0 + r, row_end - 1) * row_bytes;
  const int8_t* xq[TG];
#pragma GCC unroll 16
  for (size_t t = 0; t < TG; ++t) xq[t] = a.q.data() + (t0 + t) * a.cols;
  alignas(64) float out[L];
  Fam::template group<kType, TG>(wr, a.nb, xq, a.d.data() + t0, a.s.data() + t0, a.tokens, out);
#pragma GCC unroll 16
  for (size_t j = 0; j < L; ++j) {
    const size_t r = r0 + j / TG, t = t0 + j % TG;
    if (r < row_end && t < a.n) y[t * rows + r] = bias ? bias[r] + out[j] : out[j];
  }
}

// The product from quantized activations (MatmulQuantizedFn).
template <class Fam, WeightType kType>
void matmul_quantized(const std::byte* w, const float* bias, const QuantizedActivations& a, float* y, size_t rows,
                      size_t row_begin, size_t row_end) {
  if (row_begin >= row_end || a.n == 0) return;
  if constexpr (kType == WeightType::Q8_0 && requires { Fam::signs_onto_x; }) {
    // An activation of -128 (quantize_activations makes one only of a NaN) would keep its sign
    // under vpsignb: such a call runs the scalar reference, whose result it must be.
    if (Fam::signs_onto_x && a.any_min()) {
      scalar_table().matmul_quantized_for(kType)(w, bias, a, y, rows, row_begin, row_end);
      return;
    }
  }
  const size_t row_bytes = a.nb * kBlockBytes<kType>;
  if (a.n == 1) {
    // Decode: memory-bound; each pass streams `decode_rows` rows at once.
    constexpr size_t R = Fam::decode_rows;
    for (size_t r0 = row_begin; r0 < row_end; r0 += R) {
      const std::byte* wr[R];
#pragma GCC unroll 16
      for (size_t r = 0; r < R; ++r) wr[r] = w + std::min(r0 + r, row_end - 1) * row_bytes;
      alignas(64) float out[R];
      Fam::template decode<kType>(wr, a.nb, a.q.data(), a.d.data(), a.s.data(), out);
#pragma GCC unroll 16
      for (size_t r = 0; r < R; ++r)
        if (r0 + r < row_end) y[r0 + r] = bias ? bias[r0 + r] + out[r] : out[r];
    }
    return;
  }
  if constexpr (requires { Fam::small_group_tokens; }) {
    // A small batch: groups of more rows and fewer tokens, so each row's weights meet only real
    // tokens (4 token slots would pad 2 tokens to 4) and more rows stream at once.
    constexpr size_t TG = Fam::small_group_tokens;
    if (a.n <= kSmallGroupBatch<kType>) {
      for (size_t r0 = row_begin; r0 < row_end; r0 += Fam::lanes / TG)
        for (size_t t0 = 0; t0 < a.n; t0 += TG)
          run_group<Fam, kType, TG>(w, row_bytes, bias, y, rows, r0, row_end, a, t0);
      return;
    }
  }
  constexpr size_t TG = kPrefillGroupTokens;
  for (size_t tb = 0; tb < a.tokens; tb += kTokenBlock) {
    const size_t te = std::min(tb + kTokenBlock, a.tokens);
    for (size_t r0 = row_begin; r0 < row_end; r0 += Fam::lanes / TG)
      for (size_t t0 = tb; t0 < te; t0 += TG)
        run_group<Fam, kType, TG>(w, row_bytes, bias, y, rows, r0, row_end, a, t0);
  }
}

// This header's products on family Fam: the entries a tier's file gives its table.
template <class Fam>
constexpr ByType<MatmulQuantizedFn> quantized_products() {
  return {.q8_0 = matmul_quantized<Fam, WeightType::Q8_0>, .q4_0 = matmul_quantized<Fam, WeightType::Q4_0>};
}

}  // namespace
}  // namespace nanoinfer::kernels
