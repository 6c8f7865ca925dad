// generation_config.json parsing and the defaults < file < flags layering.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "nanoinfer/error.h"
#include "nanoinfer/generation_config.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

std::string qwen_generation_config() {
  std::ifstream in(NANOINFER_SOURCE_DIR "/data/qwen2.5-0.5b-instruct/generation_config.json");
  EXPECT_TRUE(in) << "missing data/qwen2.5-0.5b-instruct/generation_config.json";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GenerationConfigParse, ReadsQwenFile) {
  const GenerationConfig c = GenerationConfig::parse(qwen_generation_config(), "qwen");
  EXPECT_EQ(c.do_sample, true);
  EXPECT_EQ(c.temperature, 0.7);
  EXPECT_EQ(c.top_k, 20);
  EXPECT_EQ(c.top_p, 0.8);
  EXPECT_EQ(c.repetition_penalty, 1.1);
  EXPECT_FALSE(c.min_p.has_value());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
}

// The other architectures' published defaults (data/qwen3-0.6b, data/llama-3.2-1b): what a
// synthetic model made from those directories samples with unless flags say otherwise.
TEST(GenerationConfigParse, ReadsQwen3AndLlamaFiles) {
  const GenerationConfig q3 = GenerationConfig::load_from_dir(NANOINFER_SOURCE_DIR "/data/qwen3-0.6b");
  EXPECT_EQ(q3.temperature, 0.6);
  EXPECT_EQ(q3.top_k, 20);
  EXPECT_EQ(q3.top_p, 0.95);
  EXPECT_EQ(q3.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  const GenerationConfig ll = GenerationConfig::load_from_dir(NANOINFER_SOURCE_DIR "/data/llama-3.2-1b");
  EXPECT_EQ(ll.temperature, 0.6);
  EXPECT_EQ(ll.top_p, 0.9);
  EXPECT_FALSE(ll.top_k.has_value());
  EXPECT_EQ(ll.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
}

TEST(GenerationConfigParse, EosMayBeASingleIdOrAbsent) {
  EXPECT_EQ(GenerationConfig::parse(R"({"eos_token_id": 7})", "t").eos_token_ids, (std::vector<int32_t>{7}));
  EXPECT_TRUE(GenerationConfig::parse(R"({"eos_token_id": null})", "t").eos_token_ids.empty());
  EXPECT_TRUE(GenerationConfig::parse("{}", "t").eos_token_ids.empty());
}

TEST(GenerationConfigParse, RejectsBadValuesNamingTheFile) {
  for (const char* bad : {R"({"temperature": -1})", R"({"top_p": 0})", R"({"top_k": 2.5})", R"({"top_k": -3})",
                          R"({"repetition_penalty": 0})", R"({"min_p": 2})", R"({"eos_token_id": "x"})",
                          R"({"eos_token_id": [1, -2]})", R"({"do_sample": "yes"})", "[1]", "{"}) {
    SCOPED_TRACE(bad);
    try {
      GenerationConfig::parse(bad, "dir/generation_config.json");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("dir/generation_config.json"), std::string::npos) << e.what();
    }
  }
}

TEST(GenerationConfigParse, MissingFileIsAnEmptyConfig) {
  test::TempDir dir;
  const GenerationConfig c = GenerationConfig::load_from_dir(dir.path());
  EXPECT_FALSE(c.temperature.has_value());
  EXPECT_TRUE(c.eos_token_ids.empty());
  test::write_text(dir / "generation_config.json", R"({"temperature": 0.25, "eos_token_id": 3})");
  EXPECT_EQ(GenerationConfig::load_from_dir(dir.path()).temperature, 0.25);
}

TEST(GenerationConfigResolve, DefaultsThenFileThenFlags) {
  const GenerationConfig file = GenerationConfig::parse(qwen_generation_config(), "qwen");
  const SamplingSettings none = resolve_sampling({}, {.seed = 1});
  EXPECT_EQ(none.temperature.value, 1.0);
  EXPECT_EQ(none.top_k.value, 50);
  EXPECT_EQ(none.top_k.source, SettingSource::Default);

  const SamplingSettings from_file = resolve_sampling(file, {.seed = 1});
  EXPECT_EQ(from_file.temperature.value, 0.7);
  EXPECT_EQ(from_file.temperature.source, SettingSource::GenerationConfig);
  EXPECT_EQ(from_file.top_k.value, 20);
  EXPECT_EQ(from_file.top_p.value, 0.8);
  EXPECT_EQ(from_file.repetition_penalty.value, 1.1);
  EXPECT_EQ(from_file.min_p.value, 0.0);
  EXPECT_EQ(from_file.min_p.source, SettingSource::Default);

  const SamplingSettings flagged = resolve_sampling(file, {.temperature = 0.0, .top_k = 3, .min_p = 0.1, .seed = 9});
  EXPECT_EQ(flagged.temperature.value, 0.0);
  EXPECT_EQ(flagged.temperature.source, SettingSource::Flag);
  EXPECT_EQ(flagged.top_k.value, 3);
  EXPECT_EQ(flagged.top_p.source, SettingSource::GenerationConfig);
  EXPECT_EQ(flagged.min_p.value, 0.1);
  EXPECT_EQ(flagged.seed.value, 9u);
  EXPECT_EQ(flagged.seed.source, SettingSource::Flag);
  EXPECT_EQ(flagged.params().top_k, 3);
}

TEST(GenerationConfigResolve, DoSampleFalseMeansGreedyUnlessTempFlag) {
  const GenerationConfig file = GenerationConfig::parse(R"({"do_sample": false, "temperature": 0.6})", "t");
  const SamplingSettings s = resolve_sampling(file, {.seed = 1});
  EXPECT_EQ(s.temperature.value, 0.0);
  EXPECT_EQ(s.temperature.source, SettingSource::GenerationConfig);
  EXPECT_EQ(resolve_sampling(file, {.temperature = 0.9, .seed = 1}).temperature.value, 0.9);
}

TEST(GenerationConfigResolve, InvalidFlagThrows) {
  EXPECT_THROW(resolve_sampling({}, {.top_p = 1.5}), Error);
  EXPECT_THROW(resolve_sampling({}, {.temperature = -0.5}), Error);
}

TEST(GenerationConfigResolve, DescribeNamesEverySource) {
  const GenerationConfig file = GenerationConfig::parse(R"({"temperature": 0.7})", "t");
  const std::string text = resolve_sampling(file, {.top_k = 5}).describe();
  EXPECT_NE(text.find("temperature        = 0.7 (generation_config.json)"), std::string::npos) << text;
  EXPECT_NE(text.find("top_k              = 5 (flag)"), std::string::npos) << text;
  EXPECT_NE(text.find("top_p              = 1 (default)"), std::string::npos) << text;
  EXPECT_NE(text.find("(random)"), std::string::npos) << text;
}

}  // namespace
}  // namespace nanoinfer
