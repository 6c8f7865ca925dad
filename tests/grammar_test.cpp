// The grammar engine (nanoinfer/grammar.h): GBNF parsing and its errors, the byte-level parser
// (UTF-8 classes, repetitions, incomplete characters), and the token mask checked against brute
// force (each token's bytes fed to a copy of the parser state) on a small hand-made vocabulary
// and on the default model's tokenizer; the grammar logit processor; OpenAI's penalties.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "nanoinfer/engine.h"
#include "nanoinfer/error.h"
#include "nanoinfer/grammar.h"
#include "nanoinfer/logit_processor.h"
#include "nanoinfer/tokenizer.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

bool matches(const Grammar& g, std::string_view text) {
  GrammarState s(g);
  return s.advance(text) && s.complete();
}

bool prefix_ok(const Grammar& g, std::string_view text) {
  GrammarState s(g);
  return s.advance(text);
}

std::string error_of(std::string_view gbnf) {
  try {
    Grammar::from_gbnf(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Grammar, LiteralsClassesAndRepetitions) {
  const Grammar g = Grammar::from_gbnf(R"(
    # a comment
    root ::= "ab" digit{2,3} tail
    digit ::= [0-9]
    tail ::= ( "x" | "yz" )* "!"?
  )");
  EXPECT_TRUE(matches(g, "ab12"));
  EXPECT_TRUE(matches(g, "ab123x!"));
  EXPECT_TRUE(matches(g, "ab123xyzx"));
  EXPECT_FALSE(matches(g, "ab1"));
  EXPECT_FALSE(matches(g, "ab1234"));
  EXPECT_FALSE(matches(g, "ab12y"));
  EXPECT_TRUE(prefix_ok(g, "ab12y"));
  EXPECT_FALSE(prefix_ok(g, "ab12!x"));
  EXPECT_FALSE(prefix_ok(g, "b"));
}

TEST(Grammar, PlusStarOptionalAndNegatedClass) {
  const Grammar g = Grammar::from_gbnf("root ::= \"\\\"\" [^\"\\\\]+ \"\\\"\" [a-c]* \"z\"?\n");
  EXPECT_TRUE(matches(g, "\"hi\""));
  EXPECT_TRUE(matches(g, "\"h i\"abcz"));
  EXPECT_FALSE(matches(g, "\"\""));
  EXPECT_FALSE(prefix_ok(g, "\"a\\"));
  EXPECT_FALSE(matches(g, "\"a\"zz"));
}

TEST(Grammar, RulesMaySpanLinesAndEscapes) {
  const Grammar g = Grammar::from_gbnf("root ::= a\n  | b\nb ::= \"\\x41\\u00e9\\n\\t\"\na ::= [\\u0391-\\u03a9]\n");
  EXPECT_TRUE(matches(g, "A\xc3\xa9\n\t"));
  EXPECT_TRUE(matches(g, "\xce\x91"));  // U+0391
  EXPECT_FALSE(matches(g, "\xce\xaa"));  // U+03AA
}

TEST(Grammar, Utf8ClassesWorkByteByByte) {
  // Every code point of a class spanning 1- to 4-byte encodings, and nothing around it.
  const Grammar g = Grammar::from_gbnf("root ::= [\\u0070-\\U00010010]\n");
  for (uint32_t cp : {0x70u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u, 0x10010u}) {
    std::string s;
    if (cp < 0x80) s += static_cast<char>(cp);
    else if (cp < 0x800) s += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    else if (cp < 0x10000) s += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
    else s += {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
    EXPECT_TRUE(matches(g, s)) << std::hex << cp;
    // Each proper prefix is a valid but incomplete state.
    for (size_t k = 1; k < s.size(); ++k) {
      GrammarState st(g);
      EXPECT_TRUE(st.advance(std::string_view(s).substr(0, k))) << std::hex << cp;
      EXPECT_FALSE(st.complete());
    }
  }
  EXPECT_FALSE(matches(g, "o"));                 // U+006F
  EXPECT_FALSE(prefix_ok(g, "\xed\xa0\x80"));   // a surrogate
  EXPECT_FALSE(prefix_ok(g, "\xc0\xaf"));       // overlong
  EXPECT_FALSE(matches(g, "\xf0\x90\x80\x91"));  // U+10011
}

TEST(Grammar, ErrorsNameTheProblem) {
  EXPECT_NE(error_of("root ::= foo\n").find("'foo'"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"\n").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= \"\"? root\n").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc\n").find("unterminated"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"\n").find("twice"), std::string::npos);
  EXPECT_NE(error_of("start ::= \"a\"\n").find("'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]\n").find("backwards"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}\n").find("max < min"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"\n").find("')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"\n").find("escape"), std::string::npos);
  EXPECT_NE(error_of("").find("no rules"), std::string::npos);
  EXPECT_EQ(error_of("root ::= \"a\" |\n"), "");  // an empty alternative is allowed
}

// ---- the mask against brute force ----------------------------------------------------------------

// Brute force: token t is allowed from `state` iff its bytes advance a copy of the state.
std::vector<uint8_t> brute_mask(const GrammarState& state, const std::vector<std::string>& vocab) {
  std::vector<uint8_t> allowed(vocab.size(), 0);
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (vocab[id].empty()) continue;
    GrammarState s = state;
    allowed[id] = s.advance(vocab[id]) ? 1 : 0;
  }
  return allowed;
}

// Walks `text` byte by byte and compares the trie's mask with brute force at every prefix
// (every `stride`-th and the last, for large vocabularies).
void check_masks_along(const Grammar& g, const std::vector<std::string>& vocab, std::string_view text,
                       size_t stride = 1) {
  const VocabTrie trie(vocab);
  GrammarState state(g);
  std::vector<uint8_t> mask;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i % stride == 0 || i == text.size()) {
      trie.mask(state, mask);
      const std::vector<uint8_t> want = brute_mask(state, vocab);
      ASSERT_EQ(mask, want) << "after " << i << " bytes of " << text;
    }
    if (i < text.size()) {
      ASSERT_TRUE(state.advance(static_cast<uint8_t>(text[i]))) << "byte " << i << " of " << text;
    }
  }
  EXPECT_TRUE(state.complete());
}

std::vector<std::string> small_vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\":,.-+0123456789eEtrufalsn \\abxyz\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  for (int k = 0; k < 3000; ++k) {
    std::string t;
    const int len = 2 + static_cast<int>(rng() % 5);
    for (int j = 0; j < len; ++j) t += alphabet[rng() % alphabet.size()];
    v.push_back(t);
  }
  v.push_back("");  // an id the grammar never allows (like an added token)
  v.push_back("\"}");
  v.push_back("\":\"");
  v.push_back("\xe2\x82");  // incomplete UTF-8
  v.push_back("\x82\xac\"");
  return v;
}

TEST(GrammarMask, EqualsBruteForceOnASmallVocabulary) {
  const Grammar json = Grammar::from_gbnf(json_object_gbnf());
  const std::vector<std::string> vocab = small_vocab();
  check_masks_along(json, vocab, R"({"a":[1,-2.5e+3,"x\u00e9\n"],"b":{"c":null,"d":true},"\u20ac":"€😀"})");
  check_masks_along(json, vocab, "{}");
  const Grammar schema = Grammar::from_gbnf(json_schema_to_gbnf(R"({
    "type": "object", "properties": {"name": {"type": "string", "maxLength": 4},
    "n": {"type": "integer", "minimum": -5, "maximum": 120}}, "required": ["name"]})"));
  check_masks_along(schema, vocab, R"({"name":"é€x","n":-5})");
  check_masks_along(schema, vocab, R"({"name":""})");
}

TEST(GrammarMask, EqualsBruteForceOnTheDefaultModelsTokenizer) {
  const Tokenizer tok = Tokenizer::load(test::default_model_dir());
  std::vector<std::string> vocab(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.is_special_token(id)) vocab[static_cast<size_t>(id)] = std::string(tok.token_bytes(id));
  }
  const auto trie = VocabTrie::of(tok);
  ASSERT_EQ(trie->vocab_size(), vocab.size());
  const Grammar json = Grammar::from_gbnf(json_object_gbnf());
  check_masks_along(json, vocab, R"({"key":"The quick brown fox, café","list":[0,1.25,false,null,{}]})");
  const Grammar g = Grammar::from_gbnf(R"(root ::= "The " [a-z]+ (" " [a-z]+)* "." )");
  check_masks_along(g, vocab, "The cat sat on the mat.");
}

// Qwen2.5's vocabulary (151,665 tokens, many ending inside a UTF-8 character).
TEST(GrammarMask, EqualsBruteForceOnQwen25sVocabulary) {
  const std::filesystem::path dir = std::filesystem::path(NANOINFER_SOURCE_DIR) / ".deps/qwen-tokenizer";
  ASSERT_TRUE(std::filesystem::exists(dir / "tokenizer.json")) << dir << " is missing: run `bash scripts/fetch-test-assets.sh`";
  const Tokenizer tok = Tokenizer::load(dir);
  std::vector<std::string> vocab(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.is_special_token(id)) vocab[static_cast<size_t>(id)] = std::string(tok.token_bytes(id));
  }
  ASSERT_GT(vocab.size(), 150000u);
  const Grammar json = Grammar::from_gbnf(json_object_gbnf());
  check_masks_along(json, vocab, "{\"\xe4\xbd\xa0\xe5\xa5\xbd\":[\"\xf0\x9f\x98\x80 \\u00e9\",-1.5]}", 4);
  const Grammar pattern = Grammar::from_gbnf(json_schema_to_gbnf(R"({"type":"string","pattern":"^[\\u4e00-\\u9fff]{2}\\d$"})"));
  check_masks_along(pattern, vocab, "\"\xe4\xb8\xad\xe6\x96\x87" "7\"", 2);
}

// Random walks through the mask of the default tokenizer always produce JSON objects.
TEST(GrammarMask, RandomTokenWalksParseAsJson) {
  const Tokenizer tok = Tokenizer::load(test::default_model_dir());
  const auto trie = VocabTrie::of(tok);
  const Grammar g = Grammar::from_gbnf(json_object_gbnf());
  std::mt19937 rng(11);
  int complete = 0;
  for (int walk = 0; walk < 40; ++walk) {
    GrammarState state(g);
    std::string text;
    std::vector<uint8_t> mask;
    for (int step = 0; step < 60 && !(state.complete() && !state.can_continue()); ++step) {
      if (state.complete() && rng() % 3 == 0) break;
      trie->mask(state, mask);
      std::vector<int32_t> ids;
      for (size_t id = 0; id < mask.size(); ++id) if (mask[id]) ids.push_back(static_cast<int32_t>(id));
      // Prefer structural tokens so walks end.
      int32_t pick = ids[rng() % ids.size()];
      for (int32_t id : ids) {
        const std::string_view b = trie->bytes(id);
        if ((b == "}" || b == "]" || b == "\"") && rng() % 2 == 0) pick = id;
      }
      ASSERT_TRUE(state.advance(trie->bytes(pick)));
      text += trie->bytes(pick);
    }
    if (!state.complete()) continue;
    ++complete;
    EXPECT_TRUE(nlohmann::json::accept(text)) << text;
    EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
  }
  EXPECT_GT(complete, 5);
}

TEST(GrammarProcessor, MasksScoresAndAllowsEndOnlyWhenComplete) {
  std::vector<std::string> vocab = {"a", "b", "ab", "", "c"};  // id 3: end of sequence
  auto trie = std::make_shared<const VocabTrie>(vocab);
  const Grammar g = Grammar::from_gbnf("root ::= \"a\" \"b\"+\n");
  GrammarProcessor p(g, trie, {3});
  std::vector<double> scores(5, 1.0);
  p.process(scores, {});
  EXPECT_EQ(scores, (std::vector<double>{1.0, -INFINITY, 1.0, -INFINITY, -INFINITY}));
  p.accept(0);
  scores.assign(5, 1.0);
  p.process(scores, {});
  EXPECT_EQ(scores, (std::vector<double>{-INFINITY, 1.0, -INFINITY, -INFINITY, -INFINITY}));
  p.accept(1);
  scores.assign(5, 1.0);
  p.process(scores, {});
  EXPECT_EQ(scores, (std::vector<double>{-INFINITY, 1.0, -INFINITY, 1.0, -INFINITY}));
  EXPECT_THROW(p.accept(4), Error);
  p.accept(3);
  p.restart();
  scores.assign(5, 1.0);
  p.process(scores, {});
  EXPECT_EQ(scores[0], 1.0);
  EXPECT_EQ(scores[3], -INFINITY);
}

TEST(GrammarProcessor, NoAllowedTokenIsAnError) {
  auto trie = std::make_shared<const VocabTrie>(std::vector<std::string>{"a", "b"});
  GrammarProcessor p(Grammar::from_gbnf("root ::= \"a\"\n"), trie, {});
  std::vector<double> scores(2, 0.0);
  p.process(scores, {});
  p.accept(0);
  EXPECT_THROW(p.process(scores, {}), Error);  // complete, no end-of-sequence id
}

TEST(OpenAiPenalties, FrequencyPresenceAndBias) {
  FrequencyPresencePenalty p(4, 0.5, 0.25);
  std::vector<double> scores(4, 1.0);
  p.process(scores, {});
  EXPECT_EQ(scores, (std::vector<double>{1, 1, 1, 1}));
  p.accept(2);
  p.accept(2);
  p.accept(1);
  p.process(scores, {});
  EXPECT_EQ(scores, (std::vector<double>{1, 1 - 0.5 - 0.25, 1 - 1.0 - 0.25, 1}));
  p.restart();
  scores.assign(4, 1.0);
  p.process(scores, {});
  EXPECT_EQ(scores, (std::vector<double>{1, 1, 1, 1}));
  LogitBias b({{0, -100.0}, {3, 2.5}, {9, 1.0}});
  b.process(scores, {});
  EXPECT_EQ(scores, (std::vector<double>{-99, 1, 1, 3.5}));
}

}  // namespace
}  // namespace nanoinfer
