// The embedded default model (data/default-model) against the float64 reference exported by
// tools/reference/qwen2_reference.py when it was trained: the logits of the last 4 positions
// of six prompts, and 8 greedy tokens after each.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "nanoinfer/engine.h"
#include "nanoinfer/error.h"
#include "nanoinfer/model.h"

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
  const Model model = Model::load(default_model_dir(), {.weights = WeightType::F32, .threads = 2});
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

}  // namespace
}  // namespace nanoinfer
