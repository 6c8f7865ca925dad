// AVX-512 kernels (F/BW/VL; this file gets the AVX-512 flags from CMake by its name).
// xsimd 8.1 supplies the batches, loads and the lane reduction; intrinsics fill three gaps:
// its avx512f fma() is a separate multiply and add, it has no masked load, and it cannot
// widen 16-bit lanes into a 32-bit batch of twice the width. The f32 prefill product
// (f32prefill below) is intrinsics throughout, bitwise the xsimd kernel's results.
// GCC 12's unmasked AVX-512 intrinsics start from _mm512_undefined_*(), which it then flags
// as uninitialized once inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <type_traits>

#include "kernels/kernels.h"
#include "kernels/prefill_driver.h"
#include "kernels/simd_kernels.h"
#include "kernels/small_batch.h"
#include "kernels/tile_sums.h"

namespace nanoinfer::kernels {
namespace {

struct Avx512Ops {
  using batch = xsimd::batch<float, xsimd::avx512f>;
  static constexpr size_t width = 16;
  // 4 x 6 accumulators + 6 activation rows + 1 weight row = 31 of the 32 zmm registers.
  static constexpr size_t row_tile = 4;
  static constexpr size_t token_tile = 6;
  static constexpr size_t decode_rows = 8;

  static batch load(const float* p) { return batch::load_unaligned(p); }
  // bf16 is the high half of an f32: zero-extend each 16-bit lane to 32 bits, shift up.
  // (The all-lanes maskz forms compile to the same instructions as the unmasked ones, which
  // GCC 12 flags with a false -Wmaybe-uninitialized.)
  static batch widen_bf16(__m256i h) {
    const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xffff, h);
    return batch(_mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, wide, 16)));
  }
  static batch load(const uint16_t* p) { return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __mmask16 tail_mask(size_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static batch load_tail(const float* p, size_t n) { return batch(_mm512_maskz_loadu_ps(tail_mask(n), p)); }
  static batch load_tail(const uint16_t* p, size_t n) { return widen_bf16(_mm256_maskz_loadu_epi16(tail_mask(n), p)); }
  static batch fma(batch a, batch b, batch c) { return batch(_mm512_fmadd_ps(a, b, c)); }
  static float reduce(batch v) { return xsimd::hadd(v); }
};

// ---------------------------------------------------------------------------------------------
// The f32 prefill product (n_tokens > 1), written with intrinsics after the avx512-bf16 tier's
// (kernels_avx512_bf16.cpp) and run by the same driver (kernels/prefill_driver.h): register
// tiles of kRowTile rows x kTokenTile tokens, the tile's sums reduced in registers and stored
// one masked vector per token, rows over kMaxPassCols columns in passes with the accumulators
// carried between passes, token blocks, and each tile prefetching its share of the next
// weight slice into L2, a line per step of its loop where a strip reads its rows in one pass
// (prefill_driver.h's SliceLines), with the strip's first tile asking for each row's line
// kFirstAhead bytes on into L1, as the bf16 tile does. That on Zen 5 (2 threads, `bench generate
// -p 64 -n 1 -r 3`, alternated against the burst before each tile): f32 pp64 426-449 -> 455-479
// tokens/s (4 rounds), the widened bf16 product (AVX512-BF16 hidden) 442-455 -> 462-499 (3 rounds);
// pp512 alike (it reads the weights over several token blocks, with the bursts); 256 or 1,024
// bytes ahead alike. Every (row, token) accumulator runs
// exactly matmul_tile's chain (simd_kernels.h): fma(w, x, acc) over the columns in ascending
// steps of 16, then the zero-padded tail (both operands masked to zeros), then xsimd's
// avx512f hadd tree, then + bias; so the results are bitwise the generic kernel's, which the
// one-token (decode) path still runs.
namespace f32prefill {

// Shapes chosen on Zen 5 (2 cores, 512 tokens, a scratch harness timing the 0.5B's four
// product shapes; the host's noise was ~10-20%, so these are the clear winners only):
// 8 x 3 tiles (24 accumulators + 3 activation vectors + 1 weight vector = 28 zmm; 4 x 6, 6 x 4
// and 5 x 5 were slower or no better on the 896-column products); token blocks of 128 (64: no
// better; 256: alike); rows over 2,048 columns in passes of 768 (8 rows x 768 f32 = 24 KiB of
// Zen 5's 48 KiB L1; 1,216, the bf16 tier's, is 38 KiB and ran down_proj ~25% slower; 512
// slower too), in token blocks of 64; rows of 896 in one pass (two passes of 448: slower).
constexpr size_t kW = 16;  // floats per zmm
constexpr size_t kRowTile = 8, kTokenTile = 3;
constexpr size_t kTokenBlock = 128, kWideTokenBlock = 64;
constexpr size_t kPassCols = 768, kMaxPassCols = 2048;
static_assert(kPassCols % kW == 0, "passes end on whole vectors");
static_assert(kRowTile * kTokenTile + kTokenTile + 1 <= 32, "the tile fits the 32 zmm registers");
// A strip's first tile asks for each row's line this many bytes on into L1 (the tiles of the
// strip before it asked for the strip's lines into L2).
constexpr size_t kFirstAhead = 512;

using tile_sums::mask16;

// in[k], k < 16 -> lane n holds the lane sum of in[(n % 4) * 4 + n / 4] (a 4x4 transpose of the
// index). For each accumulator a the additions are xsimd's avx512f hadd (Avx512Ops::reduce):
// u[i] = a[i] + a[i+8] (i < 8), v[i] = u[i] + u[i+4] (i < 4), then (v[0] + v[1]) + (v[2] + v[3]).
// (The bf16 tier's reduce16 differs in the last two levels: its reference adds v[i] + v[i+2].)
[[gnu::always_inline]] inline __m512 reduce16(const __m512* in) {
  __m512 v2[4], v3[2];
  tile_sums::tree_quarters(in, v2);  // 128-bit lane L of v2[k]: in[4k + L]'s v[i] = u[i] + u[i+4]
  // 128-bit lane L of v3[j]: v[0] + v[1], v[2] + v[3] of in[8j + L], then of in[8j + 4 + L].
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j) {
    const __m512 p = v2[2 * j], q = v2[2 * j + 1];
    v3[j] = _mm512_add_ps(_mm512_shuffle_ps(p, q, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_ps(p, q, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // Lane 4L + s: (v[0] + v[1]) + (v[2] + v[3]) of in[4s + L].
  return _mm512_add_ps(_mm512_shuffle_ps(v3[0], v3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(v3[0], v3[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The tile epilogue (kernels/tile_sums.h) over this tier's tree.
struct F32Tree {
  [[gnu::always_inline]] static __m512 reduce16(const __m512* in) {
    return nanoinfer::kernels::f32prefill::reduce16(in);
  }
};

// Sixteen weights from p as f32: f32 as they are, bf16 widened exactly (Avx512Ops::widen_bf16);
// for the tail, those of mask m (the rest zeros).
[[gnu::always_inline]] inline __m512 load_w(const float* p) {
  return _mm512_loadu_ps(p);
}
[[gnu::always_inline]] inline __m512 load_w(const uint16_t* p) {
  return Avx512Ops::load(p);
}
[[gnu::always_inline]] inline __m512 load_w_tail(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
[[gnu::always_inline]] inline __m512 load_w_tail(const uint16_t* p, __mmask16 m) {
  return Avx512Ops::widen_bf16(_mm256_maskz_loadu_epi16(m, p));
}

// The tile for the prefill driver (kernels/prefill_driver.h), on weights WT (f32, or bf16
// widened to f32) in layout G (kernels/weight_layout.h).
template <size_t G, class WT = float>
struct TileG
    : prefill::Shape<WT, float, kRowTile, kTokenTile, kTokenBlock, kWideTokenBlock, kPassCols, kMaxPassCols, true> {
  static constexpr size_t kG = G;
  template <size_t R, size_t T, bool kPasses, bool kSpread, bool kFirst>
  static void run(const WT* w, const float* bias, const float* x, size_t x_stride, float* y, size_t rows, size_t cols,
                  size_t r0, size_t t0, size_t c_begin, size_t c_end, __m512* carry, prefill::SliceLines lines);
};
using Tile = TileG<1>;

// Columns [c_begin, c_end) of one R x T register tile: rows r0.. of w, tokens t0.. of x (x
// points at token t0's row, rows x_stride apart). Accumulator e = t * R + r. The pass that
// reaches `cols` runs the tail, reduces and stores; the others leave the accumulators in
// `carry` (R * T vectors, stored and loaded whole), where the next pass picks them up.
template <size_t G, class WT>
template <size_t R, size_t T, bool kPasses, bool kSpread, bool kFirst>
inline void TileG<G, WT>::run(const WT* w, const float* bias, const float* x, size_t x_stride, float* y, size_t rows,
                              size_t cols, size_t r0, size_t t0, size_t c_begin, size_t c_end, __m512* carry,
                              prefill::SliceLines lines) {
  if constexpr (kSpread && T == 1) lines.all();
  __m512 acc[R * T];
  tile_sums::start_acc<R * T>(acc, carry, !kPasses || c_begin == 0);
  const WT* wr[R];
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) wr[r] = row_start<G>(w, r0 + r, cols);

  const size_t body = c_end - (c_end == cols ? cols % kW : 0);
  for (size_t c = c_begin; c < body; c += kW) {
    if constexpr (kSpread && T > 1) lines.next();
    __m512 xv[T];
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) xv[t] = _mm512_loadu_ps(x + t * x_stride + c);
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      if constexpr (kFirst)
        _mm_prefetch(reinterpret_cast<const char*>(wr[r] + col_offset<G, kW, WT>(c)) + kFirstAhead, _MM_HINT_T0);
      __m512 wv = load_w(wr[r] + col_offset<G, kW, WT>(c));
      // Held in a register: GCC would otherwise fold the load into each of the T fmas, T
      // loads of the same vector (e.g. 4 x 6: 30 loads per 24 fmas, more than the load ports
      // give while the FMA pipes do 24).
      asm("" : "+v"(wv));
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) acc[t * R + r] = _mm512_fmadd_ps(wv, xv[t], acc[t * R + r]);
    }
  }
  if constexpr (kSpread && T > 1) lines.all();  // what a short loop left
  if (kPasses && c_end < cols) {
    tile_sums::carry_acc<R * T>(acc, carry);
    return;
  }
  if (body < cols) {
    const __mmask16 m = mask16(cols - body);
    __m512 xv[T];
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) xv[t] = _mm512_maskz_loadu_ps(m, x + t * x_stride + body);
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      const __m512 wv = load_w_tail(wr[r] + col_offset<G, kW, WT>(body), m);
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) acc[t * R + r] = _mm512_fmadd_ps(wv, xv[t], acc[t * R + r]);
    }
  }
  tile_sums::store_sums<F32Tree, R, T>(acc, bias, y, rows, r0, t0);
}

}  // namespace f32prefill

// The most tokens the f32 product on the packed layout gives the small-batch driver, and the most
// in one token group of the widened bf16 product (WidenedSmallBatch below: two groups, up to 12
// tokens). Its tiles of 7 or 8 tokens are 3 rows high, which on f32 weights ran slower than the
// prefill tiles (Zen 5, 2 threads, the 0.5B's pass of 7-8 rows: ~1.6x a decode step against
// ~1.4x), and two token groups (9-16) would hold 36-56 KiB of f32 activations, crowding the
// weights out of L1 (on the packed layout, 8 rows as two groups: 1.42-1.49 steps against
// 1.37-1.39 by the prefill tiles); bf16 weights, half the bytes, gain from two groups.
constexpr size_t kSmallF32Tokens = 6;

// The tokens the f32 product gives the small-batch driver, its tiles not asking for lines into
// L1 (P::ask_l1). On Zen 5 (2 threads, the 0.5B's f32 shapes, a pass over every product of the
// model, alternated in one process, 8 rounds, when a decode pass took ~28 ms): 4, 5, 6 tokens
// 1.30, 1.39, 1.41 decode passes against 1.40, 1.59, 1.72 with the prefill tiles; alike when a
// decode pass took ~41 ms. At 7-8 tokens its 3-row tiles took 3.0 passes against 1.8-1.9, and at
// 2-3 tokens the prefill tiles, in whole 8-row strips, were as fast or faster.
constexpr size_t kSmallF32First = 4, kSmallF32Last = 6;

// The small-batch driver's policy (kernels/small_batch.h): the generic kernel's chain, on
// weights WT as they are (f32) or widened exactly (bf16), in layout G
// (kernels/weight_layout.h). On the float packed layout every tile is one group of rows, so that it reads one
// stream of memory, and up to kSmallF32Tokens tokens run in one group (4 x 6 accumulators, 4
// weight vectors and one activation vector: 29 zmm registers).
template <class WT, size_t G = 1>
struct SmallBatch {
  using W = WT;
  using X = float;
  using V = __m512;
  using Tree = f32prefill::F32Tree;
  static constexpr size_t kStep = Avx512Ops::width;
  static constexpr bool ask_l1(size_t) { return !std::is_same_v<WT, float>; }
  static constexpr size_t kG = G, kGroupTokens = G == 1 ? small_batch::kGroupTokens : kSmallF32Tokens;
  static constexpr size_t rows(size_t tokens) { return G == 1 ? small_batch::rows_for(tokens) : G; }
  static V load_w(const WT* p) { return Avx512Ops::load(p); }
  static V load_x(const float* p) { return _mm512_loadu_ps(p); }
  static V load_w_tail(const WT* p, size_t n) { return Avx512Ops::load_tail(p, n); }
  static V load_x_tail(const float* p, size_t n) { return _mm512_maskz_loadu_ps(Avx512Ops::tail_mask(n), p); }
  static V madd(V acc, V w, V x) { return _mm512_fmadd_ps(w, x, acc); }
};

// One token: the generic kernel (simd_kernels.h); kSmallF32First .. kSmallF32Last: the
// small-batch driver; else f32prefill; all bitwise the same.
void matmul_f32(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                size_t n_tokens, size_t row_begin, size_t row_end) {
  if (n_tokens == 0 || row_begin >= row_end) return;
  if (n_tokens == 1) {
    matmul<Avx512Ops>(reinterpret_cast<const float*>(w), bias, x, y, rows, cols, n_tokens, row_begin, row_end);
    return;
  }
  if (n_tokens >= kSmallF32First && n_tokens <= kSmallF32Last) {
    small_batch::matmul<SmallBatch<float>>(reinterpret_cast<const float*>(w), bias, x, cols, y, rows, cols, n_tokens,
                                           row_begin, row_end);
    return;
  }
  prefill::matmul<f32prefill::Tile>(reinterpret_cast<const float*>(w), bias, x, cols, y, rows, cols, n_tokens,
                                    row_begin, row_end);
}

// The same product on the float packed layout (kernels.h): one token as above, two to
// kSmallF32Tokens by the small-batch driver, more by f32prefill; all bitwise matmul_f32's.
// On Zen 5 (2 threads, the 0.5B at f32, `bench generate --rows-curve`, alternated rounds) a
// pass of 2 / 3 / 4 rows took 1.00-1.03 / 1.03-1.05 / 1.06-1.10 decode steps when a step took
// ~42 ms and 1.07-1.08 / 1.18-1.24 / 1.37-1.38 at ~27 ms, against 1.09 / 1.14 / 1.25 and
// 1.26 / 1.36 / 1.41 on rows one after another. On the slow host 6 rows took 1.26-1.30 steps
// as one token group against 1.33-1.35 by f32prefill, and 8 rows 1.42-1.49 as two groups
// against 1.37-1.39; on the fast one 6 rows cost more packed than on rows one after another
// (1.70-1.73 against 1.47-1.50), the one shape where the layout loses.
void matmul_f32_packed(const std::byte* w_bytes, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                       size_t n_tokens, size_t row_begin, size_t row_end) {
  if (n_tokens == 0 || row_begin >= row_end) return;
  const auto* w = reinterpret_cast<const float*>(w_bytes);
  using Small = SmallBatch<float, kFloatPackRows>;
  if (n_tokens == 1) {
    decode<Avx512Ops, kFloatPackRows>(w, bias, x, y, rows, cols, row_begin, row_end);
  } else if (n_tokens <= kSmallF32Tokens) {
    small_batch::matmul<Small>(w, bias, x, cols, y, rows, cols, n_tokens, row_begin, row_end);
  } else {
    prefill::matmul<f32prefill::TileG<kFloatPackRows>>(w, bias, x, cols, y, rows, cols, n_tokens, row_begin, row_end);
  }
}

// The widened bf16 product's small-batch policy: token groups of at most kSmallF32Tokens, so
// that 7-12 tokens run as two groups on tiles of 4-6 rows rather than one group on tiles of 3
// (the second group reads its tiles' weights from L1). On Zen 5 (`--isa avx512-vnni`, 2
// threads, the 0.5B's bf16 weights, `bench generate --rows-curve 1,7,8,9,12`, four rounds, the
// order of the two builds swapped every other round), a pass of 7 / 8 / 9 / 12 rows in the
// rounds whose decode step took 25-26 ms: 1.37-1.40 / 1.46-1.50 / 1.52-1.62 / 2.03-2.06 steps
// before (one group of 3-row tiles up to 9 tokens, the prefill tiles from 10) against 1.16-1.18 /
// 1.22-1.24 / 1.19-1.20 / 1.45-1.48; with 17-20 ms steps 1.95-2.22 / 2.20-2.32 / 2.21-2.42 /
// 2.87-3.21 against 1.39 / 1.53 / 1.47 / 1.95. Past 12 tokens two groups would be 3-row tiles
// again, and the prefill tiles take over.
struct WidenedSmallBatch : SmallBatch<uint16_t> {
  static constexpr size_t kGroupTokens = kSmallF32Tokens;
};
constexpr size_t kWidenedSmallTokens = 2 * WidenedSmallBatch::kGroupTokens;

// bf16 widened to f32: one token by the generic kernel, 2 .. kWidenedSmallTokens by the
// small-batch driver, more by f32prefill's tiles on the widened weights; all bitwise the generic
// kernel's. The prefill tiles took prefill from the generic kernel's 4 x 6 tiles: `bench generate
// -p 64 -n 1 -r 3` on Zen 5, `--isa avx512-vnni`, three alternated rounds, 399 / 403 / 405 -> 443 /
// 454 / 458 tokens/s (`-p 512`: 417 / 403 -> 473 / 474).
void matmul_bf16_widened(const std::byte* w_bytes, const float* bias, const float* x, float* y, size_t rows,
                         size_t cols, size_t n_tokens, size_t row_begin, size_t row_end) {
  if (n_tokens == 0 || row_begin >= row_end) return;
  const auto* w = reinterpret_cast<const uint16_t*>(w_bytes);
  if (n_tokens == 1) {
    decode<Avx512Ops>(w, bias, x, y, rows, cols, row_begin, row_end);
  } else if (n_tokens <= kWidenedSmallTokens) {
    small_batch::matmul<WidenedSmallBatch>(w, bias, x, cols, y, rows, cols, n_tokens, row_begin, row_end);
  } else {
    prefill::matmul<f32prefill::TileG<1, uint16_t>>(w, bias, x, cols, y, rows, cols, n_tokens, row_begin, row_end);
  }
}

}  // namespace

namespace avx512 {

constinit const ByType<MatmulFn> matmul{.f32 = matmul_f32, .bf16 = matmul_bf16_widened};
constinit const ByType<MatmulFn> matmul_packed_float{.f32 = matmul_f32_packed};
constinit const DotRowsFn dot_rows_f32 = dot_rows<Avx512Ops>;
constinit const AxpyRowsFn axpy_rows_f32 = axpy_rows<Avx512Ops>;

}  // namespace avx512

}  // namespace nanoinfer::kernels
