// The grammar engine (nanoinfer/grammar.h): GBNF parsing and its errors, the byte-level parser
// (UTF-8 classes, repetitions, incomplete characters), and the token mask checked against brute
// force (each token's bytes fed to a copy of the parser state) on a small hand-made vocabulary
// and on the default model's tokenizer; the grammar logit processor; OpenAI's penalties.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "grammar/string_content.h"
#include "nanoinfer/error.h"
#include "nanoinfer/grammar.h"
#include "nanoinfer/logit_processor.h"
#include "nanoinfer/tokenizer.h"
#include "support/files.h"
#include "support/grammar_match.h"
#include "support/sanitized.h"

namespace nanoinfer {
namespace {

using test::matches;

bool prefix_ok(const Grammar& g, std::string_view text) {
  GrammarState s(g);
  return s.advance(text);
}

std::string gbnf_error(std::string_view gbnf) {
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
  EXPECT_TRUE(matches(g, "\xce\x91"));   // U+0391
  EXPECT_FALSE(matches(g, "\xce\xaa"));  // U+03AA
}

TEST(Grammar, Utf8ClassesWorkByteByByte) {
  // Every code point of a class spanning 1- to 4-byte encodings, and nothing around it.
  const Grammar g = Grammar::from_gbnf("root ::= [\\u0070-\\U00010010]\n");
  for (uint32_t cp : {0x70u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u, 0x10010u}) {
    std::string s;
    if (cp < 0x80)
      s += static_cast<char>(cp);
    else if (cp < 0x800)
      s += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    else if (cp < 0x10000)
      s += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
            static_cast<char>(0x80 | (cp & 0x3F))};
    else
      s += {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
            static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
    EXPECT_TRUE(matches(g, s)) << std::hex << cp;
    // Each proper prefix is a valid but incomplete state.
    for (size_t k = 1; k < s.size(); ++k) {
      GrammarState st(g);
      EXPECT_TRUE(st.advance(std::string_view(s).substr(0, k))) << std::hex << cp;
      EXPECT_FALSE(st.complete());
    }
  }
  EXPECT_FALSE(matches(g, "o"));                 // U+006F
  EXPECT_FALSE(prefix_ok(g, "\xed\xa0\x80"));    // a surrogate
  EXPECT_FALSE(prefix_ok(g, "\xc0\xaf"));        // overlong
  EXPECT_FALSE(matches(g, "\xf0\x90\x80\x91"));  // U+10011
}

TEST(Grammar, ErrorsNameTheProblem) {
  EXPECT_NE(gbnf_error("root ::= foo\n").find("'foo'"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= root \"a\" | \"b\"\n").find("left-recursive"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= x \"a\"\nx ::= \"\"? root\n").find("left-recursive"), std::string::npos);
  // Entering itself only at the ends of alternatives is no left recursion, but never finishes.
  EXPECT_NE(gbnf_error("root ::= x\nx ::= \"\"? root\n").find("never finishes"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= \"a\" root\n").find("'root' never finishes"), std::string::npos);
  // A surrogate is no character: no escape may force its (invalid) UTF-8 bytes.
  EXPECT_NE(gbnf_error("root ::= \"\\uD800\"\n").find("U+D800 is a surrogate"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= [\\uDC00]\n").find("U+DC00 is a surrogate"), std::string::npos);
  EXPECT_EQ(gbnf_error("root ::= [\\u0020-\\uFFFF]\n"), "");  // a range may span them
  EXPECT_NE(gbnf_error("root ::= \"abc\n").find("unterminated"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= \"a\"\nroot ::= \"b\"\n").find("twice"), std::string::npos);
  EXPECT_NE(gbnf_error("start ::= \"a\"\n").find("'root'"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= [z-a]\n").find("backwards"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= \"a\"{3,2}\n").find("max < min"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= (\"a\"\n").find("')'"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= \"\\q\"\n").find("escape"), std::string::npos);
  EXPECT_NE(gbnf_error("").find("no rules"), std::string::npos);
  EXPECT_EQ(gbnf_error("root ::= \"a\" |\n"), "");  // an empty alternative is allowed
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

// Walks `text` byte by byte and compares the mask with brute force at every prefix (every
// `stride`-th and the last, for large vocabularies): the masker with its string-content
// shortcut and without, each kept across the whole walk (its automaton grows as it goes), and
// a fresh one at each checked prefix. Returns the tokens the shortcut marked wholesale.
uint64_t check_masks_along(const Grammar& g, const std::vector<std::string>& vocab, std::string_view text,
                           size_t stride = 1) {
  const VocabTrie trie(vocab);
  TokenMasker fast(g, trie);
  TokenMasker walk(g, trie, {.content_shortcut = false});
  GrammarState state(g);
  std::vector<uint8_t> mask;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i % stride == 0 || i == text.size()) {
      const std::vector<uint8_t> want = brute_mask(state, vocab);
      fast.mask(state, mask);
      EXPECT_EQ(mask, want) << "content shortcut: after " << i << " bytes of " << text;
      walk.mask(state, mask);
      EXPECT_EQ(mask, want) << "walk: after " << i << " bytes of " << text;
      TokenMasker(g, trie).mask(state, mask);
      EXPECT_EQ(mask, want) << "fresh masker: after " << i << " bytes of " << text;
      if (::testing::Test::HasFailure()) return 0;
    }
    if (i < text.size()) {
      EXPECT_TRUE(state.advance(static_cast<uint8_t>(text[i]))) << "byte " << i << " of " << text;
      if (::testing::Test::HasFailure()) return 0;
    }
  }
  EXPECT_TRUE(state.complete());
  EXPECT_EQ(walk.work().content_tokens, 0u);
  return fast.work().content_tokens;
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

// Under the sanitizers the long walks over Qwen2.5's vocabulary check every fourth of the
// prefixes the release run checks (the full walks took 6 minutes there, a sixth of the suite).
constexpr size_t kQwenStride = test::kSanitized ? 8 : 1;

std::vector<std::string> qwen25_vocab() {
  const std::filesystem::path dir = std::filesystem::path(NANOINFER_SOURCE_DIR) / ".deps/qwen-tokenizer";
  if (!std::filesystem::exists(dir / "tokenizer.json")) return {};
  const Tokenizer tok = Tokenizer::load(dir);
  std::vector<std::string> vocab(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.is_special_token(id)) vocab[static_cast<size_t>(id)] = std::string(tok.token_bytes(id));
  }
  return vocab;
}

// Qwen2.5's vocabulary (151,665 tokens, many ending inside a UTF-8 character).
TEST(GrammarMask, EqualsBruteForceOnQwen25sVocabulary) {
  const std::vector<std::string> vocab = qwen25_vocab();
  ASSERT_GT(vocab.size(), 150000u) << "run `bash scripts/fetch-test-assets.sh`";
  const Grammar json = Grammar::from_gbnf(json_object_gbnf());
  check_masks_along(json, vocab, "{\"\xe4\xbd\xa0\xe5\xa5\xbd\":[\"\xf0\x9f\x98\x80 \\u00e9\",-1.5]}", 4 * kQwenStride);
  const Grammar pattern =
      Grammar::from_gbnf(json_schema_to_gbnf(R"({"type":"string","pattern":"^[\\u4e00-\\u9fff]{2}\\d$"})"));
  check_masks_along(pattern, vocab,
                    "\"\xe4\xb8\xad\xe6\x96\x87"
                    "7\"",
                    2 * kQwenStride);
}

// The content counts the trie stores: every suffix's count from the one-pass tail_counts equals
// count_of on that suffix, over strings of UTF-8 edge pieces; and count_of itself on hand-picked
// cases.
TEST(StringContent, CountsCharactersAndRefusesWhatIsNotContent) {
  using string_content::count_of;
  using string_content::kNotContent;
  EXPECT_EQ(count_of("abc"), 3);
  EXPECT_EQ(count_of("a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"), 4);
  EXPECT_EQ(count_of("a\xe4\xb8"), 2);  // an incomplete character counts
  EXPECT_EQ(count_of("\x7f"), 1);
  for (const char* bad : {"\"", "a\\", "\x1f", "\x80", "\xc0\xaf", "\xe0\x9f\xbf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                          "\xf5", "\xc3\xa9\xa9",
                          "\xe4\xb8"
                          "a"}) {
    EXPECT_EQ(count_of(bad), kNotContent) << bad;
  }
  EXPECT_EQ(count_of(std::string(300, 'x')), 254);
  const std::vector<std::string> pieces = {"a",
                                           " ",
                                           "\"",
                                           "\\",
                                           "\x1f",
                                           "\x7f",
                                           "\xc3\xa9",
                                           "\xe4\xb8\xad",
                                           "\xed\x9f\xbf",
                                           "\xed\xa0\x80",
                                           "\xf0\x9f\x98\x80",
                                           "\xf4\x90\x80\x80",
                                           "\x80",
                                           "\xe4",
                                           "\xe4\xb8",
                                           "\xf0\x9f",
                                           "\xff"};
  std::mt19937 rng(5);
  for (int k = 0; k < 3000; ++k) {
    std::string t;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int j = 0; j < n; ++j) t += pieces[rng() % pieces.size()];
    std::vector<uint8_t> tails(t.size());
    string_content::tail_counts(t, tails.data());
    for (size_t i = 0; i < t.size(); ++i)
      ASSERT_EQ(tails[i], count_of(std::string_view(t).substr(i))) << t << " at " << i;
  }
}

// The string-content shortcut on tokens made to sit on its edges: every UTF-8 boundary the
// content automaton draws (E0/ED/F0/F4 second bytes, surrogates, overlongs, bytes that never
// start a character, DEL, control bytes), incomplete characters, quotes and backslashes
// inside and at the ends; and grammars whose string class is the JSON class, or is it minus
// one character (the shortcut must then not apply to that character), or is bounded.
TEST(GrammarMask, ContentShortcutEqualsBruteForceOnUtf8Edges) {
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.push_back(std::string(1, static_cast<char>(b)));
  const std::vector<std::string> pieces = {"a",
                                           "Z",
                                           " ",
                                           "\x7f",
                                           "\x1f",
                                           "\t",
                                           "\"",
                                           "\\",
                                           "\\n",
                                           "\\u00e9",
                                           "\xc2\x80",
                                           "\xdf\xbf",
                                           "\xc0\xaf",
                                           "\xc1\xbf",
                                           "\xe0\xa0\x80",
                                           "\xe0\x9f\xbf",
                                           "\xed\x9f\xbf",
                                           "\xed\xa0\x80",
                                           "\xef\xbf\xbf",
                                           "\xf0\x90\x80\x80",
                                           "\xf0\x8f\xbf\xbf",
                                           "\xf4\x8f\xbf\xbf",
                                           "\xf4\x90\x80\x80",
                                           "\xf5\x80\x80\x80",
                                           "\xe4\xb8\xad",
                                           "\xf0\x9f\x98\x80",
                                           "\x80",
                                           "\xbf",
                                           "\xe0",
                                           "\xe0\xa0",
                                           "\xed",
                                           "\xed\xa0",
                                           "\xf0\x90",
                                           "\xf4\x8f\xbf",
                                           "\xff",
                                           "\xfe"};
  std::mt19937 rng(23);
  for (int k = 0; k < 4000; ++k) {
    std::string t;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int j = 0; j < n; ++j) t += pieces[rng() % pieces.size()];
    vocab.push_back(t);
  }
  for (int n = 1; n <= 30; ++n) vocab.push_back(std::string(static_cast<size_t>(n), 'x'));  // long content
  const std::string doc =
      "\"a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\x7f \\\" \\\\ \\u00e9 \xef\xbf\xbf\xf4\x8f\xbf\xbfz\"";
  // The JSON string: the shortcut applies inside it.
  const Grammar json = Grammar::from_gbnf(json_schema_to_gbnf(R"({"type":"string"})"));
  EXPECT_GT(check_masks_along(json, vocab, doc), 0u);
  // Bounded strings: the depth follows the characters left.
  const Grammar bounded = Grammar::from_gbnf(json_schema_to_gbnf(R"({"type":"string","minLength":2,"maxLength":7})"));
  EXPECT_GT(check_masks_along(bounded, vocab, "\"ab\xe4\xb8\xad\\n\xf0\x9f\x98\x80x\""), 0u);
  // One character short of the JSON class: DEL, or U+FFFF, or the 4-byte plane.
  for (const char* cls :
       {R"([^"\\\x00-\x1F\x7F])", R"([^"\\\x00-\x1F\uFFFF])", R"([^"\\\x00-\x1F\U00010000-\U0010FFFF])"}) {
    const Grammar g = Grammar::from_gbnf(std::string("root ::= \"\\\"\" ") + cls + "* \"\\\"\"\n");
    check_masks_along(g, vocab, "\"ab\xc3\xa9 \xe4\xb8\xad\"");
  }
  // A wider class than JSON's (control bytes allowed) and one that is only ASCII letters.
  const Grammar wide = Grammar::from_gbnf("root ::= \"\\\"\" [^\"\\\\]* \"\\\"\"\n");
  EXPECT_GT(check_masks_along(wide, vocab, "\"a\tb\x01\xe4\xb8\xad\""), 0u);
  const Grammar letters = Grammar::from_gbnf("root ::= \"\\\"\" [a-zA-Z]* \"\\\"\"\n");
  EXPECT_EQ(check_masks_along(letters, vocab, "\"abcXYZ\""), 0u);
  // A masker that must start afresh at every call (its automaton over a tiny limit).
  const VocabTrie trie(vocab);
  TokenMasker small(json, trie, {.max_states = 4});
  GrammarState state(json);
  std::vector<uint8_t> mask;
  for (char c : doc) {
    small.mask(state, mask);
    ASSERT_EQ(mask, brute_mask(state, vocab)) << "max_states 4, at byte " << c;
    ASSERT_TRUE(state.advance(static_cast<uint8_t>(c)));
  }
}

// The shortcut against brute force on Qwen2.5's vocabulary, along documents of several schemas:
// bounded and free strings with escapes and characters of 1 to 4 bytes, numbers, integer
// ranges, enums, a pattern, anyOf with null, arrays, nested objects — the states a schema's
// decoding passes through.
TEST(GrammarMask, ContentShortcutEqualsBruteForceOnQwen25sVocabulary) {
  const std::vector<std::string> vocab = qwen25_vocab();
  ASSERT_GT(vocab.size(), 150000u) << "run `bash scripts/fetch-test-assets.sh`";
  const Grammar schema = Grammar::from_gbnf(json_schema_to_gbnf(R"({
    "type": "object", "properties": {
      "name": {"type": "string", "maxLength": 12},
      "note": {"type": "string"},
      "n": {"type": "integer", "minimum": -50, "maximum": 50000},
      "x": {"type": "number"},
      "color": {"enum": ["red", "green", "blue"]},
      "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
      "owner": {"type": "object", "properties": {"contact": {"anyOf": [{"type": "string", "maxLength": 30}, {"type": "null"}]}},
                "required": ["contact"], "additionalProperties": false}},
    "required": ["name", "note", "n", "x", "color", "zip", "tags", "owner"], "additionalProperties": false})"));
  const std::string doc =
      "{\"name\":\"Zo\xc3\xab \xe4\xbd\xa0\xe5\xa5\xbd\\\"q\\\"\",\"note\":\"line\\nnext \\u00e9\xf0\x9f\x98\x80 tab\\t"
      "end of a longer note, with words\",\"n\":-42,\"x\":3.25e-2,\"color\":\"green\",\"zip\":\"01234\","
      "\"tags\":[\"ab\",\"\xe4\xb8\xad\xe6\x96\x87\"],\"owner\":{\"contact\":\"mail me\"}}";
  EXPECT_GT(check_masks_along(schema, vocab, doc, 3 * kQwenStride), 1000000u / kQwenStride);
  const Grammar json = Grammar::from_gbnf(json_object_gbnf());
  EXPECT_GT(check_masks_along(json, vocab,
                              "{\"k\xc3\xa9y\":\"v \\\\ \\/ \\u20ac\xe2\x82\xac\",\"a\":[null,{\"b\":\"\"}]}", 3),
            500000u);
}

// Random walks through the mask of the default tokenizer always produce JSON objects.
TEST(GrammarMask, RandomTokenWalksParseAsJson) {
  const Tokenizer tok = Tokenizer::load(test::default_model_dir());
  const auto trie = VocabTrie::of(tok);
  const Grammar g = Grammar::from_gbnf(json_object_gbnf());
  std::mt19937 rng(11);
  int complete = 0;
  TokenMasker masker(g, *trie);
  for (int walk = 0; walk < 40; ++walk) {
    GrammarState state(g);
    std::string text;
    std::vector<uint8_t> mask;
    for (int step = 0; step < 60 && !(state.complete() && !state.can_continue()); ++step) {
      if (state.complete() && rng() % 3 == 0) break;
      masker.mask(state, mask);
      std::vector<int32_t> ids;
      for (size_t id = 0; id < mask.size(); ++id)
        if (mask[id]) ids.push_back(static_cast<int32_t>(id));
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
