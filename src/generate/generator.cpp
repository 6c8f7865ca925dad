#include "nanoinfer/generator.h"

#include <algorithm>
#include <chrono>

#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::Eos: return "end of sequence";
    case StopReason::StopString: return "stop string";
    case StopReason::MaxTokens: return "token limit";
    case StopReason::ContextFull: return "context full";
  }
  return "?";
}

double GenerationStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerationStats::decode_tokens_per_second() const {
  return decode_seconds > 0 ? static_cast<double>(decode_steps) / decode_seconds : 0.0;
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

// ---- Generator --------------------------------------------------------------------------------

Generator::Generator(const Model& model, const Tokenizer& tokenizer, const SamplerParams& params)
    : model_(model),
      tokenizer_(tokenizer),
      sampler_(std::min<int64_t>(static_cast<int64_t>(model.vocab_size()), tokenizer.vocab_size()),
               params),
      seq_(model.new_sequence()) {}

void Generator::reset() {
  seq_.cache().clear();
  history_.clear();
}

GenerationStats Generator::generate(std::span<const int32_t> new_tokens,
                                    const GenerateOptions& options, const TextSink& on_text) {
  if (options.max_new_tokens < 0) fail("the number of tokens to generate must be >= 0");
  for (int32_t id : new_tokens) {
    if (id < 0 || static_cast<size_t>(id) >= model_.vocab_size()) {
      fail("token id {} is outside the model's vocabulary of {} (tokenizer and model do not match)",
           id, model_.vocab_size());
    }
  }
  // What the cache lacks: the previous call's last sampled token, if any, and the new tokens.
  to_push_.assign(history_.begin() + static_cast<ptrdiff_t>(seq_.cache().length()), history_.end());
  to_push_.insert(to_push_.end(), new_tokens.begin(), new_tokens.end());
  if (to_push_.empty()) fail("nothing to generate from: the prompt is empty");
  const size_t capacity = seq_.cache().capacity();
  if (seq_.cache().length() + to_push_.size() > capacity) {
    if (seq_.cache().length() == 0) {
      fail("the prompt is {} tokens but the context holds {}; shorten it or raise -c (at most {})",
           to_push_.size(), capacity, model_.max_context());
    }
    fail("this turn needs {} more tokens but only {} of the context's {} are left; /reset or raise -c",
         to_push_.size(), capacity - seq_.cache().length(), capacity);
  }
  history_.insert(history_.end(), new_tokens.begin(), new_tokens.end());

  GenerationStats stats;
  stats.prompt_tokens = to_push_.size();
  const Clock::time_point start = Clock::now();
  std::span<const float> logits = model_.forward(to_push_, seq_);
  stats.prefill_seconds = seconds_since(start);

  StreamDecoder decoder(tokenizer_);
  StopStringFilter filter(options.stop_strings);
  Clock::time_point decode_start = start;
  bool stopped_by_string = false;
  stats.stop_reason = StopReason::MaxTokens;
  while (stats.generated_tokens < static_cast<size_t>(options.max_new_tokens)) {
    // Only ids the tokenizer knows are candidates: rows past its vocabulary are padding.
    int32_t id = 0;
    try {
      id = sampler_.sample(logits.first(static_cast<size_t>(sampler_.vocab_size())), history_);
    } catch (const Error& e) {
      fail("generated token {}: {}", stats.generated_tokens + 1, e.what());
    }
    if (stats.generated_tokens == 0) {
      stats.first_token_seconds = seconds_since(start);
      decode_start = Clock::now();
    }
    if (std::find(options.eos_ids.begin(), options.eos_ids.end(), id) != options.eos_ids.end()) {
      stats.stop_reason = StopReason::Eos;
      break;
    }
    history_.push_back(id);
    ++stats.generated_tokens;
    if (filter.push(decoder.push(id), on_text)) {
      stats.stop_reason = StopReason::StopString;
      stopped_by_string = true;
      break;
    }
    if (stats.generated_tokens == static_cast<size_t>(options.max_new_tokens)) break;
    if (seq_.cache().length() == capacity) {
      stats.stop_reason = StopReason::ContextFull;
      break;
    }
    logits = model_.forward({&history_.back(), 1}, seq_);
    ++stats.decode_steps;
  }
  if (stats.generated_tokens > 0) stats.decode_seconds = seconds_since(decode_start);
  if (!stopped_by_string) {
    filter.push(decoder.flush(), on_text);
    filter.finish(on_text);
  }
  return stats;
}

}  // namespace nanoinfer
