// The read-only whole-file mapping shared by the safetensors and GGUF readers.
#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"

namespace nanoinfer {

MappedFile MappedFile::open(const std::filesystem::path& path) {
  // The type check comes before open(): opening a FIFO blocks until a writer appears.
  // O_NONBLOCK covers a FIFO swapped in after the check; fstat below then rejects it.
  require_regular_file(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("{}: cannot open: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("{}: cannot stat: {}", path.string(), std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path.string());
  }
  if (st.st_size == 0) {
    ::close(fd);
    fail("{}: file is empty", path.string());
  }
  const size_t size = static_cast<size_t>(st.st_size);
  // MAP_PRIVATE + PROT_READ: the mapping can never write back to the file, and a write into
  // it would fault instead of silently corrupting weights.
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  if (addr == MAP_FAILED) {
    ::close(fd);
    fail("{}: cannot mmap {} bytes: {}", path.string(), size, std::strerror(err));
  }
  MappedFile m;
  m.data_ = static_cast<const std::byte*>(addr);
  m.size_ = size;
  m.fd_ = fd;  // kept for read_at
  m.path_ = path;
  return m;
}

MappedFile MappedFile::borrow(std::span<const std::byte> bytes, const std::filesystem::path& name) {
  if (bytes.empty()) fail("{}: file is empty", name.string());
  MappedFile m;
  m.data_ = bytes.data();
  m.size_ = bytes.size();
  m.path_ = name;
  return m;
}

void MappedFile::read_at(uint64_t offset, std::span<std::byte> dst) const {
  if (offset > size_ || dst.size() > size_ - offset) {
    fail("{}: read of {} bytes at offset {} is past the end ({} bytes)", path_.string(), dst.size(), offset, size_);
  }
  if (fd_ < 0) {  // borrowed bytes: already in memory
    std::memcpy(dst.data(), data_ + offset, dst.size());
    return;
  }
  size_t done = 0;
  while (done < dst.size()) {
    const ssize_t n = ::pread(fd_, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fail("{}: read failed at offset {}: {}", path_.string(), offset + done,
           n < 0 ? std::strerror(errno) : "file shrank");
    }
    done += static_cast<size_t>(n);
  }
}

void MappedFile::release() noexcept {
  if (fd_ >= 0) {  // a mapping of our own; borrowed bytes are not ours to unmap
    ::munmap(const_cast<std::byte*>(data_), size_);
    ::close(fd_);
  }
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  release();
}

}  // namespace nanoinfer
