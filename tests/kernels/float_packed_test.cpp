// The float packed layout (kernels.h: groups of kFloatPackRows rows interleaved one 64-byte
// line at a time, f32 and bf16) and the products that read it: every row unpacks to itself,
// the bytes sit where the layout says, and on every tier with a packed product its outputs are
// bitwise that tier's own product on the matrix as it was (a float product's bits are its
// tier's: the lane reduction differs between tiers; the avx512-bf16 tier's bf16 products, from
// f32 and from rounded activations, are also held to their scalar reference, matmul_bf16_dot),
// for decode, every small-batch token count, prefill past a token
// block, rows read in passes, and row ranges cut inside and across the groups.
#include <gtest/gtest.h>

#include <cstring>
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

std::vector<std::byte> matrix_of(WeightType type, size_t rows, size_t cols, uint32_t seed) {
  const std::vector<float> wf = test::random_floats(rows * cols, seed);
  const size_t rb = weight_row_bytes(type, cols);
  std::vector<std::byte> w(rows * rb);
  for (size_t r = 0; r < rows; ++r) quantize_row(type, wf.data() + r * cols, w.data() + r * rb, cols);
  return w;
}

TEST(FloatPackedLayout, EveryRowUnpacksToItselfAndSitsWhereTheLayoutSays) {
  EXPECT_TRUE(float_packable(WeightType::F32, 8, 896));
  EXPECT_TRUE(float_packable(WeightType::BF16, 8, 896));
  EXPECT_FALSE(float_packable(WeightType::F32, 6, 896));   // rows: whole groups only
  EXPECT_FALSE(float_packable(WeightType::F32, 8, 100));   // columns: whole lines only
  EXPECT_FALSE(float_packable(WeightType::BF16, 8, 48));   // 96 bytes: not whole lines
  EXPECT_FALSE(float_packable(WeightType::Q8_0, 8, 896));  // the quantized types have their own
  for (WeightType type : {WeightType::F32, WeightType::BF16}) {
    const size_t rows = 12, cols = 160, rb = weight_row_bytes(type, cols);
    const std::vector<std::byte> raw = matrix_of(type, rows, cols, 3);
    std::vector<std::byte> packed = raw;
    pack_float(packed.data(), rows, rb);
    EXPECT_NE(std::memcmp(packed.data(), raw.data(), raw.size()), 0);
    std::vector<std::byte> row(rb);
    for (size_t r = 0; r < rows; ++r) {
      packed_row_float(packed.data(), rb, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), raw.data() + r * rb, rb), 0) << weight_type_name(type) << " row " << r;
      const std::byte* via = packed_row(type, packed.data(), rows, cols, r, row.data());
      ASSERT_EQ(std::memcmp(via, raw.data() + r * rb, rb), 0) << weight_type_name(type) << " packed_row, row " << r;
    }
    // Row 6 (group 1, its third row), bytes 128..191: group 1 starts at 4 rows, the group's
    // third line step at 2 x 4 lines, the row's line 2 lines into that step.
    EXPECT_EQ(std::memcmp(packed.data() + 4 * rb + 2 * 4 * 64 + 2 * 64, raw.data() + 6 * rb + 128, 64), 0)
        << weight_type_name(type);
  }
}

struct PackedShape {
  size_t rows, cols;
};

TEST(FloatPackedMatmul, BitwiseTheTiersOwnProductOnEveryTierWithOne) {
  // Columns: one line of either type, the model's widths, rows over the prefill's 2,048-column
  // pass limit (partial last passes at 2,112 and 4,864); rows: one group, and groups with cuts
  // inside them.
  const std::vector<PackedShape> shapes = {{4, 32}, {36, 896}, {20, 4864}, {12, 2112}, {8, 64}};
  std::vector<size_t> counts;
  for (size_t n = 1; n <= 16; ++n) counts.push_back(n);
  for (size_t n : {23, 64, 65, 130}) counts.push_back(n);
  size_t compared = 0, products = 0;
  for (Isa isa : test::supported_isas()) {
    const Kernels& k = table(isa);
    for (WeightType type : {WeightType::F32, WeightType::BF16}) {
      if (!k.packs(type, 4, 32)) continue;
      ++products;
      for (const PackedShape& s : shapes) {
        ASSERT_TRUE(float_packable(type, s.rows, s.cols));
        const std::vector<std::byte> w = matrix_of(type, s.rows, s.cols, static_cast<uint32_t>(s.rows * 7 + s.cols));
        std::vector<std::byte> packed = w;
        pack_float(packed.data(), s.rows, weight_row_bytes(type, s.cols));
        const std::vector<float> bias = test::random_floats(s.rows, 11);
        std::vector<size_t> cuts;
        for (size_t c : {size_t{0}, size_t{3}, size_t{8}, size_t{21}, s.rows}) cuts.push_back(std::min(c, s.rows));
        for (size_t n : counts) {
          const std::vector<float> x = test::random_floats(n * s.cols, static_cast<uint32_t>(n + 100));
          std::vector<uint16_t> xb;
          if (type == WeightType::BF16 && k.round_activations_bf16 != nullptr) {
            xb.resize(n * bf16_row_stride(s.cols));
            k.round_activations_bf16(x.data(), n, s.cols, xb.data());
          }
          for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
            const std::string what = std::string(isa_name(isa)) + " " + std::string(weight_type_name(type)) + " " +
                                     std::to_string(s.rows) + "x" + std::to_string(s.cols) + " tokens " +
                                     std::to_string(n) + (b ? " bias" : "");
            // The MatmulFn entry (f32 activations) packed against rows one after another, and the
            // bf16 tier's product from rounded activations likewise.
            const auto from_floats = [&](const std::vector<std::byte>& m, MatmulFn fn, float* out, size_t rb,
                                         size_t re) { fn(m.data(), b, x.data(), out, s.rows, s.cols, n, rb, re); };
            const std::vector<float> y = test::run_row_ranges(n, s.rows, cuts, [&](float* out, size_t rb, size_t re) {
              from_floats(packed, k.matmul_packed_float[type], out, rb, re);
            });
            std::vector<float> own(n * s.rows);
            from_floats(w, k.matmul_for(type), own.data(), 0, s.rows);
            ASSERT_TRUE(same_bits(y, own)) << what << describe_difference(y, own, s.rows);
            if (type == WeightType::BF16 && k.matmul_bf16_rounded_packed != nullptr) {
              const std::vector<float> yr =
                  test::run_row_ranges(n, s.rows, cuts, [&](float* out, size_t rb, size_t re) {
                    k.matmul_bf16_rounded_packed(packed.data(), b, xb.data(), out, s.rows, s.cols, n, rb, re);
                  });
              std::vector<float> ref(n * s.rows);
              matmul_bf16_dot(w.data(), b, x.data(), ref.data(), s.rows, s.cols, n, 0, s.rows);
              ASSERT_TRUE(same_bits(yr, ref))
                  << what << " rounded, against matmul_bf16_dot" << describe_difference(yr, ref, s.rows);
              ASSERT_TRUE(same_bits(y, ref))
                  << what << " against matmul_bf16_dot" << describe_difference(y, ref, s.rows);
            }
            ++compared;
          }
        }
      }
    }
  }
  if (products == 0) GTEST_SKIP() << "no instruction set of this CPU has a float packed product (AVX-512 has)";
  EXPECT_EQ(compared, products * shapes.size() * counts.size() * 2);
}

}  // namespace
}  // namespace nanoinfer::kernels
