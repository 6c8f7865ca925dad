#include "nanoinfer/viz_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

#include "model/ops.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generation_step.h"

namespace nanoinfer {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr size_t kTopCandidates = 40;

// `x` rounded to `digits` significant digits (the trace's precision: docs/VIZ.md).
double round_sig(double x, int digits) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  return std::stod(fmt::format("{:.{}g}", x, digits));
}

// The token alone, as text; "" for an id the tokenizer has no token for (padding rows).
std::string piece(const Tokenizer& tok, int32_t id) {
  try {
    return tok.decode({&id, 1});
  } catch (const Error&) {
    return "";
  }
}

Json token_json(const Tokenizer& tok, int32_t id) {
  return Json{{"id", id}, {"piece", piece(tok, id)}};
}

// The top candidates by raw logit (descending, ties by lower id) and the softmax mass at T = 1
// of everything else, over the ids the sampler may choose.
void record_candidates(std::span<const float> logits, const Tokenizer& tok, Json& step) {
  const LogSoftmax row = log_softmax(logits.data(), logits.size());
  const std::vector<TokenCandidate> top = top_candidates(logits, kTopCandidates, row.logsumexp());
  const double max = row.max, total = row.sum;
  double kept = 0.0;
  Json candidates = Json::array();
  for (const TokenCandidate& c : top) {
    kept += std::exp(static_cast<double>(c.logit) - max);
    candidates.push_back(Json{{"id", c.id}, {"piece", piece(tok, c.id)}, {"logit", round_sig(c.logit, 6)}});
  }
  step["top"] = std::move(candidates);
  step["rest_mass"] = round_sig(std::clamp((total - kept) / total, 0.0, 1.0), 6);
}

const TextSink kDiscardText = [](std::string_view) {};

Json race_json(const std::vector<TimedStep>& run) {
  Json tokens = Json::array(), steps = Json::array();
  for (const TimedStep& s : run) {
    tokens.push_back(s.token);
    steps.push_back(Json{{"positions", s.positions}, {"seconds", round_sig(s.seconds, 4)}});
  }
  return Json{{"tokens", std::move(tokens)}, {"steps", std::move(steps)}};
}

}  // namespace

std::vector<TimedStep> run_timed_steps(const Model& model, const Tokenizer& tok, std::span<const int32_t> prompt,
                                       size_t n_steps, const SamplerParams& params, bool cached) {
  std::vector<TimedStep> run;
  GenerationStep step(tok, sampled_vocab(model.vocab_size(), tok.vocab_size()), params,
                      StopRules{.max_new_tokens = static_cast<int64_t>(n_steps)});
  step.set_observer([&](const StepEvent& e) { run.back().token = e.token; });
  Sequence seq = model.new_sequence();
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  // Step 0 is the same prompt pass in both runs: push it once untimed first, so neither run's
  // step 0 pays for first touching its sequence's memory (the run timed second would otherwise
  // reuse pages the first one faulted in, and the cached path appeared to lose step 0).
  model.forward(history, seq);
  while (true) {
    const uint64_t before = seq.positions_pushed();
    const Clock::time_point start = Clock::now();
    std::span<const float> logits;
    if (!cached || run.empty()) {
      seq.cache().clear();
      logits = model.forward(history, seq);
    } else {
      logits = model.forward({&history.back(), 1}, seq);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    run.push_back({-1, seq.positions_pushed() - before, seconds});
    if (step.next(logits, history, seq.cache().capacity() - seq.length(), kDiscardText)) break;
  }
  if (!run.empty() && run.back().token < 0) run.pop_back();  // a budget of 0: nothing chosen
  return run;
}

VizTrace record_viz_trace(const Model& model, const Tokenizer& tok, const VizTraceRequest& r) {
  if (r.prompt.empty()) fail("the prompt is empty: nothing to trace");
  if (r.n_predict < 1) fail("-n must be >= 1 (the page shows at least one step), got {}", r.n_predict);
  const ModelConfig& cfg = model.config();
  const size_t heads = static_cast<size_t>(cfg.num_attention_heads);
  const size_t layers = static_cast<size_t>(cfg.num_hidden_layers);

  // ---- traced run: the attention of each step's query, from the tap ----
  // [layers][heads][keys] of the last row of the latest forward.
  std::vector<std::vector<float>> attention(layers);
  Sequence seq = model.new_sequence();
  const Tap tap = [&](const TapEvent& e) {
    if (e.name != "attn_weights") return;
    const float* last = e.data + (e.n_tokens - 1) * e.dim;  // [heads][keys]
    attention[static_cast<size_t>(e.layer)].assign(last, last + e.dim);
  };
  // The prompt but its last token goes in untapped: the tap's weights are [rows][heads][keys],
  // and only the last row is wanted (this also keeps long prompts from a P x P buffer).
  if (r.prompt.size() > 1) model.forward(std::span(r.prompt).first(r.prompt.size() - 1), seq);
  seq.set_tap(tap);
  std::span<const float> logits = model.forward(std::span(r.prompt).last(1), seq);

  Json steps = Json::array();
  GenerationStep step(tok, sampled_vocab(model.vocab_size(), tok.vocab_size()), r.params,
                      StopRules{.max_new_tokens = r.n_predict, .eos_ids = r.eos_ids});
  // Every chosen token is a step of the page, the end-of-sequence one included.
  step.set_observer([&](const StepEvent& e) {
    Json s = Json::object();
    s["chosen"] = token_json(tok, e.token);
    record_candidates(e.logits, tok, s);
    Json att = Json::array();
    for (const std::vector<float>& layer : attention) {
      const size_t keys = layer.size() / heads;
      Json rows = Json::array();
      for (size_t h = 0; h < heads; ++h) {
        Json row = Json::array();
        for (size_t j = 0; j < keys; ++j) row.push_back(round_sig(layer[h * keys + j], 4));
        rows.push_back(std::move(row));
      }
      att.push_back(std::move(rows));
    }
    s["attention"] = std::move(att);
    steps.push_back(std::move(s));
  });
  std::vector<int32_t> history = r.prompt;
  while (!step.next(logits, history, seq.cache().capacity() - seq.length(), kDiscardText)) {
    logits = model.forward({&history.back(), 1}, seq);
  }
  seq.set_tap({});

  const std::vector<TimedStep> cached = run_timed_steps(model, tok, r.prompt, steps.size(), r.params, true);
  const std::vector<TimedStep> uncached = run_timed_steps(model, tok, r.prompt, steps.size(), r.params, false);
  VizTrace trace;
  trace.steps = steps.size();
  trace.race_agrees = std::equal(cached.begin(), cached.end(), uncached.begin(), uncached.end(),
                                 [](const TimedStep& a, const TimedStep& b) { return a.token == b.token; });

  Json prompt_json = Json::array();
  for (int32_t id : r.prompt) prompt_json.push_back(token_json(tok, id));
  const SamplerParams& p = r.params;
  const Json json{
      {"format", "nanoinfer-viz-trace"},
      {"version", 1},
      {"settings",
       {{"model", r.model_label},
        {"prompt", r.prompt_text},
        {"n", r.n_predict},
        {"temperature", p.temperature},
        {"top_k", p.top_k},
        {"top_p", p.top_p},
        {"min_p", p.min_p},
        {"repetition_penalty", p.repetition_penalty},
        // A string: a 64-bit seed is past the integers a JS double holds exactly.
        {"seed", std::to_string(p.seed)}}},
      {"model",
       {{"n_layers", cfg.num_hidden_layers},
        {"n_heads", cfg.num_attention_heads},
        {"n_kv_heads", cfg.num_key_value_heads},
        {"vocab_size", model.vocab_size()}}},
      {"prompt", std::move(prompt_json)},
      {"steps", std::move(steps)},
      {"race", {{"cached", race_json(cached)}, {"uncached", race_json(uncached)}}},
  };
  // Token pieces may hold partial UTF-8 (a byte token alone): replaced by U+FFFD.
  trace.json = json.dump(-1, ' ', false, Json::error_handler_t::replace);
  return trace;
}

}  // namespace nanoinfer
