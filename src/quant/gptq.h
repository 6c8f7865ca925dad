// Error-compensating quantization of a matrix's rows, after GPTQ (Frantar, Ashkboos, Hoefler
// and Alistarh, "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained
// Transformers", 2022), with the block scales of our formats chosen as it goes.
//
// What is minimized, for each row w of a matrix whose inputs x were seen in calibration, is
// the output error sum over calibration inputs of ((w - q) . x)^2 = (w - q) H (w - q)^T with
// H = sum x x^T [cols][cols] (the Gram matrix of the inputs). Rounding the columns one at a
// time, the error made at column j is spread over the columns not yet rounded so that the
// output change is cancelled as well as H allows; with U the upper Cholesky factor of H^-1
// (H^-1 = U^T U) this update is w[k] -= e * U[j][k] / U[j][j] for k > j, e = w[j] - q[j].
// Our formats fix one scale per block of 32 columns: when the sweep reaches a block, its scale
// is chosen from the weights as updated so far, by the importance-weighted search of
// quant/quantize.h with importances diag(H); then the block's columns are rounded to it one
// at a time, each error spreading as above. Rows are independent (the sweep of one row never
// reads another), so rows are split across threads and processed in tiles that share each
// row of U while it is in cache.
//
// H is damped by 1% of its mean diagonal before factoring (as GPTQ does), which keeps the
// factorization stable when some inputs are (nearly) constant or never seen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nanoinfer/thread_pool.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

// H += X^T X for x: [n][dim] and h: [dim][dim] (f32), with the f32 matrix product of the best
// kernel set (the Gram matrix is the largest arithmetic of a calibration: dim^2 per token).
// `scratch` is reused between calls.
void accumulate_gram(const float* x, size_t n, size_t dim, float* h, std::vector<float>& scratch, ThreadPool& pool);

// The factor the sweep needs: U [dim][dim] row-major, upper triangular, H^-1 = U^T U, for the
// damped H. Computed in double (one Cholesky factorization and one triangular inverse, on the
// index-reversed H: if P H P = M M^T then U = P M^-1 P), returned in f32.
std::vector<float> gptq_factor(const float* h, size_t dim, ThreadPool& pool);

// Quantizes `rows` rows of w ([rows][cols], f32; used as scratch and changed) into rows of
// `type` blocks at `out` (rows * weight_row_bytes(type, cols) bytes). u: gptq_factor of the
// inputs' Gram matrix; importance: [cols], diag of that Gram matrix (any positive scale).
void gptq_quantize_rows(WeightType type, float* w, size_t rows, size_t cols, const float* u, const float* importance,
                        std::byte* out);

}  // namespace nanoinfer
