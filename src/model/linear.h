// The one seam between the model and the kernels: y = W x + b for a stored weight matrix,
// dispatched on the weight's element type (f32 and bf16 today; quantised types plug in here).
#pragma once

#include <cstddef>

#include "nanoinfer/dtype.h"
#include "nanoinfer/thread_pool.h"

namespace nanoinfer {

// A weight matrix as stored: row-major [rows][cols] of `dtype` (F32 or BF16), not owned.
struct Weight {
  DType dtype;
  const void* data;
  size_t rows;
  size_t cols;
};

// y[t][r] = bias[r] + sum_c w[r][c] * x[t][c] for t < n_tokens.
// x: [n_tokens][cols], y: [n_tokens][rows], bias: [rows] or nullptr. y must not overlap x.
// n_tokens == 1 is decode (a matrix-vector product, memory-bound); n_tokens > 1 is prefill
// (a matrix product in token tiles, each weight tile read once per tile of tokens).
// Rows are split across the pool in contiguous ranges. Results are bitwise identical for any
// pool size and for a batch versus one call per token (see kernels/kernels.h).
// Throws nanoinfer::Error for a weight type without a kernel.
void linear(ThreadPool& pool, const Weight& w, const float* bias, const float* x, float* y, size_t n_tokens);

}  // namespace nanoinfer
