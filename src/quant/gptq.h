// Error-compensating quantization of a matrix's rows, after GPTQ (Frantar, Ashkboos, Hoefler
// and Alistarh, "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained
// Transformers", 2022), with the block scales of our formats chosen as it goes.
//
// What is minimized, for each row w of a matrix whose inputs x were seen in calibration, is
// the output error sum over calibration inputs of ((w - q) . x)^2 = (w - q) H (w - q)^T with
// H = sum x x^T [cols][cols] (the Gram matrix of the inputs). Rounding the columns one at a
// time, the error made at column j is spread over the columns not yet rounded so that the
// output change is cancelled as well as H allows. In the paper's terms, with U the upper
// Cholesky factor of H^-1 (H^-1 = U^T U), column k is rounded from
//   w'[k] = w[k] - sum_{j<k} e[j] U[j][k],  e[j] = (w'[j] - q[j]) / U[j][j].
// We never form H^-1 or U. With R = U^-1 (upper, H = R R^T: the Cholesky factorization of H
// taken from its last row up), the same recurrence solves to
//   w'[k] = w[k] + sum_{j<k} (w[j] - q[j]) G[k][j],   G[k][j] = R[j][k] / R[k][k],
// a sum over the residuals d = w - q of the columns already rounded, against the original
// weights. That halves the factoring (one Cholesky factorization, no triangular inverse) and
// turns the sweep into products: after each block of 32 columns, the block's residuals of a
// tile of rows meet G's columns for all later columns in one f32 matrix product (the "lazy
// batch" of the paper, exact here), and only the 32 x 32 triangle inside a block is a
// column-by-column loop.
// Our formats fix one scale per block of 32 columns: when the sweep reaches a block, its scale
// is chosen from the weights as the paper's sweep has them at that point (every earlier
// column's correction applied; in the form above, the block swept once with q = w'), by the
// importance-weighted search of quant/quantize.h with importances diag(H); then the block's
// columns are rounded to it one at a time, each error feeding the later columns as above.
// Q3_K's super-block spans 8 of those blocks: at its first, its d and sixteen sub-block factors
// are searched (quant/quantize.h, q3k_search) on its 256 weights with every earlier
// super-block's correction applied; then at each sub-block's first column its factor is chosen
// again, with d fixed, among the integers near the first choice for its 16 weights as the sweep
// has them at that point (q3k_best_factor), and its columns rounded to it. Rows are independent (the
// sweep of one row never reads another), so rows are split across threads in tiles.
//
// H is damped by 1% of its mean diagonal before factoring (as GPTQ does), which keeps the
// factorization stable when some inputs are (nearly) constant or never seen. The
// factorization runs in f32 (as the reference GPTQ does) in blocks of 128: each diagonal
// block is factored and inverted in double, the panels and the trailing updates are f32
// matrix products of the best kernel set, bitwise the same at any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "nanoinfer/isa.h"
#include "nanoinfer/thread_pool.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

// A Gram matrix H (symmetric) is held as its lower triangle packed by rows: H[a][b], b <= a,
// at gram_at(a, b); gram_packed_size(dim) floats in all, half the square (for Qwen2.5-0.5B
// 1.2 GB over its 97 inputs instead of 2.3 GB).
inline size_t gram_packed_size(size_t dim) {
  return dim * (dim + 1) / 2;
}
inline size_t gram_at(size_t a, size_t b) {
  return a * (a + 1) / 2 + b;
}

// H += X^T X for x: [n][dim] into the packed h (f32), with the f32 matrix product of `isa`'s
// kernels, the calibration model's (the Gram matrix is the largest arithmetic of a
// calibration: dim^2 / 2 per token). `scratch` is reused between calls.
void accumulate_gram(const float* x, size_t n, size_t dim, float* h, std::vector<float>& scratch, ThreadPool& pool,
                     Isa isa);

// What the sweep needs of the damped H (packed as above): G by blocks of 32
// columns j, each block holding the rows k >= its first column, 32 floats per row (zero
// where j >= k or j >= dim), and R's diagonal.
inline constexpr size_t kGptqBlock = 32;
struct GptqFactor {
  size_t dim = 0;
  Isa isa = Isa::Scalar;    // whose f32 products factored it; the sweep runs its products on them too
  std::vector<float> diag;  // R[k][k]
  std::vector<float> g;     // block b: [dim - 32 b][32] at block_offset(b); row i is k = 32 b + i
  size_t blocks() const { return (dim + kGptqBlock - 1) / kGptqBlock; }
  // sum over earlier blocks c of (dim - 32 c) * 32
  size_t block_offset(size_t b) const { return kGptqBlock * (b * dim - kGptqBlock * (b * (b - 1) / 2)); }
  const float* block(size_t b) const { return g.data() + block_offset(b); }
  // G[k][j] for j < k (tests and references).
  float at(size_t k, size_t j) const {
    const size_t b = j / kGptqBlock;
    return block(b)[(k - b * kGptqBlock) * kGptqBlock + j % kGptqBlock];
  }
};
// The products run on `isa`'s kernels (the calibration model's). `check` (if set) is called
// between the factorization's blocks (tens of milliseconds apart at 4864 columns), so that it
// can abort by throwing.
GptqFactor gptq_factor(const float* h, size_t dim, ThreadPool& pool, Isa isa, const std::function<void()>& check = {});

// Quantizes `rows` rows of w ([rows][cols], f32, cols a multiple of 32; of 256 for Q3_K) into rows of `type`
// blocks at `out` (rows * weight_row_bytes(type, cols) bytes). f: gptq_factor of the inputs'
// Gram matrix (f.dim == cols); importance: [cols], diag of that Gram matrix (any positive
// scale), or nullptr. Single-threaded (callers split rows across threads); the result does
// not depend on how rows are grouped into calls.
void gptq_quantize_rows(WeightType type, const float* w, size_t rows, size_t cols, const GptqFactor& f,
                        const float* importance, std::byte* out);

}  // namespace nanoinfer
