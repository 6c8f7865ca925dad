// SpeculativeStep: the drafting before a sequence's forward pass and the verification of its
// rows after it (nanoinfer/speculative.h), for Generator and the serve scheduler alike.
#include "nanoinfer/speculative.h"

#include <algorithm>

#include "generate/seconds_since.h"

namespace nanoinfer {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

SpeculativeStep::SpeculativeStep(std::unique_ptr<Drafter> drafter, DraftLength length)
    : drafter_(std::move(drafter)), length_(length), start_(length) {}

void SpeculativeStep::restart(const SamplerParams& params, DraftLength length) {
  drafts_.clear();
  dists_ = {};
  if (!drafter_) return;
  drafter_->set_sampling(params);
  length_ = start_ = length;
}

void SpeculativeStep::reset() {
  if (drafter_) drafter_->reset();
  length_ = start_;
}

void SpeculativeStep::prefill(std::span<const int32_t> context) {
  if (!drafter_) return;
  const size_t behind = drafter_->behind(context);
  const Clock::time_point start = Clock::now();
  drafter_->prefill(context);
  const size_t caught_up = behind - drafter_->behind(context);  // and the last token
  length_.prefilled(caught_up > 0 ? caught_up + 1 : 0, seconds_since(start));
}

std::span<const int32_t> SpeculativeStep::draft(std::span<const int32_t> context, size_t room, size_t budget) {
  drafts_.clear();
  dists_ = {};
  draft_seconds_ = 0;
  pass_start_ = Clock::now();
  if (!drafter_) return {};
  pass_behind_ = drafter_->behind(context);
  const size_t k = std::min({length_.next(pass_behind_), room, budget});
  if (k > 0) {
    drafter_->draft(context, k, drafts_);
    draft_seconds_ = seconds_since(pass_start_);
  }
  if (drafts_.size() > k) drafts_.resize(k);
  if (!drafts_.empty()) dists_ = drafter_->distributions();
  return drafts_;
}

// The rows go to the step in order, as plain decoding would hand them over one step at a
// time, for as long as the step chooses the draft the next row assumed.
SpeculativeStep::Verdict SpeculativeStep::verify(GenerationStep& step, std::span<const float> logits, size_t vocab,
                                                 std::vector<int32_t>& history, KvCache& cache, const TextSink& on_text,
                                                 bool decode_pass, const ChoiceHook& on_choice) {
  const size_t rows = logits.size() / vocab;
  const size_t first = cache.length() - rows;  // the position of row 0
  Verdict v;
  v.drafted = rows - 1;
  for (size_t r = 0; r < rows; ++r) {
    const size_t before = step.generated();
    const bool verifying = r < v.drafted;
    v.end = step.next(logits.subspan(r * vocab, vocab), history, cache.capacity() - (first + r + 1), on_text,
                      verifying ? drafts_[r] : -1, verifying && r < dists_.size() ? &dists_[r] : nullptr);
    const bool kept = step.generated() > before;
    if (kept || v.end == StopReason::Eos) {
      ++v.chosen;
      if (on_choice) on_choice(before);
    }
    const bool match = kept && verifying && history.back() == drafts_[r];
    if (match) ++v.accepted;
    if (v.end || !match) break;
  }
  if (drafter_ && decode_pass) {
    const double seconds = seconds_since(pass_start_);
    v.drafted > 0 ? length_.passed(v.drafted, v.accepted, seconds, pass_behind_) : length_.plain_step(seconds);
  }
  // Roll back the positions of rejected drafts: keep the pending token and the drafts kept.
  if (v.drafted > 0) cache.truncate(first + 1 + v.accepted);
  return v;
}

}  // namespace nanoinfer
