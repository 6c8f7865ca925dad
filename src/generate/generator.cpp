#include "nanoinfer/generator.h"

#include <algorithm>
#include <chrono>

#include "generate/seconds_since.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

double GenerationStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerationStats::decode_tokens_per_second() const {
  return decode_seconds > 0 ? static_cast<double>(decode_tokens) / decode_seconds : 0.0;
}

double GenerationStats::acceptance_rate() const {
  return drafted_tokens > 0 ? static_cast<double>(accepted_tokens) / static_cast<double>(drafted_tokens) : 0.0;
}

double GenerationStats::tokens_per_verify_pass() const {
  return verify_passes > 0 ? static_cast<double>(verified_tokens) / static_cast<double>(verify_passes) : 0.0;
}

// ---- Generator --------------------------------------------------------------------------------

Generator::Generator(const Model& model, const Tokenizer& tokenizer, const SamplerParams& params)
    : model_(model),
      step_(tokenizer, sampled_vocab(model.vocab_size(), tokenizer.vocab_size()), params, StopRules{}),
      seq_(model.new_sequence()) {}

void Generator::set_drafter(std::unique_ptr<Drafter> drafter, DraftLength length) {
  spec_ = SpeculativeStep(std::move(drafter), length);
}

void Generator::reset() {
  seq_.cache().clear();
  history_.clear();
  spec_.reset();
}

void Generator::check_fits(std::span<const int32_t> new_tokens, const StopRules& rules) const {
  if (rules.max_new_tokens < 0) fail("the number of tokens to generate must be >= 0");
  for (int32_t id : new_tokens) {
    if (id < 0 || static_cast<size_t>(id) >= model_.vocab_size()) {
      fail("token id {} is outside the model's vocabulary of {} (tokenizer and model do not match)", id,
           model_.vocab_size());
    }
  }
  if (to_push_.empty()) fail("nothing to generate from: the prompt is empty");
  const size_t capacity = seq_.cache().capacity();
  if (seq_.cache().length() + to_push_.size() > capacity) {
    if (seq_.cache().length() == 0) {
      fail("the prompt is {} tokens but the context holds {}; shorten it or raise -c (at most {})", to_push_.size(),
           capacity, model_.max_context());
    }
    fail("this turn needs {} more tokens but only {} of the context's {} are left; /reset or raise -c", to_push_.size(),
         capacity - seq_.cache().length(), capacity);
  }
}

GenerationStats Generator::generate(std::span<const int32_t> new_tokens, const StopRules& rules,
                                    const TextSink& on_text, const StepObserver& observer) {
  // What the cache lacks: the previous call's last sampled token, if any, and the new tokens.
  to_push_.assign(history_.begin() + static_cast<ptrdiff_t>(seq_.cache().length()), history_.end());
  to_push_.insert(to_push_.end(), new_tokens.begin(), new_tokens.end());
  check_fits(new_tokens, rules);
  step_.restart(rules);
  step_.set_observer(observer);
  history_.insert(history_.end(), new_tokens.begin(), new_tokens.end());

  GenerationStats stats;
  stats.prompt_tokens = to_push_.size();
  const Clock::time_point start = Clock::now();
  std::span<const float> logits = model_.forward(to_push_, seq_);
  spec_.prefill(history_);
  stats.prefill_seconds = seconds_since(start);

  // Each pass leaves rows of logits: the prefill's last position, a decode step's one token,
  // or a verification pass's pending token and its drafts; the speculative step hands them to
  // the generation step (nanoinfer/speculative.h).
  Clock::time_point decode_start = start;
  const auto first_choice = [&](size_t) {
    if (stats.first_token_seconds != 0) return;
    stats.first_token_seconds = seconds_since(start);
    decode_start = Clock::now();
  };
  const size_t capacity = seq_.cache().capacity();
  bool decode_pass = false;
  while (true) {
    const SpeculativeStep::Verdict v =
        spec_.verify(step_, logits, model_.vocab_size(), history_, seq_.cache(), on_text, decode_pass, first_choice);
    if (decode_pass) stats.decode_tokens += v.chosen;
    if (v.drafted > 0) {
      stats.verified_tokens += v.chosen;
      stats.accepted_tokens += v.accepted;
    }
    if (v.end) {
      stats.stop_reason = *v.end;
      break;
    }
    // The step's last token is pending (not in the cache): draft what may follow it.
    const std::span<const int32_t> drafts =
        spec_.draft(history_, capacity - seq_.cache().length() - 1,
                    static_cast<size_t>(rules.max_new_tokens) - step_.generated() - 1);
    stats.draft_seconds += spec_.draft_seconds();
    to_push_.assign(1, history_.back());
    to_push_.insert(to_push_.end(), drafts.begin(), drafts.end());
    logits = model_.forward(to_push_, seq_, /*all_logits=*/!drafts.empty());
    decode_pass = true;
    ++stats.decode_steps;
    if (!drafts.empty()) {
      ++stats.verify_passes;
      stats.drafted_tokens += drafts.size();
    }
  }
  stats.generated_tokens = step_.generated();
  if (stats.generated_tokens > 0) stats.decode_seconds = seconds_since(decode_start);
  step_.finish(on_text);
  step_.set_observer({});
  return stats;
}

}  // namespace nanoinfer
