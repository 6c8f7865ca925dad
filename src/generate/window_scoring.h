// What perplexity() and kl_divergence() share (nanoinfer/perplexity.h): the walk over the
// windows of the protocol and the running statistics of what is scored.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "nanoinfer/model.h"
#include "nanoinfer/perplexity.h"

namespace nanoinfer {

// One scored position of a window: logits of position t score token t + 1.
struct ScoredPosition {
  size_t window;    // index in the plan
  size_t position;  // t, within the window
  size_t token;     // t's index in the whole input
  size_t next;      // the id of token t + 1
};
// rows[m]: the logits [vocab] models[m] gives at the position.
using ScorePosition = std::function<void(std::span<const float* const> rows, const ScoredPosition& at)>;

// Pushes every window of `plan` through each of `models` (from an empty cache of ctx
// positions, in pieces of a bounded number of tokens) and calls `score` at each of its
// scored positions in order, then `window_done`.
void score_windows(std::span<const Model* const> models, std::span<const int32_t> tokens, size_t ctx,
                   std::span<const PerplexityWindow> plan, const ScorePosition& score,
                   const std::function<void()>& window_done);

// Running mean and squared deviations (Welford).
struct Moments {
  size_t n = 0;
  double mean = 0, m2 = 0;
  void add(double v) {
    ++n;
    const double d = v - mean;
    mean += d / static_cast<double>(n);
    m2 += d * (v - mean);
  }
  // Standard error of the mean; 0 with fewer than two values.
  double sem() const { return n > 1 ? std::sqrt(m2 / static_cast<double>(n - 1) / static_cast<double>(n)) : 0.0; }
};

// The mean NLL, the perplexity and its error of `r` (nll_sum and scored set) from the
// moments of its NLLs.
inline void finish_perplexity(PerplexityResult& r, const Moments& nll) {
  r.mean_nll = r.nll_sum / static_cast<double>(r.scored);
  r.perplexity = std::exp(r.mean_nll);
  r.perplexity_stderr = r.perplexity * nll.sem();
}

}  // namespace nanoinfer
