// bench sampler's measurement (src/bench/bench_sampler.h).
#include "bench_sampler.h"

#include <chrono>
#include <cmath>

#include "nanoinfer/error.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/splitmix64.h"

namespace nanoinfer::bench {
namespace {

constexpr size_t kVectors = 8;

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

constexpr SamplerOp kOps[] = {
    {"argmax", {.temperature = 0.0}, false},
    {"top-k", {.temperature = 1.0, .top_k = 40}, false},
    {"top-p", {.temperature = 1.0, .top_p = 0.9}, false},
    {"chain", {.temperature = 0.7, .top_k = 40, .top_p = 0.9, .min_p = 0.05, .repetition_penalty = 1.1}, true},
};

}  // namespace

std::span<const SamplerOp> sampler_ops() {
  return kOps;
}

SamplerInputs sampler_inputs(size_t vocab) {
  SamplerInputs in{.vocab = vocab};
  for (size_t i = 0; i < kVectors; ++i) in.logits.push_back(normal_logits(vocab, 1000 + i, 2.5));
  in.top.assign(kVectors, 0);
  for (size_t i = 0; i < kVectors; ++i) {
    for (size_t t = 1; t < vocab; ++t) {
      if (in.logits[i][t] > in.logits[i][static_cast<size_t>(in.top[i])]) {
        in.top[i] = static_cast<int32_t>(t);
      }
    }
  }
  in.history.resize(64);
  SplitMix64 ids{7};
  for (int32_t& id : in.history) id = static_cast<int32_t>(ids.next() % vocab);
  return in;
}

SamplerMeasure measure_sampler_op(const SamplerInputs& in, const SamplerOp& op, int64_t calls, int64_t runs) {
  Sampler sampler(static_cast<int64_t>(in.vocab), op.params);
  const std::span<const int32_t> hist = op.history ? std::span<const int32_t>(in.history) : std::span<const int32_t>();
  SamplerMeasure m{.history_tokens = hist.size()};
  uint64_t n_calls = 0;
  for (int64_t r = -1; r < runs; ++r) {  // r = -1 is the warm-up
    const auto start = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < calls; ++c) {
      const size_t i = static_cast<size_t>(c) % kVectors;
      const int32_t token = sampler.sample(in.logits[i], hist);
      if (op.params.temperature == 0 && token != in.top[i])
        fail("bench sampler: argmax chose {}, the largest logit is at {}", token, in.top[i]);
      m.checksum += static_cast<uint64_t>(token);
      ++n_calls;
    }
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r >= 0) m.ms.push_back(elapsed / static_cast<double>(calls));
  }
  if (n_calls != static_cast<uint64_t>(calls * (runs + 1))) {
    fail("bench sampler: miscounted calls");
  }
  m.summary = summarize(m.ms);
  return m;
}

nlohmann::json sampler_record(const SamplerOp& op, const SamplerMeasure& m, size_t vocab, int64_t calls, int64_t runs) {
  nlohmann::json record = bench_context(1, best_isa());
  record["bench"] = "sampler";
  record["op"] = op.name;
  record["vocab"] = vocab;
  record["temperature"] = op.params.temperature;
  record["top_k"] = op.params.top_k;
  record["top_p"] = op.params.top_p;
  record["min_p"] = op.params.min_p;
  record["repetition_penalty"] = op.params.repetition_penalty;
  record["history_tokens"] = m.history_tokens;
  record["calls_per_run"] = calls;
  record["runs"] = runs;
  record["samples_ms"] = m.ms;
  record["ms_median"] = m.summary.median;
  record["ms_min"] = m.summary.min;
  record["ms_max"] = m.summary.max;
  record["token_checksum"] = m.checksum;
  return record;
}

}  // namespace nanoinfer::bench
