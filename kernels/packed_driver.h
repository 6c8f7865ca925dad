// The driver of every packed product (kernels/quant_blocks.h: whole groups of kPackRows = 16
// rows interleaved block by block), and the vector policies its kernels are written against.
// Include only from *_avx2*.cpp / *_avx512*.cpp files: everything here has internal linkage
// (see simd_kernels.h for why).
//
// A policy P supplies the vector types and operations of one ISA family:
//   V (int32 lanes), F (float lanes); lanes: the rows one vector covers; parts = 16 / lanes:
//   a 16-row group is computed as `parts` slices of `lanes` rows (AVX2: two slices of 8 rows,
//   the low and high 32 bytes of each 64-byte vector of the layout); prefill_tokens: tokens
//   per kernel call in prefill (at most small_tokens: a block's last call takes the tokens
//   left, at a count the small batches also run); small_tokens: the most tokens per kernel
//   call in a small batch (up to kPackedSmallBatch tokens: speculative verification, serve's
//   batched decode), whose token groups are sized to the batch, so each group's weights are
//   decoded once for as many tokens as the registers hold, and no work goes to the padding
//   tokens of the activations' layout;
//   full_bytes: whether dot is exact for unsigned bytes up to 255 (VNNI), as Q8_0's words need;
//   without, dot_signed, abs8, xor_ and sll32 (PackedYmm<false>).
// Each lane is one (row, token) pair and runs the scalar reference's steps, so a slice's
// width, the split into slices and the order of slices never change a result's bits.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"

namespace nanoinfer::kernels {
namespace {

#ifdef __AVX512F__
// 16 lanes: a whole group per vector. vpdpbusd needs AVX512-VNNI (the *_avx512_vnni.cpp files).
struct PackedZmm {
  using V = __m512i;
  using F = __m512;
  // Prefill in groups of 8 tokens, not 4: each group's weights decoded once for twice the tokens.
  // On Zen 5 (2 threads, `bench generate -p 64 -n 1 -r 3`, alternated): Q4_K_M pp64 1016-1049 ->
  // 1135-1162 tokens/s (3 rounds), pp512 886-921 -> 985-996; Q3_K pp64 658-687 -> 648-758; int4
  // pp64 medians of 7 rounds 1064 -> 1120, pp512 1022-1081 -> 1078-1131; Q6_K 971-1022 ->
  // 1010-1029; int8 alike (1030-1060 against 1008-1059).
  static constexpr size_t lanes = 16, parts = 1, prefill_tokens = 8, small_tokens = 8;
  static constexpr bool full_bytes = true;  // dot: exact for any unsigned byte (vpdpbusd)

  static V zero() { return _mm512_setzero_si512(); }
  static F zero_f() { return _mm512_setzero_ps(); }
  static V load(const uint8_t* p) { return _mm512_loadu_si512(p); }  // 4 bytes per lane
  static V set8(char v) { return _mm512_set1_epi8(v); }
  static V set32(int32_t v) { return _mm512_set1_epi32(v); }
  static V word(const int8_t* x) {  // one activation word broadcast to every lane
    int32_t v;
    std::memcpy(&v, x, sizeof v);
    return _mm512_set1_epi32(v);
  }
  static V and_(V a, V b) { return _mm512_and_si512(a, b); }
  static V or_(V a, V b) { return _mm512_or_si512(a, b); }
  template <int n>
  static V srl16(V a) {
    return _mm512_srli_epi16(a, n);
  }
  template <int n>
  static V sll16(V a) {
    return _mm512_slli_epi16(a, n);
  }
  static V srl16(V a, int n) { return _mm512_srl_epi16(a, _mm_cvtsi32_si128(n)); }
  static V add(V a, V b) { return _mm512_add_epi32(a, b); }
  static V sub(V a, V b) { return _mm512_sub_epi32(a, b); }
  static V mullo(V a, V b) { return _mm512_mullo_epi32(a, b); }
#ifdef __AVX512VNNI__
  // acc + the sums of 4 products u8 x s8 per lane, exact.
  static V dot(V acc, V u, V s) {
    return _mm512_dpbusd_epi32(acc, u, s);
  }
#endif
  static F cvt(V a) {
    return _mm512_cvtepi32_ps(a);
  }
  static F add(F a, F b) {
    return _mm512_add_ps(a, b);
  }
  static F sub(F a, F b) {
    return _mm512_sub_ps(a, b);
  }
  static F mul(F a, F b) {
    return _mm512_mul_ps(a, b);
  }
  static F set(float v) {
    return _mm512_set1_ps(v);
  }
  static F f16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m128i bytes(const uint8_t* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  }
  static F u8f(__m128i b) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b));
  }
  static V i8(__m128i b) {
    return _mm512_cvtepi8_epi32(b);
  }
  static void store(float* out, F v) {
    _mm512_storeu_ps(out, v);
  }
  static F load_f(const float* p) {
    return _mm512_loadu_ps(p);
  }
};
#endif

#ifdef __AVX2__
// 8 lanes: a group is two slices (rows 0-7, rows 8-15). With kVnni, AVX-VNNI's 256-bit
// vpdpbusd (the *_avx2_vnni.cpp files); without, vpmaddubsw + vpmaddwd, exact whenever a pair
// of products fits int16: the K kernels' unsigned weights are at most 63 and |x| <= 128, so a
// pair is at most 2 * 63 * 128 = 16128.
template <bool kVnni>
struct PackedYmm {
  using V = __m256i;
  using F = __m256;
  // 4 tokens per call, prefill and small batch alike. On Zen 5 (`--isa avx2` / `avx2-vnni`, 2
  // threads, two alternated rounds against 2 tokens per call): pp64 q4_k (synthetic Qwen3-0.6B)
  // 343-373 -> 453-472 tokens/s, int8 490-512 -> 574-621, int4 421-445 -> 472-484; a pass of 3-4
  // rows at q4_k 15.5-18.6 -> 13.5-15.8 ms, of 8 rows at q3_k 44.5-45.5 -> 34.4-37.8. 8 tokens
  // per small-batch call spilled: q4_k's 8-row pass slower (25.0-26.0 -> 26.9-27.5 ms).
  static constexpr size_t lanes = 8, parts = 2, prefill_tokens = 4, small_tokens = 4;
  static constexpr bool full_bytes = kVnni;  // vpmaddubsw's pairs would saturate: dot_signed instead

  static V zero() { return _mm256_setzero_si256(); }
  static F zero_f() { return _mm256_setzero_ps(); }
  static V load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static V set8(char v) { return _mm256_set1_epi8(v); }
  static V set32(int32_t v) { return _mm256_set1_epi32(v); }
  static V word(const int8_t* x) {
    int32_t v;
    std::memcpy(&v, x, sizeof v);
    return _mm256_set1_epi32(v);
  }
  static V and_(V a, V b) { return _mm256_and_si256(a, b); }
  static V or_(V a, V b) { return _mm256_or_si256(a, b); }
  template <int n>
  static V srl16(V a) {
    return _mm256_srli_epi16(a, n);
  }
  template <int n>
  static V sll16(V a) {
    return _mm256_slli_epi16(a, n);
  }
  static V srl16(V a, int n) { return _mm256_srl_epi16(a, _mm_cvtsi32_si128(n)); }
  static V add(V a, V b) { return _mm256_add_epi32(a, b); }
  static V sub(V a, V b) { return _mm256_sub_epi32(a, b); }
  static V mullo(V a, V b) { return _mm256_mullo_epi32(a, b); }
  // acc + the sums of 4 products of signed bytes q and x per lane, exact (|q|, |x| <= 128): the
  // signs of q moved onto x (vpsignb), so vpmaddubsw's pairs stay within int16. a = |q|.
  static V dot_signed(V acc, V a, V q, V x) {
    return _mm256_add_epi32(acc,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(x, q)), _mm256_set1_epi16(1)));
  }
  static V abs8(V q) { return _mm256_abs_epi8(q); }
  template <int n>
  static V sll32(V a) {
    return _mm256_slli_epi32(a, n);
  }
  static V xor_(V a, V b) { return _mm256_xor_si256(a, b); }
  static V dot(V acc, V u, V s) {
    if constexpr (kVnni) {
#ifdef __AVXVNNI__
      return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
      static_assert(!kVnni, "the VNNI policy needs a file compiled with -mavxvnni (*_avx2_vnni.cpp)");
      return acc;
#endif
    } else {
      return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
    }
  }
  static F cvt(V a) {
    return _mm256_cvtepi32_ps(a);
  }
  static F add(F a, F b) {
    return _mm256_add_ps(a, b);
  }
  static F sub(F a, F b) {
    return _mm256_sub_ps(a, b);
  }
  static F mul(F a, F b) {
    return _mm256_mul_ps(a, b);
  }
  static F set(float v) {
    return _mm256_set1_ps(v);
  }
  static F f16(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m128i bytes(const uint8_t* p) {
    return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  }
  static F u8f(__m128i b) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
  }
  static V i8(__m128i b) {
    return _mm256_cvtepi8_epi32(b);
  }
  static void store(float* out, F v) {
    _mm256_storeu_ps(out, v);
  }
  static F load_f(const float* p) {
    return _mm256_loadu_ps(p);
  }
};
#endif

// How far ahead of its loads a packed kernel asks for the weights' cache lines (bytes). A
// decode step streams each group once; the prefetch keeps more lines in flight than the
// hardware prefetcher alone does while the core is busy with the products. 4 KiB: on Zen 5
// (2 threads, synth15-Q4_K_M / Q5_K_M decode, 3 alternating rounds; docs/PERFORMANCE.md)
// its median tg32 beat 1, 2 and 3 KiB's on both files; 1 KiB was the slowest.
constexpr size_t kPrefetchAhead = 4096;
// The K types' and Q4_1 / Q5_0 / Q5_1's products of 2 .. kSmallPrefetchTokens tokens ask twice
// as far ahead: their products run longer per byte than decode's, and the lines must arrive
// while they run. On Zen 5 (one thread, a 3072x1024 Q4_K product streamed from memory, the
// minimum of 11 runs, three alternated rounds): 2-4 tokens ~5-15% faster with 8 KiB than with
// 4 KiB; 8 tokens, compute-bound, ~3% slower (16 KiB: alike at 2-4, slower at 8). In the
// synthetic Qwen3-0.6B's passes of 2-4 rows at 2 threads (`bench generate --dtype q4_k
// --rows-curve`, three alternated rounds) the difference stayed within the host's noise.
constexpr size_t kSmallPrefetchAhead = 8192, kSmallPrefetchTokens = 4;
// Q3_K's decode asks as far ahead too: its 3-bit words take the most work per byte of any
// type, so one token's product also runs long per byte. On Zen 5, one thread, a 32768x4096
// Q3_K product streamed from memory, minimum of 15 runs, two rounds: 2.68 ms with 4 KiB, 1.78-1.88
// with 8 KiB; at 2 threads, the synthetic Qwen3-0.6B, `bench generate -p 16 -n 32`, six
// alternated rounds: all-Q3_K 107-115 -> 119-128 tokens/s, with an int8 logits matrix 93-94 ->
// 96-98; on the AVX2 tiers (`--isa avx2-vnni` / `avx2`, three rounds) 74-79 -> 78-82 and 70-76 ->
// 73-79. Q4_K and Q6_K decode gained nothing from 8 KiB at 2 threads (Q4_K 91-96 against 93-95).
template <WeightType kType>
constexpr size_t kDecodePrefetchAhead = kType == WeightType::Q3_K ? kSmallPrefetchAhead : kPrefetchAhead;
inline void prefetch(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

// Token blocks bound the activations re-read for every row group, so they stay in L2 while
// the weights stream from memory once per block.
constexpr size_t kPackedTokenBlock = 64;

// The most tokens of a small batch (see the policies' small_tokens).
constexpr size_t kPackedSmallBatch = 16;

// f(std::integral_constant<size_t, n>{}) for the count 1 <= n <= N.
template <size_t N, class F>
inline void with_token_count(size_t n, F&& f) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((n == I + 1 ? (f(std::integral_constant<size_t, I + 1>{}), 0) : 0), ...);
  }
  (std::make_index_sequence<N>{});
}

// The packed product (MatmulPackedFn) over rows [row_begin, row_end): whole groups by
// `group`, the rows of a partial last group (left as they were, kernels/quant_blocks.h) by
// `rest(begin, end)`. group(std::integral_constant<size_t, TG>, g, part, t0, acc) adds to
// acc[t] (t < TG) the sums of slice `part` of the group at g for token t0 + t.
template <class P, class Group, class Rest>
void packed_product(const std::byte* w, size_t row_bytes, size_t w_rows, const float* bias,
                    const QuantizedActivations& a, float* y, size_t stride, size_t row_begin, size_t row_end,
                    const Group& group, const Rest& rest) {
  static_assert(P::lanes * P::parts == kPackRows && P::prefill_tokens <= P::small_tokens);
  static_assert(kPackedTokenBlock % kQuantTokenGroup == 0);
  if (row_begin >= row_end || a.n == 0) return;
  const size_t packed_end = w_rows / kPackRows * kPackRows;
  const size_t group_end = std::min(row_end, packed_end);
  // The slice's sums for token t, stored for the rows of the range: a slice inside it in one
  // vector (+ bias, the same one rounding per row as the scalar path's).
  const auto store = [&](size_t r0, size_t t, typename P::F sums) {
    if (r0 >= row_begin && r0 + P::lanes <= group_end) {
      P::store(y + t * stride + r0, bias ? P::add(P::load_f(bias + r0), sums) : sums);
      return;
    }
    alignas(64) float out[P::lanes];
    P::store(out, sums);
    for (size_t j = 0; j < P::lanes; ++j) {
      const size_t r = r0 + j;
      if (r >= row_begin && r < group_end) y[t * stride + r] = bias ? bias[r] + out[j] : out[j];
    }
  };
  // Whether slice `part` of the group at r0 has a row in the range.
  const auto wanted = [&](size_t r0, size_t part) {
    return r0 + P::lanes * part < group_end && r0 + P::lanes * (part + 1) > row_begin;
  };
  const size_t first_group = row_begin / kPackRows * kPackRows;
  if (a.n == 1) {
    for (size_t r0 = first_group; r0 < group_end; r0 += kPackRows) {
      const auto* g = reinterpret_cast<const uint8_t*>(w + r0 * row_bytes);
      for (size_t part = 0; part < P::parts; ++part) {
        if (!wanted(r0, part)) continue;
        typename P::F acc = P::zero_f();
        group(std::integral_constant<size_t, 1>{}, g, part, 0, &acc);
        store(r0 + P::lanes * part, 0, acc);
      }
    }
  } else if (a.n <= kPackedSmallBatch) {
    // Groups of near-equal size, each at most P::small_tokens.
    const size_t groups = (a.n + P::small_tokens - 1) / P::small_tokens, per = (a.n + groups - 1) / groups;
    for (size_t r0 = first_group; r0 < group_end; r0 += kPackRows) {
      const auto* g = reinterpret_cast<const uint8_t*>(w + r0 * row_bytes);
      for (size_t part = 0; part < P::parts; ++part) {
        if (!wanted(r0, part)) continue;
        for (size_t t0 = 0; t0 < a.n; t0 += per) {
          with_token_count<P::small_tokens>(std::min(per, a.n - t0), [&](auto tg) {
            constexpr size_t TG = decltype(tg)::value;
            typename P::F acc[TG];
#pragma GCC unroll 16
            for (size_t t = 0; t < TG; ++t) acc[t] = P::zero_f();
            group(tg, g, part, t0, acc);
            for (size_t t = 0; t < TG; ++t) store(r0 + P::lanes * part, t0 + t, acc[t]);
          });
        }
      }
    }
  } else {
    constexpr size_t TG = P::prefill_tokens;
    for (size_t tb = 0; tb < a.n; tb += kPackedTokenBlock) {
      const size_t te = std::min(tb + kPackedTokenBlock, a.n);
      for (size_t r0 = first_group; r0 < group_end; r0 += kPackRows) {
        const auto* g = reinterpret_cast<const uint8_t*>(w + r0 * row_bytes);
        for (size_t part = 0; part < P::parts; ++part) {
          if (!wanted(r0, part)) continue;
          // Groups of TG tokens, then one of the tokens left (fewer: no padding token computed).
          for (size_t t0 = tb; t0 < te; t0 += TG) {
            with_token_count<TG>(std::min(TG, te - t0), [&](auto tg) {
              constexpr size_t N = decltype(tg)::value;
              typename P::F acc[N];
#pragma GCC unroll 16
              for (size_t t = 0; t < N; ++t) acc[t] = P::zero_f();
              group(tg, g, part, t0, acc);
              for (size_t t = 0; t < N; ++t) store(r0 + P::lanes * part, t0 + t, acc[t]);
            });
          }
        }
      }
    }
  }
  if (row_end > packed_end) rest(std::max(row_begin, packed_end), row_end);
}

}  // namespace
}  // namespace nanoinfer::kernels
