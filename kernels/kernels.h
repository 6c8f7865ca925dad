// The kernel layer: dense arithmetic over raw pointers, one table of function pointers per
// instruction set. A model picks its table once, when it is opened (ModelOptions::isa).
// Kernels never name a tensor; the model never names an instruction set.
//
// Determinism contract (every ISA): each output element of matmul is one accumulator chain
// over its columns in a fixed order, reduced across lanes in a fixed order, then the bias is
// added. The chain does not depend on the row range, on n_tokens, on the element's position
// in a register tile or on the thread that computes it, so results are bitwise identical for
// any split of rows across threads and for a batch versus one call per token.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "nanoinfer/isa.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer::kernels {

// y[t][r] = bias[r] + sum_c w[r][c] * x[t][c], for rows r in [row_begin, row_end) and tokens
// t < n_tokens. w: `rows` rows of weight_row_bytes(type, cols) bytes in the type's layout
// (f32; bf16 bit patterns widened exactly; quantized blocks), x: [n_tokens][cols] f32,
// y: [n_tokens][rows], bias: [rows] or nullptr (then no addition at all). Rows outside the
// range are neither read nor written. Kernels for quantized types may round the activations
// (documented with each kernel); the scalar reference defines the exact result.
using MatmulFn = void (*)(const std::byte* w, const float* bias, const float* x, float* y, size_t rows,
                          size_t cols, size_t n_tokens, size_t row_begin, size_t row_end);

struct Kernels {
  Isa isa;
  // Indexed by WeightType; every entry is set (an ISA without its own kernel for a type
  // carries a lower ISA's kernel, ultimately the scalar reference).
  std::array<MatmulFn, kWeightTypeCount> matmul;
  // sum_i a[i] * b[i] (attention scores).
  float (*dot_f32)(const float* a, const float* b, size_t n);
  // y[i] += alpha * x[i] (attention: weighted sum of values).
  void (*axpy_f32)(float alpha, const float* x, float* y, size_t n);

  MatmulFn matmul_for(WeightType type) const { return matmul[static_cast<size_t>(type)]; }
};

// The table of one ISA. Throws nanoinfer::Error naming what is missing when the CPU/OS cannot
// run it (see nanoinfer/isa.h), so code for an unsupported ISA is never reached.
const Kernels& table(Isa isa);

// Scalar references for the weight types, ISA-independent (kernels/scalar.cpp):
// row: weight_row_bytes(type, cols) bytes -> out: [cols] floats, exact.
void dequantize_row(WeightType type, const std::byte* row, float* out, size_t cols);
// in: [cols] floats -> row bytes, round to nearest (the reference quantizer).
void quantize_row(WeightType type, const float* in, std::byte* row, size_t cols);

// The scalar reference products of the quantized types (kernels/scalar_quant.cpp).
void matmul_q8_0(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                 size_t n_tokens, size_t row_begin, size_t row_end);
void matmul_q4_0(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                 size_t n_tokens, size_t row_begin, size_t row_end);

// Per-ISA tables, defined in kernels/scalar.cpp, kernels/kernels_avx2.cpp and
// kernels/kernels_avx512.cpp.
const Kernels& scalar_table();
const Kernels& avx2_table();
const Kernels& avx512_table();

}  // namespace nanoinfer::kernels
