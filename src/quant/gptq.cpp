#include "quant/gptq.h"

#include <cmath>

#include "kernels/kernels.h"
#include "model/linear.h"
#include "quant/quantize.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "nanoinfer/isa.h"

namespace nanoinfer {
namespace {

constexpr size_t kBlock = 32;

// Four independent partial sums (a fixed order, so results do not depend on anything but the
// inputs): lets the compiler keep four multiply-adds in flight without reassociating.
double dot(const double* a, const double* b, size_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

}  // namespace

void accumulate_gram(const float* x, size_t n, size_t dim, float* h, std::vector<float>& scratch, ThreadPool& pool) {
  if (n == 0) return;
  scratch.resize(dim * n + dim * dim);
  float* xt = scratch.data();      // [dim][n]
  float* g = xt + dim * n;         // [dim][dim]
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < dim; ++c) xt[c * n + t] = x[t * dim + c];
  // As a product y = W x with W = X^T ([dim] rows of n) and the "tokens" the rows of X^T:
  // g[a][b] = sum_t X[t][b] X[t][a].
  const Compute compute{&pool, &kernels::table(best_isa())};
  const Weight w{WeightType::F32, reinterpret_cast<const std::byte*>(xt), dim, n, n * sizeof(float)};
  linear(compute, w, nullptr, xt, g, dim);
  pool.parallel_for(dim * dim, 4096, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) h[i] += g[i];
  });
}

std::vector<float> gptq_factor(const float* h, size_t n, ThreadPool& pool) {
  double mean_diag = 0;
  for (size_t i = 0; i < n; ++i) mean_diag += h[i * n + i];
  mean_diag /= static_cast<double>(n);
  const double damp = mean_diag > 0 ? 0.01 * mean_diag : 1.0;

  // L: the lower Cholesky factor of the reversed, damped H (row-major; upper part unused).
  std::vector<double> l(n * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j) l[i * n + j] = h[(n - 1 - i) * n + (n - 1 - j)] + (i == j ? damp : 0.0);
  for (size_t j = 0; j < n; ++j) {
    double* lj = &l[j * n];
    const double s = lj[j] - dot(lj, lj, j);
    if (!(s > 0)) fail("gptq: the calibration inputs' Gram matrix is not positive definite (pivot {} is {})", j, s);
    lj[j] = std::sqrt(s);
    pool.parallel_for(n - j - 1, 64, [&](size_t begin, size_t end) {
      for (size_t i = j + 1 + begin; i < j + 1 + end; ++i) {
        double* li = &l[i * n];
        li[j] = (li[j] - dot(li, lj, j)) / lj[j];
      }
    });
  }

  // X = L^-1, one column per task (forward substitution on a unit vector). Column j costs
  // ~(n - j)^2 / 2, so tasks are handed out from both ends to balance the ranges.
  std::vector<double> x(n * n, 0.0);
  pool.parallel_for(n, 1, [&](size_t begin, size_t end) {
    std::vector<double> col(n);
    for (size_t t = begin; t < end; ++t) {
      const size_t j = t % 2 == 0 ? t / 2 : n - 1 - t / 2;
      col[j] = 1.0 / l[j * n + j];
      for (size_t i = j + 1; i < n; ++i) col[i] = -dot(&l[i * n + j], &col[j], i - j) / l[i * n + i];
      for (size_t i = j; i < n; ++i) x[i * n + j] = col[i];
    }
  });

  std::vector<float> u(n * n, 0.0f);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a; b < n; ++b) u[a * n + b] = static_cast<float>(x[(n - 1 - a) * n + (n - 1 - b)]);
  return u;
}

void gptq_quantize_rows(WeightType type, float* w, size_t rows, size_t cols, const float* u, const float* importance,
                        std::byte* out) {
  const QuantRange range = range_of(type);
  const size_t row_bytes = weight_row_bytes(type, cols);
  const size_t block_bytes = weight_type_info(type).block_bytes;
  std::vector<BlockCode> code(rows);
  std::vector<float> d(rows), id(rows), e(rows);
  for (size_t j = 0; j < cols; ++j) {
    const size_t i = j % kBlock;
    if (i == 0) {
      for (size_t r = 0; r < rows; ++r) {
        code[r].d = search_block_scale(type, w + r * cols + j, importance != nullptr ? importance + j : nullptr);
        d[r] = f16_to_f32(code[r].d);
        id[r] = d[r] != 0.0f ? 1.0f / d[r] : 0.0f;
      }
    }
    const float* uj = u + j * cols;
    for (size_t r = 0; r < rows; ++r) {
      float* wr = w + r * cols;
      long q = std::lround(wr[j] * id[r]);
      q = q < range.lo ? range.lo : (q > range.hi ? range.hi : q);
      code[r].q[i] = static_cast<int8_t>(q);
      e[r] = (wr[j] - d[r] * static_cast<float>(q)) / uj[j];
      const float er = e[r];
      for (size_t k = j + 1; k < cols; ++k) wr[k] -= er * uj[k];
    }
    if (i == kBlock - 1) {
      for (size_t r = 0; r < rows; ++r) pack_block(type, code[r], out + r * row_bytes + (j / kBlock) * block_bytes);
    }
  }
}

}  // namespace nanoinfer
