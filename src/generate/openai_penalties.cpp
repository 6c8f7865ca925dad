// OpenAI's frequency/presence penalties and logit bias as logit processors
// (nanoinfer/logit_processor.h).
#include "nanoinfer/error.h"
#include "nanoinfer/logit_processor.h"

namespace nanoinfer {

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
