// Perplexity of a token sequence under a model, with llama.cpp's protocol: the tokens are cut
// into consecutive, non-overlapping windows of ctx tokens (the last may be shorter; a window
// of one token scores nothing), each evaluated from an empty cache; within a window the first
// token is not scored and token t+1 is scored by log_softmax(logits[t]). The log-probability
// is computed directly as a max-subtracted log-sum-exp, never as the log of a softmax, and the
// negative log-likelihood is summed in double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "nanoinfer/model.h"

namespace nanoinfer {

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
using PerplexityProgress = std::function<void(size_t windows_done, size_t windows_total, const PerplexityResult& so_far)>;

// Throws Error when ctx < 2, ctx exceeds the model's context, fewer than two tokens are given,
// or an id is out of the model's range.
PerplexityResult perplexity(const Model& model, std::span<const int32_t> tokens, size_t ctx,
                            const PerplexityProgress& progress = {});

}  // namespace nanoinfer
