// The block formats round trip (the reference quantizer and the importance-weighted search):
// all-zero blocks, +-max, a single outlier, subnormal scales; scale groups against the formats'
// bytes; the search's guarantees. GPTQ's are tests/quant/gptq_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/thread_pool.h"
#include "quant/gptq.h"
#include "quant/quantize.h"
#include "support/quant_problem.h"
#include "support/random.h"

namespace nanoinfer {
namespace {

// The quantized types, from the weight-type table.

std::vector<std::byte> rtn(WeightType t, const std::vector<float>& w) {
  std::vector<std::byte> row(weight_row_bytes(t, w.size()));
  quantize_row(t, w.data(), row.data(), w.size());
  return row;
}

std::vector<std::byte> search(WeightType t, const std::vector<float>& w, const float* importance = nullptr) {
  std::vector<std::byte> row(weight_row_bytes(t, w.size()));
  quantize_row_search(t, w.data(), importance, row.data(), w.size());
  return row;
}

std::vector<float> back(WeightType t, const std::vector<std::byte>& row, size_t cols) {
  std::vector<float> out(cols);
  dequantize_row(t, row.data(), out.data(), cols);
  return out;
}

uint16_t scale_of(WeightType t, const std::vector<std::byte>& row, size_t block) {
  uint16_t d;
  std::memcpy(&d, row.data() + block * weight_type_info(t).block_bytes, 2);  // the scale leads every block
  return d;
}

TEST(QuantBlocks, AllZeroBlocksStayZero) {
  const std::vector<float> w(64, 0.0f);
  for (WeightType t : test::quant_types()) {
    for (const auto& row : {rtn(t, w), search(t, w)}) {
      for (float v : back(t, row, w.size())) EXPECT_EQ(v, 0.0f) << weight_type_name(t);
      EXPECT_EQ(f16_to_f32(scale_of(t, row, 0)), 0.0f) << weight_type_name(t);  // +0 or -0 (Q4_0: 0 / -8)
    }
  }
}

// Q8_0 is symmetric: +-M both land on +-127 steps, off by the f16 rounding of the scale only.
// Q4_0 maps the first largest-magnitude weight to -8 steps, so a block holding both +M and -M
// reproduces the first exactly and clamps the other to 7 steps, -7M/8: the format's one-sided
// range (GGUF's Q4_0 does the same). The search may pick another scale, never a worse one.
TEST(QuantBlocks, PlusMinusMax) {
  std::vector<float> w(32);
  for (size_t i = 0; i < 32; ++i) w[i] = i % 2 == 0 ? 1.0f : -1.0f;
  const float d8 = f16_to_f32(f32_to_f16(1.0f / 127.0f));
  const auto q8 = back(WeightType::Q8_0, rtn(WeightType::Q8_0, w), 32);
  for (size_t i = 0; i < 32; ++i) {
    EXPECT_EQ(q8[i], (i % 2 == 0 ? 127.0f : -127.0f) * d8);
    EXPECT_LE(std::abs(q8[i] - w[i]), std::ldexp(1.0f, -11));
  }
  const auto q4 = back(WeightType::Q4_0, rtn(WeightType::Q4_0, w), 32);
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(q4[i], i % 2 == 0 ? 1.0f : -0.875f) << i;
  for (WeightType t : test::quant_types()) {
    EXPECT_LE(weighted_row_error(t, w.data(), nullptr, search(t, w).data(), 32),
              weighted_row_error(t, w.data(), nullptr, rtn(t, w).data(), 32));
  }
}

TEST(QuantBlocks, SingleOutlier) {
  std::vector<float> w(64, 0.0f);
  w[5] = 100.0f;
  w[40] = -3.0f;  // the second block's only weight
  const auto q4 = back(WeightType::Q4_0, rtn(WeightType::Q4_0, w), 64);
  const auto q8 = back(WeightType::Q8_0, rtn(WeightType::Q8_0, w), 64);
  for (size_t i = 0; i < 64; ++i) {
    if (i == 5 || i == 40) continue;
    EXPECT_EQ(q4[i], 0.0f);
    EXPECT_EQ(q8[i], 0.0f);
  }
  EXPECT_EQ(q4[5], 100.0f);  // -8 x f16(-12.5), exact
  EXPECT_EQ(q4[40], -3.0f);
  EXPECT_NEAR(q8[5], 100.0f, 100.0f * std::ldexp(1.0f, -11));
  EXPECT_NEAR(q8[40], -3.0f, 3.0f * std::ldexp(1.0f, -11));
  for (WeightType t : test::quant_types()) {
    const auto s = back(t, search(t, w), 64);
    for (size_t i = 0; i < 64; ++i)
      if (i != 5 && i != 40) {
        EXPECT_EQ(s[i], 0.0f);
      }
  }
}

// Weights around 1e-4 need scales below f16's smallest normal (6.1e-5): subnormal f16 scales,
// spaced 2^-24. Every dequantized value is exactly q x the stored scale, and within half a
// step plus the scale's rounding (at most 2^-25 per step, times |q| <= 127) of the weight.
// Weights so small that the scale rounds to zero dequantize to zero.
TEST(QuantBlocks, SubnormalScales) {
  for (WeightType t : test::quant_types()) {
    const float qmax = static_cast<float>(std::max(-weight_type_info(t).q_min, weight_type_info(t).q_max));
    for (float magnitude : {1.0e-4f, 2.0e-5f, 3.0e-6f}) {
      std::vector<float> w = test::random_floats(64, 11);
      for (float& v : w) v *= magnitude;
      for (const auto& row : {rtn(t, w), search(t, w)}) {
        const auto deq = back(t, row, 64);
        for (size_t b = 0; b < 2; ++b) {
          const uint16_t d16 = scale_of(t, row, b);
          EXPECT_EQ(d16 & 0x7c00, 0) << "scale should be subnormal or zero";
          const float d = std::abs(f16_to_f32(d16));
          for (size_t i = b * 32; i < b * 32 + 32; ++i) {
            EXPECT_TRUE(std::isfinite(deq[i]));
            EXPECT_EQ(std::fmod(deq[i], d == 0.0f ? 1.0f : d), 0.0f);
            // Half a step, plus the rounding of the scale over up to qmax steps, plus (search)
            // clipping: bounded by one step of the unrounded scale.
            EXPECT_LE(std::abs(deq[i] - w[i]), magnitude / qmax + d / 2 + qmax * std::ldexp(1.0f, -25))
                << weight_type_name(t) << " " << magnitude << " " << i;
          }
        }
      }
    }
  }
  // 3e-7 / 127 is below half the smallest subnormal: the Q8_0 scale is 0, the block 0.
  std::vector<float> tiny(32, 3.0e-7f);
  for (float v : back(WeightType::Q8_0, rtn(WeightType::Q8_0, tiny), 32)) EXPECT_EQ(v, 0.0f);
}

// The search includes round-to-nearest as a candidate, so under the weighting it is given it
// is never worse, row by row; on random rows it is clearly better.
// Scale groups (bench quant's group-size axis): a group of the block's size is the type's own
// round-to-nearest; a larger group puts one scale, the group's, in all of its blocks, and every
// weight is within half a step of it (a full step where Q4_0's +8 clamps to 7).
std::vector<std::byte> grouped(WeightType t, const std::vector<float>& w, size_t group) {
  std::vector<std::byte> row(weight_row_bytes(t, w.size()));
  quantize_row_grouped(t, w.data(), row.data(), w.size(), group);
  return row;
}

// The bytes of a row under scale groups of `group` weights, written out here from the formats'
// definition, independently of the quantizer: every block of 32 is its group's f16 scale, then
// Q8_0's 32 int8 lround(w / d) with d = max|w| / 127, or Q4_0's 16 bytes of 4-bit codes
// lround(w / d) + 8 clamped to [0, 15] (weight j in the low nibble of byte j, weight j + 16 in
// its high nibble) with d = the group's signed extreme / -8. Division by d is a multiplication
// by 1 / d, as the formats' reference quantizer (ggml's) computes it.
std::vector<std::byte> expected_grouped(WeightType t, const std::vector<float>& w, size_t group) {
  const bool q8 = t == WeightType::Q8_0;
  const size_t block_bytes = q8 ? 34 : 18;
  std::vector<std::byte> row(w.size() / 32 * block_bytes);
  for (size_t g0 = 0; g0 < w.size(); g0 += group) {
    const size_t g1 = std::min(w.size(), g0 + group);
    float extreme = 0;  // Q8_0: the largest magnitude; Q4_0: the value of largest magnitude, signed
    for (size_t i = g0; i < g1; ++i) {
      if (std::fabs(w[i]) > std::fabs(extreme)) extreme = q8 ? std::fabs(w[i]) : w[i];
    }
    const float d = q8 ? extreme / 127.0f : extreme / -8.0f;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t d16 = f32_to_f16(d);
    for (size_t b = g0 / 32; b < g1 / 32; ++b) {
      std::byte* out = row.data() + b * block_bytes;
      std::memcpy(out, &d16, 2);
      for (size_t j = 0; j < 32; ++j) {
        const long q = std::lround(w[b * 32 + j] * inv);
        if (q8) {
          out[2 + j] = static_cast<std::byte>(static_cast<int8_t>(q));
        } else {
          const auto code = static_cast<uint8_t>(std::clamp(q + 8, 0L, 15L));
          out[2 + j % 16] |= static_cast<std::byte>(j < 16 ? code : code << 4);
        }
      }
    }
  }
  return row;
}

TEST(QuantGroups, RowsAreTheFormatsBytesAtEveryGroupSize) {
  for (WeightType t : {WeightType::Q8_0, WeightType::Q4_0}) {
    ASSERT_EQ(weight_type_info(t).block_bytes, t == WeightType::Q8_0 ? 34u : 18u);
    for (uint32_t seed = 0; seed < 20; ++seed) {
      std::vector<float> w = test::random_floats(96 + 32 * (seed % 4), seed);
      w[seed % w.size()] *= 40.0f;  // an outlier somewhere
      w[(seed * 7 + 3) % w.size()] = seed % 2 ? 2.5f : -2.5f;
      // The type's own round-to-nearest is groups of one block.
      EXPECT_EQ(rtn(t, w), expected_grouped(t, w, 32)) << weight_type_name(t) << " seed " << seed;
      for (size_t group : {32, 64, 128}) {
        EXPECT_EQ(grouped(t, w, group), expected_grouped(t, w, group))
            << weight_type_name(t) << " group " << group << " seed " << seed;
      }
      // The outlier's scale reaches the other blocks of its group: wider groups change the bytes.
      EXPECT_NE(expected_grouped(t, w, 32), expected_grouped(t, w, 128)) << weight_type_name(t) << " seed " << seed;
    }
  }
}

TEST(QuantGroups, BlocksOfAGroupShareItsScale) {
  const size_t cols = 160;  // groups [0, 128) and [128, 160): a shorter last group
  for (WeightType t : {WeightType::Q8_0, WeightType::Q4_0}) {
    double err32 = 0, err128 = 0;
    for (uint32_t seed = 0; seed < 20; ++seed) {
      std::vector<float> w = test::random_floats(cols, seed + 500);
      w[(seed * 37) % cols] = (seed % 2 ? 3.0f : -3.0f);  // the extreme of its group, either sign
      const std::vector<std::byte> row = grouped(t, w, 128);
      const std::vector<float> v = back(t, row, cols);
      for (size_t g0 = 0; g0 < cols; g0 += 128) {
        const size_t g1 = std::min(cols, g0 + 128);
        float extreme = 0;
        for (size_t i = g0; i < g1; ++i)
          if (std::fabs(w[i]) > std::fabs(extreme)) extreme = w[i];
        const float d = t == WeightType::Q8_0 ? std::fabs(extreme) / 127.0f : extreme / -8.0f;
        for (size_t b = g0 / 32; b < g1 / 32; ++b) EXPECT_EQ(scale_of(t, row, b), f32_to_f16(d)) << "block " << b;
        // w is rounded against d and restored with d as stored (f16): within half a step of d
        // (a full one where Q4_0 clamps +8 to 7), plus |q| times the scale's own rounding.
        const float stored = f16_to_f32(f32_to_f16(d));
        for (size_t i = g0; i < g1; ++i) {
          const float q = std::round(v[i] / stored);
          const bool clamped = t == WeightType::Q4_0 && w[i] / d > 7.5f;
          const float bound = (clamped ? 1.0f : 0.5f) * std::fabs(d) + std::fabs(q) * std::fabs(d - stored);
          EXPECT_LE(std::fabs(w[i] - v[i]), bound * 1.0001f + 1e-7f) << weight_type_name(t) << " " << i;
        }
      }
      const std::vector<float> v32 = back(t, rtn(t, w), cols);
      for (size_t i = 0; i < cols; ++i) {
        err32 += (w[i] - v32[i]) * (w[i] - v32[i]);
        err128 += (w[i] - v[i]) * (w[i] - v[i]);
      }
    }
    // One outlier per 160 weights now sets the scale of four blocks instead of one.
    EXPECT_GT(err128, 1.5 * err32) << weight_type_name(t);
  }
  std::vector<float> w = test::random_floats(64, 1);
  std::vector<std::byte> row(weight_row_bytes(WeightType::Q4_0, 64));
  EXPECT_THROW(quantize_row_grouped(WeightType::Q4_0, w.data(), row.data(), 64, 48), Error);
  EXPECT_THROW(quantize_row_grouped(WeightType::Q4_K, w.data(), row.data(), 64, 128), Error);
  w[5] = std::nanf("");
  EXPECT_THROW(quantize_row_grouped(WeightType::Q4_0, w.data(), row.data(), 64, 64), Error);
}

TEST(QuantSearch, NeverWorseThanRoundToNearest) {
  for (WeightType t : test::quant_types()) {
    double total_rtn = 0, total_search = 0;
    for (uint32_t seed = 0; seed < 100; ++seed) {
      const std::vector<float> w = test::random_floats(256, seed);
      std::vector<float> a = test::random_floats(256, seed + 1000);
      for (size_t i = 0; i < a.size(); ++i) a[i] = i % 37 == 0 ? 0.0f : a[i] * a[i] * 4.0f;  // >= 0, some 0
      const double e_rtn = weighted_row_error(t, w.data(), a.data(), rtn(t, w).data(), 256);
      const double e_search = weighted_row_error(t, w.data(), a.data(), search(t, w, a.data()).data(), 256);
      EXPECT_LE(e_search, e_rtn) << weight_type_name(t) << " seed " << seed;
      total_rtn += e_rtn;
      total_search += e_search;
    }
    std::printf("  %s: weighted error search / rtn = %.3f\n", std::string(weight_type_name(t)).c_str(),
                total_search / total_rtn);
    EXPECT_LT(total_search, 0.9 * total_rtn) << weight_type_name(t);
  }
}

// Importance steers the error: with one channel 1000x as important, the weighted search
// beats the unweighted one under that weighting.
TEST(QuantSearch, ImportanceSteersTheError) {
  double weighted = 0, unweighted = 0;
  for (uint32_t seed = 0; seed < 50; ++seed) {
    const std::vector<float> w = test::random_floats(32, seed + 77);
    std::vector<float> a(32, 1.0f);
    a[seed % 32] = 1000.0f;
    weighted +=
        weighted_row_error(WeightType::Q4_0, w.data(), a.data(), search(WeightType::Q4_0, w, a.data()).data(), 32);
    unweighted += weighted_row_error(WeightType::Q4_0, w.data(), a.data(), search(WeightType::Q4_0, w).data(), 32);
  }
  EXPECT_LT(weighted, 0.5 * unweighted);
}

// The inline rounding is std::lround's, clamped, for every kind of value: ties both ways,
// the floats next to ties, values past 2^23 (all integers), huge, infinite and NaN inputs.
TEST(QuantRounding, RoundToRangeIsClampedLround) {
  const QuantRange r{-127, 127};
  const auto want = [&](float x) {
    if (std::isnan(x)) return r.lo;
    const double c = std::clamp(static_cast<double>(x), -1e9, 1e9);
    return static_cast<int>(std::clamp(std::lround(c), static_cast<long>(r.lo), static_cast<long>(r.hi)));
  };
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           0.5f,
                           -0.5f,
                           1.5f,
                           -1.5f,
                           2.5f,
                           -2.5f,
                           126.5f,
                           -126.5f,
                           127.5f,
                           -127.5f,
                           8388607.5f,
                           8388609.0f,
                           1e30f,
                           -1e30f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::nanf(""),
                           -7.5f,
                           7.5f,
                           -8.5f};
  for (float t : {0.5f, 1.5f, 3.5f, 6.5f, 7.5f, 100.5f}) {
    xs.push_back(std::nextafter(t, 0.0f));
    xs.push_back(std::nextafter(t, 1e9f));
    xs.push_back(-std::nextafter(t, 0.0f));
    xs.push_back(-std::nextafter(t, 1e9f));
  }
  const std::vector<float> noise = test::random_floats(20000, 3);
  for (float v : noise) xs.push_back(v * 200.0f);
  for (float x : xs) {
    EXPECT_EQ(round_to_range(x, r), want(x)) << x;
    EXPECT_EQ(round_to_range(x, QuantRange{-8, 7}), std::clamp(want(x), -8, 7)) << x;
  }
}

// The search's kernel on every ISA this CPU runs is bitwise the scalar reference (integers and
// loss), and its integers are round_to_range's: random blocks at scales from tiny (everything
// clamps) to huge (everything rounds to 0), ties, NaN weights and a zero scale.
TEST(QuantRounding, ScoreAndRefitBlockEveryIsaIsBitwiseTheScalarReference) {
  const std::vector<float> w0 = test::random_floats(32 * 64, 5), a0 = test::random_floats(32 * 64, 6);
  for (Isa isa : all_isas()) {
    if (!isa_supported(isa)) continue;
    const kernels::ScoreBlockFn fn = kernels::table(isa).score_block;
    ASSERT_NE(fn, nullptr) << isa_name(isa);
    for (size_t b = 0; b < 64; ++b) {
      std::vector<float> w(w0.begin() + static_cast<std::ptrdiff_t>(32 * b),
                           w0.begin() + static_cast<std::ptrdiff_t>(32 * b + 32));
      std::vector<float> a(32);
      for (size_t i = 0; i < 32; ++i) a[i] = std::abs(a0[32 * b + i]);
      if (b % 8 == 1) w[3] = std::nanf("");
      if (b % 8 == 2) w[5] = 2.5f, w[6] = -0.5f, w[7] = 7.5f;
      const float d = b % 8 == 3 ? 0.0f : std::ldexp(1.0f, static_cast<int>(b % 24) - 14) * 0.37f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      for (const QuantRange r : {QuantRange{-8, 7}, QuantRange{-127, 127}}) {
        int8_t q_ref[32], q_isa[32];
        const float l_ref = kernels::score_block(w.data(), a.data(), d, id, r.lo, r.hi, q_ref);
        const float l_isa = fn(w.data(), a.data(), d, id, r.lo, r.hi, q_isa);
        if (std::isnan(l_ref)) {
          EXPECT_TRUE(std::isnan(l_isa)) << isa_name(isa) << " block " << b;
        } else {
          EXPECT_EQ(std::memcmp(&l_ref, &l_isa, sizeof(float)), 0)
              << isa_name(isa) << " block " << b << ": " << l_ref << " vs " << l_isa;
        }
        EXPECT_EQ(std::memcmp(q_ref, q_isa, 32), 0) << isa_name(isa) << " block " << b;
        for (size_t i = 0; i < 32; ++i) EXPECT_EQ(q_ref[i], round_to_range(w[i] * id, r)) << b << "," << i;
        // The refit's sums for those integers: bitwise the reference's, which are the exact
        // weighted sums to double rounding.
        double s_ref[2], s_isa[2];
        kernels::refit_block(w.data(), a.data(), q_ref, s_ref);
        kernels::table(isa).refit_block(w.data(), a.data(), q_ref, s_isa);
        double num = 0, den = 0, mag = 0;
        for (size_t i = 0; i < 32; ++i) {
          num += static_cast<double>(a[i]) * w[i] * q_ref[i];
          mag += std::abs(static_cast<double>(a[i]) * w[i] * q_ref[i]);
          den += static_cast<double>(a[i]) * q_ref[i] * q_ref[i];
        }
        for (size_t k = 0; k < 2; ++k) {
          if (std::isnan(s_ref[k])) {
            EXPECT_TRUE(std::isnan(s_isa[k])) << isa_name(isa) << " block " << b;
          } else {
            EXPECT_EQ(std::memcmp(&s_ref[k], &s_isa[k], sizeof(double)), 0)
                << isa_name(isa) << " block " << b << " sum " << k;
          }
        }
        if (!std::isnan(num)) {
          EXPECT_NEAR(s_ref[0], num, 1e-12 * mag) << b;
        }
        EXPECT_NEAR(s_ref[1], den, 1e-12 * den) << b;
      }
    }
  }
}

}  // namespace
}  // namespace nanoinfer
