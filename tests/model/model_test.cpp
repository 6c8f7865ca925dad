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

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "kernels/kernels.h"
#include "nanoinfer/error.h"
#include "nanoinfer/model.h"
#include "nanoinfer/open_model.h"
#include "support/checks.h"
#include "support/files.h"
#include "support/isa.h"

namespace nanoinfer {
namespace {

using test::argmax;

namespace fs = std::filesystem;
// How a test asks for the matrices to be held: the file's type, or a conversion at load.
struct WeightMode {
  static constexpr std::optional<WeightType> AsStored{};
  static constexpr std::optional<WeightType> F32{WeightType::F32};
  static constexpr std::optional<WeightType> BF16{WeightType::BF16};
};
using Weights = std::optional<WeightType>;

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

Model load(const fs::path& dir, Weights mode, int threads = 2, std::optional<Isa> isa = {}) {
  ModelOptions opts;
  opts.weights = mode;
  opts.threads = threads;
  opts.isa = isa;
  opts.kv_type = DType::F32;  // the references keep K and V in f32
  return open_model_alone(dir, opts);
}

std::vector<float> all_logits(const Model& model, const std::vector<int32_t>& tokens, Tap tap = {}) {
  Sequence cache = model.new_sequence();
  cache.set_tap(std::move(tap));
  auto out = model.forward(tokens, cache, true);
  return {out.begin(), out.end()};
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Prompt then n greedy tokens decoded one at a time through the cache.
std::vector<int32_t> greedy(Model& model, const std::vector<int32_t>& prompt, size_t n) {
  Sequence cache = model.new_sequence();
  std::vector<int32_t> out;
  int32_t next = argmax(model.forward(prompt, cache));
  for (size_t i = 0; i < n; ++i) {
    out.push_back(next);
    if (i + 1 < n) next = argmax(model.forward({&next, 1}, cache));
  }
  return out;
}

// A model whose file is stored as f32 (the bf16-rounded reference exists only for those).
bool stored_f32(const Reference& ref) {
  return ref.has("logits_bf16w.0");
}

TEST(ModelReference, FindsTheTinyModels) {
  const auto dirs = test::tiny_model_dirs();
  ASSERT_GE(dirs.size(), 3u);
  for (const auto& dir : dirs) EXPECT_GE(Reference(dir).prompts(), 5u) << dir;
}

// The exact path: every logit at every position of every prompt within 1e-4 of float64.
TEST(ModelReference, F32LogitsWithin1e4AtEveryPosition) {
  for (const auto& dir : test::tiny_model_dirs()) {
    const Reference ref(dir);
    Model model = load(dir, WeightMode::F32);
    EXPECT_EQ(model.weight_type(), WeightType::F32);
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
  for (const auto& dir : test::tiny_model_dirs()) {
    const Reference ref(dir);
    Model model = load(dir, WeightMode::F32);
    const size_t H = static_cast<size_t>(model.config().hidden_size);
    const size_t n_layers = static_cast<size_t>(model.config().num_hidden_layers);
    std::map<std::string, std::vector<float>> taps;
    const Tap tap = [&](const TapEvent& e) {
      if (e.name != "layer_out" && e.name != "final_norm") return;
      const std::string key = e.name == "final_norm" ? "final_norm" : "layer." + std::to_string(e.layer);
      auto& v = taps[key];
      v.insert(v.end(), e.data, e.data + e.n_tokens * e.dim);
    };
    std::vector<float> drift(n_layers + 1, 0.0f);
    for (size_t k = 0; k < ref.prompts(); ++k) {
      taps.clear();
      const auto K = std::to_string(k);
      all_logits(model, ref.ints("prompt." + K), tap);
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
  for (const auto& dir : test::tiny_model_dirs()) {
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
// The reference keeps activations in f32, so this pins a tier whose bf16 product does too
// (avx512-bf16 rounds them; its bound is in the tests below).
TEST(ModelReference, Bf16LogitsMatchTheBf16RoundedReference) {
  for (const auto& dir : test::tiny_model_dirs()) {
    const Reference ref(dir);
    const bool f32_file = stored_f32(ref);
    Model model = load(dir, f32_file ? WeightMode::BF16 : WeightMode::AsStored, 2, test::exact_activation_isa());
    EXPECT_EQ(model.weight_type(), WeightType::BF16);
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

// The bf16 model against the exact f32 one. Rounding to bf16 (8 significant bits, nearest
// even) changes each weight by at most 2^-9 relative. To first order each rounded matrix on the
// path from token to logit (embedding, 7 per layer, head) perturbs the logits by about 2^-9 of
// their scale, and the perturbations add at worst linearly, so
//     |logit_bf16 - logit_f32| <= 2^-9 * (2 + 7 * n_layers) * max|logit|.
// Independent rounding errors add in quadrature instead, so the observed error is several
// times below this bound (e.g. 0.039 against 0.13 for tiny-gqa7); a path that rounded wrongly
// (truncation biases every weight) or widened garbage would land far above it.
//
// The avx512-bf16 tier also rounds the input of every bf16 product to bf16, each element by
// at most 2^-8 relative (half an ulp at 8 significant bits; kernels/scalar_bf16_dot.cpp). By
// the same first-order argument each product whose input it rounds (q, k, v, o, gate, up,
// down per layer, and the head) adds a stage of 2^-8 * max|logit|:
//     |logit - logit_f32| <= (2^-9 * (2 + 7 * n_layers) + 2^-8 * (7 * n_layers + 1)) * max|logit|.
// (q, k and v round the same input identically, so counting them apart only loosens it.)
// Both tiers are held to their bound.
double bf16_activation_stages(const Model& model) {
  return 7.0 * static_cast<double>(model.config().num_hidden_layers) + 1.0;
}
// 2^-8 * stages * scale: the activation rounding's share of the logit bound.
float activation_bound(double stages, float scale) {
  return static_cast<float>(std::ldexp(1.0, -8) * stages * scale);
}

std::vector<Isa> bf16_isas_here() {
  std::vector<Isa> isas = {test::exact_activation_isa()};
  if (isa_supported(Isa::Avx512Bf16)) {
    isas.push_back(Isa::Avx512Bf16);
  } else {
    std::printf("  avx512-bf16 not supported here (missing %s): its bound is not exercised\n",
                isa_missing(Isa::Avx512Bf16).c_str());
  }
  return isas;
}

TEST(ModelReference, Bf16LogitsWithinTheDerivedBoundOfTheExactModel) {
  for (Isa isa : bf16_isas_here()) {
    for (const auto& dir : test::tiny_model_dirs()) {
      const Reference ref(dir);
      if (!stored_f32(ref)) continue;  // a bf16 file's exact model is its bf16 model
      Model model = load(dir, WeightMode::BF16, 2, isa);
      const double stages = 2.0 + 7.0 * static_cast<double>(model.config().num_hidden_layers);
      float worst = 0.0f;
      for (size_t k = 0; k < ref.prompts(); ++k) {
        const auto K = std::to_string(k);
        const auto exact = ref.floats("logits." + K);
        float scale = 0.0f;
        for (float v : exact) scale = std::max(scale, std::abs(v));
        float bound = static_cast<float>(std::ldexp(1.0, -9) * stages * scale);
        if (isa == Isa::Avx512Bf16) bound += activation_bound(bf16_activation_stages(model), scale);
        const float d = max_abs_diff(all_logits(model, ref.ints("prompt." + K)), exact);
        EXPECT_LE(d, bound) << dir.filename() << " prompt " << k << " on " << isa_name(isa);
        EXPECT_GT(d, 0.0f) << "bf16 rounding changed nothing: was the model really narrowed?";
        worst = std::max(worst, d / bound);
      }
      std::printf("  %-12s %-11s bf16 |logit - exact| at most %.2f of the bound\n", dir.filename().c_str(),
                  std::string(isa_name(isa)).c_str(), worst);
    }
  }
}

// The activation rounding alone: the avx512-bf16 tier against the exact-activation tier on
// the same bf16 weights, within 2^-8 * (7 * n_layers + 1) * max|logit| (the stages above).
// It must change something (d > 0), and the bound would catch a product that dropped or
// garbled its activations.
TEST(ModelReference, Bf16ActivationRoundingWithinItsDerivedBound) {
  if (!isa_supported(Isa::Avx512Bf16))
    GTEST_SKIP() << "this CPU/OS lacks avx512-bf16: missing " << isa_missing(Isa::Avx512Bf16);
  for (const auto& dir : test::tiny_model_dirs()) {
    const Reference ref(dir);
    const Weights mode = stored_f32(ref) ? WeightMode::BF16 : WeightMode::AsStored;
    Model exact = load(dir, mode, 2, test::exact_activation_isa()), rounded = load(dir, mode, 2, Isa::Avx512Bf16);
    ASSERT_EQ(rounded.weight_type(), WeightType::BF16);
    float worst = 0.0f;
    for (size_t k = 0; k < ref.prompts(); ++k) {
      const auto tokens = ref.ints("prompt." + std::to_string(k));
      const auto want = all_logits(exact, tokens);
      float scale = 0.0f;
      for (float v : want) scale = std::max(scale, std::abs(v));
      const float bound = activation_bound(bf16_activation_stages(exact), scale);
      const float d = max_abs_diff(all_logits(rounded, tokens), want);
      EXPECT_LE(d, bound) << dir.filename() << " prompt " << k;
      EXPECT_GT(d, 0.0f) << dir.filename() << ": rounding the activations changed nothing";
      worst = std::max(worst, d / bound);
    }
    std::printf("  %-12s bf16 activations: |logit change| at most %.2f of the bound\n", dir.filename().c_str(), worst);
  }
}

// The logits of every position of `tokens`, pushed through one cache in chunks of the given
// sizes (which sum to tokens.size()). Also checks the work counter advances by exactly n.
std::vector<float> chunked_logits(Model& model, const std::vector<int32_t>& tokens, const std::vector<size_t>& chunks) {
  Sequence cache = model.new_sequence();
  std::vector<float> out;
  const uint64_t before = model.positions_pushed();
  size_t begin = 0;
  for (size_t c : chunks) {
    EXPECT_EQ(cache.length(), begin);
    auto logits = model.forward(std::span(tokens).subspan(begin, c), cache, true);
    out.insert(out.end(), logits.begin(), logits.end());
    begin += c;
  }
  EXPECT_EQ(begin, tokens.size());
  EXPECT_EQ(model.positions_pushed() - before, tokens.size());
  return out;
}

// Five chunkings of the same tokens (the longest prompt plus its greedy continuation) give the
// same logits at every position. Every op computes a row the same way whatever the batch
// (the kernels promise batched == per-token bitwise; attention and norms are per row), so
// they are bitwise equal, which is what is asserted (stronger than the 1e-5 asked for).
TEST(ModelCache, FiveChunkingsGiveBitwiseIdenticalLogits) {
  for (const auto& dir : test::tiny_model_dirs()) {
    const Reference ref(dir);
    for (Weights mode : {WeightMode::F32, WeightMode::AsStored}) {
      Model model = load(dir, mode);
      std::vector<int32_t> tokens = ref.ints("prompt.4");
      const size_t p = tokens.size();
      const auto cont = ref.ints("greedy.4");
      tokens.insert(tokens.end(), cont.begin(), cont.end());
      const size_t n = tokens.size();
      ASSERT_GE(p, 32u);

      const std::map<std::string, std::vector<size_t>> chunkings = {
          {"all at once", {n}},
          {"one at a time", std::vector<size_t>(n, 1)},
          {"prompt then decode",
           [&] {
             std::vector<size_t> c{p};
             c.resize(1 + n - p, 1);
             return c;
           }()},
          {"halves", {n / 2, n - n / 2}},
          {"ragged", {1, 7, 3, 19, 2, 11, n - 43}},
      };
      const auto expected = chunked_logits(model, tokens, {n});
      for (const auto& [name, chunks] : chunkings) {
        const auto got = chunked_logits(model, tokens, chunks);
        EXPECT_TRUE(test::same_bits(got, expected))
            << dir.filename() << " " << name << ": max diff " << max_abs_diff(got, expected);
      }
      // The greedy continuation read off the logits of the prompt's last position onwards.
      const size_t V = model.vocab_size();
      for (size_t i = 0; i < cont.size(); ++i) {
        EXPECT_EQ(argmax(std::span(expected).subspan((p - 1 + i) * V, V)), cont[i]) << dir.filename() << " step " << i;
      }
    }
  }
}

// Inputs longer than max_batch are split inside forward(); the result is the same.
TEST(ModelCache, InternalChunkingMatchesOneBatch) {
  const fs::path dir = test::tiny_models_dir() / "tiny-untied";
  const auto tokens = Reference(dir).ints("prompt.4");
  Model whole = load(dir, WeightMode::AsStored);
  ModelOptions opts;
  opts.max_batch = 5;
  opts.kv_type = DType::F32;  // as load()
  Model split = open_model_alone(dir, opts);
  EXPECT_TRUE(test::same_bits(all_logits(split, tokens), all_logits(whole, tokens)));
  Sequence a = whole.new_sequence(), b = split.new_sequence();
  auto last_whole = whole.forward(tokens, a);
  const std::vector<float> last(last_whole.begin(), last_whole.end());
  auto last_split = split.forward(tokens, b);
  EXPECT_TRUE(test::same_bits({last_split.begin(), last_split.end()}, last));
}

// Work is counted exactly: a prompt of p then n cached decode steps push p + n positions.
TEST(ModelCache, CachedDecodePushesPromptPlusDecodedPositions) {
  const fs::path dir = test::tiny_models_dir() / "tiny-gqa7";
  const auto prompt = Reference(dir).ints("prompt.2");
  Model model = load(dir, WeightMode::AsStored);
  EXPECT_EQ(model.positions_pushed(), 0u);
  const size_t n = 10;
  greedy(model, prompt, n);
  // greedy() decodes n-1 steps after the prompt (the n-th token is read off the last logits).
  EXPECT_EQ(model.positions_pushed(), prompt.size() + n - 1);
}

// Reusing a cache prefix (what chat does across turns) equals recomputing it.
TEST(ModelCache, TruncateThenExtendEqualsFreshPrefix) {
  const fs::path dir = test::tiny_models_dir() / "tiny-untied";
  const auto tokens = Reference(dir).ints("prompt.3");
  Model model = load(dir, WeightMode::AsStored);
  const auto fresh = all_logits(model, tokens);
  Sequence cache = model.new_sequence();
  model.forward(std::span(tokens).first(20), cache);
  const std::vector<int32_t> detour = {5, 6, 7};
  model.forward(detour, cache);
  cache.cache().truncate(20);
  auto rest = model.forward(std::span(tokens).subspan(20), cache, true);
  const size_t V = model.vocab_size();
  EXPECT_TRUE(test::same_bits({rest.begin(), rest.end()}, {fresh.begin() + 20 * V, fresh.end()}));
}

// Rows are split across threads but each element is computed the same way: bitwise equal.
TEST(ModelThreads, LogitsBitwiseIdenticalAt1To3Threads) {
  for (const auto& dir : test::tiny_model_dirs()) {
    const auto tokens = Reference(dir).ints("prompt.4");
    for (Weights mode : {WeightMode::F32, WeightMode::BF16}) {
      Model one = load(dir, mode, 1);
      const auto expected = all_logits(one, tokens);
      for (int threads : {2, 3}) {
        Model model = load(dir, mode, threads);
        EXPECT_EQ(model.threads(), threads);
        EXPECT_TRUE(test::same_bits(all_logits(model, tokens), expected)) << dir.filename() << " at " << threads;
      }
    }
  }
}

// Every instruction set this machine can run, on the f32 and bf16 paths: within 1e-4 of the
// reference, except avx512-bf16 on bf16 weights, which rounds activations and is held to
// their derived bound (above).
TEST(ModelIsa, EverySupportedIsaMatchesTheReference) {
  int tested = 0;
  for (Isa isa : all_isas()) {
    if (!isa_supported(isa)) {
      std::printf("  %s: not supported here, skipped\n", std::string(isa_name(isa)).c_str());
      continue;
    }
    for (const char* name : {"tiny-gqa7", "tiny-bf16"}) {
      const fs::path dir = test::tiny_models_dir() / name;
      const Reference ref(dir);
      Model model = load(dir, WeightMode::AsStored, 2, isa);
      EXPECT_EQ(model.isa(), isa);
      const auto expected = ref.floats("logits.4");
      const float d = max_abs_diff(all_logits(model, ref.ints("prompt.4")), expected);
      float bound = 1e-4f;
      if (isa == Isa::Avx512Bf16 && model.weight_type() == WeightType::BF16) {
        float scale = 0.0f;
        for (float v : expected) scale = std::max(scale, std::abs(v));
        bound = activation_bound(bf16_activation_stages(model), scale);
      }
      EXPECT_LE(d, bound) << name << " on " << isa_name(isa);
    }
    ++tested;
  }
  EXPECT_GE(tested, 1);
}

TEST(ModelErrors, PromptLongerThanTheContextLeavesTheCacheUntouched) {
  Model model = load(test::tiny_models_dir() / "tiny-bf16", WeightMode::AsStored);
  Sequence cache = model.new_sequence(16);
  const std::vector<int32_t> tokens(17, 3);
  try {
    model.forward(tokens, cache);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("17 tokens do not fit in the context: 0 of 16"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(cache.length(), 0u);
  model.forward(std::span(tokens).first(10), cache);
  EXPECT_THROW(model.forward(std::span(tokens).first(7), cache), Error);
  EXPECT_EQ(cache.length(), 10u);
  model.forward(std::span(tokens).first(6), cache);  // exactly fills it
  EXPECT_EQ(cache.length(), 16u);
  EXPECT_EQ(model.positions_pushed(), 16u);
  EXPECT_THROW(model.new_sequence(model.max_context() + 1), Error);
}

TEST(ModelErrors, TokenIdOutOfRange) {
  Model model = load(test::tiny_models_dir() / "tiny-bf16", WeightMode::AsStored);
  Sequence cache = model.new_sequence();
  for (int32_t bad : {-1, static_cast<int32_t>(model.vocab_size())}) {
    const std::vector<int32_t> tokens = {1, 2, bad};
    try {
      model.forward(tokens, cache);
      FAIL() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("token id {} at index 2 is out of range", bad)),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(cache.length(), 0u);
  EXPECT_EQ(model.positions_pushed(), 0u);
  EXPECT_THROW(model.forward(std::span<const int32_t>(), cache), Error);
}

TEST(ModelErrors, MissingFilesAndTensorsAreNamed) {
  const fs::path src = test::tiny_models_dir() / "tiny-untied";
  test::TempDir tmp;
  auto expect_error = [](const fs::path& dir, const std::string& needle) {
    try {
      open_model_alone(dir);
      ADD_FAILURE() << "no error, expected: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(tmp / "nowhere", "not a model directory");
  expect_error(tmp.path(), "config.json: not found");
  fs::copy_file(src / "config.json", tmp / "config.json");
  expect_error(tmp.path(), "model.safetensors: not found");

  // Every tensor but lm_head.weight (required: this model's embeddings are untied).
  const SafetensorsFile file = SafetensorsFile::open(src / "model.safetensors");
  SafetensorsWriter writer(tmp / "model.safetensors");
  for (const auto& info : file.tensors()) {
    if (info.name == "lm_head.weight") continue;
    const TensorView v = file.view(info);
    writer.add(info.name, info.dtype, info.shape, std::span(v.data, v.nbytes()));
  }
  writer.write();
  expect_error(tmp.path(), "missing tensor 'lm_head.weight'");
}

TEST(ModelErrors, CacheOfAnotherModelIsRefused) {
  Model a = load(test::tiny_models_dir() / "tiny-bf16", WeightMode::AsStored);
  Model b = load(test::tiny_models_dir() / "tiny-untied", WeightMode::AsStored);
  Sequence cache = b.new_sequence();
  const std::vector<int32_t> tokens = {1, 2};
  EXPECT_THROW(a.forward(tokens, cache), Error);
  EXPECT_EQ(cache.length(), 0u);
}

// The counters the benchmarks divide by.
TEST(ModelLoad, WeightBytesFollowTheStoredTypes) {
  const fs::path dir = test::tiny_models_dir() / "tiny-untied";  // f32 file, untied head
  Model f32 = load(dir, WeightMode::AsStored);
  Model bf16 = load(dir, WeightMode::BF16);
  const ModelConfig& c = f32.config();
  const size_t H = c.hidden_size, I = c.intermediate_size, KV = c.kv_dim(), V = c.vocab_size, L = c.num_hidden_layers;
  const size_t matrices = 2 * V * H + L * (2 * H * H + 2 * KV * H + 3 * I * H);
  const size_t vectors = H + L * (2 * H + H + 2 * KV);  // norms and biases, always f32
  EXPECT_EQ(f32.weight_bytes(), 4 * matrices + 4 * vectors);
  EXPECT_EQ(bf16.weight_bytes(), 2 * matrices + 4 * vectors);
  // A decode step reads everything but the embedding table, of which it reads one row.
  EXPECT_EQ(f32.bytes_per_token(), 4 * (matrices - V * H + H) + 4 * vectors);
  EXPECT_EQ(bf16.bytes_per_token(), 2 * (matrices - V * H + H) + 4 * vectors);
  Model moved = std::move(f32);
  EXPECT_EQ(moved.vocab_size(), V);
}

}  // namespace
}  // namespace nanoinfer
