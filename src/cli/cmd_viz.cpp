// `nanoinfer viz -p TEXT`: runs the model with an attention tap and shows what it did in the
// browser page of docs/VIZ.md — the candidates of every step, the attention of every layer and
// head, and cached decoding racing full recomputation — served on 127.0.0.1 or written to one
// self-contained HTML file with --out.
//
// Three runs of the same sampling (same settings, same seed):
//   traced:   cached decoding with the tap; records the candidates and attention of each step.
//   cached:   the same, untapped and timed: the prompt once, then one position per step.
//   uncached: from an empty cache at every step, the whole context pushed again, timed.
// The model's logits are bitwise independent of chunking, so all three choose the same tokens;
// the trace records what each actually chose, and the page shows whether they agree.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "common_options.h"
#include "http_serve.h"
#include "nanoinfer/chat_template.h"
#include "nanoinfer/error.h"
#include "viz_page.h"

namespace nanoinfer::cli {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr size_t kTopCandidates = 40;

struct VizFlags {
  ModelFlags model;
  SamplingOverrides sampling;
  std::string prompt;
  int64_t n_predict = 32;
  bool chat = false;
  std::string out;
  std::string trace_out;
  int port = 8080;
  uint64_t max_requests = 0;  // hidden, for tests: stop serving after this many requests
};

// `x` rounded to `digits` significant digits (the trace's precision: docs/VIZ.md).
double round_sig(double x, int digits) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  return std::stod(fmt::format("{:.{}g}", x, digits));
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The token alone, as text; "" for an id the tokenizer has no token for (padding rows).
std::string piece(const Tokenizer& tok, int32_t id) {
  try {
    return tok.decode({&id, 1});
  } catch (const Error&) {
    return "";
  }
}

Json token_json(const Tokenizer& tok, int32_t id) { return Json{{"id", id}, {"piece", piece(tok, id)}}; }

// The top candidates by raw logit (descending, ties by lower id) and the softmax mass at T = 1
// of everything else, over the ids the sampler may choose.
void record_candidates(std::span<const float> logits, const Tokenizer& tok, Json& step) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t k = std::min(kTopCandidates, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(k), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  const double max = logits[order[0]];
  double total = 0.0, top = 0.0;
  for (float l : logits) total += std::exp(static_cast<double>(l) - max);
  Json candidates = Json::array();
  for (size_t c = 0; c < k; ++c) {
    const int32_t id = order[c];
    top += std::exp(static_cast<double>(logits[id]) - max);
    candidates.push_back(Json{{"id", id}, {"piece", piece(tok, id)}, {"logit", round_sig(logits[id], 6)}});
  }
  step["top"] = std::move(candidates);
  step["rest_mass"] = round_sig(std::clamp((total - top) / total, 0.0, 1.0), 6);
}

struct RaceRun {
  std::vector<int32_t> tokens;
  Json steps = Json::array();
};

// Cached decoding or full recomputation of `n_steps` steps, untapped, each forward timed.
RaceRun race(const Model& model, const std::vector<int32_t>& prompt, size_t n_steps, size_t vocab,
             const SamplerParams& params, bool cached) {
  RaceRun run;
  Sampler sampler(static_cast<int64_t>(vocab), params);
  Sequence seq = model.new_sequence();
  std::vector<int32_t> history = prompt;
  for (size_t i = 0; i < n_steps; ++i) {
    const uint64_t before = seq.positions_pushed();
    const Clock::time_point start = Clock::now();
    std::span<const float> logits;
    if (cached) {
      logits = i == 0 ? model.forward(history, seq) : model.forward({&history.back(), 1}, seq);
    } else {
      seq.cache().clear();
      logits = model.forward(history, seq);
    }
    const double seconds = seconds_since(start);
    run.steps.push_back(Json{{"positions", seq.positions_pushed() - before}, {"seconds", round_sig(seconds, 4)}});
    const int32_t id = sampler.sample(logits.first(vocab), history);
    run.tokens.push_back(id);
    history.push_back(id);
  }
  return run;
}

void write_atomically(const std::string& path, std::string_view data) {
  const std::filesystem::path target(path);
  const std::filesystem::path temp = target.string() + fmt::format(".tmp{}", ::getpid());
  {
    std::ofstream f(temp, std::ios::binary | std::ios::trunc);
    if (!f) fail("cannot write '{}': {}", path, std::strerror(errno));
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.close();
    if (!f) {
      std::error_code ec;
      std::filesystem::remove(temp, ec);
      fail("cannot write '{}': the write failed", path);
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, target, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    fail("cannot write '{}': {}", path, ec.message());
  }
}

Json make_trace(const VizFlags& f, OpenedModel& m, const SamplingSettings& sampling) {
  const Model& model = m.model;
  const Tokenizer& tok = m.tokenizer;
  const ModelConfig& cfg = model.config();
  std::vector<int32_t> eos = m.generation.eos_token_ids;
  if (eos.empty() && tok.eos_token_id()) eos.push_back(*tok.eos_token_id());
  std::string text = f.prompt;
  if (f.chat) {
    const ChatMessage user{"user", f.prompt};
    text = render_chat({&user, 1}, /*add_generation_prompt=*/true);
    if (const auto im_end = tok.token_id("<|im_end|>"); im_end && std::find(eos.begin(), eos.end(), *im_end) == eos.end()) {
      eos.push_back(*im_end);
    }
  }
  const std::vector<int32_t> prompt = tok.encode(text);
  if (prompt.empty()) fail("the prompt is empty: nothing to trace");
  // As in Generator: only ids the tokenizer has can be chosen (rows past it are padding).
  const size_t vocab = std::min(model.vocab_size(), static_cast<size_t>(tok.vocab_size()));
  const SamplerParams params = sampling.params();
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
  if (prompt.size() > 1) model.forward(std::span(prompt).first(prompt.size() - 1), seq);
  seq.set_tap(tap);
  std::span<const float> logits = model.forward(std::span(prompt).last(1), seq);

  Json steps = Json::array();
  Sampler sampler(static_cast<int64_t>(vocab), params);
  std::vector<int32_t> history = prompt;
  for (int64_t i = 0; i < f.n_predict; ++i) {
    Json step = Json::object();
    const int32_t id = sampler.sample(logits.first(vocab), history);
    step["chosen"] = token_json(tok, id);
    record_candidates(logits.first(vocab), tok, step);
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
    step["attention"] = std::move(att);
    steps.push_back(std::move(step));
    history.push_back(id);
    if (std::find(eos.begin(), eos.end(), id) != eos.end()) break;  // the end-of-sequence step is shown
    if (i + 1 == f.n_predict || seq.length() == seq.cache().capacity()) break;
    logits = model.forward({&history.back(), 1}, seq);
  }
  seq.set_tap({});

  const RaceRun cached = race(model, prompt, steps.size(), vocab, params, true);
  const RaceRun uncached = race(model, prompt, steps.size(), vocab, params, false);

  Json prompt_json = Json::array();
  for (int32_t id : prompt) prompt_json.push_back(token_json(tok, id));
  return Json{
      {"format", "nanoinfer-viz-trace"},
      {"version", 1},
      {"settings",
       {{"model", f.model.model_dir.empty() ? "data/default-model" : f.model.model_dir},
        {"prompt", f.prompt},
        {"n", f.n_predict},
        {"temperature", params.temperature},
        {"top_k", params.top_k},
        {"top_p", params.top_p},
        {"min_p", params.min_p},
        {"repetition_penalty", params.repetition_penalty},
        {"seed", params.seed}}},
      {"model",
       {{"n_layers", cfg.num_hidden_layers},
        {"n_heads", cfg.num_attention_heads},
        {"n_kv_heads", cfg.num_key_value_heads},
        {"vocab_size", model.vocab_size()}}},
      {"prompt", std::move(prompt_json)},
      {"steps", std::move(steps)},
      {"race",
       {{"cached", {{"tokens", cached.tokens}, {"steps", cached.steps}}},
        {"uncached", {{"tokens", uncached.tokens}, {"steps", uncached.steps}}}}},
  };
}

void run(const VizFlags& f, bool port_given) {
  if (f.n_predict < 1) fail("-n must be >= 1 (the page shows at least one step), got {}", f.n_predict);
  if (!f.out.empty() && port_given) fail("--out and --port exclude each other: write a file or serve the page");
  if (f.port < 0 || f.port > 65535) fail("--port must be in [0, 65535], got {}", f.port);
  OpenedModel m = load_model(f.model);
  const SamplingSettings sampling = resolve_sampling(m.generation, f.sampling);
  const Json trace = make_trace(f, m, sampling);
  // Token pieces may hold partial UTF-8 (a byte token alone): replaced by U+FFFD.
  const std::string trace_text = trace.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (!f.trace_out.empty()) write_atomically(f.trace_out, trace_text + "\n");
  const std::string page = render_viz_page(trace_text);

  const auto& cached = trace["race"]["cached"]["tokens"];
  const auto& uncached = trace["race"]["uncached"]["tokens"];
  const std::string summary = fmt::format("traced {} steps | cached and recomputed decoding {}\n", trace["steps"].size(),
                                          cached == uncached ? "chose the same tokens" : "DIFFER");
  if (!f.out.empty()) {
    write_atomically(f.out, page);
    fmt::print(stderr, "{}", summary);
    fmt::print("wrote {}\n", f.out);
    return;
  }
  fmt::print(stderr, "{}", summary);
  serve_html(
      page, f.port,
      [](int port) {
        fmt::print("serving the page at http://127.0.0.1:{}/ (Ctrl-C to stop)\n", port);
        std::fflush(stdout);
      },
      f.max_requests);
}

void setup(CLI::App& app) {
  auto f = std::make_shared<VizFlags>();
  add_model_flags(app, f->model);
  app.add_option("-p,--prompt", f->prompt, "Prompt text")->required();
  app.add_option("-n,--n-predict", f->n_predict, "Maximum tokens to generate and trace (default 32)");
  add_sampling_flags(app, f->sampling);
  app.add_flag("--chat", f->chat, "Wrap the prompt in the chat template as one user turn");
  app.add_option("--out", f->out, "Write the page to this HTML file (self-contained) instead of serving it");
  app.add_option("--trace", f->trace_out, "Also write the trace (JSON, docs/VIZ.md) to this file");
  CLI::Option* port = app.add_option("--port", f->port, "Serve the page on 127.0.0.1:PORT (default 8080; 0 = any free port)");
  app.add_option("--max-requests", f->max_requests)->group("");  // tests: stop after N requests
  app.callback([f, port] { run(*f, port->count() > 0); });
}

const bool registered = register_command(
    {"", "viz", "Trace a generation and show candidates, attention and the cache race in the browser", setup});

}  // namespace
}  // namespace nanoinfer::cli
