// A read-only memory mapping of a whole regular file; model readers hand out zero-copy views
// into it. The same type can also stand for bytes that are already in memory (the default
// model built into the executable), so the readers over it need no second path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace nanoinfer {

// A read-only memory mapping of a whole file. Move-only; unmaps on destruction.
class MappedFile {
 public:
  static MappedFile open(const std::filesystem::path& path);  // throws Error
  // A view of bytes that outlive it (static data of the executable): nothing is mapped or
  // copied, read_at copies from memory, and `name` stands for the path in messages.
  static MappedFile borrow(std::span<const std::byte> bytes, const std::filesystem::path& name);
  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  // Copies bytes [offset, offset + dst.size()) of the file with pread, without touching the
  // mapping (so the copy's source pages never count towards this process's resident memory).
  void read_at(uint64_t offset, std::span<std::byte> dst) const;

 private:
  void release() noexcept;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;  // >= 0 exactly when this object mapped a file (and so unmaps it)
  std::filesystem::path path_;
};

}  // namespace nanoinfer
