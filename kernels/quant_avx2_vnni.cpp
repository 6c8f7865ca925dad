// The quantized products of the avx2-vnni tier (avx2 + AVX-VNNI): kernels/quant_simd.h's Q8_0 /
// Q4_0 and kernels/quant_k_simd.h's packed products (two slices per 16-row group), on AVX-VNNI's
// 256-bit vpdpbusd.
#include "kernels/quant_k_simd.h"
#include "kernels/quant_simd.h"

namespace nanoinfer::kernels::avx2_vnni {

constinit const ByType<MatmulQuantizedFn> matmul_quantized = quantized_products<Ymm<true>>();
// Q4_0 and Q8_0 packed too, on the 32-block kernel (kernels/quant_k_simd.h).
constinit const ByType<MatmulPackedFn> matmul_packed = [] {
  ByType<MatmulPackedFn> products = packed_k_products<PackedYmm<true>>();
  products.q4_0 = matmul_packed_k<PackedYmm<true>, WeightType::Q4_0>;
  products.q8_0 = matmul_packed_k<PackedYmm<true>, WeightType::Q8_0>;
  return products;
}();

}  // namespace nanoinfer::kernels::avx2_vnni
