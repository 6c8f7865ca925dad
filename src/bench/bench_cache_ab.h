// bench generate --cache-ab: decoding with the KV cache against recomputing the whole sequence
// for every token (src/bench/bench_cache_ab.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nanoinfer/open_model.h"

namespace nanoinfer::bench {

// The same greedy decode of n_gen tokens after `prompt` once with the cache and once by
// recomputing the whole context for every token, alternated `repetitions` times so drift in
// machine load hits both alike. Asserts identical tokens and the positions each path pushed
// (the prompt then one per step cached; n_prompt + k at step k recomputed). Per path:
// tokens/s, time to first token, ms per later step. `record` carries the provenance fields;
// returns it filled, and a note.
std::pair<nlohmann::json, std::string> measure_cache_ab(const OpenedModel& m, const std::vector<int32_t>& prompt,
                                                        size_t n_gen, int64_t repetitions, nlohmann::json record);

}  // namespace nanoinfer::bench
