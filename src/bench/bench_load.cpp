// bench load and bench bandwidth (src/bench/bench_load.h).
#include "bench_load.h"

#include <chrono>

#include "nanoinfer/open_model.h"

namespace nanoinfer::bench {

LoadMeasure measure_load(const std::filesystem::path& path, const std::string& name, const ModelOptions& options,
                         int64_t runs) {
  LoadMeasure l;
  Isa isa = Isa::Scalar;
  for (int64_t r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const Model model = open_model_alone(path, options);
    l.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    l.weight_bytes = model.weight_bytes();
    l.threads = model.threads();
    isa = model.isa();
    l.weight_type = std::string(weight_type_name(model.weight_type()));
  }
  l.peak_rss = peak_rss_bytes();
  l.summary = summarize(l.seconds);
  l.rss_over_weights = static_cast<double>(l.peak_rss) / static_cast<double>(l.weight_bytes);

  l.record = bench_context(l.threads, isa);
  l.record["bench"] = "load";
  l.record["model"] = name;
  l.record["weight_type"] = l.weight_type;
  l.record["weight_bytes"] = l.weight_bytes;
  l.record["runs"] = runs;
  l.record["load_seconds"] = l.seconds;
  l.record["load_seconds_median"] = l.summary.median;
  l.record["load_seconds_min"] = l.summary.min;
  l.record["peak_rss_bytes"] = l.peak_rss;
  l.record["peak_rss_over_weights"] = l.rss_over_weights;
  return l;
}

nlohmann::json bandwidth_record(int threads, size_t bytes, int64_t runs, const std::vector<double>& gbps) {
  const Summary s = summarize(gbps);
  nlohmann::json record = bench_context(threads, best_isa());
  record["bench"] = "bandwidth";
  record["bytes"] = bytes;
  record["runs"] = runs;
  record["samples_gbps"] = gbps;
  record["median_gbps"] = s.median;
  record["min_gbps"] = s.min;
  record["max_gbps"] = s.max;
  return record;
}

}  // namespace nanoinfer::bench
