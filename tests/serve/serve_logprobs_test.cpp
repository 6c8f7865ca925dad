// logprobs and grammars through the serve scheduler with the embedded default model: each
// token's logprob and top alternatives equal the log-softmax (the perplexity code's,
// log_softmax_at) of the logits an independent forward pass gives for the same tokens; a grammar
// job ends by end of sequence only on a complete sentence of its grammar; streamed, every piece of
// a channel is the text of exactly the tokens whose entries it carries.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "model/ops.h"
#include "nanoinfer/generation_step.h"
#include "nanoinfer/open_model.h"
#include "serve/logprob_stream.h"
#include "serve/scheduler.h"

namespace nanoinfer::serve {
namespace {

struct Drained {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  FinishReason finish = FinishReason::Stop;
  std::vector<int32_t> ids;
};

Drained drain_with_logprobs(Channel& channel) {
  Drained d;
  for (Channel::Piece p = channel.next();; p = channel.next()) {
    d.text += p.text;
    for (auto& lp : p.logprobs) d.logprobs.push_back(std::move(lp));
    if (p.done) break;
  }
  EXPECT_EQ(channel.outcome(), Outcome::Finished) << channel.error();
  d.finish = channel.finish_reason();
  d.ids = channel.completion_ids();
  return d;
}

// The tokens' bytes of a chunk's entries, concatenated.
std::string entry_bytes(const std::vector<TokenLogprob>& entries) {
  std::string out;
  for (const TokenLogprob& e : entries) out += e.token;
  return out;
}

Job grammar_job(const OpenedModel& m, std::string_view gbnf, uint64_t seed) {
  Job j;
  j.prompt = encode_raw_prompt(m.tokenizer, "ROMEO:");
  j.max_tokens = 60;
  j.sampling = SamplerParams{.temperature = 1.0, .seed = seed};
  j.eos_ids = stop_token_ids(m.generation, m.tokenizer, false);
  j.grammar = std::make_shared<const Grammar>(Grammar::from_gbnf(std::string(gbnf)));
  j.trie = VocabTrie::of(m.tokenizer);
  j.top_logprobs = 1;
  return j;
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
  EXPECT_EQ(entry_bytes(entries), text);
  // A possible stop-string start ("x" of "xyz") holds its token; the stop cuts the next one.
  LogprobAligner s;
  std::string t2;
  std::vector<TokenLogprob> e2;
  s.add_token({"hi ", -1, {}});
  s.add_text("hi ");
  s.add_token({"x", -1, {}});
  s.release(1, t2, e2);
  EXPECT_EQ(t2, "hi ");
  EXPECT_EQ(entry_bytes(e2), "hi ");
  s.add_token({"yz!", -1, {}});
  s.add_token({"more", -1, {}});
  t2.clear();
  e2.clear();
  s.finish(/*cut=*/true, t2, e2);
  EXPECT_EQ(t2, "");
  EXPECT_EQ(entry_bytes(e2), "");  // "x", "yz!" and "more" lie wholly in the cut-off stop string and after
}

class ServeLogprobs : public ::testing::Test {
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
  static OpenedModel* m_;
  Metrics metrics_;
};
OpenedModel* ServeLogprobs::m_ = nullptr;

TEST_F(ServeLogprobs, EqualTheLogSoftmaxOfAnIndependentForwardPass) {
  const Tokenizer& tok = m_->tokenizer;
  const Model& model = m_->model;
  const size_t vocab = std::min<size_t>(model.vocab_size(), static_cast<size_t>(tok.vocab_size()));
  Scheduler scheduler(model, tok, {.parallel = 2, .queue = 4}, metrics_);
  Job job;
  job.prompt = encode_raw_prompt(tok, "Once upon a time there was");
  job.max_tokens = 24;
  job.sampling = SamplerParams{.temperature = 1.0, .seed = 42};
  job.eos_ids = stop_token_ids(m_->generation, tok, false);
  job.top_logprobs = 5;
  const Drained d = drain_with_logprobs(*scheduler.submit(job));
  ASSERT_EQ(d.logprobs.size(), d.ids.size());
  ASSERT_GT(d.ids.size(), 0u);

  Sequence seq = model.new_sequence();
  std::span<const float> logits = model.forward(job.prompt, seq);
  for (size_t i = 0; i < d.ids.size(); ++i) {
    const int32_t id = d.ids[i];
    EXPECT_EQ(d.logprobs[i].token, tok.token_bytes(id));
    const double want = log_softmax_at(logits.data(), vocab, static_cast<size_t>(id));
    EXPECT_NEAR(d.logprobs[i].logprob, want, 1e-6) << "token " << i;
    // The top 5: the 5 largest logits, in order, with their log-softmax.
    std::vector<size_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                      [&](size_t a, size_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
    ASSERT_EQ(d.logprobs[i].top.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(d.logprobs[i].top[k].first, tok.token_bytes(static_cast<int32_t>(order[k])));
      EXPECT_NEAR(d.logprobs[i].top[k].second, log_softmax_at(logits.data(), vocab, order[k]), 1e-6);
    }
    logits = model.forward(std::span(&id, 1), seq);
  }
}

TEST_F(ServeLogprobs, GrammarJobsEndOnlyOnCompleteSentences) {
  const Tokenizer& tok = m_->tokenizer;
  Scheduler scheduler(m_->model, tok, {.parallel = 4, .queue = 16}, metrics_);
  const auto trie = VocabTrie::of(tok);
  const auto grammar = std::make_shared<const Grammar>(Grammar::from_gbnf(json_schema_to_gbnf(
      R"({"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer","minimum":0,"maximum":99}},
          "required":["ok","n"],"additionalProperties":false})")));
  std::vector<std::shared_ptr<Channel>> channels;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Job job;
    job.prompt = encode_raw_prompt(tok, "JSON:");
    job.max_tokens = 40;
    job.sampling = SamplerParams{.temperature = 1.0, .seed = seed};
    job.eos_ids = stop_token_ids(m_->generation, tok, false);
    job.grammar = grammar;
    job.trie = trie;
    channels.push_back(scheduler.submit(job));
  }
  int ended = 0;
  for (auto& c : channels) {
    const Drained d = drain_with_logprobs(*c);
    if (d.finish != FinishReason::Stop) continue;
    ++ended;
    const nlohmann::json v = nlohmann::json::parse(d.text);
    EXPECT_TRUE(v.at("ok").is_boolean()) << d.text;
    EXPECT_GE(v.at("n").get<int>(), 0);
    EXPECT_LE(v.at("n").get<int>(), 99);
    EXPECT_EQ(v.size(), 2u);
  }
  EXPECT_GT(ended, 4);
}

// Text with 2-, 3- and 4-byte characters, which the default model's byte-level vocabulary writes
// a byte at a time: every piece the handler takes is text and the entries of exactly its tokens.
TEST_F(ServeLogprobs, EveryPieceIsItsTokensText) {
  Scheduler scheduler(m_->model, m_->tokenizer, {.parallel = 4, .queue = 8}, metrics_);
  const std::string_view gbnf = R"(root ::= "Hé said " [a-z]{2,6} " € " [a-z]{1,4} " 😀 ok")";
  std::vector<std::shared_ptr<Channel>> channels;
  for (uint64_t seed = 1; seed <= 4; ++seed) channels.push_back(scheduler.submit(grammar_job(*m_, gbnf, seed)));
  for (auto& c : channels) {
    std::string text;
    size_t pieces = 0, entries = 0;
    for (Channel::Piece p = c->next();; p = c->next()) {
      EXPECT_EQ(entry_bytes(p.logprobs), p.text) << "piece " << pieces;
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
TEST_F(ServeLogprobs, AStopStringDropsTheEntriesOfWhatItCut) {
  Scheduler scheduler(m_->model, m_->tokenizer, {.parallel = 1, .queue = 2}, metrics_);
  Job j = grammar_job(*m_, R"(root ::= "one é two € three")", 3);
  j.stop = {"two"};
  const std::shared_ptr<Channel> c = scheduler.submit(j);
  std::string text, entry_text;
  std::vector<Channel::Piece> pieces;
  for (Channel::Piece p = c->next();; p = c->next()) {
    text += p.text;
    entry_text += entry_bytes(p.logprobs);
    const bool done = p.done;
    pieces.push_back(std::move(p));
    if (done) break;
  }
  // Every piece before the cut carries exactly its tokens' text. The piece the stop string cut
  // (the last with text; the end may come with it or, under load, in a piece of its own) carries
  // the straddling token's whole entry beside the kept part of its text.
  size_t cut = pieces.size() - 1;
  while (cut > 0 && pieces[cut].text.empty()) --cut;
  for (size_t i = 0; i < cut; ++i) EXPECT_EQ(entry_bytes(pieces[i].logprobs), pieces[i].text) << i;
  EXPECT_EQ(text, "one é ");
  EXPECT_TRUE(entry_text.starts_with(text)) << entry_text;
  EXPECT_EQ(entry_text.find("three"), std::string::npos) << entry_text;
}

}  // namespace
}  // namespace nanoinfer::serve
