// `nanoinfer generate`, `chat` (and `serve`'s flags) with speculative decoding on the embedded default model: the
// text is byte for byte plain greedy decoding's with every kind of draft (prompt lookup, the
// model itself, a `quantize --method rtn` copy, the model quantized at load), the statistics
// line is printed, and every bad flag is a one-line error.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/files.h"
#include "support/generation_model.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

using test::run_cli;

const std::vector<std::string> kPrompts = {
    "ROMEO:",
    "KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up with our English "
    "dead.\n\nKING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close",
};

// Greedy unless `extra` sets --temp.
std::vector<std::string> generate_args(const std::string& prompt, std::vector<std::string> extra) {
  std::vector<std::string> args = {"generate", "-p", prompt, "-n", "80", "-t", "1"};
  if (std::find(extra.begin(), extra.end(), "--temp") == extra.end()) args.insert(args.end(), {"--temp", "0"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// drafted D, accepted A: the numbers of the statistics line.
std::pair<long, long> drafted_accepted(const std::string& err) {
  std::smatch m;
  const std::regex re("speculation: .* \\| drafted ([0-9]+), accepted ([0-9]+) \\(");
  if (!std::regex_search(err, m, re)) return {-1, -1};
  return {std::stol(m[1]), std::stol(m[2])};
}

TEST(SpeculativeCli, EveryDraftGivesThePlainGreedyText) {
  test::TempDir dir;
  const std::string q4 = (dir.path() / "q4").string();
  const auto q = run_cli({"quantize", "--type", "int4", "--method", "rtn", "--out", q4});
  ASSERT_EQ(q.status, 0) << q.err;
  long q4_rejected = 0;
  for (const std::string& prompt : kPrompts) {
    const auto plain = run_cli(generate_args(prompt, {}));
    ASSERT_EQ(plain.status, 0) << plain.err;
    EXPECT_EQ(plain.err.find("speculation"), std::string::npos);
    const std::vector<std::vector<std::string>> drafts = {
        {"--lookup", "3"},
        {"--lookup", "1", "--draft-max", "6"},
        {"--draft", test::default_model_dir().string()},
        {"--draft", q4},
        {"--draft", q4, "--draft-max", "2"},
        {"--draft-self", "int4"},
        {"--draft-self", "int8"},
        {"--draft-self", "q3_k"},
    };
    for (const auto& extra : drafts) {
      const auto spec = run_cli(generate_args(prompt, extra));
      ASSERT_EQ(spec.status, 0) << spec.err;
      EXPECT_EQ(spec.out, plain.out) << extra[0] << " " << extra[1];
      const auto [drafted, accepted] = drafted_accepted(spec.err);
      ASSERT_GE(drafted, 0) << spec.err;
      EXPECT_LE(accepted, drafted);
      if (extra[1] == test::default_model_dir().string()) {
        EXPECT_EQ(accepted, drafted) << "the model drafting for itself";
      }
      if (extra[1] == q4) q4_rejected += drafted - accepted;
    }
  }
  EXPECT_GT(q4_rejected, 0);  // the int4 copy's drafts were refused sometimes
}

// Whatever the step does with a row — a grammar mask, a stop string, sampling — it does the
// same under speculation, because it sees the same rows. (Sampled, a draft model samples its
// drafts and they go through rejection sampling: the same distribution, other tokens for the
// seed; prompt lookup's drafts are point masses, so even the tokens are plain sampling's.)
TEST(SpeculativeCli, GrammarStopStringsAndSamplingAreUnchanged) {
  const std::vector<std::vector<std::string>> modes = {
      {"--json"}, {"--stop", "\n\n"}, {"--stop", "the"}, {"--temp", "0.8", "--seed", "7"}};
  for (const auto& mode : modes) {
    std::vector<std::string> base = generate_args(kPrompts[1], mode);
    const auto plain = run_cli(base);
    ASSERT_EQ(plain.status, 0) << plain.err;
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{"--lookup", "2"}, std::vector<std::string>{"--draft-self", "int4"}}) {
      std::vector<std::string> args = base;
      args.insert(args.end(), extra.begin(), extra.end());
      const auto spec = run_cli(args);
      ASSERT_EQ(spec.status, 0) << spec.err;
      if (mode[0] == "--temp" && extra[0] == "--draft-self") {
        EXPECT_EQ(spec.out, run_cli(args).out) << "a seed still fixes the tokens";
        continue;
      }
      EXPECT_EQ(spec.out, plain.out) << mode[0] << " " << extra[0];
    }
  }
}

TEST(SpeculativeCli, ChatRepliesAreThePlainOnes) {
  const std::string input = "Once more unto the breach\nOnce more unto the breach, dear friends\n";
  const auto plain = run_cli({"chat", "--temp", "0", "-n", "40", "-t", "1"}, input);
  ASSERT_EQ(plain.status, 0) << plain.err;
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--lookup", "2"}, std::vector<std::string>{"--draft-self", "int4"}}) {
    std::vector<std::string> args = {"chat", "--temp", "0", "-n", "40", "-t", "1", "--verbose"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto spec = run_cli(args, input);
    ASSERT_EQ(spec.status, 0) << spec.err;
    EXPECT_EQ(spec.out, plain.out) << extra[0];
    EXPECT_NE(spec.err.find("speculation: "), std::string::npos) << spec.err;
  }
}

TEST(SpeculativeCli, BadFlagsAreOneLineErrors) {
  test::TempDir tiny;
  test::write_tiny_model_dir(tiny.path());
  test::expect_one_line_error(run_cli(generate_args("a", {"--lookup", "0"})), "--lookup must be 1 to 64");
  test::expect_one_line_error(run_cli(generate_args("a", {"--lookup", "65"})), "--lookup must be 1 to 64");
  test::expect_one_line_error(run_cli(generate_args("a", {"--lookup", "2", "--draft-self", "int4"})),
                              "--lookup, --draft and --draft-self exclude each other");
  test::expect_one_line_error(run_cli(generate_args("a", {"--draft-max", "3"})),
                              "--draft-max needs --lookup, --draft or --draft-self");
  test::expect_one_line_error(run_cli(generate_args("a", {"--lookup", "2", "--draft-max", "-1"})),
                              "--draft-max must be 0 to 64");
  test::expect_one_line_error(run_cli(generate_args("a", {"--draft-self", "bf16"})),
                              "--draft-self must be int8, int4, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k or q3_k, got");
  test::expect_one_line_error(run_cli(generate_args("a", {"--draft", tiny.path().string()})),
                              "vocabulary has 300 tokens but the target's has 2048");
  test::expect_one_line_error(run_cli(generate_args("a", {"--draft", (tiny.path() / "nothing").string()})), "--draft ");
  test::expect_one_line_error(run_cli(generate_args("a", {"--lookup", "x"})), "--lookup");
  // serve checks them before it loads or listens.
  test::expect_one_line_error(run_cli({"serve", "--port", "0", "--lookup", "0"}), "--lookup must be 1 to 64");
  test::expect_one_line_error(run_cli({"serve", "--port", "0", "--draft-max", "3"}),
                              "--draft-max needs --lookup, --draft or --draft-self");
  test::expect_one_line_error(run_cli({"serve", "--port", "0", "--draft-self", "int2"}),
                              "--draft-self must be int8, int4, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k or q3_k, got");
  test::expect_one_line_error(run_cli({"serve", "--port", "0", "--draft", tiny.path().string()}),
                              "vocabulary has 300 tokens but the target's has 2048");
}

// bench generate's speculative A/B: plain and speculative decoding of a text prompt, identical
// tokens, and acceptance counts that add up. The model drafting for itself accepts everything,
// so each full pass of k drafts gives k + 1 tokens (the speeds are not checked here).
TEST(SpeculativeCli, BenchReportsAcceptanceAndTokensPerPass) {
  test::TempDir out;
  const std::string results = (out.path() / "results.jsonl").string();
  const std::string text = (out.path() / "prompt.txt").string();
  test::write_text(text, kPrompts[1]);
  const auto r = run_cli({"bench",
                          "generate",
                          "-p",
                          "32",
                          "-n",
                          "24",
                          "-r",
                          "1",
                          "-t",
                          "1",
                          "--probe-mib",
                          "0",
                          "--prompt-file",
                          text,
                          "--draft",
                          test::default_model_dir().string(),
                          "--draft-max",
                          "5",
                          "--results",
                          results});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("speculative A/B (draft model"), std::string::npos) << r.out;
  std::istringstream lines(test::read_text(results));
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 3u);
  const nlohmann::json& spec = records[2];
  EXPECT_EQ(spec["bench"], "generate-speculative");
  EXPECT_EQ(spec["identical_output"], true);
  EXPECT_EQ(spec["n_prompt"], 32);
  // 24 tokens after the prefill's: 4 passes of 5 drafts + the target's own token.
  EXPECT_EQ(spec["accepted"], spec["drafted"]);
  EXPECT_DOUBLE_EQ(spec["acceptance_rate"].get<double>(), 1.0);
  EXPECT_EQ(spec["verify_passes"], 4);
  EXPECT_EQ(spec["drafted"], 5 + 5 + 5 + 5);
  EXPECT_EQ(spec["target_passes"], 4);
  EXPECT_DOUBLE_EQ(spec["tokens_per_verify_pass"].get<double>(), 6.0);
  for (const char* key : {"plain_median_ts", "speculative_median_ts", "speedup", "draft_time_share"}) {
    EXPECT_TRUE(spec.contains(key)) << key;
  }
  ASSERT_EQ(spec["pass_cost_relative"].size(), 9u);  // passes of 1 .. 9 tokens
  EXPECT_DOUBLE_EQ(spec["pass_cost_relative"][0].get<double>(), 1.0);
  test::expect_one_line_error(run_cli({"bench", "generate", "-p", "200", "-n", "8", "--prompt-file", text,
                                       "--probe-mib", "0", "--results", results}),
                              "fewer than -p 200");
}

// --draft-oracle P: drafts that know the plain continuation, right with probability P.
TEST(SpeculativeCli, BenchOracleDraftsAcceptAtTheGivenRate) {
  test::TempDir out;
  const std::string results = (out.path() / "results.jsonl").string();
  for (const char* rate : {"1", "0"}) {
    const auto r = run_cli({"bench", "generate", "-p", "16", "-n", "40", "-r", "1", "-t", "1", "--probe-mib", "0",
                            "--draft-oracle", rate, "--draft-max", "3", "--results", results});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("oracle drafts right with p = "), std::string::npos) << r.out;
  }
  std::istringstream lines(test::read_text(results));
  std::vector<nlohmann::json> spec;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["bench"] == "generate-speculative") spec.push_back(j);
  }
  ASSERT_EQ(spec.size(), 2u);
  // k = 3, 40 tokens after the prefill's: p = 1 accepts every draft, 4 tokens in each of 10
  // passes; p = 0 none, one token a pass, the last a plain step (no budget left to draft).
  EXPECT_EQ(spec[0]["accepted"], spec[0]["drafted"]);
  EXPECT_EQ(spec[0]["verify_passes"], 10);
  EXPECT_EQ(spec[0]["drafted"], 10 * 3);
  EXPECT_EQ(spec[1]["accepted"], 0);
  EXPECT_EQ(spec[1]["verify_passes"], 39);
  // With a draft model the oracle overrides its choices and the draft model does the drafting
  // work: the same counts as the free oracle's.
  for (const char* rate : {"1", "0"}) {
    const auto r = run_cli({"bench",
                            "generate",
                            "-p",
                            "16",
                            "-n",
                            "40",
                            "-r",
                            "1",
                            "-t",
                            "1",
                            "--probe-mib",
                            "0",
                            "--draft-self",
                            "int8",
                            "--draft-oracle",
                            rate,
                            "--draft-max",
                            "3",
                            "--results",
                            results});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("self-draft int8, k = 3; its drafts right with p = "), std::string::npos) << r.out;
  }
  std::istringstream again(test::read_text(results));
  spec.clear();
  for (std::string line; std::getline(again, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["bench"] == "generate-speculative") spec.push_back(j);
  }
  ASSERT_EQ(spec.size(), 4u);
  EXPECT_EQ(spec[2]["accepted"], 10 * 3);
  EXPECT_EQ(spec[2]["drafted"], 10 * 3);
  EXPECT_EQ(spec[2]["verify_passes"], 10);
  EXPECT_EQ(spec[3]["accepted"], 0);
  EXPECT_EQ(spec[3]["verify_passes"], 39);
  test::expect_one_line_error(run_cli({"bench", "generate", "--draft-oracle", "1.5", "--probe-mib", "0"}),
                              "--draft-oracle must be 0 to 1");
  test::expect_one_line_error(
      run_cli({"bench", "generate", "--draft-oracle", "0.5", "--lookup", "2", "--probe-mib", "0"}),
      "--draft-oracle excludes --lookup");
}

TEST(SpeculativeCli, HelpNamesTheFlags) {
  for (const char* command : {"generate", "chat", "serve"}) {
    const auto r = run_cli({command, "--help"});
    ASSERT_EQ(r.status, 0);
    for (const char* flag : {"--lookup", "--draft ", "--draft-self", "--draft-max"}) {
      EXPECT_NE(r.out.find(flag), std::string::npos) << command << " " << flag;
    }
  }
}

}  // namespace
}  // namespace nanoinfer
