#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

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
