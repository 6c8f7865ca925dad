#include "io/safetensors_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "base/output_files.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

// Fill callbacks produce data in chunks of at most this many bytes, so memory stays flat no
// matter how large a tensor is.
constexpr size_t kChunkBytes = size_t{8} << 20;

// Owns the temporary file until it is renamed into place; removes it on any failure, and
// on SIGINT/SIGTERM/SIGHUP through the signal-time registry (a signal does not unwind).
class TempFile {
 public:
  explicit TempFile(const std::filesystem::path& final_path) : final_(final_path) {
    const auto dir =
        final_path.has_parent_path() ? final_path.parent_path() : std::filesystem::path(".");
    std::string tmpl = (dir / ("." + final_path.filename().string() + ".tmp.XXXXXX")).string();
    fd_ = ::mkstemp(tmpl.data());
    if (fd_ < 0)
      fail("{}: cannot create a temporary file in {}: {}", final_path.string(), dir.string(),
           std::strerror(errno));
    tmp_ = tmpl;
    try {
      on_signal_.emplace(tmp_);
    } catch (...) {
      ::close(fd_);
      ::unlink(tmp_.c_str());
      throw;
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
    on_signal_.reset();  // after the unlink: no moment without either
  }

  void write_all(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, std::min<size_t>(size, size_t{1} << 30));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("{}: write failed: {}", final_.string(), std::strerror(errno));
      p += n;
      size -= static_cast<size_t>(n);
    }
  }

  // mkstemp creates 0600; a model file is as readable as any other file the user writes.
  void commit() {
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

 private:
  std::filesystem::path final_;
  std::string tmp_;
  std::optional<RemoveOnSignal> on_signal_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

uint64_t SafetensorsWriter::check_new(const std::string& name, DType dtype,
                                      const std::vector<uint64_t>& shape) {
  if (name.empty() || name == "__metadata__")
    fail("{}: invalid tensor name '{}'", path_.string(), name);
  for (const auto& e : entries_)
    if (e.name == name) fail("{}: tensor '{}' added twice", path_.string(), name);
  uint64_t nbytes = dtype_size(dtype);
  for (uint64_t d : shape)
    if (__builtin_mul_overflow(nbytes, d, &nbytes))
      fail("{}: tensor '{}': shape overflows 64 bits", path_.string(), name);
  uint64_t total = 0;
  if (__builtin_add_overflow(data_bytes_, nbytes, &total))
    fail("{}: tensor '{}': the file's size overflows 64 bits", path_.string(), name);
  return nbytes;
}

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<uint64_t> shape,
                            std::span<const std::byte> data) {
  const uint64_t nbytes = check_new(name, dtype, shape);
  if (nbytes != data.size())
    fail("{}: tensor '{}': shape needs {} bytes, given {}", path_.string(), name, nbytes,
         data.size());
  entries_.push_back({std::move(name), dtype, std::move(shape), nbytes, data, {}});
  data_bytes_ += nbytes;
}

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<uint64_t> shape, Fill fill) {
  const uint64_t nbytes = check_new(name, dtype, shape);
  entries_.push_back({std::move(name), dtype, std::move(shape), nbytes, {}, std::move(fill)});
  data_bytes_ += nbytes;
}

void SafetensorsWriter::write(const Progress& progress) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto& e : entries_) {
    header[e.name] = {{"dtype", dtype_name(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.nbytes}}};
    offset += e.nbytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // data section 8-byte aligned

  // The whole size is known before the first byte: a file that cannot fit fails now, not
  // after filling the disk (a config with 2^24-wide layers asks for hundreds of TiB).
  require_free_space(path_, 8 + text.size() + data_bytes_, path_.string());
  TempFile out(path_);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(uint64_t{text.size()} >> (8 * i));
  out.write_all(len, sizeof len);
  out.write_all(text.data(), text.size());

  std::vector<std::byte> chunk;  // reused across tensors: [min(kChunkBytes, nbytes)]
  uint64_t done = 0;
  for (const auto& e : entries_) {
    if (!e.fill) {
      out.write_all(e.data.data(), e.data.size());
      done += e.nbytes;
      if (progress) progress(done, data_bytes_);
      continue;
    }
    const size_t elem = dtype_size(e.dtype);
    const size_t step = kChunkBytes / elem * elem;
    for (uint64_t pos = 0; pos < e.nbytes; pos += step) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(step, e.nbytes - pos));
      chunk.resize(n);
      e.fill(std::span(chunk.data(), n));
      out.write_all(chunk.data(), n);
      done += n;
      if (progress) progress(done, data_bytes_);
    }
  }
  out.commit();
}

}  // namespace nanoinfer
