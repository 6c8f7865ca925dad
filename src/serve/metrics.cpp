#include "serve/metrics.h"

#include <fmt/format.h>

namespace nanoinfer::serve {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::string out = fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
  return out;
}

Metrics::Metrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      token_latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}) {}

void Metrics::count_request(int status) {
  std::lock_guard lock(mutex_);
  ++requests_[status];
}

void Metrics::add_tokens(size_t prompt, size_t completion) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += prompt;
  completion_tokens_ += completion;
}

void Metrics::add_drafts(size_t drafted, size_t accepted) {
  std::lock_guard lock(mutex_);
  drafted_tokens_ += drafted;
  accepted_tokens_ += accepted;
}

void Metrics::time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}

void Metrics::time_per_token(double seconds) {
  std::lock_guard lock(mutex_);
  token_latency_.observe(seconds);
}

std::string Metrics::render(size_t queue_depth, size_t active_sequences) const {
  std::lock_guard lock(mutex_);
  std::string out =
      "# HELP nanoinfer_requests_total HTTP requests answered, by status.\n"
      "# TYPE nanoinfer_requests_total counter\n";
  for (const auto& [status, n] : requests_) {
    out += fmt::format("nanoinfer_requests_total{{status=\"{}\"}} {}\n", status, n);
  }
  out += fmt::format(
      "# HELP nanoinfer_prompt_tokens_total Prompt tokens of finished generations.\n"
      "# TYPE nanoinfer_prompt_tokens_total counter\nnanoinfer_prompt_tokens_total {}\n"
      "# HELP nanoinfer_completion_tokens_total Tokens generated.\n"
      "# TYPE nanoinfer_completion_tokens_total counter\nnanoinfer_completion_tokens_total {}\n",
      prompt_tokens_, completion_tokens_);
  out += fmt::format(
      "# HELP nanoinfer_draft_tokens_total Tokens drafted for speculative verification.\n"
      "# TYPE nanoinfer_draft_tokens_total counter\nnanoinfer_draft_tokens_total {}\n"
      "# HELP nanoinfer_draft_accepted_tokens_total Drafted tokens kept.\n"
      "# TYPE nanoinfer_draft_accepted_tokens_total counter\nnanoinfer_draft_accepted_tokens_total {}\n",
      drafted_tokens_, accepted_tokens_);
  out += ttft_.render("nanoinfer_time_to_first_token_seconds",
                      "Submission to the first sampled token: queue wait and prefill included.");
  out += token_latency_.render("nanoinfer_time_per_output_token_seconds",
                               "Time between consecutive tokens of one generation.");
  out += fmt::format(
      "# HELP nanoinfer_queue_depth Requests waiting for a sequence slot.\n"
      "# TYPE nanoinfer_queue_depth gauge\nnanoinfer_queue_depth {}\n"
      "# HELP nanoinfer_active_sequences Sequences being generated.\n"
      "# TYPE nanoinfer_active_sequences gauge\nnanoinfer_active_sequences {}\n",
      queue_depth, active_sequences);
  return out;
}

std::string render_model_metrics(const std::vector<ModelRegistry::Status>& models) {
  // A label value escapes backslash, double quote and line feed (the exposition format).
  const auto label = [](const std::string& id) {
    std::string out;
    for (const char c : id) {
      if (c == '\\' || c == '"') out += '\\';
      out += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    return out;
  };
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    uint64_t (*value)(const ModelRegistry::Status&);
  };
  static constexpr Family families[] = {
      {"nanoinfer_model_loaded", "gauge", "Whether the model is loaded.",
       [](const ModelRegistry::Status& s) -> uint64_t { return s.loaded; }},
      {"nanoinfer_model_active_requests", "gauge", "Requests running on the model (holding it loaded).",
       [](const ModelRegistry::Status& s) -> uint64_t { return s.active; }},
      {"nanoinfer_model_requests_total", "counter",
       "Requests routed to the model (each holds it loaded while it runs).",
       [](const ModelRegistry::Status& s) { return s.leases; }},
      {"nanoinfer_model_loads_total", "counter", "Times the model was loaded.",
       [](const ModelRegistry::Status& s) { return s.loads; }},
      {"nanoinfer_model_unloads_total", "counter", "Times the model was unloaded to load another.",
       [](const ModelRegistry::Status& s) { return s.unloads; }},
  };
  std::string out;
  for (const Family& f : families) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, f.help, f.name, f.type);
    for (const ModelRegistry::Status& s : models)
      out += fmt::format("{}{{model=\"{}\"}} {}\n", f.name, label(s.id), f.value(s));
  }
  return out;
}

}  // namespace nanoinfer::serve
