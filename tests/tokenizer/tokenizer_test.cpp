// Tokenizer unit tests on small hand-built tokenizer.json files (no assets needed): BPE
// order, added tokens, the pre-tokenizer's classes, invalid UTF-8, streaming decode and
// load-time rejection. The reference comparison is in tokenizer_reference_test.cpp.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nanoinfer/error.h"
#include "nanoinfer/tokenizer.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer_utf8.h"

namespace nanoinfer {
namespace {

using nlohmann::json;

// GPT-2's byte-to-character map, written independently of the loader's table.
std::string byte_char(int b) {
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  int cp = b;
  if (!printable) {
    cp = 256;
    for (int x = 0; x < b; ++x) cp += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255));
  }
  std::string s;
  utf8::append(static_cast<char32_t>(cp), s);
  return s;
}

std::string spell(std::string_view bytes) {
  std::string s;
  for (char c : bytes) s += byte_char(static_cast<uint8_t>(c));
  return s;
}

// A byte-level BPE tokenizer: ids 0..255 are the bytes (id == byte value), then one token
// per merge in order, then the added tokens.
json tiny_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges,
                    const std::vector<std::string>& added = {}) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  json merge_list = json::array();
  int next = 256;
  for (const auto& [l, r] : merges) {
    merge_list.push_back({spell(l), spell(r)});
    if (!vocab.contains(spell(l + r))) vocab[spell(l + r)] = next++;
  }
  json added_tokens = json::array();
  for (const auto& content : added) {
    added_tokens.push_back({{"id", next++},
                            {"content", content},
                            {"single_word", false},
                            {"lstrip", false},
                            {"rstrip", false},
                            {"normalized", false},
                            {"special", true}});
  }
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added_tokens},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex",
              R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}}},
      {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merge_list}}}};
}

Tokenizer load(const json& j) {
  return Tokenizer::from_json(j.dump(), "test");
}

std::vector<int32_t> bytes_of(std::string_view s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

TEST(TokenizerBpe, EqualRankMergesLeftmostFirst) {
  const Tokenizer tok = load(tiny_tokenizer({{"a", "a"}}));  // "aa" = 256
  EXPECT_EQ(tok.encode("aaa"), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ(tok.encode("aaaaa"), (std::vector<int32_t>{256, 256, 'a'}));
}

TEST(TokenizerBpe, LowerRankMergesFirstWhereverItIs) {
  // ranks: "bc" (256) before "ab" (257); "abc" -> a + bc, not ab + c.
  const Tokenizer tok = load(tiny_tokenizer({{"b", "c"}, {"a", "b"}}));
  EXPECT_EQ(tok.encode("abc"), (std::vector<int32_t>{'a', 256}));
  EXPECT_EQ(tok.encode("abab"), (std::vector<int32_t>{257, 257}));
  // A merge of merged symbols: "ab"+"ab" -> "abab" (258) once "ab" exists.
  const Tokenizer tok2 = load(tiny_tokenizer({{"a", "b"}, {"ab", "ab"}}));
  EXPECT_EQ(tok2.encode("ababab"), (std::vector<int32_t>{257, 256}));
}

TEST(TokenizerBpe, CacheDoesNotChangeResultsAndCanBeCleared) {
  const Tokenizer tok = load(tiny_tokenizer({{"h", "e"}, {"l", "l"}, {"he", "ll"}}));
  const auto first = tok.encode("hello hello hello");
  EXPECT_EQ(first, (std::vector<int32_t>{258, 'o', ' ', 258, 'o', ' ', 258, 'o'}));
  EXPECT_EQ(tok.cache_entries(), 2u);  // "hello" and " hello"
  EXPECT_EQ(tok.encode("hello hello hello"), first);
  tok.clear_cache();
  EXPECT_EQ(tok.cache_entries(), 0u);
  EXPECT_EQ(tok.encode("hello hello hello"), first);
}

TEST(TokenizerAddedTokens, AreSplitOutFirstLongestMatchAndNeverMerged) {
  // "<" + "|" would merge, but not inside an added token.
  const Tokenizer tok = load(tiny_tokenizer({{"<", "|"}}, {"<|a|>", "<|a|>>"}));
  const int32_t a = *tok.token_id("<|a|>");
  const int32_t aa = *tok.token_id("<|a|>>");
  EXPECT_EQ(tok.encode("x<|a|>y"), (std::vector<int32_t>{'x', a, 'y'}));
  EXPECT_EQ(tok.encode("<|a|>>"), (std::vector<int32_t>{aa}));
  EXPECT_EQ(tok.encode("<|a|<|a|>"), (std::vector<int32_t>{256, 'a', '|', a}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{'x', a, 'y'}), "x<|a|>y");
  EXPECT_TRUE(tok.is_added_token(a));
  EXPECT_TRUE(tok.is_special_token(a));
  EXPECT_FALSE(tok.is_added_token('x'));
  EXPECT_EQ(tok.vocab_size(), 259);
}

TEST(TokenizerNormalizer, AppliesNfcBeforeBpe) {
  const Tokenizer tok = load(tiny_tokenizer({}));
  // e + COMBINING ACUTE composes to U+00E9; KELVIN SIGN is a singleton mapping to 'K'.
  EXPECT_EQ(tok.encode("e\xCC\x81"), bytes_of("\xC3\xA9"));
  EXPECT_EQ(tok.encode("\xE2\x84\xAA"), bytes_of("K"));
}

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string_view> out;
  SplitPattern::from_regex(
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")
      ->split(text, out);
  return {out.begin(), out.end()};
}

using Pieces = std::vector<std::string>;

TEST(TokenizerPretokenize, FollowsTheRegexAlternativeByAlternative) {
  EXPECT_EQ(pieces("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces("I'LL don't"), (Pieces{"I", "'LL", " don", "'t"}));
  EXPECT_EQ(pieces("12345"), (Pieces{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(pieces("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(pieces("a   "), (Pieces{"a", "   "}));
  EXPECT_EQ(pieces("x \n\n  y"), (Pieces{"x", " \n\n", " ", " y"}));
  EXPECT_EQ(pieces(" ?!\n\nx"), (Pieces{" ?!\n\n", "x"}));
  EXPECT_EQ(pieces("(word)"), (Pieces{"(word", ")"}));
  EXPECT_EQ(pieces(""), Pieces{});
}

TEST(TokenizerPretokenize, WhiteSpaceIsTheUnicodePropertyNotIsspace) {
  // U+001C..U+001F are separators to C and Python, but not White_Space: punctuation here.
  EXPECT_EQ(pieces("a\x1C\x1C b"), (Pieces{"a", "\x1C\x1C", " b"}));
  // U+2000 (EN QUAD) and U+0085 (NEL) are White_Space.
  EXPECT_EQ(pieces("a\u2000\u2000 b"), (Pieces{"a", "\u2000\u2000", " b"}));
  EXPECT_EQ(char_class(0x85), kClassSpace);
  EXPECT_EQ(char_class(0x1F), 0);
  EXPECT_EQ(char_class(0x200B), 0);  // ZERO WIDTH SPACE is format (Cf), not space
  EXPECT_EQ(char_class(0xFEFF), 0);
  EXPECT_EQ(char_class(0x3000), kClassSpace);
  EXPECT_EQ(char_class('\r'), kClassSpace | kClassNewline);
  EXPECT_EQ(char_class(0x4E2D), kClassLetter);  // 中
  EXPECT_EQ(char_class(0x00B2), kClassNumber);  // superscript two (No)
  EXPECT_EQ(char_class(0x216B), kClassNumber);  // roman numeral twelve (Nl)
}

TEST(TokenizerUtf8, InvalidInputIsReplacedPerMaximalSubpart) {
  const Tokenizer tok = load(tiny_tokenizer({}));
  const std::string fffd = "\xEF\xBF\xBD";
  // Lone continuation byte, bytes never valid, a truncated sequence (one subpart), an
  // encoded surrogate (three subparts: ED cannot be followed by A0), an overlong.
  EXPECT_EQ(tok.encode("\x80"), bytes_of(fffd));
  EXPECT_EQ(tok.encode("a\xFF"
                       "b"),
            bytes_of("a" + fffd + "b"));
  EXPECT_EQ(tok.encode("\xE2\x82"
                       "x"),
            bytes_of(fffd + "x"));
  EXPECT_EQ(tok.encode("\xED\xA0\x80"), bytes_of(fffd + fffd + fffd));
  EXPECT_EQ(tok.encode("\xC0\x80"), bytes_of(fffd + fffd));
  EXPECT_EQ(tok.encode("\xF0\x9F\x98"), bytes_of(fffd));
  // decode() renders invalid byte sequences from ids the same way.
  EXPECT_EQ(tok.decode(bytes_of("\xF0\x9F\x98"
                                "a")),
            fffd + "a");
}

TEST(TokenizerStream, HoldsBackIncompleteSequencesOnly) {
  const Tokenizer tok = load(tiny_tokenizer({}, {"<|e|>"}));
  StreamDecoder stream(tok);
  // U+1F600 arrives one byte per token: nothing until the last byte.
  EXPECT_EQ(stream.push(0xF0), "");
  EXPECT_EQ(stream.push(0x9F), "");
  EXPECT_EQ(stream.push(0x98), "");
  EXPECT_EQ(stream.push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(stream.push('a'), "a");
  // A byte that can never start a sequence is emitted as U+FFFD at once.
  EXPECT_EQ(stream.push(0xFF), "\xEF\xBF\xBD");
  // An incomplete sequence followed by a byte that breaks it: one U+FFFD, then the byte.
  EXPECT_EQ(stream.push(0xE2), "");
  EXPECT_EQ(stream.push('b'),
            "\xEF\xBF\xBD"
            "b");
  // An added token ends a pending sequence; flush renders what is left.
  EXPECT_EQ(stream.push(0xC3), "");
  EXPECT_EQ(stream.push(*tok.token_id("<|e|>")), "\xEF\xBF\xBD<|e|>");
  EXPECT_EQ(stream.push(0xC3), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.flush(), "");
}

TEST(TokenizerDecode, RejectsIdsOutsideTheVocabulary) {
  const Tokenizer tok = load(tiny_tokenizer({}));
  EXPECT_THROW(tok.decode(std::vector<int32_t>{256}), Error);
  EXPECT_THROW(tok.decode(std::vector<int32_t>{-1}), Error);
  EXPECT_EQ(tok.decode(std::vector<int32_t>{}), "");
}

// Loading `j` fails with a message containing `needle`.
void expect_rejected(const json& j, std::string_view needle) {
  try {
    load(j);
    ADD_FAILURE() << "loaded, expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TokenizerLoad, RejectsWhatItDoesNotReproduceNamingIt) {
  auto j = tiny_tokenizer({});
  j["normalizer"] = {{"type", "NFKC"}};
  expect_rejected(j, "'NFKC'");
  j = tiny_tokenizer({});
  j["model"]["type"] = "WordPiece";
  expect_rejected(j, "'WordPiece'");
  j = tiny_tokenizer({});
  j["decoder"] = {{"type", "Metaspace"}};
  expect_rejected(j, "'Metaspace'");
  j = tiny_tokenizer({});
  j["post_processor"] = {{"type", "RobertaProcessing"}};
  expect_rejected(j, "'RobertaProcessing'");
  j = tiny_tokenizer({});
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"(\w+|\s+)";
  expect_rejected(j, "regex '\\w+|\\s+' is not supported");
  j = tiny_tokenizer({});
  j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true;
  expect_rejected(j, "use_regex=true");
  j = tiny_tokenizer({});
  j["model"]["byte_fallback"] = true;
  expect_rejected(j, "byte_fallback=true");
  j = tiny_tokenizer({});
  j["model"]["frobnicate"] = 1;
  expect_rejected(j, "unsupported field 'frobnicate'");
  j = tiny_tokenizer({});
  j["model"]["merges"].push_back({"x", "nope"});
  expect_rejected(j, "'nope', which is not in the vocabulary");
  j = tiny_tokenizer({});
  j["model"]["vocab"].erase(byte_char(0x41));
  expect_rejected(j, "no token for byte 0x41");
  j = tiny_tokenizer({}, {"<x>"});
  j["added_tokens"][0]["lstrip"] = true;
  expect_rejected(j, "lstrip=true");
  j = tiny_tokenizer({});
  j.erase("model");
  expect_rejected(j, "missing field 'model'");
  j = tiny_tokenizer({});
  j["model"]["vocab"]["zz"] = 65;  // 'A' has id 65 already
  expect_rejected(j, "model.vocab: id 65 is given to two tokens (the second is 'zz')");
  try {
    Tokenizer::from_json("{not json", "broken.json");
    ADD_FAILURE() << "parsed invalid JSON";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json"), std::string::npos) << e.what();
  }
}

TEST(TokenizerLoad, QwenTokenizerFacts) {
  const std::string dir = std::string(NANOINFER_SOURCE_DIR) + "/.deps/qwen-tokenizer";
  ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer.json")) << "run `bash scripts/fetch-test-assets.sh`";
  const Tokenizer tok = Tokenizer::load(dir);
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.token_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok.token_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok.eos_token_id(), 151645);
  EXPECT_EQ(tok.pad_token_id(), 151643);
  EXPECT_EQ(tok.token_bytes(*tok.token_id("Ġthe")), " the");
  EXPECT_EQ(tok.encode("<|im_start|>user\nHello<|im_end|>"), (std::vector<int32_t>{151644, 872, 198, 9707, 151645}));
}

}  // namespace
}  // namespace nanoinfer
