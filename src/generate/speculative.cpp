#include "nanoinfer/speculative.h"

#include <algorithm>

#include "nanoinfer/error.h"

namespace nanoinfer {

// ---- PromptLookupDrafter ----------------------------------------------------------------------

PromptLookupDrafter::PromptLookupDrafter(size_t max_ngram) : max_ngram_(max_ngram) {
  if (max_ngram < 1 || max_ngram > kMaxNgram) {
    fail("the prompt lookup n-gram must be 1 to {} tokens, not {}", kMaxNgram, max_ngram);
  }
}

void PromptLookupDrafter::draft(std::span<const int32_t> context, size_t k, std::vector<int32_t>& out) {
  out.clear();
  const size_t n = context.size();
  if (n < 2 || k == 0) return;
  // Longest suffix first; for each length the latest earlier occurrence whose continuation
  // starts before the end (start + g < n), so there is at least one token to copy.
  for (size_t g = std::min(max_ngram_, n - 1); g >= 1; --g) {
    const std::span<const int32_t> suffix = context.subspan(n - g);
    for (size_t start = n - g; start-- > 0;) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + static_cast<ptrdiff_t>(start))) continue;
      const size_t from = start + g;
      const size_t take = std::min(k, n - from);
      out.assign(context.begin() + static_cast<ptrdiff_t>(from), context.begin() + static_cast<ptrdiff_t>(from + take));
      return;
    }
  }
}

// ---- ModelDrafter -----------------------------------------------------------------------------

ModelDrafter::ModelDrafter(const Model& draft, int64_t sample_vocab, const SamplerParams& params)
    : model_(draft),
      vocab_(static_cast<size_t>(sampled_vocab(draft.vocab_size(), std::max<int64_t>(sample_vocab, 1)))),
      seq_(draft.new_sequence()) {
  set_sampling(params);
}

void ModelDrafter::override_choices(ChoiceOverride choose) {
  if (sampling_ && choose)
    fail("internal error: a draft model's choices can be overridden only when it drafts greedily");
  choose_ = std::move(choose);
}

void ModelDrafter::set_sampling(const SamplerParams& params) {
  if (choose_ && params.temperature > 0.0) fail("internal error: a draft model with overridden choices cannot sample");
  SamplerParams own = params;
  own.seed = params.seed ^ 0x6a09e667f3bcc908ull;  // a stream apart from the target's
  chooser_.emplace(static_cast<int64_t>(vocab_), own);
  sampling_ = params.temperature > 0.0;
}

ModelDrafter::ModelDrafter(const Model& draft, int64_t sample_vocab, double repetition_penalty)
    : ModelDrafter(draft, sample_vocab, SamplerParams{.temperature = 0.0, .repetition_penalty = repetition_penalty}) {}

std::span<const DraftDistribution> ModelDrafter::distributions() const {
  if (!sampling_) return {};
  return std::span<const DraftDistribution>(dists_).first(drafted_);
}

size_t ModelDrafter::cached_prefix(std::span<const int32_t> context) const {
  return common_prefix(cached_, context);
}

std::span<const float> ModelDrafter::push(std::span<const int32_t> context, bool last) {
  // Keep the cached prefix the context still starts with; with `last`, push at least the
  // context's last token (its logits give the first draft).
  size_t keep = cached_prefix(context);
  if (last) keep = std::min(keep, context.size() - 1);
  seq_.cache().truncate(keep);
  cached_.resize(keep);
  if (keep == context.size()) return {};
  cached_.insert(cached_.end(), context.begin() + static_cast<ptrdiff_t>(keep), context.end());
  return model_.forward(context.subspan(keep), seq_);
}

void ModelDrafter::prefill(std::span<const int32_t> context) {
  if (context.size() <= seq_.cache().capacity()) push(context, /*last=*/false);
}

void ModelDrafter::draft(std::span<const int32_t> context, size_t k, std::vector<int32_t>& out) {
  out.clear();
  drafted_ = 0;
  if (context.empty() || k == 0) return;
  const size_t capacity = seq_.cache().capacity();
  // Pushing the context and all drafts but the last must fit in the draft's own context.
  if (context.size() + k - 1 > capacity) {
    if (context.size() >= capacity + 1) return;
    k = capacity + 1 - context.size();
  }
  std::span<const float> logits = push(context, /*last=*/true);
  // cached_ is the context and then the drafts so far: the processors' context. The choice
  // is a step's (TokenChooser) under the target's params, on the drafter's own stream.
  while (true) {
    int32_t best = 0;
    if (sampling_) {
      if (dists_.size() <= drafted_) dists_.resize(drafted_ + 1);
      best = chooser_->choose_recording(logits, cached_, dists_[drafted_]);
    } else {
      best = chooser_->choose(logits, cached_);
    }
    if (choose_) best = choose_(context.size() + out.size(), best);
    out.push_back(best);
    drafted_ = out.size();
    if (out.size() == k) return;
    logits = model_.forward({&out.back(), 1}, seq_);
    cached_.push_back(out.back());
  }
}

size_t ModelDrafter::behind(std::span<const int32_t> context) const {
  if (context.empty()) return 0;
  const size_t keep = std::min(cached_prefix(context), context.size() - 1);
  return context.size() - 1 - keep;
}

void ModelDrafter::reset() {
  seq_.cache().clear();
  cached_.clear();
}

void require_same_vocabulary(const Tokenizer& target, const Tokenizer& draft) {
  if (target.vocab_size() != draft.vocab_size()) {
    fail("the draft model's vocabulary has {} tokens but the target's has {}: a draft needs the same tokenizer",
         draft.vocab_size(), target.vocab_size());
  }
  const auto bytes = [](const Tokenizer& tok, int32_t id) -> std::string_view {
    try {
      return tok.token_bytes(id);
    } catch (const Error&) {
      return {};  // an id no token has (a gap in the ids) reads as empty on both sides
    }
  };
  for (int32_t id = 0; id < target.vocab_size(); ++id) {
    if (bytes(target, id) != bytes(draft, id) || target.is_added_token(id) != draft.is_added_token(id)) {
      fail("the draft model's token {} differs from the target's: a draft needs the same tokenizer", id);
    }
  }
}

// ---- DraftLength ------------------------------------------------------------------------------

DraftLength DraftLength::fixed(size_t k) {
  return DraftLength(k, k, false, false);
}

DraftLength DraftLength::adaptive(size_t max, bool timed) {
  if (max == 0) fail("the adaptive draft length needs a maximum of at least 1");
  DraftLength d(0, max, true, timed);
  d.k_ = best(d.alpha_, d.row_cost_, max);
  return d;
}

size_t DraftLength::best(double a, double c, size_t max) {
  a = std::clamp(a, 0.0, 0.999);
  size_t k_best = 0;
  double value_best = 1.0;           // a plain step: one token for one step
  double tokens = 1.0, power = 1.0;  // (1 - a^(k+1)) / (1 - a) = 1 + a + .. + a^k
  for (size_t k = 1; k <= max; ++k) {
    power *= a;
    tokens += power;
    const double value = tokens / (1.0 + c * static_cast<double>(k));
    if (value > value_best) {
      value_best = value;
      k_best = k;
    }
  }
  return k_best;
}

void DraftLength::back_off() {
  wait_ = backoff_;
  backoff_ = std::min(kMaxWait, 2 * backoff_);
  k_ = 1;  // the probe after the wait
  probing_ = timed_;
}

size_t DraftLength::next(size_t behind) const {
  if (wait_ > 0) return 0;
  if (timed_ && first_pass_) return std::min<size_t>(k_, 1);
  if (probing_ && plain_spt_ > 0) {
    // The probe's predicted loss: the drafter's catch-up, and one row at the cost c.
    const double probe = follow_spt_ * static_cast<double>(behind) + row_cost_ * plain_spt_;
    if (lost_ + probe > kLossShare * (elapsed_ + probe)) return 0;
  }
  return k_;
}

void DraftLength::prefilled(size_t tokens, double seconds) {
  if (timed_ && tokens > 0 && seconds > 0) follow_spt_ = seconds / static_cast<double>(tokens);
}

void DraftLength::passed(size_t drafted, size_t accepted, double seconds, size_t behind) {
  if (!adaptive_ || drafted == 0) return;
  // Trials: each accepted draft, then the first rejected one; later drafts were never tried.
  for (size_t i = 0; i < accepted; ++i) alpha_ += kAlphaWeight * (1.0 - alpha_);
  if (accepted < drafted) alpha_ -= kAlphaWeight * alpha_;
  if (timed_ && seconds > 0 && plain_spt_ > 0) {
    elapsed_ += seconds;
    lost_ += seconds - plain_spt_ * static_cast<double>(accepted + 1);
    const double catch_up = std::min(seconds, follow_spt_ * static_cast<double>(behind));
    const double c = std::max(0.0, ((seconds - catch_up) / plain_spt_ - 1.0) / static_cast<double>(drafted));
    row_cost_ = cost_measured_ ? row_cost_ + kCostWeight * (c - row_cost_) : c;
    cost_measured_ = true;
  }
  first_pass_ = false;
  k_ = best(alpha_, row_cost_, max_);
  if (k_ == 0) {
    back_off();
    return;
  }
  backoff_ = 1;
  probing_ = false;
  if (timed_ && ++passes_ >= kRetime) wait_ = 1;  // time a plain step again
}

void DraftLength::plain_step(double seconds) {
  if (wait_ > 0) --wait_;
  passes_ = 0;
  // The fastest plain step: timing noise only ever adds, and the first steps are the slowest
  // (caches still cold), so an average would flatter speculation.
  if (timed_ && seconds > 0) {
    plain_spt_ = plain_spt_ > 0 ? std::min(plain_spt_, seconds) : seconds;
    elapsed_ += seconds;
  }
}

}  // namespace nanoinfer
