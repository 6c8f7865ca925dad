// The sampling chain of sampler.h. Scores are doubles so that the kept set matches the
// float64 reference exactly; the vocabulary-sized work per token is one copy, one selection
// (top-k) or one sort (top-p without top-k), and a few passes over what is left.
#include "nanoinfer/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "nanoinfer/error.h"
#include "nanoinfer/splitmix64.h"

namespace nanoinfer {

void validate(const SamplerParams& p) {
  // Written as negations so that NaN fails every check.
  if (!(p.temperature >= 0.0) || !std::isfinite(p.temperature)) {
    fail("temperature must be >= 0, got {}", p.temperature);
  }
  if (p.top_k < 0) fail("top-k must be >= 0 (0 = off), got {}", p.top_k);
  if (!(p.top_p > 0.0 && p.top_p <= 1.0)) fail("top-p must be in (0, 1], got {}", p.top_p);
  if (!(p.min_p >= 0.0 && p.min_p <= 1.0)) fail("min-p must be in [0, 1], got {}", p.min_p);
  if (!(p.repetition_penalty > 0.0) || !std::isfinite(p.repetition_penalty)) {
    fail("repetition penalty must be > 0, got {}", p.repetition_penalty);
  }
}

// ---- Rng --------------------------------------------------------------------------------------

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

Rng::Rng(uint64_t seed) {
  SplitMix64 mix{seed};
  for (uint64_t& s : s_) s = mix.next();
}

Rng Rng::from_state(uint64_t s0, uint64_t s1, uint64_t s2, uint64_t s3) {
  Rng rng(0);
  rng.s_[0] = s0;
  rng.s_[1] = s1;
  rng.s_[2] = s2;
  rng.s_[3] = s3;
  return rng;
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::next_double() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

// ---- Sampler ----------------------------------------------------------------------------------

// The params, validated before any member is built from them.
static const SamplerParams& validated(const SamplerParams& params) {
  validate(params);
  return params;
}

Sampler::Sampler(int64_t vocab_size, const SamplerParams& params)
    : params_(validated(params)),
      vocab_size_(vocab_size),
      rng_(params.seed),
      penalty_(vocab_size, params.repetition_penalty) {
  if (vocab_size <= 0) fail("sampler: vocabulary size must be > 0, got {}", vocab_size);
  const auto n = static_cast<size_t>(vocab_size);
  scores_.resize(n);
  order_.resize(n);
  kept_ids_.resize(n);
  kept_probs_.resize(n);
  if (params.top_k > 0 && params.top_k < vocab_size) heap_.resize(static_cast<size_t>(params.top_k));
}

std::span<double> Sampler::load(std::span<const float> logits) {
  if (static_cast<int64_t>(logits.size()) != vocab_size_) {
    fail("sampler: expected {} logits, got {}", vocab_size_, logits.size());
  }
  // A NaN or infinite logit means the model's weights or activations are broken; going on
  // would empty the candidate set (NaN compares false with everything) or sample garbage.
  bool finite = true;
  for (size_t i = 0; i < logits.size(); ++i) {
    scores_[i] = logits[i];
    finite &= std::isfinite(logits[i]);
  }
  if (!finite) {
    const size_t bad = static_cast<size_t>(
        std::find_if(logits.begin(), logits.end(), [](float x) { return !std::isfinite(x); }) - logits.begin());
    fail(
        "the model produced a non-finite logit ({} for token {}): its weights or activations are "
        "NaN or overflowed",
        logits[bad], bad);
  }
  return scores_;
}

// probs[j] = softmax(scores[ids[j]]) over the given ids; returns the largest probability.
static double softmax_into(const std::vector<double>& scores, std::span<const int32_t> ids, std::span<double> probs) {
  double max_score = -INFINITY;
  for (int32_t id : ids) max_score = std::max(max_score, scores[static_cast<size_t>(id)]);
  double sum = 0.0;
  for (size_t j = 0; j < ids.size(); ++j) {
    probs[j] = std::exp(scores[static_cast<size_t>(ids[j])] - max_score);
    sum += probs[j];
  }
  double top = 0.0;
  for (double& p : probs) {
    p /= sum;
    top = std::max(top, p);
  }
  return top;
}

Candidates Sampler::filter(std::span<const float> logits, std::span<const int32_t> history) {
  penalty_.process(load(logits), history);
  return select();
}

Candidates Sampler::select() {
  if (params_.temperature > 0.0 && params_.temperature != 1.0) {
    bool scaled_finite = true;
    for (double& s : scores_) {
      if (s == -INFINITY) continue;  // forbidden by a logit processor (a grammar mask)
      s /= params_.temperature;
      scaled_finite &= std::isfinite(s);
    }
    if (!scaled_finite)
      fail("temperature {} is so small that logits / temperature overflow; use --temp 0 for greedy",
           params_.temperature);
  }

  if (params_.temperature == 0.0) {
    // Greedy: the first maximum, so the lowest id wins a tie.
    size_t best = 0;
    for (size_t i = 1; i < scores_.size(); ++i) {
      if (scores_[i] > scores_[best]) best = i;
    }
    kept_ids_[0] = static_cast<int32_t>(best);
    kept_probs_[0] = 1.0;
    return {std::span<const int32_t>(kept_ids_.data(), 1), std::span<const double>(kept_probs_.data(), 1)};
  }

  const std::vector<double>& s = scores_;
  // The ascending order of a stable sort by score: lower score first, then lower id.
  auto before_asc = [&s](int32_t a, int32_t b) {
    const double sa = s[static_cast<size_t>(a)], sb = s[static_cast<size_t>(b)];
    return sa < sb || (sa == sb && a < b);
  };

  size_t n = static_cast<size_t>(vocab_size_);
  int32_t* order = order_.data();
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
  bool reordered = false;  // order[0..n) no longer ascending by id

  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    // The k-th largest score from a size-k min-heap: one pass with, for most tokens, a single
    // comparison against the heap's minimum. Keeping every score >= it keeps the ties.
    const auto k = static_cast<size_t>(params_.top_k);
    double* heap = heap_.data();
    const std::greater<double> min_heap;
    for (size_t i = 0; i < k; ++i) heap[i] = s[i];
    std::make_heap(heap, heap + k, min_heap);
    for (size_t i = k; i < n; ++i) {
      if (s[i] > heap[0]) {
        std::pop_heap(heap, heap + k, min_heap);
        heap[k - 1] = s[i];
        std::push_heap(heap, heap + k, min_heap);
      }
    }
    const double kth = heap[0];
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (s[i] >= kth) order[kept++] = static_cast<int32_t>(i);
    }
    n = kept;  // still in ascending id order
  }

  // Tokens a logit processor forbade (-inf: a grammar mask) are never candidates, so no
  // rounding in draw() can pick one.
  {
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (s[static_cast<size_t>(order[i])] != -INFINITY) order[kept++] = order[i];
    }
    n = kept;
  }

  size_t first = 0;  // the candidates are order[first..n)
  const bool top_p = params_.top_p < 1.0;
  const bool min_p = params_.min_p > 0.0;
  if (top_p || min_p) {
    std::sort(order, order + n, before_asc);
    reordered = true;
  }
  if (top_p) {
    softmax_into(s, {order, n}, {kept_probs_.data(), n});
    const double cut = 1.0 - params_.top_p;
    double cumulative = 0.0;
    // Remove the ascending prefix whose cumulative probability stays <= 1 - p, keeping at
    // least the last (most probable) candidate.
    while (first + 1 < n) {
      cumulative += kept_probs_[first];
      if (!(cumulative <= cut)) break;
      ++first;
    }
  }
  if (min_p) {
    const double top = softmax_into(s, {order + first, n - first}, {kept_probs_.data(), n - first});
    const double threshold = params_.min_p * top;
    // Compact the survivors to the end of the range; the most probable one always survives
    // because min_p <= 1.
    size_t j = n;
    for (size_t i = n; i-- > first;) {
      if (!(kept_probs_[i - first] < threshold)) order[--j] = order[i];
    }
    first = j;
  }

  const size_t count = n - first;
  // Cannot happen with finite scores (each step keeps its most probable token); checked
  // because draw() from an empty set would read out of bounds.
  if (count == 0) fail("sampler: no token survived filtering");
  int32_t* ids = kept_ids_.data();
  std::copy(order + first, order + n, ids);
  // Ascending ids: already so when nothing was reordered, cheap for the few that survive.
  if (reordered) std::sort(ids, ids + count);
  softmax_into(s, {ids, count}, {kept_probs_.data(), count});
  return {{ids, count}, {kept_probs_.data(), count}};
}

int32_t Sampler::draw(const Candidates& c, double u) {
  if (c.ids.empty() || c.ids.size() != c.probs.size())
    fail("sampler: cannot draw from {} candidates with {} probabilities", c.ids.size(), c.probs.size());
  double total = 0.0;
  for (double p : c.probs) total += p;
  if (!(total > 0.0) || !std::isfinite(total))
    fail("sampler: candidate probabilities sum to {}, not a positive number", total);
  const double target = u * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    cumulative += c.probs[i];
    if (cumulative > target) return c.ids[i];
  }
  // Rounding can leave the last partial sum a hair below u * total.
  return c.ids.back();
}

int32_t Sampler::choose(DraftDistribution* drawn_from) {
  const Candidates c = select();
  if (params_.temperature == 0.0) return c.ids[0];
  if (drawn_from != nullptr) drawn_from->assign(c);
  return draw(c, rng_.next_double());
}

void DraftDistribution::assign(const Candidates& c) {
  ids.assign(c.ids.begin(), c.ids.end());
  probs.assign(c.probs.begin(), c.probs.end());
}

double DraftDistribution::prob_of(int32_t id) const {
  const auto it = std::lower_bound(ids.begin(), ids.end(), id);
  return it != ids.end() && *it == id ? probs[static_cast<size_t>(it - ids.begin())] : 0.0;
}

int32_t Sampler::choose_draft(int32_t draft, const DraftDistribution& q) {
  if (params_.temperature == 0.0) return choose();
  const Candidates p = select();
  const double q_draft = q.prob_of(draft);
  if (!(q_draft > 0.0)) fail("internal error: draft token {} is not in the distribution it was drawn from", draft);
  const auto at = std::lower_bound(p.ids.begin(), p.ids.end(), draft);
  const double p_draft = at != p.ids.end() && *at == draft ? p.probs[static_cast<size_t>(at - p.ids.begin())] : 0.0;
  // Accept with probability min(1, p/q): u < p/q, written without the division.
  if (rng_.next_double() * q_draft < p_draft) return draft;
  // The residual max(0, p - q) over p's candidates (q's ids and p's are both ascending), in
  // place of p, keeping only the positive entries so that no rounding can draw a zero.
  const size_t n = p.ids.size();
  int32_t* ids = kept_ids_.data();
  double* probs = kept_probs_.data();
  size_t kept = 0, j = 0;
  for (size_t i = 0; i < n; ++i) {
    while (j < q.ids.size() && q.ids[j] < ids[i]) ++j;
    const double qi = j < q.ids.size() && q.ids[j] == ids[i] ? q.probs[j] : 0.0;
    const double r = probs[i] - qi;
    if (r > 0.0) {
      ids[kept] = ids[i];
      probs[kept++] = r;
    }
  }
  // Nothing left: p <= q everywhere, so p == q up to rounding (both sum to 1) and the
  // rejection itself was rounding: the draft stands, as it would in exact arithmetic.
  if (kept == 0) return draft;
  return draw({{ids, kept}, {probs, kept}}, rng_.next_double());
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  penalty_.process(load(logits), history);
  return choose();
}

}  // namespace nanoinfer
