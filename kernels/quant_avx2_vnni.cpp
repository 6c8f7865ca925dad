// Q8_0 / Q4_0 products for the avx2-vnni tier (avx2 + AVX-VNNI): vpdpbusd on ymm.
#include "kernels/quant_simd.h"

namespace nanoinfer::kernels::avx2_vnni {

void matmul_quantized_q8_0(const std::byte* w, const float* bias, const QuantizedActivations& x, float* y, size_t rows,
                           size_t row_begin, size_t row_end) {
  matmul_quantized<Ymm<true>, WeightType::Q8_0>(w, bias, x, y, rows, row_begin, row_end);
}

void matmul_quantized_q4_0(const std::byte* w, const float* bias, const QuantizedActivations& x, float* y, size_t rows,
                           size_t row_begin, size_t row_end) {
  matmul_quantized<Ymm<true>, WeightType::Q4_0>(w, bias, x, y, rows, row_begin, row_end);
}

}  // namespace nanoinfer::kernels::avx2_vnni
