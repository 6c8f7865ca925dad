// The embedded default model (data/default-model) against the float64 reference exported by
// tools/reference/qwen2_reference.py when it was trained: the logits of the last 4 positions
// of six prompts, and 8 greedy tokens after each.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "nanoinfer/error.h"
#include "nanoinfer/model.h"
#include "nanoinfer/open_model.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

template <class T>
std::vector<T> read_tensor(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* info = f.find(name);
  if (info == nullptr) throw Error("reference tensor " + name + " missing");
  std::vector<T> out(info->nbytes() / sizeof(T));
  f.read(*info, 0, {reinterpret_cast<std::byte*>(out.data()), info->nbytes()});
  return out;
}

TEST(DefaultModel, MatchesTheFloat64ReferenceLogitsAndGreedyTokens) {
  const SafetensorsFile ref =
      SafetensorsFile::open(fs::path(NANOINFER_SOURCE_DIR) / "tests/data/models/default-model-reference.safetensors");
  // f32 weights: the stored bf16 values widened exactly, as the reference computed with them.
  const Model model = open_model_alone("", {.weights = WeightType::F32, .threads = 2, .kv_type = DType::F32});
  const size_t V = model.vocab_size();
  size_t prompts = 0, rows_checked = 0;
  for (; ref.find("prompt." + std::to_string(prompts)) != nullptr; ++prompts) {
    const std::string k = std::to_string(prompts);
    const auto prompt = read_tensor<int32_t>(ref, "prompt." + k);
    const auto expected = read_tensor<float>(ref, "logits_last4." + k);
    const size_t rows = expected.size() / V;
    Sequence seq = model.new_sequence();
    const auto logits = model.forward(prompt, seq, true);
    for (size_t r = 0; r < rows; ++r) {
      const float* got = logits.data() + (prompt.size() - rows + r) * V;
      float max_diff = 0;
      for (size_t i = 0; i < V; ++i) max_diff = std::max(max_diff, std::abs(got[i] - expected[r * V + i]));
      // The tiny-model references hold f32 logits within 2.4e-6 of float64; 1e-4 fails any
      // real error (a wrong weight moves logits by ~1e-2).
      EXPECT_LE(max_diff, 1e-4f) << "prompt " << k << " row " << r;
      ++rows_checked;
    }

    const auto greedy = read_tensor<int32_t>(ref, "greedy." + k);
    const auto margin = read_tensor<float>(ref, "greedy_margin." + k);
    Sequence g = model.new_sequence();
    auto out = model.forward(prompt, g);
    for (size_t i = 0; i < greedy.size(); ++i) {
      int32_t best = 0;
      for (size_t j = 1; j < V; ++j)
        if (out[j] > out[static_cast<size_t>(best)]) best = static_cast<int32_t>(j);
      // A near-tie in the reference (margin below the logit error) may break either way.
      if (margin[i] > 1e-3f) {
        EXPECT_EQ(best, greedy[i]) << "prompt " << k << " token " << i;
      }
      if (best != greedy[i]) break;
      out = model.forward({&best, 1}, g);
    }
  }
  EXPECT_EQ(prompts, 6u);
  EXPECT_EQ(rows_checked, 21u);  // 1 + 5 * 4
}

// The stored bf16 weights on the avx512-bf16 tier, which rounds the input of every bf16
// product to bf16 (kernels/scalar_bf16_dot.cpp). The reference computed with these weights and
// f32 activations; each rounded input (at most 2^-8 relative per element) perturbs the logits
// by about 2^-8 of their scale to first order, and these add at worst linearly, one per
// product that rounds its input: q, k, v, o, gate, up, down per layer and the head
// (tests/model/model_test.cpp derives the same bound), plus the 1e-4 the exact path is allowed. Greedy tokens must
// agree where the reference's margin exceeds twice the bound (no error within the bound can swap them).
TEST(DefaultModel, Bf16ActivationTierWithinTheDerivedBoundOfTheReference) {
  if (!isa_supported(Isa::Avx512Bf16))
    GTEST_SKIP() << "this CPU/OS lacks avx512-bf16: missing " << isa_missing(Isa::Avx512Bf16);
  const SafetensorsFile ref =
      SafetensorsFile::open(fs::path(NANOINFER_SOURCE_DIR) / "tests/data/models/default-model-reference.safetensors");
  const Model model = open_model_alone("", {.isa = Isa::Avx512Bf16, .threads = 2, .kv_type = DType::F32});
  ASSERT_EQ(model.weight_type(), WeightType::BF16);
  const double stages = 7.0 * model.config().num_hidden_layers + 1.0;
  const size_t V = model.vocab_size();
  size_t rows_checked = 0, greedy_checked = 0;
  double worst = 0;
  for (size_t p = 0; ref.find("prompt." + std::to_string(p)) != nullptr; ++p) {
    const std::string k = std::to_string(p);
    const auto prompt = read_tensor<int32_t>(ref, "prompt." + k);
    const auto expected = read_tensor<float>(ref, "logits_last4." + k);
    const size_t rows = expected.size() / V;
    Sequence seq = model.new_sequence();
    const auto logits = model.forward(prompt, seq, true);
    double bound = 0;
    for (size_t r = 0; r < rows; ++r) {
      const float* got = logits.data() + (prompt.size() - rows + r) * V;
      float scale = 0, max_diff = 0;
      for (size_t i = 0; i < V; ++i) scale = std::max(scale, std::abs(expected[r * V + i]));
      for (size_t i = 0; i < V; ++i) max_diff = std::max(max_diff, std::abs(got[i] - expected[r * V + i]));
      bound = std::ldexp(1.0, -8) * stages * scale + 1e-4;
      EXPECT_LE(max_diff, bound) << "prompt " << k << " row " << r;
      EXPECT_GT(max_diff, 0.0f) << "prompt " << k << " row " << r << ": rounding the activations changed nothing";
      worst = std::max(worst, max_diff / bound);
      ++rows_checked;
    }
    // The last row's bound stands for the greedy steps (the scale hardly moves).
    const auto greedy = read_tensor<int32_t>(ref, "greedy." + k);
    const auto margin = read_tensor<float>(ref, "greedy_margin." + k);
    Sequence g = model.new_sequence();
    auto out = model.forward(prompt, g);
    for (size_t i = 0; i < greedy.size(); ++i) {
      const auto best = static_cast<int32_t>(std::max_element(out.begin(), out.end()) - out.begin());
      if (margin[i] > 2 * bound) {
        EXPECT_EQ(best, greedy[i]) << "prompt " << k << " token " << i;
        ++greedy_checked;
      }
      if (best != greedy[i]) break;
      out = model.forward({&best, 1}, g);
    }
  }
  EXPECT_EQ(rows_checked, 21u);
  std::printf("  avx512-bf16: |logit - ref| at most %.2f of the bound; %zu greedy tokens had the margin to check\n",
              worst, greedy_checked);
}

}  // namespace
}  // namespace nanoinfer
