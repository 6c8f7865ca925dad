// `nanoinfer generate` end to end on a tiny random model with a matching test tokenizer: the
// streamed text equals the library's generation, flags override generation_config.json, stop
// conditions, and one-line errors for every bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "nanoinfer/chat_template.h"
#include "nanoinfer/generation_config.h"
#include "nanoinfer/generator.h"
#include "nanoinfer/open_model.h"
#include "support/files.h"
#include "support/generation_model.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

using test::run_cli;

class GenerateCli : public ::testing::Test {
 protected:
  void SetUp() override { test::write_tiny_model_dir(dir_.path()); }
  std::string dir() const { return dir_.path().string(); }

  // What the library generates greedily from `prompt` with the directory's settings.
  std::pair<std::string, std::vector<int32_t>> library_greedy(const std::string& prompt, int64_t n) {
    Model model = open_model_alone(dir_.path(), {.threads = 1});
    const Tokenizer tok = Tokenizer::load(dir_.path());
    const GenerationConfig file = GenerationConfig::load_from_dir(dir_.path());
    const SamplingSettings s = resolve_sampling(file, {.temperature = 0.0, .seed = 1});
    Generator gen(model, tok, s.params());
    std::string text;
    const std::vector<int32_t> ids = tok.encode(prompt);
    gen.generate(ids, {.max_new_tokens = n, .eos_ids = file.eos_token_ids},
                 [&text](std::string_view t) { text.append(t); });
    return {text, {gen.tokens().begin() + static_cast<ptrdiff_t>(ids.size()), gen.tokens().end()}};
  }

  test::TempDir dir_;
};

// One line on stderr, naming the problem, and a non-zero exit.

TEST_F(GenerateCli, GreedyOutputEqualsLibraryAndReportsTimings) {
  const auto [expected, ids] = library_greedy("the king said", 24);
  const auto r = run_cli({"generate", "-m", dir(), "-p", "the king said", "-n", "24", "--temp", "0", "-t", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, expected + "\n");
  for (const char* field : {"load ", "prefill ", "first token ", "decode ", "GB/s effective"}) {
    EXPECT_NE(r.err.find(field), std::string::npos) << field << "\n" << r.err;
  }
  EXPECT_NE(r.err.find("generated 24 tokens (token limit)"), std::string::npos) << r.err;
  // Same output at 2 threads (the kernels are bitwise identical across thread counts).
  const auto r2 = run_cli({"generate", "-m", dir(), "-p", "the king said", "-n", "24", "--temp", "0", "-t", "2"});
  EXPECT_EQ(r2.out, r.out);
}

TEST_F(GenerateCli, SeedMakesSamplingReproducible) {
  const std::vector<std::string> args{"generate", "-m", dir(), "-p", "a", "-n", "40", "--seed", "7"};
  const auto a = run_cli(args), b = run_cli(args);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  auto other = args;
  other.back() = "8";
  EXPECT_NE(run_cli(other).out, a.out);
}

TEST_F(GenerateCli, VerboseNamesTheSourceOfEachSetting) {
  const auto r = run_cli(
      {"generate", "-m", dir(), "-p", "x", "-n", "1", "--temp", "0.5", "--min-p", "0.1", "--seed", "3", "--verbose"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* line :
       {"temperature        = 0.5 (flag)", "top_k              = 20 (generation_config.json)",
        "top_p              = 0.8 (generation_config.json)", "min_p              = 0.1 (flag)",
        "repetition_penalty = 1.1 (generation_config.json)", "seed               = 3 (flag)", "eos ids: 299"}) {
    EXPECT_NE(r.err.find(line), std::string::npos) << line << "\n" << r.err;
  }
}

TEST_F(GenerateCli, StopsAtEosFromGenerationConfig) {
  const auto [text, ids] = library_greedy("once", 6);
  ASSERT_GE(ids.size(), 3u);
  // Declare the third greedy token end-of-sequence (if it occurs earlier, generation stops there).
  const size_t k = static_cast<size_t>(std::find(ids.begin(), ids.end(), ids[2]) - ids.begin());
  test::write_text(dir_ / "generation_config.json",
                   "{\"eos_token_id\": [" + std::to_string(ids[2]) + "], \"repetition_penalty\": 1.1}");
  const auto r = run_cli({"generate", "-m", dir(), "-p", "once", "-n", "6", "--temp", "0"});
  ASSERT_EQ(r.status, 0) << r.err;
  const Tokenizer tok = Tokenizer::load(dir_.path());
  EXPECT_EQ(r.out, tok.decode(std::span(ids).first(k)) + "\n");
  EXPECT_NE(r.err.find("generated " + std::to_string(k) + " tokens (end of sequence)"), std::string::npos) << r.err;
}

TEST_F(GenerateCli, StopStringTruncatesOutput) {
  const auto [text, ids] = library_greedy("hello", 30);
  ASSERT_GE(text.size(), 6u);
  size_t at = text.size() / 2;
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  const std::string stop = text.substr(at, 1);
  const auto r = run_cli(
      {"generate", "-m", dir(), "-p", "hello", "-n", "30", "--temp", "0", "--stop", "never-appears", "--stop", stop});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, text.substr(0, text.find(stop)) + "\n");
  EXPECT_NE(r.err.find("(stop string)"), std::string::npos) << r.err;
}

TEST_F(GenerateCli, ChatWrapsThePromptInTheTemplate) {
  const auto r = run_cli({"generate", "-m", dir(), "-p", "hi there", "-n", "4", "--temp", "0", "--chat", "--verbose"});
  ASSERT_EQ(r.status, 0) << r.err;
  const Tokenizer tok = Tokenizer::load(dir_.path());
  const ChatMessage user{"user", "hi there"};
  const size_t n = tok.encode(render_chat({&user, 1}, true)).size();
  EXPECT_NE(r.err.find("prompt: " + std::to_string(n) + " tokens"), std::string::npos) << r.err;
}

// -f FILE is -p with the file's text (a prompt too long for a command line); one of them is
// required, not both.
TEST_F(GenerateCli, PromptFromAFileIsThePromptGivenInline) {
  const std::string prompt = "the king said\nand the queen";
  const std::filesystem::path file = dir_ / "prompt.txt";
  std::ofstream(file, std::ios::binary) << prompt;
  const auto inline_run = run_cli({"generate", "-m", dir(), "-p", prompt, "-n", "12", "--temp", "0"});
  const auto file_run = run_cli({"generate", "-m", dir(), "-f", file.string(), "-n", "12", "--temp", "0"});
  ASSERT_EQ(file_run.status, 0) << file_run.err;
  EXPECT_EQ(file_run.out, inline_run.out);
  // The same prompt length on both ("prompt N tokens"), so the file's newline was kept.
  const auto prompt_tokens = [](const std::string& err) {
    const size_t at = err.find("| prompt ");
    return at == std::string::npos ? std::string() : err.substr(at, err.find(" tokens", at) - at);
  };
  EXPECT_FALSE(prompt_tokens(inline_run.err).empty()) << inline_run.err;
  EXPECT_EQ(prompt_tokens(file_run.err), prompt_tokens(inline_run.err));
  test::expect_one_line_error(run_cli({"generate", "-m", dir(), "-n", "2"}),
                              "generate: give the prompt with -p TEXT or -f FILE");
  test::expect_one_line_error(run_cli({"generate", "-m", dir(), "-p", "x", "-f", file.string()}), "excludes");
  test::expect_one_line_error(run_cli({"generate", "-m", dir(), "-f", (dir_ / "missing.txt").string()}), "missing.txt");
  test::expect_one_line_error(run_cli({"viz", "-m", dir(), "-n", "2"}), "viz: give the prompt with -p TEXT or -f FILE");
}

TEST_F(GenerateCli, ZeroTokensPrintsOnlyANewline) {
  const auto r = run_cli({"generate", "-m", dir(), "-p", "abc", "-n", "0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "\n");
}

TEST_F(GenerateCli, DefaultModelRunsWithoutDashM) {
  const auto r = run_cli({"generate", "-p", "ROMEO:", "-n", "8", "--temp", "0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_GT(r.out.size(), 1u);
}

TEST_F(GenerateCli, MissingDirectoryOrFileIsOneLineNamingIt) {
  test::expect_one_line_error(run_cli({"generate", "-m", dir() + "/nope", "-p", "x"}), "not a model directory");
  for (const char* file : {"tokenizer.json", "model.safetensors", "config.json"}) {
    SCOPED_TRACE(file);
    test::TempDir copy;
    test::write_tiny_model_dir(copy.path());
    std::filesystem::remove(copy / file);
    const auto r = run_cli({"generate", "-m", copy.path().string(), "-p", "x"});
    test::expect_one_line_error(r, file);
    EXPECT_TRUE(r.err.find("nanoinfer pull") != std::string::npos) << r.err;
  }
}

TEST_F(GenerateCli, BadValuesAreOneLineErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--temp", "-1"}, "temperature must be >= 0"},
      {{"--top-p", "0"}, "top-p must be in (0, 1]"},
      {{"--top-p", "1.5"}, "top-p must be in (0, 1]"},
      {{"--min-p", "2"}, "min-p must be in [0, 1]"},
      {{"--top-k", "-1"}, "top-k must be >= 0"},
      {{"--repeat-penalty", "0"}, "repetition penalty must be > 0"},
      {{"-n", "-1"}, "-n must be >= 0"},
      {{"-t", "-2"}, "-t must be >= 1"},
      {{"-c", "-5"}, "-c must be >= 0"},
      {{"-c", "100000"}, "exceeds the model's limit of 256"},
      {{"--dtype", "f16"},
       "--dtype must be as-stored, f32, bf16, int8, int4, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k or q3_k"},
      {{"--isa", "neon"}, "--isa must be auto or one of scalar, avx2"},
      {{"--stop", ""}, "--stop must not be empty"},
  };
  for (const auto& [flags, message] : cases) {
    SCOPED_TRACE(flags[0] + " " + flags[1]);
    std::vector<std::string> args{"generate", "-m", dir(), "-p", "x"};
    args.insert(args.end(), flags.begin(), flags.end());
    test::expect_one_line_error(run_cli(args), message);
  }
}

TEST_F(GenerateCli, PromptLongerThanContextIsOneLineError) {
  test::expect_one_line_error(run_cli({"generate", "-m", dir(), "-p", std::string(40, 'z'), "-c", "8"}),
                              "but the context holds 8");
}

TEST_F(GenerateCli, BenchWritesLlamaBenchStyleRecordsAndCacheAB) {
  test::TempDir out;
  const std::string results = (out / "results.jsonl").string();
  const auto r = run_cli({"bench", "generate", "-m", dir(), "-p", "8", "-n", "4", "-r", "2", "-t", "1", "--cache-ab",
                          "--probe-mib", "4", "--results", results});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("| pp8 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg4 @ d8 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("identical tokens"), std::string::npos) << r.out;
  std::istringstream lines(test::read_text(results));
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0]["n_prompt"], 8);
  EXPECT_EQ(records[0]["n_gen"], 0);
  EXPECT_EQ(records[0]["n_depth"], 0);
  EXPECT_EQ(records[1]["n_prompt"], 0);
  EXPECT_EQ(records[1]["n_gen"], 4);
  EXPECT_EQ(records[1]["n_depth"], 8);  // decoded after the 8-token prompt: llama-bench's tg4 @ d8
  for (const auto& rec : {records[0], records[1]}) {
    for (const char* key : {"avg_ts", "stddev_ts", "median_ts", "min_ts", "n_threads", "model_type", "model_size",
                            "model_n_params", "cpu_info", "build_commit", "test_time", "peak_rss_bytes"}) {
      EXPECT_TRUE(rec.contains(key)) << key;
    }
    EXPECT_EQ(rec["samples_ts"].size(), 2u);
    EXPECT_EQ(rec["n_threads"], 1);
  }
  // tiny-untied: 3 layers, hidden 128, intermediate 256, vocab 300, untied.
  const uint64_t per_layer = 2 * 128 * 128 + 2 * 64 * 128 + 128 + 2 * 64 + 3 * 128 * 256 + 2 * 128;
  EXPECT_EQ(records[0]["model_n_params"], 2 * 300 * 128 + 3 * per_layer + 128);
  // Decode work counts: tiny-untied (f32) streams every matrix but the embedding table, one
  // embedding row, and the norms and biases (as in ModelLoad.WeightBytesFollowTheStoredTypes);
  // one thread joins nothing. The roofline share is effective GB/s over the probe's median.
  const uint64_t matrices = 300 * 128 + 3 * (2 * 128 * 128 + 2 * 64 * 128 + 3 * 128 * 256);
  const uint64_t vectors = 128 + 3 * (2 * 128 + 128 + 2 * 64);
  EXPECT_EQ(records[1]["bytes_per_token"], 4 * (matrices + 128 + vectors));
  EXPECT_EQ(records[1]["barriers_per_token"], 0.0);
  EXPECT_EQ(records[1]["read_bandwidth_probe_bytes"], 4u << 20);
  ASSERT_GT(records[1]["read_bandwidth_gbps"].get<double>(), 0.0);
  EXPECT_GE(records[1]["read_bandwidth_gbps"].get<double>(), records[1]["read_bandwidth_min_gbps"].get<double>());
  EXPECT_DOUBLE_EQ(records[1]["roofline_pct"].get<double>(), 100.0 * records[1]["effective_gbps"].get<double>() /
                                                                 records[1]["read_bandwidth_gbps"].get<double>());
  EXPECT_NE(r.out.find("barriers per token, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; read bandwidth"), std::string::npos) << r.out;
  // FLOPs and activation bytes per token (model/linear.h, model/ops.h): 2 per matrix weight;
  // per layer the products read and write q|k|v 128 + 256, o 128 + 128, gate|up 128 + 512,
  // down 256 + 128 floats, the logits 128 + 300; attention 4 x q_dim (128) per key and layer,
  // the 4 steps at depths 8..11 seeing 9..12 keys (a mean of 10.5).
  EXPECT_EQ(records[1]["product_flops_per_token"], 2.0 * static_cast<double>(matrices));
  EXPECT_EQ(records[1]["activation_bytes_per_token"], 4.0 * (3 * (384 + 256 + 640 + 384) + 428));
  EXPECT_EQ(records[1]["attention_flops_per_token"], 3 * 4 * 128 * 10.5);
  // The prompt: 8 rows through every product of the first two layers (36 causal pairs each) and
  // the last layer's q|k|v; its attention (the last query's 8 keys), o and feed-forward and the
  // logits for the last row only.
  const double layer_flops = 2.0 * (2 * 128 * 128 + 2 * 64 * 128 + 3 * 128 * 256);
  const double qkv_flops = 2.0 * (128 * 128 + 2 * 64 * 128);
  EXPECT_DOUBLE_EQ(
      records[0]["flops_per_prompt_token"].get<double>(),
      (8 * 2 * layer_flops + 8 * qkv_flops + (layer_flops - qkv_flops) + 2.0 * 300 * 128 + 4 * 128 * (2 * 36 + 8)) / 8);
  EXPECT_GT(records[0]["prefill_gflops"].get<double>(), 0.0);
  // KV bytes per position: K and V of 3 layers of kv_dim 64 in the default f16 cache; and the
  // wall-time share attention took of the prefill and of the decode steps (a fraction).
  EXPECT_EQ(records[1]["kv_bytes_per_position"], 2 * 3 * 64 * 2);
  for (const char* key : {"attention_share_prefill", "attention_share_decode"}) {
    EXPECT_GT(records[1][key].get<double>(), 0.0) << key;
    EXPECT_LE(records[1][key].get<double>(), 1.0) << key;
  }
  EXPECT_NE(r.out.find("% of the prefill's time"), std::string::npos) << r.out;
  EXPECT_EQ(records[2]["bench"], "generate-cache-ab");
  EXPECT_EQ(records[2]["identical_output"], true);
  // The work of each path, counted: -p 8 -n 4 pushes 8 + 3 positions cached, 8 + 9 + 10 + 11
  // recomputed; a TTFT and a per-step time for both, a sample per run.
  EXPECT_EQ(records[2]["cached_positions"], 11);
  EXPECT_EQ(records[2]["uncached_positions"], 38);
  for (const char* path : {"cached", "uncached"}) {
    const std::string p = path;
    EXPECT_EQ(records[2][p + "_samples_ts"].size(), 2u);
    EXPECT_GT(records[2][p + "_ttft_ms_median"].get<double>(), 0.0);
    EXPECT_GT(records[2][p + "_step_ms_median"].get<double>(), 0.0);
    EXPECT_GE(records[2][p + "_max_ts"].get<double>(), records[2][p + "_min_ts"].get<double>());
  }
  test::expect_one_line_error(run_cli({"bench", "generate", "-m", dir(), "-r", "0"}), "-r must be >= 1");
  test::expect_one_line_error(run_cli({"bench", "generate", "-m", dir(), "--probe-mib", "-1"}),
                              "--probe-mib must be >= 0");
  test::expect_one_line_error(run_cli({"bench", "generate", "-m", dir(), "-p", "250", "-n", "10"}),
                              "exceed the context of 256");
}

// Lists as llama-bench takes them: every combination measured, in order; -o picks stdout's
// format; outside the repository (no ./bench) nothing is written and that is not an error.
TEST_F(GenerateCli, BenchListsAndOutputFormats) {
  test::TempDir cwd;
  const std::string script =
      fmt::format("cd {} && {} bench generate -m {} -p 4,8 -n 2,3 -t 1,2 -r 1 --probe-mib 0 -o jsonl",
                  cwd.path().string(), NANOINFER_BINARY_PATH, dir());
  // Through a shell, for the working directory.
  FILE* pipe = popen((script + " 2>/dev/null").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << out;
  std::istringstream lines(out);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  // 2 thread counts x 2 prompts x 2 decode lengths, a pp and a tg record each.
  ASSERT_EQ(records.size(), 16u);
  size_t i = 0;
  for (int t : {1, 2}) {
    for (int p : {4, 8}) {
      for (int n : {2, 3}) {
        EXPECT_EQ(records[i]["n_threads"], t);
        EXPECT_EQ(records[i]["n_prompt"], p);
        EXPECT_EQ(records[i]["n_gen"], 0);
        EXPECT_EQ(records[i + 1]["n_prompt"], 0);
        EXPECT_EQ(records[i + 1]["n_gen"], n);
        EXPECT_EQ(records[i + 1]["n_depth"], p);
        i += 2;
      }
    }
  }
  EXPECT_TRUE(std::filesystem::is_empty(cwd.path()));  // no bench/ here: nothing written
  const auto csv = run_cli({"bench", "generate", "-m", dir(), "-p", "4", "-n", "2", "-t", "1", "-r", "1", "--probe-mib",
                            "0", "-o", "csv", "--results", (cwd / "r.jsonl").string()});
  ASSERT_EQ(csv.status, 0) << csv.err;
  EXPECT_EQ(csv.out.substr(0, csv.out.find('\n')),
            "model_filename,dtype,isa,n_threads,n_prompt,n_gen,n_depth,avg_ts,stddev_ts,median_ts,min_ts,max_ts,"
            "build_commit,cpu_info");
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 3);
  const std::string appended = test::read_text(cwd / "r.jsonl");
  EXPECT_EQ(std::count(appended.begin(), appended.end(), '\n'), 2);  // the pp and tg records
  test::expect_one_line_error(run_cli({"bench", "generate", "-m", dir(), "-o", "results.jsonl"}),
                              "-o takes the output format md, csv, json or jsonl");
  test::expect_one_line_error(run_cli({"bench", "generate", "-m", dir(), "-p", "4,0"}), "-p must be >= 1, got 0");
}

TEST_F(GenerateCli, BenchBandwidthRecordsEveryPass) {
  test::TempDir out;
  const std::string results = (out / "results.jsonl").string();
  const auto r = run_cli({"bench", "bandwidth", "-t", "2", "--size-mib", "8", "-r", "3", "-o", results});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("sequential read of 8 MiB, 2 thread(s), 3 run(s): median "), std::string::npos) << r.out;
  const nlohmann::json rec = nlohmann::json::parse(test::read_text(results));
  EXPECT_EQ(rec["bench"], "bandwidth");
  EXPECT_EQ(rec["threads"], 2);
  EXPECT_EQ(rec["bytes"], 8u << 20);
  ASSERT_EQ(rec["samples_gbps"].size(), 3u);
  EXPECT_GT(rec["min_gbps"].get<double>(), 0.0);
  EXPECT_LE(rec["min_gbps"].get<double>(), rec["median_gbps"].get<double>());
  EXPECT_LE(rec["median_gbps"].get<double>(), rec["max_gbps"].get<double>());
  // Without -o it only prints: a probe now and then appends to no tracked file.
  const auto quiet = run_cli({"bench", "bandwidth", "-t", "1", "--size-mib", "8", "-r", "1"});
  ASSERT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_NE(quiet.out.find("sequential read of 8 MiB"), std::string::npos) << quiet.out;
  EXPECT_EQ(quiet.out.find("appended"), std::string::npos) << quiet.out;
  test::expect_one_line_error(run_cli({"bench", "bandwidth", "--size-mib", "0"}), "--size-mib must be >= 1");
  test::expect_one_line_error(run_cli({"bench", "bandwidth", "-r", "0"}), "-r must be >= 1");
}

}  // namespace
}  // namespace nanoinfer
