// The request/response protocol of `nanoinfer serve` beyond the sampling fields: streamed
// logprobs that ride with their text, a reasoning model's think block split off its reply
// (scripted streams, cut anywhere), the field table (unknown fields, accepted-and-ignored
// vendor fields, OpenAI's ranges), prompt forms of /v1/completions and the Qwen3 template's
// enable_thinking.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nanoinfer/chat_template.h"
#include "nanoinfer/generation_step.h"
#include "nanoinfer/grammar.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/reasoning.h"
#include "serve/logprob_stream.h"
#include "serve/scheduler.h"

namespace nanoinfer::serve {
namespace {

using json = nlohmann::json;

std::string tokens_of(const std::vector<TokenLogprob>& entries) {
  std::string out;
  for (const TokenLogprob& e : entries) out += e.token;
  return out;
}

// A token's entry is released with the text that completes it, never before or after, and a
// release ends on a character boundary: tokens "ab\xE4" "\xBD" "\xA0c" write "ab" (the rest of
// the first is an incomplete character), "" and "\xE4\xBD\xA0c".
TEST(ServeLogprobAligner, HoldsEntriesWithTheirIncompleteCharacters) {
  LogprobAligner a;
  std::string text;
  std::vector<TokenLogprob> entries;
  a.add_token({"ab\xE4", -1, {}});
  a.add_text("ab");
  a.release(/*held=*/1, text, entries);
  EXPECT_EQ(text, "");
  EXPECT_TRUE(entries.empty());
  a.add_token({"\xBD", -1, {}});
  a.release(2, text, entries);
  EXPECT_EQ(text, "");
  a.add_token(
      {"\xA0"
       "c",
       -1,
       {}});
  a.add_text(
      "\xE4\xBD\xA0"
      "c");
  a.release(0, text, entries);
  EXPECT_EQ(text,
            "ab\xE4\xBD\xA0"
            "c");
  EXPECT_EQ(tokens_of(entries), text);
  // A possible stop-string start ("x" of "xyz") holds its token; the stop cuts the next one.
  LogprobAligner s;
  std::string t2;
  std::vector<TokenLogprob> e2;
  s.add_token({"hi ", -1, {}});
  s.add_text("hi ");
  s.add_token({"x", -1, {}});
  s.release(1, t2, e2);
  EXPECT_EQ(t2, "hi ");
  EXPECT_EQ(tokens_of(e2), "hi ");
  s.add_token({"yz!", -1, {}});
  s.add_token({"more", -1, {}});
  t2.clear();
  e2.clear();
  s.finish(/*cut=*/true, t2, e2);
  EXPECT_EQ(t2, "");
  EXPECT_EQ(tokens_of(e2), "");  // "x", "yz!" and "more" lie wholly in the cut-off stop string and after
}

class ServeStreamedLogprobs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    OpenOptions options;
    options.model.threads = 2;
    m_ = new OpenedModel(open_model("", options));
  }
  static void TearDownTestSuite() {
    delete m_;
    m_ = nullptr;
  }
  Job job(std::string_view gbnf, uint64_t seed) const {
    Job j;
    j.prompt = encode_raw_prompt(m_->tokenizer, "ROMEO:");
    j.max_tokens = 60;
    j.sampling = SamplerParams{.temperature = 1.0, .seed = seed};
    j.eos_ids = stop_token_ids(m_->generation, m_->tokenizer, false);
    j.grammar = std::make_shared<const Grammar>(Grammar::from_gbnf(std::string(gbnf)));
    j.trie = VocabTrie::of(m_->tokenizer);
    j.top_logprobs = 1;
    return j;
  }
  static OpenedModel* m_;
  Metrics metrics_;
};
OpenedModel* ServeStreamedLogprobs::m_ = nullptr;

// Text with 2-, 3- and 4-byte characters, which the default model's byte-level vocabulary writes
// a byte at a time: every piece the handler takes is text and the entries of exactly its tokens.
TEST_F(ServeStreamedLogprobs, EveryPieceIsItsTokensText) {
  Scheduler scheduler(m_->model, m_->tokenizer, {.parallel = 4, .queue = 8}, metrics_);
  const std::string_view gbnf = R"(root ::= "Hé said " [a-z]{2,6} " € " [a-z]{1,4} " 😀 ok")";
  std::vector<std::shared_ptr<Channel>> channels;
  for (uint64_t seed = 1; seed <= 4; ++seed) channels.push_back(scheduler.submit(job(gbnf, seed)));
  for (auto& c : channels) {
    std::string text;
    size_t pieces = 0, entries = 0;
    for (Channel::Piece p = c->next();; p = c->next()) {
      EXPECT_EQ(tokens_of(p.logprobs), p.text) << "piece " << pieces;
      text += p.text;
      entries += p.logprobs.size();
      ++pieces;
      if (p.done) break;
    }
    ASSERT_EQ(c->outcome(), Outcome::Finished) << c->error();
    EXPECT_EQ(entries, c->completion_ids().size());
    EXPECT_TRUE(text.starts_with("Hé said ")) << text;
    EXPECT_TRUE(text.ends_with(" 😀 ok")) << text;
  }
}

// A stop string cuts the text: the tokens that lie wholly in it have no entry, and every piece
// but the last is still exactly its tokens' text.
TEST_F(ServeStreamedLogprobs, AStopStringDropsTheEntriesOfWhatItCut) {
  Scheduler scheduler(m_->model, m_->tokenizer, {.parallel = 1, .queue = 2}, metrics_);
  Job j = job(R"(root ::= "one é two € three")", 3);
  j.stop = {"two"};
  const std::shared_ptr<Channel> c = scheduler.submit(j);
  std::string text, entry_text;
  for (Channel::Piece p = c->next();; p = c->next()) {
    if (!p.done) {
      EXPECT_EQ(tokens_of(p.logprobs), p.text);
    }
    text += p.text;
    entry_text += tokens_of(p.logprobs);
    if (p.done) break;
  }
  EXPECT_EQ(text, "one é ");
  EXPECT_TRUE(entry_text.starts_with(text)) << entry_text;
  EXPECT_EQ(entry_text.find("three"), std::string::npos) << entry_text;
}

// The splitter over a scripted stream, cut at every byte (a tag split across pieces included),
// gives what it gives the whole text at once.
struct Split {
  std::string reasoning, content;
};
Split split(std::string_view text, size_t cut, bool inside = false) {
  ReasoningSplitter s(inside);
  Split out;
  for (size_t at = 0; at < text.size(); at += cut) s.feed(text.substr(at, cut), out.reasoning, out.content);
  s.finish(out.reasoning, out.content);
  return out;
}

TEST(ServeReasoning, SplitsTheThinkBlockWhereverTheStreamIsCut) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"<think>\nLet me see.\n</think>\n\nParis.", "Let me see.", "Paris."},
      {"<think>\n\n</think>\n\nHi", "", "Hi"},
      {"\n<think>a<b</thi</think>c", "a<b</thi", "c"},
      {"No thinking here.", "", "No thinking here."},
      {"  <thin", "", "  <thin"},                             // ended before the tag was known: content
      {"<think>\nstill thinking\n", "still thinking\n", ""},  // cut off inside the block: all reasoning
      {"<think>x</think>\n\n<think>y</think>", "x", "<think>y</think>"},
      {"a <think>b</think>", "", "a <think>b</think>"},  // a tag later in the reply is text
  };
  for (const auto& [text, reasoning, content] : cases) {
    for (size_t cut = 1; cut <= text.size(); ++cut) {
      const Split s = split(text, cut);
      EXPECT_EQ(s.reasoning, reasoning) << text << " cut " << cut;
      EXPECT_EQ(s.content, content) << text << " cut " << cut;
    }
  }
  // A template that opened the block in the prompt: the reply starts inside it.
  const Split opened = split("step 1\n</think>\n\nDone.", 3, /*inside=*/true);
  EXPECT_EQ(opened.reasoning, "step 1");
  EXPECT_EQ(opened.content, "Done.");
}

// Qwen3's template with enable_thinking false ends its generation prompt with an empty think
// block (its Jinja: `{{- '<think>\n\n</think>\n\n' }}`); the other formats have no such variable.
TEST(ServeReasoning, EnableThinkingFalseRendersTheEmptyThinkBlock) {
  const std::vector<ChatMessage> messages = {{"user", "hi", {}}};
  EXPECT_EQ(render_chat(messages, true, {}, ChatFormat::Qwen3),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  const auto pieces = render_chat_pieces(messages, true, {}, ChatFormat::Qwen3, /*enable_thinking=*/false);
  std::string text;
  for (const ChatPiece& p : pieces) text += p.text;
  EXPECT_EQ(text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_FALSE(pieces.back().is_content);
  const auto chatml = render_chat_pieces(messages, true, {}, ChatFormat::ChatML, false);
  EXPECT_EQ(chatml.back().text, "<|im_start|>assistant\n");
}

std::string refused(const json& body, Endpoint endpoint = Endpoint::Chat) {
  try {
    parse_request(body.dump(), endpoint);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.what();
  }
  return "";
}

json chat_body(const json& extra) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  body.update(extra);
  return body;
}

TEST(ServeFieldTable, UnknownFieldsAreRefusedAndVendorFieldsAccepted) {
  EXPECT_EQ(refused(chat_body({{"temprature", 0.5}})), "Unrecognized request argument supplied: temprature");
  EXPECT_EQ(refused(json{{"prompt", "x"}, {"messages", json::array()}}, Endpoint::Completion),
            "Unrecognized request argument supplied: messages");
  EXPECT_EQ(refused(chat_body({{"messages", json::array({{{"role", "user"}, {"content", "hi"}, {"mood", "x"}}})}})),
            "Unrecognized request argument supplied: messages[0].mood");
  // What clients send besides the output's own fields: accepted and ignored.
  EXPECT_EQ(refused(chat_body({{"user", "u1"},
                               {"metadata", {{"k", "v"}}},
                               {"store", false},
                               {"service_tier", "auto"},
                               {"safety_identifier", "s"},
                               {"prompt_cache_key", "c"},
                               {"prompt_cache_retention", "in-memory"},
                               {"verbosity", "medium"},
                               {"modalities", {"text"}},
                               {"stream_options", {{"include_usage", true}}},
                               {"messages", json::array({{{"role", "user"}, {"content", "hi"}, {"name", "ann"}}})}})),
            "");
  EXPECT_EQ(refused(json{{"prompt", "x"}, {"user", "u"}, {"echo", false}, {"best_of", 1}, {"suffix", nullptr}},
                    Endpoint::Completion),
            "");
  // Ignored fields are still checked for their type; output-changing ones are refused by name.
  EXPECT_NE(refused(chat_body({{"metadata", {{"k", 1}}}})).find("'metadata.k'"), std::string::npos);
  EXPECT_NE(refused(chat_body({{"store", "yes"}})).find("'store'"), std::string::npos);
  for (const char* name : {"reasoning_effort", "verbosity", "web_search_options", "audio", "prediction"}) {
    EXPECT_NE(refused(chat_body({{name, "high"}})).find(fmt::format("'{}' is not supported", name)), std::string::npos)
        << name;
  }
  EXPECT_NE(refused(chat_body({{"chat_template_kwargs", {{"tools_in_user_message", true}}}}))
                .find("'chat_template_kwargs.tools_in_user_message'"),
            std::string::npos);
}

TEST(ServeFieldTable, OpenAIsRangesAreRefusedLikeOpenAI) {
  EXPECT_EQ(refused(chat_body({{"temperature", 2}})), "");
  EXPECT_NE(refused(chat_body({{"temperature", 2.01}})).find("'temperature' must be in [0, 2]"), std::string::npos);
  EXPECT_NE(refused(chat_body({{"top_logprobs", 21}, {"logprobs", true}})).find("'top_logprobs'"), std::string::npos);
  EXPECT_NE(refused(chat_body({{"presence_penalty", -2.5}})).find("'presence_penalty'"), std::string::npos);
  EXPECT_NE(refused(chat_body({{"logit_bias", {{"5", 101}}}})).find("'logit_bias'"), std::string::npos);
}

TEST(ServeFieldTable, PromptFormsAndTemplateKwargs) {
  EXPECT_EQ(parse_request(R"({"prompt": ["Once"]})", Endpoint::Completion).prompt, "Once");
  EXPECT_EQ(parse_request(R"({"prompt": [5, 6, 7]})", Endpoint::Completion).prompt_ids,
            (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(parse_request(R"({"prompt": [[5, 6]]})", Endpoint::Completion).prompt_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_NE(refused(json{{"prompt", {"a", "b"}}}, Endpoint::Completion).find("2 prompts"), std::string::npos);
  EXPECT_NE(refused(json{{"prompt", {1, -2}}}, Endpoint::Completion).find("not a token id"), std::string::npos);
  EXPECT_NE(refused(json{{"prompt", json::array()}}, Endpoint::Completion).find("must not be empty"),
            std::string::npos);
  EXPECT_EQ(parse_request(chat_body({{"chat_template_kwargs", {{"enable_thinking", false}}}}).dump(), Endpoint::Chat)
                .enable_thinking,
            false);
  EXPECT_FALSE(parse_request(chat_body(json::object()).dump(), Endpoint::Chat).enable_thinking.has_value());
  // A reply's reasoning sent back: the template's think block again.
  const CompletionRequest r = parse_request(
      R"({"messages": [{"role": "user", "content": "q"},
                       {"role": "assistant", "content": "A.", "reasoning_content": "hmm"}]})",
      Endpoint::Chat);
  EXPECT_EQ(r.messages[1].content, "<think>\nhmm\n</think>\n\nA.");
  EXPECT_EQ(render_chat(r.messages, false, {}, ChatFormat::Qwen3),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nA.<|im_end|>\n");
}

TEST(ServeFieldTable, ResponseIdsAreRandomAndModelsHaveTheirOwnObject) {
  const std::string a = random_id("chatcmpl-"), b = random_id("chatcmpl-");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), std::string("chatcmpl-").size() + 24);
  const json m = json::parse(model_json("m1", 7));
  EXPECT_EQ(m, json({{"id", "m1"}, {"object", "model"}, {"created", 7}, {"owned_by", "nanoinfer"}}));
}

}  // namespace
}  // namespace nanoinfer::serve
