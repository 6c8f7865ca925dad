// `nanoinfer bench tune [-m MODEL] [-t N] [--isa X] [--dtype T] [-p 64] [-r 7]`: the per-machine
// tuner (nanoinfer/tuning.h). For every product shape of the model, decode and prefill, it
// times the candidate splits of the work across the threads, alternating them round by round,
// and keeps the best only when it beat the default in enough rounds (sign test) by at least
// --min-gain; the kept rules
// go to the tuning cache of this CPU, ISA and thread count, which every command that runs a
// model reads at start-up (--no-tune: not). Prints each shape's gain with its spread; -o
// appends one JSON line per shape.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "bench/bench_record.h"
#include "bench/bench_tune.h"
#include "bench_output.h"
#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/tuning_cache.h"

namespace nanoinfer::cli {
namespace {

struct TuneArgs {
  ModelFlags model;
  bench::TuneSettings settings;
  bool no_save = false;
  std::string output;  // "": print only
};

void check_settings(const bench::TuneSettings& s) {
  if (s.prefill_tokens < 0) fail("-p must be >= 0, got {}", s.prefill_tokens);
  if (s.rounds < 3) fail("-r must be >= 3 (a spread needs samples), got {}", s.rounds);
  if (!(s.min_gain >= 0 && s.min_gain < 1)) {
    fail("--min-gain must be in [0, 1), got {}", s.min_gain);
  }
  if (!(s.max_p > 0 && s.max_p <= 1)) fail("--max-p must be in (0, 1], got {}", s.max_p);
  if (sign_test_p(static_cast<int>(s.rounds), static_cast<int>(s.rounds)) > s.max_p) {
    fmt::print(
        "note: {} rounds cannot reach --max-p {} even if a candidate wins every one (need {} "
        "rounds); nothing will be kept\n",
        s.rounds, s.max_p, bench::rounds_to_reach(s.max_p));
  }
}

std::string shape_name(const TunedShape& t) {
  return fmt::format("{} {} {}x{}", t.name, weight_type_name(t.shape.type), t.shape.rows, t.shape.cols);
}

void print_table(const std::vector<TunedShape>& shapes, const bench::TuneSettings& s) {
  fmt::print(
      "| product | pass | default us/call median (min-max) | best rule | its us/call median "
      "(min-max) | gain per round median (min-max) | rounds faster | sign test p | kept |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  for (const TunedShape& t : shapes) {
    const TuneCandidate& d = t.candidates.front();
    const TuneCandidate& b = t.candidates[t.best];
    const std::string pass = t.shape.prefill ? fmt::format("prefill {}", s.prefill_tokens) : "decode";
    if (t.best == 0) {
      fmt::print(
          "| {} | {} | {:.1f} ({:.1f}-{:.1f}) | default (no candidate's median gain above 1) | | "
          "| | | no |\n",
          shape_name(t), pass, d.median_us, d.min_us, d.max_us);
      continue;
    }
    fmt::print(
        "| {} | {} | {:.1f} ({:.1f}-{:.1f}) | {} | {:.1f} ({:.1f}-{:.1f}) | x{:.3f} "
        "({:.3f}-{:.3f}) | {}/{} | {:.3g} | {} |\n",
        shape_name(t), pass, d.median_us, d.min_us, d.max_us, describe(b.rule), b.median_us, b.min_us, b.max_us,
        b.gain_median, b.gain_min, b.gain_max, b.wins, b.rounds, b.p_value, t.kept ? "yes" : "no");
  }
  fmt::print(
      "(best = the candidate with the largest median gain; gain per round = the default's time / "
      "its time in the same round; kept when the sign test's p <= {} and the median gain >= "
      "{:.3f})\n",
      s.max_p, 1 + s.min_gain);
}

void bench_tune(const TuneArgs& args) {
  const bench::TuneSettings& s = args.settings;
  check_settings(s);
  if (!args.output.empty()) bench::check_bench_results_path(args.output);
  ModelFlags flags = args.model;
  flags.no_tune = true;  // measure from the defaults; the cache is rewritten below
  OpenedModel m = load_model(flags);
  if (static_cast<size_t>(s.prefill_tokens) > m.model.max_context()) {
    fail("-p {} exceeds the context of {} positions", s.prefill_tokens, m.model.max_context());
  }
  const Isa isa = m.model.isa();
  const int threads = m.model.threads();
  const std::string cpu = cpu_model_name();
  fmt::print("bench tune: {} ({}), {} thread(s), ISA {}, {} rounds, prefill {} tokens\n", m.dir.string(),
             weight_type_name(m.model.weight_type()), threads, isa_name(isa), s.rounds, s.prefill_tokens);
  if (threads <= 1) {
    fmt::print("one thread: there is no split to tune; nothing written\n");
    return;
  }
  const std::vector<TunedShape> shapes = bench::tune_shapes(m.model, s);
  print_table(shapes, s);
  const bench::TuningUpdate u = bench::merge_tuning(shapes, cpu, isa, threads);
  if (args.no_save) {
    fmt::print("{} of {} shapes tuned; --no-save: the cache {} is unchanged\n", u.kept, shapes.size(), u.file.string());
  } else {
    write_tuning_cache(u.file, u.tuning, cpu, isa, threads);
    fmt::print("{} of {} shapes tuned; {} rule(s) in {}\n", u.kept, shapes.size(), u.tuning.rules.size(),
               u.file.string());
  }
  if (args.output.empty()) return;
  for (const TunedShape& t : shapes) {
    bench::append_bench_record(bench::tune_record(t, m.dir.string(), threads, isa, s), args.output);
  }
  fmt::print("appended {} records to {}\n", shapes.size(), args.output);
}

const bool registered_bench_tune = register_command({
    "bench",
    "tune",
    "Tune how each product is split across the threads on this machine (cached; --no-tune ignores "
    "it)",
    [](CLI::App& sub) {
      auto args = std::make_shared<TuneArgs>();
      add_model_flags(sub, args->model);
      sub.add_option("-p,--n-prompt", args->settings.prefill_tokens,
                     "Tokens per prefill call for the prefill shapes (0: decode only)")
          ->capture_default_str();
      sub.add_option("-r,--repetitions", args->settings.rounds,
                     "Timed rounds; every candidate runs once per round, alternating")
          ->capture_default_str();
      sub.add_option("--min-gain", args->settings.min_gain,
                     "Keep a rule only when its median gain over the default, round by round, is "
                     "at least this "
                     "fraction")
          ->capture_default_str();
      sub.add_option("--max-p", args->settings.max_p,
                     "... and only when it was faster in so many rounds that the two-sided sign "
                     "test's p is at most "
                     "this")
          ->capture_default_str();
      sub.add_flag("--no-save", args->no_save, "Measure and print only; leave the tuning cache as it is");
      add_results_option(sub, args->output, "JSON-lines file to append one record per shape to (default: none)");
      sub.footer(
          "Tuning changes only how rows are cut into tasks (whether a product is shared with the "
          "workers, how "
          "many row ranges per thread, gate/up's epilogue size), never what a row computes: the "
          "output is "
          "bitwise the same tuned or not. The cache is $XDG_CACHE_HOME/nanoinfer/tune-ISA-tN.json "
          "(else "
          "~/.cache/nanoinfer/), one per ISA and thread count, keyed by the CPU model; a file of "
          "another CPU, "
          "or a corrupt one, is ignored with one line. Compare: `bench generate` with and without "
          "--no-tune.");
      sub.callback([args] { bench_tune(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
