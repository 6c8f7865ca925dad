// `nanoinfer bench compare FILE [--run RUN.jsonl]`: the newest run's records (or RUN.jsonl's)
// against the earlier records of the same machine and test in FILE (src/bench/bench_compare.h
// says what is comparable and when a figure is a regression). Exit status 0 when nothing
// regressed, 3 when something did, 1 on an error, so a script can stop on a slowdown.
// `nanoinfer bench discard FILE --line N --reason TEXT`: marks records to be ignored.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/bench_compare.h"
#include "command.h"
#include "nanoinfer/error.h"

namespace nanoinfer::cli {
namespace {

constexpr int kRegressionExit = 3;

struct CompareArgs {
  std::string file;
  std::string run;
  double min_noise = bench::CompareOptions{}.min_noise;
};

void bench_compare(const CompareArgs& args) {
  if (!(args.min_noise >= 0 && args.min_noise < 1)) fail("--min-noise must be in [0, 1), got {}", args.min_noise);
  // The records are streamed (compare_results_file): only the newest run's are held.
  const bench::CompareReading reading = bench::compare_results_file(args.file, args.run, {.min_noise = args.min_noise});
  const std::vector<bench::FigureVerdict>& verdicts = reading.verdicts;
  if (reading.candidates == 0)
    fail("bench compare: no record to compare in {}", args.run.empty() ? args.file : args.run);
  if (verdicts.empty()) fail("bench compare: none of the {} record(s) has a figure compare knows", reading.candidates);
  fmt::print("{}", bench::format_verdicts(verdicts));
  for (const bench::FigureVerdict& v : verdicts) {
    if (v.regression) throw CLI::RuntimeError(kRegressionExit);
  }
}

const bool registered_bench_compare = register_command({
    "bench",
    "compare",
    "Compare the newest run's records with earlier ones of this machine and test; exit 3 on a regression",
    [](CLI::App& sub) {
      auto args = std::make_shared<CompareArgs>();
      sub.add_option("file", args->file, "JSON-lines results file (e.g. bench/results.jsonl)")->required();
      sub.add_option("--run", args->run,
                     "Compare this file's records instead of FILE's newest run (FILE is then all history)");
      sub.add_option("--min-noise", args->min_noise,
                     "Smallest relative spread granted to a figure before a slowdown counts as a regression")
          ->capture_default_str();
      sub.footer(
          "A figure regresses when its ratio to the last comparable record is below 1 - noise, noise being "
          "the larger relative spread ((max - min) / median) of the two records and at least --min-noise. "
          "Records with a \"discarded\" field are ignored (see bench discard). Exit status: 0 no regression, "
          "3 regression, 1 error.");
      sub.callback([args] { bench_compare(*args); });
    },
});

struct DiscardArgs {
  std::string file;
  std::vector<size_t> lines;
  std::string reason;
};

const bool registered_bench_discard = register_command({
    "bench",
    "discard",
    "Mark records of a results file as discarded (ignored by bench compare), with the reason",
    [](CLI::App& sub) {
      auto args = std::make_shared<DiscardArgs>();
      sub.add_option("file", args->file, "JSON-lines results file")->required();
      sub.add_option("--line", args->lines, "Line numbers (1-based), comma-separated")->required()->delimiter(',');
      sub.add_option("--reason", args->reason, "Why, e.g. \"host busy: llama.cpp's control 30% off its best\"")
          ->required();
      sub.callback([args] {
        bench::discard_bench_records(args->file, args->lines, args->reason);
        fmt::print("marked {} record(s) of {} discarded\n", args->lines.size(), args->file);
      });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
