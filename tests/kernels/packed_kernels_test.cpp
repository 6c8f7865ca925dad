// The packed layout of int8/int4 matrices (kernels/quant_blocks.h: 16 rows interleaved block
// by block): packing and unpacking are exact, and every tier's packed product is bitwise the
// scalar reference on the same matrix unpacked.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "nanoinfer/error.h"
#include "support/guarded.h"
#include "support/quant_problem.h"

namespace nanoinfer::kernels {
namespace {

using test::awkward_activations;
using test::describe_difference;
using test::first_difference;
using test::QProblem;
using test::QShape;
using test::same_bits;
using test::supported_isas;

std::vector<Isa> isas_with_packed_products(WeightType t) {
  std::vector<Isa> isas;
  for (Isa isa : supported_isas())
    if (table(isa).matmul_packed_for(t) != nullptr) isas.push_back(isa);
  return isas;
}

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

// How the packed layout holds a quant byte, written here independently of pack_quantized:
// Q8_0 words offset by 128 (top bit flipped), Q4_0's nibble bytes unchanged.
uint8_t held_byte(WeightType t, uint8_t q) {
  switch (t) {
    case WeightType::Q8_0:
      return static_cast<uint8_t>(q ^ 0x80u);
    case WeightType::Q4_0:
      return q;
    case WeightType::Q4_1:
    case WeightType::Q5_0:
    case WeightType::Q5_1:
    case WeightType::Q4_K:
    case WeightType::Q5_K:
    case WeightType::Q6_K:  // tests/kernels/k_quant_test.cpp
    case WeightType::Q3_K:
    case WeightType::F32:
    case WeightType::BF16:
      break;
  }
  ADD_FAILURE() << weight_type_name(t) << " has no packed layout";
  return q;
}

TEST(PackedLayout, EveryRowUnpacksToItselfAndAPartialGroupIsUntouched) {
  for (WeightType t : test::quant_types()) {
    const size_t rows = 2 * kPackRows + 5, cols = 96, rb = weight_row_bytes(t, cols), bb = rb / 3;
    const std::vector<std::byte> raw = random_bytes(rows * rb, 5);
    std::vector<std::byte> packed = raw;
    pack_quantized(t, packed.data(), rows, cols);
    // The partial last group keeps its bytes; the whole groups are rewritten.
    EXPECT_EQ(std::memcmp(packed.data() + 2 * kPackRows * rb, raw.data() + 2 * kPackRows * rb, 5 * rb), 0)
        << weight_type_name(t);
    EXPECT_NE(std::memcmp(packed.data(), raw.data(), 2 * kPackRows * rb), 0) << weight_type_name(t);
    std::vector<std::byte> scratch(rb);
    for (size_t r = 0; r < rows; ++r) {
      const std::byte* row = packed_row(t, packed.data(), rows, cols, r, scratch.data());
      ASSERT_EQ(std::memcmp(row, raw.data() + r * rb, rb), 0) << weight_type_name(t) << " row " << r;
    }
    // Spot checks of the layout itself: group 1, block 2 starts with the 16 scales, then
    // word k of row j at 32 + 64k + 4j (Q8_0 words offset by 128).
    const std::byte* blk = packed.data() + kPackRows * rb + 2 * kPackRows * bb;
    for (size_t j = 0; j < kPackRows; ++j) {
      const std::byte* src = raw.data() + (kPackRows + j) * rb + 2 * bb;
      EXPECT_EQ(std::memcmp(blk + 2 * j, src, 2), 0);
      const auto q = std::to_integer<uint8_t>(src[2 + 4 * 3 + 1]);
      const auto held = std::to_integer<uint8_t>(blk[32 + 64 * 3 + 4 * j + 1]);
      EXPECT_EQ(held, held_byte(t, q)) << weight_type_name(t) << " row " << j;
    }
  }
  std::vector<std::byte> f(16 * 32 * 4);
  EXPECT_THROW(pack_quantized(WeightType::F32, f.data(), 16, 32), Error);
}

// The packed products against the scalar reference on the same matrix unpacked: every shape
// around the 16-row groups, row ranges cut inside groups and inside the partial last group,
// with and without bias, decode and prefill (token counts around the groups of 4 and past a
// 64-token block).
TEST(PackedMatmul, EveryTierWithAPackedProductIsBitwiseTheReference) {
  const std::vector<QShape> shapes = {
      {16, 32, {1, 3, 4, 5}}, {17, 96, {1, 2, 9}}, {37, 64, {1, 4, 70}}, {64, 256, {1, 7, 8, 16}},
      {15, 64, {1, 5}},       {896, 896, {1, 9}},  {160, 4864, {1, 4}},
  };
  size_t compared = 0;
  for (WeightType t : test::quant_types()) {
    const std::vector<Isa> isas = isas_with_packed_products(t);
    for (const QShape& s : shapes) {
      for (size_t n : s.tokens) {
        const QProblem p(t, s.rows, s.cols, n, static_cast<uint32_t>(s.rows * 3 + s.cols + n));
        std::vector<std::byte> packed = p.w;
        pack_quantized(t, packed.data(), s.rows, s.cols);
        QuantizedActivations xq;
        quantize_activations(p.x.data(), s.cols, n, xq);
        for (bool with_bias : {true, false}) {
          const float* bias = with_bias ? p.bias.data() : nullptr;
          std::vector<float> ref(n * s.rows, std::nanf(""));
          scalar_table().matmul_quantized_for(t)(p.w.data(), bias, xq, ref.data(), s.rows, 0, s.rows);
          for (Isa isa : isas) {
            std::vector<size_t> cuts;
            for (size_t c : {size_t{0}, size_t{3}, size_t{16}, size_t{21}, size_t{35}, size_t{36}, s.rows})
              cuts.push_back(std::min(c, s.rows));
            // Each range alone, the other rows guarded.
            const std::vector<float> y = test::run_row_ranges(n, s.rows, cuts, [&](float* out, size_t b, size_t e) {
              table(isa).matmul_packed_for(t)(packed.data(), s.rows, bias, xq, out, s.rows, b, e);
            });
            ASSERT_TRUE(same_bits(y, ref))
                << isa_name(isa) << " " << weight_type_name(t) << " " << s.rows << "x" << s.cols << " tokens " << n
                << " bias " << with_bias << describe_difference(y, ref, s.rows);
            ++compared;
          }
        }
      }
    }
    size_t cases = 0;
    for (const QShape& s : shapes) cases += s.tokens.size() * 2;
    EXPECT_EQ(compared, cases * isas.size()) << weight_type_name(t);
    compared = 0;
  }
  if (isas_with_packed_products(WeightType::Q8_0).empty())
    GTEST_SKIP() << "no instruction set of this CPU has a packed product (every SIMD tier has); "
                    "the layout itself is tested by PackedLayout";
}

// Bytes as a file could hold them (q = -128, every nibble, subnormal / negative / zero
// scales) against awkward activations, through the packed layout: with their NaN (quantized to
// -128, which plain AVX2's Q8_0 kernel must take another way) and with it zeroed.
TEST(PackedMatmul, ArbitraryBlockBytesMatchTheReference) {
  const size_t rows = 48, cols = 256, nb = cols / kQuantBlock;
  size_t compared = 0;
  for (WeightType t : test::quant_types()) {
    const size_t bb = weight_type_info(t).block_bytes;
    std::vector<std::byte> w = random_bytes(rows * nb * bb, 23);
    const uint16_t scales[] = {0x0001, 0x83ff, 0x0000, 0x3c00, 0xb800, 0x2e66, 0x0400, 0x7bff};
    for (size_t blk = 0; blk < rows * nb; ++blk) std::memcpy(w.data() + blk * bb, &scales[blk % std::size(scales)], 2);
    std::vector<std::byte> packed = w;
    pack_quantized(t, packed.data(), rows, cols);
    for (const auto& [n, with_nan] : {std::pair{size_t{1}, true}, std::pair{size_t{5}, true},
                                      std::pair{size_t{1}, false}, std::pair{size_t{5}, false}}) {
      std::vector<float> x = awkward_activations(n, cols, 29);
      if (!with_nan)
        for (float& v : x) v = std::isnan(v) ? 0.0f : v;
      QuantizedActivations xq;
      quantize_activations(x.data(), cols, n, xq);
      std::vector<float> ref(n * rows);
      scalar_table().matmul_quantized_for(t)(w.data(), nullptr, xq, ref.data(), rows, 0, rows);
      for (Isa isa : isas_with_packed_products(t)) {
        test::Guarded<float> out(n * rows, std::nanf(""));
        table(isa).matmul_packed_for(t)(packed.data(), rows, nullptr, xq, out.data(), rows, 0, rows);
        EXPECT_TRUE(out.intact()) << isa_name(isa) << " " << weight_type_name(t) << " tokens " << n << " nan "
                                  << with_nan;
        const std::vector<float> y = out.values();
        EXPECT_TRUE(same_bits(y, ref)) << isa_name(isa) << " " << weight_type_name(t) << " tokens " << n << " nan "
                                       << with_nan << " first difference at " << first_difference(y, ref);
        ++compared;
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "no instruction set of this CPU has a packed product";
}

}  // namespace
}  // namespace nanoinfer::kernels
