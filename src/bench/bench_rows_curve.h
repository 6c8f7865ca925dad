// bench generate --rows-curve N,..: what a pass of n rows costs against one decode step
// (src/bench/bench_rows_curve.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nanoinfer/open_model.h"

namespace nanoinfer::bench {

// The seconds of a forward pass of each row count of `rows` (all logits, as speculative
// verification runs it) after `prompt`, each rolled back again: the pass's tokens cycle
// through the prompt's (any tokens cost the same). The counts alternate inside each of
// `rounds` rounds, after one warm-up round, so drift in machine load hits all alike.
// seconds[i] holds rows[i]'s `rounds` times. Throws Error when a count is 0 or does not fit
// the cache after the prompt.
std::vector<std::vector<double>> time_row_passes(const OpenedModel& m, const std::vector<int32_t>& prompt,
                                                 const std::vector<size_t>& rows, int64_t rounds);

// --rows-curve: time_row_passes over 1 and `rows` (1 is added when missing: it is the decode
// step every count is set against) with 4 x `rounds` rounds; the median and minimum
// milliseconds of each count and their ratios to 1 row's. `record` carries the provenance
// fields; returns it filled, and a note.
std::pair<nlohmann::json, std::string> measure_rows_curve(const OpenedModel& m, const std::vector<int32_t>& prompt,
                                                          std::vector<size_t> rows, int64_t rounds,
                                                          nlohmann::json record);

}  // namespace nanoinfer::bench
