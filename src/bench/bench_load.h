// bench load and bench bandwidth: what opening a model costs, and the read bandwidth a decode
// step is measured against (src/bench/bench_load.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_record.h"
#include "nanoinfer/model.h"

namespace nanoinfer::bench {

// `runs` loads of the model at `path` (empty: the embedded one) on the engine's own path
// (open_model_alone: no tokenizer), each timed; the record names the model `name`.
struct LoadMeasure {
  std::vector<double> seconds;  // per load
  Summary summary;
  size_t weight_bytes = 0;
  int threads = 0;
  std::string weight_type;
  size_t peak_rss = 0;
  double rss_over_weights = 0;
  nlohmann::json record;  // "bench": "load"
};
LoadMeasure measure_load(const std::filesystem::path& path, const std::string& name, const ModelOptions& options,
                         int64_t runs);

// The record of a bandwidth probe: `gbps` per pass of a `bytes` buffer read by `threads`.
nlohmann::json bandwidth_record(int threads, size_t bytes, int64_t runs, const std::vector<double>& gbps);

}  // namespace nanoinfer::bench
