#include "serve/step_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "nanoinfer/error.h"

namespace nanoinfer::serve {

namespace {
// Running averages: decode-only steps change slowly (weights streamed, a few rows), so a
// longer memory; a prompt row's cost moves with its position, so a shorter one.
constexpr double kDecodeWeight = 0.25;
constexpr double kRowWeight = 0.5;
}  // namespace

StepBudget::StepBudget(size_t step_tokens, double latency_ratio, size_t max_rows)
    : step_tokens_(step_tokens), ratio_(latency_ratio), max_rows_(max_rows) {
  if (step_tokens_ == 0) fail("--step-tokens must be >= 1");
  if (max_rows_ == 0) fail("--prefill-chunk must be >= 1");
  if (!(ratio_ == 0 || (ratio_ >= 1 && ratio_ <= 1000)))
    fail("--step-latency must be 0 (off) or in 1..1000, got {}", ratio_);
}

size_t StepBudget::fixed_rows(size_t decode_rows) const {
  return step_tokens_ > decode_rows ? step_tokens_ - decode_rows : 1;
}

size_t StepBudget::prompt_rows(size_t decode_rows) const {
  if (decode_rows == 0) return SIZE_MAX;
  if (!adaptive() || rate_ == 0) return std::min(fixed_rows(decode_rows), max_rows_);
  // Whole rows, with the fraction carried: a rate of 1.5 gives 1, 2, 1, 2, ...
  return static_cast<size_t>(std::clamp(std::floor(rate_ + credit_), 1.0, static_cast<double>(max_rows_)));
}

void StepBudget::observe(size_t decode_rows, size_t prompt_rows, double seconds) {
  if (decode_rows == 0 || !(seconds >= 0) || ratio_ == 0) return;
  if (prompt_rows == 0) {
    decode_s_ = decode_s_ == 0 ? seconds : decode_s_ + kDecodeWeight * (seconds - decode_s_);
    return;
  }
  if (decode_s_ == 0) return;  // nothing to compare the mixed step with yet
  if (rate_ != 0) credit_ = std::clamp(credit_ + rate_ - static_cast<double>(prompt_rows), -1.0, 1.0);
  const double added = std::max(seconds - decode_s_, 0.0) / static_cast<double>(prompt_rows);
  row_s_ = row_s_ == 0 ? added : row_s_ + kRowWeight * (added - row_s_);
  const double before = rate_ != 0 ? rate_ : static_cast<double>(std::min(fixed_rows(decode_rows), max_rows_));
  const double allowed = (ratio_ - 1) * decode_s_;  // what the prompt rows may add to a step
  const double want = row_s_ > 0 ? allowed / row_s_ : static_cast<double>(max_rows_);
  rate_ = std::clamp(std::clamp(want, before / 2, 2 * before), 1.0, static_cast<double>(max_rows_));
}

}  // namespace nanoinfer::serve
