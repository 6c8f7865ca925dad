#include "model/linear.h"

namespace nanoinfer {
namespace {

// Rows per grain: a multiple of every kernel's row tile, so thread boundaries never split a
// tile (results would be identical anyway; this only keeps tiles full).
constexpr size_t kRowGrain = 16;

}  // namespace

void linear(const Compute& c, const Weight& w, const float* bias, const float* x, float* y, size_t n_tokens) {
  if (n_tokens == 0 || w.rows == 0) return;
  const kernels::MatmulFn matmul = c.k->matmul_for(w.type);
  const size_t rows = w.rows, cols = w.cols;
  if (rows * cols * n_tokens < kMinParallelLinearWork) {
    matmul(w.data, bias, x, y, rows, cols, n_tokens, 0, rows);
    return;
  }
  c.pool->parallel_for(rows, kRowGrain, [&](size_t begin, size_t end) {
    matmul(w.data, bias, x, y, rows, cols, n_tokens, begin, end);
  });
}

void encode_row(WeightType type, const float* in, std::byte* out, size_t cols) {
  kernels::quantize_row(type, in, out, cols);
}

void embed_rows(const Weight& table, const int32_t* tokens, size_t n, float* out) {
  for (size_t t = 0; t < n; ++t) {
    const std::byte* row = table.data + static_cast<size_t>(tokens[t]) * table.row_bytes;
    kernels::dequantize_row(table.type, row, out + t * table.cols, table.cols);
  }
}

}  // namespace nanoinfer
