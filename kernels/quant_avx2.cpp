// Q8_0 / Q4_0 products for the avx2 tier (AVX2 + FMA + F16C): vpmaddubsw + vpmaddwd, 256-bit.
// The avx512 tier uses these too (kernels/dispatch.cpp).
#include "kernels/quant_simd.h"

namespace nanoinfer::kernels::avx2 {

void matmul_quantized_q8_0(const std::byte* w, const float* bias, const QuantizedActivations& x, float* y, size_t rows,
                           size_t row_begin, size_t row_end) {
  matmul_quantized<Ymm<false>, WeightType::Q8_0>(w, bias, x, y, rows, row_begin, row_end);
}

void matmul_quantized_q4_0(const std::byte* w, const float* bias, const QuantizedActivations& x, float* y, size_t rows,
                           size_t row_begin, size_t row_end) {
  matmul_quantized<Ymm<false>, WeightType::Q4_0>(w, bias, x, y, rows, row_begin, row_end);
}

// Shared by every tier from avx2 up: quantize_block needs nothing beyond AVX2.
void quantize_activations(const float* x, size_t cols, size_t n, QuantizedActivations& out) {
  quantize_all(x, cols, n, out);
}

}  // namespace nanoinfer::kernels::avx2
