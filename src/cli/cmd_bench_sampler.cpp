// `nanoinfer bench sampler [--vocab V] [--calls N] [-r R] [-o FILE]`: what choosing a token
// costs, per call, on one thread, over a vocabulary of Qwen2's size (151,936 entries) by
// default: argmax (temperature 0), top-k 40, top-p 0.9, and the whole chain (repetition
// penalty 1.1 over a 64-token history, temperature 0.7, top-k 40, top-p 0.9, min-p 0.05, the
// draw). Each call is Sampler::sample, as the generation step runs it: the logits widened to
// double, filtered, drawn. The logits are pseudo-random normals with a spread of 2.5 (a
// model's are of that order); 8 vectors are cycled, so no two calls in a row see the same.
// R timed repetitions of N calls each; prints ms per call (median, min, max) and appends one
// JSON line per operation when -o is given.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_record.h"
#include "command.h"
#include "nanoinfer/error.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/sampler.h"
#include "nanoinfer/splitmix64.h"

namespace nanoinfer::cli {
namespace {

struct SamplerArgs {
  int64_t vocab = 151936;
  int64_t calls = 50;
  int64_t runs = 7;
  std::string output;  // "": print only
};

struct Op {
  const char* name;
  SamplerParams params;
  bool history;  // the chain's repetition penalty needs a history to work on
};

// Normal deviates (Box-Muller) with standard deviation `sd`, from a fixed splitmix64 stream.
std::vector<float> normal_logits(size_t n, uint64_t seed, double sd) {
  SplitMix64 mix{seed};
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(mix.next() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(mix.next() >> 11) * 0x1.0p-53;
    const double r = sd * std::sqrt(-2.0 * std::log(u1));
    v[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) v[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
  }
  return v;
}

void bench_sampler(const SamplerArgs& args) {
  if (args.vocab < 2 || args.vocab > (int64_t{1} << 24)) fail("--vocab must be in 2..16777216, got {}", args.vocab);
  if (args.calls < 1) fail("--calls must be >= 1, got {}", args.calls);
  if (args.runs < 1) fail("-r must be >= 1, got {}", args.runs);
  if (!args.output.empty()) bench::check_bench_results_path(args.output);
  const size_t vocab = static_cast<size_t>(args.vocab);
  constexpr size_t kVectors = 8;
  std::vector<std::vector<float>> logits;
  for (size_t i = 0; i < kVectors; ++i) logits.push_back(normal_logits(vocab, 1000 + i, 2.5));
  // The argmax of each vector, to check the greedy op against.
  std::vector<int32_t> top(kVectors);
  for (size_t i = 0; i < kVectors; ++i) {
    for (size_t t = 1; t < vocab; ++t) {
      if (logits[i][t] > logits[i][static_cast<size_t>(top[i])]) top[i] = static_cast<int32_t>(t);
    }
  }
  std::vector<int32_t> history(64);
  SplitMix64 ids{7};
  for (int32_t& id : history) id = static_cast<int32_t>(ids.next() % vocab);

  const Op ops[] = {
      {"argmax", {.temperature = 0.0}, false},
      {"top-k", {.temperature = 1.0, .top_k = 40}, false},
      {"top-p", {.temperature = 1.0, .top_p = 0.9}, false},
      {"chain",
       {.temperature = 0.7, .top_k = 40, .top_p = 0.9, .min_p = 0.05, .repetition_penalty = 1.1},
       true},
  };
  fmt::print("bench sampler: vocabulary {}, {} calls x {} runs, 1 thread (ms per call)\n", vocab, args.calls,
             args.runs);
  for (const Op& op : ops) {
    Sampler sampler(args.vocab, op.params);
    const std::span<const int32_t> hist = op.history ? std::span<const int32_t>(history) : std::span<const int32_t>();
    std::vector<double> ms;
    uint64_t calls = 0, checksum = 0;
    for (int64_t r = -1; r < args.runs; ++r) {  // r = -1 is the warm-up
      const auto start = std::chrono::steady_clock::now();
      for (int64_t c = 0; c < args.calls; ++c) {
        const size_t i = static_cast<size_t>(c) % kVectors;
        const int32_t token = sampler.sample(logits[i], hist);
        if (op.params.temperature == 0 && token != top[i])
          fail("bench sampler: argmax chose {}, the largest logit is at {}", token, top[i]);
        checksum += static_cast<uint64_t>(token);
        ++calls;
      }
      const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (r >= 0) ms.push_back(elapsed / static_cast<double>(args.calls));
    }
    if (calls != static_cast<uint64_t>(args.calls * (args.runs + 1))) fail("bench sampler: miscounted calls");
    const bench::Summary s = bench::summarize(ms);
    fmt::print("  {:<7} median {:.4f}  min {:.4f}  max {:.4f}\n", op.name, s.median, s.min, s.max);
    if (args.output.empty()) continue;
    nlohmann::json record = bench::bench_context(1, best_isa());
    record["bench"] = "sampler";
    record["op"] = op.name;
    record["vocab"] = vocab;
    record["temperature"] = op.params.temperature;
    record["top_k"] = op.params.top_k;
    record["top_p"] = op.params.top_p;
    record["min_p"] = op.params.min_p;
    record["repetition_penalty"] = op.params.repetition_penalty;
    record["history_tokens"] = hist.size();
    record["calls_per_run"] = args.calls;
    record["runs"] = args.runs;
    record["samples_ms"] = ms;
    record["ms_median"] = s.median;
    record["ms_min"] = s.min;
    record["ms_max"] = s.max;
    record["token_checksum"] = checksum;
    bench::append_bench_record(record, args.output);
  }
  if (!args.output.empty()) fmt::print("appended {} records to {}\n", std::size(ops), args.output);
}

const bool registered_bench_sampler = register_command({
    "bench",
    "sampler",
    "Sampler cost per call (argmax, top-k, top-p, the full chain) over a vocabulary of Qwen2's size",
    [](CLI::App& sub) {
      auto args = std::make_shared<SamplerArgs>();
      sub.add_option("--vocab", args->vocab, "Vocabulary size")->capture_default_str();
      sub.add_option("--calls", args->calls, "Calls per timed run")->capture_default_str();
      sub.add_option("-r,--repetitions", args->runs, "Timed runs after one warm-up")->capture_default_str();
      sub.add_option("-o,--output", args->output, "JSON-lines file to append the records to (default: none, print only)");
      sub.callback([args] { bench_sampler(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
