// The kernel layer: dense float arithmetic over raw pointers, one table of function pointers
// per instruction set, chosen once at start-up. Kernels never name a tensor; callers never
// name an instruction set (they call through active()).
//
// Determinism contract (every ISA): each output element of matmul is one accumulator chain
// over its columns in a fixed order, reduced across lanes in a fixed order, then the bias is
// added. The chain does not depend on the row range, on n_tokens, on the element's position
// in a register tile or on the thread that computes it, so results are bitwise identical for
// any split of rows across threads and for a batch versus one call per token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace nanoinfer::kernels {

enum class Isa { Scalar, Avx2, Avx512 };

// y[t][r] = bias[r] + sum_c w[r][c] * x[t][c], for rows r in [row_begin, row_end) and tokens
// t < n_tokens. w: [rows][cols] (f32, or bf16 bit patterns widened exactly), x:
// [n_tokens][cols], y: [n_tokens][rows], bias: [rows] or nullptr (then no addition at all).
// Rows outside the range are neither read nor written.
using MatmulF32Fn = void (*)(const float* w, const float* bias, const float* x, float* y, size_t rows,
                             size_t cols, size_t n_tokens, size_t row_begin, size_t row_end);
using MatmulBf16Fn = void (*)(const uint16_t* w, const float* bias, const float* x, float* y, size_t rows,
                              size_t cols, size_t n_tokens, size_t row_begin, size_t row_end);

struct Kernels {
  Isa isa;
  MatmulF32Fn matmul_f32;
  MatmulBf16Fn matmul_bf16;
  // sum_i a[i] * b[i] (attention scores).
  float (*dot_f32)(const float* a, const float* b, size_t n);
  // y[i] += alpha * x[i] (attention: weighted sum of values).
  void (*axpy_f32)(float alpha, const float* x, float* y, size_t n);
  // y[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]; y may alias x.
  void (*rmsnorm_f32)(const float* x, const float* weight, float eps, float* y, size_t n);
};

// The table of one ISA. Calling a table the machine does not support is undefined (SIGILL);
// check isa_supported() first. Throws nanoinfer::Error for an unsupported ISA.
const Kernels& table(Isa isa);
// The table in use: best_isa() unless set_isa() chose another.
const Kernels& active();
inline Isa active_isa() { return active().isa; }

// CPUID says the instructions exist and XGETBV says the OS saves the registers they need.
bool isa_supported(Isa isa);
Isa best_isa();
// Throws nanoinfer::Error naming the ISA if this machine cannot run it.
void set_isa(Isa isa);

std::string_view isa_name(Isa isa);  // "scalar", "avx2", "avx512"
// "scalar", "avx2", "avx512", or "auto" (= best_isa()); nullopt for anything else.
std::optional<Isa> parse_isa(std::string_view name);

// Per-ISA tables, defined in kernels/scalar.cpp, kernels/kernels_avx2.cpp and
// kernels/kernels_avx512.cpp.
const Kernels& scalar_table();
const Kernels& avx2_table();
const Kernels& avx512_table();

}  // namespace nanoinfer::kernels
