// Counters and histograms of `nanoinfer serve`, rendered as Prometheus text for GET /metrics.
// Thread-safe: HTTP handlers count requests, the scheduler records token timings.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "serve/model_registry.h"

namespace nanoinfer::serve {

// A cumulative Prometheus histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // "<name>_bucket{le=...}", "<name>_sum", "<name>_count" lines.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // [bounds + 1]: the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void count_request(int status);
  void add_tokens(size_t prompt, size_t completion);
  void add_drafts(size_t drafted, size_t accepted);  // speculative decoding
  void time_to_first_token(double seconds);
  void time_per_token(double seconds);
  // The gauges are read from the scheduler when rendering.
  std::string render(size_t queue_depth, size_t active_sequences) const;

 private:
  mutable std::mutex mutex_;
  std::map<int, uint64_t> requests_;  // by HTTP status
  uint64_t prompt_tokens_ = 0;
  uint64_t completion_tokens_ = 0;
  uint64_t drafted_tokens_ = 0;
  uint64_t accepted_tokens_ = 0;
  Histogram ttft_;
  Histogram token_latency_;
};

// Per model: loaded (gauge), requests running on it (gauge), requests it ran, loads and
// unloads (counters), each labelled model="ID".
std::string render_model_metrics(const std::vector<ModelRegistry::Status>& models);

}  // namespace nanoinfer::serve
