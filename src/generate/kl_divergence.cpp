// kl_divergence: a model against its base, position by position (nanoinfer/perplexity.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "nanoinfer/error.h"
#include "nanoinfer/perplexity.h"

namespace nanoinfer {
namespace {

// Pieces pushed at once, as in perplexity(): each model holds [128][vocab] logits.
constexpr size_t kKlPiece = 128;

// max and log(sum exp(x - max)) of one row, with the arithmetic of log_softmax_at (a float
// max, the sum in double), so the NLLs here equal perplexity()'s bit for bit.
struct LogSumExp {
  float max;
  double log_sum;
  double log_prob(const float* x, size_t i) const { return static_cast<double>(x[i]) - max - log_sum; }
};

LogSumExp log_sum_exp(const float* x, size_t n) {
  float max = x[0];
  for (size_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max);
  return {max, std::log(sum)};
}

size_t argmax(const float* x, size_t n) { return static_cast<size_t>(std::max_element(x, x + n) - x); }

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
  double sem() const { return n > 1 ? std::sqrt(m2 / static_cast<double>(n - 1) / static_cast<double>(n)) : 0.0; }
};

void finish(PerplexityResult& r, const Moments& nll) {
  r.mean_nll = r.nll_sum / static_cast<double>(r.scored);
  r.perplexity = std::exp(r.mean_nll);
  r.perplexity_stderr = r.perplexity * nll.sem();
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

  Sequence seq = model.new_sequence(ctx), seq_base = base.new_sequence(ctx);
  for (const PerplexityWindow& w : plan) {
    const std::span<const int32_t> window = tokens.subspan(w.begin, w.size);
    seq.cache().clear();
    seq_base.cache().clear();
    for (size_t p = 0; p < window.size(); p += kKlPiece) {
      const size_t count = std::min(kKlPiece, window.size() - p);
      const std::span<const float> lq = model.forward(window.subspan(p, count), seq, true);
      const std::span<const float> lb = base.forward(window.subspan(p, count), seq_base, true);
      for (size_t i = 0; i < count; ++i) {
        const size_t t = p + i;  // logits of position t score token t + 1
        if (t + 1 >= window.size()) break;
        if (t < w.first_scored) continue;
        const float* q = lq.data() + i * V;
        const float* b = lb.data() + i * V;
        const LogSumExp sq = log_sum_exp(q, V), sb = log_sum_exp(b, V);
        const auto next = static_cast<size_t>(window[t + 1]);
        const double nq = -sq.log_prob(q, next), nb = -sb.log_prob(b, next);
        double kl = 0;
        for (size_t v = 0; v < V; ++v) {
          const double lpb = sb.log_prob(b, v);
          kl += std::exp(lpb) * (lpb - sq.log_prob(q, v));
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
      }
    }
    ++r.windows;
    r.model.windows = r.base.windows = r.windows;
    r.model.scored = r.base.scored = r.scored;
    finish(r.model, nll_model);
    if (progress) progress(r.windows, plan.size(), r.model);
  }
  finish(r.base, nll_base);
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
