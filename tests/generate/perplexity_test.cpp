// Perplexity: the protocol's counting, two models whose answer is known exactly (uniform
// output scores the vocabulary size, certainty scores 1), the embedded default model against
// the float64 reference, and the `perplexity` command.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/safetensors_writer.h"
#include "model/manifest.h"
#include "nanoinfer/config.h"
#include "nanoinfer/error.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/perplexity.h"
#include "nanoinfer/tokenizer.h"
#include "support/files.h"
#include "support/isa.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

constexpr size_t kHidden = 64;

std::string config_json(size_t vocab) {
  return fmt::format(R"({{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": {},
  "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "vocab_size": {}, "max_position_embeddings": 256, "rope_theta": 10000.0, "rms_norm_eps": 1e-06,
  "torch_dtype": "float32", "tie_word_embeddings": true}})",
                     kHidden, vocab);
}

// Writes a model directory whose every tensor is zero except the norm weights (one), then
// lets `edit` change tensors by name: [numel] floats, row-major.
void write_model(const fs::path& dir, size_t vocab,
                 const std::function<void(const std::string&, std::vector<float>&)>& edit = {}) {
  fs::create_directories(dir);
  const std::string json = config_json(vocab);
  test::write_text(dir / "config.json", json);
  const ModelConfig cfg = ModelConfig::parse(json, "test config");
  std::vector<std::vector<float>> data;
  SafetensorsWriter writer(dir / "model.safetensors");
  for (const TensorSpec& spec : tensor_manifest(cfg)) {
    if (!spec.required) continue;
    size_t numel = 1;
    for (uint64_t d : spec.shape) numel *= d;
    auto& v = data.emplace_back(numel, spec.role == TensorRole::Norm ? 1.0f : 0.0f);
    if (edit) edit(spec.name, v);
    writer.add(spec.name, DType::F32, spec.shape, std::as_bytes(std::span(v)));
  }
  writer.write();
}

// All weights zero: the stream is zero, so every logit is 0 and the output uniform.
void write_uniform_model(const fs::path& dir, size_t vocab) {
  write_model(dir, vocab);
}

// All layer weights zero, so the residual stream stays the token's embedding. Only `token`
// has a non-zero embedding (1 on dimension 0) and the final norm scales dimension 0 by 100:
// the normed stream is [sqrt(64) * 100, 0, ...], the tied head gives `token` a logit of 800
// and every other token 0. exp(-800) underflows to 0 even in double, so log p(token) is
// exactly 0.
void write_certain_model(const fs::path& dir, size_t vocab, int32_t token) {
  write_model(dir, vocab, [&](const std::string& name, std::vector<float>& v) {
    if (name == "model.embed_tokens.weight") v[static_cast<size_t>(token) * kHidden] = 1.0f;
    if (name == "model.norm.weight") v[0] = 100.0f;
  });
}

std::vector<int32_t> some_tokens(size_t n, size_t vocab) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 7919 + 13) % vocab);
  return t;
}

Model load_f32(const fs::path& dir) {
  ModelOptions opts;
  opts.threads = 2;
  opts.kv_type = DType::F32;  // the reference keeps K and V in f32
  return open_model_alone(dir, opts);
}

TEST(Perplexity, UniformOutputScoresTheVocabularySize) {
  test::TempDir tmp;
  const size_t vocab = 300;
  write_uniform_model(tmp.path(), vocab);
  Model model = load_f32(tmp.path());
  const PerplexityResult r = perplexity(model, some_tokens(100, vocab), 32);
  // Each token's NLL is log(300) computed once and summed 97 times; only the sum and the
  // exponential round, so the result is the vocabulary size to within a few ulps.
  EXPECT_NEAR(r.perplexity, 300.0, 1e-12 * 300.0) << r.perplexity;
  EXPECT_NEAR(r.mean_nll, std::log(300.0), 1e-14);
  EXPECT_NEAR(r.perplexity_stderr, 0.0, 1e-9);
}

TEST(Perplexity, CertainModelScoresExactlyOne) {
  test::TempDir tmp;
  const size_t vocab = 300;
  const int32_t token = 123;
  write_certain_model(tmp.path(), vocab, token);
  Model model = load_f32(tmp.path());
  const std::vector<int32_t> tokens(70, token);
  const PerplexityResult r = perplexity(model, tokens, 16);
  EXPECT_EQ(r.nll_sum, 0.0);
  EXPECT_EQ(r.perplexity, 1.0);  // bitwise: exp(0)
  EXPECT_EQ(r.perplexity_stderr, 0.0);
  // The same model is maximally wrong about any other next token. Put token 7 at index 5:
  // it is scored after token 123 (logit ~800 against 0: NLL = that logit), and token 6 is
  // scored after token 7, whose zero embedding gives uniform logits (NLL = log 300).
  std::vector<int32_t> wrong(tokens);
  wrong[5] = 7;
  const double logit = 100.0 / std::sqrt(1.0 / 64 + 1e-6);  // rmsnorm's eps shaves 0.026 off 800
  const PerplexityResult w = perplexity(model, wrong, 16);
  EXPECT_NEAR(w.nll_sum, logit + std::log(300.0), 1e-3);  // f32 logits near 800: ulp 6e-5
}

// A model whose logits overflow for one token only: that token's embedding is 1 on
// dimension 0 and the final norm scales dimension 0 by 3e38, so the normed stream is +inf
// there and its logits are inf (itself) and NaN (inf x 0, every other token). Every other
// token's embedding is zero and scores uniformly. The position is named; before, this
// printed "perplexity nan" and exited 0.
TEST(Perplexity, NonFiniteLogitsAreAnErrorNamingThePosition) {
  test::TempDir tmp;
  const size_t vocab = 300;
  const int32_t token = 123;
  write_model(tmp.path(), vocab, [&](const std::string& name, std::vector<float>& v) {
    if (name == "model.embed_tokens.weight") v[static_cast<size_t>(token) * kHidden] = 1.0f;
    if (name == "model.norm.weight") v[0] = 3e38f;
  });
  Model model = load_f32(tmp.path());
  std::vector<int32_t> tokens = some_tokens(40, vocab);
  for (int32_t& t : tokens) t = t == token ? token + 1 : t;
  EXPECT_NO_THROW(perplexity(model, tokens, 16));
  tokens[20] = token;  // window 2 covers [16, 32): position 4; its logits score token 21
  try {
    perplexity(model, tokens, 16);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "perplexity: the model produced non-finite logits at token 20 (window 2, position 4)");
  }
}

// Windows: [0, ctx), [ctx, 2 ctx), ...; the last may be shorter, and one of a single token
// scores nothing. Each window's first token is not scored.
TEST(Perplexity, WindowsAndScoredTokensAreCountedExactly) {
  test::TempDir tmp;
  write_uniform_model(tmp.path(), 50);
  Model model = load_f32(tmp.path());
  struct Case {
    size_t n, ctx, windows, scored;
  };
  for (const Case c :
       {Case{37, 10, 4, 33}, Case{31, 10, 3, 27}, Case{30, 10, 3, 27}, Case{2, 10, 1, 1}, Case{300, 256, 2, 298}}) {
    const uint64_t before = model.positions_pushed();
    const PerplexityResult r = perplexity(model, some_tokens(c.n, 50), c.ctx);
    EXPECT_EQ(r.windows, c.windows) << c.n << "/" << c.ctx;
    EXPECT_EQ(r.scored, c.scored) << c.n << "/" << c.ctx;
    EXPECT_EQ(r.tokens, c.n);
    // Every token is pushed once, except a trailing single-token window.
    EXPECT_EQ(model.positions_pushed() - before, c.n - (c.n % c.ctx == 1 ? 1 : 0)) << c.n << "/" << c.ctx;
  }
  EXPECT_THROW(perplexity(model, some_tokens(10, 50), 1), Error);
  EXPECT_THROW(perplexity(model, some_tokens(10, 50), 257), Error);
  EXPECT_THROW(perplexity(model, some_tokens(1, 50), 8), Error);
  EXPECT_THROW(perplexity(model, std::vector<int32_t>{1, 2, 50}, 8), Error);
}

// llama-perplexity's scoring: whole windows only, each scoring the tokens after its first
// ctx/2. With ctx 16 a window scores positions 8..14 (tokens 9..15): 7 tokens. The certain
// model costs nothing on its token and exactly its logit on any other, so which tokens were
// scored is read off the sum.
TEST(Perplexity, SecondHalfScoringScoresOnlyTheSecondHalfOfWholeWindows) {
  test::TempDir tmp;
  const size_t vocab = 300;
  const int32_t token = 123;
  write_certain_model(tmp.path(), vocab, token);
  Model model = load_f32(tmp.path());
  std::vector<int32_t> tokens(70, token);  // 4 whole windows of 16; the last 6 tokens dropped
  tokens[5] = 7;                           // scored by position 4 of window 1: first half, not scored
  tokens[66] = 7;                          // in the dropped tail
  const uint64_t before = model.positions_pushed();
  const PerplexityResult a = perplexity(model, tokens, 16, {}, PerplexityScoring::SecondHalf);
  EXPECT_EQ(model.positions_pushed() - before, 64u);
  EXPECT_EQ(a.windows, 4u);
  EXPECT_EQ(a.scored, 28u);
  EXPECT_EQ(a.nll_sum, 0.0);
  tokens[16 + 12] = 7;  // window 2, scored by position 11; its successor by position 12 (uniform)
  const PerplexityResult b = perplexity(model, tokens, 16, {}, PerplexityScoring::SecondHalf);
  const double logit = 100.0 / std::sqrt(1.0 / 64 + 1e-6);
  EXPECT_NEAR(b.nll_sum, logit + std::log(300.0), 1e-3);
  // The boundary: a wrong token at window position 8 is scored by position 7, which is not.
  tokens[16 + 12] = token;
  tokens[32 + 8] = 7;
  const PerplexityResult c = perplexity(model, tokens, 16, {}, PerplexityScoring::SecondHalf);
  EXPECT_NEAR(c.nll_sum, std::log(300.0), 1e-9);  // only its successor, scored by position 8
  // Fewer tokens than one window, or a context too small to have a scored second half.
  EXPECT_THROW(perplexity(model, std::vector<int32_t>(15, token), 16, {}, PerplexityScoring::SecondHalf), Error);
  EXPECT_THROW(perplexity(model, std::vector<int32_t>(15, token), 2, {}, PerplexityScoring::SecondHalf), Error);
  const KlDivergenceResult k = kl_divergence(model, model, tokens, 16, {}, PerplexityScoring::SecondHalf);
  EXPECT_EQ(k.scored, 28u);
  EXPECT_EQ(k.windows, 4u);
  EXPECT_EQ(k.model.nll_sum, c.nll_sum);
}

// kl_divergence of a model against itself: every position identical, so KL is exactly 0,
// top-1 agrees everywhere, and both perplexities are perplexity()'s, bitwise.
TEST(KlDivergence, AModelAgainstItselfIsExactlyZero) {
  const fs::path dir = fs::path(NANOINFER_SOURCE_DIR) / "tests/data/models/tiny-untied";
  Model model = load_f32(dir);
  const std::vector<int32_t> tokens = some_tokens(90, 300);
  const KlDivergenceResult r = kl_divergence(model, model, tokens, 32);
  const PerplexityResult p = perplexity(model, tokens, 32);
  EXPECT_EQ(r.scored, p.scored);
  EXPECT_EQ(r.windows, p.windows);
  EXPECT_EQ(r.model.perplexity, p.perplexity);
  EXPECT_EQ(r.base.perplexity, p.perplexity);
  EXPECT_EQ(r.model.perplexity_stderr, p.perplexity_stderr);
  EXPECT_EQ(r.kld_mean, 0.0);
  EXPECT_EQ(r.kld_max, 0.0);
  EXPECT_EQ(r.delta_ppl_pct, 0.0);
  EXPECT_EQ(r.top1_agreement, 1.0);
  EXPECT_EQ(r.top1_stderr, 0.0);
}

// Two models whose distributions are known in closed form: the uniform model (p = 1/V) and the
// certain one (all mass on token 123; the other logits sit L ~ 800 below, so their
// probabilities underflow to exactly 0 even in double).
//   KL(uniform || certain) = sum_v (1/V)(log(1/V) - log q(v)) = -log V + (V - 1)/V * L
//   KL(certain || uniform) = log V
// The argmaxes differ (token 0 for uniform logits, the first maximum; 123 for certain).
TEST(KlDivergence, ClosedFormsOnUniformAndCertainModels) {
  test::TempDir tmp;
  const size_t vocab = 300;
  write_uniform_model(tmp / "uniform", vocab);
  write_certain_model(tmp / "certain", vocab, 123);
  Model uniform = load_f32(tmp / "uniform");
  Model certain = load_f32(tmp / "certain");
  const std::vector<int32_t> tokens(70, 123);
  const double V = static_cast<double>(vocab);
  const double L = 100.0 / std::sqrt(1.0 / 64 + 1e-6);

  const KlDivergenceResult a = kl_divergence(certain, uniform, tokens, 16);
  EXPECT_EQ(a.scored, 65u);  // windows of 16, 16, 16, 16, 6: 15 * 4 + 5
  EXPECT_NEAR(a.kld_mean, -std::log(V) + (V - 1) / V * L, 1e-3);
  EXPECT_NEAR(a.kld_max, a.kld_mean, 1e-9);
  EXPECT_NEAR(a.kld_p99, a.kld_mean, 1e-9);
  EXPECT_EQ(a.top1_agreement, 0.0);
  EXPECT_EQ(a.model.perplexity, 1.0);
  EXPECT_NEAR(a.base.perplexity, V, 1e-9 * V);
  EXPECT_NEAR(a.delta_ppl_pct, 100.0 * (1.0 / V - 1.0), 1e-9);
  EXPECT_NEAR(a.ln_ppl_ratio, -std::log(V), 1e-12);

  const KlDivergenceResult b = kl_divergence(uniform, certain, tokens, 16);
  EXPECT_NEAR(b.kld_mean, std::log(V), 1e-12);
  EXPECT_NEAR(b.kld_stderr, 0.0, 1e-12);
  EXPECT_NEAR(b.delta_ppl_pct, 100.0 * (V - 1.0), 1e-6);

  write_uniform_model(tmp / "small", 50);
  EXPECT_THROW(kl_divergence(load_f32(tmp / "small"), uniform, some_tokens(20, 50), 8), Error);  // vocabularies differ
  EXPECT_THROW(kl_divergence(uniform, certain, tokens, 257), Error);
  EXPECT_THROW(kl_divergence(uniform, certain, tokens, 1), Error);
}

// The protocol on a real (random) model against a direct computation from the float64
// reference logits: one window of the 64-token prompt.
TEST(Perplexity, MatchesTheReferenceLogitsOnATinyModel) {
  const fs::path dir = fs::path(NANOINFER_SOURCE_DIR) / "tests/data/models/tiny-untied";
  const SafetensorsFile ref = SafetensorsFile::open(dir / "reference.safetensors");
  const TensorView prompt_view = ref.get("prompt.4"), logits_view = ref.get("logits.4");
  std::vector<int32_t> prompt(prompt_view.nbytes() / 4);
  std::memcpy(prompt.data(), prompt_view.data, prompt_view.nbytes());
  std::vector<float> logits(logits_view.nbytes() / 4);
  std::memcpy(logits.data(), logits_view.data, logits_view.nbytes());
  const size_t V = logits.size() / prompt.size();
  double nll = 0;
  for (size_t t = 0; t + 1 < prompt.size(); ++t) {
    double max = -1e300, sum = 0;
    for (size_t j = 0; j < V; ++j) max = std::max(max, double(logits[t * V + j]));
    for (size_t j = 0; j < V; ++j) sum += std::exp(double(logits[t * V + j]) - max);
    nll -= double(logits[t * V + static_cast<size_t>(prompt[t + 1])]) - max - std::log(sum);
  }
  const double expected = std::exp(nll / double(prompt.size() - 1));
  Model model = load_f32(dir);
  const PerplexityResult r = perplexity(model, prompt, prompt.size());
  EXPECT_EQ(r.scored, prompt.size() - 1);
  EXPECT_NEAR(r.perplexity, expected, 1e-5 * expected);
}

fs::path default_model() {
  return fs::path(NANOINFER_SOURCE_DIR) / "data/default-model";
}

// The embedded default model against the reference tool's held-out perplexity, over the first
// windows (the per-window NLL sums are in the reference; the whole file takes longer than a
// unit test should).
TEST(Perplexity, DefaultModelMatchesTheReferenceWithin1e4Relative) {
  if (!fs::exists(default_model() / "model.safetensors") ||
      !fs::exists(default_model() / "reference_perplexity.json")) {
    GTEST_SKIP() << "data/default-model/ (model.safetensors, reference_perplexity.json) is not there yet";
  }
  const auto ref = nlohmann::json::parse(test::read_text(default_model() / "reference_perplexity.json"));
  const Tokenizer tokenizer = Tokenizer::load(default_model());
  const std::vector<int32_t> tokens =
      tokenizer.encode(test::read_text(default_model() / ref["file"].get<std::string>()));
  ASSERT_EQ(tokens.size(), ref["tokens"].get<size_t>()) << "the tokenizer disagrees with the reference's tokens";
  const size_t ctx = ref["ctx"].get<size_t>();
  const size_t n_windows = std::min<size_t>(8, ref["windows"].size());
  double ref_nll = 0;
  size_t ref_scored = 0;
  for (size_t w = 0; w < n_windows; ++w) {
    ref_nll += ref["windows"][w]["nll_sum"].get<double>();
    ref_scored += ref["windows"][w]["scored"].get<size_t>();
  }
  ModelOptions opts;
  opts.threads = 2;
  // The reference keeps activations in f32: pin a tier whose bf16 product does too (the
  // stored weights are bf16; avx512-bf16 would round the activations, tests/model/model_test.cpp
  // and tests/engine/default_model_test.cpp bound that).
  opts.isa = test::exact_activation_isa();
  opts.kv_type = DType::F32;
  Model model = open_model_alone(default_model(), opts);
  const PerplexityResult r = perplexity(model, std::span(tokens).first(n_windows * ctx), ctx);
  ASSERT_EQ(r.scored, ref_scored);
  const double expected = std::exp(ref_nll / static_cast<double>(ref_scored));
  EXPECT_NEAR(r.perplexity, expected, 1e-4 * expected);
  std::printf("  default model, first %zu windows of %zu: perplexity %.6f, reference %.6f\n", n_windows, ctx,
              r.perplexity, expected);
}

// ---- the command ----------------------------------------------------------------------------

struct RunResult {
  int status;
  std::string out;
};

RunResult run(const std::string& args) {
  const std::string cmd = std::string(NANOINFER_BINARY_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(PerplexityCli, CertainAndUniformModelsThroughTheCommand) {
  if (!fs::exists(default_model() / "tokenizer.json")) GTEST_SKIP() << "data/default-model/tokenizer.json missing";
  const Tokenizer tokenizer = Tokenizer::load(default_model());
  const int32_t token = tokenizer.token_id("<|endoftext|>").value();
  const size_t vocab = static_cast<size_t>(tokenizer.vocab_size());
  test::TempDir tmp;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "<|endoftext|>";  // 40 tokens, each one added token
  test::write_text(tmp / "text.txt", text);
  for (const char* kind : {"certain", "uniform"}) {
    const fs::path dir = tmp / kind;
    if (std::string(kind) == "certain") {
      write_certain_model(dir, vocab, token);
    } else {
      write_uniform_model(dir, vocab);
    }
    fs::copy_file(default_model() / "tokenizer.json", dir / "tokenizer.json");
    test::write_text(dir / "generation_config.json", fmt::format(R"({{"eos_token_id": {}}})", token));

    const RunResult r =
        run(fmt::format("perplexity -m {} -f {} -c 16 -t 1 --json", dir.string(), (tmp / "text.txt").string()));
    ASSERT_EQ(r.status, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(j["tokens"], 40);
    EXPECT_EQ(j["scored"], 37);  // windows of 16, 16, 8
    EXPECT_EQ(j["windows"], 3);
    if (std::string(kind) == "certain") {
      EXPECT_EQ(j["perplexity"].get<double>(), 1.0);
    } else {
      EXPECT_NEAR(j["perplexity"].get<double>(), double(vocab), 1e-12 * double(vocab));
    }
    const RunResult text_out =
        run(fmt::format("perplexity -m {} -f {} -c 16", dir.string(), (tmp / "text.txt").string()));
    ASSERT_EQ(text_out.status, 0) << text_out.out;
    EXPECT_NE(text_out.out.find("+/-"), std::string::npos) << text_out.out;
    EXPECT_NE(text_out.out.find("37 tokens scored in 3 windows of 16"), std::string::npos) << text_out.out;
  }
  const RunResult missing =
      run(fmt::format("perplexity -m {} -f {}", (tmp / "certain").string(), (tmp / "nope.txt").string()));
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.out.find("nope.txt: not found"), std::string::npos) << missing.out;
  const RunResult half = run(fmt::format("perplexity -m {} -f {} -c 16 --scoring second-half --json",
                                         (tmp / "certain").string(), (tmp / "text.txt").string()));
  ASSERT_EQ(half.status, 0) << half.out;
  const auto h = nlohmann::json::parse(half.out.substr(half.out.find('{')));
  EXPECT_EQ(h["windows"], 2);  // 40 tokens: two whole windows of 16
  EXPECT_EQ(h["scored"], 14);
  EXPECT_EQ(h["scoring"], "second-half");
  const RunResult bad_scoring = run(
      fmt::format("perplexity -m {} -f {} --scoring half", (tmp / "certain").string(), (tmp / "text.txt").string()));
  EXPECT_EQ(bad_scoring.status, 1);
  EXPECT_EQ(bad_scoring.out, "nanoinfer: error: --scoring must be 'all' or 'second-half', got 'half'\n");
  const RunResult small_ctx =
      run(fmt::format("perplexity -m {} -f {} -c 1", (tmp / "certain").string(), (tmp / "text.txt").string()));
  EXPECT_EQ(small_ctx.status, 1);
  EXPECT_NE(small_ctx.out.find("at least 2"), std::string::npos) << small_ctx.out;
}

}  // namespace
}  // namespace nanoinfer
