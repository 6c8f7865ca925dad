// `nanoinfer bench record --results FILE [-t N] [--isa NAME] [--command-line TEXT]`: appends the JSON
// objects read from stdin, one per line, to FILE with the provenance fields of every bench
// record added (bench_context, the one writer of them). It is how a benchmark written outside
// the binary records its results: tools/serve-bench.mjs pipes its rows through it, with the
// server's -t and --isa and its own command line.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_record.h"
#include "bench_output.h"
#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/thread_pool.h"

namespace nanoinfer::cli {
namespace {

struct RecordArgs {
  std::string output;
  std::optional<int> threads;
  std::string isa = "auto";
  std::string command_line;
};

void bench_record(const RecordArgs& args) {
  if (args.output.empty()) fail("bench record needs --results FILE, the JSON-lines file to append to");
  bench::check_bench_results_path(args.output);
  Isa isa = best_isa();
  if (args.isa != "auto") {
    const std::optional<Isa> named = parse_isa(args.isa);
    if (!named) fail("--isa must be auto or an ISA name (scalar, avx2, ...), got '{}'", args.isa);
    isa = *named;
  }
  const int threads = ThreadPool::clamp_threads(resolve_threads(args.threads));
  // Every line is read and checked before the first is appended, so bad input appends nothing.
  const std::vector<nlohmann::json> records = bench::records_from_stdin(threads, isa, args.command_line);
  if (records.empty()) fail("bench record: no record on stdin");
  for (const nlohmann::json& r : records) bench::append_bench_record(r, args.output);
  fmt::print(stderr, "nanoinfer: {} record(s) appended to {}\n", records.size(), args.output);
}

const bool registered_bench_record = register_command({
    "bench",
    "record",
    "Append JSON objects from stdin (one per line) to a results file with the provenance fields added",
    [](CLI::App& sub) {
      auto args = std::make_shared<RecordArgs>();
      add_results_option(sub, args->output, "JSON-lines file to append to (required)");
      sub.add_option("-t,--threads", args->threads, std::string(kThreadsHelp) + "; the measured program's count");
      sub.add_option("--isa", args->isa, "The ISA the measured program ran (default: this machine's best)")
          ->capture_default_str();
      sub.add_option("--command-line", args->command_line,
                     "The measured program's command line (default: this process's)");
      sub.callback([args] { bench_record(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
