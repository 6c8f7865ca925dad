// The JSON nesting limit and the short excerpts in error messages, checked on the helper and
// through every reader of JSON from files: config.json, generation_config.json, tokenizer.json,
// tokenizer_config.json and the safetensors header. Nesting 100,000 deep crashed each of them
// before the limit (stack overflow in recursive dump/destruction).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "nanoinfer/config.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generation_config.h"
#include "nanoinfer/json_limits.h"
#include "nanoinfer/tokenizer.h"
#include "support/checks.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

using test::error_of;

using ::testing::HasSubstr;

std::string nested(size_t depth, std::string_view inner = "") {
  return std::string(depth, '[') + std::string(inner) + std::string(depth, ']');
}

TEST(JsonDepth, LimitIsExactAndCountsObjectsAndArrays) {
  EXPECT_EQ(error_of([] { check_json_depth(nested(64), "x"); }), "");
  EXPECT_EQ(error_of([] { check_json_depth(nested(65), "x"); }), "x: JSON nested deeper than 64 levels (at byte 64)");
  EXPECT_EQ(error_of([] { check_json_depth("{\"a\":" + nested(63) + "}", "x"); }), "");
  EXPECT_THAT(error_of([] { check_json_depth("{\"a\":" + nested(64) + "}", "x"); }), HasSubstr("deeper than 64"));
  // Siblings do not add up: depth is the nesting, not the number of brackets.
  std::string siblings = "[";
  for (int i = 0; i < 1000; ++i) siblings += (i ? "," : "") + nested(10);
  siblings += "]";
  EXPECT_EQ(error_of([&] { check_json_depth(siblings, "x"); }), "");
  EXPECT_EQ(error_of([] { check_json_depth(nested(3), "x", 2); }), "x: JSON nested deeper than 2 levels (at byte 2)");
}

TEST(JsonDepth, BracketsInStringsDoNotCount) {
  const std::string in_string = "[\"" + nested(100) + "\"]";
  EXPECT_EQ(error_of([&] { check_json_depth(in_string, "x"); }), "");
  // An escaped quote does not end the string; an escaped backslash before a quote does.
  EXPECT_EQ(error_of([&] { check_json_depth(R"(["\"[[[[", 1])", "x", 1); }), "");
  EXPECT_THAT(error_of([&] { check_json_depth(R"(["\\", [1]])", "x", 1); }),
              HasSubstr("deeper than 1 levels (at byte 7)"));
  // Unterminated strings and unbalanced brackets are the parser's to report, not a crash here.
  EXPECT_EQ(error_of([] { check_json_depth("[\"abc\\", "x"); }), "");
  EXPECT_EQ(error_of([] { check_json_depth("]]]]}}}[", "x"); }), "");
}

// The one parser: the depth check before nlohmann's parser, the problem in words, the value
// untouched on failure; the throwing forms name the origin.
TEST(JsonParse, DepthFirstThenTheParserAndTheProblemInWords) {
  nlohmann::json j = 7;
  std::string problem;
  EXPECT_FALSE(try_parse_json(nested(100000), j, problem));
  EXPECT_EQ(problem, "JSON nested deeper than 64 levels (at byte 64)");
  EXPECT_EQ(j, 7);
  EXPECT_FALSE(try_parse_json("{\"a\": ", j, problem));
  EXPECT_THAT(problem, ::testing::StartsWith("not valid JSON: "));
  EXPECT_EQ(j, 7);
  ASSERT_TRUE(try_parse_json(R"({"b": 2, "a": [1]})", j, problem)) << problem;
  EXPECT_EQ(j["a"][0], 1);
  nlohmann::ordered_json o;
  ASSERT_TRUE(try_parse_json(R"({"b": 2, "a": 1})", o, problem)) << problem;
  EXPECT_EQ(o.begin().key(), "b");  // file order kept
  EXPECT_EQ(error_of([] { parse_json("{\"a\":" + nested(65) + "}", "f.json"); }),
            "f.json: JSON nested deeper than 64 levels (at byte 68)");
  EXPECT_THAT(error_of([] { parse_ordered_json("[1,", "g.json"); }), ::testing::StartsWith("g.json: not valid JSON: "));
  EXPECT_EQ(parse_ordered_json(nested(64), "h.json").dump(), nested(64));
}

TEST(Excerpt, ShortTextIsKeptLongTextIsCutOnACharacterBoundary) {
  EXPECT_EQ(excerpt("silu"), "silu");
  EXPECT_EQ(excerpt("a\nb\tc\x01"), "a\\nb\\tc\\x01");
  EXPECT_EQ(excerpt(std::string(61, 'x')), std::string(60, 'x') + "... (61 bytes)");
  // "é" is two bytes; a cut at byte 5 of "aaaaé..." would split it, so the cut moves back.
  EXPECT_EQ(excerpt("aaaa\xC3\xA9zz", 5), "aaaa... (8 bytes)");
  EXPECT_EQ(excerpt(std::string(100000, '[')).size(), 60 + std::string("... (100000 bytes)").size());
}

TEST(JsonLimits, ConfigJsonDeepValueIsAnErrorNotACrash) {
  auto j = nlohmann::json::parse(test::small_qwen2_config_json());
  std::string text = j.dump();
  text.insert(text.size() - 1, ",\"hidden_act\":" + nested(100000));
  EXPECT_EQ(error_of([&] { ModelConfig::parse(text, "cfg.json"); }),
            "cfg.json: JSON nested deeper than 64 levels (at byte " + std::to_string(j.dump().size() - 1 + 14 + 63) +
                ")");  // the 64th '['
}

TEST(JsonLimits, ConfigErrorQuotesOnlyAPrefixOfTheValue) {
  auto j = nlohmann::json::parse(test::small_qwen2_config_json());
  j["hidden_act"] = std::string(1 << 20, 'g');
  const std::string e1 = error_of([&] { ModelConfig::parse(j.dump(), "cfg.json"); });
  EXPECT_THAT(e1, HasSubstr("unsupported hidden_act \"gggg"));
  EXPECT_THAT(e1, HasSubstr("... (1048578 bytes)"));
  EXPECT_LT(e1.size(), 200u);
  // 60 levels is within the limit: the value parses and the message is still short.
  j["hidden_act"] = nlohmann::json::parse(nested(60, "1"));
  const std::string e2 = error_of([&] { ModelConfig::parse(j.dump(), "cfg.json"); });
  EXPECT_THAT(e2, HasSubstr("unsupported hidden_act [[[["));
  EXPECT_LT(e2.size(), 200u);
}

TEST(JsonLimits, GenerationConfigDeepValueAndLongValue) {
  EXPECT_THAT(error_of([] { GenerationConfig::parse("{\"top_k\":" + nested(100000) + "}", "g.json"); }),
              HasSubstr("g.json: JSON nested deeper than 64 levels"));
  const std::string e =
      error_of([] { GenerationConfig::parse("{\"top_k\":\"" + std::string(100000, 'k') + "\"}", "g.json"); });
  EXPECT_THAT(e, HasSubstr("g.json: field \"top_k\": expected an integer, found \"kkk"));
  EXPECT_LT(e.size(), 200u);
}

TEST(JsonLimits, SafetensorsHeaderDeepShapeIsAnError) {
  const std::string header = R"({"a":{"dtype":"F32","shape":)" + nested(100000) + R"(,"data_offsets":[0,0]}})";
  const std::vector<std::byte> file = test::raw_safetensors(header, 0);
  EXPECT_EQ(error_of([&] { parse_safetensors(file, "m.safetensors"); }),
            "m.safetensors: JSON nested deeper than 64 levels (at byte 90)");  // 28 + 62
}

TEST(JsonLimits, SafetensorsLongNamesAndShapesAreCutInMessages) {
  const std::string name(100000, 'n');
  const std::string h1 = R"({")" + name + R"(":{"dtype":"F32","shape":[3],"data_offsets":[0,4]}})";
  const std::string e1 = error_of([&] { parse_safetensors(test::raw_safetensors(h1, 4), "m"); });
  EXPECT_THAT(e1, HasSubstr("m: tensor 'nnnn"));
  EXPECT_THAT(e1, HasSubstr("needs 12 bytes, found 4"));
  EXPECT_LT(e1.size(), 300u);
  std::string dims = "1";
  for (int i = 0; i < 10000; ++i) dims += ",1";
  const std::string h2 = R"({"t":{"dtype":"F32","shape":[)" + dims + R"(],"data_offsets":[0,8]}})";
  const std::string e2 = error_of([&] { parse_safetensors(test::raw_safetensors(h2, 8), "m"); });
  EXPECT_THAT(e2, HasSubstr("needs 4 bytes, found 8"));
  EXPECT_LT(e2.size(), 300u);
}

TEST(JsonLimits, TokenizerJsonDeepValueIsAnError) {
  const std::string deep = R"({"version":"1.0","x":)" + nested(100000) + "}";
  EXPECT_THAT(error_of([&] { Tokenizer::from_json(deep, "tok.json"); }),
              HasSubstr("tokenizer.json: JSON nested deeper than 64 levels"));
  // The same limit as the other readers: the root plus 63 levels parse (and then fail on
  // the unknown field), the root plus 64 do not.
  EXPECT_THAT(error_of([] { Tokenizer::from_json(R"({"x":)" + nested(63) + "}", "t"); }),
              HasSubstr("unsupported field 'x'"));
  EXPECT_THAT(error_of([] { Tokenizer::from_json(R"({"x":)" + nested(64) + "}", "t"); }),
              HasSubstr("nested deeper than 64"));
  const std::string long_key = R"({")" + std::string(100000, 'k') + R"(":1})";
  const std::string e = error_of([&] { Tokenizer::from_json(long_key, "t"); });
  EXPECT_THAT(e, HasSubstr("unsupported field 'kkkk"));
  EXPECT_LT(e.size(), 200u);
}

}  // namespace
}  // namespace nanoinfer
