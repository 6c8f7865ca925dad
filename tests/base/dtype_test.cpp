#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "nanoinfer/dtype.h"

namespace nanoinfer {
namespace {

// Widening is a 16-bit shift: check it for all 65,536 patterns, and that narrowing the
// widened value gives the same pattern back (NaNs keep their NaN-ness, not their payload).
TEST(DType, Bf16WidenIsExactForAllPatterns) {
  int checked = 0;
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(std::bit_cast<uint32_t>(f), h << 16) << "pattern " << h;
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
    } else {
      ASSERT_EQ(f32_to_bf16(f), h) << "round trip of pattern " << h;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 65536);
}

TEST(DType, F32ToBf16RoundsHalfToEven) {
  // 1.0 = 0x3f800000. Halfway above it (low half 0x8000) ties to the even pattern 0x3f80;
  // halfway above 0x3f81 ties up to the even 0x3f82; just past halfway rounds up.
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f807fffu)), 0x3f80);
  // Largest finite values round to infinity only past the halfway point, as IEEE does.
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
}

TEST(DType, F16WidenMatchesDefinition) {
  // Check every f16 pattern against the formula value = (-1)^s * 2^(e-15) * (1 + m/1024).
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint32_t s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    if (e == 0x1f) {
      ASSERT_TRUE(m ? std::isnan(got) : std::isinf(got)) << h;
      continue;
    }
    double want = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(1.0 + m / 1024.0, int(e) - 15);
    if (s) want = -want;
    ASSERT_EQ(double(got), want) << "pattern " << h;
    ASSERT_EQ(std::signbit(got), s != 0) << "pattern " << h;
  }
}

// The many-at-a-time narrowing is bitwise the scalar one: patterns spread over all 2^32 and
// every pattern within 40 of each boundary the conversion has (subnormal halves, the rounding
// carry into the next exponent, overflow, infinity, NaN), both signs, in runs whose lengths leave
// a scalar tail; with `saturate`, finite values past 65504 give +-65504 and nothing else moves.
TEST(DType, F32ToF16ManyIsBitwiseTheScalarConversion) {
  std::vector<uint32_t> patterns;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 65521) patterns.push_back(static_cast<uint32_t>(u));
  for (const uint32_t edge : {0x00000000u, 0x33000000u, 0x33800000u, 0x387fe000u, 0x38800000u, 0x3f800000u, 0x477fe000u,
                              0x477ff000u, 0x47800000u, 0x7f7fffffu, 0x7f800000u, 0x7fc00000u}) {
    for (uint32_t d = 0; d <= 80; ++d) {
      const uint32_t u = edge - 40 + d;
      patterns.push_back(u);
      patterns.push_back(u | 0x80000000u);
    }
  }
  std::vector<float> in(patterns.size());
  for (size_t i = 0; i < patterns.size(); ++i) in[i] = std::bit_cast<float>(patterns[i]);
  size_t saturated = 0;
  for (const size_t run : {size_t{1}, size_t{7}, size_t{8}, size_t{13}, in.size()}) {
    std::vector<uint16_t> plain(in.size()), sat(in.size());
    for (size_t at = 0; at < in.size(); at += run) {
      const size_t n = std::min(run, in.size() - at);
      f32_to_f16_n(in.data() + at, plain.data() + at, n);
      f32_to_f16_n(in.data() + at, sat.data() + at, n, /*saturate=*/true);
    }
    for (size_t i = 0; i < in.size(); ++i) {
      const uint16_t want = f32_to_f16(in[i]);
      ASSERT_EQ(plain[i], want) << "pattern " << std::hex << patterns[i] << " run " << std::dec << run;
      const bool past = std::isfinite(in[i]) && (want & 0x7fffu) == 0x7c00u;
      const uint16_t want_sat = past ? static_cast<uint16_t>((want & 0x8000u) | 0x7bffu) : want;
      ASSERT_EQ(sat[i], want_sat) << "pattern " << std::hex << patterns[i] << " run " << std::dec << run;
      saturated += past ? 1 : 0;
    }
  }
  EXPECT_GT(saturated, 0u);
}

TEST(DType, NamesRoundTrip) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::U8, DType::I32}) {
    auto back = dtype_from_name(dtype_name(t));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, t);
  }
  EXPECT_FALSE(dtype_from_name("F64").has_value());
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::I32), 4u);
}

}  // namespace
}  // namespace nanoinfer
