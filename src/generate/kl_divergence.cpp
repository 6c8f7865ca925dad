// kl_divergence: a model against its base, position by position (nanoinfer/perplexity.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "generate/window_scoring.h"
#include "model/ops.h"
#include "nanoinfer/error.h"
#include "nanoinfer/perplexity.h"

namespace nanoinfer {
namespace {

size_t argmax(const float* x, size_t n) {
  return static_cast<size_t>(std::max_element(x, x + n) - x);
}

// Nearest rank: the smallest value with at least a fraction q of the values at or below it.
double quantile(const std::vector<double>& sorted, double q) {
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

KlDivergenceResult kl_divergence(const Model& model, const Model& base, std::span<const int32_t> tokens, size_t ctx,
                                 const PerplexityProgress& progress, PerplexityScoring scoring) {
  if (ctx < 2) fail("kl-divergence: the context must be at least 2 tokens, got {}", ctx);
  if (ctx > model.max_context() || ctx > base.max_context()) {
    fail("kl-divergence: a context of {} exceeds a model's context ({} and {}; load them with a larger one)", ctx,
         model.max_context(), base.max_context());
  }
  if (model.vocab_size() != base.vocab_size()) {
    fail("kl-divergence: the models' vocabularies differ ({} and {} tokens)", model.vocab_size(), base.vocab_size());
  }
  if (tokens.size() < 2) fail("kl-divergence: need at least 2 tokens, got {}", tokens.size());

  const size_t V = model.vocab_size();
  KlDivergenceResult r;
  r.ctx = r.model.ctx = r.base.ctx = ctx;
  r.tokens = r.model.tokens = r.base.tokens = tokens.size();
  const std::vector<PerplexityWindow> plan = perplexity_windows(tokens.size(), ctx, scoring);
  Moments nll_model, nll_base, ratio, kld;
  std::vector<double> klds;
  size_t same_top = 0;

  const Model* models[] = {&model, &base};
  const auto score = [&](std::span<const float* const> rows, const ScoredPosition& at) {
    const float* q = rows[0];
    const float* b = rows[1];
    const LogSoftmax sq = log_softmax(q, V), sb = log_softmax(b, V);
    const double nq = -sq.at(q[at.next]), nb = -sb.at(b[at.next]);
    double kl = 0;
    for (size_t v = 0; v < V; ++v) {
      const double lpb = sb.at(b[v]);
      kl += std::exp(lpb) * (lpb - sq.at(q[v]));
    }
    kl = std::max(kl, 0.0);  // rounding can leave a tiny negative for identical rows
    r.model.nll_sum += nq;
    r.base.nll_sum += nb;
    nll_model.add(nq);
    nll_base.add(nb);
    ratio.add(nq - nb);
    kld.add(kl);
    klds.push_back(kl);
    same_top += argmax(q, V) == argmax(b, V);
    ++r.scored;
  };
  const auto window_done = [&] {
    ++r.windows;
    r.model.windows = r.base.windows = r.windows;
    r.model.scored = r.base.scored = r.scored;
    finish_perplexity(r.model, nll_model);
    if (progress) progress(r.windows, plan.size(), r.model);
  };
  score_windows(models, tokens, ctx, plan, score, window_done);
  finish_perplexity(r.base, nll_base);
  r.ln_ppl_ratio = ratio.mean;
  r.ln_ppl_ratio_stderr = ratio.sem();
  r.delta_ppl_pct = 100.0 * std::expm1(ratio.mean);
  r.delta_ppl_pct_stderr = 100.0 * std::exp(ratio.mean) * ratio.sem();
  r.kld_mean = kld.mean;
  r.kld_stderr = kld.sem();
  std::sort(klds.begin(), klds.end());
  r.kld_median = quantile(klds, 0.5);
  r.kld_p90 = quantile(klds, 0.9);
  r.kld_p99 = quantile(klds, 0.99);
  r.kld_max = klds.back();
  const double n = static_cast<double>(r.scored);
  r.top1_agreement = static_cast<double>(same_top) / n;
  r.top1_stderr = std::sqrt(r.top1_agreement * (1.0 - r.top1_agreement) / n);
  return r;
}

}  // namespace nanoinfer
