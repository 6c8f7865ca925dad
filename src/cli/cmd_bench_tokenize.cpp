// `nanoinfer bench tokenize -m MODEL_DIR [-f FILE] [--runs N]`: what tokenizing costs on one
// thread. Load time (tokenizer.json parse + tables), then encode of the whole file as one
// string with a cold piece cache (cleared before each run) and a warm one (filled by the
// previous run). Reports median and best of N runs as MB/s and tokens/s; appends one JSON
// line to bench/results.jsonl.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <vector>

#include "cli/command.h"
#include "nanoinfer/bench_record.h"
#include "nanoinfer/error.h"
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

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Stats {
  double median;
  double best;  // the minimum time
};

Stats stats(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  const size_t n = seconds.size();
  const double median = n % 2 ? seconds[n / 2] : (seconds[n / 2 - 1] + seconds[n / 2]) / 2;
  return {median, seconds.front()};
}

void run(const BenchTokenizeArgs& args) {
  if (args.runs < 1) fail("--runs must be at least 1, got {}", args.runs);
  std::ifstream in(args.file, std::ios::binary);
  if (!in) fail("cannot open input file '{}' (give one with -f)", args.file);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = std::move(buffer).str();
  if (text.empty()) fail("input file '{}' is empty", args.file);

  std::vector<double> load_s, cold_s, warm_s;
  size_t n_tokens = 0;
  for (int r = 0; r < args.runs; ++r) {
    const auto t0 = Clock::now();
    const Tokenizer tok = Tokenizer::load(args.model_dir);
    load_s.push_back(seconds_since(t0));

    tok.clear_cache();
    const auto t1 = Clock::now();
    const std::vector<int32_t> cold = tok.encode(text);
    cold_s.push_back(seconds_since(t1));

    const auto t2 = Clock::now();
    const std::vector<int32_t> warm = tok.encode(text);
    warm_s.push_back(seconds_since(t2));
    if (warm != cold) fail("internal error: warm-cache encode differs from cold-cache encode");
    n_tokens = cold.size();
  }
  const Stats load = stats(load_s), cold = stats(cold_s), warm = stats(warm_s);
  const double mb = static_cast<double>(text.size()) / 1e6;
  const auto n = static_cast<double>(n_tokens);
  fmt::print("tokenizer: {}   input: {} ({} bytes, {} tokens)   1 thread, {} runs\n", args.model_dir, args.file,
             text.size(), n_tokens, args.runs);
  fmt::print("{:<12} {:>12} {:>12} {:>14} {:>14}\n", "", "median", "best", "MB/s (median)", "tok/s (median)");
  fmt::print("{:<12} {:>10.1f}ms {:>10.1f}ms\n", "load", load.median * 1e3, load.best * 1e3);
  fmt::print("{:<12} {:>10.1f}ms {:>10.1f}ms {:>14.1f} {:>14.0f}\n", "encode cold", cold.median * 1e3, cold.best * 1e3,
             mb / cold.median, n / cold.median);
  fmt::print("{:<12} {:>10.1f}ms {:>10.1f}ms {:>14.1f} {:>14.0f}\n", "encode warm", warm.median * 1e3, warm.best * 1e3,
             mb / warm.median, n / warm.median);

  nlohmann::json record = bench_context(1);
  record["bench"] = "tokenize";
  record["model"] = args.model_dir;
  record["input"] = args.file;
  record["input_bytes"] = text.size();
  record["tokens"] = n_tokens;
  record["runs"] = args.runs;
  record["load_ms_median"] = load.median * 1e3;
  record["load_ms_min"] = load.best * 1e3;
  record["cold_mb_per_s_median"] = mb / cold.median;
  record["cold_mb_per_s_best"] = mb / cold.best;
  record["cold_tokens_per_s_median"] = n / cold.median;
  record["warm_mb_per_s_median"] = mb / warm.median;
  record["warm_mb_per_s_best"] = mb / warm.best;
  record["warm_tokens_per_s_median"] = n / warm.median;
  append_bench_record(record, args.results);
}

const bool registered = register_command({
    "bench", "tokenize", "Tokenizer load time and encode speed (cold and warm cache) on one thread",
    [](CLI::App& sub) {
      auto args = std::make_shared<BenchTokenizeArgs>();
      sub.add_option("-m,--model", args->model_dir, "Model directory holding tokenizer.json")->required();
      sub.add_option("-f,--file", args->file, "Text to encode, as one string")->capture_default_str();
      sub.add_option("--runs", args->runs, "Runs; median and best are reported")->capture_default_str();
      sub.add_option("--results", args->results, "JSON-lines file the record is appended to")->capture_default_str();
      sub.callback([args] { run(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
