// The one seam between the model and the kernels: y = W x + b for a weight matrix of any
// WeightType, the products the forward pass fuses (q/k/v stacked, gate/up with SwiGLU), and
// the embedding lookup. The forward pass never branches on a weight's type; these functions
// pick the kernel from the table the model was opened with.
//
// Every product prepares its input once: for a quantized matrix the activations are
// quantized once per call (kernels::QuantizedActivations), for a bf16 matrix on the
// avx512-bf16 tier they are rounded to bf16 once per call, and every thread and every stacked
// part reads that one copy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "nanoinfer/thread_pool.h"
#include "nanoinfer/tuning.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

// A weight matrix as held in memory: `rows` rows of `row_bytes` bytes each, in `type`'s
// layout (weight_row_bytes(type, cols)), not owned. `packed`: a quantized matrix whose whole
// groups of 16 rows are interleaved for the kernel table's packed product (kernels/quant_blocks.h),
// or an f32 or bf16 one in the float packed layout (kernels.h); same bytes, same size either way. Loading
// packs where the table has such a product.
struct Weight {
  WeightType type = WeightType::F32;
  const std::byte* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  size_t row_bytes = 0;
  bool packed = false;
  size_t bytes() const { return rows * row_bytes; }
};

// Matrices that read the same input, as one product whose output rows hold their outputs side
// by side: y = [n_tokens][rows of parts[0] | rows of parts[1] | ...] (q, k and v).
// Loading lays the parts' rows out one after another as a single matrix when they share a
// weight type (model/weights.cpp): then `parts` has one entry and each thread's range is one
// kernel call. A file that mixes types (GGUF K-quant mixes) keeps the parts apart; they are
// still one pass of the pool, each part writing its own columns of y.
struct StackedWeight {
  std::vector<Weight> parts;    // each [rows_i][cols], in output order
  size_t rows = 0;              // sum of the parts' rows
  const float* bias = nullptr;  // [rows], or nullptr
};

// gate and up of a SwiGLU feed-forward, as one product with the activation applied on the way
// out: act[t][i] = silu(gate[i] . x[t]) * (up[i] . x[t]).
//
// Fused (gate and up of one type): one matrix of 2 * inter rows, interleaved in blocks of
// kGateUpBlock rows,
//   [gate 0-15 | up 0-15 | gate 16-31 | up 16-31 | ... | gate 16j .. inter-1 | up 16j .. inter-1]
// (the last pair is shorter when 16 does not divide inter). The pool splits the product at
// whole pairs, so the thread that computed a pair's gate and up rows applies SwiGLU to them at
// once, while they are in cache: no second pass over [n][inter] and no second fork-join.
// Otherwise (gate and up of different types) they are two products and SwiGLU a pass.
inline constexpr size_t kGateUpBlock = 16;
struct GateUpWeight {
  Weight fused;     // [2 * inter][cols] interleaved as above; data == nullptr when not fused
  Weight gate, up;  // [inter][cols] each; used when not fused
  size_t inter = 0;
};

// The row of the interleaved matrix that holds row r of gate (up = false) or of up.
constexpr size_t gate_up_row(size_t r, size_t inter, bool up) {
  const size_t start = r / kGateUpBlock * kGateUpBlock;
  const size_t len = std::min(kGateUpBlock, inter - start);
  return 2 * start + (up ? len : 0) + (r - start);
}

// Multiply-adds (rows * cols * n_tokens) below which a product is not shared with the pool's
// workers. The default model's largest decode product, its 2048 x 256 logits matrix, is
// below it (on the project's 2-core Zen 5, splitting the default model's products made 2-thread
// decode slower than 1-thread decode, and far slower when another process kept a core busy);
// Qwen2.5-0.5B's smallest shared product, 896 x 896 (q and o), is above it.
inline constexpr size_t kMinParallelLinearWork = size_t{3} << 18;  // 786,432

// Where arithmetic runs: the pool of one model, the kernel table of its ISA, and how the
// products are split across the pool (nullptr or no rule for a shape: the defaults,
// kMinParallelLinearWork and ThreadPool::kChunksPerThread; nanoinfer/tuning.h).
struct ProductWork;
struct Compute {
  ThreadPool* pool;
  const kernels::Kernels* k;
  const Tuning* tuning = nullptr;
  ProductWork* work = nullptr;  // counted into when set (by the calling thread, once per call)
};

// Work counters of the products (a model's, Model::product_flops / activation_bytes): per call
// of n tokens through a matrix of `rows` x `cols` (a stacked or gate/up matrix as one),
// 2 n rows cols FLOPs (a multiply and an add per weight and token) and 4 n (cols + rows)
// activation bytes (its f32 input rows read and output rows written).
struct ProductWork {
  uint64_t flops = 0;
  uint64_t activation_bytes = 0;
  void add(size_t rows, size_t cols, size_t n_tokens) {
    flops += 2 * static_cast<uint64_t>(rows) * cols * n_tokens;
    activation_bytes += 4 * static_cast<uint64_t>(n_tokens) * (cols + rows);
  }
};

// The gate/up outputs computed before their SwiGLU is applied, by default: 64 KiB, well
// inside L2 (SplitRule::epilogue_kib overrides it).
inline constexpr size_t kEpilogueKib = 64;

// y[t][r] = bias[r] + sum_c w[r][c] * x[t][c] for t < n_tokens.
// x: [n_tokens][cols], y: [n_tokens][rows], bias: [rows] or nullptr. y must not overlap x.
// n_tokens == 1 is decode (a matrix-vector product, memory-bound); n_tokens > 1 is prefill
// (a matrix product in token tiles, each weight tile read once per tile of tokens).
// Rows are split across the pool in grain-aligned chunks when the product has at least
// kMinParallelLinearWork multiply-adds, else it runs on the calling thread (unless c.tuning
// has a rule for the product's shape: it may split always or never, and into more or fewer
// chunks). Results are
// bitwise identical for any pool size and for a batch versus one call per token (see
// kernels/kernels.h).
void linear(const Compute& c, const Weight& w, const float* bias, const float* x, float* y, size_t n_tokens);

// The same for stacked matrices: x: [n_tokens][cols], y: [n_tokens][w.rows]. Bitwise what one
// linear() per part gives, placed side by side.
void linear(const Compute& c, const StackedWeight& w, const float* x, float* y, size_t n_tokens);

// act = silu(x Wgate) * (x Wup): x: [n_tokens][cols], act: [n_tokens][inter], gate_up: scratch
// [n_tokens][2 * inter]. Bitwise what two linear() calls and silu_mul (model/ops.h) give.
void linear_swiglu(const Compute& c, const GateUpWeight& w, const float* x, float* gate_up, float* act,
                   size_t n_tokens);

// One row of `cols` floats written in `type`'s layout, rounded to nearest (the reference
// quantizer): how loading and export convert weights.
void encode_row(WeightType type, const float* in, std::byte* out, size_t cols);

// out: [n][cols], rows `tokens` of the table, dequantized exactly to f32.
void embed_rows(const Weight& table, const int32_t* tokens, size_t n, float* out);

}  // namespace nanoinfer
