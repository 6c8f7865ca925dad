// bench generate --cache-ab (src/bench/bench_cache_ab.h).
#include "bench_cache_ab.h"

#include <fmt/format.h>

#include "bench_record.h"
#include "nanoinfer/error.h"
#include "nanoinfer/viz_trace.h"

namespace nanoinfer::bench {
namespace {

// One side of the A/B and what its runs measured.
struct Path {
  const char* name;
  bool cached;
  std::vector<double> ts, ttft_ms, step_ms;
  uint64_t positions = 0;
};

// One run of a path, timed by the harness viz's race uses (run_timed_steps): step 0 pushes
// the prompt, each later step either one position (cached) or the whole context again from an
// empty cache (recomputed). Returns the tokens it chose.
std::vector<int32_t> run_path(const OpenedModel& m, const std::vector<int32_t>& prompt, size_t n_gen, Path& path) {
  const std::vector<TimedStep> steps =
      run_timed_steps(m.model, m.tokenizer, prompt, n_gen, {.temperature = 0.0}, path.cached);
  if (steps.size() != n_gen) fail("cache A/B: expected {} steps, ran {}", n_gen, steps.size());
  std::vector<int32_t> tokens;
  double seconds = 0, later = 0;
  path.positions = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    tokens.push_back(steps[k].token);
    seconds += steps[k].seconds;
    if (k > 0) later += steps[k].seconds;
    path.positions += steps[k].positions;
  }
  path.ts.push_back(static_cast<double>(n_gen) / seconds);
  path.ttft_ms.push_back(steps[0].seconds * 1e3);
  if (n_gen > 1) path.step_ms.push_back(later * 1e3 / static_cast<double>(n_gen - 1));
  return tokens;
}

// A path's fields in the record ("<name>_median_ts", ...) and its part of the note.
std::string put_path(nlohmann::json& ab, const Path& path) {
  const Summary t = summarize(path.ts), first = summarize(path.ttft_ms);
  const std::string p = path.name;
  ab[p + "_samples_ts"] = path.ts;
  put_rates(ab, p, t);
  ab[p + "_ttft_ms_median"] = first.median;
  ab[p + "_positions"] = path.positions;
  std::string part = fmt::format("{} {:.2f} tok/s, TTFT {:.1f} ms", p, t.median, first.median);
  if (!path.step_ms.empty()) {
    const Summary step = summarize(path.step_ms);
    ab[p + "_step_ms_median"] = step.median;
    ab[p + "_step_ms_min"] = step.min;
    part += fmt::format(", {:.2f} ms per later step", step.median);
  }
  return part + fmt::format(", {} positions pushed", path.positions);
}

}  // namespace

std::pair<nlohmann::json, std::string> measure_cache_ab(const OpenedModel& m, const std::vector<int32_t>& prompt,
                                                        size_t n_gen, int64_t repetitions, nlohmann::json record) {
  const size_t n_prompt = prompt.size();
  Path paths[2] = {{"cached", true, {}, {}, {}}, {"uncached", false, {}, {}, {}}};
  for (int64_t r = 0; r < repetitions; ++r) {
    const std::vector<int32_t> cached = run_path(m, prompt, n_gen, paths[0]);
    const std::vector<int32_t> uncached = run_path(m, prompt, n_gen, paths[1]);
    if (cached != uncached) {
      fail("cache A/B: cached and uncached greedy decoding differ (run {}); the KV cache is wrong", r);
    }
  }
  // The work each path must have done: the prompt, then one position per step (cached) or
  // the whole context per step (recomputed: n_prompt + k positions at step k).
  const uint64_t want_cached = n_prompt + (n_gen - 1);
  const uint64_t want_uncached = n_gen * n_prompt + n_gen * (n_gen - 1) / 2;
  if (paths[0].positions != want_cached || paths[1].positions != want_uncached) {
    fail("cache A/B: pushed {} (cached) and {} (uncached) positions, expected {} and {}", paths[0].positions,
         paths[1].positions, want_cached, want_uncached);
  }
  record["bench"] = "generate-cache-ab";
  record["n_prompt"] = n_prompt;
  record["n_gen"] = n_gen;
  record["identical_output"] = true;
  const std::string parts = put_path(record, paths[0]) + "; " + put_path(record, paths[1]);
  const double speedup = summarize(paths[0].ts).median / summarize(paths[1].ts).median;
  std::string note = fmt::format(
      "cache A/B ({} runs alternated, {} tokens after a {}-token prompt, identical tokens): {} "
      "(cached x{:.2f})",
      repetitions, n_gen, n_prompt, parts, speedup);
  return {std::move(record), std::move(note)};
}

}  // namespace nanoinfer::bench
