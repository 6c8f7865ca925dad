// Shared by the quantized-kernel tests: a random Q8_0 / Q4_0 problem, the ISAs to run, and
// bitwise comparison helpers.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/weight_type.h"
#include "support/checks.h"
#include "support/guarded.h"
#include "support/isa.h"
#include "support/random.h"

namespace nanoinfer::test {

using kernels::Kernels;

// The 32-block scaled-integer types (Q8_0, Q4_0), read from the weight-type table: a new
// such type joins every test that iterates these by existing.
inline std::vector<WeightType> quant_types() {
  std::vector<WeightType> types;
  for (const WeightTypeInfo& info : all_weight_types())
    if (info.scaled_blocks()) types.push_back(info.type);
  return types;
}

// The K-quant types (super-blocks of 256, no ScaledBlock codec).
inline std::vector<WeightType> k_quant_types() {
  std::vector<WeightType> types;
  for (const WeightTypeInfo& info : all_weight_types())
    if (info.block_elems == kSuperBlock) types.push_back(info.type);
  return types;
}

// The types only llama.cpp's files bring (no ScaledBlock codec: the quantizer does not make
// them): the K types and Q4_1, Q5_0, Q5_1; tests/kernels/k_quant_test.cpp.
inline std::vector<WeightType> file_types() {
  std::vector<WeightType> types;
  for (const WeightTypeInfo& info : all_weight_types())
    if (info.quantized && !info.scaled_blocks()) types.push_back(info.type);
  return types;
}

// y = W x + bias for a quantized type through a table: x quantized by the table's own
// quantize_activations, then its matmul_quantized entry over rows [row_begin, row_end).
inline void quantized_product(const Kernels& k, WeightType type, const std::byte* w, const float* bias, const float* x,
                              float* y, size_t rows, size_t cols, size_t n_tokens, size_t row_begin, size_t row_end) {
  kernels::QuantizedActivations xq;
  k.quantize_activations(x, cols, n_tokens, xq);
  k.matmul_quantized_for(type)(w, bias, xq, y, rows, row_begin, row_end);
}

// Random weights quantized by the reference quantizer, activations and a bias.
struct QProblem {
  WeightType type;
  size_t rows, cols, n_tokens;
  std::vector<std::byte> w;
  std::vector<float> x, bias;

  QProblem(WeightType t, size_t r, size_t c, size_t n, uint32_t seed)
      : type(t),
        rows(r),
        cols(c),
        n_tokens(n),
        w(r * weight_row_bytes(t, c)),
        x(random_floats(n * c, seed + 1)),
        bias(random_floats(r, seed + 2)) {
    const std::vector<float> wf = random_floats(r * c, seed);
    const size_t rb = weight_row_bytes(t, c);
    for (size_t i = 0; i < r; ++i) quantize_row(t, wf.data() + i * c, w.data() + i * rb, c);
  }
  void run(const Kernels& k, const float* b, float* y, size_t row_begin, size_t row_end) const {
    quantized_product(k, type, w.data(), b, x.data(), y, rows, cols, n_tokens, row_begin, row_end);
  }
  std::vector<float> run(const Kernels& k, bool with_bias = true) const {
    Guarded<float> out(n_tokens * rows, std::nanf(""));
    run(k, with_bias ? bias.data() : nullptr, out.data(), 0, rows);
    EXPECT_TRUE(out.intact()) << isa_name(k.isa) << " " << weight_type_name(type) << " " << rows << "x" << cols
                              << " tokens " << n_tokens;
    return out.values();
  }
};

inline size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return i;
  return a.size();
}

// Where y first differs from ref, as " at [token][row]: y vs ref" for outputs of `rows` rows
// per token; empty when they are bitwise equal.
inline std::string describe_difference(const std::vector<float>& y, const std::vector<float>& ref, size_t rows) {
  const size_t i = first_difference(y, ref);
  if (i == y.size() && y.size() == ref.size()) return "";
  if (i >= y.size() || i >= ref.size()) return " (sizes differ)";
  return " at [" + std::to_string(i / rows) + "][" + std::to_string(i % rows) + "]: " + std::to_string(y[i]) + " vs " +
         std::to_string(ref[i]);
}

struct QShape {
  size_t rows, cols;
  std::vector<size_t> tokens;
};

// Awkward activations: zero, tiny (d below FLT_MIN), huge, exact-half and NaN blocks among
// random ones, for n tokens of `cols`.
inline std::vector<float> awkward_activations(size_t n, size_t cols, uint32_t seed) {
  std::vector<float> x = random_floats(n * cols, seed);
  for (size_t i = 0; i < kQuantBlock && n * cols >= 4 * kQuantBlock; ++i) {
    x[i] = 0.0f;
    x[kQuantBlock + i] *= 1e-39f;
    x[2 * kQuantBlock + i] *= 1e30f;
    x[3 * kQuantBlock + i] = static_cast<float>(i) - 15.5f;
  }
  if (n * cols >= 4 * kQuantBlock) x[3 * kQuantBlock] = 127.0f;
  if (n * cols > 5 * kQuantBlock) x[5 * kQuantBlock - 3] = std::nanf("");
  return x;
}

}  // namespace nanoinfer::test
