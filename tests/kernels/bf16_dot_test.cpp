// The avx512-bf16 tier's bf16 product (kernels/kernels_avx512_bf16.cpp) and its scalar
// emulation (kernels/scalar_bf16_dot.cpp). The emulation is checked on its own everywhere:
// hand-computed lanes that tell the manual's rule from the plausible alternatives (other
// product order, one rounding for both products, no DAZ/FTZ, another lane tree), and the
// exact product within the rounding bound. Where the CPU has AVX512-BF16 the kernel must equal
// it bitwise on the same lanes, on model shapes, tails, row splits and batch sizes, and on
// arbitrary bit patterns.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "nanoinfer/dtype.h"
#include "support/checks.h"
#include "support/guarded.h"
#include "support/random.h"

namespace nanoinfer::kernels {
namespace {

using test::random_floats;

bool kernel_here() {
  return isa_supported(Isa::Avx512Bf16);
}
#define SKIP_WITHOUT_BF16_KERNEL()                                                          \
  if (!kernel_here())                                                                       \
  GTEST_SKIP() << "this CPU/OS lacks avx512-bf16 (missing " << isa_missing(Isa::Avx512Bf16) \
               << "): the kernel cannot run here; the emulation is checked by the other tests"

MatmulFn kernel() {
  return table(Isa::Avx512Bf16).matmul_for(WeightType::BF16);
}

std::vector<float> run(MatmulFn fn, const std::vector<uint16_t>& w, const float* bias, const std::vector<float>& x,
                       size_t rows, size_t cols, size_t n_tokens) {
  test::Guarded<float> y(n_tokens * rows, std::nanf(""));
  fn(reinterpret_cast<const std::byte*>(w.data()), bias, x.data(), y.data(), rows, cols, n_tokens, 0, rows);
  EXPECT_TRUE(y.intact()) << rows << "x" << cols << " tokens " << n_tokens;
  return y.values();
}

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}
uint16_t bf16(float f) {
  const uint16_t h = f32_to_bf16(f);
  EXPECT_EQ(bf16_to_f32(h), f) << f << " is not a bf16 value";
  return h;
}

TEST(Bf16Dot, ActivationRoundingIsNearestEvenWithSubnormalsFlushed) {
  const struct {
    uint32_t in;
    uint16_t out;
  } cases[] = {
      {0x3f800000, 0x3f80}, {0x3f808000, 0x3f80},  // a tie goes to the even neighbour...
      {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81},  // ...whichever way that is; above a tie rounds up
      {0x3f80ffff, 0x3f81}, {0xbf80ffff, 0xbf81}, {0x00800000, 0x0080},  // the smallest normal stays
      {0x007fffff, 0x0000},                        // a subnormal becomes zero (nearest even would be 0x0080)
      {0x807fffff, 0x8000}, {0x80000000, 0x8000},  // of its sign
      {0x7f7fffff, 0x7f80},                        // rounds up to infinity
      {0xff800000, 0xff80}, {0x7f800001, 0x7fc0},  // infinities stay, NaN is quietened
      {0xffc12345, 0xffc1},
  };
  for (const auto& c : cases) EXPECT_EQ(round_activation_bf16(std::bit_cast<float>(c.in)), c.out) << std::hex << c.in;
  // Normal values: the same as nanoinfer's own narrowing (dtype.h), written separately.
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t u = rng();
    const float f = std::bit_cast<float>(u);
    if (std::fpclassify(f) != FP_NORMAL) continue;
    ASSERT_EQ(round_activation_bf16(f), f32_to_bf16(f)) << std::hex << u;
  }
}

// One output element whose 16 lanes are laid out by hand: lane j of chunk k sums columns
// 32k + 2j + 1 (first) and 32k + 2j. Each case's expected value follows from the rule in
// scalar_bf16_dot.cpp and differs from what the named alternative gives.
struct LaneCase {
  const char* rule;
  size_t cols;
  std::vector<std::pair<size_t, std::pair<float, float>>> terms;  // column -> (w, x)
  float bias;
  bool with_bias;
  float expected;
  uint32_t x_bits_override = 0, x_override_col = ~0u;  // an activation given as raw bits
};

std::vector<LaneCase> lane_cases() {
  const float e24 = std::ldexp(1.0f, -24);
  return {
      // Chunk 0 lane 0 leaves 1; chunk 1 lane 0 adds col 33 (-1) then col 32 (2^-24):
      // 1 - 1 = 0, + 2^-24. Even column first: 1 + 2^-24 rounds to 1, - 1 = 0.
      {"the odd column of a pair first", 34, {{1, {1, 1}}, {33, {-1, 1}}, {32, {e24, 1}}}, 0, false, e24},
      // 1 + 2^-24 is a tie and rounds to 1, twice. Both products in one rounding: 1 + 2^-23.
      {"one rounding per product", 34, {{1, {1, 1}}, {33, {e24, 1}}, {32, {e24, 1}}}, 0, false, 1.0f},
      // 2^-133 is a subnormal bf16 weight: read as zero. Without DAZ: 2^-33.
      {"subnormal weights are zero", 2, {{1, {std::ldexp(1.0f, -133), std::ldexp(1.0f, 100)}}}, 0, false, 0.0f},
      // 2^-100 * 2^-30 = 2^-130 is a subnormal result: flushed. Without FTZ: 2^-130 survives
      // the lane tree (ordinary adds of zeros).
      {"subnormal results are flushed", 2, {{1, {std::ldexp(1.0f, -100), std::ldexp(1.0f, -30)}}}, 0, false, 0.0f},
      // The largest subnormal activation rounds to zero, not to 2^-126 (which times 2^100
      // would give 2^-26).
      {"subnormal activations round to zero", 2, {{1, {std::ldexp(1.0f, 100), 0}}}, 0, false, 0.0f, 0x007fffff, 1},
      // Lanes 0, 4, 12 hold 1, 2^-24, 2^-24: the tree adds 4 + 12 first (2^-23), then to 1:
      // 1 + 2^-23. Lanes in order would give 1 (two ties to even).
      {"the lane tree", 32, {{1, {1, 1}}, {9, {e24, 1}}, {25, {e24, 1}}}, 0, false, 1.0f + 2 * e24},
      // The bias is added to the finished sum: 1 + 2^-23. Into the chain first: 1.
      {"the bias last", 32, {{1, {e24, 1}}, {3, {e24, 1}}}, 1.0f, true, 1.0f + 2 * e24},
      // Padding: 37 columns, the tail chunk's lane 2 holds col 36 only; cols 37.. are zeros.
      {"the tail", 37, {{36, {3, 5}}, {0, {1, 1}}}, 0, false, 16.0f},
  };
}

TEST(Bf16Dot, HandComputedLanesFollowTheManual) {
  for (const bool on_kernel : {false, true}) {
    if (on_kernel && !kernel_here()) {
      std::printf("  avx512-bf16 missing here (%s): lanes checked on the emulation only\n",
                  isa_missing(Isa::Avx512Bf16).c_str());
      continue;
    }
    for (const LaneCase& c : lane_cases()) {
      std::vector<uint16_t> w(c.cols, 0);
      std::vector<float> x(c.cols, 0.0f);
      for (const auto& [col, wx] : c.terms) {
        w[col] = bf16(wx.first);  // 2^-133 is the bf16 subnormal 0x0001
        x[col] = wx.second;
      }
      if (c.x_override_col < c.cols) x[c.x_override_col] = std::bit_cast<float>(c.x_bits_override);
      const std::vector<float> y =
          run(on_kernel ? kernel() : matmul_bf16_dot, w, c.with_bias ? &c.bias : nullptr, x, 1, c.cols, 1);
      EXPECT_EQ(bits(y[0]), bits(c.expected))
          << (on_kernel ? "kernel: " : "emulation: ") << c.rule << ": got " << y[0] << ", expected " << c.expected;
    }
  }
}

// Against the exact product: with the activations rounded by the test itself (dtype.h's
// narrowing; the inputs are normal), only the chain's roundings remain, m = 2 per 32 columns
// + 4 + 1, so |y - exact| <= (m + 1) u sum|w x| -- tight enough that a dropped column fails
// (checked). Against the unrounded activations, 2^-8 sum|w x| more (half an ulp at 8 significant bits).
TEST(Bf16Dot, EmulationIsWithinTheRoundingBoundOfTheExactProduct) {
  for (size_t cols : {1, 2, 31, 32, 33, 100, 896, 4864}) {
    const size_t rows = 64, tokens = 2;
    const std::vector<float> wf = random_floats(rows * cols, static_cast<uint32_t>(cols)),
                             x = random_floats(tokens * cols, static_cast<uint32_t>(cols + 1)),
                             bias = random_floats(rows, 3);
    std::vector<uint16_t> w(wf.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
    const std::vector<float> y = run(matmul_bf16_dot, w, bias.data(), x, rows, cols, tokens);
    const double m = 2.0 * static_cast<double>((cols + 31) / 32) + 5, g = (m + 1) * 0x1p-24;
    int caught = 0;
    for (size_t t = 0; t < tokens; ++t) {
      for (size_t r = 0; r < rows; ++r) {
        double exact_rounded = bias[r], exact = bias[r], mag = std::abs(bias[r]), mag_rounded = mag;
        for (size_t c = 0; c < cols; ++c) {
          const double wv = bf16_to_f32(w[r * cols + c]), xv = x[t * cols + c];
          const double xr = bf16_to_f32(f32_to_bf16(x[t * cols + c]));
          exact += wv * xv;
          mag += std::abs(wv * xv);
          exact_rounded += wv * xr;
          mag_rounded += std::abs(wv * xr);
        }
        const double got = y[t * rows + r];
        ASSERT_LE(std::abs(got - exact_rounded), g * mag_rounded) << cols << " cols [" << t << "][" << r << "]";
        ASSERT_LE(std::abs(got - exact), (0x1p-8 + g * (1 + 0x1p-8)) * mag)
            << cols << " cols [" << t << "][" << r << "]";
        const double last = bf16_to_f32(w[r * cols + cols - 1]) * bf16_to_f32(f32_to_bf16(x[t * cols + cols - 1]));
        caught += std::abs(last) > g * mag_rounded;
      }
    }
    if (cols == 4864) {
      EXPECT_GE(caught, 110) << "the bound misses a dropped column in too many of 128 outputs";
    }
  }
}

TEST(Bf16Dot, KernelEqualsTheEmulationBitwiseOnShapesAndBatches) {
  SKIP_WITHOUT_BF16_KERNEL();
  struct Case {
    size_t rows, cols;
    std::vector<size_t> tokens;
  };
  const std::vector<size_t> many = {1, 2, 3, 5, 6, 7, 12, 13, 64, 65, 70};
  // Tails of every kind, the model's widths (896, 4864) and head-sized 64/128 columns; rows
  // that are not multiples of the 4-row or 16-row tiles; rows wide enough for the prefill's
  // column passes (over 2,048: 4864 in passes of 1,216, 2,500 with a last pass of 68 columns
  // ending in a 4-column tail); prompts past one token block (128 tokens at <= 2,048 columns,
  // 64 above).
  const Case cases[] = {
      {1, 1, many},       {3, 2, many},        {5, 31, many},       {17, 32, many},         {19, 33, many},
      {33, 37, many},     {16, 64, many},      {50, 128, many},     {35, 896, many},        {21, 4864, {1, 2, 7, 65}},
      {896, 896, {1, 9}}, {4864, 896, {1, 3}}, {896, 4864, {1, 2}}, {19, 2500, {2, 7, 65}}, {24, 96, {131}},
      {2, 0, {1, 3}}};
  int compared = 0;
  for (const Case& c : cases) {
    for (size_t tokens : c.tokens) {
      const uint32_t seed = static_cast<uint32_t>(c.rows * 31 + c.cols * 7 + tokens);
      const std::vector<float> wf = random_floats(c.rows * c.cols, seed), x = random_floats(tokens * c.cols, seed + 1),
                               bias = random_floats(c.rows, seed + 2);
      std::vector<uint16_t> w(wf.size());
      for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
      for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
        const auto ref = run(matmul_bf16_dot, w, b, x, c.rows, c.cols, tokens);
        EXPECT_TRUE(test::same_bits(run(kernel(), w, b, x, c.rows, c.cols, tokens), ref))
            << c.rows << "x" << c.cols << " tokens " << tokens << (b ? " bias" : " no bias");
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 2 * (9 * 11 + 4 + 2 + 2 + 2 + 3 + 1 + 2));
}

// Prefill strips ask for the next strip's weights a line per step of each tile's loop and the
// rest after it: few token tiles on rows of up to 2,048 columns leave each tile more lines than
// steps (17 tokens: 6 tiles, 64 steps, ~85 lines each). Asking changes no result.
TEST(Bf16Dot, KernelWithMoreLinesToAskForThanStepsIsBitwiseTheEmulation) {
  SKIP_WITHOUT_BF16_KERNEL();
  int compared = 0;
  for (size_t cols : {size_t{2048}, size_t{2047}}) {
    for (size_t tokens : {size_t{17}, size_t{20}}) {
      const size_t rows = 27;  // three full strips and a 3-row one
      const uint32_t seed = static_cast<uint32_t>(cols + tokens);
      const std::vector<float> wf = random_floats(rows * cols, seed), x = random_floats(tokens * cols, seed + 1);
      std::vector<uint16_t> w(wf.size());
      for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
      EXPECT_TRUE(test::same_bits(run(kernel(), w, nullptr, x, rows, cols, tokens),
                                  run(matmul_bf16_dot, w, nullptr, x, rows, cols, tokens)))
          << cols << " columns, " << tokens << " tokens";
      ++compared;
    }
  }
  EXPECT_EQ(compared, 4);
}

TEST(Bf16Dot, KernelRowSplitsAreBitwiseTheWholeCall) {
  SKIP_WITHOUT_BF16_KERNEL();
  for (size_t tokens : {size_t{1}, size_t{5}, size_t{70}}) {
    const size_t rows = 53, cols = 203;
    const std::vector<float> wf = random_floats(rows * cols, 1), x = random_floats(tokens * cols, 2),
                             bias = random_floats(rows, 3);
    std::vector<uint16_t> w(wf.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
    const auto whole = run(matmul_bf16_dot, w, bias.data(), x, rows, cols, tokens);
    // Cuts inside every tile shape (4-row prefill strips, 16-row decode groups).
    const std::vector<float> pieces =
        test::run_row_ranges(tokens, rows, {0, 1, 6, 19, 20, 37, 50, 53}, [&](float* y, size_t begin, size_t end) {
          kernel()(reinterpret_cast<const std::byte*>(w.data()), bias.data(), x.data(), y, rows, cols, tokens, begin,
                   end);
        });
    EXPECT_TRUE(test::same_bits(pieces, whole)) << "tokens " << tokens;
  }
}

// The two-step entries the model uses (activations rounded once per product, then the product
// from them) give bitwise the emulation, also when the rounded input is shared by row ranges
// that split every tile; the padding past `cols` is zero.
TEST(Bf16Dot, RoundedOnceThenProductIsBitwiseTheEmulation) {
  SKIP_WITHOUT_BF16_KERNEL();
  const Kernels& k = table(Isa::Avx512Bf16);
  ASSERT_NE(k.round_activations_bf16, nullptr);
  ASSERT_NE(k.matmul_bf16_rounded, nullptr);
  for (Isa isa : all_isas()) {
    if (isa != Isa::Avx512Bf16 && isa_supported(isa)) {
      EXPECT_EQ(table(isa).matmul_bf16_rounded, nullptr) << isa_name(isa);
    }
  }
  size_t compared = 0;
  for (size_t tokens : {size_t{1}, size_t{5}, size_t{70}}) {
    for (size_t cols : {size_t{203}, size_t{896}}) {
      const size_t rows = 53, stride = bf16_row_stride(cols);
      const std::vector<float> wf = random_floats(rows * cols, 4), x = random_floats(tokens * cols, 5),
                               bias = random_floats(rows, 6);
      std::vector<uint16_t> w(wf.size());
      for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
      const auto ref = run(matmul_bf16_dot, w, bias.data(), x, rows, cols, tokens);
      std::vector<uint16_t> xb(tokens * stride, 0xffff);
      k.round_activations_bf16(x.data(), tokens, cols, xb.data());
      for (size_t t = 0; t < tokens; ++t) {
        for (size_t c = 0; c < stride; ++c) {
          const uint16_t want = c < cols ? round_activation_bf16(x[t * cols + c]) : uint16_t{0};
          ASSERT_EQ(xb[t * stride + c], want) << "token " << t << " column " << c;
        }
      }
      const std::vector<float> y =
          test::run_row_ranges(tokens, rows, {0, 1, 6, 19, 20, 37, 50, 53}, [&](float* out, size_t begin, size_t end) {
            k.matmul_bf16_rounded(reinterpret_cast<const std::byte*>(w.data()), bias.data(), xb.data(), out, rows, cols,
                                  tokens, begin, end);
          });
      EXPECT_TRUE(test::same_bits(y, ref)) << "tokens " << tokens << " cols " << cols;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 6u);
}

// Arbitrary bit patterns: subnormal, huge, infinite and NaN weights and activations, sums that
// overflow or cancel. Equal bits, except that any NaN matches any NaN (which NaN an FMA
// returns is not part of the rule).
TEST(Bf16Dot, KernelEqualsTheEmulationOnArbitraryBitPatterns) {
  SKIP_WITHOUT_BF16_KERNEL();
  std::mt19937 rng(11);
  size_t nan_outputs = 0, zero_outputs = 0, checked = 0;
  for (int round = 0; round < 40; ++round) {
    const size_t rows = 1 + rng() % 40, cols = 1 + rng() % 100, tokens = 1 + rng() % 8;
    std::vector<uint16_t> w(rows * cols);
    std::vector<float> x(tokens * cols), bias(rows);
    // Narrow exponent ranges per round, aimed so that the products land near 1, near the
    // subnormal boundary or past the largest float: cancellations, flushes and overflows.
    const int e_lo = static_cast<int>(rng() % 256), e_span = 1 + static_cast<int>(rng() % 20);
    const int target[] = {254, 128, 140, 372};  // biased exponent sums of w and x for those
    const int x_center = target[round % 4] - e_lo - e_span / 2;
    // Finite inputs but for the odd infinity or NaN a few rounds put in (below).
    auto exponent = [&](int lo) {
      return static_cast<uint32_t>(std::clamp(lo + static_cast<int>(rng() % e_span), 0, 254));
    };
    for (auto& v : w) v = static_cast<uint16_t>((rng() & 0x8000) | (exponent(e_lo) << 7) | (rng() & 0x7f));
    for (auto& v : x)
      v = std::bit_cast<float>(
          static_cast<uint32_t>((rng() & 0x80000000u) | (exponent(x_center) << 23) | (rng() & 0x7fffff)));
    for (auto& v : bias) v = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (round % 5 == 0) {
      for (size_t i = 0; i < w.size(); i += 7) w[i] = static_cast<uint16_t>(rng() & 0x807f);  // subnormal or zero
    }
    if (round % 8 == 7) {
      w[rng() % w.size()] = static_cast<uint16_t>(0x7f80 | (rng() & 0x807f));  // infinity or NaN
      x[rng() % x.size()] = std::bit_cast<float>(static_cast<uint32_t>(0x7f800000u | (rng() & 0x807fffffu)));
    }
    const bool with_bias = round % 2 == 0;
    const auto ref = run(matmul_bf16_dot, w, with_bias ? bias.data() : nullptr, x, rows, cols, tokens);
    const auto got = run(kernel(), w, with_bias ? bias.data() : nullptr, x, rows, cols, tokens);
    for (size_t i = 0; i < ref.size(); ++i) {
      ++checked;
      if (std::isnan(ref[i])) {
        ++nan_outputs;
        EXPECT_TRUE(std::isnan(got[i])) << "round " << round << " element " << i;
      } else {
        zero_outputs += ref[i] == 0.0f;
        EXPECT_EQ(bits(got[i]), bits(ref[i]))
            << "round " << round << " element " << i << ": " << got[i] << " vs " << ref[i];
      }
    }
  }
  std::printf("  %zu outputs, %zu NaN, %zu zero\n", checked, nan_outputs, zero_outputs);
  EXPECT_LT(nan_outputs, checked / 2) << "too few outputs compared bit for bit";
}

}  // namespace
}  // namespace nanoinfer::kernels
