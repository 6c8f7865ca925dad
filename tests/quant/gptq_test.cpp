// GPTQ (quant/gptq.h): its Gram accumulation, its factor and its sweep, against the direct sum,
// the damped Gram's Cholesky factor and the paper's sequential sweep; on correlated inputs it
// lowers the output error below round-to-nearest and the search.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/thread_pool.h"
#include "quant/gptq.h"
#include "quant/quantize.h"
#include "support/quant_problem.h"
#include "support/random.h"

namespace nanoinfer {
namespace {

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

// The packed lower triangle (quant/gptq.h's gram_at) of a full [dim][dim] matrix.
std::vector<float> packed_lower(const std::vector<double>& full, size_t dim) {
  std::vector<float> h(gram_packed_size(dim));
  for (size_t a = 0; a < dim; ++a)
    for (size_t b = 0; b <= a; ++b) h[gram_at(a, b)] = static_cast<float>(full[a * dim + b]);
  return h;
}

// A correlated problem: n inputs of dim columns, their Gram matrix in double (full) and as
// GPTQ reads it (packed lower triangle), and its diagonal (the search's importance).
struct CorrelatedProblem {
  std::vector<float> x;
  std::vector<double> hd;
  std::vector<float> h, diag;
};
CorrelatedProblem correlated_problem(size_t n, size_t dim, uint32_t seed) {
  CorrelatedProblem p;
  p.x = correlated_inputs(n, dim, seed);
  p.hd = direct_gram(p.x, n, dim);
  p.h = packed_lower(p.hd, dim);
  p.diag.resize(dim);
  for (size_t i = 0; i < dim; ++i) p.diag[i] = p.h[gram_at(i, i)];
  return p;
}

// Odd sizes (no multiple of any vector width), accumulated over two calls, into the packed
// lower triangle: every entry right, nothing written past its end.
TEST(Gptq, AccumulateGramMatchesTheDirectSum) {
  ThreadPool pool(2);
  const size_t dim = 150, guard = 64;
  ASSERT_EQ(gram_packed_size(dim), dim * (dim + 1) / 2);
  ASSERT_EQ(gram_at(dim - 1, dim - 1), gram_packed_size(dim) - 1);
  const std::vector<float> x = correlated_inputs(37, dim, 3);
  std::vector<float> h(gram_packed_size(dim) + guard, 0.0f), scratch;
  std::fill(h.end() - static_cast<std::ptrdiff_t>(guard), h.end(), -7.0f);
  accumulate_gram(x.data(), 20, dim, h.data(), scratch, pool, best_isa());
  accumulate_gram(x.data() + 20 * dim, 17, dim, h.data(), scratch, pool, best_isa());
  const std::vector<double> want = direct_gram(x, 37, dim);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t a = 0; a < dim; ++a)
    for (size_t b = 0; b <= a; ++b) EXPECT_NEAR(h[gram_at(a, b)], want[a * dim + b], 1e-5 * scale) << a << "," << b;
  for (size_t i = 0; i < guard; ++i) EXPECT_EQ(h[gram_packed_size(dim) + i], -7.0f) << "written past the end: " << i;
}

// sum over inputs x_s and rows r of ((w_r - q_r) . x_s)^2: what GPTQ minimizes.
double gptq_output_error(WeightType t, const std::vector<std::byte>& q, const std::vector<float>& w,
                         const std::vector<float>& x, size_t n, size_t rows, size_t cols) {
  const size_t rb = weight_row_bytes(t, cols);
  double e = 0;
  std::vector<float> deq(cols);
  for (size_t r = 0; r < rows; ++r) {
    dequantize_row(t, q.data() + r * rb, deq.data(), cols);
    for (size_t s = 0; s < n; ++s) {
      double y = 0;
      for (size_t c = 0; c < cols; ++c) y += (static_cast<double>(w[r * cols + c]) - deq[c]) * x[s * cols + c];
      e += y * y;
    }
  }
  return e;
}

double mean_diagonal(const std::vector<double>& h, size_t dim) {
  double m = 0;
  for (size_t i = 0; i < dim; ++i) m += h[i * dim + i] / static_cast<double>(dim);
  return m;
}

// R (upper, R[k][k] = diag[k], R[j][k] = G[k][j] R[k][k]) factors the damped Gram matrix
// H + damp I = R R^T, from its packed lower triangle; G is zero on and above the diagonal.
// 200 columns: a whole 128-column factor block and a partial one, a partial 32-column block.
TEST(Gptq, FactorIsTheDampedGramsCholeskyFromTheLastRow) {
  ThreadPool pool(2);
  const size_t dim = 200;
  const std::vector<float> x = correlated_inputs(400, dim, 5);
  const std::vector<double> hd = direct_gram(x, 400, dim);
  const std::vector<float> h = packed_lower(hd, dim);
  const GptqFactor f = gptq_factor(h.data(), dim, pool, best_isa());
  ASSERT_EQ(f.dim, dim);
  const double damp = 0.01 * mean_diagonal(hd, dim);
  std::vector<double> r(dim * dim, 0.0);
  for (size_t k = 0; k < dim; ++k) {
    ASSERT_GT(f.diag[k], 0.0f);
    r[k * dim + k] = f.diag[k];
    for (size_t j = 0; j < k; ++j) r[j * dim + k] = static_cast<double>(f.at(k, j)) * f.diag[k];
    for (size_t j = k; j < std::min(dim, (k / kGptqBlock + 1) * kGptqBlock); ++j)
      EXPECT_EQ(f.at(k, j), 0.0f) << k << "," << j;
  }
  double scale = 0;
  for (double v : hd) scale = std::max(scale, std::abs(v));
  size_t bad = 0;
  for (size_t a = 0; a < dim; ++a) {
    for (size_t b = 0; b < dim; ++b) {
      double s = 0;
      for (size_t k = std::max(a, b); k < dim; ++k) s += r[a * dim + k] * r[b * dim + k];
      const double want = hd[a * dim + b] + (a == b ? damp : 0.0);
      if (std::abs(s - want) > 1e-5 * scale) ++bad;
    }
  }
  EXPECT_EQ(bad, 0u);
}

// U (H^-1 = U^T U, upper, [n][n] in double) of the damped H, exactly: by inverting H + damp I
// and factoring the inverse.
std::vector<double> exact_u(const std::vector<double>& h, size_t n) {
  const double damp = 0.01 * mean_diagonal(h, n);
  // Gauss-Jordan inverse of H + damp I (symmetric positive definite: no pivoting needed).
  std::vector<double> m(n * 2 * n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) m[i * 2 * n + j] = h[i * n + j] + (i == j ? damp : 0.0);
    m[i * 2 * n + n + i] = 1.0;
  }
  for (size_t c = 0; c < n; ++c) {
    const double piv = m[c * 2 * n + c];
    for (size_t j = 0; j < 2 * n; ++j) m[c * 2 * n + j] /= piv;
    for (size_t i = 0; i < n; ++i) {
      if (i == c) continue;
      const double f = m[i * 2 * n + c];
      for (size_t j = 0; j < 2 * n; ++j) m[i * 2 * n + j] -= f * m[c * 2 * n + j];
    }
  }
  // Lower Cholesky factor C of H^-1; U = C^T.
  std::vector<double> cf(n * n, 0.0), u(n * n, 0.0);
  for (size_t j = 0; j < n; ++j) {
    double s = m[j * 2 * n + n + j];
    for (size_t k = 0; k < j; ++k) s -= cf[j * n + k] * cf[j * n + k];
    cf[j * n + j] = std::sqrt(s);
    for (size_t i = j + 1; i < n; ++i) {
      double v = m[i * 2 * n + n + j];
      for (size_t k = 0; k < j; ++k) v -= cf[i * n + k] * cf[j * n + k];
      cf[i * n + j] = v / cf[j * n + j];
    }
  }
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a; b < n; ++b) u[a * n + b] = cf[b * n + a];
  return u;
}

// The U that a GptqFactor stands for: R^-1, in double, with R rebuilt from the factor.
std::vector<double> factor_u(const GptqFactor& f) {
  const size_t n = f.dim;
  std::vector<double> r(n * n, 0.0), u(n * n, 0.0);
  for (size_t k = 0; k < n; ++k) {
    r[k * n + k] = f.diag[k];
    for (size_t j = 0; j < k; ++j) r[j * n + k] = static_cast<double>(f.at(k, j)) * f.diag[k];
  }
  for (size_t j = n; j-- > 0;) {  // column j of R^-1, from the bottom up
    u[j * n + j] = 1.0 / r[j * n + j];
    for (size_t i = j; i-- > 0;) {
      double s = 0;
      for (size_t k = i + 1; k <= j; ++k) s += r[i * n + k] * u[k * n + j];
      u[i * n + j] = -s / r[i * n + i];
    }
  }
  return u;
}

// The paper's sweep in double for a given U: w'[k] -= e U[j][k] after each column j,
// e = (w'[j] - q[j]) / U[j][j], each block's scale searched when the sweep reaches it.
// With `follow`, the sweep takes that output's scales and integers instead of its own choices
// (so that one near-tie does not send the rest of the row elsewhere: GPTQ is chaotic) and
// counts in *mismatches the choices of its own that differ, a rounding within 1e-3 of a tie
// excepted.
std::vector<std::byte> sequential_gptq(WeightType t, const std::vector<float>& w, size_t rows, size_t cols,
                                       const std::vector<double>& u_matrix, const float* importance,
                                       const std::vector<std::byte>* follow = nullptr, size_t* mismatches = nullptr) {
  const auto u = [&](size_t a, size_t b) { return u_matrix[a * cols + b]; };
  const QuantRange range = range_of(t);
  const size_t rb = weight_row_bytes(t, cols), bb = weight_type_info(t).block_bytes;
  std::vector<std::byte> out(rows * rb);
  for (size_t r = 0; r < rows; ++r) {
    std::vector<double> wr(w.begin() + static_cast<std::ptrdiff_t>(r * cols),
                           w.begin() + static_cast<std::ptrdiff_t>((r + 1) * cols));
    BlockCode code;
    double scale = 0, inv = 0;
    for (size_t j = 0; j < cols; ++j) {
      ScaledBlock given;
      if (follow != nullptr) weight_type_info(t).unpack_block(follow->data() + r * rb + (j / 32) * bb, given);
      if (j % 32 == 0) {
        float block[32];
        for (size_t i = 0; i < 32; ++i) block[i] = static_cast<float>(wr[j + i]);
        code.d = search_block_scale(t, block, importance + j);
        if (follow != nullptr && given.d != code.d) {
          ++*mismatches;
          code.d = given.d;
        }
        scale = f16_to_f32(code.d);
        inv = scale != 0 ? 1.0 / scale : 0.0;
      }
      long q = std::lround(wr[j] * inv);
      q = std::clamp(q, static_cast<long>(range.lo), static_cast<long>(range.hi));
      if (follow != nullptr && given.q[j % 32] != q) {
        const double frac = wr[j] * inv - std::floor(wr[j] * inv);
        if (std::abs(frac - 0.5) > 1e-3) ++*mismatches;
        q = given.q[j % 32];
      }
      code.q[j % 32] = static_cast<int8_t>(q);
      const double e = (wr[j] - scale * static_cast<double>(q)) / u(j, j);
      for (size_t k = j + 1; k < cols; ++k) wr[k] -= e * u(j, k);
      if (j % 32 == 31) pack_block(t, code, out.data() + r * rb + (j / 32) * bb);
    }
  }
  return out;
}

// The factored, blocked f32 sweep is the paper's sequential sweep. Run in double with the U
// the factor stands for, along the factored sweep's choices, the sequential sweep makes the
// same choice (scale and integer) at all but a few near-ties. Running free with the exact U
// (H^-1 in double), it reaches the same output error within 10% (the f32 factorization of a
// correlated H is not exact, and every different choice sends the rest of a row elsewhere).
// Rows at one and at three per call give the same bytes (the grouping never matters).
TEST(Gptq, FactoredSweepIsThePapersSequentialSweep) {
  ThreadPool pool(2);
  const size_t n = 600, cols = 160, rows = 12;
  const CorrelatedProblem problem = correlated_problem(n, cols, 17);
  const std::vector<float>& x = problem.x;
  const std::vector<double>& hd = problem.hd;
  const std::vector<float>& h = problem.h;
  const std::vector<float>& diag = problem.diag;
  const GptqFactor f = gptq_factor(h.data(), cols, pool, best_isa());
  const std::vector<double> u_factor = factor_u(f), u_exact = exact_u(hd, cols);
  const std::vector<float> w = test::random_floats(rows * cols, 29);
  const auto output_error = [&](WeightType t, const std::vector<std::byte>& q) {
    return gptq_output_error(t, q, w, x, n, rows, cols);
  };
  for (WeightType t : test::quant_types()) {
    const size_t rb = weight_row_bytes(t, cols);
    std::vector<std::byte> got(rows * rb), got3(rows * rb);
    gptq_quantize_rows(t, w.data(), rows, cols, f, diag.data(), got.data());
    for (size_t r = 0; r < rows; r += 3)
      gptq_quantize_rows(t, w.data() + r * cols, 3, cols, f, diag.data(), got3.data() + r * rb);
    EXPECT_EQ(got, got3) << weight_type_name(t);
    size_t mismatches = 0;
    const std::vector<std::byte> followed = sequential_gptq(t, w, rows, cols, u_factor, diag.data(), &got, &mismatches);
    EXPECT_EQ(followed, got) << weight_type_name(t);
    EXPECT_LE(mismatches, rows * cols / 200) << weight_type_name(t);
    const std::vector<std::byte> free = sequential_gptq(t, w, rows, cols, u_exact, diag.data());
    const double e_got = output_error(t, got), e_free = output_error(t, free);
    std::printf("  %s: %zu choices differ along the way; output error %.6g, the exact sequential sweep's %.6g\n",
                std::string(weight_type_name(t)).c_str(), mismatches, e_got, e_free);
    EXPECT_NEAR(e_got, e_free, 0.1 * e_free) << weight_type_name(t);
  }
}

// With a diagonal Gram matrix no error has anywhere to go: GPTQ is its block scale search
// (search_block_scale) and round to nearest with that scale, bit for bit.
TEST(Gptq, DiagonalGramIsTheSearch) {
  ThreadPool pool(1);
  const size_t rows = 8, cols = 64;
  std::vector<float> h(gram_packed_size(cols), 0.0f);
  for (size_t i = 0; i < cols; ++i) h[gram_at(i, i)] = 4.0f;
  const GptqFactor f = gptq_factor(h.data(), cols, pool, best_isa());
  const std::vector<float> importance(cols, 4.0f);
  for (WeightType t : test::quant_types()) {
    const std::vector<float> w = test::random_floats(rows * cols, 21);
    std::vector<std::byte> got(rows * weight_row_bytes(t, cols));
    gptq_quantize_rows(t, w.data(), rows, cols, f, importance.data(), got.data());
    const size_t rb = weight_row_bytes(t, cols), bb = weight_type_info(t).block_bytes;
    for (size_t r = 0; r < rows; ++r) {
      for (size_t b = 0; b < cols / 32; ++b) {
        const float* wb = w.data() + r * cols + 32 * b;
        BlockCode code;
        code.d = search_block_scale(t, wb, importance.data() + 32 * b);
        const float d = f16_to_f32(code.d), inv = d != 0.0f ? 1.0f / d : 0.0f;
        for (size_t i = 0; i < 32; ++i) code.q[i] = static_cast<int8_t>(round_to_range(wb[i] * inv, range_of(t)));
        std::vector<std::byte> want(bb);
        pack_block(t, code, want.data());
        EXPECT_EQ(std::memcmp(got.data() + r * rb + b * bb, want.data(), bb), 0)
            << weight_type_name(t) << " row " << r << " block " << b;
      }
    }
  }
}

// On correlated inputs GPTQ's output error sum_t ((w - q) . x_t)^2 is well below that of
// round-to-nearest and of the search alone.
TEST(Gptq, LowersTheOutputErrorOnCorrelatedInputs) {
  ThreadPool pool(2);
  const size_t n = 512, cols = 64, rows = 16;
  const CorrelatedProblem problem = correlated_problem(n, cols, 9);
  const std::vector<float>& x = problem.x;
  const std::vector<float>& h = problem.h;
  const std::vector<float>& diag = problem.diag;
  const GptqFactor f = gptq_factor(h.data(), cols, pool, best_isa());
  const std::vector<float> w = test::random_floats(rows * cols, 13);
  const auto output_error = [&](WeightType t, const std::vector<std::byte>& q) {
    return gptq_output_error(t, q, w, x, n, rows, cols);
  };
  for (WeightType t : test::quant_types()) {
    const size_t rb = weight_row_bytes(t, cols);
    std::vector<std::byte> q_rtn(rows * rb), q_search(rows * rb), q_gptq(rows * rb);
    for (size_t r = 0; r < rows; ++r) {
      quantize_row(t, w.data() + r * cols, q_rtn.data() + r * rb, cols);
      quantize_row_search(t, w.data() + r * cols, diag.data(), q_search.data() + r * rb, cols);
    }
    gptq_quantize_rows(t, w.data(), rows, cols, f, diag.data(), q_gptq.data());
    const double e_rtn = output_error(t, q_rtn), e_search = output_error(t, q_search), e_gptq = output_error(t, q_gptq);
    std::printf("  %s output error: rtn %.4g, search %.4g, gptq %.4g\n", std::string(weight_type_name(t)).c_str(),
                e_rtn, e_search, e_gptq);
    EXPECT_LT(e_gptq, 0.7 * e_rtn);
    EXPECT_LT(e_gptq, 0.7 * e_search);
  }
}

}  // namespace
}  // namespace nanoinfer
