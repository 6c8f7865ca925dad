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
      tokenizer_(tokenizer),
      step_(tokenizer, std::min<int64_t>(static_cast<int64_t>(model.vocab_size()), tokenizer.vocab_size()), params,
            StopRules{}),
      seq_(model.new_sequence()) {}

void Generator::set_drafter(std::unique_ptr<Drafter> drafter, DraftLength length) {
  drafter_ = std::move(drafter);
  draft_length_ = draft_length_start_ = length;
}

void Generator::reset() {
  seq_.cache().clear();
  history_.clear();
  if (drafter_) drafter_->reset();
  draft_length_ = draft_length_start_;
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
  if (drafter_) {
    const size_t behind = drafter_->behind(history_);
    const Clock::time_point draft_start = Clock::now();
    drafter_->prefill(history_);
    const size_t caught_up = behind - drafter_->behind(history_);  // and the last token
    draft_length_.prefilled(caught_up > 0 ? caught_up + 1 : 0, seconds_since(draft_start));
  }
  stats.prefill_seconds = seconds_since(start);

  // Each pass leaves `rows` rows of logits: the prefill's last position, a decode step's one
  // token, or a verification pass's pending token and its drafts (drafts_). The rows go to the
  // step in order, as plain decoding would hand them over one step at a time, for as long as
  // the step chooses the draft the next row assumed.
  const size_t vocab = model_.vocab_size();
  Clock::time_point decode_start = start;
  size_t rows = 1;
  bool decode_pass = false;
  Clock::time_point pass_start = start;  // of the drafting and forward pass being verified
  size_t pass_behind = 0;  // tokens the drafter caught up before drafting for that pass
  std::optional<StopReason> end;
  while (true) {
    const size_t first = seq_.cache().length() - rows;  // the position of row 0
    const size_t drafted = rows - 1;
    size_t accepted = 0;
    for (size_t r = 0; r < rows; ++r) {
      const size_t before = step_.generated();
      const bool verifying = r < drafted;
      end = step_.next(logits.subspan(r * vocab, vocab), history_, capacity - (first + r + 1), on_text,
                       verifying ? drafts_[r] : -1, verifying && r < dists_.size() ? &dists_[r] : nullptr);
      const bool kept = step_.generated() > before;
      const bool chose = kept || end == StopReason::Eos;
      if (decode_pass && chose) ++stats.decode_tokens;
      if (drafted > 0 && chose) ++stats.verified_tokens;
      if (stats.first_token_seconds == 0 && (step_.generated() > 0 || end == StopReason::Eos)) {
        stats.first_token_seconds = seconds_since(start);
        decode_start = Clock::now();
      }
      const bool match = kept && r < drafted && history_.back() == drafts_[r];
      if (match) ++accepted;
      if (end || !match) break;
    }
    if (drafter_ && decode_pass) {
      const double seconds = seconds_since(pass_start);
      drafted > 0 ? draft_length_.passed(drafted, accepted, seconds, pass_behind) : draft_length_.plain_step(seconds);
    }
    if (drafted > 0) {
      stats.accepted_tokens += accepted;
      // Roll back the positions of rejected drafts: keep what the history still starts with.
      const auto same = std::mismatch(to_push_.begin(), to_push_.end(), history_.begin() + static_cast<ptrdiff_t>(first),
                                      history_.end());
      seq_.cache().truncate(first + static_cast<size_t>(same.first - to_push_.begin()));
    }
    if (end) {
      stats.stop_reason = *end;
      break;
    }
    // The step's last token is pending (not in the cache). Draft what may follow it, at most
    // what the context and the token budget leave room for besides the step's own token.
    drafts_.clear();
    dists_ = {};
    pass_start = Clock::now();
    if (drafter_) {
      pass_behind = drafter_->behind(history_);
      const size_t k = std::min({draft_length_.next(pass_behind), capacity - seq_.cache().length() - 1,
                                 static_cast<size_t>(rules.max_new_tokens) - step_.generated() - 1});
      if (k > 0) {
        drafter_->draft(history_, k, drafts_);
        stats.draft_seconds += seconds_since(pass_start);
      }
      if (drafts_.size() > k) drafts_.resize(k);
      if (!drafts_.empty()) dists_ = drafter_->distributions();
    }
    to_push_.assign(1, history_.back());
    to_push_.insert(to_push_.end(), drafts_.begin(), drafts_.end());
    logits = model_.forward(to_push_, seq_, /*all_logits=*/!drafts_.empty());
    rows = to_push_.size();
    decode_pass = true;
    ++stats.decode_steps;
    if (!drafts_.empty()) {
      ++stats.verify_passes;
      stats.drafted_tokens += drafts_.size();
    }
  }
  stats.generated_tokens = step_.generated();
  if (stats.generated_tokens > 0) stats.decode_seconds = seconds_since(decode_start);
  step_.finish(on_text);
  step_.set_observer({});
  return stats;
}

}  // namespace nanoinfer
