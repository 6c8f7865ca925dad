// `nanoinfer bench allreduce [--floats N,...] [-r R]`: the latency of the all-reduce a
// tensor-parallel forward pass runs after every o_proj and down_proj (Comm::allreduce_sum),
// per message size, on the ranks mpirun started (docs/SCALING.md). Every rank runs the same
// repetitions; rank 0 times each (a barrier first, so all ranks enter together) and prints the
// median and minimum per size. On one rank (no mpirun) the sum is a no-op and it says so.
// --scatter-from moves the length from which more than two ranks reduce-scatter instead of
// gathering whole vectors (Comm::kScatterFromFloats), to time either way at any length.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_record.h"
#include "command.h"
#include "nanoinfer/comm.h"
#include "nanoinfer/error.h"

namespace nanoinfer::cli {
namespace {

struct AllreduceArgs {
  // One decode row of Qwen2.5-0.5B's hidden size, a 64-token prefill chunk of it, and a large
  // message for the link's bandwidth.
  std::vector<int64_t> floats{896, 57344, 1048576};
  int64_t repetitions = 200;
  int64_t scatter_from = static_cast<int64_t>(Comm::kScatterFromFloats);
};

void bench_allreduce(const AllreduceArgs& args) {
  if (args.repetitions < 1) fail("-r must be >= 1, got {}", args.repetitions);
  if (args.floats.empty()) fail("--floats needs at least one size");
  for (int64_t n : args.floats)
    if (n < 1 || n > (int64_t{1} << 28)) fail("--floats: each size must be in 1 .. 268435456, got {}", n);
  if (args.scatter_from < 0) fail("--scatter-from must be >= 0, got {}", args.scatter_from);
  Comm& comm = world();
  comm.set_scatter_from(static_cast<size_t>(args.scatter_from));
  if (comm.rank() == 0) {
    fmt::print("bench allreduce: {} rank(s), {} repetition(s) per size{}{}\n", comm.size(), args.repetitions,
               comm.size() > 2 ? fmt::format(", reduce-scattered from {} floats", args.scatter_from) : "",
               comm.distributed() ? "" : " (one rank: nothing to reduce; run it under mpirun -np N)");
    fmt::print("{:>10} {:>12} {:>12} {:>12} {:>10}\n", "floats", "bytes", "median_us", "min_us", "GB/s");
  }
  constexpr int kWarmup = 5;
  for (int64_t size : args.floats) {
    const size_t n = static_cast<size_t>(size);
    std::vector<float> data(n, 1.0f);
    std::vector<double> seconds;
    seconds.reserve(static_cast<size_t>(args.repetitions));
    for (int64_t r = -kWarmup; r < args.repetitions; ++r) {
      comm.barrier();
      const auto start = std::chrono::steady_clock::now();
      comm.allreduce_sum(data.data(), n);
      const auto end = std::chrono::steady_clock::now();
      if (r >= 0) seconds.push_back(std::chrono::duration<double>(end - start).count());
      std::fill(data.begin(), data.end(), 1.0f);  // keep the values finite and small
    }
    if (comm.rank() != 0) continue;
    const bench::Summary s = bench::summarize(seconds);
    const double median = s.median, min = s.min;
    const double bytes = static_cast<double>(n * sizeof(float));
    fmt::print("{:>10} {:>12} {:>12.1f} {:>12.1f} {:>10.2f}\n", n, n * sizeof(float), median * 1e6, min * 1e6,
               median > 0 ? bytes / median * 1e-9 : 0.0);
  }
}

const bool registered_bench_allreduce = register_command({
    "bench",
    "allreduce",
    "Latency of the tensor-parallel all-reduce per message size (run under mpirun -np N; rank 0 prints)",
    [](CLI::App& sub) {
      auto args = std::make_shared<AllreduceArgs>();
      sub.add_option("--floats", args->floats, "Message sizes in floats, comma-separated (default 896,57344,1048576)")
          ->delimiter(',');
      sub.add_option("-r,--repetitions", args->repetitions, "Timed all-reduces per size (after 5 untimed)")
          ->capture_default_str();
      sub.add_option("--scatter-from", args->scatter_from,
                     "With more than two ranks: vectors of this many floats or more are reduce-scattered, shorter "
                     "ones gathered whole (both sum in rank order)")
          ->capture_default_str();
      sub.callback([args] { bench_allreduce(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
