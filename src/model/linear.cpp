#include "model/linear.h"

#include "model/ops.h"

namespace nanoinfer {
namespace {

// Rows per grain: a multiple of every kernel's row tile, so thread boundaries never split a
// tile (results would be identical anyway; this only keeps tiles full).
constexpr size_t kRowGrain = 16;
static_assert(kGateUpBlock % kRowGrain == 0, "gate/up blocks keep kernel tiles full");

bool quantized(WeightType type) {
  return weight_type_info(type).quantized;
}

// The input of a product as the kernels read it: the floats and, when a quantized matrix
// reads them, the activations quantized once for every thread and every matrix of the call.
// The quantized copy lives in a buffer of the calling thread, grown and never shrunk, so
// steady-state calls do not allocate.
// Likewise the bf16-rounded copy when a bf16 matrix reads them on a tier whose bf16 product
// rounds its activations (Kernels::round_activations_bf16).
struct Input {
  const float* x;
  const kernels::QuantizedActivations* xq;
  const uint16_t* xb;
  size_t n_tokens;
};

// What the matrices of one product need of their input.
struct Needs {
  bool quantized = false, bf16 = false;
  void add(WeightType t) {
    quantized |= weight_type_info(t).quantized;
    bf16 |= t == WeightType::BF16;
  }
};

Input prepare(const Compute& c, Needs needs, const float* x, size_t cols, size_t n_tokens) {
  thread_local kernels::QuantizedActivations xq;
  thread_local std::vector<uint16_t> xb;
  Input in{x, nullptr, nullptr, n_tokens};
  if (needs.quantized) {
    c.k->quantize_activations(x, cols, n_tokens, xq);
    in.xq = &xq;
  }
  if (needs.bf16 && c.k->round_activations_bf16 != nullptr) {
    const size_t size = n_tokens * kernels::bf16_row_stride(cols);
    if (xb.size() < size) xb.resize(size);
    c.k->round_activations_bf16(x, n_tokens, cols, xb.data());
    in.xb = xb.data();
  }
  return in;
}

Input prepare(const Compute& c, WeightType type, const float* x, size_t cols, size_t n_tokens) {
  Needs needs;
  needs.add(type);
  return prepare(c, needs, x, cols, n_tokens);
}

// Rows [begin, end) of w x + bias into y, whose rows are `stride` floats.
void product(const Compute& c, const Weight& w, const float* bias, const Input& in, float* y, size_t stride,
             size_t begin, size_t end) {
  if (w.packed && w.type == WeightType::BF16 && in.xb != nullptr) {
    c.k->matmul_bf16_rounded_packed(w.data, bias, in.xb, y, stride, w.cols, in.n_tokens, begin, end);
  } else if (w.packed && !quantized(w.type)) {
    c.k->matmul_packed_float[w.type](w.data, bias, in.x, y, stride, w.cols, in.n_tokens, begin, end);
  } else if (w.packed) {
    c.k->matmul_packed_for(w.type)(w.data, w.rows, bias, *in.xq, y, stride, begin, end);
  } else if (quantized(w.type)) {
    c.k->matmul_quantized_for(w.type)(w.data, bias, *in.xq, y, stride, begin, end);
  } else if (w.type == WeightType::BF16 && in.xb != nullptr) {
    c.k->matmul_bf16_rounded(w.data, bias, in.xb, y, stride, w.cols, in.n_tokens, begin, end);
  } else {
    c.k->matmul_for(w.type)(w.data, bias, in.x, y, stride, w.cols, in.n_tokens, begin, end);
  }
}

// The tuned rule for a product of this shape, or the defaults.
SplitRule rule_for(const Compute& c, WeightType type, size_t rows, size_t cols, size_t n_tokens) {
  const SplitRule* r = c.tuning != nullptr ? c.tuning->find(type, rows, cols, n_tokens) : nullptr;
  return r != nullptr ? *r : SplitRule{};
}

// fn over [0, rows) in ranges of whole grains across the pool, or in one call on this thread
// when the product is too small to be worth waking the workers (or its rule says never).
void for_rows(const Compute& c, const SplitRule& rule, size_t rows, size_t cols, size_t n_tokens, size_t grain,
              ThreadPool::RangeFn fn) {
  const bool split = rule.split == SplitRule::Split::Auto ? rows * cols * n_tokens >= kMinParallelLinearWork
                                                          : rule.split == SplitRule::Split::Always;
  if (!split) {
    fn(0, rows);
  } else {
    c.pool->parallel_for(rows, grain, fn, rule.chunks_per_thread);
  }
}

}  // namespace

void linear(const Compute& c, const Weight& w, const float* bias, const float* x, float* y, size_t n_tokens) {
  if (n_tokens == 0 || w.rows == 0) return;
  if (c.work != nullptr) c.work->add(w.rows, w.cols, n_tokens);
  const Input in = prepare(c, w.type, x, w.cols, n_tokens);
  for_rows(c, rule_for(c, w.type, w.rows, w.cols, n_tokens), w.rows, w.cols, n_tokens, kRowGrain,
           [&](size_t begin, size_t end) { product(c, w, bias, in, y, w.rows, begin, end); });
}

void linear(const Compute& c, const StackedWeight& w, const float* x, float* y, size_t n_tokens) {
  if (n_tokens == 0 || w.rows == 0) return;
  const size_t cols = w.parts.front().cols;
  if (c.work != nullptr) c.work->add(w.rows, cols, n_tokens);
  Needs needs;
  for (const Weight& p : w.parts) needs.add(p.type);
  const Input in = prepare(c, needs, x, cols, n_tokens);
  const SplitRule rule = rule_for(c, w.parts.front().type, w.rows, cols, n_tokens);
  for_rows(c, rule, w.rows, cols, n_tokens, kRowGrain, [&](size_t begin, size_t end) {
    // The part covering rows [first, first + p.rows) of the stack writes columns from `first`.
    size_t first = 0;
    for (const Weight& p : w.parts) {
      const size_t b = std::max(begin, first), e = std::min(end, first + p.rows);
      if (b < e) product(c, p, w.bias ? w.bias + first : nullptr, in, y + first, w.rows, b - first, e - first);
      first += p.rows;
    }
  });
}

void linear_swiglu(const Compute& c, const GateUpWeight& w, const float* x, float* gate_up, float* act,
                   size_t n_tokens) {
  const size_t inter = w.inter;
  if (n_tokens == 0 || inter == 0) return;
  if (c.work != nullptr) c.work->add(2 * inter, w.fused.data != nullptr ? w.fused.cols : w.gate.cols, n_tokens);
  if (w.fused.data == nullptr) {
    // Apart: gate then up into the two halves of the scratch, one quantization of x for both.
    const size_t cols = w.gate.cols;
    Needs needs;
    needs.add(w.gate.type);
    needs.add(w.up.type);
    const Input in = prepare(c, needs, x, cols, n_tokens);
    float* gate = gate_up;
    float* up = gate_up + n_tokens * inter;
    const auto run = [&](const Weight& m, float* y) {
      for_rows(c, rule_for(c, m.type, inter, cols, n_tokens), inter, cols, n_tokens, kRowGrain,
               [&](size_t begin, size_t end) { product(c, m, nullptr, in, y, inter, begin, end); });
    };
    run(w.gate, gate);
    run(w.up, up);
    silu_mul(c, gate, up, act, n_tokens * inter);
    return;
  }
  const Weight& m = w.fused;  // [2 * inter][cols], interleaved (linear.h)
  const size_t rows = m.rows, pair = 2 * kGateUpBlock;
  const Input in = prepare(c, m.type, x, m.cols, n_tokens);
  const SplitRule rule = rule_for(c, m.type, rows, m.cols, n_tokens);
  // A range is computed in chunks whose outputs fit in L2 ([n_tokens][chunk] floats), each
  // chunk's SwiGLU applied right after it, while those outputs are still cached. A chunk
  // boundary changes no result (the kernels are bitwise independent of row ranges).
  const size_t epilogue_floats = (rule.epilogue_kib != 0 ? rule.epilogue_kib : kEpilogueKib) * 1024 / sizeof(float);
  const size_t chunk = std::max(pair, epilogue_floats / n_tokens / pair * pair);
  for_rows(c, rule, rows, m.cols, n_tokens, pair, [&](size_t begin, size_t end) {
    for (size_t c0 = begin; c0 < end; c0 += chunk) {
      const size_t c1 = std::min(end, c0 + chunk);
      product(c, m, nullptr, in, gate_up, rows, c0, c1);
      // [c0, c1) holds whole pairs; pair p starts at row 2 * i0 and serves outputs
      // i0 .. i0 + len - 1, its gate rows first, then its up rows.
      for (size_t t = 0; t < n_tokens; ++t) {
        for (size_t p = c0; p < c1; p += pair) {
          const size_t i0 = p / 2, len = std::min(kGateUpBlock, inter - i0);
          const float* g = gate_up + t * rows + p;
          silu_mul(c, g, g + len, act + t * inter + i0, len);
        }
      }
    }
  });
}

void encode_row(WeightType type, const float* in, std::byte* out, size_t cols) {
  quantize_row(type, in, out, cols);
}

void embed_rows(const Weight& table, const int32_t* tokens, size_t n, float* out) {
  // A packed table's rows are unpacked on the way (the tied LM head is packed); the scratch
  // row is per thread, grown once.
  thread_local std::vector<std::byte> scratch;
  if (table.packed && scratch.size() < table.row_bytes) scratch.resize(table.row_bytes);
  for (size_t t = 0; t < n; ++t) {
    const size_t r = static_cast<size_t>(tokens[t]);
    const std::byte* row = table.packed
                               ? kernels::packed_row(table.type, table.data, table.rows, table.cols, r, scratch.data())
                               : table.data + r * table.row_bytes;
    dequantize_row(table.type, row, out + t * table.cols, table.cols);
  }
}

}  // namespace nanoinfer
