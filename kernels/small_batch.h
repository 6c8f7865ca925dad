// The AVX-512 float products of a few tokens (2 .. kMaxTokens: speculative verification,
// serve's batched decode), one driver for the widened bf16 product (kernels_avx512.cpp) and
// the vdpbf16ps one (kernels_avx512_bf16.cpp). Decode is
// memory-bound and so is a pass of a few tokens: each weight should come from memory once for
// all of them, while the memory stream keeps going. So a register tile is R rows by every token
// of a group (at most kGroupTokens; more tokens are two groups, the second reading the tile's
// weights again from L1), and each tile asks for the weights ahead of it as it goes, as decode
// asks for its rows' (kL1Ahead below). The prefill tiles (kernels/prefill_driver.h) instead read a strip's weights from
// memory in their first token tile only and compute the others from cache, with the stream waiting meanwhile.
//
// A policy P supplies
//   W, X: the weights' and the activations' element types; V: a vector of either as the
//   product takes it; Tree: the tier's transposing tree (kernels/tile_sums.h);
//   kStep: elements per vector; load_w(p), load_x(p), and load_w_tail(p, n), load_x_tail(p, n)
//   with zeros past n < kStep; madd(acc, w, x): the tier's multiply-add; ask_l1(T): whether a
//   tile of T tokens also asks for its own rows' lines kL1Ahead bytes on into L1 (below);
//   kG: the weights' layout (kernels/weight_layout.h: 1 for rows one after another);
//   rows(T): the rows of a tile for T tokens (rows_for below, or a layout's own);
//   kGroupTokens: the most tokens in one group (n_tokens <= 2 * kGroupTokens).
// Every accumulator runs its reference's chain (steps in ascending order, then the tail, then
// the tree, then + bias), so the results are bitwise those of the tier's other tiles.
// Include only from AVX-512 translation units: everything here has internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <utility>

#include "kernels/tile_sums.h"
#include "kernels/weight_layout.h"

namespace nanoinfer::kernels {
namespace {
namespace small_batch {

inline constexpr size_t kMaxTokens = 16, kGroupTokens = 8;

// How far ahead a tile asks for weights: into L2 two tiles on (2R rows ahead, the same columns),
// and (P::ask_l1(T)) into L1 kL1Ahead bytes on in its own rows. On Zen 5 (2 threads, the 0.5B's
// bf16 passes of 2-8 rows, alternated): ~1.07-1.20 decode steps, against 1.13-1.25 with L2 one
// tile on alone or into L1 one tile on, and 1.4-2.8 with no software prefetch. f32 weights come
// twice as fast for the same work per line, and there the L1 requests cost more than they gave.
inline constexpr size_t kL1Ahead = 512;

// Rows of a tile for T tokens: R * T accumulators, the activation vectors of the T tokens and
// one weight vector (R > T: each row's weights are loaded once and meet every token) or the
// weight vectors of the R rows and one activation vector (R <= T), within the 32 zmm registers.
// The more rows, the more weight streams in flight. On Zen 5 (2 threads, the 0.5B's bf16 passes,
// `bench generate --rows-curve`, three alternated rounds on a host whose decode step was
// 24-29 ms), in decode steps: 3 tokens 1.07-1.12 against 1.10-1.17 with 6 rows, 4 tokens
// 1.06-1.14 against 1.08-1.18 with 4 rows, 8 tokens 1.12-1.19 against 1.17-1.22 (the host's
// noise is as large as the difference).
constexpr size_t rows_for(size_t tokens) {
  return tokens <= 3 ? 8 : tokens == 4 ? 6 : tokens == 5 ? 5 : tokens == 6 ? 4 : 3;
}

// The R x T tile at rows r0.., tokens t0.. (x at token t0's row, rows x_stride apart);
// `ahead`: prefetch the weights ahead (the first token group of a tile only).
template <class P, size_t R, size_t T>
void tile(const typename P::W* w, const float* bias, const typename P::X* x, size_t x_stride, float* y, size_t rows,
          size_t cols, size_t r0, size_t t0, bool ahead) {
  static_assert(R * T + (R < T ? R : T) + 1 <= 32, "the tile fits the 32 zmm registers");
  constexpr size_t S = P::kStep;
  __m512 acc[R * T];
#pragma GCC unroll 32
  for (size_t e = 0; e < R * T; ++e) acc[e] = _mm512_setzero_ps();
  const typename P::W* wr[R];
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) wr[r] = row_start<P::kG>(w, r0 + r, cols);
  const size_t next = R * cols, body = cols - cols % S;  // next: elements to the next tile's rows
  for (size_t c = 0; c < body; c += S) {
    const size_t o = col_offset<P::kG, S, typename P::W>(c);  // column c's offset along a row
    if constexpr (R > T) {
      typename P::V xv[T];
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) xv[t] = P::load_x(x + t * x_stride + c);
#pragma GCC unroll 16
      for (size_t r = 0; r < R; ++r) {
        if (ahead) {
          _mm_prefetch(reinterpret_cast<const char*>(wr[r] + 2 * next + o), _MM_HINT_T1);
          if constexpr (P::ask_l1(T)) _mm_prefetch(reinterpret_cast<const char*>(wr[r] + o) + kL1Ahead, _MM_HINT_T0);
        }
        typename P::V wv = P::load_w(wr[r] + o);
        // Held in a register: GCC would otherwise fold the load into each of the T products.
        asm("" : "+v"(wv));
#pragma GCC unroll 8
        for (size_t t = 0; t < T; ++t) acc[t * R + r] = P::madd(acc[t * R + r], wv, xv[t]);
      }
    } else {
      typename P::V wv[R];
#pragma GCC unroll 16
      for (size_t r = 0; r < R; ++r) {
        if (ahead) {
          _mm_prefetch(reinterpret_cast<const char*>(wr[r] + 2 * next + o), _MM_HINT_T1);
          if constexpr (P::ask_l1(T)) _mm_prefetch(reinterpret_cast<const char*>(wr[r] + o) + kL1Ahead, _MM_HINT_T0);
        }
        wv[r] = P::load_w(wr[r] + o);
      }
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) {
        const typename P::V xv = P::load_x(x + t * x_stride + c);
#pragma GCC unroll 16
        for (size_t r = 0; r < R; ++r) acc[t * R + r] = P::madd(acc[t * R + r], wv[r], xv);
      }
    }
  }
  if (body < cols) {
    const size_t n = cols - body;
    typename P::V wv[R];
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) wv[r] = P::load_w_tail(wr[r] + col_offset<P::kG, S, typename P::W>(body), n);
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) {
      const typename P::V xv = P::load_x_tail(x + t * x_stride + body, n);
#pragma GCC unroll 16
      for (size_t r = 0; r < R; ++r) acc[t * R + r] = P::madd(acc[t * R + r], wv[r], xv);
    }
  }
  tile_sums::store_sums<typename P::Tree, R, T>(acc, bias, y, rows, r0, t0);
}

// Rows [r, r + R) for every token: one group of T tokens, or two (T, then T or T - 1).
template <class P, size_t R, size_t T>
inline void tokens_of(const typename P::W* w, const float* bias, const typename P::X* x, size_t x_stride, float* y,
                      size_t rows, size_t cols, size_t n_tokens, size_t r) {
  tile<P, R, T>(w, bias, x, x_stride, y, rows, cols, r, 0, true);
  if (n_tokens == T) return;
  if (n_tokens == 2 * T) {
    tile<P, R, T>(w, bias, x + T * x_stride, x_stride, y, rows, cols, r, T, false);
  } else if constexpr (T > 1) {
    tile<P, R, T - 1>(w, bias, x + T * x_stride, x_stride, y, rows, cols, r, T, false);
  }
}

template <class P, size_t T>
void matmul_groups(const typename P::W* w, const float* bias, const typename P::X* x, size_t x_stride, float* y,
                   size_t rows, size_t cols, size_t n_tokens, size_t row_begin, size_t row_end) {
  constexpr size_t R = P::rows(T);
  size_t r = row_begin;
  for (; r + R <= row_end; r += R) tokens_of<P, R, T>(w, bias, x, x_stride, y, rows, cols, n_tokens, r);
  for (; r < row_end; ++r) tokens_of<P, 1, T>(w, bias, x, x_stride, y, rows, cols, n_tokens, r);
}

// y = W x + bias for rows [row_begin, row_end) and 2 <= n_tokens <= 2 * P::kGroupTokens tokens (x:
// token t's row at x + t * x_stride).
template <class P>
void matmul(const typename P::W* w, const float* bias, const typename P::X* x, size_t x_stride, float* y, size_t rows,
            size_t cols, size_t n_tokens, size_t row_begin, size_t row_end) {
  // Tokens in one group, or two of sizes T and n_tokens - T (T or T - 1).
  const size_t t = n_tokens <= P::kGroupTokens ? n_tokens : (n_tokens + 1) / 2;
  [&]<size_t... I>(std::index_sequence<I...>) {  // t = I + 2: 2 .. P::kGroupTokens
    ((t == I + 2 ? (matmul_groups<P, I + 2>(w, bias, x, x_stride, y, rows, cols, n_tokens, row_begin, row_end), 0) : 0),
     ...);
  }
  (std::make_index_sequence<P::kGroupTokens - 1>{});
}

}  // namespace small_batch
}  // namespace
}  // namespace nanoinfer::kernels
