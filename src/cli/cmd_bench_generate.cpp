// `nanoinfer bench generate`: prefill and decode speed over -r runs of a fresh sequence (a
// prompt of -p pseudo-random tokens, then -n greedy decode steps), after one warm-up run.
// -p, -n and -t take comma-separated lists, as llama-bench's: every combination is measured
// (the model is opened once per thread count). Each combination gives one "pp" record and
// one "tg" record (decoding after the prompt: llama-bench's "tg N @ d P", n_depth = P), field
// names as llama-bench's where one exists. -o picks what stdout shows (md, csv, json, jsonl);
// the records are appended as JSON lines to --results FILE, by default bench/results.jsonl
// when ./bench exists (inside the repository), else nowhere.
//
// Decode's work counts and roofline: the weight bytes one decode step streams
// (Model::bytes_per_token), the thread-pool barriers per decoded token (counted over -n
// extra decode steps after the runs), and, from a read-bandwidth probe run with the same
// thread count (`bench bandwidth`, --probe-mib), the share of the read roofline reached:
// bytes per token x median decode tokens/s / median probe GB/s.
//
// --rows-curve N,.. times a forward pass of each of those row counts (all logits) at depth -p
// against a one-row pass, alternated: what speculative verification and batched decode pay
// for n rows, in decode steps (median and minimum).
//
// --cache-ab adds the KV cache A/B: the same greedy decode once with the cache and once by
// recomputing the whole sequence for every token, alternating, asserting identical tokens and
// the positions each path pushed; tokens/s, time to first token and ms per later step per path.
//
// --lookup / --draft / --draft-self (as generate's) add the speculative A/B: plain and
// speculative greedy decoding alternating, identical tokens asserted, with the acceptance rate,
// tokens per verification pass and the drafter's share of the time. --prompt-file takes the
// prompt's first -p tokens from a text file instead of pseudo-random ids (prompt lookup needs
// text that repeats itself to draft anything). --draft-oracle P drafts the plain continuation,
// right at each position with probability P: the A/B at a chosen acceptance.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "bench/bench_cache_ab.h"
#include "bench/bench_compare.h"
#include "bench/bench_constrained.h"
#include "bench/bench_generate.h"
#include "bench/bench_record.h"
#include "bench/bench_rows_curve.h"
#include "bench/bench_speculation.h"
#include "bench/bench_step_curve.h"
#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generator.h"
#include "nanoinfer/kv_cache.h"
#include "nanoinfer/thread_pool.h"
#include "speculation_options.h"

namespace nanoinfer::cli {
namespace {

struct BenchFlags {
  ModelFlags model;
  std::vector<int64_t> n_prompt{64};
  std::vector<int64_t> n_gen{32};
  std::vector<int64_t> threads;  // empty: NANOINFER_THREADS (a list too), else {0}
  int64_t repetitions = 5;
  bool cache_ab = false;
  bool compare = false;
  int64_t probe_mib = 1024;
  double compute_gflops = 0;  // the compute probe's figure, for prefill's share of it (0: none)
  std::string format = "md";
  std::string results;  // empty: bench/results.jsonl if ./bench exists, else none
  SpeculationFlags speculation;
  std::optional<double> oracle_rate;  // --draft-oracle
  std::string prompt_file;            // empty: pseudo-random prompt ids
  GrammarFlags grammar;               // --json, --json-schema, --grammar: the constrained A/B
  int64_t step_curve = 0;             // --step-curve B: serve's mixed step cost curve with B decoders
  std::vector<int64_t> rows_curve;    // --rows-curve N,..: a pass of n rows against a decode step
};

// What stdout shows, as llama-bench's -o.
enum class Format { Md, Csv, Json, Jsonl };
Format format_of(const std::string& name) {
  if (name == "md") return Format::Md;
  if (name == "csv") return Format::Csv;
  if (name == "json") return Format::Json;
  if (name == "jsonl") return Format::Jsonl;
  fail(
      "-o takes the output format md, csv, json or jsonl (as llama-bench's), got '{}'; the "
      "records' file is "
      "--results FILE",
      name);
}

// The grammar of --json, --json-schema or --grammar, compiled as generate compiles it.
bench::GrammarUnderTest grammar_under_test(const GrammarFlags& g, const Tokenizer& tok) {
  const std::string name = g.json                        ? std::string("json_object")
                           : !g.json_schema_file.empty() ? "json_schema:" + g.json_schema_file
                                                         : "gbnf:" + g.grammar_file;
  return {name, [&g, &tok](const std::vector<int32_t>& eos, std::shared_ptr<const VocabTrie> trie) {
            return grammar_processor(g, tok, eos, std::move(trie));
          }};
}

// Makes `spec` draft as the flags ask (--draft-oracle: drafts of the plain greedy continuation,
// right with its probability, alone or overriding a draft model's choices); returns how, for
// the record and the note.
std::string attach_drafter(const BenchFlags& f, const Speculation& speculation, const OpenedModel& m, Generator& spec,
                           const std::vector<int32_t>& prompt, size_t n_gen) {
  const std::string described = speculation.describe(/*timed=*/true);
  if (!f.oracle_rate) {
    speculation.attach(spec, m, {.temperature = 0.0});
    return described;
  }
  const double rate = *f.oracle_rate;
  const int32_t vocab = m.tokenizer.vocab_size();
  std::vector<int32_t> truth = bench::greedy_tokens(m, prompt, n_gen);
  if (speculation.enabled()) {
    // The draft model works as usual; the oracle decides which of its drafts are right.
    speculation.attach(spec, m, {.temperature = 0.0}, bench::oracle_override(std::move(truth), rate, vocab));
    return fmt::format("{}; its drafts right with p = {:.2f} (the oracle's choice, the draft model's cost)", described,
                       rate);
  }
  const std::optional<int64_t> k = f.speculation.draft_max;
  spec.set_drafter(bench::make_oracle_drafter(std::move(truth), rate, vocab),
                   k ? DraftLength::fixed(static_cast<size_t>(*k))
                     : DraftLength::adaptive(DraftLength::kDefaultMax, /*timed=*/true));
  return fmt::format("oracle drafts right with p = {:.2f}, {}", rate,
                     k ? fmt::format("k = {}", *k) : fmt::format("adaptive timed k <= {}", DraftLength::kDefaultMax));
}

// The line shown after the table for a pp/tg pair.
std::string generate_note(const BenchFlags& f, const OpenedModel& m, const bench::GenerateMeasure& g, size_t n_prompt,
                          size_t n_gen, const bench::Summary& bandwidth) {
  const bench::WorkCounts& w = g.work;
  const int threads = m.model.options().threads;
  std::string note = fmt::format(
      "pp{} tg{} t{}: time to first token {:.1f} ms (median of {}), decode {:.1f} GB/s effective "
      "({} per token), "
      "peak RSS {}; KV cache {}, {} bytes per position; attention {:.1f}% of the prefill's time, "
      "{:.1f}% of the "
      "decode steps' (one extra pass); decode work: {} bytes and {:.1f} barriers per token, {:.2f} "
      "MFLOP in the "
      "products + {:.2f} MFLOP in attention (mean over depths {}..{}), {:.1f} KiB of activations "
      "read and written by "
      "the products; prefill: {:.2f} MFLOP per prompt token, {:.1f} GFLOP/s at the median",
      n_prompt, n_gen, threads, g.ttft_summary.median * 1e3, f.repetitions, g.effective_gbps,
      format_bytes(static_cast<double>(m.model.bytes_per_token())), format_bytes(static_cast<double>(g.peak_rss)),
      kv_type_name(m.model.options().kv_type), w.kv_bytes_per_position, 100.0 * w.attention_share_prefill,
      100.0 * w.attention_share_decode, m.model.bytes_per_token(), w.barriers_per_token, w.decode_product_flops / 1e6,
      w.decode_attention_flops / 1e6, n_prompt, n_prompt + n_gen - 1, w.decode_activation_bytes / 1024,
      w.prefill_flops / static_cast<double>(n_prompt) / 1e6, g.prefill_gflops);
  if (f.compute_gflops > 0) {
    note += fmt::format(" = {:.1f}% of the compute roofline ({:.1f} GFLOP/s, --compute-gflops)",
                        100.0 * g.prefill_gflops / f.compute_gflops, f.compute_gflops);
  }
  if (f.probe_mib > 0) {
    note += fmt::format(
        "; read bandwidth {:.1f} GB/s median ({:.1f} min, {} MiB, {} threads): {:.1f}% of the "
        "roofline",
        bandwidth.median, bandwidth.min, f.probe_mib, threads, g.roofline_pct);
  } else {
    note += " (no bandwidth probe)";
  }
  return note;
}

// One -p/-n combination on an opened model: its records (pp, tg, and those of the A/Bs the
// flags ask for), and the markdown lines shown after the table.
struct Measured {
  std::vector<nlohmann::json> records;
  std::vector<std::string> notes;
  void add(std::pair<nlohmann::json, std::string> one) {
    records.push_back(std::move(one.first));
    notes.push_back(std::move(one.second));
  }
};

Measured measure(const BenchFlags& f, OpenedModel& m, size_t n_prompt, size_t n_gen, const bench::Summary& bandwidth,
                 const Speculation& speculation) {
  const std::vector<int32_t> prompt = bench::bench_prompt(n_prompt, m.tokenizer, f.prompt_file);
  const bench::GenerateMeasure g = bench::measure_generate(m, prompt, n_gen,
                                                           {.repetitions = f.repetitions,
                                                            .bandwidth = bandwidth,
                                                            .probe_bytes = static_cast<size_t>(f.probe_mib) << 20,
                                                            .compute_gflops = f.compute_gflops});
  Measured out;
  out.notes.push_back(generate_note(f, m, g, n_prompt, n_gen, bandwidth));
  out.records.push_back(g.pp_record);
  out.records.push_back(g.tg_record);
  if (f.cache_ab) out.add(bench::measure_cache_ab(m, prompt, n_gen, f.repetitions, g.base));
  if (grammar_requested(f.grammar)) {
    out.add(bench::measure_constrained(grammar_under_test(f.grammar, m.tokenizer), m, prompt, n_gen, f.repetitions,
                                       g.base));
  }
  if (f.step_curve > 0) {
    out.add(bench::measure_step_curve(m, prompt, static_cast<size_t>(f.step_curve), f.repetitions, g.base));
  }
  if (!f.rows_curve.empty()) {
    const std::vector<size_t> rows(f.rows_curve.begin(), f.rows_curve.end());
    out.add(bench::measure_rows_curve(m, prompt, rows, f.repetitions, g.base));
  }
  if (speculation.enabled() || f.oracle_rate) {
    Generator spec(m.model, m.tokenizer, {.temperature = 0.0});
    const std::string described = attach_drafter(f, speculation, m, spec, prompt, n_gen);
    out.add(bench::measure_speculation(m, spec, described, prompt, n_gen, f.repetitions, g.base));
  }
  return out;
}

// The markdown table's row of a pp or tg record, as llama-bench names the tests.
std::string md_row(const nlohmann::json& r) {
  const uint64_t depth = r["n_depth"].get<uint64_t>();
  const std::string test = r["n_gen"].get<uint64_t>() == 0 ? fmt::format("pp{}", r["n_prompt"].get<uint64_t>())
                                                           : fmt::format("tg{}{}", r["n_gen"].get<uint64_t>(),
                                                                         depth ? fmt::format(" @ d{}", depth) : "");
  const double median = r["median_ts"], min = r["min_ts"], max = r["max_ts"];
  return fmt::format("| {} | {} | {:.1f} M | {} | {} | {} | {} | {:.2f} | {:.2f} | {:.1f}% |",
                     std::filesystem::path(r["model_filename"].get<std::string>()).filename().string(),
                     format_bytes(r["model_size"].get<double>()), r["model_n_params"].get<double>() / 1e6,
                     r["dtype"].get<std::string>(), r["isa"].get<std::string>(), r["n_threads"].get<int>(), test,
                     median, min, median > 0 ? 100.0 * (max - min) / median : 0.0);
}

constexpr const char* kCsvColumns[] = {"model_filename", "dtype",   "isa",          "n_threads", "n_prompt",
                                       "n_gen",          "n_depth", "avg_ts",       "stddev_ts", "median_ts",
                                       "min_ts",         "max_ts",  "build_commit", "cpu_info"};

std::string csv_field(const nlohmann::json& v) {
  std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// The flags' checks that need no model, before anything runs: one-line errors. The lists
// first; NANOINFER_THREADS is read (thread_counts) between the two.
void check_lists(const BenchFlags& f) {
  for (int64_t p : f.n_prompt)
    if (p < 1) fail("-p must be >= 1, got {}", p);
  for (int64_t n : f.n_gen)
    if (n < 1) fail("-n must be >= 1, got {}", n);
  for (int64_t t : f.threads)
    if (t < 0) fail("-t must be >= 0 (0 = one per physical core), got {}", t);
}

void check_options(const BenchFlags& f) {
  if (f.repetitions < 1) fail("-r must be >= 1, got {}", f.repetitions);
  if (f.step_curve < 0 || f.step_curve > 64) fail("--step-curve takes 1..64 decoding sequences, got {}", f.step_curve);
  for (int64_t n : f.rows_curve)
    if (n < 1 || n > 64) fail("--rows-curve takes row counts 1..64, got {}", n);
  if (f.probe_mib < 0) fail("--probe-mib must be >= 0 (0 = no bandwidth probe), got {}", f.probe_mib);
  if (!(f.compute_gflops >= 0)) fail("--compute-gflops must be >= 0 (0 = none), got {}", f.compute_gflops);
  (void)grammar_requested(f.grammar);  // --json, --json-schema, --grammar: at most one, before any run
}

// -t's counts, else NANOINFER_THREADS's (a list too), else one per physical core.
std::vector<int64_t> thread_counts(const BenchFlags& f) {
  std::vector<int64_t> counts = f.threads;
  if (counts.empty()) {
    for (int t : threads_from_env(/*list=*/true)) counts.push_back(t);
    if (counts.empty()) counts.push_back(0);
  }
  return counts;
}

// The speculation the flags ask for; --draft-oracle's own checks after Speculation's.
Speculation speculation_of(const BenchFlags& f) {
  // --draft-max also sets the oracle's k (Speculation refuses it without a drafter of its own).
  const bool oracle_alone = f.oracle_rate && f.speculation.lookup == std::nullopt && f.speculation.draft.empty() &&
                            f.speculation.draft_self.empty();
  SpeculationFlags own = f.speculation;
  if (oracle_alone) own.draft_max.reset();
  Speculation speculation(own);
  if (f.oracle_rate) {
    if (f.speculation.draft_max && (*f.speculation.draft_max < 0 || *f.speculation.draft_max > 64)) {
      fail("--draft-max must be 0 to 64, got {}", *f.speculation.draft_max);
    }
    if (!(*f.oracle_rate >= 0 && *f.oracle_rate <= 1)) fail("--draft-oracle must be 0 to 1, got {}", *f.oracle_rate);
    if (f.speculation.lookup)
      fail(
          "--draft-oracle excludes --lookup (it overrides a draft model's choices, with --draft or "
          "--draft-self)");
  }
  return speculation;
}

// Every combination of -t, -p and -n (the model opened once per thread count).
Measured measure_all(const BenchFlags& f, const std::vector<int64_t>& threads, Speculation& speculation) {
  Measured all;
  for (int64_t t : threads) {
    ModelFlags flags = f.model;
    flags.threads = static_cast<int>(t);
    OpenedModel m = load_model(flags);
    speculation.load(flags, m);
    for (int64_t p : f.n_prompt) {
      for (int64_t n : f.n_gen) {
        if (static_cast<size_t>(p + n) > m.model.max_context()) {
          fail("-p {} + -n {} exceed the context of {} positions", p, n, m.model.max_context());
        }
      }
    }
    // The read roofline, measured with the model's thread count (its pool sleeps meanwhile).
    bench::Summary bandwidth;
    if (f.probe_mib > 0) {
      ThreadPool probe_pool(m.model.threads());
      bandwidth =
          bench::summarize(bench::measure_read_bandwidth(probe_pool, static_cast<size_t>(f.probe_mib) << 20, 5));
    }
    for (int64_t p : f.n_prompt) {
      for (int64_t n : f.n_gen) {
        Measured one = measure(f, m, static_cast<size_t>(p), static_cast<size_t>(n), bandwidth, speculation);
        for (auto& r : one.records) all.records.push_back(std::move(r));
        for (auto& line : one.notes) all.notes.push_back(std::move(line));
      }
    }
  }
  return all;
}

// stdout in the -o format: the records (md and csv: the pp/tg rows), and md's notes.
void print_records(Format format, const Measured& all) {
  switch (format) {
    case Format::Md:
      fmt::print(
          "| model | size | params | dtype | isa | threads | test | t/s median | t/s min | spread "
          "|\n");
      fmt::print("|---|---|---|---|---|---|---|---|---|---|\n");
      for (const nlohmann::json& r : all.records) {
        if (r["bench"] == "generate") fmt::print("{}\n", md_row(r));
      }
      fmt::print("\n");
      for (const std::string& line : all.notes) fmt::print("{}\n", line);
      break;
    case Format::Csv: {
      std::string line;
      for (const char* c : kCsvColumns) line += (line.empty() ? "" : ",") + std::string(c);
      fmt::print("{}\n", line);
      for (const nlohmann::json& r : all.records) {
        if (r["bench"] != "generate") continue;
        line.clear();
        for (const char* c : kCsvColumns) line += (line.empty() ? "" : ",") + csv_field(r[c]);
        fmt::print("{}\n", line);
      }
      break;
    }
    case Format::Json:
      fmt::print("{}\n", nlohmann::json(all.records).dump(2));
      break;
    case Format::Jsonl:
      for (const nlohmann::json& r : all.records) fmt::print("{}\n", r.dump());
      break;
  }
}

void run(const BenchFlags& f) {
  const Format format = format_of(f.format);
  check_lists(f);
  const std::vector<int64_t> threads = thread_counts(f);
  check_options(f);
  // Inside the repository the records go to bench/results.jsonl unless told otherwise; outside
  // it (no ./bench) nowhere but stdout.
  std::string results = f.results;
  if (results.empty() && std::filesystem::is_directory("bench")) results = "bench/results.jsonl";
  if (!results.empty()) bench::check_bench_results_path(results);  // before the runs, not after them
  if (f.compare && results.empty()) fail("--compare needs a results file (--results FILE, or ./bench)");
  // The history the run is compared with: the file as it was before this run's records.
  std::vector<nlohmann::json> history;
  if (f.compare && std::filesystem::exists(results)) history = bench::read_bench_records(results);

  Speculation speculation = speculation_of(f);
  const Measured all = measure_all(f, threads, speculation);
  for (const nlohmann::json& r : all.records) {
    if (!results.empty()) bench::append_bench_record(r, results);
  }
  print_records(format, all);
  if (!results.empty()) fmt::print(stderr, "nanoinfer: {} records appended to {}\n", all.records.size(), results);
  if (f.compare) {
    const std::vector<bench::FigureVerdict> verdicts = bench::compare_records(history, all.records);
    fmt::print(stderr, "{}", bench::format_verdicts(verdicts));
    for (const bench::FigureVerdict& v : verdicts) {
      if (v.regression) throw CLI::RuntimeError(3);  // as bench compare's exit status
    }
  }
}

void setup_bench_generate(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  add_model_flags(app, f->model);
  // -t takes a list here, as llama-bench's.
  app.remove_option(app.get_option("--threads"));
  app.add_option("-t,--threads", f->threads,
                 "Thread counts, comma-separated (0 = one per physical core; default: "
                 "$NANOINFER_THREADS when set, "
                 "a list too, else 0)")
      ->delimiter(',');
  app.add_option("-p,--n-prompt", f->n_prompt, "Prompt lengths to prefill, comma-separated (default 64)")
      ->delimiter(',');
  app.add_option("-n,--n-gen", f->n_gen, "Tokens to decode after the prompt, comma-separated (default 32)")
      ->delimiter(',');
  app.add_option("-r,--repetitions", f->repetitions, "Measured runs after one warm-up (default 5)");
  app.add_option("--step-curve", f->step_curve,
                 "Also time serve's mixed step: B sequences decoding plus 0..64 rows of a prompt "
                 "at depth -p, in one "
                 "pass, alternated (what serve --step-tokens trades)");
  app.add_option("--rows-curve", f->rows_curve,
                 "Also time a forward pass of each of these row counts (comma-separated, 1..64; all logits, as "
                 "speculative verification) at depth -p against a one-row pass (a decode step), alternated")
      ->delimiter(',');
  app.add_flag("--cache-ab", f->cache_ab,
               "Also time cached against uncached (full recompute) decoding, asserting equal tokens");
  app.add_option("--compute-gflops", f->compute_gflops,
                 "The compute roofline in GFLOP/s (the compute probe of tools/bench/kernel-tiers, a "
                 "\"compute\" "
                 "record of bench/kernels.jsonl): prefill's FLOP rate is also printed as a share of it");
  app.add_option("--probe-mib", f->probe_mib,
                 "Buffer of the read-bandwidth probe the roofline share is computed from, in MiB "
                 "(default 1024; 0 = no probe)");
  add_speculation_flags(app, f->speculation);
  app.add_option("--draft-oracle", f->oracle_rate,
                 "Speculative A/B with drafts that know the plain greedy continuation, each "
                 "position's draft "
                 "right with probability P (0 to 1): what verification costs at that acceptance, "
                 "drafting for free; "
                 "with --draft or --draft-self the draft model drafts as usual (its cost) and the "
                 "oracle overrides "
                 "which of its tokens are right")
      ->type_name("P");
  add_grammar_flags(app, f->grammar);  // the constrained A/B: mask and compile costs too
  app.add_option("--prompt-file", f->prompt_file,
                 "Take the prompt's first -p tokens from this text file (default: pseudo-random token ids)");
  app.add_option("-o,--output", f->format, "What stdout shows: md (default), csv, json or jsonl, as llama-bench's -o");
  app.add_flag("--compare", f->compare,
               "Compare this run's records with the results file's earlier ones of this machine "
               "and test (as "
               "bench compare; the report on stderr); exit 3 on a regression");
  app.add_option("--results", f->results,
                 "JSON-lines file the records are appended to (default: bench/results.jsonl when "
                 "./bench exists, "
                 "else none)");
  app.callback([f] { run(*f); });
}

const bool registered_bench_generate =
    register_command({"bench", "generate",
                      "Prefill/decode tokens per second, time to first token, peak RSS; bytes and "
                      "barriers per token, % of the read roofline",
                      setup_bench_generate});

}  // namespace
}  // namespace nanoinfer::cli
