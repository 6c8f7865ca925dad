// `bench compare`: a run's records set against the earlier records of the same machine and
// test in a JSON-lines results file (src/bench/bench_compare.cpp).
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

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nanoinfer/file_io.h"

namespace nanoinfer::bench {

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

// compare_records with the history fed one record at a time, oldest first: only the candidates
// are held, so a results file of any length is compared in bounded memory. The verdicts are
// those compare_records gives for the same records.
class RecordComparison {
 public:
  explicit RecordComparison(std::vector<nlohmann::json> candidates, const CompareOptions& options = {});
  void add_earlier(const nlohmann::json& record);
  std::vector<FigureVerdict> verdicts() const;

 private:
  struct Slot;  // one figure of one candidate, with what the history said of it so far
  std::vector<nlohmann::json> candidates_;
  std::vector<Slot> slots_;
  CompareOptions options_;
};

// The records of a JSON-lines results file, one at a time: the file is read through
// file_io.h's LineReader (a regular file only: a FIFO, a device or a directory is a one-line
// error, never a hang; a line is capped at kMaxLineBytes), blank lines are skipped, and a line
// that is not a JSON object (or nests too deep: json_limits.h) is an Error naming the file and
// line. "-" is a file of that name, not stdin (compare reads its file twice).
class BenchRecordReader {
 public:
  explicit BenchRecordReader(const std::string& file);
  bool next(nlohmann::json& record);                           // false at the end
  size_t line_number() const { return lines_.line_number(); }  // of the record last returned

 private:
  std::string file_;
  LineReader lines_;
};

// All the records of a file (BenchRecordReader), for small files and tests.
std::vector<nlohmann::json> read_bench_records(const std::string& file);

// Splits a file's records into (history, candidates): the candidates are the trailing records
// of the last line's "run" (one process's records); without a "run" field, the last line alone.
std::pair<std::vector<nlohmann::json>, std::vector<nlohmann::json>> split_last_run(std::vector<nlohmann::json> records);

// The most records of one run bench compare holds (a run of `bench kernels` writes ~50).
inline constexpr size_t kMaxRunRecords = 4096;

struct CompareReading {
  std::vector<FigureVerdict> verdicts;
  size_t candidates = 0;         // the records compared (the newest run's, or run_file's)
  size_t peak_records_held = 0;  // parsed records alive at once, at most: the run's plus the one read
};

// What `bench compare` computes: with run_file empty, `file` is read twice, first to find its
// newest run (split_last_run's candidates, held), then to feed every earlier record through a
// RecordComparison; with run_file, its records are the candidates and all of `file` is history.
// The verdicts are compare_records' for the same split. Throws Error for a file that cannot be
// read, a line that is not a record, or a run of more than kMaxRunRecords records.
CompareReading compare_results_file(const std::string& file, const std::string& run_file,
                                    const CompareOptions& options = {});

// The report `bench compare` prints, a line per figure, ending in the regressions' count.
std::string format_verdicts(const std::vector<FigureVerdict>& verdicts);

// Marks the records at `lines` (1-based) of `file` discarded with `reason`, streaming the file
// into a temporary beside it that is renamed over it when complete (nanoinfer/atomic_write.h:
// a target that is a symbolic link, a FIFO or a device is refused, and a failure leaves the
// file as it was). Throws Error for a line out of range or given twice, a line that is not a
// record, an empty reason, or a record already discarded.
void discard_bench_records(const std::string& file, const std::vector<size_t>& lines, const std::string& reason);

}  // namespace nanoinfer::bench
