// A sharded checkpoint (model-0000K-of-0000N.safetensors + model.safetensors.index.json) loads
// exactly as the single file it was split from: the same logits bit for bit, the same greedy
// tokens, the same quantized output; the index's disagreements with the shards are refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "nanoinfer/error.h"
#include "nanoinfer/inspect.h"
#include "nanoinfer/model.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/quantize_model.h"
#include "support/checks.h"
#include "support/files.h"
#include "support/generation_model.h"
#include "support/sharded.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

TEST(ShardedModel, LogitsAndGreedyTokensAreBitwiseThoseOfTheSingleFile) {
  std::vector<fs::path> dirs = test::tiny_model_dirs();
  dirs.push_back(test::default_model_dir());
  ASSERT_GE(dirs.size(), 6u);
  for (const fs::path& dir : dirs) {
    const test::TempDir tmp;
    test::write_sharded_copy(dir, tmp / "sharded", 3);
    ASSERT_FALSE(fs::exists(tmp / "sharded/model.safetensors"));
    ModelOptions options;
    options.max_context = 32;
    options.threads = 2;
    std::vector<int32_t> whole_tokens, sharded_tokens;
    const std::vector<float> whole = test::prompt_and_greedy_logits(open_model_alone(dir, options), 8, &whole_tokens);
    const std::vector<float> sharded =
        test::prompt_and_greedy_logits(open_model_alone(tmp / "sharded", options), 8, &sharded_tokens);
    EXPECT_TRUE(test::same_bits(whole, sharded)) << dir.filename();
    EXPECT_EQ(whole_tokens, sharded_tokens) << dir.filename();
  }
}

TEST(ShardedModel, InspectSeesEveryShardsTensors) {
  const test::TempDir tmp;
  test::write_sharded_copy(test::default_model_dir(), tmp / "sharded", 2);
  const ModelReport whole = inspect_model(test::default_model_dir());
  const ModelReport sharded = inspect_model(tmp / "sharded");
  EXPECT_TRUE(sharded.problems.empty()) << sharded.problems.front();
  EXPECT_EQ(sharded.shards, 2u);
  EXPECT_EQ(whole.shards, 1u);
  EXPECT_TRUE(sharded.files.sharded());
  EXPECT_EQ(sharded.files.weights, tmp / "sharded/model.safetensors.index.json");
  EXPECT_EQ(sharded.file_bytes, fs::file_size(tmp / "sharded/model-00001-of-00002.safetensors") +
                                    fs::file_size(tmp / "sharded/model-00002-of-00002.safetensors"));
  ASSERT_EQ(sharded.tensors.size(), whole.tensors.size());
  std::vector<std::string> a, b;
  for (const auto& t : whole.tensors) a.push_back(t.name);
  for (const auto& t : sharded.tensors) b.push_back(t.name);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
}

// Quantization reads its source through the same file, and its calibration model loads from it.
TEST(ShardedModel, QuantizeFromShardsWritesTheSameBytes) {
  const test::TempDir tmp;
  test::write_tiny_model_dir(tmp / "m");
  test::write_sharded_copy(tmp / "m", tmp / "sharded", 2);
  std::string text;
  for (int i = 0; i < 20; ++i) text += "the king said to the queen, and the queen said nothing at all. ";
  test::write_text(tmp / "text.txt", text);
  QuantizeOptions o;
  o.calibration = tmp / "text.txt";
  o.calib_ctx = 64;
  o.threads = 2;
  quantize_model((tmp / "m").string(), tmp / "q-whole", o);
  quantize_model((tmp / "sharded").string(), tmp / "q-sharded", o);
  EXPECT_EQ(test::read_bytes(tmp / "q-whole/model.safetensors"), test::read_bytes(tmp / "q-sharded/model.safetensors"));
  EXPECT_EQ(test::read_text(tmp / "q-whole/config.json"), test::read_text(tmp / "q-sharded/config.json"));
  EXPECT_FALSE(fs::exists(tmp / "q-sharded/model.safetensors.index.json"));
}

TEST(ShardedModel, ASingleFileBesideAnIndexIsTheOneRead) {
  const test::TempDir tmp;
  test::write_sharded_copy(test::default_model_dir(), tmp / "both", 2);
  fs::copy_file(test::default_model_dir() / "model.safetensors", tmp / "both/model.safetensors");
  test::write_text(tmp / "both/model.safetensors.index.json", "not json");  // never read
  EXPECT_EQ(inspect_model(tmp / "both").files.weights, tmp / "both/model.safetensors");
}

TEST(ShardedModel, ABrokenIndexIsOneLineNamingIt) {
  const test::TempDir tmp;
  test::write_sharded_copy(test::default_model_dir(), tmp / "m", 2);
  const fs::path index = tmp / "m/model.safetensors.index.json";
  std::string text = test::read_text(index);
  const std::string second = "model-00002-of-00002.safetensors";
  text.replace(text.find(second), second.size(), "../model-00002-of-00002.safetensors");
  test::write_text(index, text);
  const std::string error = test::error_of([&] { open_model_alone(tmp / "m"); });
  EXPECT_THAT(error, testing::StartsWith(index.string() + ": tensor '"));
  EXPECT_THAT(error, testing::EndsWith("' maps to '../model-00002-of-00002.safetensors': a path; a shard must be a "
                                       "file beside the index"));
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace nanoinfer
