// bench sampler: what choosing a token costs, per call, on one thread
// (src/bench/bench_sampler.cpp). Each call is Sampler::sample, as the generation step runs it:
// the logits widened to double, filtered, drawn. The logits are pseudo-random normals with a
// spread of 2.5 (a model's are of that order); 8 vectors are cycled, so no two calls in a row
// see the same.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench_record.h"
#include "nanoinfer/sampler.h"

namespace nanoinfer::bench {

// One operation measured: its sampler settings, and whether it samples after a history (the
// chain's repetition penalty needs one to work on).
struct SamplerOp {
  const char* name;
  SamplerParams params;
  bool history;
};

// argmax (temperature 0), top-k 40, top-p 0.9, and the whole chain (repetition penalty 1.1 over
// a 64-token history, temperature 0.7, top-k 40, top-p 0.9, min-p 0.05, the draw).
std::span<const SamplerOp> sampler_ops();

// What every operation samples from: the logit vectors, each one's argmax (the greedy op is
// checked against it) and the history, all from fixed seeds.
struct SamplerInputs {
  size_t vocab = 0;
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> top;
  std::vector<int32_t> history;
};
SamplerInputs sampler_inputs(size_t vocab);

struct SamplerMeasure {
  std::vector<double> ms;  // per call, one entry per timed run
  Summary summary;
  uint64_t checksum = 0;  // the sum of the tokens drawn, warm-up included
  size_t history_tokens = 0;
};

// One warm-up and `runs` timed runs of `calls` calls of op. Throws Error when the greedy op
// does not choose the largest logit.
SamplerMeasure measure_sampler_op(const SamplerInputs& in, const SamplerOp& op, int64_t calls, int64_t runs);

// The record of one operation ("bench": "sampler").
nlohmann::json sampler_record(const SamplerOp& op, const SamplerMeasure& m, size_t vocab, int64_t calls, int64_t runs);

}  // namespace nanoinfer::bench
