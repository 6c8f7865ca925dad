// linear(): the seam the model calls. Each ISA path through the pool must agree with the
// scalar reference kernel, and results must not depend on the thread count or on batching.
#include "model/linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "model/ops.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "support/checks.h"
#include "support/guarded.h"
#include "support/isa.h"
#include "support/random.h"
#include "support/sanitized.h"

namespace nanoinfer {
namespace {

using test::random_floats;

struct Matrix {
  size_t rows, cols;
  std::vector<float> f32, bias;
  std::vector<uint16_t> bf16;
  Matrix(size_t r, size_t c, uint32_t seed)
      : rows(r), cols(c), f32(random_floats(r * c, seed)), bias(random_floats(r, seed + 1)), bf16(r * c) {
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
  test::Guarded<float> y(n_tokens * m.rows, std::nanf(""));
  const Compute compute{&pool, &kernels::table(isa)};
  linear(compute, m.weight(dtype), m.bias.data(), x.data(), y.data(), n_tokens);
  EXPECT_TRUE(y.intact()) << isa_name(isa) << " " << m.rows << "x" << m.cols << " tokens " << n_tokens << " threads "
                          << pool.size();
  return y.values();
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
  for (Isa isa : test::supported_isas()) {
    for (const Case& c : kCases) {
      const Matrix m(c.rows, c.cols, static_cast<uint32_t>(c.rows + c.cols));
      for (size_t tokens : {size_t{1}, size_t{7}}) {
        const std::vector<float> x = random_floats(tokens * c.cols, 11);
        for (DType dtype : {DType::F32, DType::BF16}) {
          const std::vector<float> y1 = run_linear(isa, p1, m, dtype, x, tokens);
          EXPECT_TRUE(test::same_bits(y1, run_linear(isa, p2, m, dtype, x, tokens)))
              << isa_name(isa) << " " << c.rows << "x" << c.cols << " tokens " << tokens;
          EXPECT_TRUE(test::same_bits(y1, run_linear(isa, p3, m, dtype, x, tokens)))
              << isa_name(isa) << " " << c.rows << "x" << c.cols << " tokens " << tokens;
          compared += 2;
        }
      }
    }
  }
  EXPECT_EQ(compared, static_cast<int>(test::supported_isas().size() * std::size(kCases) * 2 * 2 * 2));
}

TEST(Linear, BatchOfTokensIsBitwiseIdenticalToSingleTokenCalls) {
  ThreadPool pool(2);
  for (Isa isa : test::supported_isas()) {
    const Matrix m(899, 250, 5);  // rows straddle thread grains and register tiles
    for (size_t tokens = 1; tokens <= 9; ++tokens) {
      const std::vector<float> x = random_floats(tokens * m.cols, static_cast<uint32_t>(tokens));
      for (DType dtype : {DType::F32, DType::BF16}) {
        const std::vector<float> batched = run_linear(isa, pool, m, dtype, x, tokens);
        std::vector<float> single(batched.size());
        for (size_t t = 0; t < tokens; ++t)
          linear({&pool, &kernels::table(isa)}, m.weight(dtype), m.bias.data(), x.data() + t * m.cols,
                 single.data() + t * m.rows, 1);
        EXPECT_TRUE(test::same_bits(batched, single)) << isa_name(isa) << " tokens " << tokens;
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
  for (Isa isa : test::supported_isas()) {
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
          EXPECT_TRUE(test::same_bits(y, ref)) << isa_name(isa) << " bf16 " << m.rows << "x" << m.cols;
          continue;
        }
        if (dtype == DType::BF16) {
          kernels::scalar_table().matmul_for(WeightType::BF16)(reinterpret_cast<const std::byte*>(m.bf16.data()),
                                                               m.bias.data(), x.data(), ref.data(), m.rows, m.cols,
                                                               tokens, 0, m.rows);
        } else {
          kernels::scalar_table().matmul_for(WeightType::F32)(reinterpret_cast<const std::byte*>(m.f32.data()),
                                                              m.bias.data(), x.data(), ref.data(), m.rows, m.cols,
                                                              tokens, 0, m.rows);
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
                << isa_name(isa) << " " << dtype_name(dtype) << " " << m.rows << "x" << m.cols << " [" << t << "][" << r
                << "]";
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
  // Under the sanitizers (~4x slower) two thread counts, one of them odd.
  const std::vector<ThreadPool*> pools =
      test::kSanitized ? std::vector<ThreadPool*>{&p1, &p3} : std::vector<ThreadPool*>{&p1, &p2, &p3};
  // Qwen2.5-0.5B's q/o, k/v, gate/up, down shapes, and rows that straddle grains and groups.
  // The K types' super-blocks of 256 fit the columns of 4864 and 256 only.
  const Case cases[] = {{896, 896}, {128, 896}, {4864, 896}, {896, 4864}, {899, 256}};
  int compared = 0, fitting = 0;
  for (const WeightTypeInfo& info : all_weight_types()) {
    if (!info.quantized) continue;
    const WeightType type = info.type;
    for (const Case& c : cases) {
      if (c.cols % info.block_elems != 0) continue;
      ++fitting;
      const std::vector<float> wf = random_floats(c.rows * c.cols, static_cast<uint32_t>(c.rows + c.cols));
      const std::vector<float> bias = random_floats(c.rows, 2);
      const size_t row_bytes = weight_row_bytes(type, c.cols);
      std::vector<std::byte> wq(c.rows * row_bytes);
      for (size_t r = 0; r < c.rows; ++r) quantize_row(type, wf.data() + r * c.cols, wq.data() + r * row_bytes, c.cols);
      const Weight w{type, wq.data(), c.rows, c.cols, row_bytes};
      for (size_t tokens : {size_t{1}, size_t{7}}) {
        const std::vector<float> x = random_floats(tokens * c.cols, 11);
        std::vector<float> ref(tokens * c.rows);
        kernels::QuantizedActivations xq;
        kernels::scalar_table().quantize_activations(x.data(), c.cols, tokens, xq);
        kernels::scalar_table().matmul_quantized_for(type)(wq.data(), bias.data(), xq, ref.data(), c.rows, 0, c.rows);
        for (Isa isa : test::supported_isas()) {
          for (ThreadPool* pool : pools) {
            const Compute compute{pool, &kernels::table(isa)};
            std::vector<float> y(ref.size(), std::nanf("")), single(ref.size(), std::nanf(""));
            linear(compute, w, bias.data(), x.data(), y.data(), tokens);
            for (size_t t = 0; t < tokens; ++t)
              linear(compute, w, bias.data(), x.data() + t * c.cols, single.data() + t * c.rows, 1);
            const std::string what = std::string(isa_name(isa)) + " " + std::string(weight_type_name(type)) + " " +
                                     std::to_string(c.rows) + "x" + std::to_string(c.cols) + " tokens " +
                                     std::to_string(tokens) + " threads " + std::to_string(pool->size());
            EXPECT_TRUE(test::same_bits(y, ref)) << what;
            EXPECT_TRUE(test::same_bits(single, ref)) << what << " (one token at a time)";
            ++compared;
          }
        }
      }
    }
  }
  // The 32-block types (int8, int4, q4_1, q5_0, q5_1) in every case, q4_k, q5_k, q6_k and q3_k in two.
  EXPECT_EQ(fitting, 5 * 5 + 4 * 2);
  EXPECT_EQ(compared, static_cast<int>(fitting * 2 * test::supported_isas().size() * pools.size()));
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

// ---- the fused products -------------------------------------------------------------------

// A matrix of any weight type, its rows encoded from seeded floats.
struct Encoded {
  std::vector<std::byte> bytes;
  Weight w;
  Encoded(WeightType type, size_t rows, size_t cols, uint32_t seed) : bytes(rows * weight_row_bytes(type, cols)) {
    const std::vector<float> f = random_floats(rows * cols, seed);
    const size_t rb = weight_row_bytes(type, cols);
    for (size_t r = 0; r < rows; ++r) encode_row(type, f.data() + r * cols, bytes.data() + r * rb, cols);
    w = {type, bytes.data(), rows, cols, rb};
  }
};

// Stacked q/k/v, one matrix of one type or three of mixed types, is bitwise three linear()
// calls placed side by side, at 1, 2 and 3 threads and on every ISA.
TEST(LinearStacked, BitwiseTheSeparateProductsSideBySide) {
  ThreadPool p1(1), p2(2), p3(3);
  const size_t cols = 512, rows[] = {448, 64, 64}, total = 576;  // tiny-gqa7's q, k, v rows; 512 columns fit every type
  const std::vector<float> bias = random_floats(total, 5);
  // Every type alone (from the table), then mixes.
  std::vector<std::array<WeightType, 3>> mixes;
  for (const WeightTypeInfo& info : all_weight_types()) mixes.push_back({info.type, info.type, info.type});
  mixes.push_back({WeightType::Q8_0, WeightType::F32, WeightType::Q4_0});
  mixes.push_back({WeightType::BF16, WeightType::Q4_0, WeightType::BF16});
  int compared = 0;
  for (const auto& mix : mixes) {
    std::vector<Encoded> parts;
    for (size_t i = 0; i < 3; ++i) parts.emplace_back(mix[i], rows[i], cols, static_cast<uint32_t>(10 + i));
    const bool one_type = mix[0] == mix[1] && mix[1] == mix[2];
    // One type: the rows stacked as one matrix, as the loader lays them out.
    std::vector<std::byte> stacked_bytes;
    StackedWeight stacked{{}, total, bias.data()};
    if (one_type) {
      for (const Encoded& e : parts) stacked_bytes.insert(stacked_bytes.end(), e.bytes.begin(), e.bytes.end());
      stacked.parts = {Weight{mix[0], stacked_bytes.data(), total, cols, parts[0].w.row_bytes}};
    } else {
      for (const Encoded& e : parts) stacked.parts.push_back(e.w);
    }
    for (size_t tokens : {size_t{1}, size_t{7}}) {
      const std::vector<float> x = random_floats(tokens * cols, 21);
      for (Isa isa : test::supported_isas()) {
        // The separate products, placed side by side.
        std::vector<float> expected(tokens * total);
        size_t first = 0;
        for (size_t i = 0; i < 3; ++i) {
          std::vector<float> y(tokens * rows[i]);
          linear({&p2, &kernels::table(isa)}, parts[i].w, bias.data() + first, x.data(), y.data(), tokens);
          for (size_t t = 0; t < tokens; ++t)
            std::memcpy(&expected[t * total + first], &y[t * rows[i]], rows[i] * sizeof(float));
          first += rows[i];
        }
        for (ThreadPool* pool : {&p1, &p2, &p3}) {
          test::Guarded<float> out(tokens * total, std::nanf(""));
          linear({pool, &kernels::table(isa)}, stacked, x.data(), out.data(), tokens);
          EXPECT_TRUE(out.intact()) << isa_name(isa) << " tokens " << tokens << " threads " << pool->size();
          const std::vector<float> y = out.values();
          EXPECT_TRUE(test::same_bits(y, expected))
              << isa_name(isa) << " " << weight_type_name(mix[0]) << "/" << weight_type_name(mix[1]) << "/"
              << weight_type_name(mix[2]) << " tokens " << tokens << " threads " << pool->size();
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, static_cast<int>(std::size(mixes) * 2 * test::supported_isas().size() * 3));
}

// Each part of a stack writes its columns of the shared output rows through the kernel entry
// linear() uses for its type (y offset to the part's first column, the stack's rows as the
// stride), and nothing else: the other parts' columns are guard bytes while it runs.
TEST(LinearStacked, EachPartWritesOnlyItsColumns) {
  const size_t cols = 512, rows[] = {448, 64, 64}, total = 576;
  const std::vector<float> bias = random_floats(total, 5);
  size_t checked = 0;
  for (const WeightTypeInfo& info : all_weight_types()) {
    std::vector<Encoded> parts;
    for (size_t i = 0; i < 3; ++i) parts.emplace_back(info.type, rows[i], cols, static_cast<uint32_t>(10 + i));
    for (size_t tokens : {size_t{1}, size_t{7}}) {
      const std::vector<float> x = random_floats(tokens * cols, 21);
      for (Isa isa : test::supported_isas()) {
        const kernels::Kernels& k = kernels::table(isa);
        kernels::QuantizedActivations xq;
        if (info.quantized) k.quantize_activations(x.data(), cols, tokens, xq);
        test::run_row_ranges(tokens, total, {0, 448, 512, 576}, [&](float* y, size_t first, size_t end) {
          const Weight& w = parts[first == 0 ? 0 : first == 448 ? 1 : 2].w;
          if (info.quantized) {
            k.matmul_quantized_for(w.type)(w.data, bias.data() + first, xq, y + first, total, 0, end - first);
          } else {
            k.matmul_for(w.type)(w.data, bias.data() + first, x.data(), y + first, total, cols, tokens, 0, end - first);
          }
        });
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, all_weight_types().size() * 2 * test::supported_isas().size());
}

TEST(LinearSwiglu, GateUpRowOfTheInterleavedLayout) {
  // inter = 40: pairs [gate 0-15 | up 0-15], [gate 16-31 | up 16-31], [gate 32-39 | up 32-39].
  EXPECT_EQ(gate_up_row(0, 40, false), 0u);
  EXPECT_EQ(gate_up_row(15, 40, false), 15u);
  EXPECT_EQ(gate_up_row(0, 40, true), 16u);
  EXPECT_EQ(gate_up_row(15, 40, true), 31u);
  EXPECT_EQ(gate_up_row(16, 40, false), 32u);
  EXPECT_EQ(gate_up_row(31, 40, true), 63u);
  EXPECT_EQ(gate_up_row(32, 40, false), 64u);
  EXPECT_EQ(gate_up_row(39, 40, false), 71u);
  EXPECT_EQ(gate_up_row(32, 40, true), 72u);
  EXPECT_EQ(gate_up_row(39, 40, true), 79u);
  // A permutation of [0, 2 * inter) for sizes with and without a short last pair.
  for (size_t inter : {size_t{1}, size_t{16}, size_t{40}, size_t{4864}, size_t{200}}) {
    std::vector<int> hits(2 * inter);
    for (size_t r = 0; r < inter; ++r) {
      ++hits[gate_up_row(r, inter, false)];
      ++hits[gate_up_row(r, inter, true)];
    }
    EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), static_cast<long>(2 * inter)) << inter;
  }
}

// The interleaved gate/up product with its SwiGLU epilogue is bitwise two linear() calls and
// silu_mul, for every type (and a mixed pair that stays apart), at 1, 2 and 3 threads, on
// every ISA; inter 200 ends in a short pair, 4864 is Qwen2.5-0.5B's.
TEST(LinearSwiglu, BitwiseTwoProductsAndSiluMul) {
  ThreadPool p1(1), p2(2), p3(3);
  struct Shape {
    size_t inter, cols;
  };
  int compared = 0;
  int runs = 0;
  for (const Shape& sh : {Shape{200, 64}, Shape{4864, 896}, Shape{96, 32}, Shape{200, 256}}) {
    // Every type for both (from the table), then a mix.
    std::vector<std::pair<WeightType, WeightType>> pairs;
    for (const WeightTypeInfo& info : all_weight_types()) pairs.emplace_back(info.type, info.type);
    pairs.emplace_back(WeightType::Q4_0, WeightType::Q8_0);
    for (const auto& [gt, ut] : pairs) {
      // The K types' super-blocks of 256 fit only the last shape.
      if (sh.cols % weight_type_info(gt).block_elems != 0 || sh.cols % weight_type_info(ut).block_elems != 0) continue;
      runs += 2 * static_cast<int>(test::supported_isas().size()) * 3;
      const Encoded gate(gt, sh.inter, sh.cols, 31), up(ut, sh.inter, sh.cols, 32);
      GateUpWeight gu;
      gu.inter = sh.inter;
      std::vector<std::byte> fused;
      if (gt == ut) {
        // Interleaved as the loader lays it out.
        const size_t rb = gate.w.row_bytes;
        fused.resize(2 * sh.inter * rb);
        for (size_t r = 0; r < sh.inter; ++r) {
          std::memcpy(&fused[gate_up_row(r, sh.inter, false) * rb], &gate.bytes[r * rb], rb);
          std::memcpy(&fused[gate_up_row(r, sh.inter, true) * rb], &up.bytes[r * rb], rb);
        }
        gu.fused = {gt, fused.data(), 2 * sh.inter, sh.cols, rb};
      } else {
        gu.gate = gate.w;
        gu.up = up.w;
      }
      for (size_t tokens : {size_t{1}, size_t{5}}) {
        const std::vector<float> x = random_floats(tokens * sh.cols, 33);
        for (Isa isa : test::supported_isas()) {
          std::vector<float> g(tokens * sh.inter), u(tokens * sh.inter), expected(tokens * sh.inter);
          linear({&p2, &kernels::table(isa)}, gate.w, nullptr, x.data(), g.data(), tokens);
          linear({&p2, &kernels::table(isa)}, up.w, nullptr, x.data(), u.data(), tokens);
          silu_mul({&p2, &kernels::table(isa)}, g.data(), u.data(), expected.data(), expected.size());
          for (ThreadPool* pool : {&p1, &p2, &p3}) {
            test::Guarded<float> scratch(tokens * 2 * sh.inter, std::nanf("")), out(tokens * sh.inter, std::nanf(""));
            linear_swiglu({pool, &kernels::table(isa)}, gu, x.data(), scratch.data(), out.data(), tokens);
            EXPECT_TRUE(scratch.intact()) << isa_name(isa) << " gate/up scratch, inter " << sh.inter;
            EXPECT_TRUE(out.intact()) << isa_name(isa) << " act, inter " << sh.inter;
            const std::vector<float> act = out.values();
            EXPECT_TRUE(test::same_bits(act, expected))
                << isa_name(isa) << " " << weight_type_name(gt) << "/" << weight_type_name(ut) << " inter " << sh.inter
                << " tokens " << tokens << " threads " << pool->size();
            ++compared;
          }
        }
      }
    }
  }
  // The K types fit only the last shape.
  const size_t types = all_weight_types().size();
  const size_t k_types =
      static_cast<size_t>(std::count_if(all_weight_types().begin(), all_weight_types().end(),
                                        [](const WeightTypeInfo& t) { return t.block_elems == 256; }));
  EXPECT_EQ(runs, static_cast<int>((3 * (types - k_types + 1) + types + 1) * 2 * test::supported_isas().size() * 3));
  EXPECT_EQ(compared, runs);
}

}  // namespace
}  // namespace nanoinfer
