// The bf16 product of the avx512-bf16 tier (avx512-vnni + AVX512-BF16; this file gets exactly
// those flags from CMake by its name). vdpbf16ps multiplies 32 bf16 pairs into 16 f32 lanes
// per instruction, twice the multiply-adds of an f32 FMA and with no widening of the
// weights, but both operands must be bf16: the activations are rounded to bf16 once per
// product (round_activations; the model does it once for all threads and matrices reading an
// input, the MatmulFn entry into a per-thread buffer for itself). The result equals
// matmul_bf16_dot (kernels/scalar_bf16_dot.cpp, which states the rule and its error bound)
// bit for bit.
//
// Prefill: register tiles of 8 rows x 3 tokens (24 accumulators + 3 activation vectors + 1
// weight vector = 28 zmm), tokens in blocks of 128 (64 for rows read in passes, below) so the
// block's activations stay in L2 while each strip of 8 rows reads them once (128 against 64:
// ~8% on the 896-column products at 512 tokens, fewer re-reads of the weights). A tile's accumulators are reduced in
// registers and each token's 8 sums stored as one masked vector (store_sums): at 896 columns (28 chunks, ~340 cycles of
// vdpbf16ps per tile) the earlier epilogue, sums through the stack and 24 scalar stores, cost ~200 cycles per tile, a
// third of the product's time. Decode (one token): 16 rows at a time, so 16 chains hide the instruction's latency and
// 16 weight streams are in flight. Either way the lanes of up to 16 accumulators are summed together by one transposing
// tree (reduce16) that adds, for each accumulator, exactly the pairs the reference adds: the results do not depend on
// the tile, the thread or the batch.
//
// GCC 12's unmasked AVX-512 intrinsics start from _mm512_undefined_*(), which it then flags
// as uninitialized once inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include "kernels/kernels.h"
#include "kernels/prefill_driver.h"
#include "kernels/small_batch.h"
#include "kernels/tile_sums.h"
#include "kernels/weight_layout.h"

namespace nanoinfer::kernels {
namespace {

constexpr size_t kChunk = 32;  // bf16 columns per vdpbf16ps
// Decode streams kDecodeRows rows at a time and leaves the lines to the hardware prefetcher. On
// Zen 5 (2 threads, every product of the 0.5B once per pass, weights on huge pages, variants
// alternated in one process, 10 rounds, twice): 6 rows 14.2-14.4 ms a pass, 8 rows 14.3-15.0,
// against 16.5-17.1 for 16 rows that each asked for their line 512 bytes ahead into L1 (the
// earlier form) and 15.7-16.7 for 16 rows without those requests.
constexpr size_t kRowTile = 8, kTokenTile = 3, kDecodeRows = 6;
constexpr size_t kTokenBlock = 128, kWideTokenBlock = 64;
constexpr size_t kPrefetchAhead = 512;  // bytes: 8 lines ahead of each row of a strip's first tile
static_assert(kChunk == 32, "bf16_row_stride (kernels.h) pads to whole chunks");

size_t padded_cols(size_t cols) {
  return bf16_row_stride(cols);
}

using tile_sums::mask16;

// x: [n][cols] f32 -> xb: [n][padded_cols] bf16, rounded by vcvtne2ps2bf16 (nearest even,
// subnormals to zero; round_activation_bf16 is its scalar twin), zero past `cols`.
void round_rows(const float* x, size_t n, size_t cols, uint16_t* xb) {
  const size_t stride = padded_cols(cols);
  for (size_t t = 0; t < n; ++t) {
    const float* xt = x + t * cols;
    for (size_t c = 0; c < stride; c += kChunk) {
      const size_t left = cols - c;  // >= 1: c < cols for every chunk of the padded row
      const __m512 lo = _mm512_maskz_loadu_ps(mask16(left), xt + c);
      const __m512 hi = _mm512_maskz_loadu_ps(left > 16 ? mask16(left - 16) : __mmask16(0), xt + c + 16);
      _mm512_storeu_si512(xb + t * stride + c, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
    }
  }
}

// in[k], k < 16 -> lane n holds the lane sum of in[(n % 4) * 4 + n / 4] (a 4x4 transpose of
// the index; callers pass their accumulators in that order). For each accumulator a the
// additions are the reference's tree: a[i] + a[i+8], then + [i+4], + [i+2], + [i+1].
// Inlined: a tile's accumulators go in and its sums come out in registers.
[[gnu::always_inline]] inline __m512 reduce16(const __m512* in) {
  __m512 v2[4], v3[2];
  tile_sums::tree_quarters(in, v2);  // 128-bit lane L of v2[k]: in[4k + L]'s four sums s[i] + s[i+4]
  // 128-bit lane L of v3[j]: two sums s[i] + s[i+2] of in[8j + L], then two of in[8j + 4 + L].
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j) {
    const __m512d g = _mm512_castps_pd(v2[2 * j]), h = _mm512_castps_pd(v2[2 * j + 1]);
    v3[j] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(g, h)), _mm512_castpd_ps(_mm512_unpackhi_pd(g, h)));
  }
  // Lane 4L + s: s[0] + s[1] of in[4s + L].
  return _mm512_add_ps(_mm512_shuffle_ps(v3[0], v3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(v3[0], v3[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The tile epilogue (kernels/tile_sums.h) over this tier's tree.
struct Bf16Tree {
  [[gnu::always_inline]] static __m512 reduce16(const __m512* in) { return nanoinfer::kernels::reduce16(in); }
};

// Columns of one pass over a strip when its rows are wider than kMaxPassCols: a strip of 8
// rows of 4,864 columns (down_proj) is 76 KiB, more than Zen 5's 48 KiB L1, so each tile
// would re-read its weights from L2; in passes of 1,216 columns (19 KiB) the slice stays in L1
// for all the tiles of the token block (on Zen 5, 2 threads, 512 tokens: down_proj from ~370 to
// ~450 GFLOP/s; passes of 1,024 ran alike, 768 and 1,664 slower). Between passes a tile's accumulators wait in a carry
// buffer (stored and loaded whole: the chain of each accumulator is unchanged).
constexpr size_t kPassCols = 1216, kMaxPassCols = 2048;
static_assert(kPassCols % kChunk == 0, "passes end on whole chunks");

// The tile for the prefill driver (kernels/prefill_driver.h): x is the rounded block, rows
// x_stride = padded_cols(cols) apart; the weights in layout G (kernels/weight_layout.h).
template <size_t G>
struct TileG : prefill::Shape<uint16_t, uint16_t, kRowTile, kTokenTile, kTokenBlock, kWideTokenBlock, kPassCols,
                              kMaxPassCols, true> {
  static constexpr size_t kG = G;
  template <size_t R, size_t T, bool kPasses, bool kSpread, bool kFirst>
  static void run(const uint16_t* w, const float* bias, const uint16_t* xb, size_t stride, float* y, size_t rows,
                  size_t cols, size_t r0, size_t t0, size_t c_begin, size_t c_end, __m512* carry,
                  prefill::SliceLines lines);
};
using Tile = TileG<1>;

// Columns [c_begin, c_end) of one R x T register tile: rows r0.., tokens t0.. of the rounded
// block xb (row stride `stride`, token t0 at xb). Accumulator e = t * R + r. c_begin is a
// multiple of kChunk; the pass that reaches `cols` reduces and stores, the others leave the
// accumulators in `carry` (R * T vectors), where the next pass picks them up. Without
// kPasses the tile is one pass over the whole row (c_begin 0, c_end cols, no carry).
// kSpread, `lines`: the tile's share of the weights its strip reads next (one-pass rows, one token
// block), asked for a line per step (all at once by a one-token tile, whose loop is short). kFirst: the strip's
// first tile, which reads its weights from L2 or beyond; it asks for each row's line
// kPrefetchAhead bytes on into L1. Together, on Zen 5, 2 threads, 64 tokens, weights
// from memory: the 896-column products from ~720-740 to ~820-835 GFLOP/s (in-process A/B
// against the burst before each tile; down_proj, in passes, keeps the burst).
template <size_t G>
template <size_t R, size_t T, bool kPasses, bool kSpread, bool kFirst>
inline void TileG<G>::run(const uint16_t* w, const float* bias, const uint16_t* xb, size_t stride, float* y,
                          size_t rows, size_t cols, size_t r0, size_t t0, size_t c_begin, size_t c_end, __m512* carry,
                          prefill::SliceLines lines) {
  if constexpr (kSpread && T == 1) lines.all();
  __m512 acc[R * T];
  tile_sums::start_acc<R * T>(acc, carry, !kPasses || c_begin == 0);
  const uint16_t* wr[R];
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) wr[r] = row_start<G>(w, r0 + r, cols);

  const size_t body = c_end - (c_end == cols ? cols % kChunk : 0);
  for (size_t c = c_begin; c < body; c += kChunk) {
    if constexpr (kSpread && T > 1) lines.next();
    __m512bh xv[T];
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) xv[t] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xb + t * stride + c));
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      // A strip's first tile reads its rows from beyond L1: each row's line kPrefetchAhead
      // bytes on is asked for explicitly (a hint; it never faults past the end).
      if constexpr (kFirst)
        _mm_prefetch(reinterpret_cast<const char*>(wr[r] + col_offset<G, kChunk, uint16_t>(c)) + kPrefetchAhead,
                     _MM_HINT_T0);
      const __m512bh wv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(wr[r] + col_offset<G, kChunk, uint16_t>(c)));
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) acc[t * R + r] = _mm512_dpbf16_ps(acc[t * R + r], wv, xv[t]);
    }
  }
  if constexpr (kSpread && T > 1) lines.all();  // what a short loop left (few tiles to share the slice)
  if (kPasses && c_end < cols) {
    tile_sums::carry_acc<R * T>(acc, carry);
    return;
  }
  if (body < cols) {
    // The weights' tail is a masked load (zeros past `cols`); the activations are padded.
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (cols - body)) - 1);
    __m512bh xv[T];
#pragma GCC unroll 8
    for (size_t t = 0; t < T; ++t) xv[t] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xb + t * stride + body));
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      const __m512bh wv =
          reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, wr[r] + col_offset<G, kChunk, uint16_t>(body)));
#pragma GCC unroll 8
      for (size_t t = 0; t < T; ++t) acc[t * R + r] = _mm512_dpbf16_ps(acc[t * R + r], wv, xv[t]);
    }
  }
  tile_sums::store_sums<Bf16Tree, R, T>(acc, bias, y, rows, r0, t0);
}

// The whole row in one pass (decode), weights in layout G.
template <size_t R, size_t T, size_t G = 1>
inline void tile(const uint16_t* w, const float* bias, const uint16_t* xb, size_t stride, float* y, size_t rows,
                 size_t cols, size_t r0, size_t t0) {
  TileG<G>::template run<R, T, false, false, false>(w, bias, xb, stride, y, rows, cols, r0, t0, 0, cols, nullptr, {});
}

// The small-batch driver's policy (kernels/small_batch.h): the prefill tile's chain, the
// activations padded to whole chunks (no tail mask needed on them); weights in layout G. On the
// float packed layout every tile is one group of rows (one stream of memory) and up to
// kSmallPackedTokens tokens run in one group (4 x 6 accumulators, 4 weight vectors and one
// activation vector: 29 zmm registers).
constexpr size_t kSmallPackedTokens = 6;
template <size_t G = 1>
struct SmallBatch {
  using W = uint16_t;
  using X = uint16_t;
  using V = __m512bh;
  using Tree = Bf16Tree;
  static constexpr size_t kStep = kChunk;
  // The L1 requests: on Zen 5 (the 0.5B's passes of n rows, three alternated rounds, a decode
  // step of 20-22 ms) without them 2-4 rows took 23.4-26.4 ms against 25.1-26.8, with them 8 rows
  // 26.9-28.1 against 27.4-29.0.
  static constexpr bool ask_l1(size_t tokens) { return tokens > 4; }
  static constexpr size_t kG = G, kGroupTokens = G == 1 ? small_batch::kGroupTokens : kSmallPackedTokens;
  static constexpr size_t rows(size_t tokens) { return G == 1 ? small_batch::rows_for(tokens) : G; }
  static V load_w(const uint16_t* p) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p)); }
  static V load_x(const uint16_t* p) { return load_w(p); }
  static V load_w_tail(const uint16_t* p, size_t n) {
    return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t{1} << n) - 1), p));
  }
  static V load_x_tail(const uint16_t* p, size_t) { return load_x(p); }
  static __m512 madd(__m512 acc, V w, V x) { return _mm512_dpbf16_ps(acc, w, x); }
};

// The rounded activations of one call: per thread, grown to the largest block seen and then
// reused, so a decode step allocates nothing. Not a std::vector: its members are inline
// templates with external linkage, and the linker could keep this file's AVX-512 build of
// them for every other user of std::vector<uint16_t>. Everything here has internal linkage.
struct Buffer {
  uint16_t* data = nullptr;
  size_t size = 0;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { delete[] data; }
};

uint16_t* activation_buffer(size_t n) {
  thread_local Buffer buffer;
  if (buffer.size < n) {
    delete[] buffer.data;
    buffer.data = nullptr;  // stays consistent if new[] throws
    buffer.size = 0;
    buffer.data = new uint16_t[n];
    buffer.size = n;
  }
  return buffer.data;
}

// x rounded into this thread's buffer, then `product` from it.
void rounded_from_f32(MatmulRoundedFn product, const std::byte* w, const float* bias, const float* x, float* y,
                      size_t rows, size_t cols, size_t n_tokens, size_t row_begin, size_t row_end) {
  if (n_tokens == 0 || row_begin >= row_end) return;
  uint16_t* xb = activation_buffer(n_tokens * padded_cols(cols));
  round_rows(x, n_tokens, cols, xb);
  product(w, bias, xb, y, rows, cols, n_tokens, row_begin, row_end);
}

}  // namespace

namespace avx512_bf16 {

void round_activations(const float* x, size_t n, size_t cols, uint16_t* xb) {
  round_rows(x, n, cols, xb);
}

// xb: [n_tokens][padded_cols(cols)], rounded (round_rows). Token blocks keep
// the activations a strip of rows reads within L2.
void matmul_bf16_rounded(const std::byte* w_bytes, const float* bias, const uint16_t* xb, float* y, size_t rows,
                         size_t cols, size_t n_tokens, size_t row_begin, size_t row_end) {
  if (n_tokens == 0 || row_begin >= row_end) return;
  const auto* w = reinterpret_cast<const uint16_t*>(w_bytes);
  const size_t stride = padded_cols(cols);
  if (n_tokens == 1) {
    size_t r = row_begin;
    for (; r + kDecodeRows <= row_end; r += kDecodeRows) tile<kDecodeRows, 1>(w, bias, xb, stride, y, rows, cols, r, 0);
    for (; r + 4 <= row_end; r += 4) tile<4, 1>(w, bias, xb, stride, y, rows, cols, r, 0);
    for (; r < row_end; ++r) tile<1, 1>(w, bias, xb, stride, y, rows, cols, r, 0);
    return;
  }
  if (n_tokens <= small_batch::kMaxTokens) {
    small_batch::matmul<SmallBatch<>>(w, bias, xb, stride, y, rows, cols, n_tokens, row_begin, row_end);
    return;
  }
  prefill::matmul<Tile>(w, bias, xb, stride, y, rows, cols, n_tokens, row_begin, row_end);
}

// The same product on the float packed layout (kernels.h): decode a group of rows per tile, up to
// kSmallPackedTokens by the small-batch driver, more by the prefill tiles; bitwise the above.
void matmul_bf16_rounded_packed(const std::byte* w_bytes, const float* bias, const uint16_t* xb, float* y, size_t rows,
                                size_t cols, size_t n_tokens, size_t row_begin, size_t row_end) {
  if (n_tokens == 0 || row_begin >= row_end) return;
  constexpr size_t G = kFloatPackRows;
  const auto* w = reinterpret_cast<const uint16_t*>(w_bytes);
  const size_t stride = padded_cols(cols);
  if (n_tokens == 1) {
    size_t r = row_begin;
    for (; r + G <= row_end; r += G) tile<G, 1, G>(w, bias, xb, stride, y, rows, cols, r, 0);
    for (; r < row_end; ++r) tile<1, 1, G>(w, bias, xb, stride, y, rows, cols, r, 0);
  } else if (n_tokens <= kSmallPackedTokens) {
    small_batch::matmul<SmallBatch<G>>(w, bias, xb, stride, y, rows, cols, n_tokens, row_begin, row_end);
  } else {
    prefill::matmul<TileG<G>>(w, bias, xb, stride, y, rows, cols, n_tokens, row_begin, row_end);
  }
}

// From f32 activations: rounded into this thread's buffer, then the product above, on rows one
// after another or on the float packed layout.
void matmul_bf16(const std::byte* w_bytes, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                 size_t n_tokens, size_t row_begin, size_t row_end) {
  rounded_from_f32(matmul_bf16_rounded, w_bytes, bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

void matmul_bf16_packed(const std::byte* w_bytes, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                        size_t n_tokens, size_t row_begin, size_t row_end) {
  rounded_from_f32(matmul_bf16_rounded_packed, w_bytes, bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

}  // namespace avx512_bf16

}  // namespace nanoinfer::kernels
