// The quantized products of the avx2-vnni tier (avx2 + AVX-VNNI): kernels/quant_simd.h's Q8_0 /
// Q4_0 and kernels/quant_k_simd.h's packed products (two slices per 16-row group), on AVX-VNNI's
// 256-bit vpdpbusd.
#include "kernels/quant_k_simd.h"
#include "kernels/quant_simd.h"

namespace nanoinfer::kernels::avx2_vnni {

constinit const ByType<MatmulQuantizedFn> matmul_quantized = quantized_products<Ymm<true>>();
constinit const ByType<MatmulPackedFn> matmul_packed = packed_k_products<PackedYmm<true>>();

}  // namespace nanoinfer::kernels::avx2_vnni
