// Q4_K / Q6_K products for the avx512-vnni tier (and avx512-bf16, which shares them) over the
// packed layout (kernels/quant_blocks.h): lane j is row j of a 16-row group, as in the Q8_0 /
// Q4_0 packed product (kernels/quant_avx512_vnni.cpp). Per super-block, each 512-bit load holds
// one 4-byte word of quants of all 16 rows; vpdpbusd against the token's activation word
// broadcast to every lane leaves each row's integer sum of a sub-block in its own lane, and
// the per-row scales of a sub-block are one 16-byte load widened to 16 lanes. Then, per
// 32-element activation block, the reference's float steps (kernels/scalar_quant_k.cpp) on
// the 16 lanes, in block order: bitwise the scalar product.
//
// Q4_K's quants are nibbles (unsigned, as vpdpbusd wants them) and its min term uses the
// activation block's sum s[b]. Q6_K's are 6-bit unsigned q = value + 32: the kernel sums q * x
// and subtracts 32 * (sum of the 16 activations of the sub-block), QuantizedActivations::s16,
// which gives the reference's exact sum of (q - 32) * x.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593 (see quant_avx512_vnni.cpp)
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"

namespace nanoinfer::kernels {
namespace {

constexpr size_t kQ4kGroupBytes = kPackRows * sizeof(BlockQ4_K);
constexpr size_t kQ6kGroupBytes = kPackRows * sizeof(BlockQ6_K);

__m512i broadcast_word(const int8_t* x) {
  int32_t v;
  std::memcpy(&v, x, sizeof v);
  return _mm512_set1_epi32(v);
}
__m512 f16x16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
__m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
__m512 u8_to_ps(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)); }

// The pointers of a group of TG tokens: xq[t] their quantized rows; d, s, s16 the per-block
// arrays at the group's first token, `stride` tokens per block (QuantizedActivations).
template <size_t TG>
struct Tokens {
  const int8_t* xq[TG];
  const float* d;
  const int32_t* s;
  const int32_t* s16;
  size_t stride;
};

// acc[t] += the 16 rows' Q4_K products for token t over every super-block of the group at g.
template <size_t TG>
void q4_k_group(const uint8_t* g, size_t nsb, const Tokens<TG>& x, __m512* acc) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m128i m6 = _mm_set1_epi8(63), m4 = _mm_set1_epi8(0x0f), m2 = _mm_set1_epi8(0x30);
  for (size_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk = g + sb * kQ4kGroupBytes;
    const __m512 d = f16x16(blk), dmin = f16x16(blk + 32);
    const auto plane = [blk](size_t p) { return load16(blk + 64 + 16 * p); };
    // k_scale_min on 16 rows at once (src/base/weight_blocks.h).
    const auto scale_min = [&](size_t j, __m512& ds, __m512& dm) {
      __m128i sc, m;
      if (j < 4) {
        sc = _mm_and_si128(plane(j), m6);
        m = _mm_and_si128(plane(j + 4), m6);
      } else {
        const __m128i p8 = plane(j + 4);
        sc = _mm_or_si128(_mm_and_si128(p8, m4), _mm_and_si128(_mm_srli_epi16(plane(j - 4), 2), m2));
        m = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(p8, 4), m4), _mm_and_si128(_mm_srli_epi16(plane(j), 2), m2));
      }
      ds = _mm512_mul_ps(d, u8_to_ps(sc));
      dm = _mm512_mul_ps(dmin, u8_to_ps(m));
    };
    for (size_t c = 0; c < 4; ++c) {
      __m512i ilo[TG], ihi[TG];
#pragma GCC unroll 16
      for (size_t t = 0; t < TG; ++t) ilo[t] = ihi[t] = _mm512_setzero_si512();
      const size_t b_lo = 8 * sb + 2 * c;  // activation blocks of sub-blocks 2c and 2c + 1
#pragma GCC unroll 8
      for (size_t k = 0; k < 8; ++k) {
        const __m512i v = _mm512_loadu_si512(blk + 256 + 64 * (8 * c + k));
        const __m512i wl = _mm512_and_si512(v, low), wh = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
#pragma GCC unroll 16
        for (size_t t = 0; t < TG; ++t) {
          ilo[t] = _mm512_dpbusd_epi32(ilo[t], wl, broadcast_word(x.xq[t] + kQuantBlock * b_lo + 4 * k));
          ihi[t] = _mm512_dpbusd_epi32(ihi[t], wh, broadcast_word(x.xq[t] + kQuantBlock * (b_lo + 1) + 4 * k));
        }
      }
#pragma GCC unroll 2
      for (size_t half = 0; half < 2; ++half) {
        const size_t b = b_lo + half;
        __m512 ds, dm;
        scale_min(2 * c + half, ds, dm);
#pragma GCC unroll 16
        for (size_t t = 0; t < TG; ++t) {
          const __m512i isum = half == 0 ? ilo[t] : ihi[t];
          const __m512 inner =
              _mm512_sub_ps(_mm512_mul_ps(ds, _mm512_cvtepi32_ps(isum)),
                            _mm512_mul_ps(dm, _mm512_set1_ps(static_cast<float>(x.s[b * x.stride + t]))));
          acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_set1_ps(x.d[b * x.stride + t]), inner));
        }
      }
    }
  }
}

// acc[t] += the 16 rows' Q6_K products for token t over every super-block of the group at g.
template <size_t TG>
void q6_k_group(const uint8_t* g, size_t nsb, const Tokens<TG>& x, __m512* acc) {
  const __m512i low = _mm512_set1_epi8(0x0f), top = _mm512_set1_epi8(0x30);
  for (size_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk = g + sb * kQ6kGroupBytes;
    const __m512 dw = f16x16(blk);
    for (size_t h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (size_t i = 0; i < 4; ++i) {  // activation block b: elements 32i.. of half h
        const size_t b = 8 * sb + 4 * h + i;
        __m512i ua[TG], ub[TG];
#pragma GCC unroll 16
        for (size_t t = 0; t < TG; ++t) ua[t] = ub[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (size_t k = 0; k < 8; ++k) {
          const uint8_t* base = blk + 288 + 64 * 3 * (8 * h + k);
          const __m512i ql = _mm512_loadu_si512(base + 64 * (i % 2));  // ql[l] (i even) or ql[l + 32]
          const __m512i qh = _mm512_loadu_si512(base + 128);
          // Low 4 bits from the nibble, bits 4-5 from qh bits 2i, 2i + 1.
          const __m512i lo4 = i < 2 ? _mm512_and_si512(ql, low) : _mm512_and_si512(_mm512_srli_epi16(ql, 4), low);
          __m512i hi2;
          if (i == 0) hi2 = _mm512_slli_epi16(qh, 4);
          else if (i == 1) hi2 = _mm512_slli_epi16(qh, 2);
          else if (i == 2) hi2 = qh;
          else hi2 = _mm512_srli_epi16(qh, 2);
          const __m512i w = _mm512_or_si512(lo4, _mm512_and_si512(hi2, top));
#pragma GCC unroll 16
          for (size_t t = 0; t < TG; ++t) {
            const __m512i xw = broadcast_word(x.xq[t] + kQuantBlock * b + 4 * k);
            if (k < 4) ua[t] = _mm512_dpbusd_epi32(ua[t], w, xw);
            else ub[t] = _mm512_dpbusd_epi32(ub[t], w, xw);
          }
        }
        const size_t sub = 8 * h + 2 * i;  // the scales of elements 0-15 and 16-31 of block b
        const __m512i sa = _mm512_cvtepi8_epi32(load16(blk + 32 + 16 * sub));
        const __m512i sc = _mm512_cvtepi8_epi32(load16(blk + 32 + 16 * (sub + 1)));
#pragma GCC unroll 16
        for (size_t t = 0; t < TG; ++t) {
          const __m512i ia = _mm512_sub_epi32(ua[t], _mm512_set1_epi32(32 * x.s16[2 * b * x.stride + t]));
          const __m512i ib = _mm512_sub_epi32(ub[t], _mm512_set1_epi32(32 * x.s16[(2 * b + 1) * x.stride + t]));
          const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(sa, ia), _mm512_mullo_epi32(sc, ib));
          const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(x.d[b * x.stride + t]));
          acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(scale, _mm512_cvtepi32_ps(isum)));
        }
      }
    }
  }
}

template <WeightType kType, size_t TG>
void k_group(const uint8_t* g, size_t nsb, const Tokens<TG>& x, __m512* acc) {
  if constexpr (kType == WeightType::Q4_K) q4_k_group<TG>(g, nsb, x, acc);
  else q6_k_group<TG>(g, nsb, x, acc);
}

// Token blocks bound the activations re-read for every row group (as kernels/quant_simd.h).
constexpr size_t kKTokenBlock = 64;

// The packed product (MatmulPackedFn): whole groups here, rows of a partial last group by the
// scalar reference (bitwise the same).
template <WeightType kType>
void matmul_packed_k(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& a, float* y,
                     size_t stride, size_t row_begin, size_t row_end) {
  if (row_begin >= row_end || a.n == 0) return;
  const size_t nsb = a.cols / kSuperBlock, row_bytes = nsb * weight_type_info(kType).block_bytes;
  const size_t packed_end = w_rows / kPackRows * kPackRows;
  const size_t group_end = std::min(row_end, packed_end);
  const auto store = [&](size_t r0, size_t t, __m512 sums) {
    alignas(64) float out[kPackRows];
    _mm512_store_ps(out, sums);
    const size_t j0 = std::max(r0, row_begin) - r0, j1 = std::min(r0 + kPackRows, group_end) - r0;
    for (size_t j = j0; j < j1; ++j) y[t * stride + r0 + j] = bias ? bias[r0 + j] + out[j] : out[j];
  };
  const size_t first_group = row_begin / kPackRows * kPackRows;
  if (a.n == 1) {
    const Tokens<1> x{{a.q.data()}, a.d.data(), a.s.data(), a.s16.data(), 1};
    for (size_t r0 = first_group; r0 < group_end; r0 += kPackRows) {
      __m512 acc = _mm512_setzero_ps();
      k_group<kType, 1>(reinterpret_cast<const uint8_t*>(w + r0 * row_bytes), nsb, x, &acc);
      store(r0, 0, acc);
    }
  } else {
    constexpr size_t TG = kQuantTokenGroup;
    for (size_t tb = 0; tb < a.tokens; tb += kKTokenBlock) {
      const size_t te = std::min(tb + kKTokenBlock, a.tokens);
      for (size_t r0 = first_group; r0 < group_end; r0 += kPackRows) {
        for (size_t t0 = tb; t0 < te; t0 += TG) {
          Tokens<TG> x{{}, a.d.data() + t0, a.s.data() + t0, a.s16.data() + t0, a.tokens};
          __m512 acc[TG];
#pragma GCC unroll 16
          for (size_t t = 0; t < TG; ++t) {
            x.xq[t] = a.q.data() + (t0 + t) * a.cols;
            acc[t] = _mm512_setzero_ps();
          }
          k_group<kType, TG>(reinterpret_cast<const uint8_t*>(w + r0 * row_bytes), nsb, x, acc);
          for (size_t t = 0; t < TG && t0 + t < a.n; ++t) store(r0, t0 + t, acc[t]);
        }
      }
    }
  }
  if (row_end > packed_end) {
    const auto rest = kType == WeightType::Q4_K ? matmul_quantized_q4_k : matmul_quantized_q6_k;
    rest(w, bias, a, y, stride, std::max(row_begin, packed_end), row_end);
  }
}

}  // namespace

namespace avx512_vnni {

void matmul_packed_q4_k(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& x, float* y,
                        size_t stride, size_t row_begin, size_t row_end) {
  matmul_packed_k<WeightType::Q4_K>(w, w_rows, bias, x, y, stride, row_begin, row_end);
}

void matmul_packed_q6_k(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& x, float* y,
                        size_t stride, size_t row_begin, size_t row_end) {
  matmul_packed_k<WeightType::Q6_K>(w, w_rows, bias, x, y, stride, row_begin, row_end);
}

}  // namespace avx512_vnni
}  // namespace nanoinfer::kernels
