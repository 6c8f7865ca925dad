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

double GenerationStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerationStats::decode_tokens_per_second() const {
  return decode_seconds > 0 ? static_cast<double>(decode_steps) / decode_seconds : 0.0;
}

// ---- Generator --------------------------------------------------------------------------------

Generator::Generator(const Model& model, const Tokenizer& tokenizer, const SamplerParams& params)
    : model_(model),
      tokenizer_(tokenizer),
      step_(tokenizer, std::min<int64_t>(static_cast<int64_t>(model.vocab_size()), tokenizer.vocab_size()), params,
            StopRules{}),
      seq_(model.new_sequence()) {}

void Generator::reset() {
  seq_.cache().clear();
  history_.clear();
}

GenerationStats Generator::generate(std::span<const int32_t> new_tokens, const StopRules& rules,
                                    const TextSink& on_text, const StepObserver& observer) {
  if (rules.max_new_tokens < 0) fail("the number of tokens to generate must be >= 0");
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
  step_.restart(rules);
  step_.set_observer(observer);
  history_.insert(history_.end(), new_tokens.begin(), new_tokens.end());

  GenerationStats stats;
  stats.prompt_tokens = to_push_.size();
  const Clock::time_point start = Clock::now();
  std::span<const float> logits = model_.forward(to_push_, seq_);
  stats.prefill_seconds = seconds_since(start);

  Clock::time_point decode_start = start;
  while (true) {
    const std::optional<StopReason> end = step_.next(logits, history_, capacity - seq_.cache().length(), on_text);
    if (stats.first_token_seconds == 0 && (step_.generated() > 0 || end == StopReason::Eos)) {
      stats.first_token_seconds = seconds_since(start);
      decode_start = Clock::now();
    }
    if (end) {
      stats.stop_reason = *end;
      break;
    }
    logits = model_.forward({&history_.back(), 1}, seq_);
    ++stats.decode_steps;
  }
  stats.generated_tokens = step_.generated();
  if (stats.generated_tokens > 0) stats.decode_seconds = seconds_since(decode_start);
  step_.finish(on_text);
  step_.set_observer({});
  return stats;
}

}  // namespace nanoinfer
