#include "bench_record.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "nanoinfer/error.h"

#ifndef NANOINFER_SOURCE_DIR_LIB
#define NANOINFER_SOURCE_DIR_LIB "."
#endif
#ifndef NANOINFER_BUILD_TYPE
#define NANOINFER_BUILD_TYPE "unknown"
#endif

namespace nanoinfer {

namespace {

// First line of a shell command's stdout, or "" if it fails.
std::string run_first_line(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::array<char, 256> buf{};
  std::string line;
  if (std::fgets(buf.data(), buf.size(), pipe) != nullptr) line = buf.data();
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) {
  }  // drain before closing
  const int status = ::pclose(pipe);
  if (status != 0) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

std::string git_commit_in(const std::string& dir) {
  const std::string git = "git -C '" + dir + "' ";
  const std::string commit = run_first_line(git + "rev-parse --short HEAD 2>/dev/null");
  if (commit.empty()) return "";
  const std::string dirty =
      run_first_line(git + "status --porcelain --untracked-files=no 2>/dev/null | head -1");
  return dirty.empty() ? commit : commit + "-dirty";
}

std::string git_commit() {
  std::string c = git_commit_in(NANOINFER_SOURCE_DIR_LIB);
  if (c.empty()) c = git_commit_in(".");
  return c.empty() ? "unknown" : c;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        const auto start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "unknown";
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

nlohmann::json bench_context(int threads) {
  return {{"cpu", cpu_model()},
          {"logical_cores", ::sysconf(_SC_NPROCESSORS_ONLN)},
          {"threads", threads},
          {"commit", git_commit()},
          {"build_type", NANOINFER_BUILD_TYPE},
          {"timestamp", utc_timestamp()},
          {"nanoinfer_version", NANOINFER_VERSION}};
}

void check_bench_results_path(const std::filesystem::path& file) {
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("{}: no such directory for the bench record (create it or pass -o FILE)",
         dir.string());
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
  const off_t before = ::fstat(fd, &st) == 0 ? st.st_size : -1;
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
  if (err != 0 && before >= 0) (void)!::ftruncate(fd, before);  // no half line left behind
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) fail("{}: cannot append the bench record: {}", file.string(), std::strerror(err));
}

size_t peak_rss_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
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

}  // namespace nanoinfer
