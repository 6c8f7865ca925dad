// Tiled attention (kernels/attention_tile.h through model/ops.h's attention) and its vector
// exp, against float64 and against the exact path attention had before tiling, with error
// bounds derived below; causal masking at key-block edges; the work it does (K/V rows read,
// counted by the kernels); and the compact cache types.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "model/ops.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/thread_pool.h"
#include "support/isa.h"
#include "support/naive_attention.h"
#include "support/random.h"
#include "support/sanitized.h"

namespace nanoinfer {
namespace {

constexpr double kU = 0x1p-24;  // unit roundoff of f32

// ---- exp -----------------------------------------------------------------------------------

// The domain stated in kernels/kernels.h and derived in kernels/attention_tile.h.
constexpr float kExpLo = -87.33654475f;
constexpr float kExpHi = 88.37626266f;
constexpr double kExpRelError = 0x1p-22;  // 4 u

TEST(VectorExp, WithinItsBoundOfFloat64OverTheWholeRange) {
  // Every 61st float of [kExpLo, kExpHi] (about 36 million), both signs, in bit-pattern order
  // so that every binade is covered as densely as the floats themselves are.
  std::vector<float> x;
  const uint32_t neg_end = std::bit_cast<uint32_t>(kExpLo), pos_end = std::bit_cast<uint32_t>(kExpHi);
  for (uint32_t b = 0x80000000u; b <= neg_end; b += 61) x.push_back(std::bit_cast<float>(b));
  for (uint32_t b = 0; b <= pos_end; b += 61) x.push_back(std::bit_cast<float>(b));
  x.push_back(kExpLo);
  x.push_back(kExpHi);
  x.push_back(0.0f);
  x.push_back(-0.0f);
  for (Isa isa : test::supported_isas()) {
    const kernels::Kernels& k = kernels::table(isa);
    std::vector<float> y(x.size());
    k.exp_f32(x.data(), y.data(), x.size());
    double worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double exact = std::exp(static_cast<double>(x[i]));
      const double rel = std::abs(static_cast<double>(y[i]) - exact) / exact;
      if (rel > worst) {
        worst = rel;
        worst_x = x[i];
      }
    }
    EXPECT_LE(worst, kExpRelError) << isa_name(isa) << " at x = " << worst_x;
    std::printf("exp %s: max relative error %.3g (%.2f u) at x = %.9g over %zu inputs\n",
                std::string(isa_name(isa)).c_str(), worst, worst / kU, worst_x, x.size());
  }
}

TEST(VectorExp, UnderflowsToZeroOverflowsToInfinityKeepsNan) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf,   -std::numeric_limits<float>::max(),     -1e30f, -1000.0f, -104.0f,
                          -88.0f, std::nextafter(kExpLo, -inf),           88.5f,  89.0f,    1000.0f,
                          inf,    std::numeric_limits<float>::quiet_NaN()};
  // A run of very negative inputs long enough for the vector body.
  for (int i = 0; i < 19; ++i) x.push_back(-87.4f - 0.731f * static_cast<float>(i));
  for (Isa isa : test::supported_isas()) {
    std::vector<float> y(x.size());
    kernels::table(isa).exp_f32(x.data(), y.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(y[i])) << isa_name(isa);
      } else if (x[i] < kExpLo) {
        // e^x < FLT_MIN: the absolute error of +0 is below FLT_MIN.
        EXPECT_EQ(std::bit_cast<uint32_t>(y[i]), 0u) << isa_name(isa) << " x = " << x[i];
        EXPECT_LT(std::exp(static_cast<double>(x[i])), static_cast<double>(std::numeric_limits<float>::min()));
      } else {
        EXPECT_EQ(y[i], inf) << isa_name(isa) << " x = " << x[i];
      }
    }
  }
}

// ---- SiLU ----------------------------------------------------------------------------------

constexpr double kSiluRelError = 0x1p-21;  // 8 u, derived in kernels/attention_tile.h

// silu(g) * up against float64 for every 997th float g of [-kExpHi, -kExpLo] (every 9,973rd
// under the sanitizers), both signs in bit-pattern order, with up cycling through exact values of
// both signs and several binades, at lengths that leave a tail for the one-lane path; then
// the same bits in place (out = gate). The relative bound holds where the quotient and the
// result are normal floats (|g| >= 2^-100, |result| >= FLT_MIN); elsewhere a subnormal
// rounding adds an absolute 2^-150 at most, times |up| for the quotient's.
TEST(VectorSilu, WithinItsBoundOfFloat64OverTheWholeRange) {
  const uint32_t step = test::kSanitized ? 9973 : 997;
  std::vector<float> g;
  const uint32_t neg_end = std::bit_cast<uint32_t>(-kExpHi), pos_end = std::bit_cast<uint32_t>(-kExpLo);
  for (uint32_t b = 0x80000000u; b <= neg_end; b += step) g.push_back(std::bit_cast<float>(b));
  for (uint32_t b = 0; b <= pos_end; b += step) g.push_back(std::bit_cast<float>(b));
  g.push_back(-kExpHi);
  g.push_back(-kExpLo);
  g.push_back(1.0f);
  const float ups[] = {1.0f, -0.75f, 3.5f, -1e-3f, 65504.0f, 0.0f, -2.0f};
  std::vector<float> up(g.size());
  for (size_t i = 0; i < up.size(); ++i) up[i] = ups[i % std::size(ups)];
  std::vector<double> exact(g.size());
  for (size_t i = 0; i < g.size(); ++i) exact[i] = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * double(up[i]);
  const double flt_min = std::numeric_limits<float>::min();
  for (Isa isa : test::supported_isas()) {
    const kernels::Kernels& k = kernels::table(isa);
    std::vector<float> y(g.size());
    k.silu_mul_f32(g.data(), up.data(), y.data(), g.size());
    std::vector<float> in_place = g;
    k.silu_mul_f32(in_place.data(), up.data(), in_place.data(), g.size());
    EXPECT_EQ(std::memcmp(in_place.data(), y.data(), y.size() * sizeof(float)), 0) << isa_name(isa);
    double worst = 0;
    float worst_g = 0;
    size_t relative = 0, absolute = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const double err = std::abs(double(y[i]) - exact[i]);
      if (std::abs(g[i]) >= 0x1p-100 && std::abs(exact[i]) >= flt_min) {
        const double rel = err / std::abs(exact[i]);
        if (rel > worst) {
          worst = rel;
          worst_g = g[i];
        }
        ++relative;
      } else {
        EXPECT_LE(err, kSiluRelError * std::abs(exact[i]) + 0x1p-150 * (std::abs(up[i]) + 1))
            << isa_name(isa) << " g = " << g[i] << " up = " << up[i];
        ++absolute;
      }
    }
    EXPECT_LE(worst, kSiluRelError) << isa_name(isa) << " at g = " << worst_g;
    EXPECT_GT(relative, g.size() / 2);  // most inputs are held to the relative bound
    std::printf("silu %s: max relative error %.3g (%.2f u) at g = %.9g over %zu inputs (%zu near zero)\n",
                std::string(isa_name(isa)).c_str(), worst, worst / kU, worst_g, relative, absolute);
  }
}

TEST(VectorSilu, OutsideTheRangeGivesZeroOrTheProductAndKeepsNan) {
  const float inf = std::numeric_limits<float>::infinity();
  // Below -kExpHi: a zero of sign(g up), whose exact value is below 4e-37 |up|.
  std::vector<float> g = {std::nextafter(-kExpHi, -inf),          -88.7f, -89.0f,  -1000.0f, -1e30f,
                          std::nextafter(-kExpLo, inf),           88.0f,  1000.0f, 1e30f,    inf,
                          std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 19; ++i) g.push_back(-88.4f - 0.731f * static_cast<float>(i));  // the vector body
  std::vector<float> up(g.size(), -3.0f);
  for (Isa isa : test::supported_isas()) {
    std::vector<float> y(g.size());
    kernels::table(isa).silu_mul_f32(g.data(), up.data(), y.data(), g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      if (std::isnan(g[i])) {
        EXPECT_TRUE(std::isnan(y[i])) << isa_name(isa);
      } else if (g[i] < -kExpHi) {
        EXPECT_EQ(std::bit_cast<uint32_t>(y[i]), 0u) << isa_name(isa) << " g = " << g[i];  // +0: g < 0, up < 0
        EXPECT_LT(std::abs(double(g[i]) * std::exp(double(g[i])) * up[i]), 4e-37 * 3) << g[i];
      } else {
        EXPECT_EQ(y[i], g[i] * up[i]) << isa_name(isa) << " g = " << g[i];  // e^-g = 0: fl(g up)
      }
    }
  }
}

// ---- attention -----------------------------------------------------------------------------

using test::naive_attention;

// The bound on |tiled - exact| for one problem, from the error sources of the tiled kernel
// (kernels/attention_tile.h) with u = 2^-24, n keys in B = ceil(n / 64) blocks:
//   scores   s_j = sum_d (q_d * scale) k_d, one chain of hd (+1 for the scaling) roundings:
//            |ds_j| <= (hd + 1) u S_j, S_j = sum_d |q_d scale k_d|; a perturbation of the
//            scores by at most ds moves every softmax weight by a relative 2 ds (first order;
//            2.1 covers the second);
//   s_j - m  one rounding: a relative u |s_j - m| <= u D in p_j (D: the spread of the
//            scores), 2 u D in the normalized weights;
//   exp      4 u per weight (2 x: weight and sum); a block's correction factor multiplies both
//            the running sum and the running output, so its own error cancels and only the
//            two products' roundings remain: 2 u per block;
//   sums     the running sum: at most n + 2B + 3 roundings of positive terms; the weighted sum
//            of values: one chain over the n keys plus B rescalings per element, relative to
//            sum_j p_j |v_j| <= max|v| sum_j p_j; the final 1/l and product: 2 u.
// |o - o_exact| <= max|v| * (2.1 ds + 2 u D + (2n + 4B + 13) u).
// A wrong kernel is far outside it: a missing rescale, an off-by-one mask or a dropped block
// moves outputs by O(1 / n) of max|v|, thousands of times this bound for these sizes.
double tiled_bound(const AttentionShape& s, const std::vector<float>& q, const std::vector<float>& k,
                   const std::vector<float>& v, size_t n, size_t pos0) {
  const size_t hd = s.head_dim, qd = s.n_heads * hd, kvd = s.n_kv_heads * hd, g = s.n_heads / s.n_kv_heads;
  const size_t keys = pos0 + n;
  const double scale = 1.0 / std::sqrt(double(hd));
  double ds = 0, spread = 0, vmax = 0;
  for (size_t t = 0; t < n; ++t)
    for (size_t h = 0; h < s.n_heads; ++h) {
      double lo = 1e300, hi = -1e300;
      for (size_t j = 0; j <= pos0 + t; ++j) {
        double abs_sum = 0, dot = 0;
        for (size_t i = 0; i < hd; ++i) {
          const double p = double(q[t * qd + h * hd + i]) * scale * k[j * kvd + (h / g) * hd + i];
          abs_sum += std::abs(p);
          dot += p;
        }
        ds = std::max(ds, double(hd + 1) * kU * abs_sum);
        lo = std::min(lo, dot);
        hi = std::max(hi, dot);
      }
      spread = std::max(spread, hi - lo);
    }
  for (float x : v) vmax = std::max(vmax, double(std::abs(x)));
  const double blocks = double((keys + kernels::kAttentionKeyBlock - 1) / kernels::kAttentionKeyBlock);
  return vmax * (2.1 * ds + 2 * kU * spread + (2.0 * double(keys) + 4 * blocks + 13) * kU);
}

struct Problem {
  AttentionShape shape;
  size_t n, pos0;
  std::vector<float> q, k, v;
  Problem(AttentionShape s, size_t n_, size_t pos0_, float q_range, uint32_t seed) : shape(s), n(n_), pos0(pos0_) {
    q = test::random_floats(n * s.n_heads * s.head_dim, seed);
    for (float& x : q) x *= q_range;
    k = test::random_floats((pos0 + n) * s.n_kv_heads * s.head_dim, seed + 1);
    v = test::random_floats((pos0 + n) * s.n_kv_heads * s.head_dim, seed + 2);
  }
  size_t kv_dim() const { return shape.n_kv_heads * shape.head_dim; }
  std::vector<float> tiled(const kernels::Kernels& k_table, int threads, uint64_t* rows = nullptr) const {
    ThreadPool pool(threads);
    const Compute c{&pool, &k_table};
    std::vector<float> out(q.size(), -1.0f);
    AttentionWork work;
    attention(c, shape, q.data(), KvView{k.data(), v.data(), DType::F32, kv_dim()}, out.data(), n, pos0, &work);
    if (rows) *rows = work.kv_rows_read;
    return out;
  }
  std::vector<float> exact(const kernels::Kernels& k_table) const {
    ThreadPool pool(1);
    const Compute c{&pool, &k_table};
    std::vector<float> out(q.size()), scores(shape.n_heads * (pos0 + n));
    attention_exact(c, shape, q.data(), k.data(), v.data(), out.data(), n, pos0, scores.data());
    return out;
  }
};

// Shapes: Qwen2.5-0.5B's (14 heads of 64, 2 KV heads), a group of 3 with head_dim 16, plain
// multi-head, and a head_dim that is not a whole number of AVX2 vectors (the one-lane body).
// Sizes put block edges (multiples of 64 keys) inside the query range and end off them.
struct Case {
  AttentionShape shape;
  size_t n, pos0;
  float q_range;
};
const Case kCases[] = {
    {{14, 2, 64}, 37, 90, 1.0f},                              // queries 90..126: the keys end off an edge
    {{14, 2, 64}, 130, 0, 3.0f},                              // prefill from 0 across two edges, peaky softmax
    {{14, 2, 64}, 1, 200, 3.0f},                              // decode
    {{6, 2, 16}, 61, 40, 2.0f},                               // queries 40..100: the edge at 64 inside
    {{4, 4, 8}, 70, 60, 1.0f},   {{6, 3, 12}, 45, 83, 2.0f},  // head_dim 12
};

TEST(TiledAttention, MatchesFloat64AndTheExactPathWithinTheDerivedBound) {
  for (const Case& cs : kCases) {
    const Problem p(cs.shape, cs.n, cs.pos0, cs.q_range, 11);
    const std::vector<double> want = naive_attention(p.shape, p.q, p.k, p.v, p.n, p.pos0);
    const double bound = tiled_bound(p.shape, p.q, p.k, p.v, p.n, p.pos0);
    const std::vector<float> exact = p.exact(kernels::scalar_table());
    std::vector<float> scalar_out;
    for (Isa isa : test::supported_isas()) {
      const std::vector<float> got = p.tiled(kernels::table(isa), 1);
      double worst = 0, worst_exact = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::abs(double(got[i]) - want[i]));
        worst_exact = std::max(worst_exact, std::abs(double(got[i]) - double(exact[i])));
      }
      const std::string where = std::string(isa_name(isa)) + " n=" + std::to_string(p.n) +
                                " pos0=" + std::to_string(p.pos0) + " hd=" + std::to_string(p.shape.head_dim);
      EXPECT_LE(worst, bound) << where;
      // The exact path's own error is within the same bound (its sources are a subset: f32
      // scores, f32 sums, std::exp), so the two differ by at most twice it.
      EXPECT_LE(worst_exact, 2 * bound) << where;
      std::printf("tiled %s: max |tiled - f64| %.3g, |tiled - exact| %.3g, bound %.3g\n", where.c_str(), worst,
                  worst_exact, bound);
      // SIMD against the scalar reference: both within the bound of float64.
      if (isa == Isa::Scalar) scalar_out = got;
      for (size_t i = 0; i < got.size() && !scalar_out.empty(); ++i)
        ASSERT_LE(std::abs(double(got[i]) - scalar_out[i]), 2 * bound) << where << " element " << i;
    }
  }
}

// Row results do not depend on how the queries were chunked or on the thread count: a prefill
// in two chunks and decode steps give bitwise what one call gives.
TEST(TiledAttention, BitwiseIndependentOfChunkingAndThreads) {
  for (Isa isa : test::supported_isas()) {
    const kernels::Kernels& kt = kernels::table(isa);
    const Problem p({14, 2, 64}, 150, 0, 2.0f, 21);
    const std::vector<float> whole = p.tiled(kt, 1);
    EXPECT_EQ(0, std::memcmp(whole.data(), p.tiled(kt, 3).data(), whole.size() * sizeof(float))) << isa_name(isa);
    ThreadPool pool(2);
    const Compute c{&pool, &kt};
    const size_t qd = 14 * 64;
    std::vector<float> pieces(whole.size());
    const KvView kv{p.k.data(), p.v.data(), DType::F32, p.kv_dim()};
    // Chunks of 37, 1 (decode), 65, 47 queries, each at its position.
    size_t at = 0;
    for (size_t len : {37u, 1u, 65u, 47u}) {
      attention(c, p.shape, p.q.data() + at * qd, kv, pieces.data() + at * qd, len, at);
      at += len;
    }
    ASSERT_EQ(at, p.n);
    EXPECT_EQ(0, std::memcmp(whole.data(), pieces.data(), whole.size() * sizeof(float))) << isa_name(isa);
  }
}

// Causal masking at the key-block edges: changing the key and value at position p leaves every
// query before p bitwise unchanged and changes the query at p, for p around the edges at 64
// and 128 and at the last key.
TEST(TiledAttention, CausalMaskHoldsAtBlockEdges) {
  for (Isa isa : test::supported_isas()) {
    const kernels::Kernels& kt = kernels::table(isa);
    const Problem p({6, 2, 16}, 71, 59, 2.0f, 31);  // queries 59..129
    const std::vector<float> base = p.tiled(kt, 1);
    const size_t qd = 6 * 16;
    for (size_t pos : {63u, 64u, 65u, 127u, 128u, 129u}) {
      Problem changed = p;
      for (size_t i = 0; i < p.kv_dim(); ++i) {
        changed.k[pos * p.kv_dim() + i] += 0.75f;
        changed.v[pos * p.kv_dim() + i] -= 0.5f;
      }
      const std::vector<float> got = changed.tiled(kt, 1);
      const size_t t_at = pos - p.pos0;
      EXPECT_EQ(0, std::memcmp(base.data(), got.data(), t_at * qd * sizeof(float)))
          << isa_name(isa) << ": a query before position " << pos << " saw it";
      EXPECT_NE(0, std::memcmp(base.data() + t_at * qd, got.data() + t_at * qd, qd * sizeof(float)))
          << isa_name(isa) << ": the query at position " << pos << " did not see it";
    }
  }
}

// The work: each K/V row is read once per query block (for every query head sharing it), and
// decode reads each row of each KV head once. The kernels count the rows they widen or read;
// the expectation is derived here from the blocking.
TEST(TiledAttention, ReadsEachKvRowOncePerQueryBlock) {
  const AttentionShape shape{14, 2, 64};
  const size_t qb = attention_query_block(shape);
  EXPECT_EQ(qb, 128u / 7u);  // 18 positions x 7 heads = 126 query rows per block
  for (size_t n : {1u, 4u, 100u, 129u}) {
    for (size_t pos0 : {0u, 30u, 500u}) {
      const Problem p(shape, n, pos0, 1.0f, 41);
      uint64_t rows = 0;
      p.tiled(kernels::table(best_isa()), 2, &rows);
      // Query block b covers queries [b qb, min(n, (b+1) qb)): it reads the keys its last
      // query sees, once, for each KV head.
      uint64_t want = 0;
      for (size_t t0 = 0; t0 < n; t0 += qb) want += shape.n_kv_heads * (pos0 + std::min(n, t0 + qb));
      EXPECT_EQ(rows, want) << "n=" << n << " pos0=" << pos0;
      // The old path read every key once per query head and query: n_heads times as much.
      if (n == 1) {
        EXPECT_EQ(rows, shape.n_kv_heads * (pos0 + 1));
      }
    }
  }
}

// The compact cache at the attention level: K and V rounded to bf16 / f16 (nearest even) and
// read back by the kernels. Against float64 on the rounded rows: the same bound as f32 (the
// kernels widen exactly). Against float64 on the unrounded rows, add the rounding's effect:
// each element moves by a relative e (2^-9 bf16, 2^-12 f16: half an ulp), so a score by
// e S_j (2 e S of relative weight) and a value by e max|v|:
// |o - o_exact| <= bound + max|v| (2.1 e S_max + e).
TEST(TiledAttention, CompactCacheTypesWithinTheirDerivedBound) {
  const Problem p({14, 2, 64}, 77, 70, 2.0f, 51);
  const std::vector<double> want = naive_attention(p.shape, p.q, p.k, p.v, p.n, p.pos0);
  double s_max = 0, vmax = 0;
  const double scale = 1.0 / 8.0;
  for (size_t t = 0; t < p.n; ++t)
    for (size_t h = 0; h < 14; ++h)
      for (size_t j = 0; j <= p.pos0 + t; ++j) {
        double a = 0;
        for (size_t i = 0; i < 64; ++i)
          a += std::abs(double(p.q[t * 896 + h * 64 + i]) * scale * p.k[j * 128 + (h / 7) * 64 + i]);
        s_max = std::max(s_max, a);
      }
  for (float x : p.v) vmax = std::max(vmax, double(std::abs(x)));
  for (DType type : {DType::BF16, DType::F16}) {
    const double e = type == DType::BF16 ? 0x1p-9 : 0x1p-12;
    std::vector<uint16_t> k16(p.k.size()), v16(p.v.size());
    Problem rounded = p;
    for (size_t i = 0; i < p.k.size(); ++i) {
      k16[i] = type == DType::BF16 ? f32_to_bf16(p.k[i]) : f32_to_f16(p.k[i]);
      v16[i] = type == DType::BF16 ? f32_to_bf16(p.v[i]) : f32_to_f16(p.v[i]);
      rounded.k[i] = type == DType::BF16 ? bf16_to_f32(k16[i]) : f16_to_f32(k16[i]);
      rounded.v[i] = type == DType::BF16 ? bf16_to_f32(v16[i]) : f16_to_f32(v16[i]);
    }
    const std::vector<double> want_rounded =
        naive_attention(rounded.shape, rounded.q, rounded.k, rounded.v, p.n, p.pos0);
    const double bound = tiled_bound(rounded.shape, rounded.q, rounded.k, rounded.v, p.n, p.pos0);
    const double bound_unrounded = bound + vmax * (2.1 * e * s_max + e);
    for (Isa isa : test::supported_isas()) {
      ThreadPool pool(2);
      const Compute c{&pool, &kernels::table(isa)};
      std::vector<float> out(p.q.size());
      attention(c, p.shape, p.q.data(), KvView{k16.data(), v16.data(), type, p.kv_dim()}, out.data(), p.n, p.pos0);
      // And the f32 kernel on the widened rows gives bitwise the same: widening is exact.
      const std::vector<float> f32_out = rounded.tiled(kernels::table(isa), 1);
      EXPECT_EQ(0, std::memcmp(out.data(), f32_out.data(), out.size() * sizeof(float)))
          << isa_name(isa) << " " << dtype_name(type);
      double worst = 0, worst_unrounded = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        worst = std::max(worst, std::abs(double(out[i]) - want_rounded[i]));
        worst_unrounded = std::max(worst_unrounded, std::abs(double(out[i]) - want[i]));
      }
      EXPECT_LE(worst, bound) << isa_name(isa) << " " << dtype_name(type);
      EXPECT_LE(worst_unrounded, bound_unrounded) << isa_name(isa) << " " << dtype_name(type);
      std::printf("%s %s cache: max |o - f64(rounded rows)| %.3g (bound %.3g), |o - f64(f32 rows)| %.3g (bound %.3g)\n",
                  std::string(isa_name(isa)).c_str(), std::string(dtype_name(type)).c_str(), worst, bound,
                  worst_unrounded, bound_unrounded);
    }
  }
}

// A decode step's rows of one KV head are a single register tile on the AVX-512 tiers, which
// widen the compact cache's V rows as they load them instead of into the scratch block; a
// prefill chunk's many tiles read the widened block. Both are exact widenings feeding the same
// chains, so the decode steps give bitwise what one call over all the queries gives, with
// either compact type, and the kernels read each K/V row once per step: pos0 + t + 1 rows per
// KV head for the step at position pos0 + t (the edges at 64 and 128 are inside).
TEST(TiledAttention, CompactCacheDecodeStepsBitwiseAsOneCall) {
  const Problem p({14, 2, 64}, 9, 120, 2.0f, 61);  // queries at positions 120..128
  const size_t qd = 14 * 64;
  for (DType type : {DType::BF16, DType::F16}) {
    std::vector<uint16_t> k16(p.k.size()), v16(p.v.size());
    for (size_t i = 0; i < p.k.size(); ++i) {
      k16[i] = type == DType::BF16 ? f32_to_bf16(p.k[i]) : f32_to_f16(p.k[i]);
      v16[i] = type == DType::BF16 ? f32_to_bf16(p.v[i]) : f32_to_f16(p.v[i]);
    }
    const KvView kv{k16.data(), v16.data(), type, p.kv_dim()};
    for (Isa isa : test::supported_isas()) {
      ThreadPool pool(2);
      const Compute c{&pool, &kernels::table(isa)};
      std::vector<float> whole(p.q.size(), -1.0f), steps(p.q.size(), -2.0f);
      attention(c, p.shape, p.q.data(), kv, whole.data(), p.n, p.pos0);
      for (size_t t = 0; t < p.n; ++t) {
        AttentionWork work;
        attention(c, p.shape, p.q.data() + t * qd, kv, steps.data() + t * qd, 1, p.pos0 + t, &work);
        EXPECT_EQ(work.kv_rows_read, p.shape.n_kv_heads * (p.pos0 + t + 1)) << isa_name(isa) << " t=" << t;
      }
      EXPECT_EQ(0, std::memcmp(whole.data(), steps.data(), whole.size() * sizeof(float)))
          << isa_name(isa) << " " << dtype_name(type);
    }
  }
}

}  // namespace
}  // namespace nanoinfer
