// The per-machine tuning (nanoinfer/tuning.h): a rule changes how the products are split across
// the pool, never a result. Held by counts: the logits are bitwise the defaults' under every
// rule over the whole range of each parameter, and the pool's join and chunk counters show
// that each rule was applied as written. Then the cache file: round trip, written atomically,
// and a corrupt or foreign file ignored with one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/linear.h"
#include "model/tune.h"
#include "nanoinfer/error.h"
#include "nanoinfer/model.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/synth.h"
#include "nanoinfer/thread_pool.h"
#include "nanoinfer/tuning.h"
#include "nanoinfer/tuning_cache.h"
#include "support/checks.h"
#include "support/files.h"
#include "support/run_cli.h"
#include "support/sanitized.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;
using Split = SplitRule::Split;

// hidden 256 (4 heads of 64, 2 KV heads: kv_dim 128), intermediate 512, vocab 512, tied,
// 2 layers. Products: q|k|v 512 x 256, o 256 x 256, gate|up 1024 x 256, down 256 x 512,
// logits 512 x 256: every one below kMinParallelLinearWork for one token, so the defaults
// split none of them at decode, and every one has at least 16 row grains.
constexpr const char* kTuneConfig = R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
  "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
  "max_position_embeddings": 256, "rope_theta": 10000.0, "rms_norm_eps": 1e-06,
  "torch_dtype": "bfloat16", "use_sliding_window": false, "tie_word_embeddings": true
})";

struct TuneProduct {
  size_t rows, cols, grain;
  bool logits;
};
// The model's products, derived from the config above: (rows, cols, the grain they split at).
std::vector<TuneProduct> tune_products_by_hand() {
  return {{512, 256, 16, false},
          {256, 256, 16, false},
          {1024, 256, 32, false},
          {256, 512, 16, false},
          {512, 256, 16, true}};
}

// The same rule for every product of the model, decode and prefill.
std::shared_ptr<const Tuning> everywhere(const SplitRule& rule, WeightType layer_type, WeightType logits_type) {
  auto t = std::make_shared<Tuning>();
  for (const TuneProduct& p : tune_products_by_hand()) {
    for (const bool prefill : {false, true})
      t->set({p.logits ? logits_type : layer_type, p.rows, p.cols, prefill}, rule);
  }
  return t;
}

struct TuneRun {
  std::vector<float> logits;  // prefill's every position, then each decode step's
  uint64_t decode_joins = 0, decode_chunks = 0;
};

TuneRun run_tuned(const fs::path& dir, WeightType type, std::shared_ptr<const Tuning> tuning) {
  ModelOptions o;
  o.threads = 2;
  o.weights = type;
  o.tuning = std::move(tuning);
  const Model model = open_model_alone(dir, o);
  Sequence seq = model.new_sequence();
  const std::vector<int32_t> prompt = {3, 141, 59, 265, 358, 97, 9};  // 7: not a whole token group
  TuneRun r;
  const auto all = model.forward(prompt, seq, true);
  r.logits.assign(all.begin(), all.end());
  for (const int32_t next : {17, 400}) {
    const uint64_t joins = model.barriers(), chunks = model.pool_chunks();
    const auto one = model.forward({&next, 1}, seq);
    r.decode_joins += model.barriers() - joins;
    r.decode_chunks += model.pool_chunks() - chunks;
    r.logits.insert(r.logits.end(), one.begin(), one.end());
  }
  return r;
}

TEST(Tuning, LogitsAreBitwiseTheDefaultsUnderEveryRule) {
  test::TempDir dir;
  test::write_text(dir / "config.json", kTuneConfig);
  write_synthetic_weights(ModelConfig::load(dir / "config.json"), dir / "model.safetensors", {.seed = 11});
  // The range of each parameter: never / always split, 1 .. 64 chunks per thread, gate/up's
  // epilogue from its floor to its ceiling (at 7 tokens, 4 KiB is one 32-row pair per chunk).
  std::vector<SplitRule> rules;
  rules.push_back({Split::Never, 0, 0});
  rules.push_back({Split::Never, 0, kMinEpilogueKib});
  for (const uint32_t cpt : {1u, 2u, 3u, 4u, 8u, 16u, kMaxChunksPerThread}) {
    for (const uint32_t kib : {0u, kMinEpilogueKib, 64u, kMaxEpilogueKib}) {
      if (test::kSanitized && kib != 0 && cpt != 3) continue;  // a sample under the sanitizers
      rules.push_back({Split::Always, cpt, kib});
    }
  }
  rules.push_back({Split::Auto, 1, 16});
  const std::vector<WeightType> types =
      test::kSanitized ? std::vector<WeightType>{WeightType::BF16, WeightType::Q4_0}
                       : std::vector<WeightType>{WeightType::F32, WeightType::BF16, WeightType::Q8_0, WeightType::Q4_0};
  size_t compared = 0;
  for (const WeightType type : types) {
    const TuneRun base = run_tuned(dir.path(), type, nullptr);
    ASSERT_EQ(base.logits.size(), (7 + 2) * 512u);
    ASSERT_EQ(base.decode_joins, 0u) << "the defaults split no decode product of this model";
    // The logits matrix is int8 when the layers are int4 or int8 (the quantization scheme).
    const WeightType logits_type = weight_type_info(type).quantized ? WeightType::Q8_0 : type;
    for (const SplitRule& rule : rules) {
      const TuneRun r = run_tuned(dir.path(), type, everywhere(rule, type, logits_type));
      EXPECT_TRUE(test::same_bits(r.logits, base.logits)) << weight_type_name(type) << ", " << describe(rule);
      ++compared;
      // The rule was applied: per decode step, never joins nothing; always joins once per
      // product (4 per layer and the logits) in exactly chunk_size's chunks.
      uint64_t joins = 0, chunks = 0;
      if (rule.split == Split::Always) {
        for (const TuneProduct& p : tune_products_by_hand()) {
          const size_t per_layer = p.logits ? 1 : 2;
          const size_t chunk = ThreadPool::chunk_size(p.rows, p.grain, 2, rule.chunks_per_thread);
          joins += per_layer;
          chunks += per_layer * ((p.rows + chunk - 1) / chunk);
        }
      }
      EXPECT_EQ(r.decode_joins, 2 * joins) << weight_type_name(type) << ", " << describe(rule);
      EXPECT_EQ(r.decode_chunks, 2 * chunks) << weight_type_name(type) << ", " << describe(rule);
    }
  }
  EXPECT_EQ(compared, types.size() * rules.size());
}

// A rule for one shape touches only that shape's products.
TEST(Tuning, RulesMatchTypeShapeAndPass) {
  Tuning t;
  t.set({WeightType::Q4_0, 896, 896, false}, {Split::Never, 0, 0});
  t.set({WeightType::Q4_0, 896, 896, true}, {Split::Always, 8, 0});
  ASSERT_NE(t.find(WeightType::Q4_0, 896, 896, 1), nullptr);
  EXPECT_EQ(t.find(WeightType::Q4_0, 896, 896, 1)->split, Split::Never);
  EXPECT_EQ(t.find(WeightType::Q4_0, 896, 896, 2)->chunks_per_thread, 8u);  // 2 rows: a prefill rule
  EXPECT_EQ(t.find(WeightType::Q8_0, 896, 896, 1), nullptr);
  EXPECT_EQ(t.find(WeightType::Q4_0, 896, 4864, 1), nullptr);
  t.set({WeightType::Q4_0, 896, 896, false}, {Split::Always, 2, 0});  // replaces
  EXPECT_EQ(t.rules.size(), 2u);
  EXPECT_EQ(t.find(WeightType::Q4_0, 896, 896, 1)->chunks_per_thread, 2u);
  t.set({WeightType::Q4_0, 896, 896, false}, SplitRule{});  // the default removes it
  EXPECT_EQ(t.rules.size(), 1u);
  EXPECT_EQ(t.find(WeightType::Q4_0, 896, 896, 1), nullptr);
}

TEST(Tuning, CandidatesStartWithTheDefaultAndSkipItsTwin) {
  EXPECT_TRUE(split_candidates(1, true, true).empty());
  const std::vector<SplitRule> c = split_candidates(2, true, false);
  ASSERT_EQ(c.size(), 7u);  // default, never, always at 1, 2, 8, 16, 32
  EXPECT_EQ(c[0], SplitRule{});
  for (size_t i = 1; i < c.size(); ++i) EXPECT_FALSE(c[i] == (SplitRule{Split::Always, 4, 0}));
  EXPECT_EQ(split_candidates(2, false, false).size(), 8u);  // always at 4 is not the default
  EXPECT_EQ(split_candidates(2, true, true).size(), 13u);   // and 6 epilogue variants
}

// The search itself on a real pool: every candidate timed every round, the default first, and
// a rule kept only past the sign test. (What it finds is timing; what is counted is the plan.)
TEST(Tuning, TheSearchTimesEveryCandidateOfEveryShape) {
  test::TempDir dir;
  test::write_text(dir / "config.json", kTuneConfig);
  write_synthetic_weights(ModelConfig::load(dir / "config.json"), dir / "model.safetensors", {.seed = 11});
  ModelOptions o;
  o.threads = 2;
  o.weights = WeightType::Q4_0;
  const Model model = open_model_alone(dir.path(), o);
  TuneOptions options;
  options.prefill_tokens = 8;
  options.rounds = 3;
  options.decode_calls = 2;
  options.prefill_calls = 2;
  const std::vector<TunedShape> shapes = model.tune(options);
  // Decode: q|k|v 512x256, o 256x256, gate|up 1024x256, down 256x512, logits (int8) 512x256;
  // prefill: the first four (the prefill pass's logits are one row: a decode shape).
  ASSERT_EQ(shapes.size(), 9u);
  for (const TunedShape& t : shapes) {
    // default, never, always at 1, 2, 8, 16, 32 and at 4 unless that is what the default does (at
    // prefill 8 every product but o has kMinParallelLinearWork multiply-adds); gate/up 6 more.
    const bool default_splits = t.shape.rows * t.shape.cols * (t.shape.prefill ? 8 : 1) >= kMinParallelLinearWork;
    EXPECT_EQ(default_splits, t.shape.prefill && t.name != "o") << t.name;
    EXPECT_EQ(t.candidates.size(), (default_splits ? 7u : 8u) + (t.name == "gate_up" ? 6u : 0u)) << t.name;
    EXPECT_EQ(t.candidates[0].rule, SplitRule{});
    for (const TuneCandidate& c : t.candidates) {
      EXPECT_GT(c.median_us, 0);
      EXPECT_LE(c.min_us, c.median_us);
      EXPECT_LE(c.median_us, c.max_us);
    }
    for (const TuneCandidate& c : t.candidates) {
      EXPECT_EQ(c.rounds, 3);
      EXPECT_LE(c.gain_min, c.gain_median);
      EXPECT_LE(c.gain_median, c.gain_max);
    }
    EXPECT_EQ(t.candidates[0].wins, 0);  // the default against itself: equal, never faster
    EXPECT_EQ(t.candidates[0].gain_median, 1.0);
    // Three rounds cannot pass a sign test at 1% (3 of 3 is p = 0.25): nothing is kept.
    EXPECT_FALSE(t.kept);
  }
  EXPECT_EQ(shapes[4].name, "logits");
  EXPECT_EQ(shapes[4].shape.type, WeightType::Q8_0);
  options.rounds = 0;
  EXPECT_THROW(model.tune(options), Error);
}

TEST(Tuning, SignTestByHand) {
  EXPECT_DOUBLE_EQ(sign_test_p(3, 3), 0.25);  // 2 x 1/8
  EXPECT_DOUBLE_EQ(sign_test_p(0, 3), 0.25);
  EXPECT_DOUBLE_EQ(sign_test_p(6, 6), 0.03125);        // 2 x 1/64
  EXPECT_DOUBLE_EQ(sign_test_p(10, 11), 24.0 / 2048);  // 2 x (1 + 11) / 2^11
  EXPECT_DOUBLE_EQ(sign_test_p(13, 15), 2.0 * (1 + 15 + 105) / 32768);
  EXPECT_DOUBLE_EQ(sign_test_p(2, 4), 1.0);
  EXPECT_DOUBLE_EQ(sign_test_p(0, 0), 1.0);
}

// ---- the cache file ------------------------------------------------------------------------

class TuningCacheEnv {
 public:
  explicit TuningCacheEnv(const fs::path& dir) {
    if (const char* old = std::getenv("XDG_CACHE_HOME")) old_ = old, had_ = true;
    setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  }
  ~TuningCacheEnv() {
    if (had_) {
      setenv("XDG_CACHE_HOME", old_.c_str(), 1);
    } else {
      unsetenv("XDG_CACHE_HOME");
    }
  }

 private:
  std::string old_;
  bool had_ = false;
};

TEST(TuningCache, RoundTripsAtomicallyUnderTheCacheDirectory) {
  test::TempDir dir;
  const TuningCacheEnv env(dir.path());
  const fs::path file = tuning_cache_path(Isa::Avx2, 2);
  EXPECT_EQ(file, dir.path() / "nanoinfer" / "tune-avx2-t2.json");
  // Absent: no rules, nothing to say.
  const TuningCache none = read_tuning_cache(file, "CPU A", Isa::Avx2, 2);
  EXPECT_EQ(none.tuning, nullptr);
  EXPECT_EQ(none.note, "");
  Tuning t;
  t.set({WeightType::Q4_0, 1152, 896, false}, {Split::Always, 8, 0});
  t.set({WeightType::Q4_0, 9728, 896, true}, {Split::Auto, 0, 256});
  t.set({WeightType::BF16, 896, 4864, false}, {Split::Never, 0, 0});
  write_tuning_cache(file, t, "CPU A", Isa::Avx2, 2);
  // Only the file: no temporary left beside it.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(file.parent_path())) ++entries;
  EXPECT_EQ(entries, 1u);
  const TuningCache back = read_tuning_cache(file, "CPU A", Isa::Avx2, 2);
  EXPECT_EQ(back.note, "");
  ASSERT_NE(back.tuning, nullptr);
  ASSERT_EQ(back.tuning->rules.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.tuning->rules[i].shape, t.rules[i].shape);
    EXPECT_EQ(back.tuning->rules[i].rule, t.rules[i].rule);
  }
}

TEST(TuningCache, ACorruptOrForeignFileIsIgnoredWithOneLine) {
  test::TempDir dir;
  const fs::path file = dir / "tune.json";
  Tuning t;
  t.set({WeightType::Q8_0, 896, 896, false}, {Split::Always, 2, 0});
  write_tuning_cache(file, t, "CPU A", Isa::Avx512Vnni, 2);
  const auto ignored = [&](std::string_view cpu, Isa isa, int threads, const std::string& why) {
    const TuningCache c = read_tuning_cache(file, cpu, isa, threads);
    EXPECT_EQ(c.tuning, nullptr) << why;
    EXPECT_NE(c.note.find(file.string()), std::string::npos) << c.note;
    EXPECT_NE(c.note.find(why), std::string::npos) << c.note;
    EXPECT_EQ(c.note.find('\n'), std::string::npos) << c.note;
  };
  ignored("CPU B", Isa::Avx512Vnni, 2, "measured on 'CPU A', this CPU is 'CPU B'");
  ignored("CPU A", Isa::Avx2, 2, "measured for ISA avx512-vnni, this run uses avx2");
  ignored("CPU A", Isa::Avx512Vnni, 3, "not measured with 3 threads");
  ASSERT_NE(read_tuning_cache(file, "CPU A", Isa::Avx512Vnni, 2).tuning, nullptr);

  const std::string good = test::read_text(file);
  const auto with = [&](const std::string& text, const std::string& why) {
    test::write_text(file, text);
    ignored("CPU A", Isa::Avx512Vnni, 2, why);
  };
  with(good.substr(0, good.size() / 2), "not valid JSON");
  with("", "not valid JSON");
  with("[1, 2]", "not a nanoinfer tuning file");
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  with(replaced("\"version\": 1", "\"version\": 2"), "not version 1");
  with(replaced("\"chunks_per_thread\": 2", "\"chunks_per_thread\": 65"),
       "\"chunks_per_thread\" is not an integer in [0, 64]");
  with(replaced("\"chunks_per_thread\": 2", "\"chunks_per_thread\": -1"), "\"chunks_per_thread\" is not an integer");
  with(replaced("\"epilogue_kib\": 0", "\"epilogue_kib\": 2"), "\"epilogue_kib\" is below 4");
  with(replaced("\"split\": \"always\"", "\"split\": \"sometimes\""), "\"split\" is not auto, always or never");
  with(replaced("\"type\": \"int8\"", "\"type\": \"int3\""), "\"type\" is not a weight type");
  with(replaced("\"prefill\": false", "\"prefill\": 0"), "\"prefill\" is not true or false");
  with(replaced("\"rows\": 896", "\"rows\": 0"), "\"rows\" is not an integer");
  // A valid header with "rules" nested 100,000 deep (800 KB, under the size cap): the parsed
  // value's destruction recursed once per level and overflowed the stack (SIGSEGV).
  const size_t at = good.find("\"rules\"");
  ASSERT_NE(at, std::string::npos);
  with(good.substr(0, at) + "\"rules\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
       "JSON nested deeper than 64 levels (at byte ");
}

// End to end: the commands read the cache at start-up, say in one line when they ignore it,
// and print the same text tuned, untuned and with a corrupt cache.
TEST(TuningCache, GenerateReadsTheCacheAndPrintsTheSameText) {
  test::TempDir dir;
  test::CliOptions options;
  options.env = {"XDG_CACHE_HOME=" + dir.path().string()};
  const std::vector<std::string> args = {"generate", "-p", "ROMEO:", "-n", "12", "--temp", "0", "-t", "2"};
  std::vector<std::string> no_tune = args;
  no_tune.push_back("--no-tune");
  const test::CliProcess base = test::run_cli_process(no_tune, options);
  ASSERT_EQ(base.exit_code, 0) << base.err;
  EXPECT_EQ(base.err.find("tuning cache"), std::string::npos) << base.err;

  // A cache with a rule for every product of the default model (hidden 256, intermediate 512,
  // 4 heads of 64, 2 KV heads, vocab 2048, bf16): split always, 16 chunks per thread.
  const fs::path cache = dir / "nanoinfer" / ("tune-" + std::string(isa_name(best_isa())) + "-t2.json");
  Tuning t;
  for (const bool prefill : {false, true}) {
    for (const auto& [rows, cols] :
         std::vector<std::pair<size_t, size_t>>{{512, 256}, {256, 256}, {1024, 256}, {256, 512}, {2048, 256}}) {
      t.set({WeightType::BF16, rows, cols, prefill}, {Split::Always, 16, 0});
    }
  }
  write_tuning_cache(cache, t, cpu_model_name(), best_isa(), 2);
  fs::copy_file(cache, dir / "nanoinfer" / "good.json");
  const test::CliProcess tuned = test::run_cli_process(args, options);
  ASSERT_EQ(tuned.exit_code, 0) << tuned.err;
  EXPECT_EQ(tuned.out, base.out);
  EXPECT_EQ(tuned.err.find("tuning cache"), std::string::npos) << tuned.err;

  test::write_text(cache, "{\"format\": \"nanoinfer-tuning\", \"version\": 1, \"cpu\": ");
  const test::CliProcess corrupt = test::run_cli_process(args, options);
  ASSERT_EQ(corrupt.exit_code, 0) << corrupt.err;
  EXPECT_EQ(corrupt.out, base.out);
  const std::string line = "nanoinfer: ignoring the tuning cache " + cache.string() + ": not valid JSON";
  EXPECT_NE(corrupt.err.find(line), std::string::npos) << corrupt.err;

  // A valid header whose "rules" nest 100,000 deep: ignored with one note like any bad cache
  // (before: every model command was killed by SIGSEGV, with no message).
  const std::string good = test::read_text(dir / "nanoinfer" / "good.json");
  test::write_text(cache, good.substr(0, good.find("\"rules\"")) + "\"rules\": " + std::string(100000, '[') +
                              std::string(100000, ']') + "}\n");
  ASSERT_LT(fs::file_size(cache), uint64_t{1} << 20);  // under the cache's size cap
  const test::CliProcess deep = test::run_cli_process(args, options);
  ASSERT_TRUE(deep.exited) << "killed by signal " << deep.signal;
  ASSERT_EQ(deep.exit_code, 0) << deep.err.substr(0, 500);
  EXPECT_EQ(deep.out, base.out);
  EXPECT_EQ(std::count(deep.err.begin(), deep.err.end(), '\n'), 1 + std::count(base.err.begin(), base.err.end(), '\n'))
      << deep.err;
  EXPECT_NE(deep.err.find("nanoinfer: ignoring the tuning cache " + cache.string() +
                          ": JSON nested deeper than 64 levels (at byte "),
            std::string::npos)
      << deep.err.substr(0, 500);
}

}  // namespace
}  // namespace nanoinfer
