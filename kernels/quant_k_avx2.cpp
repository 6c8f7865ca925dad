// Q4_K / Q5_K / Q6_K and Q4_1 / Q5_0 / Q5_1 packed products for the avx2 tier (and avx512, which keeps AVX2's quantized
// kernels): the kernels of kernels/quant_k_simd.h on 8 lanes, two slices per 16-row group,
// with vpmaddubsw + vpmaddwd.
#include "kernels/quant_k_simd.h"

namespace nanoinfer::kernels::avx2 {

void matmul_packed_q4_1(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& x, float* y,
                        size_t stride, size_t row_begin, size_t row_end) {
  matmul_packed_k<PackedYmm<false>, WeightType::Q4_1>(w, w_rows, bias, x, y, stride, row_begin, row_end);
}

void matmul_packed_q5_0(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& x, float* y,
                        size_t stride, size_t row_begin, size_t row_end) {
  matmul_packed_k<PackedYmm<false>, WeightType::Q5_0>(w, w_rows, bias, x, y, stride, row_begin, row_end);
}

void matmul_packed_q5_1(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& x, float* y,
                        size_t stride, size_t row_begin, size_t row_end) {
  matmul_packed_k<PackedYmm<false>, WeightType::Q5_1>(w, w_rows, bias, x, y, stride, row_begin, row_end);
}

void matmul_packed_q4_k(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& x, float* y,
                        size_t stride, size_t row_begin, size_t row_end) {
  matmul_packed_k<PackedYmm<false>, WeightType::Q4_K>(w, w_rows, bias, x, y, stride, row_begin, row_end);
}

void matmul_packed_q5_k(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& x, float* y,
                        size_t stride, size_t row_begin, size_t row_end) {
  matmul_packed_k<PackedYmm<false>, WeightType::Q5_K>(w, w_rows, bias, x, y, stride, row_begin, row_end);
}

void matmul_packed_q6_k(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& x, float* y,
                        size_t stride, size_t row_begin, size_t row_end) {
  matmul_packed_k<PackedYmm<false>, WeightType::Q6_K>(w, w_rows, bias, x, y, stride, row_begin, row_end);
}

}  // namespace nanoinfer::kernels::avx2
