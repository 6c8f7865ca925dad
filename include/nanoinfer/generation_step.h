// The per-token step of one sequence, the one every front end runs: `generate`, `chat`, `viz`
// and `serve` (whose scheduler advances many sequences through their own steps after each
// batched forward pass):
//
//   logits -> logit processors (repetition penalty, ...) -> sampler -> observer
//          -> stop rules -> UTF-8-safe streaming text
//
// A GenerationStep holds what a generating sequence needs besides the model and its cache:
// the sampler with its seeded stream, the ordered logit processors, the observer, the stream
// decoder and the stop-string filter. It never runs the model: the caller pushes the chosen
// token (the last of `history`) and hands the next logits back to next(). So a sequence
// generated alone and one advanced inside a batch take the same decisions.
//
// Only ids the tokenizer has are ever sampled: embedding rows past its vocabulary (Qwen2.5
// pads 151,665 tokens to 151,936) are padding that a random or quantized model might pick.
//
// Text reaches the caller as soon as it is safe: UTF-8 is never split (StreamDecoder), and
// text that could be the start of a stop string is held back until it is known not to be
// one. A stop string ends generation and is not emitted; an end-of-sequence id ends it and is
// not kept.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/chat_template.h"
#include "nanoinfer/generation_config.h"
#include "nanoinfer/logit_processor.h"
#include "nanoinfer/sampler.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer {

enum class StopReason { Eos, StopString, MaxTokens, ContextFull, Interrupted };
std::string_view stop_reason_name(StopReason reason);

// When a generation ends (besides the end of the context).
struct StopRules {
  int64_t max_new_tokens = 256;           // >= 0
  std::vector<int32_t> eos_ids;           // sampling any of these ends generation (not kept)
  std::vector<std::string> stop_strings;  // non-empty strings
  // Set (e.g. from a SIGINT handler) to end the generation before its next token; read once
  // per step. Null: never.
  const std::atomic<bool>* interrupt = nullptr;
};

// The one end-of-sequence rule: the model's eos ids from generation_config.json, else the
// tokenizer's eos token; a chat reply also ends at "<|im_end|>", which closes every turn of
// the template. The list may be empty (a tokenizer without either): a generation then runs
// to its token budget.
std::vector<int32_t> stop_token_ids(const GenerationConfig& generation, const Tokenizer& tok, bool chat);

// How every front end turns what a user typed into the prompt's tokens. A raw prompt is the
// user's whole text: special-token text in it ("<|im_start|>") is parsed, so a user can write
// the template by hand, as in llama.cpp. A raw prompt starts with the tokenizer's prompt_prefix()
// (Llama 3's BOS; once, if the text spells it too). A chat prompt renders the conversation through the
// chat template with the generation prompt, and added-token text inside message content
// (<|im_end|>, <tool_call>, </tool_response>) stays plain text, so no message can close its
// turn, forge another or forge tool markup.
std::vector<int32_t> encode_raw_prompt(const Tokenizer& tok, std::string_view text);
std::vector<int32_t> encode_chat_prompt(const Tokenizer& tok, std::span<const ChatMessage> messages);

// One candidate of a step, for observers: raw logit and log-probability under the model's
// distribution (log-softmax of the raw logits over the sampled vocabulary, in double).
struct TokenCandidate {
  int32_t id;
  float logit;
  double logprob;
};

// The `k` largest raw logits (descending; ties by lower id) with their log-probabilities.
// `logsumexp` is log(sum(exp(logits))) of the same logits (logsumexp_of()).
std::vector<TokenCandidate> top_candidates(std::span<const float> logits, size_t k, double logsumexp);
double logsumexp_of(std::span<const float> logits);

// What an observer sees of each step, before the stop rules: the token chosen (an
// end-of-sequence id too), the raw logits it was chosen from and the scores the sampler's
// filters saw (after the logit processors and the temperature).
struct StepEvent {
  size_t index;  // tokens generated before this one
  int32_t token;
  std::span<const float> logits;   // [sampled vocab] as the model gave them
  std::span<const double> scores;  // [sampled vocab] processed, temperature-scaled
};
using StepObserver = std::function<void(const StepEvent&)>;

using TextSink = std::function<void(std::string_view)>;

// Streams text while holding back any suffix that could begin a stop string.
class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops);
  // Adds text; emits what is safe. Returns true when a stop string appeared: the text before
  // it has been emitted and the filter takes no more input.
  bool push(std::string_view text, const TextSink& on_text);
  // Emits whatever was held back (end of generation without a stop string).
  void finish(const TextSink& on_text);
  // Bytes pushed and not yet emitted (a possible stop-string start), while not stopped.
  size_t held_bytes() const { return stopped_ ? 0 : text_.size() - emitted_; }

 private:
  std::vector<std::string> stops_;
  size_t longest_ = 0;
  std::string text_;    // everything pushed
  size_t emitted_ = 0;  // bytes of text_ already emitted
  bool stopped_ = false;
};

// The ids a sequence may sample: the model's rows that are also tokenizer ids, [0, min of
// the two). The rows past the tokenizer's vocabulary are padding.
int64_t sampled_vocab(size_t model_rows, int64_t tokenizer_vocab);

// How many leading tokens `a` and `b` share: the cached positions of one that the other can
// keep (a drafter following its context, a server reusing a prompt's rows).
size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b);

// How a token is chosen from one row of logits: the scores of the sampled vocabulary go
// through the logit processors in order (the repetition penalty of the params first), then
// the sampler's temperature, filters and draw. The half of a step that picks the token, run
// by every GenerationStep and by a draft model (ModelDrafter) for its drafts, so a draft is
// chosen exactly as the target would choose under the same params and processors.
class TokenChooser {
 public:
  // Throws Error for invalid params.
  TokenChooser(int64_t sample_vocab, const SamplerParams& params);

  void add_processor(std::unique_ptr<LogitProcessor> processor) { processors_.push_back(std::move(processor)); }
  void restart();  // each processor is told (LogitProcessor::restart)

  // The next token after `context` (the processors' context) from `logits` [>= sample_vocab].
  // With a `draft` and its distribution `q` (speculative verification), by rejection sampling
  // (Sampler::choose_draft); otherwise as Sampler::choose(). Each processor is told the token.
  int32_t choose(std::span<const float> logits, std::span<const int32_t> context, int32_t draft = -1,
                 const DraftDistribution* q = nullptr);
  // choose() for a drafter: a sampled choice (temperature > 0) also leaves in `drawn_from` the
  // distribution it was drawn from, for the target's rejection sampling.
  int32_t choose_recording(std::span<const float> logits, std::span<const int32_t> context,
                           DraftDistribution& drawn_from);

  // The sampled vocabulary's slice of the last choice's logits, and the scores the sampler's
  // filters saw (after the processors and the temperature).
  std::span<const float> sampled() const { return sampled_; }
  std::span<const double> scores() const { return scores_; }
  const Sampler& sampler() const { return sampler_; }

 private:
  void process(std::span<const float> logits, std::span<const int32_t> context);
  void accept(int32_t id);

  Sampler sampler_;
  std::vector<std::unique_ptr<LogitProcessor>> processors_;
  std::span<const float> sampled_;
  std::span<double> scores_;
};

class GenerationStep {
 public:
  // `sample_vocab`: the ids that may be chosen, [0, sample_vocab) (sampled_vocab()). The
  // repetition penalty of `params` becomes the first
  // logit processor. `tok` must outlive the step. Throws Error for invalid params or rules.
  GenerationStep(const Tokenizer& tok, int64_t sample_vocab, const SamplerParams& params, StopRules rules);

  // Starts another generation of the same sequence (a chat's next turn) under `rules`: fresh
  // stop rules, stream decoder and counters; the sampler's random stream goes on where it was,
  // and each processor is told (LogitProcessor::restart).
  void restart(StopRules rules);

  // Appends a processor; processors run in the order added.
  void add_processor(std::unique_ptr<LogitProcessor> processor) { chooser_.add_processor(std::move(processor)); }
  void set_observer(StepObserver observer) { observer_ = std::move(observer); }

  // One step, given the logits [>= sample_vocab] of the sequence after its last token, its
  // tokens so far (`history`: prompt and generated; the processors' context) and the
  // positions left in its cache. Chooses the next token; unless it is an end-of-sequence id,
  // appends it to `history` and streams its text. Returns why generation ended, or nullopt
  // when the caller should push history.back() through the model and call again. Called
  // with a budget of 0 tokens, it ends at once without sampling.
  //
  // Speculative verification (nanoinfer/speculative.h) passes the draft this row's logits are
  // to check: with its distribution `q` (a sampled draft) and temperature > 0 the step chooses
  // by rejection sampling (Sampler::choose_draft), which keeps the draft with probability
  // min(1, p/q); otherwise (greedy, or a deterministic draft: q null) it chooses exactly as
  // without a draft, and the caller keeps the draft when the choice equals it, which for a
  // point-mass draft is rejection sampling too (kept with probability p(draft); otherwise a
  // token drawn from p without the draft). Either way the draft was kept iff the token
  // appended to `history` is `draft`.
  std::optional<StopReason> next(std::span<const float> logits, std::vector<int32_t>& history, size_t room,
                                 const TextSink& on_text, int32_t draft = -1, const DraftDistribution* q = nullptr);

  // Emits the text still held back (an incomplete UTF-8 tail, a possible stop-string start),
  // once generation has ended other than by a stop string; nothing after a stop string.
  void finish(const TextSink& on_text);

  size_t generated() const { return generated_; }  // tokens chosen and kept
  // Bytes of the kept tokens' text not streamed yet: an incomplete UTF-8 tail, text a space
  // cleanup may still change, a possible stop-string start. The text streamed so far and this
  // many bytes make the tokens' text (approximately, where the cleanup or a U+FFFD changed it).
  size_t held_bytes() const { return decoder_.held_bytes() + filter_.held_bytes(); }
  const Sampler& sampler() const { return chooser_.sampler(); }

 private:
  const Tokenizer* tok_;
  TokenChooser chooser_;
  StopRules rules_;
  StepObserver observer_;
  StreamDecoder decoder_;
  StopStringFilter filter_;
  size_t generated_ = 0;
  bool stopped_by_string_ = false;
  bool finished_ = false;
  bool flushed_ = false;  // finish() emitted what was held back
};

}  // namespace nanoinfer
