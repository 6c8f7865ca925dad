#include "model/tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "nanoinfer/error.h"
#include "nanoinfer/splitmix64.h"

namespace nanoinfer {
namespace {

// One product of the model to time: its shape, and a call that runs it on the matrix of layer
// `layer` (cycling through the layers, so the weights stream from memory as in a step).
struct Product {
  std::string name;
  ProductShape shape;
  bool gate_up = false;
  size_t out_floats = 0;  // per token, of the output buffer
  size_t layers = 1;
  std::function<void(const Compute&, size_t layer, const float* x, float* y, float* scratch, size_t n)> run;
};

std::vector<Product> products_of(const ModelWeights& w) {
  std::vector<Product> out;
  const size_t L = w.layers.size();
  if (L > 0) {
    const LayerWeights& l0 = w.layers[0];
    const Weight& q = l0.qkv.parts.front();
    out.push_back({"qkv",
                   {q.type, l0.qkv.rows, q.cols, false},
                   false,
                   l0.qkv.rows,
                   L,
                   [&w](const Compute& c, size_t l, const float* x, float* y, float*, size_t n) {
                     linear(c, w.layers[l].qkv, x, y, n);
                   }});
    out.push_back({"o",
                   {l0.o.type, l0.o.rows, l0.o.cols, false},
                   false,
                   l0.o.rows,
                   L,
                   [&w](const Compute& c, size_t l, const float* x, float* y, float*, size_t n) {
                     const LayerWeights& lw = w.layers[l];
                     linear(c, lw.o, nullptr, x, y, n);
                   }});
    const GateUpWeight& g = l0.gate_up;
    const bool fused = g.fused.data != nullptr;
    const Weight& gm = fused ? g.fused : g.gate;
    out.push_back({"gate_up",
                   {gm.type, gm.rows, gm.cols, false},
                   fused,
                   2 * g.inter,
                   L,
                   [&w](const Compute& c, size_t l, const float* x, float* y, float* scratch, size_t n) {
                     linear_swiglu(c, w.layers[l].gate_up, x, scratch, y, n);
                   }});
    out.push_back({"down",
                   {l0.down.type, l0.down.rows, l0.down.cols, false},
                   false,
                   l0.down.rows,
                   L,
                   [&w](const Compute& c, size_t l, const float* x, float* y, float*, size_t n) {
                     linear(c, w.layers[l].down, nullptr, x, y, n);
                   }});
  }
  out.push_back({"logits",
                 {w.lm_head.type, w.lm_head.rows, w.lm_head.cols, false},
                 false,
                 w.lm_head.rows,
                 1,
                 [&w](const Compute& c, size_t, const float* x, float* y, float*, size_t n) {
                   linear(c, w.lm_head, nullptr, x, y, n);
                 }});
  return out;
}

double median_of_sorted(const std::vector<double>& s) {
  const size_t m = s.size();
  return m % 2 == 1 ? s[m / 2] : (s[m / 2 - 1] + s[m / 2]) / 2;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::vector<SplitRule> split_candidates(int threads, bool default_splits, bool gate_up) {
  using S = SplitRule::Split;
  std::vector<SplitRule> out;
  if (threads <= 1) return out;
  out.push_back({});
  out.push_back({S::Never, 0, 0});
  for (uint32_t cpt : {1u, 2u, 4u, 8u, 16u, 32u}) {
    if (cpt == 4 && default_splits) continue;  // what the default does
    out.push_back({S::Always, cpt, 0});
  }
  if (gate_up) {
    for (uint32_t kib : {16u, 256u}) {
      out.push_back({S::Auto, 0, kib});
      out.push_back({S::Always, 2, kib});
      out.push_back({S::Always, 8, kib});
    }
  }
  return out;
}

std::vector<TunedShape> tune_products(const Compute& c, const ModelWeights& w, const TuneOptions& options) {
  if (options.rounds < 1) fail("tune: rounds must be >= 1, got {}", options.rounds);
  if (!(options.min_gain >= 0 && options.min_gain < 1))
    fail("tune: min_gain must be in [0, 1), got {}", options.min_gain);
  if (!(options.max_p > 0 && options.max_p <= 1)) fail("tune: max_p must be in (0, 1], got {}", options.max_p);
  const int threads = c.pool->size();
  std::vector<TunedShape> results;
  std::vector<Product> products = products_of(w);
  std::vector<float> x, y, scratch;
  SplitMix64 rng{0x7475e3};
  for (const bool prefill : {false, true}) {
    if (prefill ? options.prefill_tokens == 0 : !options.decode) continue;
    const size_t n = prefill ? options.prefill_tokens : 1;
    for (const Product& p : products) {
      // The prefill pass computes the logits of its last position only: a decode shape.
      if (prefill && p.name == "logits") continue;
      ProductShape shape = p.shape;
      shape.prefill = prefill;
      const bool seen =
          std::any_of(results.begin(), results.end(), [&](const TunedShape& t) { return t.shape == shape; });
      if (seen) continue;
      const bool default_splits = shape.rows * shape.cols * n >= kMinParallelLinearWork;
      const std::vector<SplitRule> rules = split_candidates(threads, default_splits, p.gate_up);
      if (rules.empty()) continue;
      // Inputs: uniform in [-1, 1), fixed; outputs and scratch sized for the product.
      x.resize(n * shape.cols);
      for (float& v : x) v = static_cast<float>(static_cast<double>(rng.next() >> 11) * 0x1p-52 - 1.0);
      y.resize(n * p.out_floats);
      scratch.resize(p.name == "gate_up" ? n * p.out_floats : 0);
      const int default_calls =
          static_cast<int>(prefill ? std::clamp<size_t>(p.layers, 2, 8) : std::max<size_t>(4 * p.layers, 8));
      const int calls = (prefill ? options.prefill_calls : options.decode_calls) > 0
                            ? (prefill ? options.prefill_calls : options.decode_calls)
                            : default_calls;
      TunedShape t;
      t.name = p.name;
      t.shape = shape;
      std::vector<std::vector<double>> samples(rules.size());
      size_t layer = 0;
      const auto time_rule = [&](const SplitRule& rule) {
        Tuning one;
        one.set(shape, rule);
        const Compute cc{c.pool, c.k, &one};
        const double t0 = now_seconds();
        for (int i = 0; i < calls; ++i) {
          p.run(cc, layer, x.data(), y.data(), scratch.data(), n);
          layer = (layer + 1) % p.layers;
        }
        return (now_seconds() - t0) / calls * 1e6;
      };
      for (const SplitRule& rule : rules) time_rule(rule);  // warm-up: every candidate once
      for (int round = 0; round < options.rounds; ++round) {
        // Alternate the order from round to round, so no candidate always follows the same one.
        for (size_t j = 0; j < rules.size(); ++j) {
          const size_t i = round % 2 == 0 ? j : rules.size() - 1 - j;
          samples[i].push_back(time_rule(rules[i]));
        }
      }
      for (size_t i = 0; i < rules.size(); ++i) {
        TuneCandidate cand;
        cand.rule = rules[i];
        std::vector<double> gains;
        for (size_t r = 0; r < samples[i].size(); ++r) {
          gains.push_back(samples[0][r] / samples[i][r]);
          cand.wins += samples[i][r] < samples[0][r] ? 1 : 0;
        }
        cand.rounds = static_cast<int>(gains.size());
        cand.p_value = i == 0 ? 1.0 : sign_test_p(cand.wins, cand.rounds);  // the default: no test
        std::sort(gains.begin(), gains.end());
        std::vector<double> s = samples[i];
        std::sort(s.begin(), s.end());
        cand.median_us = median_of_sorted(s);
        cand.min_us = s.front();
        cand.max_us = s.back();
        cand.gain_median = median_of_sorted(gains);
        cand.gain_min = gains.front();
        cand.gain_max = gains.back();
        t.candidates.push_back(cand);
        if (i > 0 && cand.gain_median > t.candidates[t.best].gain_median) t.best = i;
      }
      const TuneCandidate& d = t.candidates[0];
      const TuneCandidate& b = t.candidates[t.best];
      t.kept = t.best != 0 && b.p_value <= options.max_p && b.gain_median >= 1 + options.min_gain;
      if (options.progress != nullptr) {
        options.progress(
            options.progress_context,
            fmt::format("{} {} {}x{} {}: best {} ({:.1f} us vs {:.1f}), {}", p.name, weight_type_name(shape.type),
                        shape.rows, shape.cols, prefill ? fmt::format("prefill {}", n) : "decode", describe(b.rule),
                        b.median_us, d.median_us, t.kept ? "kept" : "not kept"));
      }
      results.push_back(std::move(t));
    }
  }
  return results;
}

}  // namespace nanoinfer
