// The bench subcommands' one flag convention (src/cli/bench_output.h): `--results FILE` for the
// JSON-lines file, `-r N` for the measured runs, `-o` only as bench generate's output format;
// the older spellings (`-o FILE`, `--runs`) still work and a format name after the old `-o` is
// refused. Also `tokenize` without -m, which uses the embedded default model as generate does.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "support/files.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

using test::run_cli;

std::vector<nlohmann::json> bench_flag_records(const std::filesystem::path& file) {
  std::vector<nlohmann::json> out;
  const std::string text = test::read_text(file);
  for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1) {
    out.push_back(nlohmann::json::parse(text.substr(at, end - at)));
  }
  return out;
}

TEST(BenchFlags, ResultsAndRepetitionsAreSpelledAlikeEverywhere) {
  test::TempDir dir;
  const std::string model = test::default_model_dir().string();
  const auto load = run_cli({"bench", "load", "-m", model, "-t", "1", "-r", "2", "--results", (dir / "a").string()});
  ASSERT_EQ(load.status, 0) << load.err;
  const auto tok =
      run_cli({"bench", "tokenize", "-m", model, "-f", (test::default_model_dir() / "config.json").string(), "-r", "2",
               "--results", (dir / "a").string()});
  ASSERT_EQ(tok.status, 0) << tok.err;
  const auto sampler =
      run_cli({"bench", "sampler", "--vocab", "64", "--calls", "2", "-r", "1", "--results", (dir / "a").string()});
  ASSERT_EQ(sampler.status, 0) << sampler.err;
  const auto record = run_cli({"bench", "record", "--results", (dir / "a").string()}, "{\"bench\":\"mine\"}\n");
  ASSERT_EQ(record.status, 0) << record.err;
  const std::vector<nlohmann::json> records = bench_flag_records(dir / "a");
  ASSERT_GE(records.size(), 4u);
  EXPECT_EQ(records[0]["bench"], "load");
  EXPECT_EQ(records[0]["runs"], 2);
  EXPECT_EQ(records[1]["bench"], "tokenize");
  EXPECT_EQ(records.back()["bench"], "mine");
  // The help lists the new names only.
  const auto help = run_cli({"bench", "load", "--help"});
  EXPECT_NE(help.out.find("--results"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("-r,--repetitions"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("-o,--output"), std::string::npos) << help.out;
}

TEST(BenchFlags, OldSpellingsStillWorkButNotAsAFormat) {
  test::TempDir dir;
  const std::string model = test::default_model_dir().string();
  const auto load = run_cli({"bench", "load", "-m", model, "-t", "1", "--runs", "1", "-o", (dir / "b").string()});
  ASSERT_EQ(load.status, 0) << load.err;
  EXPECT_EQ(bench_flag_records(dir / "b").at(0)["runs"], 1);
  test::expect_one_line_error(run_cli({"bench", "load", "-m", model, "-o", "json"}),
                              "-o json: here -o is the old spelling of --results FILE; only bench generate takes an "
                              "output format");
  test::expect_one_line_error(run_cli({"bench", "record"}, "{\"bench\":\"mine\"}\n"),
                              "bench record needs --results FILE");
}

TEST(TokenizeCli, WithoutAModelUsesTheEmbeddedOne) {
  const auto embedded = run_cli({"tokenize", "-p", "ROMEO: hello", "--ids"});
  ASSERT_EQ(embedded.status, 0) << embedded.err;
  const auto from_disk = run_cli({"tokenize", "-m", test::default_model_dir().string(), "-p", "ROMEO: hello", "--ids"});
  ASSERT_EQ(from_disk.status, 0) << from_disk.err;
  EXPECT_EQ(embedded.out, from_disk.out);
  EXPECT_GT(embedded.out.size(), 4u);
}

TEST(VersionCli, NamesTheCommit) {
  const auto r = run_cli({"--version"});
  ASSERT_EQ(r.status, 0) << r.err;
  if (r.out.find("commit unknown") != std::string::npos) GTEST_SKIP() << "built outside a git checkout: " << r.out;
  // "nanoinfer 0.1.0 (commit abc1234)", ", with uncommitted changes" when the tree had them.
  EXPECT_TRUE(r.out.starts_with("nanoinfer " NANOINFER_VERSION " (commit ")) << r.out;
  const size_t hash = r.out.find("(commit ") + 8;
  const size_t end = r.out.find_first_not_of("0123456789abcdef", hash);
  EXPECT_GE(end - hash, 7u) << r.out;
}

}  // namespace
}  // namespace nanoinfer
