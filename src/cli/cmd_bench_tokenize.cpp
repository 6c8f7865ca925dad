// `nanoinfer bench tokenize -m MODEL_DIR [-f FILE] [--runs N]`: what tokenizing costs on one
// thread. Load time (tokenizer.json parse + tables), then encode of the whole file as one
// string with a cold piece cache (cleared before each run) and a warm one (filled by the
// previous run). Reports median and best of N runs as MB/s and tokens/s; appends one JSON
// line to bench/results.jsonl. Thread CPU time is reported beside wall time: on a shared
// machine it is the steadier measure of the work itself.
#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <tuple>
#include <vector>

#include "command.h"
#include "output.h"
#include "bench/bench_record.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer::cli {
namespace {

struct BenchTokenizeArgs {
  std::string model_dir;
  std::string file = "data/tinyshakespeare.txt";
  int runs = 5;
  std::string results = "bench/results.jsonl";
};

using Clock = std::chrono::steady_clock;

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Wall and CPU seconds of one call of fn.
struct Timing {
  double wall;
  double cpu;
};
template <class Fn>
Timing timed(Fn&& fn) {
  const auto wall0 = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  fn();
  return {std::chrono::duration<double>(Clock::now() - wall0).count(), thread_cpu_seconds() - cpu0};
}


void run(const BenchTokenizeArgs& args) {
  if (args.runs < 1) fail("--runs must be at least 1, got {}", args.runs);
  bench::check_bench_results_path(args.results);  // before the run, not after it
  const std::string text = read_file(args.file, kMaxTextFileBytes);
  if (text.empty()) fail("input file '{}' is empty", args.file);

  // [phase][run] seconds, phases: load, cold encode, warm encode.
  std::vector<double> wall[3], cpu[3];
  auto record_timing = [&](int phase, Timing t) {
    wall[phase].push_back(t.wall);
    cpu[phase].push_back(t.cpu);
  };
  size_t n_tokens = 0;
  for (int r = 0; r < args.runs; ++r) {
    std::optional<Tokenizer> tok;
    record_timing(0, timed([&] { tok.emplace(Tokenizer::load(args.model_dir)); }));
    tok->clear_cache();
    std::vector<int32_t> cold, warm;
    record_timing(1, timed([&] { cold = tok->encode(text); }));
    record_timing(2, timed([&] { warm = tok->encode(text); }));
    if (warm != cold) fail("internal error: warm-cache encode differs from cold-cache encode");
    n_tokens = cold.size();
  }
  const bench::Summary load = bench::summarize(wall[0]), cold = bench::summarize(wall[1]), warm = bench::summarize(wall[2]);
  const bench::Summary load_cpu = bench::summarize(cpu[0]), cold_cpu = bench::summarize(cpu[1]), warm_cpu = bench::summarize(cpu[2]);
  const double mb = static_cast<double>(text.size()) / 1e6;
  const auto n = static_cast<double>(n_tokens);
  print_out("tokenizer: {}   input: {} ({} bytes, {} tokens)   1 thread, {} runs\n", args.model_dir, args.file,
             text.size(), n_tokens, args.runs);
  print_out("{:<12} {:>11} {:>11} {:>11} {:>11} {:>9} {:>11} {:>9}\n", "", "wall med", "wall best", "cpu med",
             "cpu best", "MB/s", "tok/s", "MB/s cpu");
  print_out("{:<12} {:>9.1f}ms {:>9.1f}ms {:>9.1f}ms {:>9.1f}ms\n", "load", load.median * 1e3, load.min * 1e3,
             load_cpu.median * 1e3, load_cpu.min * 1e3);
  for (auto [name, w, c] : {std::tuple{"encode cold", cold, cold_cpu}, std::tuple{"encode warm", warm, warm_cpu}}) {
    print_out("{:<12} {:>9.1f}ms {:>9.1f}ms {:>9.1f}ms {:>9.1f}ms {:>9.1f} {:>11.0f} {:>9.1f}\n", name, w.median * 1e3,
               w.min * 1e3, c.median * 1e3, c.min * 1e3, mb / w.median, n / w.median, mb / c.median);
  }
  print_out("(MB/s and tok/s from the median wall time; MB/s cpu from the median thread CPU time)\n");

  flush_out();  // a failed report fails the run before the record is appended
  nlohmann::json record = bench::bench_context(1, best_isa());
  record["bench"] = "tokenize";
  record["model"] = args.model_dir;
  record["input"] = args.file;
  record["input_bytes"] = text.size();
  record["tokens"] = n_tokens;
  record["runs"] = args.runs;
  record["load_ms_median"] = load.median * 1e3;
  record["load_ms_min"] = load.min * 1e3;
  record["load_cpu_ms_median"] = load_cpu.median * 1e3;
  record["cold_cpu_mb_per_s_median"] = mb / cold_cpu.median;
  record["warm_cpu_mb_per_s_median"] = mb / warm_cpu.median;
  record["cold_mb_per_s_median"] = mb / cold.median;
  record["cold_mb_per_s_best"] = mb / cold.min;
  record["cold_tokens_per_s_median"] = n / cold.median;
  record["warm_mb_per_s_median"] = mb / warm.median;
  record["warm_mb_per_s_best"] = mb / warm.min;
  record["warm_tokens_per_s_median"] = n / warm.median;
  bench::append_bench_record(record, args.results);
}

const bool registered_bench_tokenize = register_command({
    "bench", "tokenize", "Tokenizer load time and encode speed (cold and warm cache) on one thread",
    [](CLI::App& sub) {
      auto args = std::make_shared<BenchTokenizeArgs>();
      sub.add_option("-m,--model", args->model_dir, "Model directory holding tokenizer.json")->required();
      sub.add_option("-f,--file", args->file, "Text to encode, as one string")->capture_default_str();
      sub.add_option("--runs", args->runs, "Runs; median and best are reported")->capture_default_str();
      sub.add_option("-o,--output", args->results, "JSON-lines file the record is appended to")->capture_default_str();
      sub.callback([args] { run(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
