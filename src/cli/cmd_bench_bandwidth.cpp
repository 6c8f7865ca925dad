// `nanoinfer bench bandwidth [-t N] [--size-mib M] [-r R]`: the machine's read bandwidth as a
// decode step sees it, the ceiling decode speed is measured against: R timed passes of a
// multi-threaded sequential read of an M MiB buffer (default 1 GiB, far beyond any last-level
// cache). Prints GB/s median, minimum and maximum and appends one JSON line.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "bench/bench_load.h"
#include "bench/bench_record.h"
#include "bench_output.h"
#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/thread_pool.h"

namespace nanoinfer::cli {
namespace {

struct BandwidthArgs {
  std::optional<int> threads;  // unset: NANOINFER_THREADS, else 0
  int64_t size_mib = 1024;
  int64_t runs = 5;
  std::string output;  // "": print only (a probe run now and then should not dirty the tree)
};

void bench_bandwidth(const BandwidthArgs& args) {
  if (args.size_mib < 1) fail("--size-mib must be >= 1, got {}", args.size_mib);
  if (args.runs < 1) fail("-r must be >= 1, got {}", args.runs);
  if (!args.output.empty()) bench::check_bench_results_path(args.output);
  ThreadPool pool(ThreadPool::clamp_threads(resolve_threads(args.threads)));
  const size_t bytes = static_cast<size_t>(args.size_mib) << 20;
  const std::vector<double> gbps = bench::measure_read_bandwidth(pool, bytes, static_cast<int>(args.runs));
  const bench::Summary s = bench::summarize(gbps);
  fmt::print(
      "bench bandwidth: sequential read of {} MiB, {} thread(s), {} run(s): median {:.1f} GB/s, "
      "min {:.1f} GB/s, max {:.1f} GB/s\n",
      args.size_mib, pool.size(), args.runs, s.median, s.min, s.max);
  if (args.output.empty()) return;
  append_record_and_say(bench::bandwidth_record(pool.size(), bytes, args.runs, gbps), args.output);
}

const bool registered_bench_bandwidth = register_command({
    "bench",
    "bandwidth",
    "Read bandwidth (GB/s) of a multi-threaded sequential read: the decode roofline",
    [](CLI::App& sub) {
      auto args = std::make_shared<BandwidthArgs>();
      sub.add_option("-t,--threads", args->threads, kThreadsHelp);
      sub.add_option("--size-mib", args->size_mib, "Buffer size in MiB; keep it far above the last-level cache")
          ->capture_default_str();
      sub.add_option("-r,--repetitions", args->runs, "Timed passes over the buffer")->capture_default_str();
      add_results_option(sub, args->output, "JSON-lines file to append the record to (default: none, print only)");
      sub.callback([args] { bench_bandwidth(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
