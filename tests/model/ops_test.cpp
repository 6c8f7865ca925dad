// The small ops against direct double-precision formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "model/ops.h"
#include "nanoinfer/error.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/thread_pool.h"
#include "support/naive_attention.h"

namespace nanoinfer {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The first NaN, infinity or value beyond the limit is found wherever it falls (the blocks of
// the first pass and their remainder), and a vector without one gives its size.
TEST(Ops, FirstBeyondFindsTheFirstOffender) {
  for (const size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{300}}) {
    const std::vector<float> clean = random_vector(n, 3);
    EXPECT_EQ(first_non_finite(clean.data(), n), n);
    EXPECT_EQ(first_beyond(clean.data(), n, 100.0f), n);
    for (const size_t at : {size_t{0}, n / 2, n - 1}) {
      for (const float bad : {NAN, INFINITY, -INFINITY}) {
        std::vector<float> v = clean;
        v[at] = bad;
        if (at + 1 < n) v[n - 1] = NAN;  // a later one does not count
        EXPECT_EQ(first_non_finite(v.data(), n), at) << n << " " << at << " " << bad;
      }
      std::vector<float> v = clean;
      v[at] = -65520.0f;
      EXPECT_EQ(first_beyond(v.data(), n, 65519.99f), at);
      EXPECT_EQ(first_non_finite(v.data(), n), n);
      v[at] = std::numeric_limits<float>::max();
      EXPECT_EQ(first_non_finite(v.data(), n), n);
      // The limit itself passes, the next float up does not, in either sign; a NaN with its
      // sign bit set fails, a subnormal passes a zero limit only as zero.
      v[at] = -65519.99f;
      EXPECT_EQ(first_beyond(v.data(), n, 65519.99f), n);
      v[at] = std::nextafter(65519.99f, INFINITY);
      EXPECT_EQ(first_beyond(v.data(), n, 65519.99f), at);
      v[at] = -std::numeric_limits<float>::quiet_NaN();
      EXPECT_EQ(first_non_finite(v.data(), n), at);
      std::vector<float> zeros(n, 0.0f);
      zeros[n - 1] = -0.0f;
      EXPECT_EQ(first_beyond(zeros.data(), n, 0.0f), n);
      zeros[at] = std::numeric_limits<float>::denorm_min();
      EXPECT_EQ(first_beyond(zeros.data(), n, 0.0f), at);
    }
  }
}

TEST(Ops, RmsnormMatchesTheFormula) {
  const size_t n = 3, dim = 37;
  const auto x = random_vector(n * dim, 1, 3.0f);
  const auto w = random_vector(dim, 2);
  std::vector<float> y(n * dim);
  rmsnorm(x.data(), w.data(), 1e-5f, y.data(), n, dim);
  for (size_t t = 0; t < n; ++t) {
    double ss = 0;
    for (size_t i = 0; i < dim; ++i) ss += double(x[t * dim + i]) * x[t * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (size_t i = 0; i < dim; ++i) {
      const double expected = x[t * dim + i] * inv * w[i];
      EXPECT_NEAR(y[t * dim + i], expected, 1e-6 * std::abs(expected) + 1e-7) << t << "," << i;
    }
  }
  // In place (y aliases x) gives the same values.
  std::vector<float> z = x;
  rmsnorm(z.data(), w.data(), 1e-5f, z.data(), n, dim);
  EXPECT_EQ(0, std::memcmp(z.data(), y.data(), y.size() * sizeof(float)));
}

// Rows go through the sums of squares side by side (up to 8 at a time, a remainder); each row's
// result is bitwise that of a call on the row alone and of the one sequential double sum the
// norm is defined by, for every count of rows around the group size, in place or not.
TEST(Ops, RmsnormOfManyRowsIsBitwiseOneRowAtATime) {
  const size_t dim = 129;
  const auto w = random_vector(dim, 5);
  for (size_t n = 1; n <= 19; ++n) {
    // Rows of very different scales, so that an error in which row's sum scales which row shows.
    auto x = random_vector(n * dim, static_cast<uint32_t>(10 + n));
    for (size_t t = 0; t < n; ++t)
      for (size_t i = 0; i < dim; ++i) x[t * dim + i] *= static_cast<float>(1 + 7 * t);
    std::vector<float> together(n * dim), alone(n * dim), reference(n * dim);
    rmsnorm(x.data(), w.data(), 1e-6f, together.data(), n, dim);
    for (size_t t = 0; t < n; ++t) {
      rmsnorm(x.data() + t * dim, w.data(), 1e-6f, alone.data() + t * dim, 1, dim);
      double ss = 0.0;
      for (size_t i = 0; i < dim; ++i) ss += static_cast<double>(x[t * dim + i]) * x[t * dim + i];
      const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + 1e-6f));
      for (size_t i = 0; i < dim; ++i) reference[t * dim + i] = x[t * dim + i] * scale * w[i];
    }
    EXPECT_EQ(0, std::memcmp(together.data(), alone.data(), together.size() * sizeof(float))) << n << " rows";
    EXPECT_EQ(0, std::memcmp(together.data(), reference.data(), together.size() * sizeof(float))) << n << " rows";
    std::vector<float> in_place = x;
    rmsnorm(in_place.data(), w.data(), 1e-6f, in_place.data(), n, dim);
    EXPECT_EQ(0, std::memcmp(in_place.data(), together.data(), together.size() * sizeof(float))) << n << " rows";
  }
}

// In place (out = gate), every ISA, within kernels.h's 2^-21 of float64 (the dense sweep is
// tests/kernels/attention_test.cpp's).
TEST(Ops, SiluMulAndAdd) {
  ThreadPool threads(1);
  for (Isa isa : all_isas()) {
    if (!isa_supported(isa)) continue;
    std::vector<float> g = {-20.0f, -1.0f, 0.0f, 0.5f, 3.0f}, u = {2.0f, 3.0f, 4.0f, -1.0f, 0.5f};
    const std::vector<float> g0 = g;
    silu_mul({&threads, &kernels::table(isa)}, g.data(), u.data(), g.data(), g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      const double exact = g0[i] / (1.0 + std::exp(-double(g0[i]))) * u[i];
      EXPECT_LE(std::abs(g[i] - exact), 0x1p-21 * std::abs(exact)) << isa_name(isa) << " " << i;
    }
    add_inplace(g.data(), u.data(), g.size());
    EXPECT_EQ(g[2], 4.0f) << isa_name(isa);  // silu(0) * 4 = 0 exactly, then + 4
  }
}

// Half-split pairing: element i of a head rotates with element i + head_dim/2, by the angle
// pos * theta^(-2i/head_dim).
TEST(Ops, RopeRotatesHalfSplitPairs) {
  const size_t head_dim = 8, n_heads = 2, n = 3, pos0 = 5;
  const double theta = 10000.0;
  const Rope rope(head_dim, theta, 16);
  const auto x0 = random_vector(n * n_heads * head_dim, 3);
  std::vector<float> x = x0;
  rope.apply(x.data(), n, n_heads, pos0);
  for (size_t t = 0; t < n; ++t) {
    for (size_t h = 0; h < n_heads; ++h) {
      const float* in = x0.data() + (t * n_heads + h) * head_dim;
      const float* out = x.data() + (t * n_heads + h) * head_dim;
      for (size_t i = 0; i < head_dim / 2; ++i) {
        const double angle = double(pos0 + t) * std::pow(theta, -2.0 * i / head_dim);
        const double a = in[i], b = in[i + head_dim / 2];
        EXPECT_NEAR(out[i], a * std::cos(angle) - b * std::sin(angle), 1e-6) << t << h << i;
        EXPECT_NEAR(out[i + head_dim / 2], b * std::cos(angle) + a * std::sin(angle), 1e-6) << t << h << i;
      }
    }
  }
  // Position 0 is the identity.
  std::vector<float> y = x0;
  rope.apply(y.data(), 1, n_heads, 0);
  EXPECT_EQ(0, std::memcmp(y.data(), x0.data(), n_heads * head_dim * sizeof(float)));
  EXPECT_THROW(Rope(7, theta, 4), Error);
}

using test::naive_attention;

TEST(Ops, AttentionMatchesNaiveGqaWithCausalMask) {
  const AttentionShape shape{6, 2, 16};             // groups of 3: heads 0-2 read KV head 0, 3-5 head 1
  const size_t n = 16, pos0 = 40, keys = pos0 + n;  // enough work to split the heads across threads
  const auto q = random_vector(n * 6 * 16, 4);
  const auto k = random_vector(keys * 2 * 16, 5);
  const auto v = random_vector(keys * 2 * 16, 6);
  const auto expected = naive_attention(shape, q, k, v, n, pos0);
  std::vector<float> scores(6 * keys);
  std::vector<float> out(n * 6 * 16), out3(n * 6 * 16);
  ThreadPool threads1(1), threads3(3);
  const Compute pool1{&threads1, &kernels::table(best_isa())}, pool3{&threads3, &kernels::table(best_isa())};
  attention_exact(pool1, shape, q.data(), k.data(), v.data(), out.data(), n, pos0, scores.data());
  attention_exact(pool3, shape, q.data(), k.data(), v.data(), out3.data(), n, pos0, scores.data());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-5) << i;
  EXPECT_EQ(0, std::memcmp(out.data(), out3.data(), out.size() * sizeof(float)));

  // A key after a query's position must not change that query's output.
  auto k2 = k;
  for (size_t i = 0; i < 2 * 16; ++i) k2[(keys - 1) * 2 * 16 + i] += 50.0f;
  std::vector<float> out2(out.size());
  attention_exact(pool1, shape, q.data(), k2.data(), v.data(), out2.data(), n, pos0, scores.data());
  EXPECT_EQ(0, std::memcmp(out.data(), out2.data(), (n - 1) * 6 * 16 * sizeof(float)));
  EXPECT_NE(0, std::memcmp(out.data() + (n - 1) * 96, out2.data() + (n - 1) * 96, 96 * sizeof(float)));
}

// Scores far beyond exp's range stay finite because the maximum is subtracted first.
TEST(Ops, AttentionSoftmaxSurvivesHugeScores) {
  const AttentionShape shape{1, 1, 4};
  const std::vector<float> q = {100.0f, 100.0f, 0.0f, 0.0f};
  const std::vector<float> k = {10.0f, 0.0f, 0.0f, 0.0f, 9.0f, 0.0f, 0.0f, 0.0f};  // scores 500, 450
  const std::vector<float> v = {1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f};
  std::vector<float> out(4), scores(2);
  ThreadPool threads(1);
  const Compute pool{&threads, &kernels::scalar_table()};
  attention_exact(pool, shape, q.data(), k.data(), v.data(), out.data(), 1, 1, scores.data());
  EXPECT_FLOAT_EQ(out[0], 1.0f);  // exp(-50) relative weight for the second key
  EXPECT_NEAR(out[1], std::exp(-50.0), 1e-25);
}

TEST(Ops, LogSoftmaxIsDirectAndStable) {
  const std::vector<float> uniform(1000, 3.25f);
  EXPECT_DOUBLE_EQ(log_softmax_at(uniform.data(), uniform.size(), 17), -std::log(1000.0));
  // The log of a rounded softmax would give log(0) = -inf for the second entry.
  const std::vector<float> peaked = {1000.0f, 0.0f};
  EXPECT_DOUBLE_EQ(log_softmax_at(peaked.data(), 2, 1), -1000.0);
  EXPECT_DOUBLE_EQ(log_softmax_at(peaked.data(), 2, 0), 0.0);
  const std::vector<float> v = {1.0f, 2.0f, 3.0f};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(log_softmax_at(v.data(), 3, 0), 1.0 - lse, 1e-15);
}

}  // namespace
}  // namespace nanoinfer
