// bench generate --json / --json-schema FILE / --grammar FILE: what constrained decoding costs
// (src/cli/bench_constrained.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common_options.h"
#include "nanoinfer/engine.h"

namespace nanoinfer::cli {

// Greedy decoding of `prompt` for up to n_gen steps, plain and under the grammar, alternated
// `repetitions` times after one warm-up of each (so drift in machine load hits both alike);
// plus the grammar's own costs: building the vocabulary trie (once per tokenizer, as serve
// does at start), compiling the grammar per request (schema -> GBNF -> rules -> processor),
// and the mask per token, timed alone by replaying the constrained run's tokens through a
// fresh processor. `record` carries the provenance fields; returns it filled, and a note.
std::pair<nlohmann::json, std::string> measure_constrained(const GrammarFlags& grammar, OpenedModel& m,
                                                           const std::vector<int32_t>& prompt, size_t n_gen,
                                                           int64_t repetitions, nlohmann::json record);

}  // namespace nanoinfer::cli
