// The whole-file writes of nanoinfer/atomic_write.h, on the temporary file of io/atomic_file.h.
#include "nanoinfer/atomic_write.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "io/atomic_file.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"

namespace nanoinfer {

// The rename at the end of a write replaces whatever is at the target: only a regular file
// (or nothing) may be, never a link, a device or a FIFO someone pointed the output at.
void require_replaceable_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      fail("{}: is {}; refusing to replace it (name a regular file)", path.string(), file_kind_name(st.st_mode));
    }
  } else if (errno != ENOENT) {
    fail("{}: cannot check the target: {}", path.string(), std::strerror(errno));
  }
}

void write_file_atomically(const std::filesystem::path& path, std::string_view data) {
  AtomicFile file(path);
  file.write_all(data.data(), data.size());
  file.commit();
}

namespace {
constexpr size_t kWriterChunk = size_t{1} << 20;
}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::filesystem::path& path) : file_(std::make_unique<AtomicFile>(path)) {}

AtomicFileWriter::~AtomicFileWriter() = default;

void AtomicFileWriter::write(std::string_view data) {
  buffer_ += data;
  if (buffer_.size() >= kWriterChunk) flush();
}

void AtomicFileWriter::flush() {
  file_->write_all(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void AtomicFileWriter::commit() {
  flush();
  file_->commit();
}

}  // namespace nanoinfer
