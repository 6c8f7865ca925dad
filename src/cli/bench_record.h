// What every benchmark records beside its numbers, and where it records them: one JSON line
// per run in bench/results.jsonl, so results stay comparable across machines and commits.
#pragma once

#include <cstddef>
#include <filesystem>
#include <vector>
#include <nlohmann/json.hpp>

namespace nanoinfer {

// {"cpu", "logical_cores", "threads", "commit", "build_type", "timestamp" (UTC, ISO 8601),
//  "nanoinfer_version"}. The commit is `git rev-parse --short HEAD` of the source checkout
// (or of the working directory), with "-dirty" when tracked files have changes, or "unknown".
nlohmann::json bench_context(int threads);

// Appends `record` as one line, creating the file and its directory if needed. Throws Error.
// Fails (one line) unless `file` can be appended to: its directory exists (it is not created)
// and the file opens for appending. Benchmarks call it before any work.
void check_output_path(const std::filesystem::path& file);
void append_bench_record(const nlohmann::json& record,
                         const std::filesystem::path& file = "bench/results.jsonl");

// The process's peak resident set size so far.
size_t peak_rss_bytes();

// The spread of repeated measurements: every benchmark reports median and minimum.
struct Summary {
  double median = 0, min = 0, max = 0, mean = 0, stddev = 0;
};
Summary summarize(std::vector<double> values);  // values non-empty

}  // namespace nanoinfer
