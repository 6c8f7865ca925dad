#include "bench_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include "nanoinfer/atomic_write.h"
#include "nanoinfer/error.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer::bench {
namespace {

// A figure of a bench kind: the field, which way is better, and where its spread is read
// (a field holding the samples, and fields holding extremes such as min/max).
struct Figure {
  const char* field;
  bool higher_is_better;
  const char* samples;                // "" when the record keeps no samples
  std::vector<const char*> extremes;  // fields bounding the samples (min, max, best)
};

struct Kind {
  const char* bench;
  std::vector<const char*> key;  // the fields naming the test (beside the machine's)
  std::vector<Figure> figures;
};

// Every bench kind compare knows. A new kind of record is one row here.
const std::vector<Kind>& kinds() {
  static const std::vector<Kind> table = {
      {"generate",
       {"model_filename", "dtype", "type_k", "n_prompt", "n_gen", "n_depth", "tuned"},
       {{"median_ts", true, "samples_ts", {"min_ts", "max_ts"}}}},
      {"generate-cache-ab",
       {"model_filename", "dtype", "type_k", "n_prompt", "n_gen"},
       {{"cached_median_ts", true, "cached_samples_ts", {"cached_min_ts", "cached_max_ts"}},
        {"uncached_median_ts", true, "uncached_samples_ts", {"uncached_min_ts", "uncached_max_ts"}}}},
      {"generate-constrained",
       {"model_filename", "dtype", "grammar", "n_prompt", "n_gen"},
       {{"constrained_median_ts", true, "", {"constrained_min_ts"}},
        {"mask_ms_per_token_median", false, "", {"mask_ms_per_token_min"}}}},
      {"generate-speculative",
       {"model_filename", "dtype", "speculation", "n_prompt", "n_gen"},
       {{"speculative_median_ts", true, "", {"speculative_min_ts", "speculative_max_ts"}}}},
      {"bandwidth", {"bytes"}, {{"median_gbps", true, "samples_gbps", {"min_gbps", "max_gbps"}}}},
      {"compute", {"shape", "weight_type"}, {{"median_gflops", true, "samples_gflops", {}}}},
      {"load", {"model", "weight_type"}, {{"load_seconds_median", false, "load_seconds", {"load_seconds_min"}}}},
      {"tokenize",
       {"model", "input"},
       {{"warm_mb_per_s_median", true, "", {"warm_mb_per_s_best"}},
        {"cold_mb_per_s_median", true, "", {"cold_mb_per_s_best"}}}},
      {"sampler", {"op", "vocab", "top_k", "top_p"}, {{"ms_median", false, "samples_ms", {}}}},
      {"kernels",
       {"kernel", "weight_type", "rows", "cols", "batch", "layout"},
       {{"median_gflops", true, "samples_gflops", {}}}},
      {"serve", {"model", "prompt", "clients", "requests", "max_tokens"}, {{"tokens_per_s", true, "", {}}}},
      {"serve-itl",
       {"model", "streams", "long_tokens"},
       {{"during_median_s", false, "", {}}, {"ratio_median", false, "", {}}}},
  };
  return table;
}

const Kind* kind_of(const nlohmann::json& r) {
  if (!r.is_object() || !r.contains("bench") || !r["bench"].is_string()) return nullptr;
  const std::string& name = r["bench"].get_ref<const std::string&>();
  for (const Kind& k : kinds()) {
    if (name == k.bench) return &k;
  }
  return nullptr;
}

// A line of a results file as a record: one nested too deep is said so; anything else that is
// not a JSON object, malformed JSON included, is "not a JSON object".
nlohmann::json record_of(std::string_view line, const std::string& where) {
  check_json_depth(line, where);
  nlohmann::json r;
  std::string problem;
  if (!try_parse_json(line, r, problem) || !r.is_object()) {
    fail("{}: not a JSON object (one bench record per line)", where);
  }
  return r;
}

bool discarded(const nlohmann::json& r) {
  return r.contains("discarded") && !r["discarded"].is_null();
}

// A field's value or null (a missing field matches only a missing field).
nlohmann::json field(const nlohmann::json& r, const char* name) {
  const auto it = r.find(name);
  return it == r.end() ? nlohmann::json(nullptr) : *it;
}

bool same_test(const Kind& k, const nlohmann::json& a, const nlohmann::json& b) {
  for (const char* f : {"cpu", "isa", "threads"}) {
    if (field(a, f) != field(b, f)) return false;
  }
  for (const char* f : k.key) {
    if (field(a, f) != field(b, f)) return false;
  }
  return true;
}

std::optional<double> number(const nlohmann::json& r, const char* name) {
  const nlohmann::json v = field(r, name);
  if (!v.is_number()) return std::nullopt;
  const double x = v.get<double>();
  if (!std::isfinite(x)) return std::nullopt;
  return x;
}

// (max - min) / value over the value, its samples and its extremes; 0 with nothing beside it.
double relative_spread(const Figure& f, const nlohmann::json& r, double value) {
  double lo = value, hi = value;
  auto see = [&](double x) { lo = std::min(lo, x), hi = std::max(hi, x); };
  if (*f.samples != '\0') {
    const nlohmann::json s = field(r, f.samples);
    if (s.is_array()) {
      for (const nlohmann::json& x : s) {
        if (x.is_number() && std::isfinite(x.get<double>())) see(x.get<double>());
      }
    }
  }
  for (const char* e : f.extremes) {
    if (const auto x = number(r, e)) see(*x);
  }
  return value > 0 ? (hi - lo) / value : 0.0;
}

// Above 1 means `value` is the better of the two.
double speed_ratio(const Figure& f, double value, double reference) {
  if (value <= 0 || reference <= 0) return 0.0;
  return f.higher_is_better ? value / reference : reference / value;
}

std::string test_name(const Kind& k, const nlohmann::json& r) {
  std::string name = fmt::format("isa={} threads={}", field(r, "isa").dump(), field(r, "threads").dump());
  for (const char* f : k.key) {
    const nlohmann::json v = field(r, f);
    if (v.is_null()) continue;
    name += fmt::format(" {}={}", f, v.is_string() ? v.get<std::string>() : v.dump());
  }
  return name;
}

}  // namespace

// (Indices into kinds(), whose types are this file's own.)
struct RecordComparison::Slot {
  size_t kind, figure;  // kinds()[kind].figures[figure]
  size_t candidate;
  FigureVerdict v;
  double last_spread = 0;  // the relative spread of the last comparable record's figure
};

RecordComparison::RecordComparison(std::vector<nlohmann::json> candidates, const CompareOptions& options)
    : candidates_(std::move(candidates)), options_(options) {
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const nlohmann::json& c = candidates_[i];
    const Kind* k = kind_of(c);
    if (k == nullptr || discarded(c)) continue;
    for (size_t fi = 0; fi < k->figures.size(); ++fi) {
      const Figure& f = k->figures[fi];
      const std::optional<double> value = number(c, f.field);
      if (!value) continue;
      Slot s{static_cast<size_t>(k - kinds().data()), fi, i, {}, 0};
      s.v.bench = k->bench;
      s.v.test = test_name(*k, c);
      s.v.figure = f.field;
      s.v.value = *value;
      slots_.push_back(std::move(s));
    }
  }
}

void RecordComparison::add_earlier(const nlohmann::json& h) {
  const Kind* k = kind_of(h);
  if (k == nullptr || discarded(h)) return;
  const size_t kind = static_cast<size_t>(k - kinds().data());
  for (Slot& s : slots_) {
    if (s.kind != kind || !same_test(*k, candidates_[s.candidate], h)) continue;
    const Figure& f = k->figures[s.figure];
    const std::optional<double> x = number(h, f.field);
    if (!x || *x <= 0) continue;
    FigureVerdict& v = s.v;
    if (v.earlier == 0 || speed_ratio(f, *x, v.best) > 1) v.best = *x;
    v.last = *x;
    s.last_spread = relative_spread(f, h, *x);
    ++v.earlier;
  }
}

std::vector<FigureVerdict> RecordComparison::verdicts() const {
  std::vector<FigureVerdict> out;
  out.reserve(slots_.size());
  for (const Slot& s : slots_) {
    FigureVerdict v = s.v;
    if (v.earlier > 0) {
      const Figure& f = kinds()[s.kind].figures[s.figure];
      v.ratio_best = speed_ratio(f, v.value, v.best);
      v.ratio_last = speed_ratio(f, v.value, v.last);
      v.noise = std::max({options_.min_noise, relative_spread(f, candidates_[s.candidate], v.value), s.last_spread});
      v.regression = v.ratio_last < 1.0 - v.noise;
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<FigureVerdict> compare_records(const std::vector<nlohmann::json>& history,
                                           const std::vector<nlohmann::json>& candidates,
                                           const CompareOptions& options) {
  RecordComparison comparison(candidates, options);
  for (const nlohmann::json& h : history) comparison.add_earlier(h);
  return comparison.verdicts();
}

BenchRecordReader::BenchRecordReader(const std::string& file) : file_(file), lines_(file == "-" ? "./-" : file) {}

bool BenchRecordReader::next(nlohmann::json& record) {
  for (std::string line; lines_.next(line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    record = record_of(line, fmt::format("{}:{}", file_, lines_.line_number()));
    return true;
  }
  return false;
}

std::vector<nlohmann::json> read_bench_records(const std::string& file) {
  BenchRecordReader in(file);
  std::vector<nlohmann::json> records;
  for (nlohmann::json r; in.next(r);) records.push_back(std::move(r));
  return records;
}

std::pair<std::vector<nlohmann::json>, std::vector<nlohmann::json>> split_last_run(
    std::vector<nlohmann::json> records) {
  if (records.empty()) return {};
  const nlohmann::json run = field(records.back(), "run");
  size_t first = records.size() - 1;
  if (!run.is_null()) {
    while (first > 0 && field(records[first - 1], "run") == run) --first;
  }
  std::vector<nlohmann::json> candidates(std::make_move_iterator(records.begin() + static_cast<ptrdiff_t>(first)),
                                         std::make_move_iterator(records.end()));
  records.resize(first);
  return {std::move(records), std::move(candidates)};
}

CompareReading compare_results_file(const std::string& file, const std::string& run_file,
                                    const CompareOptions& options) {
  CompareReading out;
  std::vector<nlohmann::json> run;  // the candidates, held
  size_t history = 0;               // the records of `file` before them (all of it with run_file)
  const auto held = [&](size_t n) { out.peak_records_held = std::max(out.peak_records_held, n); };
  const auto too_many = [&](const std::string& where) {
    fail("{}: the run to compare holds more than {} records (bench compare holds one run in memory)", where,
         kMaxRunRecords);
  };
  if (run_file.empty()) {
    // The trailing group of one non-null "run" (split_last_run's rule): a null run is a group of
    // one, a different run starts a new group. Only the current group is held, up to the cap.
    BenchRecordReader in(file);
    size_t records = 0, group = 0;
    nlohmann::json group_run;
    for (nlohmann::json r; in.next(r);) {
      held(run.size() + 1);
      ++records;
      nlohmann::json id = field(r, "run");
      if (group == 0 || id.is_null() || group_run.is_null() || id != group_run) {
        run.clear();
        group = 0;
        group_run = std::move(id);
      }
      if (++group <= kMaxRunRecords) run.push_back(std::move(r));
    }
    if (group > kMaxRunRecords) too_many(file);
    history = records - group;
  } else {
    BenchRecordReader in(run_file);
    for (nlohmann::json r; in.next(r);) {
      held(run.size() + 1);
      if (run.size() == kMaxRunRecords) too_many(run_file);
      run.push_back(std::move(r));
    }
    history = SIZE_MAX;
  }
  out.candidates = run.size();
  RecordComparison comparison(std::move(run), options);
  BenchRecordReader in(file);
  nlohmann::json h;
  for (size_t n = 0; n < history && in.next(h); ++n) {
    held(out.candidates + 1);
    comparison.add_earlier(h);
  }
  out.verdicts = comparison.verdicts();
  return out;
}

std::string format_verdicts(const std::vector<FigureVerdict>& verdicts) {
  std::string out;
  size_t regressions = 0, compared = 0;
  for (const FigureVerdict& v : verdicts) {
    out += fmt::format("{} [{}] {} = {:.6g}: ", v.bench, v.test, v.figure, v.value);
    if (v.earlier == 0) {
      out += "new (no earlier record of this machine and test)\n";
      continue;
    }
    ++compared;
    regressions += v.regression ? 1 : 0;
    out += fmt::format("x{:.3f} of the best ({:.6g}), x{:.3f} of the last ({:.6g}) of {} earlier; noise {:.1f}%: {}\n",
                       v.ratio_best, v.best, v.ratio_last, v.last, v.earlier, 100.0 * v.noise,
                       v.regression ? "REGRESSION" : "ok");
  }
  out += fmt::format("{} figure(s) compared, {} without a baseline, {} regression(s)\n", compared,
                     verdicts.size() - compared, regressions);
  return out;
}

void discard_bench_records(const std::string& file, const std::vector<size_t>& lines, const std::string& reason) {
  if (reason.find_first_not_of(" \t") == std::string::npos) fail("bench discard: --reason must say why");
  if (lines.empty()) fail("bench discard: no --line given");
  std::set<size_t> wanted;
  for (const size_t n : lines) {
    if (n < 1) fail("{}: no line {} (lines are numbered from 1)", file, n);
    if (!wanted.insert(n).second) fail("{}: line {} is given twice", file, n);
  }
  // The file is read a line at a time and written as it is read, to a temporary beside it that
  // replaces it only when every named line was found and marked.
  LineReader in(file == "-" ? "./-" : file);
  AtomicFileWriter out(file);
  for (std::string line; in.next(line);) {
    const size_t n = in.line_number();
    if (wanted.contains(n)) {
      nlohmann::json r = record_of(line, fmt::format("{}:{}", file, n));
      if (discarded(r)) fail("{}:{}: already discarded ({})", file, n, excerpt(r["discarded"].dump()));
      r["discarded"] = reason;
      line = r.dump();
    }
    line += '\n';
    out.write(line);
  }
  if (*wanted.rbegin() > in.line_number()) {
    fail("{}: no line {} (the file has {} lines)", file, *wanted.rbegin(), in.line_number());
  }
  out.commit();
}

}  // namespace nanoinfer::bench
