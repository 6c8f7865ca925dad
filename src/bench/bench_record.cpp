#include "bench_record.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "build_commit.h"

#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/json_limits.h"
#include "nanoinfer/tuning_cache.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#ifndef NANOINFER_BUILD_TYPE
#define NANOINFER_BUILD_TYPE "unknown"
#endif

namespace nanoinfer::bench {

namespace {

// The commit this binary was built from and whether its tree had uncommitted changes then
// (generated at every build by cmake/build_commit.cmake). Read from the build, not from the
// checkout at run time: a binary kept for an A/B run names its own code.
struct Commit {
  std::string hash;  // "" when built outside a checkout
  bool dirty = false;
};

Commit build_commit() {
  return Commit{NANOINFER_BUILD_COMMIT, NANOINFER_BUILD_DIRTY != 0};
}

// An argument as a POSIX shell would need it: bare when it holds only safe characters, else
// in single quotes (a quote inside written '\'').
std::string shell_quoted(const std::string& arg) {
  const bool safe = !arg.empty() && arg.find_first_not_of(
                                        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./=:,+@%") == std::string::npos;
  if (safe) return arg;
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string own_command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string line, arg;
  while (std::getline(f, arg, '\0')) line += (line.empty() ? "" : " ") + shell_quoted(arg);
  return line;
}

nlohmann::json cpu_flags() {
  nlohmann::json flags = nlohmann::json::array();
  const CpuFeatures& cpu = host_cpu_features();
  for (size_t i = 0; i < kCpuFeatureCount; ++i) {
    const auto f = static_cast<CpuFeature>(i);
    if (cpu.has(f)) flags.push_back(std::string(cpu_feature_name(f)));
  }
  return flags;
}

// Sums the 64-bit words of [p, p + bytes), bytes a multiple of 64, p 64-byte aligned: a pure
// streaming read (SSE2, which every x86-64 has, is far from limiting the ~30 GB/s a core
// draws from DRAM; four accumulators keep the loads independent).
uint64_t sum_words(const std::byte* p, size_t bytes) {
#if defined(__SSE2__)
  __m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
  for (size_t i = 0; i < bytes; i += 64) {
    const auto* v = reinterpret_cast<const __m128i*>(p + i);
    a = _mm_add_epi64(a, _mm_load_si128(v));
    b = _mm_add_epi64(b, _mm_load_si128(v + 1));
    c = _mm_add_epi64(c, _mm_load_si128(v + 2));
    d = _mm_add_epi64(d, _mm_load_si128(v + 3));
  }
  alignas(16) uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), _mm_add_epi64(_mm_add_epi64(a, b), _mm_add_epi64(c, d)));
  return lanes[0] + lanes[1];
#else
  uint64_t acc[8] = {};
  for (size_t i = 0; i < bytes; i += 64) {
    for (int k = 0; k < 8; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      acc[k] += w;
    }
  }
  uint64_t total = 0;
  for (uint64_t x : acc) total += x;
  return total;
#endif
}

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

const std::vector<std::string>& provenance_fields() {
  static const std::vector<std::string> fields = {"commit",        "dirty",        "cpu",
                                                  "cpu_flags",     "isa",          "threads",
                                                  "logical_cores", "build_type",   "nanoinfer_version",
                                                  "timestamp",     "command_line", "run"};
  return fields;
}

nlohmann::json bench_context(int threads, Isa isa, const std::string& command_line) {
  // The commit and the run id are the process's: read once.
  static const Commit commit = build_commit();
  static const std::string run = fmt::format("{}-{}", utc_timestamp(), ::getpid());
  nlohmann::json j;
  j["commit"] = commit.hash.empty() ? "unknown" : commit.hash;
  j["dirty"] = commit.hash.empty() ? nlohmann::json(nullptr) : nlohmann::json(commit.dirty);
  j["cpu"] = cpu_model_name();
  j["cpu_flags"] = cpu_flags();
  j["isa"] = std::string(isa_name(isa));
  j["threads"] = threads;
  j["logical_cores"] = ::sysconf(_SC_NPROCESSORS_ONLN);
  j["build_type"] = NANOINFER_BUILD_TYPE;
  j["nanoinfer_version"] = NANOINFER_VERSION;
  j["timestamp"] = utc_timestamp();
  j["command_line"] = command_line.empty() ? own_command_line() : command_line;
  j["run"] = run;
  return j;
}

void check_bench_results_path(const std::filesystem::path& file) {
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("{}: no such directory for the bench record (create it or pass --results FILE)", dir.string());
  if (::stat(file.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) fail("{}: not a regular file; cannot append the bench record", file.string());
    if (::access(file.c_str(), W_OK) != 0)
      fail("{}: cannot append the bench record: {}", file.string(), std::strerror(errno));
  } else if (::access(dir.c_str(), W_OK) != 0) {
    fail("{}: cannot create the bench record file: {}", file.string(), std::strerror(errno));
  }
}

void append_bench_record(const nlohmann::json& record, const std::filesystem::path& file) {
  check_bench_results_path(file);
  const std::string line = record.dump() + '\n';
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666);
  if (fd < 0) fail("{}: cannot open to append the bench record: {}", file.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // swapped for a FIFO or a device since the check
    ::close(fd);
    fail("{}: not a regular file; cannot append the bench record", file.string());
  }
  const off_t before = st.st_size;
  size_t done = 0;
  int err = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (err != 0) (void)!::ftruncate(fd, before);  // no half line left behind
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) fail("{}: cannot append the bench record: {}", file.string(), std::strerror(err));
}

size_t peak_rss_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::vector<double> measure_read_bandwidth(ThreadPool& pool, size_t bytes, int runs) {
  constexpr size_t kMiB = size_t{1} << 20;
  if (bytes < kMiB) fail("bandwidth probe: the buffer must be at least 1 MiB, got {} bytes", bytes);
  if (runs < 1) fail("bandwidth probe: runs must be >= 1, got {}", runs);
  const size_t blocks = bytes / kMiB;
  bytes = blocks * kMiB;
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t reserved = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  std::unique_ptr<std::byte, decltype(&std::free)> buffer(
      static_cast<std::byte*>(std::aligned_alloc(kHugePage, reserved)), &std::free);
  if (!buffer) fail("bandwidth probe: cannot allocate {} MiB", reserved / kMiB);
  ::madvise(buffer.get(), reserved, MADV_HUGEPAGE);  // advice only: fine if refused
  std::byte* data = buffer.get();
  // Written once (in parallel, so the page faults are spread too): a read of untouched
  // anonymous memory would read the shared zero page, not DRAM.
  pool.parallel_for(blocks, 1,
                    [&](size_t begin, size_t end) { std::memset(data + begin * kMiB, 0x5a, (end - begin) * kMiB); });

  std::atomic<uint64_t> sink{0};  // the sums go somewhere, so the reads cannot be dropped
  std::vector<double> gbps;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(blocks, 1, [&](size_t begin, size_t end) {
      sink.fetch_add(sum_words(data + begin * kMiB, (end - begin) * kMiB), std::memory_order_relaxed);
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    gbps.push_back(static_cast<double>(bytes) / seconds / 1e9);
  }
  // 0x5a in every byte: each pass sums bytes / 8 identical words.
  uint64_t word = 0;
  std::memset(&word, 0x5a, sizeof word);
  if (sink.load() != static_cast<uint64_t>(runs) * (bytes / 8) * word) fail("bandwidth probe: the read sums disagree");
  return gbps;
}

std::vector<nlohmann::json> records_from_stdin(int threads, Isa isa, const std::string& command_line) {
  std::vector<nlohmann::json> records;
  LineReader in("-");  // stdin, a line at a time, each line capped (file_io.h)
  for (std::string line; in.next(line);) {
    const size_t n = in.line_number();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    check_json_depth(line, fmt::format("bench record: stdin line {}", n));
    nlohmann::json r;
    std::string problem;
    if (!try_parse_json(line, r, problem) || !r.is_object()) {
      fail("bench record: stdin line {} is not a JSON object", n);
    }
    if (!r.contains("bench") || !r["bench"].is_string()) {
      fail("bench record: stdin line {} has no \"bench\" name (a string)", n);
    }
    for (const std::string& field : provenance_fields()) {
      if (r.contains(field)) {
        fail("bench record: stdin line {} sets \"{}\", a provenance field this command writes", n, field);
      }
    }
    nlohmann::json full = bench_context(threads, isa, command_line);
    full.update(r);
    records.push_back(std::move(full));
  }
  return records;
}

Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Summary s;
  const size_t n = v.size();
  s.median = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  for (double x : v) s.mean += x / static_cast<double>(n);
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = n > 1 ? std::sqrt(s.stddev / static_cast<double>(n - 1)) : 0.0;
  return s;
}

void put_rates(nlohmann::json& record, const std::string& side, const Summary& s, bool with_max) {
  const std::string prefix = side.empty() ? "" : side + "_";
  record[prefix + "median_ts"] = s.median;
  record[prefix + "min_ts"] = s.min;
  if (with_max) record[prefix + "max_ts"] = s.max;
}

}  // namespace nanoinfer::bench
