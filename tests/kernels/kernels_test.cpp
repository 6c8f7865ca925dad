// Every kernel table this machine can run, held to the scalar reference and to an exact
// (double) result with error bounds derived from the arithmetic, plus the determinism
// properties the engine relies on, checked bitwise.
#include "kernels/kernels.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "support/checks.h"
#include "support/guarded.h"
#include "support/isa.h"
#include "support/random.h"

namespace nanoinfer::kernels {
namespace {

constexpr double kUnitRoundoff = 0x1p-24;  // u for f32 round-to-nearest

using test::random_floats;

// Column count of one accumulator lane: the SIMD kernels fold `cols` into `width` lanes.
// (f32 and bf16: the VNNI tiers carry their base tier's float kernels; the avx512-bf16 tier's
// bf16 product is the exception, see uses_bf16_dot.)
size_t lane_width(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return 1;
    case Isa::Avx2:
    case Isa::Avx2Vnni:
      return 8;
    case Isa::Avx512:
    case Isa::Avx512Vnni:
    case Isa::Avx512Bf16:
      return 16;
  }
  return 0;
}

// The avx512-bf16 tier's bf16 product rounds the activations to bf16 and runs its own chain
// (kernels/scalar_bf16_dot.cpp): held bitwise to matmul_bf16_dot, and to the exact result
// with the bound that rounding adds.
bool uses_bf16_dot(Isa isa, bool bf16) {
  return bf16 && isa == Isa::Avx512Bf16;
}

// Roundings any term of y = bias + sum(w*x) can pass through (Higham's gamma_m argument):
//  scalar: one for the product, one per sequential add (cols), one for the bias: cols + 2;
//  SIMD: one per fused multiply-add of its lane (ceil(cols/W)), log2(W) in the lane
//  reduction tree, one for the bias.
// Then |computed - exact| <= gamma_m * (|bias| + sum|w*x|), gamma_m = m*u/(1 - m*u) <= (m+1)*u
// for the sizes here.
size_t roundings(Isa isa, size_t cols) {
  const size_t w = lane_width(isa);
  if (w == 1) return cols + 2;
  return (cols + w - 1) / w + static_cast<size_t>(std::log2(w)) + 1;
}
double gamma(size_t m) {
  return static_cast<double>(m + 1) * kUnitRoundoff;
}

// matmul_bf16_dot against the exact product of the unrounded activations: rounding x to bf16
// moves each term by at most 2^-8 |w x| (half an ulp at 8 significant bits), and the chain
// (two roundings per 32 columns per lane, 4 in the lane tree, 1 for the bias) works on terms
// at most (1 + 2^-8) |w x|.
constexpr double kBf16Roundoff = 0x1p-8;
double bf16_dot_bound(size_t cols) {
  const size_t m = 2 * ((cols + 31) / 32) + 4 + 1;
  return kBf16Roundoff + gamma(m) * (1 + kBf16Roundoff);
}

// One test problem: weights in f32 and as bf16 (the bf16 widened exactly is what the kernels
// see), activations for n_tokens, bias.
struct Problem {
  size_t rows, cols, n_tokens;
  std::vector<float> w, x, bias;
  std::vector<uint16_t> w_bf16;
  Problem(size_t r, size_t c, size_t t, uint32_t seed)
      : rows(r),
        cols(c),
        n_tokens(t),
        w(random_floats(r * c, seed)),
        x(random_floats(t * c, seed + 1)),
        bias(random_floats(r, seed + 2)),
        w_bf16(r * c) {
    for (size_t i = 0; i < w.size(); ++i) w_bf16[i] = f32_to_bf16(w[i]);
  }
  float weight(bool bf16, size_t r, size_t c) const {
    return bf16 ? bf16_to_f32(w_bf16[r * cols + c]) : w[r * cols + c];
  }
  void run(const Kernels& k, bool bf16, const float* b, float* y, size_t row_begin, size_t row_end) const {
    if (bf16) {
      k.matmul_for(WeightType::BF16)(reinterpret_cast<const std::byte*>(w_bf16.data()), b, x.data(), y, rows, cols,
                                     n_tokens, row_begin, row_end);
    } else {
      k.matmul_for(WeightType::F32)(reinterpret_cast<const std::byte*>(w.data()), b, x.data(), y, rows, cols, n_tokens,
                                    row_begin, row_end);
    }
  }
  std::vector<float> run(const Kernels& k, bool bf16, bool with_bias = true) const {
    test::Guarded<float> y(n_tokens * rows, std::nanf(""));
    run(k, bf16, with_bias ? bias.data() : nullptr, y.data(), 0, rows);
    EXPECT_TRUE(y.intact()) << isa_name(k.isa) << (bf16 ? " bf16 " : " f32 ") << rows << "x" << cols << " tokens "
                            << n_tokens;
    return y.values();
  }
  std::vector<float> run_bf16_dot_reference(bool with_bias) const {
    test::Guarded<float> y(n_tokens * rows, std::nanf(""));
    matmul_bf16_dot(reinterpret_cast<const std::byte*>(w_bf16.data()), with_bias ? bias.data() : nullptr, x.data(),
                    y.data(), rows, cols, n_tokens, 0, rows);
    EXPECT_TRUE(y.intact()) << "bf16 dot reference " << rows << "x" << cols << " tokens " << n_tokens;
    return y.values();
  }
};

// Checks y against the exact result with the bound for `isa`, and against the scalar
// reference with the sum of both bounds (bitwise, for the bf16-dot product, whose reference
// is the emulation); returns the number of elements checked.
size_t expect_close_to_exact(const Problem& p, bool bf16, bool with_bias, Isa isa, const std::vector<float>& y,
                             const std::vector<float>& y_ref) {
  const bool dot = uses_bf16_dot(isa, bf16);
  const double g = dot ? bf16_dot_bound(p.cols) : gamma(roundings(isa, p.cols));
  const double g_ref = dot ? 0.0 : gamma(roundings(Isa::Scalar, p.cols));
  size_t checked = 0;
  for (size_t t = 0; t < p.n_tokens; ++t) {
    for (size_t r = 0; r < p.rows; ++r) {
      double exact = with_bias ? p.bias[r] : 0.0, magnitude = with_bias ? std::abs(p.bias[r]) : 0.0;
      for (size_t c = 0; c < p.cols; ++c) {
        const double term = static_cast<double>(p.weight(bf16, r, c)) * p.x[t * p.cols + c];
        exact += term;
        magnitude += std::abs(term);
      }
      const float got = y[t * p.rows + r], ref = y_ref[t * p.rows + r];
      EXPECT_LE(std::abs(got - exact), g * magnitude)
          << isa_name(isa) << (bf16 ? " bf16 " : " f32 ") << p.rows << "x" << p.cols << " tokens " << p.n_tokens
          << " at [" << t << "][" << r << "]";
      if (dot) {
        EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(ref))
            << isa_name(isa) << " bf16 dot " << p.rows << "x" << p.cols << " tokens " << p.n_tokens << " at [" << t
            << "][" << r << "]";
      } else {
        EXPECT_LE(std::abs(static_cast<double>(got) - ref), (g + g_ref) * magnitude);
      }
      ++checked;
    }
  }
  return checked;
}

struct Shape {
  size_t rows, cols;
  std::vector<size_t> tokens;
};

TEST(Kernels, MatmulEveryIsaMatchesExactWithinDerivedBound) {
  const std::vector<size_t> all_tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  // Awkward sizes: columns below, at and around the 8- and 16-lane widths and not multiples
  // of them; rows not multiples of any register tile; then the model's own shapes.
  const std::vector<Shape> shapes = {
      {1, 1, all_tokens},  {3, 5, all_tokens},   {7, 15, all_tokens},  {9, 16, all_tokens},   {13, 17, all_tokens},
      {5, 31, all_tokens}, {11, 33, all_tokens}, {6, 100, all_tokens}, {37, 129, all_tokens}, {19, 896, all_tokens},
      {130, 4864, {1, 7}}, {896, 896, {1, 9}},   {4864, 896, {1, 3}},  {2, 0, {1, 2}},
  };
  size_t checked = 0;
  for (Isa isa : test::supported_isas()) {
    const Kernels& k = table(isa);
    ASSERT_EQ(k.isa, isa);
    for (const Shape& s : shapes) {
      for (size_t tokens : s.tokens) {
        const Problem p(s.rows, s.cols, tokens, static_cast<uint32_t>(s.rows * 131 + s.cols * 7 + tokens));
        for (bool bf16 : {false, true}) {
          for (bool with_bias : {true, false}) {
            const std::vector<float> y = p.run(k, bf16, with_bias);
            const std::vector<float> y_ref =
                uses_bf16_dot(isa, bf16) ? p.run_bf16_dot_reference(with_bias) : p.run(scalar_table(), bf16, with_bias);
            checked += expect_close_to_exact(p, bf16, with_bias, isa, y, y_ref);
          }
        }
      }
    }
  }
  // Elements per ISA: sum over shapes of rows * cols-independent token counts, x2 dtypes x2 bias.
  size_t per_isa = 0;
  for (const Shape& s : shapes)
    for (size_t t : s.tokens) per_isa += s.rows * t * 4;
  EXPECT_EQ(checked, per_isa * test::supported_isas().size());
}

// The bound must be tight enough that a kernel which drops one column fails it; otherwise
// the test above would pass a broken tail.
TEST(Kernels, BoundCatchesADroppedColumn) {
  for (Isa isa : test::supported_isas()) {
    if (isa == Isa::Scalar) continue;  // the scalar bound is cols*u, too loose at 4864 columns
    const Problem p(64, 4864, 1, 99);
    const double g = gamma(roundings(isa, p.cols));
    int caught = 0;
    for (size_t r = 0; r < p.rows; ++r) {
      double magnitude = std::abs(p.bias[r]);
      for (size_t c = 0; c < p.cols; ++c) magnitude += std::abs(static_cast<double>(p.w[r * p.cols + c]) * p.x[c]);
      const double dropped = std::abs(static_cast<double>(p.w[r * p.cols + p.cols - 1]) * p.x[p.cols - 1]);
      caught += dropped > g * magnitude;
    }
    EXPECT_GE(caught, 56) << isa_name(isa) << ": bound misses a dropped column in too many of 64 rows";
  }
}

// The guards themselves: a write one element before, one past, or into a forbidden range is
// caught, and writes where the call may write are not; a real kernel given an output one row
// short writes into the guard.
TEST(GuardRegions, CatchWritesOutOfRange) {
  {
    test::Guarded<float> y(10, 0.0f);
    for (size_t i = 0; i < 10; ++i) y.data()[i] = static_cast<float>(i);
    EXPECT_TRUE(y.intact());
    y.data()[10] = 1.0f;
    EXPECT_FALSE(y.intact());
  }
  {
    test::Guarded<float> y(10, 0.0f);
    y.data()[-1] = y.data()[-1];  // the same bytes again: unchanged, intact
    EXPECT_TRUE(y.intact());
    reinterpret_cast<unsigned char*>(y.data())[-1] ^= 1;
    EXPECT_FALSE(y.intact());
  }
  {
    test::Guarded<float> y(2 * 8, 0.0f);
    y.forbid_outside_columns(2, 8, 3, 5);  // 2 rows of 8: only columns 3 and 4 writable
    y.data()[3] = y.data()[4] = y.data()[8 + 3] = y.data()[8 + 4] = 1.0f;
    EXPECT_TRUE(y.intact());
    y.data()[8 + 5] = 1.0f;
    const auto r = y.intact();
    EXPECT_FALSE(r);
    EXPECT_NE(std::string(r.message()).find("element 13"), std::string::npos) << r.message();
  }
  for (Isa isa : test::supported_isas()) {
    const Problem p(9, 40, 2, 5);
    test::Guarded<float> short_y(p.n_tokens * p.rows - 1, 0.0f);
    // rows = 9 as the stride, but the buffer holds one float less: the last row lands in the guard.
    p.run(table(isa), false, p.bias.data(), short_y.data(), 0, p.rows);
    EXPECT_FALSE(short_y.intact()) << isa_name(isa);
  }
}

TEST(Kernels, MatmulRowRangeSplitsAreBitwiseIdentical) {
  for (Isa isa : test::supported_isas()) {
    const Kernels& k = table(isa);
    for (size_t tokens : {size_t{1}, size_t{5}, size_t{70}}) {  // 70 crosses the 64-token block
      const Problem p(53, 203, tokens, 7);
      for (bool bf16 : {false, true}) {
        const std::vector<float> whole = p.run(k, bf16);
        // Boundaries that cut every register tile shape somewhere.
        // Each range alone, the other rows guarded.
        const std::vector<float> pieces = test::run_row_ranges(
            tokens, p.rows, {0, 1, 6, 19, 20, 37, 50, 53},
            [&](float* y, size_t begin, size_t end) { p.run(k, bf16, p.bias.data(), y, begin, end); });
        EXPECT_TRUE(test::same_bits(whole, pieces)) << isa_name(isa) << " tokens " << tokens << " bf16 " << bf16;
      }
    }
  }
}

TEST(Kernels, MatmulBatchIsBitwiseIdenticalToOneTokenAtATime) {
  for (Isa isa : test::supported_isas()) {
    const Kernels& k = table(isa);
    for (size_t tokens = 1; tokens <= 9; ++tokens) {
      for (size_t cols : {size_t{37}, size_t{896}}) {
        const Problem p(29, cols, tokens, static_cast<uint32_t>(tokens));
        for (bool bf16 : {false, true}) {
          const std::vector<float> batched = p.run(k, bf16);
          std::vector<float> single(batched.size());
          for (size_t t = 0; t < tokens; ++t) {
            Problem one = p;
            one.n_tokens = 1;
            one.x.assign(p.x.begin() + static_cast<ptrdiff_t>(t * cols),
                         p.x.begin() + static_cast<ptrdiff_t>((t + 1) * cols));
            one.run(k, bf16, p.bias.data(), single.data() + t * p.rows, 0, p.rows);
          }
          EXPECT_TRUE(test::same_bits(batched, single)) << isa_name(isa) << " tokens " << tokens << " cols " << cols;
        }
      }
    }
  }
}

// The prefill tiles at the shapes that take their other paths: rows over 2,048 columns (read
// in column passes, accumulators carried between passes; 2,500 is not a multiple of 16, so
// the last pass has a tail), a token count that crosses the token blocks and ends on a narrow
// tile (131), and a row count that ends on a narrow strip (37): bitwise the one-token product,
// whole and split into row ranges, with and without bias.
TEST(Kernels, MatmulWideRowsAndOddTokenCountsAreBitwiseOneTokenAtATime) {
  for (Isa isa : test::supported_isas()) {
    const Kernels& k = table(isa);
    for (size_t cols : {size_t{2500}, size_t{903}}) {
      const Problem p(37, cols, 131, 11);
      for (bool bf16 : {false, true}) {
        if (uses_bf16_dot(isa, bf16)) continue;  // held to matmul_bf16_dot in bf16_dot_test.cpp
        for (bool with_bias : {true, false}) {
          const float* b = with_bias ? p.bias.data() : nullptr;
          const std::vector<float> batched = p.run(k, bf16, with_bias);
          std::vector<float> single(batched.size());
          for (size_t t = 0; t < p.n_tokens; ++t) {
            Problem one = p;
            one.n_tokens = 1;
            one.x.assign(p.x.begin() + static_cast<ptrdiff_t>(t * cols),
                         p.x.begin() + static_cast<ptrdiff_t>((t + 1) * cols));
            one.run(k, bf16, b, single.data() + t * p.rows, 0, p.rows);
          }
          EXPECT_TRUE(test::same_bits(batched, single))
              << isa_name(isa) << " cols " << cols << " bf16 " << bf16 << " bias " << with_bias;
          const std::vector<float> pieces =
              test::run_row_ranges(p.n_tokens, p.rows, {0, 3, 13, 16, 37},
                                   [&](float* y, size_t begin, size_t end) { p.run(k, bf16, b, y, begin, end); });
          EXPECT_TRUE(test::same_bits(batched, pieces))
              << isa_name(isa) << " cols " << cols << " bf16 " << bf16 << " bias " << with_bias << " row ranges";
        }
      }
    }
  }
}

TEST(Kernels, DotMatchesExactWithinDerivedBound) {
  for (Isa isa : test::supported_isas()) {
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 64, 100, 896}) {
      const std::vector<float> a = random_floats(n, 3), b = random_floats(n, 4);
      double exact = 0, magnitude = 0;
      for (size_t i = 0; i < n; ++i) {
        exact += static_cast<double>(a[i]) * b[i];
        magnitude += std::abs(static_cast<double>(a[i]) * b[i]);
      }
      // As matmul without the bias rounding.
      const double bound = gamma(roundings(isa, n) - 1) * magnitude;
      float dot = std::nanf("");
      table(isa).dot_rows_f32(a.data(), b.data(), 0, 1, n, 1.0f, &dot);  // one row, scale 1: exact
      EXPECT_LE(std::abs(dot - exact), bound) << isa_name(isa) << " n " << n;
    }
  }
}

// Attention's entries over strided rows of the cache: bitwise the same entries called one row
// at a time, for head sizes in and out of the register path (whole batches up to 8) and row
// counts around the groups of four.
TEST(Kernels, DotRowsAndAxpyRowsAreBitwiseThePerRowCalls) {
  size_t compared = 0;
  for (Isa isa : test::supported_isas()) {
    const Kernels& k = table(isa);
    for (size_t n : {1, 7, 8, 16, 17, 32, 64, 100, 128, 256}) {
      for (size_t count : {1, 3, 4, 5, 9, 33}) {
        const size_t stride = n + 3;  // rows of a wider matrix, as in the KV cache
        const std::vector<float> q = random_floats(n, 7), rows = random_floats(count * stride, 8),
                                 alphas = random_floats(count, 9), y0 = random_floats(n, 10);
        std::vector<float> want(count);
        test::Guarded<float> got(count, std::nanf(""));
        for (size_t j = 0; j < count; ++j)
          k.dot_rows_f32(q.data(), rows.data() + j * stride, stride, 1, n, 0.125f, &want[j]);
        k.dot_rows_f32(q.data(), rows.data(), stride, count, n, 0.125f, got.data());
        ASSERT_TRUE(got.intact()) << isa_name(isa) << " dot_rows n " << n << " count " << count;
        ASSERT_EQ(std::memcmp(want.data(), got.data(), count * sizeof(float)), 0)
            << isa_name(isa) << " n " << n << " count " << count;
        std::vector<float> y_want = y0;
        test::Guarded<float> y_got(n, 0.0f);
        std::memcpy(y_got.data(), y0.data(), n * sizeof(float));
        for (size_t j = 0; j < count; ++j)
          k.axpy_rows_f32(&alphas[j], 0.3f, rows.data() + j * stride, stride, 1, n, y_want.data());
        k.axpy_rows_f32(alphas.data(), 0.3f, rows.data(), stride, count, n, y_got.data());
        ASSERT_TRUE(y_got.intact()) << isa_name(isa) << " axpy_rows n " << n << " count " << count;
        ASSERT_EQ(std::memcmp(y_want.data(), y_got.data(), n * sizeof(float)), 0)
            << isa_name(isa) << " n " << n << " count " << count;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, test::supported_isas().size() * 10 * 6);
}

TEST(Kernels, AxpyRoundsExactlyOncePerElementOnFmaIsas) {
  for (Isa isa : test::supported_isas()) {
    for (size_t n : {1, 7, 8, 9, 17, 33, 100}) {
      const std::vector<float> x = random_floats(n, 5), y0 = random_floats(n, 6);
      const float alpha = 0.37f;
      std::vector<float> y = y0;
      table(isa).axpy_rows_f32(&alpha, 1.0f, x.data(), 0, 1, n, y.data());  // one row: alpha * 1 exact
      for (size_t i = 0; i < n; ++i) {
        // Scalar: rounded product, rounded sum. SIMD: fused, one rounding (std::fmaf is
        // correctly rounded).
        float expected;
        if (isa == Isa::Scalar) {
          const float product = alpha * x[i];
          expected = y0[i] + product;
        } else {
          expected = std::fmaf(alpha, x[i], y0[i]);
        }
        ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(expected)) << isa_name(isa) << " i " << i;
      }
    }
  }
}

// What CPUID+XGETBV reports must agree with the kernel's view in /proc/cpuinfo (which also
// reflects OS support) on Linux.
TEST(Kernels, DispatchAgreesWithProcCpuinfo) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (!cpuinfo) GTEST_SKIP() << "/proc/cpuinfo not readable";
  if (std::getenv("NANOINFER_CPU_DISABLE")) GTEST_SKIP() << "NANOINFER_CPU_DISABLE hides features on purpose";
  std::string line;
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string f; words >> f;) flags.insert(f);
    break;
  }
  // GCC's -mavx2 also enables SSE3..SSE4.2 and POPCNT (/proc/cpuinfo: pni = SSE3).
  const bool avx2 = flags.count("pni") && flags.count("ssse3") && flags.count("sse4_1") && flags.count("sse4_2") &&
                    flags.count("popcnt") && flags.count("avx") && flags.count("avx2") && flags.count("fma") &&
                    flags.count("f16c");
  const bool avx2_vnni = avx2 && flags.count("avx_vnni");
  const bool avx512 =
      avx2 && flags.count("avx512f") && flags.count("avx512bw") && flags.count("avx512dq") && flags.count("avx512vl");
  const bool avx512_vnni = avx512 && flags.count("avx512_vnni");
  const bool avx512_bf16 = avx512_vnni && flags.count("avx512_bf16");
  EXPECT_TRUE(isa_supported(Isa::Scalar));
  EXPECT_EQ(isa_supported(Isa::Avx2), avx2);
  EXPECT_EQ(isa_supported(Isa::Avx2Vnni), avx2_vnni);
  EXPECT_EQ(isa_supported(Isa::Avx512), avx512);
  EXPECT_EQ(isa_supported(Isa::Avx512Vnni), avx512_vnni);
  EXPECT_EQ(isa_supported(Isa::Avx512Bf16), avx512_bf16);
  const Isa best = avx512_bf16   ? Isa::Avx512Bf16
                   : avx512_vnni ? Isa::Avx512Vnni
                   : avx512      ? Isa::Avx512
                   : avx2_vnni   ? Isa::Avx2Vnni
                   : avx2        ? Isa::Avx2
                                 : Isa::Scalar;
  EXPECT_EQ(best_isa(), best);
  std::printf("  this machine: best ISA %s\n", std::string(isa_name(best_isa())).c_str());
}

TEST(Kernels, IsaNamesParseAndSelectionIsChecked) {
  for (Isa isa : all_isas()) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_EQ(parse_isa("AVX2"), std::nullopt);
  EXPECT_EQ(parse_isa("sse"), std::nullopt);
  for (Isa isa : all_isas()) {
    if (isa_supported(isa)) {
      EXPECT_EQ(table(isa).isa, isa);
      EXPECT_NO_THROW(require_isa(isa));
    } else {
      EXPECT_THROW(table(isa), Error);
      EXPECT_THROW(require_isa(isa), Error);
    }
  }
}

}  // namespace
}  // namespace nanoinfer::kernels
