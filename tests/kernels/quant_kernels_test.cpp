// The quantized weight types (Q8_0, Q4_0): the reference quantizer's round trips, exact
// dequantization, the activation quantization, and the matrix products of every ISA held
// bitwise to the scalar reference and, with a derived bound, to a float64 product.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "support/quant_problem.h"
#include "support/random.h"

namespace nanoinfer::kernels {
namespace {

using test::awkward_activations;
using test::describe_difference;
using test::first_difference;
using test::QProblem;
using test::QShape;
using test::quantized_product;
using test::random_floats;
using test::same_bits;
using test::supported_isas;

constexpr double kU = 0x1p-24;  // f32 unit roundoff

// IEEE half precision decoded independently of nanoinfer's f16_to_f32.
double f16_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return sign ? -mag : mag;
}

uint16_t scale_bits(WeightType t, const std::vector<std::byte>& row, size_t b) {
  uint16_t d;
  std::memcpy(&d, row.data() + b * weight_type_info(t).block_bytes, sizeof d);
  return d;
}

// The integer of element i of block b, as stored (Q4_0: nibble - 8), decoded here
// independently of the table's unpack_block.
int quant_value(WeightType t, const std::vector<std::byte>& row, size_t b, size_t i) {
  const auto* blk = reinterpret_cast<const uint8_t*>(row.data() + b * weight_type_info(t).block_bytes) + 2;
  switch (t) {
    case WeightType::Q8_0:
      return static_cast<int8_t>(blk[i]);
    case WeightType::Q4_0:
      return (i < 16 ? blk[i] & 0x0f : blk[i % 16] >> 4) - 8;
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
  ADD_FAILURE() << weight_type_name(t) << " has no blocks";
  return 0;
}

std::vector<std::byte> quantize(WeightType t, const std::vector<float>& x) {
  std::vector<std::byte> row(weight_row_bytes(t, x.size()));
  quantize_row(t, x.data(), row.data(), x.size());
  return row;
}

std::vector<float> dequantize(WeightType t, const std::vector<std::byte>& row, size_t cols) {
  std::vector<float> out(cols, std::nanf(""));
  dequantize_row(t, row.data(), out.data(), cols);
  return out;
}

// ---- dequantization and the reference quantizer ----------------------------------------------

TEST(QuantBlocks, DequantizationIsExactForEveryScaleAndInteger) {
  // Arbitrary bytes: every int8 (including -128, which our quantizer never writes but a file
  // may hold), every nibble, and scales of every f16 class that is finite: zero, subnormal,
  // normal, negative.
  std::mt19937 rng(5);
  const uint16_t scales[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x8200, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0x1234};
  for (WeightType t : test::quant_types()) {
    const size_t bb = weight_type_info(t).block_bytes, nb = std::size(scales);
    std::vector<std::byte> row(nb * bb);
    for (auto& byte : row) byte = static_cast<std::byte>(rng());
    for (size_t b = 0; b < nb; ++b) std::memcpy(row.data() + b * bb, &scales[b], 2);
    const std::vector<float> out = dequantize(t, row, nb * kQuantBlock);
    for (size_t b = 0; b < nb; ++b) {
      for (size_t i = 0; i < kQuantBlock; ++i) {
        // f16 (11 significant bits) times an integer below 2^8 fits f32's 24 bits: exact.
        const double exact = f16_value(scales[b]) * quant_value(t, row, b, i);
        ASSERT_EQ(out[b * kQuantBlock + i], static_cast<float>(exact))
            << weight_type_name(t) << " block " << b << " element " << i;
        ASSERT_EQ(static_cast<double>(out[b * kQuantBlock + i]), exact);
      }
    }
  }
}

// The round-trip bound of the reference quantizer (scalar_quant.cpp): with d the f32 scale it
// computes and d16 the f16 it stores, an element x gets q = round(x / d) (computed as x * (1/d),
// whose two roundings move x/d by at most 2u * 128, so a rounding decision can flip only
// within 1e-4 of a half), clamped to the type's range, and is read back as q * d16. So
//   |x - q * d16| <= |d| * (excess + 1e-4) + |q| * |d - d16|,
// excess = 1/2, or for a clamped Q4_0 element (x / d in (7.5, 8]: x of the sign opposite to
// the block's extreme) x / d - 7.
void expect_round_trip(WeightType t, const std::vector<float>& x, const std::string& what) {
  const std::vector<std::byte> row = quantize(t, x);
  const std::vector<float> back = dequantize(t, row, x.size());
  for (size_t b = 0; b < x.size() / kQuantBlock; ++b) {
    const float* xb = x.data() + b * kQuantBlock;
    double d = 0;
    switch (t) {
      case WeightType::Q8_0: {
        float amax = 0;
        for (size_t i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
        d = amax / 127.0f;
        break;
      }
      case WeightType::Q4_0: {
        float m = 0;
        for (size_t i = 0; i < kQuantBlock; ++i)
          if (std::fabs(xb[i]) > std::fabs(m)) m = xb[i];
        d = m / -8.0f;
        break;
      }
      case WeightType::Q4_1:
      case WeightType::Q5_0:
      case WeightType::Q5_1:
      case WeightType::Q4_K:
      case WeightType::Q5_K:
      case WeightType::Q6_K:
      case WeightType::Q3_K:
      case WeightType::F32:
      case WeightType::BF16:
        FAIL() << weight_type_name(t) << " has no 32-blocks";
    }
    const double d16 = f16_value(scale_bits(t, row, b));
    for (size_t i = 0; i < kQuantBlock; ++i) {
      const float got = back[b * kQuantBlock + i];
      ASSERT_TRUE(std::isfinite(got)) << what;
      const int q = quant_value(t, row, b, i);
      const double ratio = d != 0 ? xb[i] / d : 0.0;
      const double excess = t == WeightType::Q4_0 && ratio > 7.5 ? ratio - 7 : 0.5;
      const double bound = std::abs(d) * (excess + 1e-4) + std::abs(q) * std::abs(d - d16);
      ASSERT_LE(std::abs(static_cast<double>(xb[i]) - got), bound)
          << weight_type_name(t) << " " << what << " block " << b << " element " << i << " x " << xb[i] << " q " << q;
    }
  }
}

std::vector<float> block_of(float v) {
  return std::vector<float>(kQuantBlock, v);
}

TEST(QuantBlocks, RoundTripOfAllZeroBlocks) {
  for (WeightType t : test::quant_types()) {
    const std::vector<std::byte> row = quantize(t, block_of(0.0f));
    EXPECT_EQ(f16_value(scale_bits(t, row, 0)), 0.0);  // Q4_0: -0 (0 / -8)
    for (size_t i = 0; i < kQuantBlock; ++i) EXPECT_EQ(quant_value(t, row, 0, i), 0) << weight_type_name(t);
    for (float v : dequantize(t, row, kQuantBlock)) EXPECT_EQ(v, 0.0f);
    // Negative zeros too.
    for (float v : dequantize(t, quantize(t, block_of(-0.0f)), kQuantBlock)) EXPECT_EQ(v, 0.0f);
  }
}

TEST(QuantBlocks, RoundTripOfPlusMinusMax) {
  for (const float m : {1.0f, 3.5f, 1000.0f, 1e-3f}) {
    std::vector<float> x = random_floats(kQuantBlock, 9);
    for (float& v : x) v *= m * 0.9f;
    x[3] = m;
    x[20] = -m;
    // Q8_0: both extremes map to +-127 and come back to within the scale's f16 rounding.
    const std::vector<std::byte> q8 = quantize(WeightType::Q8_0, x);
    EXPECT_EQ(quant_value(WeightType::Q8_0, q8, 0, 3), 127);
    EXPECT_EQ(quant_value(WeightType::Q8_0, q8, 0, 20), -127);
    // Q4_0: the first extreme (+m) becomes -8 with a negative scale; -m would be +8, clamped to 7.
    const std::vector<std::byte> q4 = quantize(WeightType::Q4_0, x);
    EXPECT_EQ(quant_value(WeightType::Q4_0, q4, 0, 3), -8);
    EXPECT_EQ(quant_value(WeightType::Q4_0, q4, 0, 20), 7);
    EXPECT_LT(f16_value(scale_bits(WeightType::Q4_0, q4, 0)), 0.0);
    for (WeightType t : test::quant_types()) expect_round_trip(t, x, "max " + std::to_string(m));
  }
}

TEST(QuantBlocks, RoundTripOfASingleOutlier) {
  for (WeightType t : test::quant_types()) {
    std::vector<float> x = random_floats(2 * kQuantBlock, 11);
    for (float& v : x) v *= 1e-3f;
    x[37] = -250.0f;  // block 1; block 0 stays small and keeps its own fine scale
    expect_round_trip(t, x, "outlier");
    const std::vector<float> back = dequantize(t, quantize(t, x), x.size());
    // The outlier's block flushes its small values to zero; the other block keeps them.
    EXPECT_EQ(back[40], 0.0f);
    EXPECT_NE(back[5], 0.0f);
  }
}

TEST(QuantBlocks, RoundTripWithSubnormalF16Scales) {
  for (WeightType t : test::quant_types()) {
    // Scales m / 127 (Q8_0) or m / 8 (Q4_0) between the smallest f16 subnormal, 2^-24, and
    // the smallest normal, 2^-14.
    const std::vector<float> ms =
        t == WeightType::Q8_0 ? std::vector<float>{1e-3f, 1e-4f, 2e-5f} : std::vector<float>{4e-4f, 1e-5f, 1e-6f};
    for (const float m : ms) {
      std::vector<float> x = random_floats(kQuantBlock, 13);
      for (float& v : x) v *= m;
      x[0] = m;
      const std::vector<std::byte> row = quantize(t, x);
      const uint16_t d = scale_bits(t, row, 0);
      EXPECT_EQ(d & 0x7c00, 0) << weight_type_name(t) << " m " << m << ": scale is not subnormal";
      EXPECT_NE(d & 0x03ff, 0) << weight_type_name(t) << " m " << m << ": scale is zero";
      expect_round_trip(t, x, "subnormal scale, m " + std::to_string(m));
    }
  }
}

TEST(QuantBlocks, RoundTripOfRandomRowsIsNanFreeAndBounded) {
  for (WeightType t : test::quant_types()) {
    for (uint32_t seed = 0; seed < 20; ++seed) {
      std::vector<float> x = random_floats(896, seed);
      const float scale = std::ldexp(1.0f, static_cast<int>(seed) - 10);
      for (float& v : x) v *= scale;
      expect_round_trip(t, x, "seed " + std::to_string(seed));
    }
  }
}

TEST(QuantBlocks, NonFiniteWeightsAndScaleOverflowAreErrors) {
  for (WeightType t : test::quant_types()) {
    std::vector<std::byte> row(weight_row_bytes(t, kQuantBlock));
    for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
      std::vector<float> x = block_of(1.0f);
      x[7] = bad;
      EXPECT_THROW(quantize_row(t, x.data(), row.data(), kQuantBlock), Error) << weight_type_name(t) << " " << bad;
    }
    // The largest f16 is 65504: a scale beyond it cannot be stored.
    const std::vector<float> huge = block_of(1e9f);
    EXPECT_THROW(quantize_row(t, huge.data(), row.data(), kQuantBlock), Error) << weight_type_name(t);
  }
}

// ---- the activation side ---------------------------------------------------------------------

TEST(QuantActivations, BlockRoundsHalfToEvenWithinHalfAStep) {
  int8_t q[kQuantBlock];
  // amax 127 gives d = 1 and 1/d = 1: x * id is x, so exact halves reach the rounding.
  std::vector<float> x = block_of(0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = -0.5f;
  x[5] = 0.5f;
  x[6] = 1.5f;
  x[7] = -126.5f;
  EXPECT_EQ(quantize_activation_block(x.data(), q), 1.0f);
  const int expected[] = {127, 2, 4, -2, 0, 0, 2, -126};
  for (size_t i = 0; i < std::size(expected); ++i) EXPECT_EQ(q[i], expected[i]) << "element " << i;

  for (uint32_t seed = 0; seed < 50; ++seed) {
    x = random_floats(kQuantBlock, seed);
    for (float& v : x) v *= std::ldexp(1.0f, static_cast<int>(seed % 40) - 20);
    const float d = quantize_activation_block(x.data(), q);
    for (size_t i = 0; i < kQuantBlock; ++i)
      ASSERT_LE(std::abs(x[i] - static_cast<double>(d) * q[i]), d * (0.5 + 1e-4)) << "seed " << seed;
  }
}

TEST(QuantActivations, ZeroAndTinyBlocksBecomeZero) {
  int8_t q[kQuantBlock];
  for (float v : {0.0f, -0.0f, 1e-40f, 127.0f * 0x1p-127f}) {  // d = amax / 127 below FLT_MIN
    std::vector<float> x = block_of(v);
    x[5] = -v;
    EXPECT_EQ(quantize_activation_block(x.data(), q), 0.0f) << v;
    for (int8_t qi : q) EXPECT_EQ(qi, 0);
  }
  std::vector<float> x = block_of(0.0f);
  x[0] = 127.0f * 0x1p-126f;  // d = FLT_MIN exactly: kept
  EXPECT_EQ(quantize_activation_block(x.data(), q), 0x1p-126f);
  EXPECT_EQ(q[0], 127);
}

// ---- matrix products --------------------------------------------------------------------------

TEST(QuantMatmul, EveryIsaIsBitwiseTheScalarReference) {
  const std::vector<size_t> all = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  // Rows: 1, odd, below / at / above every group (8, 16 lanes; 2 and 4 rows in prefill);
  // columns: one block and up; then the model's shapes.
  const std::vector<QShape> shapes = {
      {1, 32, all},       {3, 32, all},        {7, 64, all},        {8, 96, all},   {9, 32, all},
      {15, 160, all},     {16, 64, all},       {17, 224, all},      {33, 128, all}, {37, 32, {1, 70}},
      {896, 896, {1, 9}}, {4864, 896, {1, 5}}, {896, 4864, {1, 4}}, {2, 0, {1, 3}},
  };
  size_t compared = 0;
  for (WeightType t : test::quant_types()) {
    for (const QShape& s : shapes) {
      for (size_t n : s.tokens) {
        const QProblem p(t, s.rows, s.cols, n, static_cast<uint32_t>(s.rows * 7 + s.cols + n));
        for (bool with_bias : {true, false}) {
          const std::vector<float> ref = p.run(scalar_table(), with_bias);
          for (Isa isa : supported_isas()) {
            const std::vector<float> y = p.run(table(isa), with_bias);
            ASSERT_TRUE(same_bits(y, ref))
                << isa_name(isa) << " " << weight_type_name(t) << " " << s.rows << "x" << s.cols << " tokens " << n
                << " bias " << with_bias << describe_difference(y, ref, s.rows);
            ++compared;
          }
        }
      }
    }
  }
  size_t per_isa = 0;
  for (const QShape& s : shapes) per_isa += s.tokens.size() * 2 * 2;
  EXPECT_EQ(compared, per_isa * supported_isas().size());
}

TEST(QuantMatmul, RowRangesThatSplitGroupsAreBitwiseTheWhole) {
  for (WeightType t : test::quant_types()) {
    for (size_t n : {size_t{1}, size_t{6}, size_t{70}}) {
      const QProblem p(t, 53, 192, n, 3);
      for (Isa isa : supported_isas()) {
        const Kernels& k = table(isa);
        const std::vector<float> whole = p.run(k);
        // Cut every group shape somewhere; each range alone, the other rows guarded.
        const std::vector<float> pieces =
            test::run_row_ranges(n, p.rows, {0, 1, 6, 19, 20, 37, 50, 53},
                                 [&](float* y, size_t begin, size_t end) { p.run(k, p.bias.data(), y, begin, end); });
        EXPECT_TRUE(same_bits(whole, pieces)) << isa_name(isa) << " " << weight_type_name(t) << " tokens " << n;
        EXPECT_TRUE(same_bits(whole, p.run(scalar_table())))
            << isa_name(isa) << " " << weight_type_name(t) << " tokens " << n;
      }
    }
  }
}

TEST(QuantMatmul, ArbitraryBlockBytesAndAwkwardActivationsMatchTheReference) {
  // Blocks as a file could hold them (q = -128, any nibble, subnormal / negative / zero
  // scales) against activation blocks that are zero, tiny, huge, or exact halves.
  std::mt19937 rng(17);
  const size_t rows = 21, cols = 256, nb = cols / kQuantBlock;
  std::vector<float> x = random_floats(5 * cols, 19);
  for (size_t i = 0; i < kQuantBlock; ++i) {
    x[i] = 0.0f;                                      // token 0, block 0: zero
    x[kQuantBlock + i] *= 1e-39f;                     // token 0, block 1: d below FLT_MIN
    x[cols + i] *= 1e30f;                             // token 1, block 0: huge
    x[2 * cols + i] = static_cast<float>(i) - 15.5f;  // token 2, block 0: halves
  }
  x[2 * cols] = 127.0f;
  for (WeightType t : test::quant_types()) {
    const size_t bb = weight_type_info(t).block_bytes;
    std::vector<std::byte> w(rows * nb * bb);
    for (auto& byte : w) byte = static_cast<std::byte>(rng());
    const uint16_t scales[] = {0x0001, 0x83ff, 0x0000, 0x3c00, 0xb800, 0x2e66, 0x0400, 0x1000};
    for (size_t blk = 0; blk < rows * nb; ++blk) std::memcpy(w.data() + blk * bb, &scales[blk % std::size(scales)], 2);
    for (size_t n : {size_t{1}, size_t{5}}) {
      std::vector<float> ref(n * rows);
      quantized_product(scalar_table(), t, w.data(), nullptr, x.data(), ref.data(), rows, cols, n, 0, rows);
      for (Isa isa : supported_isas()) {
        test::Guarded<float> out(n * rows, std::nanf(""));
        quantized_product(table(isa), t, w.data(), nullptr, x.data(), out.data(), rows, cols, n, 0, rows);
        EXPECT_TRUE(out.intact()) << isa_name(isa) << " " << weight_type_name(t) << " tokens " << n;
        const std::vector<float> y = out.values();
        EXPECT_TRUE(same_bits(y, ref)) << isa_name(isa) << " " << weight_type_name(t) << " tokens " << n
                                       << " first difference at " << first_difference(y, ref);
        for (float v : y) EXPECT_TRUE(std::isfinite(v));
      }
    }
  }
}

// The exact value the reference approximates: float64 sum over the dequantized weights and
// the dequantized activations (q * d of quantize_activation_block).
//
// Bound (Higham's recursive summation): per block the reference forms s = fl(dw * dx) and
// term = fl(s * isum), two roundings of the exact dw * dx * isum, then adds the terms in
// order (nb - 1 roundings after the exact first one) and the bias (one more). Each term
// passes through at most nb + 2 roundings, so
//   |y - exact| <= gamma(nb + 2) * (|bias| + sum_b |dw * dx * isum_b|),  gamma(m) = m u / (1 - m u).
// The magnitude uses the block sums, not the element products: cancellation inside a block
// is exact integer arithmetic.
TEST(QuantMatmul, ReferenceIsWithinTheDerivedBoundOfFloat64) {
  size_t checked = 0, caught = 0;
  for (WeightType t : test::quant_types()) {
    for (const QShape& s : {QShape{37, 896, {1, 3}}, QShape{19, 4864, {2}}, QShape{64, 4864, {1}}}) {
      for (size_t n : s.tokens) {
        const QProblem p(t, s.rows, s.cols, n, static_cast<uint32_t>(s.cols + n));
        const size_t nb = s.cols / kQuantBlock, rb = weight_row_bytes(t, s.cols);
        const std::vector<float> y = p.run(scalar_table());
        std::vector<float> wd(s.cols), xd(s.cols);
        std::vector<int8_t> xq(s.cols);
        std::vector<float> dx(nb);
        for (size_t tok = 0; tok < n; ++tok) {
          for (size_t b = 0; b < nb; ++b)
            dx[b] = quantize_activation_block(p.x.data() + tok * s.cols + b * kQuantBlock, xq.data() + b * kQuantBlock);
          for (size_t r = 0; r < s.rows; ++r) {
            dequantize_row(t, p.w.data() + r * rb, wd.data(), s.cols);
            double exact = p.bias[r], magnitude = std::abs(p.bias[r]), last_block = 0;
            for (size_t b = 0; b < nb; ++b) {
              double block = 0;
              for (size_t i = b * kQuantBlock; i < (b + 1) * kQuantBlock; ++i)
                block += static_cast<double>(wd[i]) * (static_cast<double>(dx[b]) * xq[i]);
              exact += block;
              magnitude += std::abs(block);
              last_block = block;
            }
            const double m = static_cast<double>(nb + 2) * kU;
            const double bound = m / (1 - m) * magnitude;
            const double err = std::abs(y[tok * s.rows + r] - exact);
            ASSERT_LE(err, bound) << weight_type_name(t) << " " << s.rows << "x" << s.cols << " [" << tok << "][" << r
                                  << "]";
            ++checked;
            // The bound is tight enough to notice one block left out.
            caught += std::abs(last_block) > bound;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * (37 * 4 + 19 * 2 + 64));
  EXPECT_GE(caught, checked * 9 / 10);
}

// ---- activations quantized once, shared ----------------------------------------------------

// The scalar quantize_activations is quantize_activation_block per block in the documented
// layout (padding tokens zero), and every ISA's is bitwise the scalar one.
TEST(QuantActivations, SharedLayoutAndEveryIsaBitwiseTheScalar) {
  size_t compared = 0;
  for (size_t cols : {size_t{32}, size_t{160}, size_t{896}}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{4}, size_t{5}, size_t{70}}) {
      const std::vector<float> x = awkward_activations(n, cols, static_cast<uint32_t>(cols + n));
      QuantizedActivations ref;
      scalar_table().quantize_activations(x.data(), cols, n, ref);
      const size_t nb = cols / kQuantBlock, tokens = n <= 1 ? n : (n + 3) / 4 * 4;
      ASSERT_EQ(ref.cols, cols);
      ASSERT_EQ(ref.nb, nb);
      ASSERT_EQ(ref.n, n);
      ASSERT_EQ(ref.tokens, tokens);
      ASSERT_EQ(ref.q.size(), tokens * cols);
      ASSERT_EQ(ref.d.size(), nb * tokens);
      ASSERT_EQ(ref.s.size(), nb * tokens);
      for (size_t t = 0; t < tokens; ++t) {
        for (size_t b = 0; b < nb; ++b) {
          int8_t q[kQuantBlock] = {};
          const float d = t < n ? quantize_activation_block(x.data() + t * cols + b * kQuantBlock, q) : 0.0f;
          int sum = 0;
          for (size_t i = 0; i < kQuantBlock; ++i) {
            ASSERT_EQ(ref.q[t * cols + b * kQuantBlock + i], q[i]) << "token " << t << " block " << b;
            sum += q[i];
          }
          ASSERT_EQ(std::bit_cast<uint32_t>(ref.d[b * tokens + t]), std::bit_cast<uint32_t>(d));
          ASSERT_EQ(ref.s[b * tokens + t], sum);
        }
      }
      for (Isa isa : supported_isas()) {
        QuantizedActivations a;
        a.q.assign(5, int8_t{9});  // stale contents from an earlier, different call
        table(isa).quantize_activations(x.data(), cols, n, a);
        EXPECT_EQ(a.tokens, ref.tokens);
        EXPECT_EQ(a.q, ref.q) << isa_name(isa) << " cols " << cols << " n " << n;
        ASSERT_EQ(a.d.size(), ref.d.size()) << isa_name(isa);
        // (memcmp of empty vectors would pass null pointers, which is undefined)
        if (!ref.d.empty()) {
          EXPECT_EQ(std::memcmp(a.d.data(), ref.d.data(), ref.d.size() * sizeof(float)), 0) << isa_name(isa);
        }
        EXPECT_EQ(a.s, ref.s) << isa_name(isa) << " cols " << cols << " n " << n;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 3 * 6 * supported_isas().size());
}

// The entry taking quantized activations, fed one quantization shared by two matrices and
// by pieces of their row ranges, is bitwise the scalar reference on each matrix alone.
TEST(QuantMatmul, SharedQuantizedActivationsGiveBitwiseTheReference) {
  size_t compared = 0;
  for (WeightType t : test::quant_types()) {
    for (size_t n : {size_t{1}, size_t{3}, size_t{9}, size_t{70}}) {
      const size_t cols = 256;
      const QProblem a(t, 53, cols, n, 41), b(t, 16, cols, n, 42);
      const std::vector<float> x = awkward_activations(n, cols, 43);
      std::vector<float> ref_a(n * a.rows), ref_b(n * b.rows);
      quantized_product(scalar_table(), t, a.w.data(), a.bias.data(), x.data(), ref_a.data(), a.rows, cols, n, 0,
                        a.rows);
      quantized_product(scalar_table(), t, b.w.data(), nullptr, x.data(), ref_b.data(), b.rows, cols, n, 0, b.rows);
      for (Isa isa : supported_isas()) {
        const Kernels& k = table(isa);
        QuantizedActivations xq;
        k.quantize_activations(x.data(), cols, n, xq);
        const std::vector<float> ya =
            test::run_row_ranges(n, a.rows, {0, 5, 16, 17, 40, 53}, [&](float* y, size_t begin, size_t end) {
              k.matmul_quantized_for(t)(a.w.data(), a.bias.data(), xq, y, a.rows, begin, end);
            });
        const std::vector<float> yb =
            test::run_row_ranges(n, b.rows, {0, b.rows}, [&](float* y, size_t begin, size_t end) {
              k.matmul_quantized_for(t)(b.w.data(), nullptr, xq, y, b.rows, begin, end);
            });
        EXPECT_TRUE(same_bits(ya, ref_a)) << isa_name(isa) << " " << weight_type_name(t) << " tokens " << n
                                          << " first difference at " << first_difference(ya, ref_a);
        EXPECT_TRUE(same_bits(yb, ref_b)) << isa_name(isa) << " " << weight_type_name(t) << " tokens " << n;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 2 * 4 * supported_isas().size());
}

// A NaN activation quantizes to -128; against negative Q8_0 weights every tier's product, on
// rows and packed, is still bitwise the reference (AVX2 moves the weights' signs onto the
// activations, which cannot negate -128).
TEST(QuantMatmul, ANanActivationAgainstNegativeWeightsIsBitwiseTheReference) {
  const size_t cols = 64, nan_col = 29;
  size_t compared = 0;
  for (const size_t rows : {size_t{16}, size_t{37}}) {
    for (const size_t n : {size_t{1}, size_t{3}}) {
      std::vector<float> wf = random_floats(rows * cols, 5);
      for (size_t r = 0; r < rows; ++r) wf[r * cols + nan_col] = -1.0f - 0.01f * static_cast<float>(r);
      const size_t rb = weight_row_bytes(WeightType::Q8_0, cols);
      std::vector<std::byte> w(rows * rb);
      for (size_t r = 0; r < rows; ++r) quantize_row(WeightType::Q8_0, wf.data() + r * cols, w.data() + r * rb, cols);
      std::vector<float> x = random_floats(n * cols, 6);
      x[nan_col] = std::nanf("");
      QuantizedActivations xq;
      scalar_table().quantize_activations(x.data(), cols, n, xq);
      ASSERT_EQ(xq.q[nan_col], -128);
      std::vector<float> ref(n * rows);
      scalar_table().matmul_quantized_for(WeightType::Q8_0)(w.data(), nullptr, xq, ref.data(), rows, 0, rows);
      std::vector<std::byte> packed = w;
      pack_quantized(WeightType::Q8_0, packed.data(), rows, cols);
      for (Isa isa : supported_isas()) {
        const Kernels& k = table(isa);
        std::vector<float> y(n * rows, std::nanf(""));
        k.matmul_quantized_for(WeightType::Q8_0)(w.data(), nullptr, xq, y.data(), rows, 0, rows);
        EXPECT_TRUE(same_bits(y, ref)) << isa_name(isa) << " rows, " << rows << " x " << n << " first difference at "
                                       << first_difference(y, ref);
        if (k.matmul_packed_for(WeightType::Q8_0) != nullptr) {
          std::fill(y.begin(), y.end(), std::nanf(""));
          k.matmul_packed_for(WeightType::Q8_0)(packed.data(), rows, nullptr, xq, y.data(), rows, 0, rows);
          EXPECT_TRUE(same_bits(y, ref)) << isa_name(isa) << " packed, " << rows << " x " << n
                                         << " first difference at " << first_difference(y, ref);
        }
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 4 * supported_isas().size());
}

}  // namespace
}  // namespace nanoinfer::kernels
