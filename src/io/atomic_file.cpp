#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "nanoinfer/atomic_write.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"

namespace nanoinfer {

AtomicFile::AtomicFile(const std::filesystem::path& final_path) : final_(final_path) {
  require_replaceable_file(final_path);
  const auto dir = final_path.has_parent_path() ? final_path.parent_path() : std::filesystem::path(".");
  remove_stale_temps(final_path);
  std::string tmpl = (dir / (temp_name_prefix(final_path) + "XXXXXX")).string();
  fd_ = ::mkstemp(tmpl.data());
  if (fd_ < 0)
    fail("{}: cannot create a temporary file in {}: {}", final_path.string(), dir.string(), std::strerror(errno));
  tmp_ = tmpl;
  try {
    on_signal_.emplace(tmp_);
  } catch (...) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
    throw;
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
  on_signal_.reset();  // after the unlink: no moment without either
}

void AtomicFile::write_all(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("{}: write failed: {}", final_.string(), std::strerror(errno));
    p += n;
    size -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
}

void AtomicFile::write_zeros(size_t size) {
  static constexpr char kZeros[256] = {};
  while (size > 0) {
    const size_t n = std::min(size, sizeof kZeros);
    write_all(kZeros, n);
    size -= n;
  }
}

// mkstemp creates 0600; a model file is as readable as any other file the user writes.
void AtomicFile::commit() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd_, 0666 & ~mask) != 0 || ::fsync(fd_) != 0)
    fail("{}: cannot finish writing: {}", final_.string(), std::strerror(errno));
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) fail("{}: close failed: {}", final_.string(), std::strerror(errno));
  if (::rename(tmp_.c_str(), final_.c_str()) != 0)
    fail("{}: cannot rename {} into place: {}", final_.string(), tmp_, std::strerror(errno));
  committed_ = true;
  on_signal_.reset();
}

}  // namespace nanoinfer
