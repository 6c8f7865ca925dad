// The f32 packed layout (kernels.h: groups of kF32PackRows rows interleaved kF32PackCols
// columns at a time) and the product that reads it: every row unpacks to itself, the bytes sit
// where the layout says, and on every tier with the product (the AVX-512 ones) its outputs are
// bitwise that tier's own f32 product on the matrix as it was (a float product's bits are its
// tier's: the lane reduction differs between tiers), for decode, every small-batch token count, prefill past a token
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

TEST(F32PackedLayout, EveryRowUnpacksToItselfAndSitsWhereTheLayoutSays) {
  EXPECT_TRUE(f32_packable(8, 896));
  EXPECT_FALSE(f32_packable(6, 896));  // rows: whole groups only
  EXPECT_FALSE(f32_packable(8, 100));  // columns: whole lines only
  const size_t rows = 12, cols = 80;
  const std::vector<float> raw = test::random_floats(rows * cols, 3);
  std::vector<float> packed = raw;
  pack_f32(packed.data(), rows, cols);
  EXPECT_NE(std::memcmp(packed.data(), raw.data(), raw.size() * sizeof(float)), 0);
  std::vector<float> row(cols);
  for (size_t r = 0; r < rows; ++r) {
    packed_row_f32(packed.data(), cols, r, row.data());
    ASSERT_EQ(std::memcmp(row.data(), raw.data() + r * cols, cols * sizeof(float)), 0) << "row " << r;
    std::vector<std::byte> scratch(cols * sizeof(float));
    const std::byte* via =
        packed_row(WeightType::F32, reinterpret_cast<const std::byte*>(packed.data()), rows, cols, r, scratch.data());
    ASSERT_EQ(std::memcmp(via, raw.data() + r * cols, cols * sizeof(float)), 0) << "packed_row, row " << r;
  }
  // Row 6 (group 1, third row), columns 32..47: group 1 starts at 4 * cols, column step 2 of the
  // group at 2 * 4 * 16, the group's third row 2 * 16 floats into it.
  EXPECT_EQ(std::memcmp(packed.data() + 4 * cols + 2 * 4 * 16 + 2 * 16, raw.data() + 6 * cols + 32, 16 * sizeof(float)),
            0);
}

struct PackedShape {
  size_t rows, cols;
};

TEST(F32PackedMatmul, BitwiseTheTiersOwnProductOnEveryTierWithOne) {
  // Columns: one line, the model's widths, rows over the prefill's 2,048-column pass limit (a
  // partial last pass at 2,064 and 4,864); rows: one group, and groups with cuts inside them.
  const std::vector<PackedShape> shapes = {{4, 16}, {36, 896}, {20, 4864}, {12, 2064}, {8, 64}};
  std::vector<size_t> counts;
  for (size_t n = 1; n <= 16; ++n) counts.push_back(n);
  for (size_t n : {23, 64, 65, 130}) counts.push_back(n);
  size_t compared = 0, tiers = 0;
  for (Isa isa : test::supported_isas()) {
    const Kernels& k = table(isa);
    if (k.matmul_f32_packed == nullptr) continue;
    ++tiers;
    for (const PackedShape& s : shapes) {
      ASSERT_TRUE(f32_packable(s.rows, s.cols));
      const std::vector<float> w = test::random_floats(s.rows * s.cols, static_cast<uint32_t>(s.rows * 7 + s.cols));
      std::vector<float> packed = w;
      pack_f32(packed.data(), s.rows, s.cols);
      const auto* wb = reinterpret_cast<const std::byte*>(w.data());
      const auto* pb = reinterpret_cast<const std::byte*>(packed.data());
      const std::vector<float> bias = test::random_floats(s.rows, 11);
      std::vector<size_t> cuts;
      for (size_t c : {size_t{0}, size_t{3}, size_t{8}, size_t{21}, s.rows}) cuts.push_back(std::min(c, s.rows));
      for (size_t n : counts) {
        const std::vector<float> x = test::random_floats(n * s.cols, static_cast<uint32_t>(n + 100));
        for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
          const std::string what = std::string(isa_name(isa)) + " " + std::to_string(s.rows) + "x" +
                                   std::to_string(s.cols) + " tokens " + std::to_string(n) + (b ? " bias" : "");
          const std::vector<float> y = test::run_row_ranges(n, s.rows, cuts, [&](float* out, size_t rb, size_t re) {
            k.matmul_f32_packed(pb, b, x.data(), out, s.rows, s.cols, n, rb, re);
          });
          std::vector<float> own(n * s.rows);
          k.matmul_for(WeightType::F32)(wb, b, x.data(), own.data(), s.rows, s.cols, n, 0, s.rows);
          ASSERT_TRUE(same_bits(y, own)) << what << describe_difference(y, own, s.rows);
          ++compared;
        }
      }
    }
  }
  if (tiers == 0) GTEST_SKIP() << "no instruction set of this CPU has the f32 packed product (the AVX-512 ones do)";
  EXPECT_EQ(compared, tiers * shapes.size() * counts.size() * 2);
}

}  // namespace
}  // namespace nanoinfer::kernels
