#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nanoinfer/config.h"
#include "nanoinfer/error.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// The message of the Error that parsing the small config with `key` set to `value` (or
// removed when `value` is null) throws, or "" if it parses.
std::string error_with(const std::string& key, const nlohmann::json& value) {
  auto j = nlohmann::json::parse(test::small_qwen2_config_json());
  if (value.is_null()) {
    j.erase(key);
  } else {
    j[key] = value;
  }
  try {
    ModelConfig::parse(j.dump(), "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigParse, Qwen25HalfBillion) {
  const ModelConfig c = ModelConfig::load(test::qwen25_config_path());
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_attention_heads, 14);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_EQ(c.kv_dim(), 128);
  EXPECT_EQ(c.group_size(), 7);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_EQ(c.rope_theta, 1000000.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(ConfigParse, SmallConfigAndDefaults) {
  EXPECT_EQ(error_with("tie_word_embeddings", true), "");
  auto j = nlohmann::json::parse(test::small_qwen2_config_json(false));
  j.erase("num_key_value_heads");
  j.erase("rope_theta");
  const ModelConfig c = ModelConfig::parse(j.dump(), "cfg.json");
  EXPECT_EQ(c.num_key_value_heads, c.num_attention_heads);  // Hugging Face's default
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim(), 16);
}

TEST(ConfigParse, MissingRequiredFieldIsNamed) {
  for (const char* key :
       {"hidden_size", "vocab_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "model_type"})
    EXPECT_THAT(error_with(key, nullptr), HasSubstr(std::string("missing required field \"") + key + "\"")) << key;
}

TEST(ConfigParse, InvariantFailures) {
  EXPECT_THAT(error_with("num_attention_heads", 5),
              HasSubstr("hidden_size 64 is not divisible by num_attention_heads 5"));
  EXPECT_THAT(error_with("num_key_value_heads", 3),
              HasSubstr("num_attention_heads 4 is not divisible by num_key_value_heads 3"));
  // 72 / 8 = 9: odd head dim cannot be split into RoPE pairs.
  auto j = nlohmann::json::parse(test::small_qwen2_config_json());
  j["hidden_size"] = 72;
  j["num_attention_heads"] = 8;
  j["num_key_value_heads"] = 8;
  try {
    ModelConfig::parse(j.dump(), "cfg.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("head dim 9 (hidden_size 72 / num_attention_heads 8) must be "
                                    "even for RoPE"));
  }
  EXPECT_THAT(error_with("head_dim", 32), HasSubstr("head_dim 32 differs"));
}

TEST(ConfigParse, BadValues) {
  EXPECT_THAT(error_with("hidden_size", 0), HasSubstr("field \"hidden_size\": expected an integer"));
  EXPECT_THAT(error_with("hidden_size", -64), HasSubstr("found -64"));
  EXPECT_THAT(error_with("hidden_size", "64"), HasSubstr("found \"64\""));
  EXPECT_THAT(error_with("vocab_size", 1LL << 40), HasSubstr("field \"vocab_size\""));
  EXPECT_THAT(error_with("rms_norm_eps", 0), HasSubstr("field \"rms_norm_eps\": expected a positive"));
  EXPECT_THAT(error_with("tie_word_embeddings", "yes"), HasSubstr("expected true or false"));
}

TEST(ConfigParse, RmsNormEpsMustBeSmall) {
  for (const double bad : {1e308, 1.0, 0.5, 0.0100001}) {
    EXPECT_EQ(error_with("rms_norm_eps", bad),
              fmt::format("cfg.json: field \"rms_norm_eps\": expected a small positive number in "
                          "(0, 0.01], found {}",
                          bad));
  }
  for (const double good : {0.01, 1e-5, 1e-6, 1e-12}) EXPECT_EQ(error_with("rms_norm_eps", good), "");
}

// Every dimension is bounded by what real models use, with margin (unbounded, 100,000 layers
// would make a 103 MB error line, 2^24 layers 11 GB before bad_alloc).
TEST(ConfigParse, DimensionsBoundedByRealModels) {
  EXPECT_THAT(error_with("num_hidden_layers", 100000),
              HasSubstr("field \"num_hidden_layers\": expected an integer in [1, 1024], found 100000"));
  EXPECT_THAT(error_with("num_hidden_layers", 1 << 24), HasSubstr("[1, 1024], found 16777216"));
  EXPECT_THAT(error_with("vocab_size", 1 << 21),
              HasSubstr("field \"vocab_size\": expected an integer in [1, 1048576]"));
  EXPECT_THAT(error_with("intermediate_size", 1 << 19),
              HasSubstr("field \"intermediate_size\": expected an integer in [1, 262144]"));
  EXPECT_THAT(error_with("max_position_embeddings", 1 << 25), HasSubstr("[1, 16777216]"));
  EXPECT_THAT(error_with("num_key_value_heads", 2048), HasSubstr("field \"num_key_value_heads\""));
  EXPECT_THAT(error_with("vocab_size", nlohmann::json::parse("18446744073709551615")),
              HasSubstr("found 9223372036854775807"));
  EXPECT_THAT(error_with("rope_theta", 1e300),
              HasSubstr("field \"rope_theta\": expected a number in [1, 1000000000000]"));
  EXPECT_THAT(error_with("rope_theta", -5), HasSubstr("field \"rope_theta\": expected a positive number"));
  // What real models use passes: Qwen2.5-1M's context and rope_theta, a 256k vocabulary.
  EXPECT_EQ(error_with("max_position_embeddings", 1010000), "");
  EXPECT_EQ(error_with("rope_theta", 1e7), "");
  EXPECT_EQ(error_with("vocab_size", 262144), "");
  auto j = nlohmann::json::parse(test::small_qwen2_config_json());
  j["hidden_size"] = 4096;
  j["num_attention_heads"] = 2;
  j["num_key_value_heads"] = 2;
  EXPECT_THAT([&] { ModelConfig::parse(j.dump(), "cfg.json"); },
              ThrowsMessage<Error>(HasSubstr("head dim 2048 (hidden_size 4096 / num_attention_heads 2) exceeds 1024")));
}

TEST(ConfigParse, UnsupportedModels) {
  EXPECT_THAT(error_with("model_type", "gemma3"),
              HasSubstr("unsupported model_type \"gemma3\" (nanoinfer supports 'qwen2' (Qwen2 / Qwen2.5), "
                        "'qwen3' (Qwen3, dense), 'llama' (Llama 3.x))"));
  EXPECT_THAT(error_with("use_sliding_window", true), HasSubstr("use_sliding_window=true is not supported"));
  EXPECT_THAT(error_with("hidden_act", "gelu"), HasSubstr("unsupported hidden_act \"gelu\""));
  EXPECT_THAT(error_with("rope_scaling", nlohmann::json{{"type", "yarn"}}), HasSubstr("rope_scaling"));
}

TEST(ConfigParse, NotJsonAndMissingFile) {
  try {
    ModelConfig::parse("{\"model_type\": ", "cfg.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cfg.json: not valid JSON"));
  }
  try {
    ModelConfig::load("/nonexistent/config.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/config.json: not found"));
  }
}

}  // namespace
}  // namespace nanoinfer
