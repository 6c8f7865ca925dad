// `bench compare`: a run's records set against the earlier records of the same machine and
// test in a JSON-lines results file (src/cli/bench_compare.cpp).
//
// Which records are comparable: the same "bench" name, the same machine ("cpu", "isa",
// "threads") and the same test (the key fields of the bench kind, e.g. the model, weight type
// and prompt/decode lengths of a `bench generate` row; a missing field matches only a missing
// field), and not marked "discarded" (a string: why, e.g. "the host was busy"). Each kind has
// its figures (tokens/s, GB/s, ms per call, ...), each with its direction and where its spread
// comes from (the record's samples, or its min/max fields).
//
// For each figure of a candidate record: its ratio to the best earlier figure and to the last
// one, both as "speed" (above 1 is better, whichever way the figure points). It is a
// regression when the ratio to the last record is below 1 - noise, noise being the larger
// relative spread ((max - min) / median) of the two records, and at least `min_noise`: a
// slowdown the two runs' own scatter cannot explain.
#pragma once

#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

namespace nanoinfer::cli {

struct CompareOptions {
  double min_noise = 0.03;  // the smallest noise a figure is granted (single-sample records have none)
};

struct FigureVerdict {
  std::string bench;   // the candidate's "bench"
  std::string test;    // its key fields, "name=value ..." for the report
  std::string figure;  // the field compared
  double value = 0;
  size_t earlier = 0;  // comparable earlier records (0: no baseline, ratios unset)
  double best = 0, last = 0;
  double ratio_best = 0, ratio_last = 0;  // speed ratios, > 1 = faster than that record
  double noise = 0;                       // the relative spread the regression test allowed
  bool regression = false;
};

// The figures of every candidate against `history` (earlier records, oldest first; lines of
// other kinds, unknown benches and discarded records are skipped). A candidate of a bench kind
// compare does not know is skipped too. Never throws on a record's content: a figure missing
// from a record makes that record not comparable for it.
std::vector<FigureVerdict> compare_records(const std::vector<nlohmann::json>& history,
                                           const std::vector<nlohmann::json>& candidates,
                                           const CompareOptions& options = {});

// Records of a JSON-lines file, one object per non-empty line. Throws Error naming the file
// and line for a line that is not a JSON object.
std::vector<nlohmann::json> read_bench_records(const std::string& file);

// Splits a file's records into (history, candidates): the candidates are the trailing records
// of the last line's "run" (one process's records); without a "run" field, the last line alone.
std::pair<std::vector<nlohmann::json>, std::vector<nlohmann::json>> split_last_run(std::vector<nlohmann::json> records);

// The report `bench compare` prints, a line per figure, ending in the regressions' count.
std::string format_verdicts(const std::vector<FigureVerdict>& verdicts);

// Marks the records at `lines` (1-based) of `file` discarded with `reason`, rewriting the file
// through a temporary in its directory and a rename. Throws Error for a line out of range, a
// line that is not a record, an empty reason, or a record already discarded.
void discard_bench_records(const std::string& file, const std::vector<size_t>& lines, const std::string& reason);

}  // namespace nanoinfer::cli
