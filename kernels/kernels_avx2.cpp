// AVX2 + FMA kernels (this file gets -mavx2 -mfma from CMake by its name). xsimd 8.1's
// fma3<avx2> batch supplies loads, a fused multiply-add and the lane reduction; intrinsics
// fill the gaps: the masked tail load and widening eight bf16 lanes into a float batch.
#include <immintrin.h>

#include "kernels/attention_avx2_ops.h"
#include "kernels/attention_tile.h"
#include "kernels/kernels.h"
#include "kernels/simd_kernels.h"

namespace nanoinfer::kernels {
namespace {

struct Avx2Ops {
  using arch = xsimd::fma3<xsimd::avx2>;
  using batch = xsimd::batch<float, arch>;
  static constexpr size_t width = 8;
  // 3 x 4 accumulators + 4 activation rows = 16 ymm registers; the weight row is a memory
  // operand of the FMAs (or spills one register briefly).
  static constexpr size_t row_tile = 3;
  static constexpr size_t token_tile = 4;
  static constexpr size_t decode_rows = 8;
  // Small batches (simd_kernels.h): token groups of up to 3, tiles of R rows x T tokens with R
  // * T accumulators + T activation rows + 1 weight row within the 16 ymm registers. (Groups of
  // 4 tokens, 3 rows high, ran slower: on Zen 5, `bench generate --isa avx2 --rows-curve`, 2
  // threads, the 0.5B's bf16 pass of 8 rows cost 1.76 decode steps as two groups of 4, 1.36 as
  // groups of 3, 3 and 2; 4 rows 1.15 as one group of 4, 1.05 as two of 2.)
  static constexpr size_t small_tokens = 3;
  static constexpr size_t small_rows(size_t tokens) { return tokens <= 2 ? 6 : 4; }

  static batch load(const float* p) { return batch::load_unaligned(p); }
  // bf16 is the high half of an f32: zero-extend each 16-bit lane to 32 bits, shift up.
  static batch load(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return batch(_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
  }
  static __m256i tail_mask(size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static batch load_tail(const float* p, size_t n) { return batch(_mm256_maskload_ps(p, tail_mask(n))); }
  // AVX2 has no 16-bit masked load; stage the few tail elements through a zeroed buffer.
  static batch load_tail(const uint16_t* p, size_t n) {
    alignas(16) uint16_t buf[width] = {};
    for (size_t i = 0; i < n; ++i) buf[i] = p[i];
    return load(buf);
  }
  static batch fma(batch a, batch b, batch c) { return xsimd::fma(a, b, c); }
  static float reduce(batch v) { return xsimd::hadd(v); }
};

// A head_dim that is not a whole number of vectors runs the one-lane body (compiled here, with
// this file's flags but no contraction: the scalar reference's arithmetic).
template <class KvT>
uint64_t attention_avx2(const AttentionTile& a) {
  if (a.head_dim % Avx2AttnOps::width != 0) return attention_tile<ScalarOps, KvT>(a);
  return attention_tile<Avx2AttnOps, KvT>(a);
}

// One token and prefill: matmul (simd_kernels.h); 2 .. kSmallBatchTokens: the small-batch tiles.
template <class WT>
void matmul_avx2(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                 size_t n_tokens, size_t row_begin, size_t row_end) {
  if (n_tokens >= 2 && n_tokens <= kSmallBatchTokens && row_begin < row_end) {
    matmul_small<Avx2Ops, WT>(w, bias, x, y, rows, cols, n_tokens, row_begin, row_end);
    return;
  }
  matmul_bytes<Avx2Ops, WT>(w, bias, x, y, rows, cols, n_tokens, row_begin, row_end);
}

}  // namespace

namespace avx2 {

constinit const ByType<MatmulFn> matmul{.f32 = matmul_avx2<float>, .bf16 = matmul_avx2<uint16_t>};
constinit const DotRowsFn dot_rows_f32 = dot_rows<Avx2Ops>;
constinit const AxpyRowsFn axpy_rows_f32 = axpy_rows<Avx2Ops>;
constinit const ByKvType attention{
    .f32 = attention_avx2<float>, .bf16 = attention_avx2<Bf16>, .f16 = attention_avx2<F16>};
constinit const ExpRowsFn exp_f32 = exp_rows<Avx2AttnOps>;
constinit const SiluMulFn silu_mul_f32 = silu_mul_rows<Avx2AttnOps>;

}  // namespace avx2

}  // namespace nanoinfer::kernels
