// bench tokenize's measurement (src/bench/bench_tokenize.h).
#include "bench_tokenize.h"

#include <time.h>

#include <chrono>
#include <optional>
#include <vector>

#include "nanoinfer/error.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer::bench {
namespace {

using Clock = std::chrono::steady_clock;

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Wall and CPU seconds of the calls of one phase, one entry per run.
struct PhaseTimes {
  std::vector<double> wall, cpu;

  template <class Fn>
  void time(Fn&& fn) {
    const auto wall0 = Clock::now();
    const double cpu0 = thread_cpu_seconds();
    fn();
    wall.push_back(std::chrono::duration<double>(Clock::now() - wall0).count());
    cpu.push_back(thread_cpu_seconds() - cpu0);
  }
};

void put_record(const std::string& model_dir, const std::string& file, size_t text_bytes, int runs,
                TokenizeMeasure& t) {
  const double mb = static_cast<double>(text_bytes) / 1e6;
  const auto n = static_cast<double>(t.tokens);
  nlohmann::json& record = t.record;
  record = bench_context(1, best_isa());
  record["bench"] = "tokenize";
  record["model"] = model_dir;
  record["input"] = file;
  record["input_bytes"] = text_bytes;
  record["tokens"] = t.tokens;
  record["runs"] = runs;
  record["load_ms_median"] = t.load.median * 1e3;
  record["load_ms_min"] = t.load.min * 1e3;
  record["load_cpu_ms_median"] = t.load_cpu.median * 1e3;
  record["cold_cpu_mb_per_s_median"] = mb / t.cold_cpu.median;
  record["warm_cpu_mb_per_s_median"] = mb / t.warm_cpu.median;
  record["cold_mb_per_s_median"] = mb / t.cold.median;
  record["cold_mb_per_s_best"] = mb / t.cold.min;
  record["cold_tokens_per_s_median"] = n / t.cold.median;
  record["warm_mb_per_s_median"] = mb / t.warm.median;
  record["warm_mb_per_s_best"] = mb / t.warm.min;
  record["warm_tokens_per_s_median"] = n / t.warm.median;
}

}  // namespace

TokenizeMeasure measure_tokenize(const std::string& model_dir, const std::string& file, const std::string& text,
                                 int runs) {
  PhaseTimes load, cold, warm;
  TokenizeMeasure t;
  for (int r = 0; r < runs; ++r) {
    std::optional<Tokenizer> tok;
    load.time([&] { tok.emplace(Tokenizer::load(model_dir)); });
    tok->clear_cache();
    std::vector<int32_t> cold_ids, warm_ids;
    cold.time([&] { cold_ids = tok->encode(text); });
    warm.time([&] { warm_ids = tok->encode(text); });
    if (warm_ids != cold_ids) {
      fail("internal error: warm-cache encode differs from cold-cache encode");
    }
    t.tokens = cold_ids.size();
  }
  t.load = summarize(load.wall), t.cold = summarize(cold.wall), t.warm = summarize(warm.wall);
  t.load_cpu = summarize(load.cpu), t.cold_cpu = summarize(cold.cpu);
  t.warm_cpu = summarize(warm.cpu);
  put_record(model_dir, file, text.size(), runs, t);
  return t;
}

}  // namespace nanoinfer::bench
