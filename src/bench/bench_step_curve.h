// bench generate --step-curve B: what serve's mixed step costs (src/bench/bench_step_curve.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "nanoinfer/open_model.h"

namespace nanoinfer::bench {

// serve's mixed step (--step-curve B): B sequences decoding one token each (after 16-token
// prompts) and c rows of a prompt whose first n_prompt tokens are cached, in one Model::decode
// call (the prompt's rows ask for no logits, as serve's chunks before the last), for each c of
// kStepRows; every cache is truncated back after each step. The c alternate inside each round
// so drift hits all; the median and minimum time of each. c = 0 is a plain decode step of the
// B rows: what `serve --step-tokens` trades (a step of B + c rows against it).
// `record` carries the provenance fields; returns it filled, and a note.
std::pair<nlohmann::json, std::string> measure_step_curve(const OpenedModel& m, const std::vector<int32_t>& prompt,
                                                          size_t decoders, int64_t rounds, nlohmann::json record);

}  // namespace nanoinfer::bench
