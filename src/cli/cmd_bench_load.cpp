// `nanoinfer bench load [-m PATH]`: what opening a model costs, on the path the engine really
// uses (open_model_alone, open_model without the tokenizer: header and config read once,
// validation, pread of every tensor into the huge-page arena, conversion or quantization when
// --dtype asks for one). Repeats the load --runs times
// (the first run may read from disk, later ones from the page cache), prints the median and
// minimum with the peak resident memory against the weight bytes, and appends one JSON line.
#include <fmt/format.h>

#include <memory>

#include "bench/bench_load.h"
#include "bench_output.h"
#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/model_files.h"
#include "nanoinfer/open_model.h"

namespace nanoinfer::cli {
namespace {

struct LoadArgs {
  ModelFlags model;
  int64_t runs = 3;
  std::string output = "bench/results.jsonl";
};

void bench_load(const LoadArgs& args) {
  if (args.runs < 1) fail("--runs must be >= 1, got {}", args.runs);
  const OpenOptions options = open_options(args.model);
  const std::filesystem::path path = args.model.model_dir;  // empty: the embedded model
  const std::string name = path.empty() ? embedded_model_label().string() : path.string();
  bench::check_bench_results_path(args.output);
  const bench::LoadMeasure l = bench::measure_load(path, name, options.model, args.runs);
  const double median = l.summary.median;
  fmt::print("bench load: {} ({} weights, {}), {} thread(s), {} run(s)\n", name, l.weight_type,
             format_bytes(static_cast<double>(l.weight_bytes)), l.threads, args.runs);
  fmt::print("  load   median {:.3f} s, min {:.3f} s, max {:.3f} s  ({:.2f} GB/s at the median)\n", median,
             l.summary.min, l.summary.max, static_cast<double>(l.weight_bytes) / median / 1e9);
  fmt::print("  memory peak resident {} = {:.3f} x the weight bytes\n", format_bytes(static_cast<double>(l.peak_rss)),
             l.rss_over_weights);
  append_record_and_say(l.record, args.output);
}

const bool registered_bench_load = register_command({
    "bench",
    "load",
    "Time opening a model the way the engine does (pread into the weight arena); peak memory",
    [](CLI::App& sub) {
      auto args = std::make_shared<LoadArgs>();
      add_model_flags(sub, args->model);
      sub.add_option("-r,--repetitions,--runs", args->runs, "Loads to time")->capture_default_str();
      add_results_option(sub, args->output, "JSON-lines file the record is appended to")->capture_default_str();
      sub.callback([args] { bench_load(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
