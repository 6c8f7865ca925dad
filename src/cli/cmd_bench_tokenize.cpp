// `nanoinfer bench tokenize -m MODEL_DIR [-f FILE] [-r N] [--results FILE]`: what tokenizing costs on one
// thread. Load time (tokenizer.json parse + tables), then encode of the whole file as one
// string with a cold piece cache (cleared before each run) and a warm one (filled by the
// previous run). Reports median and best of N runs as MB/s and tokens/s; appends one JSON
// line to bench/results.jsonl. Thread CPU time is reported beside wall time: on a shared
// machine it is the steadier measure of the work itself.
#include <fmt/format.h>

#include <tuple>

#include "bench/bench_record.h"
#include "bench/bench_tokenize.h"
#include "bench_output.h"
#include "command.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "output.h"

namespace nanoinfer::cli {
namespace {

struct BenchTokenizeArgs {
  std::string model_dir;
  std::string file = "data/tinyshakespeare.txt";
  int runs = 5;
  std::string results = "bench/results.jsonl";
};

void print_report(const BenchTokenizeArgs& args, size_t text_bytes, const bench::TokenizeMeasure& t) {
  const double mb = static_cast<double>(text_bytes) / 1e6;
  const auto n = static_cast<double>(t.tokens);
  print_out("tokenizer: {}   input: {} ({} bytes, {} tokens)   1 thread, {} runs\n", args.model_dir, args.file,
            text_bytes, t.tokens, args.runs);
  print_out("{:<12} {:>11} {:>11} {:>11} {:>11} {:>9} {:>11} {:>9}\n", "", "wall med", "wall best", "cpu med",
            "cpu best", "MB/s", "tok/s", "MB/s cpu");
  print_out("{:<12} {:>9.1f}ms {:>9.1f}ms {:>9.1f}ms {:>9.1f}ms\n", "load", t.load.median * 1e3, t.load.min * 1e3,
            t.load_cpu.median * 1e3, t.load_cpu.min * 1e3);
  for (auto [name, w, c] :
       {std::tuple{"encode cold", t.cold, t.cold_cpu}, std::tuple{"encode warm", t.warm, t.warm_cpu}}) {
    print_out("{:<12} {:>9.1f}ms {:>9.1f}ms {:>9.1f}ms {:>9.1f}ms {:>9.1f} {:>11.0f} {:>9.1f}\n", name, w.median * 1e3,
              w.min * 1e3, c.median * 1e3, c.min * 1e3, mb / w.median, n / w.median, mb / c.median);
  }
  print_out("(MB/s and tok/s from the median wall time; MB/s cpu from the median thread CPU time)\n");
}

void run(const BenchTokenizeArgs& args) {
  if (args.runs < 1) fail("--runs must be at least 1, got {}", args.runs);
  bench::check_bench_results_path(args.results);  // before the run, not after it
  const std::string text = read_file(args.file, kMaxTextFileBytes);
  if (text.empty()) fail("input file '{}' is empty", args.file);
  const bench::TokenizeMeasure t = bench::measure_tokenize(args.model_dir, args.file, text, args.runs);
  print_report(args, text.size(), t);
  flush_out();  // a failed report fails the run before the record is appended
  bench::append_bench_record(t.record, args.results);
}

const bool registered_bench_tokenize = register_command({
    "bench",
    "tokenize",
    "Tokenizer load time and encode speed (cold and warm cache) on one thread",
    [](CLI::App& sub) {
      auto args = std::make_shared<BenchTokenizeArgs>();
      sub.add_option("-m,--model", args->model_dir, "Model directory holding tokenizer.json")->required();
      sub.add_option("-f,--file", args->file, "Text to encode, as one string")->capture_default_str();
      sub.add_option("-r,--repetitions,--runs", args->runs, "Runs; median and best are reported")
          ->capture_default_str();
      add_results_option(sub, args->results, "JSON-lines file the record is appended to")->capture_default_str();
      sub.callback([args] { run(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
