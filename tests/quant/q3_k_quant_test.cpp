// Q3_K's quantizers (src/quant/quantize_q3k.cpp, the Q3_K sweep of src/quant/gptq.cpp) and the
// q3_k model files: the block codec is exact, the search is never worse than round-to-nearest
// under its weighting and clearly better on average, importance steers its error, GPTQ lowers
// the output error on correlated inputs, and quantize (rtn) -> file -> load gives bitwise the
// logits of `--dtype q3_k` at load.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "base/weight_blocks.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/model.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/quantize_model.h"
#include "nanoinfer/thread_pool.h"
#include "quant/gptq.h"
#include "quant/quantize.h"
#include "support/files.h"
#include "support/random.h"

namespace nanoinfer::q3_k_quant_test {
namespace {

namespace fs = std::filesystem;
constexpr size_t kBlockBytes = sizeof(BlockQ3_K);

// Rows of random weights, a few outliers among them (every 61st weight x6).
std::vector<float> q3k_weights(size_t n, uint32_t seed) {
  std::vector<float> w = test::random_floats(n, seed);
  for (size_t i = 0; i < n; i += 61) w[i] *= 6.0f;
  return w;
}

TEST(Q3kCodec, UnpackAndPackAreExactInverses) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 64; ++trial) {
    BlockQ3_K b;
    auto* bytes = reinterpret_cast<uint8_t*>(&b);
    for (size_t i = 0; i < sizeof b; ++i) bytes[i] = static_cast<uint8_t>(rng());
    const Q3kCode c = unpack_q3_k(b);
    for (int s = 0; s < 16; ++s) ASSERT_TRUE(c.scale[s] >= -32 && c.scale[s] <= 31);
    for (size_t e = 0; e < kSuperBlock; ++e) ASSERT_TRUE(c.q[e] >= -4 && c.q[e] <= 3);
    const BlockQ3_K back = pack_q3_k(c);
    ASSERT_EQ(std::memcmp(&back, &b, sizeof b), 0) << "trial " << trial;
  }
}

TEST(Q3kSearch, NeverWorseThanRoundToNearestAndBetterOnAverage) {
  const size_t cols = 4 * kSuperBlock;
  double total_rtn = 0, total_search = 0;
  for (uint32_t seed = 0; seed < 6; ++seed) {
    const std::vector<float> w = q3k_weights(cols, seed);
    std::vector<float> a = test::random_floats(cols, seed + 100);
    for (float& x : a) x = x * x + 0.01f;  // positive importances
    for (size_t sb = 0; sb < cols / kSuperBlock; ++sb) {
      const float* ws = w.data() + sb * kSuperBlock;
      const float* as = a.data() + sb * kSuperBlock;
      std::vector<std::byte> rtn(kBlockBytes), searched(kBlockBytes);
      quantize_row(WeightType::Q3_K, ws, rtn.data(), kSuperBlock);
      quantize_row_search(WeightType::Q3_K, ws, as, searched.data(), kSuperBlock);
      const double e_rtn = weighted_row_error(WeightType::Q3_K, ws, as, rtn.data(), kSuperBlock);
      const double e_search = weighted_row_error(WeightType::Q3_K, ws, as, searched.data(), kSuperBlock);
      EXPECT_LE(e_search, e_rtn * (1 + 1e-9)) << "seed " << seed << " super-block " << sb;
      total_rtn += e_rtn;
      total_search += e_search;
    }
  }
  EXPECT_LT(total_search, 0.85 * total_rtn) << total_search << " vs " << total_rtn;
}

// Importance 100 on the first half of each sub-block, 1 on the second: the search moves error
// off the important weights, compared with the uniform search.
TEST(Q3kSearch, ImportanceSteersTheError) {
  const size_t cols = 8 * kSuperBlock;
  const std::vector<float> w = q3k_weights(cols, 7);
  std::vector<float> a(cols);
  for (size_t i = 0; i < cols; ++i) a[i] = i % 16 < 8 ? 100.0f : 1.0f;
  std::vector<std::byte> weighted(cols / kSuperBlock * kBlockBytes), uniform(weighted.size());
  quantize_row_search(WeightType::Q3_K, w.data(), a.data(), weighted.data(), cols);
  quantize_row_search(WeightType::Q3_K, w.data(), nullptr, uniform.data(), cols);
  const auto important_error = [&](const std::vector<std::byte>& row) {
    std::vector<float> back(cols);
    dequantize_row(WeightType::Q3_K, row.data(), back.data(), cols);
    double e = 0;
    for (size_t i = 0; i < cols; ++i)
      if (i % 16 < 8) e += (w[i] - back[i]) * (w[i] - back[i]);
    return e;
  };
  EXPECT_LT(important_error(weighted), 0.8 * important_error(uniform));
  // All-zero importance is the uniform search.
  const std::vector<float> zero(cols, 0.0f);
  std::vector<std::byte> zero_row(weighted.size());
  quantize_row_search(WeightType::Q3_K, w.data(), zero.data(), zero_row.data(), cols);
  EXPECT_EQ(zero_row, uniform);
}

// x: [n][dim] with correlated columns (random z mixed by a random matrix), and its Gram matrix
// as GPTQ reads it (packed lower triangle) with its diagonal.
struct Q3kInputs {
  std::vector<float> x, h, diag;
};
Q3kInputs q3k_inputs(size_t n, size_t dim, uint32_t seed) {
  const std::vector<float> z = test::random_floats(n * dim, seed), mix = test::random_floats(dim * dim, seed + 1);
  Q3kInputs p;
  p.x.assign(n * dim, 0.0f);
  for (size_t t = 0; t < n; ++t)
    for (size_t k = 0; k < dim; ++k)
      for (size_t c = 0; c < dim; ++c) p.x[t * dim + c] += z[t * dim + k] * (mix[k * dim + c] + (k == c ? 2.0f : 0.0f));
  p.h.assign(gram_packed_size(dim), 0.0f);
  for (size_t a = 0; a < dim; ++a)
    for (size_t b = 0; b <= a; ++b) {
      double s = 0;
      for (size_t t = 0; t < n; ++t) s += static_cast<double>(p.x[t * dim + a]) * p.x[t * dim + b];
      p.h[gram_at(a, b)] = static_cast<float>(s);
    }
  for (size_t i = 0; i < dim; ++i) p.diag.push_back(p.h[gram_at(i, i)]);
  return p;
}

TEST(Q3kGptq, LowersTheOutputErrorOnCorrelatedInputs) {
  ThreadPool pool(2);
  const size_t n = 384, cols = 2 * kSuperBlock, rows = 8;
  const Q3kInputs in = q3k_inputs(n, cols, 9);
  const GptqFactor f = gptq_factor(in.h.data(), cols, pool, best_isa());
  const std::vector<float> w = q3k_weights(rows * cols, 13);
  const size_t rb = weight_row_bytes(WeightType::Q3_K, cols);
  std::vector<std::byte> q_rtn(rows * rb), q_search(rows * rb), q_gptq(rows * rb);
  for (size_t r = 0; r < rows; ++r) {
    quantize_row(WeightType::Q3_K, w.data() + r * cols, q_rtn.data() + r * rb, cols);
    quantize_row_search(WeightType::Q3_K, w.data() + r * cols, in.diag.data(), q_search.data() + r * rb, cols);
  }
  gptq_quantize_rows(WeightType::Q3_K, w.data(), rows, cols, f, in.diag.data(), q_gptq.data());
  const auto output_error = [&](const std::vector<std::byte>& q) {
    std::vector<float> back(cols);
    double e = 0;
    for (size_t r = 0; r < rows; ++r) {
      dequantize_row(WeightType::Q3_K, q.data() + r * rb, back.data(), cols);
      for (size_t t = 0; t < n; ++t) {
        double dot = 0;
        for (size_t c = 0; c < cols; ++c) dot += (w[r * cols + c] - static_cast<double>(back[c])) * in.x[t * cols + c];
        e += dot * dot;
      }
    }
    return e;
  };
  const double e_rtn = output_error(q_rtn), e_search = output_error(q_search), e_gptq = output_error(q_gptq);
  std::printf("  q3_k output error: rtn %.4g, search %.4g, gptq %.4g\n", e_rtn, e_search, e_gptq);
  EXPECT_LT(e_gptq, 0.7 * e_rtn);
  EXPECT_LT(e_gptq, 0.7 * e_search);
}

// The default model (hidden 256: every matrix is whole super-blocks) quantized to q3_k (rtn)
// and loaded gives bitwise the logits of quantizing it at load; asking for q3_k again on the
// file keeps its blocks.
TEST(Q3kFile, FileEqualsQuantizeAtLoadBitwise) {
  const fs::path dir = test::default_model_dir();
  const test::TempDir tmp;
  QuantizeOptions o;
  o.type = WeightType::Q3_K;
  o.method = QuantMethod::Rtn;
  quantize_model(dir.string(), tmp / "q", o);
  const std::vector<int32_t> tokens = {1, 7, 42, 100, 3, 3, 250, 17, 9, 64, 128, 5};
  const auto logits = [&](const fs::path& d, std::optional<WeightType> type) {
    ModelOptions mo;
    mo.weights = type;
    mo.threads = 2;
    const Model model = open_model_alone(d, mo);
    Sequence seq = model.new_sequence();
    const auto out = model.forward(tokens, seq, true);
    return std::vector<float>(out.begin(), out.end());
  };
  const std::vector<float> at_load = logits(dir, WeightType::Q3_K), from_file = logits(tmp / "q", std::nullopt),
                           again = logits(tmp / "q", WeightType::Q3_K);
  ASSERT_EQ(at_load.size(), from_file.size());
  EXPECT_EQ(std::memcmp(at_load.data(), from_file.data(), at_load.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(again.data(), from_file.data(), again.size() * sizeof(float)), 0);
  for (float v : from_file) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace nanoinfer::q3_k_quant_test
