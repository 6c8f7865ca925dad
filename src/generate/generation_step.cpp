#include "nanoinfer/generation_step.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/ops.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::Eos:
      return "end of sequence";
    case StopReason::StopString:
      return "stop string";
    case StopReason::MaxTokens:
      return "token limit";
    case StopReason::ContextFull:
      return "context full";
    case StopReason::Interrupted:
      return "interrupted";
  }
  return "?";
}

std::vector<int32_t> stop_token_ids(const GenerationConfig& generation, const Tokenizer& tok, bool chat) {
  std::vector<int32_t> ids = generation.eos_token_ids;
  if (ids.empty() && tok.eos_token_id()) ids.push_back(*tok.eos_token_id());
  if (chat) {
    const std::optional<int32_t> im_end = tok.token_id("<|im_end|>");
    if (im_end && std::find(ids.begin(), ids.end(), *im_end) == ids.end()) ids.push_back(*im_end);
  }
  return ids;
}

std::vector<int32_t> encode_raw_prompt(const Tokenizer& tok, std::string_view text) {
  const std::span<const int32_t> prefix = tok.prompt_prefix();
  std::vector<int32_t> ids(prefix.begin(), prefix.end());
  tok.encode_append(text, ids, SpecialTokens::Parse);
  // A prompt that spells the prefix itself ("<|begin_of_text|>Hello") gets it once.
  if (!prefix.empty() && ids.size() >= 2 * prefix.size() &&
      std::equal(prefix.begin(), prefix.end(), ids.begin() + static_cast<ptrdiff_t>(prefix.size())))
    ids.erase(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(prefix.size()));
  return ids;
}

std::vector<int32_t> encode_chat_prompt(const Tokenizer& tok, std::span<const ChatMessage> messages) {
  return encode_chat(tok, messages, /*add_generation_prompt=*/true, SpecialTokens::AllAsText);
}

double logsumexp_of(std::span<const float> logits) {
  if (logits.empty()) return -INFINITY;
  return log_softmax(logits.data(), logits.size()).logsumexp();
}

std::vector<TokenCandidate> top_candidates(std::span<const float> logits, size_t k, double logsumexp) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  k = std::min(k, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(k), order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  std::vector<TokenCandidate> top;
  top.reserve(k);
  for (size_t c = 0; c < k; ++c) {
    const int32_t id = order[c];
    top.push_back({id, logits[id], static_cast<double>(logits[id]) - logsumexp});
  }
  return top;
}

// ---- StopStringFilter -------------------------------------------------------------------------

StopStringFilter::StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const std::string& s : stops_) {
    if (s.empty()) fail("a stop string must not be empty");
    longest_ = std::max(longest_, s.size());
  }
}

bool StopStringFilter::push(std::string_view text, const TextSink& on_text) {
  if (stopped_) return true;
  const size_t old_size = text_.size();
  text_.append(text);
  if (stops_.empty()) {
    if (!text.empty()) on_text(text);
    emitted_ = text_.size();
    return false;
  }
  // A new match must end inside the new text, so it starts at most longest_ - 1 bytes before.
  const size_t from = old_size >= longest_ - 1 ? old_size - (longest_ - 1) : 0;
  size_t match = std::string::npos;
  for (const std::string& s : stops_) match = std::min(match, text_.find(s, from));
  if (match != std::string::npos) {
    if (match > emitted_) on_text(std::string_view(text_).substr(emitted_, match - emitted_));
    emitted_ = match;
    stopped_ = true;
    return true;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string. Stop strings are
  // whole UTF-8 and so is text_, so the held-back part starts on a character boundary.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, text_.size()); k > hold; --k) {
      if (std::string_view(text_).ends_with(std::string_view(s).substr(0, k))) {
        hold = k;
        break;
      }
    }
  }
  const size_t safe = text_.size() - hold;
  if (safe > emitted_) {
    on_text(std::string_view(text_).substr(emitted_, safe - emitted_));
    emitted_ = safe;
  }
  return false;
}

void StopStringFilter::finish(const TextSink& on_text) {
  if (stopped_) return;
  if (text_.size() > emitted_) on_text(std::string_view(text_).substr(emitted_));
  emitted_ = text_.size();
}

// ---- TokenChooser -----------------------------------------------------------------------------

int64_t sampled_vocab(size_t model_rows, int64_t tokenizer_vocab) {
  return std::min<int64_t>(static_cast<int64_t>(model_rows), tokenizer_vocab);
}

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

TokenChooser::TokenChooser(int64_t sample_vocab, const SamplerParams& params) : sampler_(sample_vocab, params) {
  if (params.repetition_penalty != 1.0) {
    processors_.push_back(std::make_unique<RepetitionPenalty>(sample_vocab, params.repetition_penalty));
  }
}

void TokenChooser::restart() {
  for (const auto& p : processors_) p->restart();
}

void TokenChooser::process(std::span<const float> logits, std::span<const int32_t> context) {
  const size_t vocab = static_cast<size_t>(sampler_.vocab_size());
  if (logits.size() < vocab) fail("internal error: {} logits for a vocabulary of {}", logits.size(), vocab);
  sampled_ = logits.first(vocab);
  scores_ = sampler_.load(sampled_);
  for (const auto& p : processors_) p->process(scores_, context);
}

void TokenChooser::accept(int32_t id) {
  for (const auto& p : processors_) p->accept(id);
}

int32_t TokenChooser::choose(std::span<const float> logits, std::span<const int32_t> context, int32_t draft,
                             const DraftDistribution* q) {
  process(logits, context);
  const int32_t id = q != nullptr && draft >= 0 ? sampler_.choose_draft(draft, *q) : sampler_.choose();
  accept(id);
  return id;
}

int32_t TokenChooser::choose_recording(std::span<const float> logits, std::span<const int32_t> context,
                                       DraftDistribution& drawn_from) {
  process(logits, context);
  const int32_t id = sampler_.choose(&drawn_from);
  accept(id);
  return id;
}

// ---- GenerationStep ---------------------------------------------------------------------------

GenerationStep::GenerationStep(const Tokenizer& tok, int64_t sample_vocab, const SamplerParams& params, StopRules rules)
    : tok_(&tok),
      chooser_(sample_vocab, params),
      rules_(std::move(rules)),
      decoder_(tok),
      filter_(rules_.stop_strings) {
  if (rules_.max_new_tokens < 0) fail("the number of tokens to generate must be >= 0");
}

void GenerationStep::restart(StopRules rules) {
  if (rules.max_new_tokens < 0) fail("the number of tokens to generate must be >= 0");
  filter_ = StopStringFilter(rules.stop_strings);
  rules_ = std::move(rules);
  decoder_ = StreamDecoder(*tok_);
  generated_ = 0;
  stopped_by_string_ = finished_ = flushed_ = false;
  chooser_.restart();
}

std::optional<StopReason> GenerationStep::next(std::span<const float> logits, std::vector<int32_t>& history,
                                               size_t room, const TextSink& on_text, int32_t draft,
                                               const DraftDistribution* q) {
  if (finished_) fail("internal error: a generation step was called after its generation ended");
  if (generated_ >= static_cast<size_t>(rules_.max_new_tokens)) {
    finished_ = true;
    return StopReason::MaxTokens;
  }
  if (rules_.interrupt && rules_.interrupt->load(std::memory_order_relaxed)) {
    finished_ = true;
    return StopReason::Interrupted;
  }
  int32_t id = 0;
  try {
    id = chooser_.choose(logits, history, draft, q);
    if (observer_) observer_({generated_, id, chooser_.sampled(), chooser_.scores()});
  } catch (const Error& e) {
    finished_ = true;
    fail("generated token {}: {}", generated_ + 1, e.what());
  }
  if (std::find(rules_.eos_ids.begin(), rules_.eos_ids.end(), id) != rules_.eos_ids.end()) {
    finished_ = true;
    return StopReason::Eos;
  }
  history.push_back(id);
  ++generated_;
  if (filter_.push(decoder_.push(id), on_text)) {
    stopped_by_string_ = finished_ = true;
    return StopReason::StopString;
  }
  std::optional<StopReason> end;
  if (generated_ == static_cast<size_t>(rules_.max_new_tokens)) {
    end = StopReason::MaxTokens;
  } else if (room == 0) {
    end = StopReason::ContextFull;
  }
  if (end) finished_ = true;
  return end;
}

void GenerationStep::finish(const TextSink& on_text) {
  if (stopped_by_string_ || flushed_) return;
  filter_.push(decoder_.flush(), on_text);
  filter_.finish(on_text);
  flushed_ = true;
}

}  // namespace nanoinfer
