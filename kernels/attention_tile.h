// The attention kernel body shared by the scalar reference (kernels/scalar.cpp, Ops of one
// lane, no FMA), the AVX2 tier (kernels/kernels_avx2.cpp, eight lanes, FMA) and the AVX-512
// tiers (kernels/attention_avx512.cpp, sixteen lanes, FMA): one KV head's
// query block against every key it may see, in one pass over the keys with an online softmax
// (a running maximum and sum per query row, no buffer of scores over the whole context).
// Include only from those files (and kernels/attention_avx2_ops.h): everything here has
// internal linkage.
//
// Ops must provide (on top of what the exp needs):
//   using vec;  static constexpr size_t width, row_tile (query rows per register tile),
//   vec_tile (vectors of keys, or of head_dim elements, per register tile row);
//   vec load(const float*); void store(float*, vec); vec set1(float); vec zero();
//   vec fma(vec a, vec b, vec c)  (a*b+c; one rounding on FMA tiers, two on the scalar one)
//   vec mul(vec, vec); vec add(vec, vec); vec sub(vec, vec); vec max(vec, vec)
//   vec div(vec, vec)   (SiLU's only)
//   vec lt(vec a, vec b) -> mask;  vec select(mask, vec if_true, vec if_false)
//   float hmax(vec); float hsum(vec)   (fixed lane order)
//   vec exp(vec)   (the vector exp below, exp_impl)
//   void to_f32(const KvT* src, float* dst, size_t n)   (a cached row widened, exactly)
//   vec load_kv(const KvT* p)   (width cached elements widened, exactly; load for float)
//   void transpose_block(const KvT* k, size_t stride, size_t n_rows, size_t hd, float* kt)
//       kt[d][j] = widen(k[j * stride + d]) for j < n_rows (a whole kKeyBlock of kt columns,
//       zero past n_rows)
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/kernels.h"
#include "nanoinfer/dtype.h"

namespace nanoinfer::kernels {
namespace {

// ---- exp -------------------------------------------------------------------------------------
// e^x = 2^n e^r with n = round(x log2 e) and r = x - n ln2 in [-ln2/2, ln2/2] (plus rounding),
// ln2 split into C1 (9 significant bits: n * C1 is exact for |n| <= 128, and x - n * C1 is exact
// by Sterbenz) and C2 = the float nearest ln2 - C1 (|error| <= 2^-37). e^r is the degree-7
// Taylor polynomial in Horner form; 2^n is built in the exponent bits.
//
// Error bound, relative, for kExpLo <= x <= kExpHi, with u = 2^-24 (derivation):
//   truncation   |r|^8 / 8! * e^|r| / e^r        <= 1.1e-8           = 0.17 u
//   r            rounding of r - n*C2 (and of n*C2 without FMA), |n * C2 error| <= 128 * 2^-37:
//                absolute error in r <= 0.38 u + 1e-9, the same relative error in e^r  <= 0.40 u
//   Horner       a rounding of each partial value p_k (of both the product and the sum without
//                FMA), carried to the result times |r|^k: sum_k |r|^k |p_k| / e^r with
//                |p_0| <= 1.42, |r p_1| <= 0.41, |r^2 p_2| <= 0.07, rest < 0.01: <= 1.7 u (FMA),
//                <= 2.4 u (separate roundings)
//   coefficients 1/k! rounded, weighted by |r|^k / k! for k >= 3               <= 0.01 u
//   2^n          exact (the result is normal for x >= kExpLo)
// Total <= 2.3 u (FMA) and <= 3.0 u (scalar reference), both below kExpRelError = 4 u = 2^-22,
// the bound tests/kernels/attention_test.cpp holds every ISA to against float64 exp. A degree-6
// polynomial (truncation 1.5e-7 = 2.5 u, so a total above 4 u near |r| = ln2/2) or a dropped
// C2 (error n * 2e-4) would fail it.
// Outside: x < kExpLo (e^x < FLT_MIN) gives +0, -inf included (absolute error < FLT_MIN);
// x > kExpHi gives +inf (attention only ever asks for x <= 0); NaN gives NaN.
constexpr float kExpLo = -87.33654475f;  // ln(FLT_MIN): below, the result would be subnormal
constexpr float kExpHi = 88.37626266f;   // 127.5 ln2: n <= 127, so 2^n is a normal float
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kExpC1 = 0.693359375f;
constexpr float kExpC2 = -2.12194440e-4f;
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: v + magic - magic rounds v to nearest even
constexpr float kExpCoef[8] = {1.0f, 1.0f, 0.5f, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040};

// The keys of one block: its K rows are transposed (and widened) once into [head_dim][kKeyBlock]
// and its V rows widened once, for every query row of the block to read.
constexpr size_t kKeyBlock = kAttentionKeyBlock;
// Query rows scored together against one key block (register tile): Ops::row_tile rows x
// Ops::vec_tile vectors, so a tile's row_tile * vec_tile accumulators stay in registers. The
// tile shape only groups independent chains: each score and each weighted sum is the same chain
// (same operations, same order) whatever the tile, so the shape never changes a bit.

template <class Ops>
inline typename Ops::vec exp_impl(typename Ops::vec x) {
  using V = typename Ops::vec;
  const V xc = Ops::max(Ops::min(x, Ops::set1(kExpHi)), Ops::set1(kExpLo));
  const V fn = Ops::sub(Ops::add(Ops::mul(xc, Ops::set1(kLog2e)), Ops::set1(kRoundMagic)), Ops::set1(kRoundMagic));
  V r = Ops::fnma(fn, Ops::set1(kExpC1), xc);
  r = Ops::fnma(fn, Ops::set1(kExpC2), r);
  V p = Ops::set1(kExpCoef[7]);
#pragma GCC unroll 8
  for (int k = 6; k >= 0; --k) p = Ops::fma(p, r, Ops::set1(kExpCoef[k]));
  V y = Ops::mul(p, Ops::pow2(fn));
  y = Ops::select(Ops::lt(x, Ops::set1(kExpLo)), Ops::zero(), y);
  y = Ops::select(Ops::lt(Ops::set1(kExpHi), x), Ops::set1(std::numeric_limits<float>::infinity()), y);
  return Ops::select(Ops::isnan(x), x, y);
}

template <class Ops>
void exp_rows(const float* x, float* y, size_t n) {
  constexpr size_t W = Ops::width;
  size_t i = 0;
  for (; i + W <= n; i += W) Ops::store(y + i, exp_impl<Ops>(Ops::load(x + i)));
  for (; i < n; ++i) y[i] = Ops::first(exp_impl<Ops>(Ops::set1(x[i])));
}

// ---- SiLU ------------------------------------------------------------------------------------
// out = g / (1 + e^-g) * up, as the exact formula reads, with e^-g from exp_impl: four
// roundings after the exp (its error E), each within u = 2^-24 relative.
// Error bound, relative to the exact g up / (1 + e^-g), for -kExpHi <= g (derivation):
//   exp          e' = e^-g (1 + d), |d| <= kExpRelError = 4 u (derived above)
//   1 + e'       (1 + e^-g) (1 + d e^-g / (1 + e^-g)): relative error <= |d| (the weight
//                e^-g / (1 + e^-g) is below 1), then one rounding:              <= 4 u + u
//   g / (..)     a relative error x of the divisor is one of x / (1 - x) in the quotient
//                (5 u + O(u^2)), then one rounding                                   + u
//   * up         one rounding                                                        + u
// Total <= 7 u + O(u^2) < kSiluRelError = 8 u = 2^-21 where the quotient and the result are
// normal floats (a subnormal one is rounded to an absolute 2^-150 instead, times |up| for the
// quotient's), the bound tests/kernels/attention_test.cpp holds every ISA to against float64.
// Outside: g < -kExpHi makes e' = +inf and the result a zero of sign(g up) (the exact one is
// below 88.4 e^-88.37 |up| < 4e-37 |up| in magnitude); g > -kExpLo makes e' = 0 and the result
// fl(g * up), exact to u; NaN stays NaN (as g = -inf does, as with std::exp: -inf / inf).
template <class Ops>
inline typename Ops::vec silu_mul_impl(typename Ops::vec g, typename Ops::vec up) {
  const typename Ops::vec e = exp_impl<Ops>(Ops::sub(Ops::zero(), g));
  return Ops::mul(Ops::div(g, Ops::add(Ops::set1(1.0f), e)), up);
}

template <class Ops>
void silu_mul_rows(const float* gate, const float* up, float* out, size_t n) {
  constexpr size_t W = Ops::width;
  size_t i = 0;
  for (; i + W <= n; i += W) Ops::store(out + i, silu_mul_impl<Ops>(Ops::load(gate + i), Ops::load(up + i)));
  for (; i < n; ++i) out[i] = Ops::first(silu_mul_impl<Ops>(Ops::set1(gate[i]), Ops::set1(up[i])));
}

// ---- attention ---------------------------------------------------------------------------------

// The cache's element types, as distinct types over the same bits.
struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};
inline float widen(float x) {
  return x;
}
inline float widen(Bf16 x) {
  return bf16_to_f32(x.bits);
}
inline float widen(F16 x) {
  return f16_to_f32(x.bits);
}

// One lane, plain float arithmetic: the reference (compiled without FMA in kernels/scalar.cpp,
// and used by the SIMD tiers for a head_dim that is not a whole number of vectors).
struct ScalarOps {
  using vec = float;
  static constexpr size_t width = 1;
  static constexpr size_t row_tile = 2;
  static constexpr size_t vec_tile = 4;
  static float load(const float* p) { return *p; }
  static void store(float* p, float v) { *p = v; }
  static float set1(float v) { return v; }
  static float zero() { return 0.0f; }
  static float first(float v) { return v; }
  static float fma(float a, float b, float c) { return a * b + c; }
  static float fnma(float a, float b, float c) { return c - a * b; }
  static float mul(float a, float b) { return a * b; }
  static float add(float a, float b) { return a + b; }
  static float sub(float a, float b) { return a - b; }
  static float div(float a, float b) { return a / b; }
  static float max(float a, float b) { return a > b ? a : b; }
  static float min(float a, float b) { return a < b ? a : b; }
  static bool lt(float a, float b) { return a < b; }
  static bool isnan(float x) { return x != x; }
  static float select(bool m, float t, float f) { return m ? t : f; }
  static float pow2(float fn) {
    return std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(fn) + 127) << 23);
  }
  static float hmax(float v) { return v; }
  static float hsum(float v) { return v; }
  template <class KvT>
  static void to_f32(const KvT* src, float* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = widen(src[i]);
  }
  template <class KvT>
  static float load_kv(const KvT* p) {
    return widen(*p);
  }
  template <class KvT>
  static void transpose_block(const KvT* k, size_t stride, size_t n_rows, size_t hd, float* kt) {
    for (size_t j = 0; j < n_rows; ++j)
      for (size_t d = 0; d < hd; ++d) kt[d * kKeyBlock + j] = widen(k[j * stride + d]);
    for (size_t d = 0; d < hd; ++d)
      for (size_t j = n_rows; j < kKeyBlock; ++j) kt[d * kKeyBlock + j] = 0.0f;
  }
};

// The next block's K and V rows, requested a few cache lines at a time from inside the loops
// of the first register tile (its scores' loop over head_dim, its weighted sums' loop over
// keys), so that the requests spread over the block's work: a decode step reads the cache
// from memory, and a burst of all of a block's lines at once stalls the core once the misses
// the L1 can track are taken, the block's work waiting behind the rest of the burst (a perf
// profile of the decode step at depth 4,096 had a fifth of attention's samples on that
// burst). Each thread streams two row sets (K and V) with a stride (the other KV heads'
// columns) that the hardware prefetcher follows late. Order: each row's K and V lines in turn.
struct LinePrefetch {
  const char* k = nullptr;
  const char* v = nullptr;
  size_t stride = 0;     // bytes from one row to the next
  size_t row_bytes = 0;  // bytes of a row to request
  size_t rows = 0;       // rows to request (0: nothing to do)
  size_t per_step = 0;   // lines (of K, and as many of V) per step()
  size_t row = 0, off = 0;
  void line() {
    __builtin_prefetch(k + row * stride + off);
    __builtin_prefetch(v + row * stride + off);
    off += 64;
    if (off >= row_bytes) {
      off = 0;
      ++row;
    }
  }
  void step() {
    for (size_t i = 0; i < per_step && row < rows; ++i) line();
  }
  void finish() {
    while (row < rows) line();
  }
};

// Scores of rows [r, r + NR) of qs ([R][hd], already scaled) against the block's kt
// ([hd][kKeyBlock]): s[r][j] = sum_d qs[r][d] * kt[d][j], d in ascending order, one chain per
// (row, key) whatever tile it is in.
template <class Ops, size_t NR>
inline void score_rows(const float* qs, const float* kt, float* s, size_t hd, size_t r, LinePrefetch* pf) {
  using V = typename Ops::vec;
  constexpr size_t W = Ops::width;
  constexpr size_t kVecTile = Ops::vec_tile;
  constexpr size_t NJ = kKeyBlock / W;
  static_assert(NJ % kVecTile == 0);
  for (size_t j0 = 0; j0 < NJ; j0 += kVecTile) {
    V acc[NR][kVecTile];
#pragma GCC unroll 8
    for (size_t a = 0; a < NR; ++a)
#pragma GCC unroll 8
      for (size_t b = 0; b < kVecTile; ++b) acc[a][b] = Ops::zero();
    for (size_t d = 0; d < hd; ++d) {
      if (pf != nullptr) pf->step();
      V kv[kVecTile];
#pragma GCC unroll 8
      for (size_t b = 0; b < kVecTile; ++b) kv[b] = Ops::load(kt + d * kKeyBlock + (j0 + b) * W);
#pragma GCC unroll 8
      for (size_t a = 0; a < NR; ++a) {
        const V qd = Ops::set1(qs[(r + a) * hd + d]);
#pragma GCC unroll 8
        for (size_t b = 0; b < kVecTile; ++b) acc[a][b] = Ops::fma(qd, kv[b], acc[a][b]);
      }
    }
#pragma GCC unroll 8
    for (size_t a = 0; a < NR; ++a)
#pragma GCC unroll 8
      for (size_t b = 0; b < kVecTile; ++b) Ops::store(s + (r + a) * kKeyBlock + (j0 + b) * W, acc[a][b]);
  }
}

// acc[r] += sum_{j < nj} p[r][j] * vb[j] for rows [r, r + NR), j in ascending order, one chain
// per (row, element). Terms with p = 0 (masked keys) add exactly nothing, so a row gets the same
// bits whichever rows it is paired with.
template <class Ops, size_t NR, class SrcT>
inline void accumulate_values(const float* p, const SrcT* vb, size_t vstride, float* acc, size_t hd, size_t r,
                              size_t nj, LinePrefetch* pf) {
  using V = typename Ops::vec;
  constexpr size_t W = Ops::width;
  constexpr size_t kVecTile = Ops::vec_tile;
  size_t d0 = 0;
  for (; d0 + kVecTile * W <= hd; d0 += kVecTile * W) {
    V a[NR][kVecTile];
#pragma GCC unroll 8
    for (size_t x = 0; x < NR; ++x)
#pragma GCC unroll 8
      for (size_t b = 0; b < kVecTile; ++b) a[x][b] = Ops::load(acc + (r + x) * hd + d0 + b * W);
    for (size_t j = 0; j < nj; ++j) {
      if (pf != nullptr) pf->step();
      V vv[kVecTile];
#pragma GCC unroll 8
      for (size_t b = 0; b < kVecTile; ++b) vv[b] = Ops::load_kv(vb + j * vstride + d0 + b * W);
#pragma GCC unroll 8
      for (size_t x = 0; x < NR; ++x) {
        const V pj = Ops::set1(p[(r + x) * kKeyBlock + j]);
#pragma GCC unroll 8
        for (size_t b = 0; b < kVecTile; ++b) a[x][b] = Ops::fma(pj, vv[b], a[x][b]);
      }
    }
#pragma GCC unroll 8
    for (size_t x = 0; x < NR; ++x)
#pragma GCC unroll 8
      for (size_t b = 0; b < kVecTile; ++b) Ops::store(acc + (r + x) * hd + d0 + b * W, a[x][b]);
  }
  for (; d0 < hd; d0 += W) {  // hd is a multiple of W
#pragma GCC unroll 8
    for (size_t x = 0; x < NR; ++x) {
      V a = Ops::load(acc + (r + x) * hd + d0);
      for (size_t j = 0; j < nj; ++j)
        a = Ops::fma(Ops::set1(p[(r + x) * kKeyBlock + j]), Ops::load_kv(vb + j * vstride + d0), a);
      Ops::store(acc + (r + x) * hd + d0, a);
    }
  }
}

// The rows [r, R) left after the whole register tiles, in tiles of fewer rows (largest first:
// a decode step's 7 rows of one KV head are 4 + 3 on sixteen lanes, not 4 + 1 + 1 + 1).
template <class Ops, size_t N>
inline void score_rest(const float* qs, const float* kt, float* s, size_t hd, size_t r, size_t R, LinePrefetch* pf) {
  if constexpr (N > 0) {
    if (R - r >= N) {
      score_rows<Ops, N>(qs, kt, s, hd, r, pf);
      r += N;
      pf = nullptr;
    }
    score_rest<Ops, N - 1>(qs, kt, s, hd, r, R, pf);
  }
}

// Likewise for the weighted sums of values; a tile's rows take the keys its last row sees
// (the others' extra weights are 0).
template <class Ops, size_t N, class SrcT>
inline void accumulate_rest(const float* s, const SrcT* vrows, size_t vstride, float* acc, size_t hd, size_t r,
                            size_t R, size_t g, size_t pos0, size_t kb, size_t nk, LinePrefetch* pf) {
  if constexpr (N > 0) {
    if (R - r >= N) {
      const size_t t_last = (r + N - 1) / g;
      const size_t nj = pos0 + t_last + 1 - kb < nk ? pos0 + t_last + 1 - kb : nk;
      accumulate_values<Ops, N>(s, vrows, vstride, acc, hd, r, nj, pf);
      r += N;
      pf = nullptr;
    }
    accumulate_rest<Ops, N - 1>(s, vrows, vstride, acc, hd, r, R, g, pos0, kb, nk, pf);
  }
}

template <class Ops, class KvT>
uint64_t attention_tile(const AttentionTile& a) {
  using V = typename Ops::vec;
  constexpr size_t W = Ops::width;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t hd = a.head_dim, g = a.group, R = a.n_q * g;
  const size_t n_keys = a.pos0 + a.n_q;
  const KvT* k = static_cast<const KvT*>(a.k);
  const KvT* v = static_cast<const KvT*>(a.v);
  float* kt = a.scratch;            // [hd][kKeyBlock]
  float* vb = kt + hd * kKeyBlock;  // [kKeyBlock][hd]
  float* s = vb + kKeyBlock * hd;   // [R][kKeyBlock]: scores, then weights
  float* acc = s + R * kKeyBlock;   // [R][hd]
  float* qs = acc + R * hd;         // [R][hd]
  float* m = qs + R * hd;           // [R] running maximum
  float* l = m + R;                 // [R] running sum

  for (size_t t = 0; t < a.n_q; ++t)
    for (size_t h = 0; h < g; ++h) {
      const float* src = a.q + t * a.q_stride + h * hd;
      float* dst = qs + (t * g + h) * hd;
      for (size_t d = 0; d < hd; ++d) dst[d] = src[d] * a.scale;
    }
  for (size_t i = 0; i < R * hd; ++i) acc[i] = 0.0f;
  for (size_t r = 0; r < R; ++r) {
    m[r] = kNegInf;
    l[r] = 0.0f;
  }

  // Query rows that see no key of block kb (t with pos0 + t < kb) are left out: the rows are
  // ordered by t, so they are the first ones.
  auto r_first_of = [&](size_t kb) { return (kb > a.pos0 ? kb - a.pos0 : 0) * g; };
  uint64_t rows_read = 0;
  for (size_t kb = 0; kb < n_keys; kb += kKeyBlock) {
    const size_t nk = n_keys - kb < kKeyBlock ? n_keys - kb : kKeyBlock;
    const size_t r_first = r_first_of(kb);
    // Each K and V row of the block is read here, once for all R query rows.
    Ops::transpose_block(k + kb * a.kv_stride, a.kv_stride, nk, hd, kt);
    // V: f32 rows are read in place. Other types are widened once into vb when several row
    // tiles will read them; when all the rows are one tile (a decode step: one position's
    // `group` heads), that tile widens them as it loads them, which saves writing and reading
    // back vb (the widening is exact, so the sums are the same either way).
    const bool v_direct = std::is_same_v<KvT, float> || R - r_first <= Ops::row_tile;
    if (!v_direct)
      for (size_t j = 0; j < nk; ++j) Ops::to_f32(v + (kb + j) * a.kv_stride, vb + j * hd, hd);
    // The next block's rows (see LinePrefetch): a share of them per iteration of the first
    // register tile's loops (hd in its scores, nk in its weighted sums), the rest at the end.
    LinePrefetch pf;
    if (kb + kKeyBlock < n_keys) {
      const size_t row0 = kb + kKeyBlock;
      pf.k = reinterpret_cast<const char*>(k + row0 * a.kv_stride);
      pf.v = reinterpret_cast<const char*>(v + row0 * a.kv_stride);
      pf.stride = a.kv_stride * sizeof(KvT);
      pf.row_bytes = hd * sizeof(KvT);
      pf.rows = n_keys - row0 < kKeyBlock ? n_keys - row0 : kKeyBlock;
      const size_t lines = pf.rows * ((pf.row_bytes + 63) / 64);
      pf.per_step = (lines + hd + nk - 1) / (hd + nk);
    }
    rows_read += nk;

    size_t r = r_first;
    LinePrefetch* first = &pf;
    for (; r + Ops::row_tile <= R; r += Ops::row_tile) {
      score_rows<Ops, Ops::row_tile>(qs, kt, s, hd, r, first);
      first = nullptr;
    }
    score_rest<Ops, Ops::row_tile - 1>(qs, kt, s, hd, r, R, first);

    for (r = r_first; r < R; ++r) {
      const size_t t = r / g;
      const size_t visible = a.pos0 + t + 1 - kb < nk ? a.pos0 + t + 1 - kb : nk;  // >= 1
      float* sr = s + r * kKeyBlock;
      for (size_t j = visible; j < kKeyBlock; ++j) sr[j] = kNegInf;
      V mv = Ops::set1(kNegInf);
      for (size_t j = 0; j < kKeyBlock; j += W) mv = Ops::max(mv, Ops::load(sr + j));
      const float block_max = Ops::hmax(mv);
      const float m_new = block_max > m[r] ? block_max : m[r];
      const float corr = Ops::first(exp_impl<Ops>(Ops::set1(m[r] - m_new)));  // 0 for the first block
      const V mn = Ops::set1(m_new);
      V sum = Ops::zero();
      for (size_t j = 0; j < kKeyBlock; j += W) {
        const V p = exp_impl<Ops>(Ops::sub(Ops::load(sr + j), mn));  // masked: exp(-inf) = 0
        Ops::store(sr + j, p);
        sum = Ops::add(sum, p);
      }
      l[r] = l[r] * corr + Ops::hsum(sum);
      m[r] = m_new;
      if (corr != 1.0f) {
        const V c = Ops::set1(corr);
        for (size_t d = 0; d < hd; d += W) Ops::store(acc + r * hd + d, Ops::mul(Ops::load(acc + r * hd + d), c));
      }
    }
    auto accumulate = [&](const auto* vrows, size_t vstride) {
      size_t r0 = r_first;
      LinePrefetch* first_sums = &pf;
      for (; r0 + Ops::row_tile <= R; r0 += Ops::row_tile) {
        const size_t t_last = (r0 + Ops::row_tile - 1) / g;
        const size_t nj = a.pos0 + t_last + 1 - kb < nk ? a.pos0 + t_last + 1 - kb : nk;
        accumulate_values<Ops, Ops::row_tile>(s, vrows, vstride, acc, hd, r0, nj, first_sums);
        first_sums = nullptr;
      }
      accumulate_rest<Ops, Ops::row_tile - 1>(s, vrows, vstride, acc, hd, r0, R, g, a.pos0, kb, nk, first_sums);
    };
    if (v_direct) {
      accumulate(v + kb * a.kv_stride, a.kv_stride);
    } else {
      accumulate(static_cast<const float*>(vb), hd);
    }
    pf.finish();
  }

  for (size_t t = 0; t < a.n_q; ++t)
    for (size_t h = 0; h < g; ++h) {
      const size_t r = t * g + h;
      const V inv = Ops::set1(1.0f / l[r]);
      float* dst = a.out + t * a.q_stride + h * hd;
      for (size_t d = 0; d < hd; d += W) Ops::store(dst + d, Ops::mul(Ops::load(acc + r * hd + d), inv));
    }
  return rows_read;
}

}  // namespace
}  // namespace nanoinfer::kernels
