// The commands that take a model directory, on a sharded checkpoint: the same output as on
// the single file it was split from; a broken index one line naming it, exit 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/files.h"
#include "support/run_cli.h"
#include "support/sharded.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

class ShardedCli : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_sharded_copy(test::default_model_dir(), dir_ / "sharded", 3);
    std::string text;
    for (int i = 0; i < 8; ++i) text += "ROMEO: But soft, what light through yonder window breaks?\n";
    test::write_text(dir_ / "text.txt", text);
  }
  std::string sharded() const { return (dir_ / "sharded").string(); }
  std::string whole() const { return test::default_model_dir().string(); }
  fs::path index() const { return dir_ / "sharded/model.safetensors.index.json"; }
  test::TempDir dir_;
};

TEST_F(ShardedCli, GenerateChatAndPerplexityMatchTheSingleFile) {
  for (const bool chat : {false, true}) {
    const auto run = [&](const std::string& model) {
      if (chat) return run_cli({"chat", "-m", model, "-n", "12", "--temp", "0", "-t", "1"}, "hello\n");
      return run_cli({"generate", "-m", model, "-p", "ROMEO:", "-n", "12", "--temp", "0", "-t", "1"});
    };
    const auto a = run(whole()), b = run(sharded());
    ASSERT_EQ(a.status, 0) << a.err;
    ASSERT_EQ(b.status, 0) << b.err;
    EXPECT_EQ(a.out, b.out) << (chat ? "chat" : "generate");
  }
  const auto ppl = [&](const std::string& model) {
    return run_cli({"perplexity", "-m", model, "-f", (dir_ / "text.txt").string(), "-c", "64", "--json", "-t", "1"});
  };
  const auto a = ppl(whole()), b = ppl(sharded());
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  const nlohmann::json ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(jb.at("model"), sharded());
  for (const char* field : {"nll_sum", "mean_nll", "perplexity", "perplexity_stderr", "tokens", "scored"})
    EXPECT_EQ(ja.at(field), jb.at(field)) << field;  // exactly: the same logits
}

TEST_F(ShardedCli, InspectNamesTheIndexAndItsShards) {
  const auto r = run_cli({"inspect", sharded()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("file:   " + index().string() + " (3 shards), "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict: OK"), std::string::npos) << r.out;
}

TEST_F(ShardedCli, QuantizeReadsAShardedSource) {
  const auto r = run_cli(
      {"quantize", "-m", sharded(), "--type", "int8", "--method", "rtn", "-t", "1", "--out", (dir_ / "q").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto gen = run_cli({"generate", "-m", (dir_ / "q").string(), "-p", "ROMEO:", "-n", "4", "--temp", "0"});
  EXPECT_EQ(gen.status, 0) << gen.err;
  // The GGUF export of the shards is the export of the single file, byte for byte (in a directory
  // of the same name, which the file's general.name is).
  const std::string named = (dir_ / "named" / "default-model").string();
  test::write_sharded_copy(test::default_model_dir(), named, 2);
  for (const std::string& from : {whole(), named}) {
    const std::string out = (dir_ / (from == whole() ? "whole.gguf" : "sharded.gguf")).string();
    const auto exported =
        run_cli({"quantize", "-m", from, "--type", "bf16", "--format", "gguf", "-t", "1", "--out", out});
    ASSERT_EQ(exported.status, 0) << exported.err;
  }
  EXPECT_EQ(test::read_bytes(dir_ / "whole.gguf"), test::read_bytes(dir_ / "sharded.gguf"));
}

TEST_F(ShardedCli, ABrokenIndexIsOneLineAndExitOne) {
  test::write_text(index(), R"({"weight_map": {"model.embed_tokens.weight": "/etc/passwd.safetensors"}})");
  test::expect_error_exactly(
      run_cli({"generate", "-m", sharded(), "-p", "x", "-n", "1"}),
      index().string() +
          ": tensor 'model.embed_tokens.weight' maps to '/etc/passwd.safetensors': a path; a shard "
          "must be a file beside the index");
  test::write_text(index(), "{\"weight_map\": ");
  test::expect_one_line_error(run_cli({"inspect", sharded()}), index().string() + ": not valid JSON: ");
  fs::remove(dir_ / "sharded/model-00002-of-00003.safetensors");
  test::write_text(index(), R"({"weight_map": {"lm_head.weight": "model-00002-of-00003.safetensors"}})");
  test::expect_error_exactly(
      run_cli({"perplexity", "-m", sharded(), "-f", (dir_ / "text.txt").string()}),
      index().string() + ": shard 'model-00002-of-00003.safetensors' is not in " + (dir_ / "sharded").string());
}

}  // namespace
}  // namespace nanoinfer
