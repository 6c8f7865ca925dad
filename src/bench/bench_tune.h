// bench tune: the per-machine tuner (nanoinfer/tuning.h) as a benchmark
// (src/bench/bench_tune.cpp): the product shapes of a model tuned, the kept rules merged into
// the tuning cache, one record per shape.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "nanoinfer/model.h"
#include "nanoinfer/tuning.h"
#include "nanoinfer/tuning_cache.h"

namespace nanoinfer::bench {

struct TuneSettings {
  int64_t prefill_tokens = 64;  // tokens per prefill call (0: decode only)
  int64_t rounds = 15;
  double min_gain = 0.03;
  double max_p = 0.01;
};

// The fewest rounds in which a candidate winning every one reaches the sign test's p <= max_p.
int rounds_to_reach(double max_p);

// Every product shape of `model` tuned (Model::tune).
std::vector<TunedShape> tune_shapes(const Model& model, const TuneSettings& settings);

// The cache of this CPU, ISA and thread count with `shapes` merged in: this model's shapes
// replace their earlier rules (the default rule where none was kept); other models' stay.
struct TuningUpdate {
  std::filesystem::path file;
  Tuning tuning;
  size_t kept = 0;  // shapes whose best rule was kept
};
TuningUpdate merge_tuning(const std::vector<TunedShape>& shapes, const std::string& cpu, Isa isa, int threads);

// The record of one tuned shape ("bench": "tune"), the model named `model`.
nlohmann::json tune_record(const TunedShape& t, const std::string& model, int threads, Isa isa,
                           const TuneSettings& settings);

}  // namespace nanoinfer::bench
