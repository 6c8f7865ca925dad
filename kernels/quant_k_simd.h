// Q4_K / Q5_K / Q6_K and Q4_1 / Q5_0 / Q5_1 products over the packed layout (kernels/quant_blocks.h), written once
// against a vector policy of kernels/packed_driver.h: PackedZmm with vpdpbusd (quant_k_avx512_vnni.cpp: the avx512-vnni
// and avx512-bf16 tiers), PackedYmm<true> with AVX-VNNI (quant_k_avx2_vnni.cpp) and PackedYmm<false> with vpmaddubsw +
// vpmaddwd (quant_k_avx2.cpp: the avx2 and avx512 tiers). Include only from *_avx2*.cpp / *_avx512*.cpp files (internal
// linkage, simd_kernels.h).
//
// Lane j is row j of a slice of a 16-row group. Per super-block, each vector load holds one
// 4-byte word of quants of the slice's rows; the dot product against the token's activation
// word broadcast to every lane leaves each row's integer sum of a sub-block in its own lane, and
// the per-row scales of a sub-block are one load of the slice's bytes widened to its lanes.
// Then, per 32-element activation block, the reference's float steps
// (kernels/scalar_quant_k.cpp) on the lanes, in block order: bitwise the scalar product.
//
// Q4_K's quants are nibbles (unsigned, as vpdpbusd wants them) and its min term uses the
// activation block's sum s[b]; Q5_K is Q4_K with a fifth bit per quant, taken from its qh words
// (one 64-byte vector per word, read once per chunk from L1) and or-ed in as bit 4. Q6_K's are 6-bit unsigned q = value
// + 32: each sum starts from -32 * (sum of the 16 activations of the sub-block, from
// QuantizedActivations::s16) and adds q * x, which gives the reference's exact sum of (q - 32) * x. Q3_K is
// Q6_K's loop with 3-bit q = value + 4 (2 bits from a qs word, the third from an hmask word) and
// 6-bit scales decoded from the 12 scale planes.
//
// Each kernel keeps its tokens' sums in local vectors and stores them once at the end: stored
// through the caller's pointer after every block, they could alias the weight bytes (uint8_t
// may alias anything), so GCC reloaded the scales after each store and kept the block's words
// waiting. With that, the sub16 loop making a block's eight words before the tokens' sums and
// the bias sums loaded rather than multiplied, on Zen 5 (2 threads, one layer of the synthetic
// Qwen3-0.6B's products in cache, 400 passes, twice): Q3_K 1 / 2 / 4 / 8 tokens 0.14 / 0.16 /
// 0.24 / 0.35-0.38 ms -> 0.09 / 0.12 / 0.17 / 0.29-0.32, Q6_K 0.11 / 0.13 / 0.22-0.23 /
// 0.34-0.38 -> 0.08 / 0.11 / 0.16-0.17 / 0.29-0.33, Q4_1 and Q4_K at 4 tokens (the prefill
// group) 10-20% less; `bench generate -m synth-qwen3-0.6b-q3k.gguf -p 64 -n 1 -r 3 -t 2`,
// three alternated rounds: 469-487 -> 586-652 tokens/s.
#pragma once

#include "kernels/packed_driver.h"

namespace nanoinfer::kernels {
namespace {

constexpr size_t kQ4kGroupBytes = kPackRows * sizeof(BlockQ4_K);
constexpr size_t kQ5kGroupBytes = kPackRows * sizeof(BlockQ5_K);
constexpr size_t kQ6kGroupBytes = kPackRows * sizeof(BlockQ6_K);
constexpr size_t kQ3kGroupBytes = kPackRows * sizeof(BlockQ3_K);

// The activations of TG tokens from t0: xq[t] their quantized rows; d, s, s16 the per-block
// arrays at t0, `stride` tokens per block (QuantizedActivations).
template <size_t TG>
struct KTokens {
  const int8_t* xq[TG];
  const float* d;
  const int32_t* s;
  const int32_t* s16;
  size_t stride;

  KTokens(const QuantizedActivations& a, size_t t0)
      : d(a.d.data() + t0), s(a.s.data() + t0), s16(a.s16.data() + t0), stride(a.tokens) {
    for (size_t t = 0; t < TG; ++t) xq[t] = a.q.data() + (t0 + t) * a.cols;
  }
};

// acc[t] += slice `part`'s Q4_K (kHigh: Q5_K) products for token t over every super-block of
// the group at g, asking for its lines `ahead` bytes on (as the kernels below do).
template <class P, size_t TG, bool kHigh = false>
void q4_k_group(const uint8_t* g, size_t part, size_t nsb, const KTokens<TG>& x, typename P::F* acc_out, size_t ahead) {
  using V = typename P::V;
  using F = typename P::F;
  if constexpr (P::parts == 1) part = 0;  // known here: the prefetch tests and slice offsets fold away
  // The sums in local vectors, stored once at the end (the header says why).
  F acc[TG];
#pragma GCC unroll 16
  for (size_t t = 0; t < TG; ++t) acc[t] = acc_out[t];
  constexpr size_t L = P::lanes;
  constexpr size_t kGroupBytes = kHigh ? kQ5kGroupBytes : kQ4kGroupBytes;
  const V low = P::set8(0x0f), five = P::set8(0x10);
  const __m128i m6 = _mm_set1_epi8(63), m4 = _mm_set1_epi8(0x0f), m2 = _mm_set1_epi8(0x30);
  for (size_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk = g + sb * kGroupBytes;
    if (part == 0)
      for (size_t line = 0; line < 256; line += 64) prefetch(blk + line + ahead);
    const F d = P::f16(blk + 2 * L * part), dmin = P::f16(blk + 32 + 2 * L * part);
    const auto plane = [blk, part](size_t p) { return P::bytes(blk + 64 + 16 * p + L * part); };
    // k_scale_min on the slice's rows at once (src/base/weight_blocks.h).
    const auto scale_min = [&](size_t j, F& ds, F& dm) {
      __m128i sc, m;
      if (j < 4) {
        sc = _mm_and_si128(plane(j), m6);
        m = _mm_and_si128(plane(j + 4), m6);
      } else {
        const __m128i p8 = plane(j + 4);
        sc = _mm_or_si128(_mm_and_si128(p8, m4), _mm_and_si128(_mm_srli_epi16(plane(j - 4), 2), m2));
        m = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(p8, 4), m4), _mm_and_si128(_mm_srli_epi16(plane(j), 2), m2));
      }
      ds = P::mul(d, P::u8f(sc));
      dm = P::mul(dmin, P::u8f(m));
    };
    for (size_t c = 0; c < 4; ++c) {
      V ilo[TG], ihi[TG];
#pragma GCC unroll 16
      for (size_t t = 0; t < TG; ++t) ilo[t] = ihi[t] = P::zero();
      const size_t b_lo = 8 * sb + 2 * c;  // activation blocks of sub-blocks 2c and 2c + 1
#pragma GCC unroll 8
      for (size_t k = 0; k < 8; ++k) {
        if (part == 0) prefetch(blk + 256 + 64 * (8 * c + k) + ahead);
        const V v = P::load(blk + 256 + 64 * (8 * c + k) + 4 * L * part);
        V wl = P::and_(v, low), wh = P::and_(P::template srl16<4>(v), low);
        if constexpr (kHigh) {
          const uint8_t* qh = blk + 2304 + 64 * k;
          if (part == 0 && c == 0) prefetch(qh + ahead);
          // Bits 2c and 2c + 1 of each byte to bit 4: 16-bit shifts carry no bit wanted
          // across a byte.
          const V h = P::srl16(P::load(qh + 4 * L * part), static_cast<int>(2 * c));
          wl = P::or_(wl, P::and_(P::template sll16<4>(h), five));
          wh = P::or_(wh, P::and_(P::template sll16<3>(h), five));
        }
#pragma GCC unroll 16
        for (size_t t = 0; t < TG; ++t) {
          ilo[t] = P::dot(ilo[t], wl, P::word(x.xq[t] + kQuantBlock * b_lo + 4 * k));
          ihi[t] = P::dot(ihi[t], wh, P::word(x.xq[t] + kQuantBlock * (b_lo + 1) + 4 * k));
        }
      }
#pragma GCC unroll 2
      for (size_t half = 0; half < 2; ++half) {
        const size_t b = b_lo + half;
        F ds, dm;
        scale_min(2 * c + half, ds, dm);
#pragma GCC unroll 16
        for (size_t t = 0; t < TG; ++t) {
          const V isum = half == 0 ? ilo[t] : ihi[t];
          const F inner =
              P::sub(P::mul(ds, P::cvt(isum)), P::mul(dm, P::set(static_cast<float>(x.s[b * x.stride + t]))));
          acc[t] = P::add(acc[t], P::mul(P::set(x.d[b * x.stride + t]), inner));
        }
      }
    }
  }
#pragma GCC unroll 16
  for (size_t t = 0; t < TG; ++t) acc_out[t] = acc[t];
}

// Q6_K's and Q3_K's quants are value + kSub16Bias.
template <WeightType kType>
constexpr int32_t kSub16Bias = kType == WeightType::Q3_K ? 4 : 32;

// acc[t] += slice `part`'s Q6_K (kType Q3_K: Q3_K) products for token t over every super-block
// of the group at g: 16 sub-blocks of 16 with signed scales, unsigned quants with a bias.
template <class P, size_t TG, WeightType kType>
void sub16_group(const uint8_t* g, size_t part, size_t nsb, const KTokens<TG>& x, const int32_t* bias_sums,
                 typename P::F* acc_out, size_t ahead) {
  using V = typename P::V;
  using F = typename P::F;
  if constexpr (P::parts == 1) part = 0;  // known here: the prefetch tests and slice offsets fold away
  // The sums in local vectors, stored once at the end (the header says why).
  F acc[TG];
#pragma GCC unroll 16
  for (size_t t = 0; t < TG; ++t) acc[t] = acc_out[t];
  constexpr size_t L = P::lanes;
  constexpr bool kQ3 = kType == WeightType::Q3_K;
  constexpr size_t kGroupBytes = kQ3 ? kQ3kGroupBytes : kQ6kGroupBytes, kHead = kQ3 ? 224 : 288;
  const V low = P::set8(0x0f), top = P::set8(0x30), two = P::set8(0x03), third = P::set8(0x04);
  const __m128i m4 = _mm_set1_epi8(0x0f), m2 = _mm_set1_epi8(0x03), bias6 = _mm_set1_epi8(32);
  for (size_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk = g + sb * kGroupBytes;
    const F dw = P::f16(blk + 2 * L * part);
    if (part == 0)
      for (size_t line = 0; line < kHead + 32; line += 64) prefetch(blk + line + ahead);
    // Sub-block s's signed scales of the slice's rows.
    const auto scale = [&](size_t s) {
      if constexpr (!kQ3) {
        return P::i8(P::bytes(blk + 32 + 16 * s + L * part));
      } else {  // q3_k_scale (src/base/weight_blocks.h) on the slice's rows at once
        const auto plane = [&](size_t p) { return P::bytes(blk + 32 + 16 * p + L * part); };
        const __m128i lo4 = s < 8 ? _mm_and_si128(plane(s), m4) : _mm_and_si128(_mm_srli_epi16(plane(s - 8), 4), m4);
        const __m128i hi2 = _mm_and_si128(_mm_srl_epi16(plane(8 + s % 4), _mm_cvtsi32_si128(2 * (s / 4))), m2);
        return P::i8(_mm_sub_epi8(_mm_or_si128(lo4, _mm_slli_epi16(hi2, 4)), bias6));
      }
    };
    for (size_t h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (size_t i = 0; i < 4; ++i) {  // activation block b: elements 32i.. of half h
        const size_t b = 8 * sb + 4 * h + i;
        // Weight word k of block b (elements 4k.. of each row's 32), asking for its lines ahead.
        const auto word = [&](size_t k) {
          if constexpr (kQ3) {
            // Bits 2i, 2i + 1 of the qs word, and bit 4h + i of the hmask word as bit 2.
            const uint8_t* qs = blk + kHead + 64 * (8 * h + k);
            const uint8_t* hm = blk + kHead + 1024 + 64 * k;
            if (i == 0 && part == 0) prefetch(qs + ahead);
            if (h == 0 && i == 0 && part == 0) prefetch(hm + ahead);
            const V lo2 = P::and_(P::srl16(P::load(qs + 4 * L * part), static_cast<int>(2 * i)), two);
            const V hv = P::load(hm + 4 * L * part);
            const size_t bit = 4 * h + i;
            const V hi = bit >= 2   ? P::srl16(hv, static_cast<int>(bit - 2))
                         : bit == 1 ? P::template sll16<1>(hv)
                                    : P::template sll16<2>(hv);
            return P::or_(lo2, P::and_(hi, third));
          } else {
            const uint8_t* base = blk + kHead + 64 * 3 * (8 * h + k) + 4 * L * part;
            if (i == 0 && part == 0)
              for (size_t v = 0; v < 3; ++v) prefetch(blk + kHead + 64 * (3 * (8 * h + k) + v) + ahead);
            const V ql = P::load(base + 64 * (i % 2));  // ql[l] (i even) or ql[l + 32]
            const V qh = P::load(base + 128);
            // Low 4 bits from the nibble, bits 4-5 from qh bits 2i, 2i + 1.
            const V lo4 = i < 2 ? P::and_(ql, low) : P::and_(P::template srl16<4>(ql), low);
            V hi2;
            if (i == 0)
              hi2 = P::template sll16<4>(qh);
            else if (i == 1)
              hi2 = P::template sll16<2>(qh);
            else if (i == 2)
              hi2 = qh;
            else
              hi2 = P::template srl16<2>(qh);
            return P::or_(lo4, P::and_(hi2, top));
          }
        };
        // Token t's sums of elements 0-15 (a) and 16-31 (b) of block b start from bias_sums'
        // -kSub16Bias * (the sub-block's activation sum), so they end as the sums of
        // (q - kSub16Bias) * x; then the reference's steps.
        const auto start_a = [&](size_t t) { return P::set32(bias_sums[2 * b * x.stride + t]); };
        const auto start_b = [&](size_t t) { return P::set32(bias_sums[(2 * b + 1) * x.stride + t]); };
        const size_t sub = 8 * h + 2 * i;  // the scales of elements 0-15 and 16-31 of block b
        const V sa = scale(sub), sc = scale(sub + 1);
        const auto finish = [&](size_t t, V ia, V ib) {
          const V isum = P::add(P::mullo(sa, ia), P::mullo(sc, ib));
          const F scale_x = P::mul(dw, P::set(x.d[b * x.stride + t]));
          acc[t] = P::add(acc[t], P::mul(scale_x, P::cvt(isum)));
        };
        // The block's eight words first, then each token's two sums from them: two sums live at
        // a time, not 2 * TG.
        V w[8];
#pragma GCC unroll 8
        for (size_t k = 0; k < 8; ++k) w[k] = word(k);
#pragma GCC unroll 16
        for (size_t t = 0; t < TG; ++t) {
          const int8_t* xb = x.xq[t] + kQuantBlock * b;
          V ia = start_a(t), ib = start_b(t);
#pragma GCC unroll 4
          for (size_t k = 0; k < 4; ++k) {
            ia = P::dot(ia, w[k], P::word(xb + 4 * k));
            ib = P::dot(ib, w[k + 4], P::word(xb + 16 + 4 * k));
          }
          finish(t, ia, ib);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (size_t t = 0; t < TG; ++t) acc_out[t] = acc[t];
}

// acc[t] += block b's Q8_0 products for token t where the dot product is vpmaddubsw's, whose
// int16 pair sums would saturate on the words' unsigned quants + 128 (w: this slice's 4 bytes per
// row of the first of 8 words, 64 bytes apart). Each word goes back to signed quants q, whose
// signs move onto the activations (P::dot_signed): exact while no activation is -128, which
// quantize_activations makes only of a NaN (vpsignb cannot negate -128). With one (kAnyMin),
// the words are split instead, q + 128 = lo + 128 * hi with lo <= 127 and hi <= 1, two exact
// products. Then the reference's float steps.
template <class P, size_t TG, bool kAnyMin>
inline void signed_bytes_block(const uint8_t* w, typename P::F dw, const KTokens<TG>& x, size_t b, typename P::F* acc) {
  using V = typename P::V;
  const V top = P::set8(static_cast<char>(0x80)), low7 = P::set8(0x7f), one = P::set8(1);
  V isum[TG], ihi[TG];
#pragma GCC unroll 16
  for (size_t t = 0; t < TG; ++t) isum[t] = ihi[t] = P::zero();
#pragma GCC unroll 8
  for (size_t k = 0; k < 8; ++k) {
    const V u = P::load(w + 64 * k);
    if constexpr (kAnyMin) {
      const V lo = P::and_(u, low7), hi = P::and_(P::template srl16<7>(u), one);
#pragma GCC unroll 16
      for (size_t t = 0; t < TG; ++t) {
        const V xw = P::word(x.xq[t] + kQuantBlock * b + 4 * k);
        isum[t] = P::dot(isum[t], lo, xw);
        ihi[t] = P::dot(ihi[t], hi, xw);
      }
    } else {
      const V q = P::xor_(u, top), a = P::abs8(q);
#pragma GCC unroll 16
      for (size_t t = 0; t < TG; ++t)
        isum[t] = P::dot_signed(isum[t], a, q, P::word(x.xq[t] + kQuantBlock * b + 4 * k));
    }
  }
#pragma GCC unroll 16
  for (size_t t = 0; t < TG; ++t) {
    // Split: sum(lo * x) + 128 * sum(hi * x) - 128 * sum(x) = sum(q * x).
    if constexpr (kAnyMin)
      isum[t] = P::sub(P::add(isum[t], P::template sll32<7>(ihi[t])), P::set32(128 * x.s[b * x.stride + t]));
    acc[t] = P::add(acc[t], P::mul(P::mul(dw, P::set(x.d[b * x.stride + t])), P::cvt(isum[t])));
  }
}

// acc[t] += slice `part`'s Q4_1 / Q5_0 / Q5_1 / Q4_0 / Q8_0 products for token t over the nb
// blocks of 32 of the group at g (kernels/scalar_quant_file.cpp and scalar_quant.cpp state the
// rules). The fifth bits come packed as Q5_K's (kernels/quant_blocks.h): word k's in bits 2k
// and 2k + 1 of each byte. Q8_0's words are its quants + 128, up to 255: a policy whose dot is
// exact on any unsigned byte (P::full_bytes) takes them as they are; plain AVX2's vpmaddubsw
// pairs would saturate, so there the words go back to signed quants and P::dot_signed.
template <class P, size_t TG, WeightType kType>
void block32_group(const uint8_t* g, size_t part, size_t nb, const KTokens<TG>& x, typename P::F* acc_out, size_t ahead,
                   bool any_min) {
  using V = typename P::V;
  using F = typename P::F;
  if constexpr (P::parts == 1) part = 0;  // known here: the prefetch tests and slice offsets fold away
  // The sums in local vectors, stored once at the end (the header says why).
  F acc[TG];
#pragma GCC unroll 16
  for (size_t t = 0; t < TG; ++t) acc[t] = acc_out[t];
  constexpr size_t L = P::lanes;
  constexpr bool kMin = kType == WeightType::Q4_1 || kType == WeightType::Q5_1;
  constexpr bool kFive = kType == WeightType::Q5_0 || kType == WeightType::Q5_1;
  constexpr bool kBytes = kType == WeightType::Q8_0;  // whole-byte quants + 128, eight words
  // Without a min: the quants are value + kOffset.
  constexpr int32_t kOffset = kBytes ? 128 : kType == WeightType::Q4_0 ? 8 : 16;
  constexpr size_t kBlockBytes = kType == WeightType::Q4_1   ? sizeof(BlockQ4_1)
                                 : kType == WeightType::Q5_0 ? sizeof(BlockQ5_0)
                                 : kType == WeightType::Q5_1 ? sizeof(BlockQ5_1)
                                 : kType == WeightType::Q4_0 ? sizeof(BlockQ4_0)
                                                             : sizeof(BlockQ8_0);
  constexpr size_t kGroupBytes = kPackRows * kBlockBytes, qs0 = kMin ? 64 : 32, qh0 = qs0 + 256;
  const V low = P::set8(0x0f), five = P::set8(0x10);
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk = g + b * kGroupBytes;
    if (part == 0)
      for (size_t line = 0; line < kGroupBytes; line += 64) prefetch(blk + line + ahead);
    if constexpr (kBytes && !P::full_bytes) {
      const uint8_t* words = blk + qs0 + 4 * L * part;
      if (any_min)
        signed_bytes_block<P, TG, true>(words, P::f16(blk + 2 * L * part), x, b, acc);
      else
        signed_bytes_block<P, TG, false>(words, P::f16(blk + 2 * L * part), x, b, acc);
      continue;
    }
    V wl[4], wh[4];
    const V h = kFive ? P::load(blk + qh0 + 4 * L * part) : P::zero();
#pragma GCC unroll 4
    for (size_t k = 0; k < 4; ++k) {
      if constexpr (kBytes) {  // words k and 4 + k: elements 4k.. and 16 + 4k..
        wl[k] = P::load(blk + qs0 + 64 * k + 4 * L * part);
        wh[k] = P::load(blk + qs0 + 64 * (4 + k) + 4 * L * part);
        continue;
      }
      const V v = P::load(blk + qs0 + 64 * k + 4 * L * part);
      wl[k] = P::and_(v, low);
      wh[k] = P::and_(P::template srl16<4>(v), low);
      if constexpr (kFive) {
        const V hk = P::srl16(h, static_cast<int>(2 * k));
        wl[k] = P::or_(wl[k], P::and_(P::template sll16<4>(hk), five));
        wh[k] = P::or_(wh[k], P::and_(P::template sll16<3>(hk), five));
      }
    }
    const F dw = P::f16(blk + 2 * L * part);
    F mw = P::zero_f();
    if constexpr (kMin) mw = P::f16(blk + 32 + 2 * L * part);
#pragma GCC unroll 16
    for (size_t t = 0; t < TG; ++t) {
      const int8_t* xb = x.xq[t] + kQuantBlock * b;
      V i0 = P::dot(P::zero(), wl[0], P::word(xb)), i1 = P::dot(P::zero(), wh[0], P::word(xb + 16));
#pragma GCC unroll 4
      for (size_t k = 1; k < 4; ++k) {
        i0 = P::dot(i0, wl[k], P::word(xb + 4 * k));
        i1 = P::dot(i1, wh[k], P::word(xb + 16 + 4 * k));
      }
      const V isum = P::add(i0, i1);
      const float dx = x.d[b * x.stride + t];
      const int32_t s = x.s[b * x.stride + t];
      if constexpr (kMin) {
        const F inner = P::add(P::mul(dw, P::cvt(isum)), P::mul(mw, P::set(static_cast<float>(s))));
        acc[t] = P::add(acc[t], P::mul(P::set(dx), inner));
      } else {
        acc[t] = P::add(acc[t], P::mul(P::mul(dw, P::set(dx)), P::cvt(P::sub(isum, P::set32(kOffset * s)))));
      }
    }
  }
#pragma GCC unroll 16
  for (size_t t = 0; t < TG; ++t) acc_out[t] = acc[t];
}

// The packed product (MatmulPackedFn) of the K types and the 32-blocks on policy P: whole
// groups by the kernels above, the rows of a partial last group by the scalar reference
// (bitwise the same).
template <class P, WeightType kType>
void matmul_packed_k(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& a, float* y,
                     size_t stride, size_t row_begin, size_t row_end) {
  const WeightTypeInfo& info = weight_type_info(kType);
  const size_t nsb = a.cols / info.block_elems, row_bytes = nsb * info.block_bytes;
  // Q6_K / Q3_K: -kSub16Bias * each sub-block's activation sum (laid out as a.s16), where the
  // sub16 kernel starts its sums: one vector broadcast per sum instead of a scalar product.
  const int32_t* bias_sums = nullptr;
  if constexpr (kType == WeightType::Q6_K || kType == WeightType::Q3_K) {
    thread_local std::vector<int32_t> sums;
    sums.resize(a.s16.size());
    for (size_t i = 0; i < sums.size(); ++i) sums[i] = -kSub16Bias<kType> * a.s16[i];
    bias_sums = sums.data();
  }
  // Q8_0 without full_bytes: whether an activation is -128 (signed_bytes_block).
  bool any_min = false;
  if constexpr (kType == WeightType::Q8_0 && !P::full_bytes) any_min = a.any_min();
  const auto group = [&](auto tg, const uint8_t* g, size_t part, size_t t0, typename P::F* acc) {
    constexpr size_t TG = decltype(tg)::value;
    const KTokens<TG> x(a, t0);
    const size_t ahead = a.n == 1                      ? kDecodePrefetchAhead<kType>
                         : a.n <= kSmallPrefetchTokens ? kSmallPrefetchAhead
                                                       : kPrefetchAhead;
    if constexpr (kType == WeightType::Q4_K)
      q4_k_group<P, TG>(g, part, nsb, x, acc, ahead);
    else if constexpr (kType == WeightType::Q5_K)
      q4_k_group<P, TG, true>(g, part, nsb, x, acc, ahead);
    else if constexpr (kType == WeightType::Q6_K || kType == WeightType::Q3_K)
      sub16_group<P, TG, kType>(g, part, nsb, x, bias_sums + t0, acc, ahead);
    else
      block32_group<P, TG, kType>(g, part, nsb, x, acc, ahead, any_min);
  };
  const auto rest = [&](size_t begin, size_t end) {
    scalar_table().matmul_quantized[kType](w, bias, a, y, stride, begin, end);
  };
  packed_product<P>(w, row_bytes, w_rows, bias, a, y, stride, row_begin, row_end, group, rest);
}

// This header's packed products on policy P: the entries a tier's file gives its table.
template <class P>
constexpr ByType<MatmulPackedFn> packed_k_products() {
  return {.q4_1 = matmul_packed_k<P, WeightType::Q4_1>,
          .q5_0 = matmul_packed_k<P, WeightType::Q5_0>,
          .q5_1 = matmul_packed_k<P, WeightType::Q5_1>,
          .q4_k = matmul_packed_k<P, WeightType::Q4_K>,
          .q5_k = matmul_packed_k<P, WeightType::Q5_K>,
          .q6_k = matmul_packed_k<P, WeightType::Q6_K>,
          .q3_k = matmul_packed_k<P, WeightType::Q3_K>};
}

}  // namespace
}  // namespace nanoinfer::kernels
