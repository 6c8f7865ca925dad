// Kernel bodies shared by the per-ISA translation units, written once against an `Ops`
// policy (kernels_avx2.cpp, kernels_avx512.cpp) that supplies the xsimd batch type and the few
// operations xsimd 8.1 lacks. Include only from those files: everything here has internal
// linkage, so the AVX-512 build of a function can never be merged by the linker into the
// AVX2 table (inline functions with external linkage would be, and would fault on AVX2-only
// CPUs).
//
// Ops must provide:
//   using batch = xsimd::batch<float, Arch>;  static constexpr size_t width;
//   static constexpr size_t row_tile, token_tile, decode_rows;   // register tile shapes
//   batch load(const float*), load(const uint16_t*)               // bf16 widened exactly
//   batch load_tail(const float*, size_t n), load_tail(const uint16_t*, size_t n)  // n < width, rest 0
//   batch fma(batch a, batch b, batch c)                          // a*b+c, one rounding
//   float reduce(batch)                                           // fixed lane order
#pragma once

#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/weight_layout.h"

namespace nanoinfer::kernels {
namespace {

// One register tile: R rows by T tokens, each (row, token) one accumulator. The columns are
// consumed in steps of `width` in ascending order, then the zero-padded tail, then one fixed
// lane reduction and the bias: exactly the same operations for an element whatever R and T
// are, which is what makes results independent of tiling, threads and batch size.
// kAhead (the small-batch tiles, below): each row asks for its line kSmallL1Ahead bytes on into
// L1, and for the same columns of the rows two tiles on into L2, as the tile goes.
// G: the weights' layout (kernels/weight_layout.h).
inline constexpr size_t kSmallL1Ahead = 512;

template <class Ops, size_t R, size_t T, class WT, bool kAhead = false, size_t G = 1>
inline void matmul_tile(const WT* w, const float* bias, const float* x, float* y, size_t rows, size_t cols, size_t r0,
                        size_t t0) {
  using B = typename Ops::batch;
  constexpr size_t W = Ops::width;
  B acc[R][T];
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (size_t t = 0; t < T; ++t) acc[r][t] = B(0.0f);

  const WT* wr[R];
  const float* xt[T];
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) wr[r] = row_start<G>(w, r0 + r, cols);
#pragma GCC unroll 16
  for (size_t t = 0; t < T; ++t) xt[t] = x + (t0 + t) * cols;

  const size_t body = cols - cols % W;
  constexpr size_t kLine = kLineElems<WT>;  // elements per cache line
  for (size_t c = 0; c < body; c += W) {
    const size_t o = col_offset<G, W, WT>(c);  // column c's offset along a row
    B xv[T];
#pragma GCC unroll 16
    for (size_t t = 0; t < T; ++t) xv[t] = Ops::load(xt[t] + c);
    if constexpr (kAhead) {
      if (c % kLine == 0) {
#pragma GCC unroll 16
        for (size_t r = 0; r < R; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(wr[r] + o) + kSmallL1Ahead, _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(wr[r] + 2 * R * cols + o), _MM_HINT_T1);
        }
      }
    }
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      const B wv = Ops::load(wr[r] + o);
#pragma GCC unroll 16
      for (size_t t = 0; t < T; ++t) acc[r][t] = Ops::fma(wv, xv[t], acc[r][t]);
    }
  }
  if (body < cols) {
    const size_t n = cols - body;
    B xv[T];
#pragma GCC unroll 16
    for (size_t t = 0; t < T; ++t) xv[t] = Ops::load_tail(xt[t] + body, n);
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      const B wv = Ops::load_tail(wr[r] + col_offset<G, W, WT>(body), n);
#pragma GCC unroll 16
      for (size_t t = 0; t < T; ++t) acc[r][t] = Ops::fma(wv, xv[t], acc[r][t]);
    }
  }

#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (size_t t = 0; t < T; ++t) {
      const float s = Ops::reduce(acc[r][t]);
      y[(t0 + t) * rows + r0 + r] = bias ? bias[r0 + r] + s : s;
    }
}

// Tokens [t_begin, t_end) for one strip of R rows: full token tiles, then one narrower tile.
template <class Ops, size_t R, class WT>
inline void matmul_strip(const WT* w, const float* bias, const float* x, float* y, size_t rows, size_t cols, size_t r0,
                         size_t t_begin, size_t t_end) {
  constexpr size_t T = Ops::token_tile;
  static_assert(T >= 1 && T <= 8);
  size_t t = t_begin;
  for (; t + T <= t_end; t += T) matmul_tile<Ops, R, T>(w, bias, x, y, rows, cols, r0, t);
  switch (t_end - t) {
    case 0:
      break;
    case 1:
      matmul_tile<Ops, R, 1>(w, bias, x, y, rows, cols, r0, t);
      break;
    case 2:
      if constexpr (T > 2) matmul_tile<Ops, R, 2>(w, bias, x, y, rows, cols, r0, t);
      break;
    case 3:
      if constexpr (T > 3) matmul_tile<Ops, R, 3>(w, bias, x, y, rows, cols, r0, t);
      break;
    case 4:
      if constexpr (T > 4) matmul_tile<Ops, R, 4>(w, bias, x, y, rows, cols, r0, t);
      break;
    case 5:
      if constexpr (T > 5) matmul_tile<Ops, R, 5>(w, bias, x, y, rows, cols, r0, t);
      break;
    case 6:
      if constexpr (T > 6) matmul_tile<Ops, R, 6>(w, bias, x, y, rows, cols, r0, t);
      break;
    case 7:
      if constexpr (T > 7) matmul_tile<Ops, R, 7>(w, bias, x, y, rows, cols, r0, t);
      break;
    default:
      break;
  }
}

// Token blocks bound the slice of x that is re-read for every row strip, so it stays in L2:
// the weights are read from memory once per block, the activations from cache.
constexpr size_t kTokenBlock = 64;

// Decode: one token, so interleave more rows to keep independent chains and memory streams in
// flight (weights in layout G).
template <class Ops, size_t G = 1, class WT>
void decode(const WT* w, const float* bias, const float* x, float* y, size_t rows, size_t cols, size_t row_begin,
            size_t row_end) {
  constexpr size_t R = Ops::decode_rows;
  size_t r = row_begin;
  for (; r + R <= row_end; r += R) matmul_tile<Ops, R, 1, WT, false, G>(w, bias, x, y, rows, cols, r, 0);
  for (; r < row_end; ++r) matmul_tile<Ops, 1, 1, WT, false, G>(w, bias, x, y, rows, cols, r, 0);
}

template <class Ops, class WT>
void matmul(const WT* w, const float* bias, const float* x, float* y, size_t rows, size_t cols, size_t n_tokens,
            size_t row_begin, size_t row_end) {
  if (n_tokens == 1) {
    decode<Ops>(w, bias, x, y, rows, cols, row_begin, row_end);
    return;
  }
  constexpr size_t R = Ops::row_tile;
  for (size_t tb = 0; tb < n_tokens; tb += kTokenBlock) {
    const size_t te = tb + kTokenBlock < n_tokens ? tb + kTokenBlock : n_tokens;
    size_t r = row_begin;
    for (; r + R <= row_end; r += R) matmul_strip<Ops, R>(w, bias, x, y, rows, cols, r, tb, te);
    for (; r < row_end; ++r) matmul_strip<Ops, 1>(w, bias, x, y, rows, cols, r, tb, te);
  }
}

// Small batches (2 .. kSmallBatchTokens tokens: speculative verification, serve's batched
// decode) are memory-bound like decode: each weight should come from memory once for all the
// tokens while the memory stream keeps going. Tokens go in groups of near-equal size, at most
// Ops::small_tokens, and each tile of rows runs every group before the next tile: the first
// group's tile reads its rows from memory (asking for the lines ahead), the others from cache.
// Ops::small_rows(T): the rows of a tile for groups of at most T tokens. The tiles are
// matmul_tile, so every result is bitwise that of the other paths.
inline constexpr size_t kSmallBatchTokens = 16;

template <class Ops, size_t R, size_t T, class WT>
inline void small_groups(const WT* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                         size_t n_tokens, size_t r) {
  size_t t0 = 0;
  const size_t groups = (n_tokens + T - 1) / T;
  for (size_t g = 0; g < groups; ++g) {
    const size_t size = (n_tokens - t0) / (groups - g) + ((n_tokens - t0) % (groups - g) != 0 ? 1 : 0);
    // size is T or T - 1 (the groups' sizes differ by at most one, the larger first); only the
    // first group, which reads the rows from memory, asks for the lines ahead.
    if (g == 0)
      matmul_tile<Ops, R, T, WT, true>(w, bias, x, y, rows, cols, r, t0);
    else if (size == T)
      matmul_tile<Ops, R, T, WT>(w, bias, x, y, rows, cols, r, t0);
    else if constexpr (T > 1)
      matmul_tile<Ops, R, T - 1, WT>(w, bias, x, y, rows, cols, r, t0);
    t0 += size;
  }
}

template <class Ops, size_t T, class WT>
void small_rows(const WT* w, const float* bias, const float* x, float* y, size_t rows, size_t cols, size_t n_tokens,
                size_t row_begin, size_t row_end) {
  constexpr size_t R = Ops::small_rows(T);
  size_t r = row_begin;
  for (; r + R <= row_end; r += R) small_groups<Ops, R, T>(w, bias, x, y, rows, cols, n_tokens, r);
  for (; r < row_end; ++r) small_groups<Ops, 1, T>(w, bias, x, y, rows, cols, n_tokens, r);
}

// y = W x + bias for 2 <= n_tokens <= kSmallBatchTokens (MatmulFn's conventions, weights WT).
template <class Ops, class WT>
void matmul_small(const std::byte* w_bytes, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                  size_t n_tokens, size_t row_begin, size_t row_end) {
  constexpr size_t G = Ops::small_tokens;
  static_assert(G >= 2 && G <= 4);
  const auto* w = reinterpret_cast<const WT*>(w_bytes);
  const size_t groups = (n_tokens + G - 1) / G, largest = (n_tokens + groups - 1) / groups;
  if (largest == 2)
    small_rows<Ops, 2>(w, bias, x, y, rows, cols, n_tokens, row_begin, row_end);
  else if (largest == 3)
    small_rows<Ops, G >= 3 ? 3 : 2>(w, bias, x, y, rows, cols, n_tokens, row_begin, row_end);
  else
    small_rows<Ops, G>(w, bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

// matmul as a MatmulFn: the weights' bytes read as WT (float, or bf16 bit patterns).
template <class Ops, class WT>
void matmul_bytes(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                  size_t n_tokens, size_t row_begin, size_t row_end) {
  matmul<Ops>(reinterpret_cast<const WT*>(w), bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

template <class Ops>
float dot(const float* a, const float* b, size_t n) {
  using B = typename Ops::batch;
  constexpr size_t W = Ops::width;
  B acc(0.0f);
  const size_t body = n - n % W;
  for (size_t i = 0; i < body; i += W) acc = Ops::fma(Ops::load(a + i), Ops::load(b + i), acc);
  if (body < n) acc = Ops::fma(Ops::load_tail(a + body, n - body), Ops::load_tail(b + body, n - body), acc);
  return Ops::reduce(acc);
}

template <class Ops>
void axpy(float alpha, const float* x, float* y, size_t n) {
  using B = typename Ops::batch;
  constexpr size_t W = Ops::width;
  const B a(alpha);
  const size_t body = n - n % W;
  for (size_t i = 0; i < body; i += W) Ops::fma(a, Ops::load(x + i), Ops::load(y + i)).store_unaligned(y + i);
  // One rounding per element, like the vector lanes.
  for (size_t i = body; i < n; ++i) y[i] = __builtin_fmaf(alpha, x[i], y[i]);
}

// dot() against `count` strided rows, four at a time: four independent chains in flight,
// each with exactly dot()'s operations for its row.
template <class Ops>
void dot_rows(const float* q, const float* rows, size_t stride, size_t count, size_t n, float scale, float* out) {
  using B = typename Ops::batch;
  constexpr size_t W = Ops::width;
  const size_t body = n - n % W;
  size_t j = 0;
  for (; j + 4 <= count; j += 4) {
    const float* r[4] = {rows + j * stride, rows + (j + 1) * stride, rows + (j + 2) * stride, rows + (j + 3) * stride};
    B acc[4] = {B(0.0f), B(0.0f), B(0.0f), B(0.0f)};
    for (size_t i = 0; i < body; i += W) {
      const B qi = Ops::load(q + i);
      for (size_t k = 0; k < 4; ++k) acc[k] = Ops::fma(qi, Ops::load(r[k] + i), acc[k]);
    }
    if (body < n) {
      const B qt = Ops::load_tail(q + body, n - body);
      for (size_t k = 0; k < 4; ++k) acc[k] = Ops::fma(qt, Ops::load_tail(r[k] + body, n - body), acc[k]);
    }
    for (size_t k = 0; k < 4; ++k) out[j + k] = Ops::reduce(acc[k]) * scale;
  }
  for (; j < count; ++j) out[j] = dot<Ops>(q, rows + j * stride, n) * scale;
}

// axpy() of `count` strided rows into y. When y is a few whole batches (an attention head of
// up to 8 * width floats), it stays in registers across the rows: the same fma per element
// and row, in the same order, without a load and store of y per row.
template <class Ops, size_t NB>
void axpy_rows_in_registers(const float* alphas, float mult, const float* rows, size_t stride, size_t count, float* y) {
  using B = typename Ops::batch;
  constexpr size_t W = Ops::width;
  B acc[NB];
  for (size_t b = 0; b < NB; ++b) acc[b] = Ops::load(y + b * W);
  for (size_t j = 0; j < count; ++j) {
    const B a(alphas[j] * mult);
    const float* r = rows + j * stride;
    for (size_t b = 0; b < NB; ++b) acc[b] = Ops::fma(a, Ops::load(r + b * W), acc[b]);
  }
  for (size_t b = 0; b < NB; ++b) acc[b].store_unaligned(y + b * W);
}

template <class Ops>
void axpy_rows(const float* alphas, float mult, const float* rows, size_t stride, size_t count, size_t n, float* y) {
  constexpr size_t W = Ops::width;
  if (n % W == 0) {
    switch (n / W) {
      case 1:
        return axpy_rows_in_registers<Ops, 1>(alphas, mult, rows, stride, count, y);
      case 2:
        return axpy_rows_in_registers<Ops, 2>(alphas, mult, rows, stride, count, y);
      case 4:
        return axpy_rows_in_registers<Ops, 4>(alphas, mult, rows, stride, count, y);
      case 8:
        return axpy_rows_in_registers<Ops, 8>(alphas, mult, rows, stride, count, y);
      default:
        break;
    }
  }
  for (size_t j = 0; j < count; ++j) axpy<Ops>(alphas[j] * mult, rows + j * stride, y, n);
}

}  // namespace
}  // namespace nanoinfer::kernels
