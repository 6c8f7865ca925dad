#include "nanoinfer/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/output_files.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

void require_regular(const std::filesystem::path& path, mode_t mode) {
  if (S_ISREG(mode)) return;
  if (S_ISDIR(mode)) fail("{}: is a directory, not a file", path.string());
  fail("{}: is {}, not a regular file", path.string(), file_kind_name(mode));
}

struct stat stat_or_fail(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) fail("{}: not found", path.string());
    fail("{}: cannot stat: {}", path.string(), std::strerror(errno));
  }
  return st;
}

[[noreturn]] void too_large(std::string_view name, uint64_t size, uint64_t max_bytes) {
  fail("{}: too large to read into memory ({} bytes; the limit is {} bytes)", name, size, max_bytes);
}

// read() that retries on EINTR; returns bytes read (0 at end) or throws naming `name`.
size_t read_some(int fd, char* data, size_t size, std::string_view name) {
  for (;;) {
    const ssize_t n = ::read(fd, data, size);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) fail("{}: read failed: {}", name, std::strerror(errno));
  }
}

// Opens a path already checked to be a regular file: O_NONBLOCK so that a FIFO put in its
// place since the check cannot block open(), then the same check on what was opened.
int open_regular(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("{}: cannot open: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: changed while being opened (no longer a regular file)", path.string());
  }
  return fd;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

void require_regular_file(const std::filesystem::path& path) {
  require_regular(path, stat_or_fail(path).st_mode);
}

bool path_exists(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  fail("{}: cannot stat: {}", path.string(), std::strerror(errno));
}

std::string read_file(const std::filesystem::path& path, uint64_t max_bytes) {
  const struct stat st = stat_or_fail(path);
  require_regular(path, st.st_mode);
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    too_large(path.string(), static_cast<uint64_t>(st.st_size), max_bytes);
  const Fd fd(open_regular(path));
  // The size from stat is a hint (the file may change, /proc files report 0): read to the end
  // and enforce the cap on what actually arrives.
  return read_all(fd.get(), path.string(), max_bytes);
}

std::string read_file_head(const std::filesystem::path& path, uint64_t max_bytes) {
  require_regular(path, stat_or_fail(path).st_mode);
  const Fd fd(open_regular(path));
  std::string out(static_cast<size_t>(std::min<uint64_t>(max_bytes, 1 << 20)), '\0');
  size_t used = 0;
  while (used < max_bytes) {
    if (used == out.size()) out.resize(static_cast<size_t>(std::min<uint64_t>(max_bytes, out.size() * 2)));
    const size_t n = read_some(fd.get(), out.data() + used, out.size() - used, path.string());
    if (n == 0) break;
    used += n;
  }
  out.resize(used);
  return out;
}

std::string read_all(int fd, std::string_view name, uint64_t max_bytes) {
  std::string out;
  size_t used = 0;
  for (;;) {
    if (out.size() - used < 4096) {
      const uint64_t want = std::max<uint64_t>(out.size() * 2, 64 << 10);
      out.resize(static_cast<size_t>(std::min<uint64_t>(want, max_bytes + 1)));
    }
    const size_t n = read_some(fd, out.data() + used, out.size() - used, name);
    if (n == 0) break;
    used += n;
    if (used > max_bytes) too_large(name, used, max_bytes);
  }
  out.resize(used);
  return out;
}

// ---- LineReader ---------------------------------------------------------------------------

LineReader::LineReader(const std::string& path, size_t max_line_bytes)
    : path_(path == "-" ? "<stdin>" : path), max_line_bytes_(max_line_bytes) {
  if (path == "-") {
    fd_ = STDIN_FILENO;
    return;
  }
  require_regular_file(path);
  fd_ = open_regular(path);
  owns_fd_ = true;
}

LineReader::~LineReader() {
  if (owns_fd_) ::close(fd_);
}

bool LineReader::fill() {
  if (eof_) return false;
  if (pos_ > 0) {  // drop what was consumed
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  const size_t used = buffer_.size();
  buffer_.resize(used + (size_t{1} << 16));
  const size_t n = read_some(fd_, buffer_.data() + used, buffer_.size() - used, path_);
  buffer_.resize(used + n);
  if (n == 0) eof_ = true;
  return n > 0;
}

bool LineReader::next(std::string& line) {
  size_t checked = 0;  // bytes from pos_ on known to hold no '\n'
  for (;;) {
    const size_t newline = buffer_.find('\n', pos_ + checked);
    if (newline != std::string::npos) {
      if (newline - pos_ > max_line_bytes_) break;
      line.assign(buffer_, pos_, newline - pos_);
      pos_ = newline + 1;
      ++line_number_;
      return true;
    }
    checked = buffer_.size() - pos_;
    if (checked > max_line_bytes_) break;
    if (!fill()) {  // fill() moves the unread bytes to the front: checked stays valid
      if (pos_ == buffer_.size()) return false;
      line.assign(buffer_, pos_, std::string::npos);
      pos_ = buffer_.size();
      ++line_number_;
      return true;
    }
  }
  fail("{} line {}: longer than the {} byte limit for one line", path_, line_number_ + 1, max_line_bytes_);
}

const char* file_kind_name(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// ---- ScratchDir ---------------------------------------------------------------------------------

std::string temp_name_prefix(const std::filesystem::path& target) {
  return "." + target.filename().string() + ".tmp." + std::to_string(::getpid()) + ".";
}

void remove_stale_temps(const std::filesystem::path& target) {
  const std::filesystem::path parent = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  const std::string stem = "." + target.filename().string() + ".tmp.";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(stem)) continue;
    // PID digits, a dot, then the six characters mkstemp/mkdtemp chose.
    const std::string_view rest = std::string_view(name).substr(stem.size());
    const size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string_view::npos || dot > 9 || rest.size() != dot + 7) continue;
    if (rest.substr(0, dot).find_first_not_of("0123456789") != std::string_view::npos) continue;
    const long pid = std::stol(std::string(rest.substr(0, dot)));
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    std::error_code ignored;
    std::filesystem::remove_all(it->path(), ignored);
  }
}

ScratchDir::ScratchDir(const std::filesystem::path& parent, std::string_view prefix) {
  std::string tmpl = (parent / (std::string(prefix) + ".XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    fail("cannot create a directory in {}: {}", parent.string(), std::strerror(errno));
  }
  path_ = tmpl;
  try {
    on_signal_ = std::make_unique<RemoveOnSignal>(path_, RemoveOnSignal::Kind::Directory);
  } catch (...) {
    ::rmdir(path_.c_str());
    throw;
  }
}

ScratchDir ScratchDir::beside(const std::filesystem::path& target) {
  const std::filesystem::path parent = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  remove_stale_temps(target);
  std::string prefix = temp_name_prefix(target);
  prefix.pop_back();  // ScratchDir adds the dot before XXXXXX
  try {
    return ScratchDir(parent, prefix);
  } catch (const Error& e) {
    fail("{}: {}", target.string(), e.what());
  }
}

ScratchDir::~ScratchDir() {
  if (committed_) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  on_signal_.reset();  // after the removal: no moment without either
}

void ScratchDir::commit(const std::filesystem::path& target) {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::chmod(path_.c_str(), 0777 & ~mask) != 0 || ::rename(path_.c_str(), target.c_str()) != 0) {
    fail("{}: cannot move {} into place: {}", target.string(), path_.string(), std::strerror(errno));
  }
  committed_ = true;
  on_signal_.reset();
}

}  // namespace nanoinfer
