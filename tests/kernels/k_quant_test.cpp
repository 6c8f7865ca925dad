// The weight types only llama.cpp's files bring: the K-quants (Q4_K, Q5_K, Q6_K: super-blocks
// of 256) and the other 32-blocks (Q4_1, Q5_0, Q5_1), src/base/weight_blocks.h: exact
// dequantization against a decoder written here from the format, the round-to-nearest
// reference quantizer's bound, the packed layout, the products of every ISA (packed and not)
// bitwise equal to the scalar reference for any row split and batch, and within a derived
// bound of a float64 product, and the errors for rows that are not whole super-blocks.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_blocks.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "support/guarded.h"
#include "support/quant_problem.h"
#include "support/random.h"
#include "support/sanitized.h"

namespace nanoinfer::kernels::k_quant_test {
namespace {

using test::describe_difference;
using test::random_floats;
using test::same_bits;
using test::supported_isas;

constexpr double kU = 0x1p-24;  // f32 unit roundoff

double half_value(uint16_t h) {  // IEEE f16, decoded here
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return sign ? -mag : mag;
}
uint16_t u16_at(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}

// One block (a super-block of 256, or a block of 32) decoded from the format's description,
// independently of the library: weight e = scale[e] * quant[e] - offset[e], every factor exact
// in double.
struct Decoded {
  double scale[256], offset[256];
  int quant[256];
};

Decoded decode(WeightType t, const uint8_t* blk) {
  Decoded out{};
  if (t == WeightType::Q4_1 || t == WeightType::Q5_0 || t == WeightType::Q5_1) {
    // d, then m (Q4_1, Q5_1), then a 32-bit qh (Q5 types: bit i is bit 4 of element i), then
    // 16 bytes: byte j holds element j (low nibble) and j + 16 (high).
    const bool has_m = t != WeightType::Q5_0, five = t != WeightType::Q4_1;
    const double d = half_value(u16_at(blk)), m = has_m ? half_value(u16_at(blk + 2)) : 0.0;
    const uint8_t* qh = blk + (has_m ? 4 : 2);
    const uint8_t* qs = qh + (five ? 4 : 0);
    for (int e = 0; e < 32; ++e) {
      const int hi = five ? (qh[e / 8] >> (e % 8)) % 2 : 0;
      const int q = (e < 16 ? qs[e] % 16 : qs[e - 16] / 16) + 16 * hi;
      out.quant[e] = t == WeightType::Q5_0 ? q - 16 : q;
      out.scale[e] = d;
      out.offset[e] = -m;
    }
  } else if (t == WeightType::Q4_K || t == WeightType::Q5_K) {
    // Q5_K: Q4_K with 32 bytes qh after the scales; bit j of qh[l] is bit 4 of element l of
    // sub-block j.
    const bool five = t == WeightType::Q5_K;
    const double d = half_value(u16_at(blk)), dmin = half_value(u16_at(blk + 2));
    const uint8_t* sc = blk + 4;
    const uint8_t* qh = blk + 16;
    const uint8_t* qs = blk + (five ? 48 : 16);
    for (int j = 0; j < 8; ++j) {
      // 6-bit scale and min: sub-blocks 0-3 in bytes 0-7's low bits; 4-7 split over bytes 8-11
      // (low 4 bits) and the top two bits of bytes 0-7.
      const int s = j < 4 ? sc[j] % 64 : sc[j + 4] % 16 + (sc[j - 4] / 64) * 16;
      const int m = j < 4 ? sc[j + 4] % 64 : sc[j + 4] / 16 + (sc[j] / 64) * 16;
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = qs[32 * (j / 2) + l];
        const int e = 32 * j + l;
        out.quant[e] = (j % 2 == 0 ? byte % 16 : byte / 16) + (five ? 16 * ((qh[l] >> j) % 2) : 0);
        out.scale[e] = d * s;
        out.offset[e] = dmin * m;
      }
    }
  } else if (t == WeightType::Q3_K) {
    // hmask[32], qs[64], 12 scale bytes, d. Element e: half h = e / 128 (qs from 32h), shift
    // group k = (e % 128) / 32, l = e % 32: low 2 bits at bit 2k of qs[32h + l], the third at
    // bit 4h + k of hmask[l]; value q - 4. Sub-block s = e / 16 has the 6-bit scale whose low
    // nibble is nibble s / 8 of byte s % 8 and whose top 2 bits are bits 2 (s / 4) of byte
    // 8 + s % 4; factor scale - 32.
    const uint8_t* hm = blk;
    const uint8_t* qs = blk + 32;
    const uint8_t* sc = blk + 96;
    const double d = half_value(u16_at(blk + 108));
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32, s = e / 16;
      const int q = (qs[32 * h + l] >> (2 * k)) % 4 + 4 * ((hm[l] >> (4 * h + k)) % 2);
      const int scale = (s < 8 ? sc[s] % 16 : sc[s - 8] / 16) + 16 * ((sc[8 + s % 4] >> (2 * (s / 4))) % 4);
      out.quant[e] = q - 4;
      out.scale[e] = d * (scale - 32);
      out.offset[e] = 0.0;
    }
  } else {
    const uint8_t* ql = blk;
    const uint8_t* qh = blk + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
    const double d = half_value(u16_at(blk + 208));
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t lbyte = ql[64 * h + 32 * (k % 2) + l];
      const int lo = k < 2 ? lbyte % 16 : lbyte / 16;
      const int hi = (qh[32 * h + l] >> (2 * k)) % 4;
      out.quant[e] = lo + 16 * hi - 32;
      out.scale[e] = d * sc[e / 16];
      out.offset[e] = 0.0;
    }
  }
  return out;
}

// Where a block's f16 fields are (d, and dmin or m).
std::vector<size_t> f16_fields(WeightType t) {
  if (t == WeightType::Q6_K) return {208};
  if (t == WeightType::Q3_K) return {108};
  if (t == WeightType::Q5_0) return {0};
  return {0, 2};
}

// Random blocks with finite scales of every class (zero, subnormal, normal, negative).
std::vector<std::byte> random_k_rows(WeightType t, size_t rows, size_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t bb = weight_type_info(t).block_bytes, n = rows * cols / weight_type_info(t).block_elems;
  std::vector<std::byte> out(n * bb);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  const uint16_t scales[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x2400, 0x2c00, 0x1c00, 0xa800, 0x2e66, 0x3000};
  for (size_t i = 0; i < n; ++i)
    for (size_t at : f16_fields(t)) std::memcpy(out.data() + i * bb + at, &scales[rng() % std::size(scales)], 2);
  return out;
}

std::vector<float> dequantized(WeightType t, const std::vector<std::byte>& rows, size_t n) {
  std::vector<float> out(n, std::nanf(""));
  dequantize_row(t, rows.data(), out.data(), n);
  return out;
}

TEST(KQuantBlocks, DequantizationEqualsTheFormatDecodedIndependently) {
  ASSERT_EQ(test::k_quant_types().size(), 4u);
  ASSERT_EQ(test::file_types().size(), 7u);
  for (WeightType t : test::file_types()) {
    const size_t n = 16 * kSuperBlock, bb = weight_type_info(t).block_bytes, be = weight_type_info(t).block_elems;
    const std::vector<std::byte> rows = random_k_rows(t, 1, n, 3);
    const std::vector<float> got = dequantized(t, rows, n);
    for (size_t sb = 0; sb < n / be; ++sb) {
      const Decoded dec = decode(t, reinterpret_cast<const uint8_t*>(rows.data() + sb * bb));
      for (size_t e = 0; e < be; ++e) {
        // Each weight is one rounding of its exact value (the scale product is exact).
        const double exact = dec.scale[e] * dec.quant[e] - dec.offset[e];
        ASSERT_EQ(got[sb * be + e], static_cast<float>(exact))
            << weight_type_name(t) << " block " << sb << " element " << e;
      }
    }
    EXPECT_TRUE(weight_type_info(t).finite_row(rows.data(), n));
  }
}

TEST(KQuantBlocks, NonFiniteScalesAreFoundAndWeightsRefused) {
  for (WeightType t : test::file_types()) {
    const size_t bb = weight_type_info(t).block_bytes;
    for (size_t at : f16_fields(t)) {
      std::vector<std::byte> rows = random_k_rows(t, 1, 2 * kSuperBlock, 4);
      const uint16_t inf = 0x7c00;
      std::memcpy(rows.data() + bb + at, &inf, 2);
      EXPECT_FALSE(weight_type_info(t).finite_row(rows.data(), 2 * kSuperBlock)) << weight_type_name(t) << " " << at;
    }
    std::vector<float> x = random_floats(kSuperBlock, 5);
    std::vector<std::byte> row(weight_row_bytes(t, kSuperBlock));
    x[100] = std::nanf("");
    EXPECT_THROW(quantize_row(t, x.data(), row.data(), kSuperBlock), Error);
    x[100] = 1e9f;  // a (super-)block scale beyond f16's 65504
    EXPECT_THROW(quantize_row(t, x.data(), row.data(), kSuperBlock), Error);
  }
}

// The round-to-nearest quantizer (src/base/weight_blocks_k.cpp). Q4_K: the 6-bit sub-block
// scale and min are within half a step (d / 2, dmin / 2) of the range's step and offset, so
// an element is off by at most ds / 2 when not clamped, and a clamp costs at most the offset's
// error plus 15 scale errors: |x - back| <= ds / 2 + dmin / 2 + 7.5 d (Q5_K: 31 levels,
// 15.5 d). Q6_K: the extreme maps
// to -32 and a value of the other sign reaching +32 clamps to 31, so |x - back| <= |ds| + 16 d
// (32 scale errors of d / 2 at the extreme). Q3_K: the extreme maps to -4 and a sub-block step
// to a factor within d of it (d / 2 by rounding, d where +32 clamps to 31), so a clamped value
// is off by at most |ds| + 4 d, an unclamped one by |ds| / 2. A relative 1e-5 covers the f32 steps inside.
// Q4_1 / Q5_1 (L = 15 / 31 levels): m is the block's minimum and d its range / L, each rounded to
// f16 (relative 2^-11), so |x - back| <= d / 2 + (L d + |m|) 2^-10. Q5_0: the extreme maps to -16
// (as Q4_0's to -8) and a value of the other sign reaching +16 clamps to 15:
// |x - back| <= |d| (1 + 2^-6).
double block32_bound(WeightType t, const Decoded& dec, size_t e) {
  const double d = std::abs(dec.scale[e]), levels = t == WeightType::Q4_1 ? 15 : 31;
  if (t == WeightType::Q5_0) return d * (1 + 0x1p-6);
  return d / 2 + (levels * d + std::abs(dec.offset[e])) * 0x1p-10;
}

TEST(KQuantBlocks, RoundToNearestQuantizerStaysWithinItsBound) {
  for (WeightType t : test::file_types()) {
    const size_t bb = weight_type_info(t).block_bytes, be = weight_type_info(t).block_elems;
    for (uint32_t seed = 0; seed < 8; ++seed) {
      std::vector<float> x = random_floats(4 * kSuperBlock, seed);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] *= std::ldexp(1.0f, static_cast<int>(seed) - 4) * (i % 97 == 0 ? 8.0f : 1.0f);
      std::vector<std::byte> row(4 * kSuperBlock / be * bb);
      quantize_row(t, x.data(), row.data(), x.size());
      const std::vector<float> back = dequantized(t, row, x.size());
      for (size_t sb = 0; sb < 4 * kSuperBlock / be; ++sb) {
        const auto* blk = reinterpret_cast<const uint8_t*>(row.data() + sb * bb);
        const Decoded dec = decode(t, blk);
        if (be == kQuantBlock) {
          for (size_t e = 0; e < be; ++e)
            ASSERT_LE(std::abs(x[sb * be + e] - back[sb * be + e]), block32_bound(t, dec, e) * (1 + 1e-5) + 1e-12)
                << weight_type_name(t) << " seed " << seed << " element " << sb * be + e;
          continue;
        }
        const bool k_min = t != WeightType::Q6_K && t != WeightType::Q3_K;
        const double d = std::abs(half_value(u16_at(blk + f16_fields(t).front())));
        const double dmin = k_min ? std::abs(half_value(u16_at(blk + 2))) : 0.0;
        const double levels = t == WeightType::Q5_K ? 31 : 15;
        for (size_t e = 0; e < kSuperBlock; ++e) {
          const double ds = std::abs(dec.scale[e]);
          const double bound = k_min ? ds / 2 + dmin / 2 + levels / 2 * d : ds + (t == WeightType::Q3_K ? 4 : 16) * d;
          const double xe = x[sb * kSuperBlock + e];
          ASSERT_LE(std::abs(xe - back[sb * kSuperBlock + e]), bound * (1 + 1e-5) + 1e-12)
              << weight_type_name(t) << " seed " << seed << " element " << sb * kSuperBlock + e;
        }
      }
    }
  }
}

TEST(KQuantBlocks, RowsThatAreNotWholeSuperBlocksAreOneLineErrors) {
  for (WeightType t : test::k_quant_types()) {
    try {
      (void)weight_row_bytes(t, 896);  // Qwen2.5-0.5B's hidden size
      ADD_FAILURE() << weight_type_name(t) << ": 896 columns accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("blocks of 256"), std::string::npos) << what;
      EXPECT_NE(what.find("896"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    const GgmlType g = static_cast<GgmlType>(weight_type_info(t).gguf_type);
    EXPECT_THROW((void)ggml_row_bytes(g, 896), Error);
    EXPECT_EQ(ggml_row_bytes(g, 512), 2 * weight_type_info(t).block_bytes);
  }
}

// ---- the packed layout -----------------------------------------------------------------------

TEST(KQuantPacked, EveryRowUnpacksToItselfAndAPartialGroupIsUntouched) {
  for (WeightType t : test::file_types()) {
    const size_t rows = 2 * kPackRows + 3, cols = 2 * kSuperBlock, rb = weight_row_bytes(t, cols);
    const std::vector<std::byte> raw = random_k_rows(t, rows, cols, 7);
    std::vector<std::byte> packed = raw;
    pack_quantized(t, packed.data(), rows, cols);
    EXPECT_NE(std::memcmp(packed.data(), raw.data(), kPackRows * rb), 0) << weight_type_name(t) << " was not repacked";
    EXPECT_EQ(std::memcmp(packed.data() + 2 * kPackRows * rb, raw.data() + 2 * kPackRows * rb, 3 * rb), 0);
    std::vector<std::byte> scratch(rb);
    for (size_t r = 0; r < rows; ++r) {
      const std::byte* row = packed_row(t, packed.data(), rows, cols, r, scratch.data());
      ASSERT_EQ(std::memcmp(row, raw.data() + r * rb, rb), 0) << weight_type_name(t) << " row " << r;
    }
    // The layout's first bytes as kernels/quant_blocks.h states them: the 16 rows' d.
    for (size_t j = 0; j < kPackRows; ++j) {
      const size_t d_at = f16_fields(t).front();
      EXPECT_EQ(std::memcmp(packed.data() + 2 * j, raw.data() + j * rb + d_at, 2), 0)
          << weight_type_name(t) << " row " << j;
    }
  }
}

// ---- the products ------------------------------------------------------------------------------

struct KProblem {
  WeightType type;
  size_t rows, cols, n;
  std::vector<std::byte> w;
  std::vector<float> x, bias;
};

KProblem k_problem(WeightType t, size_t rows, size_t cols, size_t n, uint32_t seed) {
  KProblem p{t,
             rows,
             cols,
             n,
             random_k_rows(t, rows, cols, seed),
             random_floats(n * cols, seed + 1),
             random_floats(rows, seed + 2)};
  // A few awkward activation blocks: zero, tiny (quantized to zero), huge, a NaN.
  for (size_t i = 0; i < 32 && p.x.size() >= 256; ++i) {
    p.x[i] = 0.0f;
    p.x[32 + i] *= 1e-39f;
    p.x[64 + i] *= 1e20f;
  }
  if (n > 1) p.x[cols + 77] = std::nanf("");
  return p;
}

// y over rows [begin, end) through a table: packed when `packed` (the matrix repacked first).
void k_product(const Kernels& k, const KProblem& p, bool packed, const float* bias, float* y, size_t begin, size_t end,
               size_t n_from = 0, size_t n_count = 0) {
  if (n_count == 0) n_count = p.n;
  QuantizedActivations xq;
  k.quantize_activations(p.x.data() + n_from * p.cols, p.cols, n_count, xq);
  if (packed) {
    std::vector<std::byte> w = p.w;
    pack_quantized(p.type, w.data(), p.rows, p.cols);
    k.matmul_packed_for(p.type)(w.data(), p.rows, bias, xq, y, p.rows, begin, end);
  } else {
    k.matmul_quantized_for(p.type)(p.w.data(), bias, xq, y, p.rows, begin, end);
  }
}

TEST(KQuantMatmul, EveryIsaPackedOrNotIsBitwiseTheScalarReferenceForAnySplitAndBatch) {
  size_t compared = 0;
  for (WeightType t : test::file_types()) {
    // 1: decode; 3, 6: small batches; 21: prefill, in token groups and one group of the rest.
    for (const size_t n : {size_t{1}, size_t{3}, size_t{6}, size_t{21}}) {
      const KProblem p = k_problem(t, 2 * kPackRows + 5, 3 * kSuperBlock, n, static_cast<uint32_t>(10 + n));
      std::vector<float> ref(n * p.rows);
      k_product(scalar_table(), p, false, p.bias.data(), ref.data(), 0, p.rows);
      // The reference itself: one token at a time gives the batch's bits.
      for (size_t tok = 0; tok < n; ++tok) {
        std::vector<float> one(p.rows);
        k_product(scalar_table(), p, false, p.bias.data(), one.data(), 0, p.rows, tok, 1);
        ASSERT_EQ(std::memcmp(one.data(), ref.data() + tok * p.rows, p.rows * sizeof(float)), 0)
            << weight_type_name(t) << " token " << tok << " alone";
      }
      for (Isa isa : supported_isas()) {
        const Kernels& k = table(isa);
        for (const bool packed : {false, true}) {
          if (packed && k.matmul_packed_for(t) == nullptr) continue;
          const std::string what = std::string(isa_name(isa)) + " " + std::string(weight_type_name(t)) +
                                   (packed ? " packed" : "") + " tokens " + std::to_string(n);
          test::Guarded<float> y(n * p.rows, std::nanf(""));
          k_product(k, p, packed, p.bias.data(), y.data(), 0, p.rows);
          EXPECT_TRUE(y.intact()) << what;
          EXPECT_TRUE(same_bits(y.values(), ref)) << what << describe_difference(y.values(), ref, p.rows);
          // The rows split as threads split them, at odd boundaries too.
          test::Guarded<float> parts(n * p.rows, std::nanf(""));
          for (const auto& [b, e] : {std::pair<size_t, size_t>{0, 7}, {7, 16}, {16, 33}, {33, p.rows}})
            k_product(k, p, packed, p.bias.data(), parts.data(), b, e);
          EXPECT_TRUE(parts.intact()) << what;
          EXPECT_TRUE(same_bits(parts.values(), ref))
              << what << " split" << describe_difference(parts.values(), ref, p.rows);
          ++compared;
        }
      }
    }
  }
  EXPECT_GE(compared, test::file_types().size() * 4 * supported_isas().size());
}

// Against float64: the scalar product computes, per activation block b, Q4_K / Q5_K
// dx (ds isum - dm s) and Q6_K (d dx) I with at most 3 roundings each (relative u each), then
// sums the nb terms in order (at most nb - 1 more roundings of partial sums); with
// m_b = |dx| (|ds| sum |q x| + |dm| sum |x|) (Q4_K, Q5_K) or |d dx| sum |sc (q - 32) x| (Q6_K), the
// error is below (nb + 3) u sum_b m_b, to first order; (nb + 4) leaves room for the second.
// Q4_1 / Q5_1 take 4 roundings per block (dx (d isum + m s)) and Q5_0 2, with m_b likewise the
// sum of the terms' magnitudes: (nb + 5) for every type.
TEST(KQuantMatmul, ScalarReferenceIsWithinItsDerivedBoundOfFloat64) {
  for (WeightType t : test::file_types()) {
    const size_t rows = 9, cols = 4 * kSuperBlock, n = 2, nb = cols / kQuantBlock;
    const size_t bb = weight_type_info(t).block_bytes, be = weight_type_info(t).block_elems;
    KProblem p = k_problem(t, rows, cols, n, 21);
    p.x = random_floats(n * cols, 22);  // finite activations: the bound needs them
    QuantizedActivations xq;
    scalar_table().quantize_activations(p.x.data(), cols, n, xq);
    std::vector<float> y(n * rows);
    scalar_table().matmul_quantized_for(t)(p.w.data(), nullptr, xq, y.data(), rows, 0, rows);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t tok = 0; tok < n; ++tok) {
        double exact = 0, magnitude = 0;
        for (size_t sb = 0; sb < cols / be; ++sb) {
          const Decoded dec = decode(t, reinterpret_cast<const uint8_t*>(p.w.data() + (r * cols / be + sb) * bb));
          for (size_t e = 0; e < be; ++e) {
            const size_t c = sb * be + e, b = c / kQuantBlock;
            const double dx = xq.d[b * xq.tokens + tok], q = xq.q[tok * cols + c];
            exact += (dec.scale[e] * dec.quant[e] - dec.offset[e]) * dx * q;
            magnitude += std::abs(dx) * (std::abs(dec.scale[e] * dec.quant[e] * q) + std::abs(dec.offset[e] * q));
          }
        }
        const double bound = static_cast<double>(nb + 5) * kU * magnitude;
        EXPECT_LE(std::abs(y[tok * rows + r] - exact), bound)
            << weight_type_name(t) << " row " << r << " token " << tok << ": " << y[tok * rows + r] << " vs " << exact;
      }
    }
  }
}

}  // namespace
}  // namespace nanoinfer::kernels::k_quant_test
