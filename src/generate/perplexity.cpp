#include "nanoinfer/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "nanoinfer/error.h"
#include "model/ops.h"

namespace nanoinfer {
namespace {

// A window is pushed through the model in pieces of this many tokens, so the logits held at
// once stay [128][vocab] (78 MB for Qwen2.5's 151,936 tokens) whatever ctx is. The logits do
// not depend on how a sequence is split (tested), so neither does the result.
constexpr size_t kPiece = 128;

}  // namespace

std::vector<PerplexityWindow> perplexity_windows(size_t n_tokens, size_t ctx, PerplexityScoring scoring) {
  std::vector<PerplexityWindow> windows;
  if (scoring == PerplexityScoring::SecondHalf) {
    if (ctx < 3) fail("perplexity: second-half scoring needs a context of at least 3 tokens, got {}", ctx);
    if (n_tokens < ctx) {
      fail("perplexity: second-half scoring needs at least one whole window of {} tokens, got {}", ctx, n_tokens);
    }
    for (size_t begin = 0; begin + ctx <= n_tokens; begin += ctx) windows.push_back({begin, ctx, ctx / 2});
    return windows;
  }
  for (size_t begin = 0; begin + 1 < n_tokens; begin += ctx) windows.push_back({begin, std::min(ctx, n_tokens - begin), 0});
  return windows;
}

PerplexityResult perplexity(const Model& model, std::span<const int32_t> tokens, size_t ctx,
                            const PerplexityProgress& progress, PerplexityScoring scoring) {
  if (ctx < 2) fail("perplexity: the context must be at least 2 tokens, got {}", ctx);
  if (ctx > model.max_context()) {
    fail("perplexity: a context of {} exceeds the model's {} (load it with a larger context)", ctx,
         model.max_context());
  }
  if (tokens.size() < 2) fail("perplexity: need at least 2 tokens, got {}", tokens.size());

  const size_t V = model.vocab_size();
  PerplexityResult r;
  r.ctx = ctx;
  r.tokens = tokens.size();
  const std::vector<PerplexityWindow> plan = perplexity_windows(tokens.size(), ctx, scoring);
  double mean = 0, m2 = 0;  // Welford's running mean and squared deviations of the NLL

  Sequence cache = model.new_sequence(ctx);
  for (const PerplexityWindow& w : plan) {
    const size_t begin = w.begin;
    const std::span<const int32_t> window = tokens.subspan(w.begin, w.size);
    cache.cache().clear();
    for (size_t p = 0; p < window.size(); p += kPiece) {
      const size_t count = std::min(kPiece, window.size() - p);
      const std::span<const float> logits = model.forward(window.subspan(p, count), cache, true);
      for (size_t i = 0; i < count; ++i) {
        const size_t t = p + i;  // logits of position t score token t + 1
        if (t + 1 >= window.size()) break;
        if (t < w.first_scored) continue;
        const double nll = -log_softmax_at(logits.data() + i * V, V, static_cast<size_t>(window[t + 1]));
        // Finite logits always give a finite NLL; anything else is a broken model, and a
        // "perplexity nan" printed with exit code 0 would pass for a result.
        if (!std::isfinite(nll)) {
          fail("perplexity: the model produced non-finite logits at token {} (window {}, position {})",
               begin + t, r.windows + 1, t);
        }
        r.nll_sum += nll;
        ++r.scored;
        const double delta = nll - mean;
        mean += delta / static_cast<double>(r.scored);
        m2 += delta * (nll - mean);
      }
    }
    ++r.windows;
    r.mean_nll = r.nll_sum / static_cast<double>(r.scored);
    r.perplexity = std::exp(r.mean_nll);
    const double sem = r.scored > 1 ? std::sqrt(m2 / static_cast<double>(r.scored - 1) / static_cast<double>(r.scored)) : 0.0;
    r.perplexity_stderr = r.perplexity * sem;
    // Finite logits can still score each token so badly that exp(mean NLL) overflows (a mean
    // above 709 nats, where a uniform guess over any vocabulary scores ~12): "inf" is no
    // measurement, and the logits' magnitudes are far beyond any trained model's.
    if (!std::isfinite(r.perplexity) || !std::isfinite(r.perplexity_stderr)) {
      fail("perplexity: overflows in window {} (mean negative log-likelihood {:.4g} nats per token): the model's "
           "logits are far beyond any trained model's, its weights corrupt",
           r.windows, r.mean_nll);
    }
    if (progress) progress(r.windows, plan.size(), r);
  }
  return r;
}

}  // namespace nanoinfer
