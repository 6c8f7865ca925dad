// The one seam between the model and the kernels: y = W x + b for a weight matrix of any
// WeightType, and the embedding lookup. The forward pass never branches on a weight's type;
// these functions pick the kernel from the table the model was opened with.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"
#include "nanoinfer/thread_pool.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

// A weight matrix as held in memory: `rows` rows of `row_bytes` bytes each, in `type`'s
// layout (weight_row_bytes(type, cols)), not owned.
struct Weight {
  WeightType type = WeightType::F32;
  const std::byte* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  size_t row_bytes = 0;
  size_t bytes() const { return rows * row_bytes; }
};

// Multiply-adds (rows * cols * n_tokens) below which a product is not shared with the pool's
// workers. The default model's largest decode product, its 2048 x 256 logits matrix, is
// below it (on the project's 2-core Zen 5, splitting the default model's products made 2-thread
// decode slower than 1-thread decode, and far slower when another process kept a core busy);
// Qwen2.5-0.5B's smallest shared product, 896 x 896 (q and o), is above it.
inline constexpr size_t kMinParallelLinearWork = size_t{3} << 18;  // 786,432

// Where arithmetic runs: the pool of one model and the kernel table of its ISA.
struct Compute {
  ThreadPool* pool;
  const kernels::Kernels* k;
};

// y[t][r] = bias[r] + sum_c w[r][c] * x[t][c] for t < n_tokens.
// x: [n_tokens][cols], y: [n_tokens][rows], bias: [rows] or nullptr. y must not overlap x.
// n_tokens == 1 is decode (a matrix-vector product, memory-bound); n_tokens > 1 is prefill
// (a matrix product in token tiles, each weight tile read once per tile of tokens).
// Rows are split across the pool in grain-aligned chunks when the product has at least
// kMinParallelLinearWork multiply-adds, else it runs on the calling thread. Results are
// bitwise identical for any pool size and for a batch versus one call per token (see
// kernels/kernels.h).
void linear(const Compute& c, const Weight& w, const float* bias, const float* x, float* y, size_t n_tokens);

// One row of `cols` floats written in `type`'s layout, rounded to nearest (the reference
// quantizer): how loading and export convert weights.
void encode_row(WeightType type, const float* in, std::byte* out, size_t cols);

// out: [n][cols], rows `tokens` of the table, dequantized exactly to f32.
void embed_rows(const Weight& table, const int32_t* tokens, size_t n, float* out);

}  // namespace nanoinfer
