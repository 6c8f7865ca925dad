// A plain prompt starts with the tokens the model was trained to see first: Llama 3's
// tokenizer.json says so in its post-processor (ByteLevel, then TemplateProcessing
// "<|begin_of_text|> $A"), a GGUF file in tokenizer.ggml.add_bos_token. Qwen's says nothing.
// The tiny test tokenizer stands in, with <|endoftext|> (id 297) as its BOS.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nanoinfer/generation_step.h"
#include "nanoinfer/tokenizer.h"
#include "support/checks.h"
#include "support/generation_model.h"

namespace nanoinfer {
namespace {

using PrefixJson = nlohmann::json;
using test::error_of;

constexpr int32_t kTinyBos = 297;  // <|endoftext|> in the tiny tokenizer

PrefixJson template_step(const PrefixJson& single) {
  return {{"type", "TemplateProcessing"},
          {"single", single},
          {"pair", PrefixJson::array()},
          {"special_tokens",
           {{"<|endoftext|>", {{"id", "<|endoftext|>"}, {"ids", {kTinyBos}}, {"tokens", {"<|endoftext|>"}}}}}}};
}
const PrefixJson kTinyBosThenText = PrefixJson::array(
    {{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}});

// The tiny tokenizer with `post` as its post-processor, the way Llama 3.2's file nests it.
Tokenizer with_post_processor(const PrefixJson& post) {
  PrefixJson doc = PrefixJson::parse(test::tiny_tokenizer_json());
  doc["post_processor"] = post;
  return Tokenizer::from_json(doc.dump(), "tiny");
}

PrefixJson llama_style_post() {
  return {{"type", "Sequence"},
          {"processors",
           PrefixJson::array(
               {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
                template_step(kTinyBosThenText)})}};
}

TEST(PromptPrefix, TemplateProcessingStartsPlainPromptsWithItsSpecialToken) {
  const Tokenizer tok = with_post_processor(llama_style_post());
  ASSERT_EQ(std::vector<int32_t>(tok.prompt_prefix().begin(), tok.prompt_prefix().end()),
            std::vector<int32_t>{kTinyBos});
  const std::vector<int32_t> text = tok.encode("the king");
  std::vector<int32_t> want{kTinyBos};
  want.insert(want.end(), text.begin(), text.end());
  EXPECT_EQ(encode_raw_prompt(tok, "the king"), want);
  // Spelled by the user too: once, not twice (llama.cpp warns of a doubled BOS).
  EXPECT_EQ(encode_raw_prompt(tok, "<|endoftext|>the king"), want);
  EXPECT_EQ(encode_raw_prompt(tok, ""), std::vector<int32_t>{kTinyBos});
  // encode() itself never adds it: it is the tokenizer's, the chat template adds its own.
  EXPECT_EQ(tok.encode("the king"), text);
  // Alone, not inside a Sequence, the same.
  EXPECT_EQ(with_post_processor(template_step(kTinyBosThenText)).prompt_prefix().size(), 1u);
}

TEST(PromptPrefix, ByteLevelOrNoPostProcessorAddsNothing) {
  const Tokenizer plain = Tokenizer::from_json(test::tiny_tokenizer_json(), "tiny");
  EXPECT_TRUE(plain.prompt_prefix().empty());
  EXPECT_EQ(encode_raw_prompt(plain, "the king"), plain.encode("the king"));
  EXPECT_TRUE(with_post_processor(nullptr).prompt_prefix().empty());
}

// Qwen3-Embedding's "$A <|endoftext|>": the tokens after the text are the suffix embedding inputs
// end with; a raw generation prompt does not get them.
TEST(PromptPrefix, TemplateTokensAfterTheTextAreTheSuffix) {
  const PrefixJson text_then_eos = PrefixJson::array({kTinyBosThenText[1], kTinyBosThenText[0]});
  const Tokenizer tok = with_post_processor(template_step(text_then_eos));
  EXPECT_TRUE(tok.prompt_prefix().empty());
  EXPECT_EQ(std::vector<int32_t>(tok.prompt_suffix().begin(), tok.prompt_suffix().end()),
            std::vector<int32_t>{kTinyBos});
  EXPECT_EQ(encode_raw_prompt(tok, "the king"), tok.encode("the king"));
  EXPECT_TRUE(with_post_processor(llama_style_post()).prompt_suffix().empty());
}

TEST(PromptPrefix, TemplatesItCannotFollowAreOneLineErrors) {
  const PrefixJson no_text = PrefixJson::array({kTinyBosThenText[0]});
  PrefixJson unknown = template_step(kTinyBosThenText);
  unknown["special_tokens"] = PrefixJson::object();
  PrefixJson out_of_vocab = template_step(kTinyBosThenText);
  out_of_vocab["special_tokens"]["<|endoftext|>"]["ids"] = {5000};
  const struct {
    PrefixJson post;
    const char* message;
  } cases[] = {
      {template_step(no_text),
       "tokenizer 'tiny': post_processor TemplateProcessing: the single template must hold the text ($A) once"},
      {unknown,
       "tokenizer 'tiny': post_processor TemplateProcessing: special token '<|endoftext|>' is not in special_tokens"},
      {out_of_vocab, "tokenizer 'tiny': post_processor: token id 5000 is not in the vocabulary"},
      {{{"type", "BertProcessing"}},
       "tokenizer 'tiny': post_processor: type 'BertProcessing' is not supported (supported: ByteLevel, "
       "TemplateProcessing, Sequence)"},
  };
  for (const auto& c : cases) EXPECT_EQ(error_of([&] { with_post_processor(c.post); }), c.message) << c.post.dump();
}

// A GGUF vocabulary: add_bos_token with its bos_token_id, as llama.cpp's Llama 3 files carry.
TEST(PromptPrefix, GgufAddBosTokenStartsPlainPrompts) {
  const PrefixJson doc = PrefixJson::parse(test::tiny_tokenizer_json());
  std::vector<std::string> tokens(300);
  std::vector<int32_t> types(300, 1);
  for (const auto& [content, id] : doc["model"]["vocab"].items()) tokens[id.get<size_t>()] = content;
  for (const auto& a : doc["added_tokens"]) {
    tokens[a["id"].get<size_t>()] = a["content"].get<std::string>();
    types[a["id"].get<size_t>()] = 3;
  }
  std::vector<std::string> merges;
  for (const auto& m : doc["model"]["merges"])
    merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  TokenizerVocab v;
  v.tokens = tokens;
  v.token_types = types;
  v.merges = merges;
  v.pre = "qwen2";
  v.bos_id = kTinyBos;
  EXPECT_TRUE(Tokenizer::from_vocab(v, "tiny.gguf").prompt_prefix().empty());  // add_bos_token false or absent
  v.add_bos = true;
  const Tokenizer tok = Tokenizer::from_vocab(v, "tiny.gguf");
  ASSERT_EQ(tok.prompt_prefix().size(), 1u);
  EXPECT_EQ(tok.prompt_prefix()[0], kTinyBos);
  EXPECT_EQ(encode_raw_prompt(tok, "the").front(), kTinyBos);
  v.bos_id = 5000;
  EXPECT_EQ(error_of([&] { Tokenizer::from_vocab(v, "tiny.gguf"); }).find("bos token id 5000 is not a token") !=
                std::string::npos,
            true);
}

}  // namespace
}  // namespace nanoinfer
