// What every benchmark records beside its numbers, and where it records them: one JSON line
// per run in bench/results.jsonl, so results stay comparable across machines and commits.
// Also the read-bandwidth probe that decode speed is set against (the roofline).
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nanoinfer/isa.h"
#include "nanoinfer/thread_pool.h"

namespace nanoinfer::bench {

// The provenance every bench record carries, written here and nowhere else (every `bench`
// subcommand, and tools/serve-bench.mjs through `bench record`):
//   "commit"        `git rev-parse --short HEAD` of the source checkout (or of the working
//                   directory), "unknown" outside a checkout;
//   "dirty"         whether tracked files differ from that commit, the records bench/*.jsonl
//                   aside (null when unknown);
//   "cpu"           /proc/cpuinfo's model name; "cpu_flags": the features detection saw
//                   (CPUID + OS state, minus NANOINFER_CPU_DISABLE), cpu_feature_name spellings;
//   "isa"           the kernel tier the run used; "threads": its thread count;
//   "logical_cores", "build_type", "nanoinfer_version";
//   "timestamp"     UTC, ISO 8601, when the record was made;
//   "command_line"  the process's arguments (/proc/self/cmdline), shell-quoted where needed;
//   "run"           one id per process, so `bench compare` can tell which records one run made.
// `command_line` replaces the process's own arguments when not empty (`bench record` passes
// the script's).
nlohmann::json bench_context(int threads, Isa isa, const std::string& command_line = "");

// The fields bench_context writes, in its order.
const std::vector<std::string>& provenance_fields();

// `bench record`'s input: every non-blank line of stdin a JSON object with a "bench" name (a
// string) and none of the provenance fields, each completed with
// bench_context(threads, isa, command_line). Every line is read and checked before any record is
// returned, so bad input appends nothing; throws Error naming the first bad line.
std::vector<nlohmann::json> records_from_stdin(int threads, Isa isa, const std::string& command_line);

// Checks, before a benchmark runs, that its record can be appended to `file`: its directory
// exists (it is not created, so a mistyped --results fails instead of growing a tree) and
// the file, if present, is a writable regular file. Throws Error naming the path.
void check_bench_results_path(const std::filesystem::path& file);

// Appends `record` as one line, creating the file (not its directory). A failed write
// truncates the file back, so it never ends in half a line. Throws Error.
void append_bench_record(const nlohmann::json& record, const std::filesystem::path& file = "bench/results.jsonl");

// The process's peak resident set size so far.
size_t peak_rss_bytes();

// The spread of repeated measurements: every benchmark reports median and minimum.
struct Summary {
  double median = 0, min = 0, max = 0, mean = 0, stddev = 0;
};
Summary summarize(std::vector<double> values);  // values non-empty

// A rate's spread in a record, in tokens per second: "<side>_median_ts", "<side>_min_ts" and,
// unless `with_max` is false, "<side>_max_ts" ("median_ts" and so on when `side` is empty).
void put_rates(nlohmann::json& record, const std::string& side, const Summary& s, bool with_max = true);

// The machine's read bandwidth as decode sees it: `runs` timed passes of a sequential read of
// a `bytes` buffer (make it much larger than the last-level cache; it is allocated and
// written once, on huge pages where the OS grants them, before the first pass) split across
// `pool` in chunks of whole MiB. Returns GB/s (1e9 bytes per second) of each pass.
// Throws Error when bytes is below 1 MiB or runs below 1.
std::vector<double> measure_read_bandwidth(ThreadPool& pool, size_t bytes, int runs);

}  // namespace nanoinfer::bench
