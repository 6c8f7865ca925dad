// Writes safetensors files atomically: everything goes to a temporary file in the target
// directory, which is fsync'ed and renamed into place, so an interrupted run never leaves a
// half-written file under the final name.
//
// Tensors are laid out contiguously in the order they were added (no holes, as the format
// requires); the header is space-padded so the data section starts 8-byte aligned. Data comes
// either from a caller-owned span or from a fill callback that produces the bytes in chunks,
// so a 1 GB model is written without ever holding it in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "nanoinfer/dtype.h"

namespace nanoinfer {

class SafetensorsWriter {
 public:
  // Called with consecutive chunks that together cover the tensor's bytes, in order; each
  // chunk is a whole number of elements. The callback must fill every byte.
  using Fill = std::function<void(std::span<std::byte> chunk)>;
  // Called after each chunk is written: bytes of tensor data written so far, and the total.
  using Progress = std::function<void(uint64_t done, uint64_t total)>;

  explicit SafetensorsWriter(std::filesystem::path path) : path_(std::move(path)) {}

  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

  // `data` is not copied: it must stay valid until write(). Its size must be numel x dtype size.
  void add(std::string name, DType dtype, std::vector<uint64_t> shape, std::span<const std::byte> data);
  void add(std::string name, DType dtype, std::vector<uint64_t> shape, Fill fill);

  uint64_t data_bytes() const { return data_bytes_; }  // sum of all tensors' bytes so far

  // Writes the file (temp + fsync + rename). Throws nanoinfer::Error naming the path on any
  // I/O failure, after removing the temporary file.
  void write(const Progress& progress = {}) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<uint64_t> shape;
    uint64_t nbytes;
    std::span<const std::byte> data;  // either data ...
    Fill fill;                        // ... or fill
  };
  uint64_t check_new(const std::string& name, DType dtype, const std::vector<uint64_t>& shape);

  std::filesystem::path path_;
  std::map<std::string, std::string> metadata_;
  std::vector<Entry> entries_;
  uint64_t data_bytes_ = 0;
};

}  // namespace nanoinfer
