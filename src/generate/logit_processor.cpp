// The logit processors of nanoinfer/logit_processor.h: the repetition penalty, and OpenAI's
// frequency/presence penalties and logit bias.
#include "nanoinfer/logit_processor.h"

#include <algorithm>
#include <cmath>

#include "nanoinfer/error.h"

namespace nanoinfer {

RepetitionPenalty::RepetitionPenalty(int64_t vocab_size, double penalty) : penalty_(penalty) {
  if (!(penalty > 0.0) || !std::isfinite(penalty)) fail("repetition penalty must be > 0, got {}", penalty);
  if (penalty != 1.0) seen_.assign(static_cast<size_t>(std::max<int64_t>(vocab_size, 0)), 0u);
}

void RepetitionPenalty::process(std::span<double> scores, std::span<const int32_t> context) {
  if (penalty_ == 1.0) return;
  if (seen_.size() != scores.size())
    fail("repetition penalty: expected {} scores, got {}", seen_.size(), scores.size());
  if (++stamp_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0u);
    stamp_ = 1;
  }
  const auto vocab = static_cast<int64_t>(scores.size());
  for (int32_t id : context) {
    if (id < 0 || id >= vocab) {
      fail("sampler: token id {} in the context is outside the vocabulary [0, {})", id, vocab);
    }
    const auto i = static_cast<size_t>(id);
    if (seen_[i] == stamp_) continue;
    seen_[i] = stamp_;
    scores[i] = scores[i] < 0.0 ? scores[i] * penalty_ : scores[i] / penalty_;
    if (!std::isfinite(scores[i])) {
      fail("repetition penalty {} is so small that the penalised logits overflow", penalty_);
    }
  }
}

FrequencyPresencePenalty::FrequencyPresencePenalty(int64_t vocab_size, double frequency, double presence)
    : frequency_(frequency), presence_(presence), count_(static_cast<size_t>(vocab_size), 0) {
  if (vocab_size <= 0) fail("a penalty needs a vocabulary");
}

void FrequencyPresencePenalty::process(std::span<double> scores, std::span<const int32_t> /*context*/) {
  for (int32_t id : generated_) {
    if (static_cast<size_t>(id) >= scores.size()) continue;
    const uint32_t c = count_[static_cast<size_t>(id)];
    scores[static_cast<size_t>(id)] -= static_cast<double>(c) * frequency_ + presence_;
  }
}

void FrequencyPresencePenalty::accept(int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= count_.size()) return;
  if (count_[static_cast<size_t>(token)]++ == 0) generated_.push_back(token);
}

void FrequencyPresencePenalty::restart() {
  for (int32_t id : generated_) count_[static_cast<size_t>(id)] = 0;
  generated_.clear();
}

void LogitBias::process(std::span<double> scores, std::span<const int32_t> /*context*/) {
  for (const auto& [id, b] : bias_) {
    if (id >= 0 && static_cast<size_t>(id) < scores.size()) scores[static_cast<size_t>(id)] += b;
  }
}

}  // namespace nanoinfer
