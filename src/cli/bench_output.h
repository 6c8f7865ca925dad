// What the bench commands print about the records they append.
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "bench/bench_record.h"

namespace nanoinfer::cli {

// Appends a run's one record to `file` and says so on stdout.
inline void append_record_and_say(const nlohmann::json& record, const std::string& file) {
  bench::append_bench_record(record, file);
  fmt::print("appended to {}\n", file);
}

}  // namespace nanoinfer::cli
