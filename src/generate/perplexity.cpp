#include "nanoinfer/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "generate/window_scoring.h"
#include "model/ops.h"
#include "nanoinfer/error.h"

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
  for (size_t begin = 0; begin + 1 < n_tokens; begin += ctx)
    windows.push_back({begin, std::min(ctx, n_tokens - begin), 0});
  return windows;
}

void score_windows(std::span<const Model* const> models, std::span<const int32_t> tokens, size_t ctx,
                   std::span<const PerplexityWindow> plan, const ScorePosition& score,
                   const std::function<void()>& window_done) {
  std::vector<Sequence> seqs;
  for (const Model* m : models) seqs.push_back(m->new_sequence(ctx));
  std::vector<std::span<const float>> logits(models.size());
  std::vector<const float*> rows(models.size());
  for (size_t wi = 0; wi < plan.size(); ++wi) {
    const PerplexityWindow& w = plan[wi];
    const std::span<const int32_t> window = tokens.subspan(w.begin, w.size);
    for (Sequence& seq : seqs) seq.cache().clear();
    for (size_t p = 0; p < window.size(); p += kPiece) {
      const size_t count = std::min(kPiece, window.size() - p);
      for (size_t m = 0; m < models.size(); ++m)
        logits[m] = models[m]->forward(window.subspan(p, count), seqs[m], true);
      for (size_t i = 0; i < count; ++i) {
        const size_t t = p + i;  // logits of position t score token t + 1
        if (t + 1 >= window.size()) break;
        if (t < w.first_scored) continue;
        for (size_t m = 0; m < models.size(); ++m) rows[m] = logits[m].data() + i * models[m]->vocab_size();
        score(rows, {wi, t, w.begin + t, static_cast<size_t>(window[t + 1])});
      }
    }
    window_done();
  }
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
  Moments moments;
  const Model* models[] = {&model};
  const auto score = [&](std::span<const float* const> rows, const ScoredPosition& at) {
    const double nll = -log_softmax_at(rows[0], V, at.next);
    // Finite logits always give a finite NLL; anything else is a broken model, and a
    // "perplexity nan" printed with exit code 0 would pass for a result.
    if (!std::isfinite(nll)) {
      fail("perplexity: the model produced non-finite logits at token {} (window {}, position {})", at.token,
           at.window + 1, at.position);
    }
    r.nll_sum += nll;
    ++r.scored;
    moments.add(nll);
  };
  const auto window_done = [&] {
    ++r.windows;
    finish_perplexity(r, moments);
    // Finite logits can still score each token so badly that exp(mean NLL) overflows (a mean
    // above 709 nats, where a uniform guess over any vocabulary scores ~12): "inf" is no
    // measurement, and the logits' magnitudes are far beyond any trained model's.
    if (!std::isfinite(r.perplexity) || !std::isfinite(r.perplexity_stderr)) {
      fail(
          "perplexity: overflows in window {} (mean negative log-likelihood {:.4g} nats per token): the model's "
          "logits are far beyond any trained model's, its weights corrupt",
          r.windows, r.mean_nll);
    }
    if (progress) progress(r.windows, plan.size(), r);
  };
  score_windows(models, tokens, ctx, plan, score, window_done);
  return r;
}

}  // namespace nanoinfer
