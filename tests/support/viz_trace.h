// The structure of a viz trace (docs/VIZ.md), checked field by field, for the committed
// fixture now and for the traces `nanoinfer viz` writes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace nanoinfer::test {

// "" when `trace` has every field of format version 1 with the right type, shape and range
// (ids inside the vocabulary, candidates by descending logit, attention [n_layers][n_heads]
// [P + i] with rows summing to 1 within `row_sum_tolerance`, the race's work as cached and
// recomputed decoding must do it, both races ending with the chosen tokens); otherwise the
// first problem found, naming its place.
std::string viz_trace_problem(const nlohmann::json& trace, double row_sum_tolerance = 1e-3);

}  // namespace nanoinfer::test
