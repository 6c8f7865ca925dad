// linear(): the seam the model calls. Each ISA path through the pool must agree with the
// scalar reference kernel, and results must not depend on the thread count or on batching.
#include "model/linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "support/random.h"

namespace nanoinfer {
namespace {

using test::random_floats;

struct Matrix {
  size_t rows, cols;
  std::vector<float> f32, bias;
  std::vector<uint16_t> bf16;
  Matrix(size_t r, size_t c, uint32_t seed) : rows(r), cols(c), f32(random_floats(r * c, seed)), bias(random_floats(r, seed + 1)), bf16(r * c) {
    for (size_t i = 0; i < f32.size(); ++i) bf16[i] = f32_to_bf16(f32[i]);
  }
  Weight weight(DType dtype) const {
    const WeightType type = dtype == DType::BF16 ? WeightType::BF16 : WeightType::F32;
    const void* data = dtype == DType::BF16 ? static_cast<const void*>(bf16.data()) : f32.data();
    return {type, static_cast<const std::byte*>(data), rows, cols, weight_row_bytes(type, cols)};
  }
};

std::vector<float> run_linear(Isa isa, ThreadPool& pool, const Matrix& m, DType dtype, const std::vector<float>& x,
                              size_t n_tokens) {
  std::vector<float> y(n_tokens * m.rows, std::nanf(""));
  const Compute compute{&pool, &kernels::table(isa)};
  linear(compute, m.weight(dtype), m.bias.data(), x.data(), y.data(), n_tokens);
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : all_isas())
    if (isa_supported(isa)) isas.push_back(isa);
  return isas;
}

struct Case {
  size_t rows, cols;
};
// Qwen2.5-0.5B projection shapes (q/o, k/v, gate/up, down) plus awkward ones; large enough
// that linear() actually splits rows across the pool.
const Case kCases[] = {{896, 896}, {128, 896}, {4864, 896}, {896, 4864}, {203, 333}, {1000, 37}};

TEST(Linear, BitwiseIdenticalAtOneTwoAndThreeThreads) {
  ThreadPool p1(1), p2(2), p3(3);
  int compared = 0;
  for (Isa isa : supported_isas()) {
    for (const Case& c : kCases) {
      const Matrix m(c.rows, c.cols, static_cast<uint32_t>(c.rows + c.cols));
      for (size_t tokens : {size_t{1}, size_t{7}}) {
        const std::vector<float> x = random_floats(tokens * c.cols, 11);
        for (DType dtype : {DType::F32, DType::BF16}) {
          const std::vector<float> y1 = run_linear(isa, p1, m, dtype, x, tokens);
          EXPECT_TRUE(same_bits(y1, run_linear(isa, p2, m, dtype, x, tokens)))
              << isa_name(isa) << " " << c.rows << "x" << c.cols << " tokens " << tokens;
          EXPECT_TRUE(same_bits(y1, run_linear(isa, p3, m, dtype, x, tokens)))
              << isa_name(isa) << " " << c.rows << "x" << c.cols << " tokens " << tokens;
          compared += 2;
        }
      }
    }
  }
  EXPECT_EQ(compared, static_cast<int>(supported_isas().size() * std::size(kCases) * 2 * 2 * 2));
}

TEST(Linear, BatchOfTokensIsBitwiseIdenticalToSingleTokenCalls) {
  ThreadPool pool(2);
  for (Isa isa : supported_isas()) {
    const Matrix m(899, 250, 5);  // rows straddle thread grains and register tiles
    for (size_t tokens = 1; tokens <= 9; ++tokens) {
      const std::vector<float> x = random_floats(tokens * m.cols, static_cast<uint32_t>(tokens));
      for (DType dtype : {DType::F32, DType::BF16}) {
        const std::vector<float> batched = run_linear(isa, pool, m, dtype, x, tokens);
        std::vector<float> single(batched.size());
        for (size_t t = 0; t < tokens; ++t)
          linear({&pool, &kernels::table(isa)}, m.weight(dtype), m.bias.data(), x.data() + t * m.cols,
                 single.data() + t * m.rows, 1);
        EXPECT_TRUE(same_bits(batched, single)) << isa_name(isa) << " tokens " << tokens;
      }
    }
  }
}

// linear() must route each dtype to the right kernel of the active table and cover every
// row: compare against the scalar reference kernel called directly, which kernels_test holds
// to the exact result. The avx512-bf16 tier's bf16 product rounds its activations; its
// reference is the bf16-dot emulation, which it equals bitwise.
TEST(Linear, EveryIsaAgreesWithTheScalarReferenceKernel) {
  ThreadPool pool(2);
  for (Isa isa : supported_isas()) {
    for (const Case& c : kCases) {
      const Matrix m(c.rows, c.cols, 3);
      const size_t tokens = 3;
      const std::vector<float> x = random_floats(tokens * c.cols, 4);
      for (DType dtype : {DType::F32, DType::BF16}) {
        const std::vector<float> y = run_linear(isa, pool, m, dtype, x, tokens);
        std::vector<float> ref(y.size());
        if (dtype == DType::BF16 && isa == Isa::Avx512Bf16) {
          kernels::matmul_bf16_dot(reinterpret_cast<const std::byte*>(m.bf16.data()), m.bias.data(), x.data(),
                                   ref.data(), m.rows, m.cols, tokens, 0, m.rows);
          EXPECT_TRUE(same_bits(y, ref)) << isa_name(isa) << " bf16 " << m.rows << "x" << m.cols;
          continue;
        }
        if (dtype == DType::BF16) {
          kernels::scalar_table().matmul_for(WeightType::BF16)(reinterpret_cast<const std::byte*>(m.bf16.data()), m.bias.data(), x.data(), ref.data(), m.rows, m.cols, tokens, 0, m.rows);
        } else {
          kernels::scalar_table().matmul_for(WeightType::F32)(reinterpret_cast<const std::byte*>(m.f32.data()), m.bias.data(), x.data(), ref.data(), m.rows, m.cols, tokens, 0, m.rows);
        }
        // Both within (cols + 2 + 1) u of the exact sum of |terms| (kernels_test): sum the bounds.
        for (size_t t = 0; t < tokens; ++t) {
          for (size_t r = 0; r < m.rows; ++r) {
            double magnitude = std::abs(m.bias[r]);
            for (size_t k = 0; k < m.cols; ++k) {
              const float w = dtype == DType::BF16 ? bf16_to_f32(m.bf16[r * m.cols + k]) : m.f32[r * m.cols + k];
              magnitude += std::abs(static_cast<double>(w) * x[t * m.cols + k]);
            }
            const double bound = 2.0 * static_cast<double>(m.cols + 3) * 0x1p-24 * magnitude;
            ASSERT_LE(std::abs(static_cast<double>(y[t * m.rows + r]) - ref[t * m.rows + r]), bound)
                << isa_name(isa) << " " << dtype_name(dtype) << " " << m.rows << "x" << m.cols << " [" << t
                << "][" << r << "]";
          }
        }
      }
    }
  }
}

// Quantized weights through linear(): every ISA at 1, 2 and 3 threads, batched and one token
// at a time, is bitwise the scalar reference kernel called directly on the whole matrix.
TEST(Linear, QuantizedIsBitwiseTheReferenceAtEveryIsaThreadCountAndBatch) {
  ThreadPool p1(1), p2(2), p3(3);
  ThreadPool* pools[] = {&p1, &p2, &p3};
  // Qwen2.5-0.5B's q/o, k/v, gate/up, down shapes, and rows that straddle grains and groups.
  const Case cases[] = {{896, 896}, {128, 896}, {4864, 896}, {896, 4864}, {899, 256}};
  int compared = 0;
  for (WeightType type : {WeightType::Q8_0, WeightType::Q4_0}) {
    for (const Case& c : cases) {
      const std::vector<float> wf = random_floats(c.rows * c.cols, static_cast<uint32_t>(c.rows + c.cols));
      const std::vector<float> bias = random_floats(c.rows, 2);
      const size_t row_bytes = weight_row_bytes(type, c.cols);
      std::vector<std::byte> wq(c.rows * row_bytes);
      for (size_t r = 0; r < c.rows; ++r) kernels::quantize_row(type, wf.data() + r * c.cols, wq.data() + r * row_bytes, c.cols);
      const Weight w{type, wq.data(), c.rows, c.cols, row_bytes};
      for (size_t tokens : {size_t{1}, size_t{7}}) {
        const std::vector<float> x = random_floats(tokens * c.cols, 11);
        std::vector<float> ref(tokens * c.rows);
        kernels::scalar_table().matmul_for(type)(wq.data(), bias.data(), x.data(), ref.data(), c.rows, c.cols, tokens, 0,
                                                 c.rows);
        for (Isa isa : supported_isas()) {
          for (ThreadPool* pool : pools) {
            const Compute compute{pool, &kernels::table(isa)};
            std::vector<float> y(ref.size(), std::nanf("")), single(ref.size(), std::nanf(""));
            linear(compute, w, bias.data(), x.data(), y.data(), tokens);
            for (size_t t = 0; t < tokens; ++t)
              linear(compute, w, bias.data(), x.data() + t * c.cols, single.data() + t * c.rows, 1);
            const std::string what = std::string(isa_name(isa)) + " " + std::string(weight_type_name(type)) + " " +
                                     std::to_string(c.rows) + "x" + std::to_string(c.cols) + " tokens " +
                                     std::to_string(tokens) + " threads " + std::to_string(pool->size());
            EXPECT_TRUE(same_bits(y, ref)) << what;
            EXPECT_TRUE(same_bits(single, ref)) << what << " (one token at a time)";
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, static_cast<int>(2 * std::size(cases) * 2 * supported_isas().size() * 3));
}

TEST(Linear, NullBiasAndZeroTokens) {
  ThreadPool pool2(2);
  const Compute pool{&pool2, &kernels::scalar_table()};
  const Matrix m(40, 24, 8);
  const std::vector<float> x = random_floats(2 * m.cols, 9);
  std::vector<float> y(2 * m.rows), with_bias(2 * m.rows);
  linear(pool, m.weight(DType::F32), nullptr, x.data(), y.data(), 2);
  linear(pool, m.weight(DType::F32), m.bias.data(), x.data(), with_bias.data(), 2);
  for (size_t t = 0; t < 2; ++t)
    for (size_t r = 0; r < m.rows; ++r) EXPECT_EQ(with_bias[t * m.rows + r], m.bias[r] + y[t * m.rows + r]);
  std::vector<float> untouched(4, 7.0f);
  linear(pool, m.weight(DType::F32), nullptr, x.data(), untouched.data(), 0);
  EXPECT_EQ(untouched, std::vector<float>(4, 7.0f));
}


}  // namespace
}  // namespace nanoinfer
