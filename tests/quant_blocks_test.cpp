// The block formats round trip (the reference quantizer and the importance-weighted search):
// all-zero blocks, +-max, a single outlier, subnormal scales; the search's guarantees; GPTQ's
// factor, its Gram accumulation and its sweep.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "quant/gptq.h"
#include "quant/quantize.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/thread_pool.h"
#include "support/quant_problem.h"
#include "support/random.h"

namespace nanoinfer {
namespace {

// The quantized types, from the weight-type table.
const std::vector<WeightType> kTypes = test::quant_types();

std::vector<std::byte> rtn(WeightType t, const std::vector<float>& w) {
  std::vector<std::byte> row(weight_row_bytes(t, w.size()));
  quantize_row(t, w.data(), row.data(), w.size());
  return row;
}

std::vector<std::byte> search(WeightType t, const std::vector<float>& w, const float* importance = nullptr) {
  std::vector<std::byte> row(weight_row_bytes(t, w.size()));
  quantize_row_search(t, w.data(), importance, row.data(), w.size());
  return row;
}

std::vector<float> back(WeightType t, const std::vector<std::byte>& row, size_t cols) {
  std::vector<float> out(cols);
  dequantize_row(t, row.data(), out.data(), cols);
  return out;
}

uint16_t scale_of(WeightType t, const std::vector<std::byte>& row, size_t block) {
  uint16_t d;
  std::memcpy(&d, row.data() + block * weight_type_info(t).block_bytes, 2);  // the scale leads every block
  return d;
}

TEST(QuantBlocks, AllZeroBlocksStayZero) {
  const std::vector<float> w(64, 0.0f);
  for (WeightType t : kTypes) {
    for (const auto& row : {rtn(t, w), search(t, w)}) {
      for (float v : back(t, row, w.size())) EXPECT_EQ(v, 0.0f) << weight_type_name(t);
      EXPECT_EQ(f16_to_f32(scale_of(t, row, 0)), 0.0f) << weight_type_name(t);  // +0 or -0 (Q4_0: 0 / -8)
    }
  }
}

// Q8_0 is symmetric: +-M both land on +-127 steps, off by the f16 rounding of the scale only.
// Q4_0 maps the first largest-magnitude weight to -8 steps, so a block holding both +M and -M
// reproduces the first exactly and clamps the other to 7 steps, -7M/8: the format's one-sided
// range (GGUF's Q4_0 does the same). The search may pick another scale, never a worse one.
TEST(QuantBlocks, PlusMinusMax) {
  std::vector<float> w(32);
  for (size_t i = 0; i < 32; ++i) w[i] = i % 2 == 0 ? 1.0f : -1.0f;
  const float d8 = f16_to_f32(f32_to_f16(1.0f / 127.0f));
  const auto q8 = back(WeightType::Q8_0, rtn(WeightType::Q8_0, w), 32);
  for (size_t i = 0; i < 32; ++i) {
    EXPECT_EQ(q8[i], (i % 2 == 0 ? 127.0f : -127.0f) * d8);
    EXPECT_LE(std::abs(q8[i] - w[i]), std::ldexp(1.0f, -11));
  }
  const auto q4 = back(WeightType::Q4_0, rtn(WeightType::Q4_0, w), 32);
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(q4[i], i % 2 == 0 ? 1.0f : -0.875f) << i;
  for (WeightType t : kTypes) {
    EXPECT_LE(weighted_row_error(t, w.data(), nullptr, search(t, w).data(), 32),
              weighted_row_error(t, w.data(), nullptr, rtn(t, w).data(), 32));
  }
}

TEST(QuantBlocks, SingleOutlier) {
  std::vector<float> w(64, 0.0f);
  w[5] = 100.0f;
  w[40] = -3.0f;  // the second block's only weight
  const auto q4 = back(WeightType::Q4_0, rtn(WeightType::Q4_0, w), 64);
  const auto q8 = back(WeightType::Q8_0, rtn(WeightType::Q8_0, w), 64);
  for (size_t i = 0; i < 64; ++i) {
    if (i == 5 || i == 40) continue;
    EXPECT_EQ(q4[i], 0.0f);
    EXPECT_EQ(q8[i], 0.0f);
  }
  EXPECT_EQ(q4[5], 100.0f);  // -8 x f16(-12.5), exact
  EXPECT_EQ(q4[40], -3.0f);
  EXPECT_NEAR(q8[5], 100.0f, 100.0f * std::ldexp(1.0f, -11));
  EXPECT_NEAR(q8[40], -3.0f, 3.0f * std::ldexp(1.0f, -11));
  for (WeightType t : kTypes) {
    const auto s = back(t, search(t, w), 64);
    for (size_t i = 0; i < 64; ++i)
      if (i != 5 && i != 40) {
        EXPECT_EQ(s[i], 0.0f);
      }
  }
}

// Weights around 1e-4 need scales below f16's smallest normal (6.1e-5): subnormal f16 scales,
// spaced 2^-24. Every dequantized value is exactly q x the stored scale, and within half a
// step plus the scale's rounding (at most 2^-25 per step, times |q| <= 127) of the weight.
// Weights so small that the scale rounds to zero dequantize to zero.
TEST(QuantBlocks, SubnormalScales) {
  for (WeightType t : kTypes) {
    const float qmax = static_cast<float>(std::max(-weight_type_info(t).q_min, weight_type_info(t).q_max));
    for (float magnitude : {1.0e-4f, 2.0e-5f, 3.0e-6f}) {
      std::vector<float> w = test::random_floats(64, 11);
      for (float& v : w) v *= magnitude;
      for (const auto& row : {rtn(t, w), search(t, w)}) {
        const auto deq = back(t, row, 64);
        for (size_t b = 0; b < 2; ++b) {
          const uint16_t d16 = scale_of(t, row, b);
          EXPECT_EQ(d16 & 0x7c00, 0) << "scale should be subnormal or zero";
          const float d = std::abs(f16_to_f32(d16));
          for (size_t i = b * 32; i < b * 32 + 32; ++i) {
            EXPECT_TRUE(std::isfinite(deq[i]));
            EXPECT_EQ(std::fmod(deq[i], d == 0.0f ? 1.0f : d), 0.0f);
            // Half a step, plus the rounding of the scale over up to qmax steps, plus (search)
            // clipping: bounded by one step of the unrounded scale.
            EXPECT_LE(std::abs(deq[i] - w[i]), magnitude / qmax + d / 2 + qmax * std::ldexp(1.0f, -25))
                << weight_type_name(t) << " " << magnitude << " " << i;
          }
        }
      }
    }
  }
  // 3e-7 / 127 is below half the smallest subnormal: the Q8_0 scale is 0, the block 0.
  std::vector<float> tiny(32, 3.0e-7f);
  for (float v : back(WeightType::Q8_0, rtn(WeightType::Q8_0, tiny), 32)) EXPECT_EQ(v, 0.0f);
}

// The search includes round-to-nearest as a candidate, so under the weighting it is given it
// is never worse, row by row; on random rows it is clearly better.
TEST(QuantSearch, NeverWorseThanRoundToNearest) {
  for (WeightType t : kTypes) {
    double total_rtn = 0, total_search = 0;
    for (uint32_t seed = 0; seed < 100; ++seed) {
      const std::vector<float> w = test::random_floats(256, seed);
      std::vector<float> a = test::random_floats(256, seed + 1000);
      for (size_t i = 0; i < a.size(); ++i) a[i] = i % 37 == 0 ? 0.0f : a[i] * a[i] * 4.0f;  // >= 0, some 0
      const double e_rtn = weighted_row_error(t, w.data(), a.data(), rtn(t, w).data(), 256);
      const double e_search = weighted_row_error(t, w.data(), a.data(), search(t, w, a.data()).data(), 256);
      EXPECT_LE(e_search, e_rtn) << weight_type_name(t) << " seed " << seed;
      total_rtn += e_rtn;
      total_search += e_search;
    }
    std::printf("  %s: weighted error search / rtn = %.3f\n", std::string(weight_type_name(t)).c_str(),
                total_search / total_rtn);
    EXPECT_LT(total_search, 0.9 * total_rtn) << weight_type_name(t);
  }
}

// Importance steers the error: with one channel 1000x as important, the weighted search
// beats the unweighted one under that weighting.
TEST(QuantSearch, ImportanceSteersTheError) {
  double weighted = 0, unweighted = 0;
  for (uint32_t seed = 0; seed < 50; ++seed) {
    const std::vector<float> w = test::random_floats(32, seed + 77);
    std::vector<float> a(32, 1.0f);
    a[seed % 32] = 1000.0f;
    weighted += weighted_row_error(WeightType::Q4_0, w.data(), a.data(), search(WeightType::Q4_0, w, a.data()).data(), 32);
    unweighted += weighted_row_error(WeightType::Q4_0, w.data(), a.data(), search(WeightType::Q4_0, w).data(), 32);
  }
  EXPECT_LT(weighted, 0.5 * unweighted);
}

// x: [n][dim] with correlated columns: random z mixed by a random matrix.
std::vector<float> correlated_inputs(size_t n, size_t dim, uint32_t seed) {
  const std::vector<float> z = test::random_floats(n * dim, seed);
  const std::vector<float> mix = test::random_floats(dim * dim, seed + 1);
  std::vector<float> x(n * dim, 0.0f);
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < dim; ++c)
      for (size_t k = 0; k < dim; ++k) x[t * dim + c] += z[t * dim + k] * (mix[k * dim + c] + (k == c ? 2.0f : 0.0f));
  return x;
}

std::vector<double> direct_gram(const std::vector<float>& x, size_t n, size_t dim) {
  std::vector<double> h(dim * dim, 0.0);
  for (size_t t = 0; t < n; ++t)
    for (size_t a = 0; a < dim; ++a)
      for (size_t b = 0; b < dim; ++b) h[a * dim + b] += static_cast<double>(x[t * dim + a]) * x[t * dim + b];
  return h;
}

// Odd sizes (no multiple of any vector width), accumulated over two calls.
TEST(Gptq, AccumulateGramMatchesTheDirectSum) {
  ThreadPool pool(2);
  const size_t dim = 70;
  const std::vector<float> x = correlated_inputs(37, dim, 3);
  std::vector<float> h(dim * dim, 0.0f), scratch;
  accumulate_gram(x.data(), 20, dim, h.data(), scratch, pool);
  accumulate_gram(x.data() + 20 * dim, 17, dim, h.data(), scratch, pool);
  const std::vector<double> want = direct_gram(x, 37, dim);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < h.size(); ++i) EXPECT_NEAR(h[i], want[i], 1e-5 * scale) << i;
}

// U is upper triangular and U^T U is the inverse of the damped Gram matrix.
TEST(Gptq, FactorInvertsTheDampedGram) {
  ThreadPool pool(2);
  const size_t dim = 48;
  const std::vector<float> x = correlated_inputs(200, dim, 5);
  const std::vector<double> hd = direct_gram(x, 200, dim);
  std::vector<float> h(hd.begin(), hd.end());
  const std::vector<float> u = gptq_factor(h.data(), dim, pool);
  double mean_diag = 0;
  for (size_t i = 0; i < dim; ++i) mean_diag += h[i * dim + i] / static_cast<double>(dim);
  for (size_t a = 0; a < dim; ++a)
    for (size_t b = 0; b < a; ++b) EXPECT_EQ(u[a * dim + b], 0.0f);
  // (U^T U) (H + damp I) = I
  for (size_t a = 0; a < dim; ++a) {
    for (size_t b = 0; b < dim; ++b) {
      double s = 0;
      for (size_t k = 0; k < dim; ++k) {
        double hinv = 0;  // (U^T U)[a][k]
        for (size_t m = 0; m <= std::min(a, k); ++m) hinv += static_cast<double>(u[m * dim + a]) * u[m * dim + k];
        s += hinv * (static_cast<double>(h[k * dim + b]) + (k == b ? 0.01 * mean_diag : 0.0));
      }
      EXPECT_NEAR(s, a == b ? 1.0 : 0.0, 1e-3) << a << "," << b;
    }
  }
}

// With a diagonal Gram matrix no error has anywhere to go: GPTQ is the importance search with
// uniform importances, bit for bit (4 I: a power of two scales every loss exactly).
TEST(Gptq, DiagonalGramIsTheSearch) {
  ThreadPool pool(1);
  const size_t rows = 8, cols = 64;
  std::vector<float> h(cols * cols, 0.0f);
  for (size_t i = 0; i < cols; ++i) h[i * cols + i] = 4.0f;
  const std::vector<float> u = gptq_factor(h.data(), cols, pool);
  const std::vector<float> importance(cols, 4.0f);
  for (WeightType t : kTypes) {
    const std::vector<float> w = test::random_floats(rows * cols, 21);
    std::vector<float> scratch = w;
    std::vector<std::byte> got(rows * weight_row_bytes(t, cols));
    gptq_quantize_rows(t, scratch.data(), rows, cols, u.data(), importance.data(), got.data());
    for (size_t r = 0; r < rows; ++r) {
      const std::vector<float> row(w.begin() + static_cast<std::ptrdiff_t>(r * cols),
                                   w.begin() + static_cast<std::ptrdiff_t>((r + 1) * cols));
      const auto want = search(t, row);
      EXPECT_EQ(std::memcmp(got.data() + r * want.size(), want.data(), want.size()), 0)
          << weight_type_name(t) << " row " << r;
    }
  }
}

// On correlated inputs GPTQ's output error sum_t ((w - q) . x_t)^2 is well below that of
// round-to-nearest and of the search alone.
TEST(Gptq, LowersTheOutputErrorOnCorrelatedInputs) {
  ThreadPool pool(2);
  const size_t n = 512, cols = 64, rows = 16;
  const std::vector<float> x = correlated_inputs(n, cols, 9);
  const std::vector<double> hd = direct_gram(x, n, cols);
  const std::vector<float> h(hd.begin(), hd.end());
  std::vector<float> diag(cols);
  for (size_t i = 0; i < cols; ++i) diag[i] = h[i * cols + i];
  const std::vector<float> u = gptq_factor(h.data(), cols, pool);
  const std::vector<float> w = test::random_floats(rows * cols, 13);
  const auto output_error = [&](WeightType t, const std::vector<std::byte>& q) {
    const size_t rb = weight_row_bytes(t, cols);
    double e = 0;
    for (size_t r = 0; r < rows; ++r) {
      std::vector<float> deq(cols);
      dequantize_row(t, q.data() + r * rb, deq.data(), cols);
      for (size_t s = 0; s < n; ++s) {
        double y = 0;
        for (size_t c = 0; c < cols; ++c) y += (static_cast<double>(w[r * cols + c]) - deq[c]) * x[s * cols + c];
        e += y * y;
      }
    }
    return e;
  };
  for (WeightType t : kTypes) {
    const size_t rb = weight_row_bytes(t, cols);
    std::vector<std::byte> q_rtn(rows * rb), q_search(rows * rb), q_gptq(rows * rb);
    for (size_t r = 0; r < rows; ++r) {
      quantize_row(t, w.data() + r * cols, q_rtn.data() + r * rb, cols);
      quantize_row_search(t, w.data() + r * cols, diag.data(), q_search.data() + r * rb, cols);
    }
    std::vector<float> scratch = w;
    gptq_quantize_rows(t, scratch.data(), rows, cols, u.data(), diag.data(), q_gptq.data());
    const double e_rtn = output_error(t, q_rtn), e_search = output_error(t, q_search), e_gptq = output_error(t, q_gptq);
    std::printf("  %s output error: rtn %.4g, search %.4g, gptq %.4g\n", std::string(weight_type_name(t)).c_str(),
                e_rtn, e_search, e_gptq);
    EXPECT_LT(e_gptq, 0.7 * e_rtn);
    EXPECT_LT(e_gptq, 0.7 * e_search);
  }
}

}  // namespace
}  // namespace nanoinfer
