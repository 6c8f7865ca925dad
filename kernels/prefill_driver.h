// The AVX-512 prefill products' loops (n_tokens > 1), one driver for the f32 product
// (kernels_avx512.cpp) and the bf16 one (kernels_avx512_bf16.cpp): tokens in blocks, rows in
// strips of Tile::kRowTile, each strip's tokens in register tiles of Tile::kTokenTile, rows
// wider than Tile::kMaxPassCols in passes of Tile::kPassCols columns with each tile's
// accumulators carried between passes, and each tile prefetching its share of the weights the
// strip reads next. The tier supplies the register tile (Tile::run), whose accumulator chains
// fix the results: the driver only chooses which tile runs which columns, so no split it makes
// changes a bit. Include only from AVX-512 translation units: everything here has internal
// linkage.
//
// A Tile policy is a Shape (below) with
//   run<R, T, kPasses>(w, bias, x, x_stride, y, rows, cols, r0, t0, c_begin, c_end, carry):
//     columns [c_begin, c_end) of the R x T tile at rows r0.., tokens t0.. (x at token t0's
//     row, rows x_stride apart); the pass that reaches `cols` stores the sums, the others
//     leave them in `carry` (R * T vectors). Without kPasses: one pass over the whole row, no
//     carry.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace nanoinfer::kernels {
namespace {
namespace prefill {

// A tier's tile shape: weights of W, activations of X; register tiles of RowTile rows x
// TokenTile tokens; tokens in blocks of TokenBlock when rows are read in one
// pass, of WideTokenBlock when rows wider than MaxPassCols are read in passes of PassCols
// columns (the carry buffer holds one such block's tiles).
// kG: the weights' layout (kernels/weight_layout.h; a Tile on the float packed layout hides
// this 1 with its own), which only moves where the driver's prefetches point.
// SpreadPrefetch: the tile asks for its share of the next slice itself, a line per step of its
// loop (Tile::run takes kSpread and kFirst flags and a SliceLines, below), instead of the driver asking in
// one burst before it.
template <class WT, class XT, size_t RowTile, size_t TokenTile, size_t TokenBlock, size_t WideTokenBlock,
          size_t PassCols, size_t MaxPassCols, bool SpreadPrefetch = false>
struct Shape {
  using W = WT;
  using X = XT;
  static constexpr size_t kRowTile = RowTile, kTokenTile = TokenTile;
  static constexpr size_t kTokenBlock = TokenBlock, kWideTokenBlock = WideTokenBlock;
  static constexpr size_t kPassCols = PassCols, kMaxPassCols = MaxPassCols;
  static constexpr bool kSpreadPrefetch = SpreadPrefetch;
  static constexpr size_t kG = 1;
};

// The weights a strip reads next (its next pass, or the next strip's first): `rows` segments
// of `bytes` bytes, `stride` bytes apart. A strip's tiles re-read their slice from L1, but the
// first tile would wait for it from L3 or memory, 8 rows at a time, faster than the hardware
// prefetcher ramps up on each row; so each tile of a strip asks for its share of the next
// slice's lines into L2 (a hint: it never faults). On Zen 5, 2 threads, 512 tokens: ~5% on
// the 896-column bf16 products (into L1 instead: no gain, and down_proj slower).
struct Slice {
  const char* base = nullptr;
  size_t bytes = 0, stride = 0, rows = 0;
};

// A slice's lines counted row by row: part `part` of `parts` is lines [first, last).
struct LineShare {
  size_t per_row, first, last;
};
inline LineShare line_share(const Slice& s, size_t part, size_t parts) {
  const size_t per_row = (s.bytes + 63) / 64, lines = per_row * s.rows;
  return {per_row, lines * part / parts, lines * (part + 1) / parts};
}

// Lines [first, last) of a slice into L2, at once.
inline void prefetch_lines(const Slice& s, size_t per_row, size_t first, size_t last) {
  for (size_t l = first; l < last; ++l)
    _mm_prefetch(s.base + (l / per_row) * s.stride + (l % per_row) * 64, _MM_HINT_T1);
}

inline void prefetch_share(const Slice& s, size_t part, size_t parts) {
  const LineShare share = line_share(s, part, parts);
  prefetch_lines(s, share.per_row, share.first, share.last);
}

// A share of the lines of a slice of whole rows (one block of memory: bytes == stride), asked
// for one at a time (next()) from inside a tile's loop rather than in one burst before it: a
// tile's first steps then wait on fewer requests of its own. Two pointers, so that the loop
// keeps its registers (a row-and-column walker spilled and lost the gain). Empty by default.
class SliceLines {
 public:
  SliceLines() = default;
  SliceLines(const Slice& s, size_t part, size_t parts) {
    const size_t lines = (s.rows * s.stride + 63) / 64;
    p_ = s.base + lines * part / parts * 64;
    end_ = s.base + lines * (part + 1) / parts * 64;
  }
  // The lines of [begin, end).
  SliceLines(const char* begin, const char* end) : p_(begin), end_(end) {}
  // The next line into L2, if any is left (a hint: it never faults).
  [[gnu::always_inline]] void next() {
    if (p_ < end_) {
      _mm_prefetch(p_, _MM_HINT_T1);
      p_ += 64;
    }
  }
  // All that is left, at once.
  void all() {
    for (; p_ < end_; p_ += 64) _mm_prefetch(p_, _MM_HINT_T1);
  }

 private:
  const char* p_ = nullptr;
  const char* end_ = nullptr;
};

// A share of a slice of segments (a pass's columns of each group of rows: bytes < stride) for a
// tile to ask for a line at a time: its lines in the segment where they start; the few that
// run on into the next segment it asks for at once, here. Rows read in passes within one token
// block (64 tokens of down_proj) so, rather than in a burst before each tile: on Zen 5, 2
// threads, f32 pp64 446-461 -> 460-467 tokens/s (5 alternated rounds, 5 wins), bf16 alike.
inline SliceLines segment_share(const Slice& s, size_t part, size_t parts) {
  const auto [per_segment, begin, end] = line_share(s, part, parts);
  if (begin >= end) return {};
  const size_t segment = begin / per_segment;
  const size_t split = std::min(end, (segment + 1) * per_segment);
  prefetch_lines(s, per_segment, split, end);
  const char* first = s.base + segment * s.stride + (begin % per_segment) * 64;
  return SliceLines(first, first + (split - begin) * 64);
}

// f(std::integral_constant<size_t, n>{}) for a count n in [1, kLimit), nothing for any other n:
// the last, narrower tile of a strip or strip of a block, at a size known at compile time.
template <class F, size_t... I>
inline void with_count(size_t n, F& f, std::index_sequence<I...>) {
  ((n == I + 1 ? (f(std::integral_constant<size_t, I + 1>{}), 0) : 0), ...);
}
template <size_t kLimit, class F>
inline void with_count(size_t n, F&& f) {
  with_count(n, f, std::make_index_sequence<kLimit - 1>{});
}

// Columns [c_begin, c_end) of tokens [t_begin, t_end) for one strip of R rows: full token
// tiles, then one narrower tile; tile i carries its accumulators in carry[i].
template <class Tile, size_t R, bool kPasses>
void strip(const typename Tile::W* w, const float* bias, const typename Tile::X* x, size_t x_stride, float* y,
           size_t rows, size_t cols, size_t r0, size_t t_begin, size_t t_end, size_t c_begin, size_t c_end,
           __m512* carry, const Slice& next, bool spread) {
  constexpr size_t kT = Tile::kTokenTile, kCarry = R * kT;  // vectors per tile in the carry buffer
  static_assert(kT >= 1);
  const size_t tiles = (t_end - t_begin + kT - 1) / kT;
  // Tile i of n tokens at token t; the first tile of a strip is the one whose weights come from
  // beyond L1 (kFirst).
  const auto run = [&](auto n, size_t t, __m512* c, size_t i) {
    constexpr size_t N = decltype(n)::value;
    const auto* xt = x + t * x_stride;
    if constexpr (Tile::kSpreadPrefetch) {
      if (spread) {
        const SliceLines lines = kPasses ? segment_share(next, i, tiles) : SliceLines(next, i, tiles);
        if (i == 0) {
          Tile::template run<R, N, kPasses, true, true>(w, bias, xt, x_stride, y, rows, cols, r0, t, c_begin, c_end, c,
                                                        lines);
        } else {
          Tile::template run<R, N, kPasses, true, false>(w, bias, xt, x_stride, y, rows, cols, r0, t, c_begin, c_end, c,
                                                         lines);
        }
        return;
      }
    }
    prefetch_share(next, i, tiles);
    if constexpr (Tile::kSpreadPrefetch) {
      Tile::template run<R, N, kPasses, false, false>(w, bias, xt, x_stride, y, rows, cols, r0, t, c_begin, c_end, c,
                                                      {});
    } else {
      Tile::template run<R, N, kPasses>(w, bias, xt, x_stride, y, rows, cols, r0, t, c_begin, c_end, c);
    }
  };
  size_t t = t_begin, i = 0;
  for (; t + kT <= t_end; t += kT, carry += kCarry, ++i) run(std::integral_constant<size_t, kT>{}, t, carry, i);
  with_count<kT>(t_end - t, [&](auto n) { run(n, t, carry, i); });
}

// One strip over all its columns, in passes when the rows are wide; the next strip's rows (up
// to row_end) are the ones prefetched after its last pass.
template <class Tile, size_t R>
void strip_passes(const typename Tile::W* w, const float* bias, const typename Tile::X* x, size_t x_stride, float* y,
                  size_t rows, size_t cols, size_t r0, size_t row_end, size_t t_begin, size_t t_end, bool spread) {
  using W = typename Tile::W;
  constexpr size_t kRowTile = Tile::kRowTile, kPassCols = Tile::kPassCols, kG = Tile::kG;
  const size_t row_bytes = cols * sizeof(W);
  const size_t next_r = r0 + R;
  const size_t next_rows = next_r < row_end ? (row_end - next_r < kRowTile ? row_end - next_r : kRowTile) : 0;
  const char* next_strip = reinterpret_cast<const char*>(w + next_r * cols);
  if (cols <= Tile::kMaxPassCols) {
    const Slice next{next_strip, row_bytes, row_bytes, next_rows};
    strip<Tile, R, false>(w, bias, x, x_stride, y, rows, cols, r0, t_begin, t_end, 0, cols, nullptr, next, spread);
    return;
  }
  constexpr size_t kCarryTiles = (Tile::kWideTokenBlock + Tile::kTokenTile - 1) / Tile::kTokenTile;
  alignas(64) thread_local __m512 carry[kCarryTiles * kRowTile * Tile::kTokenTile];
  for (size_t c = 0; c < cols; c += kPassCols) {
    const size_t e = c + kPassCols < cols ? c + kPassCols : cols;
    // A pass's columns of a group of kG rows are one segment in the packed layout.
    const Slice next =
        e < cols
            ? Slice{reinterpret_cast<const char*>(w + r0 * cols + e * kG),
                    (e + kPassCols < cols ? kPassCols : cols - e) * kG * sizeof(W), kG * row_bytes, (R + kG - 1) / kG}
            : Slice{next_strip, kPassCols * kG * sizeof(W), kG * row_bytes, (next_rows + kG - 1) / kG};
    strip<Tile, R, true>(w, bias, x, x_stride, y, rows, cols, r0, t_begin, t_end, c, e, carry, next, spread);
  }
}

// y = W x + bias for rows [row_begin, row_end) and tokens [0, n_tokens) (x: token t's row at
// x + t * x_stride): token blocks, each row range as full strips and one narrower strip.
template <class Tile>
void matmul(const typename Tile::W* w, const float* bias, const typename Tile::X* x, size_t x_stride, float* y,
            size_t rows, size_t cols, size_t n_tokens, size_t row_begin, size_t row_end) {
  constexpr size_t kR = Tile::kRowTile;
  static_assert(kR >= 1);
  const size_t block = cols <= Tile::kMaxPassCols ? Tile::kTokenBlock : Tile::kWideTokenBlock;
  // Each strip's requests spread over its tiles' loops (SliceLines) where one token block reads
  // the weights from memory once; over several blocks (512 tokens: ~2% slower spread) the
  // burst before each tile.
  const bool spread = n_tokens <= block;
  for (size_t tb = 0; tb < n_tokens; tb += block) {
    const size_t te = tb + block < n_tokens ? tb + block : n_tokens;
    size_t r = row_begin;
    for (; r + kR <= row_end; r += kR)
      strip_passes<Tile, kR>(w, bias, x, x_stride, y, rows, cols, r, row_end, tb, te, spread);
    with_count<kR>(row_end - r, [&](auto n) {
      strip_passes<Tile, decltype(n)::value>(w, bias, x, x_stride, y, rows, cols, r, row_end, tb, te, spread);
    });
  }
}

}  // namespace prefill
}  // namespace
}  // namespace nanoinfer::kernels
