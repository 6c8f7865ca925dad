// bench tune's tuning, cache update and records (src/bench/bench_tune.h).
#include "bench_tune.h"

#include "bench_record.h"

namespace nanoinfer::bench {
namespace {

nlohmann::json candidate_json(const TuneCandidate& c) {
  return {{"rule", describe(c.rule)},     {"median_us", c.median_us}, {"min_us", c.min_us},     {"max_us", c.max_us},
          {"gain_median", c.gain_median}, {"gain_min", c.gain_min},   {"gain_max", c.gain_max}, {"wins", c.wins},
          {"p_value", c.p_value}};
}

}  // namespace

int rounds_to_reach(double max_p) {
  int n = 1;
  while (sign_test_p(n, n) > max_p) ++n;
  return n;
}

std::vector<TunedShape> tune_shapes(const Model& model, const TuneSettings& settings) {
  TuneOptions options;
  options.prefill_tokens = static_cast<size_t>(settings.prefill_tokens);
  options.rounds = static_cast<int>(settings.rounds);
  options.min_gain = settings.min_gain;
  options.max_p = settings.max_p;
  return model.tune(options);
}

TuningUpdate merge_tuning(const std::vector<TunedShape>& shapes, const std::string& cpu, Isa isa, int threads) {
  TuningUpdate u{.file = tuning_cache_path(isa, threads)};
  if (const TuningCache old = read_tuning_cache(u.file, cpu, isa, threads); old.tuning != nullptr) {
    u.tuning = *old.tuning;
  }
  for (const TunedShape& t : shapes) {
    u.tuning.set(t.shape, t.kept ? t.candidates[t.best].rule : SplitRule{});
    u.kept += t.kept ? 1 : 0;
  }
  return u;
}

nlohmann::json tune_record(const TunedShape& t, const std::string& model, int threads, Isa isa,
                           const TuneSettings& settings) {
  const TuneCandidate& best = t.candidates[t.best];
  nlohmann::json r = bench_context(threads, isa);
  r["bench"] = "tune";
  r["model_filename"] = model;
  r["product"] = t.name;
  r["weight_type"] = weight_type_name(t.shape.type);
  r["rows"] = t.shape.rows;
  r["cols"] = t.shape.cols;
  r["n_tokens"] = t.shape.prefill ? settings.prefill_tokens : 1;
  r["rounds"] = settings.rounds;
  r["candidates"] = nlohmann::json::array();
  for (const TuneCandidate& c : t.candidates) r["candidates"].push_back(candidate_json(c));
  r["default_median_us"] = t.candidates.front().median_us;
  r["best_rule"] = describe(best.rule);
  r["best_median_us"] = best.median_us;
  r["gain_median"] = t.gain();
  r["gain_min"] = best.gain_min;
  r["gain_max"] = best.gain_max;
  r["wins"] = best.wins;
  r["p_value"] = best.p_value;
  r["min_gain"] = settings.min_gain;
  r["max_p"] = settings.max_p;
  r["kept"] = t.kept;
  return r;
}

}  // namespace nanoinfer::bench
