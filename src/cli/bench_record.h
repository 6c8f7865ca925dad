// What every benchmark records beside its numbers, and where it records them: one JSON line
// per run in bench/results.jsonl, so results stay comparable across machines and commits.
// Also the read-bandwidth probe that decode speed is set against (the roofline).
#pragma once

#include <cstddef>
#include <filesystem>
#include <vector>
#include <nlohmann/json.hpp>

#include "nanoinfer/thread_pool.h"

namespace nanoinfer {

// {"cpu", "logical_cores", "threads", "commit", "build_type", "timestamp" (UTC, ISO 8601),
//  "nanoinfer_version"}. The commit is `git rev-parse --short HEAD` of the source checkout
// (or of the working directory), with "-dirty" when tracked files have changes, or "unknown".
nlohmann::json bench_context(int threads);

// Checks, before a benchmark runs, that its record can be appended to `file`: its directory
// exists (it is not created, so a mistyped --results fails instead of growing a tree) and
// the file, if present, is a writable regular file. Throws Error naming the path.
void check_bench_results_path(const std::filesystem::path& file);

// Appends `record` as one line, creating the file (not its directory). A failed write
// truncates the file back, so it never ends in half a line. Throws Error.
void append_bench_record(const nlohmann::json& record,
                         const std::filesystem::path& file = "bench/results.jsonl");

// The process's peak resident set size so far.
size_t peak_rss_bytes();

// The spread of repeated measurements: every benchmark reports median and minimum.
struct Summary {
  double median = 0, min = 0, max = 0, mean = 0, stddev = 0;
};
Summary summarize(std::vector<double> values);  // values non-empty

// The machine's read bandwidth as decode sees it: `runs` timed passes of a sequential read of
// a `bytes` buffer (make it much larger than the last-level cache; it is allocated and
// written once, on huge pages where the OS grants them, before the first pass) split across
// `pool` in chunks of whole MiB. Returns GB/s (1e9 bytes per second) of each pass.
// Throws Error when bytes is below 1 MiB or runs below 1.
std::vector<double> measure_read_bandwidth(ThreadPool& pool, size_t bytes, int runs);

}  // namespace nanoinfer
