// `nanoinfer bench load MODEL_DIR [-t N]`: what loading a model costs. Three steps, timed
// separately: open (mmap + header parse + validation), touch (fault in every page of the
// mapping), widen (convert every weight to f32 into a reused scratch buffer). Prints a table
// and appends one JSON line to bench/results.jsonl.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "command.h"
#include "bench_record.h"
#include "nanoinfer/config.h"
#include "nanoinfer/error.h"
#include "model/manifest.h"
#include "nanoinfer/model_files.h"
#include "io/safetensors.h"

namespace nanoinfer::cli {
namespace {

struct LoadArgs {
  std::string dir;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string results = "bench/results.jsonl";
};

using Clock = std::chrono::steady_clock;

// Results of the touch and widen loops are stored here so the compiler cannot drop the loops.
volatile double g_sink = 0;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Runs fn(0..n-1) on n threads (the caller is thread 0) and waits for all of them.
template <class Fn>
void run_on_threads(int n, const Fn& fn) {
  std::vector<std::thread> workers;
  for (int t = 1; t < n; ++t) workers.emplace_back(fn, t);
  fn(0);
  for (auto& w : workers) w.join();
}

// [begin, end) of thread t's share of n items.
std::pair<uint64_t, uint64_t> slice(uint64_t n, int t, int threads) {
  const auto T = static_cast<uint64_t>(threads);
  const auto i = static_cast<uint64_t>(t);
  return {n * i / T, n * (i + 1) / T};
}

// Widens elements [first, first + count) of `view` into out[0, count).
void widen(const TensorView& view, uint64_t first, size_t count, float* out) {
  const std::byte* src = view.data + first * dtype_size(view.dtype());
  switch (view.dtype()) {
    case DType::BF16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);  // offsets need not be 2-aligned
        out[i] = bf16_to_f32(h);
      }
      break;
    case DType::F16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      break;
    case DType::F32:
      std::memcpy(out, src, count * 4);
      break;
    case DType::I8:
      for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>(static_cast<int8_t>(src[i]));
      break;
    case DType::U8:
      for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>(static_cast<uint8_t>(src[i]));
      break;
    case DType::I32:
      for (size_t i = 0; i < count; ++i) {
        int32_t v;
        std::memcpy(&v, src + 4 * i, 4);
        out[i] = static_cast<float>(v);
      }
      break;
  }
}

void bench_load(const LoadArgs& args) {
  if (args.threads < 1) fail("--threads {}: must be at least 1", args.threads);
  const ModelFiles files = locate_model(args.dir);
  const ModelConfig cfg = ModelConfig::load(files.config);

  auto t0 = Clock::now();
  const SafetensorsFile file = SafetensorsFile::open(files.weights);
  const double open_ms = ms_since(t0);

  // Benchmark only models that would load: same verdict as `inspect`.
  const auto problems = manifest_problems(tensor_manifest(cfg), file.tensors());
  if (!problems.empty()) fail("{}: {}", files.weights.string(), problems[0]);

  // Touch: read one byte per page so every page is faulted in (or found in the page cache).
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t pages = (file.file_size() + page - 1) / page;
  const std::byte* base = file.bytes().data();
  std::vector<uint64_t> touch_sums(static_cast<size_t>(args.threads));
  t0 = Clock::now();
  run_on_threads(args.threads, [&](int t) {
    const auto [p0, p1] = slice(pages, t, args.threads);
    uint64_t sum = 0;
    for (uint64_t p = p0; p < p1; ++p) sum += static_cast<uint8_t>(base[p * page]);
    touch_sums[static_cast<size_t>(t)] = sum;
  });
  const double touch_ms = ms_since(t0);
  for (uint64_t sum : touch_sums) g_sink = g_sink + static_cast<double>(sum);

  // Widen: each thread converts its slice of every tensor into its own scratch buffer, sized
  // for the largest slice: [max_slice] floats per thread.
  uint64_t weights = 0, max_numel = 0;
  for (const auto& t : file.tensors()) {
    weights += t.numel();
    max_numel = std::max(max_numel, t.numel());
  }
  const uint64_t max_slice = max_numel / static_cast<uint64_t>(args.threads) + 1;
  std::vector<std::vector<float>> scratch(static_cast<size_t>(args.threads),
                                          std::vector<float>(max_slice));
  std::vector<double> widen_sums(static_cast<size_t>(args.threads));
  t0 = Clock::now();
  run_on_threads(args.threads, [&](int t) {
    float* out = scratch[static_cast<size_t>(t)].data();
    double sum = 0;  // one element per tensor, so the conversions cannot be optimized away
    for (const auto& info : file.tensors()) {
      const auto [e0, e1] = slice(info.numel(), t, args.threads);
      if (e1 == e0) continue;
      widen(file.view(info), e0, static_cast<size_t>(e1 - e0), out);
      sum += out[(e1 - e0) / 2];
    }
    widen_sums[static_cast<size_t>(t)] = sum;
  });
  const double widen_ms = ms_since(t0);
  for (double sum : widen_sums) g_sink = g_sink + sum;
  const size_t rss = peak_rss_bytes();

  const double file_mib = static_cast<double>(file.file_size()) / (1 << 20);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  fmt::print("bench load: {} ({} tensors, {:.1f} MiB), {} thread(s)\n", files.dir.string(),
             file.tensors().size(), file_mib, args.threads);
  fmt::print("  {:<9} {:>10}  {}\n", "step", "time", "rate");
  fmt::print("  {:<9} {:>7.2f} ms  header {} bytes, {} tensors validated\n", "open", open_ms,
             file.layout().header_len, file.tensors().size());
  fmt::print("  {:<9} {:>7.2f} ms  {:.2f} GiB/s ({} pages of {} bytes)\n", "touch", touch_ms,
             static_cast<double>(file.file_size()) / gib / (touch_ms / 1e3), pages, page);
  fmt::print(
      "  {:<9} {:>7.2f} ms  {:.2f} GiB/s read, {:.2f} GiB/s f32 written ({} weights)\n", "widen",
      widen_ms,
      static_cast<double>(file.file_size() - file.layout().data_offset) / gib / (widen_ms / 1e3),
      static_cast<double>(weights) * 4 / gib / (widen_ms / 1e3), weights);
  fmt::print("  {:<9} {:>7.1f} MiB\n", "peak RSS", static_cast<double>(rss) / (1 << 20));

  nlohmann::json record = bench_context(args.threads);
  record["bench"] = "load";
  record["model"] = files.dir.string();
  record["file_bytes"] = file.file_size();
  record["tensors"] = file.tensors().size();
  record["weights"] = weights;
  record["open_ms"] = open_ms;
  record["touch_ms"] = touch_ms;
  record["widen_ms"] = widen_ms;
  record["peak_rss_bytes"] = rss;
  append_bench_record(record, args.results);
  fmt::print("appended to {}\n", args.results);
}

const bool registered = register_command({
    "bench",
    "load",
    "Time opening (mmap + parse), touching every page and widening every weight to f32",
    [](CLI::App& sub) {
      auto args = std::make_shared<LoadArgs>();
      sub.add_option("MODEL_DIR", args->dir, "Directory with config.json and model.safetensors")
          ->required();
      sub.add_option("-t,--threads", args->threads, "Threads for touch and widen")
          ->capture_default_str();
      sub.add_option("--results", args->results, "JSON-lines file the record is appended to")
          ->capture_default_str();
      sub.callback([args] { bench_load(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
