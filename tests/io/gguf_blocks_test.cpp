// Dequantization of every ggml block type we read, on crafted blocks whose values are worked
// out by hand from the layout description, plus whole-block checks that restate each format
// element by element (a different indexing from the reference's loops) and compare bitwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "io/gguf_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

template <class Block>
std::vector<std::byte> bytes_of(const std::vector<Block>& blocks) {
  std::vector<std::byte> out(blocks.size() * sizeof(Block));
  std::memcpy(out.data(), blocks.data(), out.size());
  return out;
}

// Dequantizes `blocks` from an odd address too (the references must not assume alignment) and
// checks both agree bitwise; returns the floats.
template <class Block>
std::vector<float> dequant(GgmlType type, const std::vector<Block>& blocks) {
  const auto bytes = bytes_of(blocks);
  const size_t n = blocks.size() * ggml_type_info(type).block_elems;
  std::vector<float> out(n), shifted(n);
  dequantize_row(type, bytes.data(), out.data(), n);
  std::vector<std::byte> odd(bytes.size() + 1);
  std::memcpy(odd.data() + 1, bytes.data(), bytes.size());
  dequantize_row(type, odd.data() + 1, shifted.data(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(shifted[i])) << i;
  return out;
}

void expect_bitwise(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << "element " << i << ": got " << got[i] << ", want " << want[i];
}

constexpr uint16_t kF16One = 0x3C00, kF16Half = 0x3800, kF16Quarter = 0x3400, kF16Two = 0x4000;
constexpr uint16_t kF16MinusOne = 0xBC00, kF16Three = 0x4200;
constexpr uint16_t kF16Third = 0x3555;  // 0.333251953125: products with it round

TEST(GgmlTypes, IdsAndBlockGeometry) {
  struct Row {
    uint32_t id;
    std::string_view name;
    uint32_t elems, bytes;
  };
  for (const Row& r : std::vector<Row>{{0, "F32", 1, 4},
                                       {1, "F16", 1, 2},
                                       {2, "Q4_0", 32, 18},
                                       {3, "Q4_1", 32, 20},
                                       {6, "Q5_0", 32, 22},
                                       {7, "Q5_1", 32, 24},
                                       {8, "Q8_0", 32, 34},
                                       {11, "Q3_K", 256, 110},
                                       {12, "Q4_K", 256, 144},
                                       {13, "Q5_K", 256, 176},
                                       {14, "Q6_K", 256, 210},
                                       {30, "BF16", 1, 2}}) {
    const auto info = ggml_type_info(r.id);
    ASSERT_TRUE(info.has_value()) << r.id;
    EXPECT_EQ(info->name, r.name);
    EXPECT_EQ(info->block_elems, r.elems) << r.name;
    EXPECT_EQ(info->block_bytes, r.bytes) << r.name;
  }
  for (uint32_t unsupported : {4u, 5u, 9u, 10u, 15u, 16u, 24u, 28u, 29u, 31u, 39u, 40u, 1000u})
    EXPECT_FALSE(ggml_type_info(unsupported).has_value()) << unsupported;
  EXPECT_EQ(ggml_type_name(10), "Q2_K");
  EXPECT_EQ(ggml_type_name(23), "IQ4_XS");
  EXPECT_EQ(ggml_type_name(4), "?");
  EXPECT_EQ(ggml_row_bytes(ggml_type_of(WeightType::Q4_K), 512), 288u);
  EXPECT_EQ(ggml_row_bytes(ggml_type_of(WeightType::Q8_0), 896), 952u);
  EXPECT_THROW(ggml_row_bytes(ggml_type_of(WeightType::Q5_0), 48), Error);
  std::vector<float> out(64);
  EXPECT_THROW(dequantize_row(ggml_type_of(WeightType::Q4_0), nullptr, out.data(), 31), Error);
}

TEST(GgmlDequant, FloatTypesExact) {
  const uint16_t f16[] = {kF16One, 0xC000, 0x7C00, 0x0001, 0x7BFF, 0x8000};
  std::vector<float> out(6);
  dequantize_row(GgmlType::F16, reinterpret_cast<const std::byte*>(f16), out.data(), 6);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, INFINITY, std::ldexp(1.0f, -24), 65504.0f, -0.0f}));
  EXPECT_TRUE(std::signbit(out[5]));

  const uint16_t bf16[] = {0x3F80, 0xC0A0, 0x0001};
  dequantize_row(ggml_type_of(WeightType::BF16), reinterpret_cast<const std::byte*>(bf16), out.data(), 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -5.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(out[2]), 0x00010000u);

  const uint32_t f32[] = {0x7FC12345u, 0x80000000u, 0x3F800001u};  // a NaN payload survives
  dequantize_row(ggml_type_of(WeightType::F32), reinterpret_cast<const std::byte*>(f32), out.data(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), f32[i]);
}

TEST(GgmlDequant, Q8_0) {
  BlockQ8_0 b{};
  b.d = kF16Half;
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(i * 9 - 140);  // -140 wraps to 116
  b.qs[0] = -128, b.qs[1] = 127, b.qs[2] = 3;
  BlockQ8_0 c = b;
  c.d = kF16Third;
  const auto y = dequant(ggml_type_of(WeightType::Q8_0), std::vector{b, c});
  EXPECT_EQ(y[0], -64.0f);
  EXPECT_EQ(y[1], 63.5f);
  EXPECT_EQ(y[2], 1.5f);
  EXPECT_EQ(y[31], 0.5f * static_cast<int8_t>(31 * 9 - 140));
  std::vector<float> want;
  for (const auto& blk : {b, c})
    for (int i = 0; i < 32; ++i) want.push_back(static_cast<float>(blk.qs[i]) * f16_to_f32(blk.d));
  expect_bitwise(y, want);
}

TEST(GgmlDequant, Q4_0) {
  BlockQ4_0 b{};
  b.d = kF16Two;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto y = dequant(ggml_type_of(WeightType::Q4_0), std::vector{b});
  // Low nibbles are elements 0..15, high nibbles 16..31; value = d * (q - 8).
  EXPECT_EQ(y[0], -16.0f);   // q = 0
  EXPECT_EQ(y[8], 0.0f);     // q = 8
  EXPECT_EQ(y[15], 14.0f);   // q = 15
  EXPECT_EQ(y[16], 14.0f);   // high nibble of byte 0: 15
  EXPECT_EQ(y[31], -16.0f);  // high nibble of byte 15: 0
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * static_cast<float>(j - 8));
    EXPECT_EQ(y[16 + j], 2.0f * static_cast<float>(7 - j));
  }
}

TEST(GgmlDequant, Q4_1) {
  BlockQ4_1 b{};
  b.d = kF16Quarter;
  b.m = kF16MinusOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto y = dequant(ggml_type_of(WeightType::Q4_1), std::vector{b});
  EXPECT_EQ(y[0], -1.0f);   // 0 * 0.25 - 1
  EXPECT_EQ(y[15], 2.75f);  // 15 * 0.25 - 1
  EXPECT_EQ(y[16], 2.75f);
  EXPECT_EQ(y[20], 1.75f);  // high nibble of byte 4: 11
  EXPECT_EQ(y[31], -1.0f);
}

TEST(GgmlDequant, Q5_0AndQ5_1) {
  // qh = 0x00FF5555: bit j set for even j < 16 (elements 0, 2, ..., 14) and for j = 16..23
  // (elements 16..23): those elements gain 16.
  BlockQ5_0 b{};
  b.d = kF16One;
  const uint8_t qh[4] = {0x55, 0x55, 0xFF, 0x00};
  std::memcpy(b.qh, qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | j << 4);
  const auto y = dequant(ggml_type_of(WeightType::Q5_0), std::vector{b});
  EXPECT_EQ(y[0], 0.0f);    // 0 + 16 - 16
  EXPECT_EQ(y[1], -15.0f);  // 1 - 16
  EXPECT_EQ(y[14], 14.0f);  // 14 + 16 - 16
  EXPECT_EQ(y[15], -1.0f);  // 15 - 16
  EXPECT_EQ(y[16], 0.0f);   // high nibble 0, fifth bit set
  EXPECT_EQ(y[23], 7.0f);
  EXPECT_EQ(y[24], -8.0f);  // 8 - 16
  EXPECT_EQ(y[31], -1.0f);

  BlockQ5_1 c{};
  c.d = kF16Half;
  c.m = kF16Three;
  std::memcpy(c.qh, qh, 4);
  std::memcpy(c.qs, b.qs, 16);
  const auto z = dequant(ggml_type_of(WeightType::Q5_1), std::vector{c});
  EXPECT_EQ(z[0], 11.0f);   // 16 * 0.5 + 3
  EXPECT_EQ(z[1], 3.5f);    // 1 * 0.5 + 3
  EXPECT_EQ(z[14], 18.0f);  // 30 * 0.5 + 3
  EXPECT_EQ(z[23], 14.5f);  // 23 * 0.5 + 3
  EXPECT_EQ(z[31], 10.5f);  // 15 * 0.5 + 3
}

// Scales {1, 2, 3, 63, 17, 33, 48, 5} and mins {0, 4, 62, 7, 40, 1, 20, 63}, packed by hand.
constexpr uint8_t kKScales[12] = {0x41, 0x82, 0xC3, 0x3F, 0x80, 0x04, 0x7E, 0xC7, 0x81, 0x11, 0x40, 0xF5};
constexpr uint8_t kSc[8] = {1, 2, 3, 63, 17, 33, 48, 5};
constexpr uint8_t kMin[8] = {0, 4, 62, 7, 40, 1, 20, 63};

TEST(GgmlDequant, KScaleMinUnpacksHandPackedBytes) {
  for (int j = 0; j < 8; ++j) {
    const ScaleMin sm = k_scale_min(kKScales, j);
    EXPECT_EQ(sm.scale, kSc[j]) << j;
    EXPECT_EQ(sm.min, kMin[j]) << j;
  }
}

TEST(GgmlDequant, Q4_K) {
  BlockQ4_K b{};
  b.d = kF16One;
  b.dmin = kF16Half;
  std::memcpy(b.scales, kKScales, 12);
  for (int k = 0; k < 128; ++k) b.qs[k] = static_cast<uint8_t>((k % 16) | (15 - k % 16) << 4);
  BlockQ4_K c = b;
  c.d = kF16Third;
  c.dmin = kF16Third;
  const auto y = dequant(ggml_type_of(WeightType::Q4_K), std::vector{b, c});
  EXPECT_EQ(y[0], 0.0f);      // sub-block 0: 1 * 0 - 0.5 * 0
  EXPECT_EQ(y[5], 5.0f);      // 1 * 5
  EXPECT_EQ(y[32], 28.0f);    // sub-block 1 (high nibbles of bytes 0..31): 2 * 15 - 0.5 * 4
  EXPECT_EQ(y[67], -22.0f);   // sub-block 2, byte 35 low nibble 3: 3 * 3 - 0.5 * 62
  EXPECT_EQ(y[138], 150.0f);  // sub-block 4, byte 74 low nibble 10: 17 * 10 - 0.5 * 40
  EXPECT_EQ(y[255], -31.5f);  // sub-block 7, byte 127 high nibble 0: 0 - 0.5 * 63

  // Element e: sub-block j = e / 32 (scale kSc[j], min kMin[j]); byte 32 * (j / 2) + e % 32,
  // low nibble for even j, high for odd; x = (d * sc) * q - (dmin * m).
  std::vector<float> want;
  for (const auto& blk : {b, c}) {
    const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
    for (int e = 0; e < 256; ++e) {
      const int j = e / 32;
      const uint8_t byte = blk.qs[32 * (j / 2) + e % 32];
      const int q = j % 2 == 0 ? byte & 0x0F : byte >> 4;
      want.push_back(d * static_cast<float>(kSc[j]) * static_cast<float>(q) - dmin * static_cast<float>(kMin[j]));
    }
  }
  expect_bitwise(y, want);
}

TEST(GgmlDequant, Q5_K) {
  BlockQ5_K b{};
  b.d = kF16One;
  b.dmin = kF16Half;
  std::memcpy(b.scales, kKScales, 12);
  for (int k = 0; k < 128; ++k) b.qs[k] = static_cast<uint8_t>((k % 16) | (15 - k % 16) << 4);
  for (int l = 0; l < 32; ++l) b.qh[l] = static_cast<uint8_t>(l * 37);
  BlockQ5_K c = b;
  c.d = kF16Third;
  const auto y = dequant(ggml_type_of(WeightType::Q5_K), std::vector{b, c});
  // Element 35: sub-block 1, l = 3: high nibble of byte 3 = 12, qh[3] = 111 = 0b1101111,
  // bit 1 set -> q = 28; 2 * 28 - 0.5 * 4.
  EXPECT_EQ(y[35], 54.0f);
  // Element 0: qh[0] = 0 -> q = 0.
  EXPECT_EQ(y[0], 0.0f);
  // Element 225: sub-block 7, l = 1: high nibble of byte 97 = 14, qh[1] = 37 = 0b00100101,
  // bit 7 clear -> q = 14; 5 * 14 - 0.5 * 63.
  EXPECT_EQ(y[225], 38.5f);

  std::vector<float> want;
  for (const auto& blk : {b, c}) {
    const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
    for (int e = 0; e < 256; ++e) {
      const int j = e / 32, l = e % 32;
      const uint8_t byte = blk.qs[32 * (j / 2) + l];
      const int q = (j % 2 == 0 ? byte & 0x0F : byte >> 4) + 16 * ((blk.qh[l] >> j) & 1);
      want.push_back(d * static_cast<float>(kSc[j]) * static_cast<float>(q) - dmin * static_cast<float>(kMin[j]));
    }
  }
  expect_bitwise(y, want);
}

TEST(GgmlDequant, Q6_K) {
  BlockQ6_K b{};
  b.d = kF16Half;
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<int8_t>(i % 2 ? -(i + 1) : i + 1);
  for (int k = 0; k < 128; ++k) b.ql[k] = static_cast<uint8_t>(k);
  for (int k = 0; k < 64; ++k) b.qh[k] = static_cast<uint8_t>(k * 7);
  BlockQ6_K c = b;
  c.d = kF16Third;
  c.scales[3] = -128;
  const auto y = dequant(ggml_type_of(WeightType::Q6_K), std::vector{b, c});
  // Element 0: ql[0] = 0, qh[0] = 0 -> q = 0; (0.5 * 1) * (0 - 32).
  EXPECT_EQ(y[0], -16.0f);
  // Element 200: second half, r = 72: quarter 2 (high nibble of ql[64 + 8] = 72 -> 4), bits 4-5
  // of qh[32 + 8] = 280 & 255 = 24 -> 1, q = 20; scale 12 is 13: (0.5 * 13) * (20 - 32).
  EXPECT_EQ(y[200], -78.0f);
  // Element 255: quarter 3 of the second half, l = 31: high nibble of ql[127] = 7, bits 6-7 of
  // qh[63] = 441 & 255 = 185 -> 2, q = 39; scale 15 is -16: (0.5 * -16) * (39 - 32).
  EXPECT_EQ(y[255], -56.0f);

  // Element e: half h = e / 128, r = e % 128, quarter k = r / 32, l = r % 32. The low 4 bits
  // are the low (k = 0, 1) or high (k = 2, 3) nibble of ql[64h + l + 32 (k odd)]; the top 2
  // bits are bits 2k..2k+1 of qh[32h + l]; x = (d * scales[e / 16]) * (q - 32).
  std::vector<float> want;
  for (const auto& blk : {b, c}) {
    const float d = f16_to_f32(blk.d);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
      const uint8_t byte = blk.ql[64 * h + l + (k % 2 == 1 ? 32 : 0)];
      const int low = k < 2 ? byte & 0x0F : byte >> 4;
      const int q = low | ((blk.qh[32 * h + l] >> (2 * k)) & 3) << 4;
      want.push_back(d * static_cast<float>(blk.scales[e / 16]) * static_cast<float>(q - 32));
    }
  }
  expect_bitwise(y, want);
}

}  // namespace
}  // namespace nanoinfer
