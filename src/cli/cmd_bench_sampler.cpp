// `nanoinfer bench sampler [--vocab V] [--calls N] [-r R] [--results FILE]`: what choosing a token
// costs, per call, on one thread, over a vocabulary of Qwen2's size (151,936 entries) by
// default: argmax (temperature 0), top-k 40, top-p 0.9, and the whole chain (repetition
// penalty 1.1 over a 64-token history, temperature 0.7, top-k 40, top-p 0.9, min-p 0.05, the
// draw). Each call is Sampler::sample, as the generation step runs it: the logits widened to
// double, filtered, drawn. The logits are pseudo-random normals with a spread of 2.5 (a
// model's are of that order); 8 vectors are cycled, so no two calls in a row see the same.
// R timed repetitions of N calls each; prints ms per call (median, min, max) and appends one
// JSON line per operation when -o is given.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "bench/bench_record.h"
#include "bench/bench_sampler.h"
#include "bench_output.h"
#include "command.h"
#include "nanoinfer/error.h"

namespace nanoinfer::cli {
namespace {

struct SamplerArgs {
  int64_t vocab = 151936;
  int64_t calls = 50;
  int64_t runs = 7;
  std::string output;  // "": print only
};

void bench_sampler(const SamplerArgs& args) {
  if (args.vocab < 2 || args.vocab > (int64_t{1} << 24)) {
    fail("--vocab must be in 2..16777216, got {}", args.vocab);
  }
  if (args.calls < 1) fail("--calls must be >= 1, got {}", args.calls);
  if (args.runs < 1) fail("-r must be >= 1, got {}", args.runs);
  if (!args.output.empty()) bench::check_bench_results_path(args.output);
  const size_t vocab = static_cast<size_t>(args.vocab);
  const bench::SamplerInputs inputs = bench::sampler_inputs(vocab);
  fmt::print("bench sampler: vocabulary {}, {} calls x {} runs, 1 thread (ms per call)\n", vocab, args.calls,
             args.runs);
  for (const bench::SamplerOp& op : bench::sampler_ops()) {
    const bench::SamplerMeasure m = bench::measure_sampler_op(inputs, op, args.calls, args.runs);
    const bench::Summary& s = m.summary;
    fmt::print("  {:<7} median {:.4f}  min {:.4f}  max {:.4f}\n", op.name, s.median, s.min, s.max);
    if (args.output.empty()) continue;
    bench::append_bench_record(bench::sampler_record(op, m, vocab, args.calls, args.runs), args.output);
  }
  if (!args.output.empty()) {
    fmt::print("appended {} records to {}\n", bench::sampler_ops().size(), args.output);
  }
}

const bool registered_bench_sampler = register_command({
    "bench",
    "sampler",
    "Sampler cost per call (argmax, top-k, top-p, the full chain) over a vocabulary of Qwen2's "
    "size",
    [](CLI::App& sub) {
      auto args = std::make_shared<SamplerArgs>();
      sub.add_option("--vocab", args->vocab, "Vocabulary size")->capture_default_str();
      sub.add_option("--calls", args->calls, "Calls per timed run")->capture_default_str();
      sub.add_option("-r,--repetitions", args->runs, "Timed runs after one warm-up")->capture_default_str();
      add_results_option(sub, args->output, "JSON-lines file to append the records to (default: none, print only)");
      sub.callback([args] { bench_sampler(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
