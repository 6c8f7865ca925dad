#include "quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"
#include "model/linear.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "nanoinfer/isa.h"
#include "quant/quantize.h"

namespace nanoinfer {
namespace {

// Rows of the f32 products that are computed per call when only a triangle is wanted: the
// triangle's rows are taken in strips of this many, each against the rows up to its end.
constexpr size_t kStrip = 128;
// The factorization's block: diagonal blocks this wide are factored in double.
constexpr size_t kFactorBlock = 128;

Weight f32_matrix(const float* data, size_t rows, size_t cols) {
  return Weight{WeightType::F32, reinterpret_cast<const std::byte*>(data), rows, cols, cols * sizeof(float)};
}

// The lower Cholesky factor, in place, of the symmetric positive definite [n][n] matrix whose
// lower triangle `a` holds (its upper triangle is neither read nor written). Right-looking by
// blocks of kFactorBlock: the diagonal block is factored and inverted in double, then the
// panel below it is the f32 product with that inverse and the trailing triangle is updated
// by the f32 product of the panel with itself, strip by strip.
void cholesky_lower(float* a, size_t n, const Compute& c, const std::function<void()>& check) {
  std::vector<double> d, inv;
  std::vector<float> invf, panel, l21, tmp;
  for (size_t k0 = 0; k0 < n; k0 += kFactorBlock) {
    if (check) check();
    const size_t k1 = std::min(n, k0 + kFactorBlock), nb = k1 - k0, m = n - k1;
    d.assign(nb * nb, 0.0);
    for (size_t i = 0; i < nb; ++i)
      for (size_t j = 0; j <= i; ++j) d[i * nb + j] = a[(k0 + i) * n + k0 + j];
    for (size_t j = 0; j < nb; ++j) {
      double s = d[j * nb + j];
      for (size_t k = 0; k < j; ++k) s -= d[j * nb + k] * d[j * nb + k];
      if (!(s > 0))
        fail("gptq: the calibration inputs' Gram matrix is not positive definite (pivot {} is {})", k0 + j, s);
      d[j * nb + j] = std::sqrt(s);
      for (size_t i = j + 1; i < nb; ++i) {
        double t = d[i * nb + j];
        for (size_t k = 0; k < j; ++k) t -= d[i * nb + k] * d[j * nb + k];
        d[i * nb + j] = t / d[j * nb + j];
      }
    }
    for (size_t i = 0; i < nb; ++i)
      for (size_t j = 0; j <= i; ++j) a[(k0 + i) * n + k0 + j] = static_cast<float>(d[i * nb + j]);
    if (m == 0) break;

    // inv = D^-1 (lower), one column at a time by forward substitution.
    inv.assign(nb * nb, 0.0);
    for (size_t j = 0; j < nb; ++j) {
      inv[j * nb + j] = 1.0 / d[j * nb + j];
      for (size_t i = j + 1; i < nb; ++i) {
        double s = 0;
        for (size_t k = j; k < i; ++k) s += d[i * nb + k] * inv[k * nb + j];
        inv[i * nb + j] = -s / d[i * nb + i];
      }
    }
    invf.assign(inv.begin(), inv.end());
    // L21 = A21 D^-T: l21[i][r] = sum_c inv[r][c] a21[i][c].
    panel.resize(m * nb);
    for (size_t i = 0; i < m; ++i) std::copy_n(a + (k1 + i) * n + k0, nb, panel.data() + i * nb);
    l21.resize(m * nb);
    linear(c, f32_matrix(invf.data(), nb, nb), nullptr, panel.data(), l21.data(), m);
    for (size_t i = 0; i < m; ++i) std::copy_n(l21.data() + i * nb, nb, a + (k1 + i) * n + k0);
    // A22 -= L21 L21^T on the lower triangle: strip [s0, s1) against rows [0, s1).
    for (size_t s0 = 0; s0 < m; s0 += kStrip) {
      const size_t s1 = std::min(m, s0 + kStrip);
      tmp.resize((s1 - s0) * s1);
      linear(c, f32_matrix(l21.data(), s1, nb), nullptr, l21.data() + s0 * nb, tmp.data(), s1 - s0);
      c.pool->parallel_for(s1 - s0, 8, [&](size_t begin, size_t end) {
        for (size_t t = begin; t < end; ++t) {
          float* row = a + (k1 + s0 + t) * n + k1;
          const float* sub = tmp.data() + t * s1;
          for (size_t r = 0; r <= s0 + t; ++r) row[r] -= sub[r];
        }
      });
    }
  }
}

// Q3_K, at the sweep's block b of a row (wr: its weights from the block's first column, ar: the
// earlier blocks' corrections): at a super-block's first block, its d and first factors by
// q3k_search on the super-block's weights with the corrections of the earlier super-blocks.
void q3k_sweep_start(size_t b, const float* wr, const float* ar, const float* importance, Q3kCode& code) {
  if (b % 8 != 0) return;
  float start[kSuperBlock];
  for (size_t i = 0; i < kSuperBlock; ++i) start[i] = wr[i] + ar[i];
  code = q3k_search(start, importance);
}

// Q3_K: the scale of the sub-block starting at column i of block b, its factor chosen again
// around the first one for its weights as the sweep has them now (v: [16]); returns d * factor
// as the dequantizer computes it.
float q3k_sub_block_scale(size_t b, size_t i, const float* v, const float* importance, Q3kCode& code) {
  const size_t s = 2 * (b % 8) + i / 16;
  float uniform[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  float sum = 0.0f;
  for (size_t k = 0; k < 16 && importance != nullptr; ++k) sum += importance[k];
  const float d = f16_to_f32(code.d);
  int8_t q[16];
  q3k_best_factor(v, sum > 0.0f ? importance : uniform, d, code.scale[s], code.scale[s], q);
  return d * static_cast<float>(code.scale[s]);
}

}  // namespace

void accumulate_gram(const float* x, size_t n, size_t dim, float* h, std::vector<float>& scratch, ThreadPool& pool,
                     Isa isa) {
  if (n == 0) return;
  const size_t strip = std::min(dim, kStrip);
  scratch.resize(dim * n + strip * dim);
  float* xt = scratch.data();  // [dim][n]
  float* g = xt + dim * n;     // [strip][<= dim]
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < dim; ++c) xt[c * n + t] = x[t * dim + c];
  // As products y = W x with W = X^T ([dim] rows of n) and the "tokens" the rows of X^T:
  // h[a][b] += sum_t X[t][a] X[t][b], for the rows a of a strip against the columns b up to
  // the strip's end (the lower triangle and a little of the upper, which is dropped).
  const Compute compute{&pool, &kernels::table(isa)};
  for (size_t s0 = 0; s0 < dim; s0 += strip) {
    const size_t s1 = std::min(dim, s0 + strip);
    linear(compute, f32_matrix(xt, s1, n), nullptr, xt + s0 * n, g, s1 - s0);
    pool.parallel_for(s1 - s0, 8, [&](size_t begin, size_t end) {
      for (size_t t = begin; t < end; ++t) {
        float* row = h + gram_at(s0 + t, 0);
        const float* add = g + t * s1;
        for (size_t b = 0; b <= s0 + t; ++b) row[b] += add[b];
      }
    });
  }
}

GptqFactor gptq_factor(const float* h, size_t n, ThreadPool& pool, Isa isa, const std::function<void()>& check) {
  double mean_diag = 0;
  for (size_t i = 0; i < n; ++i) mean_diag += h[gram_at(i, i)];
  mean_diag /= static_cast<double>(n);
  const double damp = mean_diag > 0 ? 0.01 * mean_diag : 1.0;

  // M = P (H + damp I) P with P the index reversal; its lower triangle from H's lower one:
  // M[i][j] = H[n-1-i][n-1-j] = H[n-1-j][n-1-i] for j <= i. Then M = L L^T, and
  // R = P L P is upper with H = R R^T: R[a][b] = L[n-1-a][n-1-b].
  // Copied in square tiles, so that the transposed reads stay in cache.
  constexpr size_t kTile = 64;
  std::vector<float> l(n * n, 0.0f);
  const size_t tiles = (n + kTile - 1) / kTile;
  pool.parallel_for(tiles, 1, [&](size_t begin, size_t end) {
    for (size_t ti = begin; ti < end; ++ti)
      for (size_t tj = 0; tj <= ti; ++tj)
        for (size_t i = ti * kTile; i < std::min(n, (ti + 1) * kTile); ++i)
          for (size_t j = tj * kTile; j < std::min(i + 1, (tj + 1) * kTile); ++j)
            l[i * n + j] =
                static_cast<float>(static_cast<double>(h[gram_at(n - 1 - j, n - 1 - i)]) + (i == j ? damp : 0.0));
  });
  const Compute compute{&pool, &kernels::table(isa)};
  cholesky_lower(l.data(), n, compute, check);

  GptqFactor f;
  f.dim = n;
  f.isa = isa;
  f.diag.resize(n);
  for (size_t k = 0; k < n; ++k) f.diag[k] = l[(n - 1 - k) * n + (n - 1 - k)];
  f.g.assign(f.block_offset(f.blocks()), 0.0f);
  // G[k][j] = R[j][k] / R[k][k] = L[n-1-j][n-1-k] / L[n-1-k][n-1-k] for j < k.
  pool.parallel_for(f.blocks(), 1, [&](size_t begin, size_t end) {
    for (size_t b = begin; b < end; ++b) {
      const size_t j0 = b * kGptqBlock, j1 = std::min(n, j0 + kGptqBlock);
      float* blk = f.g.data() + f.block_offset(b);
      for (size_t k = j0; k < n; ++k)
        for (size_t j = j0; j < std::min(j1, k); ++j)
          blk[(k - j0) * kGptqBlock + (j - j0)] = l[(n - 1 - j) * n + (n - 1 - k)] / f.diag[k];
    }
  });
  return f;
}

void gptq_quantize_rows(WeightType type, const float* w, size_t rows, size_t cols, const GptqFactor& f,
                        const float* importance, std::byte* out) {
  if (f.dim != cols) fail("gptq: a factor of {} columns for rows of {}", f.dim, cols);
  if (cols % kGptqBlock != 0) fail("gptq: {} columns are not whole blocks of {}", cols, kGptqBlock);
  // Q3_K: a super-block is 8 of the sweep's blocks; its scales live across them (q3k_rows).
  const bool q3k = type == WeightType::Q3_K;
  const QuantRange range = q3k ? QuantRange{-4, 3} : range_of(type);
  const size_t row_bytes = weight_row_bytes(type, cols);
  const size_t block_bytes = weight_type_info(type).block_bytes;
  const kernels::MatmulFn matmul = kernels::table(f.isa).matmul_for(WeightType::F32);
  // acc[r][k]: sum over the columns j of earlier blocks of d[r][j] G[k][j].
  std::vector<float> acc(rows * cols, 0.0f), p(kGptqBlock), d(rows * kGptqBlock), tmp;
  std::vector<Q3kCode> q3k_rows(q3k ? rows : 0);
  for (size_t b = 0; b < f.blocks(); ++b) {
    const size_t j0 = b * kGptqBlock;
    const float* g = f.block(b);  // rows k = j0 + i
    // The block's own triangle transposed, gt[i][k] = G[j0 + k][j0 + i], zero for k <= i: each
    // column's residual then reaches all 32 columns in one loop of fixed length, contiguous (the
    // compiler's vectors). The zeros only touch columns already rounded, never read again.
    float gt[kGptqBlock * kGptqBlock];
    for (size_t i = 0; i < kGptqBlock; ++i)
      for (size_t k = 0; k < kGptqBlock; ++k) gt[i * kGptqBlock + k] = k > i ? g[k * kGptqBlock + i] : 0.0f;
    for (size_t r = 0; r < rows; ++r) {
      const float* wr = w + r * cols + j0;
      const float* ar = acc.data() + r * cols + j0;
      float* dr = d.data() + r * kGptqBlock;
      float v[kGptqBlock];
      BlockCode code;
      float scale = 0.0f, inv = 0.0f;
      if (q3k) {
        q3k_sweep_start(b, wr, ar, importance != nullptr ? importance + j0 : nullptr, q3k_rows[r]);
      } else {
        // Each column's value is its start plus the earlier columns' residuals times G, added in
        // column order: pushed forward as each residual is known (independent additions, where
        // summing each column's row of G would be one chain of dependent ones).
        // The scale is searched on the block's weights as the paper's sweep has them when it
        // reaches the block: every earlier column's correction applied, none of the block's
        // own. Here that is the block swept with no rounding at all (each q[j] = w'[j]).
        for (size_t i = 0; i < kGptqBlock; ++i) v[i] = wr[i] + ar[i];
        for (size_t i = 0; i < kGptqBlock; ++i) {
          p[i] = v[i];
          const float di = wr[i] - v[i];
          const float* gi = gt + i * kGptqBlock;
          for (size_t k = 0; k < kGptqBlock; ++k) v[k] += di * gi[k];
        }
        code.d = search_block_scale(type, p.data(), importance != nullptr ? importance + j0 : nullptr);
        scale = f16_to_f32(code.d);
        inv = scale != 0.0f ? 1.0f / scale : 0.0f;
      }
      for (size_t i = 0; i < kGptqBlock; ++i) v[i] = wr[i] + ar[i];
      for (size_t i = 0; i < kGptqBlock; ++i) {
        if (q3k && i % 16 == 0) {
          scale = q3k_sub_block_scale(b, i, v + i, importance != nullptr ? importance + j0 + i : nullptr, q3k_rows[r]);
          inv = scale != 0.0f ? 1.0f / scale : 0.0f;
        }
        const int q = round_to_range(v[i] * inv, range);
        (q3k ? q3k_rows[r].q[kGptqBlock * (b % 8) + i] : code.q[i]) = static_cast<int8_t>(q);
        const float di = wr[i] - scale * static_cast<float>(q);
        dr[i] = di;
        const float* gi = gt + i * kGptqBlock;
        for (size_t k = 0; k < kGptqBlock; ++k) v[k] += di * gi[k];
      }
      if (!q3k) {
        pack_block(type, code, out + r * row_bytes + b * block_bytes);
      } else if (b % 8 == 7) {
        const BlockQ3_K blk = pack_q3_k(q3k_rows[r]);
        std::memcpy(out + r * row_bytes + (b / 8) * block_bytes, &blk, sizeof blk);
      }
    }
    // The block's residuals reach every later column at once: tmp[r][k'] = sum_j d[r][j]
    // G[j1 + k'][j], a product whose "matrix" is G's block below its own rows.
    const size_t j1 = j0 + kGptqBlock, later = cols - j1;
    if (later == 0) continue;
    tmp.resize(rows * later);
    matmul(reinterpret_cast<const std::byte*>(g + kGptqBlock * kGptqBlock), nullptr, d.data(), tmp.data(), later,
           kGptqBlock, rows, 0, later);
    for (size_t r = 0; r < rows; ++r) {
      float* ar = acc.data() + r * cols + j1;
      const float* add = tmp.data() + r * later;
      for (size_t k = 0; k < later; ++k) ar[k] += add[k];
    }
  }
}

}  // namespace nanoinfer
