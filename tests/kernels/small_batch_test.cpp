// Products of a few tokens (2 .. 16: speculative verification, serve's batched decode), which
// the tiers run through their own drivers (kernels/small_batch.h for the AVX-512 float products,
// matmul_small in kernels/simd_kernels.h for the AVX2 ones, the small-batch groups of
// kernels/packed_driver.h): on every tier this machine has, for every row range a
// thread can get, each token's outputs are bitwise those of one call for that token alone,
// and bitwise the scalar reference where the contract says so (the bf16 tier's bf16 product
// against matmul_bf16_dot, every packed quantized product against the scalar product).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "nanoinfer/dtype.h"
#include "support/guarded.h"
#include "support/isa.h"
#include "support/quant_problem.h"
#include "support/random.h"

namespace nanoinfer::kernels {
namespace {

using test::describe_difference;
using test::same_bits;

// Row cuts inside and across the tiles of every token count (AVX-512 tiles of 3, 4, 5, 6 and 8
// rows, AVX2 tiles of 4 and 6; 16-row groups).
std::vector<size_t> small_batch_cuts(size_t rows) {
  std::vector<size_t> cuts;
  for (size_t c : {size_t{0}, size_t{3}, size_t{16}, size_t{21}, size_t{35}, rows}) cuts.push_back(std::min(c, rows));
  return cuts;
}

struct FloatCase {
  size_t rows, cols;
};

TEST(SmallBatch, FloatProductsAreBitwiseOneCallPerTokenOnEveryTier) {
  // Columns: whole vectors of both widths, a tail of each, the model's widths.
  const std::vector<FloatCase> cases = {{37, 896}, {29, 100}, {40, 33}, {19, 4864}, {8, 64}, {61, 36}};
  size_t compared = 0;
  for (Isa isa : test::supported_isas()) {
    const Kernels& k = table(isa);
    for (WeightType type : {WeightType::F32, WeightType::BF16}) {
      const MatmulFn fn = k.matmul_for(type);
      for (const FloatCase& c : cases) {
        const std::vector<float> wf = test::random_floats(c.rows * c.cols, static_cast<uint32_t>(c.rows + c.cols));
        std::vector<std::byte> w(c.rows * weight_row_bytes(type, c.cols));
        for (size_t r = 0; r < c.rows; ++r)
          quantize_row(type, wf.data() + r * c.cols, w.data() + r * weight_row_bytes(type, c.cols), c.cols);
        const std::vector<float> bias = test::random_floats(c.rows, 5);
        for (size_t n = 2; n <= 16; ++n) {
          const std::vector<float> x = test::random_floats(n * c.cols, static_cast<uint32_t>(n));
          const std::string what = std::string(isa_name(isa)) + " " + std::string(weight_type_name(type)) + " " +
                                   std::to_string(c.rows) + "x" + std::to_string(c.cols) + " tokens " +
                                   std::to_string(n);
          const std::vector<float> y =
              test::run_row_ranges(n, c.rows, small_batch_cuts(c.rows), [&](float* out, size_t b, size_t e) {
                fn(w.data(), bias.data(), x.data(), out, c.rows, c.cols, n, b, e);
              });
          std::vector<float> single(n * c.rows);
          for (size_t t = 0; t < n; ++t)
            fn(w.data(), bias.data(), x.data() + t * c.cols, single.data() + t * c.rows, c.rows, c.cols, 1, 0, c.rows);
          ASSERT_TRUE(same_bits(y, single)) << what << describe_difference(y, single, c.rows);
          if (isa == Isa::Avx512Bf16 && type == WeightType::BF16) {
            std::vector<float> ref(n * c.rows);
            matmul_bf16_dot(w.data(), bias.data(), x.data(), ref.data(), c.rows, c.cols, n, 0, c.rows);
            ASSERT_TRUE(same_bits(y, ref)) << what << " against matmul_bf16_dot" << describe_difference(y, ref, c.rows);
          }
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, test::supported_isas().size() * 2 * cases.size() * 15);
}

TEST(SmallBatch, PackedProductsAreBitwiseTheScalarReferenceOnEveryTier) {
  size_t compared = 0, expected = 0;
  for (const WeightTypeInfo& info : all_weight_types()) {
    if (!info.quantized) continue;
    const WeightType type = info.type;
    // Two 16-row groups and a partial one; columns of two super-blocks (sixteen 32-blocks).
    const size_t rows = 2 * kPackRows + 5, cols = 2 * kSuperBlock;
    for (size_t n = 2; n <= 16; ++n) {
      const test::QProblem p(type, rows, cols, n, static_cast<uint32_t>(40 + n));
      std::vector<std::byte> packed = p.w;
      pack_quantized(type, packed.data(), rows, cols);
      QuantizedActivations xq;
      quantize_activations(p.x.data(), cols, n, xq);
      std::vector<float> ref(n * rows);
      scalar_table().matmul_quantized_for(type)(p.w.data(), p.bias.data(), xq, ref.data(), rows, 0, rows);
      for (Isa isa : test::supported_isas()) {
        const MatmulPackedFn fn = table(isa).matmul_packed_for(type);
        if (fn == nullptr) continue;
        ++expected;
        const std::vector<float> y = test::run_row_ranges(
            n, rows, small_batch_cuts(rows),
            [&](float* out, size_t b, size_t e) { fn(packed.data(), rows, p.bias.data(), xq, out, rows, b, e); });
        ASSERT_TRUE(same_bits(y, ref)) << isa_name(isa) << " " << weight_type_name(type) << " tokens " << n
                                       << describe_difference(y, ref, rows);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, expected);
  EXPECT_GT(compared, 0u);
}

}  // namespace
}  // namespace nanoinfer::kernels
