#include "model/linear.h"

#include "kernels/kernels.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

// Rows per grain: a multiple of every kernel's row tile, so thread boundaries never split a
// tile (results would be identical anyway; this only keeps tiles full).
constexpr size_t kRowGrain = 16;
// Below this many multiply-adds, waking workers costs more than it saves.
constexpr size_t kMinParallelWork = size_t{1} << 15;

}  // namespace

void linear(ThreadPool& pool, const Weight& w, const float* bias, const float* x, float* y, size_t n_tokens) {
  if (n_tokens == 0 || w.rows == 0) return;
  const kernels::Kernels& k = kernels::active();
  const size_t rows = w.rows, cols = w.cols;
  auto run = [&](auto matmul, const auto* data) {
    if (rows * cols * n_tokens < kMinParallelWork) {
      matmul(data, bias, x, y, rows, cols, n_tokens, 0, rows);
      return;
    }
    pool.parallel_for(rows, kRowGrain, [&](size_t begin, size_t end) {
      matmul(data, bias, x, y, rows, cols, n_tokens, begin, end);
    });
  };
  switch (w.dtype) {
    case DType::F32: run(k.matmul_f32, static_cast<const float*>(w.data)); return;
    case DType::BF16: run(k.matmul_bf16, static_cast<const uint16_t*>(w.data)); return;
    default: fail("linear: no kernel for {} weights [{}, {}]", dtype_name(w.dtype), rows, cols);
  }
}

}  // namespace nanoinfer
