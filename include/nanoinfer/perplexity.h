// Perplexity of a token sequence under a model: the tokens are cut into consecutive,
// non-overlapping windows of ctx tokens, each evaluated from an empty cache; within a window,
// token t+1 is scored by log_softmax(logits[t]) at the positions PerplexityScoring picks (by
// default all but the first; llama-perplexity scores the second half of whole windows). The log-probability
// is computed directly as a max-subtracted log-sum-exp, never as the log of a softmax, and the
// negative log-likelihood is summed in double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "nanoinfer/model.h"

namespace nanoinfer {

// Which positions of each window are scored.
//  - AllPositions (our default): every window, the last one possibly shorter, scores all of its
//    positions but the first.
//  - SecondHalf (llama-perplexity's): only whole windows, each scoring the tokens after its
//    first ctx/2 (positions ctx/2 .. ctx-2 predict tokens ctx/2+1 .. ctx-1), so every scored
//    token has at least ctx/2 tokens of context. Numbers comparable with llama-perplexity's
//    need this scoring and the same -c.
enum class PerplexityScoring { AllPositions, SecondHalf };

// One window of the protocol: tokens [begin, begin + size); logits of positions t in
// [first_scored, size - 1) score token t + 1.
struct PerplexityWindow {
  size_t begin = 0, size = 0, first_scored = 0;
};
// Throws Error when the scoring has no window to score (SecondHalf with fewer than ctx tokens).
std::vector<PerplexityWindow> perplexity_windows(size_t n_tokens, size_t ctx, PerplexityScoring scoring);

struct PerplexityResult {
  size_t ctx = 0;
  size_t tokens = 0;   // in the input
  size_t windows = 0;  // that scored at least one token
  size_t scored = 0;   // tokens scored
  double nll_sum = 0;  // sum of -log p over the scored tokens
  double mean_nll = 0;
  double perplexity = 0;  // exp(mean_nll)
  // Standard error of the mean NLL (sample standard deviation / sqrt(scored)), carried to the
  // perplexity by the delta method: perplexity * sem. 0 when fewer than two tokens are scored.
  double perplexity_stderr = 0;
};

// Called after each window with the running totals.
using PerplexityProgress =
    std::function<void(size_t windows_done, size_t windows_total, const PerplexityResult& so_far)>;

// Throws Error when ctx < 2, ctx exceeds the model's context, fewer than two tokens are given,
// or an id is out of the model's range.
PerplexityResult perplexity(const Model& model, std::span<const int32_t> tokens, size_t ctx,
                            const PerplexityProgress& progress = {},
                            PerplexityScoring scoring = PerplexityScoring::AllPositions);

// The quality of a quantized (or otherwise changed) model against its base, in one run:
// every window is pushed through both models, and at every scored position the two output
// distributions are compared (the fields of llama-perplexity's --kl-divergence). KL is
// KL(base || model) = sum_v p_base(v) (log p_base(v) - log p_model(v)), in nats, from log-
// softmaxes computed in double. Error bars are standard errors of the mean over positions
// (per-position values are not independent within a window, so they are a lower bound).
struct KlDivergenceResult {
  size_t ctx = 0;
  size_t tokens = 0;  // in the input
  size_t windows = 0;
  size_t scored = 0;             // positions compared (and tokens scored)
  PerplexityResult model, base;  // the perplexity of each
  // ln(PPL(model) / PPL(base)) = mean over positions of nll_model - nll_base; the paired
  // difference has a much smaller error than either perplexity.
  double ln_ppl_ratio = 0, ln_ppl_ratio_stderr = 0;
  double delta_ppl_pct = 0, delta_ppl_pct_stderr = 0;  // 100 (PPL(model) / PPL(base) - 1)
  double kld_mean = 0, kld_stderr = 0;
  double kld_median = 0, kld_p90 = 0, kld_p99 = 0, kld_max = 0;
  double top1_agreement = 0, top1_stderr = 0;  // fraction of positions with the same argmax
};

// Throws Error as perplexity() does, and when the models' vocabularies differ or ctx exceeds
// either model's context.
KlDivergenceResult kl_divergence(const Model& model, const Model& base, std::span<const int32_t> tokens, size_t ctx,
                                 const PerplexityProgress& progress = {},
                                 PerplexityScoring scoring = PerplexityScoring::AllPositions);

}  // namespace nanoinfer
